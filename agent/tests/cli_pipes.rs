//! Output cut short by its reader (`lcmp-agent paths | head -1`): the
//! program ends quietly with status 141 (128 + SIGPIPE, what a shell
//! reports for coreutils in the same place), never with a panic. Each run
//! prints far more than a pipe holds (64 KiB), so the program is still
//! writing when the read end closes after the first line.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lcmp_control::proto::PortsReply;
use lcmp_control::server::{serve, Inbox};
use lcmp_control::snapshot::PortSnapshot;
use lcmp_control::{Body, ErrorKind, ErrorReply, Reply, Request};

/// Runs `cmd`, reads its first stdout line, closes the pipe, and returns
/// that line, the exit code and stderr.
fn first_line_then_close(mut cmd: Command) -> (String, Option<i32>, String) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let mut reader = BufReader::new(child.stdout.take().expect("piped"));
    let mut line = String::new();
    reader.read_line(&mut line).expect("a first line");
    drop(reader);
    let out = child.wait_with_output().expect("it ends");
    (
        line,
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn agent(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_lcmp-agent"));
    c.args(args);
    c
}

#[test]
fn paths_into_a_closed_pipe_end_quietly() {
    // GEANT: 34 switches, about 250 KB of report.
    let topo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies/geant2009.toml");
    let (line, code, err) = first_line_then_close(agent(&["paths", "-t", topo.to_str().unwrap()]));
    assert!(!line.is_empty());
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!((code, err.as_str()), (Some(141), ""));
}

#[test]
fn rotor_plan_into_a_closed_pipe_ends_quietly() {
    // 65535 rows of about 60 bytes.
    let (line, code, err) = first_line_then_close(agent(&[
        "rotor-plan",
        "--tors",
        "65536",
        "--uplinks",
        "1",
        "--slot",
        "100us",
        "--rate",
        "100Gbps",
        "--buffer",
        "1TB",
        "--max-delay",
        "10s",
    ]));
    assert!(line.starts_with("65536 ToRs x 1 uplinks"), "{line}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!((code, err.as_str()), (Some(141), ""));
}

/// A switch `dc1` with 3000 ports, answering `ports` and nothing else.
struct FakeSwitch {
    dir: PathBuf,
    socket: PathBuf,
    stop: Arc<AtomicBool>,
}

impl FakeSwitch {
    fn start() -> FakeSwitch {
        let dir = std::env::temp_dir().join(format!("lcmp-pipe-ctl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let socket = dir.join("dc1.sock");
        let inbox = Inbox::new().expect("eventfd");
        serve(&socket, &inbox).expect("bind the fake switch's socket");
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        std::thread::spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                match inbox.take() {
                    Some(pending) => {
                        let body = match pending.request {
                            Request::Ports => Body::Ok(Box::new(Reply::Ports(PortsReply {
                                switch: "dc1".into(),
                                ports: (0..3000)
                                    .map(|i| PortSnapshot {
                                        index: i,
                                        name: format!("eth{i}"),
                                        up: true,
                                        link_up: true,
                                        admin_up: true,
                                        ..PortSnapshot::default()
                                    })
                                    .collect(),
                            }))),
                            _ => Body::Error(ErrorReply::new(ErrorKind::Invalid, "ports only")),
                        };
                        pending.answer(body);
                    }
                    None => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        FakeSwitch { dir, socket, stop }
    }
}

impl Drop for FakeSwitch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn ctl_into_a_closed_pipe_ends_quietly() {
    let sw = FakeSwitch::start();
    let mut c = Command::new(env!("CARGO_BIN_EXE_lcmp-ctl"));
    c.arg("--socket")
        .arg(&sw.socket)
        .args(["--timeout-ms", "5000", "ports"]);
    let (line, code, err) = first_line_then_close(c);
    assert!(!line.is_empty());
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!((code, err.as_str()), (Some(141), ""));
}

//! The real binary: server and client on 127.0.0.1, bad input, misbehaving
//! peers. Nothing here waits a fixed time: readiness is the server's
//! `listening` line, completion is the client's exit.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Output, Stdio};
use std::time::Duration;

use lcmp_traffic::protocol::{Header, ACK, HEADER_LEN};
use lcmp_traffic::record::{FlowRecord, FlowStatus};

const BIN: &str = env!("CARGO_BIN_EXE_lcmp-traffic");

/// A scratch directory per test.
fn scratch(test: &str) -> PathBuf {
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cli-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Small flows (up to 200 KB) so that a debug build on a loaded machine
/// keeps up easily.
fn small_workload(dir: &Path) -> PathBuf {
    let path = dir.join("small.txt");
    std::fs::write(&path, "0 0\n1000 30\n10000 70\n50000 90\n200000 100\n").unwrap();
    path
}

struct Server {
    child: Child,
    addrs: Vec<SocketAddr>,
    // Held so that the server's stdout stays open.
    _stdout: BufReader<ChildStdout>,
}

impl Server {
    fn start(listen: &[&str]) -> Server {
        let mut cmd = Command::new(BIN);
        cmd.arg("server");
        for l in listen {
            cmd.args(["--listen", l]);
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut addrs = Vec::new();
        for _ in listen {
            let mut line = String::new();
            stdout.read_line(&mut line).unwrap();
            let Some(addr) = line.trim().strip_prefix("listening ") else {
                let mut err = String::new();
                let _ = child.stderr.take().unwrap().read_to_string(&mut err);
                panic!("server did not start: stdout {line:?}, stderr {err:?}");
            };
            addrs.push(addr.parse().unwrap());
        }
        Server {
            child,
            addrs,
            _stdout: stdout,
        }
    }

    /// SIGTERM; returns the exit status and stderr.
    fn stop(mut self) -> (std::process::ExitStatus, String) {
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: kill(2) with a pid we spawned and still own (not waited).
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        let status = self.child.wait().unwrap();
        let mut err = String::new();
        let _ = self.child.stderr.take().unwrap().read_to_string(&mut err);
        (status, err)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn client(args: &[&str]) -> Output {
    Command::new(BIN).arg("client").args(args).output().unwrap()
}

fn read_csv(path: &Path) -> (String, Vec<FlowRecord>) {
    let text = std::fs::read_to_string(path).unwrap();
    let header = text.lines().next().unwrap_or_default().to_string();
    let records = csv::Reader::from_reader(text.as_bytes())
        .deserialize()
        .collect::<Result<Vec<FlowRecord>, _>>()
        .unwrap();
    (header, records)
}

/// The header serde derives from FlowRecord's fields.
fn expected_header() -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.serialize(FlowRecord {
        id: 0,
        sender: String::new(),
        receiver: String::new(),
        src: String::new(),
        dst: String::new(),
        size_bytes: 0,
        start_ns: 0,
        fct_ns: None,
        min_rtt_us: None,
        status: FlowStatus::Ok,
        error: String::new(),
        warmup: false,
        path: None,
    })
    .unwrap();
    let bytes = w.into_inner().unwrap();
    String::from_utf8(bytes)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_string()
}

#[test]
fn flows_complete_end_to_end() {
    let dir = scratch("e2e");
    let workload = small_workload(&dir);
    let out = dir.join("flows.csv");
    let server = Server::start(&["127.0.0.1:0", "127.0.0.1:0"]);
    let dst_a = format!("ha={}", server.addrs[0]);
    let dst_b = format!("hb={}", server.addrs[1]);
    let result = client(&[
        "--name",
        "h1",
        "--dst",
        &dst_a,
        "--dst",
        &dst_b,
        "--workload",
        workload.to_str().unwrap(),
        "--flows-per-s",
        "40",
        "--duration",
        "2",
        "--warmup",
        "0.5",
        "--drain",
        "120",
        "--seed",
        "7",
        "--id-base",
        "5000",
        "--cc",
        "reno",
        "--progress-ms",
        "200",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&result.stdout);
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(result.status.success(), "{stdout}\n{stderr}");

    let (header, records) = read_csv(&out);
    assert_eq!(header, expected_header());
    assert_eq!(
        header,
        "id,sender,receiver,src,dst,size_bytes,start_ns,fct_ns,min_rtt_us,status,error,warmup,path"
    );
    assert!(!records.is_empty());
    let mut ids = HashSet::new();
    let mut receivers = HashSet::new();
    for r in &records {
        assert_eq!(r.status, FlowStatus::Ok, "{r:?}");
        assert!(r.fct_ns.is_some_and(|f| f > 0), "{r:?}");
        assert!(r.min_rtt_us.is_some(), "{r:?}");
        assert!(r.error.is_empty(), "{r:?}");
        assert!(ids.insert(r.id), "duplicate id {}", r.id);
        assert!(r.id >= 5000 && r.id < 5000 + records.len() as u64);
        assert!((1..=200_000).contains(&r.size_bytes), "{r:?}");
        assert!(r.start_ns < 2_000_000_000, "{r:?}");
        assert_eq!(r.warmup, r.start_ns < 500_000_000, "{r:?}");
        assert_eq!(r.sender, "h1");
        assert!(r.src.starts_with("127.0.0.1:"), "{r:?}");
        let expected_dst = if r.receiver == "ha" {
            server.addrs[0]
        } else {
            server.addrs[1]
        };
        assert_eq!(r.dst, expected_dst.to_string());
        receivers.insert(r.receiver.clone());
    }
    assert!(records.windows(2).all(|w| w[0].start_ns <= w[1].start_ns));
    // About 80 flows from a fixed seed: both receivers and the warm-up occur.
    assert_eq!(receivers.len(), 2);
    assert!(records.iter().any(|r| r.warmup));

    // Progress lines, then the final line with the totals.
    let lines: Vec<&str> = stdout.lines().collect();
    let (last, progress) = lines.split_last().unwrap();
    for l in progress {
        assert!(
            l.starts_with("{\"t_s\":") && l.contains("\"deferred\":"),
            "{l}"
        );
    }
    assert!(last.starts_with("{\"done\":true,"), "{last}");
    let total = format!(
        "\"started\":{},\"completed\":{},\"failed\":0,\"unfinished\":0",
        records.len(),
        records.len()
    );
    assert!(last.contains(&total), "{last}");

    let (status, err) = server.stop();
    assert!(status.success(), "{err}");
    assert!(
        err.contains(&format!("served {} flows", records.len())),
        "{err}"
    );
}

#[test]
fn bad_input_exits_2_with_one_line() {
    let dir = scratch("bad");
    let out = dir.join("never.csv");
    let out_s = out.to_str().unwrap().to_string();
    let bad_cdf = dir.join("bad.txt");
    std::fs::write(&bad_cdf, "0 0\n100 50\n90 100\n").unwrap();
    let base = |extra: &[&str], skip: &[&str]| -> Vec<String> {
        let mut args: Vec<(&str, &str)> = vec![
            ("--name", "h1"),
            ("--dst", "h2=127.0.0.1:9"),
            ("--workload", "websearch"),
            ("--rate-bps", "1G"),
            ("--duration", "1"),
            ("--out", &out_s),
        ];
        args.retain(|(flag, _)| !skip.contains(flag));
        let mut v: Vec<String> = args
            .into_iter()
            .flat_map(|(a, b)| [a.to_string(), b.to_string()])
            .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let cases: Vec<(Vec<String>, &str)> = vec![
        (base(&["--rate-bps", "0"], &["--rate-bps"]), "--rate-bps"),
        (base(&["--rate-bps", "-3G"], &["--rate-bps"]), "--rate-bps"),
        (
            base(&["--flows-per-s", "0"], &["--rate-bps"]),
            "--flows-per-s",
        ),
        (base(&["--duration", "0"], &["--duration"]), "--duration"),
        (base(&["--duration", "-1"], &["--duration"]), "--duration"),
        (base(&[], &["--dst"]), "--dst"),
        (base(&["--dst", "nonsense"], &["--dst"]), "--dst"),
        (
            base(&["--workload", "/nonexistent/cdf.txt"], &["--workload"]),
            "/nonexistent/cdf.txt",
        ),
        (
            base(&["--workload", bad_cdf.to_str().unwrap()], &["--workload"]),
            "bad.txt:3:",
        ),
        (base(&["--cc", "no-such-cc"], &[]), "available"),
        (base(&[], &["--rate-bps"]), "--rate-bps"),
        (base(&["--flows-per-s", "5"], &[]), "cannot be used"),
        (base(&["--warmup", "1"], &[]), "--warmup"),
    ];
    for (args, needle) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let r = client(&args);
        let stderr = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(r.stdout.is_empty(), "{args:?} started something");
        assert!(!out.exists(), "{args:?} created the output");
    }
    let args = base(&["--out", "/nonexistent-dir/flows.csv"], &["--out"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = client(&args);
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--out"), "{stderr}");
}

#[test]
fn unreachable_receivers_give_failed_and_unfinished_rows() {
    let dir = scratch("unreachable");
    let out = dir.join("flows.csv");
    // Connections complete in the kernel's backlog but are never accepted,
    // so no flow can be acknowledged.
    let black_hole = TcpListener::bind("127.0.0.1:0").unwrap();
    // A port nobody listens on any more.
    let refused = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let r = client(&[
        "--name",
        "h1",
        "--dst",
        &format!("hole={}", black_hole.local_addr().unwrap()),
        "--dst",
        &format!("gone={refused}"),
        "--workload",
        "alistorage",
        "--flows-per-s",
        "30",
        "--duration",
        "0.5",
        "--drain",
        "0.2",
        "--max-concurrent",
        "4",
        "--progress-ms",
        "0",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&r.stdout);
    assert!(
        r.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    let (_, records) = read_csv(&out);
    assert!(!records.is_empty());
    for r in &records {
        assert_eq!(r.fct_ns, None, "{r:?}");
        match r.status {
            FlowStatus::Failed => {
                assert_eq!(r.receiver, "gone");
                assert!(
                    r.error.contains("connect:") && r.error.contains("refused"),
                    "{r:?}"
                );
            }
            FlowStatus::Unfinished => assert!(r.error.is_empty(), "{r:?}"),
            FlowStatus::Ok => panic!("{r:?}"),
        }
        if r.receiver == "hole" {
            assert_eq!(r.status, FlowStatus::Unfinished, "{r:?}");
        }
    }
    assert!(records.iter().any(|r| r.receiver == "hole"));
    assert!(stdout.contains("\"unfinished\":"), "{stdout}");
}

#[test]
fn server_survives_misbehaving_clients() {
    let server = Server::start(&["127.0.0.1:0"]);
    let addr = server.addrs[0];
    let timeout = Some(Duration::from_secs(60));

    // Announces 2 TiB: the server closes without an ack.
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(timeout).unwrap();
    s.write_all(
        &Header {
            flow_id: 1,
            size: 2 << 40,
        }
        .encode(),
    )
    .unwrap();
    let mut buf = [0u8; 1];
    assert!(matches!(s.read(&mut buf), Ok(0) | Err(_)));

    // Vanishes after half a header, and after half a payload.
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(&[0u8; HEADER_LEN / 2]).unwrap();
    drop(s);
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(
        &Header {
            flow_id: 2,
            size: 1000,
        }
        .encode(),
    )
    .unwrap();
    s.write_all(&[0u8; 10]).unwrap();
    drop(s);

    // A proper flow still works.
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(timeout).unwrap();
    s.write_all(
        &Header {
            flow_id: 3,
            size: 100_000,
        }
        .encode(),
    )
    .unwrap();
    s.write_all(&vec![0u8; 100_000]).unwrap();
    s.read_exact(&mut buf).unwrap();
    assert_eq!(buf[0], ACK);
    drop(s);

    let (status, err) = server.stop();
    assert!(status.success(), "{err}");
    assert!(err.contains("exceeds"), "{err}");
}

#[test]
fn workloads_and_help() {
    let out = Command::new(BIN).arg("workloads").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for name in ["websearch", "alistorage", "fbhadoop", "googlerpc"] {
        assert!(text.contains(name), "{text}");
    }
    assert!(text.contains("1711250"), "{text}");

    let help = Command::new(BIN)
        .args(["client", "--help"])
        .output()
        .unwrap();
    assert!(help.status.success());
    let help = String::from_utf8_lossy(&help.stdout);
    for needle in [
        "--rate-bps",
        "--max-concurrent",
        "FCT",
        "16-byte header",
        "connect()",
    ] {
        assert!(help.contains(needle), "{needle}: {help}");
    }
}

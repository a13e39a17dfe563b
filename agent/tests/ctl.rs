//! `lcmp-ctl` end to end against a fake switch: the real control server
//! (`lcmp_control::server::serve`) on a socket in a temporary directory,
//! with a thread answering from its inbox with canned replies, and the
//! built binary run with `--socket`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use lcmp_control::proto::{
    Applied, CandidateCost, CaptureReply, CapturedFrame, CostsReply, PortsReply,
};
use lcmp_control::server::{serve, Inbox};
use lcmp_control::snapshot::{Emulation, EmulationMode, PolicyState, PortSnapshot};
use lcmp_control::{Body, ErrorKind, ErrorReply, Reply, Request, Snapshot};

/// A switch named `dc1` that answers from a script and records what it was
/// asked.
struct FakeSwitch {
    dir: PathBuf,
    socket: PathBuf,
    seen: Arc<Mutex<Vec<Request>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl FakeSwitch {
    fn start(tag: &str) -> FakeSwitch {
        let dir = temp_dir(tag);
        let socket = dir.join("dc1.sock");
        let inbox = Inbox::new().expect("eventfd");
        serve(&socket, &inbox).expect("bind the fake switch's socket");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (seen2, stop2) = (seen.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                match inbox.take() {
                    Some(pending) => {
                        seen2.lock().unwrap().push(pending.request.clone());
                        let body = answer(&pending.request);
                        pending.answer(body);
                    }
                    None => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        FakeSwitch {
            dir,
            socket,
            seen,
            stop,
            thread: Some(thread),
        }
    }

    fn seen(&self) -> Vec<Request> {
        self.seen.lock().unwrap().clone()
    }

    /// Runs `lcmp-ctl --socket <this switch> args...`.
    fn ctl(&self, args: &[&str]) -> Output {
        ctl_on(&self.socket, args)
    }
}

impl Drop for FakeSwitch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn temp_dir(tag: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let dir =
        std::env::temp_dir().join(format!("lcmp-ctl-it-{}-{tag}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn ctl_on(socket: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lcmp-ctl"))
        .arg("--socket")
        .arg(socket)
        .args(["--timeout-ms", "3000"])
        .args(args)
        .output()
        .expect("run lcmp-ctl")
}

fn text(b: &[u8]) -> String {
    String::from_utf8(b.to_vec()).unwrap()
}

fn ok(body: Reply) -> Body {
    Body::Ok(Box::new(body))
}

fn frame(time_unix_ns: u64, outbound: bool, orig_len: u32, hex: &str) -> CapturedFrame {
    CapturedFrame {
        time_unix_ns,
        outbound,
        orig_len,
        data: hex.into(),
    }
}

fn answer(request: &Request) -> Body {
    match request {
        Request::Status => ok(Reply::Status(Box::new(Snapshot {
            switch: "dc1".into(),
            pid: 4242,
            uptime_ms: 3_723_000,
            policy: PolicyState {
                name: "lcmp".into(),
                alpha: Some(3),
                beta: Some(1),
                congestion_weights: Some([2, 1, 1]),
                ecn: None,
                ecn_link_time: None,
                ecn_mark_at: Default::default(),
            },
            counters: BTreeMap::from([
                ("rx_frames".to_string(), 1000),
                ("tx_frames".to_string(), 998),
            ]),
            drops_total: 2,
            table_generation: 4,
            ..Snapshot::default()
        }))),
        Request::Ports => ok(Reply::Ports(PortsReply {
            switch: "dc1".into(),
            ports: vec![PortSnapshot {
                index: 0,
                name: "eth0".into(),
                up: true,
                link_up: true,
                admin_up: true,
                emulation: Emulation {
                    mode: EmulationMode::Netem,
                    rate_bps: 100_000_000,
                    delay_ns: 10_000_000,
                    buffer_bytes: 1 << 20,
                },
                ..PortSnapshot::default()
            }],
        })),
        Request::Costs { dst } => ok(Reply::Costs(CostsReply {
            switch: "dc1".into(),
            dst: dst.clone(),
            prefix: "10.0.2.0/24".into(),
            policy: "lcmp".into(),
            alpha: 3,
            beta: 1,
            candidates: [(0, 18, true), (1, 38, false)]
                .into_iter()
                .map(|(port, c_path, kept)| CandidateCost {
                    port,
                    ifname: format!("eth{port}"),
                    up: true,
                    c_path,
                    capacity_bps: 200_000_000_000,
                    q: 0,
                    t: 0,
                    d: 0,
                    c_cong: 0,
                    cost: 3 * c_path as u64,
                    kept,
                    queue_bytes: 0,
                })
                .collect(),
        })),
        Request::SetPolicy { policy } => ok(Reply::Applied(Applied {
            message: format!("policy lcmp -> {policy}"),
            changed: true,
            flows_to_move: 0,
        })),
        // A capture of two fetches: two frames with the start, one with the
        // fetch that ends it (count reached), none with the stop.
        Request::CaptureStart { port, .. } if port == "p0" => ok(Reply::Capture(CaptureReply {
            port: "p0".into(),
            snaplen: 64,
            frames: vec![
                frame(
                    1_700_000_000_000_000_123,
                    false,
                    70,
                    "02000000000a02000000000108004500",
                ),
                frame(1_700_000_000_000_500_000, true, 16, "020000000001"),
            ],
            captured: 2,
            dropped: 0,
            done: false,
        })),
        // Not a capture reply, and 10 kB of it.
        Request::CaptureStart { port, .. } if port == "wrong" => ok(Reply::Applied(Applied {
            message: format!("\x1b[2J{}", "z".repeat(10_000)),
            changed: false,
            flows_to_move: 0,
        })),
        Request::CaptureStart { port, .. } => Body::Error(ErrorReply::new(
            ErrorKind::UnknownPort,
            format!("no port {port:?}"),
        )),
        Request::CaptureFetch => ok(Reply::Capture(CaptureReply {
            port: "p0".into(),
            snaplen: 64,
            frames: vec![frame(1_700_000_001_000_000_000, false, 4, "deadbeef")],
            captured: 3,
            dropped: 1,
            done: true,
        })),
        Request::CaptureStop => ok(Reply::Capture(CaptureReply {
            port: "p0".into(),
            snaplen: 64,
            captured: 3,
            dropped: 1,
            done: true,
            ..Default::default()
        })),
        // A refusal as a broken switch might send it: a terminal escape
        // and 10 kB of text.
        Request::SetAdmin { port, .. } if port == "hostile" => Body::Error(ErrorReply::new(
            ErrorKind::Invalid,
            format!("\x1b[2J{}", "z".repeat(10_000)),
        )),
        Request::SetAdmin { port, .. } => Body::Error(ErrorReply::new(
            ErrorKind::UnknownPort,
            format!("no port {port:?} on dc1"),
        )),
        other => Body::Error(ErrorReply::new(
            ErrorKind::Invalid,
            format!("the fake switch has no answer to {}", other.verb()),
        )),
    }
}

#[test]
fn status_is_one_line_for_the_switch() {
    let sw = FakeSwitch::start("status");
    let out = sw.ctl(&["status"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(lines[0].starts_with("SWITCH"), "{stdout}");
    let fields: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        fields,
        [
            "dc1", "4242", "1h02m03s", "lcmp", "alpha=3", "beta=1", "off", "1000", "998", "2", "0",
            "4"
        ]
    );
    assert_eq!(sw.seen(), [Request::Status]);
}

#[test]
fn costs_show_every_candidate_and_the_kept_set() {
    let sw = FakeSwitch::start("costs");
    let out = sw.ctl(&["costs", "10.0.2.0/24"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with("switch dc1: 10.0.2.0/24 matches route 10.0.2.0/24; policy lcmp"),
        "{stdout}"
    );
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .filter(|l| l.contains("eth"))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 2, "{stdout}");
    assert_eq!(rows[0][..4], ["*", "0", "eth0", "up"]);
    assert_eq!(rows[1][..3], ["1", "eth1", "up"]);
    assert_eq!(
        sw.seen(),
        [Request::Costs {
            dst: "10.0.2.0/24".into()
        }]
    );
}

#[test]
fn policy_change_reports_what_the_switch_did() {
    let sw = FakeSwitch::start("policy");
    let out = sw.ctl(&["policy", "ecmp"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "dc1: policy lcmp -> ecmp\n");
    assert_eq!(
        sw.seen(),
        [Request::SetPolicy {
            policy: "ecmp".into()
        }]
    );
}

#[test]
fn json_ports_is_one_array_of_switch_replies() {
    let sw = FakeSwitch::start("json");
    let out = sw.ctl(&["--json", "ports"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    let arr = v.as_array().expect("an array");
    assert_eq!(arr.len(), 1);
    assert_eq!(arr[0]["switch"], "dc1");
    assert_eq!(arr[0]["reply"]["kind"], "ports");
    assert_eq!(arr[0]["reply"]["ports"][0]["name"], "eth0");
    assert_eq!(arr[0]["reply"]["ports"][0]["emulation"]["mode"], "netem");
    assert!(arr[0].get("error").is_none());
}

#[test]
fn links_say_which_mechanism_emulates_each_port() {
    let sw = FakeSwitch::start("links");
    let out = sw.ctl(&["links"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let row = stdout.lines().nth(1).expect("a port row");
    assert!(
        row.starts_with("dc1") && row.contains("100 Mbit/s") && row.contains("10 ms"),
        "{stdout}"
    );
    assert!(
        row.contains("1 MiB") && row.contains("netem (kernel qdisc"),
        "{stdout}"
    );
    assert_eq!(sw.seen(), [Request::Ports]);
}

#[test]
fn links_add_the_agent_plan_beside_the_socket() {
    let sw = FakeSwitch::start("plan");
    // As `lcmp-agent run` writes it: identity, then the plan.
    std::fs::write(
        sw.dir.join("agent.json"),
        r#"{"pid": 7, "metrics": null, "topology": "t.toml", "switches": ["dc1"],
            "down_links": [], "table_changes": 0, "emulation": [
            {"direction": "dc1->h1", "mechanism": "switch", "reason": "sent by an lcmp-switch port"},
            {"direction": "h1->dc1", "mechanism": "netem", "reason": "netem on h1's interface"}]}"#,
    )
    .unwrap();
    let out = sw.ctl(&["links"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.ends_with(
            "
directions no switch sends (the agent's plan):
DIRECTION  EMULATED BY  WHY
h1->dc1    netem        netem on h1's interface
"
        ),
        "{stdout}"
    );
    // `--json` is the switches' replies alone.
    let out = sw.ctl(&["--json", "links"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    assert_eq!(v[0]["switch"], "dc1");

    // A plan of another shape (here an agent that called the field `mode`)
    // is an error naming the file, not "no plan"; the ports still show.
    std::fs::write(
        sw.dir.join("agent.json"),
        r#"{"emulation": [{"direction": "h1->dc1", "mode": "netem"}]}"#,
    )
    .unwrap();
    let out = sw.ctl(&["links"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with(&format!(
            "lcmp-ctl: {}: not an agent plan this lcmp-ctl reads (\"missing field `mechanism`",
            sw.dir.join("agent.json").display()
        )) && stderr.lines().count() == 1,
        "{stderr}"
    );
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with("SWITCH") && !stdout.contains("agent plan"),
        "{stdout}"
    );
}

#[test]
fn a_refused_request_prints_the_switch_message_and_fails() {
    let sw = FakeSwitch::start("refused");
    let out = sw.ctl(&["link", "eth9", "down"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "lcmp-ctl: dc1: the switch refused: \"no port \\\"eth9\\\" on dc1\"\n"
    );
    assert_eq!(out.stdout, b"");
    // The switch's text is echoed: the escape shown, not sent to the
    // terminal, and cut at 100 characters (the escape, "[2J" and 96 z) with
    // its size (1 + 3 + 10,000 bytes).
    let out = sw.ctl(&["link", "hostile", "down"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        format!(
            "lcmp-ctl: dc1: the switch refused: \"\\u{{1b}}[2J{}\"... (10004 bytes)\n",
            "z".repeat(96)
        )
    );
}

#[test]
fn bad_thresholds_are_refused_before_anything_is_sent() {
    let sw = FakeSwitch::start("usage");
    let out = sw.ctl(&["set", "ecn", "0.5,0.1,0.3"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        "lcmp-ctl: set ecn: ECN thresholds need 0 <= kmin < kmax <= 1 and 0 <= pmax <= 1 (got kmin 0.5, kmax 0.1, pmax 0.3)\n"
    );
    assert_eq!(sw.seen(), []);
    // The valid form reaches the switch (which has no answer to it here).
    let out = sw.ctl(&["set", "ecn", "0.1,0.5,0.3"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(sw.seen().len(), 1);
}

#[test]
fn a_switch_that_is_not_running_is_named() {
    let dir = temp_dir("absent");
    let socket = dir.join("dc9.sock");
    let out = ctl_on(&socket, &["status"]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with(&format!(
            "lcmp-ctl: dc9: no switch answers on {}",
            socket.display()
        )),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert_eq!(
        text(&out.stdout),
        "",
        "nothing answered, so nothing to show"
    );
}

#[test]
fn capture_writes_the_frames_as_pcapng_with_directions_and_nanosecond_times() {
    use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketOption;
    use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption;
    use pcap_file::pcapng::{Block, PcapNgReader};

    let sw = FakeSwitch::start("capture");
    let file = sw.dir.join("p0.pcapng");
    let out = sw.ctl(&[
        "capture",
        "p0",
        "--out",
        file.to_str().unwrap(),
        "--snaplen",
        "64",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stderr),
        format!(
            "lcmp-ctl: dc1/p0: 3 frames, 26 bytes written to {} (1 frames lost: this reader fell behind the switch)\n",
            file.display()
        )
    );
    // What the switch was asked: the limits given (defaults but the
    // snaplen), a fetch, and the stop that frees its capture.
    let seen = sw.seen();
    assert_eq!(
        seen,
        vec![
            Request::CaptureStart {
                port: "p0".into(),
                snaplen: 64,
                max_frames: 10_000,
                max_bytes: 64_000_000,
                duration_ns: 10_000_000_000,
            },
            Request::CaptureFetch,
            Request::CaptureStop,
        ]
    );
    let mut reader = PcapNgReader::new(std::fs::File::open(&file).unwrap()).unwrap();
    let mut frames = Vec::new();
    while let Some(block) = reader.next_block() {
        match block.unwrap() {
            Block::InterfaceDescription(idb) => {
                assert_eq!(idb.snaplen, 64);
                assert!(idb
                    .options
                    .contains(&InterfaceDescriptionOption::IfTsResol(9)));
                assert!(idb
                    .options
                    .iter()
                    .any(|o| matches!(o, InterfaceDescriptionOption::IfName(n) if n == "dc1/p0")));
            }
            Block::EnhancedPacket(epb) => {
                let flags = epb.options.iter().find_map(|o| match o {
                    EnhancedPacketOption::Flags(f) => Some(*f),
                    _ => None,
                });
                frames.push((
                    epb.timestamp.as_nanos(),
                    epb.original_len,
                    epb.data.to_vec(),
                    flags,
                ));
            }
            _ => {}
        }
    }
    assert_eq!(
        frames,
        vec![
            (
                1_700_000_000_000_000_123,
                70,
                vec![2, 0, 0, 0, 0, 0xa, 2, 0, 0, 0, 0, 1, 8, 0, 0x45, 0],
                Some(1)
            ),
            (
                1_700_000_000_000_500_000,
                16,
                vec![2, 0, 0, 0, 0, 1],
                Some(2)
            ),
            (
                1_700_000_001_000_000_000,
                4,
                vec![0xde, 0xad, 0xbe, 0xef],
                Some(1)
            ),
        ]
    );
}

#[test]
fn capture_of_an_unknown_port_or_of_nothing_is_one_line() {
    let sw = FakeSwitch::start("capturebad");
    let file = sw.dir.join("x.pcapng");
    let out = sw.ctl(&["capture", "p9", "--out", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "lcmp-ctl: dc1: the switch refused: \"no port \\\"p9\\\"\"\n"
    );
    // A reply of another kind is named by its kind, not repeated.
    let out = sw.ctl(&["capture", "wrong", "--out", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "lcmp-ctl: dc1: bad reply from the switch: a applied reply to a capture_start request\n"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_lcmp-ctl"))
        .args(["capture", "p0", "--out", "/dev/null", "--count", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

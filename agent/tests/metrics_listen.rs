//! The agent's metrics endpoint listens where it is told: an address in
//! use stops the agent at start with one line naming the address and what
//! holds it (a static scrape config must not silently lose its target);
//! port 0 asks for any free port, which the state file then names; and
//! promtool accepts the live exposition, a rotor ToR's lateness summary
//! and NDP trimming families included.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lcmp_control::proto::{Body, ErrorKind, ErrorReply, Reply, Request};
use lcmp_control::rotor::{Lateness, RotorStatus};
use lcmp_control::server::{serve_scoped, Inbox};

fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lcmp-agent-metrics-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `lcmp-agent run` of `topology` with no switches running (their sockets
/// would be in `dir`).
fn agent(topology: &Path, listen: &str, dir: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_lcmp-agent"))
        .arg("run")
        .arg("--topology")
        .arg(topology)
        .arg("--socket-dir")
        .arg(dir)
        .arg("--state-file")
        .arg(dir.join("agent.json"))
        .args(["--metrics-listen", listen])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("lcmp-agent runs")
}

/// The agent's output once it has exited, within `limit` (killed and
/// failed otherwise).
fn exited(mut child: Child, limit: Duration) -> Output {
    let deadline = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!(
                "the agent still runs after {limit:?}: {:?}",
                child.wait_with_output()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// What `lcmp_control::http::listener_on` says of this process.
fn this_process() -> String {
    let comm = std::fs::read_to_string("/proc/self/comm").unwrap();
    format!("{:?} (pid {})", comm.trim_end(), std::process::id())
}

fn refused_with_one_line(topology: &Path, tag: &str) {
    let dir = scratch(tag);
    let held = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = held.local_addr().unwrap();
    let out = exited(
        agent(topology, &addr.to_string(), &dir),
        Duration::from_secs(20),
    );
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "lcmp-agent: metrics endpoint {addr}: address in use by {}\n",
            this_process()
        )
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_metrics_address_in_use_stops_the_agent_with_one_line() {
    let topo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies/2dc-3path.toml");
    refused_with_one_line(&topo, "dci");
}

/// A rotor network of 4 ToRs with 2 uplinks, planned into `file`.
fn rotor_plan(file: &Path) {
    let plan = Command::new(env!("CARGO_BIN_EXE_lcmp-agent"))
        .args([
            "rotor-plan",
            "--tors",
            "4",
            "--uplinks",
            "2",
            "--slot",
            "1ms",
        ])
        .args([
            "--rate",
            "100Mbps",
            "--buffer",
            "50kB",
            "--max-delay",
            "20ms",
        ])
        .arg("--schedule")
        .arg(file)
        .output()
        .unwrap();
    assert!(plan.status.success(), "{plan:?}");
}

#[test]
fn a_metrics_address_in_use_stops_a_rotor_networks_agent_with_one_line() {
    let dir = scratch("plan");
    let file = dir.join("rotor.toml");
    rotor_plan(&file);
    refused_with_one_line(&file, "rotor");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Status code and body of `GET /metrics` (the Prometheus text format).
fn get_metrics(addr: SocketAddr) -> (String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    let (head, body) = resp.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_string(), body.to_string())
}

/// A running agent, killed and reaped when dropped, so a failing check
/// leaves no process behind.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The metrics address the agent's state file in `dir` names, once it
/// does (the agent is killed and the test failed if it exits first or
/// takes 20 s).
fn metrics_address(mut child: Child, dir: &Path) -> (Running, SocketAddr) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let state: Option<serde_json::Value> = std::fs::read_to_string(dir.join("agent.json"))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok());
        if let Some(m) = state.as_ref().and_then(|s| s["metrics"].as_str()) {
            return (Running(child), m.parse().unwrap());
        }
        if Instant::now() > deadline || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            panic!("no metrics address: {:?}", child.wait_with_output());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn port_zero_serves_on_a_free_port_the_state_file_names() {
    let dir = scratch("zero");
    let topo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies/2dc-3path.toml");
    let (running, addr) = metrics_address(agent(&topo, "127.0.0.1:0", &dir), &dir);
    assert_eq!(addr.ip().to_string(), "127.0.0.1");
    assert_ne!(addr.port(), 0);
    let (status, body) = get_metrics(addr);
    drop(running);
    assert_eq!(status, "HTTP/1.1 200 OK");
    // No switch runs: each is down; the exporter's build is there.
    let lines: Vec<&str> = body.lines().collect();
    assert!(lines.contains(&"lcmp_switch_up{switch=\"s1\"} 0"), "{body}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("lcmp_build_info{version=\"") && l.ends_with("\"} 1")),
        "{body}"
    );
    promtool_accepts(&body);
    let _ = std::fs::remove_dir_all(&dir);
}

/// ToR 0's status as its switch reports it: 3 slots measured (p50 1.5 us,
/// p99 and max 9 us) and NDP trimming on.
fn tor0_status() -> RotorStatus {
    let counters = [
        ("queued", 40),
        ("queued_priority", 6),
        ("sent_uplink", 35),
        ("sent_priority_uplink", 6),
        ("trimmed", 5),
        ("queued_downlink", 20),
        ("trimmed_downlink", 2),
        ("sent_downlink", 18),
        ("delivered", 18),
        ("sent_priority_downlink", 2),
        ("late_frames", 0),
        ("late_ns", 0),
        ("late_frames_downlink", 1),
        ("late_ns_downlink", 250),
    ];
    RotorStatus {
        name: "tor0".into(),
        role: "tor".into(),
        graph: "complete".into(),
        routing: "direct".into(),
        tors: 4,
        rotors: 2,
        slot_ns: 1_000_000,
        reconfig_ns: 100_000,
        epoch_unix_ns: Some(1_700_000_000_000_000_000),
        epoch_source: Some("agent".into()),
        slots_seen: 3,
        lateness: Lateness {
            samples: 3,
            p50_ns: 1_500,
            p99_ns: 9_000,
            max_ns: 9_000,
            last_ns: 1_500,
        },
        drops: [("data_queue_full", 4), ("queue_full", 0)]
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect(),
        counters: counters.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        buffer_bytes: 50_000,
        ..Default::default()
    }
}

/// A rotor network's agent scrapes ToR 0 (a control socket answering as a
/// ToR does: `rotor` with its status, anything else refused) and serves
/// its slot lateness as a summary and its trimming counters in their own
/// families; the other switches are down; promtool accepts it all.
#[test]
fn a_tors_lateness_summary_and_trimming_reach_the_live_exposition() {
    let dir = scratch("tor");
    let file = dir.join("rotor.toml");
    rotor_plan(&file);
    let inbox = Inbox::new().unwrap();
    let served = serve_scoped(&dir.join("tor0.sock"), &inbox).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let answering = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let mut fd = libc::pollfd {
                    fd: inbox.wake_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one live pollfd, count 1; the timeout only bounds
                // how late `stop` is seen.
                unsafe { libc::poll(&mut fd, 1, 100) };
                while let Some(p) = inbox.take() {
                    let body = match &p.request {
                        Request::Rotor => Body::Ok(Box::new(Reply::Rotor(Box::new(tor0_status())))),
                        other => Body::Error(ErrorReply::new(
                            ErrorKind::Unsupported,
                            format!("a ToR does not answer {}", other.verb()),
                        )),
                    };
                    p.answer(body);
                }
            }
        })
    };
    let (running, addr) = metrics_address(agent(&file, "127.0.0.1:0", &dir), &dir);
    let (status, body) = get_metrics(addr);
    drop(running);
    stop.store(true, Ordering::Relaxed);
    answering.join().unwrap();
    drop(served);
    assert_eq!(status, "HTTP/1.1 200 OK");
    let lines: Vec<&str> = body.lines().collect();
    for line in [
        "lcmp_switch_up{switch=\"tor0\"} 1",
        "lcmp_switch_up{switch=\"tor1\"} 0",
        "lcmp_switch_up{switch=\"rotor1\"} 0",
        "# TYPE lcmp_rotor_slot_lateness_seconds summary",
        // 1,500 ns and 9,000 ns in seconds; 3 slots.
        "lcmp_rotor_slot_lateness_seconds{switch=\"tor0\",quantile=\"0.5\"} 0.0000015",
        "lcmp_rotor_slot_lateness_seconds{switch=\"tor0\",quantile=\"0.99\"} 0.000009",
        "lcmp_rotor_slot_lateness_seconds{switch=\"tor0\",quantile=\"1\"} 0.000009",
        "lcmp_rotor_slot_lateness_seconds_count{switch=\"tor0\"} 3",
        "lcmp_rotor_trimmed_packets_total{switch=\"tor0\",link=\"uplink\"} 5",
        "lcmp_rotor_trimmed_packets_total{switch=\"tor0\",link=\"downlink\"} 2",
        "lcmp_rotor_priority_queued_packets_total{switch=\"tor0\"} 6",
        "lcmp_rotor_priority_sent_packets_total{switch=\"tor0\",link=\"uplink\"} 6",
        "lcmp_rotor_priority_sent_packets_total{switch=\"tor0\",link=\"downlink\"} 2",
        "lcmp_rotor_queued_packets_total{switch=\"tor0\",link=\"downlink\"} 20",
        // 250 ns, as prometheus-client prints it.
        "lcmp_rotor_late_seconds_total{switch=\"tor0\",link=\"downlink\"} 2.5e-7",
        "lcmp_rotor_delivered_packets_total{switch=\"tor0\"} 18",
        "lcmp_rotor_dropped_packets_total{switch=\"tor0\",reason=\"data_queue_full\"} 4",
    ] {
        assert!(lines.contains(&line), "missing {line} in\n{body}");
    }
    // Every trimming counter has a family: none is left to the catch-all.
    assert!(!body.contains("lcmp_rotor_other_events_total{"), "{body}");
    promtool_accepts(&body);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `promtool check metrics` (its linter: names, units, help) on a live
/// exposition, where promtool is installed (Debian package prometheus,
/// scripts/install-deps.sh).
fn promtool_accepts(exposition: &str) {
    let Ok(mut child) = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    else {
        eprintln!("NOTICE: promtool not found; skipping the live promtool check");
        return;
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(exposition.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "promtool: {out:?}\non\n{exposition}");
}

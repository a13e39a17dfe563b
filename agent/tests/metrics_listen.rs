//! The agent's metrics endpoint listens where it is told: an address in
//! use stops the agent at start with one line naming the address and what
//! holds it (a static scrape config must not silently lose its target);
//! port 0 asks for any free port, which the state file then names; and
//! promtool accepts the live exposition.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

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

#[test]
fn a_metrics_address_in_use_stops_a_rotor_networks_agent_with_one_line() {
    let dir = scratch("plan");
    let file = dir.join("rotor.toml");
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
        .arg(&file)
        .output()
        .unwrap();
    assert!(plan.status.success(), "{plan:?}");
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

#[test]
fn port_zero_serves_on_a_free_port_the_state_file_names() {
    let dir = scratch("zero");
    let topo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies/2dc-3path.toml");
    let mut child = agent(&topo, "127.0.0.1:0", &dir);
    let deadline = Instant::now() + Duration::from_secs(20);
    let addr: SocketAddr = loop {
        let state: Option<serde_json::Value> = std::fs::read_to_string(dir.join("agent.json"))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok());
        if let Some(m) = state.as_ref().and_then(|s| s["metrics"].as_str()) {
            break m.parse().unwrap();
        }
        if Instant::now() > deadline || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            panic!("no metrics address: {:?}", child.wait_with_output());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(addr.ip().to_string(), "127.0.0.1");
    assert_ne!(addr.port(), 0);
    let (status, body) = get_metrics(addr);
    let _ = child.kill();
    let _ = child.wait();
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

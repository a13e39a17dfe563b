//! The control plane on a live testbed (root): `lcmp-ctl`, the agent's
//! hitless changes and re-adoption under continuous traffic, remote
//! failure propagation, and the agent's metrics scraped by a real
//! Prometheus. Each test brings up its own 2dc-3path testbed through
//! `lcmp-testbed up` (which starts the agent), as a user would.

mod common;
use common::*;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use lcmp_netlab::{require_root, udp_send_flows, Lab, UdpReceiver};
use lcmp_testbed::state::State;
use serde_json::Value;

/// `lcmp-ctl --testbed NAME ARGS... --json`, which must succeed; the
/// replies by switch.
fn ctl_json(name: &str, args: &[&str]) -> BTreeMap<String, Value> {
    let out = Command::new(&bins().ctl)
        .args(["--testbed", name, "--json"])
        .args(args)
        .output()
        .expect("lcmp-ctl runs");
    assert!(
        out.status.success(),
        "lcmp-ctl {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("lcmp-ctl --json is JSON");
    v.as_array()
        .expect("an array")
        .iter()
        .map(|e| {
            (
                e["switch"].as_str().unwrap().to_string(),
                e["reply"].clone(),
            )
        })
        .collect()
}

/// `lcmp-ctl --testbed NAME ARGS...` in human form, which must succeed.
fn ctl(name: &str, args: &[&str]) -> String {
    let out = Command::new(&bins().ctl)
        .args(["--testbed", name])
        .args(args)
        .output()
        .expect("lcmp-ctl runs");
    assert!(
        out.status.success(),
        "lcmp-ctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec to a valid pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn testbed(name: &str) -> (State, Lab) {
    let st = State::load(name).expect("state");
    let (_, tb) = lcmp_testbed::bed::attach(&st).expect("attach");
    (st, tb)
}

/// Candidate ports of s1's route to b's prefix.
fn s1_candidates(name: &str) -> Vec<u64> {
    let t = ctl_json(name, &["-s", "s1", "tables"]);
    t["s1"]["routes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["prefix"] == "10.0.2.0/24")
        .unwrap()["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["port"].as_u64().unwrap())
        .collect()
}

/// s1's decisions from its flow log: (time_ns, sport, port, reason).
fn s1_decisions(name: &str) -> Vec<(u64, u16, u8, String)> {
    let text = std::fs::read_to_string(format!("/run/lcmp-testbed/{name}/s1.flows.csv"))
        .unwrap_or_default();
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            Some((
                f.first()?.parse().ok()?,
                f.get(4)?.parse().ok()?,
                f.get(6)?.parse().ok()?,
                f.get(8)?.to_string(),
            ))
        })
        .collect()
}

/// A port counter of a switch, through `lcmp-ctl ports`.
fn port_counter(name: &str, switch: &str, port: &str, counter: &str) -> u64 {
    let p = ctl_json(name, &["-s", switch, "ports"]);
    p[switch]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == port)
        .unwrap_or_else(|| panic!("{switch} has no port {port}"))["counters"][counter]
        .as_u64()
        .unwrap()
}

/// One HTTP GET on loopback: (status, body); status 0 when nothing
/// listens (yet).
fn http_get(addr: SocketAddr, path_and_query: &str) -> (u16, String) {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return (0, String::new());
    };
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path_and_query} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut resp = Vec::new();
    let _ = s.read_to_end(&mut resp);
    let text = String::from_utf8_lossy(&resp).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, b)| b.to_string());
    (status, body)
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn agent_metrics(name: &str) -> SocketAddr {
    let s = status_json(name);
    s["agent"]["metrics"]
        .as_str()
        .expect("the agent serves metrics")
        .parse()
        .unwrap()
}

/// UDP from host a to host b on flows `sports`, `rounds` packets each,
/// one packet every `gap` (all flows interleaved), on a thread.
fn send_a_to_b(
    tb: &Lab,
    sports: Vec<u16>,
    first_seq: u64,
    rounds: u64,
    gap: Duration,
) -> std::thread::JoinHandle<lcmp_netlab::traffic::UdpSendReport> {
    let a_name = tb.host("a").netns.name().to_string();
    std::thread::spawn(move || {
        let a = lcmp_netlab::Netns::open(&a_name).expect("host a's namespace");
        udp_send_flows(
            &a,
            &["10.0.2.2:5001".parse().unwrap()],
            &sports,
            first_seq,
            rounds,
            200,
            gap,
            Duration::ZERO,
        )
        .expect("sender runs")
    })
}

#[test]
fn ctl_costs_show_three_candidates_and_the_kept_set_moves_off_a_queue() {
    require_root!();
    let _serial = serial();
    let name = unique_name("ctlc");
    let _down = Down(name.clone());
    // Rates / 100 so one host can fill a path; keep one of three.
    up_2dc(
        &name,
        &[
            "--scale",
            "100",
            "--switch-arg=--keep-all-up-to=1",
            "--no-metrics",
        ],
    );
    let costs = || ctl_json(&name, &["-s", "s1", "costs", "10.0.2.0/24"])["s1"].clone();
    let c = costs();
    let cands = c["candidates"].as_array().unwrap();
    assert_eq!(cands.len(), 3, "{c}");
    for k in ["c_path", "q", "t", "d", "c_cong", "cost", "kept"] {
        assert!(cands.iter().all(|x| !x[k].is_null()), "no {k}: {c}");
    }
    let kept: Vec<u64> = cands
        .iter()
        .filter(|x| x["kept"] == true)
        .map(|x| x["port"].as_u64().unwrap())
        .collect();
    assert_eq!(kept.len(), 1, "{c}");
    let first = kept[0];
    // The human table shows the same three and marks the kept one.
    let table = ctl(&name, &["-s", "s1", "costs", "10.0.2.0/24"]);
    assert_eq!(
        table
            .lines()
            .filter(|l| l.trim_start().starts_with('*'))
            .count(),
        2,
        "{table}"
    );

    // Flood the kept path: new flows all go to it, its queue builds, its
    // C_cong rises until another candidate is cheaper.
    let (_st, tb) = testbed(&name);
    let receiver =
        UdpReceiver::start(&tb.host("b").netns, "0.0.0.0:5001".parse().unwrap()).expect("receiver");
    let sender = send_a_to_b(
        &tb,
        (30000..30004).collect(),
        0,
        6000,
        Duration::from_micros(100),
    );
    let moved = wait_for(
        "the kept set to leave the queued port",
        Duration::from_secs(30),
        || {
            let c = costs();
            let cands = c["candidates"].as_array().unwrap().clone();
            let old = cands.iter().find(|x| x["port"] == first).unwrap();
            (old["kept"] == false && old["queue_bytes"].as_u64() > Some(0)).then_some(c)
        },
    );
    eprintln!("kept set moved: {moved}");
    let old = moved["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["port"] == first)
        .unwrap()
        .clone();
    assert!(old["c_cong"].as_u64().unwrap() > 0, "{moved}");
    sender.join().unwrap();
    drop(receiver);
}

#[test]
fn changes_and_an_agent_kill_9_move_no_flow_and_lose_nothing() {
    require_root!();
    let _serial = serial();
    let name = unique_name("ctlh");
    let _down = Down(name.clone());
    up_2dc(&name, &["--metrics-listen", "127.0.0.1:0"]);
    let (st, tb) = testbed(&name);
    let receiver =
        UdpReceiver::start(&tb.host("b").netns, "0.0.0.0:5001".parse().unwrap()).expect("receiver");
    // 32 flows, 2000 packets/s together, for about 10 s.
    let flows: Vec<u16> = (40000..40032).collect();
    let rounds = 600;
    let sender = send_a_to_b(&tb, flows.clone(), 0, rounds, Duration::from_micros(500));
    let step = Duration::from_millis(1200);
    std::thread::sleep(step);

    // A table push: the path via p2 gets longer in the topology file;
    // SIGHUP makes the agent push new links and tables.
    let topo_file = st.topology_file.clone();
    let text = std::fs::read_to_string(&topo_file).unwrap();
    let changed = text.replacen("delay = \"10ms\"", "delay = \"12ms\"", 1);
    assert_ne!(text, changed, "the p2 link's delay is in the file");
    std::fs::write(&topo_file, changed).unwrap();
    let agent_pid = st.agent.as_ref().unwrap().pid;
    // SAFETY: kill(2) on the agent's pid, just read from the state file.
    unsafe { libc::kill(agent_pid as i32, libc::SIGHUP) };
    let generation = |sw: &str| {
        ctl_json(&name, &["-s", sw, "status"])[sw]["table_generation"]
            .as_u64()
            .unwrap()
    };
    wait_for(
        "the agent to push new tables",
        Duration::from_secs(10),
        || (generation("s1") > 1).then_some(()),
    );
    std::thread::sleep(step);
    // Policy changes and an alpha change.
    ctl(&name, &["policy", "ecmp"]);
    std::thread::sleep(step);
    ctl(&name, &["policy", "lcmp"]);
    std::thread::sleep(step);
    ctl(&name, &["set", "alpha", "5"]);
    std::thread::sleep(step);
    // kill -9 of the agent: the switches go on; a new agent re-adopts.
    // SAFETY: as above.
    unsafe { libc::kill(agent_pid as i32, libc::SIGKILL) };
    std::thread::sleep(step);
    ok(&["agent", "--name", &name, "--metrics-listen", "127.0.0.1:0"]);
    let st2 = State::load(&name).unwrap();
    let new_pid = st2.agent.as_ref().unwrap().pid;
    assert_ne!(new_pid, agent_pid);
    let log = std::fs::read_to_string(&st2.agent.as_ref().unwrap().log).unwrap();
    assert!(
        log.contains("tables_changed=0"),
        "re-adoption changed tables: {log}"
    );
    let (code, body) = http_get(agent_metrics(&name), "/metrics");
    assert_eq!(code, 200);
    assert!(body.contains("lcmp_switch_up{switch=\"s1\"} 1"), "{body}");

    let sent = sender.join().unwrap();
    assert_eq!(sent.errors, 0);
    let report = receiver
        .finish(Duration::from_millis(500), Duration::from_secs(10))
        .expect("receiver");
    let lost = report.lost(rounds, flows.len() as u64);
    eprintln!(
        "sent {} received {} lost {lost} reordered {} duplicates {}",
        sent.sent, report.unique, report.reordered, report.duplicates
    );
    let drops: Vec<String> = ctl_json(&name, &["status"])
        .iter()
        .flat_map(|(sw, r)| {
            let per_port: Vec<String> = r["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|p| {
                    p["drops"]
                        .as_object()
                        .into_iter()
                        .flatten()
                        .filter(|(_, v)| v.as_u64() > Some(0))
                        .map(|(k, v)| {
                            format!("{sw}/{}: {k} {v}", p["name"].as_str().unwrap_or("?"))
                        })
                        .collect::<Vec<_>>()
                })
                .collect();
            per_port
        })
        .collect();
    eprintln!("switch drops: {drops:?}");
    if lost > 0 {
        let missing: Vec<(u16, u64)> = flows
            .iter()
            .flat_map(|f| (0..rounds).map(move |q| (*f, q)))
            .filter(|(f, q)| {
                !report
                    .arrivals
                    .iter()
                    .any(|a| a.src_port == *f && a.seq == *q)
            })
            .collect();
        eprintln!("missing (flow, seq): {missing:?}");
    }
    assert_eq!(lost, 0, "packets lost across the changes");
    assert_eq!(report.reordered, 0, "packets reordered across the changes");
    assert_eq!(report.duplicates, 0);
    // No flow moved: one decision each at s1, no failover.
    let decisions = s1_decisions(&name);
    for f in &flows {
        let mine: Vec<_> = decisions.iter().filter(|d| d.1 == *f).collect();
        assert_eq!(mine.len(), 1, "flow {f}: {mine:?}");
        assert_eq!(mine[0].3, "new");
    }
    let s1 = ctl_json(&name, &["-s", "s1", "status"]);
    assert_eq!(s1["s1"]["flows"]["failovers"], 0);
    assert_eq!(s1["s1"]["policy"]["alpha"], 5);
}

#[test]
fn a_far_link_failure_reaches_s1_and_its_return_restores_the_path() {
    require_root!();
    let _serial = serial();
    let name = unique_name("ctlf");
    let _down = Down(name.clone());
    // ECMP: flows on all three paths, so some are on p1's.
    up_2dc(&name, &["--policy", "ecmp", "--no-metrics"]);
    let (_st, tb) = testbed(&name);
    assert_eq!(s1_candidates(&name), vec![0, 1, 2]);
    let receiver =
        UdpReceiver::start(&tb.host("b").netns, "0.0.0.0:5001".parse().unwrap()).expect("receiver");
    let flows: Vec<u16> = (41000..41048).collect();
    let sender = send_a_to_b(&tb, flows.clone(), 0, 100, Duration::from_micros(500));
    sender.join().unwrap();
    let first: Vec<_> = wait_for("s1 to log the flows", Duration::from_secs(10), || {
        let d: Vec<_> = s1_decisions(&name)
            .into_iter()
            .filter(|d| flows.contains(&d.1))
            .collect();
        (d.len() == flows.len()).then_some(d)
    });
    let on_p1: Vec<u16> = first.iter().filter(|d| d.2 == 0).map(|d| d.1).collect();
    assert!(!on_p1.is_empty(), "ECMP put some of 48 flows on p1");

    // The far hop of the p1 path fails: p1's link to s2. s1's own links
    // stay up.
    let sender = send_a_to_b(&tb, flows.clone(), 100, 600, Duration::from_micros(250));
    std::thread::sleep(Duration::from_millis(1000));
    let t_down = monotonic_ns();
    // Whatever the link is made of (a veth, or a memory link between the
    // switches of one process), as pulling its cable would.
    ok(&["link", "--name", &name, "p1-s2", "down"]);
    wait_for(
        "s1 to drop p1 from its candidates",
        Duration::from_secs(5),
        || (s1_candidates(&name) == vec![1, 2]).then_some(()),
    );
    let sent = sender.join().unwrap();
    // When s1 moved each flow: its failover decision's time.
    let decisions = s1_decisions(&name);
    let failovers: Vec<u64> = decisions
        .iter()
        .filter(|d| d.3 == "failover" && d.0 > t_down)
        .map(|d| d.0 - t_down)
        .collect();
    assert_eq!(
        failovers.len(),
        on_p1.len(),
        "every flow on p1 moved once: {decisions:?}"
    );
    let worst_ms = *failovers.iter().max().unwrap() as f64 / 1e6;
    let first_ms = *failovers.iter().min().unwrap() as f64 / 1e6;
    eprintln!(
        "REMOTE FAILURE: link down -> s1 moved its first flow off p1 after {first_ms:.1} ms, the last after {worst_ms:.1} ms ({} flows)",
        failovers.len()
    );
    let report = receiver
        .finish(Duration::from_millis(500), Duration::from_secs(10))
        .expect("receiver");
    // Lost while the failure propagated: what was queued towards and
    // on the dead link, and what s1 sent into the p1 path before it moved
    // the flows.
    eprintln!(
        "during the failure: sent {} packets on {} flows, lost {}",
        sent.sent + 100 * flows.len() as u64,
        flows.len(),
        report.lost(700, flows.len() as u64)
    );
    // After the move nothing is lost: the same flows again, on their new
    // paths, and nothing more leaves s1 towards p1.
    let receiver =
        UdpReceiver::start(&tb.host("b").netns, "0.0.0.0:5001".parse().unwrap()).expect("receiver");
    let s1_to_p1 = tb.switch("s1").ports[0].ifname.clone();
    let before = port_counter(&name, "s1", &s1_to_p1, "tx_frames");
    let sent = send_a_to_b(&tb, flows.clone(), 0, 200, Duration::from_micros(250))
        .join()
        .unwrap();
    let report = receiver
        .finish(Duration::from_millis(500), Duration::from_secs(10))
        .expect("receiver");
    assert_eq!(sent.errors, 0);
    assert_eq!(
        report.lost(200, flows.len() as u64),
        0,
        "lost after the move"
    );
    assert_eq!(report.reordered, 0);
    assert_eq!(port_counter(&name, "s1", &s1_to_p1, "tx_frames"), before);

    // The link returns: s1 gets p1 back, and new flows use it again.
    ok(&["link", "--name", &name, "p1-s2", "up"]);
    wait_for("s1 to get p1 back", Duration::from_secs(10), || {
        (s1_candidates(&name) == vec![0, 1, 2]).then_some(())
    });
    let fresh: Vec<u16> = (42000..42048).collect();
    send_a_to_b(&tb, fresh.clone(), 0, 5, Duration::from_micros(500))
        .join()
        .unwrap();
    // The flow log is written every stats interval: wait for all of them.
    let logged = wait_for("s1 to log the new flows", Duration::from_secs(10), || {
        let d: Vec<_> = s1_decisions(&name)
            .into_iter()
            .filter(|d| fresh.contains(&d.1))
            .collect();
        (d.len() == fresh.len()).then_some(d)
    });
    let on_p1_again = logged.iter().filter(|d| d.2 == 0).count();
    assert!(on_p1_again > 0, "new flows use p1 again: {logged:?}");
}

/// A Prometheus server on loopback with a generated config, removed on
/// drop.
struct Prometheus {
    child: Child,
    dir: std::path::PathBuf,
    addr: SocketAddr,
}

impl Prometheus {
    fn start(target: SocketAddr) -> Prometheus {
        let dir = std::env::temp_dir().join(format!("lcmp-prom-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: lcmp\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        // A free port: bound, then released for Prometheus.
        let addr = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("prometheus runs (Debian package prometheus; scripts/install-deps.sh)");
        Prometheus { child, dir, addr }
    }

    /// The first value of an instant query's result, if any.
    fn query(&self, q: &str) -> Option<f64> {
        let (code, body) = http_get(
            self.addr,
            &format!("/api/v1/query?query={}", percent_encode(q)),
        );
        if code != 200 {
            return None;
        }
        let v: Value = serde_json::from_str(&body).ok()?;
        v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn a_real_prometheus_scrapes_the_agent_and_promtool_accepts_the_exposition() {
    require_root!();
    let _serial = serial();
    let name = unique_name("ctlp");
    let _down = Down(name.clone());
    up_2dc(
        &name,
        &["--metrics-listen", "127.0.0.1:0", "--policy", "ecmp"],
    );
    let (_st, tb) = testbed(&name);
    let metrics = agent_metrics(&name);

    // promtool lints the text format (what curl gets without Accept).
    let (code, body) = http_get(metrics, "/metrics");
    assert_eq!(code, 200);
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool runs (Debian package prometheus)");
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = promtool.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // Continuous traffic through s1 while Prometheus scrapes.
    let receiver =
        UdpReceiver::start(&tb.host("b").netns, "0.0.0.0:5001".parse().unwrap()).expect("receiver");
    let sender = send_a_to_b(&tb, vec![43000], 0, 30_000, Duration::from_millis(1));
    let prom = Prometheus::start(metrics);
    // The port s1 sends this flow on, from its flow log.
    let port = wait_for("s1 to log the flow's path", Duration::from_secs(10), || {
        s1_decisions(&name)
            .iter()
            .find(|d| d.1 == 43000)
            .map(|d| d.2)
    });
    let ifname = tb.switch("s1").ports[port as usize].ifname.clone();
    let q = format!("rate(lcmp_port_tx_packets_total{{switch=\"s1\",port=\"{ifname}\"}}[5s])");
    let rate = wait_for(
        "Prometheus to see s1's transmit rate",
        Duration::from_secs(60),
        || prom.query(&q).filter(|r| *r > 0.0),
    );
    eprintln!("Prometheus: {q} = {rate:.1} packets/s");
    let up = prom.query("sum(lcmp_switch_up)").unwrap_or(0.0);
    assert_eq!(up, 5.0, "every switch scraped");
    drop(prom);
    sender.join().unwrap();
    drop(receiver);
}

//! The 2dc-3path testbed with all five switches in one `lcmp-switch`
//! process (`up --switch-processes one`), its switch links in memory (the
//! default) or veths: hosts reach each other over IPv4 and IPv6 and move a
//! TCP stream, every switch keeps its own stats file and control socket,
//! SIGTERM stops every switch and detaches all their XDP programs, and
//! `down` leaves nothing behind, also after `kill -9` of the process.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use lcmp_netlab::netns::{list_with_prefix, process_running};
use lcmp_netlab::require_root;
use serde_json::Value;

mod common;
use common::*;

const SWITCHES: [&str; 5] = ["s1", "s2", "p1", "p2", "p3"];

/// Waits up to 10 s for our XDP programs to be back at `before` (the
/// kernel frees detached programs a little later).
fn wait_xdp_programs(before: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while our_xdp_programs() > before {
        assert!(
            Instant::now() < deadline,
            "{} XDP programs left (had {before})",
            our_xdp_programs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn wait_exit(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while process_running(pid) {
        assert!(Instant::now() < deadline, "process {pid} still runs");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn state(name: &str) -> Value {
    let path = format!("/run/lcmp-testbed/{name}/state.json");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// The one pid every switch of testbed `name` runs in.
fn shared_pid(name: &str) -> u32 {
    let st = state(name);
    let procs = st["procs"].as_array().unwrap();
    assert_eq!(procs.len(), SWITCHES.len(), "{st:#}");
    let pid = procs[0]["pid"].as_u64().unwrap() as u32;
    for p in procs {
        assert_eq!(p["pid"].as_u64(), Some(u64::from(pid)), "{st:#}");
        assert_eq!(p["shared"], true, "{st:#}");
    }
    assert!(process_running(pid));
    pid
}

fn exec_ok(name: &str, host: &str, cmd: &[&str]) -> String {
    let mut args = vec!["exec", "--name", name, host, "--"];
    args.extend_from_slice(cmd);
    let o = tool(&args);
    assert!(o.status.success(), "{cmd:?}: {}{}", stdout(&o), stderr(&o));
    stdout(&o)
}

fn ctl(name: &str, args: &[&str]) -> std::process::Output {
    Command::new(&bins().ctl)
        .args(["--testbed", name])
        .args(args)
        .output()
        .expect("lcmp-ctl runs")
}

/// A memory link has no interface for tcpdump: `lcmp-ctl capture` writes
/// what crosses it as pcapng, which tcpdump reads. s1's other paths are
/// taken down, so pings a -> b cross s1's memory link to p1.
fn capture_a_memory_link_and_read_it_with_tcpdump(name: &str) {
    for p in ["p1", "p2"] {
        let o = ctl(name, &["-s", "s1", "link", p, "down"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let file = std::env::temp_dir().join(format!("{name}-s1-p0.pcapng"));
    let capture = {
        let (name, file) = (name.to_string(), file.clone());
        std::thread::spawn(move || {
            let f = file.to_str().unwrap();
            ctl(
                &name,
                &[
                    "capture",
                    "s1",
                    "p0",
                    "--out",
                    f,
                    "--count",
                    "3",
                    "--duration",
                    "20s",
                ],
            )
        })
    };
    // The capture runs once the switch said so; pings until it has 3.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !capture.is_finished() {
        assert!(Instant::now() < deadline, "no frames captured");
        exec_ok(name, "a", &["ping", "-c", "1", "-W", "1", "10.0.2.2"]);
    }
    let o = capture.join().unwrap();
    let said = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "{said}");
    assert!(said.contains("s1/p0: 3 frames"), "{said}");
    let o = Command::new("tcpdump")
        .args(["-nn", "-r"])
        .arg(&file)
        .output()
        .expect("tcpdump runs");
    let _ = std::fs::remove_file(&file);
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Requests leave s1 by p0 (replies come back by it if s2 chose p1).
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        lines
            .iter()
            .all(|l| l.contains("10.0.1.2") && l.contains("10.0.2.2")),
        "{text}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("10.0.1.2 > 10.0.2.2: ICMP echo request")),
        "{text}"
    );
    for p in ["p1", "p2"] {
        let o = ctl(name, &["-s", "s1", "link", p, "up"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
}

fn ctl_status(name: &str) -> Vec<Value> {
    let o = Command::new(&bins().ctl)
        .args(["--testbed", name, "--json", "status"])
        .output()
        .expect("lcmp-ctl runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice::<Vec<Value>>(&o.stdout).expect("lcmp-ctl --json")
}

#[test]
fn two_dc_testbed_in_one_process_with_memory_links() {
    require_root!();
    let _s = serial();
    one_process_testbed(&[], "memory");
}

#[test]
fn two_dc_testbed_in_one_process_with_veth_links() {
    require_root!();
    let _s = serial();
    one_process_testbed(&["--links", "veth"], "veth");
}

/// Up with `links_args` (links of kind `links`), forwarding, reports,
/// SIGTERM, down, and again with kill -9.
fn one_process_testbed(links_args: &[&str], links: &str) {
    let xdp_before = our_xdp_programs();
    let name = unique_name("one");
    let _down = Down(name.clone());
    let mut args = vec!["--switch-processes", "one"];
    args.extend_from_slice(links_args);
    up_2dc(&name, &args);
    let pid = shared_pid(&name);
    let s = status_json(&name);
    assert_eq!(s["health"], "ok", "{s:#}");
    assert_eq!(s["links"], links, "{s:#}");
    // Every port of the 5 switches is an AF_XDP socket with its XDP
    // program, or, with memory links, only the 2 host ports are: the 6
    // links between switches are in memory (12 ports).
    let kinds: Vec<(String, String)> = s["switches"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|sw| sw["ports"].as_array().unwrap().iter())
        .map(|p| {
            (
                p["peer"].as_str().unwrap().to_string(),
                p["kind"].as_str().unwrap_or("?").to_string(),
            )
        })
        .collect();
    let (host_ports, switch_ports): (Vec<_>, Vec<_>) =
        kinds.iter().partition(|(peer, _)| peer.starts_with("host"));
    assert_eq!((host_ports.len(), switch_ports.len()), (2, 12));
    assert!(host_ports.iter().all(|(_, k)| k == "af_xdp"), "{kinds:?}");
    let switch_kind = if links == "memory" {
        "memory"
    } else {
        "af_xdp"
    };
    assert!(
        switch_ports.iter().all(|(_, k)| k == switch_kind),
        "{kinds:?}"
    );
    let programs = if links == "memory" { 2 } else { 14 };
    assert!(our_xdp_programs() >= xdp_before + programs);

    // Forwarding across s1, a path switch and s2, both families, and a TCP
    // stream (iperf3, 1 s).
    let out = exec_ok(&name, "a", &["ping", "-c", "3", "-i", "0.2", "10.0.2.2"]);
    assert!(out.contains("3 received"), "{out}");
    let out = exec_ok(
        &name,
        "b",
        &["ping", "-6", "-c", "3", "-i", "0.2", "fd00:1::2"],
    );
    assert!(out.contains("3 received"), "{out}");
    // Before any TCP: pings are all that crosses the links then.
    if links == "memory" {
        capture_a_memory_link_and_read_it_with_tcpdump(&name);
    }
    // A server for as many tries as it takes (a one-off server that a
    // failed try used up left the next waiting, and a CI run hung on it),
    // stopped once a client has its report; the testbed's teardown ends
    // what runs in its namespaces.
    let mut server = Command::new(&bins().testbed)
        .args(["exec", "--name", &name, "b", "--", "iperf3", "-s"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let report: Value = loop {
        let o = tool(&[
            "exec", "--name", &name, "a", "--", "iperf3", "-c", "10.0.2.2", "-t", "1", "-J",
        ]);
        // The server may not listen yet, or a try may fail on its way:
        // try again until the deadline.
        let report: Option<Value> = serde_json::from_slice(&o.stdout).ok();
        match report {
            Some(r) if o.status.success() && r["end"]["sum_received"]["bytes"].is_number() => {
                break r
            }
            _ => assert!(Instant::now() < deadline, "iperf3: {}", stdout(&o)),
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = server.kill();
    let _ = server.wait();
    let received = report["end"]["sum_received"]["bytes"].as_f64().unwrap();
    assert!(received > 100_000.0, "{report:#}");

    // Every switch its own stats file (its own name, the shared pid) and
    // control socket; the hosts' switches forwarded the stream, the path
    // switches between them too (half of it at least: the files are
    // rewritten every 200 ms, so the last part may not be counted yet).
    let dir = format!("/run/lcmp-testbed/{name}");
    let mut path_tx = 0;
    for sw in SWITCHES {
        let text = std::fs::read_to_string(format!("{dir}/{sw}.stats.json")).unwrap();
        let st: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(st["switch"], sw);
        assert_eq!(st["pid"].as_u64(), Some(u64::from(pid)));
        assert!(Path::new(&format!("{dir}/{sw}.sock")).exists());
        if sw.starts_with('p') {
            path_tx += st["counters"]["tx_bytes"].as_u64().unwrap();
        } else {
            assert!(
                st["counters"]["tx_bytes"].as_f64().unwrap() > received / 2.0,
                "{sw}: {st:#}"
            );
        }
    }
    assert!(
        path_tx as f64 > received / 2.0,
        "path switches forwarded {path_tx} B"
    );
    let replies = ctl_status(&name);
    let mut names: Vec<String> = replies
        .iter()
        .map(|r| r["switch"].as_str().unwrap_or("?").to_string())
        .collect();
    names.sort();
    assert_eq!(names, ["p1", "p2", "p3", "s1", "s2"], "{replies:#?}");
    for r in &replies {
        // Each socket answers with its own switch's status.
        let reply = r["reply"].to_string();
        assert!(reply.contains(&format!("\"pid\":{pid}")), "{r:#}");
        assert!(
            reply.contains(&format!("\"switch\":{}", r["switch"])),
            "{r:#}"
        );
    }

    // SIGTERM stops every switch: the sockets are removed by the switch
    // itself and every XDP program is detached.
    // SAFETY: kill(2) on the pid of the switch process this test started.
    unsafe {
        libc::kill(pid as i32, libc::SIGTERM);
    }
    wait_exit(pid);
    for sw in SWITCHES {
        let sock = format!("{dir}/{sw}.sock");
        assert!(!Path::new(&sock).exists(), "{sock} left");
    }
    wait_xdp_programs(xdp_before);
    assert_ne!(status_json(&name)["health"], "ok");
    ok(&["down", "--name", &name]);
    assert_eq!(
        list_with_prefix(&format!("lcmptb-{name}-")),
        Vec::<String>::new()
    );

    // kill -9 of the one process, then `down`: nothing left.
    let name = unique_name("one");
    let _down = Down(name.clone());
    let mut args = vec!["--switch-processes", "one", "--no-agent"];
    args.extend_from_slice(links_args);
    up_2dc(&name, &args);
    let pid = shared_pid(&name);
    // SAFETY: as above.
    unsafe {
        libc::kill(pid as i32, libc::SIGKILL);
    }
    wait_exit(pid);
    let o = tool(&["status", "--name", &name]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    ok(&["down", "--name", &name]);
    assert_eq!(
        list_with_prefix(&format!("lcmptb-{name}-")),
        Vec::<String>::new()
    );
    assert!(!Path::new(&format!("/run/lcmp-testbed/{name}")).exists());
    wait_xdp_programs(xdp_before);
}

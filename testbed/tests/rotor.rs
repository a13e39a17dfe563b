//! Rotor networks through `lcmp-testbed` (root): a rotor network file comes
//! up with the ordinary testbed commands (the agent gives the switches
//! their epoch), and its slot boundaries hold at the receiving hosts: no
//! frame crosses outside the circuit windows of its ToR pair, and the
//! median window's boundary error is within Delta_r / 10 (the p99 is
//! reported, not asserted: see the test). Each test uses its own
//! testbed name and takes it down on every exit path.

use std::path::PathBuf;

use lcmp_netlab::netns::list_with_prefix;
use lcmp_netlab::require_root;
use lcmp_topology::rotor;
use lcmp_topology::rotor_net::{RotorNetwork, RotorRouting};
use serde_json::Value;

mod common;
use common::*;

/// A complete-schedule network of 4 ToRs x 2 rotors with direct routing,
/// Delta = 10 ms, Delta_r = 1 ms, c = 100 Mbit/s, written to a file of its
/// own.
fn small_network_file(tag: &str) -> PathBuf {
    let s = rotor::complete(4, 2).unwrap();
    let mut net = RotorNetwork::from_schedule(&s, 10_000_000, 1_000_000);
    net.routing = Some(RotorRouting::Direct);
    let path = std::env::temp_dir().join(format!("{tag}-{}.toml", std::process::id()));
    std::fs::write(&path, net.to_toml()).unwrap();
    path
}

#[test]
fn a_rotor_network_file_comes_up_and_down() {
    require_root!();
    let _s = serial();
    rotor_network_up_and_down(&[], "veth");
}

#[test]
fn a_rotor_network_with_memory_links_comes_up_and_down() {
    require_root!();
    let _s = serial();
    rotor_network_up_and_down(&["--links", "memory"], "memory");
}

/// Up with `extra` (links of kind `links`: veths and a process per switch,
/// or memory links and one process), what status, the agent and lcmp-ctl
/// say, a ping through two rotors, down.
fn rotor_network_up_and_down(extra: &[&str], links: &str) {
    let name = unique_name("ru");
    let _down = Down(name.clone());
    let file = small_network_file(&name);
    let mut args = vec!["up", "--name", &name, "--topology", file.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = ok(&args);
    assert!(out.contains("switch rotor1"), "{out}");
    let s = status_json(&name);
    assert_eq!(s["health"], "ok", "{s:#}");
    assert_eq!(s["links"], links, "{s:#}");
    let pids: std::collections::BTreeSet<u64> = s["switches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["pid"].as_u64().unwrap())
        .collect();
    assert_eq!(
        pids.len(),
        if links == "memory" { 1 } else { 6 },
        "{pids:?}"
    );
    let switches: Vec<&str> = s["switches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        switches,
        ["tor0", "tor1", "tor2", "tor3", "rotor0", "rotor1"]
    );
    let tor2 = &s["switches"][2];
    let ports: Vec<&str> = tor2["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["ifname"].as_str().unwrap())
        .collect();
    assert_eq!(ports, ["u0", "u1", "h0"]);
    assert_eq!(tor2["ports"][1]["peer"], "rotor1:2");
    assert_eq!(s["hosts"][3]["addresses"][0], "10.3.0.2/24");
    // The switches read the state directory's copy; the agent gave them
    // all one epoch (the file has none).
    let net =
        RotorNetwork::load(std::path::Path::new(s["topology_file"].as_str().unwrap())).unwrap();
    assert_eq!(net.epoch_unix_ns, None);
    let agent: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(format!("/run/lcmp-testbed/{name}/agent.json")).unwrap(),
    )
    .unwrap();
    let epoch = agent["epoch_unix_ns"].as_u64().unwrap();
    assert_eq!(agent["epochs_set"], 6, "{agent:#}");
    let out = std::process::Command::new(&bins().ctl)
        .args(["--testbed", &name, "-s", "rotor1", "rotor"])
        .output()
        .unwrap();
    let rotor = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        rotor.contains(&format!("epoch {epoch} ns (agent)")),
        "{rotor}"
    );
    // exec reaches a host, whose ping crosses two rotors' circuits (a
    // period of 20 ms: the wait is several periods).
    let ping = ok(&[
        "exec", "--name", &name, "h0x0", "--", "ping", "-c", "3", "-i", "0.05", "-W", "1",
        "10.2.0.2",
    ]);
    assert!(ping.contains("3 received"), "{ping}");
    let list = ok(&["list"]);
    assert!(
        list.lines()
            .any(|l| l.starts_with(&format!("{name}\t")) && l.ends_with("\tok")),
        "{list}"
    );
    ok(&["down", "--name", &name]);
    assert_eq!(
        list_with_prefix(&format!("lcmptb-{name}-")),
        Vec::<String>::new()
    );
    let _ = std::fs::remove_file(file);
}

#[test]
fn slot_boundaries_hold_at_the_hosts() {
    require_root!();
    let _s = serial();
    let name = unique_name("rt");
    let _down = Down(name.clone());
    // tor0 streams to tor1 at 1.2 c for 3 s: its queue for tor1 is
    // backlogged whenever their circuit (rotor 0, every other slot) comes
    // up.
    let out = ok(&[
        "rotor-timing",
        "--name",
        &name,
        "--tors",
        "4",
        "--rotors",
        "2",
        "--slot-us",
        "10000",
        "--reconfig-us",
        "1000",
        "--rate-mbps",
        "100",
        "--from",
        "0",
        "--to",
        "1",
        "--load",
        "1.2",
        "--seconds",
        "3",
        "--json",
    ]);
    let r: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let us = |v: &Value| v.as_f64().map_or(f64::NAN, |v| v / 1e3);
    for (what, key) in [
        ("circuit (send stamps)", "boundary"),
        ("arrival", "arrival"),
    ] {
        let b = &r[key];
        eprintln!(
            "slot boundary error, {what}, Delta 10 ms, Delta_r 1 ms: p50 {:.1} us, p99 {:.1} us, \
             max {:.1} us over {} windows ({} empty); median start error {:.1} us; {} frames, \
             {} outside every window",
            us(&b["p50_ns"]),
            us(&b["p99_ns"]),
            us(&b["max_ns"]),
            b["windows"].as_array().map_or(0, Vec::len),
            b["empty_windows"],
            us(&b["start_p50_ns"]),
            b["arrivals"],
            b["strays"].as_array().map_or(0, Vec::len),
        );
    }
    eprintln!(
        "tor0's own slot lateness p50 {:.1} us p99 {:.1} us; drops {}",
        us(&r["sender_lateness"]["p50_ns"]),
        us(&r["sender_lateness"]["p99_ns"]),
        r["drops"]
    );
    let floor = &r["platform_floor"];
    eprintln!(
        "machine floor: {:.3} % of instants more than Delta_r/10 late for a thread reading the clock",
        floor["late_share"].as_f64().unwrap() * 100.0
    );
    let b = &r["boundary"];
    // The data moved: 3 s of 20 ms periods is about 150 windows of up to
    // 75 frames, every one delivered with its send stamp.
    let frames = b["arrivals"].as_u64().unwrap();
    let windows = b["windows"].as_array().unwrap().len();
    assert!(frames >= 1000, "only {frames} frames arrived");
    assert!(windows >= 100, "only {windows} windows measured");
    assert_eq!(r["unstamped"], 0, "frames delivered without a send stamp");
    // Nothing crossed an unmatched port: every frame's crossing lies in a
    // window of tor0 -> tor1.
    let strays = b["strays"].as_array().unwrap();
    assert!(
        strays.is_empty(),
        "{} frames crossed outside every window of tor0 -> tor1",
        strays.len()
    );
    // Delta_r / 10, for the median window. The p99 is printed above but
    // not asserted: it is a timing figure, and on a shared two-core VM a
    // thread that does nothing but read the clock already misses a few
    // tenths of a percent of instants by more than 100 us (the machine
    // floor printed above), more with the testbed running; see
    // docs/rotor.md.
    let bound = r["bound_ns"].as_f64().unwrap();
    assert_eq!(bound, 100_000.0);
    let p50 = b["p50_ns"].as_f64().unwrap();
    assert!(
        p50 <= bound,
        "median slot boundary error {:.1} us > Delta_r/10 = {:.1} us",
        p50 / 1e3,
        bound / 1e3
    );
}

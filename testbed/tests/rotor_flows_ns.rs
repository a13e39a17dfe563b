//! `lcmp-testbed rotor-experiment` with `transport = "ndp"` on the
//! namespaces (root): lcmp-switch processes trimming at K and `lcmp-traffic
//! client --transport ndp --serve` on every host. The same file runs on
//! the virtual engine; the two must draw the same flows (the cross-check
//! compares like with like), and at light load the namespaces finish
//! every flow and deliver what was offered. The testbed has its own name
//! and is taken down on every exit path.

use std::path::Path;

use lcmp_netlab::require_root;
use serde_json::Value;

mod common;
use common::*;

/// 4 ToRs x 2 rotors, one host each, Delta 4 ms, Delta_r 400 us, 25
/// Mbit/s (rotor-flows.toml's figures at half its ToRs), RotorNet
/// direct, all-to-all at 10 % of the host link, websearch / 100: a host
/// offers 2.5 Mbit/s, 2.5e6 / 8 / 17.1 kB = 18 flows/s, about 220 flows
/// in the 3 s window over the 4 hosts.
fn config(name: &str) -> String {
    format!(
        r#"
name = "{name}"
transport = "ndp"
tors = 4
rotors = 2
hosts_per_tor = 1
slot_us = 4000
reconfig_us = 400
rate_mbps = 25
designs = ["complete"]
patterns = ["all-to-all"]
workload = "websearch"
size_scale = 100
loads = [0.1]
trim_packets = [8]
warmup_s = "500ms"
window_s = "3s"
drain_s = "3s"
min_rto_us = 400000
propagation_ns = 200000
seed = 5
"#
    )
}

fn summary(out: &Path) -> Value {
    let text = std::fs::read_to_string(out.join("summary.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn arrived(run: &Value) -> u64 {
    run["short_arrived"].as_u64().unwrap() + run["long_arrived"].as_u64().unwrap()
}

fn finished(run: &Value) -> u64 {
    run["short_finished"].as_u64().unwrap() + run["long_finished"].as_u64().unwrap()
}

#[test]
fn ndp_flows_on_namespaces_are_the_virtual_engines_flows() {
    require_root!();
    let _s = serial();
    let name = unique_name("rf");
    let _down = Down(name.clone());
    let dir = scratch_dir("rotor-flows-ns", &name);
    let cfg = write_file(&dir, "flows.toml", &config(&name));
    let cfg = cfg.to_str().unwrap();
    let ns = dir.join("ns");
    let virt = dir.join("virtual");
    ok(&[
        "rotor-experiment",
        "--config",
        cfg,
        "--out",
        ns.to_str().unwrap(),
    ]);
    ok(&[
        "rotor-experiment",
        "--config",
        cfg,
        "--engine",
        "virtual",
        "--out",
        virt.to_str().unwrap(),
    ]);
    let (ns_run, v_run) = (&summary(&ns)["runs"][0], &summary(&virt)["runs"][0]);
    eprintln!("namespaces: {ns_run}\nvirtual: {v_run}");
    assert_eq!(ns_run["design"], "complete");
    assert_eq!(ns_run["load"], 0.1);
    assert_eq!(ns_run["buffer_pkts"], 8);
    // The same seeds, id ranges and destinations: the same arrivals in
    // the window, on whichever clock.
    assert!(arrived(v_run) > 100, "{v_run}");
    assert_eq!(arrived(ns_run), arrived(v_run));
    assert_eq!(ns_run["short_arrived"], v_run["short_arrived"]);
    // Light load: every flow finishes, and the receivers take in about
    // what arrived (the draw's own load; flows straddle the window's
    // edges, so not exactly).
    assert_eq!(finished(ns_run), arrived(ns_run), "{ns_run}");
    let u = ns_run["downlink_utilization"].as_f64().unwrap();
    let a = ns_run["arrived_load"].as_f64().unwrap();
    assert!(u > 0.5 * a && u < 1.5 * a, "utilization {u}, arrived {a}");
    // Every host's flows, log and receiver counters are kept.
    let run_dir = ns.join("runs").join("complete-all-to-all-load0.1-k8");
    for h in ["h0x0", "h3x0"] {
        for f in [
            format!("{h}.csv"),
            format!("{h}.stats.json"),
            format!("{h}.log"),
        ] {
            assert!(run_dir.join(&f).is_file(), "no {f} in {run_dir:?}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

//! `lcmp-testbed rotor-experiment` with `transport = "ndp"`: the flow
//! experiments on rotor networks (NDP hosts, trimming ToRs, Poisson
//! arrivals) on the virtual engine, through the CLI: what `summary.json`
//! keeps per run, that two runs write the same bytes, that light load
//! finishes every flow, the shipped experiment files, and the input it
//! refuses in one line.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_lcmp-testbed");

mod common;

fn scratch(tag: &str) -> PathBuf {
    common::scratch_dir("rotor-flows", tag)
}

fn testbed(args: &[&str]) -> Output {
    common::run_without_switches(BIN, args)
}

fn config(dir: &Path, text: &str) -> PathBuf {
    common::write_file(dir, "flows.toml", text)
}

/// 4 ToRs x 2 rotors, two hosts each, 10 Gbit/s, 10 us slots with 1 us
/// reconfiguration and a 500 ns guard; RotorNet direct and Mars (de
/// Bruijn of degree 2: 4 = 2^2); all-to-all; loads 5 and 20 %, K 4 and
/// 8: 2 designs x 1 pattern x 2 loads x 2 Ks = 8 runs.
const CONFIG: &str = r#"
engine = "virtual"
transport = "ndp"
tors = 4
rotors = 2
hosts_per_tor = 2
slot_us = 10
reconfig_us = 1
rate_mbps = 10000
mars_degree = 2
designs = ["complete", "mars"]
patterns = ["all-to-all"]
workload = "websearch"
loads = [0.05, 0.2]
trim_packets = [4, 8]
warmup_s = "1ms"
window_s = "4ms"
drain_s = "30ms"
propagation_ns = 500
seed = 3
"#;

fn run(cfg: &Path, out: &Path) -> Output {
    testbed(&[
        "rotor-experiment",
        "--config",
        cfg.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ])
}

#[test]
fn a_flow_experiment_keeps_every_run_and_repeats_to_the_byte() {
    let dir = scratch("runs");
    let cfg = config(&dir, CONFIG);
    let (a, b) = (dir.join("a"), dir.join("b"));
    for out in [&a, &b] {
        let o = run(&cfg, out);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let summary = std::fs::read(a.join("summary.json")).unwrap();
    assert_eq!(summary, std::fs::read(b.join("summary.json")).unwrap());
    assert_eq!(
        std::fs::read(a.join("report.md")).unwrap(),
        std::fs::read(b.join("report.md")).unwrap()
    );

    let s: Value = serde_json::from_slice(&summary).unwrap();
    let runs = s["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 8);
    // In the order designs x patterns x loads x Ks.
    let keys: Vec<(String, f64, u64)> = runs
        .iter()
        .map(|r| {
            (
                r["design"].as_str().unwrap().to_string(),
                r["load"].as_f64().unwrap(),
                r["buffer_pkts"].as_u64().unwrap(),
            )
        })
        .collect();
    let mut want = Vec::new();
    for d in ["complete", "mars"] {
        for l in [0.05, 0.2] {
            for k in [4, 8] {
                want.push((d.to_string(), l, k));
            }
        }
    }
    assert_eq!(keys, want);
    for r in runs {
        assert_eq!(r["pattern"], "all-to-all");
        let u = r["downlink_utilization"].as_f64().unwrap();
        let load = r["load"].as_f64().unwrap();
        // delivered_fraction is the utilization over the load.
        let f = r["delivered_fraction"].as_f64().unwrap();
        assert!((f - u / load).abs() < 1e-9, "{r}");
        // Unique payload cannot exceed the links' capacity.
        assert!(u > 0.0 && u <= 1.0, "{r}");
        for key in ["p99_fct_short_us", "p99_fct_long_us"] {
            assert!(r.get(key).is_some(), "no {key} in {r}");
        }
    }
    // At 5 % load with K = 8 on Mars nothing waits long: every flow that
    // arrived in the window finished within the 30 ms drain.
    let light = runs
        .iter()
        .find(|r| r["design"] == "mars" && r["load"] == 0.05 && r["buffer_pkts"] == 8)
        .unwrap();
    assert_eq!(light["short_finished"], light["short_arrived"], "{light}");
    assert_eq!(light["long_finished"], light["long_arrived"], "{light}");
    assert!(light["p99_fct_short_us"].as_f64().is_some(), "{light}");
    // Counter changes per run, and the plots.
    assert!(a.join("runs").read_dir().unwrap().count() >= 8);
    for p in [
        "flow-utilization",
        "flow-buffer",
        "flow-fct",
        "flow-occupancy",
    ] {
        assert!(a.join("plots").join(format!("{p}.svg")).is_file(), "{p}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The shipped Mars experiments are valid as they stand (checked without
/// running them: an unknown design would be refused before any run).
#[test]
fn the_shipped_mars_experiments_pass_validation() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for f in [
        "mars-64.toml",
        "mars-64-buffers.toml",
        "mars-64-window.toml",
    ] {
        let text = std::fs::read_to_string(root.join("experiments").join(f)).unwrap();
        // Same file with a design that does not exist: refused by name,
        // which shows everything before it in the file was accepted.
        let bad = text.replace("\"complete\", ", "\"nonesuch\", \"complete\", ");
        assert_ne!(bad, text, "{f} lists complete first");
        let dir = scratch(&format!("shipped-{f}"));
        let cfg = config(&dir, &bad);
        let o = run(&cfg, &dir.join("out"));
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("nonesuch"), "{f}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{f}: {err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn bad_flow_experiments_are_refused_in_one_line() {
    let cases = [
        // An unknown design.
        (
            CONFIG.replace("\"complete\", \"mars\"", "\"complete\", \"opera\""),
            "opera",
        ),
        // A load above what the hosts can send (loads are fractions of
        // the host link).
        (CONFIG.replace("[0.05, 0.2]", "[0.05, 1.5]"), "1.5"),
        // A network that cannot be scheduled: de Bruijn degree 3 on 2
        // rotors.
        (
            CONFIG.replace("mars_degree = 2", "mars_degree = 3"),
            "mars_degree",
        ),
        // Flow sizes cannot grow.
        (format!("{CONFIG}size_scale = 0.5\n"), "size_scale = 0.5"),
        // K = 0.
        (CONFIG.replace("[4, 8]", "[0, 8]"), "trim_packets"),
    ];
    for (i, (text, needle)) in cases.iter().enumerate() {
        let dir = scratch(&format!("bad{i}"));
        let cfg = config(&dir, text);
        let o = run(&cfg, &dir.join("out"));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "case {i} ran");
        assert!(err.contains(needle), "case {i}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "case {i}: {err}");
        assert!(!dir.join("out").join("summary.json").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}

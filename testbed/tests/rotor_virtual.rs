//! `lcmp-testbed rotor-experiment --engine virtual`: the rotor throughput
//! experiment with the whole network in one process on the virtual clock,
//! through the CLI (no root, no namespaces): what it writes, that two runs
//! write the same bytes, the delivered bytes worked out by hand, and the
//! options it refuses.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_lcmp-testbed");

mod common;

fn scratch(tag: &str) -> PathBuf {
    common::scratch_dir("rotor-virtual", tag)
}

fn testbed(args: &[&str]) -> Output {
    common::run_without_switches(BIN, args)
}

fn config(dir: &Path, text: &str) -> PathBuf {
    common::write_file(dir, "rotor.toml", text)
}

/// 4 ToRs x 2 rotors, one host each, RotorNet's complete graph with direct
/// routing; Delta 1 ms, Delta_r 100 us (and the file format's 20 us
/// guard), c = 25 Mbit/s, so a 1500-byte frame takes 480 us on an uplink:
/// one fits a slot (100 + 480 <= 980; a second would end at 1060). Each
/// host offers U x c = 50 Mbit/s, a frame every 240 us, far more than its
/// circuits carry, so its ToR's queues are full from the first slots on.
const CONFIG: &str = r#"
engine = "virtual"
tors = 4
rotors = 2
hosts_per_tor = 1
slot_us = 1000
reconfig_us = 100
rate_mbps = 25
buffer_bytes = 50000
designs = ["complete"]
patterns = ["all-to-all", "permutation"]
warmup_s = "50ms"
window_s = "200ms"
load = 1.0
frame_bytes = 1500
flows_per_destination = 2
seed = 1
"#;

/// Every file under `dir` by its path below `dir`, with its bytes.
fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                let bytes = std::fs::read(&p).unwrap();
                out.insert(p.strip_prefix(dir).unwrap().to_path_buf(), bytes);
            }
        }
    }
    out
}

#[test]
fn a_virtual_run_writes_the_results_and_two_runs_write_the_same_bytes() {
    let dir = scratch("run");
    let cfg = config(&dir, CONFIG);
    let (a, b) = (dir.join("a"), dir.join("b"));
    for out in [&a, &b] {
        let o = testbed(&[
            "rotor-experiment",
            "--config",
            cfg.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(
            o.status.success(),
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        let table = String::from_utf8_lossy(&o.stdout);
        assert!(table.contains("complete          permutation"), "{table}");
    }
    let fa = files(&a);
    let names: Vec<String> = fa.keys().map(|p| p.display().to_string()).collect();
    for want in [
        "experiment.toml",
        "summary.json",
        "report.md",
        "plots/rotor-throughput.svg",
        "plots/rotor-throughput.png",
        "runs/complete-all-to-all.json",
        "runs/complete-permutation.json",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} missing: {names:?}");
    }
    assert_eq!(fa, files(&b), "two runs wrote different files");

    let summary: Value =
        serde_json::from_str(&String::from_utf8_lossy(&fa[Path::new("summary.json")])).unwrap();
    assert_eq!(summary["config"]["engine"], "virtual");
    let run = |pattern: &str| {
        summary["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["pattern"] == pattern)
            .unwrap()
            .clone()
    };
    // The complete graph on 4 ToRs with 2 rotors: 3 shifts and an idle
    // matching, each in one of a period's 2 slots x 2 uplinks. A ToR's
    // circuit to a given other ToR is up in one slot of every 2 ms period
    // and carries one frame then, 580 us into the slot (or 1580 us into
    // the period). The window [50 ms, 250 ms) holds 100 periods whole, so
    // 100 frames per (ToR, destination ToR) pair that has traffic.
    // Permutation: 4 pairs, 400 frames of 1500 bytes = 600 kB, of
    // n_t U c x window = 4 x 2 x 25 Mbit/s x 0.2 s = 5 MB: 12 %.
    let perm = run("permutation");
    assert_eq!(perm["delivered_bytes"], 600_000);
    assert!((perm["delivered_fraction"].as_f64().unwrap() - 0.12).abs() < 1e-12);
    // All-to-all: every ToR to the 3 others, each queue fed 2.8 times
    // faster than its circuit drains it: 12 pairs, 1.8 MB, 36 %.
    let all = run("all-to-all");
    assert_eq!(all["delivered_bytes"], 1_800_000);
    // Each host received an equal share: 9 % of the normalization.
    for f in all["delivered_fraction_per_tor"].as_array().unwrap() {
        assert!((f.as_f64().unwrap() - 0.09).abs() < 1e-12, "{all}");
    }
    // Nothing on the virtual clock is late, and the rotors dropped nothing.
    assert_eq!(perm["lateness_p99_ns"], 0);
    assert_eq!(perm["rotor_counters"]["drops.reconfiguring"], 0.0);
    // The report's table row (its layout is the report's own).
    let report = String::from_utf8_lossy(&fa[Path::new("report.md")]).to_string();
    let row = report
        .lines()
        .find(|l| l.starts_with('|') && l.contains("complete") && l.contains("permutation"))
        .unwrap_or_else(|| panic!("no permutation row: {report}"));
    assert!(row.contains("12.0 %") && row.contains("22.5 %"), "{row}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// One line on stderr and exit code 2, nothing written.
fn refused(args: &[&str], needle: &str) {
    let o = testbed(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: {err}");
}

#[test]
fn what_configures_the_namespaces_is_refused_under_the_virtual_engine() {
    let dir = scratch("refused");
    let cfg = config(&dir, CONFIG);
    let cfg = cfg.to_str().unwrap();
    let out = dir.join("out");
    let out = out.to_str().unwrap();
    let base = ["rotor-experiment", "--config", cfg, "--out", out];
    let with = |extra: &[&'static str]| -> Vec<&str> {
        base.iter().copied().chain(extra.iter().copied()).collect()
    };
    refused(
        &with(&["--links", "veth"]),
        "(--links) makes the namespaces' ToR-rotor links: not with engine virtual",
    );
    refused(
        &with(&["--name", "rv"]),
        "--name names the namespaces' testbed: not with engine virtual",
    );
    refused(
        &with(&["--engine", "wall", "--links", "memory"]),
        "(--links) makes the namespaces' ToR-rotor links: not with engine wall",
    );
    let bogus = config(&dir.join("bogus"), &CONFIG.replace("\"virtual\"", "\"vm\""));
    refused(
        &[
            "rotor-experiment",
            "--config",
            bogus.to_str().unwrap(),
            "--out",
            out,
        ],
        "engine = \"vm\": one of namespaces, virtual, wall",
    );
    let args = config(
        &dir.join("args"),
        &format!("{CONFIG}switch_args = [\"--slot-spin-us\", \"200\"]\n"),
    );
    refused(
        &[
            "rotor-experiment",
            "--config",
            args.to_str().unwrap(),
            "--out",
            out,
        ],
        "switch_args are lcmp-switch command-line arguments",
    );
    assert!(!Path::new(out).exists(), "a refused run wrote {out}");
    let _ = std::fs::remove_dir_all(&dir);
}

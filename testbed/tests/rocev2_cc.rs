//! `lcmp-testbed experiment --engine virtual` with each RoCEv2 congestion
//! control (`cc` under `transport = "rocev2"`): the five-flow trace of
//! fixtures/virtual-trace.txt from a to b over topologies/2dc-3path.toml,
//! LCMP and ECMP, in one process on the virtual clock (no root, no
//! namespaces). HPCC's switches push INT hops and its senders read them;
//! TIMELY and DCTCP run without INT; a kernel's CC is refused.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_lcmp-testbed");

/// The trace's 926, 60,000, 20,000, 3,000 and 100,000 bytes: 1 + 60 + 20
/// + 3 + 100 = 184 packets of at most 1,000 bytes.
const PACKETS: u64 = 184;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A fresh directory of this test process, absent.
fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lcmp-cc-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// The experiment of fixtures/virtual-2dc.toml with `cc`, written into
/// `dir` (its paths absolute).
fn config(dir: &Path, cc: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let file = dir.join("experiment.toml");
    let text = format!(
        "name = \"cc\"\ntopology = {:?}\nfrom = \"s1\"\nto = \"s2\"\n\
         policies = [\"lcmp\", \"ecmp\"]\ntransport = \"rocev2\"\nengine = \"virtual\"\n\
         trace = {:?}\ntrace_format = \"hpcc-fct\"\ndrain_s = 1\ncc = {cc:?}\n",
        root().join("topologies/2dc-3path.toml"),
        root().join("testbed/tests/fixtures/virtual-trace.txt"),
    );
    std::fs::write(&file, text).unwrap();
    file
}

fn experiment(dir: &Path, cc: &str) -> Output {
    let cfg = config(dir, cc);
    // No lcmp-switch or lcmp-traffic is needed: point both at nothing.
    Command::new(BIN)
        .args(["experiment", "--config", cfg.to_str().unwrap(), "--out"])
        .arg(dir.join("out"))
        .env("LCMP_SWITCH_BIN", "/nonexistent/lcmp-switch")
        .env("LCMP_TRAFFIC_BIN", "/nonexistent/lcmp-traffic")
        .output()
        .expect("lcmp-testbed runs")
}

fn run_ok(tag: &str, cc: &str) -> PathBuf {
    let dir = scratch(tag);
    let o = experiment(&dir, cc);
    assert!(
        o.status.success(),
        "{cc}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    dir.join("out")
}

fn json(file: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(file).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// Every flow of the trace completed, each packet sent once, and the
/// summary names the CC; returns the hosts' counters of each policy's run.
fn check_completed(out: &Path, cc: &str) -> Vec<(String, Value)> {
    let summary = json(&out.join("summary.json"));
    assert_eq!(summary["experiment"]["cc"], cc, "{}", summary["experiment"]);
    let mut hosts = Vec::new();
    for policy in ["lcmp", "ecmp"] {
        let dir = out
            .join("runs")
            .join(format!("virtual-trace-{policy}-seed1"));
        let mut rd = csv::Reader::from_path(dir.join("flows.csv")).unwrap();
        let rows: Vec<std::collections::BTreeMap<String, String>> =
            rd.deserialize().map(Result::unwrap).collect();
        assert_eq!(rows.len(), 5, "{cc} {policy}: {rows:?}");
        for r in &rows {
            assert_eq!(r["status"], "ok", "{cc} {policy}: {r:?}");
        }
        let h = json(&dir.join("hosts.json"));
        assert_eq!(u(&h["a"]["host"]["flows_completed"]), 5, "{cc}: {}", h["a"]);
        assert_eq!(u(&h["a"]["sender"]["packets"]), PACKETS, "{cc}: {}", h["a"]);
        assert_eq!(u(&h["b"]["receiver"]["data_packets"]), PACKETS);
        hosts.push((policy.to_string(), h));
    }
    hosts
}

/// The switch-wide `int_pushed` counter of `switch` in `dir`'s snapshot.
fn int_pushed(dir: &Path, switch: &str) -> u64 {
    let snap = json(&dir.join(format!("switch-{switch}.json")));
    u(&snap["counters"]["int_pushed"])
}

#[test]
fn hpcc_switches_push_int_hops_that_every_sender_reads() {
    let out = run_ok("hpcc", "hpcc");
    for (policy, h) in check_completed(&out, "hpcc") {
        let dir = out
            .join("runs")
            .join(format!("virtual-trace-{policy}-seed1"));
        // Each data packet leaves s1, one of p1..p3 and s2 once (none is
        // retransmitted): a hop pushed at each, PACKETS per stage.
        assert_eq!(int_pushed(&dir, "s1"), PACKETS, "{policy}");
        let transit: u64 = ["p1", "p2", "p3"]
            .iter()
            .map(|sw| int_pushed(&dir, sw))
            .sum();
        assert_eq!(transit, PACKETS, "{policy}");
        assert_eq!(int_pushed(&dir, "s2"), PACKETS, "{policy}");
        // b echoes the hops in every answer, a reads each echo and reacts
        // to it: the trace's flows each fit in one RTT (100 KB at 10
        // Gbit/s is 80 us, the shortest RTT 8 ms), so HPCC's reactions are
        // its fast ones, between the once-per-RTT full updates.
        let (a, b) = (&h["a"]["sender"], &h["b"]["receiver"]);
        assert_eq!(
            u(&b["int_echoes_sent"]),
            u(&b["acks_sent"]),
            "{policy}: {b}"
        );
        assert_eq!(u(&a["int_echoes"]), PACKETS, "{policy}: {a}");
        assert_eq!(u(&a["int_overflows"]), 0, "{policy}: {a}");
        assert!(u(&a["cc_fast_reactions"]) > 0, "{policy}: {a}");
        assert_eq!(u(&a["timestamp_echoes"]), 0, "{policy}: {a}");
    }
}

#[test]
fn timely_and_dctcp_complete_without_int() {
    for cc in ["timely", "dctcp"] {
        let out = run_ok(cc, cc);
        for (policy, h) in check_completed(&out, cc) {
            let dir = out
                .join("runs")
                .join(format!("virtual-trace-{policy}-seed1"));
            // No collect block in their packets, and the switches are
            // not asked to push any.
            assert_eq!(int_pushed(&dir, "s1"), 0, "{cc} {policy}");
            assert_eq!(u(&h["a"]["sender"]["int_echoes"]), 0, "{cc} {policy}");
            // TIMELY's answers echo the send time of every data packet.
            let echoes = u(&h["b"]["receiver"]["timestamp_echoes_sent"]);
            if cc == "timely" {
                assert_eq!(echoes, u(&h["b"]["receiver"]["acks_sent"]), "{policy}");
            } else {
                assert_eq!(echoes, 0, "{policy}");
            }
        }
    }
}

#[test]
fn a_kernel_cc_under_rocev2_is_refused_in_one_line() {
    let dir = scratch("bbr");
    let o = experiment(&dir, "bbr");
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains(
            "cc (--cc) under transport rocev2: unknown congestion control \"bbr\": \
             expected one of dcqcn, hpcc, timely, dctcp"
        ),
        "{err}"
    );
    assert!(!dir.join("out").exists(), "nothing is written");
}

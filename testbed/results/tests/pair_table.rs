//! The report of a trace between any two DCs: a run directory made by
//! hand (three DC pairs, two policies, flows.csv with `src_dc`, `dst_dc`
//! and `ideal_ns` as the runner writes them) through
//! `report::write_report`. The slowdowns are chosen, and the medians,
//! p99s and groups below worked out by hand (type 7 quantiles: h =
//! (n - 1) p, v[floor h] + frac(h) x the step to the next).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use lcmp_results::analysis::{build_summary, IdealModel, RunInput};
use lcmp_results::report;
use lcmp_traffic::record::{FlowRecord, FlowStatus};
use serde_json::json;

/// Every flow is 1000 bytes; a pair's ideal is its base RTT + 1 ns a
/// byte (8 Gbit/s, per byte as the simulator's standalone FCT).
const SIZE: u64 = 1000;

/// (src, dst, ideal_ns) of the three pairs, in the echo's order (not by
/// name: the table follows the echo).
const PAIRS: [(&str, &str, u64); 3] = [
    ("DC1", "DC2", 10_001_000),
    ("DC2", "DC3", 20_001_000),
    ("DC1", "DC3", 16_001_000),
];

/// Per policy and pair, the slowdowns of its flows (`None`: unfinished).
fn slowdowns(policy: &str, pair: usize) -> Vec<Option<f64>> {
    let s = |v: &[f64]| v.iter().map(|&x| Some(x)).collect::<Vec<_>>();
    match (policy, pair) {
        ("lcmp", 0) => s(&[1.0, 2.0, 3.0]),
        ("lcmp", 1) => s(&[1.5, 2.5]),
        ("lcmp", 2) => [s(&[4.0, 4.0, 8.0, 2.0]), vec![None]].concat(),
        ("ecmp", 0) => s(&[1.0, 1.0, 5.0]),
        ("ecmp", 1) => s(&[3.0, 3.0]),
        ("ecmp", 2) => s(&[10.0, 20.0, 30.0, 40.0]),
        _ => unreachable!(),
    }
}

fn ideal_of(base_rtt_ns: u64) -> IdealModel {
    IdealModel {
        base_rtt_ns,
        bottleneck_bps: 8_000_000_000,
        rtts: 1.0,
        mss_bytes: 1,
        wire_bytes_per_segment: 1,
    }
}

/// The run's flows, and the pair columns the runner writes after them.
fn flows(policy: &str) -> Vec<(FlowRecord, &'static str, &'static str, u64)> {
    let mut out = Vec::new();
    for (k, &(src, dst, ideal)) in PAIRS.iter().enumerate() {
        for s in slowdowns(policy, k) {
            let id = out.len() as u64;
            let mut f = FlowRecord::arrived(
                id,
                &format!("{}h1", src.to_lowercase()),
                &format!("{}h1", dst.to_lowercase()),
                "10.1.0.2:1".into(),
                "10.2.0.2:2".into(),
                SIZE,
                id * 1000,
                false,
            );
            if let Some(s) = s {
                f.fct_ns = Some((s * ideal as f64) as u64);
                f.status = FlowStatus::Ok;
            }
            out.push((f, src, dst, ideal));
        }
    }
    out
}

/// flows.csv: the record's columns, then `src_dc,dst_dc,ideal_ns`.
fn flows_csv(rows: &[(FlowRecord, &str, &str, u64)]) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    for (f, ..) in rows {
        w.serialize(f).unwrap();
    }
    let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
    let mut lines = text.lines();
    let mut out = format!("{},src_dc,dst_dc,ideal_ns\n", lines.next().unwrap());
    for (line, (_, src, dst, ideal)) in lines.zip(rows) {
        out += &format!("{line},{src},{dst},{ideal}\n");
    }
    out
}

/// What the runner echoes per pair of switches: two pairs of switches
/// for DC1 -> DC2 (base RTTs 10.5 and 10 ms: the pair's is the smaller);
/// DC2 -> DC3 over two alike paths (one choice); DC1 -> DC3 over three,
/// two of them alike (two choices).
fn experiment() -> serde_json::Value {
    let path =
        |rtt_us: u64| json!({"configured_rtt_us": rtt_us, "bottleneck_bps": 8_000_000_000u64});
    json!({
        "ideal": {
            "definition": "each flow's own, its DC pair's",
            "pairs": [
                {"from": "x2", "to": "y1", "src_dc": "DC1", "dst_dc": "DC2", "base_rtt_ns": 10_500_000},
                {"from": "x1", "to": "y1", "src_dc": "DC1", "dst_dc": "DC2", "base_rtt_ns": 10_000_000},
                {"from": "y1", "to": "z1", "src_dc": "DC2", "dst_dc": "DC3", "base_rtt_ns": 20_000_000},
                {"from": "x1", "to": "z1", "src_dc": "DC1", "dst_dc": "DC3", "base_rtt_ns": 16_000_000},
            ]
        },
        "calibration": {
            "ok": true,
            "pairs": [
                {"from": "x2", "to": "y1", "paths": [path(10_500)]},
                {"from": "x1", "to": "y1", "paths": [path(10_000)]},
                {"from": "y1", "to": "z1", "paths": [path(20_000), path(20_000)]},
                {"from": "x1", "to": "z1", "paths": [path(16_000), path(16_000), path(30_000)]},
            ]
        }
    })
}

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lcmp-pairs-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn input(policy: &str, flows: Vec<FlowRecord>, ideals: HashMap<u64, IdealModel>) -> RunInput {
    RunInput {
        policy: policy.into(),
        workload: "trace".into(),
        load: 0.3,
        seed: 1,
        flows,
        paths: Vec::new(),
        port_tx_bytes: Vec::new(),
        window_s: 1.0,
        calibration_ok: true,
        calibration_notes: Vec::new(),
        flow_paths: HashMap::new(),
        deadline_ns: Some(1_000_000_000),
        transport_counters: Default::default(),
        switch_drops: Default::default(),
        flow_ideals: ideals,
    }
}

/// A run directory of lcmp and ecmp over [`PAIRS`].
fn all_pairs_run(dir: &Path) -> lcmp_results::analysis::Summary {
    let mut inputs = Vec::new();
    for policy in ["lcmp", "ecmp"] {
        let rows = flows(policy);
        let run = dir.join(format!("runs/trace-{policy}-seed1"));
        std::fs::create_dir_all(&run).unwrap();
        std::fs::write(run.join("flows.csv"), flows_csv(&rows)).unwrap();
        let ideals = rows
            .iter()
            .map(|(f, _, _, ideal)| (f.id, ideal_of(ideal - SIZE)))
            .collect();
        inputs.push(input(
            policy,
            rows.into_iter().map(|r| r.0).collect(),
            ideals,
        ));
    }
    // No run-wide ideal: every flow has its own.
    build_summary(experiment(), &inputs, &IdealModel::default())
}

#[test]
fn the_pair_table_by_hand() {
    let dir = temp("by-hand");
    let summary = all_pairs_run(&dir);
    report::write_report(&dir, &summary, &[]).unwrap();
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();

    // The all-flows view first, then the pairs, then the rest.
    let at = |s: &str| md.find(s).unwrap_or_else(|| panic!("no {s:?} in\n{md}"));
    assert!(at("### Slowdown by flow size") < at("### By DC pair"));
    assert!(at("### LCMP vs baselines") < at("### By DC pair"));
    assert!(at("### By DC pair") < at("## Calibration"));
    assert!(md.contains("3 DC pairs."), "{md}");

    // Per pair, median / p99 (flows):
    // - DC1 -> DC2, lcmp 1, 2, 3: median 2; p99 h = 1.98: 2 + 0.98 = 2.98.
    //   ecmp 1, 1, 5: median 1; p99 1 + 0.98 x 4 = 4.92.
    // - DC2 -> DC3, lcmp 1.5, 2.5: median 2; p99 h = 0.99: 2.49. ecmp 3, 3.
    // - DC1 -> DC3, lcmp 2, 4, 4, 8 (and one unfinished, not counted):
    //   median h = 1.5: 4; p99 h = 2.97: 4 + 0.97 x 4 = 7.88. ecmp 10, 20,
    //   30, 40: median 25; p99 30 + 0.97 x 10 = 39.7.
    // Base RTTs: DC1 -> DC2's smaller one, 10 ms. Paths: DC2 -> DC3's two
    // alike count once, DC1 -> DC3 has 16 and 30 ms.
    let table = "\
| DC pair | base RTT | paths | lcmp: median / p99 (flows) | ecmp: median / p99 (flows) |
| --- | --- | --- | --- | --- |
| DC1 → DC2 | 10.0 ms | 1 | 2.00 / 2.98 (3) | 1.00 / 4.92 (3) |
| DC2 → DC3 | 20.0 ms | 1 | 2.00 / 2.49 (2) | 3.00 / 3.00 (2) |
| DC1 → DC3 | 16.0 ms | 2 | 4.00 / 7.88 (4) | 25.0 / 39.7 (4) |
";
    assert!(md.contains(table), "{md}");
    // Groups: one path, DC1 -> DC2 and DC2 -> DC3 pooled: lcmp 1, 1.5, 2,
    // 2.5, 3: median 2; p99 h = 3.96: 2.5 + 0.96 x 0.5 = 2.98. ecmp 1, 1,
    // 3, 3, 5: median 3; p99 3 + 0.96 x 2 = 4.92. Two paths: DC1 -> DC3.
    let groups = "\
| paths | DC pairs | lcmp: median / p99 (flows) | ecmp: median / p99 (flows) |
| --- | --- | --- | --- |
| 1 | 2: DC1 → DC2, DC2 → DC3 | 2.00 / 2.98 (5) | 3.00 / 4.92 (5) |
| 2 | 1: DC1 → DC3 | 4.00 / 7.88 (4) | 25.0 / 39.7 (4) |
";
    assert!(md.contains(groups), "{md}");
    assert!(
        md.contains("Not in these figures, flows that did not complete: lcmp 1 ("),
        "{md}"
    );
    // Nothing per pair of switches in the report: counted, in summary.json.
    assert!(
        md.contains("| ideal.pairs | 4 pairs of switches: in summary.json"),
        "{md}"
    );
    assert!(!md.contains("x2"), "{md}");

    // pairs.csv: a line per pair and policy, with p90 and mean. lcmp
    // DC1 -> DC3: p90 h = 2.7: 4 + 0.7 x 4 = 6.8; mean 18 / 4 = 4.5.
    let mut rd = csv::Reader::from_path(dir.join("pairs.csv")).unwrap();
    let head: Vec<String> = rd.headers().unwrap().iter().map(String::from).collect();
    assert_eq!(
        head,
        [
            "workload",
            "load",
            "policy",
            "src_dc",
            "dst_dc",
            "base_rtt_ns",
            "paths",
            "flows",
            "not_completed",
            "median",
            "p90",
            "p99",
            "mean"
        ]
    );
    let rows: Vec<HashMap<String, String>> = rd
        .records()
        .map(|r| {
            head.iter()
                .cloned()
                .zip(r.unwrap().iter().map(String::from))
                .collect()
        })
        .collect();
    assert_eq!(rows.len(), 6);
    let keys: HashSet<(String, String, String)> = rows
        .iter()
        .map(|r| {
            (
                r["policy"].clone(),
                r["src_dc"].clone(),
                r["dst_dc"].clone(),
            )
        })
        .collect();
    assert_eq!(keys.len(), 6);
    let r = rows
        .iter()
        .find(|r| r["policy"] == "lcmp" && r["src_dc"] == "DC1" && r["dst_dc"] == "DC3")
        .unwrap();
    let f = |k: &str| r[k].parse::<f64>().unwrap();
    assert_eq!(
        (&r["workload"][..], &r["base_rtt_ns"][..], &r["paths"][..]),
        ("trace", "16000000", "2")
    );
    assert_eq!((&r["flows"][..], &r["not_completed"][..]), ("4", "1"));
    for (k, want) in [("median", 4.0), ("p90", 6.8), ("p99", 7.88), ("mean", 4.5)] {
        assert!((f(k) - want).abs() < 1e-9, "{k}: {r:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_run_between_one_pair_has_no_pair_section_and_no_pairs_csv() {
    let dir = temp("one-pair");
    let mut rows = flows("lcmp");
    rows.truncate(3);
    let run = dir.join("runs/trace-lcmp-seed1");
    std::fs::create_dir_all(&run).unwrap();
    let mut w = csv::Writer::from_path(run.join("flows.csv")).unwrap();
    for (f, ..) in &rows {
        w.serialize(f).unwrap();
    }
    w.flush().unwrap();
    let inputs = [input(
        "lcmp",
        rows.into_iter().map(|r| r.0).collect(),
        HashMap::new(),
    )];
    let summary = build_summary(json!({}), &inputs, &ideal_of(10_000_000));
    report::write_report(&dir, &summary, &[]).unwrap();
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert_eq!(md, report::render_report(&summary, &[]));
    assert!(!md.contains("By DC pair"), "{md}");
    assert!(!dir.join("pairs.csv").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

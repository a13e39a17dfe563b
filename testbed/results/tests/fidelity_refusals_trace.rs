//! `lcmp-testbed fidelity --trace FILE` (issue 29, item 9): the trace a
//! replay ran, given where summary.json's relative path does not resolve
//! from the current directory; refused for a run that replayed none.

use std::path::{Path, PathBuf};

use lcmp_results::analysis::{build_summary, IdealModel, RunInput};
use lcmp_results::fidelity::{self, Selector};
use lcmp_traffic::record::{FlowRecord, FlowStatus};
use serde_json::{json, Value};

/// The ideal of 1448 bytes is 20 ms + 1 us.
const IDEAL: u64 = 20_001_000;

fn flow(id: u64, fct: Option<u64>, warmup: bool) -> FlowRecord {
    let mut f = FlowRecord::arrived(
        id,
        "dc1h1",
        "dc8h1",
        "a".into(),
        "b".into(),
        1448,
        0,
        warmup,
    );
    if let Some(fct) = fct {
        f.fct_ns = Some(fct);
        f.status = FlowStatus::Ok;
    }
    f
}

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lcmp-fid-refusal-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// summary.json and runs/*/flows.csv of lcmp: ids 0 and 1 completed at
/// slowdowns 2 and 4, 2 a warm-up flow, 3 unfinished.
fn run(dir: &Path, experiment: Value) {
    let flows = vec![
        flow(0, Some(2 * IDEAL), false),
        flow(1, Some(4 * IDEAL), false),
        flow(2, Some(IDEAL), true),
        flow(3, None, false),
    ];
    let input: RunInput = serde_json::from_value(json!({
        "policy": "lcmp", "workload": "websearch", "load": 0.3, "seed": 1,
        "flows": flows, "paths": [], "port_tx_bytes": [], "window_s": 1.0,
        "calibration_ok": true, "calibration_notes": []
    }))
    .unwrap();
    let summary = build_summary(
        experiment,
        &[input],
        &IdealModel::new(10_000_000, 12_112_000_000),
    );
    std::fs::write(
        dir.join("summary.json"),
        serde_json::to_string(&summary).unwrap(),
    )
    .unwrap();
    let runs = dir.join("runs/websearch-load0.3-lcmp-seed1");
    std::fs::create_dir_all(&runs).unwrap();
    let mut w = csv::Writer::from_path(runs.join("flows.csv")).unwrap();
    for f in &flows {
        w.serialize(f).unwrap();
    }
    w.flush().unwrap();
    std::fs::write(
        dir.join("ref.txt"),
        "0b000101 0b007a01 10000 100 1000 2000000000 1000000 1000000\n\
         0b000101 0b007a01 10001 100 2000 2000000000 1000000 1000000\n\
         0b000101 0b007a01 10002 100 4000 2000000000 1000000 1000000\n",
    )
    .unwrap();
}

#[test]
fn the_trace_can_be_given_where_its_relative_path_does_not_resolve() {
    let dir = temp("trace-given");
    let rel = format!(
        "no-such-dir-lcmp-fidelity-{}/fct_lcmp.txt",
        std::process::id()
    );
    run(
        &dir,
        json!({"name": "replay", "trace": {"file": rel, "format": "hpcc-fct"}}),
    );
    // The trace: flow i of 1000 (i + 1) bytes.
    let trace = dir.join("trace.txt");
    let lines: String = (1..=4)
        .map(|k| {
            format!(
                "0b000101 0b007a01 {} 100 {} 0 1000000 1000000\n",
                9999 + k,
                1000 * k
            )
        })
        .collect();
    std::fs::write(&trace, lines).unwrap();
    let refs = [("lcmp".to_string(), dir.join("ref.txt"))];
    let sel = Selector {
        trace: Some(trace),
        ..Selector::default()
    };
    let r = fidelity::compute(&dir, &refs, &[], &sel).unwrap();
    // Bucketed by the trace's sizes: the started non-warm-up flows 0, 1
    // and 3 are 1000, 2000 and 4000 bytes there (one bucket each); 0 and 1
    // completed.
    let b = &r.policies[0].buckets;
    assert_eq!(
        b.iter()
            .map(|b| (b.ours_lo, b.ours_flows))
            .collect::<Vec<_>>(),
        [(1000, 1), (2000, 1), (4000, 0)]
    );

    // A run that replayed no trace: --trace is a mistake, said so.
    let poisson = temp("trace-poisson");
    run(&poisson, json!({"name": "poisson"}));
    let refs = [("lcmp".to_string(), poisson.join("ref.txt"))];
    let e = fidelity::compute(&poisson, &refs, &[], &sel).unwrap_err();
    assert_eq!(
        String::from(e),
        format!(
            "--trace {}: {} has no experiment.trace.file (the run replayed no trace)",
            dir.join("trace.txt").display(),
            poisson.join("summary.json").display()
        )
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&poisson);
}

//! The fidelity figures by hand.

use std::path::{Path, PathBuf};

use lcmp_traffic::record::{FlowRecord, FlowStatus};

use super::*;
use crate::analysis::{IdealModel, DEFAULT_BUCKETS};
use crate::trace::TraceFormat;

fn close(a: Option<f64>, b: f64, tol: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() <= tol)
}

#[test]
fn pearson_by_hand() {
    assert!(close(
        pearson(&[1.0, 2.0, 3.0], &[2.0, 4.0, 6.0]),
        1.0,
        1e-12
    ));
    assert!(close(
        pearson(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]),
        -1.0,
        1e-12
    ));
    // Means 2.5, 2.75; sum dx dy = 5.5, sum dx^2 = 5, sum dy^2 = 8.75:
    // r = 5.5 / sqrt(43.75) = 0.83152.
    assert!(close(
        pearson(&[1.0, 2.0, 3.0, 4.0], &[1.0, 3.0, 2.0, 5.0]),
        0.8315,
        5e-5
    ));
    // Constant series, too few points, unequal lengths: undefined.
    assert_eq!(pearson(&[1.0, 2.0, 3.0], &[5.0, 5.0, 5.0]), None);
    assert_eq!(pearson(&[0.1; 3], &[1.0, 2.0, 3.0]), None);
    assert_eq!(pearson(&[1.0], &[2.0]), None);
    assert_eq!(pearson(&[1.0, 2.0], &[1.0]), None);
    assert_eq!(pearson(&[1.0, f64::NAN], &[1.0, 2.0]), None);
}

#[test]
fn log_pearson_skips_empty_buckets() {
    // ln 2, ln 4, ln 8 = (1, 2, 3) ln 2 against 3, 9, 27 = (1, 2, 3) ln 3.
    let pairs = [
        (Some(2.0), Some(3.0)),
        (None, Some(100.0)),
        (Some(4.0), Some(9.0)),
        (Some(8.0), Some(27.0)),
    ];
    assert!(close(log_pearson(pairs), 1.0, 1e-12));
    // ln of (1, e, e^2) against (1, 2, 3) is (0, 1, 2): r = 1 on logs,
    // while r of the raw values is below 1.
    let e = std::f64::consts::E;
    assert!(close(
        log_pearson([
            (Some(1.0), Some(e)),
            (Some(e), Some(e * e)),
            (Some(e * e), Some(e.powi(3)))
        ]),
        1.0,
        1e-12
    ));
    assert_eq!(log_pearson([(Some(2.0), Some(3.0))]), None);
}

#[test]
fn slowdowns_are_clamped_at_one() {
    let t = crate::trace::parse(
        "0b000101 0b007a01 1 100 1000 0 30 20\n0b000101 0b007a01 1 100 2000 0 10 20\n",
        TraceFormat::HpccFct,
        "r",
    )
    .unwrap();
    assert_eq!(reference_samples(&t), [(1000, 1.5), (2000, 1.0)]);
    // 1448 bytes: 40 ms + 121.12 us (see analysis' tests).
    let ideal = IdealModel::new(20_000_000, 100_000_000);
    let rec = |id, fct: Option<u64>, warmup, status| FlowRecord {
        id,
        sender: "h1".into(),
        receiver: "h2".into(),
        src: String::new(),
        dst: String::new(),
        size_bytes: 1448,
        start_ns: 0,
        fct_ns: fct,
        min_rtt_us: None,
        status,
        error: String::new(),
        warmup,
        path: None,
        switch_path: None,
        reverse_switch_path: None,
    };
    let flows = [
        rec(1, Some(80_242_240), false, FlowStatus::Ok),
        rec(2, Some(20_000_000), false, FlowStatus::Ok),
        rec(3, Some(80_242_240), true, FlowStatus::Ok),
        rec(4, None, false, FlowStatus::Unfinished),
    ];
    assert_eq!(our_samples(&flows, &ideal), [(1448, 2.0), (1448, 1.0)]);
}

#[test]
fn log_slowdown_buckets_by_hand() {
    // Three sizes, two flows each: size_buckets(.., 20) gives one bucket
    // per size. Ours: (2, 2), (4, 4), (8, 8): medians = p99s = 2, 4, 8.
    let ours = [
        (100, 2.0),
        (100, 2.0),
        (200, 4.0),
        (200, 4.0),
        (300, 8.0),
        (300, 8.0),
    ];
    // Reference: (1, 3), (3, 5), (5, 11): medians 2, 4, 8 (r = 1);
    // p99s 1 + 0.99 x 2 = 2.98, 4.98, 10.94.
    let reference = [
        (10, 1.0),
        (10, 3.0),
        (20, 3.0),
        (20, 5.0),
        (30, 5.0),
        (30, 11.0),
    ];
    let sizes = |v: &[(u64, f64)]| v.iter().map(|&(s, _)| s).collect::<Vec<_>>();
    let o = side_buckets(&sizes(&ours), &ours, DEFAULT_BUCKETS);
    let r = side_buckets(&sizes(&reference), &reference, DEFAULT_BUCKETS);
    assert_eq!(o.bounds, [(100, 100), (200, 200), (300, 300)]);
    assert_eq!(r.counts, [2, 2, 2]);
    assert!(close(r.p99s[2], 10.94, 1e-12));
    let (b, r_med, r_p99, notes) = compare(&o, &r);
    assert_eq!(b.len(), 3);
    assert_eq!((b[1].ours_lo, b[1].reference_hi), (200, 20));
    assert!(close(r_med, 1.0, 1e-12));
    // x = ln 2 (1, 2, 3); y = ln 2.98, ln 4.98, ln 10.94 =
    // 1.091923, 1.605430, 2.392426: dy = -0.604670, -0.091163, 0.695833;
    // r = (0.604670 + 0.695833) / sqrt(2 x 0.858119) = 0.99271.
    assert!(close(r_p99, 0.9927, 5e-5));
    assert!(notes.is_empty(), "{notes:?}");
    // A constant side: r undefined, said so.
    let flat = SideBuckets {
        medians: vec![Some(3.0); 3],
        ..o.clone()
    };
    let (_, r_med, _, notes) = compare(&flat, &r);
    assert_eq!(r_med, None);
    assert_eq!(
        notes,
        ["r at the median undefined: ours is constant over the buckets"]
    );
    // Unequal bucket counts: the first ones are compared.
    let short = side_buckets(&[100, 100], &[(100, 2.0), (100, 2.0)], DEFAULT_BUCKETS);
    let (b, r_med, _, notes) = compare(&short, &r);
    assert_eq!((b.len(), r_med), (1, None));
    assert_eq!(notes[0], "ours has 1 size buckets, the reference 3 (equal sizes straddling a cut merge buckets): compared the first 1");
    assert_eq!(
        notes[1],
        "r at the median undefined: 1 bucket(s) with values on both sides"
    );
}

#[test]
fn pooled_concatenates_policies() {
    let pf = |meds: [f64; 2], refs: [f64; 2]| PolicyFidelity {
        policy: "p".into(),
        reference_file: String::new(),
        runs: 1,
        ours_flows: 2,
        reference_flows: 2,
        ours_not_completed: None,
        distance: Distance::default(),
        ours_excess_ms_per_mb: None,
        reference_excess_ms_per_mb: None,
        floor: None,
        ours_quantiles: vec![],
        reference_quantiles: vec![],
        buckets: (0..2)
            .map(|k| BucketPair {
                bucket: k,
                ours_lo: 0,
                ours_hi: 0,
                ours_flows: 1,
                ours_median: Some(meds[k]),
                ours_p99: Some(meds[k]),
                reference_lo: 0,
                reference_hi: 0,
                reference_flows: 1,
                reference_median: Some(refs[k]),
                reference_p99: Some(refs[k]),
            })
            .collect(),
        r_median: None,
        r_p99: None,
        ours_median: None,
        ours_p99: None,
        reference_median: None,
        reference_p99: None,
        notes: vec![],
    };
    // Logs (base e^1): ours 0, 1 | 2, 3 ; reference 0, 1 | 3, 2.
    let e = std::f64::consts::E;
    let a = pf([1.0, e], [1.0, e]);
    let b = pf([e * e, e.powi(3)], [e.powi(3), e * e]);
    // x = 0, 1, 2, 3 and y = 0, 1, 3, 2 (means 1.5): sum dx dy =
    // 2.25 + 0.25 + 0.75 + 0.75 = 4, sum dx^2 = sum dy^2 = 5: r = 0.8.
    let (m, p) = pooled(&[a, b]);
    assert!(close(m, 0.8, 1e-12));
    assert!(close(p, 0.8, 1e-12));
}

#[test]
fn reference_arguments() {
    assert_eq!(
        parse_reference("lcmp=a/fct.txt").unwrap(),
        ("lcmp".to_string(), PathBuf::from("a/fct.txt"))
    );
    assert_eq!(
        parse_reference("lcmp").unwrap_err(),
        "expected POLICY=FILE (e.g. lcmp=fct_lcmp.txt), not \"lcmp\""
    );
    assert!(parse_reference("=x").is_err());
}

fn record(id: u64, size: u64, fct: Option<u64>, warmup: bool) -> FlowRecord {
    FlowRecord {
        id,
        sender: "dc1h1".into(),
        receiver: "dc8h1".into(),
        src: String::new(),
        dst: String::new(),
        size_bytes: size,
        start_ns: id * 1000,
        fct_ns: fct,
        min_rtt_us: None,
        status: if fct.is_some() {
            FlowStatus::Ok
        } else {
            FlowStatus::Unfinished
        },
        error: String::new(),
        warmup,
        path: None,
        switch_path: None,
        reverse_switch_path: None,
    }
}

#[test]
fn distance_by_hand() {
    let e = std::f64::consts::E;
    // ln: ours (1, 2), the reference (0, 1). W1: the sorted pairs differ
    // by 1 and 1: 1. KS: after 0: |0 - 1/2|; after 1: |1/2 - 1|; after
    // 2: 0: 1/2. Medians (e + e^2) / 2 and (1 + e) / 2: ratio e; p99s
    // e + 0.99 (e^2 - e) = e (1 + 0.99 (e - 1)) and 1 + 0.99 (e - 1):
    // ratio e.
    let d = distance(&[e, e * e], &[1.0, e]);
    assert!(close(d.w1_ln_slowdown, 1.0, 1e-12), "{d:?}");
    assert!(close(d.ks_ln_slowdown, 0.5, 1e-12), "{d:?}");
    assert!(close(d.median_ratio, e, 1e-12), "{d:?}");
    assert!(close(d.p99_ratio, e, 1e-12), "{d:?}");
    // An empty side: nothing defined.
    assert_eq!(distance(&[], &[1.0]), Distance::default());
    // CDF curve: the quantiles at 0, 0.01, ..., 1 of (1, 3): 1 + 2p.
    let q = cdf_quantiles(&[1.0, 3.0]);
    assert_eq!(q.len(), CDF_LEVELS);
    assert_eq!((q[0], q[50], q[100]), (1.0, 2.0, 3.0));
    assert!(cdf_quantiles(&[]).is_empty());
}

#[test]
fn excess_per_mb_is_the_slope_between_the_end_buckets() {
    // Two 1 MB flows 1 and 3 ms beyond ideal (median 2 ms), one 2 MB
    // flow 100 ms beyond, two 3 MB flows 5 and 7 ms beyond (median 6):
    // 5 flows, 20 buckets asked: one per size. (6 - 2) ms / (3 - 1) MB
    // = 2 ms/MB; the middle bucket does not count.
    let samples = [
        (1_000_000, 1e6),
        (3_000_000, 7e6),
        (2_000_000, 100e6),
        (1_000_000, 3e6),
        (3_000_000, 5e6),
    ];
    assert!(close(excess_ms_per_mb(&samples), 2.0, 1e-12));
    // A negative excess (faster than the standalone FCT) counts as is:
    // medians -1 and 6 ms: 3.5 ms/MB.
    let samples = [(1_000_000, -1e6), (3_000_000, 6e6)];
    assert!(close(excess_ms_per_mb(&samples), 3.5, 1e-12));
    // One size: no slope.
    assert_eq!(excess_ms_per_mb(&[(1000, 1.0), (1000, 2.0)]), None);
    assert_eq!(excess_ms_per_mb(&[]), None);
}

#[test]
fn reference_excess_is_fct_minus_standalone() {
    let t = crate::trace::parse(
        "0b000101 0b007a01 1 100 1000 0 30 20\n0b000101 0b007a01 1 100 2000 0 10 20\n",
        TraceFormat::HpccFct,
        "r",
    )
    .unwrap();
    assert_eq!(reference_excess(&t), [(1000, 10.0), (2000, -10.0)]);
}

#[test]
fn our_excess_is_in_model_time_per_unscaled_byte() {
    // 1448 bytes: ideal 40 ms + 121.12 us = 40_121_120 ns (see
    // slowdowns_are_clamped_at_one). FCT 10 ms beyond it under a time
    // dilation of 10: 1 ms = 1e6 ns of model time; sizes scaled by
    // 1000: 1_448_000 bytes unscaled.
    let ideal = IdealModel::new(20_000_000, 100_000_000);
    let scale = ModelScale {
        size_scale: 1000.0,
        time_scale: 10.0,
    };
    let flows = [
        record(1, 1448, Some(50_121_120), false),
        record(2, 1448, Some(50_121_120), true),
        record(3, 1448, None, false),
        // 20 ms beyond: 2 ms of model time.
        record(7, 1448, Some(60_121_120), false),
    ];
    let none = |_: &FlowRecord| None;
    assert_eq!(
        our_excess(&flows, &ideal, scale, &none),
        [(1_448_000, 1e6), (1_448_000, 2e6)]
    );
    // A replayed flow's size is its trace's.
    let trace = |f: &FlowRecord| (f.id == 7).then_some(1_500_000);
    assert_eq!(
        our_excess(&flows, &ideal, scale, &trace),
        [(1_448_000, 1e6), (1_500_000, 2e6)]
    );
    assert_eq!(
        ModelScale::of_experiment(&serde_json::json!({"size_scale": 1000.0, "time_scale": 10.0})),
        scale
    );
    assert_eq!(
        ModelScale::of_experiment(&serde_json::json!({"time_scale": 0.0})),
        ModelScale::UNSCALED
    );
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lcmp-fidelity-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// An hpcc-fct line per `(size, standalone_ns, slowdown)`.
fn write_reference(path: &Path, flows: &[(u64, u64, u64)]) {
    let text: String = flows
        .iter()
        .map(|&(size, standalone, s)| {
            format!(
                "0b000101 0b007a01 10000 100 {size} 2000000000 {} {standalone}\n",
                s * standalone
            )
        })
        .collect();
    std::fs::write(path, text).unwrap();
}

/// A run directory of lcmp, one seed, sizes scaled by 1000 and time
/// dilated by 2; ideal = 1 ms + 1 ns per byte.
fn hand_made_run(dir: &Path) {
    let ideal = IdealModel {
        base_rtt_ns: 1_000_000,
        bottleneck_bps: 8_000_000_000,
        rtts: 1.0,
        mss_bytes: 1,
        wire_bytes_per_segment: 1,
    };
    // Slowdowns 2 and 4 at 1000 bytes (ideal 1_001_000 ns), 4 and 8 at
    // 3000 (ideal 1_003_000), plus a warm-up and an unfinished flow.
    let flows = vec![
        record(0, 1000, Some(2 * 1_001_000), false),
        record(1, 1000, Some(4 * 1_001_000), false),
        record(2, 3000, Some(4 * 1_003_000), false),
        record(3, 3000, Some(8 * 1_003_000), false),
        record(4, 1000, Some(100 * 1_001_000), true),
        record(5, 3000, None, false),
    ];
    let mut input = crate::analysis::tests::run("lcmp", 1, &[]);
    input.flows = flows.clone();
    let summary = crate::analysis::build_summary(
        serde_json::json!({"size_scale": 1000.0, "time_scale": 2.0}),
        &[input],
        &ideal,
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
    // The reference: 1 MB flows (standalone 2 ms) at slowdowns 1 and 2,
    // 3 MB flows (standalone 4 ms) at 4 and 8. The rerun: 1 and 1, 4
    // and 8.
    write_reference(
        &dir.join("ref.txt"),
        &[
            (1_000_000, 2_000_000, 1),
            (1_000_000, 2_000_000, 2),
            (3_000_000, 4_000_000, 4),
            (3_000_000, 4_000_000, 8),
        ],
    );
    write_reference(
        &dir.join("rerun.txt"),
        &[
            (1_000_000, 2_000_000, 1),
            (1_000_000, 2_000_000, 1),
            (3_000_000, 4_000_000, 8),
            (3_000_000, 4_000_000, 4),
        ],
    );
}

#[test]
fn fidelity_of_hand_made_files_with_the_floor() {
    let dir = temp_dir("floor");
    hand_made_run(&dir);
    let refs = [("lcmp".to_string(), dir.join("ref.txt"))];
    let reruns = [("lcmp".to_string(), dir.join("rerun.txt"))];
    let r = run_fidelity(&dir, &refs, &reruns).unwrap();
    let p = &r.policies[0];
    assert_eq!((p.ours_flows, p.ours_not_completed), (4, Some(1)));
    let ln2 = std::f64::consts::LN_2;
    // ln slowdown in units of ln 2: ours 1, 2, 2, 3; the reference 0, 1,
    // 2, 3. W1: the sorted pairs differ by 1, 1, 0, 0: 0.5 ln 2 =
    // 0.34657. KS: after 0: |0 - 1/4|, after 1: |1/4 - 1/2|, after 2:
    // |3/4 - 3/4|: 1/4.
    assert!(close(p.distance.w1_ln_slowdown, 0.5 * ln2, 1e-12), "{p:?}");
    assert!(close(p.distance.ks_ln_slowdown, 0.25, 1e-12), "{p:?}");
    // Medians: ours (2, 4, 4, 8) 4, the reference's (1, 2, 4, 8) 3:
    // 4/3. p99 (h = 2.97): 4 + 0.97 x 4 = 7.88 on both sides: 1.
    assert!(close(p.distance.median_ratio, 4.0 / 3.0, 1e-12), "{p:?}");
    assert!(close(p.distance.p99_ratio, 1.0, 1e-12), "{p:?}");
    // Ours per MB: excess = (slowdown - 1) ideal / 2 (the dilation), at
    // 1 MB (1000 bytes x 1000): 1_001_000 / 2 and 3 x 1_001_000 / 2,
    // median 1_001_000 ns; at 3 MB: 3 x 1_003_000 / 2 and 7 x
    // 1_003_000 / 2, median 5 x 1_003_000 / 2 = 2_507_500 ns.
    // (2_507_500 - 1_001_000) ns / 2e6 bytes = 0.75325 ms/MB.
    assert!(close(p.ours_excess_ms_per_mb, 0.75325, 1e-12), "{p:?}");
    // The reference: excess 0 and 2 ms at 1 MB (median 1 ms), 12 and 28
    // ms at 3 MB (median 20 ms): 19 ms / 2 MB = 9.5 ms/MB.
    assert!(close(p.reference_excess_ms_per_mb, 9.5, 1e-12), "{p:?}");
    // The floor, rerun ln (0, 0, 2, 3) ln 2 against (0, 1, 2, 3) ln 2:
    // W1 0.25 ln 2 = 0.17329; KS: after 0: |1/2 - 1/4|, after 1:
    // |1/2 - 1/2|: 1/4. Medians 2.5 / 3; p99 7.88 / 7.88. Per MB: 0 at
    // 1 MB, 20 ms at 3 MB: 10 ms/MB.
    let f = p.floor.as_ref().expect("floor");
    assert!(close(f.distance.w1_ln_slowdown, 0.25 * ln2, 1e-12), "{f:?}");
    assert!(close(f.distance.ks_ln_slowdown, 0.25, 1e-12), "{f:?}");
    assert!(close(f.distance.median_ratio, 2.5 / 3.0, 1e-12), "{f:?}");
    assert!(close(f.distance.p99_ratio, 1.0, 1e-12), "{f:?}");
    assert!(close(f.rerun_excess_ms_per_mb, 10.0, 1e-12), "{f:?}");
    assert_eq!(f.rerun_flows, 4);
    // A measured floor for LCMP: the quoted one is not cited.
    assert_eq!(r.quoted_floor_lcmp_w1, None);
    assert_eq!(p.ours_quantiles.len(), CDF_LEVELS);
    assert_eq!(
        (p.reference_quantiles[0], p.reference_quantiles[100]),
        (1.0, 8.0)
    );

    // The headline first in every output.
    let text = render_text(&r);
    let row = |name: &str| -> Vec<String> {
        text.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} in {text}"))
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    assert_eq!(
        row("lcmp "),
        [
            "lcmp", "0.347", "0.250", "1.33", "1.00", "4.00", "3.00", "7.88", "7.88", "0.75",
            "9.50"
        ],
        "{text}"
    );
    assert_eq!(
        row("lcmp floor"),
        [
            "lcmp", "floor", "0.173", "0.250", "0.83", "1.00", "2.50", "3.00", "7.88", "7.88",
            "10.00", "9.50"
        ],
        "{text}"
    );
    assert!(
        text.find("lcmp floor").unwrap() < text.find("secondary").unwrap(),
        "{text}"
    );
    assert!(text.contains("measures that the policies differ"), "{text}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("fidelity.json")).unwrap()).unwrap();
    let pj = &json["policies"][0];
    assert!((pj["w1_ln_slowdown"].as_f64().unwrap() - 0.5 * ln2).abs() < 1e-12);
    assert_eq!(pj["reference_excess_ms_per_mb"], 9.5);
    assert_eq!(pj["floor"]["rerun_flows"], 4);
    assert_eq!(pj["floor"]["ks_ln_slowdown"], 0.25);
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(
        md.contains("| lcmp | `") && md.contains("| 1 | 4 / 4 | 0.347 | 0.250 | 1.33 (4.00 / 3.00) | 1.00 (7.88 / 7.88) | 0.75 / 9.50 |"),
        "{md}"
    );
    assert!(
        md.contains("| 0.173 | 0.250 | 0.83 (2.50 / 3.00) | 1.00 (7.88 / 7.88) | 10.0 / 9.50 |"),
        "{md}"
    );
    assert!(
        md.find("W1 ln slowdown").unwrap() < md.find("### Secondary").unwrap(),
        "{md}"
    );

    // No second run: no floor, and the quoted one cited as quoted.
    let r = run_fidelity(&dir, &refs, &[]).unwrap();
    assert_eq!(r.policies[0].floor, None);
    assert_eq!(r.quoted_floor_lcmp_w1, Some(QUOTED_FLOOR_LCMP_W1));
    assert!(render_text(&r).contains("floor, quoted (issue 26), not measured here"));
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(
        md.contains("Floor, quoted (issue 26), not measured here"),
        "{md}"
    );

    // A rerun without its first run, or twice: refused.
    let bad = [("ecmp".to_string(), dir.join("rerun.txt"))];
    assert!(compute(&dir, &refs, &bad, &Selector::default()).is_err());
    let twice = [reruns[0].clone(), reruns[0].clone()];
    assert!(compute(&dir, &refs, &twice, &Selector::default()).is_err());
    let _ = std::fs::remove_dir_all(&dir);
}

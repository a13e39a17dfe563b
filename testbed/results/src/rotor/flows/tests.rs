//! The flow experiment's results, worked by hand.

use super::*;
use crate::format::DASH;
use crate::rotor::experiment::Transport;

const START: u64 = 1_000_000_000;
const END: u64 = 1_100_000_000;

fn flow(size: u64, arrival_ns: u64, fct_ns: Option<u64>) -> FlowOutcome {
    FlowOutcome {
        size,
        arrival_ns,
        fct_ns,
    }
}

/// 4 hosts at 1 Gbit/s for 0.1 s: 4e8 bits = 5e7 bytes of capacity.
fn input() -> FlowRunInput {
    let mut flows = Vec::new();
    // Short: 199 x 1000 B and one of 99 999 B (still short); 198 finish
    // in (k + 1) us, k = 0..197, 2 never.
    for k in 0..200u64 {
        let size = if k == 7 { 99_999 } else { 1000 };
        let fct = (k < 198).then_some((k + 1) * 1000);
        flows.push(flow(size, START + k * 1000, fct));
    }
    // Long: one of exactly 100 000 B (long) in 1 ms, 99 x 200 kB in
    // 2..=100 ms, one 200 kB flow never finishes.
    flows.push(flow(100_000, START, Some(1_000_000)));
    for k in 2..=100u64 {
        flows.push(flow(200_000, START + k, Some(k * 1_000_000)));
    }
    flows.push(flow(200_000, START + 5, None));
    // Outside the window (before it; at its exclusive end): ignored.
    flows.push(flow(5_000_000, START - 1, Some(1)));
    flows.push(flow(5_000_000, END, None));
    FlowRunInput {
        design: "mars".into(),
        pattern: "all-to-all".into(),
        routing: "shift-valiant".into(),
        matchings: 4,
        load: 0.25,
        buffer_pkts: 8,
        hosts: 4,
        host_rate_bps: 1_000_000_000,
        window_ns: (START, END),
        flows,
        delivered_bytes: 10_000_000,
        downlink_bytes: 12_500_000,
        occupancy: vec![
            9000, 0, 1500, 15_000, 3000, 4500, 6000, 7500, 10_500, 12_000,
        ],
        tor_counters: BTreeMap::from([("ndp.trimmed".into(), 42.0)]),
        rotor_counters: BTreeMap::new(),
    }
}

#[test]
fn a_run_by_hand() {
    let r = FlowRunResult::from_input(&input()).unwrap();
    assert_eq!(r.window_s, 0.1);
    // 1e7 B x 8 = 8e7 bits over 4 x 1e9 x 0.1 = 4e8 bits.
    assert!((r.downlink_utilization - 0.2).abs() < 1e-12);
    // 0.2 / 0.25.
    assert!((r.delivered_fraction - 0.8).abs() < 1e-12);
    // 1.25e7 B x 8 = 1e8 bits / 4e8.
    assert!((r.downlink_frame_utilization - 0.25).abs() < 1e-12);
    // Arrived bytes: 199 x 1000 + 99 999 + 100 000 + 100 x 200 000
    // = 20 398 999 B; x 8 / 4e8 = 0.40797998.
    assert!(
        (r.arrived_load - 0.407_979_98).abs() < 1e-12,
        "{}",
        r.arrived_load
    );
    assert_eq!((r.short_arrived, r.short_finished), (200, 198));
    assert_eq!((r.long_arrived, r.long_finished), (101, 100));
    // Short median: h = 199 x 0.5 = 99.5, between the 100th and 101st
    // fastest: 100 and 101 us.
    assert_eq!(r.p50_fct_short_us, Some(100.5));
    // Short p99: h = 199 x 0.99 = 197.01 needs rank 198 (0-based), one of
    // the 2 unfinished: unknown, not the finished flows' p99.
    assert_eq!(r.p99_fct_short_us, None);
    // Long (FCTs 1, 2, ..., 100 ms and one unfinished): p50 at h = 100 x
    // 0.5 = 50 -> the 51st, 51 ms; p99 at h = 100 x 0.99 = 99 (whole) ->
    // the 100th, 100 ms: the unfinished flow ranks above it. (Dropping it
    // would give h = 99 x 0.99 = 98.01 -> 99.01 ms.)
    assert_eq!(r.p50_fct_long_us, Some(51_000.0));
    assert_eq!(r.p99_fct_long_us, Some(100_000.0));
    // Occupancy, sorted 0, 1500, ..., 12 000, 15 000 (10 samples):
    // p50 h = 4.5 -> 6000 + 0.5 x 1500 = 6750; p90 h = 8.1 -> 12 000 +
    // 0.1 x 3000 = 12 300; p99 h = 8.91 -> 12 000 + 0.91 x 3000 = 14 730.
    assert_eq!(r.occupancy_samples, 10);
    assert_eq!(r.occupancy_p50_bytes, Some(6750.0));
    assert!((r.occupancy_p90_bytes.unwrap() - 12_300.0).abs() < 1e-9);
    assert!((r.occupancy_p99_bytes.unwrap() - 14_730.0).abs() < 1e-9);
    assert_eq!(r.occupancy_max_bytes, Some(15_000));
    assert_eq!(r.occupancy_cdf.len(), 101);
    assert_eq!(r.occupancy_cdf[0], (0.0, 0.0));
    assert_eq!(r.occupancy_cdf[50], (6750.0, 0.5));
    assert_eq!(r.occupancy_cdf[100], (15_000.0, 1.0));
    assert_eq!(r.tor_counters["ndp.trimmed"], 42.0);
    assert_eq!(r.id(), "mars-all-to-all-load0.25-k8");
    let line = flow_result_line(&r);
    assert_eq!(
        line,
        "mars all-to-all load 0.25 K 8: utilization 20.0 % (80 % of offered), p99 FCT short \
         unfinished long 100.0 ms (3 of 301 flows unfinished)"
    );
}

#[test]
fn empty_classes_and_bad_windows() {
    let mut i = input();
    i.flows.retain(|f| f.size >= SHORT_FLOW_BYTES);
    i.occupancy.clear();
    let r = FlowRunResult::from_input(&i).unwrap();
    assert_eq!((r.short_arrived, r.p50_fct_short_us), (0, None));
    // No short flow: a dash; unfinished ones: "unfinished".
    assert_eq!(fct_cell(r.p99_fct_short_us, r.short_arrived), DASH);
    assert_eq!(fct_cell(None, 3), "unfinished");
    assert_eq!(fct_cell(Some(250.4), 3), "250 us");
    assert_eq!(fct_cell(Some(12_345.0), 3), "12.3 ms");
    assert_eq!((r.occupancy_samples, r.occupancy_p99_bytes), (0, None));
    assert!(r.occupancy_cdf.is_empty());
    i.window_ns = (END, END);
    assert_eq!(
        FlowRunResult::from_input(&i).unwrap_err(),
        "mars/all-to-all: empty measurement window [1100000000, 1100000000) ns"
    );
    i.window_ns = (START, END);
    i.hosts = 0;
    assert!(FlowRunResult::from_input(&i)
        .unwrap_err()
        .contains("0 hosts"));
}

#[test]
fn censored_quantiles_by_rank() {
    // 3 flows, all finished: type 7 as lcmp_stats has it.
    assert_eq!(censored_quantile(&[1.0, 2.0, 4.0], 3, 0.75), Some(3.0));
    // 4 flows, 3 finished: p50 h = 1.5 needs ranks 1 and 2 (finished):
    // 2 + 0.5 x 2 = 3; p75 h = 2.25 needs rank 3, unfinished.
    assert_eq!(censored_quantile(&[1.0, 2.0, 4.0], 4, 0.5), Some(3.0));
    assert_eq!(censored_quantile(&[1.0, 2.0, 4.0], 4, 0.75), None);
    // p = 2/3 lands exactly on rank 2 (h = 3 x 2/3 = 2): finished.
    assert_eq!(censored_quantile(&[1.0, 2.0, 4.0], 4, 2.0 / 3.0), Some(4.0));
    assert_eq!(censored_quantile(&[], 0, 0.5), None);
    assert_eq!(censored_quantile(&[], 2, 0.0), None);
}

const NDP: &str = r#"
name = "rflows"
tors = 8
rotors = 2
transport = "ndp"
workload = "datamining"
loads = [0.01, 0.05, 0.2]
trim_packets = [4, 8, 64]
window_s = "2s"
drain_s = "500ms"
min_rto_us = 2000
initial_window = 10
mars_degree = 4
host_rate_mbps = 50
propagation_ns = 500
"#;

#[test]
fn an_ndp_experiment_file() {
    let c: RotorExperimentConfig = toml::from_str(NDP).unwrap();
    assert_eq!(c.transport, Transport::Ndp);
    assert_eq!(c.workload, "datamining");
    assert_eq!(c.loads, vec![0.01, 0.05, 0.2]);
    assert_eq!(c.trim_packets, vec![4, 8, 64]);
    assert_eq!((c.window_s, c.drain_seconds()), (2.0, 0.5));
    assert_eq!((c.min_rto_us, c.initial_window), (2000, 10));
    assert_eq!(c.mars_degree, Some(4));
    assert_eq!(c.host_rate_bps(), 50_000_000);
    assert_eq!(c.propagation_ns, 500);
    assert_eq!(flow_problems(&c), Vec::<String>::new());
    // Defaults: today's UDP experiment, and the paper's NDP figures.
    let d = RotorExperimentConfig::default();
    assert_eq!(d.transport, Transport::Udp);
    assert_eq!(d.workload, "websearch");
    assert_eq!(
        (d.loads.clone(), d.trim_packets.clone()),
        (vec![0.2], vec![8])
    );
    assert_eq!((d.min_rto_us, d.initial_window), (1000, 20));
    // No drain given: as long as the window (8 s); host links at c.
    assert_eq!(d.drain_seconds(), 8.0);
    assert_eq!(d.host_rate_bps(), 100_000_000);
    assert_eq!(flow_problems(&d), Vec::<String>::new());
    let e = toml::from_str::<RotorExperimentConfig>("transport = \"tcp\"")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("unknown variant `tcp`, expected `udp` or `ndp`"),
        "{e}"
    );
}

#[test]
fn every_problem_is_one_line() {
    let bad = |f: &dyn Fn(&mut RotorExperimentConfig)| {
        let mut c: RotorExperimentConfig = toml::from_str(NDP).unwrap();
        f(&mut c);
        flow_problems(&c)
    };
    assert_eq!(
        bad(&|c| c.designs = vec!["opera".into(), "rotornet".into()]),
        vec![
            "design \"opera\": Opera is not built here; one of complete, complete-valiant, \
             static, mars, mars-shift",
            "design \"rotornet\": one of complete, complete-valiant, static, mars, mars-shift",
        ]
    );
    assert_eq!(
        bad(&|c| c.patterns = vec!["incast".into()]),
        vec!["pattern \"incast\": one of all-to-all, permutation"]
    );
    let w = bad(&|c| c.workload = "/nonexistent/sizes.txt".into());
    assert_eq!(w.len(), 1);
    assert!(
        w[0].starts_with("workload: /nonexistent/sizes.txt: cannot read workload file"),
        "{w:?}"
    );
    assert!(w[0].contains("datamining"), "{w:?}");
    assert_eq!(
        bad(&|c| c.loads = vec![0.0, 1.5, f64::NAN, 1.0]),
        vec![
            "load 0: must be above 0",
            "load 1.5: a load above what the hosts can send (loads are fractions of the host \
             link rate, at most 1)",
            "load NaN: must be above 0",
        ]
    );
    assert_eq!(
        bad(&|c| c.loads.clear()),
        vec!["loads is empty: give at least one load (a fraction of the host link rate)"]
    );
    assert_eq!(
        bad(&|c| c.trim_packets = vec![0, 8]),
        vec!["trim_packets: K = 0 holds no packet; K is at least 1"]
    );
    assert_eq!(
        bad(&|c| c.trim_packets.clear()),
        vec!["trim_packets is empty: give at least one K (packets per next-hop queue)"]
    );
    assert_eq!(
        bad(&|c| c.size_scale = 0.5),
        vec!["size_scale = 0.5: flow sizes are divided by it, so at least 1"]
    );
    assert_eq!(
        bad(&|c| c.drain_s = Some(-0.5)),
        vec!["drain_s = -0.5: must be 0 or more seconds"]
    );
    assert_eq!(
        bad(&|c| {
            c.min_rto_us = 0;
            c.initial_window = 0;
            c.host_rate_mbps = Some(0);
            // Delta - Delta_r = 1 ms - 100 us = 900 000 ns.
            c.propagation_ns = 900_000;
        }),
        vec![
            "min_rto_us = 0: a retransmission timeout must be at least 1 us",
            "initial_window = 0: a flow must send at least 1 packet before its first pull",
            "propagation_ns = 900000: a guard of at least the slot's open time (Delta - \
             Delta_r = 900000 ns) lets no frame start",
            "host_rate_mbps = 0: a host link must carry something",
        ]
    );
    // Degrees the de Bruijn builder refuses on 8 ToRs x 2 rotors.
    assert_eq!(
        bad(&|c| c.mars_degree = Some(3)),
        vec![
            "mars_degree = 3: degree 3 is not a multiple of 2 rotors (uplinks) (8 ToRs, 2 rotors)"
        ]
    );
    assert_eq!(
        bad(&|c| c.mars_degree = Some(16)),
        vec!["mars_degree = 16: degree 16 on 8 ToRs: at most 8 (8 ToRs, 2 rotors)"]
    );
    assert_eq!(
        bad(&|c| c.mars_degree = Some(1)),
        vec!["mars_degree = 1: a de Bruijn graph needs degree 2 or more"]
    );
    // Without a forced degree the planner must find one within budget
    // (0.1 slot of delay fits none); once per Mars design.
    let p = bad(&|c| {
        c.mars_degree = None;
        c.delay_budget_slots = 0.1;
        c.designs = vec!["mars".into(), "mars-shift".into(), "complete".into()];
    });
    assert_eq!(p.len(), 2, "{p:?}");
    assert!(
        p[0].starts_with("design mars: no degree fits the budget"),
        "{p:?}"
    );
    assert!(
        p[1].starts_with("design mars-shift: no degree fits"),
        "{p:?}"
    );
    for lines in [w, p] {
        assert!(lines.iter().all(|l| !l.contains('\n')), "{lines:?}");
    }
}

#[test]
fn the_papers_degree_at_the_papers_scale() {
    // 64 ToRs x 4 rotors, degree 8: 8^2 = 64, so diameter 2 and theta =
    // (1 - Delta_r / Delta) / (2 x 2) = 0.9 / 4 with the default slot.
    let p = RotorParams {
        tors: 64,
        rotors: 4,
        ..crate::rotor::DEFAULT_PARAMS
    };
    let c = mars_degree_choice(&p, 8).unwrap();
    assert_eq!((c.degree, c.diameter), (8, 2));
    assert!((c.throughput_bound - 0.9 / 4.0).abs() < 1e-12);
    assert!(mars_degree_choice(&p, 6)
        .unwrap_err()
        .contains("not a multiple of 4 rotors"));
}

/// A run with utilization `u` (1 host at 1 Gbit/s for 1 s: u x 1.25e8
/// bytes), short p99 `p99_us` over 100 short flows, and occupancy
/// `occ`.
fn run(design: &str, pattern: &str, load: f64, k: u32, u: f64, p99_us: u64) -> FlowRunResult {
    let flows = (0..100u64)
        .map(|i| flow(1000, i, Some(1000 * if i == 99 { p99_us } else { 1 })))
        .collect();
    FlowRunResult::from_input(&FlowRunInput {
        design: design.into(),
        pattern: pattern.into(),
        routing: "r".into(),
        matchings: 2,
        load,
        buffer_pkts: k,
        hosts: 1,
        host_rate_bps: 1_000_000_000,
        window_ns: (0, 1_000_000_000),
        flows,
        delivered_bytes: (u * 1.25e8).round() as u64,
        downlink_bytes: 0,
        occupancy: vec![0, (u * 1e5) as u64],
        tor_counters: BTreeMap::from([("drops.queue_full".into(), 3.0)]),
        rotor_counters: BTreeMap::new(),
    })
    .unwrap()
}

fn summary() -> FlowSummary {
    let mut runs = Vec::new();
    for (pattern, m, c, st) in [
        ("all-to-all", 0.14, 0.02, 0.1),
        ("permutation", 0.12, 0.03, 0.1),
    ] {
        for (k, scale) in [(4, 0.5), (8, 1.0)] {
            // Short p99 at load 0.05: Mars 20 us, complete 100, static 1000.
            for (load, f) in [(0.05, 0.25), (0.2, 1.0)] {
                runs.push(run("complete", pattern, load, k, c * scale * f, 100));
                runs.push(run("static", pattern, load, k, st * scale * f, 1000));
                runs.push(run("mars", pattern, load, k, m * scale * f, 20));
            }
        }
    }
    FlowSummary::new(
        toml::from_str(NDP).unwrap(),
        Some(serde_json::json!({"degree": 4, "diameter": 2})),
        runs,
    )
}

#[test]
fn report_of_a_summary() {
    let s = summary();
    assert_eq!((s.reference_k(), s.reference_load()), (Some(8), Some(0.2)));
    let md = flow_report(&s);
    // Utilization table (K = 8): 0.14 x 0.25 = 3.5 % at load 0.05
    // (70 % of it), 14 % at 0.2 (70 %).
    assert!(
        md.contains("| all-to-all | mars | r | 3.5 % (70 %) | 14.0 % (70 %) |"),
        "{md}"
    );
    // Mars over the others at 0.2, K = 8: 0.14 / 0.02 = 7, 0.14 / 0.1 =
    // 1.4; permutation 0.12 / 0.03 = 4, 0.12 / 0.1 = 1.2.
    assert!(
        md.contains("| all-to-all | complete | 14.0 % | 2.0 % | 7.00x | 7.02x (RotorNet/Sirius) |"),
        "{md}"
    );
    assert!(
        md.contains("| all-to-all | static | 14.0 % | 10.0 % | 1.40x | 1.64x (static expander) |"),
        "{md}"
    );
    assert!(
        md.contains(
            "| permutation | complete | 12.0 % | 3.0 % | 4.00x | 5.66x (RotorNet/Sirius) |"
        ),
        "{md}"
    );
    assert!(
        md.contains("| all-to-all | Opera (not built here) | 14.0 % | — | — | 1.37x |"),
        "{md}"
    );
    // Buffer sweep at 0.2: K = 4 halves everything.
    assert!(
        md.contains("| all-to-all | static | 5.0 % | 10.0 % |"),
        "{md}"
    );
    // K = 4: Mars 0.07 over complete 0.01 (7x) and static 0.05 (1.4x):
    // mean 4.2x.
    assert!(
        md.contains(
            "all-to-all, K = 4: Mars / others, mean over 2 design(s): 4.20x (paper 1.57x)."
        ),
        "{md}"
    );
    // Short p99 (100 flows, one slow: h = 99 x 0.99 = 98.01 -> 1 + 0.01 x
    // (p - 1) us): Mars 1.19, complete 1.99, static 10.99 us; 1 - 1.19 /
    // 1.99 = 40 %, 1 - 1.19 / 10.99 = 89 %.
    assert!(
        md.contains("| complete | 40 % | 88 % (RotorNet/Sirius) |"),
        "{md}"
    );
    assert!(
        md.contains("| static | 89 % | 98 % (static expander) |"),
        "{md}"
    );
    assert!(md.contains("| Opera (not built here) | — | 77 % |"), "{md}");
    // Occupancy: samples 0 and u x 1e5 bytes; p99 = 0.99 x max. Mars at
    // 0.2, K 8 all-to-all: 14 000 B max -> p50 7 kB, p90 12.6 kB, p99 13 860 B = 13.9 kB.
    assert!(
        md.contains("| all-to-all | mars | 0.2 | 8 | 2 | 7 kB | 12.6 kB | 13.9 kB | 14 kB |"),
        "{md}"
    );
    // complete's p99 (1980 B) over Mars's (13 860 B) = 0.14x.
    assert!(md.contains("p99 occupancy complete / Mars = 0.14x"), "{md}");
    assert!(md.contains("| drops.queue_full 3 | none |"), "{md}");
    assert!(md.contains("Mars: degree d = 4 (forced by mars_degree), diameter 2."));
    let t = flow_table(&s);
    assert!(t.contains("7.0 %"), "{t}");
}

#[test]
fn summary_json_and_plots_are_written() {
    let s = summary();
    let charts = flow_charts(&s);
    let stems: Vec<&str> = charts.iter().map(|c| c.0).collect();
    assert_eq!(
        stems,
        [
            "flow-utilization",
            "flow-buffer",
            "flow-fct",
            "flow-occupancy"
        ]
    );
    // Per pattern a panel; FCT per pattern and class.
    assert_eq!(
        charts.iter().map(|c| c.2.len()).collect::<Vec<_>>(),
        [2, 2, 4, 2]
    );
    // Utilization vs load, all-to-all, Mars: (0.05, 0.035), (0.2, 0.14);
    // the last line is the offered-load reference.
    let util = &charts[0].2[0];
    let mars = util.lines.iter().find(|l| l.name == "mars").unwrap();
    assert_eq!(mars.points.len(), 2);
    assert!((mars.points[1].1 - 0.14).abs() < 1e-12);
    assert!(util.lines.last().unwrap().reference);
    // The buffer sweep: K = 4 and 8 at load 0.2.
    let sweep = &charts[1].2[0].lines[0];
    assert_eq!(
        sweep.points.iter().map(|p| p.0).collect::<Vec<_>>(),
        [4.0, 8.0]
    );

    let dir = std::env::temp_dir().join(format!("rotor-flows-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg: RotorExperimentConfig = toml::from_str(NDP).unwrap();
    let written = write_flow_results(&cfg, None, s.runs.clone(), &dir).unwrap();
    assert_eq!(written.runs.len(), 24);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(json["runs"].as_array().unwrap().len(), 24);
    assert_eq!(json["config"]["transport"], "ndp");
    assert_eq!(json["paper"]["throughput_mars_over"][0]["value"], 7.02);
    assert_eq!(
        json["paper"]["throughput_mars_over"][0]["pattern"],
        "all-to-all"
    );
    assert_eq!(
        json["paper"]["throughput_mars_over"][0]["designs"],
        serde_json::json!(["complete", "complete-valiant"])
    );
    let back: FlowRunResult = serde_json::from_value(json["runs"][0].clone()).unwrap();
    // Read back (serde_json parses floats to within an ulp, not exactly).
    assert_eq!(back.id(), s.runs[0].id());
    assert_eq!(back.occupancy_cdf.len(), 101);
    assert_eq!(back.short_arrived, 100);
    assert!((back.delivered_fraction - s.runs[0].delivered_fraction).abs() < 1e-12);
    assert!(std::fs::read_to_string(dir.join("report.md"))
        .unwrap()
        .starts_with("# Rotor networks: NDP flows"));
    for stem in stems {
        for ext in ["svg", "png"] {
            let f = dir.join("plots").join(format!("{stem}.{ext}"));
            assert!(
                std::fs::metadata(&f).unwrap().len() > 1000,
                "{}",
                f.display()
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

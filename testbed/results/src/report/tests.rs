//! `report.md` and the result table of hand-made runs.

use super::*;
use crate::analysis::tests::{flow, ideal, run};
use crate::analysis::{build_summary, RunInput};

fn inputs() -> Vec<RunInput> {
    const I: u64 = 41_211_200; // ideal of 14480 bytes
    let mut v = Vec::new();
    for seed in [1, 2] {
        let k = seed; // seed 2 is a little slower
        v.push(run(
            "lcmp",
            seed,
            &[(14_480, I), (14_480, (1 + k) * I), (14_480, 2 * I)],
        ));
        v.push(run(
            "ecmp",
            seed,
            &[(14_480, 2 * I), (14_480, (3 + k) * I), (14_480, 4 * I)],
        ));
        v.push(run(
            "ucmp",
            seed,
            &[(14_480, 4 * I), (14_480, 8 * I), (14_480, 8 * I)],
        ));
    }
    v[4].calibration_ok = false;
    v[4].calibration_notes = vec!["dc2 RTT 23.1 ms vs 20 ms configured".into()];
    v
}

fn summary() -> Summary {
    let exp = serde_json::json!({
        "config": {"from": "dc1", "to": "dc4", "cc": null},
        "calibration": {"ok": false, "paths": [
            {"name": "dc2", "measured_rtt_us": 23100, "ok": false},
            {"name": "dc3", "measured_rtt_us": null, "ok": true}
        ]},
        "topology": "topologies/2dc-3path.toml",
        "from": "dc1", "to": "dc4",
        "workloads": ["websearch"], "loads": [0.3],
        "policies": ["lcmp", "ecmp", "ucmp"], "seeds": [1, 2],
        "scale": 1000, "load_definition": "fraction of DC1 inter-DC capacity",
        "duration_s": 10, "warmup_s": 2
    });
    build_summary(exp, &inputs(), &ideal())
}

#[test]
fn result_table_has_a_row_per_policy_and_baseline() {
    let t = result_table(&summary());
    // The slowdowns as in `report_has_key_rows`; ecmp's seed 2 failed
    // its calibration.
    for row in [
        "websearch      0.3 lcmp              2             2.00             2.49       2/2",
        "websearch      0.3 ecmp              2             4.00             4.49       1/2",
        "websearch      0.3 ucmp              2             8.00             8.00       2/2",
        "websearch      0.3 vs ecmp           median   -50%  p99   -45%",
        "websearch      0.3 vs ucmp           median   -75%  p99   -69%",
    ] {
        assert!(t.lines().any(|l| l == row), "{row:?} in\n{t}");
    }
}

#[test]
fn report_has_key_rows() {
    let plots = vec![
        PathBuf::from("cdf-websearch-0.3.svg"),
        PathBuf::from("cdf-websearch-0.3.png"),
    ];
    let md = render_report(&summary(), &plots);
    // Setup echo.
    assert!(
        md.contains("| topology | topologies/2dc-3path.toml |"),
        "{md}"
    );
    assert!(md.contains("| policies | lcmp, ecmp, ucmp |"), "{md}");
    assert!(
        md.contains("| load_definition | fraction of DC1 inter-DC capacity |"),
        "{md}"
    );
    assert!(md.contains("## websearch, load 0.3"), "{md}");
    // Seed 1: lcmp slowdowns 1, 2, 2 (median 2); seed 2: 1, 3, 2 (median 2).
    // ecmp: 2, 4, 4 (4) and 2, 5, 4 (4); ucmp: 4, 8, 8 (8) both.
    assert!(md.contains("| lcmp | 2 | 6 / 6 | 2.00 ± 0.00 |"), "{md}");
    assert!(md.contains("| ecmp | 2 | 6 / 6 | 4.00 ± 0.00 |"), "{md}");
    // lcmp calibration: both ok; ecmp seed 2 failed.
    assert!(md.contains("| 0.0 % | 2 / 2 |"), "{md}");
    assert!(md.contains("| 0.0 % | 1 / 2 |"), "{md}");
    // Reductions: median (2 - 4) / 4 = -50 %, vs UCMP (2 - 8) / 8 = -75 %.
    assert!(
        md.contains("| ecmp | -50.0 % | -36..-41 % (8-DC, 30/50/80 %); -36 % (Fig. 9) |"),
        "{md}"
    );
    assert!(
        md.contains("| ucmp | -75.0 % | -76 % (8-DC, 30/50/80 %); -76 % (Fig. 9) |"),
        "{md}"
    );
    // One size bucket (all flows 14480 B).
    assert!(md.contains("| 14.5 kB | 2.00 / "), "{md}");
    // Path use: all flows on dc2, 10 % utilization, 3 flows per run.
    assert!(md.contains("| lcmp | 10.0 % (3) | 0.0 % (0) |"), "{md}");
    // Calibration failure listed with its note.
    assert!(
        md.contains("- websearch / load 0.3 / ecmp / seed 2: dc2 RTT 23.1 ms vs 20 ms configured"),
        "{md}"
    );
    assert!(
        md.contains("![cdf-websearch-0.3](cdf-websearch-0.3.png)"),
        "{md}"
    );
    assert!(md.contains("[SVG](cdf-websearch-0.3.svg)"), "{md}");
    assert!(md.contains("| seeds | 1, 2 |"), "{md}");
    assert!(md.contains("| config.from | dc1 |"), "{md}");
    assert!(md.contains("| config.cc | — |"), "{md}");
    assert!(md.contains("| calibration.ok | false |"), "{md}");
    assert!(
        md.contains("calibration.paths:\n\n| measured_rtt_us | name | ok |"),
        "{md}"
    );
    assert!(md.contains("| — | dc3 | true |"), "{md}");
    let setup = &md[..md.find("calibration.ok").unwrap()];
    assert!(
        setup.contains("| config.from | dc1 |"),
        "config before calibration: {md}"
    );
    // Per-run row: slowdowns 2, 5, 4 -> median 4, p90 4.8, p99 4.98.
    assert!(
        md.contains("| websearch | 0.3 | ecmp | 2 | 3 | 3 | 0 | 0 | 4.00 | 4.80 | 4.98 | dc2 3, dc3 0 | 0 | FAILED |"),
        "{md}"
    );
}

#[test]
fn network_sections_where_transit_switches_choose() {
    use crate::analysis::NetworkInput;
    use crate::analysis::{build_summary_with_network, link_name, LinkLoad, LinkSpec};
    let link = |from: &str, to: &str, tx| LinkLoad {
        link: LinkSpec {
            name: link_name(from, to),
            from: from.into(),
            to: to.into(),
            rate_bps: 10_000_000,
        },
        tx_bytes: tx,
    };
    // Run i (lcmp, ecmp, ucmp of seed 1, then of seed 2) sent
    // 125 kB x (i + 1) dc1->dc3 in its 1 s window: 1 Mbit x (i + 1) of
    // 10, so lcmp (0.1 + 0.4) / 2, ecmp (0.2 + 0.5) / 2, ucmp
    // (0.3 + 0.6) / 2.
    let networks = |missing: bool| -> Vec<NetworkInput> {
        (0..6u64)
            .map(|i| NetworkInput {
                links: vec![
                    link("dc1", "dc3", Some(125_000 * (i + 1))),
                    link("dc3", "dc1", None),
                ],
                forward_paths_missing: if missing && i == 0 {
                    [("no_decision@dc6".to_string(), 2)].into()
                } else {
                    Default::default()
                },
                transit_choices: Some(vec!["dc3".into(), "dc6".into()]),
                ..NetworkInput::default()
            })
            .collect()
    };
    let s = build_summary_with_network(serde_json::json!({}), &inputs(), &networks(true), &ideal());
    let md = render_report(&s, &[]);
    assert!(
        md.contains(
            "### Path use (mean over seeds)\n\nOmitted: switches after the source (dc3, dc6) \
             also choose"
        ),
        "{md}"
    );
    assert!(!md.contains("utilization (flows)"), "{md}");
    assert!(md.contains("| link | rate | lcmp | ecmp | ucmp |"), "{md}");
    assert!(
        md.contains("| dc1->dc3 | 10.0 Mbit/s | 25.0 % | 35.0 % | 45.0 % |"),
        "{md}"
    );
    assert!(
        md.contains("| dc3->dc1 | 10.0 Mbit/s | — | — | — |"),
        "{md}"
    );
    assert!(
        md.contains(
            "- websearch / load 0.3 / lcmp / seed 1: switch paths missing of 3 flows: \
             forward 2 (no_decision@dc6 2)\n"
        ),
        "{md}"
    );
    let s =
        build_summary_with_network(serde_json::json!({}), &inputs(), &networks(false), &ideal());
    let md = render_report(&s, &[]);
    assert!(
        md.contains("Every flow's paths were reconstructed in all 6 runs."),
        "{md}"
    );
    // Without the switches' view (an older runner): no such sections.
    let md = render_report(&summary(), &[]);
    assert!(!md.contains("## Switch paths"), "{md}");
    assert!(!md.contains("### Link utilization"), "{md}");
}

#[test]
fn wcmp_and_unknown_workloads_have_no_paper_numbers() {
    assert!(paper_claims("websearch", 0.3, "wcmp").is_empty());
    assert!(paper_claims("googlerpc", 0.3, "ecmp").is_empty());
    assert_eq!(
        paper_claims("WebSearch_distribution.txt", 30.0, "ECMP").len(),
        2
    );
    assert_eq!(paper_claims("websearch", 0.5, "ecmp").len(), 1);
    assert_eq!(paper_claims("FbHdp_distribution2015", 0.3, "ucmp").len(), 1);
    assert!(paper_claims("fbhadoop", 0.5, "ucmp").is_empty());
    let mut s = summary();
    for r in s.reductions.iter_mut() {
        r.baseline = "wcmp".into();
    }
    let md = render_report(&s, &[]);
    assert!(md.contains("| wcmp | -50.0 % | — | -"), "{md}");
}

#[test]
fn fidelity_section_is_replaced_not_added() {
    let sec = |n: u32| format!("{FIDELITY_BEGIN}\n## Fidelity {n}\n{FIDELITY_END}\n");
    // No per-run table: appended after a blank line.
    let once = with_fidelity_section("# R\n\ntext\n", &sec(1));
    assert_eq!(once, format!("# R\n\ntext\n\n{}", sec(1)));
    let twice = with_fidelity_section(&once, &sec(2));
    assert_eq!(twice, format!("# R\n\ntext\n\n{}", sec(2)));
    // Before `## Runs`, and kept there.
    let md = "# R\n\nA\n\n## Runs\n\n| r |\n";
    let once = with_fidelity_section(md, &sec(1));
    assert_eq!(once, format!("# R\n\nA\n\n{}\n## Runs\n\n| r |\n", sec(1)));
    assert_eq!(
        with_fidelity_section(&once, &sec(2)),
        format!("# R\n\nA\n\n{}\n## Runs\n\n| r |\n", sec(2))
    );
    assert_eq!(with_fidelity_section("", &sec(1)), sec(1));
}

#[test]
fn empty_summary_says_no_completed_flows() {
    let mut input = run("lcmp", 1, &[]);
    input.flows.push(flow(1, 100, None, None));
    let s = build_summary(serde_json::Value::Null, &[input], &ideal());
    let md = render_report(&s, &[]);
    assert!(md.contains("No completed flows."), "{md}");
    assert!(md.contains("no completed flows"), "{md}");
    let md = render_report(&build_summary(serde_json::json!({}), &[], &ideal()), &[]);
    assert!(md.contains("no completed flows"), "{md}");
    assert!(md.contains("All 0 runs passed calibration."), "{md}");
}

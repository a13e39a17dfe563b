//! The plots, written and checked.

use super::style::log_ticks;
use super::*;
use crate::analysis::build_summary;
use crate::analysis::tests::{ideal, run};

fn inputs() -> Vec<RunInput> {
    const I: u64 = 41_211_200; // ideal of 14480 bytes
    let mut v = Vec::new();
    for seed in [1, 2] {
        for (policy, f) in [("lcmp", 1), ("ecmp", 2), ("wcmp", 3), ("ucmp", 4)] {
            let flows: Vec<(u64, u64)> = (0..40u64)
                .map(|i| {
                    let size = 1448 * (1 + i * i * 10);
                    let ideal = ideal().ideal_fct_ns(size).unwrap() as u64;
                    (size, ideal * (10 + f * (i % 7) + seed) / 10)
                })
                .chain([(14_480, f * I)])
                .collect();
            let mut r = run(policy, seed, &flows);
            // Spread flows over both paths.
            for (k, fl) in r.flows.iter_mut().enumerate() {
                if (k as u64 + f).is_multiple_of(3) {
                    fl.min_rtt_us = Some(104_000);
                }
            }
            r.port_tx_bytes = vec![1_250_000 * f, 2_500_000 * seed];
            v.push(r);
        }
    }
    v
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lcmp-plots-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn plots_are_written_as_svg_and_png() {
    let inputs = inputs();
    let summary = build_summary(serde_json::json!({}), &inputs, &ideal());
    let dir = std::env::var_os("LCMP_PLOTS_KEEP")
        .map(PathBuf::from)
        .unwrap_or_else(|| temp_dir("full"));
    let files = write_plots(&summary, &inputs, &ideal(), &dir).unwrap();
    let names: Vec<String> = files
        .iter()
        .map(|f| f.strip_prefix(&dir).unwrap().display().to_string())
        .collect();
    assert_eq!(
        names,
        [
            "cdf-websearch-0.3.svg",
            "cdf-websearch-0.3.png",
            "buckets-websearch-0.3.svg",
            "buckets-websearch-0.3.png",
            "utilization-websearch-0.3.svg",
            "utilization-websearch-0.3.png",
        ]
    );
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        assert!(
            bytes.len() > 1000,
            "{} is {} bytes",
            f.display(),
            bytes.len()
        );
        if f.extension().is_some_and(|e| e == "png") {
            assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{}", f.display());
        } else {
            let text = String::from_utf8(bytes).unwrap();
            assert!(text.contains("<svg"), "{}", f.display());
            for p in ["lcmp", "ecmp", "wcmp", "ucmp"] {
                assert!(text.contains(p), "{} lacks {p}", f.display());
            }
            assert!(text.contains("websearch, load 0.3"), "{}", f.display());
        }
    }
    if std::env::var_os("LCMP_PLOTS_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

fn networks(n: usize, transit: &[&str]) -> Vec<crate::analysis::NetworkInput> {
    use crate::analysis::{link_name, LinkLoad, LinkSpec, NetworkInput};
    let link = |from: &str, to: &str, tx| LinkLoad {
        link: LinkSpec {
            name: link_name(from, to),
            from: from.into(),
            to: to.into(),
            rate_bps: 10_000_000,
        },
        tx_bytes: tx,
    };
    (0..n)
        .map(|i| NetworkInput {
            links: vec![
                link("dc1", "dc3", Some(1_000_000 * i as u64)),
                link("dc3", "dc1", None),
            ],
            transit_choices: Some(transit.iter().map(|s| s.to_string()).collect()),
            ..NetworkInput::default()
        })
        .collect()
}

fn names_in(dir: &Path, files: &[PathBuf]) -> Vec<String> {
    files
        .iter()
        .map(|f| f.strip_prefix(dir).unwrap().display().to_string())
        .collect()
}

#[test]
fn link_plots_per_policy_and_no_path_plot_where_transit_switches_choose() {
    let inputs = inputs();
    let nets = networks(inputs.len(), &["dc3"]);
    let summary = crate::analysis::build_summary_with_network(
        serde_json::json!({}),
        &inputs,
        &nets,
        &ideal(),
    );
    let keep = std::env::var_os("LCMP_PLOTS_KEEP").map(PathBuf::from);
    let dir = keep.clone().unwrap_or_else(|| temp_dir("links"));
    let _ = std::fs::remove_dir_all(&dir);
    let files = write_plots(&summary, &inputs, &ideal(), &dir).unwrap();
    let mut want = vec![
        "cdf-websearch-0.3.svg".to_string(),
        "cdf-websearch-0.3.png".into(),
        "buckets-websearch-0.3.svg".into(),
        "buckets-websearch-0.3.png".into(),
    ];
    for p in ["lcmp", "ecmp", "wcmp", "ucmp"] {
        want.push(format!("links-websearch-0.3-{p}.svg"));
        want.push(format!("links-websearch-0.3-{p}.png"));
    }
    assert_eq!(names_in(&dir, &files), want);
    let svg = std::fs::read_to_string(dir.join("links-websearch-0.3-lcmp.svg")).unwrap();
    assert!(svg.contains("10 Mbit/s; not measured"), "{svg}");
    assert!(
        svg.contains("websearch, load 0.3, lcmp: link utilization"),
        "{svg}"
    );
    let png = std::fs::read(dir.join("links-websearch-0.3-ucmp.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    if keep.is_some() {
        return;
    }
    let _ = std::fs::remove_dir_all(&dir);
    // Only the source chooses: the per-path figure is back.
    let nets = networks(inputs.len(), &[]);
    let summary = crate::analysis::build_summary_with_network(
        serde_json::json!({}),
        &inputs,
        &nets,
        &ideal(),
    );
    let files = write_plots(&summary, &inputs, &ideal(), &dir).unwrap();
    let names = names_in(&dir, &files);
    assert_eq!(names.len(), 14);
    assert_eq!(names[4], "utilization-websearch-0.3.svg");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn empty_runs_still_give_titled_plots() {
    let mut input = run("lcmp", 1, &[]);
    input.port_tx_bytes.clear();
    let inputs = vec![input];
    let summary = build_summary(serde_json::Value::Null, &inputs, &ideal());
    let dir = temp_dir("empty");
    let files = write_plots(&summary, &inputs, &ideal(), &dir).unwrap();
    assert_eq!(files.len(), 6);
    let svg = std::fs::read_to_string(dir.join("cdf-websearch-0.3.svg")).unwrap();
    assert!(svg.contains("no completed flows"), "{svg}");
    let _ = std::fs::remove_dir_all(&dir);
    // Nothing at all: nothing to plot.
    let none = build_summary(serde_json::Value::Null, &[], &ideal());
    assert!(write_plots(&none, &[], &ideal(), &temp_dir("none"))
        .unwrap()
        .is_empty());
    let _ = std::fs::remove_dir_all(temp_dir("none"));
}

#[test]
fn stems_and_colors() {
    assert_eq!(
        plot_stem("cdf", "WebSearch_distribution.txt", 0.5),
        "cdf-websearch-distribution-txt-0.5"
    );
    assert_eq!(policy_color("LCMP", 0), RGBColor(214, 39, 40));
    let c = colors(&["x", "lcmp", "y"]);
    assert_eq!(c[1], RGBColor(214, 39, 40));
    assert_ne!(c[0], c[2]);
    assert_eq!(trim_num(20.0), "20");
    assert_eq!(trim_num(0.25), "0.25");
    assert_eq!(trim_num(1500.4), "1500");
    assert_eq!(log_ticks(0.8, 60.0), [1.0, 2.0, 5.0, 10.0, 20.0, 50.0]);
    assert_eq!(log_ticks(1.5, 4.5), [2.0, 3.0, 4.0]);
    assert_eq!(log_ticks(0.5, 1e6), [1.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6]);
    assert!(log_ticks(0.0, 1.0).is_empty());
}

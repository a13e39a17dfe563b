//! The flow experiment's plots: utilization against load and buffer, p99
//! FCT against load, the occupancy CDF; one panel per pattern.

use super::{FlowRunResult, FlowSummary};
use crate::plots::{Axis, Line, LineChart, Scale, Ticks};
/// The figures: utilization vs load (K = the reference), utilization vs
/// K (at the reference load), p99 FCT vs load, occupancy CDF (reference
/// load and K); each a panel per pattern (FCT: per pattern and class).
/// As (file stem, title, panels).
pub fn flow_charts(s: &FlowSummary) -> Vec<(&'static str, String, Vec<LineChart>)> {
    let (Some(k_ref), Some(load_ref)) = (s.reference_k(), s.reference_load()) else {
        return Vec::new();
    };
    let loads = s.loads();
    let ks = s.ks();
    let designs = s.designs();
    let patterns = s.patterns();
    let pct_axis = |d: &str| Axis::new(d, Scale::Linear, Ticks::Percent);
    // A design's points in a pattern.
    type Points<'a> = &'a dyn Fn(&str, &str) -> Vec<(f64, f64)>;
    let series = |pat: &str, pts: Points| -> Vec<Line> {
        designs
            .iter()
            .map(|d| Line {
                name: d.clone(),
                points: pts(d, pat),
                reference: false,
            })
            .collect()
    };
    let mut out = Vec::new();

    let panels = patterns
        .iter()
        .map(|pat| {
            let mut lines = series(pat, &|d, pat| {
                loads
                    .iter()
                    .filter_map(|&l| {
                        s.find(d, pat, l, k_ref)
                            .map(|r| (l, r.downlink_utilization))
                    })
                    .collect()
            });
            lines.push(Line {
                name: "offered (utilization = load)".into(),
                points: loads.iter().map(|&l| (l, l)).collect(),
                reference: true,
            });
            LineChart {
                title: pat.clone(),
                x: pct_axis("load (of the host link rate)"),
                y: pct_axis("server downlink utilization"),
                lines,
                markers: true,
            }
        })
        .collect();
    out.push((
        "flow-utilization",
        format!("Utilization vs load (K = {k_ref} packets)"),
        panels,
    ));

    let panels = patterns
        .iter()
        .map(|pat| LineChart {
            title: pat.clone(),
            x: Axis::new(
                "K, packets per next-hop queue (log)",
                Scale::Log,
                Ticks::Number,
            )
            .ticks_at(ks.iter().map(|&k| f64::from(k)).collect()),
            y: pct_axis("server downlink utilization"),
            lines: series(pat, &|d, pat| {
                ks.iter()
                    .filter_map(|&k| {
                        s.find(d, pat, load_ref, k)
                            .map(|r| (f64::from(k), r.downlink_utilization))
                    })
                    .collect()
            }),
            markers: true,
        })
        .collect();
    out.push((
        "flow-buffer",
        format!("Utilization vs buffer (load {load_ref})"),
        panels,
    ));

    let mut panels = Vec::new();
    for pat in &patterns {
        for (class, pick) in [
            (
                "short",
                (|r: &FlowRunResult| r.p99_fct_short_us) as fn(&FlowRunResult) -> Option<f64>,
            ),
            ("long", |r: &FlowRunResult| r.p99_fct_long_us),
        ] {
            panels.push(LineChart {
                title: format!("{pat}, {class} flows (missing points: unfinished)"),
                x: pct_axis("load (of the host link rate)"),
                y: Axis::new("p99 FCT, us (log)", Scale::Log, Ticks::Number),
                lines: series(pat, &|d, pat| {
                    loads
                        .iter()
                        .filter_map(|&l| Some((l, pick(s.find(d, pat, l, k_ref)?)?)))
                        .collect()
                }),
                markers: true,
            });
        }
    }
    out.push((
        "flow-fct",
        format!("p99 flow completion time vs load (K = {k_ref} packets)"),
        panels,
    ));

    let panels = patterns
        .iter()
        .map(|pat| LineChart {
            title: pat.clone(),
            x: Axis::new("ToR buffer occupancy", Scale::Linear, Ticks::Bytes),
            y: pct_axis("fraction of samples"),
            lines: series(pat, &|d, pat| {
                s.find(d, pat, load_ref, k_ref)
                    .map(|r| r.occupancy_cdf.clone())
                    .unwrap_or_default()
            }),
            markers: false,
        })
        .collect();
    out.push((
        "flow-occupancy",
        format!("ToR buffer occupancy CDF (load {load_ref}, K = {k_ref})"),
        panels,
    ));
    out
}

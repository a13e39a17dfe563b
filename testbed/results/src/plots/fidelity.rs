//! The fidelity figure: per policy the slowdown CDFs of ours, the
//! reference and its rerun, and, secondary, the slowdowns per size bucket.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::style::{
    colors, draw_empty, draw_legend, err, log_grid, log_range, log_ticks, slowdown_label, FONT,
};
use crate::fidelity::model::{BucketPair, FidelityReport, PolicyFidelity};

pub(super) fn r_label(r: Option<f64>) -> String {
    r.map_or_else(|| "undefined".to_string(), |r| format!("{r:.2}"))
}

pub(super) fn fig_label(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.digits$}"))
}

pub(super) fn draw_fidelity<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    r: &FidelityReport,
) -> Result<(), String> {
    let title = format!(
        "{}, load {}: testbed vs reference simulator, slowdown distributions per policy",
        r.workload, r.load
    );
    let has_buckets = r.policies.iter().any(|p| {
        p.buckets.iter().any(|b| {
            [
                b.ours_median,
                b.ours_p99,
                b.reference_median,
                b.reference_p99,
            ]
            .iter()
            .any(|v| v.is_some_and(|v| v > 0.0))
        })
    });
    let has_cdfs = r
        .policies
        .iter()
        .any(|p| !p.ours_quantiles.is_empty() || !p.reference_quantiles.is_empty());
    if !has_buckets && !has_cdfs {
        return draw_empty(root, &title, "no flows to compare");
    }
    let area = root.titled(&title, (FONT, 22)).map_err(err)?;
    let rows = area.split_evenly((r.policies.len(), 1));
    let names: Vec<&str> = r.policies.iter().map(|p| p.policy.as_str()).collect();
    for ((row, p), color) in rows.iter().zip(&r.policies).zip(colors(&names)) {
        let (w, _) = row.dim_in_pixel();
        let (left, right) = row.split_horizontally(w * 11 / 20);
        draw_fidelity_cdf(&left, p, color)?;
        draw_fidelity_panel(&right, p, color)?;
    }
    Ok(())
}

/// One policy's slowdown CDFs: ours, the reference's and the rerun's.
pub(super) fn draw_fidelity_cdf<DB: DrawingBackend>(
    panel: &DrawingArea<DB, Shift>,
    p: &PolicyFidelity,
    color: RGBColor,
) -> Result<(), String> {
    let rerun = p.floor.as_ref().map(|f| f.rerun_quantiles.as_slice());
    let curves: Vec<&[f64]> = [
        Some(p.ours_quantiles.as_slice()),
        Some(&p.reference_quantiles),
        rerun,
    ]
    .into_iter()
    .flatten()
    .collect();
    let all = curves
        .iter()
        .flat_map(|c| c.iter().copied())
        .filter(|v| *v > 0.0);
    let lo = all.clone().fold(f64::INFINITY, f64::min);
    let hi = all.fold(0.0, f64::max);
    let (lo, hi) = log_range(lo, hi);
    let d = &p.distance;
    let caption = if p.ours_quantiles.is_empty() {
        format!(
            "{}: ours has no per-flow data (W1, KS need flows.csv); median x{}, p99 x{}",
            p.policy,
            fig_label(d.median_ratio, 2),
            fig_label(d.p99_ratio, 2)
        )
    } else {
        format!(
            "{}: ln slowdown W1 {}, KS {}; median x{}, p99 x{}",
            p.policy,
            fig_label(d.w1_ln_slowdown, 3),
            fig_label(d.ks_ln_slowdown, 3),
            fig_label(d.median_ratio, 2),
            fig_label(d.p99_ratio, 2)
        )
    };
    let mut chart = ChartBuilder::on(panel)
        .caption(caption, (FONT, 17))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(
            (lo..hi)
                .log_scale()
                .with_key_points(log_ticks(lo, hi))
                .with_light_points(log_grid(lo, hi)),
            0.0..1.0,
        )
        .map_err(err)?;
    chart
        .configure_mesh()
        .light_line_style(BLACK.mix(0.04))
        .bold_line_style(BLACK.mix(0.15))
        .x_desc("slowdown max(1, FCT/ideal) (log)")
        .y_desc("fraction of flows")
        .x_label_formatter(&|v| slowdown_label(*v))
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 15))
        .draw()
        .map_err(err)?;
    // Quantile k of n at level k / (n - 1).
    let points = |q: &[f64]| -> Vec<(f64, f64)> {
        let n = q.len().max(2) - 1;
        q.iter()
            .enumerate()
            .filter(|(_, v)| **v > 0.0)
            .map(|(k, v)| (*v, k as f64 / n as f64))
            .collect()
    };
    if let Some(f) = &p.floor {
        let grey = BLACK.mix(0.45);
        chart
            .draw_series(DashedLineSeries::new(
                points(&f.rerun_quantiles),
                8,
                5,
                grey.stroke_width(2),
            ))
            .map_err(err)?
            .label(format!(
                "reference rerun (floor: W1 {}, KS {})",
                fig_label(f.distance.w1_ln_slowdown, 3),
                fig_label(f.distance.ks_ln_slowdown, 3)
            ))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], grey.stroke_width(2))
            });
    }
    chart
        .draw_series(LineSeries::new(
            points(&p.reference_quantiles),
            BLACK.stroke_width(2),
        ))
        .map_err(err)?
        .label(format!("reference ({} flows)", p.reference_flows))
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.stroke_width(2)));
    if !p.ours_quantiles.is_empty() {
        chart
            .draw_series(LineSeries::new(
                points(&p.ours_quantiles),
                color.stroke_width(3),
            ))
            .map_err(err)?
            .label(format!("ours ({} flows)", p.ours_flows))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3))
            });
    }
    draw_legend(&mut chart, SeriesLabelPosition::LowerRight, 13)
}

pub(super) fn draw_fidelity_panel<DB: DrawingBackend>(
    panel: &DrawingArea<DB, Shift>,
    p: &PolicyFidelity,
    color: RGBColor,
) -> Result<(), String> {
    let nb = p.buckets.len().max(1);
    // Integer x, bucket k at 2k + 1 (see draw_buckets); ticks are bucket
    // numbers: the two sides' size ranges differ when ours are scaled, and
    // the report's table gives both.
    let ticks: Vec<i32> = (0..nb).map(|i| 2 * i as i32 + 1).collect();
    let label = |v: &i32| format!("{}", (v - 1) / 2 + 1);
    type Pick = fn(&BucketPair) -> Option<f64>;
    let series: [(&str, Pick, bool, bool); 4] = [
        ("ours, median", |b| b.ours_median, true, false),
        ("ours, p99", |b| b.ours_p99, true, true),
        ("reference, median", |b| b.reference_median, false, false),
        ("reference, p99", |b| b.reference_p99, false, true),
    ];
    let points = |pick: Pick| -> Vec<(i32, f64)> {
        p.buckets
            .iter()
            .filter_map(|b| {
                pick(b)
                    .filter(|v| v.is_finite() && *v > 0.0)
                    .map(|v| (2 * b.bucket as i32 + 1, v))
            })
            .collect()
    };
    let all: Vec<f64> = series
        .iter()
        .flat_map(|(_, pick, _, _)| points(*pick).into_iter().map(|(_, v)| v))
        .collect();
    let lo = all.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = all.iter().copied().fold(0.0, f64::max);
    let (lo, hi) = log_range(lo, hi);
    let mut chart = ChartBuilder::on(panel)
        .caption(
            format!(
                "secondary, by size bucket: {}: r {} (median), {} (p99); {} vs {} flows",
                p.policy,
                r_label(p.r_median),
                r_label(p.r_p99),
                p.ours_flows,
                p.reference_flows
            ),
            (FONT, 18),
        )
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(
            (0..2 * nb as i32).with_key_points(ticks),
            (lo..hi)
                .log_scale()
                .with_key_points(log_ticks(lo, hi))
                .with_light_points(log_grid(lo, hi)),
        )
        .map_err(err)?;
    chart
        .configure_mesh()
        .light_line_style(BLACK.mix(0.04))
        .bold_line_style(BLACK.mix(0.15))
        .x_desc("flow-size bucket (equal-count, smallest first)")
        .y_desc("slowdown max(1, FCT/ideal) (log)")
        .x_label_formatter(&label)
        .y_label_formatter(&|v| slowdown_label(*v))
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 15))
        .draw()
        .map_err(err)?;
    for (name, pick, ours, dashed) in series {
        // Ours in the policy's colour, the reference in black; p99 dashed.
        let c = if ours { color } else { BLACK };
        let style = c.stroke_width(if ours { 3 } else { 2 });
        let pts = points(pick);
        if dashed {
            chart
                .draw_series(DashedLineSeries::new(pts.clone(), 8, 5, style))
                .map_err(err)?
                .label(name)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 8, y)], c.stroke_width(3))
                });
        } else {
            chart
                .draw_series(LineSeries::new(pts.clone(), style))
                .map_err(err)?
                .label(name)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(3))
                });
        }
        chart
            .draw_series(pts.into_iter().map(|pt| {
                if ours {
                    Circle::new(pt, 3, c.filled())
                } else {
                    Circle::new(pt, 4, c.stroke_width(1))
                }
            }))
            .map_err(err)?;
    }
    draw_legend(&mut chart, SeriesLabelPosition::UpperLeft, 13)
}

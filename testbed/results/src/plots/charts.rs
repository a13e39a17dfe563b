//! The experiment's figures: slowdown CDFs, slowdown by size bucket,
//! grouped bars and a policy's link utilization.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::style::{
    colors, draw_empty, draw_legend, err, log_grid, log_range, log_ticks, slowdown_label, FONT,
};
use crate::analysis::{BucketTable, PolicyBuckets};
use crate::format::fmt_bytes;

/// CDF lines are drawn through at most this many points per policy: enough
/// to look exact, small enough to keep SVGs light with 10^5 flows.
pub(super) const CDF_POINTS: usize = 1500;

/// A grouped bar chart: per group (x tick) one bar per series, side by
/// side, with optional marks over the bars (e.g. each bar's bound) and a
/// dashed reference line. Values are fractions, shown in percent.
#[derive(Debug, Clone, PartialEq)]
pub struct BarChart {
    /// Title.
    pub title: String,
    /// X axis description.
    pub x_desc: String,
    /// Y axis description.
    pub y_desc: String,
    /// Tick label per group.
    pub groups: Vec<String>,
    /// Per series: its name and one value per group (`groups` order).
    pub series: Vec<(String, Vec<Option<f64>>)>,
    /// Per series, a mark per group drawn as a black line over the bar
    /// (empty: none); named in the legend by `marks_label`.
    pub marks: Vec<Vec<Option<f64>>>,
    /// The legend entry of the marks.
    pub marks_label: String,
    /// A dashed horizontal line and its legend entry.
    pub reference: Option<(f64, String)>,
}

pub(super) fn draw_cdf<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    series: &[(String, Vec<f64>)],
) -> Result<(), String> {
    let series: Vec<&(String, Vec<f64>)> = series.iter().filter(|(_, v)| !v.is_empty()).collect();
    if series.is_empty() {
        return draw_empty(root, title, "no completed flows");
    }
    let positive = series
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .filter(|&x| x > 0.0);
    let lo = positive.clone().fold(f64::INFINITY, f64::min);
    let hi = positive.fold(0.0, f64::max);
    let (lo, hi) = log_range(lo, hi);
    let mut chart = ChartBuilder::on(root)
        .caption(title, (FONT, 24))
        .margin(12)
        .x_label_area_size(50)
        .y_label_area_size(70)
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
        .x_desc("slowdown = FCT / ideal FCT (log scale)")
        .y_desc("fraction of flows")
        .x_label_formatter(&|v| slowdown_label(*v))
        .label_style((FONT, 16))
        .axis_desc_style((FONT, 18))
        .draw()
        .map_err(err)?;
    if lo < 1.0 && hi > 1.0 {
        chart
            .draw_series(DashedLineSeries::new(
                vec![(1.0, 0.0), (1.0, 1.0)],
                6,
                4,
                BLACK.mix(0.5).stroke_width(1),
            ))
            .map_err(err)?
            .label("ideal (slowdown 1)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.mix(0.5)));
    }
    let names: Vec<&str> = series.iter().map(|(p, _)| p.as_str()).collect();
    for ((policy, values), color) in series.iter().zip(colors(&names)) {
        let n = values.len();
        let m = CDF_POINTS.min(n);
        // Evenly spaced ranks, always including the first and the last.
        let mut idx: Vec<usize> = (0..m)
            .map(|k| if m > 1 { k * (n - 1) / (m - 1) } else { n - 1 })
            .collect();
        idx.dedup();
        let pts: Vec<(f64, f64)> = idx
            .into_iter()
            .filter(|&i| values[i] > 0.0)
            .map(|i| (values[i], (i + 1) as f64 / n as f64))
            .collect();
        let width = if policy.eq_ignore_ascii_case("lcmp") {
            3
        } else {
            2
        };
        chart
            .draw_series(LineSeries::new(pts, color.stroke_width(width)))
            .map_err(err)?
            .label(format!("{policy} ({n} flows)"))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3))
            });
    }
    draw_legend(&mut chart, SeriesLabelPosition::LowerRight, 16)
}

pub(super) fn draw_buckets<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    table: &BucketTable,
) -> Result<(), String> {
    let has_data = table.per_policy.iter().any(|p| {
        p.medians
            .iter()
            .chain(&p.p99s)
            .any(|v| v.is_some_and(|v| v > 0.0))
    });
    if table.bounds.is_empty() || !has_data {
        return draw_empty(root, title, "no completed flows");
    }
    let area = root.titled(title, (FONT, 24)).map_err(err)?;
    let panels = area.split_evenly((2, 1));
    let nb = table.bounds.len();
    // Label every bucket when they fit, else every other one.
    let step = if nb > 12 { 2 } else { 1 };
    // Integer x (bucket i at 2i + 1, half a slot of margin each side):
    // plotters only formats custom tick points on integer axes.
    let ticks: Vec<i32> = (0..nb).step_by(step).map(|i| 2 * i as i32 + 1).collect();
    let bounds = table.bounds.clone();
    let label = move |v: &i32| {
        usize::try_from((v - 1) / 2)
            .ok()
            .and_then(|i| bounds.get(i))
            .map(|&(_, hi)| fmt_bytes(hi))
            .unwrap_or_default()
    };
    let names: Vec<&str> = table.per_policy.iter().map(|p| p.policy.as_str()).collect();
    let cols = colors(&names);
    for (panel, (stat, pick_p99)) in panels.iter().zip([("median", false), ("p99", true)]) {
        let values = |p: &PolicyBuckets| -> Vec<(i32, f64)> {
            let v = if pick_p99 { &p.p99s } else { &p.medians };
            v.iter()
                .enumerate()
                .filter_map(|(i, s)| {
                    s.filter(|&s| s > 0.0 && s.is_finite())
                        .map(|s| (2 * i as i32 + 1, s))
                })
                .collect()
        };
        let all: Vec<f64> = table
            .per_policy
            .iter()
            .flat_map(|p| values(p).into_iter().map(|(_, s)| s))
            .collect();
        let lo = all.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = all.iter().copied().fold(0.0, f64::max);
        let (lo, hi) = log_range(lo, hi);
        let mut chart = ChartBuilder::on(panel)
            .margin(10)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d(
                (0..2 * nb as i32).with_key_points(ticks.clone()),
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
            .x_desc("flow size: bucket upper bound (bytes; equal-count buckets)")
            .y_desc(format!("{stat} slowdown (log)"))
            .x_label_formatter(&label)
            .y_label_formatter(&|v| slowdown_label(*v))
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 16))
            .draw()
            .map_err(err)?;
        for (p, &color) in table.per_policy.iter().zip(&cols) {
            let pts = values(p);
            let width = if p.policy.eq_ignore_ascii_case("lcmp") {
                3
            } else {
                2
            };
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(width)))
                .map_err(err)?
                .label(p.policy.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3))
                });
            chart
                .draw_series(pts.into_iter().map(|pt| Circle::new(pt, 3, color.filled())))
                .map_err(err)?;
        }
        draw_legend(&mut chart, SeriesLabelPosition::UpperLeft, 14)?;
    }
    Ok(())
}

pub(super) fn draw_bars<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    c: &BarChart,
) -> Result<(), String> {
    let has_data = c.series.iter().any(|(_, u)| u.iter().any(Option::is_some));
    if c.groups.is_empty() || !has_data {
        return draw_empty(root, &c.title, "no values recorded");
    }
    let np = c.groups.len();
    let max = c
        .series
        .iter()
        .flat_map(|(_, u)| u.iter().flatten().copied())
        .chain(c.marks.iter().flatten().flatten().copied())
        .chain(c.reference.iter().map(|r| r.0))
        .filter(|u| u.is_finite())
        .fold(0.0, f64::max);
    let top = (max * 1.15).max(0.05);
    // Integer x, SLOT units per group (see draw_buckets).
    const SLOT: i32 = 1000;
    let np_i = i32::try_from(np)
        .unwrap_or(i32::MAX / SLOT)
        .min(i32::MAX / SLOT - 1);
    let centers: Vec<i32> = (0..np_i).map(|i| i * SLOT + SLOT / 2).collect();
    let labels = c.groups.clone();
    let label = move |v: &i32| {
        usize::try_from(v / SLOT)
            .ok()
            .and_then(|i| labels.get(i))
            .cloned()
            .unwrap_or_default()
    };
    let mut chart = ChartBuilder::on(root)
        .caption(&c.title, (FONT, 24))
        .margin(12)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d((0..np_i * SLOT).with_key_points(centers), 0.0..top)
        .map_err(err)?;
    chart
        .configure_mesh()
        .light_line_style(BLACK.mix(0.04))
        .bold_line_style(BLACK.mix(0.15))
        .disable_x_mesh()
        .x_desc(c.x_desc.as_str())
        .y_desc(c.y_desc.as_str())
        .x_label_formatter(&label)
        .y_label_formatter(&|v| format!("{:.0} %", v * 100.0))
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 16))
        .draw()
        .map_err(err)?;
    if let Some((y, name)) = &c.reference {
        chart
            .draw_series(DashedLineSeries::new(
                vec![(0, *y), (np_i * SLOT, *y)],
                6,
                4,
                BLACK.mix(0.5).stroke_width(1),
            ))
            .map_err(err)?
            .label(name.clone())
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.mix(0.5)));
    }
    let names: Vec<&str> = c.series.iter().map(|(p, _)| p.as_str()).collect();
    let cols = colors(&names);
    // Each group's slot holds the series' bars side by side in its middle
    // 80 %.
    let width = SLOT * 8 / 10 / i32::try_from(c.series.len()).unwrap_or(1).max(1);
    let x0 = |i: i32, j: i32| i * SLOT + SLOT / 10 + j * width;
    for (j, ((name, values), &color)) in c.series.iter().zip(&cols).enumerate() {
        let j = i32::try_from(j).unwrap_or(0);
        let rects: Vec<Rectangle<(i32, f64)>> = values
            .iter()
            .zip(0..np_i)
            .filter_map(|(u, i)| {
                let u = u.filter(|u| u.is_finite())?;
                Some(Rectangle::new(
                    [(x0(i, j), 0.0), (x0(i, j) + width * 9 / 10, u)],
                    color.filled(),
                ))
            })
            .collect();
        chart
            .draw_series(rects)
            .map_err(err)?
            .label(name.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled()));
    }
    let marks: Vec<PathElement<(i32, f64)>> = c
        .marks
        .iter()
        .zip(0..)
        .flat_map(|(m, j)| {
            m.iter().zip(0..np_i).filter_map(move |(v, i)| {
                let v = v.filter(|v| v.is_finite())?;
                Some(PathElement::new(
                    vec![(x0(i, j), v), (x0(i, j) + width * 9 / 10, v)],
                    BLACK.stroke_width(3),
                ))
            })
        })
        .collect();
    if !marks.is_empty() {
        chart
            .draw_series(marks)
            .map_err(err)?
            .label(c.marks_label.clone())
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], BLACK.stroke_width(3)));
    }
    draw_legend(&mut chart, SeriesLabelPosition::UpperRight, 16)
}

pub(super) fn draw_link_bars<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    bars: &[(String, Option<f64>)],
    color: RGBColor,
) -> Result<(), String> {
    if bars.iter().all(|(_, u)| u.is_none_or(|u| !u.is_finite())) {
        return draw_empty(root, title, "no link measured");
    }
    let max = bars
        .iter()
        .filter_map(|(_, u)| u.filter(|u| u.is_finite()))
        .fold(1.0, f64::max);
    let right = max * 1.1;
    // Integer y, SLOT units per bar (plotters formats custom tick points on
    // integer axes only); bar i at the top of the figure for i = 0.
    const SLOT: i32 = 10;
    let n = i32::try_from(bars.len())
        .unwrap_or(i32::MAX / SLOT)
        .min(i32::MAX / SLOT - 1);
    let slot_of = move |i: i32| (n - 1 - i) * SLOT;
    let centers: Vec<i32> = (0..n).map(|i| slot_of(i) + SLOT / 2).collect();
    let labels: Vec<String> = bars.iter().map(|(l, _)| l.clone()).collect();
    let label = move |v: &i32| {
        usize::try_from(n - 1 - v / SLOT)
            .ok()
            .and_then(|i| labels.get(i))
            .cloned()
            .unwrap_or_default()
    };
    let mut chart = ChartBuilder::on(root)
        .caption(title, (FONT, 24))
        .margin(12)
        .x_label_area_size(50)
        .y_label_area_size(300)
        .build_cartesian_2d(0.0..right, (0..n * SLOT).with_key_points(centers))
        .map_err(err)?;
    chart
        .configure_mesh()
        .light_line_style(BLACK.mix(0.04))
        .bold_line_style(BLACK.mix(0.15))
        .disable_y_mesh()
        .x_desc("utilization (tx bytes / (window x port rate); dashed: 100 %)")
        .x_label_formatter(&|v| format!("{:.0} %", v * 100.0))
        .y_label_formatter(&label)
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 16))
        .draw()
        .map_err(err)?;
    // No legend: it would hide bars; the axis names the dashed line.
    chart
        .draw_series(DashedLineSeries::new(
            vec![(1.0, 0), (1.0, n * SLOT)],
            6,
            4,
            BLACK.mix(0.5).stroke_width(1),
        ))
        .map_err(err)?;
    let rects: Vec<Rectangle<(f64, i32)>> = bars
        .iter()
        .zip(0..n)
        .filter_map(|((_, u), i)| {
            let u = u.filter(|u| u.is_finite())?;
            Some(Rectangle::new(
                [(0.0, slot_of(i) + 1), (u, slot_of(i) + SLOT - 1)],
                color.filled(),
            ))
        })
        .collect();
    chart.draw_series(rects).map_err(err)?;
    Ok(())
}

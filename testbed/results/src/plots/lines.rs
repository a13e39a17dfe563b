//! Line charts: per series a line through (x, y) points, on linear or
//! log axes, several panels to a figure (the rotor flow experiment's
//! utilization, buffer sweep, occupancy CDF and FCT figures).

use plotters::coord::Shift;
use plotters::prelude::*;

use super::style::{colors, draw_empty, draw_legend, err, log_range, log_ticks, trim_num, FONT};
use crate::format::fmt_bytes;

/// How an axis maps values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// Linear from the smallest to the largest value (from 0 where every
    /// value is >= 0).
    Linear,
    /// Logarithmic; values <= 0 are left out.
    Log,
}

/// How an axis writes its tick labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ticks {
    /// `12.5`, `20`, `0.25`.
    Number,
    /// A fraction in percent: `20 %`.
    Percent,
    /// Bytes: `12.5 kB`.
    Bytes,
}

/// An axis: its description, scale and labels.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    /// Description.
    pub desc: String,
    /// Scale.
    pub scale: Scale,
    /// Tick labels.
    pub ticks: Ticks,
    /// Labelled ticks at these values instead of the automatic ones (a
    /// sweep's values), where given.
    pub at: Option<Vec<f64>>,
}

impl Axis {
    /// An axis.
    pub fn new(desc: impl Into<String>, scale: Scale, ticks: Ticks) -> Axis {
        Axis {
            desc: desc.into(),
            scale,
            ticks,
            at: None,
        }
    }

    /// The axis with labelled ticks at `values`.
    pub fn ticks_at(mut self, values: Vec<f64>) -> Axis {
        self.at = Some(values);
        self
    }
}

/// One line.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// Legend entry.
    pub name: String,
    /// Points in drawing order.
    pub points: Vec<(f64, f64)>,
    /// Drawn dashed in grey (a reference such as the offered load) instead
    /// of in the next series colour.
    pub reference: bool,
}

/// One panel of a figure.
#[derive(Debug, Clone, PartialEq)]
pub struct LineChart {
    /// Panel title.
    pub title: String,
    /// X axis.
    pub x: Axis,
    /// Y axis.
    pub y: Axis,
    /// The lines; series colours follow the names as in every other plot.
    pub lines: Vec<Line>,
    /// Dots at the points (sweeps of a few values), or a plain line (CDFs).
    pub markers: bool,
}

/// Pixels per panel.
pub(super) const PANEL: (u32, u32) = (1000, 480);

/// What a figure of `panels` needs, in pixels.
pub(super) fn size(panels: &[LineChart]) -> (u32, u32) {
    (PANEL.0, 50 + PANEL.1 * panels.len().max(1) as u32)
}

/// Where an axis value is drawn: itself, or its log10.
fn to_axis(scale: Scale, v: f64) -> Option<f64> {
    match scale {
        Scale::Linear => v.is_finite().then_some(v),
        Scale::Log => (v.is_finite() && v > 0.0).then(|| v.log10()),
    }
}

/// A 1-2-5 step giving about 6 ticks over `lo..hi`.
fn linear_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let span = hi - lo;
    if !(span.is_finite() && span > 0.0) {
        return vec![lo];
    }
    let raw = span / 6.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let mut v = (lo / step).ceil() * step;
    let mut out = Vec::new();
    while v <= hi + step * 1e-9 && out.len() < 50 {
        out.push(v);
        v += step;
    }
    out
}

/// Axis units (log10 for a log scale) drawn over `0..RES`: plotters
/// formats custom tick points on integer axes only (as in `charts`).
const RES: i32 = 10_000;

/// The drawn range of an axis in axis units, and its labelled ticks as
/// integer positions.
struct Span {
    lo: f64,
    hi: f64,
    ticks: Vec<i32>,
}

impl Span {
    /// `values` in axis units.
    fn of(axis: &Axis, values: &[f64]) -> Span {
        let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let (lo, hi, ticks) = match axis.scale {
            Scale::Log => {
                let (lo, hi) = log_range(10f64.powf(lo), 10f64.powf(hi));
                let ticks: Vec<f64> = log_ticks(lo, hi).into_iter().map(f64::log10).collect();
                (lo.log10(), hi.log10(), ticks)
            }
            Scale::Linear => {
                let lo = if lo >= 0.0 { 0.0 } else { lo };
                let hi = if hi > lo { hi * 1.08 } else { lo + 1.0 };
                (lo, hi, linear_ticks(lo, hi))
            }
        };
        let mut s = Span {
            lo,
            hi,
            ticks: Vec::new(),
        };
        let ticks = match &axis.at {
            Some(at) => at.iter().filter_map(|&v| to_axis(axis.scale, v)).collect(),
            None => ticks,
        };
        s.ticks = ticks.into_iter().map(|t| s.px(t)).collect();
        s
    }

    /// Where axis value `v` is drawn.
    fn px(&self, v: f64) -> i32 {
        ((v - self.lo) / (self.hi - self.lo) * f64::from(RES)).round() as i32
    }

    /// The axis value drawn at `p`.
    fn value(&self, p: i32) -> f64 {
        self.lo + f64::from(p) / f64::from(RES) * (self.hi - self.lo)
    }
}

fn label(axis: &Axis, v: f64) -> String {
    let v = match axis.scale {
        Scale::Linear => v,
        Scale::Log => 10f64.powf(v),
    };
    match axis.ticks {
        Ticks::Number => trim_num(v),
        Ticks::Percent => format!("{} %", trim_num(v * 100.0)),
        Ticks::Bytes => fmt_bytes(v.max(0.0).round() as u64),
    }
}

/// Draws the panels one above the other under `title`.
pub(super) fn draw_lines<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    panels: &[LineChart],
) -> Result<(), String> {
    if panels.is_empty() {
        return draw_empty(root, title, "nothing measured");
    }
    let area = root.titled(title, (FONT, 24)).map_err(err)?;
    for (panel, chart) in area.split_evenly((panels.len(), 1)).iter().zip(panels) {
        draw_panel(panel, chart)?;
    }
    Ok(())
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    c: &LineChart,
) -> Result<(), String> {
    let lines: Vec<(&Line, Vec<(f64, f64)>)> = c
        .lines
        .iter()
        .map(|l| {
            let pts = l
                .points
                .iter()
                .filter_map(|&(x, y)| Some((to_axis(c.x.scale, x)?, to_axis(c.y.scale, y)?)))
                .collect();
            (l, pts)
        })
        .collect();
    let xs: Vec<f64> = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|p| p.0))
        .collect();
    let ys: Vec<f64> = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|p| p.1))
        .collect();
    if xs.is_empty() {
        return draw_empty(area, &c.title, "no values recorded");
    }
    let xm = Span::of(&c.x, &xs);
    let ym = Span::of(&c.y, &ys);
    let mut chart = ChartBuilder::on(area)
        .caption(&c.title, (FONT, 20))
        .margin(10)
        .x_label_area_size(45)
        .y_label_area_size(80)
        .build_cartesian_2d(
            (0..RES).with_key_points(xm.ticks.clone()),
            (0..RES).with_key_points(ym.ticks.clone()),
        )
        .map_err(err)?;
    chart
        .configure_mesh()
        .light_line_style(BLACK.mix(0.04))
        .bold_line_style(BLACK.mix(0.15))
        .x_desc(c.x.desc.as_str())
        .y_desc(c.y.desc.as_str())
        .x_label_formatter(&|v| label(&c.x, xm.value(*v)))
        .y_label_formatter(&|v| label(&c.y, ym.value(*v)))
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 16))
        .draw()
        .map_err(err)?;
    let lines: Vec<(&Line, Vec<(i32, i32)>)> = lines
        .into_iter()
        .map(|(l, pts)| (l, pts.iter().map(|&(x, y)| (xm.px(x), ym.px(y))).collect()))
        .collect();
    let names: Vec<&str> = lines
        .iter()
        .filter(|(l, _)| !l.reference)
        .map(|(l, _)| l.name.as_str())
        .collect();
    let mut cols = colors(&names).into_iter();
    for (l, pts) in lines {
        if l.reference {
            let style = BLACK.mix(0.5).stroke_width(1);
            chart
                .draw_series(DashedLineSeries::new(pts, 6, 4, style))
                .map_err(err)?
                .label(l.name.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
            continue;
        }
        let color = cols.next().unwrap_or(BLACK);
        let width = if l.name.eq_ignore_ascii_case("mars") {
            3
        } else {
            2
        };
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(width)))
            .map_err(err)?
            .label(l.name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3))
            });
        if c.markers {
            chart
                .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))
                .map_err(err)?;
        }
    }
    draw_legend(&mut chart, SeriesLabelPosition::UpperLeft, 14)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_ticks_step_1_2_5() {
        // Span 1.08 / 6 = 0.18 -> step 0.2: 0, 0.2, ..., 1.0.
        let t = linear_ticks(0.0, 1.08);
        assert_eq!(t.len(), 6);
        assert!((t[5] - 1.0).abs() < 1e-12, "{t:?}");
        // Span 64 / 6 = 10.7 -> step 20: 0, 20, 40, 60.
        assert_eq!(linear_ticks(0.0, 64.0), vec![0.0, 20.0, 40.0, 60.0]);
    }

    #[test]
    fn labels_undo_the_log_and_format() {
        let a = Axis::new("x", Scale::Log, Ticks::Number);
        assert_eq!(label(&a, 2.0), "100");
        let p = Axis::new("y", Scale::Linear, Ticks::Percent);
        assert_eq!(label(&p, 0.2), "20 %");
        let b = Axis::new("b", Scale::Linear, Ticks::Bytes);
        assert_eq!(label(&b, 12_500.0), "12.5 kB");
        // Log scales leave out what they cannot show.
        assert_eq!(to_axis(Scale::Log, 0.0), None);
        assert_eq!(to_axis(Scale::Linear, 0.0), Some(0.0));
    }
}

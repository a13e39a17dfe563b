//! The experiment's plots, each as SVG and PNG: per (workload, load) the
//! slowdown CDF per policy, median and p99 slowdown by flow-size bucket,
//! per-path utilization per policy (where only the source switch chooses a
//! path: [`analysis::transit_choices`]) and, per policy, the utilization of
//! every link direction; and the fidelity figure (per policy the CDFs of
//! ours and a reference simulator's slowdowns, and per size bucket,
//! [`write_fidelity_plot`]); grouped bars ([`write_bar_chart`]) and line
//! charts in panels ([`write_line_chart`]) for the rotor experiments.
//!
//! Text is drawn with DejaVu Sans (plotters' `ab_glyph` renderer needs a
//! font file; SVG output names the family and lets the viewer draw it).

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::analysis::{
    self, groups, pooled_slowdowns, Aggregate, BucketTable, IdealModel, RunInput, Summary,
};
use crate::fidelity::model::FidelityReport;
use charts::{draw_bars, draw_buckets, draw_cdf, draw_link_bars};
use fidelity::draw_fidelity;
use style::{colors, err, trim_num};

mod charts;
mod fidelity;
mod lines;
mod style;

pub use charts::BarChart;
pub use lines::{Axis, Line, LineChart, Scale, Ticks};
pub use style::{ensure_font, policy_color, FONT_PATH};

const SIZE: (u32, u32) = (1000, 640);

/// File-name form of a workload and load: `cdf-websearch-0.3`.
pub fn plot_stem(kind: &str, workload: &str, load: f64) -> String {
    format!("{kind}-{}-{load}", file_token(workload))
}

/// A name as a file-name part: lowercase ASCII letters and digits, `-`
/// for everything else.
fn file_token(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect()
}

/// What one figure shows, backend-independent.
enum Plot {
    Cdf {
        title: String,
        /// Per policy, ascending slowdowns.
        series: Vec<(String, Vec<f64>)>,
    },
    Buckets {
        title: String,
        table: BucketTable,
    },
    Bars(BarChart),
    /// One policy's utilization of every link direction, as horizontal
    /// bars top-down in the given order.
    LinkBars {
        title: String,
        /// Per link direction: its label and utilization (`None`: not
        /// measured).
        bars: Vec<(String, Option<f64>)>,
        color: RGBColor,
    },
    Fidelity(FidelityReport),
    /// Line-chart panels one above the other under a title.
    Lines {
        title: String,
        panels: Vec<LineChart>,
    },
}

/// Pixels per bar of [`Plot::LinkBars`].
const LINK_BAR_PX: u32 = 22;

impl Plot {
    /// Pixels; the fidelity figure grows a panel per policy, the link
    /// figure a row per link direction.
    fn size(&self) -> (u32, u32) {
        match self {
            Plot::Fidelity(r) => (1500, 80 + 360 * r.policies.len().max(1) as u32),
            Plot::Lines { panels, .. } => lines::size(panels),
            Plot::LinkBars { bars, .. } => {
                (SIZE.0, (120 + LINK_BAR_PX * bars.len() as u32).max(SIZE.1))
            }
            _ => SIZE,
        }
    }
}

/// Writes `chart` as `<stem>.svg` and `<stem>.png` into `out_dir` and
/// returns the two files.
pub fn write_bar_chart(
    out_dir: &Path,
    stem: &str,
    chart: &BarChart,
) -> Result<Vec<PathBuf>, String> {
    ensure_font()?;
    std::fs::create_dir_all(out_dir).map_err(|e| format!("creating {}: {e}", out_dir.display()))?;
    write_both(out_dir, stem, &Plot::Bars(chart.clone()))
}

/// Writes `panels` one above the other under `title` as `<stem>.svg` and
/// `<stem>.png` into `out_dir` (created if needed) and returns the two
/// files.
pub fn write_line_chart(
    out_dir: &Path,
    stem: &str,
    title: &str,
    panels: &[LineChart],
) -> Result<Vec<PathBuf>, String> {
    ensure_font()?;
    std::fs::create_dir_all(out_dir).map_err(|e| format!("creating {}: {e}", out_dir.display()))?;
    let plot = Plot::Lines {
        title: title.to_string(),
        panels: panels.to_vec(),
    };
    write_both(out_dir, stem, &plot)
}

/// Writes every plot into `out_dir` (created if needed) and returns the
/// written files (`out_dir` joined with the name): for each (workload,
/// load) of `summary`, `cdf-`, `buckets-` and
/// `utilization-<workload>-<load>` (the last left out where switches after
/// the source choose too: [`analysis::transit_choices`]), and where the
/// summary has links, `links-<workload>-<load>-<policy>` per policy, each
/// `.svg` and `.png`. `inputs` and `ideal` are what `summary` was built
/// from (the CDFs need every flow's slowdown).
pub fn write_plots(
    summary: &Summary,
    inputs: &[RunInput],
    ideal: &IdealModel,
    out_dir: &Path,
) -> Result<Vec<PathBuf>, String> {
    ensure_font()?;
    std::fs::create_dir_all(out_dir).map_err(|e| format!("creating {}: {e}", out_dir.display()))?;
    let mut keys = groups(summary.runs.iter().map(|r| (r.workload.as_str(), r.load)));
    for (w, l) in groups(inputs.iter().map(|r| (r.workload.as_str(), r.load))) {
        if !keys
            .iter()
            .any(|(kw, kl)| *kw == w && kl.to_bits() == l.to_bits())
        {
            keys.push((w, l));
        }
    }
    let mut written = Vec::new();
    for (workload, load) in keys {
        let name = format!("{workload}, load {load}");
        let series = pooled_slowdowns(inputs, ideal, &workload, load);
        let plot = Plot::Cdf {
            title: format!("{name}: FCT slowdown CDF (pooled over seeds)"),
            series,
        };
        written.extend(write_both(
            out_dir,
            &plot_stem("cdf", &workload, load),
            &plot,
        )?);

        let table = summary
            .buckets
            .iter()
            .find(|t| t.workload == workload && t.load.to_bits() == load.to_bits())
            .cloned()
            .unwrap_or_else(|| BucketTable {
                workload: workload.clone(),
                load,
                bounds: Vec::new(),
                per_policy: Vec::new(),
            });
        let plot = Plot::Buckets {
            title: format!("{name}: slowdown by flow size"),
            table,
        };
        written.extend(write_both(
            out_dir,
            &plot_stem("buckets", &workload, load),
            &plot,
        )?);

        let aggs: Vec<&Aggregate> = summary
            .aggregates
            .iter()
            .filter(|a| a.workload == workload && a.load.to_bits() == load.to_bits())
            .collect();
        let runs = summary
            .runs
            .iter()
            .filter(|r| r.workload == workload && r.load.to_bits() == load.to_bits());
        // A source port's bytes are one path's only where nobody after the
        // source chooses; report.md says why the figure is missing.
        if analysis::transit_choices(runs).is_empty() {
            let plot = utilization_plot(&name, &aggs, inputs);
            written.extend(write_both(
                out_dir,
                &plot_stem("utilization", &workload, load),
                &plot,
            )?);
        }
        if !summary.links.is_empty() {
            let names: Vec<&str> = aggs.iter().map(|a| a.policy.as_str()).collect();
            for (a, color) in aggs.iter().zip(colors(&names)) {
                let plot = link_plot(&name, a, summary, color);
                let stem = format!(
                    "{}-{}",
                    plot_stem("links", &workload, load),
                    file_token(&a.policy)
                );
                written.extend(write_both(out_dir, &stem, &plot)?);
            }
        }
    }
    Ok(written)
}

/// One policy's link utilization: every link direction of
/// `summary.links`, in its (topology) order, labelled with its rate.
fn link_plot(name: &str, a: &Aggregate, summary: &Summary, color: RGBColor) -> Plot {
    let bars = summary
        .links
        .iter()
        .map(|l| {
            let u = a.link_utilization.get(&l.name).copied();
            let rate = format!("{} Mbit/s", trim_num(l.rate_bps as f64 / 1e6));
            let label = match u {
                Some(_) => format!("{} ({rate})", l.name),
                None => format!("{} ({rate}; not measured)", l.name),
            };
            (label, u)
        })
        .collect();
    Plot::LinkBars {
        title: format!("{name}, {}: link utilization (mean over seeds)", a.policy),
        bars,
        color,
    }
}

fn utilization_plot(name: &str, aggs: &[&Aggregate], inputs: &[RunInput]) -> Plot {
    let mut names: Vec<String> = Vec::new();
    for a in aggs {
        for p in &a.paths {
            if !names.contains(&p.name) {
                names.push(p.name.clone());
            }
        }
    }
    // Tick labels carry the configured delay and rate, which explain the
    // policies' choices.
    let spec = |n: &str| {
        inputs
            .iter()
            .flat_map(|r| r.paths.iter())
            .find(|p| p.name == n)
            .map(|p| {
                format!(
                    "{n} ({} ms, {} Mbit/s)",
                    trim_num(p.rtt_us as f64 / 1000.0),
                    trim_num(p.bottleneck_bps as f64 / 1e6)
                )
            })
            .unwrap_or_else(|| n.to_string())
    };
    let paths = names.iter().map(|n| spec(n)).collect();
    let bars = aggs
        .iter()
        .map(|a| {
            let u = names
                .iter()
                .map(|n| {
                    a.paths
                        .iter()
                        .find(|p| &p.name == n)
                        .and_then(|p| p.utilization_mean)
                })
                .collect();
            (a.policy.clone(), u)
        })
        .collect();
    Plot::Bars(BarChart {
        title: format!("{name}: path utilization (mean over seeds)"),
        x_desc: "path (via switch; configured RTT, bottleneck rate)".into(),
        y_desc: "utilization (tx bytes / window x bottleneck rate)".into(),
        groups: paths,
        series: bars,
        marks: Vec::new(),
        marks_label: String::new(),
        reference: Some((1.0, "bottleneck rate".into())),
    })
}

fn write_both(out_dir: &Path, stem: &str, plot: &Plot) -> Result<Vec<PathBuf>, String> {
    let svg = out_dir.join(format!("{stem}.svg"));
    let png = out_dir.join(format!("{stem}.png"));
    {
        let root = SVGBackend::new(&svg, plot.size()).into_drawing_area();
        draw(&root, plot).map_err(|e| format!("{}: {e}", svg.display()))?;
    }
    {
        let root = BitMapBackend::new(&png, plot.size()).into_drawing_area();
        draw(&root, plot).map_err(|e| format!("{}: {e}", png.display()))?;
    }
    Ok(vec![svg, png])
}

fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, plot: &Plot) -> Result<(), String> {
    root.fill(&WHITE).map_err(err)?;
    match plot {
        Plot::Cdf { title, series } => draw_cdf(root, title, series)?,
        Plot::Buckets { title, table } => draw_buckets(root, title, table)?,
        Plot::Bars(chart) => draw_bars(root, chart)?,
        Plot::LinkBars { title, bars, color } => draw_link_bars(root, title, bars, *color)?,
        Plot::Fidelity(r) => draw_fidelity(root, r)?,
        Plot::Lines { title, panels } => lines::draw_lines(root, title, panels)?,
    }
    root.present().map_err(err)
}

/// Writes the fidelity figure of `report` as `fidelity.svg` and
/// `fidelity.png` into `out_dir` (created if needed): a row per policy,
/// on the left the CDFs of ours and the reference's slowdown (and of the
/// reference's rerun, the floor, where given) with W1, KS and the ratios
/// in the caption, on the right, secondary, the median and p99 slowdown
/// per size bucket on a log axis.
pub fn write_fidelity_plot(
    report: &FidelityReport,
    out_dir: &Path,
) -> Result<Vec<PathBuf>, String> {
    ensure_font()?;
    std::fs::create_dir_all(out_dir).map_err(|e| format!("creating {}: {e}", out_dir.display()))?;
    write_both(out_dir, "fidelity", &Plot::Fidelity(report.clone()))
}

#[cfg(test)]
mod tests;

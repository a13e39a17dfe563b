//! The experiment's plots, each as SVG and PNG: per (workload, load) the
//! slowdown CDF per policy, median and p99 slowdown by flow-size bucket,
//! per-path utilization per policy (where only the source switch chooses a
//! path: [`analysis::transit_choices`]) and, per policy, the utilization of
//! every link direction; and the fidelity figure (per policy the CDFs of
//! ours and a reference simulator's slowdowns, and per size bucket,
//! [`write_fidelity_plot`]).
//!
//! Text is drawn with DejaVu Sans (plotters' `ab_glyph` renderer needs a
//! font file; SVG output names the family and lets the viewer draw it).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::analysis::{
    self, groups, pooled_slowdowns, Aggregate, BucketTable, IdealModel, RunInput, Summary,
};
use crate::fidelity::{FidelityReport, PolicyFidelity};
use crate::report::fmt_bytes;

/// The font file (Debian package `fonts-dejavu-core`).
pub const FONT_PATH: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

const FONT: &str = "sans-serif";
const SIZE: (u32, u32) = (1000, 640);
/// CDF lines are drawn through at most this many points per policy: enough
/// to look exact, small enough to keep SVGs light with 10^5 flows.
const CDF_POINTS: usize = 1500;

/// Registers DejaVu Sans as plotters' `sans-serif` once per process.
pub fn ensure_font() -> Result<(), String> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        let bytes = std::fs::read(FONT_PATH).map_err(|e| {
            format!(
                "plots need the font {FONT_PATH} ({e}); install it with \
                 `apt-get install -y fonts-dejavu-core`"
            )
        })?;
        // plotters keeps fonts for the process lifetime and wants 'static
        // bytes; this happens once.
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font(FONT, FontStyle::Normal, bytes)
            .map_err(|_| format!("{FONT_PATH} is not a usable TrueType font"))
    })
    .clone()
}

/// Fixed colour of a policy (LCMP red in every plot); others cycle through
/// a palette by their position among the unknown policies.
pub fn policy_color(policy: &str, other_index: usize) -> RGBColor {
    match policy.to_ascii_lowercase().as_str() {
        "lcmp" => RGBColor(214, 39, 40),
        "ecmp" => RGBColor(31, 119, 180),
        "wcmp" => RGBColor(44, 160, 44),
        "ucmp" => RGBColor(148, 103, 189),
        _ => {
            const OTHERS: [RGBColor; 4] = [
                RGBColor(255, 127, 14),
                RGBColor(140, 86, 75),
                RGBColor(127, 127, 127),
                RGBColor(23, 190, 207),
            ];
            OTHERS[other_index % OTHERS.len()]
        }
    }
}

/// Colours for policies in the given order.
fn colors(policies: &[&str]) -> Vec<RGBColor> {
    let mut others = 0;
    policies
        .iter()
        .map(|p| {
            let c = policy_color(p, others);
            if !matches!(
                p.to_ascii_lowercase().as_str(),
                "lcmp" | "ecmp" | "wcmp" | "ucmp"
            ) {
                others += 1;
            }
            c
        })
        .collect()
}

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
}

/// Pixels per bar of [`Plot::LinkBars`].
const LINK_BAR_PX: u32 = 22;

impl Plot {
    /// Pixels; the fidelity figure grows a panel per policy, the link
    /// figure a row per link direction.
    fn size(&self) -> (u32, u32) {
        match self {
            Plot::Fidelity(r) => (1500, 80 + 360 * r.policies.len().max(1) as u32),
            Plot::LinkBars { bars, .. } => {
                (SIZE.0, (120 + LINK_BAR_PX * bars.len() as u32).max(SIZE.1))
            }
            _ => SIZE,
        }
    }
}

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

/// `12.5`, `20`, `0.25`: short labels without trailing zeros.
fn trim_num(v: f64) -> String {
    let s = if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
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
    }
    root.present().map_err(err)
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// A figure without data still gets its title and says why it is empty.
fn draw_empty<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    why: &str,
) -> Result<(), String> {
    let area = root.titled(title, (FONT, 24)).map_err(err)?;
    let (w, h) = area.dim_in_pixel();
    area.draw(&Text::new(
        why.to_string(),
        (w as i32 / 2 - 90, h as i32 / 2),
        (FONT, 22).into_font().color(&BLACK),
    ))
    .map_err(err)
}

/// A positive log-axis range covering `lo..=hi` with a margin.
fn log_range(lo: f64, hi: f64) -> (f64, f64) {
    let lo = if lo.is_finite() && lo > 0.0 { lo } else { 1.0 };
    let hi = if hi.is_finite() && hi >= lo { hi } else { lo };
    let (lo, hi) = (lo / 1.25, hi * 1.25);
    // A single value still needs a decade to draw ticks in.
    if hi / lo < 10.0 {
        let mid = (lo * hi).sqrt();
        (mid / 10f64.sqrt(), mid * 10f64.sqrt())
    } else {
        (lo, hi)
    }
}

/// `m x 10^k` values within `lo..=hi` for the given mantissas.
fn decade_points(lo: f64, hi: f64, mantissas: &[f64]) -> Vec<f64> {
    if !(lo > 0.0 && hi >= lo && hi.is_finite()) {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut exp = lo.log10().floor() as i32;
    while 10f64.powi(exp) <= hi && out.len() < 200 {
        for m in mantissas {
            let v = m * 10f64.powi(exp);
            if v >= lo && v <= hi {
                out.push(v);
            }
        }
        exp += 1;
    }
    out
}

/// Labelled ticks of a log axis: 1-2-5 per decade, every integer mantissa
/// on short ranges, decades only on long ones.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let ticks = decade_points(lo, hi, &[1.0, 2.0, 5.0]);
    if ticks.len() < 4 {
        decade_points(lo, hi, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])
    } else if ticks.len() > 12 {
        decade_points(lo, hi, &[1.0])
    } else {
        ticks
    }
}

/// Grid lines of a log axis: every integer mantissa.
fn log_grid(lo: f64, hi: f64) -> Vec<f64> {
    decade_points(lo, hi, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])
}

fn slowdown_label(v: f64) -> String {
    trim_num(v)
}

fn draw_cdf<DB: DrawingBackend>(
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

/// The legend every chart here draws: translucent white box, black border.
fn draw_legend<'a, DB, CT>(
    chart: &mut ChartContext<'a, DB, CT>,
    position: SeriesLabelPosition,
    font_size: u32,
) -> Result<(), String>
where
    DB: DrawingBackend + 'a,
    CT: CoordTranslate,
{
    chart
        .configure_series_labels()
        .position(position)
        .label_font((FONT, font_size))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)
}

fn draw_buckets<DB: DrawingBackend>(
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
        let values = |p: &crate::analysis::PolicyBuckets| -> Vec<(i32, f64)> {
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

fn draw_bars<DB: DrawingBackend>(
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

fn draw_link_bars<DB: DrawingBackend>(
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

fn r_label(r: Option<f64>) -> String {
    r.map_or_else(|| "undefined".to_string(), |r| format!("{r:.2}"))
}

fn fig_label(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.digits$}"))
}

fn draw_fidelity<DB: DrawingBackend>(
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
fn draw_fidelity_cdf<DB: DrawingBackend>(
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

fn draw_fidelity_panel<DB: DrawingBackend>(
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
    type Pick = fn(&crate::fidelity::BucketPair) -> Option<f64>;
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

#[cfg(test)]
mod tests {
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
}

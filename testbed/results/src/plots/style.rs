//! What every figure shares: the font, the policies' colours, log axes,
//! the legend, and the figure that has no data.

use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;

/// The font file (Debian package `fonts-dejavu-core`).
pub const FONT_PATH: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

pub(super) const FONT: &str = "sans-serif";

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

/// Fixed colour of a policy (LCMP, and Mars, red in every plot); others cycle through
/// a palette by their position among the unknown policies.
pub fn policy_color(policy: &str, other_index: usize) -> RGBColor {
    match policy.to_ascii_lowercase().as_str() {
        // The design under study is red: LCMP, and Mars in the rotor plots.
        "lcmp" | "mars" => RGBColor(214, 39, 40),
        "ecmp" => RGBColor(31, 119, 180),
        "wcmp" => RGBColor(44, 160, 44),
        "ucmp" => RGBColor(148, 103, 189),
        _ => {
            // The first four as they always were; the rest so that five
            // rotor designs (and more) get distinct colours.
            const OTHERS: [RGBColor; 7] = [
                RGBColor(255, 127, 14),
                RGBColor(140, 86, 75),
                RGBColor(127, 127, 127),
                RGBColor(23, 190, 207),
                RGBColor(188, 189, 34),
                RGBColor(227, 119, 194),
                RGBColor(0, 0, 128),
            ];
            OTHERS[other_index % OTHERS.len()]
        }
    }
}

/// Colours for policies in the given order.
pub(super) fn colors(policies: &[&str]) -> Vec<RGBColor> {
    let mut others = 0;
    policies
        .iter()
        .map(|p| {
            let c = policy_color(p, others);
            if !matches!(
                p.to_ascii_lowercase().as_str(),
                "lcmp" | "mars" | "ecmp" | "wcmp" | "ucmp"
            ) {
                others += 1;
            }
            c
        })
        .collect()
}

/// `12.5`, `20`, `0.25`: short labels without trailing zeros.
pub(super) fn trim_num(v: f64) -> String {
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

pub(super) fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// A figure without data still gets its title and says why it is empty.
pub(super) fn draw_empty<DB: DrawingBackend>(
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
pub(super) fn log_range(lo: f64, hi: f64) -> (f64, f64) {
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
pub(super) fn decade_points(lo: f64, hi: f64, mantissas: &[f64]) -> Vec<f64> {
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
pub(super) fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
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
pub(super) fn log_grid(lo: f64, hi: f64) -> Vec<f64> {
    decade_points(lo, hi, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])
}

pub(super) fn slowdown_label(v: f64) -> String {
    trim_num(v)
}

/// The legend every chart here draws: translucent white box, black border.
pub(super) fn draw_legend<'a, DB, CT>(
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

//! How the renderers write numbers and cells, so that a figure reads the
//! same in `report.md`, on the terminal and in the plots.

pub use lcmp_topology::units::human_bytes as fmt_bytes;

/// An absent figure.
pub const DASH: &str = "—";

/// Three significant digits or so: `123`, `12.3`, `1.23`.
pub fn num(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// [`num`], or [`DASH`] for none.
pub fn opt_num(v: Option<f64>) -> String {
    v.map_or_else(|| DASH.to_string(), num)
}

/// A fraction in percent, one decimal ([`DASH`] for none).
pub fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| DASH.to_string(), |v| format!("{:.1} %", v * 100.0))
}

/// A signed fraction in percent, one decimal ([`DASH`] for none).
pub fn signed_pct(v: Option<f64>) -> String {
    v.map_or_else(|| DASH.to_string(), |v| format!("{:+.1} %", v * 100.0))
}

/// An inclusive size range, `lo – hi` (one size alone where equal).
pub fn size_range(lo: u64, hi: u64) -> String {
    if lo == hi {
        fmt_bytes(lo)
    } else {
        format!("{} – {}", fmt_bytes(lo), fmt_bytes(hi))
    }
}

/// A markdown table cell: no `|` or line breaks.
pub fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// The items without repeats, in first-seen order (a table's columns).
pub fn distinct<T: PartialEq + Clone>(items: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut out = Vec::new();
    for i in items {
        if !out.contains(&i) {
            out.push(i);
        }
    }
    out
}

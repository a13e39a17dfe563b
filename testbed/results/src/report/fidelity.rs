//! `report.md`'s fidelity section: a [`FidelityReport`] as markdown, and
//! where it goes in a report.

use std::fmt::Write as _;
use std::path::PathBuf;

use crate::fidelity::model::{FidelityReport, OursSource};
use crate::format::{cell, opt_num, size_range, DASH};
use crate::table::Table;

/// Where the fidelity section starts and ends in `report.md`, so that a
/// second `fidelity` run replaces it instead of adding another.
pub const FIDELITY_BEGIN: &str = "<!-- lcmp-testbed fidelity: begin -->";
pub const FIDELITY_END: &str = "<!-- lcmp-testbed fidelity: end -->";

fn r_cell(r: Option<f64>) -> String {
    r.map_or_else(|| "undefined".to_string(), |r| format!("{r:.3}"))
}

fn pair_cell(a: Option<f64>, b: Option<f64>) -> String {
    format!("{} / {}", opt_num(a), opt_num(b))
}

fn d_cell(v: Option<f64>) -> String {
    v.map_or_else(|| DASH.to_string(), |v| format!("{v:.3}"))
}

fn ratio_cell(ratio: Option<f64>, ours: Option<f64>, reference: Option<f64>) -> String {
    match ratio {
        Some(x) => format!("{x:.2} ({})", pair_cell(ours, reference)),
        None => pair_cell(ours, reference),
    }
}

/// The fidelity section (between [`FIDELITY_BEGIN`] and [`FIDELITY_END`]):
/// first the headline per policy (W1 and KS of ln slowdown, the median
/// and p99 ratios ours / reference, FCT minus ideal per MB both sides)
/// with the floor, then, secondary, r over the size buckets (the pooled r
/// labelled as measuring that the policies differ), a table per policy of
/// ours and the reference per size bucket, notes, and `plots` (paths
/// relative to the report) as images.
pub fn render_fidelity_section(r: &FidelityReport, plots: &[PathBuf]) -> String {
    let mut out = format!("{FIDELITY_BEGIN}\n## Fidelity: testbed vs reference simulator\n\n");
    let _ = writeln!(
        out,
        "{}, load {}. Slowdown = max(1, FCT / ideal) (the LCMP artifact's; the reference's \
         ideal is the simulator's standalone FCT). Ours: {}. Fidelity is compared as \
         distributions: per policy, W1 (mean absolute difference of the quantiles) and KS \
         (largest gap between the CDFs) of ln(slowdown) between our flows and the \
         reference's, the ratios ours / reference of the median and the p99 slowdown, and FCT \
         minus ideal per MB (ms per MB of the unscaled flow, model time; slope between the \
         smallest and the largest of {} equal-count size buckets' medians).\n",
        cell(&r.workload),
        r.load,
        match r.ours_source {
            OursSource::Flows =>
                "the completed non-warm-up flows of runs/*/flows.csv, pooled over seeds",
            OursSource::SummaryBuckets =>
                "summary.json's size buckets (the run directory has no flows.csv)",
        },
        r.buckets
    );
    let mut t = Table::new([
        "policy",
        "reference",
        "runs",
        "flows ours / reference",
        "W1 ln slowdown",
        "KS ln slowdown",
        "median ratio (ours / reference)",
        "p99 ratio (ours / reference)",
        "FCT − ideal, ms/MB ours / reference",
    ]);
    for p in &r.policies {
        t.row([
            cell(&p.policy),
            format!("`{}`", cell(&p.reference_file)),
            p.runs.to_string(),
            format!("{} / {}", p.ours_flows, p.reference_flows),
            d_cell(p.distance.w1_ln_slowdown),
            d_cell(p.distance.ks_ln_slowdown),
            ratio_cell(p.distance.median_ratio, p.ours_median, p.reference_median),
            ratio_cell(p.distance.p99_ratio, p.ours_p99, p.reference_p99),
            pair_cell(p.ours_excess_ms_per_mb, p.reference_excess_ms_per_mb),
        ]);
    }
    out += &t.markdown();
    out.push('\n');
    let floors: Vec<_> = r
        .policies
        .iter()
        .filter_map(|p| Some((p, p.floor.as_ref()?)))
        .collect();
    if !floors.is_empty() {
        let _ = writeln!(
            out,
            "Floor: the reference against a second run of the simulator (the same figures, \
             the rerun in place of ours), measured here:\n"
        );
        let mut t = Table::new([
            "policy",
            "rerun",
            "flows rerun / reference",
            "W1 ln slowdown",
            "KS ln slowdown",
            "median ratio (rerun / reference)",
            "p99 ratio (rerun / reference)",
            "FCT − ideal, ms/MB rerun / reference",
        ]);
        for (p, f) in floors {
            t.row([
                cell(&p.policy),
                format!("`{}`", cell(&f.rerun_file)),
                format!("{} / {}", f.rerun_flows, p.reference_flows),
                d_cell(f.distance.w1_ln_slowdown),
                d_cell(f.distance.ks_ln_slowdown),
                ratio_cell(f.distance.median_ratio, f.rerun_median, p.reference_median),
                ratio_cell(f.distance.p99_ratio, f.rerun_p99, p.reference_p99),
                pair_cell(f.rerun_excess_ms_per_mb, p.reference_excess_ms_per_mb),
            ]);
        }
        out += &t.markdown();
        out.push('\n');
    }
    if let Some(w1) = r.quoted_floor_lcmp_w1 {
        let _ = writeln!(
            out,
            "Floor, quoted (issue 26), not measured here: the simulator against its own rerun \
             of LCMP has W1 {w1} (no second reference run was given).\n"
        );
    }
    let _ = writeln!(
        out,
        "### Secondary: r over size buckets\n\nEach side cut into {} equal-count buckets of \
         its own flow sizes, bucket k of ours against bucket k of the reference; r = Pearson \
         correlation of ln(slowdown) over the buckets (the paper reports r = {} at the median \
         and {} at p99 between its testbed and its simulator). r pooled over the policies \
         measures that the policies differ, not that we match them: {} at the median, {} at \
         p99.\n",
        r.buckets,
        r.paper_r_median,
        r.paper_r_p99,
        r_cell(r.pooled_r_median),
        r_cell(r.pooled_r_p99)
    );
    let mut t = Table::new(["policy", "r median", "r p99"]);
    for p in &r.policies {
        t.row([cell(&p.policy), r_cell(p.r_median), r_cell(p.r_p99)]);
    }
    out += &t.markdown();
    out.push('\n');
    for p in &r.policies {
        let _ = writeln!(out, "#### {} by flow size\n", cell(&p.policy));
        let mut t = Table::new([
            "bucket",
            "sizes ours",
            "sizes reference",
            "flows ours / ref",
            "median ours",
            "median ref",
            "p99 ours",
            "p99 ref",
        ]);
        for b in &p.buckets {
            t.row([
                (b.bucket + 1).to_string(),
                size_range(b.ours_lo, b.ours_hi),
                size_range(b.reference_lo, b.reference_hi),
                format!("{} / {}", b.ours_flows, b.reference_flows),
                opt_num(b.ours_median),
                opt_num(b.reference_median),
                opt_num(b.ours_p99),
                opt_num(b.reference_p99),
            ]);
        }
        out += &t.markdown();
        out.push('\n');
        for n in &p.notes {
            let _ = writeln!(out, "- {}", n.replace('\n', " "));
        }
        if !p.notes.is_empty() {
            out.push('\n');
        }
    }
    for n in &r.notes {
        let _ = writeln!(out, "Note: {}\n", n.replace('\n', " "));
    }
    let link = |p: &PathBuf| p.to_string_lossy().replace(' ', "%20");
    let png = plots
        .iter()
        .find(|p| p.extension().is_some_and(|e| e == "png"));
    let svg = plots
        .iter()
        .find(|p| p.extension().is_some_and(|e| e == "svg"));
    if let Some(png) = png {
        let _ = writeln!(out, "![fidelity]({})\n", link(png));
    }
    if let Some(svg) = svg {
        let _ = writeln!(out, "[SVG]({})\n", link(svg));
    }
    out.push_str(FIDELITY_END);
    out.push('\n');
    out
}

/// `report` with `section` (from [`render_fidelity_section`]) in place of
/// its fidelity section, or inserted before the per-run table (`## Runs`)
/// or at the end when it has none: a second run leaves one section.
pub fn with_fidelity_section(report: &str, section: &str) -> String {
    if let Some(b) = report.find(FIDELITY_BEGIN) {
        if let Some(e) = report[b..].find(FIDELITY_END) {
            let mut end = b + e + FIDELITY_END.len();
            if report[end..].starts_with('\n') {
                end += 1;
            }
            return format!("{}{section}{}", &report[..b], &report[end..]);
        }
    }
    if let Some(at) = report.find("\n## Runs\n") {
        return format!("{}{section}{}", &report[..at + 1], &report[at..]);
    }
    if report.is_empty() {
        return section.to_string();
    }
    let sep = if report.ends_with("\n\n") {
        ""
    } else if report.ends_with('\n') {
        "\n"
    } else {
        "\n\n"
    };
    format!("{report}{sep}{section}")
}

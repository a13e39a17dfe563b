//! What the tools print, the text renderer: the table at the end of an
//! experiment ([`result_table`]) and the fidelity comparisons
//! ([`render_text`], [`headline_lines`], [`render_against`]).

use crate::analysis::Summary;
use crate::fidelity::model::{AgainstReport, Distance, FidelityReport, OursSource, PolicyFidelity};
use crate::table::{Table, L, R};

/// The table `lcmp-testbed experiment` prints at the end: the mean
/// median and p99 slowdowns per (workload, load, policy) over seeds, and
/// LCMP's reductions against each baseline.
pub fn result_table(s: &Summary) -> String {
    let q = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}"));
    // A policy spec (`lcmp:w_ql=1:w_tl=2:w_dp=1`) is longer than a name:
    // the column is as wide as the longest.
    let policy_width = s
        .aggregates
        .iter()
        .map(|a| a.policy.len())
        .chain(s.reductions.iter().map(|r| r.baseline.len()))
        .fold(14, usize::max);
    // The last column is aligned on its slash: header and cells are
    // padded by hand.
    let mut t = Table::text(&[
        ("workload", L, 12),
        ("load", R, 5),
        ("policy", L, policy_width),
        ("runs", R, 4),
        ("median slowdown", R, 16),
        ("p99 slowdown", R, 16),
        (&format!("{:>10}", "calib ok"), L, 0),
    ]);
    for a in &s.aggregates {
        t.row([
            a.workload.clone(),
            a.load.to_string(),
            a.policy.clone(),
            a.runs.to_string(),
            q(a.median_mean),
            q(a.p99_mean),
            format!("{:>7}/{}", a.calibration_ok_runs, a.runs),
        ]);
    }
    let mut out = format!("\n{}", t.text_lines());
    if !s.reductions.is_empty() {
        out += "\nLCMP vs baseline (negative = LCMP lower):\n";
        let pct = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:+.0}%", v * 100.0));
        // `median X  p99 Y`: words between the figures, two spaces before p99.
        let mut t = Table::headless(&[
            (L, 12),
            (R, 5),
            (L, 0),
            (L, policy_width),
            (L, 0),
            (R, 6),
            (L, 0),
            (R, 6),
        ]);
        for r in &s.reductions {
            t.row([
                r.workload.clone(),
                r.load.to_string(),
                "vs".into(),
                r.baseline.clone(),
                "median".into(),
                pct(r.median_reduction),
                " p99".into(),
                pct(r.p99_reduction),
            ]);
        }
        out += &t.text_lines();
    }
    out
}

fn r_text(r: Option<f64>) -> String {
    r.map_or_else(|| "undefined".to_string(), |r| format!("{r:.3}"))
}

fn s_text(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.2}"))
}

fn d_text(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.3}"))
}

/// Where ours came from, in words.
pub fn source_text(source: OursSource) -> &'static str {
    match source {
        OursSource::Flows => "per flow from runs/*/flows.csv",
        OursSource::SummaryBuckets => "from summary.json's buckets",
    }
}

/// One line per policy of the headline figures (W1, KS, ratios, per MB,
/// the floor), for a run's progress output.
pub fn headline_lines(r: &FidelityReport) -> Vec<String> {
    let mut out: Vec<String> = r
        .policies
        .iter()
        .map(|p| {
            let mut l = format!(
                "fidelity {}: ln slowdown W1 {}, KS {}; median x{}, p99 x{} of the reference; \
                 FCT-ideal {} ms/MB (reference {})",
                p.policy,
                d_text(p.distance.w1_ln_slowdown),
                d_text(p.distance.ks_ln_slowdown),
                s_text(p.distance.median_ratio),
                s_text(p.distance.p99_ratio),
                s_text(p.ours_excess_ms_per_mb),
                s_text(p.reference_excess_ms_per_mb),
            );
            if let Some(f) = &p.floor {
                l += &format!(
                    "; floor (reference rerun) W1 {}, KS {}",
                    d_text(f.distance.w1_ln_slowdown),
                    d_text(f.distance.ks_ln_slowdown)
                );
            }
            l
        })
        .collect();
    if let Some(w1) = r.quoted_floor_lcmp_w1 {
        out.push(quoted_floor_text(w1));
    }
    out
}

/// The quoted floor, labelled as such.
pub fn quoted_floor_text(w1: f64) -> String {
    format!(
        "floor, quoted (issue 26), not measured here: the simulator against its own rerun of \
         LCMP, W1 {w1}"
    )
}

/// The columns of the fidelity figures, ours (or the rerun) against the
/// reference.
const FIDELITY_COLUMNS: [(&str, crate::table::Align, usize); 11] = [
    ("policy", L, 14),
    ("W1 ln", R, 7),
    ("KS ln", R, 7),
    ("med x", R, 8),
    ("p99 x", R, 8),
    ("our med", R, 8),
    ("ref med", R, 8),
    ("our p99", R, 9),
    ("ref p99", R, 9),
    ("ms/MB our", R, 10),
    ("ms/MB ref", R, 10),
];

/// A row of [`FIDELITY_COLUMNS`]: `[ours, reference]` of each figure.
fn fidelity_row(
    name: &str,
    d: &Distance,
    med: [Option<f64>; 2],
    p99: [Option<f64>; 2],
    mb: [Option<f64>; 2],
) -> [String; 11] {
    [
        name.to_string(),
        d_text(d.w1_ln_slowdown),
        d_text(d.ks_ln_slowdown),
        s_text(d.median_ratio),
        s_text(d.p99_ratio),
        s_text(med[0]),
        s_text(med[1]),
        s_text(p99[0]),
        s_text(p99[1]),
        s_text(mb[0]),
        s_text(mb[1]),
    ]
}

/// The terminal output: per policy the headline figures (W1 and KS of
/// ln slowdown, median and p99 ratios ours / reference, FCT minus ideal
/// per MB both sides) and the floor; then, secondary, r over the size
/// buckets.
pub fn render_text(r: &FidelityReport) -> String {
    let mut out = format!(
        "fidelity of {}, load {} (ours {}; slowdown = max(1, FCT/ideal))\n",
        r.workload,
        r.load,
        source_text(r.ours_source)
    );
    let mut t = Table::text(&FIDELITY_COLUMNS);
    for p in &r.policies {
        t.row(fidelity_row(
            &p.policy,
            &p.distance,
            [p.ours_median, p.reference_median],
            [p.ours_p99, p.reference_p99],
            [p.ours_excess_ms_per_mb, p.reference_excess_ms_per_mb],
        ));
    }
    out += &t.text_lines();
    let floors: Vec<&PolicyFidelity> = r.policies.iter().filter(|p| p.floor.is_some()).collect();
    if !floors.is_empty() {
        out += "floor: the reference against its own rerun (rerun in the \"our\" columns)\n";
        let widths = FIDELITY_COLUMNS.map(|(_, a, w)| (a, w));
        let mut t = Table::headless(&widths);
        for p in floors {
            let f = p.floor.as_ref().expect("filtered");
            t.row(fidelity_row(
                &format!("{} floor", p.policy),
                &f.distance,
                [f.rerun_median, p.reference_median],
                [f.rerun_p99, p.reference_p99],
                [f.rerun_excess_ms_per_mb, p.reference_excess_ms_per_mb],
            ));
        }
        out += &t.text_lines();
    }
    if let Some(w1) = r.quoted_floor_lcmp_w1 {
        out += &quoted_floor_text(w1);
        out.push('\n');
    }
    out += &format!(
        "secondary: Pearson r of ln slowdown over {} equal-count size buckets\n",
        r.buckets
    );
    let mut t = Table::text(&[
        ("policy", L, 14),
        ("buckets", R, 7),
        ("r median", R, 9),
        ("r p99", R, 9),
    ]);
    for p in &r.policies {
        t.row([
            p.policy.clone(),
            p.buckets.len().to_string(),
            r_text(p.r_median),
            r_text(p.r_p99),
        ]);
    }
    // The pooled r with its caveat after it, two spaces on.
    t.row([
        "pooled r".to_string(),
        r.policies
            .iter()
            .map(|p| p.buckets.len())
            .sum::<usize>()
            .to_string(),
        r_text(r.pooled_r_median),
        r_text(r.pooled_r_p99),
        " (measures that the policies differ, not that we match)".to_string(),
    ]);
    out += &t.text_lines();
    out += &format!(
        "the paper's testbed vs its simulator, per bucket: r median {}, r p99 {}\n",
        r.paper_r_median, r.paper_r_p99
    );
    for n in r
        .policies
        .iter()
        .flat_map(|p| p.notes.iter().map(move |n| format!("{}: {n}", p.policy)))
    {
        out += &format!("note: {n}\n");
    }
    for n in &r.notes {
        out += &format!("note: {n}\n");
    }
    out
}

/// The terminal output of run against run: per policy the flows of each
/// side, W1 and KS of ln slowdown, the ratios A / B of the median and p99
/// (three decimals: two runs of ours differ by percents), and both sides'
/// median and p99.
pub fn render_against(r: &AgainstReport) -> String {
    let mut out = format!(
        "fidelity of A = {} ({}, load {}) against B = {} ({}, load {})\n\
         (slowdown = max(1, FCT/ideal), each run against its own ideal; ratios A / B)\n",
        r.run_dir, r.run_workload, r.run_load, r.against_dir, r.against_workload, r.against_load
    );
    let mut t = Table::text(&[
        ("policy", L, 14),
        ("flows A", R, 8),
        ("flows B", R, 8),
        ("W1 ln", R, 7),
        ("KS ln", R, 7),
        ("med x", R, 7),
        ("p99 x", R, 7),
        ("med A", R, 8),
        ("med B", R, 8),
        ("p99 A", R, 9),
        ("p99 B", R, 9),
    ]);
    for p in &r.policies {
        t.row([
            p.policy.clone(),
            p.run_flows.to_string(),
            p.against_flows.to_string(),
            d_text(p.distance.w1_ln_slowdown),
            d_text(p.distance.ks_ln_slowdown),
            d_text(p.distance.median_ratio),
            d_text(p.distance.p99_ratio),
            s_text(p.run_median),
            s_text(p.against_median),
            s_text(p.run_p99),
            s_text(p.against_p99),
        ]);
    }
    out += &t.text_lines();
    for (side, only) in [("A", &r.only_in_run), ("B", &r.only_in_against)] {
        if !only.is_empty() {
            out += &format!("note: only in {side}, not compared: {}\n", only.join(", "));
        }
    }
    out
}

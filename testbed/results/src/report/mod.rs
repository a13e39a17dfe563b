//! `report.md`, the markdown renderer: an experiment's [`Summary`] next to
//! the paper's numbers ([`render_report`]); for a trace between any two
//! DCs, a section per DC pair ([`render_report_with_pairs`]; the figures
//! per pair go to `pairs.csv`, [`write_report`]); and the fidelity
//! section ([`render_fidelity_section`]).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::analysis::{
    groups, paths_missing_note, transit_choices, Aggregate, BucketTable, LinkSpec, Reduction,
    RunSummary, Summary,
};
use crate::format::{cell, distinct, num, opt_num, pct, signed_pct, size_range, DASH};
use crate::pairs::{self, PairTable};
use crate::paper::{paper_claims, PaperClaim};
use crate::table::Table;
use crate::{Error, Result};

mod fidelity;
mod pair_section;
mod setup;

pub use crate::format::fmt_bytes;
pub use crate::paper::{workload_key, PAPER_CLAIMS};
pub use crate::text::result_table;
pub use fidelity::{render_fidelity_section, with_fidelity_section, FIDELITY_BEGIN, FIDELITY_END};

fn mean_ci(mean: Option<f64>, ci: Option<f64>) -> String {
    match (mean, ci) {
        (Some(m), Some(c)) => format!("{} ± {}", num(m), num(c)),
        (Some(m), None) => num(m),
        _ => "no completed flows".to_string(),
    }
}

fn claim_range((a, b): (f64, f64)) -> String {
    if a == b {
        format!("{a:.0} %")
    } else {
        format!("{a:.0}..{b:.0} %")
    }
}

fn claims_cell(claims: &[&PaperClaim], pick: impl Fn(&PaperClaim) -> Option<(f64, f64)>) -> String {
    let parts: Vec<String> = claims
        .iter()
        .filter_map(|c| pick(c).map(|r| format!("{} ({})", claim_range(r), c.source)))
        .collect();
    if parts.is_empty() {
        DASH.to_string()
    } else {
        parts.join("; ")
    }
}

fn slowdown_table(out: &mut String, aggs: &[&Aggregate]) {
    let _ = writeln!(out, "### Slowdown\n");
    let mut t = Table::new([
        "policy",
        "runs",
        "flows completed / started",
        "median slowdown (mean ± 95 % CI)",
        "p99 slowdown (mean ± 95 % CI)",
        "below ideal",
        "calibration ok runs",
    ]);
    for a in aggs {
        t.row([
            cell(&a.policy),
            a.runs.to_string(),
            format!("{} / {}", a.flows_completed, a.flows_started),
            mean_ci(a.median_mean, a.median_ci95),
            mean_ci(a.p99_mean, a.p99_ci95),
            pct(a.share_below_ideal_mean),
            format!("{} / {}", a.calibration_ok_runs, a.runs),
        ]);
    }
    out.push_str(&t.markdown());
    out.push('\n');
    for a in aggs {
        if a.share_below_ideal_mean.is_some_and(|s| s > 0.05) {
            let _ = writeln!(
                out,
                "**Warning:** {} of {}'s flows finished faster than the ideal: \
                 the ideal's base RTT or rate is off.\n",
                pct(a.share_below_ideal_mean),
                cell(&a.policy)
            );
        }
    }
}

fn bucket_table(out: &mut String, t: &BucketTable) {
    let _ = writeln!(
        out,
        "### Slowdown by flow size\n\n{} equal-count buckets of flow size over all policies and seeds; \
         slowdowns pooled over seeds (median / p99, flows).\n",
        t.bounds.len()
    );
    if t.bounds.is_empty()
        || t.per_policy
            .iter()
            .all(|p| p.counts.iter().all(|&c| c == 0))
    {
        let _ = writeln!(out, "No completed flows.\n");
        return;
    }
    let mut table = Table::new(
        std::iter::once("flow size".to_string())
            .chain(t.per_policy.iter().map(|p| cell(&p.policy))),
    );
    for (i, &(lo, hi)) in t.bounds.iter().enumerate() {
        let cells = t.per_policy.iter().map(|p| {
            let count = p.counts.get(i).copied().unwrap_or(0);
            if count == 0 {
                DASH.to_string()
            } else {
                format!(
                    "{} / {} ({count})",
                    opt_num(p.medians.get(i).copied().flatten()),
                    opt_num(p.p99s.get(i).copied().flatten())
                )
            }
        });
        table.row(std::iter::once(size_range(lo, hi)).chain(cells));
    }
    out.push_str(&table.markdown());
    out.push('\n');
}

fn path_table(out: &mut String, aggs: &[&Aggregate], runs: &[&RunSummary]) {
    let _ = writeln!(out, "### Path use (mean over seeds)\n");
    let choosing = transit_choices(runs.iter().copied());
    if !choosing.is_empty() {
        let _ = writeln!(
            out,
            "Omitted: switches after the source ({}) also choose among several next hops toward \
             the destination, so the bytes leaving a source port belong to no single path; see the \
             link utilization.\n",
            cell(&choosing.join(", "))
        );
        return;
    }
    let _ = writeln!(
        out,
        "Utilization = bytes the source switch's egress port sent in the \
         measurement window / (window x path bottleneck rate); a flow's path is the port the source \
         switch logged for it (`lcmp-switch lcmp --flow-log`).\n"
    );
    let names = distinct(
        aggs.iter()
            .flat_map(|a| a.paths.iter().map(|p| p.name.clone())),
    );
    if names.is_empty() {
        let _ = writeln!(out, "No paths recorded.\n");
        return;
    }
    let mut t = Table::new(
        std::iter::once("policy".to_string()).chain(
            names
                .iter()
                .map(|n| format!("{}: utilization (flows)", cell(n))),
        ),
    );
    for a in aggs {
        let cells = names
            .iter()
            .map(|n| match a.paths.iter().find(|p| &p.name == n) {
                Some(p) => format!("{} ({:.0})", pct(p.utilization_mean), p.flows_mean),
                None => DASH.to_string(),
            });
        t.row(std::iter::once(cell(&a.policy)).chain(cells));
    }
    out.push_str(&t.markdown());
    out.push('\n');
}

fn link_table(out: &mut String, aggs: &[&Aggregate], links: &[LinkSpec]) {
    if links.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "### Link utilization (mean over seeds)\n\nUtilization = bytes a switch's port sent toward \
         its neighbour in the measurement window / (window x the port's rate), for both directions \
         of every switch-to-switch link, in topology order; {DASH} where not measured.\n"
    );
    let mut t = Table::new(
        ["link".to_string(), "rate".to_string()]
            .into_iter()
            .chain(aggs.iter().map(|a| cell(&a.policy))),
    );
    for l in links {
        t.row(
            [
                cell(&l.name),
                format!("{} Mbit/s", num(l.rate_bps as f64 / 1e6)),
            ]
            .into_iter()
            .chain(
                aggs.iter()
                    .map(|a| pct(a.link_utilization.get(&l.name).copied())),
            ),
        );
    }
    out.push_str(&t.markdown());
    out.push('\n');
}

/// Which runs have flows whose switch path was not reconstructed, and why
/// (only for runs whose switches' logs were read).
fn switch_paths(out: &mut String, runs: &[RunSummary]) {
    let known: Vec<&RunSummary> = runs
        .iter()
        .filter(|r| r.transit_choices.is_some())
        .collect();
    if known.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "## Switch paths\n\nEach flow's forward and reverse path is the sequence of switches that \
         forwarded it, read from every switch's decision log (`decisions-<switch>.csv` in the run's \
         directory); a path is missing where a switch on the way has no decision for the flow \
         (`no_decision@<switch>`), a port leads elsewhere (`wrong_host`, `no_port`) or the \
         decisions loop (`loop`), counted by reason, never guessed.\n"
    );
    let missing: Vec<(&RunSummary, String)> = known
        .iter()
        .filter_map(|r| Some((*r, paths_missing_note(r)?)))
        .collect();
    if missing.is_empty() {
        let _ = writeln!(
            out,
            "Every flow's paths were reconstructed in all {} runs.\n",
            known.len()
        );
        return;
    }
    for (r, note) in missing {
        let _ = writeln!(
            out,
            "- {} / load {} / {} / seed {}: {}",
            cell(&r.workload),
            r.load,
            cell(&r.policy),
            r.seed,
            note
        );
    }
    out.push('\n');
}

fn reduction_table(out: &mut String, reds: &[&Reduction]) {
    let _ = writeln!(
        out,
        "### LCMP vs baselines\n\n(LCMP - baseline) / baseline of the seed-mean slowdowns: \
         negative = LCMP lower (better). The paper's numbers come from its 8-DC RDMA/DCQCN \
         testbed at full rates: compare direction and rough size, not digits.\n"
    );
    if reds.is_empty() {
        let _ = writeln!(out, "No LCMP runs or no baseline to compare with.\n");
        return;
    }
    let mut t = Table::new([
        "baseline",
        "median: here",
        "median: paper",
        "p99: here",
        "p99: paper",
    ]);
    for r in reds {
        let claims = paper_claims(&r.workload, r.load, &r.baseline);
        t.row([
            cell(&r.baseline),
            signed_pct(r.median_reduction),
            claims_cell(&claims, |c| c.median_pct),
            signed_pct(r.p99_reduction),
            claims_cell(&claims, |c| c.p99_pct),
        ]);
    }
    out.push_str(&t.markdown());
    out.push('\n');
}

fn calibration(out: &mut String, runs: &[RunSummary]) {
    let _ = writeln!(out, "## Calibration\n");
    let bad: Vec<&RunSummary> = runs.iter().filter(|r| !r.calibration_ok).collect();
    if bad.is_empty() {
        let _ = writeln!(out, "All {} runs passed calibration.\n", runs.len());
        return;
    }
    let _ = writeln!(
        out,
        "{} of {} runs deviated beyond tolerance; their numbers are included above and flagged here.\n",
        bad.len(),
        runs.len()
    );
    for r in bad {
        let notes = if r.calibration_notes.is_empty() {
            "no notes".to_string()
        } else {
            r.calibration_notes.join("; ")
        };
        let _ = writeln!(
            out,
            "- {} / load {} / {} / seed {}: {}",
            r.workload,
            r.load,
            r.policy,
            r.seed,
            notes.replace('\n', " ")
        );
    }
    out.push('\n');
}

fn runs_table(out: &mut String, runs: &[RunSummary]) {
    if runs.is_empty() {
        return;
    }
    let _ = writeln!(out, "## Runs\n");
    let mut t = Table::new([
        "workload",
        "load",
        "policy",
        "seed",
        "started",
        "completed",
        "failed",
        "unfinished",
        "median",
        "p90",
        "p99",
        "flows per path",
        "unassigned",
        "calibration",
    ]);
    for r in runs {
        let per_path: Vec<String> = r
            .paths
            .iter()
            .map(|p| format!("{} {}", cell(&p.name), p.flows))
            .collect();
        t.row([
            cell(&r.workload),
            r.load.to_string(),
            cell(&r.policy),
            r.seed.to_string(),
            r.flows_started.to_string(),
            r.flows_completed.to_string(),
            r.flows_failed.to_string(),
            r.flows_unfinished.to_string(),
            opt_num(r.median_slowdown),
            opt_num(r.p90_slowdown),
            opt_num(r.p99_slowdown),
            per_path.join(", "),
            r.flows_unassigned.to_string(),
            if r.calibration_ok { "ok" } else { "FAILED" }.to_string(),
        ]);
    }
    out.push_str(&t.markdown());
    out.push('\n');
}

fn plots_section(out: &mut String, plots: &[PathBuf]) {
    if plots.is_empty() {
        return;
    }
    let _ = writeln!(out, "## Plots\n");
    let stems = distinct(plots.iter().map(|p| p.with_extension("")));
    for stem in stems {
        let find = |ext: &str| {
            plots
                .iter()
                .find(|p| p.with_extension("") == stem && p.extension().is_some_and(|e| e == ext))
        };
        let title = stem
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let link = |p: &PathBuf| p.to_string_lossy().replace(' ', "%20");
        match (find("png"), find("svg")) {
            (Some(png), Some(svg)) => {
                let _ = writeln!(out, "![{title}]({})\n\n[SVG]({})\n", link(png), link(svg));
            }
            (Some(one), None) | (None, Some(one)) => {
                let _ = writeln!(out, "![{title}]({})\n", link(one));
            }
            (None, None) => {
                for p in plots.iter().filter(|p| p.with_extension("") == stem) {
                    let _ = writeln!(out, "- [{title}]({})", link(p));
                }
                out.push('\n');
            }
        }
    }
}

/// The report: setup, per (workload, load) slowdown, size-bucket,
/// path-use (or why not), link-utilization and LCMP-vs-baseline tables,
/// calibration failures, flows without a reconstructed switch path,
/// `plots` (paths relative to the report's directory) as images, and one
/// row per run.
pub fn render_report(summary: &Summary, plots: &[PathBuf]) -> String {
    render_report_with_pairs(summary, &[], plots)
}

/// [`render_report`] with, in each (workload, load) after its tables over
/// all flows, its table of `pairs` (from [`pairs::load`]) where it has one.
pub fn render_report_with_pairs(
    summary: &Summary,
    pairs: &[PairTable],
    plots: &[PathBuf],
) -> String {
    let mut out = String::from("# FCT experiment report\n\n");
    setup::setup(&mut out, summary);
    let mut keys = groups(summary.runs.iter().map(|r| (r.workload.as_str(), r.load)));
    for (w, l) in groups(
        summary
            .aggregates
            .iter()
            .map(|a| (a.workload.as_str(), a.load)),
    ) {
        if !keys
            .iter()
            .any(|(kw, kl)| *kw == w && kl.to_bits() == l.to_bits())
        {
            keys.push((w, l));
        }
    }
    if keys.is_empty() {
        let _ = writeln!(out, "No runs: no completed flows.\n");
    }
    let same = |w: &str, l: f64, (kw, kl): &(String, f64)| w == kw && l.to_bits() == kl.to_bits();
    for key in &keys {
        let _ = writeln!(out, "## {}, load {}\n", cell(&key.0), key.1);
        let aggs: Vec<&Aggregate> = summary
            .aggregates
            .iter()
            .filter(|a| same(&a.workload, a.load, key))
            .collect();
        if aggs.iter().all(|a| a.flows_completed == 0) {
            let _ = writeln!(out, "No completed flows.\n");
        }
        slowdown_table(&mut out, &aggs);
        if let Some(t) = summary
            .buckets
            .iter()
            .find(|t| same(&t.workload, t.load, key))
        {
            bucket_table(&mut out, t);
        }
        let runs: Vec<&RunSummary> = summary
            .runs
            .iter()
            .filter(|r| same(&r.workload, r.load, key))
            .collect();
        path_table(&mut out, &aggs, &runs);
        link_table(&mut out, &aggs, &summary.links);
        let reds: Vec<&Reduction> = summary
            .reductions
            .iter()
            .filter(|r| same(&r.workload, r.load, key))
            .collect();
        reduction_table(&mut out, &reds);
        if let Some(t) = pairs.iter().find(|t| same(&t.workload, t.load, key)) {
            pair_section::pair_section(&mut out, t);
        }
    }
    calibration(&mut out, &summary.runs);
    switch_paths(&mut out, &summary.runs);
    plots_section(&mut out, plots);
    runs_table(&mut out, &summary.runs);
    out
}

/// Writes `out/report.md` of `summary` (`plots` relative to `out`) and,
/// where the runs' flows.csv files name each flow's DC pair (a trace
/// between any two DCs), `out/pairs.csv` and the report's pair section.
pub fn write_report(out: &Path, summary: &Summary, plots: &[PathBuf]) -> Result<()> {
    let tables = pairs::load(out, summary)?;
    if !tables.is_empty() {
        pairs::write_csv(&out.join("pairs.csv"), &tables)?;
    }
    let md = out.join("report.md");
    std::fs::write(&md, render_report_with_pairs(summary, &tables, plots))
        .map_err(|e| Error::new(format!("{}: {e}", md.display())))
}

#[cfg(test)]
mod tests;

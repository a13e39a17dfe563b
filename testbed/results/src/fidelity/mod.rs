//! Fidelity: a run's FCT slowdowns against a reference simulator's, per
//! policy, as distributions.
//!
//! Headline figures, per policy (ours against the reference file):
//! - W1 and KS distance of ln(slowdown) between our flows and the
//!   reference's ([`lcmp_stats::wasserstein1_sorted`],
//!   [`lcmp_stats::ks_distance_sorted`]): W1 is the mean absolute
//!   difference of the two sides' quantiles of ln(slowdown) (0.1 = the
//!   typical flow 10 % slower or faster), KS the largest gap between the
//!   two CDFs.
//! - The ratios ours / reference of the median and the p99 slowdown (type 7
//!   quantiles of `lcmp-stats`).
//! - FCT minus ideal per MB, ours and the reference's ([`excess_ms_per_mb`]):
//!   how a flow's time beyond its ideal grows with its size.
//! - The floor: given a second reference run of a policy (the simulator
//!   rerun), the same figures between the two reference runs, i.e. how far
//!   the simulator is from itself. Without one, only the known figure for
//!   LCMP is cited, labelled as quoted ([`QUOTED_FLOOR_LCMP_W1`]).
//!
//! Secondary, kept for the paper's comparison: per size bucket the median
//! and p99 slowdown of both sides and the Pearson r of their logarithms.
//! r pooled over the policies is no fidelity figure: replacing every bucket
//! by its policy's mean still gives r near 1, so it measures that the
//! policies differ, not that we match; it is kept in `fidelity.json`
//! (`pooled_r_*`) and shown only with that label.
//!
//! Method (the artifact's `analysis/fct_analysis_py3_batch.py`):
//! - Slowdown = `max(1, FCT / ideal)`: the reference's ideal is the
//!   simulator's standalone FCT; ours is the run's [`IdealModel`](crate::analysis::IdealModel) (the
//!   clamp is the artifact's; `summary.json` does not clamp).
//! - Each side is cut into [`DEFAULT_BUCKETS`](crate::analysis::DEFAULT_BUCKETS) equal-count buckets over its
//!   own sizes ([`size_buckets`](crate::analysis::size_buckets); ours over the started non-warm-up flows,
//!   as `summary.json`'s buckets), and bucket k of ours is compared with
//!   bucket k of the reference: for a trace replay with sizes scaled by S
//!   these are the same flows; for a Poisson run, the same quantile range
//!   of the size distribution.
//! - r = Pearson correlation of ln(slowdown) over the buckets, at the
//!   median and at p99, per policy and pooled (all policies' buckets
//!   concatenated). Undefined (`None`, with a note) when a series is
//!   constant or fewer than two buckets have values on both sides.
//! - Ours: the completed non-warm-up flows of one (workload, load) of the
//!   run directory, pooled over the policy's runs (seeds). A directory with
//!   several (workload, load) groups needs a [`Selector`]: the reference
//!   is one scenario.
//! - Our FCT minus ideal is mapped onto the reference's scale: divided by
//!   the run's time dilation (`summary.json`'s `experiment.time_scale`) to
//!   model time, per MB of the unscaled flow (a replayed flow's trace size,
//!   the size the buckets use; otherwise `size_bytes` times
//!   `experiment.size_scale`).
//! - A run directory without `runs/*/flows.csv` (results/ keeps only
//!   `summary.json`) is compared through `summary.json`'s buckets instead:
//!   bounds over all policies' sizes, quantiles of unclamped slowdowns
//!   (unfinished flows at their lower bound) then clamped at 1; the
//!   overall median and p99 are the seeds' means. W1, KS and the per-MB
//!   figure need the flows and are then undefined. The report says which
//!   source was used.
//!
//! Refused, in one line, rather than compared into a table of undefined
//! figures: a policy with nothing to compare (no completed non-warm-up
//! flow, or an ideal model that defines no ideal FCT), and a flow id twice
//! in a flows.csv (ids are unique within a run). A reference file has no
//! id column, so no duplicate check there.
//!
//! Run against run ([`against`], `lcmp-testbed fidelity --against`): two
//! experiment outputs of ours, each against its own ideal, with the same
//! headline figures per policy (W1, KS, median and p99 ratios).
//!
//! Layout: [`model`] holds the figures, [`stats`] and [`compute`](mod@compute) compute
//! them; this module writes them out, each format by its renderer
//! (`fidelity.json` by serde, the section of `report.md` by
//! [`crate::report`], the figure by [`crate::plots`], the terminal's by
//! [`crate::text`]), none of which depends on another.

use std::path::{Path, PathBuf};

use crate::{Error, Result};

pub mod against;
pub mod compute;
pub mod model;
pub mod stats;

pub use crate::text::{headline_lines, quoted_floor_text, render_text, source_text};
pub use compute::compute;
pub use model::*;
pub use stats::*;

/// `POLICY=FILE` of `--reference`.
pub fn parse_reference(s: &str) -> std::result::Result<(String, PathBuf), String> {
    match s.split_once('=') {
        Some((p, f)) if !p.is_empty() && !f.is_empty() => Ok((p.to_string(), PathBuf::from(f))),
        _ => Err(format!(
            "expected POLICY=FILE (e.g. lcmp=fct_lcmp.txt), not {s:?}"
        )),
    }
}

/// [`run_fidelity_with`] for a run directory with one (workload, load).
pub fn run_fidelity(
    run_dir: &Path,
    references: &[(String, PathBuf)],
    reruns: &[(String, PathBuf)],
) -> Result<FidelityReport> {
    run_fidelity_with(run_dir, references, reruns, &Selector::default())
}

/// [`compute()`], then writes `DIR/fidelity.json`, `DIR/plots/fidelity.svg`
/// and `.png`, and the fidelity section of `DIR/report.md` (replacing an
/// earlier one; a report is created if there is none).
pub fn run_fidelity_with(
    run_dir: &Path,
    references: &[(String, PathBuf)],
    reruns: &[(String, PathBuf)],
    sel: &Selector,
) -> Result<FidelityReport> {
    let report = compute(run_dir, references, reruns, sel)?;
    let json = run_dir.join("fidelity.json");
    std::fs::write(
        &json,
        serde_json::to_string_pretty(&report).expect("report serializes") + "\n",
    )
    .map_err(|e| Error::new(format!("{}: {e}", json.display())))?;
    let plots =
        crate::plots::write_fidelity_plot(&report, &run_dir.join("plots")).map_err(Error::new)?;
    let rel: Vec<PathBuf> = plots
        .iter()
        .map(|p| p.strip_prefix(run_dir).unwrap_or(p).to_path_buf())
        .collect();
    let md_path = run_dir.join("report.md");
    let existing = match std::fs::read_to_string(&md_path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(Error::new(format!("{}: {e}", md_path.display()))),
    };
    let section = crate::report::render_fidelity_section(&report, &rel);
    std::fs::write(
        &md_path,
        crate::report::with_fidelity_section(&existing, &section),
    )
    .map_err(|e| Error::new(format!("{}: {e}", md_path.display())))?;
    Ok(report)
}

#[cfg(test)]
mod tests;

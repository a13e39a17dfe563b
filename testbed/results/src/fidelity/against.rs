//! Run against run (`lcmp-testbed fidelity --run A --against B`): two
//! experiment outputs of ours, e.g. the same trace replay on the namespace
//! engine and on the virtual engine, compared per policy with the headline
//! figures of the reference mode.
//!
//! Each side's slowdowns are its own: `max(1, FCT / ideal)` of the
//! completed non-warm-up flows of its `runs/*/flows.csv`, against its own
//! `summary.json`'s ideal model ([`our_samples`]), pooled over the
//! policy's runs (seeds) of the one (workload, load) the [`Selector`]
//! leaves in that directory. Slowdowns are dimensionless, so two runs at
//! different scales or time dilations compare directly. Per policy in both
//! runs: the flows of each, W1 and KS of ln(slowdown), the median and p99
//! of each and the ratios A / B ([`distance`]). Both sides need their
//! flows: W1 and KS are undefined from `summary.json`'s buckets.

use std::path::Path;

use super::compute::{nothing_to_compare, selected_runs, Counted};
use super::model::Selector;
use super::stats::{distance, our_samples, sorted_slowdowns};
use crate::analysis::{order_policies, quantile_sorted, IdealModel, RunSummary};
use crate::run_dir::{flows_csv, has_any_flows_csv, load_summary, read_flows, require_flows};
use crate::{Error, Result};

pub use super::model::{AgainstPolicy, AgainstReport};
pub use crate::text::render_against as render_text;

/// The file the comparison is written to, in A: not `fidelity.json`,
/// which is the reference mode's.
pub const FILE: &str = "fidelity-against.json";

/// One side: the selected (workload, load), its runs and the ideal model
/// they were measured against.
struct Side {
    workload: String,
    load: f64,
    runs: Vec<RunSummary>,
    ideal: IdealModel,
}

impl Side {
    fn open(dir: &Path, sel: &Selector) -> Result<Side> {
        let summary = load_summary(dir)?;
        let (workload, load, runs) = selected_runs(&summary, sel, dir)?;
        if !has_any_flows_csv(dir) {
            return Err(Error::new(format!(
                "{}: no runs/*/flows.csv (comparing two runs needs the flows of both)",
                dir.display()
            )));
        }
        Ok(Side {
            workload,
            load,
            runs: runs.into_iter().cloned().collect(),
            ideal: summary.ideal.clone(),
        })
    }

    fn policies(&self) -> Vec<String> {
        order_policies(self.runs.iter().map(|r| r.policy.as_str()))
    }

    /// The policy's runs and their slowdowns pooled, ascending. Refused
    /// where flows completed but the ideal model gives none of them a
    /// slowdown: that is no lack of usable flows.
    fn slowdowns(&self, dir: &Path, policy: &str) -> Result<(usize, Vec<f64>)> {
        let runs: Vec<&RunSummary> = self.runs.iter().filter(|r| r.policy == policy).collect();
        require_flows(dir, &runs)?;
        let mut samples = Vec::new();
        let mut counted = Counted::default();
        for r in &runs {
            let flows = read_flows(&flows_csv(dir, r))?;
            counted.add(flows_csv(dir, r), &flows);
            samples.extend(our_samples(&flows, &self.ideal));
        }
        if samples.is_empty() && counted.completed > 0 {
            return Err(nothing_to_compare(policy, &counted, dir, &self.ideal));
        }
        Ok((runs.len(), sorted_slowdowns(&samples)))
    }
}

/// A (`run_dir`) against B (`against_dir`) for the (workload, load) `sel`
/// picks in each. Reads only.
pub fn compute(run_dir: &Path, against_dir: &Path, sel: &Selector) -> Result<AgainstReport> {
    let a = Side::open(run_dir, sel)?;
    let b = Side::open(against_dir, sel)?;
    let (pa, pb) = (a.policies(), b.policies());
    let common: Vec<&String> = pa.iter().filter(|p| pb.contains(p)).collect();
    if common.is_empty() {
        return Err(Error::new(format!(
            "no policy in common: {} has {}; {} has {}",
            run_dir.display(),
            pa.join(", "),
            against_dir.display(),
            pb.join(", ")
        )));
    }
    let mut policies = Vec::new();
    for policy in common {
        let (run_runs, sa) = a.slowdowns(run_dir, policy)?;
        let (against_runs, sb) = b.slowdowns(against_dir, policy)?;
        let missing_in = match (sa.is_empty(), sb.is_empty()) {
            (false, false) => None,
            (true, false) => Some(run_dir.display().to_string()),
            (false, true) => Some(against_dir.display().to_string()),
            (true, true) => Some(format!(
                "either run ({}, {})",
                run_dir.display(),
                against_dir.display()
            )),
        };
        if let Some(w) = missing_in {
            return Err(Error::new(format!(
                "{policy} has no usable flows (completed, not warm-up) in {w}"
            )));
        }
        policies.push(AgainstPolicy {
            policy: policy.clone(),
            run_runs,
            against_runs,
            run_flows: sa.len() as u64,
            against_flows: sb.len() as u64,
            distance: distance(&sa, &sb),
            run_median: quantile_sorted(&sa, 0.5),
            run_p99: quantile_sorted(&sa, 0.99),
            against_median: quantile_sorted(&sb, 0.5),
            against_p99: quantile_sorted(&sb, 0.99),
        });
    }
    let only = |x: &[String], y: &[String]| -> Vec<String> {
        x.iter().filter(|p| !y.contains(p)).cloned().collect()
    };
    Ok(AgainstReport {
        run_dir: run_dir.display().to_string(),
        against_dir: against_dir.display().to_string(),
        run_workload: a.workload.clone(),
        run_load: a.load,
        against_workload: b.workload.clone(),
        against_load: b.load,
        only_in_run: only(&pa, &pb),
        only_in_against: only(&pb, &pa),
        policies,
    })
}

/// [`compute`], then writes [`FILE`] into `run_dir`.
pub fn run(run_dir: &Path, against_dir: &Path, sel: &Selector) -> Result<AgainstReport> {
    let report = compute(run_dir, against_dir, sel)?;
    let json = run_dir.join(FILE);
    std::fs::write(
        &json,
        serde_json::to_string_pretty(&report).expect("report serializes") + "\n",
    )
    .map_err(|e| Error::new(format!("{}: {e}", json.display())))?;
    Ok(report)
}

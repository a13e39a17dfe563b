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

use serde::{Deserialize, Serialize};

use super::{
    d_text, distance, flows_csv, has_any_flows_csv, load_summary, nothing_to_compare, our_samples,
    read_flows, require_flows, s_text, selected_runs, sorted_slowdowns, Counted, Distance,
    Selector,
};
use crate::analysis::{order_policies, quantile_sorted, IdealModel, RunSummary};
use crate::{Error, Result};

/// The file the comparison is written to, in A: not `fidelity.json`,
/// which is the reference mode's.
pub const FILE: &str = "fidelity-against.json";

/// One policy of both runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgainstPolicy {
    pub policy: String,
    /// The runs (seeds) pooled on each side.
    pub run_runs: usize,
    pub against_runs: usize,
    /// Flows with a slowdown on each side.
    pub run_flows: u64,
    pub against_flows: u64,
    /// A against B (ratios: A / B).
    #[serde(flatten)]
    pub distance: Distance,
    /// The median and p99 slowdown of each side.
    pub run_median: Option<f64>,
    pub run_p99: Option<f64>,
    pub against_median: Option<f64>,
    pub against_p99: Option<f64>,
}

/// A (`--run`) against B (`--against`), per policy in both.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgainstReport {
    /// A and B, as given.
    pub run_dir: String,
    pub against_dir: String,
    /// The (workload, load) compared on each side.
    pub run_workload: String,
    pub run_load: f64,
    pub against_workload: String,
    pub against_load: f64,
    /// In display order (LCMP first).
    pub policies: Vec<AgainstPolicy>,
    /// Policies of one side only, not compared.
    pub only_in_run: Vec<String>,
    pub only_in_against: Vec<String>,
}

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

/// The terminal output: per policy the flows of each side, W1 and KS of
/// ln slowdown, the ratios A / B of the median and p99 (three decimals:
/// two runs of ours differ by percents), and both sides' median and p99.
pub fn render_text(r: &AgainstReport) -> String {
    let mut out = format!(
        "fidelity of A = {} ({}, load {}) against B = {} ({}, load {})\n\
         (slowdown = max(1, FCT/ideal), each run against its own ideal; ratios A / B)\n",
        r.run_dir, r.run_workload, r.run_load, r.against_dir, r.against_workload, r.against_load
    );
    out += &format!(
        "{:<14} {:>8} {:>8} {:>7} {:>7} {:>7} {:>7} {:>8} {:>8} {:>9} {:>9}\n",
        "policy",
        "flows A",
        "flows B",
        "W1 ln",
        "KS ln",
        "med x",
        "p99 x",
        "med A",
        "med B",
        "p99 A",
        "p99 B"
    );
    for p in &r.policies {
        out += &format!(
            "{:<14} {:>8} {:>8} {:>7} {:>7} {:>7} {:>7} {:>8} {:>8} {:>9} {:>9}\n",
            p.policy,
            p.run_flows,
            p.against_flows,
            d_text(p.distance.w1_ln_slowdown),
            d_text(p.distance.ks_ln_slowdown),
            d_text(p.distance.median_ratio),
            d_text(p.distance.p99_ratio),
            s_text(p.run_median),
            s_text(p.against_median),
            s_text(p.run_p99),
            s_text(p.against_p99),
        );
    }
    for (side, only) in [("A", &r.only_in_run), ("B", &r.only_in_against)] {
        if !only.is_empty() {
            out += &format!("note: only in {side}, not compared: {}\n", only.join(", "));
        }
    }
    out
}

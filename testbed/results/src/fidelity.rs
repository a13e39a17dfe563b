//! Fidelity: a run's FCT slowdowns against a reference simulator's, flow
//! size bucket by bucket, the way the LCMP paper checked its testbed
//! against its simulator (Pearson r 0.95 at the median, 0.97 at p99).
//!
//! Method (the artifact's `analysis/fct_analysis_py3_batch.py`):
//! - Slowdown = `max(1, FCT / ideal)`: the reference's ideal is the
//!   simulator's standalone FCT; ours is the run's [`IdealModel`] (the
//!   clamp is the artifact's; `summary.json` does not clamp).
//! - Each side is cut into [`DEFAULT_BUCKETS`] equal-count buckets over its
//!   own sizes ([`size_buckets`]; ours over the started non-warm-up flows,
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
//! - A run directory without `runs/*/flows.csv` (results/ keeps only
//!   `summary.json`) is compared through `summary.json`'s buckets instead:
//!   bounds over all policies' sizes, quantiles of unclamped slowdowns
//!   (unfinished flows at their lower bound) then clamped at 1. The report
//!   says which source was used.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use lcmp_traffic::record::{FlowRecord, FlowStatus};
use serde::{Deserialize, Serialize};

use crate::analysis::{
    bucket_index, groups, order_policies, quantile_sorted, size_buckets, sorted_finite, IdealModel,
    RunSummary, SlowdownSample, Summary, DEFAULT_BUCKETS,
};
use crate::trace::{self, Trace, TraceFormat};
use crate::{Error, Result};

/// The paper's r between its testbed and its simulator, at the median.
pub const PAPER_R_MEDIAN: f64 = 0.95;
/// And at p99.
pub const PAPER_R_P99: f64 = 0.97;

/// Where our slowdowns came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OursSource {
    /// Every flow of `runs/<run>/flows.csv`.
    Flows,
    /// `summary.json`'s `buckets` (the run directory has no flows.csv).
    SummaryBuckets,
}

/// One side's buckets: inclusive size ranges, flows with a slowdown, and
/// the median and p99 slowdown (`None` for an empty bucket).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideBuckets {
    pub bounds: Vec<(u64, u64)>,
    pub counts: Vec<u64>,
    pub medians: Vec<Option<f64>>,
    pub p99s: Vec<Option<f64>>,
}

/// Bucket k of both sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BucketPair {
    /// k, 0-based.
    pub bucket: usize,
    pub ours_lo: u64,
    pub ours_hi: u64,
    pub ours_flows: u64,
    pub ours_median: Option<f64>,
    pub ours_p99: Option<f64>,
    pub reference_lo: u64,
    pub reference_hi: u64,
    pub reference_flows: u64,
    pub reference_median: Option<f64>,
    pub reference_p99: Option<f64>,
}

/// One policy: ours against its reference file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyFidelity {
    pub policy: String,
    /// The reference FCT file, as given.
    pub reference_file: String,
    /// Our runs (seeds) pooled.
    pub runs: usize,
    /// Flows with a slowdown on each side.
    pub ours_flows: u64,
    pub reference_flows: u64,
    /// Our non-warm-up flows that did not complete (not in the buckets;
    /// `None` when ours came from summary.json).
    pub ours_not_completed: Option<u64>,
    pub buckets: Vec<BucketPair>,
    /// Pearson r of ln(slowdown) over the buckets.
    pub r_median: Option<f64>,
    pub r_p99: Option<f64>,
    /// Over all flows (ours from summary.json: the mean over seeds of the
    /// runs' median and p99, clamped at 1).
    pub ours_median: Option<f64>,
    pub ours_p99: Option<f64>,
    pub reference_median: Option<f64>,
    pub reference_p99: Option<f64>,
    /// Why an r is undefined, unequal bucket counts.
    pub notes: Vec<String>,
}

/// Ours against the reference for one (workload, load) of a run directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FidelityReport {
    pub run_dir: String,
    pub workload: String,
    pub load: f64,
    pub ours_source: OursSource,
    /// Buckets asked for per side (ties can merge some).
    pub buckets: usize,
    /// In display order (LCMP first).
    pub policies: Vec<PolicyFidelity>,
    /// r over all policies' buckets together.
    pub pooled_r_median: Option<f64>,
    pub pooled_r_p99: Option<f64>,
    /// What the paper reports between its testbed and its simulator.
    pub paper_r_median: f64,
    pub paper_r_p99: f64,
    pub notes: Vec<String>,
}

/// Which (workload, load) of a run directory to compare; `None` fields
/// match anything, and the selection must leave exactly one group.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selector {
    pub workload: Option<String>,
    pub load: Option<f64>,
}

/// Pearson correlation of `x` and `y`; `None` if the lengths differ, there
/// are fewer than two points, a value is not finite or either series is
/// constant (r is then undefined).
pub fn pearson(x: &[f64], y: &[f64]) -> Option<f64> {
    let n = x.len();
    if n != y.len() || n < 2 || x.iter().chain(y).any(|v| !v.is_finite()) {
        return None;
    }
    // Exactly equal values: their mean can differ from them by an ulp,
    // which would give noise instead of "undefined".
    if x.iter().all(|&v| v == x[0]) || y.iter().all(|&v| v == y[0]) {
        return None;
    }
    let mx = x.iter().sum::<f64>() / n as f64;
    let my = y.iter().sum::<f64>() / n as f64;
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        sxy += (a - mx) * (b - my);
        sxx += (a - mx) * (a - mx);
        syy += (b - my) * (b - my);
    }
    let r = sxy / (sxx.sqrt() * syy.sqrt());
    r.is_finite().then(|| r.clamp(-1.0, 1.0))
}

/// The pairs where both values are positive and finite, as logarithms.
fn log_pairs(pairs: impl IntoIterator<Item = (Option<f64>, Option<f64>)>) -> (Vec<f64>, Vec<f64>) {
    pairs
        .into_iter()
        .filter_map(|(a, b)| {
            let ok = |v: Option<f64>| v.filter(|v| v.is_finite() && *v > 0.0);
            Some((ok(a)?.ln(), ok(b)?.ln()))
        })
        .unzip()
}

/// Pearson r of ln(ours) and ln(reference) over the pairs with both.
pub fn log_pearson(pairs: impl IntoIterator<Item = (Option<f64>, Option<f64>)>) -> Option<f64> {
    let (x, y) = log_pairs(pairs);
    pearson(&x, &y)
}

/// Why r of these pairs is undefined (`None` if it is not).
fn why_undefined(
    pairs: impl IntoIterator<Item = (Option<f64>, Option<f64>)>,
    stat: &str,
) -> Option<String> {
    let (x, y) = log_pairs(pairs);
    if pearson(&x, &y).is_some() {
        return None;
    }
    let constant = |v: &[f64]| v.len() >= 2 && v.iter().all(|&a| a == v[0]);
    Some(if x.len() < 2 {
        format!(
            "r at the {stat} undefined: {} bucket(s) with values on both sides",
            x.len()
        )
    } else if constant(&x) {
        format!("r at the {stat} undefined: ours is constant over the buckets")
    } else if constant(&y) {
        format!("r at the {stat} undefined: the reference is constant over the buckets")
    } else {
        format!("r at the {stat} undefined")
    })
}

/// The artifact's slowdown of a ratio: at least 1.
fn clamp(s: f64) -> f64 {
    s.max(1.0)
}

/// `(size, max(1, fct / standalone))` of every flow of an `hpcc-fct` trace.
pub fn reference_samples(trace: &Trace) -> Vec<SlowdownSample> {
    trace
        .flows
        .iter()
        .filter_map(|f| {
            let s = f.reference_fct_ns? as f64 / f.standalone_ns? as f64;
            s.is_finite().then(|| (f.size_bytes, clamp(s)))
        })
        .collect()
}

/// `(size, max(1, fct / ideal))` of the completed non-warm-up flows.
pub fn our_samples(flows: &[FlowRecord], ideal: &IdealModel) -> Vec<SlowdownSample> {
    our_flow_slowdowns(flows, ideal)
        .map(|(f, s)| (f.size_bytes, s))
        .collect()
}

/// Each completed non-warm-up flow with its `max(1, fct / ideal)`.
fn our_flow_slowdowns<'f>(
    flows: &'f [FlowRecord],
    ideal: &'f IdealModel,
) -> impl Iterator<Item = (&'f FlowRecord, f64)> + 'f {
    flows
        .iter()
        .filter(|f| !f.warmup && f.status == FlowStatus::Ok)
        .filter_map(|f| {
            let s = ideal.slowdown(f.size_bytes, f.fct_ns?)?;
            s.is_finite().then(|| (f, clamp(s)))
        })
}

/// `n` equal-count buckets over `bound_sizes`, with the median and p99 of
/// `samples` in each.
pub fn side_buckets(bound_sizes: &[u64], samples: &[SlowdownSample], n: usize) -> SideBuckets {
    let bounds = size_buckets(bound_sizes, n);
    let mut per: Vec<Vec<f64>> = vec![Vec::new(); bounds.len()];
    for &(size, s) in samples {
        if let Some(b) = bucket_index(&bounds, size) {
            per[b].push(s);
        }
    }
    let sorted: Vec<Vec<f64>> = per.iter().map(|v| sorted_finite(v)).collect();
    SideBuckets {
        counts: sorted.iter().map(|v| v.len() as u64).collect(),
        medians: sorted.iter().map(|v| quantile_sorted(v, 0.5)).collect(),
        p99s: sorted.iter().map(|v| quantile_sorted(v, 0.99)).collect(),
        bounds,
    }
}

fn median_p99(samples: &[SlowdownSample]) -> (Option<f64>, Option<f64>) {
    let v = sorted_finite(&samples.iter().map(|&(_, s)| s).collect::<Vec<_>>());
    (quantile_sorted(&v, 0.5), quantile_sorted(&v, 0.99))
}

/// Bucket k of `ours` next to bucket k of `reference`, r at the median and
/// p99, and notes (unequal bucket counts, undefined r).
pub fn compare(
    ours: &SideBuckets,
    reference: &SideBuckets,
) -> (Vec<BucketPair>, Option<f64>, Option<f64>, Vec<String>) {
    let n = ours.bounds.len().min(reference.bounds.len());
    let mut notes = Vec::new();
    if ours.bounds.len() != reference.bounds.len() {
        notes.push(format!(
            "ours has {} size buckets, the reference {} (equal sizes straddling a cut \
             merge buckets): compared the first {n}",
            ours.bounds.len(),
            reference.bounds.len()
        ));
    }
    let buckets: Vec<BucketPair> = (0..n)
        .map(|k| BucketPair {
            bucket: k,
            ours_lo: ours.bounds[k].0,
            ours_hi: ours.bounds[k].1,
            ours_flows: ours.counts.get(k).copied().unwrap_or(0),
            ours_median: ours.medians.get(k).copied().flatten(),
            ours_p99: ours.p99s.get(k).copied().flatten(),
            reference_lo: reference.bounds[k].0,
            reference_hi: reference.bounds[k].1,
            reference_flows: reference.counts.get(k).copied().unwrap_or(0),
            reference_median: reference.medians.get(k).copied().flatten(),
            reference_p99: reference.p99s.get(k).copied().flatten(),
        })
        .collect();
    let med = || buckets.iter().map(|b| (b.ours_median, b.reference_median));
    let p99 = || buckets.iter().map(|b| (b.ours_p99, b.reference_p99));
    notes.extend(why_undefined(med(), "median"));
    notes.extend(why_undefined(p99(), "p99"));
    let (r_median, r_p99) = (log_pearson(med()), log_pearson(p99()));
    (buckets, r_median, r_p99, notes)
}

/// r at the median and p99 over every policy's buckets together.
pub fn pooled(policies: &[PolicyFidelity]) -> (Option<f64>, Option<f64>) {
    let all = || policies.iter().flat_map(|p| p.buckets.iter());
    (
        log_pearson(all().map(|b| (b.ours_median, b.reference_median))),
        log_pearson(all().map(|b| (b.ours_p99, b.reference_p99))),
    )
}

/// `POLICY=FILE` of `--reference`.
pub fn parse_reference(s: &str) -> std::result::Result<(String, PathBuf), String> {
    match s.split_once('=') {
        Some((p, f)) if !p.is_empty() && !f.is_empty() => Ok((p.to_string(), PathBuf::from(f))),
        _ => Err(format!(
            "expected POLICY=FILE (e.g. lcmp=fct_lcmp.txt), not {s:?}"
        )),
    }
}

/// The names the experiment runner (`experiment::run`) gives a run's
/// directory under `DIR/runs/`: Poisson runs, then trace replays (whose
/// load is computed, not configured).
fn run_dir_names(r: &RunSummary) -> [String; 2] {
    [
        format!("{}-load{}-{}-seed{}", r.workload, r.load, r.policy, r.seed),
        format!("{}-{}-seed{}", r.workload, r.policy, r.seed),
    ]
}

/// Whether `DIR/runs/*/flows.csv` exist at all.
fn has_any_flows_csv(run_dir: &Path) -> bool {
    std::fs::read_dir(run_dir.join("runs"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| e.path().join("flows.csv").is_file())
}

fn read_flows(path: &Path) -> Result<Vec<FlowRecord>> {
    let name = path.display();
    let mut rd = csv::Reader::from_path(path).map_err(|e| Error::new(format!("{name}: {e}")))?;
    rd.deserialize()
        .map(|r| r.map_err(|e| Error::new(format!("{name}: {e}"))))
        .collect()
}

fn load_summary(run_dir: &Path) -> Result<Summary> {
    let path = run_dir.join("summary.json");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        Error::new(format!(
            "{}: not a run directory: cannot read summary.json ({e})",
            run_dir.display()
        ))
    })?;
    serde_json::from_str(&text).map_err(|e| Error::new(format!("{}: {e}", path.display())))
}

/// The one (workload, load) of `summary` that `sel` leaves.
fn select(summary: &Summary, sel: &Selector, run_dir: &Path) -> Result<(String, f64)> {
    let all = groups(summary.runs.iter().map(|r| (r.workload.as_str(), r.load)));
    let list = |g: &[(String, f64)]| {
        g.iter()
            .map(|(w, l)| format!("{w} load {l}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let chosen: Vec<(String, f64)> = all
        .iter()
        .filter(|(w, l)| {
            sel.workload.as_ref().is_none_or(|sw| sw == w)
                && sel.load.is_none_or(|sl| (sl - l).abs() < 1e-9)
        })
        .cloned()
        .collect();
    match chosen.len() {
        1 => Ok(chosen[0].clone()),
        0 if all.is_empty() => Err(Error::new(format!(
            "{}: summary.json has no runs",
            run_dir.display()
        ))),
        0 => Err(Error::new(format!(
            "{}: no runs of the selected workload/load (the run has {})",
            run_dir.display(),
            list(&all)
        ))),
        _ => Err(Error::new(format!(
            "{}: the run has {} (workload, load) groups ({}); choose one with --load and/or --workload",
            run_dir.display(),
            chosen.len(),
            list(&chosen)
        ))),
    }
}

/// Ours vs the reference for the (workload, load) `sel` picks in `run_dir`;
/// `references` are `(policy, hpcc-fct file)`. Reads only.
pub fn compute(
    run_dir: &Path,
    references: &[(String, PathBuf)],
    sel: &Selector,
) -> Result<FidelityReport> {
    if references.is_empty() {
        return Err(Error::new("give at least one --reference POLICY=FILE"));
    }
    let summary = load_summary(run_dir)?;
    let (workload, load) = select(&summary, sel, run_dir)?;
    let runs: Vec<&RunSummary> = summary
        .runs
        .iter()
        .filter(|r| r.workload == workload && r.load.to_bits() == load.to_bits())
        .collect();
    let run_policies = order_policies(runs.iter().map(|r| r.policy.as_str()));
    for (i, (p, _)) in references.iter().enumerate() {
        if !run_policies.contains(p) {
            return Err(Error::new(format!(
                "reference policy {p:?} is not among the run's policies ({})",
                run_policies.join(", ")
            )));
        }
        if references[..i].iter().any(|(q, _)| q == p) {
            return Err(Error::new(format!(
                "policy {p} has more than one --reference"
            )));
        }
    }
    let needed: Vec<&RunSummary> = runs
        .iter()
        .copied()
        .filter(|r| references.iter().any(|(p, _)| *p == r.policy))
        .collect();
    let candidates =
        |r: &RunSummary| run_dir_names(r).map(|n| run_dir.join("runs").join(n).join("flows.csv"));
    let csv_of = |r: &RunSummary| {
        let c = candidates(r);
        c.iter().find(|p| p.is_file()).unwrap_or(&c[0]).clone()
    };
    // summary.json alone only where there are no flows at all: a flows.csv
    // missing next to others is an error, not a quiet change of method.
    let source = if !has_any_flows_csv(run_dir) {
        OursSource::SummaryBuckets
    } else if let Some(missing) = needed.iter().find(|r| !csv_of(r).is_file()) {
        return Err(Error::new(format!(
            "{}: missing (runs/ has other runs' flows.csv; {} {} seed {} has none)",
            csv_of(missing).display(),
            missing.policy,
            missing.workload,
            missing.seed
        )));
    } else {
        OursSource::Flows
    };
    let table = summary
        .buckets
        .iter()
        .find(|t| t.workload == workload && t.load.to_bits() == load.to_bits());

    // A trace replay's flows carry their trace index as id: bucket them by
    // the trace's own (unscaled) size, so that bucket k holds the same
    // flows on both sides even where scaling made small sizes equal.
    let replayed_sizes: Option<HashMap<u64, u64>> = match (
        summary.experiment["trace"]["file"].as_str(),
        summary.experiment["trace"]["format"].as_str(),
    ) {
        (Some(file), Some(format)) => {
            let t = trace::load(Path::new(file), format.parse()?)?;
            Some(
                t.flows
                    .iter()
                    .map(|f| (f.index as u64, f.size_bytes))
                    .collect(),
            )
        }
        _ => None,
    };
    let mut order: Vec<&(String, PathBuf)> = references.iter().collect();
    order.sort_by_key(|(p, _)| run_policies.iter().position(|q| q == p));
    let mut policies = Vec::new();
    for (policy, file) in order {
        let trace = trace::load(file, TraceFormat::HpccFct)?;
        let ref_samples = reference_samples(&trace);
        let ref_sizes: Vec<u64> = ref_samples.iter().map(|&(s, _)| s).collect();
        let reference = side_buckets(&ref_sizes, &ref_samples, DEFAULT_BUCKETS);
        let (reference_median, reference_p99) = median_p99(&ref_samples);
        let mine: Vec<&RunSummary> = needed
            .iter()
            .copied()
            .filter(|r| r.policy == *policy)
            .collect();
        let (ours, ours_flows, not_completed, (ours_median, ours_p99)) = match source {
            OursSource::Flows => {
                let mut sizes = Vec::new();
                let mut samples = Vec::new();
                let mut started = 0u64;
                for r in &mine {
                    let flows = read_flows(&csv_of(r))?;
                    let mut run_samples = our_samples(&flows, &summary.ideal);
                    let mut run_sizes: Vec<u64> = flows
                        .iter()
                        .filter(|f| !f.warmup)
                        .map(|f| f.size_bytes)
                        .collect();
                    if let Some(trace_sizes) = &replayed_sizes {
                        // The slowdown is of the size the flow had; only
                        // its bucket follows the trace's size.
                        let of = |f: &FlowRecord| {
                            trace_sizes.get(&f.id).copied().ok_or_else(|| {
                                Error::new(format!(
                                    "{}: flow {} is not in the replayed trace",
                                    csv_of(r).display(),
                                    f.id
                                ))
                            })
                        };
                        run_sizes = flows
                            .iter()
                            .filter(|f| !f.warmup)
                            .map(of)
                            .collect::<Result<_>>()?;
                        run_samples = our_flow_slowdowns(&flows, &summary.ideal)
                            .map(|(f, sd)| Ok((of(f)?, sd)))
                            .collect::<Result<_>>()?;
                    }
                    sizes.extend(run_sizes);
                    started += flows.iter().filter(|f| !f.warmup).count() as u64;
                    samples.extend(run_samples);
                }
                let side = side_buckets(&sizes, &samples, DEFAULT_BUCKETS);
                let n = samples.len() as u64;
                (side, n, Some(started - n), median_p99(&samples))
            }
            OursSource::SummaryBuckets => {
                let pb = table
                    .and_then(|t| t.per_policy.iter().find(|p| p.policy == *policy))
                    .ok_or_else(|| {
                        Error::new(format!(
                            "{}: summary.json has no size buckets of {policy} for {workload} load {load}",
                            run_dir.display()
                        ))
                    })?;
                let side = SideBuckets {
                    bounds: table.map(|t| t.bounds.clone()).unwrap_or_default(),
                    counts: pb.counts.clone(),
                    medians: pb.medians.iter().map(|v| v.map(clamp)).collect(),
                    p99s: pb.p99s.iter().map(|v| v.map(clamp)).collect(),
                };
                let n = pb.counts.iter().sum();
                // Pooled quantiles need the flows; the seed means of the
                // runs' quantiles are the closest summary.json has.
                let agg = summary.aggregates.iter().find(|a| {
                    a.workload == workload
                        && a.load.to_bits() == load.to_bits()
                        && a.policy == *policy
                });
                let overall = (
                    agg.and_then(|a| a.median_mean).map(clamp),
                    agg.and_then(|a| a.p99_mean).map(clamp),
                );
                (side, n, None, overall)
            }
        };
        let (buckets, r_median, r_p99, notes) = compare(&ours, &reference);
        policies.push(PolicyFidelity {
            policy: policy.clone(),
            reference_file: file.display().to_string(),
            runs: mine.len(),
            ours_flows,
            reference_flows: ref_samples.len() as u64,
            ours_not_completed: not_completed,
            buckets,
            r_median,
            r_p99,
            ours_median,
            ours_p99,
            reference_median,
            reference_p99,
            notes,
        });
    }
    let (pooled_r_median, pooled_r_p99) = pooled(&policies);
    let mut notes = Vec::new();
    if source == OursSource::SummaryBuckets {
        notes.push(
            "ours from summary.json's buckets (no runs/*/flows.csv): bounds over all policies' \
             sizes, quantiles of unclamped slowdowns (unfinished flows at their lower bound) \
             clamped at 1 afterwards; our overall median and p99 are the means over seeds of the \
             runs' median and p99 (summary.json's aggregates)"
                .to_string(),
        );
    }
    Ok(FidelityReport {
        run_dir: run_dir.display().to_string(),
        workload,
        load,
        ours_source: source,
        buckets: DEFAULT_BUCKETS,
        policies,
        pooled_r_median,
        pooled_r_p99,
        paper_r_median: PAPER_R_MEDIAN,
        paper_r_p99: PAPER_R_P99,
        notes,
    })
}

/// [`run_fidelity_with`] for a run directory with one (workload, load).
pub fn run_fidelity(run_dir: &Path, references: &[(String, PathBuf)]) -> Result<FidelityReport> {
    run_fidelity_with(run_dir, references, &Selector::default())
}

/// [`compute`], then writes `DIR/fidelity.json`, `DIR/plots/fidelity.svg`
/// and `.png`, and the fidelity section of `DIR/report.md` (replacing an
/// earlier one; a report is created if there is none).
pub fn run_fidelity_with(
    run_dir: &Path,
    references: &[(String, PathBuf)],
    sel: &Selector,
) -> Result<FidelityReport> {
    let report = compute(run_dir, references, sel)?;
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

fn r_text(r: Option<f64>) -> String {
    r.map_or_else(|| "undefined".to_string(), |r| format!("{r:.3}"))
}

fn s_text(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.2}"))
}

/// A short terminal table: per policy r at the median and p99, our and
/// the reference's overall median and p99; the pooled r and the goal.
pub fn render_text(r: &FidelityReport) -> String {
    let source = match r.ours_source {
        OursSource::Flows => "per flow from runs/*/flows.csv",
        OursSource::SummaryBuckets => "from summary.json's buckets",
    };
    let mut out = format!(
        "fidelity of {}, load {} (ours {source}; ln slowdown over size buckets)\n",
        r.workload, r.load
    );
    out += &format!(
        "{:<8} {:>7} {:>9} {:>9} {:>10} {:>10} {:>9} {:>9}\n",
        "policy", "buckets", "r median", "r p99", "our med", "ref med", "our p99", "ref p99"
    );
    for p in &r.policies {
        out += &format!(
            "{:<8} {:>7} {:>9} {:>9} {:>10} {:>10} {:>9} {:>9}\n",
            p.policy,
            p.buckets.len(),
            r_text(p.r_median),
            r_text(p.r_p99),
            s_text(p.ours_median),
            s_text(p.reference_median),
            s_text(p.ours_p99),
            s_text(p.reference_p99)
        );
    }
    out += &format!(
        "{:<8} {:>7} {:>9} {:>9}\n",
        "pooled",
        r.policies.iter().map(|p| p.buckets.len()).sum::<usize>(),
        r_text(r.pooled_r_median),
        r_text(r.pooled_r_p99)
    );
    out += &format!(
        "goal (the paper's testbed vs its simulator): r median {}, r p99 {}\n",
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

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: Option<f64>, b: f64, tol: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() <= tol)
    }

    #[test]
    fn pearson_by_hand() {
        assert!(close(
            pearson(&[1.0, 2.0, 3.0], &[2.0, 4.0, 6.0]),
            1.0,
            1e-12
        ));
        assert!(close(
            pearson(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]),
            -1.0,
            1e-12
        ));
        // Means 2.5, 2.75; sum dx dy = 5.5, sum dx^2 = 5, sum dy^2 = 8.75:
        // r = 5.5 / sqrt(43.75) = 0.83152.
        assert!(close(
            pearson(&[1.0, 2.0, 3.0, 4.0], &[1.0, 3.0, 2.0, 5.0]),
            0.8315,
            5e-5
        ));
        // Constant series, too few points, unequal lengths: undefined.
        assert_eq!(pearson(&[1.0, 2.0, 3.0], &[5.0, 5.0, 5.0]), None);
        assert_eq!(pearson(&[0.1; 3], &[1.0, 2.0, 3.0]), None);
        assert_eq!(pearson(&[1.0], &[2.0]), None);
        assert_eq!(pearson(&[1.0, 2.0], &[1.0]), None);
        assert_eq!(pearson(&[1.0, f64::NAN], &[1.0, 2.0]), None);
    }

    #[test]
    fn log_pearson_skips_empty_buckets() {
        // ln 2, ln 4, ln 8 = (1, 2, 3) ln 2 against 3, 9, 27 = (1, 2, 3) ln 3.
        let pairs = [
            (Some(2.0), Some(3.0)),
            (None, Some(100.0)),
            (Some(4.0), Some(9.0)),
            (Some(8.0), Some(27.0)),
        ];
        assert!(close(log_pearson(pairs), 1.0, 1e-12));
        // ln of (1, e, e^2) against (1, 2, 3) is (0, 1, 2): r = 1 on logs,
        // while r of the raw values is below 1.
        let e = std::f64::consts::E;
        assert!(close(
            log_pearson([
                (Some(1.0), Some(e)),
                (Some(e), Some(e * e)),
                (Some(e * e), Some(e.powi(3)))
            ]),
            1.0,
            1e-12
        ));
        assert_eq!(log_pearson([(Some(2.0), Some(3.0))]), None);
    }

    #[test]
    fn slowdowns_are_clamped_at_one() {
        let t = crate::trace::parse(
            "0b000101 0b007a01 1 100 1000 0 30 20\n0b000101 0b007a01 1 100 2000 0 10 20\n",
            TraceFormat::HpccFct,
            "r",
        )
        .unwrap();
        assert_eq!(reference_samples(&t), [(1000, 1.5), (2000, 1.0)]);
        // 1448 bytes: 40 ms + 121.12 us (see analysis' tests).
        let ideal = IdealModel::new(20_000_000, 100_000_000);
        let rec = |id, fct: Option<u64>, warmup, status| FlowRecord {
            id,
            sender: "h1".into(),
            receiver: "h2".into(),
            src: String::new(),
            dst: String::new(),
            size_bytes: 1448,
            start_ns: 0,
            fct_ns: fct,
            min_rtt_us: None,
            status,
            error: String::new(),
            warmup,
            path: None,
            switch_path: None,
            reverse_switch_path: None,
        };
        let flows = [
            rec(1, Some(80_242_240), false, FlowStatus::Ok),
            rec(2, Some(20_000_000), false, FlowStatus::Ok),
            rec(3, Some(80_242_240), true, FlowStatus::Ok),
            rec(4, None, false, FlowStatus::Unfinished),
        ];
        assert_eq!(our_samples(&flows, &ideal), [(1448, 2.0), (1448, 1.0)]);
    }

    #[test]
    fn log_slowdown_buckets_by_hand() {
        // Three sizes, two flows each: size_buckets(.., 20) gives one bucket
        // per size. Ours: (2, 2), (4, 4), (8, 8): medians = p99s = 2, 4, 8.
        let ours = [
            (100, 2.0),
            (100, 2.0),
            (200, 4.0),
            (200, 4.0),
            (300, 8.0),
            (300, 8.0),
        ];
        // Reference: (1, 3), (3, 5), (5, 11): medians 2, 4, 8 (r = 1);
        // p99s 1 + 0.99 x 2 = 2.98, 4.98, 10.94.
        let reference = [
            (10, 1.0),
            (10, 3.0),
            (20, 3.0),
            (20, 5.0),
            (30, 5.0),
            (30, 11.0),
        ];
        let sizes = |v: &[(u64, f64)]| v.iter().map(|&(s, _)| s).collect::<Vec<_>>();
        let o = side_buckets(&sizes(&ours), &ours, DEFAULT_BUCKETS);
        let r = side_buckets(&sizes(&reference), &reference, DEFAULT_BUCKETS);
        assert_eq!(o.bounds, [(100, 100), (200, 200), (300, 300)]);
        assert_eq!(r.counts, [2, 2, 2]);
        assert!(close(r.p99s[2], 10.94, 1e-12));
        let (b, r_med, r_p99, notes) = compare(&o, &r);
        assert_eq!(b.len(), 3);
        assert_eq!((b[1].ours_lo, b[1].reference_hi), (200, 20));
        assert!(close(r_med, 1.0, 1e-12));
        // x = ln 2 (1, 2, 3); y = ln 2.98, ln 4.98, ln 10.94 =
        // 1.091923, 1.605430, 2.392426: dy = -0.604670, -0.091163, 0.695833;
        // r = (0.604670 + 0.695833) / sqrt(2 x 0.858119) = 0.99271.
        assert!(close(r_p99, 0.9927, 5e-5));
        assert!(notes.is_empty(), "{notes:?}");
        // A constant side: r undefined, said so.
        let flat = SideBuckets {
            medians: vec![Some(3.0); 3],
            ..o.clone()
        };
        let (_, r_med, _, notes) = compare(&flat, &r);
        assert_eq!(r_med, None);
        assert_eq!(
            notes,
            ["r at the median undefined: ours is constant over the buckets"]
        );
        // Unequal bucket counts: the first ones are compared.
        let short = side_buckets(&[100, 100], &[(100, 2.0), (100, 2.0)], DEFAULT_BUCKETS);
        let (b, r_med, _, notes) = compare(&short, &r);
        assert_eq!((b.len(), r_med), (1, None));
        assert_eq!(notes[0], "ours has 1 size buckets, the reference 3 (equal sizes straddling a cut merge buckets): compared the first 1");
        assert_eq!(
            notes[1],
            "r at the median undefined: 1 bucket(s) with values on both sides"
        );
    }

    #[test]
    fn pooled_concatenates_policies() {
        let pf = |meds: [f64; 2], refs: [f64; 2]| PolicyFidelity {
            policy: "p".into(),
            reference_file: String::new(),
            runs: 1,
            ours_flows: 2,
            reference_flows: 2,
            ours_not_completed: None,
            buckets: (0..2)
                .map(|k| BucketPair {
                    bucket: k,
                    ours_lo: 0,
                    ours_hi: 0,
                    ours_flows: 1,
                    ours_median: Some(meds[k]),
                    ours_p99: Some(meds[k]),
                    reference_lo: 0,
                    reference_hi: 0,
                    reference_flows: 1,
                    reference_median: Some(refs[k]),
                    reference_p99: Some(refs[k]),
                })
                .collect(),
            r_median: None,
            r_p99: None,
            ours_median: None,
            ours_p99: None,
            reference_median: None,
            reference_p99: None,
            notes: vec![],
        };
        // Logs (base e^1): ours 0, 1 | 2, 3 ; reference 0, 1 | 3, 2.
        let e = std::f64::consts::E;
        let a = pf([1.0, e], [1.0, e]);
        let b = pf([e * e, e.powi(3)], [e.powi(3), e * e]);
        // x = 0, 1, 2, 3 and y = 0, 1, 3, 2 (means 1.5): sum dx dy =
        // 2.25 + 0.25 + 0.75 + 0.75 = 4, sum dx^2 = sum dy^2 = 5: r = 0.8.
        let (m, p) = pooled(&[a, b]);
        assert!(close(m, 0.8, 1e-12));
        assert!(close(p, 0.8, 1e-12));
    }

    #[test]
    fn reference_arguments() {
        assert_eq!(
            parse_reference("lcmp=a/fct.txt").unwrap(),
            ("lcmp".to_string(), PathBuf::from("a/fct.txt"))
        );
        assert_eq!(
            parse_reference("lcmp").unwrap_err(),
            "expected POLICY=FILE (e.g. lcmp=fct_lcmp.txt), not \"lcmp\""
        );
        assert!(parse_reference("=x").is_err());
    }
}

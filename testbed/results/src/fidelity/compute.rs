//! Ours against the reference simulator, from a run directory: which
//! flows, how they are bucketed and scaled, and what is refused.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use lcmp_traffic::record::{FlowRecord, FlowStatus};

use super::model::{
    Distance, FidelityReport, Floor, OursSource, PolicyFidelity, Selector, SideBuckets,
    PAPER_R_MEDIAN, PAPER_R_P99, QUOTED_FLOOR_LCMP_W1,
};
use super::stats::{
    cdf_quantiles, clamp, compare, distance, excess_ms_per_mb, median_p99, our_excess,
    our_flow_slowdowns, our_samples, pooled, ratio, reference_excess, reference_samples,
    side_buckets, sorted_slowdowns, ModelScale,
};
use crate::analysis::{
    groups, order_policies, quantile_sorted, IdealModel, RunSummary, Summary, DEFAULT_BUCKETS,
};
use crate::run_dir::{flows_csv, has_any_flows_csv, load_summary, read_flows, require_flows};
use crate::trace::{self, Trace, TraceFormat};
use crate::{Error, Result};

/// The trace a replay ran: `given` (`--trace`), else `file` as
/// summary.json records it.
fn replayed_trace(
    run_dir: &Path,
    file: &str,
    format: TraceFormat,
    given: Option<&Path>,
) -> Result<Trace> {
    if let Some(path) = given {
        return trace::load(path, format);
    }
    let path = Path::new(file);
    let text = lcmp_topology::read_data_file(path).map_err(|e| {
        // The runner keeps the path as it was given, relative to the
        // directory it ran in: say so, or the bare path reads as a fault of
        // a --reference (often the same file, given another way).
        let summary = run_dir.join("summary.json");
        let summary = summary.display();
        if path.is_absolute() {
            return Error::new(format!(
                "{summary}: the replayed trace {file} (experiment.trace.file): {e}; pass the \
                 trace with --trace FILE"
            ));
        }
        let tried = match std::env::current_dir() {
            Ok(here) => format!(
                "{} (relative to the current directory {})",
                here.join(path).display(),
                here.display()
            ),
            Err(_) => format!("{file} (relative to the current directory)"),
        };
        Error::new(format!(
            "{summary}: the replayed trace {file} (experiment.trace.file, relative to the \
             directory the experiment ran in) cannot be read at {tried}: {e}; run lcmp-testbed \
             fidelity from the directory the experiment ran in, or pass the trace with --trace \
             FILE"
        ))
    })?;
    trace::parse(&text, format, file)
}

/// What a policy's flows.csv files hold, for the refusal when none of
/// their flows has a slowdown.
#[derive(Debug, Default)]
pub(super) struct Counted {
    files: Vec<PathBuf>,
    rows: u64,
    warmup: u64,
    /// Non-warm-up, status ok, with an FCT.
    pub(super) completed: u64,
}

impl Counted {
    pub(super) fn add(&mut self, file: PathBuf, flows: &[FlowRecord]) {
        self.files.push(file);
        self.rows += flows.len() as u64;
        self.warmup += flows.iter().filter(|f| f.warmup).count() as u64;
        self.completed += flows
            .iter()
            .filter(|f| !f.warmup && f.status == FlowStatus::Ok && f.fct_ns.is_some())
            .count() as u64;
    }
}

/// The ideal model's figures that can leave it without an ideal FCT.
fn ideal_text(ideal: &IdealModel) -> String {
    let mut t = format!(
        "base RTT {} ns, bottleneck {} bit/s",
        ideal.base_rtt_ns, ideal.bottleneck_bps
    );
    if ideal.mss_bytes == 0 {
        t += ", MSS 0 bytes";
    }
    if ideal.wire_bytes_per_segment == 0 {
        t += ", 0 wire bytes a segment";
    }
    if !ideal.rtts.is_finite() {
        t += &format!(", {} RTTs", ideal.rtts);
    }
    t
}

/// Why `policy` has no slowdown to compare in the files of `c`: no rows,
/// none completed outside the warm-up, or no ideal FCT for those that did.
pub(super) fn nothing_to_compare(
    policy: &str,
    c: &Counted,
    run_dir: &Path,
    ideal: &IdealModel,
) -> Error {
    let files = c
        .files
        .iter()
        .map(|f| f.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let why = if c.rows == 0 {
        "no flow rows".to_string()
    } else if c.completed == 0 {
        format!(
            "no completed non-warm-up flow ({} rows: {} warm-up, {} not completed)",
            c.rows,
            c.warmup,
            c.rows - c.warmup
        )
    } else {
        format!(
            "slowdown (FCT / ideal) undefined for all {} completed non-warm-up flows: {}'s ideal \
             model ({}) defines no ideal FCT for them",
            c.completed,
            run_dir.join("summary.json").display(),
            ideal_text(ideal)
        )
    };
    Error::new(format!("{policy}: nothing to compare: {files}: {why}"))
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

/// The one (workload, load) of `summary` that `sel` leaves, and its runs.
pub(super) fn selected_runs<'s>(
    summary: &'s Summary,
    sel: &Selector,
    run_dir: &Path,
) -> Result<(String, f64, Vec<&'s RunSummary>)> {
    let (workload, load) = select(summary, sel, run_dir)?;
    let runs = summary
        .runs
        .iter()
        .filter(|r| r.workload == workload && r.load.to_bits() == load.to_bits())
        .collect();
    Ok((workload, load, runs))
}

/// Ours vs the reference for the (workload, load) `sel` picks in `run_dir`;
/// `references` are `(policy, hpcc-fct file)`, `reruns` a second reference
/// run of some of those policies (the floor). Reads only.
pub fn compute(
    run_dir: &Path,
    references: &[(String, PathBuf)],
    reruns: &[(String, PathBuf)],
    sel: &Selector,
) -> Result<FidelityReport> {
    if references.is_empty() {
        return Err(Error::new("give at least one --reference POLICY=FILE"));
    }
    for (i, (p, _)) in reruns.iter().enumerate() {
        if !references.iter().any(|(q, _)| q == p) {
            return Err(Error::new(format!(
                "a second reference run of {p} needs its first (--reference {p}=FILE)"
            )));
        }
        if reruns[..i].iter().any(|(q, _)| q == p) {
            return Err(Error::new(format!(
                "policy {p} has more than one second reference run"
            )));
        }
    }
    let summary = load_summary(run_dir)?;
    let replayed = (
        summary.experiment["trace"]["file"].as_str(),
        summary.experiment["trace"]["format"].as_str(),
    );
    if let (Some(given), (None, _)) = (&sel.trace, replayed) {
        return Err(Error::new(format!(
            "--trace {}: {} has no experiment.trace.file (the run replayed no trace)",
            given.display(),
            run_dir.join("summary.json").display()
        )));
    }
    let (workload, load, runs) = selected_runs(&summary, sel, run_dir)?;
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
    let csv_of = |r: &RunSummary| flows_csv(run_dir, r);
    // summary.json alone only where there are no flows at all: a flows.csv
    // missing next to others is an error, not a quiet change of method.
    let source = if !has_any_flows_csv(run_dir) {
        OursSource::SummaryBuckets
    } else {
        require_flows(run_dir, &needed)?;
        OursSource::Flows
    };
    let table = summary
        .buckets
        .iter()
        .find(|t| t.workload == workload && t.load.to_bits() == load.to_bits());

    // A trace replay's flows carry their trace index as id: bucket them by
    // the trace's own (unscaled) size, so that bucket k holds the same
    // flows on both sides even where scaling made small sizes equal.
    // summary.json's buckets are by our sizes: no trace to read there.
    let replayed_sizes: Option<HashMap<u64, u64>> = match (source, replayed) {
        (OursSource::Flows, (Some(file), Some(format))) => {
            let t = replayed_trace(run_dir, file, format.parse()?, sel.trace.as_deref())?;
            Some(
                t.flows
                    .iter()
                    .map(|f| (f.index as u64, f.size_bytes))
                    .collect(),
            )
        }
        _ => None,
    };
    let scale = ModelScale::of_experiment(&summary.experiment);
    let mut order: Vec<&(String, PathBuf)> = references.iter().collect();
    order.sort_by_key(|(p, _)| run_policies.iter().position(|q| q == p));
    let mut policies = Vec::new();
    for (policy, file) in order {
        let trace = trace::load(file, TraceFormat::HpccFct)?;
        let ref_samples = reference_samples(&trace);
        let ref_sizes: Vec<u64> = ref_samples.iter().map(|&(s, _)| s).collect();
        let reference = side_buckets(&ref_sizes, &ref_samples, DEFAULT_BUCKETS);
        let (reference_median, reference_p99) = median_p99(&ref_samples);
        let ref_sorted = sorted_slowdowns(&ref_samples);
        let reference_excess_ms_per_mb = excess_ms_per_mb(&reference_excess(&trace));
        let floor = match reruns.iter().find(|(p, _)| p == policy) {
            Some((_, rerun_file)) => {
                let rerun = trace::load(rerun_file, TraceFormat::HpccFct)?;
                let samples = reference_samples(&rerun);
                let sorted = sorted_slowdowns(&samples);
                Some(Floor {
                    rerun_file: rerun_file.display().to_string(),
                    rerun_flows: samples.len() as u64,
                    distance: distance(&sorted, &ref_sorted),
                    rerun_median: quantile_sorted(&sorted, 0.5),
                    rerun_p99: quantile_sorted(&sorted, 0.99),
                    rerun_excess_ms_per_mb: excess_ms_per_mb(&reference_excess(&rerun)),
                    rerun_quantiles: cdf_quantiles(&sorted),
                })
            }
            None => None,
        };
        let mine: Vec<&RunSummary> = needed
            .iter()
            .copied()
            .filter(|r| r.policy == *policy)
            .collect();
        // The per-flow figures (None from summary.json's buckets).
        let mut ours_sorted: Option<Vec<f64>> = None;
        let mut ours_excess_ms_per_mb = None;
        let (ours, ours_flows, not_completed, (ours_median, ours_p99)) = match source {
            OursSource::Flows => {
                let mut sizes = Vec::new();
                let mut samples = Vec::new();
                let mut excess = Vec::new();
                let mut started = 0u64;
                let mut counted = Counted::default();
                for r in &mine {
                    let flows = read_flows(&csv_of(r))?;
                    counted.add(csv_of(r), &flows);
                    let mut run_samples = our_samples(&flows, &summary.ideal);
                    let trace_size = |f: &FlowRecord| {
                        replayed_sizes.as_ref().and_then(|t| t.get(&f.id).copied())
                    };
                    excess.extend(our_excess(&flows, &summary.ideal, scale, &trace_size));
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
                if samples.is_empty() {
                    return Err(nothing_to_compare(
                        policy,
                        &counted,
                        run_dir,
                        &summary.ideal,
                    ));
                }
                let side = side_buckets(&sizes, &samples, DEFAULT_BUCKETS);
                let n = samples.len() as u64;
                ours_sorted = Some(sorted_slowdowns(&samples));
                ours_excess_ms_per_mb = excess_ms_per_mb(&excess);
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
                if n == 0 {
                    let started: u64 = mine.iter().map(|r| r.flows_started).sum();
                    let completed: u64 = mine.iter().map(|r| r.flows_completed).sum();
                    let why = if started == 0 {
                        "no non-warm-up flows".to_string()
                    } else if completed == 0 {
                        "no non-warm-up flow completed".to_string()
                    } else {
                        format!(
                            "its ideal model ({}) defines no ideal FCT",
                            ideal_text(&summary.ideal)
                        )
                    };
                    return Err(Error::new(format!(
                        "{policy}: nothing to compare: {}: no slowdown of {policy} in the size \
                         buckets of {workload} load {load} ({why})",
                        run_dir.join("summary.json").display()
                    )));
                }
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
        let distance = match &ours_sorted {
            Some(sorted) => distance(sorted, &ref_sorted),
            // summary.json: no flows for W1 and KS; the seeds' mean median
            // and p99 for the ratios.
            None => Distance {
                median_ratio: ratio(ours_median, reference_median),
                p99_ratio: ratio(ours_p99, reference_p99),
                ..Distance::default()
            },
        };
        policies.push(PolicyFidelity {
            policy: policy.clone(),
            reference_file: file.display().to_string(),
            runs: mine.len(),
            ours_flows,
            reference_flows: ref_samples.len() as u64,
            ours_not_completed: not_completed,
            distance,
            ours_excess_ms_per_mb,
            reference_excess_ms_per_mb,
            floor,
            ours_quantiles: ours_sorted
                .as_deref()
                .map(cdf_quantiles)
                .unwrap_or_default(),
            reference_quantiles: cdf_quantiles(&ref_sorted),
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
             runs' median and p99 (summary.json's aggregates), which the median and p99 ratios \
             use; W1, KS and FCT minus ideal per MB need the flows and are undefined"
                .to_string(),
        );
    }
    let lcmp_rerun = policies
        .iter()
        .any(|p| p.policy.eq_ignore_ascii_case("lcmp") && p.floor.is_some());
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
        quoted_floor_lcmp_w1: (!lcmp_rerun).then_some(QUOTED_FLOOR_LCMP_W1),
        notes,
    })
}

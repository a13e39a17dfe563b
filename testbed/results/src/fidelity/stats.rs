//! The statistics of a fidelity comparison: slowdowns of each side,
//! their distance, per-bucket r and FCT minus ideal per MB.

use lcmp_stats::{ks_distance_sorted, wasserstein1_sorted};
use lcmp_traffic::record::{FlowRecord, FlowStatus};

use super::model::{BucketPair, Distance, PolicyFidelity, SideBuckets, CDF_LEVELS};
use crate::analysis::{
    bucket_index, quantile_sorted, size_buckets, sorted_finite, IdealModel, SlowdownSample,
    DEFAULT_BUCKETS,
};
use crate::trace::Trace;

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
pub(crate) fn clamp(s: f64) -> f64 {
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
pub(crate) fn our_flow_slowdowns<'f>(
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

/// The slowdowns of `samples`, finite and positive, ascending.
pub(crate) fn sorted_slowdowns(samples: &[SlowdownSample]) -> Vec<f64> {
    let v: Vec<f64> = samples
        .iter()
        .map(|&(_, s)| s)
        .filter(|s| *s > 0.0)
        .collect();
    sorted_finite(&v)
}

pub(crate) fn median_p99(samples: &[SlowdownSample]) -> (Option<f64>, Option<f64>) {
    let v = sorted_slowdowns(samples);
    (quantile_sorted(&v, 0.5), quantile_sorted(&v, 0.99))
}

/// `a / b` where both exist and the ratio is finite.
pub(crate) fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    Some(a? / b?).filter(|r| r.is_finite())
}

/// The slowdown at the [`CDF_LEVELS`] quantile levels of ascending
/// `sorted` (empty for an empty side).
pub fn cdf_quantiles(sorted: &[f64]) -> Vec<f64> {
    (0..CDF_LEVELS)
        .filter_map(|k| quantile_sorted(sorted, k as f64 / (CDF_LEVELS - 1) as f64))
        .collect()
}

/// `side` against `reference`, both ascending, finite, positive slowdowns:
/// W1 and KS of their logarithms and the ratios side / reference of the
/// median and the p99.
pub fn distance(side: &[f64], reference: &[f64]) -> Distance {
    // ln is increasing: the logarithms stay sorted.
    let ln = |v: &[f64]| v.iter().map(|s| s.ln()).collect::<Vec<f64>>();
    let (a, b) = (ln(side), ln(reference));
    let q = |v: &[f64], p| quantile_sorted(v, p);
    Distance {
        w1_ln_slowdown: wasserstein1_sorted(&a, &b),
        ks_ln_slowdown: ks_distance_sorted(&a, &b),
        median_ratio: ratio(q(side, 0.5), q(reference, 0.5)),
        p99_ratio: ratio(q(side, 0.99), q(reference, 0.99)),
    }
}

/// FCT minus ideal per MB: how the time a flow spends beyond its ideal
/// grows with its size, in ms per MB (10^6 bytes; ns per byte is the same
/// number). `samples` are `(size in bytes, FCT - ideal in ns)`.
///
/// Definition: the samples are cut into [`DEFAULT_BUCKETS`] equal-count
/// size buckets ([`size_buckets`]), and the figure is the slope between the
/// smallest and the largest bucket: (median excess of the largest - median
/// excess of the smallest) / (median size of the largest - median size of
/// the smallest), type 7 medians. Medians keep a few stalled flows from
/// deciding it. `None` with fewer than two buckets.
///
/// Issue 26 quotes, for the simulator's files, LCMP 4.9, ECMP 18, UCMP 1.8
/// ms/MB. On `experiments/reference/lcmp-artifact-8dc/fct_{lcmp,ecmp,ucmp}.txt`
/// (excess = fct_ns - standalone_ns) this definition gives 4.99, 18.97 and
/// 1.97, the closest of those tried; none reproduces the quoted figures
/// exactly. The others: least-squares slope of excess on size over all
/// flows 3.35 / 15.04 / 2.46; sum of excess over sum of sizes 58.9 / 199 /
/// 297 (dominated by the small flows' fixed queueing delay); least-squares
/// slope through the 20 buckets' median excess and median size 5.38 / 23.2
/// / 2.26.
pub fn excess_ms_per_mb(samples: &[(u64, f64)]) -> Option<f64> {
    let sizes: Vec<u64> = samples.iter().map(|&(s, _)| s).collect();
    let bounds = size_buckets(&sizes, DEFAULT_BUCKETS);
    if bounds.len() < 2 {
        return None;
    }
    let last = bounds.len() - 1;
    let medians = |k: usize| {
        let (size, excess): (Vec<f64>, Vec<f64>) = samples
            .iter()
            .filter(|&&(s, e)| e.is_finite() && bucket_index(&bounds, s) == Some(k))
            .map(|&(s, e)| (s as f64, e))
            .unzip();
        Some((
            quantile_sorted(&sorted_finite(&size), 0.5)?,
            quantile_sorted(&sorted_finite(&excess), 0.5)?,
        ))
    };
    let ((s0, e0), (s1, e1)) = (medians(0)?, medians(last)?);
    ratio(Some(e1 - e0), Some(s1 - s0))
}

/// `(size, fct - standalone)` in ns of every flow of an `hpcc-fct` trace
/// (not clamped: a flow faster than its standalone FCT counts as such).
pub fn reference_excess(trace: &Trace) -> Vec<(u64, f64)> {
    trace
        .flows
        .iter()
        .filter_map(|f| {
            let e = f.reference_fct_ns? as f64 - f.standalone_ns? as f64;
            Some((f.size_bytes, e))
        })
        .collect()
}

/// How our flows map onto the reference's scale (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelScale {
    /// Flow sizes were divided by this (`experiment.size_scale`).
    pub size_scale: f64,
    /// Time was dilated by this (`experiment.time_scale`).
    pub time_scale: f64,
}

impl ModelScale {
    /// Both 1: ours is already on the reference's scale.
    pub const UNSCALED: ModelScale = ModelScale {
        size_scale: 1.0,
        time_scale: 1.0,
    };

    /// `summary.json`'s `experiment.size_scale` and `.time_scale`, 1 where
    /// absent or not a positive number.
    pub fn of_experiment(experiment: &serde_json::Value) -> ModelScale {
        let get = |k: &str| {
            experiment[k]
                .as_f64()
                .filter(|v| v.is_finite() && *v > 0.0)
                .unwrap_or(1.0)
        };
        ModelScale {
            size_scale: get("size_scale"),
            time_scale: get("time_scale"),
        }
    }
}

/// `(size, FCT - ideal)` of our completed non-warm-up flows, on the
/// reference's scale: the excess in model time (divided by the time
/// dilation), the size unscaled (`size_of` the flow where given, the
/// replayed trace's size; else `size_bytes` times the size scale).
pub fn our_excess(
    flows: &[FlowRecord],
    ideal: &IdealModel,
    scale: ModelScale,
    size_of: &dyn Fn(&FlowRecord) -> Option<u64>,
) -> Vec<(u64, f64)> {
    flows
        .iter()
        .filter(|f| !f.warmup && f.status == FlowStatus::Ok)
        .filter_map(|f| {
            let excess = (f.fct_ns? as f64 - ideal.ideal_fct_ns(f.size_bytes)?) / scale.time_scale;
            let size = size_of(f)
                .unwrap_or_else(|| (f.size_bytes as f64 * scale.size_scale).round() as u64);
            excess.is_finite().then_some((size, excess))
        })
        .collect()
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

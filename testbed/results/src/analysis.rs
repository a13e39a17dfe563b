//! FCT analysis of experiment runs: slowdowns, quantiles, size buckets,
//! per-path use, aggregation across seeds and LCMP's reductions.
//!
//! Pure: the runner hands in per-run flow rows ([`FlowRecord`]), the source
//! switch's candidate paths toward the destination, the bytes each path's
//! egress port sent during the measurement window and the calibration
//! verdict ([`RunInput`]), and what every switch saw ([`NetworkInput`]:
//! the bytes of every link direction, the flows whose switch path could not
//! be reconstructed); [`build_summary_with_network`] turns them into a
//! [`Summary`] (the content of `summary.json`), which `report` and `plots`
//! render.
//!
//! Conventions, fixed here so every number in a report means the same:
//! - Warm-up flows (`warmup = true`) are excluded everywhere; "started"
//!   counts the remaining rows.
//! - Slowdown = FCT / ideal FCT ([`IdealModel`]), **not** clamped at 1
//!   (the paper clamps). Clamping would hide an ideal that is too high; the
//!   share of flows below 1 is reported instead ([`RunSummary::share_below_ideal`]).
//! - Quantiles use one method, [`quantile_sorted`] (type 7).
//! - Reductions are `(lcmp - baseline) / baseline`: negative = LCMP better.

use std::collections::{BTreeMap, HashMap};

use lcmp_traffic::record::{FlowRecord, FlowStatus};
use serde::{Deserialize, Serialize};

/// Default TCP payload per segment: the 1500-byte MTU less 20 bytes of
/// IPv4, 20 of TCP and 12 of the timestamps option (on by default in Linux).
pub const DEFAULT_MSS_BYTES: u32 = 1448;

/// Default bytes one full segment costs at the bottleneck: the MSS plus
/// TCP/IP headers and options (52) and the Ethernet header (14). No FCS,
/// preamble or inter-frame gap: the switch's shaper charges the frame as
/// AF_XDP hands it over, which has none of them.
pub const DEFAULT_WIRE_BYTES_PER_SEGMENT: u32 = 1514;

/// Round trips included in an FCT: the handshake and the final
/// acknowledgement (see [`FlowRecord`]).
pub const DEFAULT_RTTS: f64 = 2.0;

/// Number of equal-count flow-size buckets (the paper's Fig. 5).
pub const DEFAULT_BUCKETS: usize = 20;

/// One candidate path of the source switch toward the destination.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathSpec {
    /// Path name, e.g. `"dc2"` (the via switch).
    pub name: String,
    /// Egress port of the source switch.
    pub port: u8,
    /// Configured base RTT: 2 x the path's one-way delay, microseconds.
    pub rtt_us: u64,
    /// Configured bottleneck rate of the path, bit/s.
    pub bottleneck_bps: u64,
}

/// The ideal FCT of a flow: alone on the minimum-delay path.
///
/// `ideal_fct_ns(size) = rtts * base_rtt_ns
///     + ceil(size / mss_bytes) * wire_bytes_per_segment * 8 / bottleneck_bps`.
/// `base_rtt_ns` should be measured on the idle testbed (the emulation adds
/// host and switch latency to the configured delay); the configured value is
/// the fallback.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IdealModel {
    /// Base RTT of the minimum-delay path, nanoseconds.
    pub base_rtt_ns: u64,
    /// Bottleneck rate of that path, bit/s.
    pub bottleneck_bps: u64,
    /// Round trips an FCT includes besides the transfer (2: handshake + ack).
    pub rtts: f64,
    /// Payload bytes per segment.
    pub mss_bytes: u32,
    /// Bytes per full segment as the bottleneck's shaper counts them.
    pub wire_bytes_per_segment: u32,
}

/// The default `rtts`, MSS and wire size with a zero base RTT and rate:
/// for `IdealModel { base_rtt_ns, bottleneck_bps, ..Default::default() }`
/// (a zero rate yields no ideal).
impl Default for IdealModel {
    fn default() -> Self {
        Self::new(0, 0)
    }
}

impl IdealModel {
    /// A model with the default `rtts`, MSS and wire size.
    pub fn new(base_rtt_ns: u64, bottleneck_bps: u64) -> Self {
        Self {
            base_rtt_ns,
            bottleneck_bps,
            rtts: DEFAULT_RTTS,
            mss_bytes: DEFAULT_MSS_BYTES,
            wire_bytes_per_segment: DEFAULT_WIRE_BYTES_PER_SEGMENT,
        }
    }

    /// The model for the minimum-delay path of `paths` (ties: the faster
    /// one), with `measured_base_rtt_ns` if the runner measured it, else the
    /// configured RTT. `None` if there are no paths.
    pub fn for_min_delay_path(
        paths: &[PathSpec],
        measured_base_rtt_ns: Option<u64>,
    ) -> Option<Self> {
        let best = paths.iter().min_by(|a, b| {
            a.rtt_us
                .cmp(&b.rtt_us)
                .then(b.bottleneck_bps.cmp(&a.bottleneck_bps))
        })?;
        let rtt_ns = measured_base_rtt_ns.unwrap_or(best.rtt_us.saturating_mul(1000));
        Some(Self::new(rtt_ns, best.bottleneck_bps))
    }

    /// Ideal FCT of a flow of `size_bytes`, nanoseconds; `None` if the model
    /// is degenerate (zero MSS or rate, or an ideal that is not > 0), so no
    /// slowdown is computed against it.
    pub fn ideal_fct_ns(&self, size_bytes: u64) -> Option<f64> {
        if self.mss_bytes == 0 || self.bottleneck_bps == 0 || !self.rtts.is_finite() {
            return None;
        }
        let segments = size_bytes.div_ceil(u64::from(self.mss_bytes)) as f64;
        let transfer_ns = segments * f64::from(self.wire_bytes_per_segment) * 8.0 * 1e9
            / self.bottleneck_bps as f64;
        let ideal = self.rtts * self.base_rtt_ns as f64 + transfer_ns;
        (ideal.is_finite() && ideal > 0.0).then_some(ideal)
    }

    /// `fct_ns / ideal`, unclamped; `None` where the ideal is undefined.
    pub fn slowdown(&self, size_bytes: u64, fct_ns: u64) -> Option<f64> {
        self.ideal_fct_ns(size_bytes)
            .map(|ideal| fct_ns as f64 / ideal)
    }
}

/// Everything the runner knows of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunInput {
    /// Path-selection policy (`lcmp`, `ecmp`, `wcmp`, `ucmp`).
    pub policy: String,
    /// Workload name (e.g. `websearch`).
    pub workload: String,
    /// Offered load as configured (the report echoes its definition).
    pub load: f64,
    /// Seed of the traffic generator.
    pub seed: u64,
    /// Every flow row of the run, warm-up ones included.
    pub flows: Vec<FlowRecord>,
    /// The source switch's candidate paths toward the destination.
    pub paths: Vec<PathSpec>,
    /// Bytes each path's egress port put onto its link in the measurement
    /// window, in `paths` order (missing entries are reported as unknown).
    /// Counted at departure from the port buffer (the switch's
    /// `departed_bytes`), not at transmission a link delay later, so a
    /// long link's load falls in the window it was carried in.
    pub port_tx_bytes: Vec<u64>,
    /// Length of the measurement window, seconds.
    pub window_s: f64,
    /// Whether the emulation stayed within tolerance.
    pub calibration_ok: bool,
    /// What calibration found (deviations, testbed bottlenecks).
    pub calibration_notes: Vec<String>,
    /// The path (index into `paths`) of each flow, by flow id, as the source
    /// switch logged its decision (`lcmp-switch lcmp --flow-log`). A flow's RTT
    /// cannot tell: its acknowledgements return over a path the far switch
    /// chose independently.
    #[serde(default)]
    pub flow_paths: HashMap<u64, usize>,
    /// When the runner stopped waiting for flows, nanoseconds on the flows'
    /// `start_ns` clock. Unfinished flows then count in the slowdown
    /// quantiles with FCT = deadline - start, a lower bound, instead of
    /// vanishing from the tail.
    #[serde(default)]
    pub deadline_ns: Option<u64>,
    /// The transport's counters summed over the run's senders (rocev2:
    /// packets, retransmissions, naks, ecn_echoes, cnps, rate_cuts,
    /// timeouts); empty under tcp.
    #[serde(default)]
    pub transport_counters: BTreeMap<String, u64>,
    /// Frames the switches dropped in the run, by reason (summed over the
    /// switches; AF_XDP ring drops as `xsk_*`).
    #[serde(default)]
    pub switch_drops: BTreeMap<String, u64>,
    /// Flows whose ideal is their own, by flow id: in a trace between any
    /// two DCs each flow's is the minimum-delay path of its own DC pair.
    /// The rest are measured against the run's ideal.
    #[serde(default, skip_serializing_if = "HashMap::is_empty")]
    pub flow_ideals: HashMap<u64, IdealModel>,
}

impl RunInput {
    /// The ideal flow `id` is measured against: its own, else `run`'s.
    pub fn ideal_of<'a>(&'a self, id: u64, run: &'a IdealModel) -> &'a IdealModel {
        self.flow_ideals.get(&id).unwrap_or(run)
    }
}

/// One direction of a switch-to-switch link: what `from`'s port toward
/// `to` transmits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkSpec {
    /// [`link_name`]`(from, to)`: `"dc1->dc3"`.
    pub name: String,
    /// The transmitting switch.
    pub from: String,
    /// The switch at the other end.
    pub to: String,
    /// The port's rate as the switch emulates it (scaled), bit/s.
    pub rate_bps: u64,
}

/// The name of the direction `from -> to` of a link, the key of every
/// per-link figure: `"dc1->dc3"`.
pub fn link_name(from: &str, to: &str) -> String {
    format!("{from}->{to}")
}

/// What one link direction carried in a run's measurement window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkLoad {
    /// The direction.
    pub link: LinkSpec,
    /// Bytes its transmitting port put onto it in the window, counted at
    /// departure from the port buffer (`departed_bytes`: a frame loads the
    /// link from then, a whole link delay before the switch transmits
    /// it); `None` when that switch's counters were not readable at the
    /// window's start or end.
    pub tx_bytes: Option<u64>,
}

/// What the runner measured of the whole network in one run, beyond the
/// source switch's view in [`RunInput`]: every switch's ports and decision
/// logs. `Default` is a run where nothing of it is known.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NetworkInput {
    /// Every direction of every switch-to-switch link, in topology order
    /// (links in file order, each `a -> b` then `b -> a`).
    pub links: Vec<LinkLoad>,
    /// Non-warm-up flows whose forward (data) path through the switches
    /// could not be reconstructed from their decision logs, by reason
    /// (`lcmp_testbed::flow_paths::Missing`, e.g. `no_decision@dc3`).
    pub forward_paths_missing: BTreeMap<String, u64>,
    /// The same for the reverse (acknowledgement) path.
    pub reverse_paths_missing: BTreeMap<String, u64>,
    /// Decision-log records each switch lost (buffer full or write error),
    /// by switch; switches that lost none are left out.
    pub flow_log_lost: BTreeMap<String, u64>,
    /// The switches other than the source that choose among several next
    /// hops from the source to the destination
    /// (`lcmp_testbed::flow_paths::transit_choices`); `None`: not known.
    pub transit_choices: Option<Vec<String>>,
}

/// `bytes * 8 / (window_s * rate_bps)`: the one utilization formula;
/// `None` for an empty window or rate.
pub fn utilization(bytes: u64, rate_bps: u64, window_s: f64) -> Option<f64> {
    let capacity_bits = window_s * rate_bps as f64;
    (capacity_bits.is_finite() && capacity_bits > 0.0).then(|| bytes as f64 * 8.0 / capacity_bits)
}

/// Use of one path in one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathUse {
    /// [`PathSpec::name`].
    pub name: String,
    /// Non-warm-up flows the source switch sent over the path
    /// ([`RunInput::flow_paths`]).
    pub flows: u64,
    /// Their payload bytes (sizes as offered).
    pub flow_bytes: u64,
    /// Bytes the egress port put onto the path's first link in the window
    /// ([`RunInput::port_tx_bytes`], counted at departure); `None` if not
    /// given.
    pub tx_bytes: Option<u64>,
    /// `tx_bytes * 8 / (window_s * bottleneck_bps)`; `None` if undefined.
    pub utilization: Option<f64>,
    /// Median slowdown of the flows on the path.
    #[serde(default)]
    pub median_slowdown: Option<f64>,
}

/// The numbers of one run. Flow counts exclude warm-up flows; slowdown
/// statistics cover completed flows; `None` (JSON `null`) where a run has
/// no completed flow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// As in [`RunInput`].
    pub policy: String,
    pub workload: String,
    pub load: f64,
    pub seed: u64,
    /// Non-warm-up flows.
    pub flows_started: u64,
    /// Of those, status `ok` with an FCT.
    pub flows_completed: u64,
    /// Status `failed`.
    pub flows_failed: u64,
    /// Status `unfinished` (or `ok` without an FCT, which breaks the contract).
    pub flows_unfinished: u64,
    /// Warm-up flows, excluded from everything else.
    pub flows_warmup: u64,
    /// Median slowdown of the completed flows.
    pub median_slowdown: Option<f64>,
    /// 90th percentile.
    pub p90_slowdown: Option<f64>,
    /// 99th percentile.
    pub p99_slowdown: Option<f64>,
    /// Arithmetic mean.
    pub mean_slowdown: Option<f64>,
    /// Fraction of completed flows faster than ideal (slowdown < 1); more
    /// than a few percent means the ideal is wrong.
    pub share_below_ideal: Option<f64>,
    /// As in [`RunInput`].
    pub calibration_ok: bool,
    pub calibration_notes: Vec<String>,
    /// One entry per [`PathSpec`], same order.
    pub paths: Vec<PathUse>,
    /// Non-warm-up flows with a minimum RTT that matched no path (flows
    /// without one never connected and are not counted here).
    pub flows_unassigned: u64,
    /// As in [`RunInput`].
    #[serde(default)]
    pub transport_counters: BTreeMap<String, u64>,
    /// Frames the switches dropped in the run, by reason (summed over the
    /// switches; AF_XDP ring drops as `xsk_*`).
    #[serde(default)]
    pub switch_drops: BTreeMap<String, u64>,
    /// Per measured link direction ([`link_name`]): bytes put onto the
    /// link in the window ([`LinkLoad::tx_bytes`], counted at departure)
    /// x 8 / (window x the port's rate).
    #[serde(default)]
    pub link_utilization: BTreeMap<String, f64>,
    /// Per measured link direction: bytes put onto the link in the window
    /// ([`LinkLoad::tx_bytes`]).
    #[serde(default)]
    pub link_tx_bytes: BTreeMap<String, u64>,
    /// Link directions whose switch's counters could not be read at the
    /// window's start or end (in neither map above).
    #[serde(default)]
    pub links_unmeasured: Vec<String>,
    /// As in [`NetworkInput`].
    #[serde(default)]
    pub forward_paths_missing: BTreeMap<String, u64>,
    /// As in [`NetworkInput`].
    #[serde(default)]
    pub reverse_paths_missing: BTreeMap<String, u64>,
    /// As in [`NetworkInput`].
    #[serde(default)]
    pub flow_log_lost: BTreeMap<String, u64>,
    /// As in [`NetworkInput`]. Non-empty: the bytes leaving a source port
    /// are spread over several paths further on, so `paths`' utilization is
    /// no path's.
    #[serde(default)]
    pub transit_choices: Option<Vec<String>>,
}

/// One completed, non-warm-up flow: `(size_bytes, slowdown)`.
pub type SlowdownSample = (u64, f64);

/// Slowdowns of the completed non-warm-up flows of a run, in row order.
pub fn slowdown_samples(input: &RunInput, ideal: &IdealModel) -> Vec<SlowdownSample> {
    input
        .flows
        .iter()
        .filter(|f| !f.warmup)
        .filter_map(|f| {
            let fct = match f.status {
                FlowStatus::Ok => f.fct_ns?,
                FlowStatus::Unfinished => input.deadline_ns?.checked_sub(f.start_ns)?,
                FlowStatus::Failed => return None,
            };
            let s = input.ideal_of(f.id, ideal).slowdown(f.size_bytes, fct)?;
            s.is_finite().then_some((f.size_bytes, s))
        })
        .collect()
}

pub use lcmp_stats::{quantile, quantile_sorted, sorted_finite};

fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// The numbers of one run (see [`RunSummary`]) without the network's
/// (the per-link and switch-path fields stay empty).
pub fn summarize_run(input: &RunInput, ideal: &IdealModel) -> RunSummary {
    summarize_run_with_network(input, None, ideal)
}

/// The numbers of one run (see [`RunSummary`]), with what every switch saw
/// if `network` is given.
pub fn summarize_run_with_network(
    input: &RunInput,
    network: Option<&NetworkInput>,
    ideal: &IdealModel,
) -> RunSummary {
    let measured = input.flows.iter().filter(|f| !f.warmup);
    let mut started = 0;
    let mut completed = 0;
    let mut failed = 0;
    let mut unfinished = 0;
    let mut unassigned = 0;
    let mut path_flows = vec![0u64; input.paths.len()];
    let mut path_bytes = vec![0u64; input.paths.len()];
    for f in measured {
        started += 1;
        match (f.status, f.fct_ns) {
            (FlowStatus::Ok, Some(_)) => completed += 1,
            (FlowStatus::Failed, _) => failed += 1,
            _ => unfinished += 1,
        }
        match input
            .flow_paths
            .get(&f.id)
            .filter(|&&i| i < input.paths.len())
        {
            Some(&i) => {
                path_flows[i] += 1;
                path_bytes[i] = path_bytes[i].saturating_add(f.size_bytes);
            }
            None => unassigned += 1,
        }
    }
    let mut per_path: Vec<Vec<f64>> = vec![Vec::new(); input.paths.len()];
    for f in input
        .flows
        .iter()
        .filter(|f| !f.warmup && f.status == FlowStatus::Ok)
    {
        if let (Some(&i), Some(fct)) = (input.flow_paths.get(&f.id), f.fct_ns) {
            let sd = input.ideal_of(f.id, ideal).slowdown(f.size_bytes, fct);
            if let (Some(v), Some(sd)) = (per_path.get_mut(i), sd) {
                v.push(sd);
            }
        }
    }
    let slowdowns: Vec<f64> = slowdown_samples(input, ideal)
        .into_iter()
        .map(|(_, s)| s)
        .collect();
    let sorted = sorted_finite(&slowdowns);
    // Below ideal: completed flows only (an unfinished flow's figure is a
    // lower bound).
    let done: Vec<f64> = input
        .flows
        .iter()
        .filter(|f| !f.warmup && f.status == FlowStatus::Ok)
        .filter_map(|f| {
            input
                .ideal_of(f.id, ideal)
                .slowdown(f.size_bytes, f.fct_ns?)
        })
        .filter(|s| s.is_finite())
        .collect();
    let below = done.iter().filter(|&&s| s < 1.0).count();
    let share_below_ideal = (!done.is_empty()).then(|| below as f64 / done.len() as f64);
    let paths = input
        .paths
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let tx_bytes = input.port_tx_bytes.get(i).copied();
            let utilization =
                tx_bytes.and_then(|b| utilization(b, p.bottleneck_bps, input.window_s));
            PathUse {
                name: p.name.clone(),
                flows: path_flows[i],
                flow_bytes: path_bytes[i],
                tx_bytes,
                utilization,
                median_slowdown: quantile(&per_path[i], 0.5),
            }
        })
        .collect();
    let mut s = RunSummary {
        policy: input.policy.clone(),
        workload: input.workload.clone(),
        load: input.load,
        seed: input.seed,
        flows_started: started,
        flows_completed: completed,
        flows_failed: failed,
        flows_unfinished: unfinished,
        flows_warmup: input.flows.iter().filter(|f| f.warmup).count() as u64,
        median_slowdown: quantile_sorted(&sorted, 0.5),
        p90_slowdown: quantile_sorted(&sorted, 0.9),
        p99_slowdown: quantile_sorted(&sorted, 0.99),
        mean_slowdown: mean(&sorted),
        share_below_ideal,
        calibration_ok: input.calibration_ok,
        calibration_notes: input.calibration_notes.clone(),
        paths,
        flows_unassigned: unassigned,
        transport_counters: input.transport_counters.clone(),
        switch_drops: input.switch_drops.clone(),
        link_utilization: BTreeMap::new(),
        link_tx_bytes: BTreeMap::new(),
        links_unmeasured: Vec::new(),
        forward_paths_missing: BTreeMap::new(),
        reverse_paths_missing: BTreeMap::new(),
        flow_log_lost: BTreeMap::new(),
        transit_choices: None,
    };
    if let Some(n) = network {
        for l in &n.links {
            let name = &l.link.name;
            match l.tx_bytes {
                Some(b) => {
                    s.link_tx_bytes.insert(name.clone(), b);
                    if let Some(u) = utilization(b, l.link.rate_bps, input.window_s) {
                        s.link_utilization.insert(name.clone(), u);
                    }
                }
                None => s.links_unmeasured.push(name.clone()),
            }
        }
        s.forward_paths_missing = n.forward_paths_missing.clone();
        s.reverse_paths_missing = n.reverse_paths_missing.clone();
        s.flow_log_lost = n.flow_log_lost.clone();
        s.transit_choices = n.transit_choices.clone();
    }
    s
}

/// One line on the run's flows without a reconstructed switch path, `None`
/// if there are none: `switch paths missing of 120 flows: forward 3
/// (no_decision@dc3 2, loop@dc6 1), reverse 1 (no_decision@dc8 1)`, and the
/// decision-log records the switches lost, which explain `no_decision`s.
pub fn paths_missing_note(s: &RunSummary) -> Option<String> {
    let counts = |m: &BTreeMap<String, u64>| {
        m.iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let parts: Vec<String> = [
        ("forward", &s.forward_paths_missing),
        ("reverse", &s.reverse_paths_missing),
    ]
    .into_iter()
    .filter(|(_, m)| !m.is_empty())
    .map(|(dir, m)| format!("{dir} {} ({})", m.values().sum::<u64>(), counts(m)))
    .collect();
    if parts.is_empty() {
        return None;
    }
    let mut line = format!(
        "switch paths missing of {} flows: {}",
        s.flows_started,
        parts.join(", ")
    );
    if !s.flow_log_lost.is_empty() {
        line.push_str(&format!(
            "; decision-log records lost: {}",
            counts(&s.flow_log_lost)
        ));
    }
    Some(line)
}

/// Equal-count buckets of flow size, as inclusive `(lo, hi)` ranges.
///
/// Cut `n` equal-count slices of the sorted sizes and take each slice's
/// largest size as an upper bound. Workload CDFs are discrete, so equal
/// sizes can straddle a cut; a size always goes to one bucket (the first
/// whose `hi` is >= it), duplicate bounds merge, and there may be fewer
/// than `n` buckets of unequal counts. `lo` is the smallest size above the
/// previous bucket's `hi`.
pub fn size_buckets(sizes: &[u64], n: usize) -> Vec<(u64, u64)> {
    let mut sorted = sizes.to_vec();
    sorted.sort_unstable();
    let total = sorted.len();
    let n = n.min(total);
    if n == 0 {
        return Vec::new();
    }
    let mut his: Vec<u64> = (0..n).map(|k| sorted[(k + 1) * total / n - 1]).collect();
    his.dedup();
    let mut out = Vec::with_capacity(his.len());
    let mut lo = sorted[0];
    for hi in his {
        out.push((lo, hi));
        let next = sorted.partition_point(|&s| s <= hi);
        lo = sorted.get(next).copied().unwrap_or(hi);
    }
    out
}

/// Index of the bucket of `size`: the first with `hi >= size`; sizes
/// outside the bounds go to the first or last bucket. `None` without buckets.
pub fn bucket_index(bounds: &[(u64, u64)], size: u64) -> Option<usize> {
    if bounds.is_empty() {
        return None;
    }
    Some(
        bounds
            .partition_point(|&(_, hi)| hi < size)
            .min(bounds.len() - 1),
    )
}

/// Slowdown by size bucket of one policy (pooled over seeds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyBuckets {
    /// Policy name.
    pub policy: String,
    /// Median slowdown per bucket; `None` for an empty bucket.
    pub medians: Vec<Option<f64>>,
    /// p99 slowdown per bucket.
    pub p99s: Vec<Option<f64>>,
    /// Completed flows per bucket.
    pub counts: Vec<u64>,
}

/// Slowdown by size bucket for one (workload, load); all policies share
/// `bounds`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BucketTable {
    /// Workload and load of the group.
    pub workload: String,
    pub load: f64,
    /// Inclusive `(lo, hi)` size ranges, bytes ([`size_buckets`] over the
    /// started non-warm-up flows of all policies and seeds: the sizes do
    /// not depend on the policy, so every policy gets the same x axis).
    pub bounds: Vec<(u64, u64)>,
    /// One entry per policy, LCMP first.
    pub per_policy: Vec<PolicyBuckets>,
}

/// Mean over seeds of one path's use under one policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathMean {
    /// [`PathSpec::name`].
    pub name: String,
    /// Mean flows per run.
    pub flows_mean: f64,
    /// Mean payload bytes per run.
    pub flow_bytes_mean: f64,
    /// Mean utilization over the runs where it is known.
    pub utilization_mean: Option<f64>,
}

/// One (workload, load, policy) across seeds. `*_mean` is the mean of the
/// per-run values, `*_ci95` the half-width of the 95 % Student-t interval
/// of that mean (`None` with fewer than two runs with data). Runs without
/// completed flows are left out of the means (`runs_with_data` counts the rest).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Aggregate {
    /// The group.
    pub workload: String,
    pub load: f64,
    pub policy: String,
    /// Runs (seeds) in the group.
    pub runs: u64,
    /// Runs with at least one completed flow.
    pub runs_with_data: u64,
    /// Summed over the runs.
    pub flows_started: u64,
    pub flows_completed: u64,
    /// Mean over runs of the run's median slowdown, and its CI.
    pub median_mean: Option<f64>,
    pub median_ci95: Option<f64>,
    /// Mean over runs of the run's p99 slowdown, and its CI.
    pub p99_mean: Option<f64>,
    pub p99_ci95: Option<f64>,
    /// Mean over runs of [`RunSummary::share_below_ideal`].
    pub share_below_ideal_mean: Option<f64>,
    /// Runs whose calibration passed.
    pub calibration_ok_runs: u64,
    /// Per path (by name, in the first run's order).
    pub paths: Vec<PathMean>,
    /// Per link direction ([`link_name`]): the mean over the runs that
    /// measured it of [`RunSummary::link_utilization`].
    #[serde(default)]
    pub link_utilization: BTreeMap<String, f64>,
}

/// Two-sided 95 % Student-t quantiles (t_{0.975}) for df 1..=30.
const T975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// t_{0.975} for `df` degrees of freedom (normal 1.96 beyond 30); `None` for 0.
pub fn t975(df: usize) -> Option<f64> {
    match df {
        0 => None,
        1..=30 => Some(T975[df - 1]),
        _ => Some(1.96),
    }
}

/// Mean and 95 % CI half-width (`t * s / sqrt(n)`, sample standard
/// deviation) of finite `values`; the half-width is `None` below two values.
pub fn mean_ci95(values: &[f64]) -> (Option<f64>, Option<f64>) {
    let v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    let Some(m) = mean(&v) else {
        return (None, None);
    };
    let n = v.len();
    let ci = t975(n.saturating_sub(1)).map(|t| {
        let var = v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1) as f64;
        t * var.sqrt() / (n as f64).sqrt()
    });
    (Some(m), ci)
}

/// Display order of policies: LCMP first, then the paper's baselines, then
/// anything else by name.
fn policy_rank(policy: &str) -> (usize, String) {
    let p = policy.to_ascii_lowercase();
    let rank = ["lcmp", "ecmp", "wcmp", "ucmp"]
        .iter()
        .position(|k| *k == p)
        .unwrap_or(4);
    (rank, p)
}

/// Sort policy names in display order, deduplicated.
pub fn order_policies<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut v: Vec<String> = names.into_iter().map(str::to_string).collect();
    v.sort_by_key(|p| policy_rank(p));
    v.dedup();
    v
}

/// (workload, load) pairs in first-appearance order.
pub fn groups<'a>(items: impl IntoIterator<Item = (&'a str, f64)>) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = Vec::new();
    for (w, l) in items {
        if !out
            .iter()
            .any(|(ow, ol)| ow == w && ol.to_bits() == l.to_bits())
        {
            out.push((w.to_string(), l));
        }
    }
    out
}

fn same_group(w: &str, l: f64, workload: &str, load: f64) -> bool {
    w == workload && l.to_bits() == load.to_bits()
}

/// Per (workload, load, policy) means and CIs over seeds, ordered by
/// group (first appearance) then policy ([`order_policies`]).
pub fn aggregate(runs: &[RunSummary]) -> Vec<Aggregate> {
    let mut out = Vec::new();
    for (workload, load) in groups(runs.iter().map(|r| (r.workload.as_str(), r.load))) {
        let in_group: Vec<&RunSummary> = runs
            .iter()
            .filter(|r| same_group(&r.workload, r.load, &workload, load))
            .collect();
        for policy in order_policies(in_group.iter().map(|r| r.policy.as_str())) {
            let rs: Vec<&RunSummary> = in_group
                .iter()
                .copied()
                .filter(|r| r.policy == policy)
                .collect();
            let medians: Vec<f64> = rs.iter().filter_map(|r| r.median_slowdown).collect();
            let p99s: Vec<f64> = rs.iter().filter_map(|r| r.p99_slowdown).collect();
            let shares: Vec<f64> = rs.iter().filter_map(|r| r.share_below_ideal).collect();
            let (median_mean, median_ci95) = mean_ci95(&medians);
            let (p99_mean, p99_ci95) = mean_ci95(&p99s);
            out.push(Aggregate {
                workload: workload.clone(),
                load,
                policy,
                runs: rs.len() as u64,
                runs_with_data: medians.len() as u64,
                flows_started: rs.iter().map(|r| r.flows_started).sum(),
                flows_completed: rs.iter().map(|r| r.flows_completed).sum(),
                median_mean,
                median_ci95,
                p99_mean,
                p99_ci95,
                share_below_ideal_mean: mean(&shares),
                calibration_ok_runs: rs.iter().filter(|r| r.calibration_ok).count() as u64,
                paths: path_means(&rs),
                link_utilization: link_means(&rs),
            });
        }
    }
    out
}

fn link_means(runs: &[&RunSummary]) -> BTreeMap<String, f64> {
    let mut per: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for r in runs {
        for (link, &u) in &r.link_utilization {
            per.entry(link).or_default().push(u);
        }
    }
    per.into_iter()
        .filter_map(|(link, v)| Some((link.to_string(), mean(&v)?)))
        .collect()
}

fn path_means(runs: &[&RunSummary]) -> Vec<PathMean> {
    let mut names: Vec<String> = Vec::new();
    for r in runs {
        for p in &r.paths {
            if !names.contains(&p.name) {
                names.push(p.name.clone());
            }
        }
    }
    names
        .into_iter()
        .map(|name| {
            let uses: Vec<&PathUse> = runs
                .iter()
                .filter_map(|r| r.paths.iter().find(|p| p.name == name))
                .collect();
            let n = runs.len().max(1) as f64;
            let utils: Vec<f64> = uses.iter().filter_map(|u| u.utilization).collect();
            PathMean {
                flows_mean: uses.iter().map(|u| u.flows as f64).sum::<f64>() / n,
                flow_bytes_mean: uses.iter().map(|u| u.flow_bytes as f64).sum::<f64>() / n,
                utilization_mean: mean(&utils),
                name,
            }
        })
        .collect()
}

/// LCMP against one baseline for one (workload, load):
/// `(lcmp - baseline) / baseline` of the seed-mean median and p99
/// slowdowns. Negative = LCMP better (-0.36 = 36 % lower).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reduction {
    /// The group.
    pub workload: String,
    pub load: f64,
    /// The policy LCMP is compared with.
    pub baseline: String,
    /// Of the median slowdown (fraction: -0.36 = 36 % lower).
    pub median_reduction: Option<f64>,
    /// Of the p99 slowdown.
    pub p99_reduction: Option<f64>,
}

fn relative(lcmp: Option<f64>, base: Option<f64>) -> Option<f64> {
    let (l, b) = (lcmp?, base?);
    let r = (l - b) / b;
    (b != 0.0 && r.is_finite()).then_some(r)
}

/// LCMP vs every other policy present, per (workload, load) with an LCMP
/// aggregate.
pub fn reductions(aggs: &[Aggregate]) -> Vec<Reduction> {
    let mut out = Vec::new();
    for lcmp in aggs
        .iter()
        .filter(|a| a.policy.eq_ignore_ascii_case("lcmp"))
    {
        for base in aggs.iter().filter(|a| {
            !a.policy.eq_ignore_ascii_case("lcmp")
                && same_group(&a.workload, a.load, &lcmp.workload, lcmp.load)
        }) {
            out.push(Reduction {
                workload: lcmp.workload.clone(),
                load: lcmp.load,
                baseline: base.policy.clone(),
                median_reduction: relative(lcmp.median_mean, base.median_mean),
                p99_reduction: relative(lcmp.p99_mean, base.p99_mean),
            });
        }
    }
    out
}

/// Slowdown by size bucket per (workload, load), pooled over seeds.
pub fn bucket_tables(inputs: &[RunInput], ideal: &IdealModel, n: usize) -> Vec<BucketTable> {
    let mut out = Vec::new();
    for (workload, load) in groups(inputs.iter().map(|r| (r.workload.as_str(), r.load))) {
        let in_group: Vec<&RunInput> = inputs
            .iter()
            .filter(|r| same_group(&r.workload, r.load, &workload, load))
            .collect();
        let sizes: Vec<u64> = in_group
            .iter()
            .flat_map(|r| r.flows.iter().filter(|f| !f.warmup).map(|f| f.size_bytes))
            .collect();
        let bounds = size_buckets(&sizes, n);
        let per_policy = order_policies(in_group.iter().map(|r| r.policy.as_str()))
            .into_iter()
            .map(|policy| {
                let mut per: Vec<Vec<f64>> = vec![Vec::new(); bounds.len()];
                for r in in_group.iter().filter(|r| r.policy == policy) {
                    for (size, s) in slowdown_samples(r, ideal) {
                        if let Some(b) = bucket_index(&bounds, size) {
                            per[b].push(s);
                        }
                    }
                }
                let sorted: Vec<Vec<f64>> = per.iter().map(|v| sorted_finite(v)).collect();
                PolicyBuckets {
                    medians: sorted.iter().map(|v| quantile_sorted(v, 0.5)).collect(),
                    p99s: sorted.iter().map(|v| quantile_sorted(v, 0.99)).collect(),
                    counts: sorted.iter().map(|v| v.len() as u64).collect(),
                    policy,
                }
            })
            .collect();
        out.push(BucketTable {
            workload,
            load,
            bounds,
            per_policy,
        });
    }
    out
}

/// The content of `summary.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// The experiment configuration, echoed as the runner gives it.
    pub experiment: serde_json::Value,
    /// The ideal-FCT model every slowdown was computed against.
    pub ideal: IdealModel,
    /// One per run, in input order.
    pub runs: Vec<RunSummary>,
    /// Per (workload, load, policy) over seeds.
    pub aggregates: Vec<Aggregate>,
    /// LCMP vs each baseline per (workload, load).
    pub reductions: Vec<Reduction>,
    /// Slowdown by flow size per (workload, load).
    pub buckets: Vec<BucketTable>,
    /// The link directions the runs measured, in topology order (see
    /// [`NetworkInput::links`]); empty when no run's network is known.
    #[serde(default)]
    pub links: Vec<LinkSpec>,
}

/// Everything: per-run summaries, aggregates, reductions and
/// [`DEFAULT_BUCKETS`] size buckets, without the network's figures.
pub fn build_summary(
    experiment: serde_json::Value,
    inputs: &[RunInput],
    ideal: &IdealModel,
) -> Summary {
    build_summary_with_network(experiment, inputs, &[], ideal)
}

/// [`build_summary`] with what every switch saw: `networks[i]` belongs to
/// `inputs[i]`; runs beyond the end of `networks` have no network figures.
pub fn build_summary_with_network(
    experiment: serde_json::Value,
    inputs: &[RunInput],
    networks: &[NetworkInput],
    ideal: &IdealModel,
) -> Summary {
    let runs: Vec<RunSummary> = inputs
        .iter()
        .enumerate()
        .map(|(i, input)| summarize_run_with_network(input, networks.get(i), ideal))
        .collect();
    let aggregates = aggregate(&runs);
    let reductions = reductions(&aggregates);
    let mut links: Vec<LinkSpec> = Vec::new();
    for l in networks.iter().take(inputs.len()).flat_map(|n| &n.links) {
        if !links.iter().any(|k| k.name == l.link.name) {
            links.push(l.link.clone());
        }
    }
    Summary {
        experiment,
        ideal: ideal.clone(),
        runs,
        aggregates,
        reductions,
        buckets: bucket_tables(inputs, ideal, DEFAULT_BUCKETS),
        links,
    }
}

/// The switches (names, first-seen order) that, in any run, choose among
/// several next hops after the source ([`RunSummary::transit_choices`]):
/// where there are any, per-path figures (the bytes of a source port over
/// one path's bottleneck) describe no path.
pub fn transit_choices<'a>(runs: impl IntoIterator<Item = &'a RunSummary>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in runs
        .into_iter()
        .filter_map(|r| r.transit_choices.as_ref())
        .flatten()
    {
        if !out.contains(s) {
            out.push(s.clone());
        }
    }
    out
}

/// Pooled slowdowns per policy for one (workload, load), sorted ascending,
/// policies in display order (for CDFs).
pub fn pooled_slowdowns(
    inputs: &[RunInput],
    ideal: &IdealModel,
    workload: &str,
    load: f64,
) -> Vec<(String, Vec<f64>)> {
    let in_group: Vec<&RunInput> = inputs
        .iter()
        .filter(|r| same_group(&r.workload, r.load, workload, load))
        .collect();
    order_policies(in_group.iter().map(|r| r.policy.as_str()))
        .into_iter()
        .map(|policy| {
            let all: Vec<f64> = in_group
                .iter()
                .filter(|r| r.policy == policy)
                .flat_map(|r| slowdown_samples(r, ideal).into_iter().map(|(_, s)| s))
                .collect();
            (policy, sorted_finite(&all))
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    fn close_opt(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| close(a, b))
    }

    pub(crate) fn flow(
        id: u64,
        size: u64,
        fct_ns: Option<u64>,
        min_rtt_us: Option<u64>,
    ) -> FlowRecord {
        FlowRecord {
            id,
            sender: "h1".into(),
            receiver: "h2".into(),
            src: "10.1.0.2:40000".into(),
            dst: "10.2.0.2:5001".into(),
            size_bytes: size,
            start_ns: id * 1000,
            fct_ns,
            min_rtt_us,
            status: if fct_ns.is_some() {
                FlowStatus::Ok
            } else {
                FlowStatus::Unfinished
            },
            error: String::new(),
            warmup: false,
            path: None,
            switch_path: None,
            reverse_switch_path: None,
        }
    }

    pub(crate) fn paths() -> Vec<PathSpec> {
        vec![
            PathSpec {
                name: "dc2".into(),
                port: 1,
                rtt_us: 20_000,
                bottleneck_bps: 100_000_000,
            },
            PathSpec {
                name: "dc3".into(),
                port: 2,
                rtt_us: 100_000,
                bottleneck_bps: 200_000_000,
            },
        ]
    }

    /// base 20 ms, 100 Mbit/s: a segment takes 1514 * 8 / 1e8 s = 121.12 us.
    pub(crate) fn ideal() -> IdealModel {
        IdealModel::new(20_000_000, 100_000_000)
    }

    #[test]
    fn ideal_fct_by_hand() {
        let m = ideal();
        // 10 segments: 40 ms + 10 * 121_120 ns.
        assert!(close_opt(m.ideal_fct_ns(14_480), 41_211_200.0));
        // 14481 bytes need an 11th segment.
        assert!(close_opt(m.ideal_fct_ns(14_481), 41_332_320.0));
        assert!(close_opt(m.ideal_fct_ns(1), 40_121_120.0));
        assert!(close_opt(m.ideal_fct_ns(0), 40_000_000.0));
        assert!(close_opt(m.slowdown(14_480, 82_422_400), 2.0));
        let d = IdealModel::default();
        assert_eq!(
            (d.rtts, d.mss_bytes, d.wire_bytes_per_segment),
            (2.0, 1448, 1514)
        );
        let zero_rate = IdealModel::new(20_000_000, 0);
        assert_eq!(zero_rate.ideal_fct_ns(100), None);
        assert_eq!(IdealModel::new(0, 1).ideal_fct_ns(0), None);
    }

    #[test]
    fn ideal_for_min_delay_path() {
        let m = IdealModel::for_min_delay_path(&paths(), None).unwrap();
        assert_eq!((m.base_rtt_ns, m.bottleneck_bps), (20_000_000, 100_000_000));
        let m = IdealModel::for_min_delay_path(&paths(), Some(20_300_000)).unwrap();
        assert_eq!(m.base_rtt_ns, 20_300_000);
        assert_eq!(IdealModel::for_min_delay_path(&[], None), None);
    }

    #[test]
    fn unfinished_flows_count_at_their_lower_bound() {
        const I: u64 = 41_211_200; // ideal of 14480 bytes
        let mut input = run(
            "ecmp",
            1,
            &[
                (14_480, I / 2),
                (14_480, I),
                (14_480, 2 * I),
                (14_480, 4 * I),
            ],
        );
        // Flow 12 starts at 12 us and is still running 8 ideals later.
        input.flows.push(flow(12, 14_480, None, None));
        input.deadline_ns = Some(12_000 + 8 * I);
        let s = summarize_run(&input, &ideal());
        assert_eq!((s.flows_completed, s.flows_unfinished), (4, 1));
        // Slowdowns 0.5, 1, 2, 4 and >= 8.
        assert!(close_opt(s.median_slowdown, 2.0));
        assert!(close_opt(s.p99_slowdown, 7.84));
        // Below ideal counts completed flows only.
        assert!(close_opt(s.share_below_ideal, 0.25));
    }

    #[test]
    fn quantiles_type7_by_hand() {
        let v = [4.0, 1.0, 3.0, 2.0];
        assert!(close_opt(quantile(&v, 0.5), 2.5));
        assert!(close_opt(quantile(&v, 0.9), 3.7));
        assert!(close_opt(quantile(&v, 0.99), 3.97));
        assert!(close_opt(quantile(&v, 0.0), 1.0));
        assert!(close_opt(quantile(&v, 1.0), 4.0));
        assert!(close_opt(
            quantile(&[10.0, 20.0, 30.0, 40.0, 50.0], 0.9),
            46.0
        ));
        assert!(close_opt(quantile(&[7.0], 0.99), 7.0));
        assert_eq!(quantile(&[], 0.5), None);
        assert!(close_opt(quantile(&[f64::NAN, 1.0, 3.0], 0.5), 2.0));
    }

    #[test]
    fn buckets_equal_count_and_ties() {
        let sizes: Vec<u64> = (1..=10).collect();
        assert_eq!(
            size_buckets(&sizes, 5),
            vec![(1, 2), (3, 4), (5, 6), (7, 8), (9, 10)]
        );
        // Six flows of size 1 straddle two cuts: those buckets merge.
        let tied = [5, 1, 1, 1, 1, 1, 1, 2, 3, 4];
        let b = size_buckets(&tied, 5);
        assert_eq!(b, vec![(1, 1), (2, 3), (4, 5)]);
        assert_eq!(bucket_index(&b, 1), Some(0));
        assert_eq!(bucket_index(&b, 2), Some(1));
        assert_eq!(bucket_index(&b, 3), Some(1));
        assert_eq!(bucket_index(&b, 5), Some(2));
        assert_eq!(bucket_index(&b, 99), Some(2));
        assert_eq!(bucket_index(&[], 1), None);
        // More buckets than flows: one per flow.
        assert_eq!(size_buckets(&[3, 1], 20), vec![(1, 1), (3, 3)]);
        assert!(size_buckets(&[], 20).is_empty());
    }

    pub(crate) fn run(policy: &str, seed: u64, fcts: &[(u64, u64)]) -> RunInput {
        // Each flow is 14480 bytes (ideal 41.2112 ms) unless given otherwise.
        let flows = fcts
            .iter()
            .enumerate()
            .map(|(i, &(size, fct))| flow(i as u64, size, Some(fct), Some(21_000)))
            .collect();
        RunInput {
            policy: policy.into(),
            workload: "websearch".into(),
            load: 0.3,
            seed,
            flows,
            paths: paths(),
            port_tx_bytes: vec![1_250_000, 0],
            window_s: 1.0,
            calibration_ok: true,
            calibration_notes: vec![],
            // The source switch put every flow on dc2.
            flow_paths: (0..fcts.len() as u64).map(|id| (id, 0)).collect(),
            deadline_ns: None,
            transport_counters: BTreeMap::new(),
            switch_drops: BTreeMap::new(),
            flow_ideals: HashMap::new(),
        }
    }

    #[test]
    fn a_flows_own_ideal_is_what_its_slowdown_is_against() {
        const I: u64 = 41_211_200; // the run's ideal of 14480 bytes
                                   // Flow 1 has its own: 1 x 10 ms + 1000 bytes at 1 Gbit/s (8 us) =
                                   // 10.008 ms, so its 20.016 ms is a slowdown of 2 (against the
                                   // run's ideal of 1000 bytes, 40.12112 ms, it would be 0.4989).
        let mut input = run("lcmp", 1, &[(14_480, 3 * I), (1000, 20_016_000)]);
        let own = IdealModel {
            rtts: 1.0,
            mss_bytes: 1,
            wire_bytes_per_segment: 1,
            ..IdealModel::new(10_000_000, 1_000_000_000)
        };
        input.flow_ideals.insert(1, own.clone());
        assert_eq!(input.ideal_of(1, &ideal()), &own);
        assert_eq!(input.ideal_of(0, &ideal()), &ideal());
        let samples = slowdown_samples(&input, &ideal());
        assert_eq!(samples.len(), 2);
        assert!(close(samples[0].1, 3.0) && close(samples[1].1, 2.0));
        let s = summarize_run(&input, &ideal());
        assert!(close_opt(s.median_slowdown, 2.5));
        assert_eq!(s.share_below_ideal, Some(0.0));
        // Both on dc2: its median is theirs.
        assert!(close_opt(s.paths[0].median_slowdown, 2.5));
        // The size buckets and the CDFs take the same slowdowns.
        let summary = build_summary(serde_json::Value::Null, &[input.clone()], &ideal());
        // (1000 bytes first.)
        let medians = &summary.buckets[0].per_policy[0].medians;
        assert!(
            close_opt(medians[0], 2.0) && close_opt(medians[1], 3.0),
            "{medians:?}"
        );
        let pooled = pooled_slowdowns(&[input], &ideal(), "websearch", 0.3);
        assert!(close(pooled[0].1[0], 2.0) && close(pooled[0].1[1], 3.0));
    }

    #[test]
    fn run_summary_by_hand() {
        const I: u64 = 41_211_200; // ideal of 14480 bytes
        let mut input = run(
            "lcmp",
            1,
            &[
                (14_480, I / 2),
                (14_480, I),
                (14_480, 2 * I),
                (14_480, 4 * I),
            ],
        );
        let mut warm = flow(10, 1_000_000, Some(1), Some(21_000));
        warm.warmup = true;
        input.flows.push(warm);
        let mut failed = flow(11, 500, None, None);
        failed.status = FlowStatus::Failed;
        input.flows.push(failed);
        input.flows.push(flow(12, 700, None, Some(100_000))); // unfinished, on dc3
        input.flows.push(flow(13, 900, None, Some(60_000))); // unfinished, no path
                                                             // The switch's log: flows 0-3 via dc2, 12 via dc3, 13 unknown.
        input.flow_paths = [(0, 0), (1, 0), (2, 0), (3, 0), (12, 1)].into();
        let s = summarize_run(&input, &ideal());
        assert_eq!(s.flows_started, 7);
        assert_eq!(s.flows_completed, 4);
        assert_eq!(s.flows_failed, 1);
        assert_eq!(s.flows_unfinished, 2);
        assert_eq!(s.flows_warmup, 1);
        // Slowdowns 0.5, 1, 2, 4.
        assert!(close_opt(s.median_slowdown, 1.5));
        assert!(close_opt(s.p90_slowdown, 3.4));
        assert!(close_opt(s.p99_slowdown, 3.94));
        assert!(close_opt(s.mean_slowdown, 1.875));
        assert!(close_opt(s.share_below_ideal, 0.25));
        assert_eq!(s.paths[0].flows, 4);
        assert_eq!(s.paths[0].flow_bytes, 4 * 14_480);
        assert_eq!(s.paths[1].flows, 1);
        assert_eq!(s.paths[1].flow_bytes, 700);
        assert_eq!(s.flows_unassigned, 2);
        assert!(close_opt(s.paths[0].median_slowdown, 1.5));
        assert_eq!(s.paths[1].median_slowdown, None);
        // 1.25 MB in 1 s on 100 Mbit/s = 10 Mbit/s = 0.1.
        assert_eq!(s.paths[0].tx_bytes, Some(1_250_000));
        assert!(close_opt(s.paths[0].utilization, 0.1));
        assert!(close_opt(s.paths[1].utilization, 0.0));
    }

    #[test]
    fn run_without_completed_flows() {
        let mut input = run("ecmp", 1, &[]);
        input.flows.push(flow(1, 100, None, None));
        input.port_tx_bytes.clear();
        input.window_s = 0.0;
        let s = summarize_run(&input, &ideal());
        assert_eq!((s.flows_started, s.flows_completed), (1, 0));
        assert_eq!(s.median_slowdown, None);
        assert_eq!(s.p99_slowdown, None);
        assert_eq!(s.mean_slowdown, None);
        assert_eq!(s.share_below_ideal, None);
        assert_eq!(s.paths[0].tx_bytes, None);
        assert_eq!(s.paths[0].utilization, None);
        let sum = build_summary(serde_json::json!({}), &[input], &ideal());
        assert_eq!(sum.aggregates[0].median_mean, None);
        assert_eq!(sum.aggregates[0].runs_with_data, 0);
        assert!(sum.reductions.is_empty());
        let json = serde_json::to_value(&sum).unwrap();
        assert!(json["runs"][0]["median_slowdown"].is_null());
    }

    #[test]
    fn t_interval_by_hand() {
        assert_eq!(t975(0), None);
        assert_eq!(t975(1), Some(12.706));
        assert_eq!(t975(30), Some(2.042));
        assert_eq!(t975(31), Some(1.96));
        // mean 2, s = 1, n = 3: 4.303 / sqrt(3) = 2.484338...
        let (m, ci) = mean_ci95(&[1.0, 2.0, 3.0]);
        assert!(close_opt(m, 2.0));
        assert!((ci.unwrap() - 2.484_338).abs() < 1e-6);
        assert_eq!(mean_ci95(&[5.0]), (Some(5.0), None));
        assert_eq!(mean_ci95(&[]), (None, None));
        // Identical values: zero width.
        assert_eq!(mean_ci95(&[2.0, 2.0]), (Some(2.0), Some(0.0)));
    }

    fn summary_run(policy: &str, seed: u64, median: f64, p99: f64) -> RunSummary {
        RunSummary {
            policy: policy.into(),
            workload: "websearch".into(),
            load: 0.3,
            seed,
            flows_started: 10,
            flows_completed: 9,
            flows_failed: 1,
            flows_unfinished: 0,
            flows_warmup: 2,
            median_slowdown: Some(median),
            p90_slowdown: Some(p99),
            p99_slowdown: Some(p99),
            mean_slowdown: Some(median),
            share_below_ideal: Some(0.0),
            calibration_ok: seed != 2,
            calibration_notes: vec![],
            paths: vec![PathUse {
                name: "dc2".into(),
                flows: seed * 2,
                flow_bytes: 100,
                tx_bytes: Some(10),
                utilization: Some(0.1 * seed as f64),
                median_slowdown: Some(median),
            }],
            flows_unassigned: 0,
            transport_counters: BTreeMap::new(),
            switch_drops: BTreeMap::new(),
            link_utilization: BTreeMap::new(),
            link_tx_bytes: BTreeMap::new(),
            links_unmeasured: Vec::new(),
            forward_paths_missing: BTreeMap::new(),
            reverse_paths_missing: BTreeMap::new(),
            flow_log_lost: BTreeMap::new(),
            transit_choices: None,
        }
    }

    #[test]
    fn aggregates_and_reductions_by_hand() {
        let runs = vec![
            summary_run("ucmp", 1, 8.0, 40.0),
            summary_run("lcmp", 1, 1.0, 10.0),
            summary_run("ecmp", 1, 2.0, 20.0),
            summary_run("lcmp", 2, 3.0, 14.0),
            summary_run("ecmp", 2, 4.0, 30.0),
        ];
        let aggs = aggregate(&runs);
        let names: Vec<&str> = aggs.iter().map(|a| a.policy.as_str()).collect();
        assert_eq!(names, ["lcmp", "ecmp", "ucmp"]);
        let l = &aggs[0];
        assert_eq!((l.runs, l.runs_with_data, l.calibration_ok_runs), (2, 2, 1));
        assert_eq!((l.flows_started, l.flows_completed), (20, 18));
        assert!(close_opt(l.median_mean, 2.0));
        // s = sqrt(2), n = 2: 12.706 * sqrt(2) / sqrt(2) = 12.706.
        assert!(close_opt(l.median_ci95, 12.706));
        assert!(close_opt(l.p99_mean, 12.0));
        assert!(close_opt(l.p99_ci95, 2.0 * 12.706));
        assert!(close(l.paths[0].flows_mean, 3.0));
        assert!(close_opt(l.paths[0].utilization_mean, 0.15));
        assert_eq!(aggs[2].median_ci95, None);
        let red = reductions(&aggs);
        assert_eq!(red.len(), 2);
        // vs ECMP: median (2 - 3) / 3, p99 (12 - 25) / 25.
        assert_eq!(red[0].baseline, "ecmp");
        assert!(close_opt(red[0].median_reduction, -1.0 / 3.0));
        assert!(close_opt(red[0].p99_reduction, -0.52));
        // vs UCMP: (2 - 8) / 8, (12 - 40) / 40.
        assert!(close_opt(red[1].median_reduction, -0.75));
        assert!(close_opt(red[1].p99_reduction, -0.7));
    }

    #[test]
    fn bucket_tables_share_bounds_across_policies() {
        const I: u64 = 41_211_200;
        // Sizes 1448 (ideal 40.12112 ms) and 14480 (41.2112 ms).
        let small = 40_121_120;
        let a = run("lcmp", 1, &[(1448, small), (1448, 3 * small), (14_480, I)]);
        let b = run(
            "ecmp",
            1,
            &[(1448, 2 * small), (14_480, 5 * I), (14_480, 7 * I)],
        );
        let tables = bucket_tables(&[a, b], &ideal(), 2);
        assert_eq!(tables.len(), 1);
        let t = &tables[0];
        // Pooled sizes: 1448 x3, 14480 x3 -> two buckets.
        assert_eq!(t.bounds, vec![(1448, 1448), (14_480, 14_480)]);
        assert_eq!(t.per_policy[0].policy, "lcmp");
        assert_eq!(t.per_policy[0].counts, vec![2, 1]);
        assert!(close_opt(t.per_policy[0].medians[0], 2.0));
        assert!(close_opt(t.per_policy[0].p99s[0], 2.98));
        assert!(close_opt(t.per_policy[0].medians[1], 1.0));
        assert_eq!(t.per_policy[1].counts, vec![1, 2]);
        assert!(close_opt(t.per_policy[1].medians[1], 6.0));
        assert!(close_opt(t.per_policy[1].p99s[1], 6.98));
    }

    fn load(from: &str, to: &str, rate_bps: u64, tx_bytes: Option<u64>) -> LinkLoad {
        LinkLoad {
            link: LinkSpec {
                name: link_name(from, to),
                from: from.into(),
                to: to.into(),
                rate_bps,
            },
            tx_bytes,
        }
    }

    #[test]
    fn network_figures_by_hand() {
        let mut a = run("lcmp", 1, &[(1448, 1), (1448, 2), (1448, 3), (1448, 4)]);
        a.window_s = 2.0;
        let mut b = run("lcmp", 2, &[(1448, 1)]);
        b.window_s = 2.0;
        let na = NetworkInput {
            links: vec![
                // 20 Mbit in 2 s at 10 Mbit/s: 1.0; 2 Mbit: 0.1.
                load("a", "b", 10_000_000, Some(2_500_000)),
                load("b", "a", 10_000_000, Some(250_000)),
                load("b", "c", 1_000_000, None),
            ],
            forward_paths_missing: [("no_decision@dc3".into(), 2), ("loop@dc6".into(), 1)].into(),
            reverse_paths_missing: [("no_decision@dc8".into(), 1)].into(),
            flow_log_lost: [("dc3".into(), 5)].into(),
            transit_choices: Some(vec!["dc3".into(), "dc6".into()]),
        };
        let nb = NetworkInput {
            links: vec![
                // 10 Mbit in 2 s at 10 Mbit/s: 0.5.
                load("a", "b", 10_000_000, Some(1_250_000)),
                load("b", "a", 10_000_000, None),
                load("b", "c", 1_000_000, Some(0)),
                load("c", "b", 1_000_000, Some(125_000)),
            ],
            transit_choices: Some(vec!["dc6".into(), "dc7".into()]),
            ..NetworkInput::default()
        };
        let s =
            build_summary_with_network(serde_json::json!({}), &[a.clone(), b], &[na, nb], &ideal());
        let r = &s.runs[0];
        assert_eq!(
            r.link_utilization.clone().into_iter().collect::<Vec<_>>(),
            [("a->b".to_string(), 1.0), ("b->a".to_string(), 0.1)]
        );
        assert_eq!(r.link_tx_bytes["b->a"], 250_000);
        assert_eq!(r.links_unmeasured, ["b->c"]);
        assert_eq!(
            paths_missing_note(r).as_deref(),
            Some(
                "switch paths missing of 4 flows: forward 3 (loop@dc6 1, no_decision@dc3 2), \
                 reverse 1 (no_decision@dc8 1); decision-log records lost: dc3 5"
            )
        );
        // Run 2: 0.5, 0, and c->b 1 Mbit over 2 Mbit: 0.5; nothing missing.
        assert_eq!(s.runs[1].link_utilization["c->b"], 0.5);
        assert_eq!(s.runs[1].link_utilization["b->c"], 0.0);
        assert_eq!(paths_missing_note(&s.runs[1]), None);
        // Per policy: a->b (1.0 + 0.5) / 2, b->a measured once.
        let agg = &s.aggregates[0].link_utilization;
        assert_eq!(agg["a->b"], 0.75);
        assert_eq!(agg["b->a"], 0.1);
        assert_eq!(agg["b->c"], 0.0);
        let names: Vec<&str> = s.links.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["a->b", "b->a", "b->c", "c->b"]);
        assert_eq!(transit_choices(&s.runs), ["dc3", "dc6", "dc7"]);
        // Without the network: nothing of it, and nothing claimed.
        let plain = build_summary(serde_json::json!({}), &[a], &ideal());
        assert!(plain.links.is_empty());
        assert!(plain.runs[0].link_utilization.is_empty());
        assert_eq!(plain.runs[0].transit_choices, None);
        assert_eq!(paths_missing_note(&plain.runs[0]), None);
        assert!(transit_choices(&plain.runs).is_empty());
        // A summary.json from before the network fields still loads.
        let mut v = serde_json::to_value(&plain).unwrap();
        v.as_object_mut().unwrap().remove("links");
        let run = v["runs"][0].as_object_mut().unwrap();
        for k in [
            "link_utilization",
            "link_tx_bytes",
            "links_unmeasured",
            "forward_paths_missing",
            "reverse_paths_missing",
            "flow_log_lost",
            "transit_choices",
        ] {
            run.remove(k).unwrap();
        }
        v["aggregates"][0]
            .as_object_mut()
            .unwrap()
            .remove("link_utilization")
            .unwrap();
        assert_eq!(serde_json::from_value::<Summary>(v).unwrap(), plain);
        assert_eq!(utilization(1, 0, 1.0), None);
        assert_eq!(utilization(1, 8, 0.0), None);
    }

    #[test]
    fn summary_json_has_runs_with_contract_fields() {
        let inputs = vec![run("lcmp", 1, &[(1448, 50_000_000)]), run("ecmp", 1, &[])];
        let s = build_summary(
            serde_json::json!({"topology": "2dc-3path"}),
            &inputs,
            &ideal(),
        );
        let text = serde_json::to_string_pretty(&s).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let runs = v["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 2);
        for r in runs {
            for key in [
                "policy",
                "workload",
                "load",
                "seed",
                "flows_started",
                "flows_completed",
                "median_slowdown",
                "p99_slowdown",
                "calibration_ok",
            ] {
                assert!(r.get(key).is_some(), "runs[] lacks {key}");
            }
        }
        assert_eq!(runs[0]["policy"], "lcmp");
        assert_eq!(runs[1]["median_slowdown"], serde_json::Value::Null);
        assert_eq!(v["experiment"]["topology"], "2dc-3path");
        // Round trip.
        let back: Summary = serde_json::from_str(&text).unwrap();
        assert_eq!(serde_json::to_value(&back).unwrap(), v);
    }
}

//! The rotor flow experiment's results (`lcmp-testbed rotor-experiment`
//! with `transport = "ndp"`): NDP hosts, flows of a workload's sizes with
//! Poisson arrivals at loads of the server link rate, ToRs trimming at K
//! packets per next-hop queue; one run per (design, pattern, load, K).
//!
//! The runner hands over a [`FlowRunInput`] per run (raw measurements);
//! [`FlowRunResult::from_input`] makes the figures the Mars paper reports:
//!
//! - server downlink utilization: unique payload bytes the hosts received
//!   in the window x 8 / (hosts x host rate x window), the paper's
//!   "effective throughput";
//! - delivered fraction: utilization / load, the share of the configured
//!   offered load that arrived (1 when the network carries everything);
//! - per class (short < [`SHORT_FLOW_BYTES`], long from there) the median
//!   and p99 FCT of the flows that arrived in the window. A flow that had
//!   not finished by the run's end ranks above every finished one (it is
//!   slower); a quantile whose rank falls on such a flow is unknown
//!   (`None`, "unfinished" in the report), never computed from the
//!   finished flows alone;
//! - ToR buffer occupancy quantiles and CDF over every ToR's samples.
//!
//! [`write_flow_results`] writes `summary.json`, `report.md` and the
//! plots; [`flow_problems`] checks an experiment file's flow fields.

use std::collections::BTreeMap;
use std::path::Path;

use lcmp_stats::{quantile_sorted, sorted_finite};
use lcmp_topology::rotor::{self, DegreeChoice};
use serde::{Deserialize, Serialize};

use super::experiment::{paper, Pattern, RotorExperimentConfig};
use super::{Design, RotorParams};
use crate::format::distinct;
use crate::plots::write_line_chart;

mod plots;
mod report;

pub use plots::flow_charts;
use report::fct_cell;
pub use report::{flow_report, flow_table};

/// Short flows are smaller than this (100 KB, the paper's and opera-sim's
/// split); long flows are at least this.
pub const SHORT_FLOW_BYTES: u64 = 100_000;

/// Points of a run's occupancy CDF: every percentile, 0 to 100.
pub const OCCUPANCY_CDF_POINTS: usize = 101;

/// One flow that arrived in the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowOutcome {
    /// Bytes.
    pub size: u64,
    /// When it arrived (its sender started), ns.
    pub arrival_ns: u64,
    /// Arrival to the receiver holding every byte, ns; `None`: not
    /// finished by the run's end.
    pub fct_ns: Option<u64>,
}

/// What the runner measured in one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowRunInput {
    /// Design.
    pub design: String,
    /// Pattern.
    pub pattern: String,
    /// Routing in force.
    pub routing: String,
    /// Matchings (degree of the emulated graph).
    pub matchings: usize,
    /// Offered load, a fraction of the host link rate per host.
    pub load: f64,
    /// K, packets per next-hop data queue.
    pub buffer_pkts: u32,
    /// Hosts (all of them send and receive).
    pub hosts: u32,
    /// The host link rate, bit/s.
    pub host_rate_bps: u64,
    /// The measurement window `[start, end)`, ns.
    pub window_ns: (u64, u64),
    /// Every flow that arrived in the window (others are ignored).
    pub flows: Vec<FlowOutcome>,
    /// Payload bytes the hosts' receivers took in during the window,
    /// counted once (no retransmitted duplicates).
    pub delivered_bytes: u64,
    /// Every frame byte the ToRs handed to host links in the window
    /// (headers, trimmed headers, control packets, duplicates).
    pub downlink_bytes: u64,
    /// ToR buffer occupancy samples, bytes: one per ToR per sample instant
    /// in the window.
    pub occupancy: Vec<u64>,
    /// Counter changes over the window summed over the ToRs, by counter.
    pub tor_counters: BTreeMap<String, f64>,
    /// The same over the rotors.
    pub rotor_counters: BTreeMap<String, f64>,
}

/// One run's figures (one per design, pattern, load and K).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowRunResult {
    /// Design.
    pub design: String,
    /// Pattern.
    pub pattern: String,
    /// Routing in force.
    pub routing: String,
    /// Matchings (degree of the emulated graph).
    pub matchings: usize,
    /// Offered load, a fraction of the host link rate per host.
    pub load: f64,
    /// K, packets per next-hop data queue.
    pub buffer_pkts: u32,
    /// Hosts.
    pub hosts: u32,
    /// Host link rate, bit/s.
    pub host_rate_bps: u64,
    /// Window length, s.
    pub window_s: f64,
    /// Unique payload bytes received in the window.
    pub delivered_bytes: u64,
    /// delivered x 8 / (hosts x host rate x window).
    pub downlink_utilization: f64,
    /// downlink_utilization / load.
    pub delivered_fraction: f64,
    /// The bytes of the flows that arrived in the window x 8 / (hosts x
    /// host rate x window): the load the draw actually offered (heavy
    /// tails make it wander from `load`).
    pub arrived_load: f64,
    /// Every frame byte handed to host links, same normalization
    /// (utilization plus headers, control packets and duplicates).
    pub downlink_frame_utilization: f64,
    /// Short flows that arrived.
    pub short_arrived: usize,
    /// Short flows that finished.
    pub short_finished: usize,
    /// Median FCT of short flows, us (`None`: no short flow, or the rank
    /// falls on an unfinished one).
    pub p50_fct_short_us: Option<f64>,
    /// 99th percentile FCT of short flows, us (same `None`).
    pub p99_fct_short_us: Option<f64>,
    /// Long flows that arrived.
    pub long_arrived: usize,
    /// Long flows that finished.
    pub long_finished: usize,
    /// Median FCT of long flows, us.
    pub p50_fct_long_us: Option<f64>,
    /// 99th percentile FCT of long flows, us.
    pub p99_fct_long_us: Option<f64>,
    /// Occupancy samples.
    pub occupancy_samples: usize,
    /// Median ToR buffer occupancy, bytes.
    pub occupancy_p50_bytes: Option<f64>,
    /// 90th percentile, bytes.
    pub occupancy_p90_bytes: Option<f64>,
    /// 99th percentile, bytes.
    pub occupancy_p99_bytes: Option<f64>,
    /// Largest sample, bytes.
    pub occupancy_max_bytes: Option<u64>,
    /// The occupancy CDF: (bytes, fraction of samples at or below) at
    /// every percentile (empty: no samples).
    pub occupancy_cdf: Vec<(f64, f64)>,
    /// Counter changes over the window summed over the ToRs.
    pub tor_counters: BTreeMap<String, f64>,
    /// The same over the rotors.
    pub rotor_counters: BTreeMap<String, f64>,
}

/// Quantile `p` of a class of `arrived` flows of which those in
/// `finished` (ascending FCTs) finished, the unfinished ranking above
/// every finished one; `None` if the class is empty or the rank needs an
/// unfinished flow.
fn censored_quantile(finished: &[f64], arrived: usize, p: f64) -> Option<f64> {
    if arrived == 0 || finished.len() > arrived {
        return None;
    }
    // lcmp_stats's type 7 interpolates between ranks floor(h) and the one
    // above, h = (n - 1) p; it needs the upper one only when h is not
    // whole.
    let h = (arrived - 1) as f64 * p;
    let needed = if h.fract() == 0.0 {
        h as usize
    } else {
        h as usize + 1
    };
    if needed >= finished.len() {
        return None;
    }
    // Padded to the class's size: the ranks used are all finished ones,
    // so the padding only sets n (f64::MAX, not infinity: a zero weight
    // times it stays zero).
    let mut all = finished.to_vec();
    all.resize(arrived, f64::MAX);
    quantile_sorted(&all, p)
}

/// (arrived, finished, p50 us, p99 us) of the flows `pick` selects.
fn class(
    flows: &[&FlowOutcome],
    pick: impl Fn(&FlowOutcome) -> bool,
) -> (usize, usize, Option<f64>, Option<f64>) {
    let class: Vec<&&FlowOutcome> = flows.iter().filter(|f| pick(f)).collect();
    let us: Vec<f64> = class
        .iter()
        .filter_map(|f| f.fct_ns.map(|n| n as f64 / 1e3))
        .collect();
    let sorted = sorted_finite(&us);
    (
        class.len(),
        sorted.len(),
        censored_quantile(&sorted, class.len(), 0.5),
        censored_quantile(&sorted, class.len(), 0.99),
    )
}

impl FlowRunResult {
    /// The figures of one run's measurements. Errors (one line) on a
    /// window, host count or host rate of zero: nothing to normalize by.
    pub fn from_input(i: &FlowRunInput) -> Result<FlowRunResult, String> {
        let (start, end) = i.window_ns;
        if end <= start {
            return Err(format!(
                "{}/{}: empty measurement window [{start}, {end}) ns",
                i.design, i.pattern
            ));
        }
        if i.hosts == 0 || i.host_rate_bps == 0 {
            return Err(format!(
                "{}/{}: {} hosts at {} bit/s carry nothing to normalize by",
                i.design, i.pattern, i.hosts, i.host_rate_bps
            ));
        }
        let window_s = (end - start) as f64 / 1e9;
        let capacity_bits = f64::from(i.hosts) * i.host_rate_bps as f64 * window_s;
        let utilization = i.delivered_bytes as f64 * 8.0 / capacity_bits;
        let flows: Vec<&FlowOutcome> = i
            .flows
            .iter()
            .filter(|f| (start..end).contains(&f.arrival_ns))
            .collect();
        let arrived_bytes: f64 = flows.iter().map(|f| f.size as f64).sum();
        let (short_arrived, short_finished, p50s, p99s) =
            class(&flows, |f| f.size < SHORT_FLOW_BYTES);
        let (long_arrived, long_finished, p50l, p99l) =
            class(&flows, |f| f.size >= SHORT_FLOW_BYTES);
        let occ: Vec<f64> = i.occupancy.iter().map(|&b| b as f64).collect();
        let occ = sorted_finite(&occ);
        let occupancy_cdf = if occ.is_empty() {
            Vec::new()
        } else {
            (0..OCCUPANCY_CDF_POINTS)
                .filter_map(|k| {
                    let p = k as f64 / (OCCUPANCY_CDF_POINTS - 1) as f64;
                    quantile_sorted(&occ, p).map(|b| (b, p))
                })
                .collect()
        };
        Ok(FlowRunResult {
            design: i.design.clone(),
            pattern: i.pattern.clone(),
            routing: i.routing.clone(),
            matchings: i.matchings,
            load: i.load,
            buffer_pkts: i.buffer_pkts,
            hosts: i.hosts,
            host_rate_bps: i.host_rate_bps,
            window_s,
            delivered_bytes: i.delivered_bytes,
            downlink_utilization: utilization,
            delivered_fraction: if i.load > 0.0 {
                utilization / i.load
            } else {
                0.0
            },
            arrived_load: arrived_bytes * 8.0 / capacity_bits,
            downlink_frame_utilization: i.downlink_bytes as f64 * 8.0 / capacity_bits,
            short_arrived,
            short_finished,
            p50_fct_short_us: p50s,
            p99_fct_short_us: p99s,
            long_arrived,
            long_finished,
            p50_fct_long_us: p50l,
            p99_fct_long_us: p99l,
            occupancy_samples: occ.len(),
            occupancy_p50_bytes: quantile_sorted(&occ, 0.5),
            occupancy_p90_bytes: quantile_sorted(&occ, 0.9),
            occupancy_p99_bytes: quantile_sorted(&occ, 0.99),
            occupancy_max_bytes: i.occupancy.iter().copied().max(),
            occupancy_cdf,
            tor_counters: i.tor_counters.clone(),
            rotor_counters: i.rotor_counters.clone(),
        })
    }

    /// The run's name for files: `mars-all-to-all-load0.2-k8`.
    pub fn id(&self) -> String {
        flow_run_id(&self.design, &self.pattern, self.load, self.buffer_pkts)
    }
}

/// A run's name for files: `<design>-<pattern>-load<load>-k<K>`.
pub fn flow_run_id(design: &str, pattern: &str, load: f64, buffer_pkts: u32) -> String {
    format!("{design}-{pattern}-load{load}-k{buffer_pkts}")
}

/// One line per finished run, for progress output.
pub fn flow_result_line(r: &FlowRunResult) -> String {
    format!(
        "{} {} load {} K {}: utilization {:.1} % ({:.0} % of offered), p99 FCT short {} \
         long {} ({} of {} flows unfinished)",
        r.design,
        r.pattern,
        r.load,
        r.buffer_pkts,
        r.downlink_utilization * 100.0,
        r.delivered_fraction * 100.0,
        fct_cell(r.p99_fct_short_us, r.short_arrived),
        fct_cell(r.p99_fct_long_us, r.long_arrived),
        r.short_arrived + r.long_arrived - r.short_finished - r.long_finished,
        r.short_arrived + r.long_arrived,
    )
}

/// Mars's degree forced to `d` on `p`: its figures (budgets not enforced:
/// the point of forcing is to run the paper's degree), if the schedule
/// builder accepts it.
pub fn mars_degree_choice(p: &RotorParams, d: u32) -> Result<DegreeChoice, String> {
    if d < 2 {
        return Err(format!(
            "mars_degree = {d}: a de Bruijn graph needs degree 2 or more"
        ));
    }
    rotor::de_bruijn(p.tors, d, p.rotors).map_err(|e| {
        format!(
            "mars_degree = {d}: {e} ({} ToRs, {} rotors)",
            p.tors, p.rotors
        )
    })?;
    Ok(rotor::candidate(&p.inputs(), d))
}

/// Every problem of a flow (`transport = "ndp"`) experiment's fields, one
/// line each (empty: none). The names of designs and patterns, the
/// workload, loads, buffers, drain and transport figures, and whether
/// each design's schedule can be built (Mars: the forced degree, or the
/// planner's choice). The fields both experiments share (window,
/// warm-up, engine, links, ...) are the runner's to check.
pub fn flow_problems(c: &RotorExperimentConfig) -> Vec<String> {
    let mut out = Vec::new();
    let p = c.params();
    for name in &c.designs {
        let Some(d) = Design::from_name(name) else {
            let opera = if name.eq_ignore_ascii_case("opera") {
                "Opera is not built here; "
            } else {
                ""
            };
            out.push(format!(
                "design {name:?}: {opera}one of {}",
                Design::ALL.map(Design::name).join(", ")
            ));
            continue;
        };
        let built = match d {
            Design::Complete | Design::CompleteValiant => {
                rotor::complete(c.tors, c.rotors).map(|_| ())
            }
            Design::Static => rotor::static_expander(c.tors, c.rotors).map(|_| ()),
            Design::Mars | Design::MarsShift => match c.mars_degree {
                // Reported once below, not per Mars design.
                Some(_) => Ok(()),
                None => rotor::plan(&p.inputs()).map(|_| ()),
            },
        };
        if let Err(e) = built {
            out.push(format!("design {name}: {e}"));
        }
    }
    if c.designs.is_empty() {
        out.push("designs is empty: name at least one design".into());
    }
    if let Some(d) = c.mars_degree {
        if let Err(e) = mars_degree_choice(&p, d) {
            out.push(e);
        }
    }
    for name in &c.patterns {
        if Pattern::from_name(name).is_none() {
            out.push(format!("pattern {name:?}: one of all-to-all, permutation"));
        }
    }
    if c.patterns.is_empty() {
        out.push("patterns is empty: name at least one pattern".into());
    }
    if let Err(e) = lcmp_traffic::cdf::Cdf::load(&c.workload) {
        out.push(format!("workload: {e}"));
    }
    if c.loads.is_empty() {
        out.push(
            "loads is empty: give at least one load (a fraction of the host link rate)".into(),
        );
    }
    for &l in &c.loads {
        if !(l.is_finite() && l > 0.0) {
            out.push(format!("load {l}: must be above 0"));
        } else if l > 1.0 {
            out.push(format!(
                "load {l}: a load above what the hosts can send (loads are fractions of the \
                 host link rate, at most 1)"
            ));
        }
    }
    if !(c.size_scale.is_finite() && c.size_scale >= 1.0) {
        out.push(format!(
            "size_scale = {}: flow sizes are divided by it, so at least 1",
            c.size_scale
        ));
    }
    if c.trim_packets.is_empty() {
        out.push("trim_packets is empty: give at least one K (packets per next-hop queue)".into());
    }
    if c.trim_packets.contains(&0) {
        out.push("trim_packets: K = 0 holds no packet; K is at least 1".into());
    }
    if let Some(d) = c.drain_s {
        if !(d.is_finite() && d >= 0.0) {
            out.push(format!("drain_s = {d}: must be 0 or more seconds"));
        }
    }
    if c.min_rto_us == 0 {
        out.push("min_rto_us = 0: a retransmission timeout must be at least 1 us".into());
    }
    if c.initial_window == 0 {
        out.push(
            "initial_window = 0: a flow must send at least 1 packet before its first pull".into(),
        );
    }
    let open_ns = p.slot_ns.saturating_sub(p.reconfig_ns);
    if c.propagation_ns >= open_ns {
        out.push(format!(
            "propagation_ns = {}: a guard of at least the slot's open time (Delta - Delta_r = \
             {open_ns} ns) lets no frame start",
            c.propagation_ns
        ));
    }
    if c.host_rate_mbps == Some(0) {
        out.push("host_rate_mbps = 0: a host link must carry something".into());
    }
    out
}

/// What the flow experiment found.
#[derive(Debug, Clone, Serialize)]
pub struct FlowSummary {
    /// The config.
    pub config: RotorExperimentConfig,
    /// The Mars paper's numbers these runs compare with.
    pub paper: serde_json::Value,
    /// Mars's degree and figures (planner's choice or forced), if Mars ran.
    pub mars: Option<serde_json::Value>,
    /// Every run.
    pub runs: Vec<FlowRunResult>,
}

/// The paper's numbers, as `summary.json` holds them.
fn paper_json() -> serde_json::Value {
    serde_json::json!({
        "load": paper::LOAD,
        "buffer_pkts": paper::BUFFER_PKTS,
        "throughput_mars_over": paper::THROUGHPUT,
        "small_buffer": { "buffer_pkts": paper::SMALL_BUFFER.0, "mars_over_others_mean": paper::SMALL_BUFFER.1 },
        "rotornet_needs_pkts": paper::ROTORNET_NEEDS_PKTS,
        "tail_occupancy_rotornet_over_mars": paper::TAIL_OCCUPANCY_RATIO,
        "fct_load": paper::FCT_LOAD,
        "short_p99_fct_reduction": paper::SHORT_P99_REDUCTION,
    })
}

impl FlowSummary {
    /// The summary of `runs` (in run order).
    pub fn new(
        config: RotorExperimentConfig,
        mars: Option<serde_json::Value>,
        runs: Vec<FlowRunResult>,
    ) -> FlowSummary {
        FlowSummary {
            config,
            paper: paper_json(),
            mars,
            runs,
        }
    }

    /// The buffer the load figures use: the paper's 8 packets if run, else
    /// the first K run.
    pub fn reference_k(&self) -> Option<u32> {
        let ks = distinct(self.runs.iter().map(|r| r.buffer_pkts));
        ks.contains(&paper::BUFFER_PKTS)
            .then_some(paper::BUFFER_PKTS)
            .or_else(|| ks.first().copied())
    }

    /// The load the buffer sweep and the Mars ratios use: the paper's 20 %
    /// if run, else the highest load run.
    pub fn reference_load(&self) -> Option<f64> {
        let loads = self.loads();
        loads
            .iter()
            .copied()
            .find(|&l| same(l, paper::LOAD))
            .or_else(|| loads.iter().copied().reduce(f64::max))
    }

    fn loads(&self) -> Vec<f64> {
        let mut v: Vec<f64> = Vec::new();
        for r in &self.runs {
            if !v.iter().any(|&l| same(l, r.load)) {
                v.push(r.load);
            }
        }
        v.sort_by(f64::total_cmp);
        v
    }

    fn ks(&self) -> Vec<u32> {
        let mut v = distinct(self.runs.iter().map(|r| r.buffer_pkts));
        v.sort_unstable();
        v
    }

    fn patterns(&self) -> Vec<String> {
        distinct(self.runs.iter().map(|r| r.pattern.clone()))
    }

    fn designs(&self) -> Vec<String> {
        distinct(self.runs.iter().map(|r| r.design.clone()))
    }

    fn find(&self, design: &str, pattern: &str, load: f64, k: u32) -> Option<&FlowRunResult> {
        self.runs.iter().find(|r| {
            r.design == design && r.pattern == pattern && same(r.load, load) && r.buffer_pkts == k
        })
    }
}

/// Loads compare by value (they come from the same config).
fn same(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

/// Writes `summary.json`, `report.md` and the plots (`plots/flow-*.svg`
/// and `.png`) of the runs under `out` (which must exist) and returns the
/// summary. `mars`: Mars's degree and figures as `summary.json` shows
/// them (as the UDP experiment's), `None` if Mars did not run.
pub fn write_flow_results(
    cfg: &RotorExperimentConfig,
    mars: Option<serde_json::Value>,
    runs: Vec<FlowRunResult>,
    out: &Path,
) -> Result<FlowSummary, String> {
    let s = FlowSummary::new(cfg.clone(), mars, runs);
    let write = |name: &str, text: String| {
        let path = out.join(name);
        std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))
    };
    let json = serde_json::to_string_pretty(&s).map_err(|e| format!("summary.json: {e}"))?;
    write("summary.json", json)?;
    let plots = out.join("plots");
    for (stem, title, panels) in flow_charts(&s) {
        write_line_chart(&plots, stem, &title, &panels)?;
    }
    write("report.md", flow_report(&s))?;
    Ok(s)
}

#[cfg(test)]
mod tests;

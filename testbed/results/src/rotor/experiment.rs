//! The rotor throughput experiment's results (`lcmp-testbed
//! rotor-experiment` runs it, see its module there): the experiment file
//! (shared with the flow experiment, `transport = "ndp"`, whose results
//! are [`super::flows`]'s), the traffic patterns and their demand, each
//! design's (reconstructed) throughput bound, the Mars paper's numbers
//! ([`paper`]), and the result table, `report.md` and bar chart of a
//! [`RotorSummary`].

use std::collections::BTreeMap;
use std::fmt::Write as _;

use lcmp_topology::rotor::{self, DegreeChoice};
use lcmp_topology::rotor_net::{RotorNetwork, RotorRouting};
use serde::{Deserialize, Serialize};

use super::{Design, RotorParams};
use crate::format::{distinct, pct};
use crate::plots::BarChart;
use crate::table::{Table, L, R};

/// A traffic pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Pattern {
    /// Every host to every host of the other ToRs, evenly.
    AllToAll,
    /// ToR t's hosts to ToR pi(t)'s (host h to host h).
    Permutation,
}

impl Pattern {
    /// The name in configs and reports.
    pub fn name(self) -> &'static str {
        match self {
            Pattern::AllToAll => "all-to-all",
            Pattern::Permutation => "permutation",
        }
    }

    /// By name.
    pub fn from_name(s: &str) -> Option<Pattern> {
        [Pattern::AllToAll, Pattern::Permutation]
            .into_iter()
            .find(|p| p.name() == s)
    }
}

fn d_name() -> String {
    "rotorexp".into()
}
fn d_tors() -> u32 {
    super::DEFAULT_PARAMS.tors
}
fn d_rotors() -> u32 {
    super::DEFAULT_PARAMS.rotors
}
fn d_hosts() -> u32 {
    super::DEFAULT_PARAMS.hosts_per_tor
}
fn d_slot() -> u64 {
    super::DEFAULT_PARAMS.slot_ns / 1000
}
fn d_reconfig() -> u64 {
    super::DEFAULT_PARAMS.reconfig_ns / 1000
}
fn d_rate() -> u64 {
    super::DEFAULT_PARAMS.rate_bps / 1_000_000
}
fn d_budget() -> f64 {
    8.5
}
fn d_designs() -> Vec<String> {
    ["complete", "static", "mars"].map(String::from).to_vec()
}
fn d_patterns() -> Vec<String> {
    ["all-to-all", "permutation"].map(String::from).to_vec()
}
fn d_warmup() -> f64 {
    2.0
}
fn d_window() -> f64 {
    8.0
}
fn d_one() -> f64 {
    1.0
}
fn d_frame() -> u32 {
    1500
}
fn d_flows() -> u32 {
    4
}
fn d_seed() -> u64 {
    1
}
fn d_workload() -> String {
    "websearch".into()
}
fn d_loads() -> Vec<f64> {
    vec![0.2]
}
fn d_trim() -> Vec<u32> {
    vec![8]
}
fn d_min_rto() -> u64 {
    lcmp_traffic::ndp::DEFAULT_MIN_RTO_NS / 1000
}
fn is_one(v: &f64) -> bool {
    *v == 1.0
}
fn d_initial_window() -> u32 {
    lcmp_traffic::ndp::DEFAULT_INITIAL_WINDOW
}

/// What the hosts send.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// UDP at a fixed rate: the throughput experiment.
    #[default]
    Udp,
    /// NDP flows (trimming at the ToRs) with Poisson arrivals: the flow
    /// experiment (`lcmp_results::rotor::flows`).
    Ndp,
}

/// The experiment file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RotorExperimentConfig {
    /// Testbed name.
    #[serde(default = "d_name")]
    pub name: String,
    /// ToRs n_t.
    #[serde(default = "d_tors")]
    pub tors: u32,
    /// Rotors = uplinks per ToR U.
    #[serde(default = "d_rotors")]
    pub rotors: u32,
    /// Hosts per ToR.
    #[serde(default = "d_hosts")]
    pub hosts_per_tor: u32,
    /// Delta, microseconds.
    #[serde(default = "d_slot")]
    pub slot_us: u64,
    /// Delta_r, microseconds.
    #[serde(default = "d_reconfig")]
    pub reconfig_us: u64,
    /// c, Mbit/s.
    #[serde(default = "d_rate")]
    pub rate_mbps: u64,
    /// B per ToR, bytes (default 4 c Delta).
    #[serde(default)]
    pub buffer_bytes: Option<u64>,
    /// Mars's delay budget L in slots.
    #[serde(default = "d_budget")]
    pub delay_budget_slots: f64,
    /// Designs: complete, complete-valiant, static, mars, mars-shift.
    #[serde(default = "d_designs")]
    pub designs: Vec<String>,
    /// Patterns: all-to-all, permutation.
    #[serde(default = "d_patterns")]
    pub patterns: Vec<String>,
    /// Warm-up before the window, seconds (a number, or a string with a
    /// unit: "2s").
    #[serde(
        default = "d_warmup",
        deserialize_with = "lcmp_topology::secs::deserialize"
    )]
    pub warmup_s: f64,
    /// Measurement window, seconds (a number, or a string with a unit).
    #[serde(
        default = "d_window",
        deserialize_with = "lcmp_topology::secs::deserialize"
    )]
    pub window_s: f64,
    /// Offered load per ToR as a fraction of U c.
    #[serde(default = "d_one")]
    pub load: f64,
    /// Ethernet frame size, bytes.
    #[serde(default = "d_frame")]
    pub frame_bytes: u32,
    /// Source ports per destination host.
    #[serde(default = "d_flows")]
    pub flows_per_destination: u32,
    /// Seed of the permutation.
    #[serde(default = "d_seed")]
    pub seed: u64,
    /// Extra arguments for every lcmp-switch.
    #[serde(default)]
    pub switch_args: Vec<String>,
    /// How ToR-rotor links are made: `veth` (a process per switch, the
    /// default) or `memory` (every switch in one process).
    #[serde(default)]
    pub links: Option<String>,
    /// Where the experiment runs: `namespaces` (the default), `virtual`
    /// (the whole network in one process on a virtual clock) or `wall`
    /// (that process paced by the wall clock). The name is checked by the
    /// testbed, which owns the engines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    /// `udp` (the default: the throughput experiment) or `ndp` (the flow
    /// experiment; the fields below are its own).
    #[serde(default)]
    pub transport: Transport,
    /// NDP: flow sizes, a built-in workload's short name (`websearch`,
    /// `datamining`, ...) or a CDF file (`lcmp_traffic::cdf::Cdf::load`).
    #[serde(default = "d_workload")]
    pub workload: String,
    /// NDP: every flow size is divided by S (`max(1, round(size / S))`
    /// bytes, as `lcmp-traffic client --size-scale`): a workload's shape
    /// at sizes a slow testbed draws enough flows of. Default 1.
    #[serde(default = "d_one", skip_serializing_if = "is_one")]
    pub size_scale: f64,
    /// NDP: offered loads, each a fraction of the server link rate per
    /// host (Poisson arrivals at load x host rate / mean size); one run
    /// per load. `load` stays UDP's.
    #[serde(default = "d_loads")]
    pub loads: Vec<f64>,
    /// NDP: K, the packets a ToR's data queue per next hop holds before it
    /// trims; a list is the buffer sweep (one run per K).
    #[serde(default = "d_trim")]
    pub trim_packets: Vec<u32>,
    /// NDP: how long flows that arrived in the window may still finish
    /// after it, seconds (a number or "500ms"). Default: as long as the
    /// window, so a flow arriving at the window's end has as long to
    /// finish as one arriving at its start had inside it; flows still
    /// running at the end are counted as unfinished, not dropped.
    #[serde(
        default,
        deserialize_with = "lcmp_topology::secs::deserialize_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub drain_s: Option<f64>,
    /// NDP: minimum retransmission timeout, microseconds (the paper's 1 ms).
    #[serde(default = "d_min_rto")]
    pub min_rto_us: u64,
    /// NDP: packets a flow sends before its first pull.
    #[serde(default = "d_initial_window")]
    pub initial_window: u32,
    /// Mars's de Bruijn degree, instead of the planner's choice (the paper
    /// uses 8 at 64 ToRs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mars_degree: Option<u32>,
    /// NDP: the server (host) link rate, Mbit/s (default: `rate_mbps`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_rate_mbps: Option<u64>,
    /// NDP: the ToR-rotor propagation delay, ns, which the ToRs keep as
    /// their guard (no frame starts that would not reach the rotor before
    /// its reconfiguration; the virtual engine's links have no delay of
    /// their own). The paper's is 500 ns; default 0.
    #[serde(default)]
    pub propagation_ns: u64,
}

impl Default for RotorExperimentConfig {
    fn default() -> Self {
        toml::from_str("").expect("every field has a default")
    }
}

impl RotorExperimentConfig {
    /// The shared figures.
    pub fn params(&self) -> RotorParams {
        let rate_bps = self.rate_mbps * 1_000_000;
        let slot_ns = self.slot_us * 1000;
        RotorParams {
            tors: self.tors,
            rotors: self.rotors,
            hosts_per_tor: self.hosts_per_tor,
            slot_ns,
            reconfig_ns: self.reconfig_us * 1000,
            rate_bps,
            buffer_bytes: self
                .buffer_bytes
                .unwrap_or((4 * rate_bps as u128 * slot_ns as u128 / 8_000_000_000) as u64),
            max_delay_ns: (self.delay_budget_slots * slot_ns as f64) as u64,
        }
    }

    /// The server link rate, bit/s.
    pub fn host_rate_bps(&self) -> u64 {
        self.host_rate_mbps.unwrap_or(self.rate_mbps) * 1_000_000
    }

    /// The drain after the window, seconds.
    pub fn drain_seconds(&self) -> f64 {
        self.drain_s.unwrap_or(self.window_s)
    }
}

/// A seeded random derangement of 0..n (n >= 2): a uniform shuffle
/// (splitmix64 stream, Fisher-Yates) redrawn until no element stays put.
pub fn derangement(n: u32, seed: u64) -> Vec<u32> {
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    loop {
        let mut p: Vec<u32> = (0..n).collect();
        for i in (1..p.len()).rev() {
            let j = (next() % (i as u64 + 1)) as usize;
            p.swap(i, j);
        }
        if n < 2 || p.iter().enumerate().all(|(i, &x)| i as u32 != x) {
            return p;
        }
    }
}

/// The ToR-level demand of a pattern: `w[t][j]`, the fraction of ToR t's
/// traffic that goes to ToR j (each row sums to 1).
pub fn demand(pattern: Pattern, tors: u32, perm: &[u32]) -> Vec<Vec<f64>> {
    let n = tors as usize;
    (0..n)
        .map(|t| {
            (0..n)
                .map(|j| match pattern {
                    Pattern::AllToAll if j != t => 1.0 / (n - 1) as f64,
                    Pattern::AllToAll => 0.0,
                    Pattern::Permutation => f64::from(u8::from(perm[t] as usize == j)),
                })
                .collect()
        })
        .collect()
}

/// A design's throughput bound for a demand, as a fraction of n_t U c, and
/// how it was computed. Reconstructions (see `lcmp_topology::rotor`), with
/// Delta_u = Delta_r / Delta and d the number of matchings:
/// - shift-valiant (Mars): theta(d) = (1 - Delta_u) / (2 D), whatever the
///   demand (that is Valiant's point);
/// - direct: a ToR pair (t, j) gets (1 - Delta_u) k_tj / d of t's uplink
///   capacity, k_tj the matchings that connect t to j; each ToR offers its
///   demand at line rate, so the delivered fraction is the mean over t of
///   sum_j min(w_tj, (1 - Delta_u) k_tj / d) (for all-to-all on the
///   complete graph: (1 - Delta_u) x the fraction of non-idle matchings);
/// - valiant (one hop per phase): (1 - Delta_u) x the fraction of non-idle
///   matchings / 2 (every byte crosses two circuits);
/// - shift (static expander, no reconfiguration counted): every ToR at the
///   same rate x, limited by total capacity, x <= 1 / (mean route length
///   of the demand), and by its busiest first-hop uplink,
///   x <= 1 / (U x that uplink's share of the ToR's demand).
pub fn bound(net: &RotorNetwork, chosen: Option<&DegreeChoice>, w: &[Vec<f64>]) -> (f64, String) {
    let n = net.tors as usize;
    let d = net.matchings.len() as f64;
    let tax = 1.0 - net.reconfig_ns as f64 / net.slot_ns as f64;
    let connects = |t: usize, j: usize| net.matchings.iter().filter(|m| m[t] as usize == j).count();
    let non_idle = (0..n)
        .map(|t| {
            (0..n)
                .filter(|&j| j != t)
                .map(|j| connects(t, j))
                .sum::<usize>() as f64
                / d
        })
        .sum::<f64>()
        / n as f64;
    match net.routing() {
        RotorRouting::ShiftValiant => {
            let dia = chosen.map_or_else(
                || rotor::diameter(net.tors, net.matchings.len() as u32),
                |c| c.diameter,
            );
            (
                tax / (2.0 * f64::from(dia)),
                format!(
                    "theta(d) = (1 - Delta_r/Delta) / (2D), d = {}, D = {dia} (reconstruction)",
                    net.matchings.len()
                ),
            )
        }
        RotorRouting::Direct => {
            let v = (0..n)
                .map(|t| {
                    (0..n)
                        .filter(|&j| j != t)
                        .map(|j| w[t][j].min(tax * connects(t, j) as f64 / d))
                        .sum::<f64>()
                })
                .sum::<f64>()
                / n as f64;
            (
                v,
                "direct: mean over ToRs of sum_j min(demand, (1 - Delta_r/Delta) x circuits to j / d)"
                    .into(),
            )
        }
        RotorRouting::Valiant => (
            tax * non_idle / 2.0,
            "Valiant, one hop per phase: (1 - Delta_r/Delta) x non-idle matchings / 2".into(),
        ),
        RotorRouting::Shift => {
            let Ok(s) = net.schedule() else {
                return (f64::NAN, "no schedule".into());
            };
            let (next, hops) = rotor::routes(&s);
            let mean_len = (0..n)
                .map(|t| (0..n).map(|j| w[t][j] * f64::from(hops[t][j])).sum::<f64>())
                .sum::<f64>()
                / n as f64;
            let u = f64::from(net.rotors);
            let per = net.per_rotor as usize;
            let mut first_hop = f64::INFINITY;
            for t in 0..n {
                for r in 0..net.rotors as usize {
                    let reach: Vec<u32> = (0..per).map(|k| net.matchings[r * per + k][t]).collect();
                    let share: f64 = (0..n)
                        .filter(|&j| j != t && reach.contains(&next[t][j]))
                        .map(|j| w[t][j])
                        .sum();
                    if share > 0.0 {
                        first_hop = first_hop.min(1.0 / (u * share));
                    }
                }
            }
            let reconf = if per > 1 { tax } else { 1.0 };
            (
                reconf * (1.0 / mean_len).min(first_hop).min(1.0),
                format!(
                    "shift, equal rates: min(1 / mean route length = 1/{mean_len:.2}, \
                     first-hop uplink share = {first_hop:.2}){}",
                    if per > 1 {
                        " x (1 - Delta_r/Delta)"
                    } else {
                        " (no reconfiguration)"
                    }
                ),
            )
        }
    }
}

/// One of the Mars paper's comparisons: Mars's figure over (or its
/// reduction against) another design's.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PaperNumber {
    /// The traffic pattern.
    #[serde(serialize_with = "pattern_name")]
    pub pattern: Pattern,
    /// The design the paper compares with, as it names it.
    pub versus: &'static str,
    /// Our designs that stand for it (none: not built here). The paper
    /// runs RotorNet and Sirius with Valiant load balancing, so
    /// `complete-valiant` is the closer twin; `complete` is the direct
    /// variant.
    #[serde(serialize_with = "design_names")]
    pub designs: &'static [Design],
    /// The number: a ratio (throughput: Mars / design), or a fraction
    /// (FCT: 1 - Mars / design).
    pub value: f64,
}

fn pattern_name<S: serde::Serializer>(p: &Pattern, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(p.name())
}

fn design_names<S: serde::Serializer>(d: &&[Design], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(d.iter().map(|d| d.name()))
}

const ROTORNET: &[Design] = &[Design::Complete, Design::CompleteValiant];

/// The Mars paper's numbers (rotor notes, "The paper's evaluation
/// setup"), in one place: every report and check reads them from here.
pub mod paper {
    use super::{Design, PaperNumber, Pattern, ROTORNET};

    /// The load of the throughput claims: 20 % of the server links.
    pub const LOAD: f64 = 0.2;
    /// The paper's default buffer: 8 packets per port (NDP trimming).
    pub const BUFFER_PKTS: u32 = 8;
    /// Mars's server downlink utilization over each design's, websearch at
    /// [`LOAD`] with [`BUFFER_PKTS`].
    pub const THROUGHPUT: [PaperNumber; 6] = [
        PaperNumber {
            pattern: Pattern::AllToAll,
            versus: "RotorNet/Sirius",
            designs: ROTORNET,
            value: 7.02,
        },
        PaperNumber {
            pattern: Pattern::AllToAll,
            versus: "static expander",
            designs: &[Design::Static],
            value: 1.64,
        },
        PaperNumber {
            pattern: Pattern::AllToAll,
            versus: "Opera",
            designs: &[],
            value: 1.37,
        },
        PaperNumber {
            pattern: Pattern::Permutation,
            versus: "RotorNet/Sirius",
            designs: ROTORNET,
            value: 5.66,
        },
        PaperNumber {
            pattern: Pattern::Permutation,
            versus: "static expander",
            designs: &[Design::Static],
            value: 1.33,
        },
        PaperNumber {
            pattern: Pattern::Permutation,
            versus: "Opera",
            designs: &[],
            value: 1.33,
        },
    ];
    /// With 4-packet buffers Mars carries 1.57x the others' utilization on
    /// average (at [`LOAD`]).
    pub const SMALL_BUFFER: (u32, f64) = (4, 1.57);
    /// RotorNet/Sirius need 64 packets per port to carry [`LOAD`].
    pub const ROTORNET_NEEDS_PKTS: u32 = 64;
    /// Mars's tail ToR buffer occupancy is this many times lower than
    /// RotorNet/Sirius's.
    pub const TAIL_OCCUPANCY_RATIO: f64 = 2.09;
    /// The load of the short-flow FCT claims: 5 %.
    pub const FCT_LOAD: f64 = 0.05;
    /// Short flows' p99 FCT, Mars against each design: the reduction
    /// 1 - Mars / design (all-to-all, websearch, [`FCT_LOAD`]).
    pub const SHORT_P99_REDUCTION: [PaperNumber; 3] = [
        PaperNumber {
            pattern: Pattern::AllToAll,
            versus: "Opera",
            designs: &[],
            value: 0.77,
        },
        PaperNumber {
            pattern: Pattern::AllToAll,
            versus: "static expander",
            designs: &[Design::Static],
            value: 0.98,
        },
        PaperNumber {
            pattern: Pattern::AllToAll,
            versus: "RotorNet/Sirius",
            designs: ROTORNET,
            value: 0.88,
        },
    ];

    /// The throughput claim that `design` stands for in `pattern`.
    pub fn throughput(design: Design, pattern: Pattern) -> Option<&'static PaperNumber> {
        THROUGHPUT
            .iter()
            .find(|n| n.pattern == pattern && n.designs.contains(&design))
    }
}

/// The paper's throughput ratio of Mars over a design (websearch at 20 %
/// load, all-to-all).
pub fn paper_ratio(design: Design) -> Option<f64> {
    paper::throughput(design, Pattern::AllToAll).map(|n| n.value)
}

/// One run's result.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    /// Design.
    pub design: String,
    /// Pattern.
    pub pattern: String,
    /// Routing in force.
    pub routing: String,
    /// Matchings (degree of the emulated graph).
    pub matchings: usize,
    /// The permutation (ToR t sends to perm[t]), for permutation runs.
    pub permutation: Option<Vec<u32>>,
    /// Frame bytes counted at the receivers inside the window.
    pub delivered_bytes: u64,
    /// delivered x 8 / (n_t U c window).
    pub delivered_fraction: f64,
    /// Per receiving ToR, its share of the same normalization.
    pub delivered_fraction_per_tor: Vec<f64>,
    /// What the senders handed to their sockets per second, as a fraction
    /// of n_t U c (below the configured load: the senders could not keep
    /// up).
    pub offered_fraction: f64,
    /// Failed sends.
    pub send_errors: u64,
    /// The design's bound.
    pub bound: f64,
    /// How the bound was computed.
    pub bound_formula: String,
    /// Counter changes over the window summed over the ToRs, by counter.
    pub tor_counters: BTreeMap<String, f64>,
    /// The same over the rotors.
    pub rotor_counters: BTreeMap<String, f64>,
    /// The switches' own slot lateness (how late a ToR woke after a
    /// reconfiguration ended) at the window's end: the largest median over
    /// the switches that measure it, ns.
    pub lateness_p50_ns: Option<u64>,
    /// The largest 99th percentile, ns.
    pub lateness_p99_ns: Option<u64>,
}

/// What the experiment found.
#[derive(Debug, Clone, Serialize)]
pub struct RotorSummary {
    /// The config.
    pub config: RotorExperimentConfig,
    /// Every run.
    pub runs: Vec<RunResult>,
    /// Mars's planner choice (degree, diameter, bound), if Mars ran.
    pub mars: Option<serde_json::Value>,
}

/// Mars's delivered fraction over `design`'s, per pattern.
fn mars_ratio(s: &RotorSummary, r: &RunResult) -> Option<f64> {
    mars_over(s, r, |r| r.delivered_fraction)
}

/// Mars's bound over `design`'s, per pattern.
fn mars_bound_ratio(s: &RotorSummary, r: &RunResult) -> Option<f64> {
    mars_over(s, r, |r| r.bound)
}

/// Mars's `value` over `r`'s in the same pattern (`None` if Mars did not
/// run it or `r`'s value is not positive).
fn mars_over(s: &RotorSummary, r: &RunResult, value: impl Fn(&RunResult) -> f64) -> Option<f64> {
    let mars = s
        .runs
        .iter()
        .find(|m| m.design == "mars" && m.pattern == r.pattern)?;
    (value(r) > 0.0).then(|| value(mars) / value(r))
}

/// Counters whose name says they count drops, with a non-zero change.
fn drops(c: &BTreeMap<String, f64>) -> String {
    counted(c, &["drop"])
}

/// Counters whose name contains one of `words`, with a non-zero change:
/// `name change, ...`, or `none`.
pub(super) fn counted(c: &BTreeMap<String, f64>, words: &[&str]) -> String {
    let v: Vec<String> = c
        .iter()
        .filter(|(k, v)| words.iter().any(|w| k.contains(w)) && **v != 0.0)
        .map(|(k, v)| format!("{k} {v:.0}"))
        .collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

fn ratio(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.2}x"))
}

/// The result table printed at the end.
pub fn table(s: &RotorSummary) -> String {
    let mut t = Table::text(&[
        ("design", L, 17),
        ("pattern", L, 12),
        ("delivered", R, 10),
        ("bound", R, 8),
        ("of bound", R, 10),
        ("mars/this", R, 10),
        ("paper", R, 8),
    ]);
    for r in &s.runs {
        t.row([
            r.design.clone(),
            r.pattern.clone(),
            format!("{:.1}%", r.delivered_fraction * 100.0),
            format!("{:.1}%", r.bound * 100.0),
            format!("{:.0}%", r.delivered_fraction / r.bound * 100.0),
            ratio(mars_ratio(s, r)),
            paper_cell(r),
        ]);
    }
    format!("\n{}", t.text_lines())
}

fn paper_cell(r: &RunResult) -> String {
    Design::from_name(&r.design)
        .zip(Pattern::from_name(&r.pattern))
        .and_then(|(d, p)| paper::throughput(d, p))
        .map_or("-".into(), |n| format!("{}x", n.value))
}

/// `report.md`.
pub fn report(s: &RotorSummary) -> String {
    let c = &s.config;
    let p = c.params();
    let mut out = String::new();
    let _ = writeln!(out, "# Rotor network throughput\n");
    let _ = writeln!(
        out,
        "{} ToRs x {} rotors (uplinks), {} host(s) per ToR; Delta = {} us, Delta_r = {} us, \
         c = {} Mbit/s, B = {} bytes per ToR, Mars delay budget L = {} Delta. UDP in {}-byte \
         frames, {} x U x c offered per ToR, {} source ports per destination; {} s warm-up, \
         {} s window. Permutation seed {}.\n",
        c.tors,
        c.rotors,
        c.hosts_per_tor,
        c.slot_us,
        c.reconfig_us,
        c.rate_mbps,
        p.buffer_bytes,
        c.delay_budget_slots,
        c.frame_bytes,
        c.load,
        c.flows_per_destination,
        c.warmup_s,
        c.window_s,
        c.seed
    );
    if let Some(m) = &s.mars {
        let _ = writeln!(
            out,
            "Mars's planner chose degree d = {} (diameter {}), bound theta(d) = {:.3}.\n",
            m["degree"],
            m["diameter"],
            m["throughput_bound"].as_f64().unwrap_or(f64::NAN)
        );
    }
    // How arrivals were timed: by the kernel on namespaces, by the
    // network's clock on the virtual engine.
    let timed = if c.engine.as_deref() == Some("virtual") {
        "arrival times on the virtual clock"
    } else {
        "kernel receive timestamps"
    };
    let _ = writeln!(
        out,
        "Delivered: frame bytes the receiving hosts got inside the window ({timed}) x 8 / \
         (n_t x U x c x window). Bounds are reconstructions (no public Mars \
         code; see `lcmp_topology::rotor` and `bound` in `testbed/src/rotor/experiment.rs`). \
         \"mars/this\" is Mars's delivered fraction over the design's in the same pattern; the \
         paper's ratios (websearch at 20 % load, all-to-all) are Mars {} (Opera is not built \
         here; RotorNet/Sirius stands for both complete designs).\n",
        paper::THROUGHPUT
            .iter()
            .filter(|n| n.pattern == Pattern::AllToAll)
            .map(|n| format!("{}x {}", n.value, n.versus))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let whole_pct = |v: f64| format!("{:.0} %", v * 100.0);
    let mut t = Table::new([
        "design",
        "pattern",
        "routing",
        "delivered (of line rate)",
        "bound",
        "delivered / bound",
        "Mars / design (measured)",
        "Mars / design (bounds)",
        "paper Mars / design",
        "offered",
    ])
    .right(3..10)
    .compact_rule();
    for r in &s.runs {
        t.row([
            r.design.clone(),
            r.pattern.clone(),
            r.routing.clone(),
            pct(Some(r.delivered_fraction)),
            pct(Some(r.bound)),
            whole_pct(r.delivered_fraction / r.bound),
            ratio(mars_ratio(s, r)),
            ratio(mars_bound_ratio(s, r)),
            paper_cell(r),
            whole_pct(r.offered_fraction),
        ]);
    }
    out += &t.markdown();
    let _ = writeln!(out, "\n## Bounds\n");
    for r in &s.runs {
        let _ = writeln!(
            out,
            "- {} / {}: {:.3} = {}",
            r.design, r.pattern, r.bound, r.bound_formula
        );
    }
    let _ = writeln!(out, "\n## Switch drops during the window\n");
    let mut t = Table::new([
        "design",
        "pattern",
        "ToRs",
        "rotors",
        "ToR slot lateness p50 / p99 (worst ToR)",
    ])
    .compact_rule();
    let us = |v: Option<u64>| v.map_or("-".into(), |v| format!("{:.0} us", v as f64 / 1e3));
    for r in &s.runs {
        t.row([
            r.design.clone(),
            r.pattern.clone(),
            drops(&r.tor_counters),
            drops(&r.rotor_counters),
            format!("{} / {}", us(r.lateness_p50_ns), us(r.lateness_p99_ns)),
        ]);
    }
    out += &t.markdown();
    let _ = writeln!(
        out,
        "\nEvery counter's change per switch is in `runs/<design>-<pattern>.json`; the sums \
         per role in `summary.json`.\n\n![throughput](plots/rotor-throughput.png)"
    );
    out
}

/// The grouped bar chart: per pattern one bar per design, the bound as a
/// mark over each bar.
pub fn chart(s: &RotorSummary) -> BarChart {
    let patterns = distinct(s.runs.iter().map(|r| r.pattern.clone()));
    let designs = distinct(s.runs.iter().map(|r| r.design.clone()));
    let find = |d: &str, p: &str| s.runs.iter().find(|r| r.design == d && r.pattern == p);
    BarChart {
        title: format!(
            "Rotor networks: delivered throughput ({} ToRs x {} rotors)",
            s.config.tors, s.config.rotors
        ),
        x_desc: "traffic pattern".into(),
        y_desc: "delivered / (n_t x U x c)".into(),
        groups: patterns.clone(),
        series: designs
            .iter()
            .map(|d| {
                (
                    d.clone(),
                    patterns
                        .iter()
                        .map(|p| find(d, p).map(|r| r.delivered_fraction))
                        .collect(),
                )
            })
            .collect(),
        marks: designs
            .iter()
            .map(|d| {
                patterns
                    .iter()
                    .map(|p| find(d, p).map(|r| r.bound))
                    .collect()
            })
            .collect(),
        marks_label: "bound (reconstruction)".into(),
        reference: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plots::write_bar_chart;

    #[test]
    fn derangements_move_everything_and_follow_the_seed() {
        for seed in 0..50 {
            let p = derangement(8, seed);
            let mut sorted = p.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..8).collect::<Vec<u32>>());
            assert!(p.iter().enumerate().all(|(i, &x)| i as u32 != x), "{p:?}");
            assert_eq!(derangement(8, seed), p);
        }
        assert_ne!(derangement(8, 1), derangement(8, 2));
    }

    #[test]
    fn demand_rows_sum_to_one() {
        let perm = derangement(5, 3);
        for p in [Pattern::AllToAll, Pattern::Permutation] {
            for row in demand(p, 5, &perm) {
                assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-12);
            }
        }
    }

    #[test]
    fn report_and_chart_of_a_summary() {
        let run = |design: &str, pattern: &str, delivered: f64, bound: f64| RunResult {
            design: design.into(),
            pattern: pattern.into(),
            routing: "direct".into(),
            matchings: 8,
            permutation: None,
            delivered_bytes: 0,
            delivered_fraction: delivered,
            delivered_fraction_per_tor: Vec::new(),
            offered_fraction: 1.0,
            send_errors: 0,
            bound,
            bound_formula: "f".into(),
            tor_counters: BTreeMap::from([("drops.queue_full".into(), 12.0)]),
            rotor_counters: BTreeMap::new(),
            lateness_p50_ns: Some(20_000),
            lateness_p99_ns: Some(80_000),
        };
        let s = RotorSummary {
            config: RotorExperimentConfig::default(),
            runs: vec![
                run("complete", "all-to-all", 0.4, 0.8),
                run("mars", "all-to-all", 0.2, 0.225),
                run("complete", "permutation", 0.1, 0.1125),
                run("mars", "permutation", 0.2, 0.225),
            ],
            mars: None,
        };
        let md = report(&s);
        assert!(md.contains("| complete | all-to-all | direct | 40.0 % | 80.0 % | 50 % | 0.50x | 0.28x | 7.02x | 100 % |"), "{md}");
        assert!(
            md.contains("| complete | permutation | direct | 10.0 % | 11.2 % | 89 % | 2.00x |"),
            "{md}"
        );
        assert!(
            md.contains("| drops.queue_full 12 | none | 20 us / 80 us |"),
            "{md}"
        );
        let t = table(&s);
        assert!(t.contains("0.50x"), "{t}");
        let c = chart(&s);
        assert_eq!(c.groups, vec!["all-to-all", "permutation"]);
        assert_eq!(c.series[0], ("complete".into(), vec![Some(0.4), Some(0.1)]));
        assert_eq!(c.marks[1], vec![Some(0.225), Some(0.225)]);
        let dir = std::env::temp_dir().join(format!("rotor-chart-{}", std::process::id()));
        let files = write_bar_chart(&dir, "rotor-throughput", &c).unwrap();
        assert!(files
            .iter()
            .all(|f| std::fs::metadata(f).unwrap().len() > 1000));
        let _ = std::fs::remove_dir_all(&dir);
    }
}

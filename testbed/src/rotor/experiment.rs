//! `lcmp-testbed rotor-experiment`: delivered throughput of rotor network
//! designs under all-to-all and permutation traffic, next to each design's
//! (reconstructed) bound and the Mars paper's ratios.
//!
//! Every design runs on the same testbed (same n_t, U, c, Delta, Delta_r,
//! B; only the network file changes, so the switches are restarted with a
//! new one). Every host sends UDP in frames of `frame_bytes`, offering
//! `load` x U x c per ToR on an absolute schedule; all-to-all spreads each
//! host's traffic evenly over every host of the other ToRs, permutation
//! sends ToR t's hosts to ToR pi(t) for a seeded random derangement pi.
//! Several source ports per destination, so that switches that balance per
//! flow have flows to balance. Delivered bytes are counted from the
//! receivers' kernel timestamps inside a measurement window after a
//! warm-up and normalized to n_t x U x c x window. The switches' counters
//! are read at both ends of the window; their difference is reported per
//! switch role (drops by reason, slot counters, whatever the stats files
//! hold).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use lcmp_netns_tests::traffic::realtime_ns;
use lcmp_netns_tests::{udp_send_flows, Netns, Testbed, UdpReceiver};
use lcmp_topology::rotor::{self, Candidate};
use lcmp_topology::rotor_net::{RotorNetwork, RotorRole, RotorRouting};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::boundary::HEADERS;
use super::{host_name, Design, RotorParams, RotorUpOptions};
use crate::experiment::run::check_interrupted;
use crate::experiment::{catch_signals, TestbedGuard};
use crate::plots::{write_bar_chart, BarChart};
use crate::{bed, Error, Result};

/// `lcmp-testbed rotor-experiment`.
#[derive(Args, Debug, Clone)]
pub struct RotorExperimentArgs {
    /// Experiment file (TOML; every field optional, see
    /// experiments/rotor-throughput.toml). Default: the built-in values
    /// (8 ToRs x 2 rotors, Delta 1 ms, Delta_r 100 us, 100 Mbit/s, 50 kB,
    /// complete/static/mars, 2 s warm-up, 8 s window).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Output directory.
    #[arg(long, default_value = "target/rotor-experiment")]
    pub out: PathBuf,
    /// Testbed name (overrides the file's).
    #[arg(long)]
    pub name: Option<String>,
    /// Measurement window, seconds (overrides the file's).
    #[arg(long)]
    pub window_s: Option<f64>,
    /// Warm-up, seconds (overrides the file's).
    #[arg(long)]
    pub warmup_s: Option<f64>,
}

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

    fn from_name(s: &str) -> Option<Pattern> {
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
    /// Warm-up before the window, seconds.
    #[serde(default = "d_warmup")]
    pub warmup_s: f64,
    /// Measurement window, seconds.
    #[serde(default = "d_window")]
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
}

impl Default for RotorExperimentConfig {
    fn default() -> Self {
        toml::from_str("").expect("every field has a default")
    }
}

impl RotorExperimentConfig {
    /// The file's config (or the defaults) with the command line's
    /// overrides.
    pub fn from_args(a: &RotorExperimentArgs) -> Result<Self> {
        let mut c = match &a.config {
            Some(f) => {
                let text = std::fs::read_to_string(f)
                    .map_err(|e| Error::new(format!("{}: {e}", f.display())))?;
                toml::from_str(&text)
                    .map_err(|e| Error::new(format!("{}: {}", f.display(), e.message())))?
            }
            None => Self::default(),
        };
        if let Some(n) = &a.name {
            c.name = n.clone();
        }
        if let Some(w) = a.window_s {
            c.window_s = w;
        }
        if let Some(w) = a.warmup_s {
            c.warmup_s = w;
        }
        Ok(c)
    }

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

    /// Checks everything and returns the designs' networks and the
    /// patterns, before anything is started.
    pub fn validate(&self) -> Result<(Vec<DesignNet>, Vec<Pattern>)> {
        crate::state::validate_name(&self.name)?;
        let positive = |v: f64, what: &str| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(Error::new(format!(
                    "{what} must be a positive number, not {v}"
                )))
            }
        };
        positive(self.window_s, "window_s")?;
        positive(self.warmup_s + 1.0, "warmup_s + 1")?;
        positive(self.load, "load")?;
        positive(self.delay_budget_slots, "delay_budget_slots")?;
        let min_frame = HEADERS + lcmp_netns_tests::traffic::UDP_HEADER as u32;
        if !(min_frame..=1514).contains(&self.frame_bytes) {
            return Err(Error::new(format!(
                "frame_bytes = {}: need {min_frame} to 1514 (MTU 1500)",
                self.frame_bytes
            )));
        }
        if self.flows_per_destination == 0 {
            return Err(Error::new("flows_per_destination must be at least 1"));
        }
        if self.tors < 3 && self.patterns.iter().any(|p| p == "permutation") {
            return Err(Error::new(
                "a permutation needs at least 3 ToRs to be random",
            ));
        }
        let p = self.params();
        let mut designs = Vec::new();
        for name in &self.designs {
            let d = Design::from_name(name).ok_or_else(|| {
                Error::new(format!(
                    "design {name:?}: one of {}",
                    Design::ALL.map(Design::name).join(", ")
                ))
            })?;
            let (net, chosen) = super::network(d, &p)?;
            designs.push(DesignNet {
                design: d,
                net,
                chosen,
            });
        }
        if designs.is_empty() {
            return Err(Error::new("no design to run"));
        }
        let patterns = self
            .patterns
            .iter()
            .map(|s| {
                Pattern::from_name(s).ok_or_else(|| {
                    Error::new(format!("pattern {s:?}: one of all-to-all, permutation"))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        if patterns.is_empty() {
            return Err(Error::new("no pattern to run"));
        }
        Ok((designs, patterns))
    }
}

/// A design's network.
#[derive(Debug, Clone)]
pub struct DesignNet {
    /// The design.
    pub design: Design,
    /// Its network file.
    pub net: RotorNetwork,
    /// Mars's planner choice.
    pub chosen: Option<Candidate>,
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
pub fn bound(net: &RotorNetwork, chosen: Option<&Candidate>, w: &[Vec<f64>]) -> (f64, String) {
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

/// The paper's throughput ratio of Mars over a design (rotor notes:
/// websearch at 20 % load, all-to-all).
pub fn paper_ratio(design: Design) -> Option<f64> {
    match design {
        Design::Complete => Some(7.0),
        Design::Static => Some(1.64),
        Design::CompleteValiant | Design::Mars | Design::MarsShift => None,
    }
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

/// Runs the experiment the command line describes and prints the table.
pub fn run_cli(a: &RotorExperimentArgs, say: &dyn Fn(&str)) -> Result<()> {
    let cfg = RotorExperimentConfig::from_args(a)?;
    let s = run(&cfg, &a.out, say)?;
    print!("{}", table(&s));
    println!(
        "\nreport: {}\nsummary: {}\nplot: {}",
        a.out.join("report.md").display(),
        a.out.join("summary.json").display(),
        a.out.join("plots").join("rotor-throughput.svg").display()
    );
    Ok(())
}

/// Runs every (design, pattern) on one testbed and writes `summary.json`,
/// `report.md`, `plots/rotor-throughput.{svg,png}` and per run the
/// counter changes of every switch (`runs/<design>-<pattern>.json`) under
/// `out`.
pub fn run(cfg: &RotorExperimentConfig, out: &Path, say: &dyn Fn(&str)) -> Result<RotorSummary> {
    bed::require_root()?;
    let (designs, patterns) = cfg.validate()?;
    std::fs::create_dir_all(out.join("runs"))
        .map_err(|e| Error::new(format!("{}: {e}", out.display())))?;
    std::fs::write(
        out.join("experiment.toml"),
        toml::to_string(cfg).expect("config serializes"),
    )?;
    catch_signals();
    let perm = derangement(cfg.tors, cfg.seed);
    let mut st = super::up(
        &RotorUpOptions {
            name: cfg.name.clone(),
            network: designs[0].net.clone(),
            source: format!("rotor-experiment ({})", designs[0].design.name()),
            switch_args: cfg.switch_args.clone(),
        },
        say,
    )?;
    let _guard = TestbedGuard(cfg.name.clone());
    let (_, tb) = bed::attach(&st)?;

    let runs_total = designs.len() * patterns.len();
    let per_run = cfg.warmup_s + cfg.window_s;
    let bar = ProgressBar::new((runs_total as f64 * per_run * 10.0) as u64);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {msg} (ETA {eta})")
            .expect("valid template")
            .progress_chars("=> "),
    );
    let mut results = Vec::new();
    let mut k = 0;
    for (i, dn) in designs.iter().enumerate() {
        if i > 0 {
            bar.suspend(|| super::restart(&mut st, &tb, &dn.net, say))?;
        }
        for &pattern in &patterns {
            check_interrupted()?;
            let id = format!("{}-{}", dn.design.name(), pattern.name());
            let base = k as f64 * per_run * 10.0;
            let tick = |elapsed: f64| {
                bar.set_position((base + elapsed.clamp(0.0, per_run) * 10.0) as u64);
                bar.set_message(format!("run {}/{runs_total} {id}", k + 1));
            };
            let (r, per_switch) = run_one(cfg, &st, &tb, dn, pattern, &perm, k, &tick)?;
            std::fs::write(
                out.join("runs").join(format!("{id}.json")),
                serde_json::to_string_pretty(&per_switch).expect("counters serialize"),
            )?;
            let line = format!(
                "{:<17} {:<12} delivered {:>6.1} % of line rate (bound {:>5.1} %, offered {:>5.1} %)",
                r.design,
                r.pattern,
                r.delivered_fraction * 100.0,
                r.bound * 100.0,
                r.offered_fraction * 100.0
            );
            bar.println(line.clone());
            if bar.is_hidden() {
                say(&line);
            }
            results.push(r);
            k += 1;
        }
    }
    bar.finish_and_clear();
    let summary = RotorSummary {
        config: cfg.clone(),
        mars: designs.iter().find_map(|d| {
            d.chosen.map(|c| {
                json!({
                    "degree": c.degree,
                    "diameter": c.diameter,
                    "throughput_bound": c.throughput_bound,
                    "delay_ns": c.delay_ns,
                    "buffer_bytes": c.buffer_bytes,
                })
            })
        }),
        runs: results,
    };
    std::fs::write(
        out.join("summary.json"),
        serde_json::to_string_pretty(&summary).expect("summary serializes"),
    )?;
    let plot_dir = out.join("plots");
    write_bar_chart(&plot_dir, "rotor-throughput", &chart(&summary)).map_err(Error::new)?;
    std::fs::write(out.join("report.md"), report(&summary))?;
    Ok(summary)
}

/// Every host's destinations under `pattern`.
fn destinations(
    cfg: &RotorExperimentConfig,
    pattern: Pattern,
    perm: &[u32],
    port: u16,
) -> Vec<Vec<SocketAddr>> {
    let mut out = Vec::new();
    for t in 0..cfg.tors {
        for h in 0..cfg.hosts_per_tor {
            let to: Vec<SocketAddr> = match pattern {
                Pattern::AllToAll => (0..cfg.tors)
                    .filter(|&j| j != t)
                    .flat_map(|j| (0..cfg.hosts_per_tor).map(move |x| (j, x)))
                    .map(|(j, x)| SocketAddr::new(RotorNetwork::host_ip(j, x).into(), port))
                    .collect(),
                Pattern::Permutation => vec![SocketAddr::new(
                    RotorNetwork::host_ip(perm[t as usize], h).into(),
                    port,
                )],
            };
            out.push(to);
        }
    }
    out
}

type PerSwitch = BTreeMap<String, BTreeMap<String, f64>>;

/// Senders wake at most every this often and send what is due by then:
/// eight senders waking once per 60 us frame would take most of the two
/// CPUs the switches need. A ToR queues a few frames early like any
/// others.
const SEND_SLACK: Duration = Duration::from_micros(500);

#[allow(clippy::too_many_arguments)]
fn run_one(
    cfg: &RotorExperimentConfig,
    st: &crate::state::State,
    tb: &Testbed,
    dn: &DesignNet,
    pattern: Pattern,
    perm: &[u32],
    k: usize,
    tick: &dyn Fn(f64),
) -> Result<(RunResult, PerSwitch)> {
    let net = &dn.net;
    // A port of its own per run: late frames of the previous run are not
    // counted.
    let port = 7000 + k as u16;
    let dsts = destinations(cfg, pattern, perm, port);
    let hosts: Vec<(u32, u32)> = (0..cfg.tors)
        .flat_map(|t| (0..cfg.hosts_per_tor).map(move |h| (t, h)))
        .collect();
    let mut receivers = Vec::new();
    for &(t, h) in &hosts {
        let node = tb.host(&host_name(t, h));
        let bind = SocketAddr::new(RotorNetwork::host_ip(t, h).into(), port);
        receivers.push(UdpReceiver::start(&node.netns, bind)?);
    }
    let frame_bits = u64::from(cfg.frame_bytes) * 8;
    let per_host_bps =
        cfg.load * f64::from(cfg.rotors) * net.rate_bps as f64 / f64::from(cfg.hosts_per_tor);
    let gap = Duration::from_secs_f64(frame_bits as f64 / per_host_bps);
    let total = cfg.warmup_s + cfg.window_s;
    let payload = (cfg.frame_bytes - HEADERS) as usize;
    let ports = vec![0u16; cfg.flows_per_destination as usize];
    let start = realtime_ns();
    let senders: Vec<_> = hosts
        .iter()
        .zip(&dsts)
        .map(|(&(t, h), to)| {
            let ns_name = tb.host(&host_name(t, h)).netns.name().to_string();
            let per_round = (ports.len() * to.len()) as f64;
            // Past the window's end, so the senders still send while it
            // closes.
            let rounds = ((total + 0.5) / (gap.as_secs_f64() * per_round)).ceil() as u64;
            let (to, ports) = (to.clone(), ports.clone());
            std::thread::spawn(move || {
                let ns = Netns::open(&ns_name)?;
                udp_send_flows(&ns, &to, &ports, 0, rounds, payload, gap, SEND_SLACK)
            })
        })
        .collect();
    let window_start = start + (cfg.warmup_s * 1e9) as u64;
    let window_end = window_start + (cfg.window_s * 1e9) as u64;
    wait_until(start, window_start, tick);
    let before = super::fresh_status(st)?;
    wait_until(start, window_end, tick);
    let after = super::fresh_status(st)?;
    let mut sent_bits = 0.0;
    let mut send_secs = 0.0f64;
    let mut send_errors = 0;
    for s in senders {
        let r = s
            .join()
            .map_err(|_| Error::new("a UDP sender panicked"))??;
        sent_bits += (r.sent * frame_bits) as f64;
        send_secs = send_secs.max(r.elapsed.as_secs_f64());
        send_errors += r.errors;
    }
    let period = net.slot_ns * u64::from(net.per_rotor);
    let quiet = Duration::from_nanos(8 * period).max(Duration::from_millis(300));
    let capacity_bits =
        f64::from(cfg.tors) * f64::from(cfg.rotors) * net.rate_bps as f64 * cfg.window_s;
    let mut delivered = 0u64;
    let mut per_tor = vec![0.0; cfg.tors as usize];
    for (rx, &(t, _)) in receivers.into_iter().zip(&hosts) {
        let rep = rx.finish(quiet, Duration::from_secs(10))?;
        let n = rep
            .arrivals
            .iter()
            .filter(|a| (window_start..window_end).contains(&a.rx_ns()))
            .count() as u64;
        delivered += n * u64::from(cfg.frame_bytes);
        per_tor[t as usize] += (n * frame_bits) as f64 / capacity_bits;
    }
    let mut per_switch = PerSwitch::new();
    let mut tor_counters = BTreeMap::new();
    let mut rotor_counters = BTreeMap::new();
    let mut lateness = Vec::new();
    for (name, after_status) in &after {
        let after = super::counters(after_status);
        let before = before.get(name).map(super::counters).unwrap_or_default();
        let d = super::counter_delta(&before, &after);
        if after_status.lateness.samples > 0 {
            lateness.push(after_status.lateness);
        }
        let sum = match net.role(name) {
            Ok(RotorRole::Tor(_)) => &mut tor_counters,
            _ => &mut rotor_counters,
        };
        for (key, v) in &d {
            *sum.entry(key.clone()).or_insert(0.0) += v;
        }
        per_switch.insert(name.clone(), d);
    }
    let w = demand(pattern, cfg.tors, perm);
    let (b, formula) = bound(net, dn.chosen.as_ref(), &w);
    Ok((
        RunResult {
            design: dn.design.name().into(),
            pattern: pattern.name().into(),
            routing: net.routing().name().into(),
            matchings: net.matchings.len(),
            permutation: (pattern == Pattern::Permutation).then(|| perm.to_vec()),
            delivered_bytes: delivered,
            delivered_fraction: delivered as f64 * 8.0 / capacity_bits,
            delivered_fraction_per_tor: per_tor,
            offered_fraction: sent_bits
                / (f64::from(cfg.tors)
                    * f64::from(cfg.rotors)
                    * net.rate_bps as f64
                    * send_secs.max(1e-9)),
            send_errors,
            bound: b,
            bound_formula: formula,
            tor_counters,
            rotor_counters,
            lateness_p50_ns: lateness.iter().map(|l| l.p50_ns).max(),
            lateness_p99_ns: lateness.iter().map(|l| l.p99_ns).max(),
        },
        per_switch,
    ))
}

/// Sleeps until `CLOCK_REALTIME` reaches `until_ns`, ticking the progress
/// with the seconds since `start_ns` every 100 ms.
fn wait_until(start_ns: u64, until_ns: u64, tick: &dyn Fn(f64)) {
    loop {
        let now = realtime_ns();
        tick(now.saturating_sub(start_ns) as f64 / 1e9);
        if now >= until_ns {
            return;
        }
        std::thread::sleep(Duration::from_nanos((until_ns - now).min(100_000_000)));
    }
}

/// Mars's delivered fraction over `design`'s, per pattern.
fn mars_ratio(s: &RotorSummary, r: &RunResult) -> Option<f64> {
    let mars = s
        .runs
        .iter()
        .find(|m| m.design == "mars" && m.pattern == r.pattern)?;
    (r.delivered_fraction > 0.0).then(|| mars.delivered_fraction / r.delivered_fraction)
}

fn mars_bound_ratio(s: &RotorSummary, r: &RunResult) -> Option<f64> {
    let mars = s
        .runs
        .iter()
        .find(|m| m.design == "mars" && m.pattern == r.pattern)?;
    (r.bound > 0.0).then(|| mars.bound / r.bound)
}

/// Counters whose name says they count drops, with a non-zero change.
fn drops(c: &BTreeMap<String, f64>) -> String {
    let v: Vec<String> = c
        .iter()
        .filter(|(k, v)| k.contains("drop") && **v != 0.0)
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
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n{:<17} {:<12} {:>10} {:>8} {:>10} {:>10} {:>8}",
        "design", "pattern", "delivered", "bound", "of bound", "mars/this", "paper"
    );
    for r in &s.runs {
        let _ = writeln!(
            out,
            "{:<17} {:<12} {:>9.1}% {:>7.1}% {:>9.0}% {:>10} {:>8}",
            r.design,
            r.pattern,
            r.delivered_fraction * 100.0,
            r.bound * 100.0,
            r.delivered_fraction / r.bound * 100.0,
            ratio(mars_ratio(s, r)),
            paper_cell(r)
        );
    }
    out
}

fn paper_cell(r: &RunResult) -> String {
    let d = Design::from_name(&r.design);
    match d.and_then(paper_ratio) {
        Some(v) if r.pattern == "all-to-all" => format!("{v}x"),
        _ => "-".into(),
    }
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
    let _ = writeln!(
        out,
        "Delivered: frame bytes the receiving hosts got inside the window (kernel receive \
         timestamps) x 8 / (n_t x U x c x window). Bounds are reconstructions (no public Mars \
         code; see `lcmp_topology::rotor` and `bound` in `testbed/src/rotor/experiment.rs`). \
         \"mars/this\" is Mars's delivered fraction over the design's in the same pattern; the \
         paper's ratios (websearch at 20 % load) are Mars 1.37x Opera (not run here), 1.64x the \
         static expander and 7x RotorNet/Sirius (all-to-all).\n"
    );
    let _ = writeln!(
        out,
        "| design | pattern | routing | delivered (of line rate) | bound | delivered / bound | Mars / design (measured) | Mars / design (bounds) | paper Mars / design | offered |"
    );
    let _ = writeln!(out, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for r in &s.runs {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.1} % | {:.1} % | {:.0} % | {} | {} | {} | {:.0} % |",
            r.design,
            r.pattern,
            r.routing,
            r.delivered_fraction * 100.0,
            r.bound * 100.0,
            r.delivered_fraction / r.bound * 100.0,
            ratio(mars_ratio(s, r)),
            ratio(mars_bound_ratio(s, r)),
            paper_cell(r),
            r.offered_fraction * 100.0
        );
    }
    let _ = writeln!(out, "\n## Bounds\n");
    for r in &s.runs {
        let _ = writeln!(
            out,
            "- {} / {}: {:.3} = {}",
            r.design, r.pattern, r.bound, r.bound_formula
        );
    }
    let _ = writeln!(out, "\n## Switch drops during the window\n");
    let _ = writeln!(
        out,
        "| design | pattern | ToRs | rotors | ToR slot lateness p50 / p99 (worst ToR) |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|");
    let us = |v: Option<u64>| v.map_or("-".into(), |v| format!("{:.0} us", v as f64 / 1e3));
    for r in &s.runs {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} / {} |",
            r.design,
            r.pattern,
            drops(&r.tor_counters),
            drops(&r.rotor_counters),
            us(r.lateness_p50_ns),
            us(r.lateness_p99_ns)
        );
    }
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
    let mut patterns: Vec<String> = Vec::new();
    let mut designs: Vec<String> = Vec::new();
    for r in &s.runs {
        if !patterns.contains(&r.pattern) {
            patterns.push(r.pattern.clone());
        }
        if !designs.contains(&r.design) {
            designs.push(r.design.clone());
        }
    }
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
    use crate::rotor::{network, DEFAULT_PARAMS};

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

    fn bound_of(d: Design, pattern: Pattern) -> f64 {
        let (net, chosen) = network(d, &DEFAULT_PARAMS).unwrap();
        let perm = derangement(8, 1);
        bound(&net, chosen.as_ref(), &demand(pattern, 8, &perm)).0
    }

    #[test]
    fn bounds_of_the_default_network() {
        let close = |a: f64, b: f64| assert!((a - b).abs() < 1e-9, "{a} != {b}");
        // Mars d = 4, D = 2: 0.9 / 4, whatever the pattern.
        close(bound_of(Design::Mars, Pattern::AllToAll), 0.225);
        close(bound_of(Design::Mars, Pattern::Permutation), 0.225);
        // Its graph without Valiant (i -> 4i + a mod 8): even ToRs reach
        // 0-3 in one hop, odd ones 4-7, the rest in two; 0, 2, 5, 7 have a
        // self-loop among them, so their routes sum to 3 + 2 x 4 = 11
        // hops, the others' to 4 + 2 x 3 = 10: mean (4 x 11 + 4 x 10) / 56
        // = 1.5. The bound is at most 0.9 / 1.5 (the busiest uplink may
        // bind first).
        let (net, chosen) = network(Design::MarsShift, &DEFAULT_PARAMS).unwrap();
        let (b, why) = bound(&net, chosen.as_ref(), &demand(Pattern::AllToAll, 8, &[]));
        assert!(why.contains("mean route length = 1/1.50"), "{why}");
        assert!(b <= 0.9 / 1.5 + 1e-9 && b > 0.225, "{b}");
        // Complete on 8 ToRs, 2 rotors: 7 shifts + 1 idle matching.
        // All-to-all: 0.9 x 7/8; a permutation has one circuit of 8.
        close(
            bound_of(Design::Complete, Pattern::AllToAll),
            0.9 * 7.0 / 8.0,
        );
        close(bound_of(Design::Complete, Pattern::Permutation), 0.9 / 8.0);
        close(
            bound_of(Design::CompleteValiant, Pattern::AllToAll),
            0.9 * 7.0 / 8.0 / 2.0,
        );
        // Static expander: strides +1 and +3 on 8 ToRs; distances 1..7
        // take 1, 2, 1, 2, 3, 2, 3 hops: mean 2, bound 1/2. The busiest
        // first hop carries at most 4 of 7 destinations: 1 / (2 x 4/7)
        // = 0.875 does not bind.
        close(bound_of(Design::Static, Pattern::AllToAll), 0.5);
        // A permutation leaves each ToR on one uplink: at most 1/U.
        assert!(bound_of(Design::Static, Pattern::Permutation) <= 0.5 + 1e-12);
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
    fn config_defaults_and_validation() {
        let c = RotorExperimentConfig::default();
        assert_eq!(c.params(), DEFAULT_PARAMS);
        let (designs, patterns) = c.validate().unwrap();
        assert_eq!(designs.len(), 3);
        assert_eq!(designs[2].chosen.unwrap().degree, 4);
        assert_eq!(patterns, vec![Pattern::AllToAll, Pattern::Permutation]);
        let bad = |f: &dyn Fn(&mut RotorExperimentConfig)| {
            let mut c = RotorExperimentConfig::default();
            f(&mut c);
            c.validate().unwrap_err().to_string()
        };
        assert!(bad(&|c| c.designs = vec!["opera".into()]).contains("one of complete"));
        assert!(bad(&|c| c.patterns = vec!["incast".into()]).contains("all-to-all"));
        assert!(bad(&|c| c.frame_bytes = 9000).contains("frame_bytes"));
        assert!(bad(&|c| c.window_s = 0.0).contains("window_s"));
        assert!(bad(&|c| c.reconfig_us = 1000).contains("reconfig"));
        let shipped = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../experiments/rotor-throughput.toml"),
        )
        .unwrap();
        let c: RotorExperimentConfig = toml::from_str(&shipped).unwrap();
        c.validate().unwrap();
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
        assert!(md.contains("| complete | all-to-all | direct | 40.0 % | 80.0 % | 50 % | 0.50x | 0.28x | 7x | 100 % |"), "{md}");
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

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
//!
//! The experiment file, the patterns' demand, the bounds and what the
//! results become (table, `report.md`, chart) are
//! `lcmp_results::rotor::experiment`'s; this module runs it on the
//! namespace engine, and [`super::one_process`] on the virtual engine
//! (`--engine virtual`, `engine = "virtual"`): the same runs, traffic and
//! window with the whole network in this process on a virtual clock; the
//! results are made here for both ([`write_results`], [`run_result`]).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;
use lcmp_control::rotor::RotorStatus;
use lcmp_netlab::traffic::realtime_ns;
use lcmp_netlab::{udp_send_flows, Lab, Netns, UdpReceiver};
use lcmp_results::plots::write_bar_chart;
use lcmp_results::rotor::experiment::{
    bound, chart, demand, derangement, report, table, Pattern, RotorExperimentConfig, RotorSummary,
    RunResult, Transport,
};
use lcmp_results::rotor::flows::{flow_problems, flow_table, FlowSummary};
use lcmp_results::rotor::Design;
use lcmp_topology::rotor::DegreeChoice;
use lcmp_topology::rotor_net::{RotorNetwork, RotorRole};
use serde_json::json;

use super::boundary::HEADERS;
use super::{host_name, RotorUpOptions};
use crate::experiment::config::Engine;
use crate::experiment::framework;
use crate::state::State;
use crate::{Error, Result};

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
    /// Measurement window, seconds (overrides the file's); a bare number
    /// is seconds, or with a unit: 8s, 500ms.
    #[arg(long, value_name = "SECS", value_parser = lcmp_topology::secs::parse)]
    pub window_s: Option<f64>,
    /// Warm-up, seconds (overrides the file's); a bare number is seconds,
    /// or with a unit: 2s, 500ms.
    #[arg(long, value_name = "SECS", value_parser = lcmp_topology::secs::parse)]
    pub warmup_s: Option<f64>,
    /// How ToR-rotor links are made (overrides the file's): `veth`, a
    /// process per switch (the default), or `memory`, every switch in one
    /// process (larger networks fit the cores).
    #[arg(long, value_name = "KIND", value_parser = crate::bed::parse_links)]
    pub links: Option<lcmp_netlab::SwitchLinks>,
    /// Where the experiment runs (overrides the file's `engine`):
    /// `namespaces` (the default: namespaces, lcmp-switch processes and
    /// kernel UDP (or lcmp-traffic NDP) on the wall clock; needs root),
    /// `virtual` (the same networks, traffic and window in this one
    /// process on a virtual clock: no root, deterministic) or `wall` (that
    /// one process paced by the wall clock: late when the machine is
    /// slow). --name, --links and switch_args, which configure the
    /// namespaces' testbed, are refused on virtual and wall.
    #[arg(long, value_enum, value_name = "ENGINE")]
    pub engine: Option<Engine>,
}

/// The file's config (or the defaults) with the command line's overrides.
pub fn config_from_args(a: &RotorExperimentArgs) -> Result<RotorExperimentConfig> {
    let mut c = match &a.config {
        Some(f) => {
            let text = std::fs::read_to_string(f)
                .map_err(|e| Error::new(format!("{}: {e}", f.display())))?;
            // One line, located (toml has no position for a key nested too
            // deep) and with the file's text echoed.
            toml::from_str(&text)
                .map_err(|e| Error::new(lcmp_topology::TomlError::new(&text, &e).in_file(f)))?
        }
        None => RotorExperimentConfig::default(),
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
    if let Some(l) = a.links {
        c.links = Some(l.name().to_string());
    }
    if let Some(e) = a.engine {
        c.engine = Some(e.name().to_string());
    }
    let engine = engine_of(&c)?;
    if a.name.is_some() && engine != Engine::Namespaces {
        return Err(Error::new(format!(
            "--name names the namespaces' testbed: not with engine {}, which builds none",
            engine.name()
        )));
    }
    Ok(c)
}

/// The engine the experiment runs on (`engine`, checked; default
/// namespaces).
pub fn engine_of(c: &RotorExperimentConfig) -> Result<Engine> {
    let Some(name) = c.engine.as_deref() else {
        return Ok(Engine::Namespaces);
    };
    <Engine as clap::ValueEnum>::from_str(name, false).map_err(|_| {
        Error::new(format!(
            "engine = {}: one of namespaces, virtual, wall",
            lcmp_topology::echo(name)
        ))
    })
}

/// Refuses, in one line, what configures the namespaces' testbed under
/// an engine that builds none.
fn check_engine(c: &RotorExperimentConfig) -> Result<()> {
    let engine = engine_of(c)?;
    match engine {
        Engine::Namespaces => Ok(()),
        Engine::Virtual | Engine::Wall => {
            let e = engine.name();
            if let Some(l) = &c.links {
                return Err(Error::new(format!(
                    "links = {} (--links) makes the namespaces' ToR-rotor links: not with \
                     engine {e}, whose links are all in memory",
                    lcmp_topology::echo(l)
                )));
            }
            if !c.switch_args.is_empty() {
                return Err(Error::new(format!(
                    "switch_args are lcmp-switch command-line arguments: not with engine \
                     {e}, which runs no lcmp-switch"
                )));
            }
            Ok(())
        }
    }
}

/// How the experiment's ToR-rotor links are made (`links`, checked).
pub fn links_of(c: &RotorExperimentConfig) -> Result<lcmp_netlab::SwitchLinks> {
    c.links
        .as_deref()
        .map_or(Ok(lcmp_netlab::SwitchLinks::Veth), |l| {
            lcmp_netlab::SwitchLinks::from_name(l).map_err(Error::new)
        })
}

/// Checks everything in `c` and returns the designs' networks and the
/// patterns, before anything is started.
pub fn validate(c: &RotorExperimentConfig) -> Result<(Vec<DesignNet>, Vec<Pattern>)> {
    crate::state::validate_name(&c.name)?;
    check_engine(c)?;
    links_of(c)?;
    if c.transport == Transport::Ndp {
        if let Some(first) = flow_problems(c).into_iter().next() {
            return Err(Error::new(first));
        }
    }
    let positive = |v: f64, what: &str| {
        if v.is_finite() && v > 0.0 {
            Ok(())
        } else {
            Err(Error::new(format!(
                "{what} must be a positive number, not {v}"
            )))
        }
    };
    positive(c.window_s, "window_s")?;
    positive(c.warmup_s + 1.0, "warmup_s + 1")?;
    positive(c.load, "load")?;
    positive(c.delay_budget_slots, "delay_budget_slots")?;
    let min_frame = HEADERS + lcmp_netlab::traffic::UDP_HEADER as u32;
    if !(min_frame..=1514).contains(&c.frame_bytes) {
        return Err(Error::new(format!(
            "frame_bytes = {}: need {min_frame} to 1514 (MTU 1500)",
            c.frame_bytes
        )));
    }
    if c.flows_per_destination == 0 {
        return Err(Error::new("flows_per_destination must be at least 1"));
    }
    if c.tors < 3 && c.patterns.iter().any(|p| p == "permutation") {
        return Err(Error::new(
            "a permutation needs at least 3 ToRs to be random",
        ));
    }
    let p = c.params();
    let mut designs = Vec::new();
    for name in &c.designs {
        let d = Design::from_name(name).ok_or_else(|| {
            Error::new(format!(
                "design {name:?}: one of {}",
                Design::ALL.map(Design::name).join(", ")
            ))
        })?;
        let opts = super::NetworkOptions {
            mars_degree: c.mars_degree,
            tx_guard_ns: (c.transport == Transport::Ndp).then_some(c.propagation_ns),
        };
        let (net, chosen) = super::network(d, &p, opts)?;
        designs.push(DesignNet {
            design: d,
            net,
            chosen,
        });
    }
    if designs.is_empty() {
        return Err(Error::new("no design to run"));
    }
    let patterns = c
        .patterns
        .iter()
        .map(|s| {
            Pattern::from_name(s)
                .ok_or_else(|| Error::new(format!("pattern {s:?}: one of all-to-all, permutation")))
        })
        .collect::<Result<Vec<_>>>()?;
    if patterns.is_empty() {
        return Err(Error::new("no pattern to run"));
    }
    Ok((designs, patterns))
}

/// A design's network.
#[derive(Debug, Clone)]
pub struct DesignNet {
    /// The design.
    pub design: Design,
    /// Its network file.
    pub net: RotorNetwork,
    /// Mars's planner choice.
    pub chosen: Option<DegreeChoice>,
}

/// Runs the experiment the command line describes and prints the table.
pub fn run_cli(a: &RotorExperimentArgs, say: &dyn Fn(&str)) -> Result<()> {
    let cfg = config_from_args(a)?;
    if cfg.transport == Transport::Ndp {
        let s = run_flows(&cfg, &a.out, say)?;
        print!("{}", flow_table(&s));
        println!(
            "\nreport: {}\nsummary: {}\nplots: {}",
            a.out.join("report.md").display(),
            a.out.join("summary.json").display(),
            a.out.join("plots").display()
        );
        return Ok(());
    }
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

/// Runs the flow experiment (`transport = "ndp"`): every (design,
/// pattern, load, K) on the virtual engine ([`super::flows`]), writing
/// `summary.json`, `report.md`, the plots and every run's counter changes
/// under `out`.
pub fn run_flows(
    cfg: &RotorExperimentConfig,
    out: &Path,
    say: &dyn Fn(&str),
) -> Result<FlowSummary> {
    let (designs, patterns) = validate(cfg)?;
    super::flows::run(cfg, &designs, &patterns, out, say)
}

/// Runs every (design, pattern) on one testbed and writes `summary.json`,
/// `report.md`, `plots/rotor-throughput.{svg,png}` and per run the
/// counter changes of every switch (`runs/<design>-<pattern>.json`) under
/// `out`; on the engine `cfg` names.
pub fn run(cfg: &RotorExperimentConfig, out: &Path, say: &dyn Fn(&str)) -> Result<RotorSummary> {
    // Before root is asked for: a refused engine is refused as such.
    check_engine(cfg)?;
    if engine_of(cfg)? != Engine::Namespaces {
        return super::one_process::run(cfg, out, say);
    }
    framework::run(out, say, || {
        let (designs, patterns) = validate(cfg)?;
        Ok(RotorExperiment {
            cfg,
            designs,
            patterns,
            perm: derangement(cfg.tors, cfg.seed),
            running: 0,
        })
    })
}

/// The rotor experiment as [`framework::run`] runs it.
struct RotorExperiment<'a> {
    cfg: &'a RotorExperimentConfig,
    designs: Vec<DesignNet>,
    patterns: Vec<Pattern>,
    /// The permutation pattern's ToR pairs.
    perm: Vec<u32>,
    /// The design (index into `designs`) whose network the switches run.
    running: usize,
}

/// One run: a design under a pattern.
struct RotorRun {
    /// `<design>-<pattern>`.
    id: String,
    /// Index into [`RotorExperiment::designs`].
    design: usize,
    pattern: Pattern,
    /// The run's position among all runs.
    index: usize,
}

impl framework::Experiment for RotorExperiment<'_> {
    type Config = RotorExperimentConfig;
    type Run = RotorRun;
    type Outcome = RunResult;
    type Summary = RotorSummary;

    fn config(&self) -> &RotorExperimentConfig {
        self.cfg
    }

    /// Up with the first design's network; the runs of each further design
    /// restart the switches with its own.
    fn up(&mut self, say: &dyn Fn(&str)) -> Result<State> {
        let first = &self.designs[0];
        super::up(
            &RotorUpOptions {
                name: self.cfg.name.clone(),
                network: first.net.clone(),
                source: format!("rotor-experiment ({})", first.design.name()),
                switch_args: self.cfg.switch_args.clone(),
                links: links_of(self.cfg)?,
            },
            say,
        )
    }

    fn plan(
        &mut self,
        _: &mut framework::Testbed,
        _: &Path,
        _: &dyn Fn(&str),
    ) -> Result<Vec<RotorRun>> {
        let mut runs = Vec::new();
        for (design, dn) in self.designs.iter().enumerate() {
            for &pattern in &self.patterns {
                runs.push(RotorRun {
                    id: format!("{}-{}", dn.design.name(), pattern.name()),
                    design,
                    pattern,
                    index: runs.len(),
                });
            }
        }
        Ok(runs)
    }

    fn run_id(run: &RotorRun) -> &str {
        &run.id
    }

    fn seconds(&self, _: &RotorRun) -> f64 {
        self.cfg.warmup_s + self.cfg.window_s
    }

    fn run(
        &mut self,
        bed: &mut framework::Testbed,
        run: &RotorRun,
        progress: &framework::RunProgress<'_>,
        out: &Path,
        say: &dyn Fn(&str),
    ) -> Result<(RunResult, String)> {
        let dn = &self.designs[run.design];
        if run.design != self.running {
            progress.suspend(|| super::restart(&mut bed.state, &bed.lab, &dn.net, say))?;
            self.running = run.design;
        }
        let (r, per_switch) = run_one(
            self.cfg,
            &bed.state,
            &bed.lab,
            dn,
            run.pattern,
            &self.perm,
            run.index,
            &|elapsed| progress.tick(elapsed),
        )?;
        write_run_counters(out, &run.id, &per_switch)?;
        let line = result_line(&r);
        Ok((r, line))
    }

    fn finish(
        self,
        results: Vec<RunResult>,
        _: Instant,
        out: &Path,
        _: &dyn Fn(&str),
    ) -> Result<RotorSummary> {
        write_results(self.cfg, &self.designs, results, out)
    }
}

/// A run's result line.
pub(super) fn result_line(r: &RunResult) -> String {
    format!(
        "{:<17} {:<12} delivered {:>6.1} % of line rate (bound {:>5.1} %, offered {:>5.1} %)",
        r.design,
        r.pattern,
        r.delivered_fraction * 100.0,
        r.bound * 100.0,
        r.offered_fraction * 100.0
    )
}

/// Writes a run's counter changes per switch (`runs/<id>.json`).
pub(super) fn write_run_counters(out: &Path, id: &str, per_switch: &PerSwitch) -> Result<()> {
    std::fs::write(
        out.join("runs").join(format!("{id}.json")),
        serde_json::to_string_pretty(per_switch).expect("counters serialize"),
    )?;
    Ok(())
}

/// Writes `summary.json`, `report.md` and the chart of the runs' results
/// under `out`, whichever engine ran them.
pub(super) fn write_results(
    cfg: &RotorExperimentConfig,
    designs: &[DesignNet],
    results: Vec<RunResult>,
    out: &Path,
) -> Result<RotorSummary> {
    let summary = RotorSummary {
        config: cfg.clone(),
        mars: mars_json(designs),
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

/// Mars's degree and its figures, for the summaries.
pub(super) fn mars_json(designs: &[DesignNet]) -> Option<serde_json::Value> {
    designs.iter().find_map(|d| {
        d.chosen.map(|c| {
            json!({
                "degree": c.degree,
                "diameter": c.diameter,
                "throughput_bound": c.throughput_bound,
                "delay_ns": c.delay_ns,
                "buffer_bytes": c.buffer_bytes,
            })
        })
    })
}

/// Every host's destinations under `pattern`, hosts in (ToR, host) order.
pub(super) fn destinations(
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

/// Every switch's counter changes over the window, by switch and counter.
pub(super) type PerSwitch = BTreeMap<String, BTreeMap<String, f64>>;

/// The gap between a host's frames: `load` x U x c per ToR, shared by its
/// hosts.
pub(super) fn send_gap(cfg: &RotorExperimentConfig, net: &RotorNetwork) -> Duration {
    let frame_bits = u64::from(cfg.frame_bytes) * 8;
    let per_host_bps =
        cfg.load * f64::from(cfg.rotors) * net.rate_bps as f64 / f64::from(cfg.hosts_per_tor);
    Duration::from_secs_f64(frame_bits as f64 / per_host_bps)
}

/// The rounds a host sends `per_round` frames in (one per flow): past the
/// window's end, so the senders still send while it closes.
pub(super) fn send_rounds(cfg: &RotorExperimentConfig, gap: Duration, per_round: usize) -> u64 {
    let total = cfg.warmup_s + cfg.window_s;
    ((total + 0.5) / (gap.as_secs_f64() * per_round as f64)).ceil() as u64
}

/// The window's start and end, ns from the senders' start.
pub(super) fn window_ns(cfg: &RotorExperimentConfig) -> (u64, u64) {
    let start = (cfg.warmup_s * 1e9) as u64;
    (start, start + (cfg.window_s * 1e9) as u64)
}

/// What a run measured, whichever engine ran it.
pub(super) struct Measured<'a> {
    /// Per host, its ToR and the frames it received inside the window.
    pub received: Vec<(u32, u64)>,
    /// Frames the senders sent.
    pub sent_frames: u64,
    /// Over how long, seconds.
    pub send_secs: f64,
    /// Frames the senders failed to send.
    pub send_errors: u64,
    /// Every switch's status at the window's start.
    pub before: &'a BTreeMap<String, RotorStatus>,
    /// And at its end.
    pub after: &'a BTreeMap<String, RotorStatus>,
}

/// A run's result and its counter changes per switch, from what it
/// measured.
pub(super) fn run_result(
    cfg: &RotorExperimentConfig,
    dn: &DesignNet,
    pattern: Pattern,
    perm: &[u32],
    m: Measured<'_>,
) -> (RunResult, PerSwitch) {
    let net = &dn.net;
    let frame_bits = u64::from(cfg.frame_bytes) * 8;
    let capacity_bits =
        f64::from(cfg.tors) * f64::from(cfg.rotors) * net.rate_bps as f64 * cfg.window_s;
    let mut delivered = 0u64;
    let mut per_tor = vec![0.0; cfg.tors as usize];
    for &(t, n) in &m.received {
        delivered += n * u64::from(cfg.frame_bytes);
        per_tor[t as usize] += (n * frame_bits) as f64 / capacity_bits;
    }
    let mut per_switch = PerSwitch::new();
    let mut tor_counters = BTreeMap::new();
    let mut rotor_counters = BTreeMap::new();
    let mut lateness = Vec::new();
    for (name, after_status) in m.after {
        let after = super::counters(after_status);
        let before = m.before.get(name).map(super::counters).unwrap_or_default();
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
    let sent_bits = (m.sent_frames * frame_bits) as f64;
    (
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
                    * m.send_secs.max(1e-9)),
            send_errors: m.send_errors,
            bound: b,
            bound_formula: formula,
            tor_counters,
            rotor_counters,
            lateness_p50_ns: lateness.iter().map(|l| l.p50_ns).max(),
            lateness_p99_ns: lateness.iter().map(|l| l.p99_ns).max(),
        },
        per_switch,
    )
}

/// Senders wake at most every this often and send what is due by then:
/// eight senders waking once per 60 us frame would take most of the two
/// CPUs the switches need. A ToR queues a few frames early like any
/// others.
const SEND_SLACK: Duration = Duration::from_micros(500);

#[allow(clippy::too_many_arguments)]
fn run_one(
    cfg: &RotorExperimentConfig,
    st: &State,
    tb: &Lab,
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
    let gap = send_gap(cfg, net);
    let payload = (cfg.frame_bytes - HEADERS) as usize;
    let ports = vec![0u16; cfg.flows_per_destination as usize];
    let start = realtime_ns();
    let senders: Vec<_> = hosts
        .iter()
        .zip(&dsts)
        .map(|(&(t, h), to)| {
            let ns_name = tb.host(&host_name(t, h)).netns.name().to_string();
            let rounds = send_rounds(cfg, gap, ports.len() * to.len());
            let (to, ports) = (to.clone(), ports.clone());
            std::thread::spawn(move || {
                let ns = Netns::open(&ns_name)?;
                udp_send_flows(&ns, &to, &ports, 0, rounds, payload, gap, SEND_SLACK)
            })
        })
        .collect();
    let (window_start, window_end) = window_ns(cfg);
    let (window_start, window_end) = (start + window_start, start + window_end);
    wait_until(start, window_start, tick);
    let before = super::fresh_status(st)?;
    wait_until(start, window_end, tick);
    let after = super::fresh_status(st)?;
    let mut sent_frames = 0;
    let mut send_secs = 0.0f64;
    let mut send_errors = 0;
    for s in senders {
        let r = s
            .join()
            .map_err(|_| Error::new("a UDP sender panicked"))??;
        sent_frames += r.sent;
        send_secs = send_secs.max(r.elapsed.as_secs_f64());
        send_errors += r.errors;
    }
    let period = net.slot_ns * u64::from(net.per_rotor);
    let quiet = Duration::from_nanos(8 * period).max(Duration::from_millis(300));
    let mut received = Vec::new();
    for (rx, &(t, _)) in receivers.into_iter().zip(&hosts) {
        let rep = rx.finish(quiet, Duration::from_secs(10))?;
        let n = rep
            .arrivals
            .iter()
            .filter(|a| (window_start..window_end).contains(&a.rx_ns()))
            .count() as u64;
        received.push((t, n));
    }
    Ok(run_result(
        cfg,
        dn,
        pattern,
        perm,
        Measured {
            received,
            sent_frames,
            send_secs,
            send_errors,
            before: &before,
            after: &after,
        },
    ))
}

/// Sleeps until `CLOCK_REALTIME` reaches `until_ns`, ticking the progress
/// with the seconds since `start_ns` every 100 ms.
pub(super) fn wait_until(start_ns: u64, until_ns: u64, tick: &dyn Fn(f64)) {
    loop {
        let now = realtime_ns();
        tick(now.saturating_sub(start_ns) as f64 / 1e9);
        if now >= until_ns {
            return;
        }
        std::thread::sleep(Duration::from_nanos((until_ns - now).min(100_000_000)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lcmp_results::rotor::DEFAULT_PARAMS;

    use crate::rotor::{network, NetworkOptions};

    fn bound_of(d: Design, pattern: Pattern) -> f64 {
        let (net, chosen) = network(d, &DEFAULT_PARAMS, NetworkOptions::default()).unwrap();
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
        let (net, chosen) = network(
            Design::MarsShift,
            &DEFAULT_PARAMS,
            NetworkOptions::default(),
        )
        .unwrap();
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
        // Static expander: the seeded random 2-regular digraph on 8 ToRs,
        // out-neighbours 0: 7 5, 1: 3 6, 2: 5 4, 3: 4 1, 4: 1 0, 5: 2 7,
        // 6: 0 2, 7: 6 3. Breadth first, ToRs 0, 1, 2, 5, 6 reach 2 others
        // in one hop, 3 in two and 2 in three (14 hops), 3 reaches 2, 2, 3
        // (15), 4 and 7 reach 2, 4, 1 (13): 111 hops over 56 pairs, bound
        // 56/111. The first hop would bind only with more than 111/112 of
        // a ToR's demand on one uplink, but the other uplink's neighbour
        // is a destination of its own.
        let (net, _) = network(Design::Static, &DEFAULT_PARAMS, NetworkOptions::default()).unwrap();
        assert_eq!(
            net.matchings,
            vec![vec![7, 3, 5, 4, 1, 2, 0, 6], vec![5, 6, 4, 1, 0, 7, 2, 3]]
        );
        close(bound_of(Design::Static, Pattern::AllToAll), 56.0 / 111.0);
        // A permutation leaves each ToR on one uplink: at most 1/U.
        assert!(bound_of(Design::Static, Pattern::Permutation) <= 0.5 + 1e-12);
    }

    #[test]
    fn config_defaults_and_validation() {
        let c = RotorExperimentConfig::default();
        assert_eq!(c.params(), DEFAULT_PARAMS);
        let (designs, patterns) = validate(&c).unwrap();
        assert_eq!(designs.len(), 3);
        assert_eq!(designs[2].chosen.unwrap().degree, 4);
        assert_eq!(patterns, vec![Pattern::AllToAll, Pattern::Permutation]);
        let bad = |f: &dyn Fn(&mut RotorExperimentConfig)| {
            let mut c = RotorExperimentConfig::default();
            f(&mut c);
            validate(&c).unwrap_err().to_string()
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
        validate(&c).unwrap();
        // The virtual engine's file is the same experiment: only the
        // engine differs (and the testbed's name, which it has no use for).
        let virt = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../experiments/rotor-throughput-virtual.toml"),
        )
        .unwrap();
        let v: RotorExperimentConfig = toml::from_str(&virt).unwrap();
        validate(&v).unwrap();
        assert_eq!(engine_of(&v).unwrap(), Engine::Virtual);
        assert_eq!(engine_of(&c).unwrap(), Engine::Namespaces);
        assert_eq!(
            RotorExperimentConfig {
                engine: None,
                name: c.name.clone(),
                ..v
            },
            c
        );
    }
}

#[cfg(test)]
mod config_file_tests {
    use super::*;

    /// A file error is one line with the file and its line, also for a
    /// key toml refuses without a position (before: "FILE: recursion
    /// limit").
    #[test]
    fn a_config_file_error_is_one_line_with_its_line() {
        let dir = std::env::temp_dir().join(format!("lcmp-rotor-toml-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("rotor.toml");
        std::fs::write(
            &file,
            format!("name = 'r'\n{} = 1\n", vec!["a"; 5000].join(".")),
        )
        .unwrap();
        let args = RotorExperimentArgs {
            config: Some(file.clone()),
            out: dir.join("out"),
            name: None,
            window_s: None,
            warmup_s: None,
            links: None,
            engine: None,
        };
        let err = config_from_args(&args).unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "{}:2: a dotted key of more than 80 parts; the TOML reader nests at most 80",
                file.display()
            )
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

//! `lcmp-testbed experiment`: FCT experiments comparing path-selection
//! policies on a namespace testbed (see [`config::ExperimentArgs`] for what
//! a run does, `calibrate` for faithfulness checks, `run` for one run,
//! `framework` for what every experiment does around its runs), or with
//! the whole network in this one process, on the virtual clock or the wall
//! clock (`one_process`; [`config::Engine`] says which).

pub mod calibrate;
pub mod config;
pub mod framework;
pub(crate) mod ideals;
pub mod one_process;
pub mod run;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use lcmp_netlab::{Bg, Lab};
use lcmp_results::analysis::{self, IdealModel, PathSpec, RunInput};
use lcmp_results::{plots, report, trace};
use lcmp_topology::{SwitchId, Topology};
use lcmp_traffic::record::FlowRecord;
use lcmp_traffic::rocev2::cc::CongestionControl;
use lcmp_traffic::rocev2::client::RoceOptions;
use serde_json::json;

pub use config::{
    check_policy, ExperimentArgs, ExperimentConfig, LoadDefinition, TopologyArgs, Transport,
};
pub use framework::{catch_signals, progress_bar, TestbedGuard};

use crate::bed::{self, AgentOptions, UpOptions};
use crate::state::{State, SwitchSettings};
use crate::{Error, Result};

/// TCP port of the traffic servers.
pub const SERVER_PORT: u16 = 5001;

/// UDP port of RoCEv2 (the rocev2 traffic servers listen on it).
pub const ROCEV2_PORT: u16 = 4791;

/// The switches' ECN marking under rocev2: the simulator's DCQCN
/// thresholds (100-400 KB at 25 Gbit/s, i.e. 32-128 us at link rate at any
/// rate; multiplied by the time dilation), marking with probability up to
/// 0.2 between them, kmin at least 2000 bytes (about two 1000-byte
/// packets).
pub const ROCEV2_ECN_LINK_TIME_US: (f64, f64) = (32.0, 128.0);
/// See [`ROCEV2_ECN_LINK_TIME_US`].
pub const ROCEV2_ECN_PMAX: f64 = 0.2;
/// See [`ROCEV2_ECN_LINK_TIME_US`].
pub const ROCEV2_ECN_FLOOR_BYTES: u64 = 2000;

/// The switches' drop headroom under rocev2: the simulator's fabric is
/// lossless (PFC), so a port drops only beyond 1000 times its buffer
/// (docs/experiments.md, RDMA-faithful experiments).
pub const ROCEV2_DROP_HEADROOM: u64 = 1000;

/// The switch settings of an experiment running `policy` (a policy spec:
/// its weights in place of the experiment's): under rocev2
/// the simulator's ECN marking (thresholds in the network's time, decided
/// at dequeue) and lossless headroom, then the configuration's
/// `switch_args`, which override them (the switch takes an option's last
/// value). Durations are the network's: the switches stretch them by the
/// testbed's scaling.
pub fn switch_settings(cfg: &ExperimentConfig, policy: &str) -> SwitchSettings {
    let rocev2 = cfg.transport == Transport::Rocev2;
    let (kmin, kmax) = ROCEV2_ECN_LINK_TIME_US;
    SwitchSettings {
        alpha: cfg.alpha,
        beta: cfg.beta,
        ecn_link_time: rocev2
            .then(|| format!("{kmin},{kmax},{ROCEV2_ECN_PMAX},{ROCEV2_ECN_FLOOR_BYTES}")),
        // The simulator marks as a packet leaves the queue (HPCC's
        // `SwitchNotifyDequeue`), on the bytes behind it.
        ecn_mark_at: rocev2.then(|| "dequeue".to_string()),
        drop_headroom: rocev2.then_some(ROCEV2_DROP_HEADROOM),
        metric: cfg.metric.map(|m| m.name().to_string()),
        // HPCC's senders read the hops the switches push.
        int: matches!(cfg.rocev2_cc(), Ok(Some(CongestionControl::Hpcc))),
        extra_args: cfg.switch_args.clone(),
        ..SwitchSettings::default()
    }
    .for_policy(policy)
}

/// The hosts' congestion control as every run of an experiment passes
/// it on ([`host_cc`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct HostCc {
    /// Its name: the RoCEv2 CC under rocev2, the kernel's under tcp
    /// (`None`: the kernel's default).
    pub name: Option<String>,
    /// HPCC's base RTT ([`max_host_rtt_ns`] of the network as written).
    pub base_rtt_ns: Option<u64>,
}

/// `cfg`'s hosts' congestion control; for HPCC its base RTT, from the
/// network as written (unscaled: each engine stretches it with the rest
/// of the network's time).
pub(crate) fn host_cc(cfg: &ExperimentConfig) -> Result<HostCc> {
    let base_rtt_ns = match cfg.rocev2_cc()? {
        Some(CongestionControl::Hpcc) => {
            let network = bed::testbed_network(
                cfg.topology.as_deref(),
                cfg.hosts_per_dc,
                cfg.host_switches().as_deref(),
            )?;
            Some(max_host_rtt_ns(&network, RoceOptions::default().payload))
        }
        _ => None,
    };
    Ok(HostCc {
        name: cfg.cc_name(),
        base_rtt_ns,
    })
}

/// The largest base RTT between two hosts of `network` on a path its
/// switches may choose, ns: the simulator's `maxRtt` (HPCC's base RTT T),
/// twice the one-way delay (host links included) plus one `payload`-byte
/// packet's serialization per hop, one way (the simulator's `pairTxDelay`).
/// A route's candidates give each port's shortest minimum-hop
/// continuation, its first link's rate and its bottleneck, at which the
/// hops after the first are taken (exact up to two switch hops, an upper
/// bound beyond).
pub fn max_host_rtt_ns(network: &Topology, payload: u32) -> u64 {
    // Each switch's slowest and longest host link.
    let host_link = |sw: SwitchId| {
        network
            .hosts()
            .iter()
            .filter(|h| h.switch == sw)
            .map(|h| (h.delay_ns, h.rate_bps))
            .fold(None, |acc: Option<(u64, u64)>, (d, r)| {
                Some(acc.map_or((d, r), |(ad, ar)| (ad.max(d), ar.min(r))))
            })
    };
    let mut max = 0;
    for s in network.switches() {
        let Some((src_delay, src_rate)) = host_link(s.id) else {
            continue;
        };
        for route in network.routes(s.id) {
            let Some((dst_delay, dst_rate)) = host_link(route.dest_switch) else {
                continue;
            };
            let tx_ns =
                |rate_bps: u64| (u64::from(payload) * 8_000_000_000).div_ceil(rate_bps.max(1));
            for c in &route.candidates {
                let tx = tx_ns(src_rate)
                    + tx_ns(c.local_rate_bps)
                    + u64::from(c.hops.saturating_sub(1)) * tx_ns(c.bottleneck_bps)
                    + tx_ns(dst_rate);
                let rtt = 2 * (c.delay_ns + src_delay + dst_delay) + tx;
                max = max.max(rtt);
            }
        }
    }
    max
}

/// Each sender's flows of a trace replay.
type Schedules = std::collections::BTreeMap<String, Vec<trace::ScheduleRow>>;

/// Who sends and who receives: `from`'s hosts to `to`'s (`pair`), or
/// every host when a trace's flows go between any two DCs (`pair` is
/// `None`; [`ExperimentConfig::all_pairs`]).
pub(crate) struct Ends {
    pub pair: Option<(SwitchId, SwitchId)>,
    pub senders: Vec<String>,
    pub receivers: Vec<String>,
}

impl Ends {
    /// The ends of `cfg` in `topo`, its validated effective topology.
    pub fn of(cfg: &ExperimentConfig, topo: &Topology) -> Ends {
        if cfg.all_pairs() {
            let all: Vec<String> = topo.hosts().iter().map(|h| h.name.clone()).collect();
            return Ends {
                pair: None,
                senders: all.clone(),
                receivers: all,
            };
        }
        let from = topo.switch_by_name(&cfg.from).expect("validated").id;
        let to = topo.switch_by_name(&cfg.to).expect("validated").id;
        Ends {
            pair: Some((from, to)),
            senders: hosts_behind(topo, from),
            receivers: hosts_behind(topo, to),
        }
    }
}

/// A trace's flows per sender, checked against the testbed: every sender
/// one of `senders` (`from`'s hosts), every receiver one of `receivers`
/// (`to`'s; every host of the testbed when every DC sends).
fn trace_schedules(
    cfg: &ExperimentConfig,
    topo: &Topology,
    senders: &[String],
    receivers: &[String],
) -> Result<Option<(trace::Trace, Schedules)>> {
    let (Some(file), Some(format)) = (&cfg.trace, &cfg.trace_format) else {
        return Ok(None);
    };
    let format: trace::TraceFormat = format.parse().map_err(Error::new)?;
    let t = trace::load(file, format).map_err(Error::new)?;
    let schedules = t
        .schedules(
            &trace::HostMap::new(topo, trace::ARTIFACT_HOSTS_PER_DC),
            &cfg.scaling(),
        )
        .map_err(Error::new)?;
    for (sender, rows) in &schedules {
        if !senders.contains(sender) {
            return Err(Error::new(format!(
                "{}: host {sender} sends, but the experiment sends from {}'s hosts only",
                file.display(),
                cfg.from
            )));
        }
        if let Some(r) = rows.iter().find(|r| !receivers.contains(&r.receiver)) {
            return Err(Error::new(format!(
                "{}: flow {} goes to {}, but the experiment receives at {}'s hosts only",
                file.display(),
                r.id,
                r.receiver,
                cfg.to
            )));
        }
    }
    Ok(Some((t, schedules)))
}

/// What `experiment --check` prints: `cfg` checked as a run checks it
/// before building anything (numbers, topology, engine options, workloads,
/// the trace against the testbed's hosts), then the runs it would make.
/// Builds and writes nothing; needs no root.
pub fn check(cfg: &ExperimentConfig) -> Result<String> {
    use std::fmt::Write;
    let topo = cfg.validate()?;
    let Ends {
        pair,
        senders,
        receivers,
    } = Ends::of(cfg, &topo);
    let replay = trace_schedules(cfg, &topo, &senders, &receivers)?;
    // Between any DCs: every pair's paths and ideal, as a run finds them.
    let pairs = match &replay {
        Some((t, schedules)) if pair.is_none() => Some(ideals::Ideals::of_pairs(
            &topo,
            cfg.transport,
            t,
            schedules,
        )?),
        _ => None,
    };
    let switches = switch_settings(cfg, "ecmp");
    let cc = host_cc(cfg)?;
    let base_spec = |policy: &str, seed: u64| run_spec(cfg, &switches, &cc, policy, seed, None);
    let (specs, trace_echo) = plan_runs(cfg, &topo, &senders, replay.as_ref(), None, &base_spec)?;
    let mut o = String::new();
    let topology = cfg
        .topology
        .as_ref()
        .map_or("the built-in 8-DC network".to_string(), |p| {
            p.display().to_string()
        });
    let _ = writeln!(
        o,
        "experiment {:?}: engine {}, transport {}, policies {}",
        cfg.name,
        cfg.engine.name(),
        cfg.transport.name(),
        cfg.policies.join(", ")
    );
    let ends = match pair {
        Some(_) => format!(
            "from {} ({} hosts) to {} ({} hosts)",
            cfg.from,
            senders.len(),
            cfg.to,
            receivers.len()
        ),
        None => "flows between any two DCs (every host sends and receives)".to_string(),
    };
    let _ = writeln!(
        o,
        "topology {topology}: {} switches, {} hosts; {ends}",
        topo.switches().len(),
        topo.hosts().len(),
    );
    if let Some(pairs) = &pairs {
        let rtts = pairs.pair_base_rtts_ns();
        let ms = |ns: Option<&u64>| ns.map_or(0.0, |&ns| ns as f64 / 1e6);
        let _ = writeln!(
            o,
            "ideal per pair of the hosts' switches: {} pairs ({} DC pairs), base RTTs {:.3}-{:.3} ms",
            rtts.len(),
            pairs.dc_pairs(&topo),
            ms(rtts.iter().min()),
            ms(rtts.iter().max())
        );
    }
    let _ = writeln!(o, "scaling: {}", cfg.scaling());
    if let Some(name) = &cc.name {
        let _ = match cc.base_rtt_ns {
            Some(ns) => writeln!(
                o,
                "congestion control: {name}, base RTT {:.6} ms (INT on the switches)",
                ns as f64 / 1e6
            ),
            None => writeln!(o, "congestion control: {name}"),
        };
    }
    match &replay {
        Some((t, _)) => {
            let bytes: u64 = t.flows.iter().map(|f| f.size_bytes).sum();
            let _ = writeln!(
                o,
                "trace {} ({}): {} flows, {} bytes, arriving over {:.3} s, offered load {:.3}",
                t.file,
                t.format.name(),
                t.flows.len(),
                bytes,
                trace_echo["span_s"].as_f64().unwrap_or(0.0),
                trace_echo["offered_load"].as_f64().unwrap_or(0.0)
            );
        }
        None => {
            let _ = writeln!(
                o,
                "workloads {}; loads {:?}; {} s of arrivals, {} s warm-up, drain at most {} s",
                cfg.workloads.join(", "),
                cfg.loads,
                cfg.duration_s,
                cfg.warmup(),
                cfg.drain_s
            );
        }
    }
    for (policy, files) in &cfg.reference {
        // The simulator's FCT files: read as the fidelity reads them.
        let mut names = Vec::new();
        for f in std::iter::once(files.file()).chain(files.rerun()) {
            let t = trace::load(f, trace::TraceFormat::HpccFct).map_err(Error::new)?;
            names.push(format!("{} ({} flows)", f.display(), t.flows.len()));
        }
        let _ = writeln!(o, "reference {policy}: {}", names.join(", "));
    }
    let _ = writeln!(o, "{} runs:", specs.len());
    for (load, spec) in &specs {
        let _ = writeln!(o, "  {}  (load {load})", spec.id);
    }
    o.push_str("checked: nothing was built or run\n");
    Ok(o)
}

/// Runs the experiment the command line describes.
pub fn run_cli(args: &ExperimentArgs, say: &dyn Fn(&str)) -> Result<()> {
    let cfg = args.to_config()?;
    if args.check {
        print!("{}", check(&cfg)?);
        return Ok(());
    }
    let out = args
        .out
        .as_deref()
        .expect("clap requires --out without --check");
    let summary = run(&cfg, out, say)?;
    print!("{}", report::result_table(&summary));
    println!(
        "\nreport: {}\nsummary: {}\nplots: {}",
        out.join("report.md").display(),
        out.join("summary.json").display(),
        out.join("plots").display()
    );
    Ok(())
}

/// The offered payload rate per sender host for `load`.
pub fn rate_per_sender(
    topo: &Topology,
    cfg: &ExperimentConfig,
    senders: &[String],
    load: f64,
) -> f64 {
    load * load_capacity_bps(topo, cfg, senders) / senders.len().max(1) as f64
}

/// What load 1.0 offers in all, bit/s: under `inter-dc` the rates of the
/// source DC switch's links to other DCs (`from`'s; when every DC sends,
/// every DC's), under `host-nic` the NIC rates of `senders` added up.
fn load_capacity_bps(topo: &Topology, cfg: &ExperimentConfig, senders: &[String]) -> f64 {
    match cfg.load_definition {
        LoadDefinition::InterDc => {
            let sources: Vec<&lcmp_topology::Switch> = if cfg.all_pairs() {
                // Every switch with hosts behind it: of a DC with its
                // fabric, the leaves have no such links, the DCI switch has.
                topo.switches()
                    .iter()
                    .filter(|s| !hosts_behind(topo, s.id).is_empty())
                    .collect()
            } else {
                vec![topo.switch_by_name(&cfg.from).expect("validated")]
            };
            let mut capacity = 0u64;
            for from in sources {
                // Its links to other DCs' switches (a DC modelled with its
                // fabric: not those to its own spines).
                capacity += topo
                    .ports(from.id)
                    .iter()
                    .filter(|p| {
                        p.peer_switch()
                            .is_some_and(|s| from.dc.is_none() || topo.switch(s).dc != from.dc)
                    })
                    .map(|p| p.rate_bps)
                    .sum::<u64>();
            }
            capacity as f64
        }
        LoadDefinition::HostNic => senders
            .iter()
            .map(|h| topo.host_by_name(h).expect("sender exists").rate_bps as f64)
            .sum(),
    }
}

/// Runs experiment `cfg`, writing everything under `out`.
pub fn run(cfg: &ExperimentConfig, out: &Path, say: &dyn Fn(&str)) -> Result<analysis::Summary> {
    match cfg.engine {
        config::Engine::Namespaces => framework::run(out, say, || FctExperiment::prepare(cfg)),
        config::Engine::Virtual | config::Engine::Wall => one_process::run(cfg, out, say),
    }
}

/// An FCT experiment as [`framework::run`] runs it.
struct FctExperiment<'a> {
    cfg: &'a ExperimentConfig,
    /// The topology `cfg` describes (the testbed's is
    /// [`framework::Testbed::topo`]).
    topo: Topology,
    traffic_bin: PathBuf,
    switch_bin: PathBuf,
    /// The source DC's hosts.
    senders: Vec<String>,
    /// The destination DC's hosts.
    receivers: Vec<String>,
    /// Every run's switch settings but the policy.
    switches: SwitchSettings,
    /// The hosts' congestion control.
    cc: HostCc,
    /// The trace's flows per sender, read by `up`.
    replay: Option<(trace::Trace, Schedules)>,
    /// What `plan` learned and started.
    setup: Option<Setup>,
}

/// What an FCT experiment learns and starts before its runs.
struct Setup {
    cal: calibrate::Calibration,
    /// The source switch's first hops.
    paths: Vec<PathSpec>,
    ideal: IdealModel,
    /// Traffic servers on every receiver, for the whole experiment.
    servers: Vec<Bg>,
    /// Each server's `NAME=ADDR:PORT`.
    dsts: Vec<String>,
    /// The trace's echo for `summary.json` (null without one).
    trace_echo: serde_json::Value,
    /// The offered rate per sender at each of `cfg.loads`.
    rates_per_sender: Vec<f64>,
}

/// What one FCT run yields.
struct RunOutcome {
    input: RunInput,
    /// What every switch saw.
    network: analysis::NetworkInput,
    /// The failure run's figures.
    failure: Option<serde_json::Value>,
}

impl<'a> FctExperiment<'a> {
    /// Checks `cfg` and finds the programs, before anything is made.
    fn prepare(cfg: &'a ExperimentConfig) -> Result<Self> {
        let topo = cfg.validate()?;
        let traffic_bin = bed::find_program("lcmp-traffic", "LCMP_TRAFFIC_BIN")?;
        let switch_bin = bed::find_program("lcmp-switch", "LCMP_SWITCH_BIN")?;
        let from = topo.switch_by_name(&cfg.from).expect("validated").id;
        let to = topo.switch_by_name(&cfg.to).expect("validated").id;
        Ok(FctExperiment {
            cfg,
            senders: hosts_behind(&topo, from),
            receivers: hosts_behind(&topo, to),
            topo,
            traffic_bin,
            switch_bin,
            switches: switch_settings(cfg, "ecmp"),
            cc: host_cc(cfg)?,
            replay: None,
            setup: None,
        })
    }

    fn setup(&self) -> &Setup {
        self.setup.as_ref().expect("planned before the runs")
    }

    /// A run of `policy` with `seed` as configured, taking down `failure`
    /// (switch, port, seconds) mid-run; `plan_runs` adds the traffic.
    fn base_spec(
        &self,
        policy: &str,
        seed: u64,
        failure: Option<(lcmp_topology::LinkId, f64)>,
    ) -> run::RunSpec {
        run_spec(self.cfg, &self.switches, &self.cc, policy, seed, failure)
    }
}

/// A run of `policy` with `seed` as `cfg` says, its switches `switches`
/// but for the policy, its hosts' congestion control `cc`, taking down `failure` (link, seconds) mid-run;
/// `plan_runs` adds the traffic.
fn run_spec(
    cfg: &ExperimentConfig,
    switches: &SwitchSettings,
    cc: &HostCc,
    policy: &str,
    seed: u64,
    failure: Option<(lcmp_topology::LinkId, f64)>,
) -> run::RunSpec {
    let switches = switches.clone().for_policy(policy);
    run::RunSpec {
        id: String::new(),
        policy: policy.to_string(),
        alpha: switches.alpha,
        beta: switches.beta,
        switches,
        workload: String::new(),
        rate_bps_per_sender: 0.0,
        seed,
        duration_s: cfg.duration_s,
        warmup_s: cfg.warmup(),
        drain_s: cfg.drain_s,
        max_concurrent: cfg.max_concurrent,
        cc: cc.name.clone(),
        base_rtt_ns: cc.base_rtt_ns,
        failure,
        transport: cfg.transport,
        scaling: cfg.scaling(),
        rocev2_args: cfg.rocev2_args.clone(),
        schedules: None,
    }
}

impl framework::Experiment for FctExperiment<'_> {
    type Config = ExperimentConfig;
    /// The run's load and spec.
    type Run = (f64, run::RunSpec);
    type Outcome = RunOutcome;
    type Summary = analysis::Summary;

    fn config(&self) -> &ExperimentConfig {
        self.cfg
    }

    fn up(&mut self, say: &dyn Fn(&str)) -> Result<State> {
        let cfg = self.cfg;
        // A bad trace is refused before anything is built.
        self.replay = trace_schedules(cfg, &self.topo, &self.senders, &self.receivers)?;
        let up = UpOptions {
            name: cfg.name.clone(),
            topology: cfg.topology.clone(),
            hosts_per_dc: cfg.hosts_per_dc,
            host_switches: cfg.host_switches(),
            scaling: cfg.scaling(),
            switches: self.switches.clone(),
            // Set per connection by the clients (`lcmp-traffic --cc`): the
            // kernel may refuse it as a namespace default.
            cc: None,
            initcwnd: cfg.initcwnd,
            // The agent propagates link failures (the failure experiment
            // needs it); metrics are off, and its polling is light.
            agent: Some(AgentOptions::default()),
            switch_processes: cfg.processes()?,
            links: cfg.links()?,
        };
        bed::up(&up, say)
    }

    fn plan(
        &mut self,
        bed: &mut framework::Testbed,
        out: &Path,
        say: &dyn Fn(&str),
    ) -> Result<Vec<Self::Run>> {
        let cfg = self.cfg;
        let topo = &bed.topo;
        // A switch still finishing its start-up would add to the base RTT
        // that every ideal FCT rests on.
        let pids: Vec<u32> = bed.state.procs.iter().map(|p| p.pid).collect();
        run::wait_until_settled(&pids);
        say("calibrating the paths on the idle testbed");
        let cal = calibrate::calibrate(
            &bed.lab,
            topo,
            &cfg.name,
            &self.senders[0],
            &self.receivers[0],
            say,
        )?;
        std::fs::write(
            out.join("calibration.json"),
            serde_json::to_string_pretty(&cal).expect("calibration serializes"),
        )?;
        run::check_interrupted()?;

        let (servers, dsts) = start_servers(cfg, &bed.lab, &self.traffic_bin, &self.receivers)?;

        // The per-path tables count bytes at the source switch's ports and
        // flows by the port it logged: its first hops, whatever the
        // switches downstream choose (the ideal below rests on the
        // calibrated minimum-delay path end to end).
        let paths: Vec<PathSpec> = cal.first_hops();
        let ideal = ideal_model(cfg.transport, cal.base_rtt_ns, cal.bottleneck_bps);
        let failure = match &cfg.failure {
            Some(f) => {
                let l = config::find_link(topo, &f.link)?;
                Some((l.id, f.at_s))
            }
            None => None,
        };

        let base_spec = |policy: &str, seed: u64| self.base_spec(policy, seed, failure);
        let (specs, trace_echo) = plan_runs(
            cfg,
            topo,
            &self.senders,
            self.replay.as_ref(),
            Some(out),
            &base_spec,
        )?;
        self.setup = Some(Setup {
            cal,
            paths,
            ideal,
            servers,
            dsts,
            trace_echo,
            rates_per_sender: cfg
                .loads
                .iter()
                .map(|&l| rate_per_sender(topo, cfg, &self.senders, l))
                .collect(),
        });
        Ok(specs)
    }

    fn run_id((_, spec): &Self::Run) -> &str {
        &spec.id
    }

    fn seconds(&self, (_, spec): &Self::Run) -> f64 {
        spec.duration_s.max(0.1)
    }

    fn run(
        &mut self,
        bed: &mut framework::Testbed,
        (load, spec): &Self::Run,
        progress: &framework::RunProgress<'_>,
        out: &Path,
        _say: &dyn Fn(&str),
    ) -> Result<(RunOutcome, String)> {
        let setup = self.setup();
        let mut env = run::RunEnv {
            state: &mut bed.state,
            tb: &bed.lab,
            switch_bin: &self.switch_bin,
            traffic_bin: &self.traffic_bin,
            from: &self.cfg.from,
            senders: &self.senders,
            dsts: &setup.dsts,
        };
        let tick = |elapsed: f64, p: run::Progress| {
            progress.tick_with(
                elapsed,
                &format!(
                    "{} flows started, {} done, {} active",
                    p.started, p.completed, p.active
                ),
            );
        };
        let dir = out.join("runs").join(&spec.id);
        let (flows, meas) = run::run_one(&mut env, spec, &dir, &tick)?;
        let input = run_input(spec, *load, flows, &meas, &setup.cal.notes, &setup.paths);
        let line = run_line(&input, &meas.network, &setup.ideal);
        let failure = meas
            .failure_at_s
            .map(|at| failure_report(&spec.id, at, &input.flows, meas.failovers));
        let outcome = RunOutcome {
            input,
            network: meas.network,
            failure,
        };
        Ok((outcome, line))
    }

    fn finish(
        self,
        outcomes: Vec<RunOutcome>,
        runs_started: Instant,
        out: &Path,
        say: &dyn Fn(&str),
    ) -> Result<analysis::Summary> {
        let Setup {
            cal,
            ideal,
            servers,
            trace_echo,
            rates_per_sender,
            ..
        } = self.setup.expect("planned before the runs");
        drop(servers);
        say(&format!(
            "{} runs in {:.0} s; writing results",
            outcomes.len(),
            runs_started.elapsed().as_secs_f64()
        ));
        let ideals = ideals::Ideals::One(ideals::Pair { cal, ideal });
        let results = Results {
            cfg: self.cfg,
            topo: &self.topo,
            senders: &self.senders,
            receivers: &self.receivers,
            ideals: &ideals,
            trace_echo,
            rates_per_sender,
            engine: json!({ "name": config::Engine::Namespaces.name() }),
        };
        write_results(results, outcomes, out, say)
    }
}

/// What `summary.json` echoes besides the runs, from either engine.
struct Results<'a> {
    cfg: &'a ExperimentConfig,
    /// The experiment's topology (names in the echo).
    topo: &'a Topology,
    senders: &'a [String],
    receivers: &'a [String],
    /// The calibration and the ideals the slowdowns rest on.
    ideals: &'a ideals::Ideals,
    /// The trace's echo (null without one).
    trace_echo: serde_json::Value,
    /// The offered rate per sender at each of `cfg.loads`.
    rates_per_sender: Vec<f64>,
    /// Which engine ran, and what it says of its runs.
    engine: serde_json::Value,
}

/// Writes `summary.json`, the report and the plots of the runs'
/// `outcomes` under `out`.
fn write_results(
    r: Results<'_>,
    outcomes: Vec<RunOutcome>,
    out: &Path,
    say: &dyn Fn(&str),
) -> Result<analysis::Summary> {
    let cfg = r.cfg;
    let ideal = r.ideals.run_ideal();
    let mut ideal_echo = r.ideals.echo(r.topo);
    ideal_echo["definition"] = serde_json::json!(match (cfg.transport, cfg.engine) {
        (Transport::Tcp, _) => "2 x measured base RTT of the minimum-delay path (handshake + last byte and its acknowledgement) + ceil(size/1448) x 1514 bytes over its bottleneck".to_string(),
        (Transport::Rocev2, config::Engine::Namespaces) => "measured base RTT of the minimum-delay path + size (payload bytes, scaled) over its bottleneck: the simulator's standalone FCT".to_string(),
        (Transport::Rocev2, engine) => {
            let delays = if engine == config::Engine::Wall {
                "configured delays, which the wall clock can only exceed"
            } else {
                "configured delays, exact on the virtual clock"
            };
            if cfg.all_pairs() {
                format!("each flow's own, its DC pair's (`pairs`): base RTT of the minimum-delay path between its sender's and its receiver's switches ({delays}) + size (payload bytes, scaled) over that path's bottleneck: the simulator's standalone FCT per host pair (flows.csv: src_dc, dst_dc, ideal_ns)")
            } else {
                format!("base RTT of the minimum-delay path (its {delays}) + size (payload bytes, scaled) over its bottleneck: the simulator's standalone FCT")
            }
        }
    });
    let mut inputs = Vec::new();
    // What every switch saw in each run (`networks[i]` is `inputs[i]`'s).
    let mut networks = Vec::new();
    let mut failures = Vec::new();
    for o in outcomes {
        inputs.push(o.input);
        networks.push(o.network);
        failures.extend(o.failure);
    }

    let echo = json!({
        "config": cfg,
        "engine": r.engine,
        "topology": cfg.topology.as_ref().map_or(config::BUILTIN_NAME.to_string(), |t| t.display().to_string()),
        "senders": r.senders,
        "receivers": r.receivers,
        "load_definition": match cfg.load_definition {
            LoadDefinition::InterDc => "offered payload bytes/s over the source DC switch's inter-DC capacity (sum of the rates of its links to other DCs' switches, scaled)",
            LoadDefinition::HostNic => "each sender offers load x its NIC rate (the LCMP artifact's definition)",
        },
        "rate_bps_per_sender": r.rates_per_sender,
        "ideal": ideal_echo,
        "calibration": r.ideals.calibration_json(r.topo),
        "failures": failures,
        "transport": cfg.transport.name(),
        // The hosts' congestion control, every run's: under rocev2 the
        // RoCEv2 one (dcqcn unless `cc` says), under tcp the kernel's
        // (null: its default).
        "cc": cfg.cc_name(),
        "size_scale": cfg.size_scale(),
        "time_scale": cfg.time_scale(),
        "scaling": cfg.scaling().to_string(),
        "trace": r.trace_echo,
    });
    let summary = analysis::build_summary_with_network(echo, &inputs, &networks, ideal);
    std::fs::write(
        out.join("summary.json"),
        serde_json::to_string_pretty(&summary).expect("summary serializes"),
    )?;
    write_report(cfg, out, &summary, &inputs, ideal, say)?;
    Ok(summary)
}

/// The hosts behind switch `sw`, by name in topology order: those of every
/// switch of its DC (a DC modelled with its fabric: hosts on leaves behind
/// the DCI switch), or of the switch alone when it is in no DC.
pub(crate) fn hosts_behind(topo: &Topology, sw: SwitchId) -> Vec<String> {
    let dc = topo.switch(sw).dc;
    topo.hosts()
        .iter()
        .filter(|h| h.switch == sw || (dc.is_some() && topo.switch(h.switch).dc == dc))
        .map(|h| h.name.clone())
        .collect()
}

/// Starts a traffic server on every receiver, for the whole experiment;
/// returns them and each one's `NAME=ADDR:PORT` for the clients.
fn start_servers(
    cfg: &ExperimentConfig,
    tb: &Lab,
    traffic_bin: &Path,
    receivers: &[String],
) -> Result<(Vec<Bg>, Vec<String>)> {
    let mut servers: Vec<Bg> = Vec::new();
    let mut dsts = Vec::new();
    for r in receivers {
        let h = tb.host(r);
        let addr = h
            .ipv4()
            .map(std::net::IpAddr::V4)
            .or(h.ipv6().map(std::net::IpAddr::V6))
            .ok_or_else(|| Error::new(format!("host {r} has no address")))?;
        let port = match cfg.transport {
            Transport::Tcp => SERVER_PORT,
            Transport::Rocev2 => ROCEV2_PORT,
        };
        let sa = std::net::SocketAddr::new(addr, port);
        let mut argv = vec![
            traffic_bin.display().to_string(),
            "server".into(),
            "--transport".into(),
            cfg.transport.name().into(),
            "--listen".into(),
            sa.to_string(),
        ];
        if cfg.transport == Transport::Rocev2 {
            argv.extend(["--time-scale".into(), cfg.scaling().time.to_string()]);
        }
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let bg = h.netns.spawn(&argv)?;
        wait_log(&bg, "listening", Duration::from_secs(10))?;
        servers.push(bg);
        dsts.push(format!("{r}={sa}"));
    }
    Ok((servers, dsts))
}

/// The ideal FCT model the slowdowns rest on: a calibrated
/// minimum-delay path's base RTT and bottleneck, per transport.
fn ideal_model(transport: Transport, base_rtt_ns: u64, bottleneck_bps: u64) -> IdealModel {
    match transport {
        Transport::Tcp => IdealModel {
            base_rtt_ns,
            bottleneck_bps,
            ..IdealModel::default()
        },
        // The simulator's `standalone`: one base RTT + size over the
        // bottleneck (no handshake; the payload alone, per byte).
        Transport::Rocev2 => IdealModel {
            base_rtt_ns,
            bottleneck_bps,
            rtts: 1.0,
            mss_bytes: 1,
            wire_bytes_per_segment: 1,
        },
    }
}

/// Every run of the experiment, in order, with its load: per seed and
/// policy the trace replay (writing its schedules under `out/trace/`), or
/// per workload, load, seed and policy the Poisson runs; and the trace's
/// echo for `summary.json` (null without one).
fn plan_runs(
    cfg: &ExperimentConfig,
    topo: &Topology,
    senders: &[String],
    replay: Option<&(trace::Trace, Schedules)>,
    out: Option<&Path>,
    base_spec: &dyn Fn(&str, u64) -> run::RunSpec,
) -> Result<(Vec<(f64, run::RunSpec)>, serde_json::Value)> {
    let mut specs = Vec::new();
    let mut trace_echo = serde_json::Value::Null;
    if let Some((t, schedules)) = replay {
        // No directory: a plan to show (`--check`), no schedule files.
        let mut files = std::collections::BTreeMap::new();
        if let Some(out) = out {
            let dir = out.join("trace");
            std::fs::create_dir_all(&dir)?;
            for (sender, rows) in schedules {
                let f = dir.join(format!("schedule-{sender}.csv"));
                trace::write_schedule(&f, rows).map_err(Error::new)?;
                files.insert(sender.clone(), f);
            }
        }
        // The schedules' starts: dilated, as the capacity below is divided.
        let span_ns = schedules
            .values()
            .flatten()
            .map(|r| r.start_ns)
            .max()
            .unwrap_or(0);
        let bytes: f64 = t
            .flows
            .iter()
            .map(|f| cfg.scaling().size_bytes(f.size_bytes) as f64)
            .sum();
        // Offered payload while the flows arrive over what load 1.0 offers
        // (the load definition of the Poisson experiments; per NIC, the
        // NICs of the hosts that send).
        let sending: Vec<String> = schedules.keys().cloned().collect();
        let capacity = load_capacity_bps(topo, cfg, &sending);
        let offered = if span_ns > 0 {
            bytes * 8.0 / (span_ns as f64 / 1e9) / capacity
        } else {
            0.0
        };
        // The label of the runs; the echo keeps the exact figure.
        let load = (offered * 1000.0).round() / 1000.0;
        let label = workload_label(&t.file);
        for seed in 1..=u64::from(cfg.seeds) {
            for policy in &cfg.policies {
                let mut s = base_spec(policy, seed);
                s.id = format!("{label}-{policy}-seed{seed}");
                // The file, labelled once where the runs are summed up, as
                // a workload file is (a label's own stem would cut
                // `traffic_WebSearch_8DC-0.3util` at its dot).
                s.workload = t.file.clone();
                s.duration_s = (span_ns as f64 / 1e9).max(1e-3);
                s.schedules = Some(files.clone());
                specs.push((load, s));
            }
        }
        trace_echo = json!({
            "file": t.file,
            "format": t.format.name(),
            "flows": t.flows.len(),
            "span_s": span_ns as f64 / 1e9,
            "offered_load": offered,
            "hosts": format!("host id i is host i % {n} + 1 of DC i / {n} + 1", n = trace::ARTIFACT_HOSTS_PER_DC),
        });
    } else {
        for w in &cfg.workloads {
            for &load in &cfg.loads {
                for seed in 1..=u64::from(cfg.seeds) {
                    for policy in &cfg.policies {
                        let wname = workload_label(w);
                        let mut s = base_spec(policy, seed);
                        s.id = format!("{wname}-load{load}-{policy}-seed{seed}");
                        s.workload = w.clone();
                        s.rate_bps_per_sender = rate_per_sender(topo, cfg, senders, load);
                        specs.push((load, s));
                    }
                }
            }
        }
    }
    Ok((specs, trace_echo))
}

/// What the analysis takes of one run: its flows, the bytes each first
/// hop carried and the calibration's and the run's notes.
fn run_input(
    spec: &run::RunSpec,
    load: f64,
    flows: Vec<FlowRecord>,
    meas: &run::RunMeasurements,
    cal_notes: &[String],
    paths: &[PathSpec],
) -> RunInput {
    let mut notes = cal_notes.to_vec();
    notes.extend(meas.notes.iter().cloned());
    RunInput {
        policy: spec.policy.clone(),
        workload: workload_label(&spec.workload),
        load,
        seed: spec.seed,
        port_tx_bytes: paths
            .iter()
            .map(|p| meas.port_tx_bytes.get(&p.port).copied().unwrap_or(0))
            .collect(),
        paths: paths.to_vec(),
        window_s: meas.window_s,
        calibration_ok: notes.is_empty(),
        calibration_notes: notes,
        flow_paths: flows
            .iter()
            .filter_map(|f| {
                let name = f.path.as_deref()?;
                Some((f.id, paths.iter().position(|p| p.name == name)?))
            })
            .collect(),
        deadline_ns: Some(((spec.duration_s + spec.drain_s) * 1e9) as u64),
        flows,
        transport_counters: meas.transport_counters.clone(),
        switch_drops: meas.switch_drops.clone(),
        flow_ideals: Default::default(),
    }
}

/// Writes the plots and `report.md` of `summary` under `out`, and with
/// references the fidelity (see [`lcmp_results::fidelity::run_fidelity`]).
fn write_report(
    cfg: &ExperimentConfig,
    out: &Path,
    summary: &analysis::Summary,
    inputs: &[RunInput],
    ideal: &IdealModel,
    say: &dyn Fn(&str),
) -> Result<()> {
    let plot_dir = out.join("plots");
    std::fs::create_dir_all(&plot_dir)?;
    let plot_files = plots::write_plots(summary, inputs, ideal, &plot_dir).map_err(Error::new)?;
    let rel: Vec<PathBuf> = plot_files
        .iter()
        .filter_map(|p| p.strip_prefix(out).ok().map(Path::to_path_buf))
        .collect();
    // With flows between many DC pairs, also the pair tables and pairs.csv.
    report::write_report(out, summary, &rel).map_err(Error::new)?;
    if !cfg.reference.is_empty() {
        let (refs, reruns) = cfg.fidelity_references();
        let f = lcmp_results::fidelity::run_fidelity(out, &refs, &reruns).map_err(Error::new)?;
        for line in lcmp_results::fidelity::headline_lines(&f) {
            say(&line);
        }
    }
    Ok(())
}

/// A workload's label: the short name, or a file's stem.
pub fn workload_label(w: &str) -> String {
    Path::new(w)
        .file_stem()
        .map_or(w.to_string(), |s| s.to_string_lossy().into_owned())
}

fn wait_log(bg: &Bg, needle: &str, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    while !bg.log().contains(needle) {
        if Instant::now() > deadline {
            return Err(Error::new(format!(
                "traffic server did not start within {timeout:?}: {}",
                bg.log()
            )));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// One line per finished run.
fn run_line(input: &RunInput, network: &analysis::NetworkInput, ideal: &IdealModel) -> String {
    let s = analysis::summarize_run_with_network(input, Some(network), ideal);
    let q = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}"));
    let drops: u64 = s
        .switch_drops
        .iter()
        .filter(|(k, _)| !k.contains('@'))
        .map(|(_, n)| n)
        .sum();
    let c = |k: &str| s.transport_counters.get(k).copied().unwrap_or(0);
    let transport = if s.transport_counters.is_empty() {
        String::new()
    } else {
        format!(
            ", {} rate cuts, {} retransmitted, {} timeouts",
            c("rate_cuts"),
            c("retransmissions"),
            c("timeouts")
        )
    };
    format!(
        "{:<8} {:<12} load {:<4} seed {}: {}/{} flows, slowdown median {} p99 {}, {drops} switch drops{transport}{}{}",
        s.policy,
        s.workload,
        s.load,
        s.seed,
        s.flows_completed,
        s.flows_started,
        q(s.median_slowdown),
        q(s.p99_slowdown),
        analysis::paths_missing_note(&s).map_or(String::new(), |n| format!("  [{n}]")),
        if s.calibration_ok {
            String::new()
        } else {
            format!("  [calibration: {}]", s.calibration_notes.join("; "))
        }
    )
}

/// The failure run's figures: flows in flight when the link went down.
fn failure_report(run: &str, at_s: f64, flows: &[FlowRecord], failovers: u64) -> serde_json::Value {
    let at_ns = (at_s * 1e9) as u64;
    let affected: Vec<&FlowRecord> = flows
        .iter()
        .filter(|f| f.start_ns <= at_ns && f.fct_ns.is_none_or(|fct| f.start_ns + fct > at_ns))
        .collect();
    let completed: Vec<u64> = affected
        .iter()
        .filter_map(|f| f.fct_ns.map(|fct| f.start_ns + fct - at_ns))
        .collect();
    let mut fcts: Vec<f64> = affected
        .iter()
        .filter_map(|f| f.fct_ns.map(|x| x as f64 / 1e6))
        .collect();
    fcts.sort_by(f64::total_cmp);
    json!({
        "run": run,
        "failure_at_s": at_s,
        "flows_in_flight": affected.len(),
        "flows_in_flight_completed": completed.len(),
        "in_flight_fct_ms_median": fcts.get(fcts.len() / 2),
        "in_flight_fct_ms_max": fcts.last(),
        "recovered_after_ms": completed.iter().max().map(|&n| n as f64 / 1e6),
        "source_switch_failovers": failovers,
    })
}

/// The state of the experiment's testbed (for tests).
pub fn testbed_state(name: &str) -> Result<State> {
    State::load(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(transport: Transport, switch_args: &[&str]) -> ExperimentConfig {
        let mut c: ExperimentConfig = toml::from_str(
            "from = 'dc1'\nto = 'dc8'\nworkloads = ['websearch']\nloads = [0.3]\npolicies = ['lcmp']\nduration_s = 1",
        )
        .unwrap();
        c.transport = transport;
        c.switch_args = switch_args.iter().map(|s| s.to_string()).collect();
        c
    }

    #[test]
    fn rocev2_switches_mark_at_link_time_and_hold_back_drops_and_the_users_arguments_come_last() {
        let none = lcmp_topology::Scaling::NONE;
        let argv = |c: &ExperimentConfig| switch_settings(c, "lcmp").argv(&none, &[]);
        let base = [
            "--policy",
            "lcmp",
            "--alpha",
            "3",
            "--beta",
            "1",
            "--scaling",
            "none",
        ];
        assert_eq!(argv(&cfg(Transport::Tcp, &[])), base);
        let mut rocev2 = base.to_vec();
        rocev2.extend([
            "--ecn-link-time=32,128,0.2,2000",
            "--ecn-mark-at=dequeue",
            "--drop-headroom=1000",
        ]);
        assert_eq!(argv(&cfg(Transport::Rocev2, &[])), rocev2);
        // The user's arguments follow, unread: the switch takes the last
        // value of an option, so --drop-headroom=1 and --no-ecn win.
        let mut told = rocev2.clone();
        told.extend(["--no-ecn", "--drop-headroom=1"]);
        assert_eq!(
            argv(&cfg(Transport::Rocev2, &["--no-ecn", "--drop-headroom=1"])),
            told
        );
        // How the testbed runs its switches comes between.
        let process = ["--loops".to_string(), "2".to_string()];
        let a = switch_settings(&cfg(Transport::Tcp, &["--loops=1"]), "ecmp").argv(&none, &process);
        assert_eq!(a[1], "ecmp");
        assert_eq!(a[8..], ["--loops", "2", "--loops=1"]);
    }

    #[test]
    fn a_policy_specs_weights_become_switch_arguments_and_a_runs_label_is_the_spec() {
        let none = lcmp_topology::Scaling::NONE;
        let mut c = cfg(Transport::Tcp, &[]);
        c.alpha = 5;
        // beta given, alpha the experiment's 5; the given weights of C_path
        // and C_cong as flags, the others left to the switch.
        let spec = "lcmp:beta=3:w_lc=4:w_ql=1:w_tl=2";
        let argv = switch_settings(&c, spec).argv(&none, &[]);
        assert_eq!(
            argv,
            [
                "--policy",
                "lcmp",
                "--alpha",
                "5",
                "--beta",
                "3",
                "--scaling",
                "none",
                "--w-capacity=4",
                "--w-queue=1",
                "--w-trend=2",
            ]
        );
        // A bare name: the experiment's alpha and beta, no weight flags.
        assert_eq!(
            switch_settings(&c, "lcmp-rm-beta").argv(&none, &[]),
            [
                "--policy",
                "lcmp-rm-beta",
                "--alpha",
                "5",
                "--beta",
                "1",
                "--scaling",
                "none"
            ]
        );
        // A run keeps the spec as its policy, its switches the weights.
        let base = switch_settings(&c, "ecmp");
        let run = run_spec(
            &c,
            &base,
            &HostCc::default(),
            "lcmp:alpha=1:w_dp=3",
            1,
            None,
        );
        assert_eq!(run.policy, "lcmp:alpha=1:w_dp=3");
        assert_eq!(
            (run.alpha, run.beta, run.switches.policy.as_str()),
            (1, 1, "lcmp")
        );
        assert_eq!(run.switches.w_persist, Some(3));
        assert_eq!(run.switches.w_queue, None);
    }

    #[test]
    fn time_dilation_is_the_scalings_alone_and_leaves_switch_settings_in_network_time() {
        // rocev2 dilates ten-fold by default; the ECN link time stays in
        // the network's time (32-128 us) and the switches stretch it by
        // the testbed's scaling themselves.
        let mut c = cfg(Transport::Rocev2, &[]);
        c.scale = 1000.0;
        assert_eq!(
            switch_settings(&c, "lcmp").ecn_link_time.as_deref(),
            Some("32,128,0.2,2000")
        );
        // Rates / 1000, buffers alike, sizes / 1000 (under rocev2 sizes
        // follow the rate scale) and time x 10: one value, given to
        // switches, agent and hosts.
        assert_eq!(
            c.scaling().to_string(),
            "rate=1000,buffer=1000,size=1000,time=10"
        );
        let argv = switch_settings(&c, "lcmp").argv(&c.scaling(), &[]);
        assert_eq!(
            argv[6..8],
            ["--scaling", "rate=1000,buffer=1000,size=1000,time=10"]
        );
        let mut t = cfg(Transport::Tcp, &[]);
        t.time_scale = Some(2.5);
        assert_eq!(t.scaling().to_string(), "rate=1,buffer=1,size=1,time=2.5");
    }

    #[test]
    fn hpcc_gets_int_switches_and_the_largest_host_rtt_in_network_time() {
        let mut c = cfg(Transport::Rocev2, &[]);
        c.topology = Some(lcmp_netlab::repo_root().join("topologies/2dc-3path.toml"));
        c.from = "s1".into();
        c.to = "s2".into();
        // DCQCN by default: no INT, no base RTT.
        assert!(!switch_settings(&c, "lcmp").int);
        let dcqcn = host_cc(&c).unwrap();
        assert_eq!(
            (dcqcn.name.as_deref(), dcqcn.base_rtt_ns),
            (Some("dcqcn"), None)
        );
        c.cc = Some("hpcc".into());
        let s = switch_settings(&c, "ecmp");
        assert!(s.int);
        assert!(s
            .argv(&lcmp_topology::Scaling::NONE, &[])
            .contains(&"--int".to_string()));
        // The longest path is p2: 2 x (10 + 10 ms + 2 x 10 us host links)
        // = 40.04 ms, plus one 1000-byte packet's serialization per hop one
        // way: 800 ns on each 10 Gbit/s host link, 16 us on each of p2's
        // two 500 Mbit/s links: 33.6 us; 40_073_600 ns.
        let hpcc = host_cc(&c).unwrap();
        assert_eq!(
            (hpcc.name.as_deref(), hpcc.base_rtt_ns),
            (Some("hpcc"), Some(40_073_600))
        );
        // Scaling stays the engines': a dilated experiment's base RTT is
        // the network's.
        c.time_scale = Some(10.0);
        assert_eq!(host_cc(&c).unwrap().base_rtt_ns, Some(40_073_600));
        // Under tcp `cc` is the kernel's, passed on as written.
        let mut t = cfg(Transport::Tcp, &[]);
        t.cc = Some("cubic".into());
        let tcp = host_cc(&t).unwrap();
        assert_eq!(
            (tcp.name.as_deref(), tcp.base_rtt_ns),
            (Some("cubic"), None)
        );
        assert!(!switch_settings(&t, "lcmp").int);
    }
}

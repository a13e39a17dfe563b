//! `lcmp-testbed rotor-experiment` with `transport = "ndp"`: flow
//! experiments on rotor networks (issue 27; the Mars paper's evaluation),
//! on every engine: the virtual one ([`lcmp_engine::rotor::RotorNet`] with
//! NDP hosts and trimming ToRs), the wall-clock one (the same network
//! paced by the monotonic clock) and the namespaces ([`super::flows_ns`]:
//! `lcmp-switch rotor --trim-packets K` and `lcmp-traffic client
//! --transport ndp --serve` on every host).
//!
//! Every (design, pattern, load, K) is one run on a fresh network:
//!
//! - Every host sends and receives NDP; flows arrive at each host as a
//!   Poisson process at `load` x its link rate (sizes from `workload`,
//!   divided by `size_scale`), from time 0 to the window's end, to a
//!   uniformly drawn host of another ToR (all-to-all) or to host h of ToR
//!   pi(t) (permutation, the seeded derangement the throughput runs use).
//!   Every engine draws the same flows ([`host_flows`]: seeds, id ranges
//!   and destinations in the same order).
//! - The ToRs trim at K frames per next-hop data queue, and their shared
//!   buffer is K full frames per uplink (`buffer_bytes` = K x 1,500 x U):
//!   the paper's "K packets per port" for a ToR whose queues are per next
//!   hop. Host downlinks are K frames each (the ToR emulates them at c).
//! - Links have no delay; the paper's 500 ns propagation is the ToRs'
//!   guard (`propagation_ns`): no frame starts that would not reach the
//!   rotor before its reconfiguration. Slots are exact on the virtual
//!   engine and as late as the machine makes them on the others.
//! - Measured in the window [warm-up, warm-up + window): payload bytes the
//!   receivers took in once (server downlink utilization), every ToR's
//!   buffer occupancy (once per slot at the same phase on the one-process
//!   engines; at each stats-file rewrite, every 200 ms, on the
//!   namespaces), the switches' counter changes; after the window the run
//!   goes on for `drain_s` so that the flows that arrived in it can
//!   finish; their FCTs are the flows' records.
//!
//! The results are `lcmp_results::rotor::flows`'s.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use lcmp_engine::rotor::{RotorNdp, RotorNdpSender, RotorNet, RotorRun};
use lcmp_results::rotor::experiment::{derangement, Pattern, RotorExperimentConfig};
use lcmp_results::rotor::flows::{
    flow_result_line, write_flow_results, FlowOutcome, FlowRunInput, FlowRunResult, FlowSummary,
};
use lcmp_switch::rotor_tor::TrimSettings;
use lcmp_topology::rotor_net::{RotorNetwork, RotorRole};
use lcmp_traffic::cdf::Cdf;
use lcmp_traffic::flows::{self, Arrivals, FlowSource};
use lcmp_traffic::ndp::NdpParams;

use super::experiment::{engine_of, window_ns, DesignNet, PerSwitch};
use crate::experiment::config::Engine;
use crate::experiment::run::{sender_id_base, sender_seed};
use crate::{Error, Result};

/// A full frame, bytes: what K counts in the shared buffer.
const FULL_FRAME: u64 = TrimSettings::FULL_FRAME_BYTES;

/// Runs the flow experiment `cfg` (validated: `designs`, `patterns`) on
/// the engine it names, writing its results under `out`.
pub fn run(
    cfg: &RotorExperimentConfig,
    designs: &[DesignNet],
    patterns: &[Pattern],
    out: &Path,
    say: &dyn Fn(&str),
) -> Result<FlowSummary> {
    let cdf = Cdf::load(&cfg.workload).map_err(|e| Error::new(e.to_string()))?;
    match engine_of(cfg)? {
        Engine::Namespaces => super::flows_ns::run(cfg, designs, patterns, out, say),
        e => run_one_process(cfg, &cdf, designs, patterns, e == Engine::Wall, out, say),
    }
}

/// One run: a design (index into the designs) under a pattern at a load
/// with K.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct FlowRun {
    pub design: usize,
    pub pattern: Pattern,
    pub load: f64,
    pub k: u32,
}

impl FlowRun {
    /// Its name for files and progress (`FlowRunResult::id`'s).
    pub fn id(&self, designs: &[DesignNet]) -> String {
        lcmp_results::rotor::flows::flow_run_id(
            designs[self.design].design.name(),
            self.pattern.name(),
            self.load,
            self.k,
        )
    }
}

/// The runs, in order: design, then pattern, load and K.
pub(super) fn plan(
    cfg: &RotorExperimentConfig,
    designs: &[DesignNet],
    patterns: &[Pattern],
) -> Vec<FlowRun> {
    let mut runs = Vec::new();
    for design in 0..designs.len() {
        for &pattern in patterns {
            for &load in &cfg.loads {
                for &k in &cfg.trim_packets {
                    runs.push(FlowRun {
                        design,
                        pattern,
                        load,
                        k,
                    });
                }
            }
        }
    }
    runs
}

/// The one-process engines: every run on a fresh [`RotorNet`], on the
/// virtual clock or, `paced`, on the wall clock.
#[allow(clippy::too_many_arguments)]
fn run_one_process(
    cfg: &RotorExperimentConfig,
    cdf: &Cdf,
    designs: &[DesignNet],
    patterns: &[Pattern],
    paced: bool,
    out: &Path,
    say: &dyn Fn(&str),
) -> Result<FlowSummary> {
    std::fs::create_dir_all(out.join("runs"))
        .map_err(|e| Error::new(format!("{}: {e}", out.display())))?;
    std::fs::write(
        out.join("experiment.toml"),
        toml::to_string(cfg).expect("config serializes"),
    )?;
    let engine = if paced { "wall" } else { "virtual" };
    let perm = derangement(cfg.tors, cfg.seed);
    let started = Instant::now();
    let mut results = Vec::new();
    for run in plan(cfg, designs, patterns) {
        let t0 = Instant::now();
        let (input, per_switch, note) =
            run_one(cfg, cdf, &designs[run.design], &run, &perm, paced)?;
        let r = FlowRunResult::from_input(&input).map_err(Error::new)?;
        super::experiment::write_run_counters(out, &r.id(), &per_switch)?;
        say(&format!(
            "{} [{engine}: {:.3} s in {:.1} s, {note}]",
            flow_result_line(&r),
            cfg.warmup_s + cfg.window_s + cfg.drain_seconds(),
            t0.elapsed().as_secs_f64()
        ));
        results.push(r);
    }
    say(&format!(
        "{} runs on the {engine} engine in {:.1} s",
        results.len(),
        started.elapsed().as_secs_f64()
    ));
    write_flow_results(cfg, super::experiment::mars_json(designs), results, out).map_err(Error::new)
}

/// The network of a run: `dn`'s (its guard the propagation delay) with
/// K's buffer.
pub(super) fn run_network(dn: &DesignNet, k: u32) -> RotorNetwork {
    let mut net = dn.net.clone();
    net.buffer_bytes = Some(u64::from(k) * FULL_FRAME * u64::from(net.rotors));
    net
}

/// Every host's transport parameters.
pub(super) fn ndp_params(cfg: &RotorExperimentConfig) -> NdpParams {
    NdpParams {
        initial_window: cfg.initial_window,
        min_rto_ns: cfg.min_rto_us.saturating_mul(1000),
        ..NdpParams::default()
    }
}

/// One host's flows in a run: the same draw on every engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct HostFlows {
    pub tor: u32,
    pub host: u32,
    /// The hosts (ToR, index) its flows go to, each drawn uniformly.
    pub dsts: Vec<(u32, u32)>,
    /// Seed of its arrivals, sizes and destinations.
    pub seed: u64,
    /// Its first flow id.
    pub id_base: u64,
}

/// Every host's flows under `pattern` (the rate is [`flow_rate_bps`]'s).
pub(super) fn host_flows(
    cfg: &RotorExperimentConfig,
    pattern: Pattern,
    perm: &[u32],
) -> Vec<HostFlows> {
    let mut out = Vec::new();
    for t in 0..cfg.tors {
        for h in 0..cfg.hosts_per_tor {
            let i = (t * cfg.hosts_per_tor + h) as usize;
            let dsts: Vec<(u32, u32)> = match pattern {
                Pattern::AllToAll => (0..cfg.tors)
                    .filter(|&j| j != t)
                    .flat_map(|j| (0..cfg.hosts_per_tor).map(move |x| (j, x)))
                    .collect(),
                Pattern::Permutation => vec![(perm[t as usize], h)],
            };
            out.push(HostFlows {
                tor: t,
                host: h,
                dsts,
                seed: sender_seed(cfg.seed, i),
                id_base: sender_id_base(i),
            });
        }
    }
    out
}

/// The payload rate a host offers at `load`, bit/s.
pub(super) fn flow_rate_bps(cfg: &RotorExperimentConfig, load: f64) -> f64 {
    load * cfg.host_rate_bps() as f64
}

/// Every host's flows as the one-process engines' senders.
fn senders(
    cfg: &RotorExperimentConfig,
    cdf: &Cdf,
    pattern: Pattern,
    perm: &[u32],
    load: f64,
) -> Vec<RotorNdpSender> {
    // As `lcmp-traffic client --rate-bps` turns a rate into arrivals.
    let lambda = flow_rate_bps(cfg, load) / (8.0 * flows::mean_scaled_size(cdf, cfg.size_scale));
    host_flows(cfg, pattern, perm)
        .into_iter()
        .map(|hf| {
            let arrivals = Arrivals::Poisson {
                cdf: cdf.clone(),
                lambda,
                duration_s: cfg.warmup_s + cfg.window_s,
            };
            RotorNdpSender {
                tor: hf.tor,
                host: hf.host,
                flows: FlowSource::new(
                    arrivals,
                    hf.seed,
                    hf.id_base,
                    0.0,
                    cfg.size_scale,
                    hf.dsts.len(),
                ),
                dsts: hf.dsts,
            }
        })
        .collect()
}

/// Every switch's counters, by switch name.
pub(super) type Counters = BTreeMap<String, BTreeMap<String, f64>>;

/// Every switch's counters now (drops, counters, port bytes by kind).
fn snapshot(rn: &mut RotorNet) -> Result<Counters> {
    Ok(rn
        .switch_status()
        .map_err(Error::new)?
        .into_iter()
        .map(|(name, s)| (name, super::counters(&s)))
        .collect())
}

/// Payload bytes every receiver took in once, so far.
fn delivered(rn: &mut RotorNet, cfg: &RotorExperimentConfig) -> Result<u64> {
    let mut sum = 0;
    for t in 0..cfg.tors {
        for h in 0..cfg.hosts_per_tor {
            let host = rn
                .ndp_host(t, h)
                .ok_or_else(|| Error::new(format!("no NDP host {t}x{h}")))?;
            sum += host.receiver().stats.bytes;
        }
    }
    Ok(sum)
}

/// What a run measured, whichever engine ran it.
pub(super) struct FlowMeasured {
    /// Every flow that arrived (the window is picked from them).
    pub flows: Vec<FlowOutcome>,
    /// Payload bytes received once in the window.
    pub delivered_bytes: u64,
    /// ToR occupancy samples, bytes.
    pub occupancy: Vec<u64>,
    /// Every switch's counters at the window's start.
    pub before: Counters,
    /// And at its end.
    pub after: Counters,
}

/// The run's raw measurements and its counter changes per switch.
pub(super) fn run_input(
    cfg: &RotorExperimentConfig,
    dn: &DesignNet,
    run: &FlowRun,
    m: FlowMeasured,
) -> (FlowRunInput, PerSwitch) {
    let net = run_network(dn, run.k);
    let mut per_switch = PerSwitch::new();
    let mut tor_counters = BTreeMap::new();
    let mut rotor_counters = BTreeMap::new();
    let mut downlink_bytes = 0.0;
    for (name, a) in &m.after {
        let d = super::counter_delta(m.before.get(name).unwrap_or(&BTreeMap::new()), a);
        let sum = match net.role(name) {
            Ok(RotorRole::Tor(_)) => {
                downlink_bytes += d.get("ports.host.tx_bytes").copied().unwrap_or(0.0);
                &mut tor_counters
            }
            _ => &mut rotor_counters,
        };
        for (key, v) in &d {
            *sum.entry(key.clone()).or_insert(0.0) += v;
        }
        per_switch.insert(name.clone(), d);
    }
    (
        FlowRunInput {
            design: dn.design.name().into(),
            pattern: run.pattern.name().into(),
            routing: net.routing().name().into(),
            matchings: net.matchings.len(),
            load: run.load,
            buffer_pkts: run.k,
            hosts: cfg.tors * cfg.hosts_per_tor,
            host_rate_bps: cfg.host_rate_bps(),
            window_ns: window_ns(cfg),
            flows: m.flows,
            delivered_bytes: m.delivered_bytes,
            downlink_bytes: downlink_bytes as u64,
            occupancy: m.occupancy,
            tor_counters,
            rotor_counters,
        },
        per_switch,
    )
}

/// Runs `run` of `dn` on a fresh one-process network: its raw
/// measurements, counter changes per switch and a note on the engine's
/// work (polls; on the wall clock, how late it ran).
fn run_one(
    cfg: &RotorExperimentConfig,
    cdf: &Cdf,
    dn: &DesignNet,
    run: &FlowRun,
    perm: &[u32],
    paced: bool,
) -> Result<(FlowRunInput, PerSwitch, String)> {
    let net = run_network(dn, run.k);
    let mut rn = RotorNet::build(RotorRun {
        network: net.clone(),
        traffic: Vec::new(),
        nic_rate_bps: Some(cfg.host_rate_bps()),
        listen_port: 0,
        window_ns: 0..0,
        ndp: Some(RotorNdp {
            params: ndp_params(cfg),
            senders: senders(cfg, cdf, run.pattern, perm, run.load),
        }),
        trim: Some(TrimSettings::new(run.k)),
    })
    .map_err(Error::new)?;
    if paced {
        rn.pace_with_wall_clock();
    }

    let (start, end) = window_ns(cfg);
    rn.run_until(start.saturating_sub(1));
    let before = snapshot(&mut rn)?;
    let delivered_before = delivered(&mut rn, cfg)?;
    // Occupancy once per slot, at the same phase of every slot.
    let mut occupancy = Vec::new();
    let mut t = start;
    while t < end {
        rn.run_until(t);
        for tor in 0..cfg.tors {
            occupancy.push(rn.tor_queued_bytes(tor).unwrap_or(0));
        }
        t += net.slot_ns;
    }
    rn.run_until(end.saturating_sub(1));
    let after = snapshot(&mut rn)?;
    let delivered_bytes = delivered(&mut rn, cfg)? - delivered_before;
    rn.run_until(end + (cfg.drain_seconds() * 1e9) as u64);

    let mut flows = Vec::new();
    for t in 0..cfg.tors {
        for h in 0..cfg.hosts_per_tor {
            let host = rn
                .ndp_host(t, h)
                .ok_or_else(|| Error::new(format!("no NDP host {t}x{h}")))?;
            flows.extend(host.records().iter().map(|r| FlowOutcome {
                size: r.size_bytes,
                arrival_ns: r.start_ns,
                fct_ns: r.fct_ns,
            }));
        }
    }
    let mut note = format!("{} polls", rn.polls());
    if let Some(late) = rn.lateness() {
        note.push_str(&format!(", {late}"));
    }
    rn.finish().map_err(Error::new)?;
    let (input, per_switch) = run_input(
        cfg,
        dn,
        run,
        FlowMeasured {
            flows,
            delivered_bytes,
            occupancy,
            before,
            after,
        },
    );
    Ok((input, per_switch, note))
}

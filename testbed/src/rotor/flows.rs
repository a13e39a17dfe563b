//! `lcmp-testbed rotor-experiment` with `transport = "ndp"`: flow
//! experiments on rotor networks (issue 27; the Mars paper's evaluation),
//! on the virtual engine ([`lcmp_engine::rotor::RotorNet`] with NDP hosts
//! and trimming ToRs).
//!
//! Every (design, pattern, load, K) is one run on a fresh network:
//!
//! - Every host is an NDP host ([`lcmp_engine::ndp_host`]); flows arrive
//!   at each host as a Poisson process at `load` x its link rate (sizes
//!   from `workload`), from time 0 to the window's end, to a uniformly
//!   drawn host of another ToR (all-to-all) or to host h of ToR pi(t)
//!   (permutation, the seeded derangement the throughput runs use).
//! - The ToRs trim at K frames per next-hop data queue, and their shared
//!   buffer is K full frames per uplink (`buffer_bytes` = K x 1,500 x U):
//!   the paper's "K packets per port" for a ToR whose queues are per next
//!   hop. Host downlinks are K frames each (the ToR emulates them at c).
//! - Slots are exact (virtual time). Links have no delay; the paper's 500
//!   ns propagation is the ToRs' guard (`propagation_ns`): no frame starts
//!   that would not reach the rotor before its reconfiguration.
//! - Measured in the window [warm-up, warm-up + window): payload bytes the
//!   receivers took in once (server downlink utilization), every ToR's
//!   buffer occupancy once per slot, the switches' counter changes; after
//!   the window the run goes on for `drain_s` so that the flows that
//!   arrived in it can finish; their FCTs are the flows' records.
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

use super::experiment::{window_ns, DesignNet, PerSwitch};
use crate::experiment::run::{sender_id_base, sender_seed};
use crate::{Error, Result};

/// A full frame, bytes: what K counts in the shared buffer.
const FULL_FRAME: u64 = TrimSettings::FULL_FRAME_BYTES;

/// Runs the flow experiment `cfg` (validated: `designs`, `patterns`)
/// on the virtual engine, writing its results under `out`.
pub fn run(
    cfg: &RotorExperimentConfig,
    designs: &[DesignNet],
    patterns: &[Pattern],
    out: &Path,
    say: &dyn Fn(&str),
) -> Result<FlowSummary> {
    let cdf = Cdf::load(&cfg.workload).map_err(|e| Error::new(e.to_string()))?;
    std::fs::create_dir_all(out.join("runs"))
        .map_err(|e| Error::new(format!("{}: {e}", out.display())))?;
    std::fs::write(
        out.join("experiment.toml"),
        toml::to_string(cfg).expect("config serializes"),
    )?;
    let perm = derangement(cfg.tors, cfg.seed);
    let started = Instant::now();
    let mut results = Vec::new();
    for dn in designs {
        for &pattern in patterns {
            for &load in &cfg.loads {
                for &k in &cfg.trim_packets {
                    let t0 = Instant::now();
                    let (input, per_switch, polls) =
                        run_one(cfg, &cdf, dn, pattern, &perm, load, k)?;
                    let r = FlowRunResult::from_input(&input).map_err(Error::new)?;
                    super::experiment::write_run_counters(out, &r.id(), &per_switch)?;
                    say(&format!(
                        "{} [virtual: {:.3} s in {:.1} s, {polls} polls]",
                        flow_result_line(&r),
                        cfg.warmup_s + cfg.window_s + cfg.drain_seconds(),
                        t0.elapsed().as_secs_f64()
                    ));
                    results.push(r);
                }
            }
        }
    }
    say(&format!(
        "{} runs on the virtual engine in {:.1} s",
        results.len(),
        started.elapsed().as_secs_f64()
    ));
    let mars = super::experiment::mars_json(designs);
    write_flow_results(cfg, mars, results, out).map_err(Error::new)
}

/// The network of a run: `dn`'s (its guard the propagation delay) with
/// K's buffer.
fn run_network(dn: &DesignNet, k: u32) -> RotorNetwork {
    let mut net = dn.net.clone();
    net.buffer_bytes = Some(u64::from(k) * FULL_FRAME * u64::from(net.rotors));
    net
}

/// Every host's flows under `pattern` at `load`.
fn senders(
    cfg: &RotorExperimentConfig,
    cdf: &Cdf,
    pattern: Pattern,
    perm: &[u32],
    load: f64,
    rate_bps: u64,
) -> Vec<RotorNdpSender> {
    let lambda = load * rate_bps as f64 / (8.0 * flows::mean_scaled_size(cdf, 1.0));
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
            let arrivals = Arrivals::Poisson {
                cdf: cdf.clone(),
                lambda,
                duration_s: cfg.warmup_s + cfg.window_s,
            };
            out.push(RotorNdpSender {
                tor: t,
                host: h,
                flows: FlowSource::new(
                    arrivals,
                    sender_seed(cfg.seed, i),
                    sender_id_base(i),
                    0.0,
                    1.0,
                    dsts.len(),
                ),
                dsts,
            });
        }
    }
    out
}

/// Every switch's counters now (drops, counters, port bytes by kind).
fn snapshot(rn: &mut RotorNet) -> Result<BTreeMap<String, BTreeMap<String, f64>>> {
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

/// Run `dn` under `pattern` at `load` with K = `k`: its raw
/// measurements, counter changes per switch and the driver's polls.
fn run_one(
    cfg: &RotorExperimentConfig,
    cdf: &Cdf,
    dn: &DesignNet,
    pattern: Pattern,
    perm: &[u32],
    load: f64,
    k: u32,
) -> Result<(FlowRunInput, PerSwitch, u64)> {
    let net = run_network(dn, k);
    let rate_bps = cfg.host_rate_bps();
    let params = NdpParams {
        initial_window: cfg.initial_window,
        min_rto_ns: cfg.min_rto_us.saturating_mul(1000),
        ..NdpParams::default()
    };
    let mut rn = RotorNet::build(RotorRun {
        network: net.clone(),
        traffic: Vec::new(),
        nic_rate_bps: Some(rate_bps),
        listen_port: 0,
        window_ns: 0..0,
        ndp: Some(RotorNdp {
            params,
            senders: senders(cfg, cdf, pattern, perm, load, rate_bps),
        }),
        trim: Some(TrimSettings::new(k)),
    })
    .map_err(Error::new)?;

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

    let mut per_switch = PerSwitch::new();
    let mut tor_counters = BTreeMap::new();
    let mut rotor_counters = BTreeMap::new();
    let mut downlink_bytes = 0.0;
    for (name, a) in &after {
        let d = super::counter_delta(before.get(name).unwrap_or(&BTreeMap::new()), a);
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
    let mut flows = Vec::new();
    for t in 0..cfg.tors {
        for h in 0..cfg.hosts_per_tor {
            let host = rn
                .ndp_host(t, h)
                .ok_or_else(|| Error::new(format!("no NDP host {t}x{h}")))?;
            flows.extend(
                host.records()
                    .iter()
                    .filter(|r| (start..end).contains(&r.start_ns))
                    .map(|r| FlowOutcome {
                        size: r.size_bytes,
                        arrival_ns: r.start_ns,
                        fct_ns: r.fct_ns,
                    }),
            );
        }
    }
    let polls = rn.polls();
    rn.finish().map_err(Error::new)?;
    Ok((
        FlowRunInput {
            design: dn.design.name().into(),
            pattern: pattern.name().into(),
            routing: net.routing().name().into(),
            matchings: net.matchings.len(),
            load,
            buffer_pkts: k,
            hosts: cfg.tors * cfg.hosts_per_tor,
            host_rate_bps: rate_bps,
            window_ns: (start, end),
            flows,
            delivered_bytes,
            downlink_bytes: downlink_bytes as u64,
            occupancy,
            tor_counters,
            rotor_counters,
        },
        per_switch,
        polls,
    ))
}

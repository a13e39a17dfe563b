//! `lcmp-testbed rotor-experiment --engine virtual`: the rotor throughput
//! experiment with the whole network in this process on a virtual clock
//! ([`lcmp_engine::rotor::RotorNet`]): no root, no namespaces, no kernel,
//! and two runs give identical files. `--engine wall` runs the same
//! network paced by the monotonic clock (events late when the machine
//! is).
//!
//! Everything but the engine is the namespace engine's
//! ([`super::experiment`]): the same designs' networks (the files the
//! switches would read), patterns, permutation, runs in the same order
//! with the same UDP port each, and on every host the same sender
//! (frames of `frame_bytes` on `udp_send_flows`' schedule, the same gap,
//! rounds and destinations; `flows_per_destination` source ports, from
//! 32768 up, where the kernel picks them); delivered frames counted by
//! arrival time in the same window; the switches' counters taken at the
//! window's start and end; the results written by the same code. What
//! differs:
//!
//! - Time is virtual: slot 0 starts when the senders do (on the
//!   namespaces the agent's epoch is some earlier whole second), nothing
//!   is late (the ToRs' slot lateness is 0), and the run stops at the
//!   window's end, as nothing later counts.
//! - A host's NIC serializes at U x c / (hosts per ToR) (at least the
//!   wiring's c): a ToR's share of its uplinks, so that load 1 leaves the
//!   host; the namespaces' host veth is not shaped at all, and the
//!   wiring's c would halve what one host per ToR offers there.

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::time::Instant;

use lcmp_engine::rotor::{RotorHostTraffic, RotorNet, RotorRun};
use lcmp_engine::udp_host::UdpSchedule;
use lcmp_results::rotor::experiment::{
    derangement, Pattern, RotorExperimentConfig, RotorSummary, RunResult,
};
use lcmp_topology::rotor_net::RotorNetwork;

use super::experiment::{
    destinations, engine_of, result_line, run_result, send_gap, send_rounds, validate, window_ns,
    write_results, write_run_counters, DesignNet, Measured, PerSwitch,
};
use crate::experiment::config::Engine;
use crate::{Error, Result};

/// The first source port of a host's flows (the start of Linux's
/// ephemeral range, where the namespaces' kernel picks them).
const FIRST_SPORT: u16 = 32768;

/// Runs experiment `cfg` on the virtual engine, writing under `out` what
/// the namespace engine writes (see the module docs).
pub fn run(cfg: &RotorExperimentConfig, out: &Path, say: &dyn Fn(&str)) -> Result<RotorSummary> {
    let (designs, patterns) = validate(cfg)?;
    std::fs::create_dir_all(out.join("runs"))
        .map_err(|e| Error::new(format!("{}: {e}", out.display())))?;
    std::fs::write(
        out.join("experiment.toml"),
        toml::to_string(cfg).expect("config serializes"),
    )?;
    let perm = derangement(cfg.tors, cfg.seed);
    let engine = engine_of(cfg)?;
    let started = Instant::now();
    let mut results = Vec::new();
    for dn in &designs {
        for &pattern in &patterns {
            let id = format!("{}-{}", dn.design.name(), pattern.name());
            let t0 = Instant::now();
            let (r, per_switch, note) = run_one(
                cfg,
                dn,
                pattern,
                &perm,
                results.len(),
                engine == Engine::Wall,
            )?;
            write_run_counters(out, &id, &per_switch)?;
            say(&format!(
                "{} [{}: {} s in {:.1} s, {note}]",
                result_line(&r),
                engine.name(),
                cfg.warmup_s + cfg.window_s,
                t0.elapsed().as_secs_f64()
            ));
            results.push(r);
        }
    }
    say(&format!(
        "{} runs on the {} engine in {:.1} s",
        results.len(),
        engine.name(),
        started.elapsed().as_secs_f64()
    ));
    write_results(cfg, &designs, results, out)
}

/// The rate of every host's NIC (see the module docs).
pub fn nic_rate_bps(cfg: &RotorExperimentConfig, net: &RotorNetwork) -> u64 {
    let share = (u64::from(cfg.rotors) * net.rate_bps).div_ceil(u64::from(cfg.hosts_per_tor));
    share.max(net.rate_bps)
}

/// Run `k`: `dn` under `pattern`, from the senders' start to the window's
/// end; its result, counter changes and the driver's polls.
fn run_one(
    cfg: &RotorExperimentConfig,
    dn: &DesignNet,
    pattern: Pattern,
    perm: &[u32],
    k: usize,
    paced: bool,
) -> Result<(RunResult, PerSwitch, String)> {
    let net = &dn.net;
    // The namespace engine's port of run k.
    let port = 7000 + k as u16;
    let gap = send_gap(cfg, net);
    let gap_ns = u64::try_from(gap.as_nanos()).unwrap_or(u64::MAX);
    let sports: Vec<u16> = (0..cfg.flows_per_destination)
        .map(|i| FIRST_SPORT.saturating_add(i as u16))
        .collect();
    let hosts: Vec<(u32, u32)> = (0..cfg.tors)
        .flat_map(|t| (0..cfg.hosts_per_tor).map(move |h| (t, h)))
        .collect();
    let mut traffic = Vec::new();
    for (&(tor, host), to) in hosts.iter().zip(destinations(cfg, pattern, perm, port)) {
        let dsts: Vec<Ipv4Addr> = to
            .iter()
            .filter_map(|a| match a.ip() {
                IpAddr::V4(v4) => Some(v4),
                IpAddr::V6(_) => None,
            })
            .collect();
        let per_round = sports.len() * dsts.len();
        traffic.push(RotorHostTraffic {
            tor,
            host,
            send: UdpSchedule {
                dsts,
                dport: port,
                sports: sports.clone(),
                frame_bytes: cfg.frame_bytes,
                start_ns: 0,
                gap_ns,
                frames: send_rounds(cfg, gap, per_round).saturating_mul(per_round as u64),
            },
        });
    }
    let (start, end) = window_ns(cfg);
    let mut rn = RotorNet::build(RotorRun {
        network: net.clone(),
        traffic,
        nic_rate_bps: Some(nic_rate_bps(cfg, net)),
        listen_port: port,
        window_ns: start..end,
        ndp: None,
        trim: None,
    })
    .map_err(Error::new)?;
    if paced {
        rn.pace_with_wall_clock();
    }
    // The counters before anything at the window's start happens, and
    // after everything before its end: exactly the window's events.
    rn.run_until(start.saturating_sub(1));
    let before = rn
        .switch_status()
        .map_err(Error::new)?
        .into_iter()
        .collect();
    rn.run_until(end.saturating_sub(1));
    let after = rn
        .switch_status()
        .map_err(Error::new)?
        .into_iter()
        .collect();
    let (mut sent_frames, mut send_errors, mut received) = (0, 0, Vec::new());
    for &(t, h) in &hosts {
        let s = rn
            .host(t, h)
            .ok_or_else(|| Error::new(format!("no host {t}x{h}")))?
            .stats();
        sent_frames += s.frames_sent;
        send_errors += s.send_errors;
        received.push((t, s.window_frames));
    }
    let mut note = format!("{} polls", rn.polls());
    if let Some(late) = rn.lateness() {
        note.push_str(&format!(", {late}"));
    }
    rn.finish().map_err(Error::new)?;
    let (r, per_switch) = run_result(
        cfg,
        dn,
        pattern,
        perm,
        Measured {
            received,
            sent_frames,
            send_secs: end as f64 / 1e9,
            send_errors,
            before: &before,
            after: &after,
        },
    );
    Ok((r, per_switch, note))
}

//! The LCMP paper's 8-DC replay at full size on the virtual engine: the
//! artifact's 7,064 WebSearch flows from DC1's 16 hosts to DC8's 16
//! (`experiments/reference/lcmp-artifact-8dc/fct_lcmp.txt`, its starts and
//! sizes) over `topologies/8dc.toml` at its own rates and delays, hosts at
//! 100 Gbit/s and 10 us, switches as the testbed runs them under RoCEv2
//! (ECN thresholds as link time 32,128,0.2,2000 marked at dequeue, drop
//! headroom 1000), no scaling.
//!
//! `cargo run --release -p lcmp-engine --example replay_8dc -- POLICY OUTDIR
//! [DROP_HEADROOM [DRAIN_S]]` writes `OUTDIR/flows.csv` and prints the wall time, the virtual time,
//! frame-hops per second and the flows' outcome, with the slowdowns
//! against the simulator's standalone FCT (its 20 ms RTT + size x 8 /
//! 25 Gbit/s, headers included).

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Instant;

use lcmp_engine::{run_virtual_observed, HostTraffic, Progress, VirtualRun};
use lcmp_policy::Policy;
use lcmp_results::trace::{self, HostMap, TraceFormat, ARTIFACT_HOSTS_PER_DC};
use lcmp_switch::config::{EcnLinkTime, EcnMarkAt, Options};
use lcmp_topology::{HostTemplate, Scaling, Topology};
use lcmp_traffic::client::{write_records, Destination};
use lcmp_traffic::flows::{Arrivals, FlowSource, ScheduledFlow};
use lcmp_traffic::record::FlowStatus;
use lcmp_traffic::rocev2::client::RoceOptions;
use lcmp_traffic::rocev2::wire::ROCEV2_PORT;

/// After the last arrival, how long the run may drain by default (the
/// testbed's `drain_s` for this replay); it ends as soon as every flow has.
const DRAIN_NS: u64 = 30_000_000_000;

fn main() {
    if let Err(e) = run() {
        eprintln!("replay_8dc: {e}");
        std::process::exit(1);
    }
}

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: replay_8dc POLICY OUTDIR [DROP_HEADROOM (1000) [DRAIN_S (30)]]";
    let (policy, outdir) = match &args[..] {
        [p, o, ..] if args.len() <= 4 => (p, o),
        _ => return Err(usage.into()),
    };
    let headroom: u64 = args
        .get(2)
        .map_or(Ok(1000), |h| h.parse())
        .map_err(|_| usage)?;
    let drain_ns = args
        .get(3)
        .map_or(Ok(DRAIN_NS), |d| d.parse::<f64>().map(|s| (s * 1e9) as u64))
        .map_err(|_| usage)?;
    let policy = Policy::from_name(policy).ok_or_else(|| format!("no policy {policy:?}"))?;
    let outdir = PathBuf::from(outdir);
    std::fs::create_dir_all(&outdir).map_err(|e| format!("{}: {e}", outdir.display()))?;

    // The testbed's network (bed::testbed_network) with 16 hosts on dc1
    // and dc8 at 100 Gbit/s, 10 us.
    let base = Topology::load(&repo("topologies/8dc.toml")).map_err(|e| e.to_string())?;
    let ends: Vec<_> = ["dc1", "dc8"]
        .iter()
        .map(|n| {
            base.switch_by_name(n)
                .map(|s| s.id)
                .ok_or(format!("no {n}"))
        })
        .collect::<Result<_, _>>()?;
    let topo = base
        .with_generated_hosts_on(
            16,
            HostTemplate {
                rate_bps: Some(100_000_000_000),
                delay_ns: 10_000,
                buffer_bytes: None,
            },
            Some(&ends),
        )
        .map_err(|e| e.to_string())?;

    let t = trace::load(
        &repo("experiments/reference/lcmp-artifact-8dc/fct_lcmp.txt"),
        TraceFormat::HpccFct,
    )
    .map_err(|e| e.to_string())?;
    let standalone: BTreeMap<u64, u64> = t
        .flows
        .iter()
        .filter_map(|f| Some((f.index as u64, f.standalone_ns?)))
        .collect();
    let schedules = t
        .schedules(&HostMap::new(&topo, ARTIFACT_HOSTS_PER_DC), &Scaling::NONE)
        .map_err(|e| e.to_string())?;

    // As `lcmp-traffic client --schedule FILE --dst NAME=IP:4791 ...`: the
    // receivers a sender's schedule names, its flows indexed into them.
    let address = |host: &str| -> Result<SocketAddr, String> {
        let h = topo.host_by_name(host).ok_or(format!("no host {host}"))?;
        h.addresses
            .iter()
            .find(|a| a.addr().is_ipv4())
            .map(|a| SocketAddr::new(a.addr(), ROCEV2_PORT))
            .ok_or(format!("host {host}: no IPv4 address"))
    };
    let mut traffic = Vec::new();
    let mut last_start = 0;
    for (sender, rows) in &schedules {
        let receivers: BTreeSet<&str> = rows.iter().map(|r| r.receiver.as_str()).collect();
        let dsts = receivers
            .iter()
            .map(|r| {
                Ok(Destination {
                    name: r.to_string(),
                    addr: address(r)?,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let mut flows: Vec<ScheduledFlow> = rows
            .iter()
            .map(|r| ScheduledFlow {
                id: r.id,
                dst: dsts.iter().position(|d| d.name == r.receiver).unwrap_or(0),
                size: r.size_bytes,
                start_ns: r.start_ns,
            })
            .collect();
        flows.sort_by_key(|f| f.start_ns);
        last_start = last_start.max(flows.last().map_or(0, |f| f.start_ns));
        let n = dsts.len();
        traffic.push(HostTraffic {
            host: sender.clone(),
            flows: FlowSource::new(Arrivals::Schedule(flows), 0, 0, 0.0, 1.0, n),
            dsts,
        });
    }

    // The testbed's switch settings under rocev2 (experiment::switch_settings).
    // Its drop headroom of 1000 stands for the simulator's lossless (PFC)
    // fabric: at full size a port then queues up to 128 GiB, which the
    // frame area must hold; a third argument overrides it (1: drop at the
    // 128 MiB buffer itself).
    let switch = Options {
        policy,
        ecn_link_time: Some(EcnLinkTime::parse("32,128,0.2,2000")?),
        ecn_mark_at: EcnMarkAt::Dequeue,
        drop_headroom: headroom,
        ..Options::default()
    };
    let flows_total: usize = schedules.values().map(Vec::len).sum();
    println!(
        "{} senders, {flows_total} flows, last arrival at {:.3} s; policy {}",
        traffic.len(),
        last_start as f64 / 1e9,
        policy.name()
    );
    let wall = Instant::now();
    // Every 10 ms of virtual time: where the run is, and what it holds.
    let mut progress = |p: &Progress| {
        let rss = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmRSS:"))
                    .map(|v| v.trim().to_string())
            })
            .unwrap_or_default();
        eprintln!(
            "  virtual {:7.3} s  wall {:7.1} s  polls {:11}  hosts done {:2}/{}  rss {rss}",
            p.now_ns as f64 / 1e9,
            wall.elapsed().as_secs_f64(),
            p.polls,
            p.hosts_done,
            p.hosts
        );
    };
    let out = run_virtual_observed(
        VirtualRun {
            network: topo,
            switch,
            roce: RoceOptions::default(),
            traffic,
            end_ns: last_start + drain_ns,
            flow_log: None,
            pfc: false,
        },
        10_000_000,
        &mut progress,
    )?;
    let wall_s = wall.elapsed().as_secs_f64();

    let records: Vec<_> = out
        .records
        .iter()
        .flat_map(|(_, r)| r.iter().cloned())
        .collect();
    let path = outdir.join("flows.csv");
    let mut file = std::fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    write_records(&mut file, &records).map_err(|e| format!("{}: {e}", path.display()))?;

    let count = |s: FlowStatus| records.iter().filter(|r| r.status == s).count();
    let slowdowns: Vec<f64> = records
        .iter()
        .filter_map(|r| {
            let fct = r.fct_ns? as f64;
            let ideal = *standalone.get(&r.id)? as f64;
            Some((fct / ideal).max(1.0))
        })
        .collect();
    let q = |p: f64| lcmp_stats::quantile(&slowdowns, p).unwrap_or(f64::NAN);
    let sum = |f: &dyn Fn(&lcmp_control::Snapshot) -> u64| -> u64 {
        out.switches.iter().map(|(_, s)| f(s)).sum()
    };
    let dry = sum(&|s| {
        s.ports
            .iter()
            .filter_map(|p| p.memory_link.as_ref().map(|m| m.peer_buffers_empty))
            .sum()
    });
    let marked = sum(&|s| s.counters.get("ce_marked").copied().unwrap_or(0));
    println!("wall time        {wall_s:.1} s");
    println!("virtual time     {:.3} s", out.end_ns as f64 / 1e9);
    println!(
        "frame-hops       {} ({:.2} M/s of wall time); polls {} ({:.2} M/s)",
        out.frame_hops,
        out.frame_hops as f64 / wall_s / 1e6,
        out.polls,
        out.polls as f64 / wall_s / 1e6
    );
    println!(
        "flows            {} ok, {} unfinished, {} failed (of {flows_total})",
        count(FlowStatus::Ok),
        count(FlowStatus::Unfinished),
        count(FlowStatus::Failed)
    );
    println!(
        "slowdown         median {:.2}, p99 {:.2} (vs the simulator's standalone FCT)",
        q(0.5),
        q(0.99)
    );
    println!(
        "switches         {} drops, {marked} CE marks, {dry} times a memory link's peer had no buffer",
        sum(&|s| s.drops_total)
    );
    println!("wrote            {}", path.display());
    Ok(())
}

//! `lcmp-bench virtual-hosts`: the memory the virtual engine takes per
//! RoCEv2 host and per queue pair, measured (not estimated) on networks
//! built and run by the testbed's own entry point, [`run_virtual_observed`]
//! with a [`VirtualRun`] (topology with generated hosts, switch
//! [`Options`], [`RoceOptions`], [`HostTraffic`]).
//!
//! Method.
//! - Per host: two LCMP switches s1 - s2 (100 Gbit/s, 1 us) with N1 and
//!   then N2 generated hosts (half on each; 100 Gbit/s, 10 us, the
//!   `--host-buffer`), all idle but one flow s1h1 -> s1h2 that keeps the
//!   run going for 1 ms of virtual time. A host is its node (NIC egress,
//!   sender, receiver), its memory link and its switch's port towards it,
//!   which is what the network grows by per host.
//! - Per queue pair: the same two switches with one host each, s1h1
//!   sending F1 and then F2 flows of 1 GB to s2h1, all arriving at 0; the
//!   run lasts until the NIC has sent 3 x F2 packets (round robin over
//!   the QPs, so every QP has sent and been answered by the sample, and
//!   at 100 Gbit/s shared none is near its end), and every flow must be
//!   `unfinished` at the end. A queue pair is both ends: the sender's QP
//!   (DCQCN, go-back-N, its heap and FIFO entries, its record) and the
//!   receiver's message state; the switches keep no per-flow state.
//! - Each figure is the slope (x2 - x1) / (n2 - n1) between the two
//!   networks, so what does not grow with hosts or flows (the binary, the
//!   switches, the one flow, allocator constants) cancels. The default
//!   flow counts are powers of two, so the vectors and hash tables that
//!   grow by doubling are exactly as full at both: the slope is then a
//!   queue pair's own bytes; other counts add the doubling's slack (1000
//!   vs 10000 flows: about 40 % more).
//! - Each network runs in a fresh process (this binary re-run with a
//!   hidden `--child`): peak RSS is per process and memory malloc got back
//!   stays resident, so the networks must not share one. In it: heap = the
//!   counting allocator's live bytes ([`heap`]), RSS = `VmRSS`, both
//!   relative to just before the run (its inputs built);
//!   `held` is sampled while the run goes (the last progress call, at
//!   7/8 of its virtual time or later), `peak` is the allocator's peak and
//!   `VmHWM` (reset first) over the whole call, building and the outcome
//!   included (the outcome copies every flow record).
//! - Heap and RSS differ: heap counts every block whole, RSS only pages
//!   touched. The egress queues preallocate `buffer / 60 + 1` slots that
//!   an idle port never touches (malloc maps large blocks lazily), and the
//!   frame pools are one `mmap` of unpopulated memory
//!   (`FrameShare::split_area_unpopulated`): never heap, and RSS only for
//!   buffers used (an idle host uses none). Their address space per host
//!   is printed from the engine's own `pool_frames`.
//!
//! The engine's check before a run ([`MemoryEstimate`] in
//! `engine/src/network.rs`) counts two egress queues per host (the NIC's,
//! its buffer at most [`HOST_NIC_BUFFER_BYTES`], and the switch port's,
//! its buffer x the drop headroom), each `(buffer / 60 + 1 + delay-line
//! frames) x 40 B`, capped at 2^20 slots ([`egress_slots`]), and
//! [`FLOW_BYTES`] per flow; the measured heap (held and peak) and RSS held
//! are compared with them.
//!
//! [`MemoryEstimate`]: lcmp_engine::network::MemoryEstimate

use std::net::SocketAddr;
use std::process::Command;

use lcmp_engine::network::{
    egress_slots, host_pool_frames, pool_frames, EGRESS_SLOT_BYTES, FLOW_BYTES,
    HOST_NIC_BUFFER_BYTES,
};
use lcmp_engine::{run_virtual_observed, HostTraffic, Progress, VirtualRun};
use lcmp_policy::Policy;
use lcmp_switch::config::Options;
use lcmp_switch::frames::FRAME_SIZE;
use lcmp_topology::units::{human_bytes, human_size, parse_buffer};
use lcmp_topology::{HostTemplate, Topology};
use lcmp_traffic::client::Destination;
use lcmp_traffic::flows::{Arrivals, FlowSource, ScheduledFlow};
use lcmp_traffic::record::{FlowRecord, FlowStatus};
use lcmp_traffic::rocev2::client::RoceOptions;
use lcmp_traffic::rocev2::wire::ROCEV2_PORT;
use serde::{Deserialize, Serialize};

use crate::heap;

pub const HELP: &str = "\
lcmp-bench virtual-hosts: memory per host and per queue pair of the virtual engine (no root)

USAGE: lcmp-bench virtual-hosts [--hosts N1,N2] [--flows F1,F2]
                                [--host-buffer BYTES] [--drop-headroom N]

Measured, not estimated: networks built and run by lcmp_engine::run_virtual
(as the testbed's one-process engine), each in a fresh process; figures are
slopes between two sizes, so what does not grow cancels.
  per host        2 LCMP switches (100 Gbit/s, 1 us) with N1 and N2 idle
                  RoCEv2 hosts, half on each (100 Gbit/s, 10 us,
                  --host-buffer), one flow keeping the run going [16,256]
  per queue pair  one sender, one receiver, F1 and F2 flows of 1 GB all
                  running, each past its first ACK (both ends) [1024,16384]
Heap: a counting allocator (bytes asked for; a block counts whole, touched
or not), held while the run goes and at its peak (building and the outcome
included). RSS: VmRSS while it goes and VmHWM over the run. The frame pools
are mapped unpopulated: never heap, RSS only for buffers used. The last
line compares with the engine's own check (MemoryEstimate in
engine/src/network.rs: 40 B per egress slot, FLOW_BYTES per flow) and
warns when the measured heap differs from it by more than 2x.
  --host-buffer    the host links' buffer, NIC and switch port [1MiB]
  --drop-headroom  the switches' drop headroom (x the port buffer) [1]";

/// `lcmp-bench virtual-hosts`'s options (clap; `main.rs` registers them).
#[derive(clap::Args, Debug, Clone)]
pub struct Opts {
    /// Hosts of the two networks, even, N1 < N2 <= 508.
    #[arg(long, value_name = "N1,N2", default_value = "16,256", value_parser = host_pair)]
    pub hosts: (usize, usize),
    /// Flows of the two runs, F1 < F2 <= 100000.
    #[arg(long, value_name = "F1,F2", default_value = "1024,16384", value_parser = flow_pair)]
    pub flows: (usize, usize),
    /// The host links' buffer (NIC and switch port).
    #[arg(long, value_name = "BYTES", default_value = "1MiB", value_parser = buffer)]
    pub host_buffer: u64,
    /// The switches' drop headroom.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub drop_headroom: u64,
    /// One network in this process (`hosts:N`, `flows:F`); prints its
    /// figures as JSON.
    #[arg(long, hide = true, value_name = "KIND:N")]
    pub child: Option<String>,
}

/// Hosts on each switch at most: its ports but the link's.
const MAX_HOSTS_PER_SWITCH: usize = 254;
const MAX_FLOWS: usize = 100_000;
const HOST_RATE_BPS: u64 = 100_000_000_000;
const HOST_DELAY_NS: u64 = 10_000;
/// Each flow's size: the run sends 3 x F2 packets in all, far from it.
const FLOW_SIZE: u64 = 1_000_000_000;
/// The idle-host runs' virtual time (one flow keeps it going).
const HOSTS_RUN_NS: u64 = 1_000_000;
/// Progress calls per run; the sample is the last.
const SAMPLES: u64 = 8;

fn pair(s: &str) -> Result<(usize, usize), String> {
    let (a, b) = s.split_once(',').ok_or("expected A,B")?;
    let n = |t: &str| {
        t.trim()
            .parse::<usize>()
            .map_err(|_| format!("{t:?}: not a count"))
    };
    let (a, b) = (n(a)?, n(b)?);
    if a >= b {
        return Err(format!("{a},{b}: the first must be smaller"));
    }
    Ok((a, b))
}

fn host_pair(s: &str) -> Result<(usize, usize), String> {
    let (a, b) = pair(s)?;
    if a < 2 || a % 2 != 0 || b % 2 != 0 || b > 2 * MAX_HOSTS_PER_SWITCH {
        return Err(format!(
            "{a},{b}: even counts of 2 to {} (half on each switch)",
            2 * MAX_HOSTS_PER_SWITCH
        ));
    }
    Ok((a, b))
}

fn flow_pair(s: &str) -> Result<(usize, usize), String> {
    let (a, b) = pair(s)?;
    if a == 0 || b > MAX_FLOWS {
        return Err(format!("{a},{b}: counts of 1 to {MAX_FLOWS}"));
    }
    Ok((a, b))
}

fn buffer(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>().or_else(|_| parse_buffer(s)) {
        Ok(0) => Err("the buffer must be positive".into()),
        Ok(b) => Ok(b),
        Err(e) => Err(e.to_string()),
    }
}

/// What one network's process measured, bytes (relative to just before
/// its run).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
struct Sample {
    heap_held: i64,
    heap_peak: i64,
    rss_held: i64,
    rss_peak: i64,
}

/// The two switches; hosts are generated on both.
const SWITCHES: &str = r#"
[defaults]
buffer = "1MiB"

[[switch]]
name = "s1"
prefixes = ["10.1.0.0/16"]

[[switch]]
name = "s2"
prefixes = ["10.2.0.0/16"]

[[link]]
a = "s1"
b = "s2"
rate = "100Gbps"
delay = "1us"
"#;

fn network(per_switch: usize, o: &Opts) -> Result<Topology, String> {
    Topology::parse(SWITCHES, "virtual-hosts")
        .and_then(|t| {
            t.with_generated_hosts(
                per_switch,
                HostTemplate {
                    rate_bps: Some(HOST_RATE_BPS),
                    delay_ns: HOST_DELAY_NS,
                    buffer_bytes: Some(o.host_buffer),
                },
            )
        })
        .map_err(|e| e.to_string())
}

/// `sender` sends `n` flows of [`FLOW_SIZE`] to `receiver`, all at 0.
fn traffic(topo: &Topology, sender: &str, receiver: &str, n: usize) -> Result<HostTraffic, String> {
    let h = topo.host_by_name(receiver).ok_or("no receiver")?;
    let ip = h
        .addresses
        .iter()
        .find(|a| a.addr().is_ipv4())
        .ok_or("receiver without IPv4")?
        .addr();
    let flows = (1..=n as u64)
        .map(|id| ScheduledFlow {
            id,
            dst: 0,
            size: FLOW_SIZE,
            start_ns: 0,
        })
        .collect();
    Ok(HostTraffic {
        host: sender.to_string(),
        flows: FlowSource::new(Arrivals::Schedule(flows), 0, 0, 0.0, 1.0, 1),
        dsts: vec![Destination {
            name: receiver.to_string(),
            addr: SocketAddr::new(ip, ROCEV2_PORT),
        }],
    })
}

/// The flow runs' virtual time: 3 x F2 full packets at the line rate
/// (86 ns each at 100 Gbit/s), and 200 us.
fn flows_run_ns(o: &Opts) -> u64 {
    3 * o.flows.1 as u64 * 100 + 200_000
}

/// Builds and runs one network in this process; its figures.
fn child(spec: &str, o: &Opts) -> Result<Sample, String> {
    let (kind, n) = spec.split_once(':').ok_or("--child KIND:N")?;
    let n: usize = n.parse().map_err(|_| "--child KIND:N")?;
    let (topo, flows, end_ns) = match kind {
        "hosts" => (network(n / 2, o)?, 1, HOSTS_RUN_NS),
        "flows" => (network(1, o)?, n, flows_run_ns(o)),
        _ => return Err(format!("--child {spec}: hosts:N or flows:N")),
    };
    let receiver = if kind == "hosts" { "s1h2" } else { "s2h1" };
    let run = VirtualRun {
        traffic: vec![traffic(&topo, "s1h1", receiver, flows)?],
        network: topo,
        switch: Options {
            policy: Policy::from_name("lcmp").ok_or("no policy lcmp")?,
            drop_headroom: o.drop_headroom,
            ..Options::default()
        },
        roce: RoceOptions::default(),
        end_ns,
        flow_log: None,
        pfc: false,
    };
    let rss = || heap::proc_status_bytes("VmRSS").map_or(0, |b| b as i64);
    if !heap::reset_peak_rss() {
        return Err("/proc/self/clear_refs: cannot reset the peak RSS".into());
    }
    let (heap0, rss0) = (heap::live_bytes() as i64, rss());
    heap::reset_peak();
    let mut held = None;
    let mut sample = |_: &Progress| held = Some((heap::live_bytes() as i64, rss()));
    let out = run_virtual_observed(run, end_ns / SAMPLES, &mut sample)?;
    let heap_peak = heap::peak_bytes() as i64;
    let hwm = heap::proc_status_bytes("VmHWM").map_or(0, |b| b as i64);
    let (heap_held, rss_held) = held.ok_or("the run ended before its sample")?;
    // Every flow still running at the end, after the receiver took 3
    // packets per flow (round robin: each had sent one by the sample).
    let records = out.records.iter().flat_map(|(_, r)| r);
    let running = records
        .filter(|r: &&FlowRecord| r.status == FlowStatus::Unfinished)
        .count();
    let received = out
        .hosts
        .iter()
        .find(|(name, _)| name == receiver)
        .and_then(|(_, s)| s["receiver"]["data_packets"].as_u64())
        .unwrap_or(0);
    if running != flows || received < 2 * flows as u64 {
        return Err(format!(
            "{spec}: {running} of {flows} flows running at the end, {received} packets received"
        ));
    }
    drop(out);
    Ok(Sample {
        heap_held: heap_held - heap0,
        heap_peak: heap_peak - heap0,
        rss_held: rss_held - rss0,
        rss_peak: hwm - rss0,
    })
}

/// Runs `kind:n` in a fresh process of this binary.
fn measure(kind: &str, n: usize, o: &Opts) -> Result<Sample, String> {
    let exe = std::env::current_exe().map_err(|e| format!("this binary: {e}"))?;
    let out = Command::new(exe)
        .arg("virtual-hosts")
        .arg(format!("--hosts={},{}", o.hosts.0, o.hosts.1))
        .arg(format!("--flows={},{}", o.flows.0, o.flows.1))
        .arg(format!("--host-buffer={}", o.host_buffer))
        .arg(format!("--drop-headroom={}", o.drop_headroom))
        .arg(format!("--child={kind}:{n}"))
        .output()
        .map_err(|e| format!("{kind}:{n}: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!("{kind}:{n}: {}", err.trim()));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("{kind}:{n}: output: {e}"))
}

/// Bytes per unit between two samples at `n1` and `n2` units.
#[derive(Debug, Clone, Copy)]
struct Slope {
    heap_held: f64,
    heap_peak: f64,
    rss_held: f64,
    rss_peak: f64,
}

fn slope(a: &Sample, b: &Sample, n1: usize, n2: usize) -> Slope {
    let d = (n2 - n1) as f64;
    let s = |x: i64, y: i64| (y - x) as f64 / d;
    Slope {
        heap_held: s(a.heap_held, b.heap_held),
        heap_peak: s(a.heap_peak, b.heap_peak),
        rss_held: s(a.rss_held, b.rss_held),
        rss_peak: s(a.rss_peak, b.rss_peak),
    }
}

/// Bytes, readable to about 0.1 %: whole bytes below 10 kB, kB to one
/// decimal below 10 MB, else [`human_bytes`]; negative as such.
fn bytes(x: f64) -> String {
    let a = x.abs();
    let s = if a < 10e3 {
        format!("{a:.0} B")
    } else if a < 10e6 {
        format!("{:.1} kB", a / 1e3)
    } else {
        human_bytes(a.round() as u64)
    };
    if x < 0.0 {
        format!("-{s}")
    } else {
        s
    }
}

/// Slots of one egress queue and delay line, as `MemoryEstimate` counts
/// them.
/// `lcmp-bench virtual-hosts`.
pub fn main(o: &Opts) -> Result<(), String> {
    if let Some(spec) = &o.child {
        let s = child(spec, o)?;
        println!("{}", serde_json::to_string(&s).map_err(|e| e.to_string())?);
        return Ok(());
    }
    let (n1, n2) = o.hosts;
    let (f1, f2) = o.flows;
    let host = slope(&measure("hosts", n1, o)?, &measure("hosts", n2, o)?, n1, n2);
    let flow = slope(&measure("flows", f1, o)?, &measure("flows", f2, o)?, f1, f2);

    // The engine's estimate for one host: its NIC's egress and its
    // switch port's; its frame pools' address space.
    let nic_buffer = o.host_buffer.min(HOST_NIC_BUFFER_BYTES);
    let port_buffer = o.host_buffer.saturating_mul(o.drop_headroom);
    let nic = egress_slots(HOST_RATE_BPS, HOST_DELAY_NS, nic_buffer);
    let port = egress_slots(HOST_RATE_BPS, HOST_DELAY_NS, port_buffer);
    let est_host = (nic.0 + nic.1 + port.0 + port.1) * EGRESS_SLOT_BYTES;
    let payload = RoceOptions::default().payload;
    let frames = host_pool_frames(HOST_RATE_BPS, HOST_DELAY_NS, nic_buffer, payload)
        + pool_frames(HOST_RATE_BPS, HOST_DELAY_NS, port_buffer, payload);
    let est_flow = FLOW_BYTES;

    println!(
        "per host ({n1} vs {n2} idle RoCEv2 hosts on 2 LCMP switches, 100 Gbit/s, 10 us, buffer {}, drop headroom {}; its node, memory link and switch port): heap {} held while running, {} at peak; RSS {} held, {} at peak; frame pools {} of address space (mapped unpopulated, not heap)",
        human_size(o.host_buffer),
        o.drop_headroom,
        bytes(host.heap_held),
        bytes(host.heap_peak),
        bytes(host.rss_held),
        bytes(host.rss_peak),
        human_bytes(frames as u64 * FRAME_SIZE as u64),
    );
    println!(
        "per queue pair ({f1} vs {f2} flows of 1 GB from one sender to one receiver, all running, both ends): heap {} held while running, {} at peak (the outcome's copy of the records included); RSS {} held, {} at peak",
        bytes(flow.heap_held),
        bytes(flow.heap_peak),
        bytes(flow.rss_held),
        bytes(flow.rss_peak),
    );
    let ratio = |m: f64, e: u64| m / e as f64;
    let (rh, rf) = (
        ratio(host.heap_held, est_host),
        ratio(flow.heap_held, est_flow),
    );
    println!(
        "engine's MemoryEstimate (engine/src/network.rs, {EGRESS_SLOT_BYTES} B per egress slot): per host {} (NIC {}+{} slots, switch port {}+{}): measured heap held {rh:.2}x, at peak {:.2}x, RSS held {:.2}x; per flow FLOW_BYTES {est_flow} B (FlowRecord {} of it): measured heap held {rf:.2}x, at peak {:.2}x, RSS held {:.2}x",
        bytes(est_host as f64),
        nic.0,
        nic.1,
        port.0,
        port.1,
        ratio(host.heap_peak, est_host),
        ratio(host.rss_held, est_host),
        std::mem::size_of::<FlowRecord>(),
        ratio(flow.heap_peak, est_flow),
        ratio(flow.rss_held, est_flow),
    );
    for (what, r) in [("per host", rh), ("per flow", rf)] {
        if !(0.5..=2.0).contains(&r) {
            println!(
                "WARNING: {what}, the measured heap is {r:.2}x the engine's estimate (more than 2x off)"
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        o: Opts,
    }

    fn parse(args: &[&str]) -> Result<Opts, clap::Error> {
        Cli::try_parse_from(std::iter::once("x").chain(args.iter().copied())).map(|c| c.o)
    }

    #[test]
    fn options_parse_and_bad_ones_are_refused() {
        let o = parse(&[]).unwrap();
        assert_eq!((o.hosts, o.flows), ((16, 256), (1024, 16384)));
        assert_eq!((o.host_buffer, o.drop_headroom), (1 << 20, 1));
        let o = parse(&["--hosts=4,8", "--flows", "10,20", "--host-buffer", "32MiB"]).unwrap();
        assert_eq!(
            (o.hosts, o.flows, o.host_buffer),
            ((4, 8), (10, 20), 32 << 20)
        );
        for bad in [
            &["--hosts", "16"][..],
            &["--hosts", "3,8"],
            &["--hosts", "16,16"],
            &["--hosts", "16,510"],
            &["--flows", "0,10"],
            &["--flows", "10,100001"],
            &["--host-buffer", "0"],
            &["--drop-headroom", "0"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_small_network_runs_and_holds_its_flows() {
        let o = parse(&["--flows", "4,8"]).unwrap();
        // Other tests allocate meanwhile: only that it ran and held.
        let s = child("flows:8", &o).unwrap();
        assert!(s.heap_held > 0, "{s:?}");
        child("hosts:4", &o).unwrap();
        assert!(child("links:4", &o).is_err());
    }
}

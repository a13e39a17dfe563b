//! `lcmp-bench virtual-rotor`: a whole rotor network (ToRs, rotors, hosts
//! on in-memory ports, every ToR-rotor link a memory link) on the virtual
//! clock ([`VirtualNet`]), run idle and then with traffic for a span of
//! simulated time; what it costs in wall time, polls and memory.
//!
//! The network is built as `lcmp-switch rotor --links memory` builds it
//! (the same daemons, nodes and links), one thread, no kernel.

use std::time::Instant;

use lcmp_switch::daemon::{DaemonConfig, PollMode};
use lcmp_switch::frames::{FrameShare, FRAME_SIZE};
use lcmp_switch::linked_io::LinkedIo;
use lcmp_switch::mem_io::MemIo;
use lcmp_switch::mem_link::{port_mac, MemoryLinks, Transfer};
use lcmp_switch::rotor_daemon::{RotorNode, RotorNodeConfig, TorNode};
use lcmp_switch::tor_path::{TorConfig, TorSwitch};
use lcmp_switch::virtual_clock::{Delivery, VirtualNet};
use lcmp_topology::rotor::{self, RotorInputs};
use lcmp_topology::rotor_net::{RotorNetwork, RotorRole};
use lcmp_topology::units::{self, human_bytes, human_delay, human_rate};
use lcmp_wire::testing::FrameBuilder;
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;

use crate::heap;

type Tor = TorNode<LinkedIo<MemIo>>;
type Rotor = RotorNode<LinkedIo<MemIo>>;

pub const HELP: &str = "\
lcmp-bench virtual-rotor: a rotor network on the virtual clock (no root)

USAGE: lcmp-bench virtual-rotor [OPTIONS]

Builds the network in one process: ToRs and rotors as the daemons
lcmp-switch runs, each ToR's hosts as in-memory ports, every ToR-rotor
link a memory link, all on one virtual clock (VirtualNet: nothing sleeps,
the clock jumps to the next event). Then:
  1. idle for --seconds of simulated time: wall time, polls, polls per
     simulated second;
  2. the same network with traffic: every host sends --frames-per-host
     frames of --frame-size bytes, each to a random host behind another
     ToR, at random instants in the first half of the span, then runs
     --seconds: frames delivered, frame-hops (frames x switches crossed)
     per second of wall time, and whether every delivery fell in a slot's
     usable part (after its reconfiguration);
  3. memory: heap bytes each ToR, rotor and link holds (a counting
     allocator: bytes allocated while building it and still held), the
     frame area's share of each (chunks x 2048 B, mapped populated), and
     peak RSS (VmHWM of /proc/self/status).

DESIGN. --kind mars: the de Bruijn schedule of the degree the Mars
planner picks for --tors, --rotors, --slot, --reconfig, --rate, --buffer
and --max-delay (as `lcmp-agent rotor-plan`), Valiant shift routing;
--kind complete: RotorNet's complete graph, direct routing. Links have
no propagation delay (the rotor network model has none; memory links are
instantaneous on the virtual clock) and no send guard (no wake-up
lateness to cover).

OPTIONS (defaults: the Mars paper's evaluation network, 64 ToRs x 4
rotors x 4 hosts, 10 Gbit/s, 1 us reconfiguration; the slot, buffer and
delay budget are this benchmark's: with them the planner picks d = 8, the
paper's Mars degree):
  --tors N               ToRs [64]
  --rotors N             rotors = uplinks per ToR [4]
  --hosts-per-tor N      hosts per ToR [4]
  --kind mars|complete   schedule [mars]
  --slot T               slot length [10us]
  --reconfig T           reconfiguration at each slot's start [1us]
  --rate R               link rate [10Gbps]
  --buffer B             buffer per ToR [100kB]
  --max-delay T          the planner's delay budget [100us]
  --seconds S            simulated time of each run [1]
  --frames-per-host N    frames each host sends in the traffic run [100]
  --frame-size B         bytes per frame, 64..=1514 [1000]
  --link-depth N         frames per memory-link direction [4]
  --seed N               traffic seed [1]
  -h, --help             this text";

/// What to build and run.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    pub tors: u32,
    pub rotors: u32,
    pub hosts_per_tor: u32,
    pub mars: bool,
    pub slot_ns: u64,
    pub reconfig_ns: u64,
    pub rate_bps: u64,
    pub buffer_bytes: u64,
    pub max_delay_ns: u64,
    pub seconds: u64,
    pub frames_per_host: u32,
    pub frame_size: usize,
    pub link_depth: usize,
    pub seed: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            tors: 64,
            rotors: 4,
            hosts_per_tor: 4,
            mars: true,
            slot_ns: 10_000,
            reconfig_ns: 1_000,
            rate_bps: 10_000_000_000,
            buffer_bytes: 100_000,
            max_delay_ns: 100_000,
            seconds: 1,
            frames_per_host: 100,
            frame_size: 1000,
            link_depth: 4,
            seed: 1,
        }
    }
}

/// The options of `args` (after `virtual-rotor`); `None` for `--help`.
pub fn parse_args(args: &[String]) -> Result<Option<Options>, String> {
    let mut o = Options::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "-h" || a == "--help" {
            return Ok(None);
        }
        let Some(key) = a.strip_prefix("--") else {
            return Err(format!("unexpected argument {a:?}"));
        };
        let (key, v) = match key.split_once('=') {
            Some((k, v)) => (k, v.to_string()),
            None => (
                key,
                it.next()
                    .ok_or_else(|| format!("--{key} needs a value"))?
                    .clone(),
            ),
        };
        let num = |v: &str| -> Result<u64, String> {
            v.parse().map_err(|_| format!("bad --{key} {v:?}"))
        };
        let unit = |r: Result<u64, units::UnitError>| r.map_err(|e| format!("--{key}: {e}"));
        match key {
            "tors" => o.tors = num(&v)? as u32,
            "rotors" => o.rotors = num(&v)? as u32,
            "hosts-per-tor" => o.hosts_per_tor = num(&v)? as u32,
            "kind" => {
                o.mars = match v.as_str() {
                    "mars" => true,
                    "complete" => false,
                    _ => return Err(format!("--kind must be mars or complete, not {v:?}")),
                }
            }
            "slot" => o.slot_ns = unit(units::parse_duration(&v))?,
            "reconfig" => o.reconfig_ns = unit(units::parse_duration(&v))?,
            "rate" => o.rate_bps = unit(units::parse_rate(&v))?,
            "buffer" => o.buffer_bytes = unit(units::parse_buffer(&v))?,
            "max-delay" => o.max_delay_ns = unit(units::parse_delay(&v))?,
            "seconds" => o.seconds = num(&v)?,
            "frames-per-host" => o.frames_per_host = num(&v)? as u32,
            "frame-size" => o.frame_size = num(&v)? as usize,
            "link-depth" => o.link_depth = num(&v)? as usize,
            "seed" => o.seed = num(&v)?,
            _ => return Err(format!("unknown option --{key}")),
        }
    }
    if !(64..=1514).contains(&o.frame_size) {
        return Err(format!("--frame-size {} is not 64..=1514", o.frame_size));
    }
    if o.hosts_per_tor == 0 || o.hosts_per_tor > 250 {
        return Err(format!(
            "--hosts-per-tor {} is not 1..=250",
            o.hosts_per_tor
        ));
    }
    if o.link_depth == 0 || o.seconds == 0 {
        return Err("--link-depth and --seconds must be positive".into());
    }
    Ok(Some(o))
}

/// The network `o` describes, and which design it is, for the report.
pub fn network(o: &Options) -> Result<(RotorNetwork, String), String> {
    rotor::schedule_size(o.tors).map_err(|e| e.to_string())?;
    let (schedule, design) = if o.mars {
        let plan = rotor::plan(&RotorInputs {
            tors: o.tors,
            uplinks: o.rotors,
            slot_ns: o.slot_ns,
            reconfig_ns: o.reconfig_ns,
            rate_bps: o.rate_bps,
            buffer_bytes: o.buffer_bytes,
            max_delay_ns: o.max_delay_ns,
        })
        .map_err(|e| e.to_string())?;
        let c = plan.chosen;
        let s = rotor::de_bruijn(o.tors, c.degree, o.rotors).map_err(|e| e.to_string())?;
        let design = format!(
            "Mars: de Bruijn degree {} (the planner's choice), diameter {}, throughput bound {:.4}",
            c.degree, c.diameter, c.throughput_bound
        );
        (s, design)
    } else {
        let s = rotor::complete(o.tors, o.rotors).map_err(|e| e.to_string())?;
        (s, "RotorNet: complete graph, direct routing".to_string())
    };
    let mut n = RotorNetwork::from_schedule(&schedule, o.slot_ns, o.reconfig_ns);
    n.rate_bps = o.rate_bps;
    n.buffer_bytes = Some(o.buffer_bytes);
    n.hosts_per_tor = o.hosts_per_tor;
    // On the virtual clock every poll is on time: nothing to guard.
    n.tx_guard_ns = 0;
    Ok((n, design))
}

/// The MAC of host `h` of ToR `t` (known to its ToR: nothing to learn).
pub fn host_mac(t: u32, h: u32) -> [u8; 6] {
    [0x02, 0x48, 0, t as u8, h as u8, 0]
}

/// Frames in each ToR's pool: what it lends its rotors and hosts' ports
/// receive (`depth` each) plus its buffer in frames of `frame_size`.
pub fn tor_frames(n: &RotorNetwork, depth: usize, frame_size: usize) -> usize {
    (n.rotors + n.hosts_per_tor) as usize * depth + (n.buffer() as usize).div_ceil(frame_size)
}

/// Frames in each rotor's pool: what it lends its ToRs (it holds nothing).
pub fn rotor_frames(n: &RotorNetwork, depth: usize) -> usize {
    n.tors as usize * depth
}

/// What building the network held, bytes.
#[derive(Clone, Debug, Default)]
pub struct Memory {
    /// Heap of each ToR (switch, queues, route table, node, daemon).
    pub tor_heap: Vec<isize>,
    /// Heap of each rotor.
    pub rotor_heap: Vec<isize>,
    /// Heap of every memory link together (rings, wakers' bookkeeping).
    pub links_heap: isize,
    /// Memory links.
    pub links: usize,
    /// Frame area chunks of each ToR and each rotor.
    pub tor_frames: usize,
    pub rotor_frames: usize,
    /// The whole network, heap (nodes, links, driver), and its frame area.
    pub total_heap: isize,
    pub area_bytes: usize,
}

impl Memory {
    fn mean(v: &[isize]) -> isize {
        v.iter().sum::<isize>() / v.len().max(1) as isize
    }

    /// Mean heap of a ToR.
    pub fn tor_heap_mean(&self) -> isize {
        Self::mean(&self.tor_heap)
    }

    /// Mean heap of a rotor.
    pub fn rotor_heap_mean(&self) -> isize {
        Self::mean(&self.rotor_heap)
    }

    /// Heap of one memory link.
    pub fn link_heap(&self) -> isize {
        self.links_heap / self.links.max(1) as isize
    }
}

/// A rotor network on the virtual clock: ToR t is node t, rotor r node
/// `tors + r`; ToR t's host h is its port `rotors + h`.
pub struct Built {
    pub net: VirtualNet,
    pub n: RotorNetwork,
    pub epoch_ns: u64,
    pub memory: Memory,
}

fn daemon_config(name: &str) -> DaemonConfig {
    DaemonConfig {
        name: name.into(),
        poll: PollMode::Event,
        stats_file: None,
        // No stats file: the interval only paces housekeeping.
        stats_interval_ns: 1_000_000_000,
    }
}

/// Builds `n` (its schedule's slot 0 at `epoch_ns`, the clock starting
/// there), pools as [`tor_frames`] and [`rotor_frames`] for frames of
/// `frame_size`, memory links `depth` frames deep.
pub fn build(
    n: &RotorNetwork,
    epoch_ns: u64,
    depth: usize,
    frame_size: usize,
) -> Result<Built, String> {
    let (total_heap, built) = heap::held_by(|| build_inner(n, epoch_ns, depth, frame_size));
    let mut built = built?;
    built.memory.total_heap = total_heap;
    Ok(built)
}

fn build_inner(
    n: &RotorNetwork,
    epoch_ns: u64,
    depth: usize,
    frame_size: usize,
) -> Result<Built, String> {
    let wiring = n.wiring().map_err(|e| e.to_string())?;
    let names: Vec<&str> = wiring.switches().iter().map(|s| s.name.as_str()).collect();
    let ifnames = |sw: &str, i: u8| match n.role(sw) {
        Ok(role) => n.port_names(role)[usize::from(i)].clone(),
        Err(_) => format!("p{i}"),
    };
    let (links_heap, links) =
        heap::held_by(|| MemoryLinks::build(&wiring, &names, depth, &ifnames));
    let mut links = links.map_err(|e| format!("memory links: {e}"))?;
    let (tf, rf) = (tor_frames(n, depth, frame_size), rotor_frames(n, depth));
    let mut pools = vec![tf; n.tors as usize];
    pools.resize((n.tors + n.rotors) as usize, rf);
    let area_bytes = pools.iter().sum::<usize>() * FRAME_SIZE;
    let mut shares = FrameShare::split_area(&pools)?.into_iter();
    let mut memory = Memory {
        links_heap,
        links: links.len(),
        tor_frames: tf,
        rotor_frames: rf,
        area_bytes,
        ..Memory::default()
    };
    let mut net = VirtualNet::new(epoch_ns);
    let uplinks = n.rotors as usize;
    let ports = uplinks + n.hosts_per_tor as usize;
    let node_config = |role| RotorNodeConfig {
        port_names: n.port_names(role),
        epoch: Some((epoch_ns, "benchmark".into())),
        spin_ns: 0,
    };
    for t in 0..n.tors {
        let name = format!("tor{t}");
        let share = shares.next().ok_or("frame shares")?;
        let (held, index) = heap::held_by(|| -> Result<usize, String> {
            let io = MemIo::in_share(ports - links.count(&name, ports), share);
            let io = LinkedIo::new(io, links.layout(&name, ports), Transfer::Descriptor)?;
            let sw = TorSwitch::new(
                io,
                TorConfig::for_network(
                    n,
                    t,
                    (0..ports).map(|p| port_mac(&name, p as u8)).collect(),
                    (0..n.hosts_per_tor).map(|h| Some(host_mac(t, h))).collect(),
                    epoch_ns,
                    7 + u64::from(t),
                )?,
                true,
            )?;
            let node = TorNode::new(sw, node_config(RotorRole::Tor(t)));
            Ok(net.add_node(node, daemon_config(&name)))
        });
        if index? != t as usize {
            return Err(format!("{name} is not node {t}"));
        }
        memory.tor_heap.push(held);
    }
    for r in 0..n.rotors {
        let name = format!("rotor{r}");
        let share = shares.next().ok_or("frame shares")?;
        let tors = n.tors as usize;
        let (held, added) = heap::held_by(|| -> Result<usize, String> {
            let io = MemIo::in_share(tors - links.count(&name, tors), share);
            let io = LinkedIo::new(io, links.layout(&name, tors), Transfer::Descriptor)?;
            let node = RotorNode::new(io, n, r, node_config(RotorRole::Rotor(r)))?;
            Ok(net.add_node(node, daemon_config(&name)))
        });
        added?;
        memory.rotor_heap.push(held);
    }
    net.join_links(&links)?;
    Ok(Built {
        net,
        n: n.clone(),
        epoch_ns,
        memory,
    })
}

/// A UDP frame of `len` bytes from host `src` (ToR, host) to host `dst`,
/// TTL 64, its payload's first 4 bytes `tag` (big-endian).
pub fn frame(n: &RotorNetwork, src: (u32, u32), dst: (u32, u32), tag: u32, len: usize) -> Vec<u8> {
    let s = RotorNetwork::host_ip(src.0, src.1).octets();
    let d = RotorNetwork::host_ip(dst.0, dst.1).octets();
    let gateway = port_mac(&format!("tor{}", src.0), (n.rotors + src.1) as u8);
    FrameBuilder::ipv4(s, d)
        .macs(host_mac(src.0, src.1), gateway)
        .ttl(64)
        .udp(4000 + (tag % 1000) as u16, 5001)
        .payload(&tag.to_be_bytes())
        .pad_to(len)
        .build()
}

impl Built {
    /// The node and port of host `h` of ToR `t`.
    pub fn host_port(&self, t: u32, h: u32) -> (usize, usize) {
        (t as usize, (self.n.rotors + h) as usize)
    }

    /// Records what every host receives ([`VirtualNet::take_delivered`]).
    pub fn watch_hosts(&mut self) {
        for t in 0..self.n.tors {
            for h in 0..self.n.hosts_per_tor {
                let (node, port) = self.host_port(t, h);
                self.net.watch(node, port);
            }
        }
    }

    /// Frames every switch has sent on any port: frames x switches
    /// crossed.
    pub fn frame_hops(&mut self) -> u64 {
        let tors = self.n.tors as usize;
        let mut hops = 0;
        for i in 0..self.net.len() {
            let traffic = if i < tors {
                let d = self.net.daemon::<Tor>(i).expect("a ToR");
                d.node().switch().traffic().to_vec()
            } else {
                let d = self.net.daemon::<Rotor>(i).expect("a rotor");
                d.node().switch().traffic().to_vec()
            };
            hops += traffic.iter().map(|t| t.tx_frames).sum::<u64>();
        }
        hops
    }

    /// Frames the ToRs delivered to their hosts and dropped, and frames
    /// the rotors dropped.
    pub fn outcome(&mut self) -> (u64, u64, u64) {
        let (mut delivered, mut tor_drops, mut rotor_drops) = (0, 0, 0);
        for i in 0..self.net.len() {
            if i < self.n.tors as usize {
                let sw = self.net.daemon::<Tor>(i).expect("a ToR").node().switch();
                delivered += sw.counters().delivered;
                tor_drops += sw.drops().map(|(_, n)| n).sum::<u64>();
            } else {
                let c = self
                    .net
                    .daemon::<Rotor>(i)
                    .expect("a rotor")
                    .node()
                    .switch()
                    .counters();
                rotor_drops += c.dropped_reconfiguring
                    + c.dropped_no_circuit
                    + c.dropped_tx_full
                    + c.dropped_no_epoch;
            }
        }
        (delivered, tor_drops, rotor_drops)
    }

    /// Where in its slot a transmission ending at `at_ns` was, ns since
    /// the slot's start: in `1..=slot` (one ending exactly at a slot's end
    /// belongs to that slot).
    pub fn slot_offset(&self, at_ns: u64) -> u64 {
        (at_ns.saturating_sub(self.epoch_ns + 1)) % self.n.slot_ns + 1
    }
}

/// One run's figures.
#[derive(Clone, Debug, Default)]
pub struct Run {
    pub wall_s: f64,
    pub polls: u64,
    pub frame_hops: u64,
}

/// Runs `b` for `span_ns` of simulated time from now.
pub fn run(b: &mut Built, span_ns: u64) -> Run {
    let (polls, hops) = (b.net.polls(), b.frame_hops());
    let until = b.net.now_ns() + span_ns;
    let t0 = Instant::now();
    b.net.run_until(until);
    let wall_s = t0.elapsed().as_secs_f64();
    Run {
        wall_s,
        polls: b.net.polls() - polls,
        frame_hops: b.frame_hops() - hops,
    }
}

/// Schedules `per_host` frames from every host, each to a random host
/// behind another ToR, at random instants in `[start, start + window)`;
/// returns how many.
pub fn schedule_traffic(
    b: &mut Built,
    per_host: u32,
    len: usize,
    window_ns: u64,
    seed: u64,
) -> u64 {
    let mut rng = Pcg64::seed_from_u64(seed);
    let (tors, hosts) = (b.n.tors, b.n.hosts_per_tor);
    let start = b.net.now_ns();
    let mut tag = 0u32;
    for t in 0..tors {
        for h in 0..hosts {
            let (node, port) = b.host_port(t, h);
            for _ in 0..per_host {
                // Another ToR: 1..tors away.
                let d = (t + rng.random_range(1..tors)) % tors;
                let dh = rng.random_range(0..hosts);
                let at = start + rng.random_range(0..window_ns.max(1));
                b.net
                    .inject_at(at, node, port, frame(&b.n, (t, h), (d, dh), tag, len));
                tag += 1;
            }
        }
    }
    u64::from(tag)
}

/// How the deliveries sit in their slots: (inside a slot's usable part,
/// the earliest offset after the reconfiguration ends, the latest). A
/// network whose rotors hold one matching each never reconfigures (static:
/// [`RotorNetwork::per_rotor`] 1), so there every offset is usable.
pub fn slot_check(b: &Built, got: &[Delivery]) -> (usize, u64, u64) {
    let reconf = if b.n.per_rotor > 1 {
        b.n.reconfig_ns
    } else {
        0
    };
    let mut inside = 0;
    let (mut first, mut last) = (u64::MAX, 0);
    for d in got {
        let off = b.slot_offset(d.at_ns);
        // A frame crosses a circuit only while it is up: its last hop's
        // serialization ends after the reconfiguration, within the slot.
        if off > reconf {
            inside += 1;
            first = first.min(off - reconf);
            last = last.max(off - reconf);
        }
    }
    (inside, first, last)
}

fn signed_bytes(b: isize) -> String {
    if b < 0 {
        format!("-{}", human_bytes(b.unsigned_abs() as u64))
    } else {
        human_bytes(b as u64)
    }
}

/// `lcmp-bench virtual-rotor`.
pub fn main(o: &Options) -> Result<(), String> {
    let (n, design) = network(o)?;
    let span = o.seconds * 1_000_000_000;
    println!(
        "network: {} ToRs x {} rotors x {} hosts per ToR ({} hosts), {}; slot {}, reconfiguration {}, {} links, buffer {} per ToR",
        n.tors,
        n.rotors,
        n.hosts_per_tor,
        n.tors * n.hosts_per_tor,
        design,
        human_delay(n.slot_ns),
        human_delay(n.reconfig_ns),
        human_rate(n.rate_bps),
        human_bytes(n.buffer())
    );
    let rss0 = heap::proc_status_bytes("VmRSS").unwrap_or(0);
    let t0 = Instant::now();
    let mut b = build(&n, 0, o.link_depth, o.frame_size)?;
    let build_s = t0.elapsed().as_secs_f64();
    let rss1 = heap::proc_status_bytes("VmRSS").unwrap_or(0);
    let m = &b.memory;
    println!(
        "built in {build_s:.3} s: {} nodes, {} memory links (depth {}); RSS {} -> {}",
        b.net.len(),
        m.links,
        o.link_depth,
        human_bytes(rss0),
        human_bytes(rss1)
    );
    println!(
        "memory per ToR: heap {} + frames {} ({} x 2048 B); per rotor: heap {} + frames {} ({} x 2048 B); per memory link: heap {}",
        signed_bytes(m.tor_heap_mean()),
        human_bytes((m.tor_frames * FRAME_SIZE) as u64),
        m.tor_frames,
        signed_bytes(m.rotor_heap_mean()),
        human_bytes((m.rotor_frames * FRAME_SIZE) as u64),
        m.rotor_frames,
        signed_bytes(m.link_heap())
    );
    let per_tor_all = m.tor_heap_mean()
        + (m.tor_frames * FRAME_SIZE) as isize
        + n.rotors as isize * m.link_heap();
    println!(
        "  a ToR with its {} uplinks' rings: {}; whole network: heap {} + frame area {}",
        n.rotors,
        signed_bytes(per_tor_all),
        signed_bytes(m.total_heap),
        human_bytes(m.area_bytes as u64)
    );
    let idle = run(&mut b, span);
    println!(
        "idle {} s simulated: wall {:.6} s, {} polls ({:.1} per simulated second, {:.2} per node), frame-hops {}",
        o.seconds,
        idle.wall_s,
        idle.polls,
        idle.polls as f64 / o.seconds as f64,
        idle.polls as f64 / b.net.len() as f64,
        idle.frame_hops
    );
    println!(
        "peak RSS after idle run (VmHWM): {}",
        human_bytes(heap::proc_status_bytes("VmHWM").unwrap_or(0))
    );
    drop(b);

    let mut b = build(&n, 0, o.link_depth, o.frame_size)?;
    b.watch_hosts();
    let (scheduled_heap, sent) = heap::held_by(|| {
        schedule_traffic(&mut b, o.frames_per_host, o.frame_size, span / 2, o.seed)
    });
    let busy = run(&mut b, span);
    let got = b.net.take_delivered();
    let (delivered, tor_drops, rotor_drops) = b.outcome();
    let (inside, first, last) = slot_check(&b, &got);
    println!(
        "traffic {} s simulated: {sent} frames of {} B sent ({} per host), {} delivered ({} watched at hosts), dropped {} at ToRs, {} at rotors",
        o.seconds,
        o.frame_size,
        o.frames_per_host,
        delivered,
        got.len(),
        tor_drops,
        rotor_drops
    );
    println!(
        "  wall {:.3} s, {} polls, {} frame-hops ({:.2} per frame): {:.0} frame-hops/s of wall time",
        busy.wall_s,
        busy.polls,
        busy.frame_hops,
        busy.frame_hops as f64 / delivered.max(1) as f64,
        busy.frame_hops as f64 / busy.wall_s
    );
    println!(
        "  deliveries inside a slot's usable part: {inside} of {}; offsets after the reconfiguration {} .. {}",
        got.len(),
        human_delay(first.min(last)),
        human_delay(last)
    );
    let copied: usize = got.iter().map(|d| d.frame.capacity()).sum();
    println!(
        "peak RSS (VmHWM): {} (the benchmark's own frames in it: {} of scheduled injections, {} of deliveries copied out)",
        human_bytes(heap::proc_status_bytes("VmHWM").unwrap_or(0)),
        signed_bytes(scheduled_heap),
        human_bytes(copied as u64)
    );
    for s in b.net.finish() {
        s.map_err(|e| e.to_string())?;
    }
    if inside != got.len() {
        return Err(format!(
            "{} deliveries outside a slot's usable part",
            got.len() - inside
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1_000;

    /// The tag of a frame [`frame`] built.
    fn tag(frame: &[u8]) -> Option<u32> {
        // Ethernet 14 + IPv4 20 + UDP 8: the payload's first four bytes.
        Some(u32::from_be_bytes(frame.get(42..46)?.try_into().ok()?))
    }

    /// 16 ToRs x 4 rotors x 4 hosts, RotorNet's complete graph, direct
    /// routing, 1 Gbit/s (8 ns a byte: a 1000-byte frame takes 8 us),
    /// slots of 100 us whose first 10 us are reconfiguration.
    fn complete16() -> Options {
        Options {
            tors: 16,
            mars: false,
            slot_ns: 100 * US,
            reconfig_ns: 10 * US,
            rate_bps: 1_000_000_000,
            ..Options::default()
        }
    }

    #[test]
    fn frames_cross_the_circuits_at_the_slot_openings_worked_out_by_hand() {
        let o = complete16();
        let (n, _) = network(&o).unwrap();
        let mut b = build(&n, 0, o.link_depth, o.frame_size).unwrap();
        b.watch_hosts();
        // complete(16, 4): 15 shifts and one idle matching, 4 per rotor;
        // rotor r in slot s applies shift 4r + (s mod 4) + 1 (r = 3, s mod
        // 4 = 3: idle). So ToR a reaches ToR b (k = b - a mod 16) on
        // uplink (k - 1) / 4 in the slots s = (k - 1) mod 4 (mod 4).
        // (sent at, from (ToR, host), to (ToR, host), tag)
        let sends = [
            // k = 1: uplink 0, slots 0, 4, 8, ...: waits out slot 0's
            // reconfiguration, starts at 10 us, delivered at 18 us.
            (0, (0, 0), (1, 2), 1),
            // k = 2: uplink 0, slots 1, 5, ...: slot 1 opens at 110 us:
            // 118 us.
            (0, (0, 1), (2, 0), 2),
            // k = 12: uplink 2, slots 3, 7, ...: slot 3 opens at 310 us:
            // 318 us.
            (50 * US, (3, 0), (15, 3), 3),
            // k = 4: uplink 0, slots 3, 7, ...: both queue for ToR 9 and
            // leave back to back from 310 us: 318 and 326 us.
            (0, (5, 0), (9, 1), 4),
            (0, (5, 1), (9, 1), 5),
            // k = 1 while its circuit is up (slot 4: 410-500 us usable):
            // starts at once, 450 + 8 = 458 us.
            (450 * US, (7, 0), (8, 0), 6),
            // The same circuit at 495 us: 503 us would end after slot 4
            // does (500 us), so it waits for slot 8 (opens at 810 us):
            // 818 us.
            (495 * US, (7, 1), (8, 1), 7),
        ];
        for (at, src, dst, tag) in sends {
            let (node, port) = b.host_port(src.0, src.1);
            let f = frame(&b.n, src, dst, tag, 1000);
            b.net.inject_at(at, node, port, f);
        }
        b.net.run_until(1_000 * US);
        let mut got: Vec<(u64, usize, usize, u32)> = b
            .net
            .take_delivered()
            .iter()
            .map(|d| {
                assert_eq!(d.frame[22], 62, "two ToRs: TTL 64 -> 62");
                (d.at_ns, d.node, d.port, tag(&d.frame).unwrap())
            })
            .collect();
        got.sort_unstable();
        // Host h of ToR t is node t, port 4 + h.
        assert_eq!(
            got,
            vec![
                (18 * US, 1, 6, 1),
                (118 * US, 2, 4, 2),
                (318 * US, 9, 5, 4),
                (318 * US, 15, 7, 3),
                (326 * US, 9, 5, 5),
                (458 * US, 8, 4, 6),
                (818 * US, 8, 5, 7),
            ]
        );
        // Every frame crossed two ToRs and one rotor: 7 x 3 frame-hops.
        assert_eq!(b.frame_hops(), 21);
        assert_eq!(b.outcome(), (7, 0, 0));
        for s in b.net.finish() {
            s.unwrap();
        }
    }

    #[test]
    fn the_slot_check_counts_deliveries_in_the_usable_part_of_a_slot() {
        let (n, _) = network(&complete16()).unwrap();
        let b = build(&n, 0, 4, 1000).unwrap();
        let at = |at_ns: u64| Delivery {
            at_ns,
            node: 0,
            port: 4,
            frame: Vec::new(),
        };
        // 10 us into slot 0 is its reconfiguration's end: not usable; 18 us
        // is 8 us after; 200 us is slot 1's end (belongs to slot 1: 90 us
        // after its reconfiguration); 305 us is in slot 3's
        // reconfiguration.
        let got = [at(10 * US), at(18 * US), at(200 * US), at(305 * US)];
        assert_eq!(slot_check(&b, &got), (2, 8 * US, 90 * US));
    }

    #[test]
    fn mars_at_64_tors_is_the_planners_degree_8_with_2_matchings_per_rotor() {
        // Slot 10 us, 10 Gbit/s: c x slot = 12.5 kB. Degree d needs d x
        // 12.5 kB of buffer and 2 D (d / 4) x 10 us of delay. d = 8
        // (diameter 2: 8^2 = 64): 100 kB and 80 us, within 100 kB and 100
        // us; d = 64 (diameter 1) would double the throughput but needs
        // 800 kB; d = 12..60 (diameter 2) tie with 8 and need more.
        let (n, design) = network(&Options::default()).unwrap();
        assert_eq!(
            (n.tors, n.rotors, n.per_rotor, n.hosts_per_tor),
            (64, 4, 2, 4)
        );
        assert!(design.contains("degree 8"), "{design}");
        assert_eq!(
            n.routing(),
            lcmp_topology::rotor_net::RotorRouting::ShiftValiant
        );
    }

    #[test]
    fn options_parse_with_units_and_refuse_what_they_do_not_know() {
        let args = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        let o = parse_args(&args("--tors 16 --slot 100us --rate=1Gbps --kind complete"))
            .unwrap()
            .unwrap();
        assert_eq!(
            (o.tors, o.slot_ns, o.rate_bps, o.mars),
            (16, 100_000, 1_000_000_000, false)
        );
        assert_eq!(parse_args(&args("--help")).unwrap(), None);
        assert!(parse_args(&args("--nope 1"))
            .unwrap_err()
            .contains("--nope"));
        assert!(parse_args(&args("--frame-size 20")).is_err());
        assert!(parse_args(&args("--kind expander")).is_err());
    }
}

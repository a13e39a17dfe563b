//! A whole network in one process on the virtual clock: every switch an
//! [`LcmpNode`] daemon, every host a [`RoceHost`] daemon, every link
//! (switch to switch and switch to host) a memory link, all on one
//! [`VirtualNet`] ([`run_virtual`]).
//!
//! - The network is the user's, unscaled ([`VirtualRun::network`]); the
//!   run's [`Scaling`](lcmp_topology::Scaling) (`switch.scaling`, which
//!   `roce.scaling` must equal) applies to what is emulated: the switches'
//!   ports, and the hosts' NICs, which are built from the emulated host
//!   links.
//! - A host's NIC buffer is the host link's buffer, at most
//!   [`HOST_NIC_BUFFER_BYTES`]: the sender paces at line rate and hands a
//!   data frame to the NIC only when its buffer is empty, so the NIC holds
//!   answers (ACKs, CNPs) and one data frame, and the host link's buffer
//!   belongs to the switch's port towards the host. While PFC pauses the
//!   host the answers to what it receives pile up there, as in the
//!   simulator's NIC (which queues them without bound), so its pool has a
//!   buffer for every ACK the NIC buffer holds ([`host_pool_frames`]).
//! - What a switch's ports hold (their queues and what is on their links)
//!   is kept as bytes, not in pool buffers ([`lcmp_switch::flight`]): a
//!   network at full rate holds gigabytes on its long-haul links, and a
//!   buffer is a 2 KiB chunk for a 1,074-byte data frame or a 62-byte ACK.
//!   Frames live in one frame area, mapped unpopulated
//!   ([`FrameShare::split_area_unpopulated`]): each node's pool is sized
//!   for the worst case of its ports all the same ([`pool_frames`]: every
//!   link's bandwidth-delay product and all its queue may hold, drop
//!   headroom included, in full data frames), and since a pool hands out
//!   the buffer it got back last and builds its free list as buffers come
//!   back, the memory touched follows the most buffers ever in use at once
//!   (frames between a receive and their queue, and on their way out), not
//!   the pools' size. A dry pool would hold its upstream's frames in that
//!   port's delay line (counted by the port's
//!   `memory_link.peer_buffers_empty`), where the line's overflow drops
//!   them.
//! - What must fit in memory before the first frame moves (the egress
//!   queues every port and NIC preallocates, and each flow's queue pair
//!   and record) is estimated first ([`MemoryEstimate`]);
//!   a network that needs more than the machine has available is refused
//!   with one line.
//! - The run stops at [`VirtualRun::end_ns`] or as soon as every host has
//!   ended all its flows ([`RoceHost::count_done_in`]). Flows still running
//!   then are reported `unfinished`; flows whose arrival lies beyond the
//!   end never started and have no record (as the client past its
//!   duration).

use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use lcmp_control::server::{serve_scoped, Inbox};
use lcmp_control::Snapshot;
use lcmp_switch::capture::{Capture, CaptureSpec, Captured};
use lcmp_switch::config::{defaults, delay_line_frames, Options};
use lcmp_switch::daemon::{run_many, Clock, Daemon, DaemonConfig, Loop, MonotonicClock};
use lcmp_switch::frames::FrameShare;
use lcmp_switch::in_memory;
use lcmp_switch::lcmp_node::LcmpNode;
use lcmp_switch::linked_io::LinkedIo;
use lcmp_switch::mem_io::MemIo;
use lcmp_switch::mem_link::{mem_link, port_mac, MemoryLinks, Transfer};
use lcmp_switch::virtual_clock::VirtualNet;
use lcmp_topology::units::human_bytes;
use lcmp_topology::Topology;
use lcmp_traffic::client::Destination;
use lcmp_traffic::flows::{Arrivals, FlowSource};
use lcmp_traffic::record::FlowRecord;
use lcmp_traffic::rocev2::client::RoceOptions;
use lcmp_traffic::rocev2::sender::ETHERNET_HEADER;
use lcmp_traffic::rocev2::wire::{AETH_LEN, BTH_LEN, ICRC_LEN, IPV4_LEN, UDP_LEN};

use crate::host::{HostConfig, RoceHost};
use crate::host_io;

/// One sender's traffic, as `lcmp-traffic client` takes it.
pub struct HostTraffic {
    /// The host's name in the topology.
    pub host: String,
    /// Its flows: a schedule (trace replay) or Poisson arrivals.
    pub flows: FlowSource,
    /// The receivers (`NAME=IP:4791`), indexed by the flows' `dst`.
    pub dsts: Vec<Destination>,
}

/// A whole network in one process on the virtual clock.
pub struct VirtualRun {
    /// The network as the user wrote it, hosts included (unscaled; the
    /// testbed's `bed::testbed_network`).
    pub network: Topology,
    /// Every switch's options (policy and weights, ECN, drop headroom,
    /// ...; `switch.scaling` is the run's scaling). Interface names and
    /// peer MACs are the run's own (`p<i>`, the memory links' MACs).
    pub switch: Options,
    /// The hosts' RoCEv2 options (the congestion control and its
    /// parameters, HPCC's base RTT, payload, RTO; `roce.scaling` the same
    /// scaling). Each host's line rate is its host link's rate.
    pub roce: RoceOptions,
    /// The senders; every other host only receives.
    pub traffic: Vec<HostTraffic>,
    /// Virtual time at which the run stops, ns (arrivals end + drain); it
    /// also stops earlier once every flow of every sender has ended.
    pub end_ns: u64,
    /// Decision log of every switch (`{switch}` in the path is the
    /// switch's name), the same CSV the switch writes with --flow-log.
    pub flow_log: Option<PathBuf>,
    /// Priority flow control on every switch whose buffer covers its
    /// ports' headroom ([`lcmp_switch::Switch::enable_pfc`]; a switch
    /// with long-haul links runs without, said on stderr), pausing the
    /// RoCEv2 priority; hosts and switches stop for the pauses.
    pub pfc: bool,
}

/// What a [`run_virtual`] gives back.
#[derive(Debug)]
pub struct VirtualOutcome {
    /// Per sender, in the order of `traffic`: its flow records, exactly as
    /// `lcmp-traffic client` writes them (unfinished flows included with
    /// their status).
    pub records: Vec<(String, Vec<FlowRecord>)>,
    /// Every switch's final snapshot (the stats-file schema), by switch
    /// name, in the topology's order.
    pub switches: Vec<(String, Snapshot)>,
    /// Every host's final status ([`crate::host::HostStatus`] as JSON:
    /// its counters, the sender's DCQCN and go-back-N totals, the
    /// receiver's), by host name, in the order the hosts were built.
    pub hosts: Vec<(String, serde_json::Value)>,
    /// What each capture of the run's [`Recording`] recorded, in the
    /// order asked.
    pub captures: Vec<PortCapture>,
    /// Virtual time when the run ended, ns.
    pub end_ns: u64,
    /// Node polls the driver made (for the benchmark).
    pub polls: u64,
    /// Frames every switch port transmitted, summed (frame-hops, for the
    /// benchmark).
    pub frame_hops: u64,
}

/// The most a host's NIC buffers, bytes (see the module docs): 16,913
/// ACKs, the answers to 18 MB received, 1.45 ms at 100 Gbit/s.
pub const HOST_NIC_BUFFER_BYTES: u64 = 1024 * 1024;
/// Ring entries per direction of every memory link.
pub const LINK_DEPTH: usize = 512;
/// Frames per port a pool holds beyond its link's needs: what the peer
/// may be lent, and a batch in hand.
const POOL_SLACK: usize = LINK_DEPTH + 2 * defaults::BATCH;
/// Bytes a frame adds to a RoCEv2 payload (Ethernet, IPv4, UDP, BTH, ICRC;
/// the first packet's RETH aside).
const FRAME_OVERHEAD: u64 = (ETHERNET_HEADER + IPV4_LEN + UDP_LEN + BTH_LEN + ICRC_LEN) as u64;
/// An ACK's frame, the smallest a host queues: the overhead and its AETH.
const ACK_FRAME_BYTES: u64 = FRAME_OVERHEAD + AETH_LEN as u64;
/// What one slot of an egress queue or delay line takes, bytes.
pub const EGRESS_SLOT_BYTES: u64 = 40;
/// The slots an egress preallocates per queue at most (`Egress::new`).
const EGRESS_PREALLOC_SLOTS: u64 = 1 << 20;
/// The smallest frame an egress sizes its queue by (`Egress::new`).
const EGRESS_MIN_FRAME: u64 = 60;
/// A flow's queue pair while it runs, and its record until the end
/// (the struct and its strings), bytes.
pub const FLOW_BYTES: u64 = 340 + std::mem::size_of::<FlowRecord>() as u64 + 96;
/// A port's pool at most, buffers (64 GiB of address space).
const MAX_PORT_FRAMES: u64 = 1 << 25;

type Io = LinkedIo<MemIo>;

/// Buffers a pool needs for one port: the link's bandwidth-delay product
/// and its `buffer_bytes` in full data frames of `payload` bytes (answers
/// on the way back are one per data frame), and [`POOL_SLACK`].
pub fn pool_frames(rate_bps: u64, delay_ns: u64, buffer_bytes: u64, payload: u32) -> usize {
    let bdp = u128::from(rate_bps) * u128::from(delay_ns) / 8_000_000_000;
    let bytes = bdp.saturating_add(u128::from(buffer_bytes));
    let frame = u128::from(u64::from(payload) + FRAME_OVERHEAD);
    let frames = bytes.div_ceil(frame).min(u128::from(MAX_PORT_FRAMES)) as usize;
    frames + POOL_SLACK
}

/// Buffers a host's pool needs: its link's bandwidth-delay product in
/// full data frames and the slack, as [`pool_frames`], and its NIC buffer
/// in ACKs (a PFC pause holds them there; see the module docs).
pub fn host_pool_frames(
    rate_bps: u64,
    delay_ns: u64,
    nic_buffer_bytes: u64,
    payload: u32,
) -> usize {
    let acks = nic_buffer_bytes
        .div_ceil(ACK_FRAME_BYTES)
        .min(MAX_PORT_FRAMES);
    pool_frames(rate_bps, delay_ns, 0, payload) + acks as usize
}

/// The slots (queue, delay line) an egress of this link preallocates
/// (`Egress::new`), each [`EGRESS_SLOT_BYTES`]: what [`MemoryEstimate`]
/// counts per port and NIC.
pub fn egress_slots(rate_bps: u64, delay_ns: u64, buffer_bytes: u64) -> (u64, u64) {
    let queue = (buffer_bytes / EGRESS_MIN_FRAME + 1).min(EGRESS_PREALLOC_SLOTS);
    let line = (delay_line_frames(rate_bps, delay_ns) as u64).min(EGRESS_PREALLOC_SLOTS);
    (queue, line)
}

/// What a network needs in memory before its first frame moves, bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryEstimate {
    /// The egress queues and delay lines every switch port and host NIC
    /// preallocates.
    pub egress_bytes: u64,
    /// Every flow's queue pair and record (a Poisson source's by its
    /// expected count).
    pub flow_bytes: u64,
    /// Frame buffers the pools may hand out in all: address space only,
    /// a page (and a free-list entry) taken when first used.
    pub frames: u64,
    /// Host NICs and switch ports counted.
    pub ports: u64,
    /// Flows counted.
    pub flows: u64,
}

impl MemoryEstimate {
    /// The total, bytes.
    pub fn total(&self) -> u64 {
        self.egress_bytes.saturating_add(self.flow_bytes)
    }

    fn egress(&mut self, rate_bps: u64, delay_ns: u64, buffer_bytes: u64) {
        let (queue, line) = egress_slots(rate_bps, delay_ns, buffer_bytes);
        self.egress_bytes = self
            .egress_bytes
            .saturating_add((queue + line) * EGRESS_SLOT_BYTES);
        self.ports += 1;
    }

    /// Checks the estimate against `available` bytes; the error is one
    /// line.
    pub fn check(&self, available: u64) -> Result<(), String> {
        if self.total() <= available {
            return Ok(());
        }
        Err(format!(
            "the network needs {} before its first frame ({} ports' and NICs' egress queues: {}; {} flows' queue pairs and records: {}), more than the {} available",
            human_bytes(self.total()),
            self.ports,
            human_bytes(self.egress_bytes),
            self.flows,
            human_bytes(self.flow_bytes),
            human_bytes(available),
        ))
    }
}

/// The memory the system could still give, bytes (`MemAvailable`);
/// unbounded when it cannot be read.
pub fn available_memory_bytes() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("MemAvailable:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(u64::MAX, |kb| kb.saturating_mul(1024))
}

/// A host as the run builds it.
struct HostPlan {
    name: String,
    cfg: HostConfig,
    flows: FlowSource,
    dsts: Vec<Destination>,
    pool: usize,
}

/// Where a run is, for [`run_virtual_observed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Virtual time, ns.
    pub now_ns: u64,
    /// Node polls so far.
    pub polls: u64,
    /// Hosts that have ended all their flows (receivers count from their
    /// first poll).
    pub hosts_done: usize,
    /// Hosts in all.
    pub hosts: usize,
}

/// A port whose frames a run records: the switch's own capture (the one
/// `lcmp-ctl capture` starts over the control socket), started before
/// the run's first frame and drained while it goes, so a capture holds
/// every frame the port received or sent, both directions, until its
/// bytes reach `max_bytes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureAt {
    /// The switch.
    pub switch: String,
    /// Its port: interface name (`p2`) or index (`2`), as `lcmp-ctl`
    /// names ports. A switch captures one port.
    pub port: String,
    /// Bytes kept of each frame (its length is recorded whole).
    pub snaplen: usize,
    /// Bytes (as kept) recorded at most; nothing after.
    pub max_bytes: u64,
}

/// What a [`CaptureAt`] recorded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PortCapture {
    /// The switch.
    pub switch: String,
    /// The port's interface name.
    pub port: String,
    /// Bytes kept of each frame.
    pub snaplen: usize,
    /// The frames in the order the switch saw them; their times are the
    /// network's clock, ns: virtual time on the virtual clock, the run's
    /// monotonic clock from its start on the wall clock (the times of
    /// `flows.csv` either way).
    pub frames: Vec<Captured>,
    /// The kept bytes `frames` point into.
    pub data: Vec<u8>,
    /// Frames the port received and sent in the whole run (its
    /// `rx_frames` and `tx_frames`): more than `frames` when the capture
    /// reached `max_bytes`.
    pub seen: u64,
    /// Frames lost because the switch's capture buffer filled between two
    /// drains (0 unless the machine fell far behind).
    pub dropped: u64,
}

impl PortCapture {
    /// Frames the port carried that are not in `frames` (the capture's
    /// limit reached, or lost).
    pub fn not_recorded(&self) -> u64 {
        self.seen.saturating_sub(self.frames.len() as u64)
    }

    /// Takes what `c` holds, when it holds at least `min_bytes`.
    fn take_from(&mut self, c: &mut Capture, min_bytes: u64) {
        let (_, taken_bytes, dropped) = c.counts();
        self.dropped = dropped;
        if taken_bytes.saturating_sub(self.data.len() as u64) < min_bytes.max(1) {
            return;
        }
        let (frames, data) = c.drain();
        let base = self.data.len();
        self.frames.extend(frames.into_iter().map(|f| Captured {
            start: f.start + base,
            ..f
        }));
        self.data.extend_from_slice(&data);
    }

    /// The port's frames in the run, from the switch's final snapshot.
    fn count_seen(&mut self, snap: &Snapshot) {
        if let Some(p) = snap.port(&self.port) {
            self.seen = p.counter("rx_frames") + p.counter("tx_frames");
        }
    }
}

/// What a run records besides its outcome ([`run_virtual_recorded`],
/// [`run_wall_recorded`]).
#[derive(Default, Clone, Copy)]
pub struct Recording<'a> {
    /// Ports whose frames are recorded (one per switch).
    pub captures: &'a [CaptureAt],
    /// On the wall clock: each switch's stats file (its snapshot, written
    /// every second as `lcmp-switch --stats-file` does: what `lcmp-testbed
    /// status` reads), by switch name. Not on the virtual clock.
    pub stats_file: Option<&'a dyn Fn(&str) -> PathBuf>,
}

/// Captured bytes a switch may hold before the virtual driver drains
/// them: well below the capture's buffer
/// ([`lcmp_switch::capture::BUFFER_LIMIT`]), which a few polls cannot
/// fill from here.
const DRAIN_BYTES: u64 = 2 << 20;
/// Polls between the virtual driver's looks at the captures.
const DRAIN_EVERY_POLLS: u64 = 16;
/// How often a wall-clock run drains its captures, ns.
const WALL_DRAIN_NS: u64 = 2_000_000;

/// Starts every capture of `captures` on its switch of `switches`;
/// returns, per capture, the switch's index and what it will record. One
/// line naming the capture for a switch or port the network does not
/// have, or a second port of a switch.
fn start_captures(
    switches: &mut [(String, LcmpNode<Io>)],
    captures: &[CaptureAt],
) -> Result<Vec<(usize, PortCapture)>, String> {
    let mut out: Vec<(usize, PortCapture)> = Vec::new();
    for c in captures {
        let what = format!("capture {}:{}", c.switch, c.port);
        let i = switches
            .iter()
            .position(|(n, _)| *n == c.switch)
            .ok_or_else(|| format!("{what}: the network has no switch {:?}", c.switch))?;
        if let Some((_, other)) = out.iter().find(|(j, _)| *j == i) {
            return Err(format!(
                "{what}: {} captures {} already; a switch captures one port",
                c.switch, other.port
            ));
        }
        if c.snaplen == 0 || c.max_bytes == 0 {
            return Err(format!("{what}: snaplen and max bytes must be positive"));
        }
        let sw = switches[i].1.switch();
        let ports = sw.port_reports().len();
        let port = sw.port_by_name(&c.port).ok_or_else(|| {
            format!(
                "{what}: {} has no port {:?} (its ports are p0 to p{})",
                c.switch,
                c.port,
                ports.saturating_sub(1)
            )
        })?;
        sw.start_capture(CaptureSpec {
            port,
            snaplen: c.snaplen,
            max_frames: u64::MAX,
            max_bytes: c.max_bytes,
            until_ns: u64::MAX,
        });
        out.push((
            i,
            PortCapture {
                switch: c.switch.clone(),
                port: sw.port_name(port).to_string(),
                snaplen: c.snaplen,
                ..Default::default()
            },
        ));
    }
    Ok(out)
}

/// Drains the captures of a virtual run's switches (`caps`: node index
/// and capture) that hold at least `min_bytes`; with `stop`, all of it,
/// and ends them.
fn drain_virtual(
    net: &mut VirtualNet,
    caps: &mut [(usize, PortCapture)],
    min_bytes: u64,
    stop: bool,
) {
    for (i, pc) in caps.iter_mut() {
        let Some(d) = net.daemon::<LcmpNode<Io>>(*i) else {
            continue;
        };
        if let Some(c) = d.switch().capture_mut() {
            pc.take_from(c, min_bytes);
        }
        if stop {
            d.switch().stop_capture();
        }
    }
}

/// Builds the network (see the module docs), runs it until `run.end_ns`
/// or until every flow has ended, and returns the outcome. Errors are one
/// line naming the problem (a host without IPv4, an unknown or repeated
/// sender, a scaling the hosts and switches disagree on, a network that
/// would not fit in memory).
pub fn run_virtual(run: VirtualRun) -> Result<VirtualOutcome, String> {
    run_virtual_observed(run, u64::MAX, &mut |_| {})
}

/// [`run_virtual`], calling `observe` each time the virtual clock has
/// passed another `every_ns` (for progress on long runs).
pub fn run_virtual_observed(
    run: VirtualRun,
    every_ns: u64,
    observe: &mut dyn FnMut(&Progress),
) -> Result<VirtualOutcome, String> {
    run_virtual_recorded(run, &Recording::default(), every_ns, observe)
}

/// [`run_virtual_observed`], recording what `rec` asks: its captures'
/// frames at virtual times (the outcome's `captures`; deterministic as
/// the run is).
pub fn run_virtual_recorded(
    run: VirtualRun,
    rec: &Recording,
    every_ns: u64,
    observe: &mut dyn FnMut(&Progress),
) -> Result<VirtualOutcome, String> {
    let mut built = build(run)?;
    let mut caps = start_captures(&mut built.switches, rec.captures)?;
    let mut net = VirtualNet::new(0);
    let mut switch_nodes = Vec::new();
    for (name, node) in built.switches {
        let i = net.add_node(node, DaemonConfig::quiet(&name));
        switch_nodes.push((name, i));
    }
    // Switches are the first nodes: a switch's index is its node's.
    for (i, _) in &mut caps {
        *i = switch_nodes[*i].1;
    }
    // Before any host is a node, so switch names find switches.
    net.join_links(&built.links)?;
    let mut host_nodes = Vec::new();
    for h in built.hosts {
        let i = net.add_node(h.node, DaemonConfig::quiet(&h.name));
        net.join((switch_nodes[h.switch].1, usize::from(h.port)), (i, 0))?;
        host_nodes.push((h.name, i));
    }

    let done = built.done;
    let all = host_nodes.len();
    let end_ns = built.end_ns;
    let mut next_report = every_ns;
    while done.load(Ordering::Relaxed) < all {
        match net.next_event_ns() {
            Some(t) if t <= end_ns => {
                net.step();
            }
            _ => break,
        }
        if !caps.is_empty() && net.polls().is_multiple_of(DRAIN_EVERY_POLLS) {
            drain_virtual(&mut net, &mut caps, DRAIN_BYTES, false);
        }
        if net.now_ns() >= next_report {
            observe(&Progress {
                now_ns: net.now_ns(),
                polls: net.polls(),
                hosts_done: done.load(Ordering::Relaxed),
                hosts: all,
            });
            next_report = net.now_ns().saturating_add(every_ns);
        }
    }
    if done.load(Ordering::Relaxed) < all {
        net.run_until(end_ns);
    }
    let ended_ns = net.now_ns();
    let polls = net.polls();
    drain_virtual(&mut net, &mut caps, 0, true);

    let mut records: Vec<(String, Vec<FlowRecord>)> = Vec::new();
    for name in built.senders {
        let i = host_nodes
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, i)| *i)
            .ok_or_else(|| format!("sender {name} is not a host node"))?;
        let host = net
            .daemon::<RoceHost<Io>>(i)
            .ok_or_else(|| format!("node {name} is not a host"))?;
        records.push((name, host.node_ref().records().to_vec()));
    }
    let finals = net.finish();
    let mut switches = Vec::new();
    for (name, i) in switch_nodes {
        let json = finals[i]
            .as_ref()
            .map_err(|e| format!("switch {name}: status: {e}"))?;
        let snap: Snapshot =
            serde_json::from_slice(json).map_err(|e| format!("switch {name}: status: {e}"))?;
        switches.push((name, snap));
    }
    let mut hosts = Vec::new();
    for (name, i) in host_nodes {
        let json = finals[i]
            .as_ref()
            .map_err(|e| format!("host {name}: status: {e}"))?;
        let status =
            serde_json::from_slice(json).map_err(|e| format!("host {name}: status: {e}"))?;
        hosts.push((name, status));
    }
    let captures = finish_captures(caps, &switches);
    let mut out = outcome(records, switches, hosts, ended_ns, polls);
    out.captures = captures;
    Ok(out)
}

/// The captures with the frames their ports carried in the run, from the
/// switches' final snapshots (`caps`' indices are no longer needed).
fn finish_captures(
    caps: Vec<(usize, PortCapture)>,
    switches: &[(String, Snapshot)],
) -> Vec<PortCapture> {
    caps.into_iter()
        .map(|(_, mut pc)| {
            if let Some((_, snap)) = switches.iter().find(|(n, _)| *n == pc.switch) {
                pc.count_seen(snap);
            }
            pc
        })
        .collect()
}

/// How a [`run_wall`] is watched while it runs.
#[derive(Default)]
pub struct WallOptions<'a> {
    /// Each switch's control socket (`lcmp-ctl` requests served between
    /// polls, as the switch daemon serves them), by switch name; none
    /// without. A socket is removed when the run ends.
    pub control_socket: Option<&'a dyn Fn(&str) -> PathBuf>,
    /// Once set, the run ends within [`STOP_CHECK_NS`] (at once when a
    /// signal set it: the sleep ends with the signal): a user's interrupt.
    /// Flows still running are reported `unfinished`.
    pub stop: Option<&'a AtomicBool>,
}

/// The same network as [`run_virtual`], run on the wall clock: every node
/// under its daemon on this thread ([`run_many`]: each steps in turn; when
/// none has work the thread sleeps until the earliest deadline), each
/// reading the monotonic clock from the run's start, so frames move when
/// the clock says, late when the machine is slow. The run's
/// [`Scaling`](lcmp_topology::Scaling) is its time dilation: with `time`
/// 10 the emulated links are 10 times as long and 10 times as slow
/// (`Scaling::emulated`), as the namespace engine runs them, and FCTs and
/// `end_ns` are of the emulation's time. Not deterministic: a run is what
/// the machine kept up with.
pub fn run_wall(run: VirtualRun, opts: &WallOptions) -> Result<VirtualOutcome, String> {
    run_wall_recorded(run, opts, &Recording::default())
}

/// [`run_wall`], recording what `rec` asks: its captures' frames at the
/// times of the run's clock (the outcome's `captures`), and each switch's
/// stats file while the run goes on.
pub fn run_wall_recorded(
    run: VirtualRun,
    opts: &WallOptions,
    rec: &Recording,
) -> Result<VirtualOutcome, String> {
    let mut built = build(run)?;
    let caps = start_captures(&mut built.switches, rec.captures)?;
    // Drained by each switch's daemon as side work; the rest after the
    // run.
    let caps: Vec<(usize, Rc<RefCell<PortCapture>>)> = caps
        .into_iter()
        .map(|(i, pc)| (i, Rc::new(RefCell::new(pc))))
        .collect();
    let clock = WallClock::starting_now();
    let mut served = Vec::new();
    let mut nodes = Vec::new();
    for (k, (name, node)) in built.switches.into_iter().enumerate() {
        let mut cfg = DaemonConfig::quiet(&name);
        if let Some(stats) = rec.stats_file {
            cfg.stats_file = Some(stats(&name));
            cfg.stats_interval_ns = defaults::STATS_INTERVAL_MS * 1_000_000;
        }
        let mut d = Daemon::new(node, clock, cfg);
        if let Some((_, pc)) = caps.iter().find(|(i, _)| *i == k) {
            let pc = pc.clone();
            d.add_side_task(Box::new(move |node: &mut LcmpNode<Io>, now| {
                if let Some(c) = node.switch().capture_mut() {
                    pc.borrow_mut().take_from(c, 0);
                }
                now.saturating_add(WALL_DRAIN_NS)
            }));
        }
        if let Some(socket) = opts.control_socket {
            let path = socket(&name);
            let inbox = Inbox::new().map_err(|e| format!("switch {name}: control inbox: {e}"))?;
            served.push(
                serve_scoped(&path, &inbox)
                    .map_err(|e| format!("control socket {}: {e}", path.display()))?,
            );
            d.attach_inbox(inbox);
        }
        nodes.push(WallNode::Switch(name, Box::new(d)));
    }
    let hosts = built.hosts.len();
    for h in built.hosts {
        let d = Daemon::new(h.node, clock, DaemonConfig::quiet(&h.name));
        nodes.push(WallNode::Host(h.name, Box::new(d)));
    }
    let stop = AtomicBool::new(false);
    nodes.push(WallNode::Until(Until {
        done: built.done.clone(),
        hosts,
        end_ns: built.end_ns,
        clock,
        asked: opts.stop,
        stop: &stop,
        rounds: 0,
    }));
    run_many(&mut nodes, &stop);
    // The sockets go before the nodes: a request now would wait for a
    // loop that no longer runs.
    drop(served);

    let mut ended_ns = 0;
    let mut polls = 0;
    let mut switches = Vec::new();
    let mut hosts = Vec::new();
    let mut by_host = Vec::new();
    let per_round = nodes.len() as u64 - 1;
    for n in nodes {
        match n {
            WallNode::Switch(name, mut d) => {
                if let Some((_, pc)) = caps.iter().find(|(_, pc)| pc.borrow().switch == name) {
                    if let Some(c) = d.switch().capture_mut() {
                        pc.borrow_mut().take_from(c, 0);
                    }
                    d.switch().stop_capture();
                }
                switches.push((name, d.finish()));
            }
            WallNode::Host(name, mut d) => {
                by_host.push((name.clone(), d.node_ref().records().to_vec()));
                let status = serde_json::to_value(d.finish())
                    .map_err(|e| format!("host {name}: status: {e}"))?;
                hosts.push((name, status));
            }
            WallNode::Until(mut u) => {
                ended_ns = u.clock.now_ns().min(built.end_ns);
                polls = u.rounds.saturating_mul(per_round);
            }
        }
    }
    let mut records = Vec::new();
    for name in built.senders {
        let i = by_host
            .iter()
            .position(|(n, _)| *n == name)
            .ok_or_else(|| format!("sender {name} is not a host node"))?;
        records.push(by_host.swap_remove(i));
    }
    let caps = caps
        .into_iter()
        .map(|(i, pc)| (i, std::mem::take(&mut *pc.borrow_mut())))
        .collect();
    let captures = finish_captures(caps, &switches);
    let mut out = outcome(records, switches, hosts, ended_ns, polls);
    out.captures = captures;
    Ok(out)
}

/// The outcome, with the frame-hops summed from the switches' counters.
fn outcome(
    records: Vec<(String, Vec<FlowRecord>)>,
    switches: Vec<(String, Snapshot)>,
    hosts: Vec<(String, serde_json::Value)>,
    end_ns: u64,
    polls: u64,
) -> VirtualOutcome {
    let frame_hops = switches
        .iter()
        .map(|(_, s)| s.counters.get("tx_frames").copied().unwrap_or(0))
        .sum();
    VirtualOutcome {
        records,
        switches,
        hosts,
        captures: Vec::new(),
        end_ns,
        polls,
        frame_hops,
    }
}

/// The monotonic clock from a run's start, ns: every node of a wall-clock
/// run reads the same origin.
#[derive(Clone, Copy, Debug)]
struct WallClock {
    origin_ns: u64,
}

impl WallClock {
    fn starting_now() -> Self {
        WallClock {
            origin_ns: MonotonicClock.now_ns(),
        }
    }
}

impl Clock for WallClock {
    fn now_ns(&mut self) -> u64 {
        MonotonicClock.now_ns().saturating_sub(self.origin_ns)
    }
}

/// How often a wall-clock run looks at [`WallOptions::stop`] while it
/// sleeps, ns.
pub const STOP_CHECK_NS: u64 = 100_000_000;

/// What the wall-clock run's thread steps: the nodes, and last the check
/// that ends the run.
enum WallNode<'a> {
    Switch(String, Box<Daemon<LcmpNode<Io>, WallClock>>),
    Host(String, Box<Daemon<RoceHost<Io>, WallClock>>),
    Until(Until<'a>),
}

/// Ends a wall-clock run when every host is done, at its end, or when
/// asked; stepped last in each round, so right after the host that
/// finished.
struct Until<'a> {
    done: Arc<AtomicUsize>,
    hosts: usize,
    end_ns: u64,
    clock: WallClock,
    asked: Option<&'a AtomicBool>,
    stop: &'a AtomicBool,
    /// Rounds of [`run_many`] so far.
    rounds: u64,
}

impl Loop for WallNode<'_> {
    fn step(&mut self) -> usize {
        match self {
            WallNode::Switch(_, d) => Loop::step(d),
            WallNode::Host(_, d) => Loop::step(d),
            WallNode::Until(u) => {
                u.rounds += 1;
                if u.done.load(Ordering::Relaxed) >= u.hosts
                    || u.clock.now_ns() >= u.end_ns
                    || u.asked.is_some_and(|a| a.load(Ordering::Relaxed))
                {
                    u.stop.store(true, Ordering::Relaxed);
                }
                0
            }
        }
    }

    fn event_mode(&self) -> bool {
        match self {
            WallNode::Switch(_, d) => d.event_mode(),
            WallNode::Host(_, d) => d.event_mode(),
            WallNode::Until(_) => true,
        }
    }

    fn timeout_ns(&mut self) -> u64 {
        match self {
            WallNode::Switch(_, d) => d.timeout_ns(),
            WallNode::Host(_, d) => d.timeout_ns(),
            WallNode::Until(u) => {
                let left = u.end_ns.saturating_sub(u.clock.now_ns());
                if u.asked.is_some() {
                    left.min(STOP_CHECK_NS)
                } else {
                    left
                }
            }
        }
    }

    fn poll_fds(&mut self) -> &mut [libc::pollfd] {
        match self {
            WallNode::Switch(_, d) => d.poll_fds(),
            WallNode::Host(_, d) => d.poll_fds(),
            WallNode::Until(_) => &mut [],
        }
    }

    fn after_poll(&mut self) {
        match self {
            WallNode::Switch(_, d) => d.after_poll(),
            WallNode::Host(_, d) => d.after_poll(),
            WallNode::Until(_) => {}
        }
    }
}

/// A host as [`build`] leaves it: its node and where it is attached.
struct BuiltHost {
    name: String,
    /// Its switch, an index of the topology's switches.
    switch: usize,
    /// The switch's port towards it.
    port: u8,
    node: RoceHost<Io>,
}

/// A network built, before a driver runs it.
struct Built {
    /// Every switch's node, in the topology's order.
    switches: Vec<(String, LcmpNode<Io>)>,
    hosts: Vec<BuiltHost>,
    /// The switch-to-switch memory links (their ends are in the nodes).
    links: MemoryLinks,
    /// The senders, in the order of the run's traffic.
    senders: Vec<String>,
    /// Hosts that have ended all their flows.
    done: Arc<AtomicUsize>,
    end_ns: u64,
}

/// Builds a run's network: its switches' and hosts' nodes over memory
/// links (see the module docs), after the checks that refuse it.
fn build(run: VirtualRun) -> Result<Built, String> {
    let VirtualRun {
        network,
        switch: opts,
        roce,
        mut traffic,
        end_ns,
        flow_log,
        pfc,
    } = run;
    let scaling = opts.scaling;
    // C_path's scales are the network's: found once here, not again for
    // every switch (a search per destination each time).
    let mut opts = opts;
    opts.path_cost = lcmp_topology::tables::resolve_scales(&network, opts.path_cost, opts.metric)
        .map_err(|e| e.to_string())?;
    if roce.scaling != scaling {
        return Err(format!(
            "the hosts' scaling ({:?}) differs from the switches' ({scaling:?})",
            roce.scaling
        ));
    }
    scaling.check()?;
    let emulated = scaling.emulated(&network).map_err(|e| e.to_string())?;
    let switch_names: Vec<&str> = network.switches().iter().map(|s| s.name.as_str()).collect();
    for (i, t) in traffic.iter().enumerate() {
        if network.host_by_name(&t.host).is_none() {
            return Err(format!(
                "{}: sender {:?} is not a host of the network",
                network.source(),
                t.host
            ));
        }
        if traffic[..i].iter().any(|u| u.host == t.host) {
            return Err(format!("sender {} is given twice", t.host));
        }
    }

    let senders: Vec<String> = traffic.iter().map(|t| t.host.clone()).collect();
    // Every host: its NIC, its flows (none for a receiver), its pool.
    let mut estimate = MemoryEstimate::default();
    let mut hosts = Vec::new();
    for h in emulated.hosts() {
        let mine = traffic.iter().position(|t| t.host == h.name);
        let (flows, dsts) = match mine {
            Some(i) => {
                let t = traffic.swap_remove(i);
                (t.flows, t.dsts)
            }
            None => (
                FlowSource::new(Arrivals::Schedule(Vec::new()), 0, 0, 0.0, 1.0, 1),
                Vec::new(),
            ),
        };
        let unscaled = network.host(h.id);
        let host_roce = RoceOptions {
            line_rate: unscaled.rate_bps as f64,
            ..roce
        };
        let sender = host_roce
            .sender_config()
            .map_err(|e| format!("host {}: {e}", h.name))?;
        let cc = host_roce
            .cc_config()
            .map_err(|e| format!("host {}: {e}", h.name))?;
        let mut cfg = HostConfig::from_topology(&emulated, &h.name, sender)?.with_cc(cc);
        cfg.nic.buffer_bytes = cfg.nic.buffer_bytes.min(HOST_NIC_BUFFER_BYTES);
        estimate.egress(cfg.nic.rate_bps, cfg.nic.delay_ns, cfg.nic.buffer_bytes);
        let expected = flows.expected_remaining();
        let n_flows = if expected.is_finite() {
            expected.ceil() as u64
        } else {
            u64::MAX
        };
        estimate.flows = estimate.flows.saturating_add(n_flows);
        estimate.flow_bytes = estimate
            .flow_bytes
            .saturating_add(n_flows.saturating_mul(FLOW_BYTES));
        let pool = host_pool_frames(
            cfg.nic.rate_bps,
            cfg.nic.delay_ns,
            cfg.nic.buffer_bytes,
            cfg.sender.payload,
        );
        hosts.push(HostPlan {
            name: h.name.clone(),
            cfg,
            flows,
            dsts,
            pool,
        });
    }
    let mut pools: Vec<usize> = Vec::new();
    for s in emulated.switches() {
        let ports = emulated.ports(s.id);
        let mut frames = 0usize;
        for p in ports {
            let buffer = p.buffer_bytes.saturating_mul(opts.drop_headroom.max(1));
            estimate.egress(p.rate_bps, p.delay_ns, buffer);
            // Sized for all the queue may hold, headroom included: a pool
            // that ran dry would hold its upstream's frames in that port's
            // delay line, where they overflow (`emulation_overflow`)
            // instead of queueing where the model puts them.
            frames =
                frames.saturating_add(pool_frames(p.rate_bps, p.delay_ns, buffer, roce.payload));
        }
        pools.push(frames);
    }
    pools.extend(hosts.iter().map(|h| h.pool));
    estimate.frames = pools.iter().map(|&n| n as u64).sum();
    estimate.check(available_memory_bytes())?;

    let mut shares = FrameShare::split_area_unpopulated(&pools)?;
    let host_shares = shares.split_off(switch_names.len());
    let port_name = |_: &str, i: u8| in_memory::port_name(i);
    let mut links = MemoryLinks::build(&network, &switch_names, LINK_DEPTH, &port_name)
        .map_err(|e| format!("memory links: {e}"))?;
    // Each host's link: the switch's end goes into its port, the host's to
    // the host.
    let mut host_ends = Vec::new();
    let mut at_switch: Vec<Vec<(u8, _)>> = switch_names.iter().map(|_| Vec::new()).collect();
    for h in network.hosts() {
        let sw = &network.switch(h.switch).name;
        let (sw_end, host_end) = mem_link(
            LINK_DEPTH,
            (&format!("{sw}/p{}", h.port), &format!("{}/nic", h.name)),
        )
        .map_err(|e| format!("memory link of host {}: {e}", h.name))?;
        at_switch[h.switch.index()].push((h.port, sw_end));
        host_ends.push(host_end);
    }

    let mut switches = Vec::new();
    let host_mac = |h| port_mac(&network.host(h).name, 0);
    // PFC's shares scale with the hosts' NIC rate, as the link rates do.
    let nic_rate_bps = emulated
        .hosts()
        .iter()
        .map(|h| h.rate_bps)
        .max()
        .unwrap_or(0);
    let mut pfc_off: Vec<(&str, String)> = Vec::new();
    for ((s, share), ends) in network.switches().iter().zip(shares).zip(at_switch) {
        let name = s.name.as_str();
        let mut sw = in_memory::switch(&network, name, &opts, &mut links, ends, share, &host_mac)?;
        if pfc {
            if let Err(why) = sw.enable_pfc(nic_rate_bps, lcmp_switch::pfc::ROCE_PRIORITY) {
                pfc_off.push((name, why));
            }
        }
        let log = flow_log
            .as_ref()
            .map(|p| PathBuf::from(p.to_string_lossy().replace("{switch}", name)));
        if log.is_some() {
            sw.enable_flow_log(defaults::FLOW_LOG_CAPACITY);
        }
        let interval = defaults::STATS_INTERVAL_MS * 1_000_000;
        let node = LcmpNode::new(sw, name, log.as_deref(), interval)?;
        switches.push((name.to_string(), node));
    }

    if let Some((first, why)) = pfc_off.first() {
        // One line for them all: a network's DCI switches alike.
        let names: Vec<&str> = pfc_off.iter().map(|(n, _)| *n).collect();
        eprintln!(
            "PFC is off on {} switch(es) ({}): {first}: {why}",
            names.len(),
            names.join(", ")
        );
    }
    let done = Arc::new(AtomicUsize::new(0));
    let mut built_hosts = Vec::new();
    for ((plan, share), end) in hosts.into_iter().zip(host_shares).zip(host_ends) {
        let h = network
            .host_by_name(&plan.name)
            .ok_or_else(|| format!("no host {}", plan.name))?;
        let io = host_io(share, end, Transfer::Descriptor);
        let mut node = RoceHost::new(plan.cfg, io, plan.flows, &plan.dsts)?;
        node.count_done_in(done.clone());
        built_hosts.push(BuiltHost {
            name: plan.name,
            switch: h.switch.index(),
            port: h.port,
            node,
        });
    }
    Ok(Built {
        switches,
        hosts: built_hosts,
        links,
        senders,
        done,
        end_ns,
    })
}

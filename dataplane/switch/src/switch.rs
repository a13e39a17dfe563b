//! The forwarding pipeline of one switch: receive a batch per port, parse
//! (checked), find the flow's port (flow cache, else the policy engine over
//! the route's candidates), rewrite (MACs, TTL, checksum), admit into the
//! egress port's buffer (ECN, tail drop), and let each port's link emulation
//! (shaper, delay line) hand frames to the transmit ring in batches.
//!
//! Single-threaded and allocation-free per packet: one poll thread owns a
//! switch. Time is passed in, so tests drive it with a synthetic clock.

use std::collections::HashMap;
use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::capture::{Capture, CaptureSpec};
use crate::icmp::{self, IcmpError, IcmpLimiter};

use ipnet::IpNet;
use lcmp_control::snapshot::{EcnFractions, EcnLinkTime};
use lcmp_policy::{
    CongestionParams, FlowCache, FlowHasher, FlowKey, FlowRouter, Policy, PortSet, PortStates,
    PortView, RouteOutcome, RouterStats, Selector,
};
use lcmp_wire::{
    forward_rewrite, mark_ce_at, push_hop, CeMark, FlowTuple, IntHop, MacAddr, ParseError,
    PushOutcome, RewriteError, L3,
};

use crate::config::{delay_line_capacity, delay_line_frames};
use crate::counters::{Counter, Counters, DropReason};
use crate::egress::{
    Admit, Departure, EcnConfig, EcnMarkAt, Egress, EgressConfig, EgressStats, Handoff, Sink,
    NO_TAG,
};
use crate::flight::Flight;
use crate::flow_log::{DecisionReason, FlowLog, FlowRecord};
use crate::io::{Frame, PacketIo};
use crate::lpm::{Route, RoutingTable};
use crate::pfc::{MmuConfig, PfcControl, PfcFrame, PortPfc};

/// One port of the switch.
#[derive(Clone, Debug)]
pub struct PortConfig {
    /// Interface name (for logs and metrics).
    pub name: String,
    /// The port's own MAC address (source of forwarded frames).
    pub mac: MacAddr,
    /// The MAC of the device at the other end of the link (destination of
    /// forwarded frames). `None`: learned from the first frame received on
    /// the port (links are point to point).
    pub peer_mac: Option<MacAddr>,
    /// The link the port emulates.
    pub egress: EgressConfig,
}

/// Everything a switch is built from.
#[derive(Clone, Debug)]
pub struct SwitchConfig {
    /// Ports, index = port id.
    pub ports: Vec<PortConfig>,
    /// Routes with candidate ports (indices into `ports`).
    pub routes: Vec<Route>,
    /// Path-selection policy.
    pub policy: Policy,
    /// Congestion estimator parameters (incl. sampling interval).
    pub congestion: CongestionParams,
    /// Flow cache capacity (flows).
    pub flow_capacity: usize,
    /// Idle time after which a flow may be re-routed, ns. Must exceed the
    /// largest path RTT.
    pub flow_idle_timeout_ns: u64,
    /// Seed of the flow hash; give each switch its own.
    pub seed: u64,
    /// Frames received per port per poll iteration.
    pub batch_size: usize,
    /// How often link state is read, ns.
    pub link_check_interval_ns: u64,
    /// ECN thresholds as fractions of each port's buffer (the ports'
    /// byte thresholds follow from them; kept to rescale them when a
    /// port's buffer changes). `None`: marking off.
    pub ecn: Option<EcnFractions>,
    /// ECN thresholds as time at each port's link rate; when set, they
    /// apply instead of `ecn`.
    pub ecn_link_time: Option<EcnLinkTime>,
    /// Where the marks are decided, with either kind of thresholds: the
    /// thresholds the switch computes for its ports (from the topology, and
    /// when `set_ecn` or `set_link` recomputes them) carry it. Each port's
    /// own `egress.ecn` says what it does until then.
    pub ecn_mark_at: EcnMarkAt,
    /// A port drops only when its queue would exceed this many times its
    /// buffer (1: at the buffer). Above 1 it stands in for a lossless (PFC)
    /// fabric, which holds back upstream what a full buffer would drop;
    /// congestion levels and ECN stay relative to the buffer itself.
    pub drop_headroom: u64,
}

/// A configuration the switch cannot run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

struct Port {
    config: PortConfig,
    peer_mac: Option<MacAddr>,
    egress: Egress<Frame>,
    /// Carrier, as the packet I/O last reported it.
    link_up: bool,
    /// Administrative state (control socket).
    admin_up: bool,
    /// Forwarding: `link_up && admin_up`.
    up: bool,
    /// The bytes of the frames the port holds, when the switch parks them
    /// ([`Switch::park_in_flight`]).
    flight: Option<Flight>,
}

/// Per-port state for reports.
#[derive(Clone, Debug)]
pub struct PortReport {
    /// Interface name.
    pub name: String,
    /// Forwarding (carrier and admin up).
    pub up: bool,
    /// Carrier.
    pub link_up: bool,
    /// Administrative state.
    pub admin_up: bool,
    /// Bytes in the egress buffer.
    pub queue_bytes: u64,
    /// Frames in the egress buffer.
    pub queue_frames: usize,
    /// Frames in the delay line.
    pub in_flight: usize,
    /// Congestion cost now.
    pub c_cong: u8,
    /// Egress counters.
    pub egress: EgressStats,
    /// The peer MAC in use, if known.
    pub peer_mac: Option<MacAddr>,
}

/// A switch over packet I/O `IO`.
pub struct Switch<IO: PacketIo> {
    io: IO,
    ports: Vec<Port>,
    routes: RoutingTable,
    router: FlowRouter,
    congestion: PortStates,
    hasher: FlowHasher,
    counters: Counters,
    rng: u64,
    /// The frames of the poll in progress.
    batch: Batch,
    /// When the periodic work is due.
    timers: Timers,
    /// Decision records and poll counts for the control socket and stats.
    telemetry: Telemetry,
    /// Every port each prefix has had as a candidate since start (the
    /// ports a cached flow to the prefix may be on).
    ever: HashMap<IpNet, PortSet>,
    /// 1 at start, +1 per table replacement.
    table_generation: u64,
    /// Congestion sampling, ECN and drop settings of the ports' buffers.
    marking: Marking,
    /// The ICMP errors the switch sends: rate limit and source addresses.
    icmp: IcmpSource,
    /// A port's frames being captured (`lcmp-ctl capture`).
    capture: Option<Box<Capture>>,
    /// Priority flow control, when on ([`Switch::enable_pfc`]).
    pfc: Option<Box<PfcOn>>,
    /// In-band network telemetry: an INT hop into every RoCEv2 frame with
    /// a collect block leaving a port ([`Switch::set_int`]).
    int: bool,
}

/// PFC as the switch runs it: the decisions and the frames' buffers.
struct PfcOn {
    control: PfcControl,
    /// Frames due this poll (kept between polls: no allocation).
    due: Vec<PfcFrame>,
    /// Buffers taken from the pool for them.
    buffers: Vec<u64>,
}

/// The frames of one poll: received, to transmit, to drop.
struct Batch {
    /// Frames received per port per poll.
    batch_size: usize,
    /// Frames received this poll, all ports, port by port.
    rx: Vec<Frame>,
    /// Where each port's frames end in `rx`.
    rx_ends: Vec<usize>,
    tx: Vec<Frame>,
    /// Indices in `tx` of the frames whose mark was decided as they left
    /// the port buffer (dequeue marking): set after the hand-off, so the
    /// hand-off stays a push.
    tx_marks: Vec<usize>,
    /// With INT on, each `tx` frame's departure, index for index: its hop
    /// is written after the hand-off, as the marks are (a parked frame
    /// has no bytes to write into until it is unparked).
    tx_departures: Vec<Departure>,
    dropped: Vec<Frame>,
    /// Pool buffers for the parked frames leaving a delay line this poll
    /// (those parking gave back, and what the pool adds).
    spare: Vec<u64>,
}

/// Where a port's egress hands its frames in `transmit`: to transmit (and
/// mark), or to recycle; a port that parks moves each departing frame's
/// bytes to its delay line's store ([`Flight::depart`]).
struct TxSink<'a> {
    tx: &'a mut Vec<Frame>,
    tx_marks: &'a mut Vec<usize>,
    /// `Some` with INT on: where each transmitted frame's departure goes.
    departures: Option<&'a mut Vec<Departure>>,
    dropped: &'a mut Vec<Frame>,
    flight: Option<&'a mut Flight>,
    pfc: Option<&'a mut PfcOn>,
}

impl Sink<Frame> for TxSink<'_> {
    #[inline]
    fn handoff(&mut self, h: Handoff<Frame>) {
        match h {
            Handoff::Transmit {
                frame,
                mark_ce,
                departure,
                ..
            } => {
                if mark_ce {
                    self.tx_marks.push(self.tx.len());
                }
                // INT off: this test is all it costs.
                if let Some(d) = self.departures.as_deref_mut() {
                    d.push(departure);
                }
                self.tx.push(frame)
            }
            Handoff::Overflow { frame, .. } => match self.flight.as_deref_mut() {
                // No buffer to give back: its bytes go.
                Some(f) if Flight::is_parked(frame) => f.discard_overflow(frame),
                _ => self.dropped.push(frame),
            },
        }
    }

    #[inline]
    fn depart(&mut self, frame: Frame, tag: u16, len: u32) -> Frame {
        // The frame leaves the switch's buffer: its ingress port's share
        // shrinks (frames the switch wrote itself carry no ingress).
        if let Some(pfc) = self.pfc.as_deref_mut() {
            if tag != NO_TAG {
                pfc.control.release(usize::from(tag), len);
            }
        }
        match self.flight.as_deref_mut() {
            Some(f) => f.depart(frame),
            None => frame,
        }
    }
}

/// Intervals and deadlines of the switch's periodic work.
struct Timers {
    sample_interval_ns: u64,
    next_sample_ns: u64,
    link_check_interval_ns: u64,
    next_link_check_ns: u64,
    next_link_event_ns: u64,
    next_evict_ns: u64,
    /// Buckets per sweep slice: the whole cache every half idle timeout.
    evict_budget: usize,
    /// The time the last poll ran at.
    last_poll_ns: u64,
}

/// What the switch records about its work, beside the counters.
struct Telemetry {
    /// Poll iterations, and those that received something (their ratio to
    /// `rx_frames` is the mean receive batch).
    polls: u64,
    polls_with_rx: u64,
    /// The path-decision log, if enabled. Boxed: the switch stays one
    /// pointer larger, and the disabled check is one null test.
    flow_log: Option<Box<FlowLog>>,
    /// The most recent decisions (ring), for `lcmp-ctl flows`.
    recent: Vec<FlowRecord>,
    /// Decisions made so far (the ring's write position).
    recent_count: u64,
    /// Decisions per (route index, port), row-major by route.
    decisions: Vec<u64>,
}

/// Congestion sampling, ECN marking and drop settings.
struct Marking {
    congestion_params: CongestionParams,
    ecn: Option<EcnFractions>,
    ecn_link_time: Option<EcnLinkTime>,
    ecn_mark_at: EcnMarkAt,
    drop_headroom: u64,
}

/// The ICMP errors the switch sends.
struct IcmpSource {
    /// Their rate limit.
    limiter: IcmpLimiter,
    /// Each port's own IPv4 and IPv6 address (the source of the ICMP
    /// errors sent out of it), if it has one.
    port_addrs: Vec<(Option<Ipv4Addr>, Option<Ipv6Addr>)>,
    /// Source of ICMP errors out of ports without an address: another
    /// port's, else a link-local address derived from the flow-hash seed
    /// (distinct per switch, so traceroute tells the hops apart).
    router_v4: Ipv4Addr,
    router_v6: Ipv6Addr,
}

/// ICMP errors per second the switch sends at most, and their burst (the
/// kernel's global defaults, `icmp_msgs_per_sec` and `icmp_msgs_burst`).
pub const ICMP_RATE_PER_S: u32 = 1000;
/// See [`ICMP_RATE_PER_S`].
pub const ICMP_BURST: u32 = 50;

/// Decisions the always-on ring of recent decisions keeps.
pub const RECENT_DECISIONS: usize = 256;

/// What a route table replacement did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableChange {
    /// The new table differs from the old one.
    pub changed: bool,
    /// Ports that are no longer a candidate of some route they were one of:
    /// flows cached on them are checked against their route at their next
    /// packet and moved if they left it.
    pub ports_left: Vec<u8>,
    /// Flows cached on those ports now (an upper bound of the flows that
    /// move).
    pub flows_on_ports_left: u64,
}

/// Candidate sets of each prefix, as port sets.
fn port_sets(routes: &[Route]) -> HashMap<IpNet, PortSet> {
    routes
        .iter()
        .map(|r| {
            let mut set = PortSet::EMPTY;
            for c in r.candidates.as_slice() {
                set.insert(c.port);
            }
            (r.prefix, set)
        })
        .collect()
}

/// ECN byte thresholds of a port: from its link rate when `link_time` is
/// set, else as fractions of its buffer; marking at `mark_at` either way.
pub(crate) fn ecn_bytes(
    f: Option<EcnFractions>,
    link_time: Option<EcnLinkTime>,
    mark_at: EcnMarkAt,
    rate_bps: u64,
    buffer_bytes: u64,
) -> Option<EcnConfig> {
    if let Some(t) = link_time {
        let (kmin_bytes, kmax_bytes) = t.thresholds(rate_bps);
        return Some(EcnConfig {
            kmin_bytes,
            kmax_bytes,
            pmax: t.pmax,
            mark_at,
        });
    }
    f.map(|f| EcnConfig {
        kmin_bytes: (buffer_bytes as f64 * f.kmin) as u64,
        kmax_bytes: (buffer_bytes as f64 * f.kmax) as u64,
        pmax: f.pmax,
        mark_at,
    })
}

/// Sets CE in a frame this switch forwards, keeping the IPv4 header checksum
/// valid (RFC 1624; the IPv6 traffic class has none), if the frame is ECT:
/// a Not-ECT frame cannot be marked and one that arrived CE is left as it
/// is. The one place the switch marks, whether the mark was decided at
/// admission or at departure. `l3` at `l3_offset` is the IP header: from
/// the frame's own parse, or [`forwarded_ip_header`]. Whether this switch
/// marked it.
#[inline]
fn set_ce(data: &mut [u8], l3: L3, l3_offset: usize) -> bool {
    matches!(mark_ce_at(data, l3, l3_offset), Ok(CeMark::Marked))
}

/// The IP version and offset of a frame this switch has parsed and
/// rewritten (its EtherType says which version; the parse accepts no VLAN
/// tag, so the header follows the Ethernet header), for a mark decided at
/// departure, when the frame's parse is long gone. (Parsing the frame again
/// would refuse one forwarded with a TTL of 1 left.)
fn forwarded_ip_header(data: &[u8]) -> Option<(L3, usize)> {
    match data.get(12..14)? {
        [0x08, 0x00] => Some((L3::V4, 14)),
        [0x86, 0xdd] => Some((L3::V6, 14)),
        _ => None,
    }
}

/// Most congestion samples one poll catches up on after a long sleep:
/// enough for the persistence counter to decay fully (it saturates at
/// 1023), beyond that nothing changes.
const MAX_CATCH_UP_SAMPLES: u64 = 1100;

/// How often pending link events are looked at.
const LINK_EVENT_INTERVAL_NS: u64 = 200_000;

/// How often a slice of the flow cache is swept for idle flows.
const EVICT_INTERVAL_NS: u64 = 1_000_000;

/// Hints the CPU to fetch the first cache line of `bytes` for writing: the
/// frame's headers are read and then rewritten, and fetching the line
/// exclusive at once (PREFETCHW) saves the second coherence round trip a
/// read-then-write of a line another core wrote costs.
#[inline(always)]
fn prefetch(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        let p = bytes.as_ptr();
        if has_prefetchw() {
            // SAFETY: PREFETCHW exists on this CPU (CPUID checked); a
            // prefetch never faults, reads into registers or changes memory.
            unsafe {
                core::arch::asm!("prefetchw [{p}]", p = in(reg) p, options(nostack, preserves_flags, readonly));
            }
        } else {
            // SAFETY: SSE is part of the x86_64 baseline; a prefetch never
            // faults or changes memory.
            unsafe {
                core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast());
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

/// Whether the CPU has PREFETCHW (CPUID 0x8000_0001, ECX bit 8), probed
/// once.
#[cfg(target_arch = "x86_64")]
fn has_prefetchw() -> bool {
    use std::sync::atomic::{AtomicU8, Ordering};
    static KNOWN: AtomicU8 = AtomicU8::new(0);
    match KNOWN.load(Ordering::Relaxed) {
        1 => false,
        2 => true,
        _ => {
            // CPUID is always available on x86_64.
            let max_ext = core::arch::x86_64::__cpuid(0x8000_0000).eax;
            let yes = max_ext >= 0x8000_0001
                && core::arch::x86_64::__cpuid(0x8000_0001).ecx & (1 << 8) != 0;
            KNOWN.store(if yes { 2 } else { 1 }, Ordering::Relaxed);
            yes
        }
    }
}

/// Appends the decision `outcome` for `flow` to `log`. Out of line: it
/// runs only for decisions with the log on, and keeps `forward` small.
#[inline(never)]
fn log_decision(log: &mut FlowLog, outcome: RouteOutcome, flow: &FlowTuple, now_ns: u64) {
    let (port, reason) = match outcome {
        RouteOutcome::New(p) => (p, DecisionReason::New),
        RouteOutcome::FailedOver(p) => (p, DecisionReason::Failover),
        RouteOutcome::Uncached(p) => (p, DecisionReason::CacheFull),
        RouteOutcome::Cached(_) | RouteOutcome::NoLivePort | RouteOutcome::NoRoute => return,
    };
    log.record(FlowRecord {
        time_ns: now_ns,
        flow: *flow,
        port,
        reason,
    });
}

fn flow_key(flow: &FlowTuple) -> FlowKey {
    match *flow {
        FlowTuple::V4 {
            src,
            dst,
            proto,
            sport,
            dport,
        } => FlowKey::V4 {
            src: Ipv4Addr::from(src),
            dst: Ipv4Addr::from(dst),
            proto,
            sport,
            dport,
        },
        FlowTuple::V6 {
            src,
            dst,
            proto,
            sport,
            dport,
        } => FlowKey::V6 {
            src: Ipv6Addr::from(src),
            dst: Ipv6Addr::from(dst),
            proto,
            sport,
            dport,
        },
    }
}

impl<IO: PacketIo> Switch<IO> {
    /// A switch over `io` (whose ports are `config.ports`, same order).
    pub fn new(config: SwitchConfig, io: IO) -> Result<Self, ConfigError> {
        let n = config.ports.len();
        if io.ports() != n {
            return Err(ConfigError(format!(
                "{} ports configured but the packet I/O has {}",
                n,
                io.ports()
            )));
        }
        if n > 255 {
            return Err(ConfigError(format!("{n} ports: at most 255 are supported")));
        }
        for r in &config.routes {
            for c in r.candidates.as_slice() {
                if c.port as usize >= n {
                    return Err(ConfigError(format!(
                        "route {} names port {} but the switch has {n} ports",
                        r.prefix, c.port
                    )));
                }
            }
        }
        if config.batch_size == 0 {
            return Err(ConfigError("batch size must be at least 1".into()));
        }
        if config.flow_idle_timeout_ns > FlowCache::MAX_IDLE_TIMEOUT_NS {
            return Err(ConfigError(format!(
                "flow idle timeout {} ms is above the flow cache's limit of {} ms",
                config.flow_idle_timeout_ns / 1_000_000,
                FlowCache::MAX_IDLE_TIMEOUT_NS / 1_000_000
            )));
        }
        let links: Vec<(u64, u64)> = config
            .ports
            .iter()
            .map(|p| (p.egress.rate_bps, p.egress.buffer_bytes))
            .collect();
        let congestion = PortStates::new(&config.congestion, &links);
        let headroom = config.drop_headroom.max(1);
        let ports = config
            .ports
            .into_iter()
            .map(|p| Port {
                peer_mac: p.peer_mac,
                egress: Egress::new(EgressConfig {
                    buffer_bytes: p.egress.buffer_bytes.saturating_mul(headroom),
                    ..p.egress
                }),
                config: p,
                link_up: true,
                admin_up: true,
                up: true,
                flight: None,
            })
            .collect();
        let n_routes = config.routes.len();
        let ever = port_sets(&config.routes);
        let batch = config.batch_size;
        let cache = FlowCache::new(config.flow_capacity, config.flow_idle_timeout_ns);
        let slices = (config.flow_idle_timeout_ns / 2 / EVICT_INTERVAL_NS).max(1);
        let evict_budget = (cache.capacity() / 8).div_ceil(slices as usize).max(1);
        Ok(Switch {
            io,
            ports,
            routes: RoutingTable::new(config.routes),
            router: FlowRouter::new(Selector::new(config.policy), cache),
            congestion,
            hasher: FlowHasher::new(config.seed),
            counters: Counters::new(n),
            rng: config.seed | 1,
            batch: Batch {
                batch_size: batch,
                rx: Vec::with_capacity(batch * n),
                rx_ends: vec![0; n],
                tx: Vec::with_capacity(4096),
                tx_marks: Vec::with_capacity(4096),
                tx_departures: Vec::new(),
                dropped: Vec::with_capacity(4096),
                spare: Vec::new(),
            },
            timers: Timers {
                sample_interval_ns: config.congestion.sample_interval_ns.max(1),
                next_sample_ns: 0,
                link_check_interval_ns: config.link_check_interval_ns.max(1),
                next_link_check_ns: 0,
                next_link_event_ns: 0,
                next_evict_ns: 0,
                evict_budget,
                last_poll_ns: 0,
            },
            telemetry: Telemetry {
                polls: 0,
                polls_with_rx: 0,
                flow_log: None,
                recent: Vec::with_capacity(RECENT_DECISIONS),
                recent_count: 0,
                decisions: vec![0; n_routes * n],
            },
            ever,
            table_generation: 1,
            marking: Marking {
                congestion_params: config.congestion,
                ecn: config.ecn,
                ecn_link_time: config.ecn_link_time,
                ecn_mark_at: config.ecn_mark_at,
                drop_headroom: headroom,
            },
            icmp: IcmpSource {
                limiter: IcmpLimiter::new(ICMP_RATE_PER_S, ICMP_BURST),
                port_addrs: vec![(None, None); n],
                router_v4: Ipv4Addr::new(
                    169,
                    254,
                    (config.seed >> 8) as u8 % 254 + 1,
                    config.seed as u8 % 254 + 1,
                ),
                router_v6: Ipv6Addr::from(
                    (0xfe80u128 << 112) | (config.seed as u128 & 0xffff_ffff_ffff_ffff),
                ),
            },
            capture: None,
            pfc: None,
            int: false,
        })
    }

    /// One iteration of the poll loop at time `now_ns`: link state, receive
    /// and forward a batch per port, run each port's link emulation and
    /// transmit, sample queues, evict idle flows. Returns the number of
    /// frames received and transmitted (0: nothing happened).
    pub fn poll(&mut self, now_ns: u64) -> usize {
        self.poll_clock(|| now_ns)
    }

    /// [`Switch::poll`] reading the time from `clock` (monotonic ns) after
    /// each receive: a frame is stamped no earlier than it was taken off
    /// the ring, so emulated delays are never cut short when the loop was
    /// preempted between reading the clock and receiving.
    pub fn poll_clock(&mut self, mut clock: impl FnMut() -> u64) -> usize {
        // Receive every port's batch first, then read the clock once: each
        // frame is stamped no earlier than it left its ring, and the clock
        // read (which waits for outstanding loads) comes after the ring
        // reads instead of between them.
        self.batch.rx.clear();
        for port in 0..self.ports.len() {
            let start = self.batch.rx.len();
            self.io
                .recv(port, &mut self.batch.rx, self.batch.batch_size);
            // The kernel wrote these frames on another core: start pulling
            // their headers in now, so the misses overlap instead of
            // stalling each frame's parse in turn.
            let mut bytes = 0;
            for f in &self.batch.rx[start..] {
                prefetch(self.io.frame(*f));
                bytes += f.len as u64;
            }
            // Counted per batch, not per frame.
            let frames = (self.batch.rx.len() - start) as u64;
            if frames > 0 {
                self.counters.add(port, Counter::RxFrames, frames);
                self.counters.add(port, Counter::RxBytes, bytes);
            }
            self.batch.rx_ends[port] = self.batch.rx.len();
        }
        let now_ns = clock();
        self.timers.last_poll_ns = now_ns;
        if self.capture.is_some() {
            self.capture_received(now_ns);
        }
        self.telemetry.polls += 1;
        if !self.batch.rx.is_empty() {
            self.telemetry.polls_with_rx += 1;
        }
        // Link events are a syscall to read: look at most every 200 us (the
        // failover budget is milliseconds), else only at the periodic check.
        let event = now_ns >= self.timers.next_link_event_ns && {
            self.timers.next_link_event_ns = now_ns + LINK_EVENT_INTERVAL_NS;
            self.io.links_changed()
        };
        if event || now_ns >= self.timers.next_link_check_ns {
            self.check_links();
            self.timers.next_link_check_ns = now_ns + self.timers.link_check_interval_ns;
        }
        let mut work = self.batch.rx.len();
        let mut start = 0;
        for port in 0..self.ports.len() {
            let end = self.batch.rx_ends[port];
            for i in start..end {
                let frame = self.batch.rx[i];
                self.forward(port, frame, now_ns);
            }
            start = end;
        }
        work += self.transmit(now_ns);
        if self.pfc.is_some() {
            self.send_pfc(now_ns);
        }
        self.sample(now_ns);
        if now_ns >= self.timers.next_evict_ns {
            self.router.evict_step(now_ns, self.timers.evict_budget);
            self.timers.next_evict_ns = now_ns + EVICT_INTERVAL_NS;
        }
        self.release_dropped();
        self.io.flush();
        work
    }

    /// Records the frames just received on the captured port.
    #[inline(never)]
    fn capture_received(&mut self, now_ns: u64) {
        let Some(c) = self.capture.as_deref_mut() else {
            return;
        };
        c.tick(now_ns);
        let port = c.spec().port;
        if !c.wants(port) || port >= self.batch.rx_ends.len() {
            return;
        }
        let start = if port == 0 {
            0
        } else {
            self.batch.rx_ends[port - 1]
        };
        for f in &self.batch.rx[start..self.batch.rx_ends[port]] {
            c.record(now_ns, false, self.io.frame(*f));
        }
    }

    /// Starts capturing a port's frames (replacing a capture running).
    pub fn start_capture(&mut self, spec: CaptureSpec) {
        self.capture = Some(Box::new(Capture::new(spec)));
    }

    /// The capture running (or finished and not yet stopped).
    pub fn capture_mut(&mut self) -> Option<&mut Capture> {
        self.capture.as_deref_mut()
    }

    /// Ends the capture, returning it.
    pub fn stop_capture(&mut self) -> Option<Box<Capture>> {
        self.capture.take()
    }

    fn drop_frame(&mut self, port: usize, frame: Frame, reason: DropReason) {
        self.counters.drop(port, reason);
        self.batch.dropped.push(frame);
        if self.batch.dropped.len() >= 1024 {
            self.release_dropped();
        }
    }

    /// Drops `frame` (counted as `reason`) and, rate limit allowing, turns
    /// its buffer into the ICMP error `kind` sent back out of `in_port`.
    /// Out of line: the error path only.
    #[inline(never)]
    fn reject(
        &mut self,
        in_port: usize,
        frame: Frame,
        reason: DropReason,
        kind: IcmpError,
        now_ns: u64,
    ) {
        self.counters.drop(in_port, reason);
        if !self.ports[in_port].up {
            return self.recycle(frame);
        }
        if !self.icmp.limiter.allow(now_ns) {
            self.counters.add(in_port, Counter::IcmpRateLimited, 1);
            return self.recycle(frame);
        }
        let (a4, a6) = self.icmp.port_addrs[in_port];
        let (v4, v6) = (
            a4.unwrap_or(self.icmp.router_v4),
            a6.unwrap_or(self.icmp.router_v6),
        );
        let mac = self.ports[in_port].config.mac;
        let buf = self.io.frame_room_mut(frame);
        let Some(len) = icmp::build_error(buf, frame.len as usize, kind, mac, v4, v6) else {
            return self.recycle(frame);
        };
        let error = Frame {
            addr: frame.addr,
            len: len as u32,
        };
        let coin = self.random();
        match self.ports[in_port].egress.admit(error.len, false, coin) {
            // The original is counted as dropped already.
            Admit::DropQueueFull => self.recycle(error),
            Admit::Queued | Admit::QueuedMarkCe => {
                self.ports[in_port].egress.enqueue(error, error.len, now_ns);
                self.counters.add(in_port, Counter::IcmpSent, 1);
            }
        }
    }

    /// Hands a frame already counted back to the pool.
    fn recycle(&mut self, frame: Frame) {
        self.batch.dropped.push(frame);
        if self.batch.dropped.len() >= 1024 {
            self.release_dropped();
        }
    }

    /// Sets a port's own addresses (the interface's): ICMP errors sent out
    /// of it come from them; ports without one use another port's, else the
    /// switch's link-local address.
    pub fn set_port_addresses(&mut self, port: usize, addrs: &[IpAddr]) {
        let v4 = addrs.iter().find_map(|a| match a {
            IpAddr::V4(a) => Some(*a),
            _ => None,
        });
        // A global address rather than the link-local one every port has.
        let v6s: Vec<Ipv6Addr> = addrs
            .iter()
            .filter_map(|a| match a {
                IpAddr::V6(a) => Some(*a),
                _ => None,
            })
            .collect();
        let v6 = v6s
            .iter()
            .find(|a| !a.is_unicast_link_local())
            .or(v6s.first())
            .copied();
        if let Some(slot) = self.icmp.port_addrs.get_mut(port) {
            *slot = (v4, v6);
        }
        if let Some(a) = self.icmp.port_addrs.iter().find_map(|p| p.0) {
            self.icmp.router_v4 = a;
        }
        if let Some(a) = self
            .icmp
            .port_addrs
            .iter()
            .find_map(|p| p.1.filter(|a| !a.is_unicast_link_local()))
        {
            self.icmp.router_v6 = a;
        }
    }

    fn release_dropped(&mut self) {
        if !self.batch.dropped.is_empty() {
            self.io.release(&self.batch.dropped);
            self.batch.dropped.clear();
        }
    }

    #[inline]
    fn random(&mut self) -> u32 {
        // xorshift64: ECN marking needs cheap, not cryptographic, coins.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng >> 32) as u32
    }

    #[inline]
    fn forward(&mut self, in_port: usize, frame: Frame, now_ns: u64) {
        let data = self.io.frame(frame);
        if self.ports[in_port].peer_mac.is_none() && data.len() >= 12 {
            let mut mac = [0u8; 6];
            mac.copy_from_slice(&data[6..12]);
            self.ports[in_port].peer_mac = Some(mac);
        }
        let parsed = match lcmp_wire::parse(data) {
            Ok(p) => p,
            Err(ParseError::TtlExpired) => {
                return self.reject(
                    in_port,
                    frame,
                    DropReason::Parse(ParseError::TtlExpired),
                    IcmpError::TimeExceeded,
                    now_ns,
                )
            }
            Err(ParseError::NotIp) if lcmp_wire::pfc::is_pfc(self.io.frame(frame)) => {
                return self.pfc_received(in_port, frame, now_ns)
            }
            Err(e) => return self.drop_frame(in_port, frame, DropReason::Parse(e)),
        };
        if parsed.is_rocev2() {
            self.counters.add(in_port, Counter::RxRocev2Frames, 1);
        }
        let hash = self.hasher.hash(&flow_key(&parsed.flow));
        let routes = &self.routes;
        let flow = &parsed.flow;
        let mut route_index = usize::MAX;
        let outcome = self.router.route_with(hash, &self.congestion, now_ns, || {
            let (i, r) = match *flow {
                FlowTuple::V4 { dst, .. } => routes.find_v4(Ipv4Addr::from(dst)),
                FlowTuple::V6 { dst, .. } => routes.find_v6(Ipv6Addr::from(dst)),
            }?;
            route_index = i;
            Some(&r.candidates)
        });
        let out = match outcome {
            RouteOutcome::Cached(p) => p as usize,
            RouteOutcome::New(p) | RouteOutcome::Uncached(p) | RouteOutcome::FailedOver(p) => {
                // A decision: the only place the logs cost anything.
                self.note_decision(outcome, &parsed.flow, route_index, now_ns);
                p as usize
            }
            RouteOutcome::NoRoute => {
                return self.reject(
                    in_port,
                    frame,
                    DropReason::NoRoute,
                    IcmpError::NoRoute,
                    now_ns,
                )
            }
            RouteOutcome::NoLivePort => {
                return self.drop_frame(in_port, frame, DropReason::NoLivePort)
            }
        };
        let Some(peer_mac) = self.ports[out].peer_mac else {
            return self.drop_frame(out, frame, DropReason::NoNeighbour);
        };
        // PFC: the frame counts against its ingress port's share until it
        // leaves (given back on every way out below).
        if let Some(pfc) = self.pfc.as_deref_mut() {
            if !pfc.control.admit(in_port, frame.len) {
                return self.drop_frame(in_port, frame, DropReason::PfcHeadroomFull);
            }
        }
        let coin = self.random();
        let ect = parsed.ecn.is_ecn_capable();
        let admit = self.ports[out].egress.admit(frame.len, ect, coin);
        let src_mac = self.ports[out].config.mac;
        let data = self.io.frame_mut(frame);
        match admit {
            Admit::DropQueueFull => {
                self.pfc_release(in_port, frame.len);
                return self.drop_frame(out, frame, DropReason::QueueFull);
            }
            Admit::QueuedMarkCe => {
                // Only a mark this switch made counts.
                if set_ce(data, parsed.l3, parsed.l3_offset) {
                    self.counters.add(out, Counter::CeMarked, 1);
                }
            }
            Admit::Queued => {}
        }
        if let Err(e) = forward_rewrite(data, &parsed, src_mac, peer_mac) {
            let reason = match e {
                RewriteError::TtlExpired => DropReason::Parse(ParseError::TtlExpired),
                RewriteError::FrameMismatch => DropReason::Parse(ParseError::Truncated),
            };
            self.pfc_release(in_port, frame.len);
            return self.drop_frame(in_port, frame, reason);
        }
        // Parking, the port keeps the bytes and the pool the buffer.
        let held = match self.ports[out].flight.as_mut() {
            Some(flight) => {
                let parked = flight.park(self.io.frame(frame));
                self.recycle(frame);
                parked
            }
            None => frame,
        };
        // Marking at dequeue, the egress judges the frame when it departs;
        // the tag is the ingress port, for PFC's accounting at departure.
        self.ports[out]
            .egress
            .enqueue_tagged(held, held.len, ect, coin, now_ns, in_port as u16);
    }

    /// Gives back a frame's share of its ingress port's buffer (PFC on).
    #[inline]
    fn pfc_release(&mut self, in_port: usize, len: u32) {
        if let Some(pfc) = self.pfc.as_deref_mut() {
            pfc.control.release(in_port, len);
        }
    }

    /// A PFC frame from the peer on `in_port`, for the RoCEv2 priority:
    /// the port's egress stops (for the time it gives, at the port's
    /// rate) or goes again; counted and consumed (MAC control frames are
    /// link-local, never forwarded). A switch's port is one queue: a pause
    /// holds all it sends, as the simulator's, whose ACKs share the data's
    /// priority.
    #[inline(never)]
    fn pfc_received(&mut self, in_port: usize, frame: Frame, now_ns: u64) {
        self.counters.add(in_port, Counter::PfcReceived, 1);
        let time = lcmp_wire::pfc::parse(self.io.frame(frame))
            .ok()
            .and_then(|p| p.time(crate::pfc::ROCE_PRIORITY));
        let egress = &mut self.ports[in_port].egress;
        match time {
            None => {}
            Some(0) => egress.resume(now_ns),
            Some(quanta) => {
                // An unshaped port is taken at 100 Gbit/s.
                let rate = match egress.config().rate_bps {
                    0 => 100_000_000_000,
                    r => r,
                };
                let ns = lcmp_wire::pfc::quanta_to_ns(quanta, rate).unwrap_or(u64::MAX);
                egress.pause(now_ns, now_ns.saturating_add(ns));
            }
        }
        self.recycle(frame);
    }

    /// Turns in-band network telemetry on or off: with it on, every
    /// RoCEv2 frame carrying an INT collect block ([`lcmp_wire::int`])
    /// gets a hop record as it leaves a port (see `push_int_hops`),
    /// counted in [`Counter::IntPushed`], or its OVERFLOW flag when the
    /// block is full ([`Counter::IntOverflow`]). Off (the default) the
    /// packet path does not look at frames for it. Frames already in
    /// flight get a hop if they leave while it is on.
    pub fn set_int(&mut self, on: bool) {
        self.int = on;
        if on && self.batch.tx_departures.capacity() == 0 {
            self.batch.tx_departures = Vec::with_capacity(4096);
        }
    }

    /// Whether INT is on ([`Switch::set_int`]).
    pub fn int_enabled(&self) -> bool {
        self.int
    }

    /// Turns on priority flow control (IEEE 802.1Qbb) as the LCMP paper's
    /// simulator runs it ([`crate::pfc`]): each ingress port may hold a
    /// share of the switch's buffer (the largest port buffer, the
    /// simulator's shared one), and a port past it is sent a pause for
    /// `priority`, re-sent while it stays past, then a resume. For hosts
    /// sending at `nic_rate_bps` (faster ports get a larger share).
    /// Refused, with the reason, when the buffer cannot cover the ports'
    /// headroom (a switch with long-haul links), or when the packet I/O
    /// has no pool to write the frames in (AF_XDP ports: a NIC's own PFC
    /// is the kernel's and the NIC's).
    pub fn enable_pfc(&mut self, nic_rate_bps: u64, priority: u8) -> Result<(), String> {
        let ports = self
            .ports
            .iter()
            .map(|p| PortPfc {
                rate_bps: p.egress.config().rate_bps,
                delay_ns: p.egress.config().delay_ns,
            })
            .collect();
        let buffer = self
            .ports
            .iter()
            .map(|p| p.config.egress.buffer_bytes)
            .max()
            .unwrap_or(0);
        let control = PfcControl::new(MmuConfig::new(buffer, ports, nic_rate_bps), priority)?;
        let mut buffers = Vec::new();
        self.io.take_free(1, &mut buffers);
        if buffers.is_empty() {
            return Err("its packet I/O lends no buffers to write PFC frames in (AF_XDP ports: PFC is the NIC's)".into());
        }
        self.pfc = Some(Box::new(PfcOn {
            control,
            due: Vec::new(),
            buffers,
        }));
        Ok(())
    }

    /// The PFC accounting, when PFC is on.
    pub fn pfc(&self) -> Option<&crate::pfc::Mmu> {
        self.pfc.as_deref().map(|p| p.control.mmu())
    }

    /// Writes and queues the PFC frames due at `now_ns`, each out of the
    /// port whose peer it pauses or resumes, behind what that port holds.
    #[inline(never)]
    fn send_pfc(&mut self, now_ns: u64) {
        let Some(mut pfc) = self.pfc.take() else {
            return;
        };
        pfc.due.clear();
        pfc.control.frames_due(now_ns, &mut pfc.due);
        for i in 0..pfc.due.len() {
            let f = pfc.due[i];
            if !self.ports[f.port].up {
                continue;
            }
            if pfc.buffers.is_empty() {
                self.io.take_free(8, &mut pfc.buffers);
            }
            let Some(addr) = pfc.buffers.pop() else {
                // The pool is dry: the refresh or the next decision
                // sends it.
                break;
            };
            let mac = self.ports[f.port].config.mac;
            let room = self.io.frame_room_mut(Frame { addr, len: 0 });
            let Ok(len) = lcmp_wire::pfc::write(room, mac, &f.pfc) else {
                pfc.buffers.push(addr);
                continue;
            };
            let frame = Frame {
                addr,
                len: len as u32,
            };
            let held = match self.ports[f.port].flight.as_mut() {
                Some(flight) => {
                    let parked = flight.park(self.io.frame(frame));
                    pfc.buffers.push(addr);
                    parked
                }
                None => frame,
            };
            // A control frame: no tail drop, no mark.
            self.ports[f.port].egress.enqueue(held, held.len, now_ns);
            let counter = if f.pause {
                Counter::PfcPausesSent
            } else {
                Counter::PfcResumesSent
            };
            self.counters.add(f.port, counter, 1);
        }
        self.pfc = Some(pfc);
    }

    /// Keeps only the bytes of the frames every port holds from now on
    /// (see [`crate::flight`]): for packet I/O whose pool gives buffers
    /// ([`PacketIo::take_free`], the memory I/O of the one-process
    /// engines), whose networks hold gigabytes on long-haul links.
    pub fn park_in_flight(&mut self) {
        for p in &mut self.ports {
            p.flight.get_or_insert_with(Flight::default);
            // No pool budget to keep: the line holds what the link can.
            let mut cfg = *p.egress.config();
            cfg.max_in_flight = delay_line_capacity(cfg.rate_bps, cfg.delay_ns);
            p.egress.reconfigure(cfg);
        }
    }

    /// Runs every port's link emulation and hands due frames to the
    /// transmit rings, setting CE in those marked at their departure.
    fn transmit(&mut self, now_ns: u64) -> usize {
        let mut sent_total = 0;
        for port in 0..self.ports.len() {
            // Nothing due on this link: nothing to hand out or count (most
            // ports of a switch with many, most polls).
            if self.ports[port]
                .egress
                .next_deadline()
                .is_none_or(|t| t > now_ns)
            {
                continue;
            }
            self.batch.tx.clear();
            // Back-pressure: the link hands out no more than the ring takes;
            // frames that are due wait in the delay line, first in line.
            let mut room = self.io.tx_room(port);
            let parking = self.ports[port].flight.is_some();
            if parking {
                // A parked frame handed out needs a buffer: no more go
                // than the pool gives; the rest wait, first in line.
                let due = self.ports[port].egress.due_frames(now_ns, room);
                let spare = &mut self.batch.spare;
                if spare.len() < due {
                    self.io.take_free(due - spare.len(), spare);
                }
                room = room.min(spare.len());
            }
            let batch = &mut self.batch;
            batch.tx_marks.clear();
            batch.tx_departures.clear();
            let p = &mut self.ports[port];
            let step = p.egress.poll_into(
                now_ns,
                room,
                &mut TxSink {
                    tx: &mut batch.tx,
                    tx_marks: &mut batch.tx_marks,
                    departures: self.int.then_some(&mut batch.tx_departures),
                    dropped: &mut batch.dropped,
                    flight: p.flight.as_mut(),
                    pfc: self.pfc.as_deref_mut(),
                },
            );
            if parking {
                self.unpark_tx(port);
            }
            self.counters
                .drop_n(port, DropReason::EmulationOverflow, step.overflowed as u64);
            // Counted as they go onto the link, not when released a delay
            // later: a link's load is its departures.
            self.counters
                .add(port, Counter::DepartedFrames, step.departed as u64);
            self.counters
                .add(port, Counter::DepartedBytes, step.departed_bytes);
            for &i in &self.batch.tx_marks {
                let data = self.io.frame_mut(self.batch.tx[i]);
                // Only a mark this switch made counts.
                if forwarded_ip_header(data).is_some_and(|(l3, at)| set_ce(data, l3, at)) {
                    self.counters.add(port, Counter::CeMarked, 1);
                }
            }
            if self.int {
                self.push_int_hops(port);
            }
            if self.batch.tx.is_empty() {
                continue;
            }
            // Recorded before the port takes them: a memory link's peer may
            // rewrite a frame as soon as it has it.
            let recorded = match self.capture.as_deref_mut() {
                Some(c) if c.wants(port) => self
                    .batch
                    .tx
                    .iter()
                    .filter(|f| c.record(now_ns, true, self.io.frame(**f)))
                    .count(),
                _ => 0,
            };
            let sent = self.io.send(port, &self.batch.tx);
            if let Some(c) = self.capture.as_deref_mut() {
                // The recorded frames are a prefix of the batch; those
                // past `sent` were not taken.
                c.unrecord(recorded.saturating_sub(sent));
            }
            sent_total += sent;
            self.counters.add(port, Counter::TxFrames, sent as u64);
            let bytes = self.batch.tx[..sent]
                .iter()
                .map(|f| f.len as u64)
                .sum::<u64>();
            self.counters.add(port, Counter::TxBytes, bytes);
            for i in sent..self.batch.tx.len() {
                let f = self.batch.tx[i];
                self.drop_frame(port, f, DropReason::TxRingFull);
            }
        }
        sent_total
    }

    /// Writes the INT hop of port `port` into each frame of `batch.tx`
    /// that carries a collect block, from its departure: HPCC's switch
    /// (`SwitchNotifyDequeue`) records the port's rate, its transmitted
    /// bytes, its queue and the time as a packet leaves the egress queue,
    /// which is the departure here; the hop is written a link delay later,
    /// as the frame is handed to the ring (a parked frame has no bytes to
    /// write into before). The rate is the emulated one (0 unshaped),
    /// kbit/s; the time is the switch clock's, wrapping at 2^32 ns.
    fn push_int_hops(&mut self, port: usize) {
        let rate_kbps =
            u32::try_from(self.ports[port].egress.config().rate_bps / 1000).unwrap_or(u32::MAX);
        let (mut pushed, mut overflow) = (0, 0);
        for (f, d) in self.batch.tx.iter().zip(&self.batch.tx_departures) {
            let hop = IntHop {
                link_rate_kbps: rate_kbps,
                qlen_bytes: d.queue_bytes,
                tx_bytes: d.departed_bytes,
                ts_ns: d.at_ns as u32,
            };
            // Frames without a collect block (or with a broken one) go
            // out as they are.
            match push_hop(self.io.frame_mut(*f), hop) {
                Ok(PushOutcome::Pushed) => pushed += 1,
                Ok(PushOutcome::Overflow) => overflow += 1,
                Ok(PushOutcome::NotInt) | Err(_) => {}
            }
        }
        self.counters.add(port, Counter::IntPushed, pushed);
        self.counters.add(port, Counter::IntOverflow, overflow);
    }

    /// Puts each parked frame of `batch.tx` (port `port`'s, in line order)
    /// back into a buffer of `batch.spare`, which `transmit` made sure
    /// holds enough; gives the spares left back to the pool, so the switch
    /// holds no buffer between polls that it does not use.
    fn unpark_tx(&mut self, port: usize) {
        let Some(flight) = self.ports[port].flight.as_mut() else {
            return;
        };
        for f in self.batch.tx.iter_mut() {
            if !Flight::is_parked(*f) {
                continue;
            }
            let addr = self
                .batch
                .spare
                .pop()
                .expect("transmit hands out no more parked frames than spare buffers");
            *f = Frame { addr, len: f.len };
            flight.unpark(self.io.frame_mut(*f));
        }
        let spare = &mut self.batch.spare;
        self.batch
            .dropped
            .extend(spare.drain(..).map(|addr| Frame { addr, len: 0 }));
        self.release_dropped();
    }

    /// Hands back every frame port `port`'s egress holds: pool buffers to
    /// `held`; parked frames have none, their bytes are forgotten. Returns
    /// how many frames in all.
    fn flush_egress(&mut self, port: usize, held: &mut Vec<Frame>) -> usize {
        let p = &mut self.ports[port];
        let (egress, flight, pfc) = (&mut p.egress, &mut p.flight, &mut self.pfc);
        egress.flush_tagged(&mut |f, tag, len| {
            if let Some(pfc) = pfc.as_deref_mut() {
                if tag != NO_TAG {
                    pfc.control.release(usize::from(tag), len);
                }
            }
            match flight {
                Some(store) if Flight::is_parked(f) => store.discard(f),
                _ => held.push(f),
            }
        })
    }

    /// Feeds the congestion estimators at their fixed cadence, catching up
    /// after a sleep.
    fn sample(&mut self, now_ns: u64) {
        if now_ns < self.timers.next_sample_ns {
            return;
        }
        let behind = (now_ns - self.timers.next_sample_ns) / self.timers.sample_interval_ns;
        if behind > MAX_CATCH_UP_SAMPLES {
            self.timers.next_sample_ns =
                now_ns - MAX_CATCH_UP_SAMPLES * self.timers.sample_interval_ns;
        }
        while self.timers.next_sample_ns <= now_ns {
            for port in 0..self.ports.len() {
                let q = self.ports[port].egress.queue_bytes();
                self.congestion
                    .sample(port as u8, self.timers.next_sample_ns, q);
            }
            self.timers.next_sample_ns += self.timers.sample_interval_ns;
        }
    }

    fn check_links(&mut self) {
        for port in 0..self.ports.len() {
            self.ports[port].link_up = self.io.link_up(port);
            self.apply_port_state(port);
        }
    }

    /// Makes a port forward iff its link and admin state are both up; a
    /// port that stops forwarding drops what it holds (counted).
    fn apply_port_state(&mut self, port: usize) {
        let p = &mut self.ports[port];
        let up = p.link_up && p.admin_up;
        if up == p.up {
            return;
        }
        p.up = up;
        self.congestion.set_up(port as u8, up);
        if !up {
            let mut held = Vec::new();
            let all = self.flush_egress(port, &mut held);
            self.counters
                .drop_n(port, DropReason::PortDown, (all - held.len()) as u64);
            for f in held {
                self.drop_frame(port, f, DropReason::PortDown);
            }
        }
    }

    /// Records a decision in the recent ring, the per-route counts and
    /// the flow log. Out of line: it runs once per new flow, not per
    /// packet.
    #[inline(never)]
    fn note_decision(
        &mut self,
        outcome: RouteOutcome,
        flow: &FlowTuple,
        route_index: usize,
        now_ns: u64,
    ) {
        let Some(port) = outcome.port() else { return };
        if let Some(log) = self.telemetry.flow_log.as_deref_mut() {
            log_decision(log, outcome, flow, now_ns);
        }
        let reason = match outcome {
            RouteOutcome::FailedOver(_) => DecisionReason::Failover,
            RouteOutcome::Uncached(_) => DecisionReason::CacheFull,
            _ => DecisionReason::New,
        };
        let record = FlowRecord {
            time_ns: now_ns,
            flow: *flow,
            port,
            reason,
        };
        let at = (self.telemetry.recent_count % RECENT_DECISIONS as u64) as usize;
        match self.telemetry.recent.get_mut(at) {
            Some(slot) => *slot = record,
            None => self.telemetry.recent.push(record),
        }
        self.telemetry.recent_count += 1;
        if let Some(c) = self
            .telemetry
            .decisions
            .get_mut(route_index.wrapping_mul(self.ports.len()) + port as usize)
        {
            *c += 1;
        }
    }

    /// Whether congestion state still moves with no traffic (a queue holds
    /// bytes, or an estimator has not decayed to zero).
    fn congestion_active(&self) -> bool {
        (0..self.ports.len()).any(|p| {
            let e = self.congestion.estimator(p as u8);
            self.ports[p].egress.queue_bytes() > 0
                || e.c_cong() > 0
                || e.trend_bytes() != 0
                || e.d() > 0
        })
    }

    /// The earliest time the switch has timed work: a frame's departure or
    /// release, a congestion sample while queues are busy, a link check.
    /// Event mode sleeps until then (or until a frame arrives).
    pub fn next_deadline(&self) -> u64 {
        let mut t = self.timers.next_link_check_ns;
        for p in &self.ports {
            if let Some(d) = p.egress.next_deadline() {
                t = t.min(d);
            }
        }
        if self.congestion_active() {
            t = t.min(self.timers.next_sample_ns);
        }
        if let Some(due) = self.pfc.as_deref().and_then(|p| p.control.next_due_ns()) {
            t = t.min(due);
        }
        t
    }

    /// Poll iterations so far, and those that received frames.
    pub fn polls(&self) -> (u64, u64) {
        (self.telemetry.polls, self.telemetry.polls_with_rx)
    }

    /// The time (monotonic ns) the last poll ran at.
    pub fn last_poll_ns(&self) -> u64 {
        self.timers.last_poll_ns
    }

    /// The packet I/O (tests inject and collect frames through it).
    pub fn io(&mut self) -> &mut IO {
        &mut self.io
    }

    /// The packet I/O, read only.
    pub fn io_ref(&self) -> &IO {
        &self.io
    }

    /// The counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The policy in force.
    pub fn policy(&self) -> Policy {
        *self.router.selector().policy()
    }

    /// Switches the policy between polls. Cached flows keep their ports;
    /// new flows are decided by `policy`.
    pub fn set_policy(&mut self, policy: Policy) {
        self.router.set_selector(Selector::new(policy));
    }

    /// The ECN thresholds in force (fractions of each buffer).
    pub fn ecn(&self) -> Option<EcnFractions> {
        self.marking.ecn
    }

    /// The ECN thresholds in force as time at link rate, if they are.
    pub fn ecn_link_time(&self) -> Option<EcnLinkTime> {
        self.marking.ecn_link_time
    }

    /// The congestion estimator's weights, marks and cadence.
    pub fn congestion_params(&self) -> &CongestionParams {
        &self.marking.congestion_params
    }

    /// Where ECN marks are decided (`--ecn-mark-at`).
    pub fn ecn_mark_at(&self) -> EcnMarkAt {
        self.marking.ecn_mark_at
    }

    /// Sets every port's ECN thresholds as fractions of its buffer
    /// (`None`: marking off); replaces thresholds at link rate.
    pub fn set_ecn(&mut self, ecn: Option<EcnFractions>) {
        self.marking.ecn = ecn;
        self.marking.ecn_link_time = None;
        for p in &mut self.ports {
            let mut cfg = *p.egress.config();
            let buffer = cfg.buffer_bytes / self.marking.drop_headroom;
            cfg.ecn = ecn_bytes(ecn, None, self.marking.ecn_mark_at, cfg.rate_bps, buffer);
            p.egress.reconfigure(cfg);
        }
    }

    /// Changes a port's emulated link: rate (0: line rate), one-way delay
    /// and buffer. Frames held keep their schedule; the congestion monitor
    /// restarts for the new link.
    pub fn set_link(&mut self, port: usize, rate_bps: u64, delay_ns: u64, buffer_bytes: u64) {
        let (ecn, link_time, headroom) = (
            self.marking.ecn,
            self.marking.ecn_link_time,
            self.marking.drop_headroom,
        );
        let mark_at = self.marking.ecn_mark_at;
        let p = &mut self.ports[port];
        let mut cfg = *p.egress.config();
        cfg.rate_bps = rate_bps;
        cfg.delay_ns = delay_ns;
        cfg.buffer_bytes = buffer_bytes.saturating_mul(headroom);
        cfg.ecn = ecn_bytes(ecn, link_time, mark_at, rate_bps, buffer_bytes);
        cfg.max_in_flight = if p.flight.is_some() {
            delay_line_capacity(rate_bps, delay_ns)
        } else {
            delay_line_frames(rate_bps, delay_ns)
        };
        p.egress.reconfigure(cfg);
        self.congestion.set_link(
            &self.marking.congestion_params,
            port as u8,
            rate_bps,
            buffer_bytes,
        );
    }

    /// The egress link of a port.
    /// The buffer is the port's own, without `drop_headroom`.
    pub fn link(&self, port: usize) -> EgressConfig {
        let cfg = *self.ports[port].egress.config();
        EgressConfig {
            buffer_bytes: cfg.buffer_bytes / self.marking.drop_headroom,
            ..cfg
        }
    }

    /// Sets a port's administrative state; a port taken down drops what it
    /// holds and its flows fail over at their next packet.
    pub fn set_admin(&mut self, port: usize, up: bool) {
        self.ports[port].admin_up = up;
        self.apply_port_state(port);
    }

    /// Replaces the route table between polls. Cached flows keep their
    /// port while it stays a live candidate of their route; flows whose
    /// port left their route move at their next packet. Nothing is dropped.
    pub fn replace_routes(&mut self, routes: Vec<Route>) -> Result<TableChange, ConfigError> {
        let n = self.ports.len();
        for r in &routes {
            if r.candidates.is_empty() {
                return Err(ConfigError(format!("route {} has no candidates", r.prefix)));
            }
            for c in r.candidates.as_slice() {
                if c.port as usize >= n {
                    return Err(ConfigError(format!(
                        "route {} names port {} but the switch has {n} ports",
                        r.prefix, c.port
                    )));
                }
            }
        }
        let changed = {
            let old = self.routes.routes();
            old.len() != routes.len()
                || old.iter().zip(&routes).any(|(a, b)| {
                    a.prefix != b.prefix || a.candidates.as_slice() != b.candidates.as_slice()
                })
        };
        let new = port_sets(&routes);
        // A new prefix inherits the ports of the routes that covered its
        // addresses until now: flows to it may be cached on them.
        for prefix in new.keys() {
            if !self.ever.contains_key(prefix) {
                let mut inherited = PortSet::EMPTY;
                for (p, set) in &self.ever {
                    if p.contains(prefix) {
                        for port in set.iter() {
                            inherited.insert(port);
                        }
                    }
                }
                self.ever.insert(*prefix, inherited);
            }
        }
        let before = self.revalidate_set(&port_sets(self.routes.routes()));
        for (prefix, set) in &new {
            let e = self.ever.entry(*prefix).or_default();
            for port in set.iter() {
                e.insert(port);
            }
        }
        let revalidate = self.revalidate_set(&new);
        let ports_left: Vec<u8> = revalidate.iter().filter(|p| !before.contains(*p)).collect();
        let mut per_port = [0u64; 256];
        self.router.cache().flows_per_port(&mut per_port);
        let flows_on_ports_left = ports_left.iter().map(|&p| per_port[p as usize]).sum();
        self.router.set_revalidate(revalidate);
        self.telemetry.decisions = vec![0; routes.len() * n];
        self.routes = RoutingTable::new(routes);
        if changed {
            self.table_generation += 1;
        }
        Ok(TableChange {
            changed,
            ports_left,
            flows_on_ports_left,
        })
    }

    /// Ports that some prefix has had as a candidate and has not now.
    fn revalidate_set(&self, current: &HashMap<IpNet, PortSet>) -> PortSet {
        let mut out = PortSet::EMPTY;
        for (prefix, ever) in &self.ever {
            let now = current.get(prefix).copied().unwrap_or_default();
            for port in ever.iter() {
                if !now.contains(port) {
                    out.insert(port);
                }
            }
        }
        out
    }

    /// Route table generation: 1 at start, +1 per replacement that
    /// changed something.
    pub fn table_generation(&self) -> u64 {
        self.table_generation
    }

    /// The route of a destination.
    pub fn route_for(&self, dst: IpAddr) -> Option<&Route> {
        match dst {
            IpAddr::V4(a) => self.routes.lookup_v4(a),
            IpAddr::V6(a) => self.routes.lookup_v6(a),
        }
    }

    /// The ports' live state (up, C_cong, estimators) as decisions see it.
    pub fn port_states(&self) -> &PortStates {
        &self.congestion
    }

    /// Cached flows per port (walks the flow cache: off the packet path).
    pub fn flows_per_port(&self) -> Vec<u64> {
        let mut per_port = [0u64; 256];
        self.router.cache().flows_per_port(&mut per_port);
        per_port[..self.ports.len()].to_vec()
    }

    /// The flow cache's capacity.
    pub fn flow_capacity(&self) -> usize {
        self.router.cache().capacity()
    }

    /// Decisions since the table was installed, as (route, port, count),
    /// nonzero counts only.
    pub fn decision_counts(&self) -> Vec<(&Route, usize, u64)> {
        let n = self.ports.len();
        let routes = self.routes.routes();
        self.telemetry
            .decisions
            .iter()
            .enumerate()
            .filter(|(_, c)| **c > 0)
            .filter_map(|(i, c)| routes.get(i / n).map(|r| (r, i % n, *c)))
            .collect()
    }

    /// The most recent decisions, newest first (at most
    /// [`RECENT_DECISIONS`]).
    pub fn recent_decisions(&self) -> impl Iterator<Item = &FlowRecord> + '_ {
        let n = self.telemetry.recent_count.min(RECENT_DECISIONS as u64);
        (0..n).map(move |i| {
            let at = (self.telemetry.recent_count - 1 - i) % RECENT_DECISIONS as u64;
            &self.telemetry.recent[at as usize]
        })
    }

    /// Number of ports.
    pub fn port_count(&self) -> usize {
        self.ports.len()
    }

    /// Bytes in a port's egress buffer (0 for no such port).
    pub fn queue_bytes(&self, port: usize) -> u64 {
        self.ports.get(port).map_or(0, |p| p.egress.queue_bytes())
    }

    /// A port's administrative state.
    pub fn admin_up(&self, port: usize) -> bool {
        self.ports.get(port).is_some_and(|p| p.admin_up)
    }

    /// A port's name.
    pub fn port_name(&self, port: usize) -> &str {
        &self.ports[port].config.name
    }

    /// A port by interface name or index (as text).
    pub fn port_by_name(&self, name: &str) -> Option<usize> {
        self.ports
            .iter()
            .position(|p| p.config.name == name)
            .or_else(|| name.parse::<usize>().ok().filter(|&i| i < self.ports.len()))
    }

    /// The flow router's counters.
    pub fn router_stats(&self) -> RouterStats {
        self.router.stats()
    }

    /// Flows in the cache.
    pub fn cached_flows(&self) -> usize {
        self.router.cache().len()
    }

    /// Per-port state.
    pub fn port_reports(&self) -> Vec<PortReport> {
        self.ports
            .iter()
            .enumerate()
            .map(|(i, p)| PortReport {
                name: p.config.name.clone(),
                up: p.up,
                link_up: p.link_up,
                admin_up: p.admin_up,
                queue_bytes: p.egress.queue_bytes(),
                queue_frames: p.egress.queued_frames(),
                in_flight: p.egress.in_flight(),
                c_cong: self.congestion.c_cong(i as u8),
                egress: p.egress.stats(),
                peer_mac: p.peer_mac,
            })
            .collect()
    }

    /// Ports whose peer MAC is not known yet.
    pub fn ports_without_peer(&self) -> Vec<usize> {
        (0..self.ports.len())
            .filter(|&p| self.ports[p].peer_mac.is_none())
            .collect()
    }

    /// Sets a port's peer MAC (from the neighbour table).
    pub fn set_peer_mac(&mut self, port: usize, mac: MacAddr) {
        self.ports[port].peer_mac = Some(mac);
    }

    /// The routes in use.
    pub fn routes(&self) -> &[Route] {
        self.routes.routes()
    }

    /// Starts logging every path decision (new flow, failover, decision
    /// not cached) into a buffer of `capacity` records, allocated and
    /// touched now. Replaces an earlier log.
    pub fn enable_flow_log(&mut self, capacity: usize) {
        self.telemetry.flow_log = Some(Box::new(FlowLog::new(capacity)));
    }

    /// The flow log, if enabled: buffered records and counters.
    pub fn flow_log(&self) -> Option<&FlowLog> {
        self.telemetry.flow_log.as_deref()
    }

    /// Writes the buffered decisions to `out` as CSV lines (see
    /// [`crate::flow_log`]) and empties the buffer; call off the packet
    /// path. Ok(0) when the log is off. Records are counted as written or
    /// as failed in the log's counters.
    pub fn write_flow_log(&mut self, out: &mut impl Write) -> io::Result<usize> {
        let Some(log) = self.telemetry.flow_log.as_deref_mut() else {
            return Ok(0);
        };
        let (ports, routes) = (&self.ports, &self.routes);
        log.write_csv(
            out,
            |p| ports.get(p as usize).map_or("", |p| p.config.name.as_str()),
            |dst| {
                match dst {
                    IpAddr::V4(a) => routes.lookup_v4(a),
                    IpAddr::V6(a) => routes.lookup_v6(a),
                }
                .map(|r| r.prefix)
            },
        )
    }

    /// Hands back every frame the switch holds (shutdown), so the packet
    /// I/O can account for its whole pool.
    pub fn drain(&mut self) {
        for port in 0..self.ports.len() {
            let mut held = Vec::new();
            let all = self.flush_egress(port, &mut held);
            // Counted, so the final stats account for every frame.
            self.counters.drop_n(port, DropReason::Shutdown, all as u64);
            self.batch.dropped.extend(held);
        }
        if let Some(pfc) = self.pfc.as_deref_mut() {
            let spare = pfc.buffers.drain(..).map(|addr| Frame { addr, len: 0 });
            self.batch.dropped.extend(spare);
        }
        self.release_dropped();
        self.io.shutdown();
    }
}

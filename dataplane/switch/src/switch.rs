//! The forwarding pipeline of one switch: receive a batch per port, parse
//! (checked), find the flow's port (flow cache, else the policy engine over
//! the route's candidates), rewrite (MACs, TTL, checksum), admit into the
//! egress port's buffer (ECN, tail drop), and let each port's link emulation
//! (shaper, delay line) hand frames to the transmit ring in batches.
//!
//! Single-threaded and allocation-free per packet: one poll thread owns a
//! switch. Time is passed in, so tests drive it with a synthetic clock.

use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use lcmp_policy::{
    CongestionParams, FlowCache, FlowHasher, FlowKey, FlowRouter, Policy, PortStates, PortView,
    RouteOutcome, RouterStats, Selector,
};
use lcmp_wire::{forward_rewrite, mark_ce, FlowTuple, MacAddr, ParseError, RewriteError};

use crate::counters::{Counters, DropReason};
use crate::egress::{Admit, Egress, EgressConfig, EgressStats, Handoff};
use crate::flow_log::{DecisionReason, FlowLog, FlowRecord};
use crate::io::{Frame, PacketIo};
use crate::routing::{Route, RoutingTable};

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
    up: bool,
}

/// Per-port state for reports.
#[derive(Clone, Debug)]
pub struct PortReport {
    /// Interface name.
    pub name: String,
    /// Link up.
    pub up: bool,
    /// Bytes in the egress buffer.
    pub queue_bytes: u64,
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
    batch_size: usize,
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
    /// Poll iterations, and those that received something (their ratio to
    /// `rx_frames` is the mean receive batch).
    polls: u64,
    polls_with_rx: u64,
    /// Frames received this poll, all ports, port by port.
    rx: Vec<Frame>,
    /// Where each port's frames end in `rx`.
    rx_ends: Vec<usize>,
    tx: Vec<Frame>,
    dropped: Vec<Frame>,
    /// The path-decision log, if enabled. Boxed: the switch stays one
    /// pointer larger, and the disabled check is one null test.
    flow_log: Option<Box<FlowLog>>,
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
        let links: Vec<(u64, u64)> = config
            .ports
            .iter()
            .map(|p| (p.egress.rate_bps, p.egress.buffer_bytes))
            .collect();
        let congestion = PortStates::new(&config.congestion, &links);
        let ports = config
            .ports
            .into_iter()
            .map(|p| Port {
                peer_mac: p.peer_mac,
                egress: Egress::new(p.egress),
                config: p,
                up: true,
            })
            .collect();
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
            counters: Counters::default(),
            rng: config.seed | 1,
            batch_size: batch,
            sample_interval_ns: config.congestion.sample_interval_ns.max(1),
            next_sample_ns: 0,
            link_check_interval_ns: config.link_check_interval_ns.max(1),
            next_link_check_ns: 0,
            next_link_event_ns: 0,
            next_evict_ns: 0,
            evict_budget,
            rx: Vec::with_capacity(batch * n),
            rx_ends: vec![0; n],
            last_poll_ns: 0,
            polls: 0,
            polls_with_rx: 0,
            tx: Vec::with_capacity(4096),
            dropped: Vec::with_capacity(4096),
            flow_log: None,
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
        self.rx.clear();
        for port in 0..self.ports.len() {
            let start = self.rx.len();
            self.io.recv(port, &mut self.rx, self.batch_size);
            // The kernel wrote these frames on another core: start pulling
            // their headers in now, so the misses overlap instead of
            // stalling each frame's parse in turn.
            for f in &self.rx[start..] {
                prefetch(self.io.frame(*f));
            }
            self.rx_ends[port] = self.rx.len();
        }
        let now_ns = clock();
        self.last_poll_ns = now_ns;
        self.polls += 1;
        if !self.rx.is_empty() {
            self.polls_with_rx += 1;
        }
        // Link events are a syscall to read: look at most every 200 us (the
        // failover budget is milliseconds), else only at the periodic check.
        let event = now_ns >= self.next_link_event_ns && {
            self.next_link_event_ns = now_ns + LINK_EVENT_INTERVAL_NS;
            self.io.links_changed()
        };
        if event || now_ns >= self.next_link_check_ns {
            self.check_links();
            self.next_link_check_ns = now_ns + self.link_check_interval_ns;
        }
        let mut work = self.rx.len();
        let mut start = 0;
        for port in 0..self.ports.len() {
            let end = self.rx_ends[port];
            for i in start..end {
                let frame = self.rx[i];
                self.forward(port, frame, now_ns);
            }
            start = end;
        }
        work += self.transmit(now_ns);
        self.sample(now_ns);
        if now_ns >= self.next_evict_ns {
            self.router.evict_step(now_ns, self.evict_budget);
            self.next_evict_ns = now_ns + EVICT_INTERVAL_NS;
        }
        self.release_dropped();
        self.io.flush();
        work
    }

    fn drop_frame(&mut self, frame: Frame, reason: DropReason) {
        self.counters.drop(reason);
        self.dropped.push(frame);
        if self.dropped.len() >= 1024 {
            self.release_dropped();
        }
    }

    fn release_dropped(&mut self) {
        if !self.dropped.is_empty() {
            self.io.release(&self.dropped);
            self.dropped.clear();
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
        self.counters.rx_frames += 1;
        self.counters.rx_bytes += frame.len as u64;
        let data = self.io.frame(frame);
        if self.ports[in_port].peer_mac.is_none() && data.len() >= 12 {
            let mut mac = [0u8; 6];
            mac.copy_from_slice(&data[6..12]);
            self.ports[in_port].peer_mac = Some(mac);
        }
        let parsed = match lcmp_wire::parse(data) {
            Ok(p) => p,
            Err(e) => return self.drop_frame(frame, DropReason::Parse(e)),
        };
        let hash = self.hasher.hash(&flow_key(&parsed.flow));
        let routes = &self.routes;
        let flow = &parsed.flow;
        let outcome = self.router.route_with(hash, &self.congestion, now_ns, || {
            match *flow {
                FlowTuple::V4 { dst, .. } => routes.lookup_v4(Ipv4Addr::from(dst)),
                FlowTuple::V6 { dst, .. } => routes.lookup_v6(Ipv6Addr::from(dst)),
            }
            .map(|r| &r.candidates)
        });
        let out = match outcome {
            RouteOutcome::Cached(p) => p as usize,
            RouteOutcome::New(p) | RouteOutcome::Uncached(p) | RouteOutcome::FailedOver(p) => {
                // A decision: the only place the flow log costs anything
                // (one test when it is off).
                if let Some(log) = self.flow_log.as_deref_mut() {
                    log_decision(log, outcome, &parsed.flow, now_ns);
                }
                p as usize
            }
            RouteOutcome::NoRoute => return self.drop_frame(frame, DropReason::NoRoute),
            RouteOutcome::NoLivePort => return self.drop_frame(frame, DropReason::NoLivePort),
        };
        let Some(peer_mac) = self.ports[out].peer_mac else {
            return self.drop_frame(frame, DropReason::NoNeighbour);
        };
        let coin = self.random();
        let admit = self.ports[out]
            .egress
            .admit(frame.len, parsed.ecn.is_ecn_capable(), coin);
        let src_mac = self.ports[out].config.mac;
        let data = self.io.frame_mut(frame);
        match admit {
            Admit::DropQueueFull => return self.drop_frame(frame, DropReason::QueueFull),
            Admit::QueuedMarkCe => {
                if mark_ce(data, &parsed).is_ok() {
                    self.counters.ce_marked += 1;
                }
            }
            Admit::Queued => {}
        }
        if let Err(e) = forward_rewrite(data, &parsed, src_mac, peer_mac) {
            let reason = match e {
                RewriteError::TtlExpired => DropReason::Parse(ParseError::TtlExpired),
                RewriteError::FrameMismatch => DropReason::Parse(ParseError::Truncated),
            };
            return self.drop_frame(frame, reason);
        }
        self.ports[out].egress.enqueue(frame, frame.len, now_ns);
    }

    /// Runs every port's link emulation and hands due frames to the
    /// transmit rings.
    fn transmit(&mut self, now_ns: u64) -> usize {
        let mut sent_total = 0;
        for port in 0..self.ports.len() {
            self.tx.clear();
            let (tx, dropped) = (&mut self.tx, &mut self.dropped);
            let step = self.ports[port].egress.poll(now_ns, &mut |h| match h {
                Handoff::Transmit { frame, .. } => tx.push(frame),
                Handoff::Overflow { frame, .. } => dropped.push(frame),
            });
            self.counters.emulation_overflow += step.overflowed as u64;
            if self.tx.is_empty() {
                continue;
            }
            let sent = self.io.send(port, &self.tx);
            sent_total += sent;
            self.counters.tx_frames += sent as u64;
            self.counters.tx_bytes += self.tx[..sent].iter().map(|f| f.len as u64).sum::<u64>();
            for i in sent..self.tx.len() {
                let f = self.tx[i];
                self.drop_frame(f, DropReason::TxRingFull);
            }
        }
        sent_total
    }

    /// Feeds the congestion estimators at their fixed cadence, catching up
    /// after a sleep.
    fn sample(&mut self, now_ns: u64) {
        if now_ns < self.next_sample_ns {
            return;
        }
        let behind = (now_ns - self.next_sample_ns) / self.sample_interval_ns;
        if behind > MAX_CATCH_UP_SAMPLES {
            self.next_sample_ns = now_ns - MAX_CATCH_UP_SAMPLES * self.sample_interval_ns;
        }
        while self.next_sample_ns <= now_ns {
            for port in 0..self.ports.len() {
                let q = self.ports[port].egress.queue_bytes();
                self.congestion.sample(port as u8, self.next_sample_ns, q);
            }
            self.next_sample_ns += self.sample_interval_ns;
        }
    }

    fn check_links(&mut self) {
        for port in 0..self.ports.len() {
            let up = self.io.link_up(port);
            if up == self.ports[port].up {
                continue;
            }
            self.ports[port].up = up;
            self.congestion.set_up(port as u8, up);
            if !up {
                let mut held = Vec::new();
                self.ports[port].egress.flush(&mut |f| held.push(f));
                for f in held {
                    self.drop_frame(f, DropReason::PortDown);
                }
            }
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
        let mut t = self.next_link_check_ns;
        for p in &self.ports {
            if let Some(d) = p.egress.next_deadline() {
                t = t.min(d);
            }
        }
        if self.congestion_active() {
            t = t.min(self.next_sample_ns);
        }
        t
    }

    /// Poll iterations so far, and those that received frames.
    pub fn polls(&self) -> (u64, u64) {
        (self.polls, self.polls_with_rx)
    }

    /// The time (monotonic ns) the last poll ran at.
    pub fn last_poll_ns(&self) -> u64 {
        self.last_poll_ns
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
                queue_bytes: p.egress.queue_bytes(),
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
        self.flow_log = Some(Box::new(FlowLog::new(capacity)));
    }

    /// The flow log, if enabled: buffered records and counters.
    pub fn flow_log(&self) -> Option<&FlowLog> {
        self.flow_log.as_deref()
    }

    /// Writes the buffered decisions to `out` as CSV lines (see
    /// [`crate::flow_log`]) and empties the buffer; call off the packet
    /// path. Ok(0) when the log is off. Records are counted as written or
    /// as failed in the log's counters.
    pub fn write_flow_log(&mut self, out: &mut impl Write) -> io::Result<usize> {
        let Some(log) = self.flow_log.as_deref_mut() else {
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
            self.ports[port].egress.flush(&mut |f| held.push(f));
            self.dropped.extend(held);
        }
        self.release_dropped();
    }
}

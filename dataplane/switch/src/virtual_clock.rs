//! A whole network of nodes in one thread on a virtual clock: a
//! discrete-event driver ([`VirtualNet`]) of the same daemons
//! ([`Daemon`]) and nodes ([`Node`]: the LCMP switch, the rotor, the ToR,
//! any host) that run on real packets, whose clock ([`VirtualClock`])
//! jumps from one event to the next instead of passing.
//!
//! - The driver owns the time. After each poll a node says when it next
//!   has work ([`Daemon::next_wake`]); the driver keeps one entry per node
//!   in a min-heap of (time, node index, sequence), sets the clock to the
//!   earliest, steps that node's daemon ([`Daemon::step`]) and repeats.
//!   Nothing sleeps, and an idle span costs nothing.
//! - A memory link ([`crate::mem_link`]) is instantaneous in virtual time:
//!   its rate and delay are the sending port's egress, which hands a frame
//!   to the link when it reaches the far end. So a frame handed over at t
//!   is at the peer at t: after each poll the driver looks at the far end
//!   of every link of the node it polled ([`VirtualNet::join`]) and makes
//!   the peer runnable at t when frames wait there.
//! - Determinism: ties go by (time, node index); external events at an
//!   instant ([`VirtualNet::at`]) run before the polls of that instant, in
//!   the order they were given. Nothing depends on hash-map order or
//!   threads, so the same network and inputs give the same run.
//! - A node that says "poll again now" (`None`), or whose deadline is
//!   already due, is polled again at the same instant only while its polls
//!   make progress (frames received or sent). Without progress, a due
//!   deadline means it waits on a peer (a link's peer lent no buffer):
//!   it is parked until a peer it is joined to makes progress. A `None`
//!   without progress (a busy-polling node) is polled again
//!   [`VirtualNet::set_busy_poll_ns`] later.
//! - Housekeeping that writes files (the stats file, the flow log) runs on
//!   the daemon's deadlines, which are virtual time here.
//!
//! Wall-clock mode ([`VirtualNet::pace_with_wall_clock`]): the same driver
//! paced by real time, the wall-clock engine of networks that have no
//! other one (rotor networks: `lcmp_engine::rotor`). The clock's time t0
//! when the first event runs (or [`VirtualNet::run_until`] is called)
//! after pacing is turned on is pinned to that instant of
//! `CLOCK_MONOTONIC`, the origin; before running an event due at t the
//! driver waits until the monotonic clock reaches origin + (t - t0), and
//! the clock the nodes read is then max(t, t0 + monotonic time since the
//! origin), never lower than before.
//! So frames move when real time says, and late when the machine is slow:
//! an event then runs at c > t, exactly like a daemon that polls late, and
//! what that poll hands over is at the peer at c. Events still run in the
//! order of their due times. [`VirtualNet::run_until`] returns once the
//! monotonic clock has reached its time, so a caller sampling at t samples
//! at real time t. How late events ran: [`VirtualNet::lateness`]
//! ([`PaceLateness`]). Unpaced, the driver reads no clock.
//!
//! No allocation per poll or per frame on the driver's side, once the heap
//! has grown to the network's size (frames watched with
//! [`VirtualNet::watch`] are copied out: that is for tests).

use std::any::Any;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::daemon::{Daemon, DaemonConfig};
use crate::io::PacketIo;
use crate::linked_io::LinkedIo;
use crate::mem_io::MemIo;
use crate::mem_link::MemoryLinks;
use crate::node::{Clock, Node};

/// The time every node of a [`VirtualNet`] reads, ns: set by the driver
/// only (clones share it).
#[derive(Clone, Debug, Default)]
pub struct VirtualClock(Arc<AtomicU64>);

impl VirtualClock {
    /// A clock at `start_ns`.
    pub fn new(start_ns: u64) -> Self {
        VirtualClock(Arc::new(AtomicU64::new(start_ns)))
    }

    /// The time now.
    pub fn get(&self) -> u64 {
        // One thread drives the clock: nothing to order with.
        self.0.load(Ordering::Relaxed)
    }

    fn set(&self, t: u64) {
        self.0.store(t, Ordering::Relaxed);
    }
}

impl Clock for VirtualClock {
    #[inline]
    fn now_ns(&mut self) -> u64 {
        self.get()
    }
}

/// What the driver needs of a node's packet I/O beyond [`PacketIo`]; ports
/// are numbered as the node numbers them.
pub trait VirtualIo {
    /// Whether frames wait to be received on `port`.
    fn rx_pending(&self, port: usize) -> bool;
    /// Puts a frame from outside the network into `port`'s receive queue
    /// (in-memory ports only); false if it cannot.
    fn inject(&mut self, port: usize, bytes: &[u8]) -> bool;
    /// Takes the frames `port` sent out of the network so far (in-memory
    /// ports only), recycling their buffers.
    fn take_sent(&mut self, port: usize) -> Vec<Vec<u8>>;
    /// Recycles them without copying them out; returns how many.
    fn discard_sent(&mut self, port: usize) -> usize;
}

impl VirtualIo for MemIo {
    fn rx_pending(&self, port: usize) -> bool {
        self.rx_queued(port) > 0
    }

    fn inject(&mut self, port: usize, bytes: &[u8]) -> bool {
        port < self.ports() && MemIo::inject(self, port, bytes)
    }

    fn take_sent(&mut self, port: usize) -> Vec<Vec<u8>> {
        if port >= self.ports() {
            return Vec::new();
        }
        MemIo::take_sent(self, port)
    }

    fn discard_sent(&mut self, port: usize) -> usize {
        if port >= self.ports() {
            return 0;
        }
        MemIo::discard_sent(self, port)
    }
}

/// A memory-link port's input is its link's; any other port is the inner
/// I/O's.
impl<I: PacketIo + VirtualIo> VirtualIo for LinkedIo<I> {
    fn rx_pending(&self, port: usize) -> bool {
        match self.link(port) {
            Some(l) => l.rx_pending(),
            None => self
                .io_port(port)
                .is_some_and(|p| self.inner().rx_pending(p)),
        }
    }

    fn inject(&mut self, port: usize, bytes: &[u8]) -> bool {
        match self.io_port(port) {
            Some(p) => self.inner_mut().inject(p, bytes),
            None => false,
        }
    }

    fn take_sent(&mut self, port: usize) -> Vec<Vec<u8>> {
        match self.io_port(port) {
            Some(p) => self.inner_mut().take_sent(p),
            None => Vec::new(),
        }
    }

    fn discard_sent(&mut self, port: usize) -> usize {
        match self.io_port(port) {
            Some(p) => self.inner_mut().discard_sent(p),
            None => 0,
        }
    }
}

/// A daemon on the virtual clock as the driver sees it, whatever its node:
/// one network holds nodes of different kinds.
pub trait VirtualNode: Any {
    /// The daemon's name ([`DaemonConfig::name`]).
    fn name(&self) -> &str;
    /// One iteration at the clock's time ([`Daemon::step`]).
    fn step(&mut self) -> usize;
    /// When it next has work ([`Daemon::next_wake`]).
    fn next_wake(&self, now_ns: u64) -> Option<u64>;
    /// Its ports.
    fn ports(&mut self) -> usize;
    /// [`VirtualIo::rx_pending`] of its I/O.
    fn rx_pending(&mut self, port: usize) -> bool;
    /// [`VirtualIo::inject`] of its I/O.
    fn inject(&mut self, port: usize, bytes: &[u8]) -> bool;
    /// [`VirtualIo::take_sent`] of its I/O.
    fn take_sent(&mut self, port: usize) -> Vec<Vec<u8>>;
    /// [`VirtualIo::discard_sent`] of its I/O.
    fn discard_sent(&mut self, port: usize) -> usize;
    /// Its status as JSON (the stats file's bytes).
    fn status_json(&mut self) -> serde_json::Result<Vec<u8>>;
    /// Shutdown ([`Daemon::finish`]); the final status as JSON.
    fn finish(&mut self) -> serde_json::Result<Vec<u8>>;
    /// For [`VirtualNet::daemon`].
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<N: Node + 'static> VirtualNode for Daemon<N, VirtualClock>
where
    N::Io: VirtualIo,
{
    fn name(&self) -> &str {
        &self.config().name
    }

    fn step(&mut self) -> usize {
        Daemon::step(self)
    }

    fn next_wake(&self, now_ns: u64) -> Option<u64> {
        Daemon::next_wake(self, now_ns)
    }

    fn ports(&mut self) -> usize {
        self.node().io().ports()
    }

    fn rx_pending(&mut self, port: usize) -> bool {
        self.node().io().rx_pending(port)
    }

    fn inject(&mut self, port: usize, bytes: &[u8]) -> bool {
        self.node().io().inject(port, bytes)
    }

    fn take_sent(&mut self, port: usize) -> Vec<Vec<u8>> {
        self.node().io().take_sent(port)
    }

    fn discard_sent(&mut self, port: usize) -> usize {
        self.node().io().discard_sent(port)
    }

    fn status_json(&mut self) -> serde_json::Result<Vec<u8>> {
        serde_json::to_vec(&self.status())
    }

    fn finish(&mut self) -> serde_json::Result<Vec<u8>> {
        serde_json::to_vec(&Daemon::finish(self))
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// A paced event ([`VirtualNet::pace_with_wall_clock`]) run more than this
/// after its time counts as late ([`PaceLateness::late`]), ns: twice the
/// default timer slack (50 us), more than a daemon waking from `ppoll`
/// routinely sees.
pub const PACE_LATE_NS: u64 = 100_000;

/// A paced driver sleeps until this long before an event's time and yields
/// the processor in a loop from there, ns: a sleep ends up to the timer
/// slack (50 us by default) plus a wake-up after its deadline, so sleeping
/// to the deadline itself would run every event that late.
const PACE_SPIN_NS: u64 = 100_000;

/// How late a paced network ([`VirtualNet::pace_with_wall_clock`]) ran its
/// events (polls and outside events): what a report shows as "the engine
/// kept up" or "was this late".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PaceLateness {
    /// Events run.
    pub events: u64,
    /// Those run more than [`PACE_LATE_NS`] after their time.
    pub late: u64,
    /// The most an event ran after its time, ns.
    pub max_ns: u64,
    /// How late events ran, summed, ns ([`PaceLateness::mean_ns`]).
    pub total_ns: u64,
}

/// One line for progress output: how far behind the wall clock the
/// events ran.
impl std::fmt::Display for PaceLateness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "events late by {:.0} us on average, at most {:.1} ms; {:.1} % over {} us",
            self.mean_ns() as f64 / 1e3,
            self.max_ns as f64 / 1e6,
            self.late_fraction() * 100.0,
            PACE_LATE_NS / 1000
        )
    }
}

impl PaceLateness {
    /// How late an event ran on average, ns (0 without events).
    pub fn mean_ns(&self) -> u64 {
        self.total_ns.checked_div(self.events).unwrap_or(0)
    }

    /// The share of events that ran late (0 without events).
    pub fn late_fraction(&self) -> f64 {
        if self.events == 0 {
            return 0.0;
        }
        self.late as f64 / self.events as f64
    }

    fn record(&mut self, late_ns: u64) {
        self.events += 1;
        self.late += u64::from(late_ns > PACE_LATE_NS);
        self.max_ns = self.max_ns.max(late_ns);
        self.total_ns = self.total_ns.saturating_add(late_ns);
    }
}

/// Wall-clock pacing of a [`VirtualNet`].
#[derive(Debug, Default)]
struct Pacing {
    /// The monotonic instant and the virtual time pinned to it, from the
    /// first event run after pacing began.
    origin: Option<(Instant, u64)>,
    lateness: PaceLateness,
}

impl Pacing {
    /// Waits until the monotonic clock reaches virtual time `t` (the clock
    /// reads `now`); returns the time to run at: the monotonic clock's,
    /// never below `t` nor `now`.
    fn wait(&mut self, t: u64, now: u64) -> u64 {
        let (origin, base) = *self.origin.get_or_insert_with(|| (Instant::now(), now));
        let at = wait_until(origin + Duration::from_nanos(t.saturating_sub(base)));
        // u128 ns since the origin: u64 holds 584 years of them.
        let wall = base.saturating_add(at.duration_since(origin).as_nanos() as u64);
        wall.max(t).max(now)
    }

    /// [`Pacing::wait`] for an event due at `t`, counted in the lateness.
    fn run_at(&mut self, t: u64, now: u64) -> u64 {
        let at = self.wait(t, now);
        self.lateness.record(at - t);
        at
    }
}

/// Waits until the monotonic clock (`Instant`: `CLOCK_MONOTONIC`) reaches
/// `deadline`: sleeps to [`PACE_SPIN_NS`] before it, then yields until it
/// (another process may need the processor more than this loop). Returns
/// the instant it found the deadline passed.
fn wait_until(deadline: Instant) -> Instant {
    let spin = Duration::from_nanos(PACE_SPIN_NS);
    loop {
        let now = Instant::now();
        let left = deadline.saturating_duration_since(now);
        if left.is_zero() {
            return now;
        }
        if left > spin {
            std::thread::sleep(left - spin);
        } else {
            std::thread::yield_now();
        }
    }
}

/// A frame a watched port ([`VirtualNet::watch`]) sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// When, ns of the virtual clock.
    pub at_ns: u64,
    /// The node.
    pub node: usize,
    /// Its port.
    pub port: usize,
    /// The frame.
    pub frame: Vec<u8>,
}

/// Work from outside the network at an instant.
type External = (usize, Box<dyn FnOnce(&mut dyn VirtualNode)>);

/// A memory link as one node sees it: its port, the peer, the peer's port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Join {
    port: usize,
    peer: usize,
    peer_port: usize,
}

struct Slot {
    node: Box<dyn VirtualNode>,
    ports: usize,
    /// When its live heap entry is due (`u64::MAX`: none).
    due: u64,
    /// That entry's sequence number (older entries for it are stale).
    due_seq: u64,
    /// Its deadline is due but its last poll made no progress: it waits
    /// for a peer.
    parked: bool,
    polls: u64,
    joins: Vec<Join>,
    watched: Vec<usize>,
}

/// The discrete-event driver: nodes, the memory links between them, and
/// the virtual clock they share. Add nodes ([`VirtualNet::add_node`]),
/// declare their links ([`VirtualNet::join`] or
/// [`VirtualNet::join_links`]), then run ([`VirtualNet::run_until`],
/// [`VirtualNet::run_while`], [`VirtualNet::step`]).
pub struct VirtualNet {
    clock: VirtualClock,
    now: u64,
    nodes: Vec<Slot>,
    /// (time, node, sequence) packed into one key ([`due_key`]), earliest
    /// first; entries a node no longer has ([`Slot::due_seq`]) are
    /// skipped.
    queue: BinaryHeap<Reverse<u128>>,
    seq: u64,
    /// Orders external events of one instant as given.
    ext_seq: u64,
    /// By (time, order given).
    external: BTreeMap<(u64, u64), External>,
    delivered: Vec<Delivery>,
    busy_poll_ns: u64,
    polls: u64,
    /// Wall-clock mode ([`VirtualNet::pace_with_wall_clock`]).
    pacing: Option<Pacing>,
}

impl std::fmt::Debug for VirtualNet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VirtualNet")
            .field("now_ns", &self.now)
            .field("nodes", &self.nodes.len())
            .field("polls", &self.polls)
            .field("paced", &self.pacing.is_some())
            .finish()
    }
}

/// Bits of a heap key's sequence number; the node index takes the next
/// [`NODE_BITS`], the time the top 64. One u128 compares in two
/// instructions where the tuple took a branch per field (the heap was a
/// tenth of a full-size run's time).
const SEQ_BITS: u32 = 40;
const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;
/// Bits of a heap key's node index: at most 2^24 nodes.
const NODE_BITS: u32 = 24;

/// The heap key of node `i` due at `t` with sequence `seq`: ordered by
/// time, then node, then sequence, as the tuple was (a sequence number
/// wraps after 2^40 schedules; only equality with the node's own is
/// asked of it).
fn due_key(t: u64, i: usize, seq: u64) -> u128 {
    (u128::from(t) << 64) | ((i as u128) << SEQ_BITS) | u128::from(seq & SEQ_MASK)
}

fn split_key(key: u128) -> (u64, usize, u64) {
    (
        (key >> 64) as u64,
        ((key >> SEQ_BITS) as u64 & ((1 << NODE_BITS) - 1)) as usize,
        key as u64 & SEQ_MASK,
    )
}

/// How long after a poll without progress a node that asked to be polled
/// on (`None`) is polled again, ns by default.
pub const BUSY_POLL_NS: u64 = 1_000;

impl VirtualNet {
    /// An empty network whose clock starts at `start_ns`.
    pub fn new(start_ns: u64) -> Self {
        VirtualNet {
            clock: VirtualClock::new(start_ns),
            now: start_ns,
            nodes: Vec::new(),
            queue: BinaryHeap::new(),
            seq: 0,
            ext_seq: 0,
            external: BTreeMap::new(),
            delivered: Vec::new(),
            busy_poll_ns: BUSY_POLL_NS,
            polls: 0,
            pacing: None,
        }
    }

    /// Runs on the wall clock from here on (see the module docs): the
    /// virtual time of the next event run (or [`VirtualNet::run_until`]) is
    /// pinned to the monotonic clock's instant then, and every event waits
    /// for its time on it. For a cross-check of the virtual engine against
    /// real time; turning it on twice changes nothing.
    pub fn pace_with_wall_clock(&mut self) {
        self.pacing.get_or_insert_with(Pacing::default);
    }

    /// Whether it runs on the wall clock.
    pub fn is_paced(&self) -> bool {
        self.pacing.is_some()
    }

    /// How late events ran on the wall clock so far; `None` unpaced.
    pub fn lateness(&self) -> Option<PaceLateness> {
        self.pacing.as_ref().map(|p| p.lateness)
    }

    /// The clock the nodes read (for [`VirtualNet::add_daemon`]).
    pub fn clock(&self) -> VirtualClock {
        self.clock.clone()
    }

    /// The time now, ns.
    pub fn now_ns(&self) -> u64 {
        self.now
    }

    /// Sets how long after a poll without progress a node asking to be
    /// polled on is polled again ([`BUSY_POLL_NS`] by default; at least 1).
    pub fn set_busy_poll_ns(&mut self, ns: u64) {
        self.busy_poll_ns = ns.max(1);
    }

    /// Adds `node` under a daemon on this network's clock; returns its
    /// index. It is first polled now.
    pub fn add_node<N: Node + 'static>(&mut self, node: N, cfg: DaemonConfig) -> usize
    where
        N::Io: VirtualIo,
    {
        let daemon = Daemon::new(node, self.clock(), cfg);
        self.add_daemon(daemon)
    }

    /// Adds a daemon built on [`VirtualNet::clock`] (with side work or an
    /// inbox attached); returns its index. It is first polled now.
    pub fn add_daemon<N: Node + 'static>(&mut self, mut daemon: Daemon<N, VirtualClock>) -> usize
    where
        N::Io: VirtualIo,
    {
        let ports = VirtualNode::ports(&mut daemon);
        let i = self.nodes.len();
        assert!(i < 1 << NODE_BITS, "at most 2^{NODE_BITS} nodes");
        self.nodes.push(Slot {
            node: Box::new(daemon),
            ports,
            due: u64::MAX,
            due_seq: 0,
            parked: false,
            polls: 0,
            joins: Vec::new(),
            watched: Vec::new(),
        });
        self.schedule(i, self.now);
        i
    }

    /// Nodes in the network.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether it has none.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The index of the node named `name`.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|s| s.node.name() == name)
    }

    /// Declares that port `a.1` of node `a.0` and port `b.1` of node `b.0`
    /// are the two ends of one memory link (the ends themselves are in the
    /// nodes' I/O already).
    pub fn join(&mut self, a: (usize, usize), b: (usize, usize)) -> Result<(), String> {
        for (n, p) in [a, b] {
            let slot = self.nodes.get(n).ok_or_else(|| format!("no node {n}"))?;
            if p >= slot.ports {
                return Err(format!(
                    "node {n} ({}) has {} ports, not port {p}",
                    slot.node.name(),
                    slot.ports
                ));
            }
        }
        if a == b {
            return Err(format!("node {} port {} joined to itself", a.0, a.1));
        }
        for (here, there) in [(a, b), (b, a)] {
            let joins = &mut self.nodes[here.0].joins;
            if joins.iter().any(|j| j.port == here.1) {
                return Err(format!("node {} port {} is joined already", here.0, here.1));
            }
            joins.push(Join {
                port: here.1,
                peer: there.0,
                peer_port: there.1,
            });
            joins.sort_unstable();
        }
        Ok(())
    }

    /// Declares every link of `links` ([`MemoryLinks::joins`]), its ends'
    /// switches found by daemon name.
    pub fn join_links(&mut self, links: &MemoryLinks) -> Result<(), String> {
        let names: HashMap<String, usize> = (0..self.nodes.len())
            .map(|i| (self.nodes[i].node.name().to_string(), i))
            .collect();
        let find = |name: &str| {
            names
                .get(name)
                .copied()
                .ok_or_else(|| format!("no node named {name:?} in the network"))
        };
        for ((a, p), (b, q)) in links.joins() {
            self.join((find(&a)?, usize::from(p)), (find(&b)?, usize::from(q)))?;
        }
        Ok(())
    }

    /// Records every frame node `node` sends on `port` (an in-memory port:
    /// out of the network) with the time it left ([`VirtualNet::take_delivered`]).
    pub fn watch(&mut self, node: usize, port: usize) {
        let w = &mut self.nodes[node].watched;
        if !w.contains(&port) {
            w.push(port);
        }
    }

    /// The frames watched ports sent so far, in the order sent.
    pub fn take_delivered(&mut self) -> Vec<Delivery> {
        std::mem::take(&mut self.delivered)
    }

    /// Runs `f` on node `node` at `t_ns` (now if `t_ns` has passed), before
    /// the polls of that instant, then polls the node at `t_ns`.
    pub fn at(&mut self, t_ns: u64, node: usize, f: impl FnOnce(&mut dyn VirtualNode) + 'static) {
        assert!(node < self.nodes.len(), "no node {node}");
        self.ext_seq += 1;
        self.external
            .insert((t_ns.max(self.now), self.ext_seq), (node, Box::new(f)));
    }

    /// Puts `frame` into in-memory port `port` of node `node` at `t_ns`
    /// ([`VirtualIo::inject`]; a frame the port cannot take is dropped).
    pub fn inject_at(&mut self, t_ns: u64, node: usize, port: usize, frame: Vec<u8>) {
        self.at(t_ns, node, move |n| {
            n.inject(port, &frame);
        });
    }

    /// Polls node `i` now (after it was changed from outside through
    /// [`VirtualNet::node`] or [`VirtualNet::daemon`]: a frame injected,
    /// a request answered).
    pub fn wake(&mut self, i: usize) {
        self.schedule(i, self.now);
    }

    /// The node `i`.
    pub fn node(&mut self, i: usize) -> &mut dyn VirtualNode {
        &mut *self.nodes[i].node
    }

    /// The daemon of node `i`, if its node is an `N`.
    pub fn daemon<N: Node + 'static>(&mut self, i: usize) -> Option<&mut Daemon<N, VirtualClock>> {
        self.nodes
            .get_mut(i)?
            .node
            .as_any_mut()
            .downcast_mut::<Daemon<N, VirtualClock>>()
    }

    /// Polls so far, all nodes.
    pub fn polls(&self) -> u64 {
        self.polls
    }

    /// Polls of node `i` so far.
    pub fn node_polls(&self, i: usize) -> u64 {
        self.nodes[i].polls
    }

    /// When the next event is (an external event or a poll), if any.
    pub fn next_event_ns(&mut self) -> Option<u64> {
        let ext = self.external.first_key_value().map(|(k, _)| k.0);
        let poll = self.next_poll().map(|(t, _)| t);
        match (ext, poll) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Runs the next event: an external event, or one poll of the node due
    /// earliest. Returns the time it ran at (paced: the wall clock's, at or
    /// after its due time); `None` when nothing is left to run.
    pub fn step(&mut self) -> Option<u64> {
        let ext = self.external.first_key_value().map(|(k, _)| k.0);
        let poll = self.next_poll();
        match (ext, poll) {
            (Some(te), p) if p.is_none_or(|(tp, _)| te <= tp) => {
                let (_, (i, f)) = self.external.pop_first()?;
                let t = self.pace(te);
                self.advance(t);
                f(&mut *self.nodes[i].node);
                self.schedule(i, t);
                Some(t)
            }
            (_, Some((t, i))) => {
                self.queue.pop();
                Some(self.poll(i, t))
            }
            _ => None,
        }
    }

    /// Runs every event due up to and including `t_ns`, then sets the clock
    /// to `t_ns` (if later). Paced, it returns once the monotonic clock has
    /// reached `t_ns` too (events due by then may have run after it).
    pub fn run_until(&mut self, t_ns: u64) {
        while self.next_event_ns().is_some_and(|t| t <= t_ns) {
            self.step();
        }
        if let Some(p) = &mut self.pacing {
            p.wait(t_ns, self.now);
        }
        if t_ns > self.now {
            self.advance(t_ns);
        }
    }

    /// Runs events while `cond` holds (asked before each) and some are
    /// left.
    pub fn run_while(&mut self, mut cond: impl FnMut(&mut Self) -> bool) {
        while cond(self) && self.step().is_some() {}
    }

    /// Shutdown of every node in order ([`Daemon::finish`]): their final
    /// status as JSON.
    pub fn finish(&mut self) -> Vec<serde_json::Result<Vec<u8>>> {
        self.nodes.iter_mut().map(|s| s.node.finish()).collect()
    }

    /// The time to run an event due at `t`: `t` itself unpaced (no clock
    /// read), else once the wall clock has reached it.
    #[inline]
    fn pace(&mut self, t: u64) -> u64 {
        match &mut self.pacing {
            None => t,
            Some(p) => p.run_at(t, self.now),
        }
    }

    fn advance(&mut self, t: u64) {
        debug_assert!(t >= self.now, "time runs forward");
        self.now = t;
        self.clock.set(t);
    }

    /// The earliest live heap entry (stale ones dropped).
    fn next_poll(&mut self) -> Option<(u64, usize)> {
        while let Some(&Reverse(key)) = self.queue.peek() {
            let (t, i, seq) = split_key(key);
            let s = &self.nodes[i];
            if s.due == t && s.due_seq == seq {
                return Some((t, i));
            }
            self.queue.pop();
        }
        None
    }

    /// Makes node `i` due at `t` unless it is due earlier already.
    fn schedule(&mut self, i: usize, t: u64) {
        let s = &mut self.nodes[i];
        s.parked = false;
        if t >= s.due {
            return;
        }
        self.seq = (self.seq + 1) & SEQ_MASK;
        s.due = t;
        s.due_seq = self.seq;
        self.queue.push(Reverse(due_key(t, i, self.seq)));
    }

    /// Polls node `i`, due at `due`; returns the time it ran at.
    fn poll(&mut self, i: usize, due: u64) -> u64 {
        // From here on the poll's instant is when it runs (paced and late:
        // after `due`), as for a daemon that polls late.
        let t = self.pace(due);
        self.advance(t);
        let s = &mut self.nodes[i];
        s.due = u64::MAX;
        let work = s.node.step();
        s.polls += 1;
        self.polls += 1;
        let wake = s.node.next_wake(t);
        for k in 0..s.watched.len() {
            let port = s.watched[k];
            for frame in s.node.take_sent(port) {
                self.delivered.push(Delivery {
                    at_ns: t,
                    node: i,
                    port,
                    frame,
                });
            }
        }
        // A poll without progress received nothing and handed nothing
        // over: only a productive one can leave input for anyone, so
        // polls at one instant end.
        let own_input = work > 0 && (0..s.ports).any(|p| s.node.rx_pending(p));
        for k in 0..self.nodes[i].joins.len() {
            let j = self.nodes[i].joins[k];
            let peer = &mut self.nodes[j.peer];
            // What it handed over is at the peer now; and a productive
            // poll may have lent a parked peer the buffers it waits for
            // (buffers come free only by receiving or sending). A poll
            // without progress wakes no one: two parked peers would
            // otherwise wake each other at one instant for ever.
            if work > 0 && (peer.parked || peer.node.rx_pending(j.peer_port)) {
                self.schedule(j.peer, t);
            }
        }
        match wake {
            _ if own_input => self.schedule(i, t),
            Some(w) if w > t => {
                if w != u64::MAX {
                    self.schedule(i, w);
                }
            }
            _ if work > 0 => self.schedule(i, t),
            None => self.schedule(i, t.saturating_add(self.busy_poll_ns)),
            Some(_) => self.nodes[i].parked = true,
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use lcmp_control::proto::{Body, ErrorKind, ErrorReply};
    use lcmp_control::Request;

    use super::*;
    use crate::node::Context;

    /// What a scripted node's poll does and what it then asks for.
    #[derive(Clone, Copy)]
    enum Script {
        /// Work while `left` lasts, then none; always due now.
        DueNow { left: usize },
        /// No work; "poll again now" (`None`).
        Busy,
        /// No work; wakes every `every` ns.
        Tick { every: u64 },
        /// One frame of work per poll; wakes every `every` ns.
        Working { every: u64 },
    }

    struct Scripted {
        io: MemIo,
        script: Script,
        last: u64,
        /// (time, name) of every poll, shared by the nodes of a test.
        log: Rc<RefCell<Vec<(u64, &'static str)>>>,
        name: &'static str,
    }

    impl Node for Scripted {
        type Io = MemIo;
        type Status = u64;

        fn poll(&mut self, clock: &mut impl Clock) -> usize {
            self.last = clock.now_ns();
            self.log.borrow_mut().push((self.last, self.name));
            match &mut self.script {
                Script::DueNow { left } if *left > 0 => {
                    *left -= 1;
                    1
                }
                Script::Working { .. } => 1,
                _ => 0,
            }
        }

        fn last_poll_ns(&self) -> u64 {
            self.last
        }

        fn next_wake(&self, now_ns: u64) -> Option<u64> {
            match self.script {
                Script::DueNow { .. } => Some(now_ns),
                Script::Busy => None,
                Script::Tick { every } | Script::Working { every } => Some(now_ns + every),
            }
        }

        fn handle(&mut self, _: Request, _: &Context<'_>) -> Body {
            Body::Error(ErrorReply::new(ErrorKind::Unsupported, "a test node"))
        }

        fn status(&mut self, _: &Context<'_>) -> u64 {
            self.last
        }

        fn io(&mut self) -> &mut MemIo {
            &mut self.io
        }

        fn finish(&mut self) {}
    }

    type Log = Rc<RefCell<Vec<(u64, &'static str)>>>;

    fn add(net: &mut VirtualNet, log: &Log, name: &'static str, script: Script) -> usize {
        let node = Scripted {
            io: MemIo::new(1, 4),
            script,
            last: 0,
            log: log.clone(),
            name,
        };
        net.add_node(node, DaemonConfig::quiet(name))
    }

    #[test]
    fn heap_keys_order_by_time_then_node_then_sequence() {
        // Worked by hand: time first (a later node number or sequence does
        // not overtake an earlier time), then the node, then the sequence.
        let keys = [
            due_key(5, 0, SEQ_MASK),
            due_key(5, 1, 0),
            due_key(5, 1, 2),
            due_key(6, 0, 0),
            due_key(u64::MAX, (1 << NODE_BITS) - 1, SEQ_MASK),
        ];
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(split_key(keys[2]), (5, 1, 2));
        assert_eq!(
            split_key(keys[4]),
            (u64::MAX, (1 << NODE_BITS) - 1, SEQ_MASK)
        );
    }
    #[test]
    fn a_node_due_now_is_polled_again_only_while_it_makes_progress() {
        let log = Log::default();
        let mut net = VirtualNet::new(0);
        add(&mut net, &log, "due", Script::DueNow { left: 3 });
        net.run_until(1_000_000_000);
        // Three productive polls at 0, one that finds nothing: parked, and
        // nothing it is joined to ever wakes it.
        assert_eq!(*log.borrow(), vec![(0, "due"); 4]);
        assert_eq!(net.next_event_ns(), None);
        assert_eq!(net.now_ns(), 1_000_000_000);
    }

    #[test]
    fn a_parked_node_is_polled_again_after_each_productive_poll_of_a_peer() {
        let log = Log::default();
        let mut net = VirtualNet::new(0);
        let stuck = add(&mut net, &log, "stuck", Script::DueNow { left: 0 });
        let tick = add(&mut net, &log, "tick", Script::Working { every: 1_000 });
        net.join((stuck, 0), (tick, 0)).unwrap();
        net.run_until(2_000);
        // At 0: "stuck" first (index order), parks; "tick" works and may
        // have lent it buffers: "stuck" again, parks. The same at 1 and 2
        // us.
        let want: Vec<(u64, &str)> = [0, 1_000, 2_000]
            .iter()
            .flat_map(|&t| {
                let first = (t == 0).then_some((t, "stuck"));
                first.into_iter().chain([(t, "tick"), (t, "stuck")])
            })
            .collect();
        assert_eq!(*log.borrow(), want);
    }

    #[test]
    fn a_peer_without_progress_wakes_no_parked_node() {
        let log = Log::default();
        let mut net = VirtualNet::new(0);
        let stuck = add(&mut net, &log, "stuck", Script::DueNow { left: 0 });
        let idle = add(&mut net, &log, "idle", Script::Tick { every: 1_000 });
        net.join((stuck, 0), (idle, 0)).unwrap();
        net.run_until(2_000);
        // "stuck" parks at 0; "idle" polls at 0, 1 and 2 us and frees
        // nothing, so "stuck" sleeps on.
        assert_eq!(
            *log.borrow(),
            vec![(0, "stuck"), (0, "idle"), (1_000, "idle"), (2_000, "idle")]
        );
    }

    #[test]
    fn two_parked_peers_do_not_wake_each_other_for_ever() {
        // Each waits on the other (a host whose pool ran dry and a switch
        // holding its frames): once both have parked, the instant ends.
        let log = Log::default();
        let mut net = VirtualNet::new(0);
        let a = add(&mut net, &log, "a", Script::DueNow { left: 2 });
        let b = add(&mut net, &log, "b", Script::DueNow { left: 0 });
        net.join((a, 0), (b, 0)).unwrap();
        net.run_until(1_000_000);
        // a: two productive polls, then one without progress, and it
        // parks; b (due at 0 too, after a by index) polls, makes none and
        // parks. Neither wakes the other again (before, each poll of a
        // parked node woke its parked peer: an endless instant).
        assert_eq!(*log.borrow(), vec![(0, "a"), (0, "a"), (0, "a"), (0, "b")]);
        assert_eq!(net.next_event_ns(), None);
    }

    #[test]
    fn a_busy_node_without_progress_is_polled_on_the_busy_poll_interval() {
        let log = Log::default();
        let mut net = VirtualNet::new(5);
        add(&mut net, &log, "busy", Script::Busy);
        net.set_busy_poll_ns(250);
        net.run_until(1_000);
        // 5, 255, 505, 755: then 1005 is past the end.
        let times: Vec<u64> = log.borrow().iter().map(|e| e.0).collect();
        assert_eq!(times, vec![5, 255, 505, 755]);
        assert_eq!(net.next_event_ns(), Some(1_005));
    }

    #[test]
    fn ties_go_by_node_index_and_outside_events_come_first() {
        let log = Log::default();
        let mut net = VirtualNet::new(0);
        // Both wake every 10 ns: at each instant node 0 before node 1.
        let b = add(&mut net, &log, "b", Script::Tick { every: 10 });
        let a = add(&mut net, &log, "a", Script::Tick { every: 10 });
        let l = log.clone();
        // At 10 an outside event on "a" runs before either polls; "a" is
        // polled once at 10 all the same (it was due then anyway).
        net.at(10, a, move |n| {
            assert_eq!(n.name(), "a");
            l.borrow_mut().push((10, "outside"));
        });
        net.run_until(10);
        assert_eq!(
            *log.borrow(),
            vec![(0, "b"), (0, "a"), (10, "outside"), (10, "b"), (10, "a")]
        );
        assert_eq!(net.daemon::<Scripted>(b).unwrap().node_ref().last, 10);
        assert!(net.daemon::<crate::lcmp_node::LcmpNode<MemIo>>(b).is_none());
    }

    const US: u64 = 1_000;
    const MS: u64 = 1_000_000;

    #[test]
    fn a_paced_clock_reads_no_earlier_than_an_events_time_and_never_goes_back() {
        let log = Log::default();
        let mut net = VirtualNet::new(0);
        assert_eq!(net.lateness(), None);
        let a = add(&mut net, &log, "a", Script::Tick { every: 300 * US });
        let b = add(&mut net, &log, "b", Script::Working { every: 500 * US });
        // Polled at 0, then only after the outside event at 1 ms.
        let c = add(
            &mut net,
            &log,
            "c",
            Script::Tick {
                every: 3_600_000 * MS,
            },
        );
        let clock = net.clock();
        let outside = Rc::new(RefCell::new(None));
        let seen = outside.clone();
        net.at(MS, c, move |_| *seen.borrow_mut() = Some(clock.get()));
        net.pace_with_wall_clock();
        // Until a and b polled four times and c after the outside event
        // (about 2 ms on time; however late, it ends).
        net.run_while(|n| n.node_polls(a) < 4 || n.node_polls(b) < 4 || n.node_polls(c) < 2);

        let log = log.borrow();
        // The clock never goes back, whoever reads it.
        assert!(log.windows(2).all(|w| w[0].0 <= w[1].0), "{log:?}");
        // Each of a's and b's polls after the first is due its period after
        // the previous one read the clock (they wake `every` after the time
        // they polled at), and ran no earlier.
        for (name, every) in [("a", 300 * US), ("b", 500 * US)] {
            let times: Vec<u64> = log.iter().filter(|e| e.1 == name).map(|e| e.0).collect();
            assert!(times.len() >= 4, "{name}: {times:?}");
            assert!(
                times.windows(2).all(|w| w[1] >= w[0] + every),
                "{name}: {times:?}"
            );
        }
        // The outside event and c's poll after it ran at 1 ms or later.
        let at = outside.borrow().expect("the outside event ran");
        assert!(at >= MS, "outside event at {at}");
        let c_times: Vec<u64> = log.iter().filter(|e| e.1 == "c").map(|e| e.0).collect();
        assert_eq!(c_times.len(), 2, "{c_times:?}");
        assert!(c_times[1] >= at);

        // Every poll and the outside event counted, each once.
        let late = net.lateness().unwrap();
        assert_eq!(late.events, net.polls() + 1);
        assert_eq!(late.events, log.len() as u64 + 1);
        assert!(late.late <= late.events);
        assert!(late.max_ns >= late.mean_ns());
    }

    #[test]
    fn paced_run_until_returns_once_the_wall_clock_has_reached_its_time() {
        let log = Log::default();
        // Virtual 5 us is pinned to the wall clock at the first run.
        let mut net = VirtualNet::new(5 * US);
        add(&mut net, &log, "tick", Script::Tick { every: MS });
        net.pace_with_wall_clock();
        let before = Instant::now();
        net.run_until(5 * US + 2 * MS);
        // The origin is at or after `before`: 2 ms of virtual time have
        // passed on the wall clock at least (a lower bound, not a timing).
        assert!(before.elapsed() >= Duration::from_millis(2));
        assert!(net.now_ns() >= 5 * US + 2 * MS);
        // The same origin on the next call: 4 ms since it.
        net.run_until(5 * US + 4 * MS);
        assert!(before.elapsed() >= Duration::from_millis(4));
        assert!(net.now_ns() >= 5 * US + 4 * MS);
        // Polled at 5 us, then due 1 ms after each poll: run by 4.005 ms at
        // most the polls at 5 us, 1.005, 2.005, 3.005 and 4.005 ms (late
        // ones push the next ones later, so fewer).
        let polls = log.borrow().len();
        assert!((1..=5).contains(&polls), "{polls} polls");

        // With nothing to run, the wall clock is waited for all the same.
        let mut empty = VirtualNet::new(0);
        empty.pace_with_wall_clock();
        let before = Instant::now();
        empty.run_until(MS);
        assert!(before.elapsed() >= Duration::from_millis(1));
        assert_eq!(empty.now_ns(), MS);
        assert_eq!(empty.lateness(), Some(PaceLateness::default()));
    }

    #[test]
    fn pace_lateness_counts_late_events_and_the_mean() {
        let mut l = PaceLateness::default();
        assert_eq!((l.mean_ns(), l.late_fraction()), (0, 0.0));
        // 100 us is on time (not more than PACE_LATE_NS), 100,001 ns late.
        for ns in [0, PACE_LATE_NS, PACE_LATE_NS + 1, 3 * MS] {
            l.record(ns);
        }
        // Sum 0 + 100,000 + 100,001 + 3,000,000 = 3,200,001; / 4 = 800,000.
        assert_eq!(
            l,
            PaceLateness {
                events: 4,
                late: 2,
                max_ns: 3 * MS,
                total_ns: 3_200_001,
            }
        );
        assert_eq!(l.mean_ns(), 800_000);
        assert_eq!(l.late_fraction(), 0.5);
    }
}

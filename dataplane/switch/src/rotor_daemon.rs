//! The loop of a rotor-network switch (a rotor or a rotor-aware ToR):
//! poll, answer control requests between polls (`rotor`, `set_epoch`),
//! write the stats file, and in event mode sleep until the next frame,
//! request, due frame or slot start.
//!
//! Time is `CLOCK_REALTIME`: the slot clock is shared by every switch of
//! the network (and across machines synchronised by PTP), so the slot is
//! derived from it and the epoch, never from counting wake-ups. A ToR
//! with frames queued wakes at each slot's end of reconfiguration and
//! records how late it was: the slot lateness `lcmp-ctl rotor` and the
//! metrics report. A rotor has no deadlines (it acts on arrivals) and
//! records none. Waking from sleep costs tens of microseconds on a virtual
//! machine; `spin_ns` has a ToR sleep only until that long before the
//! first frame of a slot is due and poll from there, so it leaves on time.
//!
//! Housekeeping (control requests, the stats file: a few netlink queries
//! and a file write, hundreds of microseconds on a busy machine) waits
//! for an instant at least twice its recent cost plus the spin before the
//! next slot opening, so it never delays one; it runs right after the
//! opening instead. Run in the loop regardless, it put one window in 200
//! hundreds of microseconds late.
//!
//! The stats file (`--stats-file`) holds [`RotorStatus`] as JSON.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use lcmp_control::proto::{Applied, Body, ErrorKind, ErrorReply, Reply};
use lcmp_control::rotor::{Lateness, NextHopQueue, RotorPort, RotorStatus};
use lcmp_control::server::Inbox;
use lcmp_control::Request;
use lcmp_topology::rotor_net::{RotorNetwork, RotorRole};
use tracing::{info, warn};

use crate::daemon::{Clock, PollMode};
use crate::io::PacketIo;
use crate::rotor::{RotorSwitch, SlotClock};
use crate::tor_path::TorSwitch;

/// `CLOCK_REALTIME`, ns.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealtimeClock;

impl Clock for RealtimeClock {
    #[inline]
    fn now_ns(&mut self) -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes one timespec to a valid pointer.
        unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }
}

/// A rotor or a ToR.
pub enum RotorNode<IO: PacketIo> {
    /// A rotor (circuit switch).
    Rotor(RotorSwitch<IO>),
    /// A rotor-aware ToR (boxed: far larger than a rotor).
    Tor(Box<TorSwitch<IO>>),
}

impl<IO: PacketIo> RotorNode<IO> {
    fn poll(&mut self, now: u64) -> usize {
        match self {
            RotorNode::Rotor(r) => r.poll(now),
            RotorNode::Tor(t) => t.poll(now),
        }
    }

    fn next_deadline(&self) -> u64 {
        match self {
            RotorNode::Rotor(_) => u64::MAX,
            RotorNode::Tor(t) => t.next_deadline(),
        }
    }

    /// Frames wait for a slot (a ToR with queued frames).
    fn waiting(&self) -> bool {
        match self {
            RotorNode::Rotor(_) => false,
            RotorNode::Tor(t) => t.core().total_bytes() > 0,
        }
    }

    /// Whether a deadline at `at_ns` would hand out the first frame of its
    /// slot.
    fn first_of_slot(&self, at_ns: u64) -> bool {
        match self {
            RotorNode::Rotor(_) => false,
            RotorNode::Tor(t) => !t.core().released_in_slot_of(at_ns),
        }
    }

    fn set_epoch(&mut self, epoch: u64) {
        match self {
            RotorNode::Rotor(r) => r.set_epoch(epoch),
            RotorNode::Tor(t) => t.set_epoch(epoch),
        }
    }

    fn io(&mut self) -> &mut IO {
        match self {
            RotorNode::Rotor(r) => r.io(),
            RotorNode::Tor(t) => t.io(),
        }
    }
}

/// Slot lateness samples kept for the percentiles.
const LATENESS_SAMPLES: usize = 1024;

/// The daemon's settings.
#[derive(Clone, Debug)]
pub struct RotorDaemonConfig {
    /// Switch name.
    pub name: String,
    /// The network.
    pub net: RotorNetwork,
    /// Which switch this is.
    pub role: RotorRole,
    /// Interface of each port.
    pub port_names: Vec<String>,
    /// Busy or event polling.
    pub poll: PollMode,
    /// Stats file (JSON [`RotorStatus`], atomically replaced).
    pub stats_file: Option<PathBuf>,
    /// How often it is written, ns.
    pub stats_interval_ns: u64,
    /// The epoch and where it came from, if known at start.
    pub epoch: Option<(u64, String)>,
    /// Poll instead of sleeping this long before a slot starts while frames
    /// wait for it, ns (0: always sleep).
    pub spin_ns: u64,
}

/// The loop around one rotor-network switch.
pub struct RotorDaemon<IO: PacketIo, C: Clock> {
    node: RotorNode<IO>,
    clock: C,
    cfg: RotorDaemonConfig,
    slot_clock: SlotClock,
    started_ns: u64,
    inbox: Option<Inbox>,
    last_slot: Option<u64>,
    /// When a poll last ended with frames waiting for a slot.
    waiting_at: Option<u64>,
    slots_seen: u64,
    lateness: Vec<u64>,
    last_lateness: u64,
    next_stats_ns: u64,
    stats_warned: bool,
    /// What housekeeping (a stats file, a control request) recently took,
    /// ns: it keeps twice that clear of a slot opening.
    housekeeping_ns: u64,
    /// Since when housekeeping waits for a quiet instant.
    deferred_since: Option<u64>,
}

/// Housekeeping runs regardless once it has waited this many slots (a loop
/// that always wakes late would otherwise never find a quiet instant).
const MAX_DEFERRED_SLOTS: u64 = 4;

impl<IO: PacketIo, C: Clock> RotorDaemon<IO, C> {
    /// A daemon around `node`; an epoch in `cfg` is applied at once.
    pub fn new(mut node: RotorNode<IO>, mut clock: C, cfg: RotorDaemonConfig) -> Self {
        if let Some((e, _)) = &cfg.epoch {
            node.set_epoch(*e);
        }
        let now = clock.now_ns();
        RotorDaemon {
            node,
            slot_clock: SlotClock {
                epoch_ns: cfg.epoch.as_ref().map_or(0, |e| e.0),
                slot_ns: cfg.net.slot_ns,
                reconfig_ns: cfg.net.reconfig_ns,
            },
            clock,
            cfg,
            started_ns: now,
            inbox: None,
            last_slot: None,
            waiting_at: None,
            slots_seen: 0,
            lateness: Vec::with_capacity(LATENESS_SAMPLES),
            last_lateness: 0,
            next_stats_ns: 0,
            stats_warned: false,
            housekeeping_ns: 0,
            deferred_since: None,
        }
    }

    /// Serves control requests from `inbox` between polls.
    pub fn attach_inbox(&mut self, inbox: Inbox) {
        self.node.io().add_wake_fd(inbox.wake_fd());
        self.inbox = Some(inbox);
    }

    /// The switch.
    pub fn node(&mut self) -> &mut RotorNode<IO> {
        &mut self.node
    }

    /// The epoch, if known.
    pub fn epoch(&self) -> Option<u64> {
        self.cfg.epoch.as_ref().map(|e| e.0)
    }

    fn set_epoch(&mut self, epoch: u64, source: &str) {
        self.node.set_epoch(epoch);
        self.slot_clock.epoch_ns = epoch;
        self.cfg.epoch = Some((epoch, source.to_string()));
        self.last_slot = None;
        info!(epoch_unix_ns = epoch, source, "rotor epoch set");
    }

    /// One iteration: poll, record the slot's lateness at its first poll
    /// after the reconfiguration, serve requests, write stats.
    pub fn step(&mut self) -> usize {
        let now = self.clock.now_ns();
        if self.cfg.epoch.is_some() {
            let pos = self.slot_clock.at(now);
            if !pos.reconfiguring && self.last_slot != Some(pos.slot) {
                let late = pos.offset_ns - self.slot_clock.reconfig_ns;
                // Only a slot whose start frames were waiting for says how
                // late the switch was.
                if self.waiting_at.is_some_and(|t| t < now - late) {
                    if self.lateness.len() == LATENESS_SAMPLES {
                        self.lateness[(self.slots_seen as usize) % LATENESS_SAMPLES] = late;
                    } else {
                        self.lateness.push(late);
                    }
                    self.slots_seen += 1;
                    self.last_lateness = late;
                }
                self.last_slot = Some(pos.slot);
            }
        }
        let work = self.node.poll(now);
        self.waiting_at = self.node.waiting().then_some(now);
        let requests = self.inbox.as_ref().is_some_and(Inbox::has_pending);
        let stats = self.cfg.stats_file.is_some() && now >= self.next_stats_ns;
        if !(requests || stats) {
            return work;
        }
        let since = *self.deferred_since.get_or_insert(now);
        let overdue = now.saturating_sub(since) >= MAX_DEFERRED_SLOTS * self.slot_clock.slot_ns;
        if !overdue && !self.quiet_at(now) {
            // Later, after the next slot opening; meanwhile a waiting
            // request must not keep waking the loop.
            if let Some(i) = &self.inbox {
                i.clear_wake();
            }
            return work;
        }
        self.deferred_since = None;
        let started = self.clock.now_ns();
        if requests {
            while let Some(pending) = self.inbox.as_ref().and_then(Inbox::take) {
                let body = self.handle(pending.request.clone());
                if let Some(i) = &self.inbox {
                    i.count(matches!(body, Body::Error(_)));
                }
                pending.answer(body);
            }
        }
        if stats {
            self.write_stats();
            self.next_stats_ns = now + self.cfg.stats_interval_ns;
        }
        // The largest recent cost, decaying by 1/8 per round.
        let took = self.clock.now_ns().saturating_sub(started);
        self.housekeeping_ns = took.max(self.housekeeping_ns - self.housekeeping_ns / 8);
        work
    }

    /// Margin housekeeping keeps before a slot opening: the spin before it
    /// plus twice what housekeeping recently took, at most half a slot (so
    /// that a loop waking late after an opening still finds room).
    fn housekeeping_margin(&self) -> u64 {
        (self.cfg.spin_ns + 2 * self.housekeeping_ns).min(self.slot_clock.slot_ns / 2)
    }

    /// Whether housekeeping may run at `now` without delaying a slot
    /// opening (always, without an epoch).
    fn quiet_at(&self, now: u64) -> bool {
        self.cfg.epoch.is_none()
            || self.slot_clock.quiet_from(now, self.housekeeping_margin()) == now
    }

    /// When waiting housekeeping may run, if any waits.
    fn housekeeping_due(&self, now: u64) -> Option<u64> {
        let requests = self.inbox.as_ref().is_some_and(Inbox::has_pending);
        let due = if requests {
            now
        } else if self.cfg.stats_file.is_some() {
            self.next_stats_ns.max(now)
        } else {
            return None;
        };
        if self.cfg.epoch.is_none() {
            return Some(due);
        }
        let quiet = self.slot_clock.quiet_from(due, self.housekeeping_margin());
        let overdue = self.deferred_since.map_or(u64::MAX, |t| {
            t.saturating_add(MAX_DEFERRED_SLOTS * self.slot_clock.slot_ns)
        });
        Some(quiet.min(overdue))
    }

    /// When to wake next: a due frame (`spin_ns` early when it is the
    /// first of its slot: a ToR's slot opening), housekeeping. `None`:
    /// poll on without sleeping.
    fn next_wake(&self, now: u64) -> Option<u64> {
        let mut t = self.node.next_deadline();
        if self.cfg.spin_ns > 0 && t != u64::MAX && self.node.first_of_slot(t) {
            if t <= now + self.cfg.spin_ns {
                return None;
            }
            t -= self.cfg.spin_ns;
        }
        if let Some(h) = self.housekeeping_due(now) {
            t = t.min(h);
        }
        Some(t)
    }

    /// Runs until `stop` is set.
    pub fn run(&mut self, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            let work = self.step();
            if self.cfg.poll == PollMode::Event && work == 0 {
                let now = self.clock.now_ns();
                if let Some(deadline) = self.next_wake(now) {
                    if deadline > now {
                        self.node.io().wait(Some(deadline - now));
                    }
                }
            }
        }
    }

    /// Answers one request.
    pub fn handle(&mut self, request: Request) -> Body {
        match request {
            Request::Rotor => Body::Ok(Box::new(Reply::Rotor(Box::new(self.status())))),
            Request::SetEpoch { epoch_unix_ns } => {
                let changed = self.epoch() != Some(epoch_unix_ns);
                if changed {
                    self.set_epoch(epoch_unix_ns, "agent");
                }
                Body::Ok(Box::new(Reply::Applied(Applied {
                    message: format!("epoch {epoch_unix_ns}"),
                    changed,
                    flows_to_move: 0,
                })))
            }
            other => Body::Error(ErrorReply::new(
                ErrorKind::Unsupported,
                format!(
                    "{} is a switch of a rotor network: it answers `rotor` and `set_epoch`, not `{}`",
                    self.cfg.name,
                    other.verb()
                ),
            )),
        }
    }

    fn lateness(&self) -> Lateness {
        let mut v = self.lateness.clone();
        v.sort_unstable();
        let q = |p: f64| -> u64 {
            if v.is_empty() {
                0
            } else {
                v[((v.len() - 1) as f64 * p).round() as usize]
            }
        };
        Lateness {
            samples: self.slots_seen,
            p50_ns: q(0.5),
            p99_ns: q(0.99),
            max_ns: v.last().copied().unwrap_or(0),
            last_ns: self.last_lateness,
        }
    }

    /// The switch's state now.
    pub fn status(&mut self) -> RotorStatus {
        let now = self.clock.now_ns();
        let net = &self.cfg.net;
        let pos = self.slot_clock.at(now);
        let epoch = self.cfg.epoch.clone();
        let mut s = RotorStatus {
            name: self.cfg.name.clone(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            pid: std::process::id(),
            uptime_ns: now.saturating_sub(self.started_ns),
            unix_time_ms: now / 1_000_000,
            graph: net.kind.clone(),
            routing: net.routing().name().to_string(),
            tors: net.tors,
            rotors: net.rotors,
            slot_ns: net.slot_ns,
            reconfig_ns: net.reconfig_ns,
            epoch_unix_ns: epoch.as_ref().map(|e| e.0),
            epoch_source: epoch.map(|e| e.1),
            slot: if self.cfg.epoch.is_some() {
                pos.slot
            } else {
                0
            },
            slots_seen: self.slots_seen,
            lateness: self.lateness(),
            ..Default::default()
        };
        let names = self.cfg.port_names.clone();
        match &mut self.node {
            RotorNode::Rotor(r) => {
                let RotorRole::Rotor(i) = self.cfg.role else {
                    unreachable!("a rotor node has a rotor role")
                };
                s.role = "rotor".into();
                s.index = i;
                s.schedule = vec![r.matchings().to_vec()];
                s.circuits = (0..names.len())
                    .map(|p| r.circuit(p, now).map(|t| t as u32))
                    .collect();
                let c = r.counters();
                for (k, v) in [
                    ("no_epoch", c.dropped_no_epoch),
                    ("reconfiguring", c.dropped_reconfiguring),
                    ("no_circuit", c.dropped_no_circuit),
                    ("tx_ring_full", c.dropped_tx_full),
                ] {
                    s.drops.insert(k.into(), v);
                }
                s.counters = BTreeMap::from([
                    ("rx_frames".to_string(), c.rx_frames),
                    ("tx_frames".to_string(), c.tx_frames),
                ]);
                let traffic = r.traffic().to_vec();
                s.ports = ports(&names, &traffic, "tor", |p| r.io().link_up(p));
            }
            RotorNode::Tor(t) => {
                let RotorRole::Tor(i) = self.cfg.role else {
                    unreachable!("a ToR node has a ToR role")
                };
                s.role = "tor".into();
                s.index = i;
                s.schedule = (0..net.rotors).map(|r| net.rotor_matchings(r)).collect();
                let core = t.core();
                let reconfiguring = pos.reconfiguring && net.per_rotor > 1;
                s.circuits = (0..t.uplinks())
                    .map(|r| {
                        (self.cfg.epoch.is_some() && !reconfiguring)
                            .then(|| core.circuit(r, pos.slot))
                            .flatten()
                    })
                    .collect();
                s.queues = (0..net.tors)
                    .filter(|&h| h != i)
                    .map(|h| NextHopQueue {
                        next_hop: h,
                        frames: core.queue_frames(h) as u64,
                        bytes: core.queue_bytes(h),
                    })
                    .collect();
                s.buffer_bytes = net.buffer();
                s.queued_bytes = core.total_bytes();
                for (why, n) in t.drops() {
                    s.drops.insert(why.name().into(), n);
                }
                let cc = core.counters();
                let pc = t.counters();
                s.counters = BTreeMap::from([
                    ("queued".to_string(), cc.queued),
                    ("sent_uplink".to_string(), cc.sent),
                    ("deferred_slot_end".to_string(), cc.deferred_slot_end),
                    ("late_frames".to_string(), cc.late_frames),
                    ("late_ns".to_string(), cc.late_ns),
                    ("delivered".to_string(), pc.delivered),
                    ("valiant_detours".to_string(), pc.valiant_detours),
                    ("transit".to_string(), pc.transit),
                ]);
                let traffic = t.traffic().to_vec();
                let uplinks = t.uplinks();
                let mut p = ports(&names, &traffic, "host", |p| t.link_up(p));
                for port in p.iter_mut().take(uplinks) {
                    port.kind = "uplink".into();
                }
                s.ports = p;
            }
        }
        s
    }

    fn write_stats(&mut self) {
        let Some(path) = self.cfg.stats_file.clone() else {
            return;
        };
        let status = self.status();
        let tmp = path.with_extension("tmp");
        let json = serde_json::to_vec(&status).expect("rotor status serializes");
        match std::fs::write(&tmp, json).and_then(|_| std::fs::rename(&tmp, &path)) {
            Err(e) if !self.stats_warned => {
                warn!("cannot write stats file {}: {e}", path.display());
                self.stats_warned = true;
            }
            Err(_) => {}
            Ok(()) => self.stats_warned = false,
        }
    }

    /// Shutdown: held frames back to the pool (counted), the stats file a
    /// last time, and the final state.
    pub fn finish(&mut self) -> RotorStatus {
        if let RotorNode::Tor(t) = &mut self.node {
            t.drain();
        }
        self.write_stats();
        self.status()
    }
}

fn ports(
    names: &[String],
    traffic: &[crate::tor_path::PortTraffic],
    kind: &str,
    mut link_up: impl FnMut(usize) -> bool,
) -> Vec<RotorPort> {
    names
        .iter()
        .zip(traffic)
        .enumerate()
        .map(|(i, (name, t))| RotorPort {
            name: name.clone(),
            kind: kind.to_string(),
            rx_frames: t.rx_frames,
            rx_bytes: t.rx_bytes,
            tx_frames: t.tx_frames,
            tx_bytes: t.tx_bytes,
            link_up: link_up(i),
        })
        .collect()
}

//! The switches of a rotor network as [`Node`]s of the daemon: a rotor
//! ([`RotorNode`]) and a rotor-aware ToR ([`TorNode`]). Both answer
//! `rotor` and `set_epoch`, report [`RotorStatus`] (the stats file's JSON)
//! and keep housekeeping clear of slot openings.
//!
//! Time is `CLOCK_REALTIME` ([`crate::node::RealtimeClock`]): the slot
//! clock is shared by every switch of the network (and across machines
//! synchronised by PTP), so the slot is derived from it and the epoch,
//! never from counting wake-ups. A ToR with frames queued wakes at each
//! slot's end of reconfiguration and records how late it was: the slot
//! lateness `lcmp-ctl rotor` and the metrics report. A rotor has no
//! deadlines (it acts on arrivals) and records none. Waking from sleep
//! costs tens of microseconds on a virtual machine; `spin_ns` has a ToR
//! sleep only until that long before the first frame of a slot is due and
//! poll from there, so it leaves on time.
//!
//! Housekeeping (control requests, the stats file) waits for an instant at
//! least twice its recent cost plus the spin before the next slot opening
//! ([`Node::housekeeping_at`]), at most [`MAX_DEFERRED_SLOTS`] slots.

use std::collections::BTreeMap;

use lcmp_control::proto::{Applied, Body, ErrorKind, ErrorReply, Reply};
use lcmp_control::rotor::{Lateness, NextHopQueue, RotorPort, RotorStatus};
use lcmp_control::Request;
use lcmp_topology::rotor_net::RotorNetwork;
use tracing::info;

use crate::io::PacketIo;
pub use crate::node::RealtimeClock;
use crate::node::{Clock, Context, Node};
use crate::rotor::RotorSwitch;
use crate::slot::{PortTraffic, SlotClock};
use crate::tor_path::TorSwitch;

/// Slot lateness samples kept for the percentiles.
const LATENESS_SAMPLES: usize = 1024;

/// Housekeeping runs regardless once it has waited this many slots (a loop
/// that always wakes late would otherwise never find a quiet instant).
pub const MAX_DEFERRED_SLOTS: u64 = 4;

/// Settings of a rotor network's switch beyond the network.
#[derive(Clone, Debug, Default)]
pub struct RotorNodeConfig {
    /// Interface of each port.
    pub port_names: Vec<String>,
    /// The epoch and where it came from, if known at start.
    pub epoch: Option<(u64, String)>,
    /// Poll instead of sleeping this long before a slot starts while frames
    /// wait for it, ns (0: always sleep). ToRs only: a rotor has no
    /// deadlines.
    pub spin_ns: u64,
}

/// What a rotor and a ToR keep alike: the schedule's clock, the epoch,
/// and the slot lateness.
struct Slots {
    net: RotorNetwork,
    cfg: RotorNodeConfig,
    clock: SlotClock,
    last_poll_ns: u64,
    last_slot: Option<u64>,
    /// When a poll last ended with frames waiting for a slot.
    waiting_at: Option<u64>,
    slots_seen: u64,
    lateness: Vec<u64>,
    last_lateness: u64,
}

impl Slots {
    fn new(net: RotorNetwork, cfg: RotorNodeConfig) -> Self {
        Slots {
            clock: SlotClock {
                epoch_ns: cfg.epoch.as_ref().map_or(0, |e| e.0),
                slot_ns: net.slot_ns,
                reconfig_ns: net.reconfig_ns,
            },
            net,
            cfg,
            last_poll_ns: 0,
            last_slot: None,
            waiting_at: None,
            slots_seen: 0,
            lateness: Vec::with_capacity(LATENESS_SAMPLES),
            last_lateness: 0,
        }
    }

    fn epoch(&self) -> Option<u64> {
        self.cfg.epoch.as_ref().map(|e| e.0)
    }

    /// Before a poll at `now`: at the first poll of a slot after its
    /// reconfiguration, how late it is, if frames were waiting for it.
    fn before_poll(&mut self, now: u64) {
        self.last_poll_ns = now;
        if self.cfg.epoch.is_none() {
            return;
        }
        let pos = self.clock.at(now);
        if pos.reconfiguring || self.last_slot == Some(pos.slot) {
            return;
        }
        let late = pos.offset_ns - self.clock.reconfig_ns;
        // Only a slot whose start frames were waiting for says how late the
        // switch was.
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

    /// Records the epoch; true if it changed.
    fn set_epoch(&mut self, epoch: u64, source: &str) -> bool {
        if self.epoch() == Some(epoch) {
            return false;
        }
        self.clock.epoch_ns = epoch;
        self.cfg.epoch = Some((epoch, source.to_string()));
        self.last_slot = None;
        info!(epoch_unix_ns = epoch, source, "rotor epoch set");
        true
    }

    /// Margin housekeeping keeps before a slot opening: the spin before it
    /// plus twice what housekeeping recently took, at most half a slot (so
    /// that a loop waking late after an opening still finds room).
    fn housekeeping_at(&self, t: u64, cost_ns: u64) -> u64 {
        if self.cfg.epoch.is_none() {
            return t;
        }
        let margin = (self.cfg.spin_ns + 2 * cost_ns).min(self.clock.slot_ns / 2);
        self.clock.quiet_from(t, margin)
    }

    /// The answers both kinds give: `rotor` is left to the switch (its
    /// status), `set_epoch` is recorded here (the switch applies a changed
    /// epoch), anything else is refused by name.
    fn answer(&mut self, request: Request, name: &str) -> Answer {
        match request {
            Request::Rotor => Answer::Status,
            Request::SetEpoch { epoch_unix_ns } => {
                let changed = self.set_epoch(epoch_unix_ns, "agent");
                Answer::Reply {
                    body: Body::Ok(Box::new(Reply::Applied(Applied {
                        message: format!("epoch {epoch_unix_ns}"),
                        changed,
                        flows_to_move: 0,
                    }))),
                    new_epoch: changed.then_some(epoch_unix_ns),
                }
            }
            other => Answer::Reply {
                body: Body::Error(ErrorReply::new(
                    ErrorKind::Unsupported,
                    format!(
                        "{name} is a switch of a rotor network: it answers `rotor` and `set_epoch`, not `{}`",
                        other.verb()
                    ),
                )),
                new_epoch: None,
            },
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

    /// The status fields both kinds share, at `ctx.now_ns`.
    fn status(&self, ctx: &Context<'_>, role: &str, index: u32) -> RotorStatus {
        let now = ctx.now_ns;
        let net = &self.net;
        let epoch = self.cfg.epoch.clone();
        RotorStatus {
            name: ctx.name.to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            pid: std::process::id(),
            uptime_ns: now.saturating_sub(ctx.started_ns),
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
                self.clock.at(now).slot
            } else {
                0
            },
            slots_seen: self.slots_seen,
            lateness: self.lateness(),
            role: role.to_string(),
            index,
            ..Default::default()
        }
    }
}

/// What [`Slots::answer`] leaves to the switch.
enum Answer {
    /// Its status.
    Status,
    /// This reply, after applying the epoch if it changed.
    Reply { body: Body, new_epoch: Option<u64> },
}

fn status_body(s: RotorStatus) -> Body {
    Body::Ok(Box::new(Reply::Rotor(Box::new(s))))
}

/// A rotor (circuit switch) of a rotor network.
pub struct RotorNode<IO: PacketIo> {
    sw: RotorSwitch<IO>,
    index: u32,
    slots: Slots,
}

impl<IO: PacketIo> RotorNode<IO> {
    /// Rotor `index` of `net` over `io` (a port per ToR), cycling through
    /// its matchings of the network; an epoch in `cfg` applies at once.
    pub fn new(
        io: IO,
        net: &RotorNetwork,
        index: u32,
        cfg: RotorNodeConfig,
    ) -> Result<Self, String> {
        if index >= net.rotors {
            return Err(format!(
                "rotor{index}: the network has rotor0..rotor{}",
                net.rotors - 1
            ));
        }
        let slots = Slots::new(net.clone(), cfg);
        let sw = RotorSwitch::with_epoch(
            io,
            net.rotor_matchings(index),
            slots.clock,
            slots.cfg.epoch.is_some(),
        )?;
        Ok(RotorNode { sw, index, slots })
    }

    /// The rotor switch.
    pub fn switch(&mut self) -> &mut RotorSwitch<IO> {
        &mut self.sw
    }

    /// The epoch, if known.
    pub fn epoch(&self) -> Option<u64> {
        self.slots.epoch()
    }

    fn rotor_status(&mut self, ctx: &Context<'_>) -> RotorStatus {
        let now = ctx.now_ns;
        let mut s = self.slots.status(ctx, "rotor", self.index);
        let r = &mut self.sw;
        let names = &self.slots.cfg.port_names;
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
        s.ports = ports(names, &traffic, "tor", |p| r.io().link_up(p));
        s
    }
}

impl<IO: PacketIo> Node for RotorNode<IO> {
    type Io = IO;
    type Status = RotorStatus;

    fn poll(&mut self, clock: &mut impl Clock) -> usize {
        let now = clock.now_ns();
        self.slots.before_poll(now);
        // A rotor never holds frames: it never waits for a slot.
        self.sw.poll(now)
    }

    fn last_poll_ns(&self) -> u64 {
        self.slots.last_poll_ns
    }

    fn next_wake(&self, _now_ns: u64) -> Option<u64> {
        // It acts on arrivals only.
        Some(u64::MAX)
    }

    fn handle(&mut self, request: Request, ctx: &Context<'_>) -> Body {
        match self.slots.answer(request, ctx.name) {
            Answer::Status => status_body(self.rotor_status(ctx)),
            Answer::Reply { body, new_epoch } => {
                if let Some(e) = new_epoch {
                    self.sw.set_epoch(e);
                }
                body
            }
        }
    }

    fn status(&mut self, ctx: &Context<'_>) -> RotorStatus {
        self.rotor_status(ctx)
    }

    fn io(&mut self) -> &mut IO {
        self.sw.io()
    }

    fn housekeeping_at(&self, t: u64, cost_ns: u64) -> u64 {
        self.slots.housekeeping_at(t, cost_ns)
    }

    fn max_housekeeping_delay_ns(&self) -> u64 {
        MAX_DEFERRED_SLOTS * self.slots.clock.slot_ns
    }

    fn finish(&mut self) {
        // Bufferless: nothing held but what its I/O holds (memory links).
        self.sw.io().shutdown();
    }
}
fn ports(
    names: &[String],
    traffic: &[PortTraffic],
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

/// A rotor-aware ToR of a rotor network.
pub struct TorNode<IO: PacketIo> {
    sw: TorSwitch<IO>,
    slots: Slots,
}

impl<IO: PacketIo> TorNode<IO> {
    /// The node of ToR `sw` (its index and network are the switch's); an
    /// epoch in `cfg` applies at once.
    pub fn new(mut sw: TorSwitch<IO>, cfg: RotorNodeConfig) -> Self {
        if let Some((e, _)) = &cfg.epoch {
            sw.set_epoch(*e);
        }
        let slots = Slots::new(sw.net().clone(), cfg);
        TorNode { sw, slots }
    }

    /// The ToR switch.
    pub fn switch(&mut self) -> &mut TorSwitch<IO> {
        &mut self.sw
    }

    /// The epoch, if known.
    pub fn epoch(&self) -> Option<u64> {
        self.slots.epoch()
    }

    fn tor_status(&mut self, ctx: &Context<'_>) -> RotorStatus {
        let i = self.sw.tor();
        let mut s = self.slots.status(ctx, "tor", i);
        let net = &self.slots.net;
        let t = &mut self.sw;
        let pos = self.slots.clock.at(ctx.now_ns);
        let epoch = self.slots.cfg.epoch.is_some();
        s.schedule = (0..net.rotors).map(|r| net.rotor_matchings(r)).collect();
        let core = t.core();
        let reconfiguring = pos.reconfiguring && net.per_rotor > 1;
        s.circuits = (0..t.uplinks())
            .map(|r| {
                (epoch && !reconfiguring)
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
        s.queued_bytes = t.queued_bytes();
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
        // With NDP trimming on: trimmed headers, the high-priority queues'
        // traffic and the host downlinks'.
        s.counters.extend(
            t.trim_counters()
                .into_iter()
                .map(|(k, v)| (k.to_string(), v)),
        );
        let traffic = t.traffic().to_vec();
        let uplinks = t.uplinks();
        let mut p = ports(&self.slots.cfg.port_names, &traffic, "host", |p| {
            t.link_up(p)
        });
        for port in p.iter_mut().take(uplinks) {
            port.kind = "uplink".into();
        }
        s.ports = p;
        s
    }
}

impl<IO: PacketIo> Node for TorNode<IO> {
    type Io = IO;
    type Status = RotorStatus;

    fn poll(&mut self, clock: &mut impl Clock) -> usize {
        let now = clock.now_ns();
        self.slots.before_poll(now);
        let work = self.sw.poll(now);
        self.slots.waiting_at = (self.sw.core().total_bytes() > 0).then_some(now);
        work
    }

    fn last_poll_ns(&self) -> u64 {
        self.slots.last_poll_ns
    }

    /// The next due frame, `spin_ns` early when it is the first of its
    /// slot (a slot opening); `None` inside that spin.
    fn next_wake(&self, now_ns: u64) -> Option<u64> {
        let mut t = self.sw.next_deadline();
        let spin = self.slots.cfg.spin_ns;
        if spin > 0 && t != u64::MAX && !self.sw.core().released_in_slot_of(t) {
            if t <= now_ns + spin {
                return None;
            }
            t -= spin;
        }
        Some(t)
    }

    fn handle(&mut self, request: Request, ctx: &Context<'_>) -> Body {
        match self.slots.answer(request, ctx.name) {
            Answer::Status => status_body(self.tor_status(ctx)),
            Answer::Reply { body, new_epoch } => {
                if let Some(e) = new_epoch {
                    self.sw.set_epoch(e);
                }
                body
            }
        }
    }

    fn status(&mut self, ctx: &Context<'_>) -> RotorStatus {
        self.tor_status(ctx)
    }

    fn io(&mut self) -> &mut IO {
        self.sw.io()
    }

    fn housekeeping_at(&self, t: u64, cost_ns: u64) -> u64 {
        self.slots.housekeeping_at(t, cost_ns)
    }

    fn max_housekeeping_delay_ns(&self) -> u64 {
        MAX_DEFERRED_SLOTS * self.slots.clock.slot_ns
    }

    fn finish(&mut self) {
        self.sw.drain();
    }
}

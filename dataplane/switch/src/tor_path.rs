//! The packet path of a rotor-aware ToR: frames from its hosts and from
//! its uplinks are routed by destination address to a host port (local
//! delivery) or queued in [`RotorTor`] towards a target ToR, and the
//! queues' frames go out on the uplinks as their circuits allow.
//!
//! Valiant two-phase routing needs to know, at every ToR a frame crosses,
//! whether it is still heading to its intermediate. The frame says so
//! itself: on a circuit the destination MAC has no other use (a rotor
//! reads nothing, and the next ToR's XDP program takes every frame), so it
//! carries the target ToR as `02:52:4f:54:00:TT`. The ToR that is the
//! target of a frame whose address is not its own re-targets it at the
//! destination's ToR (phase two). IPv4 TTL is decremented at every ToR, as
//! by any router.
//!
//! Towards its target each frame takes one next hop
//! ([`RotorTor::route`]): with shift routing, of the target's equal-cost
//! next hops a uniformly random one, so a flow's packets are sprayed over
//! every shortest path. That choice and the Valiant intermediate come from
//! the ToR's one xorshift64 state, seeded by [`TorConfig::seed`]: the
//! same seed makes the same choices, and a target with one next hop draws
//! nothing.
//!
//! The source MAC of a circuit frame, equally unused, carries the instant
//! the ToR handed it to the uplink ([`send_stamp`]): AF_XDP gives a rotor
//! no arrival timestamps, and a rotor polled late would otherwise judge a
//! frame that entered it before the reconfiguration as arriving during it.
//!
//! NDP trimming ([`TorSwitch::set_trimming`], off by default) is decided
//! here, where the bytes are: an NDP data packet
//! ([`lcmp_wire::ndp::header_of`]) goes to its queue pair's data queue,
//! and if that refuses it (K frames queued, or the shared buffer full) it
//! is cut to its headers ([`lcmp_wire::ndp::trim`], the frame's length
//! shrinks) and goes to the high-priority queue; NDP control packets and
//! headers trimmed upstream go to the high-priority queue; anything else
//! to the data queue, dropped past K. The queues ([`RotorTor`],
//! [`Downlink`]) see only the class and the length. With trimming on,
//! frames for this ToR's own hosts wait in an emulated downlink per host
//! port, serialized at the host link's rate: the network's `rate_bps`
//! (the file has one rate; [`RotorNetwork::wiring`] gives the host links
//! that rate too). Off, they go to the host port at once, as before, and
//! the drop reasons trimming adds stay out of [`TorSwitch::drops`], so the
//! stats are as before byte for byte.

use lcmp_topology::rotor_net::{RotorNetwork, RotorRouting};
use lcmp_wire::ndp::{self, Kind};
use lcmp_wire::{forward_rewrite, parse, MacAddr, ParseError, L3};

use crate::io::{Frame, PacketIo};
use crate::rotor_tor::{Downlink, FrameClass, RotorTor, TorDrop, TorSettings, TrimSettings};

pub use crate::slot::PortTraffic;

pub use lcmp_wire::rotor::{send_stamp, sent_at, target_mac, target_of, TARGET_MAC_PREFIX};

/// Why a ToR dropped a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TorDropReason {
    /// No epoch yet: no slot is known, so nothing may enter a circuit.
    NoEpoch,
    /// Not IPv4, or not a frame the switch forwards (malformed,
    /// fragment, options).
    NotForwardable,
    /// TTL would expire.
    TtlExpired,
    /// The destination is no host of this rotor network.
    UnknownDestination,
    /// The target was this ToR but the host is not (a misrouted frame).
    Misrouted,
    /// The buffer was full.
    QueueFull,
    /// No next hop towards the target.
    NoRoute,
    /// Trimming: a frame that is not NDP data found its next hop's data
    /// queue holding K frames.
    DataQueueFull,
    /// Trimming: a next hop's high-priority queue was full.
    PriorityQueueFull,
    /// Trimming: a frame that is not NDP data found its host downlink's
    /// data queue holding K frames.
    DownlinkDataQueueFull,
    /// Trimming: a host downlink's high-priority queue was full.
    DownlinkPriorityQueueFull,
    /// A host's MAC is not known yet.
    NoPeerMac,
    /// The transmit ring was full.
    TxRingFull,
    /// Held at shutdown.
    Shutdown,
}

impl TorDropReason {
    /// Every reason, in report order.
    pub const ALL: [TorDropReason; 14] = [
        TorDropReason::NoEpoch,
        TorDropReason::NotForwardable,
        TorDropReason::TtlExpired,
        TorDropReason::UnknownDestination,
        TorDropReason::Misrouted,
        TorDropReason::QueueFull,
        TorDropReason::NoRoute,
        TorDropReason::DataQueueFull,
        TorDropReason::PriorityQueueFull,
        TorDropReason::DownlinkDataQueueFull,
        TorDropReason::DownlinkPriorityQueueFull,
        TorDropReason::NoPeerMac,
        TorDropReason::TxRingFull,
        TorDropReason::Shutdown,
    ];

    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            TorDropReason::NoEpoch => "no_epoch",
            TorDropReason::NotForwardable => "not_forwardable",
            TorDropReason::TtlExpired => "ttl_expired",
            TorDropReason::UnknownDestination => "unknown_destination",
            TorDropReason::Misrouted => "misrouted",
            TorDropReason::QueueFull => "queue_full",
            TorDropReason::NoRoute => "no_route",
            TorDropReason::DataQueueFull => "data_queue_full",
            TorDropReason::PriorityQueueFull => "priority_queue_full",
            TorDropReason::DownlinkDataQueueFull => "downlink_data_queue_full",
            TorDropReason::DownlinkPriorityQueueFull => "downlink_priority_queue_full",
            TorDropReason::NoPeerMac => "no_peer_mac",
            TorDropReason::TxRingFull => "tx_ring_full",
            TorDropReason::Shutdown => "shutdown",
        }
    }

    /// Whether only trimming drops for this reason.
    pub fn trimming(self) -> bool {
        matches!(
            self,
            TorDropReason::DataQueueFull
                | TorDropReason::PriorityQueueFull
                | TorDropReason::DownlinkDataQueueFull
                | TorDropReason::DownlinkPriorityQueueFull
        )
    }
}

/// What trimming makes of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NdpRole {
    /// An NDP data packet not yet trimmed: data queue, trimmed past K.
    Trimmable,
    /// NDP control, or a header trimmed upstream: high priority.
    Priority,
    /// Anything else: data queue, dropped past K.
    Other,
}

fn ndp_role(frame: &[u8]) -> NdpRole {
    match ndp::header_of(frame) {
        Ok(h) if h.kind == Kind::Data && !h.trimmed() => NdpRole::Trimmable,
        Ok(_) => NdpRole::Priority,
        Err(_) => NdpRole::Other,
    }
}

/// A queue pair a frame may join: a next hop's or a host downlink's.
trait ClassQueues {
    /// Whether the `class` queue takes `len` bytes now (nothing counted).
    fn admits(&self, class: FrameClass, len: u32) -> Result<(), TorDrop>;
    /// Queues the frame (a refusal is counted).
    fn enqueue(&mut self, class: FrameClass, f: Frame) -> Result<(), TorDrop>;
}

/// The queues of next hop `hop` (chosen once per frame: the trimming
/// decision and the queueing must see the same hop), at `now_ns`.
struct TowardsTor<'a> {
    core: &'a mut RotorTor<Frame>,
    hop: u32,
    now_ns: u64,
}

impl ClassQueues for TowardsTor<'_> {
    fn admits(&self, class: FrameClass, len: u32) -> Result<(), TorDrop> {
        self.core.admits_to(self.hop, class, len)
    }
    fn enqueue(&mut self, class: FrameClass, f: Frame) -> Result<(), TorDrop> {
        self.core.enqueue_to(self.hop, class, f, f.len, self.now_ns)
    }
}

/// A host downlink, at `now_ns`.
struct ToHost<'a> {
    downlink: &'a mut Downlink<Frame>,
    now_ns: u64,
}

impl ClassQueues for ToHost<'_> {
    fn admits(&self, class: FrameClass, len: u32) -> Result<(), TorDrop> {
        self.downlink.admits(class, len)
    }
    fn enqueue(&mut self, class: FrameClass, f: Frame) -> Result<(), TorDrop> {
        self.downlink.enqueue(class, f, f.len, self.now_ns)
    }
}

/// Queues `f` in `queues` by its NDP role, trimming an NDP data packet
/// its data queue refuses (K frames, or the buffer full) and queueing the
/// header at high priority. Ok(true): queued trimmed.
fn enqueue_trimming<IO: PacketIo>(
    io: &mut IO,
    f: Frame,
    queues: &mut impl ClassQueues,
) -> Result<bool, TorDrop> {
    match ndp_role(io.frame(f)) {
        NdpRole::Priority => queues.enqueue(FrameClass::Priority, f).map(|()| false),
        NdpRole::Other => queues.enqueue(FrameClass::Data, f).map(|()| false),
        NdpRole::Trimmable => match queues.admits(FrameClass::Data, f.len) {
            Err(TorDrop::DataQueueFull | TorDrop::QueueFull) => {
                let Ok(len) = ndp::trim(io.frame_mut(f)) else {
                    // Classified as trimmable just now: not reached.
                    return queues.enqueue(FrameClass::Data, f).map(|()| false);
                };
                let header = Frame {
                    addr: f.addr,
                    len: (len as u32).min(f.len),
                };
                queues.enqueue(FrameClass::Priority, header).map(|()| true)
            }
            _ => queues.enqueue(FrameClass::Data, f).map(|()| false),
        },
    }
}

/// Counters of a ToR's packet path beyond the queue core's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TorPathCounters {
    /// Frames delivered to a host port.
    pub delivered: u64,
    /// Frames from hosts sent to a Valiant intermediate other than the
    /// destination's ToR.
    pub valiant_detours: u64,
    /// Frames from an uplink queued onward (shift-routing transit or the
    /// intermediate of a Valiant detour).
    pub transit: u64,
    /// NDP data packets trimmed to their headers in a next hop's queues
    /// (and queued at high priority).
    pub trimmed: u64,
    /// NDP data packets trimmed to their headers in a host downlink (and
    /// queued at high priority).
    pub trimmed_downlink: u64,
}

/// A ToR's ports and settings.
#[derive(Clone, Debug)]
pub struct TorConfig {
    /// This ToR's index.
    pub tor: u32,
    /// The network (routing, hosts, addresses).
    pub net: RotorNetwork,
    /// Each port's own MAC: uplinks first, then host ports.
    pub port_macs: Vec<MacAddr>,
    /// Each host port's host MAC, where known (else learned from its
    /// frames).
    pub host_macs: Vec<Option<MacAddr>>,
    /// The queue core's settings.
    pub settings: TorSettings,
    /// Seed of the ToR's random choices: Valiant intermediates and
    /// equal-cost next hops.
    pub seed: u64,
    /// Deliver frames from the circuits with their send stamp as source MAC
    /// (instead of the port's MAC), so a receiving host can tell when each
    /// crossed the rotor (instrumentation: `--deliver-send-stamps`).
    pub deliver_send_stamps: bool,
}

impl TorConfig {
    /// ToR `tor` of `net` with its ports' and hosts' MACs and its seed;
    /// the queue core as [`TorSettings::for_network`] sets it (slot 0 at
    /// `epoch_ns`), no send stamps.
    pub fn for_network(
        net: &RotorNetwork,
        tor: u32,
        port_macs: Vec<MacAddr>,
        host_macs: Vec<Option<MacAddr>>,
        epoch_ns: u64,
        seed: u64,
    ) -> Result<Self, String> {
        Ok(TorConfig {
            tor,
            net: net.clone(),
            port_macs,
            host_macs,
            settings: TorSettings::for_network(net, tor, epoch_ns)?,
            seed,
            deliver_send_stamps: false,
        })
    }
}

/// A rotor-aware ToR over packet I/O: ports `0..uplinks` face the rotors,
/// the rest its hosts.
pub struct TorSwitch<IO: PacketIo> {
    io: IO,
    tor: u32,
    tors: u32,
    uplinks: usize,
    net: RotorNetwork,
    routing: RotorRouting,
    port_macs: Vec<MacAddr>,
    host_macs: Vec<Option<MacAddr>>,
    core: RotorTor<Frame>,
    /// With trimming on, one emulated downlink per host port (else none).
    downlinks: Vec<Downlink<Frame>>,
    epoch_known: bool,
    deliver_send_stamps: bool,
    traffic: Vec<PortTraffic>,
    drops: [u64; TorDropReason::ALL.len()],
    counters: TorPathCounters,
    rx: Vec<Frame>,
    out: Vec<Vec<Frame>>,
    dropped: Vec<Frame>,
    batch: usize,
}

impl<IO: PacketIo> TorSwitch<IO> {
    /// A ToR; `epoch_known` false forwards nothing into the circuits until
    /// [`TorSwitch::set_epoch`].
    pub fn new(io: IO, cfg: TorConfig, epoch_known: bool) -> Result<Self, String> {
        let uplinks = cfg.net.rotors as usize;
        let ports = uplinks + cfg.net.hosts_per_tor as usize;
        if io.ports() != ports {
            return Err(format!(
                "ToR {} needs {ports} ports ({uplinks} uplinks, {} hosts), has {}",
                cfg.tor,
                cfg.net.hosts_per_tor,
                io.ports()
            ));
        }
        if cfg.port_macs.len() != ports || cfg.host_macs.len() != ports - uplinks {
            return Err("a MAC per port and a host MAC per host port".into());
        }
        let mut core = RotorTor::new(cfg.settings)?;
        core.set_seed(cfg.seed);
        Ok(TorSwitch {
            io,
            tor: cfg.tor,
            tors: cfg.net.tors,
            uplinks,
            routing: cfg.net.routing(),
            net: cfg.net,
            port_macs: cfg.port_macs,
            host_macs: cfg.host_macs,
            core,
            downlinks: Vec::new(),
            epoch_known,
            deliver_send_stamps: cfg.deliver_send_stamps,
            traffic: vec![PortTraffic::default(); ports],
            drops: [0; TorDropReason::ALL.len()],
            counters: TorPathCounters::default(),
            rx: Vec::with_capacity(256),
            out: vec![Vec::with_capacity(256); ports],
            dropped: Vec::with_capacity(256),
            batch: 256,
        })
    }

    /// The packet I/O (tests inject and collect through it).
    pub fn io(&mut self) -> &mut IO {
        &mut self.io
    }

    /// This ToR's index.
    pub fn tor(&self) -> u32 {
        self.tor
    }

    /// The network.
    pub fn net(&self) -> &RotorNetwork {
        &self.net
    }

    /// The queue core.
    pub fn core(&self) -> &RotorTor<Frame> {
        &self.core
    }

    /// Turns NDP trimming on with `trim`'s bounds for the next hops' queues
    /// and an emulated downlink per host port at the network's rate, or
    /// off (`None`, the default). Only while the ToR holds no frame.
    pub fn set_trimming(&mut self, trim: Option<TrimSettings>) -> Result<(), String> {
        if self.downlinks.iter().any(|d| d.bytes() > 0) {
            return Err("trimming can change only while the ToR holds no frame".into());
        }
        let downlinks = match trim {
            Some(t) => (0..self.host_macs.len())
                .map(|_| Downlink::new(self.net.rate_bps, t))
                .collect::<Result<Vec<_>, _>>()?,
            None => Vec::new(),
        };
        self.core.set_trim(trim)?;
        self.downlinks = downlinks;
        Ok(())
    }

    /// Trimming's bounds, if on.
    pub fn trimming(&self) -> Option<TrimSettings> {
        self.core.trim()
    }

    /// Bytes held now: the next hops' queues (the shared buffer) and,
    /// when trimming, the host downlinks' queues: the ToR's buffer
    /// occupancy as the Mars paper measures it.
    pub fn queued_bytes(&self) -> u64 {
        self.core.total_bytes() + self.downlinks.iter().map(|d| d.bytes()).sum::<u64>()
    }

    /// Host `host`'s emulated downlink (trimming on).
    pub fn downlink(&self, host: usize) -> Option<&Downlink<Frame>> {
        self.downlinks.get(host)
    }

    /// Trimming's counters for the stats, by name (none with trimming
    /// off): trimmed packets, high-priority frames queued and sent, on the
    /// uplinks and the host downlinks.
    pub fn trim_counters(&self) -> Vec<(&'static str, u64)> {
        if self.core.trim().is_none() {
            return Vec::new();
        }
        let c = self.core.counters();
        let sum = |f: fn(&crate::rotor_tor::DownlinkCounters) -> u64| {
            self.downlinks.iter().map(|d| f(&d.counters())).sum::<u64>()
        };
        vec![
            ("trimmed", self.counters.trimmed),
            ("queued_priority", c.priority_queued),
            ("sent_priority_uplink", c.priority_sent),
            ("trimmed_downlink", self.counters.trimmed_downlink),
            ("queued_downlink", sum(|d| d.queued)),
            ("sent_downlink", sum(|d| d.sent)),
            ("sent_priority_downlink", sum(|d| d.priority_sent)),
            ("late_frames_downlink", sum(|d| d.late_frames)),
            ("late_ns_downlink", sum(|d| d.late_ns)),
        ]
    }

    /// Sets the shared epoch; forwarding into the circuits starts.
    pub fn set_epoch(&mut self, epoch_ns: u64) {
        self.core.set_epoch(epoch_ns);
        self.epoch_known = true;
    }

    /// Per-port traffic.
    pub fn traffic(&self) -> &[PortTraffic] {
        &self.traffic
    }

    /// Drops by reason, in [`TorDropReason::ALL`] order; the reasons only
    /// trimming has only while it is on.
    pub fn drops(&self) -> impl Iterator<Item = (TorDropReason, u64)> + '_ {
        let trimming = self.core.trim().is_some();
        TorDropReason::ALL
            .iter()
            .copied()
            .zip(self.drops.iter().copied())
            .filter(move |(r, _)| trimming || !r.trimming())
    }

    /// The packet path's counters.
    pub fn counters(&self) -> TorPathCounters {
        self.counters
    }

    /// Uplinks (the first ports).
    pub fn uplinks(&self) -> usize {
        self.uplinks
    }

    /// Whether a port's link is up.
    pub fn link_up(&mut self, port: usize) -> bool {
        self.io.link_up(port)
    }

    /// When the next frame is due, ns of the slot clock.
    pub fn next_deadline(&self) -> u64 {
        self.downlinks
            .iter()
            .map(Downlink::next_deadline)
            .fold(self.core.next_deadline(), u64::min)
    }

    fn drop_frame(&mut self, frame: Frame, why: TorDropReason) {
        self.drops[why as usize] += 1;
        self.dropped.push(frame);
    }

    /// A uniformly random ToR, from the ToR's one random state (so a seed
    /// fixes Valiant intermediates and equal-cost next hops together).
    fn random_tor(&mut self) -> u32 {
        self.core.random_below(self.tors)
    }

    /// One poll at `now_ns` (the slot clock): receive, route, hand out
    /// what the circuits allow. Returns the frames handled.
    pub fn poll(&mut self, now_ns: u64) -> usize {
        let ports = self.io.ports();
        let mut work = 0;
        for port in 0..ports {
            self.rx.clear();
            self.io.recv(port, &mut self.rx, self.batch);
            work += self.rx.len();
            let frames = std::mem::take(&mut self.rx);
            for &f in &frames {
                self.traffic[port].rx_frames += 1;
                self.traffic[port].rx_bytes += f.len as u64;
                self.ingress(port, f, now_ns);
            }
            self.rx = frames;
        }
        let mut out = std::mem::take(&mut self.out);
        let io = &mut self.io;
        let stamp = send_stamp(now_ns);
        work += self.core.poll(now_ns, &mut |r, f| {
            if let Some(src) = io.frame_mut(f).get_mut(6..12) {
                src.copy_from_slice(&stamp);
            }
            out[r].push(f);
        });
        for (h, d) in self.downlinks.iter_mut().enumerate() {
            let Some(port_out) = out.get_mut(self.uplinks + h) else {
                continue;
            };
            let n = d.poll(now_ns, &mut |f| port_out.push(f));
            self.counters.delivered += n as u64;
            work += n;
        }
        for (port, frames) in out.iter_mut().enumerate() {
            if frames.is_empty() {
                continue;
            }
            let sent = self.io.send(port, frames);
            for f in &frames[..sent] {
                self.traffic[port].tx_frames += 1;
                self.traffic[port].tx_bytes += f.len as u64;
            }
            for &f in &frames[sent..] {
                self.drop_frame(f, TorDropReason::TxRingFull);
            }
            frames.clear();
        }
        self.out = out;
        if !self.dropped.is_empty() {
            self.io.release(&self.dropped);
            self.dropped.clear();
        }
        self.io.flush();
        work
    }

    fn ingress(&mut self, port: usize, f: Frame, now_ns: u64) {
        let data = self.io.frame(f);
        let parsed = match parse(data) {
            Ok(p) if p.l3 == L3::V4 => p,
            Err(ParseError::TtlExpired) => {
                return self.drop_frame(f, TorDropReason::TtlExpired);
            }
            _ => return self.drop_frame(f, TorDropReason::NotForwardable),
        };
        let std::net::IpAddr::V4(dst) = parsed.flow.dst_ip() else {
            return self.drop_frame(f, TorDropReason::NotForwardable);
        };
        let Some((dst_tor, dst_host)) = self.net.host_of(dst) else {
            return self.drop_frame(f, TorDropReason::UnknownDestination);
        };
        let from_host = port >= self.uplinks;
        if from_host {
            // Learn the host's MAC from its own frames.
            let h = port - self.uplinks;
            if self.host_macs[h].is_none() {
                if let Some(src) = data.get(6..12) {
                    let mut mac = [0u8; 6];
                    mac.copy_from_slice(src);
                    self.host_macs[h] = Some(mac);
                }
            }
        }
        // The ToR this frame heads for now.
        let marked = data.get(..6).and_then(target_of).map(u32::from);
        let target = if from_host {
            if dst_tor != self.tor && self.routing.valiant() {
                let i = self.random_tor();
                if i != self.tor && i != dst_tor {
                    self.counters.valiant_detours += 1;
                    i
                } else {
                    dst_tor
                }
            } else {
                dst_tor
            }
        } else {
            match marked {
                // Still on the way to its target.
                Some(t) if t != self.tor => t,
                // At its target (or unmarked): on to the destination's ToR.
                _ => dst_tor,
            }
        };
        if target == self.tor {
            if dst_tor != self.tor {
                return self.drop_frame(f, TorDropReason::Misrouted);
            }
            let keep_stamp = !from_host && self.deliver_send_stamps && marked.is_some();
            return self.deliver(dst_host as usize, f, &parsed, keep_stamp, now_ns);
        }
        if !from_host {
            self.counters.transit += 1;
        }
        if !self.epoch_known {
            return self.drop_frame(f, TorDropReason::NoEpoch);
        }
        let dst_mac = target_mac(target as u8);
        // The source MAC is the send stamp, set when an uplink takes it.
        let src_mac = self.port_macs[0];
        match forward_rewrite(self.io.frame_mut(f), &parsed, src_mac, dst_mac) {
            Ok(()) => {}
            Err(lcmp_wire::RewriteError::TtlExpired) => {
                return self.drop_frame(f, TorDropReason::TtlExpired)
            }
            Err(_) => return self.drop_frame(f, TorDropReason::NotForwardable),
        }
        // One next hop per frame: of equal-cost ones, a random one.
        let queued = match self.core.route(target) {
            Err(e) => Err(e),
            Ok(hop) if self.core.trim().is_some() => {
                let mut queues = TowardsTor {
                    core: &mut self.core,
                    hop,
                    now_ns,
                };
                enqueue_trimming(&mut self.io, f, &mut queues)
            }
            Ok(hop) => self
                .core
                .enqueue_to(hop, FrameClass::Data, f, f.len, now_ns)
                .map(|()| false),
        };
        match queued {
            Ok(trimmed) => self.counters.trimmed += u64::from(trimmed),
            Err(TorDrop::QueueFull) => self.drop_frame(f, TorDropReason::QueueFull),
            Err(TorDrop::NoRoute) => self.drop_frame(f, TorDropReason::NoRoute),
            Err(TorDrop::DataQueueFull) => self.drop_frame(f, TorDropReason::DataQueueFull),
            Err(TorDrop::PriorityQueueFull) => self.drop_frame(f, TorDropReason::PriorityQueueFull),
        }
    }

    fn deliver(
        &mut self,
        host: usize,
        f: Frame,
        parsed: &lcmp_wire::ParsedFrame,
        keep_stamp: bool,
        now_ns: u64,
    ) {
        let port = self.uplinks + host;
        let Some(host_mac) = self.host_macs[host] else {
            return self.drop_frame(f, TorDropReason::NoPeerMac);
        };
        let mut src = self.port_macs[port];
        if keep_stamp {
            if let Some(stamp) = self.io.frame(f).get(6..12) {
                src.copy_from_slice(stamp);
            }
        }
        match forward_rewrite(self.io.frame_mut(f), parsed, src, host_mac) {
            Ok(()) => {}
            Err(lcmp_wire::RewriteError::TtlExpired) => {
                return self.drop_frame(f, TorDropReason::TtlExpired)
            }
            Err(_) => return self.drop_frame(f, TorDropReason::NotForwardable),
        }
        let Some(downlink) = self.downlinks.get_mut(host) else {
            self.counters.delivered += 1;
            self.out[port].push(f);
            return;
        };
        match enqueue_trimming(&mut self.io, f, &mut ToHost { downlink, now_ns }) {
            Ok(trimmed) => self.counters.trimmed_downlink += u64::from(trimmed),
            Err(TorDrop::PriorityQueueFull) => {
                self.drop_frame(f, TorDropReason::DownlinkPriorityQueueFull)
            }
            Err(_) => self.drop_frame(f, TorDropReason::DownlinkDataQueueFull),
        }
    }

    /// Shutdown: every queued frame back to the pool, counted.
    pub fn drain(&mut self) {
        let mut held = Vec::new();
        self.core.drain(&mut |f| held.push(f));
        for d in &mut self.downlinks {
            d.drain(&mut |f| held.push(f));
        }
        for f in held {
            self.drop_frame(f, TorDropReason::Shutdown);
        }
        self.io.release(&self.dropped);
        self.dropped.clear();
        self.io.shutdown();
    }
}

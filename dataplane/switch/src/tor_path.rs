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
//! The source MAC of a circuit frame, equally unused, carries the instant
//! the ToR handed it to the uplink ([`send_stamp`]): AF_XDP gives a rotor
//! no arrival timestamps, and a rotor polled late would otherwise judge a
//! frame that entered it before the reconfiguration as arriving during it.

use lcmp_topology::rotor_net::{RotorNetwork, RotorRouting};
use lcmp_wire::{forward_rewrite, parse, MacAddr, ParseError, L3};

use crate::io::{Frame, PacketIo};
use crate::rotor_tor::{RotorTor, TorDrop, TorSettings};

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
    /// A host's MAC is not known yet.
    NoPeerMac,
    /// The transmit ring was full.
    TxRingFull,
    /// Held at shutdown.
    Shutdown,
}

impl TorDropReason {
    /// Every reason, in report order.
    pub const ALL: [TorDropReason; 10] = [
        TorDropReason::NoEpoch,
        TorDropReason::NotForwardable,
        TorDropReason::TtlExpired,
        TorDropReason::UnknownDestination,
        TorDropReason::Misrouted,
        TorDropReason::QueueFull,
        TorDropReason::NoRoute,
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
            TorDropReason::NoPeerMac => "no_peer_mac",
            TorDropReason::TxRingFull => "tx_ring_full",
            TorDropReason::Shutdown => "shutdown",
        }
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
    /// Seed of the Valiant intermediate choice.
    pub seed: u64,
    /// Deliver frames from the circuits with their send stamp as source MAC
    /// (instead of the port's MAC), so a receiving host can tell when each
    /// crossed the rotor (instrumentation: `--deliver-send-stamps`).
    pub deliver_send_stamps: bool,
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
    epoch_known: bool,
    rng: u64,
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
        let core = RotorTor::new(cfg.settings)?;
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
            epoch_known,
            rng: cfg.seed | 1,
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

    /// Sets the shared epoch; forwarding into the circuits starts.
    pub fn set_epoch(&mut self, epoch_ns: u64) {
        self.core.set_epoch(epoch_ns);
        self.epoch_known = true;
    }

    /// Per-port traffic.
    pub fn traffic(&self) -> &[PortTraffic] {
        &self.traffic
    }

    /// Drops by reason, in [`TorDropReason::ALL`] order.
    pub fn drops(&self) -> impl Iterator<Item = (TorDropReason, u64)> + '_ {
        TorDropReason::ALL
            .iter()
            .copied()
            .zip(self.drops.iter().copied())
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
        self.core.next_deadline()
    }

    fn drop_frame(&mut self, frame: Frame, why: TorDropReason) {
        self.drops[why as usize] += 1;
        self.dropped.push(frame);
    }

    /// A uniformly random ToR (xorshift64: Valiant needs spread, not
    /// secrecy).
    fn random_tor(&mut self) -> u32 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (((self.rng >> 32) * self.tors as u64) >> 32) as u32
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
            return self.deliver(dst_host as usize, f, &parsed, keep_stamp);
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
        match self.core.enqueue(target, f, f.len, now_ns) {
            Ok(()) => {}
            Err(TorDrop::QueueFull) => self.drop_frame(f, TorDropReason::QueueFull),
            Err(TorDrop::NoRoute) => self.drop_frame(f, TorDropReason::NoRoute),
        }
    }

    fn deliver(
        &mut self,
        host: usize,
        f: Frame,
        parsed: &lcmp_wire::ParsedFrame,
        keep_stamp: bool,
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
        self.counters.delivered += 1;
        self.out[port].push(f);
    }

    /// Shutdown: every queued frame back to the pool, counted.
    pub fn drain(&mut self) {
        let mut held = Vec::new();
        self.core.drain(&mut |f| held.push(f));
        for f in held {
            self.drop_frame(f, TorDropReason::Shutdown);
        }
        self.io.release(&self.dropped);
        self.dropped.clear();
        self.io.shutdown();
    }
}

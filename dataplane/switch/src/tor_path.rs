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

/// The destination MAC prefix of a frame on a circuit; the last byte is
/// its target ToR.
pub const TARGET_MAC_PREFIX: [u8; 5] = [0x02, 0x52, 0x4f, 0x54, 0x00];

/// Bits of the send time a circuit frame's source MAC carries (ns, about
/// 18 minutes before it wraps).
const STAMP_BITS: u32 = 40;

/// The source MAC of a circuit frame handed to an uplink at `now_ns`: a
/// locally administered unicast address (0x02) and the low 40 bits of the
/// time.
pub fn send_stamp(now_ns: u64) -> [u8; 6] {
    let t = now_ns.to_be_bytes();
    [0x02, t[3], t[4], t[5], t[6], t[7]]
}

/// When a circuit frame was sent, from its MAC addresses, as seen at
/// `now_ns`: `None` for a frame that is not a ToR's circuit frame or whose
/// stamp is not in the past `max_age_ns`.
pub fn sent_at(frame: &[u8], now_ns: u64, max_age_ns: u64) -> Option<u64> {
    let (dst, src) = (frame.get(..6)?, frame.get(6..12)?);
    if dst[..5] != TARGET_MAC_PREFIX || src[0] != 0x02 {
        return None;
    }
    let mut t = [0u8; 8];
    t[3..].copy_from_slice(&src[1..]);
    let stamp = u64::from_be_bytes(t);
    let mask = (1u64 << STAMP_BITS) - 1;
    let age = now_ns.wrapping_sub(stamp) & mask;
    (age <= max_age_ns).then(|| now_ns - age)
}

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

/// Frames and bytes through one port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortTraffic {
    /// Frames received.
    pub rx_frames: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Frames sent.
    pub tx_frames: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
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
        let marked = data
            .get(..6)
            .filter(|d| d[..5] == TARGET_MAC_PREFIX)
            .map(|d| d[5] as u32);
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
            return self.deliver(dst_host as usize, f, &parsed);
        }
        if !from_host {
            self.counters.transit += 1;
        }
        if !self.epoch_known {
            return self.drop_frame(f, TorDropReason::NoEpoch);
        }
        let mut dst_mac = [0u8; 6];
        dst_mac[..5].copy_from_slice(&TARGET_MAC_PREFIX);
        dst_mac[5] = target as u8;
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

    fn deliver(&mut self, host: usize, f: Frame, parsed: &lcmp_wire::ParsedFrame) {
        let port = self.uplinks + host;
        let Some(host_mac) = self.host_macs[host] else {
            return self.drop_frame(f, TorDropReason::NoPeerMac);
        };
        let src = self.port_macs[port];
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn circuit_frame(sent: u64) -> [u8; 12] {
        let mut f = [0u8; 12];
        f[..5].copy_from_slice(&TARGET_MAC_PREFIX);
        f[6..].copy_from_slice(&send_stamp(sent));
        f
    }

    #[test]
    fn send_stamps_survive_the_40_bit_wrap_and_age_out() {
        let wrap = 1u64 << 40;
        let now = 7 * wrap + 5;
        assert_eq!(
            sent_at(&circuit_frame(now - 10), now, 1_000),
            Some(now - 10)
        );
        assert_eq!(sent_at(&circuit_frame(now), now, 1_000), Some(now));
        assert_eq!(
            sent_at(&circuit_frame(now - 2_000), now, 1_000),
            None,
            "too old"
        );
        assert_eq!(
            sent_at(&circuit_frame(now + 10), now, 1_000),
            None,
            "the future"
        );
        let mut host_frame = circuit_frame(now);
        host_frame[1] = 0x00;
        assert_eq!(
            sent_at(&host_frame, now, 1_000),
            None,
            "not a circuit frame"
        );
        assert_eq!(sent_at(&[0u8; 8], now, 1_000), None, "truncated");
    }
}

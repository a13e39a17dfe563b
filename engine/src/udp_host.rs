//! A constant-rate UDP host as a [`Node`]: the socket-free twin of the
//! namespace engine's UDP senders and receivers
//! (`lcmp_netlab::udp_send_flows`, `lcmp_netlab::UdpReceiver`), one NIC
//! whose port is a memory link end to its switch.
//!
//! - Sending ([`UdpSchedule`]) is `udp_send_flows`' schedule exactly:
//!   frame `n` is due at `start + n x gap`, in rounds; round `r` sends
//!   sequence number `r` once per (source port, destination), destinations
//!   innermost. Each frame is `frame_bytes` long on the wire (Ethernet
//!   header included, no FCS), its payload the sender's: sequence number
//!   and send time (big-endian u64 each), then the byte pattern.
//! - The frame is built once by [`FrameBuilder`] (IPv4, DF, TTL 64) and
//!   copied into a pool buffer per frame, with its destination address,
//!   source port, header checksum (precomputed per destination), sequence
//!   number and send time patched in: nothing is allocated per frame. The
//!   UDP checksum is 0 ("none", valid in IPv4): no hop reads it.
//! - The NIC's egress ([`Egress`]) is the host link towards the switch
//!   (rate, delay, buffer): a frame is handed to it when due and leaves
//!   when its serialization ends. A frame the NIC's buffer refuses, or
//!   that finds no free buffer, is a send error (the socket's ENOBUFS).
//! - Receiving counts the UDP frames to this host's address and port
//!   ([`UdpHostConfig::listen_port`]) by their arrival time, which is the
//!   instant the switch hands them to the link (what the kernel's receive
//!   timestamp is on the namespace engine): all of them, and those inside
//!   [`UdpHostConfig::window_ns`] (the measurement window). Arrivals can
//!   also be kept one by one ([`UdpHost::keep_arrivals`], for tests), in
//!   a buffer of fixed capacity.

use std::net::Ipv4Addr;
use std::ops::Range;

use lcmp_control::proto::{Body, ErrorKind, ErrorReply};
use lcmp_control::Request;
use lcmp_switch::config::delay_line_frames;
use lcmp_switch::egress::{Admit, Egress, EgressConfig, EgressStats, Handoff};
use lcmp_switch::frames::FRAME_SIZE;
use lcmp_switch::io::{Frame, PacketIo};
use lcmp_switch::mem_link::port_mac;
use lcmp_switch::node::{Clock, Context, Node};
use lcmp_topology::Topology;
use lcmp_wire::checksum::ipv4_checksum;
use lcmp_wire::testing::FrameBuilder;
use lcmp_wire::MacAddr;
use serde::Serialize;

/// Frames received, and frames sent, per poll at most.
const BATCH: usize = 64;
/// Buffers taken from the pool at a time for frames the host writes.
const SPARE: usize = 32;
/// Ethernet + IPv4 (no options) + UDP headers, bytes.
pub const HEADERS: u32 = 14 + 20 + 8;
/// The sender's payload header: sequence number and send time.
pub const PAYLOAD_HEADER: u32 = 16;
/// Offsets in a frame built here.
const IP_CHECKSUM: usize = 24;
const IP_DST: usize = 30;
const UDP_SPORT: usize = 34;
const UDP_CHECKSUM: usize = 40;
const PAYLOAD: usize = HEADERS as usize;

/// What a host sends: `udp_send_flows`' flows and pacing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpSchedule {
    /// The destinations, innermost in each round.
    pub dsts: Vec<Ipv4Addr>,
    /// Their UDP port.
    pub dport: u16,
    /// One flow per source port and destination.
    pub sports: Vec<u16>,
    /// Every frame's length, bytes (Ethernet header included, no FCS).
    pub frame_bytes: u32,
    /// When frame 0 is due, ns.
    pub start_ns: u64,
    /// Between consecutive frames, ns.
    pub gap_ns: u64,
    /// Frames in all (rounds x sports x dsts).
    pub frames: u64,
}

impl UdpSchedule {
    /// When frame `n` is due.
    pub fn due_ns(&self, n: u64) -> u64 {
        self.start_ns.saturating_add(self.gap_ns.saturating_mul(n))
    }

    /// Frame `n`'s (sequence number, source port index, destination index).
    pub fn flow_of(&self, n: u64) -> (u64, usize, usize) {
        let d = self.dsts.len().max(1) as u64;
        let per_round = d * self.sports.len().max(1) as u64;
        (
            n / per_round,
            ((n / d) % (per_round / d)) as usize,
            (n % d) as usize,
        )
    }
}

/// Everything a host is built from besides its I/O.
#[derive(Debug, Clone)]
pub struct UdpHostConfig {
    /// The host's name.
    pub name: String,
    /// Its address.
    pub ip: Ipv4Addr,
    /// Its NIC's MAC.
    pub mac: MacAddr,
    /// The MAC of its switch's port (every frame's destination).
    pub gateway_mac: MacAddr,
    /// The host link towards the switch, emulated by the NIC's egress.
    pub nic: EgressConfig,
    /// What it sends (`None`: it only receives).
    pub send: Option<UdpSchedule>,
    /// The UDP port it counts arrivals on.
    pub listen_port: u16,
    /// Arrivals in this span count in the window's figures, ns.
    pub window_ns: Range<u64>,
}

impl UdpHostConfig {
    /// Host `name` of `topo`: its first IPv4 address; MACs as memory-link
    /// ports have them ([`port_mac`]: the NIC is the host's port 0, the
    /// gateway its switch's port); the NIC emulates the host link (rate,
    /// delay, buffer). Sends nothing, counts nothing in a window.
    pub fn from_topology(topo: &Topology, name: &str) -> Result<UdpHostConfig, String> {
        let host = topo
            .host_by_name(name)
            .ok_or_else(|| format!("{}: no host named {name:?}", topo.source()))?;
        let ip = host
            .addresses
            .iter()
            .find_map(|a| match a.addr() {
                std::net::IpAddr::V4(v4) => Some(v4),
                std::net::IpAddr::V6(_) => None,
            })
            .ok_or_else(|| format!("host {name}: no IPv4 address (the UDP host is IPv4)"))?;
        let switch = &topo.switch(host.switch).name;
        Ok(UdpHostConfig {
            name: name.to_string(),
            ip,
            mac: port_mac(name, 0),
            gateway_mac: port_mac(switch, host.port),
            nic: EgressConfig {
                rate_bps: host.rate_bps,
                delay_ns: host.delay_ns,
                buffer_bytes: host.buffer_bytes,
                ecn: None,
                max_in_flight: delay_line_frames(host.rate_bps, host.delay_ns),
            },
            send: None,
            listen_port: 0,
            window_ns: 0..0,
        })
    }
}

/// The host's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct UdpHostStats {
    /// Frames handed to the NIC.
    pub frames_sent: u64,
    /// Their bytes.
    pub bytes_sent: u64,
    /// Frames not sent: the NIC's buffer was full, or no buffer was free
    /// (the socket's send errors).
    pub send_errors: u64,
    /// Frames the NIC dropped after taking them (its delay line full, or
    /// the link refused them).
    pub nic_overflow: u64,
    /// Frames taken off the link.
    pub frames_received: u64,
    /// UDP frames to this host's address and port, counted.
    pub received: u64,
    /// Their bytes.
    pub received_bytes: u64,
    /// Of those, the frames that arrived in the window.
    pub window_frames: u64,
    /// Their bytes.
    pub window_bytes: u64,
    /// Frames taken off the link that are not such (dropped).
    pub other: u64,
    /// Arrivals not kept: the record was full.
    pub arrivals_not_kept: u64,
}

/// One arrival, as kept by [`UdpHost::keep_arrivals`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpArrival {
    /// When, ns.
    pub at_ns: u64,
    /// Its sender.
    pub src: Ipv4Addr,
    /// Its source port.
    pub sport: u16,
    /// Its sequence number.
    pub seq: u64,
    /// Its send time, ns.
    pub sent_ns: u64,
    /// Its length, bytes.
    pub len: u32,
}

/// What the host reports as its status.
#[derive(Debug, Clone, Serialize)]
pub struct UdpHostStatus {
    pub name: String,
    pub now_ns: u64,
    pub host: UdpHostStats,
    /// Bytes waiting in the NIC's buffer.
    pub nic_queue_bytes: u64,
    pub nic_transmitted_frames: u64,
}

/// See the module docs. `IO` has one port, the NIC's link.
pub struct UdpHost<IO: PacketIo> {
    cfg: UdpHostConfig,
    io: IO,
    nic: Egress<Frame>,
    /// The frame every sent frame starts from (destination 0, source port
    /// 0); empty for a host that only receives.
    template: Vec<u8>,
    /// The IPv4 header checksum for each destination.
    ip_checksums: Vec<u16>,
    /// The next frame to send.
    next: u64,
    stats: UdpHostStats,
    arrivals: Vec<UdpArrival>,
    last_poll_ns: u64,
    // Kept between polls so the packet path allocates nothing.
    received: Vec<Frame>,
    handoff: Vec<Frame>,
    release: Vec<Frame>,
    spare: Vec<u64>,
}

impl<IO: PacketIo> UdpHost<IO> {
    /// A host over `io` (one port: the link to its switch). Errors are one
    /// line.
    pub fn new(cfg: UdpHostConfig, io: IO) -> Result<Self, String> {
        let name = &cfg.name;
        if io.ports() != 1 {
            return Err(format!(
                "host {name}: the NIC is one port, the I/O has {}",
                io.ports()
            ));
        }
        let (mut template, mut ip_checksums) = (Vec::new(), Vec::new());
        if let Some(s) = &cfg.send {
            let min = HEADERS + PAYLOAD_HEADER;
            if !(min as usize..=FRAME_SIZE).contains(&(s.frame_bytes as usize)) {
                return Err(format!(
                    "host {name}: frames of {} bytes; a UDP frame here is {min} to {FRAME_SIZE}",
                    s.frame_bytes
                ));
            }
            let (Some(&dst), Some(&sport)) = (s.dsts.first(), s.sports.first()) else {
                return Err(format!(
                    "host {name}: a sender needs a destination and a source port"
                ));
            };
            // The sender's payload: its header, then byte i is i (mod 256),
            // as `udp_send_flows` fills it.
            let payload: Vec<u8> = (0..s.frame_bytes - HEADERS).map(|i| i as u8).collect();
            template = FrameBuilder::ipv4(cfg.ip.octets(), dst.octets())
                .macs(cfg.mac, cfg.gateway_mac)
                .ttl(64)
                .ipv4_fragment(false, true, 0)
                .udp(sport, s.dport)
                .payload(&payload)
                .build();
            debug_assert_eq!(template.len(), s.frame_bytes as usize);
            template[UDP_CHECKSUM..UDP_CHECKSUM + 2].fill(0);
            let mut header = [0u8; 20];
            header.copy_from_slice(&template[14..34]);
            header[IP_CHECKSUM - 14..IP_CHECKSUM - 12].fill(0);
            for d in &s.dsts {
                header[IP_DST - 14..IP_DST - 10].copy_from_slice(&d.octets());
                ip_checksums.push(ipv4_checksum(&header));
            }
        }
        Ok(UdpHost {
            nic: Egress::new(cfg.nic),
            cfg,
            io,
            template,
            ip_checksums,
            next: 0,
            stats: UdpHostStats::default(),
            arrivals: Vec::new(),
            last_poll_ns: 0,
            received: Vec::with_capacity(BATCH),
            handoff: Vec::with_capacity(BATCH),
            release: Vec::with_capacity(BATCH),
            spare: Vec::with_capacity(SPARE),
        })
    }

    /// The host's settings.
    pub fn config(&self) -> &UdpHostConfig {
        &self.cfg
    }

    /// The host's counters.
    pub fn stats(&self) -> UdpHostStats {
        self.stats
    }

    /// The NIC's egress counters.
    pub fn nic_stats(&self) -> EgressStats {
        self.nic.stats()
    }

    /// Keeps the first `capacity` arrivals ([`UdpHost::arrivals`]); the
    /// record is allocated here, once.
    pub fn keep_arrivals(&mut self, capacity: usize) {
        self.arrivals = Vec::with_capacity(capacity);
    }

    /// The arrivals kept, in arrival order.
    pub fn arrivals(&self) -> &[UdpArrival] {
        &self.arrivals
    }

    /// When the next frame is due, if any is left.
    fn next_due(&self) -> Option<u64> {
        let s = self.cfg.send.as_ref()?;
        (self.next < s.frames).then(|| s.due_ns(self.next))
    }

    /// A buffer of the pool for a frame the host writes.
    fn take_buffer(&mut self) -> Option<u64> {
        if self.spare.is_empty() {
            self.io.take_free(SPARE, &mut self.spare);
        }
        self.spare.pop()
    }

    /// Hands the frames due by `now_ns` to the NIC (a batch at most).
    fn send_due(&mut self, now_ns: u64) {
        for _ in 0..BATCH {
            let Some(s) = self.cfg.send.as_ref() else {
                return;
            };
            if self.next >= s.frames || s.due_ns(self.next) > now_ns {
                return;
            }
            let (seq, port, dst) = s.flow_of(self.next);
            let (sport, dst_ip, checksum) = (s.sports[port], s.dsts[dst], self.ip_checksums[dst]);
            let Some(addr) = self.take_buffer() else {
                // Waits for a buffer: the driver polls again when the link
                // gives one back.
                return;
            };
            self.next += 1;
            let len = self.template.len();
            let buf = self.io.frame_room_mut(Frame { addr, len: 0 });
            let Some(out) = buf.get_mut(..len) else {
                self.stats.send_errors += 1;
                self.spare.push(addr);
                continue;
            };
            out.copy_from_slice(&self.template);
            out[IP_CHECKSUM..IP_CHECKSUM + 2].copy_from_slice(&checksum.to_be_bytes());
            out[IP_DST..IP_DST + 4].copy_from_slice(&dst_ip.octets());
            out[UDP_SPORT..UDP_SPORT + 2].copy_from_slice(&sport.to_be_bytes());
            out[PAYLOAD..PAYLOAD + 8].copy_from_slice(&seq.to_be_bytes());
            out[PAYLOAD + 8..PAYLOAD + 16].copy_from_slice(&now_ns.to_be_bytes());
            let frame = Frame {
                addr,
                len: len as u32,
            };
            if self.nic.offer(frame, frame.len, false, 0, now_ns) == Admit::DropQueueFull {
                self.stats.send_errors += 1;
                self.io.release(&[frame]);
            } else {
                self.stats.frames_sent += 1;
                self.stats.bytes_sent += len as u64;
            }
        }
    }

    /// Counts the frames [`UdpHost::poll`] took, arrived at `now_ns`.
    fn count_received(&mut self, now_ns: u64) {
        let in_window = self.cfg.window_ns.contains(&now_ns);
        for i in 0..self.received.len() {
            let frame = self.received[i];
            self.stats.frames_received += 1;
            let data = self.io.frame(frame);
            let ours = match lcmp_wire::parse(data) {
                Ok(p) => {
                    data.get(..6) == Some(&self.cfg.mac[..])
                        && p.flow.proto() == lcmp_wire::ip::PROTO_UDP
                        && p.flow.dst_ip() == std::net::IpAddr::V4(self.cfg.ip)
                        && p.flow.dport() == self.cfg.listen_port
                }
                Err(_) => false,
            };
            if !ours {
                self.stats.other += 1;
                continue;
            }
            let len = u64::from(frame.len);
            self.stats.received += 1;
            self.stats.received_bytes += len;
            if in_window {
                self.stats.window_frames += 1;
                self.stats.window_bytes += len;
            }
            if self.arrivals.len() < self.arrivals.capacity() {
                let word = |at: usize| {
                    data.get(at..at + 8)
                        .and_then(|b| b.try_into().ok())
                        .map_or(0, u64::from_be_bytes)
                };
                let src = data
                    .get(26..30)
                    .and_then(|b| <[u8; 4]>::try_from(b).ok())
                    .map_or(Ipv4Addr::UNSPECIFIED, Ipv4Addr::from);
                let sport = data
                    .get(UDP_SPORT..UDP_SPORT + 2)
                    .map_or(0, |b| u16::from_be_bytes([b[0], b[1]]));
                self.arrivals.push(UdpArrival {
                    at_ns: now_ns,
                    src,
                    sport,
                    seq: word(PAYLOAD),
                    sent_ns: word(PAYLOAD + 8),
                    len: frame.len,
                });
            } else if self.arrivals.capacity() > 0 {
                self.stats.arrivals_not_kept += 1;
            }
        }
        self.io.release(&self.received);
        self.received.clear();
    }

    /// Passes what the NIC's egress releases at `now_ns` to the link;
    /// returns how many frames.
    fn transmit(&mut self, now_ns: u64) -> usize {
        self.handoff.clear();
        self.release.clear();
        let (handoff, release) = (&mut self.handoff, &mut self.release);
        let room = self.io.tx_room(0);
        self.nic.poll_budget(now_ns, room, &mut |h| match h {
            Handoff::Transmit { frame, .. } => handoff.push(frame),
            Handoff::Overflow { frame, .. } => release.push(frame),
        });
        let sent = self.io.send(0, &self.handoff);
        // The budget was the link's room: a refusal is the link's fault,
        // and the frames are dropped rather than held out of order.
        self.release.extend_from_slice(&self.handoff[sent..]);
        self.stats.nic_overflow += self.release.len() as u64;
        if !self.release.is_empty() {
            self.io.release(&self.release);
        }
        sent
    }
}

impl<IO: PacketIo> Node for UdpHost<IO> {
    type Io = IO;
    type Status = UdpHostStatus;

    fn poll(&mut self, clock: &mut impl Clock) -> usize {
        // Receive first, then read the clock: a frame is never counted
        // before it was taken off the link (as the switch).
        self.received.clear();
        self.io.recv(0, &mut self.received, BATCH);
        let now = clock.now_ns();
        self.last_poll_ns = now;
        let mut work = self.received.len();
        self.count_received(now);
        self.send_due(now);
        work += self.transmit(now);
        self.io.flush();
        work
    }

    fn last_poll_ns(&self) -> u64 {
        self.last_poll_ns
    }

    fn next_wake(&self, _now_ns: u64) -> Option<u64> {
        let t = [self.next_due(), self.nic.next_deadline()]
            .into_iter()
            .flatten()
            .min();
        Some(t.unwrap_or(u64::MAX))
    }

    fn handle(&mut self, _request: Request, _ctx: &Context<'_>) -> Body {
        Body::Error(ErrorReply::new(
            ErrorKind::Unsupported,
            "a host node has no control requests",
        ))
    }

    fn status(&mut self, ctx: &Context<'_>) -> UdpHostStatus {
        UdpHostStatus {
            name: self.cfg.name.clone(),
            now_ns: ctx.now_ns,
            host: self.stats,
            nic_queue_bytes: self.nic.queue_bytes(),
            nic_transmitted_frames: self.nic.stats().transmitted_frames,
        }
    }

    fn io(&mut self) -> &mut IO {
        &mut self.io
    }

    fn finish(&mut self) {
        self.release.clear();
        let release = &mut self.release;
        self.nic.flush(&mut |f| release.push(f));
        self.release
            .extend(self.spare.drain(..).map(|addr| Frame { addr, len: 0 }));
        self.io.release(&self.release);
        self.release.clear();
        self.io.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schedule_is_udp_send_flows_order() {
        let s = UdpSchedule {
            dsts: vec![Ipv4Addr::new(10, 1, 0, 2), Ipv4Addr::new(10, 2, 0, 2)],
            dport: 7000,
            sports: vec![40000, 40001, 40002],
            frame_bytes: 100,
            start_ns: 5,
            gap_ns: 10,
            frames: 12,
        };
        // Round 0: port 0 to d0, d1; port 1 to d0, d1; port 2 to d0, d1.
        let got: Vec<_> = (0..7).map(|n| s.flow_of(n)).collect();
        assert_eq!(
            got,
            vec![
                (0, 0, 0),
                (0, 0, 1),
                (0, 1, 0),
                (0, 1, 1),
                (0, 2, 0),
                (0, 2, 1),
                (1, 0, 0)
            ]
        );
        assert_eq!(s.due_ns(0), 5);
        assert_eq!(s.due_ns(7), 75);
    }
}

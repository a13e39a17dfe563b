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
//! - Each frame is written into a pool buffer in place: its headers
//!   (`udp_frame`: IPv4, DF, TTL 64; the UDP checksum 0, "none", valid in
//!   IPv4: no hop reads it), its sequence number and send time, then the
//!   pattern, kept from the start: nothing is allocated per frame.
//! - The NIC's egress (`host_nic`) is the host link towards the switch
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
use lcmp_switch::egress::{EgressConfig, EgressStats};
use lcmp_switch::frames::FRAME_SIZE;
use lcmp_switch::io::PacketIo;
use lcmp_switch::node::{Clock, Context, Node};
use lcmp_topology::Topology;
use lcmp_wire::MacAddr;
use serde::Serialize;

use crate::host_nic::{HostLink, HostNic, BATCH};
use crate::udp_frame::{write_udp_headers, UdpRoute, HEADERS_LEN, IP_OFFSET, UDP_OFFSET};

/// Ethernet + IPv4 (no options) + UDP headers, bytes.
pub const HEADERS: u32 = HEADERS_LEN as u32;
/// The sender's payload header: sequence number and send time.
pub const PAYLOAD_HEADER: u32 = 16;
/// Offsets in a frame.
const IP_SRC: usize = IP_OFFSET + 12;
const UDP_SPORT: usize = UDP_OFFSET;
const PAYLOAD: usize = HEADERS_LEN;

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
    /// ports have them ([`port_mac`](lcmp_switch::mem_link::port_mac): the
    /// NIC is the host's port 0, the gateway its switch's port); the NIC
    /// emulates the host link (rate, delay, buffer). Sends nothing, counts
    /// nothing in a window.
    pub fn from_topology(topo: &Topology, name: &str) -> Result<UdpHostConfig, String> {
        let link = HostLink::of(topo, name, "the UDP host is IPv4")?;
        Ok(UdpHostConfig {
            name: name.to_string(),
            ip: link.ip,
            mac: link.mac,
            gateway_mac: link.gateway_mac,
            nic: link.egress,
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
    nic: HostNic<IO>,
    /// Every sent frame's payload after its header (the payload header):
    /// byte i of the payload is i (mod 256), as `udp_send_flows` fills it;
    /// empty for a host that only receives.
    pattern: Vec<u8>,
    /// The next frame to send.
    next: u64,
    /// The host's counters but the NIC's (those are the NIC's own).
    stats: UdpHostStats,
    arrivals: Vec<UdpArrival>,
    last_poll_ns: u64,
}

impl<IO: PacketIo> UdpHost<IO> {
    /// A host over `io` (one port: the link to its switch). Errors are one
    /// line.
    pub fn new(cfg: UdpHostConfig, io: IO) -> Result<Self, String> {
        let name = &cfg.name;
        let nic = HostNic::new(name, io, cfg.nic)?;
        let mut pattern = Vec::new();
        if let Some(s) = &cfg.send {
            let min = HEADERS + PAYLOAD_HEADER;
            if !(min as usize..=FRAME_SIZE).contains(&(s.frame_bytes as usize)) {
                return Err(format!(
                    "host {name}: frames of {} bytes; a UDP frame here is {min} to {FRAME_SIZE}",
                    s.frame_bytes
                ));
            }
            if s.dsts.is_empty() || s.sports.is_empty() {
                return Err(format!(
                    "host {name}: a sender needs a destination and a source port"
                ));
            }
            pattern = (PAYLOAD_HEADER..s.frame_bytes - HEADERS)
                .map(|i| i as u8)
                .collect();
        }
        Ok(UdpHost {
            nic,
            cfg,
            pattern,
            next: 0,
            stats: UdpHostStats::default(),
            arrivals: Vec::new(),
            last_poll_ns: 0,
        })
    }

    /// The host's settings.
    pub fn config(&self) -> &UdpHostConfig {
        &self.cfg
    }

    /// The host's counters.
    pub fn stats(&self) -> UdpHostStats {
        let nic = self.nic.counters();
        UdpHostStats {
            // A frame that did not fit its buffer (never: `new` checks
            // the frame size) or that the NIC refused; a frame without a
            // buffer waits for one.
            send_errors: nic.unwritten + nic.queue_full,
            nic_overflow: nic.overflow,
            frames_received: nic.received,
            ..self.stats
        }
    }

    /// The NIC's egress counters.
    pub fn nic_stats(&self) -> EgressStats {
        self.nic.egress().stats()
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
            let route = UdpRoute {
                mac: self.cfg.mac,
                gateway: self.cfg.gateway_mac,
                src: self.cfg.ip,
                dst: s.dsts[dst],
                sport: s.sports[port],
                dport: s.dport,
            };
            let Some(addr) = self.nic.take_buffer() else {
                // Waits for a buffer: the driver polls again when the link
                // gives one back.
                return;
            };
            self.next += 1;
            let buf = self.nic.room(addr);
            let pattern = &self.pattern;
            let payload_len = PAYLOAD_HEADER as usize + pattern.len();
            let written = write_udp_headers(buf, &route, payload_len).and_then(|n| {
                let (head, rest) = buf
                    .get_mut(PAYLOAD..n)?
                    .split_first_chunk_mut::<{ PAYLOAD_HEADER as usize }>()?;
                head[..8].copy_from_slice(&seq.to_be_bytes());
                head[8..].copy_from_slice(&now_ns.to_be_bytes());
                // As long as the pattern: the payload is its header and it.
                rest.copy_from_slice(pattern);
                Some(n)
            });
            if self.nic.queue(addr, written, now_ns) {
                self.stats.frames_sent += 1;
                self.stats.bytes_sent += written.map_or(0, |n| n as u64);
            }
        }
    }

    /// Counts the frames [`UdpHost::poll`] took, arrived at `now_ns`.
    fn count_received(&mut self, now_ns: u64) {
        let in_window = self.cfg.window_ns.contains(&now_ns);
        for i in 0..self.nic.received().len() {
            let frame = self.nic.received()[i];
            let data = self.nic.frame(frame);
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
                    .get(IP_SRC..IP_SRC + 4)
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
        self.nic.release_received();
    }
}

impl<IO: PacketIo> Node for UdpHost<IO> {
    type Io = IO;
    type Status = UdpHostStatus;

    fn poll(&mut self, clock: &mut impl Clock) -> usize {
        // Receive first, then read the clock: a frame is never counted
        // before it was taken off the link (as the switch).
        let mut work = self.nic.recv();
        let now = clock.now_ns();
        self.last_poll_ns = now;
        self.count_received(now);
        self.send_due(now);
        work += self.nic.transmit(now);
        self.nic.flush();
        work
    }

    fn last_poll_ns(&self) -> u64 {
        self.last_poll_ns
    }

    fn next_wake(&self, _now_ns: u64) -> Option<u64> {
        let t = [self.next_due(), self.nic.egress().next_deadline()]
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
            host: self.stats(),
            nic_queue_bytes: self.nic.egress().queue_bytes(),
            nic_transmitted_frames: self.nic.egress().stats().transmitted_frames,
        }
    }

    fn io(&mut self) -> &mut IO {
        self.nic.io_mut()
    }

    fn finish(&mut self) {
        self.nic.finish();
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

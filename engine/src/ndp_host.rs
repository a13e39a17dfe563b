//! An NDP host as a [`Node`]: the sender and receiver of
//! [`lcmp_traffic::ndp`] (the rotor networks' trimming transport, as the
//! Mars paper's htsim runs it) behind one NIC whose port is one memory
//! link end to its switch, in the switches' process.
//!
//! - Flows come from a [`FlowSource`] and its destinations, as the
//!   RoCEv2 host's ([`crate::host::RoceHost`]); each becomes a
//!   [`FlowRecord`] in the same form, written as `flows.csv` by
//!   [`NdpHost::write_flows_csv`]: FCT from the arrival to the ACK of the
//!   flow's last unacked packet, `src` the host's `IP:sport` (the flow's
//!   entropy port), `dst` the receiver's `IP:7247`, `min_rtt_us` the
//!   smallest departure-to-ACK time of its packets sent once.
//! - Frames are NDP over UDP as `lcmp_wire::ndp` defines them (IPv4
//!   without options, DF, TTL 64, UDP checksum 0), written into buffers of
//!   the host's pool in place; data payloads are
//!   [`lcmp_traffic::rocev2::pattern`]'s bytes of the flow id at the
//!   packet's offset. Every received frame is parsed with checks
//!   ([`lcmp_wire::ndp::header_of`], the MACs, the address, the IPv4
//!   length); one that is not an NDP packet for this host is counted
//!   ([`NdpHostStats::malformed`]) and dropped. No input bytes make it
//!   panic.
//! - The NIC's egress (`host_nic`) is the host link towards the switch
//!   (rate, delay, buffer). Control packets (ACK, NACK, PULL: headers
//!   only, as a trimmed packet is) have priority over data: they go to the
//!   egress at once, while a data packet is handed to it only when its
//!   buffer is empty, so a control packet waits for at most the one data
//!   frame being serialized and the host's data leaves back to back at
//!   line rate (the host never holds a queue of data it could trim).
//! - The receiver's pulls leave when the pacer says ([`NdpReceiver`]: one
//!   per full data frame's time at the host link's rate).
//!
//! A poll: receive a batch (data to the receiver, whose answers go to the
//! egress; ACKs, NACKs and pulls to the sender), start the flows whose
//! arrival has come, fire the retransmission timers, release the due
//! pulls, hand the next data packet to an idle NIC, and pass what the
//! egress releases to the link. Nothing is allocated per frame.

use std::io::{self, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use lcmp_control::proto::{Body, ErrorKind, ErrorReply};
use lcmp_control::Request;
use lcmp_switch::egress::{EgressConfig, EgressStats};
use lcmp_switch::frames::FRAME_SIZE;
use lcmp_switch::io::PacketIo;
use lcmp_switch::node::{Clock, Context, Node};
use lcmp_topology::Topology;
use lcmp_traffic::client::{write_records, Destination};
use lcmp_traffic::flows::{FlowSource, PlannedFlow};
use lcmp_traffic::ndp::receiver::{NdpReceiver, ReceiverConfig, Reply, RxStats};
use lcmp_traffic::ndp::sender::{NdpSender, NewFlow, SenderStats};
use lcmp_traffic::ndp::{self, flow_id_of, udp_sport_of, NdpParams};
use lcmp_traffic::record::{FlowRecord, FlowStatus};
use lcmp_traffic::rocev2::pattern;
use lcmp_wire::ndp::{
    header_of, Header, Kind, FLAG_LAST, FLAG_RETRANSMISSION, HEADERS_LEN, UDP_PORT,
};
use lcmp_wire::MacAddr;
use serde::Serialize;

use crate::host_nic::{HostLink, HostNic};
use crate::udp_frame::{write_udp_headers, UdpRoute, IP_OFFSET as IP, UDP_OFFSET as UDP};

// The transport's idea of a frame's headers is the wire's.
const _: () = assert!(ndp::FRAME_OVERHEAD == HEADERS_LEN);

/// The receiver's default idle timeout for a flow's state, as the RoCEv2
/// host's (60 s).
pub const RX_IDLE_TIMEOUT_NS: u64 = 60_000_000_000;
/// The most payload bytes per packet whose frame fits one buffer.
pub const MAX_PAYLOAD_IN_FRAME: u32 = (FRAME_SIZE - HEADERS_LEN) as u32;

/// Where the NDP header starts in a frame.
const NDP: usize = crate::udp_frame::HEADERS_LEN;

/// Everything a host is built from besides its flows and I/O.
#[derive(Debug, Clone)]
pub struct NdpHostConfig {
    /// The host's name (the records' `sender`).
    pub name: String,
    /// Its address.
    pub ip: Ipv4Addr,
    /// Its NIC's MAC.
    pub mac: MacAddr,
    /// The MAC of its switch's port (every frame's destination).
    pub gateway_mac: MacAddr,
    /// The host link towards the switch, emulated by the NIC's egress; its
    /// rate paces the receiver's pulls too.
    pub nic: EgressConfig,
    /// Window, payload, timeout (as emulated: [`NdpParams::emulated`]).
    pub params: NdpParams,
    /// The clock's time that the flows' start offsets count from.
    pub start_ns: u64,
    /// The receiver drops a flow's state idle this long, ns.
    pub rx_idle_timeout_ns: u64,
}

impl NdpHostConfig {
    /// Host `name` of `topo`: its first IPv4 address; MACs as memory-link
    /// ports have them ([`port_mac`](lcmp_switch::mem_link::port_mac): the
    /// NIC is the host's port 0, the gateway its switch's port); the NIC
    /// emulates the host link (rate, delay, buffer).
    pub fn from_topology(
        topo: &Topology,
        name: &str,
        params: NdpParams,
    ) -> Result<NdpHostConfig, String> {
        let link = HostLink::of(topo, name, "NDP here is IPv4")?;
        Ok(NdpHostConfig {
            name: name.to_string(),
            ip: link.ip,
            mac: link.mac,
            gateway_mac: link.gateway_mac,
            nic: link.egress,
            params,
            start_ns: 0,
            rx_idle_timeout_ns: RX_IDLE_TIMEOUT_NS,
        })
    }
}

/// The host's own counters (the sender's and receiver's are theirs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct NdpHostStats {
    /// Flows whose arrival came.
    pub flows_started: u64,
    /// Flows whose every packet was acked.
    pub flows_completed: u64,
    /// Flows the sender refused (id in use, size out of range, no such
    /// destination).
    pub flows_failed: u64,
    /// Frames taken off the link.
    pub frames_received: u64,
    /// Frames handed to the link.
    pub frames_sent: u64,
    /// Control frames (ACK, NACK, PULL) written.
    pub control_frames: u64,
    /// Received frames that are not an NDP packet for this host (too
    /// short, another MAC, EtherType, protocol, address or port, a bad
    /// header or IPv4 length), dropped.
    pub malformed: u64,
    /// Packets not written for want of a free buffer.
    pub no_buffer: u64,
    /// Frames the NIC's buffer refused.
    pub nic_queue_full: u64,
    /// Frames dropped at the NIC: its delay line was full, or the link
    /// refused them.
    pub nic_overflow: u64,
}

/// What the host reports as its status.
#[derive(Debug, Clone, Serialize)]
pub struct NdpHostStatus {
    pub name: String,
    pub now_ns: u64,
    /// Flows in progress.
    pub active_flows: usize,
    pub host: NdpHostStats,
    pub sender: SenderStats,
    pub receiver: RxStats,
    /// Bytes waiting in the NIC's buffer.
    pub nic_queue_bytes: u64,
    pub nic_transmitted_frames: u64,
}

/// A destination as the host sends to it.
#[derive(Debug, Clone)]
struct Peer {
    name: String,
    ip: Ipv4Addr,
}

/// What a received frame is, read while its bytes are borrowed.
#[derive(Debug, Clone, Copy)]
struct Received {
    header: Header,
    src: Ipv4Addr,
    sport: u16,
    payload_len: u32,
}

/// The NDP packet in `frame` if it is one for `mac` and `ip`.
fn parse(frame: &[u8], mac: MacAddr, ip: Ipv4Addr) -> Option<Received> {
    let header = header_of(frame).ok()?;
    let (h, _) = frame.split_first_chunk::<HEADERS_LEN>()?;
    if h[..6] != mac || h[UDP - 4..UDP] != ip.octets() {
        return None;
    }
    let total = usize::from(u16::from_be_bytes([h[IP + 2], h[IP + 3]]));
    let headers = HEADERS_LEN - IP;
    if total < headers || IP + total > frame.len() {
        return None;
    }
    Some(Received {
        header,
        src: Ipv4Addr::new(h[UDP - 8], h[UDP - 7], h[UDP - 6], h[UDP - 5]),
        sport: u16::from_be_bytes([h[UDP], h[UDP + 1]]),
        payload_len: (total - headers) as u32,
    })
}

/// The route of a frame from `cfg`'s host to `dst` from `sport`.
fn route(cfg: &NdpHostConfig, dst: Ipv4Addr, sport: u16) -> UdpRoute {
    UdpRoute {
        mac: cfg.mac,
        gateway: cfg.gateway_mac,
        src: cfg.ip,
        dst,
        sport,
        dport: UDP_PORT,
    }
}

/// Writes the headers of an NDP packet with `payload_len` bytes of payload
/// into `buf` (the payload follows them, the caller's); the frame's
/// length, or `None` if it does not fit.
fn write_headers(
    buf: &mut [u8],
    r: &UdpRoute,
    header: &Header,
    payload_len: usize,
) -> Option<usize> {
    let udp_payload = lcmp_wire::ndp::HEADER_LEN.checked_add(payload_len)?;
    let len = write_udp_headers(buf, r, udp_payload)?;
    buf.get_mut(NDP..HEADERS_LEN)?
        .copy_from_slice(&header.to_bytes());
    Some(len)
}

/// See the module docs. `IO` has one port, the NIC's link.
pub struct NdpHost<IO: PacketIo> {
    cfg: NdpHostConfig,
    nic: HostNic<IO>,
    sender: NdpSender,
    receiver: NdpReceiver,
    flows: FlowSource,
    peers: Vec<Peer>,
    next_flow: Option<PlannedFlow>,
    records: Vec<FlowRecord>,
    /// The host's counters but the NIC's (those are the NIC's own).
    stats: NdpHostStats,
    last_poll_ns: u64,
    next_sweep_ns: u64,
    /// Counts this host once when it is [`NdpHost::done`].
    done_counter: Option<Arc<AtomicUsize>>,
}

impl<IO: PacketIo> NdpHost<IO> {
    /// A host over `io` (one port: the link to its switch) sending the
    /// flows of `flows` to `dsts` (IPv4 receivers; NDP goes to their port
    /// 7247 whatever port they give). Errors are one line.
    pub fn new(
        cfg: NdpHostConfig,
        io: IO,
        mut flows: FlowSource,
        dsts: &[Destination],
    ) -> Result<Self, String> {
        let name = &cfg.name;
        let nic = HostNic::new(name, io, cfg.nic)?;
        cfg.params
            .validate()
            .map_err(|e| format!("host {name}: {e}"))?;
        let payload = cfg.params.payload;
        if payload > MAX_PAYLOAD_IN_FRAME {
            return Err(format!(
                "host {name}: NDP payload {payload} bytes; a frame of {FRAME_SIZE} bytes carries 1 to {MAX_PAYLOAD_IN_FRAME}"
            ));
        }
        let peers = dsts
            .iter()
            .map(|d| match d.addr {
                SocketAddr::V4(a) => Ok(Peer {
                    name: d.name.clone(),
                    ip: *a.ip(),
                }),
                SocketAddr::V6(a) => Err(format!(
                    "host {name}: receiver {} at {a}: NDP here is IPv4",
                    d.name
                )),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let next_flow = flows.next_flow();
        Ok(NdpHost {
            nic,
            sender: NdpSender::new(cfg.params),
            receiver: NdpReceiver::new(ReceiverConfig::for_link(&cfg.params, cfg.nic.rate_bps)),
            next_sweep_ns: cfg.start_ns.saturating_add(sweep_interval(&cfg)),
            cfg,
            flows,
            peers,
            next_flow,
            records: Vec::new(),
            stats: NdpHostStats::default(),
            last_poll_ns: 0,
            done_counter: None,
        })
    }

    /// The host's settings.
    pub fn config(&self) -> &NdpHostConfig {
        &self.cfg
    }

    /// One record per flow started so far, in start order.
    pub fn records(&self) -> &[FlowRecord] {
        &self.records
    }

    /// Writes [`NdpHost::records`] as the client writes `flows.csv`.
    pub fn write_flows_csv(&self, w: &mut impl Write) -> io::Result<()> {
        write_records(w, &self.records)
    }

    /// The sender's flows and counters.
    pub fn sender(&self) -> &NdpSender {
        &self.sender
    }

    /// The receiver's flows and counters.
    pub fn receiver(&self) -> &NdpReceiver {
        &self.receiver
    }

    /// The host's own counters.
    pub fn stats(&self) -> NdpHostStats {
        let nic = self.nic.counters();
        NdpHostStats {
            frames_received: nic.received,
            frames_sent: nic.sent,
            no_buffer: nic.no_buffer,
            nic_queue_full: nic.queue_full,
            nic_overflow: nic.overflow + nic.unwritten,
            ..self.stats
        }
    }

    /// The NIC's egress counters.
    pub fn nic_stats(&self) -> EgressStats {
        self.nic.egress().stats()
    }

    /// Whether every flow has started and ended (completed or failed).
    pub fn done(&self) -> bool {
        self.next_flow.is_none() && self.sender.active() == 0
    }

    /// Adds 1 to `counter` at the end of the first poll after which the
    /// host is [`NdpHost::done`] (once).
    pub fn count_done_in(&mut self, counter: Arc<AtomicUsize>) {
        self.done_counter = Some(counter);
    }

    /// The time at which flow `f` arrives, on the host's clock.
    fn arrival_ns(&self, f: &PlannedFlow) -> u64 {
        let offset = u64::try_from(f.offset.as_nanos()).unwrap_or(u64::MAX);
        self.cfg.start_ns.saturating_add(offset)
    }

    /// Writes a control packet (`header`, no payload) to `dst` from
    /// `sport` and queues it at the NIC.
    fn emit_control(&mut self, now_ns: u64, dst: Ipv4Addr, sport: u16, header: &Header) {
        let Some(addr) = self.nic.take_buffer() else {
            return;
        };
        let route = route(&self.cfg, dst, sport);
        let written = write_headers(self.nic.room(addr), &route, header, 0);
        if written.is_some() {
            self.stats.control_frames += 1;
        }
        self.nic.queue(addr, written, now_ns);
    }

    /// Handles the frames [`HostNic::recv`] took, at `now_ns`.
    fn handle_received(&mut self, now_ns: u64) {
        for i in 0..self.nic.received().len() {
            let frame = self.nic.received()[i];
            let Some(r) = parse(self.nic.frame(frame), self.cfg.mac, self.cfg.ip) else {
                self.stats.malformed += 1;
                continue;
            };
            let h = r.header;
            match h.kind {
                Kind::Data => {
                    let answer = self.receiver.on_data(
                        now_ns,
                        r.src,
                        r.sport,
                        h.flow,
                        h.seq,
                        h.value,
                        h.trimmed(),
                        r.payload_len,
                    );
                    if let Some(a) = answer {
                        let kind = match a.reply {
                            Reply::Ack => Kind::Ack,
                            Reply::Nack => Kind::Nack,
                        };
                        let reply = Header {
                            kind,
                            flags: 0,
                            flow: a.flow,
                            seq: a.seq,
                            value: a.pulls,
                        };
                        self.emit_control(now_ns, r.src, r.sport, &reply);
                    }
                }
                Kind::Ack => {
                    if let Some(done) = self.sender.on_ack(now_ns, h.flow, h.seq, h.value) {
                        if let Some(rec) = self.records.get_mut(done.tag) {
                            rec.status = FlowStatus::Ok;
                            rec.fct_ns = Some(done.fct_ns);
                            rec.min_rtt_us = done.min_rtt_ns.map(|n| (n + 500) / 1000);
                        }
                        self.stats.flows_completed += 1;
                    }
                }
                Kind::Nack => self.sender.on_nack(now_ns, h.flow, h.seq, h.value),
                Kind::Pull => self.sender.on_pull(h.flow, h.value),
            }
        }
        self.nic.release_received();
    }

    /// Starts the flows whose arrival has come.
    fn start_flows(&mut self, now_ns: u64) {
        while let Some(f) = self.next_flow.take() {
            let at = self.arrival_ns(&f);
            if at > now_ns {
                self.next_flow = Some(f);
                break;
            }
            let id = flow_id_of(f.id);
            let sport = udp_sport_of(id);
            // A flow source made for other destinations: the flow fails.
            let peer = self.peers.get(f.dst).cloned().unwrap_or(Peer {
                name: String::new(),
                ip: Ipv4Addr::UNSPECIFIED,
            });
            let mut rec = FlowRecord::arrived(
                f.id,
                &self.cfg.name,
                &peer.name,
                format!("{}:{sport}", self.cfg.ip),
                SocketAddrV4::new(peer.ip, UDP_PORT).to_string(),
                f.size,
                at - self.cfg.start_ns,
                f.warmup,
            );
            let added = if f.dst >= self.peers.len() {
                Err(format!("no destination {} for flow {}", f.dst, f.id))
            } else {
                self.sender.add_flow(NewFlow {
                    id,
                    size: f.size,
                    arrival_ns: at,
                    tag: self.records.len(),
                    dst: peer.ip,
                    sport,
                })
            };
            if let Err(e) = added {
                rec.status = FlowStatus::Failed;
                rec.error = e;
                self.stats.flows_failed += 1;
            }
            self.stats.flows_started += 1;
            self.records.push(rec);
            self.next_flow = self.flows.next_flow();
        }
    }

    /// Releases the pulls due at `now_ns` to the NIC.
    fn send_pulls(&mut self, now_ns: u64) {
        while let Some(p) = self.receiver.pop_pull(now_ns) {
            let pull = Header {
                kind: Kind::Pull,
                flags: 0,
                flow: p.flow,
                seq: 0,
                value: p.pulls,
            };
            self.emit_control(now_ns, p.to, p.sport, &pull);
        }
    }

    /// Hands the next data packet to the NIC if it is idle.
    fn send_data(&mut self, now_ns: u64) {
        // The line is busy (with a control frame or the last data frame):
        // the next packet waits for it (see the module docs).
        if self.nic.egress().queued_frames() > 0 || !self.sender.has_departures() {
            return;
        }
        let Some(addr) = self.nic.take_buffer() else {
            return;
        };
        let Some(d) = self.sender.pop_departure(now_ns) else {
            self.nic.put_back(addr);
            return;
        };
        let mut flags = 0;
        if d.last {
            flags |= FLAG_LAST;
        }
        if d.retransmission {
            flags |= FLAG_RETRANSMISSION;
        }
        let header = Header {
            kind: Kind::Data,
            flags,
            flow: d.id,
            seq: d.seq,
            value: d.packets,
        };
        let route = route(&self.cfg, d.dst, d.sport);
        let len = d.len as usize;
        let buf = self.nic.room(addr);
        // The payload was checked against the frame size in `new`.
        let written = write_headers(buf, &route, &header, len).and_then(|n| {
            let body = buf.get_mut(HEADERS_LEN..n)?;
            pattern::fill(d.id, d.offset, body);
            Some(n)
        });
        self.nic.queue(addr, written, now_ns);
    }

    /// One poll at `now_ns` of the frames [`HostNic::recv`] took.
    fn step(&mut self, now_ns: u64) -> usize {
        self.last_poll_ns = now_ns;
        let mut work = self.nic.received().len();
        work += self.nic.transmit(now_ns);
        self.handle_received(now_ns);
        self.start_flows(now_ns);
        self.sender.expire(now_ns);
        self.send_pulls(now_ns);
        self.send_data(now_ns);
        work += self.nic.transmit(now_ns);
        if now_ns >= self.next_sweep_ns {
            let idle = self.cfg.rx_idle_timeout_ns;
            self.receiver.expire(now_ns.saturating_sub(idle));
            self.next_sweep_ns = now_ns.saturating_add(sweep_interval(&self.cfg));
        }
        self.nic.flush();
        if self.done_counter.is_some() && self.done() {
            if let Some(c) = self.done_counter.take() {
                c.fetch_add(1, Ordering::Relaxed);
            }
        }
        work
    }
}

/// How often the receiver's idle flows are swept: a quarter of the idle
/// timeout, at least 1 ms.
fn sweep_interval(cfg: &NdpHostConfig) -> u64 {
    (cfg.rx_idle_timeout_ns / 4).max(1_000_000)
}

impl<IO: PacketIo> Node for NdpHost<IO> {
    type Io = IO;
    type Status = NdpHostStatus;

    fn poll(&mut self, clock: &mut impl Clock) -> usize {
        // Receive first, then read the clock: a frame is never handled
        // before it was taken off the link (as the switch).
        self.nic.recv();
        let now = clock.now_ns();
        self.step(now)
    }

    fn last_poll_ns(&self) -> u64 {
        self.last_poll_ns
    }

    fn next_wake(&self, _now_ns: u64) -> Option<u64> {
        let arrival = self.next_flow.as_ref().map(|f| self.arrival_ns(f));
        // Data waits for the NIC's buffer to empty (0: it is empty now).
        let data = self
            .sender
            .has_departures()
            .then(|| self.nic.egress().next_departure().unwrap_or(0));
        let t = [
            arrival,
            data,
            self.sender.next_timer_ns(),
            self.receiver.next_pull_ns(),
            self.nic.egress().next_deadline(),
        ]
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

    fn status(&mut self, ctx: &Context<'_>) -> NdpHostStatus {
        NdpHostStatus {
            name: self.cfg.name.clone(),
            now_ns: ctx.now_ns,
            active_flows: self.sender.active(),
            host: self.stats(),
            sender: self.sender.stats(),
            receiver: self.receiver.stats,
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
    use lcmp_wire::checksum::ipv4_checksum;

    const MAC: MacAddr = [2, 0, 0, 0, 0, 1];
    const GW: MacAddr = [2, 0, 0, 0, 0, 2];

    fn route() -> UdpRoute {
        UdpRoute {
            mac: MAC,
            gateway: GW,
            src: Ipv4Addr::new(10, 0, 1, 2),
            dst: Ipv4Addr::new(10, 0, 2, 2),
            sport: 40000,
            dport: UDP_PORT,
        }
    }

    #[test]
    fn written_frames_parse_back() {
        let mut buf = [0u8; 128];
        let h = Header {
            kind: Kind::Data,
            flags: FLAG_LAST,
            flow: 7,
            seq: 3,
            value: 9,
        };
        let n = write_headers(&mut buf, &route(), &h, 4).unwrap();
        assert_eq!(n, 58 + 4);
        // IPv4 total length 48, UDP length 28, UDP checksum 0, the IPv4
        // header summing to zero with its checksum.
        assert_eq!(&buf[16..18], &[0, 48]);
        assert_eq!(&buf[38..42], &[0, 28, 0, 0]);
        assert_eq!(ipv4_checksum(&buf[14..34]), 0);
        // As the receiving host (10.0.2.2, MAC GW) reads it.
        let r = parse(&buf[..n], GW, Ipv4Addr::new(10, 0, 2, 2)).unwrap();
        assert_eq!(r.header, h);
        assert_eq!(
            (r.src, r.sport, r.payload_len),
            (Ipv4Addr::new(10, 0, 1, 2), 40000, 4)
        );
        // Not for another MAC or address; not when shorter than its IPv4
        // length says.
        assert!(parse(&buf[..n], MAC, Ipv4Addr::new(10, 0, 2, 2)).is_none());
        assert!(parse(&buf[..n], GW, Ipv4Addr::new(10, 0, 2, 3)).is_none());
        assert!(parse(&buf[..n - 1], GW, Ipv4Addr::new(10, 0, 2, 2)).is_none());
        // Trimmed by a switch: headers only, payload 0.
        let mut t = buf[..n].to_vec();
        assert_eq!(lcmp_wire::ndp::trim(&mut t), Ok(58));
        let r = parse(&t[..58], GW, Ipv4Addr::new(10, 0, 2, 2)).unwrap();
        assert!(r.header.trimmed());
        assert_eq!(r.payload_len, 0);
        // A buffer too small for the frame.
        assert_eq!(write_headers(&mut buf[..60], &route(), &h, 4), None);
    }

    proptest::proptest! {
        #[test]
        fn no_bytes_make_parse_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..120)) {
            let _ = parse(&bytes, GW, Ipv4Addr::new(10, 0, 2, 2));
        }
    }
}

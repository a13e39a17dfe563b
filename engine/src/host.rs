//! A RoCEv2/DCQCN host as a [`Node`]: one NIC whose port is one memory
//! link end to its switch, in the switches' process. No namespace, no
//! socket, no kernel: the host is the socket-free halves of
//! `lcmp-traffic --transport rocev2`, the sender's queue pairs and NIC
//! ([`SenderCore`]) and the receiver ([`Receiver`]), joined to real RoCEv2
//! frames in the shared frame area.
//!
//! - Flows come from a [`FlowSource`] (a schedule, a trace replay or
//!   Poisson arrivals, as the client's) and its destinations; each becomes
//!   a [`FlowRecord`] exactly as the socket client writes it, kept in
//!   memory and written as `flows.csv` by [`RoceHost::write_flows_csv`].
//! - The sender runs the transport's congestion control of
//!   [`HostConfig::cc`] (DCQCN, HPCC, TIMELY or DCTCP, [`CcConfig`]) as
//!   the socket client does: the same [`SenderCore`]. HPCC's data packets
//!   carry an INT collect block; the hops in it are what the switches of
//!   the path wrote (`lcmp_wire::push_hop`), so HPCC reacts only where
//!   the switches push hops.
//! - The receiver answers every data packet as `lcmp-traffic server
//!   --transport rocev2` does: an ACK or NAK with the ECN echo and the echo
//!   of the packet's INT / timestamp block, or a CNP.
//! - The NIC's egress (`host_nic`) is the host link towards the switch:
//!   its rate and delay (the switch's port towards the host emulates the
//!   other direction, as for any link). The sender core paces at the same
//!   line rate and dates each packet's start of serialization, so the
//!   egress adds the serialization and the propagation and no queue.
//!   ACKs have priority at the NIC, as in the simulator: a data packet is
//!   handed to the egress only when its buffer is empty, so an ACK waits
//!   for at most the one data frame being serialized, and data yields the
//!   line to ACKs instead of queueing behind them without bound (the core
//!   keeps the QP's rate on average: it dates departures virtually).
//!
//! A poll: receive a batch (ACKs to the sender, data to the receiver,
//! whose answers go to the egress), start the flows whose arrival has
//! come, hand the sender's due packets to the egress, and pass what the
//! egress releases to the link. Frames are written into buffers of the
//! host's pool in place; nothing is allocated per frame. Every received
//! frame is parsed with checks; one that is not a RoCEv2 datagram for
//! this host is counted ([`HostStats::malformed`]) and dropped.

use std::io::{self, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use lcmp_control::proto::{Body, ErrorKind, ErrorReply};
use lcmp_control::Request;
use lcmp_switch::egress::{EgressConfig, EgressStats};
use lcmp_switch::frames::FRAME_SIZE;
use lcmp_switch::io::{Frame, PacketIo};
use lcmp_switch::node::{Clock, Context, Node};
use lcmp_topology::Topology;
use lcmp_traffic::client::{write_records, Destination};
use lcmp_traffic::flows::{FlowSource, PlannedFlow};
use lcmp_traffic::record::{FlowRecord, FlowStatus};
use lcmp_traffic::rocev2::cc::CcConfig;
use lcmp_traffic::rocev2::sender::{
    NewFlow, SenderConfig, SenderCore, SenderStats, ETHERNET_HEADER,
};
use lcmp_traffic::rocev2::server::{Notify, Receiver, RxStats};
use lcmp_traffic::rocev2::wire::{
    Aeth, Endpoints, Message, BTH_LEN, ECN_CE, ECN_ECT0, ECN_MASK, ICRC_LEN, IPV4_LEN,
    MAX_INT_BLOCK, RETH_LEN, ROCEV2_PORT, UDP_LEN,
};
use lcmp_traffic::rocev2::{pattern, qpn_of, udp_sport_of};
use lcmp_wire::MacAddr;
use serde::Serialize;

use crate::host_nic::{HostLink, HostNic, BATCH};
use crate::roce_frame;

/// The receiver's default NAK interval (the simulator's 500 us).
pub const NAK_INTERVAL_NS: u64 = 500_000;
/// The receiver's default idle timeout for a message's state (the server's
/// `--idle-timeout` default, 60 s).
pub const RX_IDLE_TIMEOUT_NS: u64 = 60_000_000_000;

/// Everything a host is built from besides its flows and I/O.
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// The host's name (the records' `sender`).
    pub name: String,
    /// Its address (data from it, ACKs to it).
    pub ip: Ipv4Addr,
    /// Its NIC's MAC.
    pub mac: MacAddr,
    /// The MAC of its switch's port (every frame's destination).
    pub gateway_mac: MacAddr,
    /// The host link towards the switch, emulated by the NIC's egress.
    pub nic: EgressConfig,
    /// The sender: payload, RTO (and DCQCN's parameters; its line rate is
    /// the NIC's).
    pub sender: SenderConfig,
    /// The CC every queue pair runs (its line rate is the NIC's): DCQCN
    /// of `sender.dcqcn` unless [`HostConfig::with_cc`] set another.
    pub cc: CcConfig,
    /// How the receiver signals CE marks back.
    pub notify: Notify,
    /// The receiver's NAK interval, ns.
    pub nak_interval_ns: u64,
    /// The receiver drops a message's state idle this long, ns.
    pub rx_idle_timeout_ns: u64,
    /// The clock's time that the flows' start offsets count from.
    pub start_ns: u64,
    /// The priority the host's RoCEv2 traffic is sent in: a PFC frame
    /// that pauses it stops the host's data (see [`RoceHost`]).
    pub pfc_priority: u8,
}

impl HostConfig {
    /// Host `name` of `topo` with the sender `sender`: its first IPv4
    /// address; MACs as memory-link ports have them
    /// ([`port_mac`](lcmp_switch::mem_link::port_mac): the host's NIC is
    /// its port 0, the gateway its
    /// switch's port); the NIC emulates the host link (rate, delay, the
    /// buffer of the host's interface) and is DCQCN's line rate; the
    /// receiver as the server's defaults (ECN echo, 500 us NAK interval).
    pub fn from_topology(
        topo: &Topology,
        name: &str,
        mut sender: SenderConfig,
    ) -> Result<HostConfig, String> {
        let link = HostLink::of(topo, name, "RoCEv2 here is IPv4")?;
        sender.dcqcn.line_rate = link.egress.rate_bps as f64;
        Ok(HostConfig {
            cc: CcConfig::dcqcn(sender.dcqcn, sender.payload),
            name: name.to_string(),
            ip: link.ip,
            mac: link.mac,
            gateway_mac: link.gateway_mac,
            nic: link.egress,
            sender,
            notify: Notify::Echo,
            nak_interval_ns: NAK_INTERVAL_NS,
            rx_idle_timeout_ns: RX_IDLE_TIMEOUT_NS,
            start_ns: 0,
            pfc_priority: lcmp_switch::pfc::ROCE_PRIORITY,
        })
    }

    /// The host running `cc` (as the emulation runs it:
    /// [`CcConfig::emulated`]) at its NIC's rate.
    pub fn with_cc(self, cc: CcConfig) -> HostConfig {
        HostConfig {
            cc: cc.with_line_rate(self.nic.rate_bps as f64),
            ..self
        }
    }
}

/// The host's own counters (the sender's and receiver's are theirs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct HostStats {
    /// Flows whose arrival came.
    pub flows_started: u64,
    /// Flows whose last packet was acknowledged.
    pub flows_completed: u64,
    /// Flows the sender refused (QP number in use, size out of range).
    pub flows_failed: u64,
    /// Frames taken off the link.
    pub frames_received: u64,
    /// Frames handed to the link.
    pub frames_sent: u64,
    /// Received frames that are not a RoCEv2 datagram for this host (too
    /// short, another MAC, EtherType, address or port, a bad header or
    /// ICRC, not a message this end handles), dropped.
    pub malformed: u64,
    /// Packets or answers not written for want of a free buffer.
    pub no_buffer: u64,
    /// Frames the NIC's buffer refused (go-back-N recovers data).
    pub nic_queue_full: u64,
    /// Frames dropped at the NIC: its delay line was full, the link
    /// refused them, or one did not fit a buffer (never, for the payloads
    /// [`RoceHost::new`] accepts).
    pub nic_overflow: u64,
    /// PFC frames that paused the host's priority (its data stopped).
    pub pfc_pauses: u64,
    /// PFC frames that resumed it.
    pub pfc_resumes: u64,
    /// Time the host's data spent paused by PFC, ns.
    pub pfc_paused_ns: u64,
}

/// What the host reports as its status.
#[derive(Debug, Clone, Serialize)]
pub struct HostStatus {
    pub name: String,
    pub now_ns: u64,
    /// Flows in progress.
    pub active_flows: usize,
    pub host: HostStats,
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
    addr: SocketAddrV4,
}

/// See the module docs. `IO` has one port, the NIC's link.
pub struct RoceHost<IO: PacketIo> {
    cfg: HostConfig,
    nic: HostNic<IO>,
    core: SenderCore,
    receiver: Receiver,
    flows: FlowSource,
    peers: Vec<Peer>,
    next_flow: Option<PlannedFlow>,
    records: Vec<FlowRecord>,
    /// The R_Key of every message: the host's address (deterministic, and
    /// distinct per host).
    rkey: u32,
    /// The host's counters but the NIC's (those are the NIC's own).
    stats: HostStats,
    /// Until when PFC pauses the host's data (0: not paused).
    paused_until_ns: u64,
    /// When the pause in force began.
    paused_since_ns: u64,
    last_poll_ns: u64,
    next_sweep_ns: u64,
    /// Counts this host once when it is [`RoceHost::done`] (a driver's
    /// test for the end of a run, without asking every host).
    done_counter: Option<Arc<AtomicUsize>>,
    // Kept between polls so the packet path allocates nothing.
    datagram: Vec<u8>,
    payload: Vec<u8>,
}

/// The most payload bytes per packet whose frame fits one buffer.
pub const MAX_PAYLOAD_IN_FRAME: u32 =
    (FRAME_SIZE - ETHERNET_HEADER - IPV4_LEN - UDP_LEN - BTH_LEN - RETH_LEN - ICRC_LEN) as u32;

impl<IO: PacketIo> RoceHost<IO> {
    /// A host over `io` (one port: the link to its switch) sending the
    /// flows of `flows` to `dsts` (IPv4 receivers at `IP:4791`, as the
    /// client's `--dst`). Errors are one line.
    pub fn new(
        cfg: HostConfig,
        io: IO,
        mut flows: FlowSource,
        dsts: &[Destination],
    ) -> Result<Self, String> {
        let name = &cfg.name;
        let nic = HostNic::new(name, io, cfg.nic)?;
        cfg.cc.validate().map_err(|e| format!("host {name}: {e}"))?;
        let payload = cfg.sender.payload;
        // The block every data packet carries (none for DCQCN, DCTCP).
        let block = cfg.cc.data_block_len();
        let most = MAX_PAYLOAD_IN_FRAME.saturating_sub(block as u32);
        if payload == 0 || payload > most {
            return Err(format!(
                "host {name}: payload {payload} bytes; a frame of {FRAME_SIZE} bytes carries 1 to {most} (with {block} bytes of {}'s INT block)",
                cfg.cc.kind()
            ));
        }
        let peers = dsts
            .iter()
            .map(|d| match d.addr {
                SocketAddr::V4(addr) => Ok(Peer {
                    name: d.name.clone(),
                    addr,
                }),
                SocketAddr::V6(a) => Err(format!(
                    "host {name}: receiver {} at {a}: RoCEv2 here is IPv4",
                    d.name
                )),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let next_flow = flows.next_flow();
        Ok(RoceHost {
            rkey: u32::from(cfg.ip),
            nic,
            core: SenderCore::with_cc(cfg.sender, cfg.cc),
            receiver: Receiver::new(cfg.notify, cfg.nak_interval_ns),
            next_sweep_ns: cfg.start_ns.saturating_add(sweep_interval(&cfg)),
            cfg,
            flows,
            peers,
            next_flow,
            records: Vec::new(),
            stats: HostStats::default(),
            paused_until_ns: 0,
            paused_since_ns: 0,
            last_poll_ns: 0,
            done_counter: None,
            datagram: Vec::with_capacity(FRAME_SIZE),
            payload: vec![0; payload as usize],
        })
    }

    /// The host's settings.
    pub fn config(&self) -> &HostConfig {
        &self.cfg
    }

    /// One record per flow started so far, in start order.
    pub fn records(&self) -> &[FlowRecord] {
        &self.records
    }

    /// Writes [`RoceHost::records`] as the client writes `flows.csv`.
    pub fn write_flows_csv(&self, w: &mut impl Write) -> io::Result<()> {
        write_records(w, &self.records)
    }

    /// The sender's queue pairs.
    pub fn sender(&self) -> &SenderCore {
        &self.core
    }

    /// The receiver's state and counters.
    pub fn receiver(&self) -> &Receiver {
        &self.receiver
    }

    /// The host's own counters.
    pub fn stats(&self) -> HostStats {
        let nic = self.nic.counters();
        HostStats {
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
        self.next_flow.is_none() && self.core.active() == 0
    }

    /// Adds 1 to `counter` at the end of the first poll after which the
    /// host is [`RoceHost::done`] (once: a done host stays done, its flow
    /// source being exhausted).
    pub fn count_done_in(&mut self, counter: Arc<AtomicUsize>) {
        self.done_counter = Some(counter);
    }

    /// The time at which flow `f` arrives, on the host's clock.
    fn arrival_ns(&self, f: &PlannedFlow) -> u64 {
        let offset = u64::try_from(f.offset.as_nanos()).unwrap_or(u64::MAX);
        self.cfg.start_ns.saturating_add(offset)
    }

    /// Writes `m` (with the block `block` after its BTH) to `dst` from
    /// `sport` into a pool buffer and queues it (counted and dropped if no
    /// buffer is free).
    fn emit(
        &mut self,
        now_ns: u64,
        dst: Ipv4Addr,
        sport: u16,
        m: &Message<'_>,
        block: Option<&[u8]>,
    ) {
        let Some(addr) = self.nic.take_buffer() else {
            return;
        };
        let ep = Endpoints {
            src: self.cfg.ip,
            dst,
            sport,
            dport: ROCEV2_PORT,
        };
        let (mac, gw) = (self.cfg.mac, self.cfg.gateway_mac);
        let buf = self.nic.room(addr);
        let written =
            roce_frame::encode_with(buf, &mut self.datagram, mac, gw, &ep, 0, m, block).ok();
        self.nic.queue(addr, written, now_ns);
    }

    /// Handles the frames [`HostNic::recv`] took, at `now_ns`.
    fn handle_received(&mut self, now_ns: u64) {
        for i in 0..self.nic.received().len() {
            let frame = self.nic.received()[i];
            if lcmp_wire::pfc::is_pfc(self.nic.frame(frame)) {
                self.on_pfc(frame, now_ns);
                continue;
            }
            // What the frame asks for, decided while its bytes are borrowed.
            let answer = match roce_frame::parse(self.nic.frame(frame), self.cfg.mac) {
                Ok(d) if d.endpoints.dst != self.cfg.ip || d.endpoints.dport != ROCEV2_PORT => {
                    self.stats.malformed += 1;
                    None
                }
                Ok(d) => match d.message {
                    Message::Data {
                        opcode,
                        qp,
                        psn,
                        reth,
                        payload,
                        ..
                    } => {
                        let ce = d.tos & ECN_MASK == ECN_CE;
                        let src = d.endpoints.src;
                        self.receiver
                            .on_data(now_ns, src, qp, psn, opcode, reth, payload, ce, d.int)
                            .map(|reply| (src, qp, reply))
                    }
                    Message::Ack {
                        qp,
                        psn,
                        becn,
                        aeth,
                    } => {
                        let nak = matches!(aeth, Aeth::Nak { .. });
                        let done = self.core.on_ack_with(now_ns, qp, psn, nak, becn, d.int);
                        if let Some(done) = done {
                            if let Some(rec) = self.records.get_mut(done.tag) {
                                rec.status = FlowStatus::Ok;
                                rec.fct_ns = Some(done.fct_ns);
                                rec.min_rtt_us = done.min_rtt_ns.map(|n| (n + 500) / 1000);
                            }
                            self.stats.flows_completed += 1;
                        }
                        None
                    }
                    Message::Cnp { qp } => {
                        self.core.on_cnp(now_ns, qp);
                        None
                    }
                },
                Err(_) => {
                    self.stats.malformed += 1;
                    None
                }
            };
            if let Some((src, qp, reply)) = answer {
                let (ack, cnp) = reply.messages(qp);
                self.emit(now_ns, src, ROCEV2_PORT, &ack, reply.block());
                if let Some(cnp) = cnp {
                    self.emit(now_ns, src, ROCEV2_PORT, &cnp, None);
                }
            }
        }
        self.nic.release_received();
    }

    /// A PFC frame from the switch: pauses the host's priority for the
    /// time it gives (at the NIC's rate), or resumes it. A NIC pauses what
    /// it has not started: the frame being serialized completes. The NIC
    /// holds its ACKs, NAKs and CNPs too, as the simulator's does with
    /// them in the data's priority (the artifact's `ACK_HIGH_PRIO 0`): a
    /// paused host that receives (every host of a trace between any DCs)
    /// would otherwise fill its switch port's headroom with them.
    #[inline(never)]
    fn on_pfc(&mut self, frame: Frame, now_ns: u64) {
        let Ok(pfc) = lcmp_wire::pfc::parse(self.nic.frame(frame)) else {
            self.stats.malformed += 1;
            return;
        };
        match pfc.time(self.cfg.pfc_priority) {
            None => {}
            Some(0) => {
                self.end_pause(now_ns);
                self.nic.egress_mut().resume(now_ns);
                self.stats.pfc_resumes += 1;
            }
            Some(quanta) => {
                let ns =
                    lcmp_wire::pfc::quanta_to_ns(quanta, self.cfg.nic.rate_bps).unwrap_or(u64::MAX);
                if self.paused_until_ns <= now_ns {
                    self.paused_since_ns = now_ns;
                }
                self.paused_until_ns = now_ns.saturating_add(ns);
                // The NIC ends it itself when the time runs out.
                self.nic.egress_mut().pause(now_ns, self.paused_until_ns);
                self.stats.pfc_pauses += 1;
            }
        }
    }

    /// Ends a pause in force at `now_ns` (a resume, or its time out).
    fn end_pause(&mut self, now_ns: u64) {
        if self.paused_until_ns > self.paused_since_ns {
            let until = self.paused_until_ns.min(now_ns);
            self.stats.pfc_paused_ns += until.saturating_sub(self.paused_since_ns);
        }
        self.paused_until_ns = 0;
        self.paused_since_ns = 0;
    }

    /// Starts the flows whose arrival has come, as the client does.
    fn start_flows(&mut self, now_ns: u64) {
        while let Some(f) = self.next_flow.take() {
            let at = self.arrival_ns(&f);
            if at > now_ns {
                self.next_flow = Some(f);
                break;
            }
            let qpn = qpn_of(f.id);
            let sport = udp_sport_of(qpn);
            // A flow source made for other destinations: the flow fails.
            let peer = self.peers.get(f.dst).cloned().unwrap_or(Peer {
                name: String::new(),
                addr: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0),
            });
            let mut rec = FlowRecord::arrived(
                f.id,
                &self.cfg.name,
                &peer.name,
                format!("{}:{sport}", self.cfg.ip),
                peer.addr.to_string(),
                f.size,
                at - self.cfg.start_ns,
                f.warmup,
            );
            let added = if f.dst >= self.peers.len() {
                Err(format!("no destination {} for flow {}", f.dst, f.id))
            } else {
                self.core.add_flow(NewFlow {
                    qpn,
                    size: f.size,
                    arrival_ns: at,
                    tag: self.records.len(),
                    dst: peer.addr,
                    sport,
                    va: f.id,
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

    /// Hands the sender's due packets to the NIC.
    fn send_data(&mut self, now_ns: u64) {
        self.core.expire(now_ns);
        if self.paused_until_ns != 0 {
            if now_ns < self.paused_until_ns {
                return;
            }
            // The pause ran out without a resume.
            self.end_pause(now_ns);
        }
        for _ in 0..BATCH {
            // The line is busy (with an ACK, or the last data frame): the
            // next packet waits for it (see the module docs).
            if self.nic.egress().queued_frames() > 0 {
                return;
            }
            let Some(addr) = self.nic.take_buffer() else {
                return;
            };
            let Some(d) = self.core.pop_departure(now_ns) else {
                self.nic.put_back(addr);
                return;
            };
            let seg = d.segment;
            let body = &mut self.payload[..seg.len as usize];
            pattern::fill(d.qpn, seg.offset, body);
            let m = d.message(self.rkey, body);
            let ep = Endpoints {
                src: self.cfg.ip,
                dst: *d.dst.ip(),
                sport: d.sport,
                dport: d.dst.port(),
            };
            let (mac, gw) = (self.cfg.mac, self.cfg.gateway_mac);
            let mut block = [0u8; MAX_INT_BLOCK];
            let block = d.block.write(&mut block);
            let buf = self.nic.room(addr);
            // The payload and block were checked against the frame size in
            // `new`.
            let written =
                roce_frame::encode_with(buf, &mut self.datagram, mac, gw, &ep, ECN_ECT0, &m, block)
                    .ok();
            debug_assert_eq!(written, Some(d.frame_bytes()));
            self.nic.queue(addr, written, now_ns);
        }
    }

    /// One poll at `now_ns` of the frames [`HostNic::recv`] took.
    fn step(&mut self, now_ns: u64) -> usize {
        self.last_poll_ns = now_ns;
        let mut work = self.nic.received().len();
        work += self.nic.transmit(now_ns);
        self.handle_received(now_ns);
        self.start_flows(now_ns);
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

/// How often the receiver's idle messages are swept (as the server: a
/// quarter of the idle timeout, at least 1 ms).
fn sweep_interval(cfg: &HostConfig) -> u64 {
    (cfg.rx_idle_timeout_ns / 4).max(1_000_000)
}

impl<IO: PacketIo> Node for RoceHost<IO> {
    type Io = IO;
    type Status = HostStatus;

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
        // While the NIC's buffer holds frames no packet leaves, so the
        // sender's deadlines wait for its next departure (a due deadline
        // would say "poll again now" to a host that can do nothing yet).
        // Paused, the same: nothing leaves before the pause ends.
        let sender = self.core.next_deadline().map(|t| {
            t.max(self.nic.egress().next_departure().unwrap_or(0))
                .max(self.paused_until_ns)
        });
        let t = [arrival, sender, self.nic.egress().next_deadline()]
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

    fn status(&mut self, ctx: &Context<'_>) -> HostStatus {
        HostStatus {
            name: self.cfg.name.clone(),
            now_ns: ctx.now_ns,
            active_flows: self.core.active(),
            host: self.stats(),
            sender: self.core.stats(),
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

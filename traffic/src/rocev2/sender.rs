//! The sending host's queue pairs and NIC, without sockets: which packet
//! leaves when.
//!
//! Every flow is one queue pair (QP) with its congestion control state
//! ([`Cc`]: DCQCN, HPCC, TIMELY or DCTCP, one for all QPs of a sender,
//! [`CcConfig`]) and go-back-N window. This is the one sender of the
//! transport: the socket client ([`super::client`]) and the one-process
//! engines' hosts (`lcmp_engine::host`) both drive it. A QP's next packet
//! may leave at its previous departure + that packet's bytes / Rc (Rc as
//! it was at the departure, [`Cc::advance`] first, as the simulator
//! computes `m_nextAvail`), and only while its bytes in flight are below
//! the CC's window ([`super::cc::QpSetup::window`]; a QP at its window
//! waits for an ACK); the host NIC serializes packets at the line rate on
//! one host-wide virtual clock; QPs whose time has come wait in a FIFO and
//! are served round-robin. Times are virtual (the departures the NIC would
//! have made), so a late wake-up of the event loop does not lower the
//! rate, but by at most [`MAX_CATCH_UP_NS`]: a loop that fell further
//! behind does not burst to make up for it.
//!
//! Each data packet carries what its CC needs echoed
//! ([`Departure::block`]): HPCC an empty INT collect block of
//! [`CcConfig::int_hops`] slots that switches fill, TIMELY its send time;
//! DCQCN and DCTCP nothing (the IP header's ECN). Every ACK or NAK goes to
//! [`Cc::on_ack`] after go-back-N has handled it, with its ECN echo, its
//! hops ([`HopWidener`]) or its RTT sample (now - the echoed send time);
//! a CNP to [`Cc::on_cnp`].
//!
//! One binary heap holds every QP's pacing deadline and retransmission
//! timeout (stale entries are skipped by generation), so thousands of QPs
//! cost O(log n) per packet and nothing while idle; DCQCN's timers are
//! evaluated lazily at the QP's events ([`super::dcqcn`]).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::net::SocketAddrV4;

use super::cc::{Ack, Cc, CcConfig, CcCounts, CongestionControl, Feedback};
use super::dcqcn::{Dcqcn, DcqcnParams};
use super::gbn::{GbnSender, Segment};
use super::hpcc::{HopWidener, IntHop};
use super::wire::{
    int_block_len, IntBlock, IntKind, Message, Reth, BTH_LEN, ICRC_LEN, IPV4_LEN, MAX_INT_BLOCK,
    RETH_LEN, UDP_LEN,
};

/// How far behind real time a departure may be dated.
pub const MAX_CATCH_UP_NS: u64 = 200_000;
/// Ethernet header bytes counted in every frame's serialization.
pub const ETHERNET_HEADER: usize = 14;

/// A sender's transport settings. [`SenderCore::new`] runs DCQCN with
/// `dcqcn`; [`SenderCore::with_cc`] runs the CC of a [`CcConfig`] instead
/// (whose line rate is then the NIC's, and `dcqcn` is not read).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SenderConfig {
    /// `dcqcn.line_rate` is the host NIC's rate.
    pub dcqcn: DcqcnParams,
    /// Payload bytes per packet (the last one of a flow carries the rest).
    pub payload: u32,
    pub rto_ns: u64,
}

/// A flow whose arrival time has come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewFlow {
    pub qpn: u32,
    pub size: u64,
    /// When the QP may send its first packet (the simulator's startTime).
    pub arrival_ns: u64,
    /// The caller's handle (e.g. its record index).
    pub tag: usize,
    pub dst: SocketAddrV4,
    pub sport: u16,
    /// The RETH's virtual address (identifies the message at the receiver).
    pub va: u64,
}

/// What a data packet carries after its BTH for its CC
/// ([`CongestionControl::feedback`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataBlock {
    /// DCQCN, DCTCP: nothing (the ECN field is the signal).
    None,
    /// HPCC: an empty INT collect block of this many hop slots.
    Collect(u8),
    /// TIMELY: the send time, ns on the sender's clock.
    Timestamp(u64),
}

impl DataBlock {
    /// Its bytes on the wire.
    pub fn len(&self) -> usize {
        match self {
            DataBlock::None => 0,
            DataBlock::Collect(n) => int_block_len(IntKind::Collect, *n),
            DataBlock::Timestamp(_) => int_block_len(IntKind::Timestamp, 0),
        }
    }

    pub fn is_empty(&self) -> bool {
        matches!(self, DataBlock::None)
    }

    /// Writes the block into `buf` and returns its bytes (None for
    /// [`DataBlock::None`], and for a capacity above the wire's limit,
    /// which [`CcConfig::validate`] refuses).
    pub fn write<'b>(&self, buf: &'b mut [u8; MAX_INT_BLOCK]) -> Option<&'b [u8]> {
        let len = match self {
            DataBlock::None => return None,
            DataBlock::Collect(n) => lcmp_wire::write_collect(buf, *n).ok()?,
            DataBlock::Timestamp(t) => {
                lcmp_wire::write_timestamp(buf, IntKind::Timestamp, *t).ok()?
            }
        };
        buf.get(..len)
    }
}

/// A packet to send now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Departure {
    pub qpn: u32,
    pub tag: usize,
    pub dst: SocketAddrV4,
    pub sport: u16,
    pub va: u64,
    /// The flow's size (the RETH's DMA length).
    pub size: u64,
    pub segment: Segment,
    /// What the packet carries for its CC, after the BTH.
    pub block: DataBlock,
}

impl Departure {
    /// Bytes of the Ethernet frame carrying it (the block included).
    pub fn frame_bytes(&self) -> usize {
        frame_bytes(&self.segment) + self.block.len()
    }

    /// The packet's transport content: an RDMA WRITE packet of the flow's
    /// message (the RETH on First/Only), `payload` being the segment's
    /// bytes ([`super::pattern::fill`]) and `rkey` the sender's R_Key.
    pub fn message<'a>(&self, rkey: u32, payload: &'a [u8]) -> Message<'a> {
        let seg = self.segment;
        Message::Data {
            opcode: seg.opcode,
            qp: self.qpn,
            psn: seg.psn,
            fecn: false,
            ack_req: true,
            reth: seg.opcode.has_reth().then_some(Reth {
                va: self.va,
                rkey,
                // Senders refuse flows above u32::MAX bytes.
                dma_len: u32::try_from(self.size).unwrap_or(u32::MAX),
            }),
            payload,
        }
    }
}

/// A flow whose last packet was acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    pub tag: usize,
    pub fct_ns: u64,
    pub min_rtt_ns: Option<u64>,
}

/// Totals over the sender's lifetime.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SenderStats {
    pub packets: u64,
    pub retransmissions: u64,
    pub naks: u64,
    pub ecn_echoes: u64,
    pub cnps: u64,
    /// Multiplicative cuts of DCQCN or DCTCP ([`CcCounts::rate_cuts`]).
    pub rate_cuts: u64,
    pub timeouts: u64,
    /// The CC's rate updates ([`CcCounts::updates`]).
    pub cc_updates: u64,
    /// HPCC's fast reactions ([`CcCounts::fast_reactions`]).
    pub cc_fast_reactions: u64,
    /// ACKs and NAKs that echoed INT hops (HPCC).
    pub int_echoes: u64,
    /// Of those, echoes whose collect block overflowed (more switches
    /// than slots: `--int-hops` too small for the path).
    pub int_overflows: u64,
    /// ACKs and NAKs that echoed a send time (TIMELY).
    pub timestamp_echoes: u64,
    /// Times a QP whose pacing time had come found its window full.
    pub window_stalls: u64,
}

impl SenderStats {
    fn add_counts(&mut self, c: CcCounts) {
        self.cc_updates += c.updates;
        self.cc_fast_reactions += c.fast_reactions;
        self.rate_cuts += c.rate_cuts;
    }
}

#[derive(Debug)]
struct Qp {
    flow: NewFlow,
    gen: u64,
    gbn: GbnSender,
    cc: Cc,
    /// The last echoed hops, widened (HPCC).
    hops: HopWidener,
    next_avail_ns: u64,
    /// In the ready FIFO or with a pacing entry in the heap.
    scheduled: bool,
    rto_deadline: Option<u64>,
    rto_in_heap: bool,
    /// The one packet being timed for an RTT sample: (PSN, real send time).
    timed: Option<(u32, u64)>,
    min_rtt_ns: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Pace,
    Rto,
}

/// See the module docs.
#[derive(Debug)]
pub struct SenderCore {
    cfg: SenderConfig,
    cc: CcConfig,
    /// The NIC's rate, bit/s (the CC's line rate).
    line_rate: f64,
    /// Widened hops of the ACK being handled (kept: no allocation per ACK).
    hop_scratch: Vec<IntHop>,
    slots: Vec<Option<Qp>>,
    free: Vec<usize>,
    by_qpn: HashMap<u32, usize>,
    heap: BinaryHeap<Reverse<(u64, Kind, usize, u64)>>,
    ready: VecDeque<(usize, u64)>,
    nic_free_ns: u64,
    next_gen: u64,
    stats: SenderStats,
}

/// Serialization time of `bytes` at `rate` bit/s, nanoseconds.
fn tx_ns(bytes: usize, rate: f64) -> u64 {
    (bytes as f64 * 8e9 / rate).round() as u64
}

/// Bytes of the Ethernet frame carrying `s`.
pub fn frame_bytes(s: &Segment) -> usize {
    let reth = if s.opcode.has_reth() { RETH_LEN } else { 0 };
    let len = s.len as usize;
    ETHERNET_HEADER + IPV4_LEN + UDP_LEN + BTH_LEN + reth + len + (4 - len % 4) % 4 + ICRC_LEN
}

impl SenderCore {
    /// DCQCN with `cfg.dcqcn`, no window.
    pub fn new(cfg: SenderConfig) -> SenderCore {
        SenderCore::with_cc(cfg, CcConfig::dcqcn(cfg.dcqcn, cfg.payload))
    }

    /// Every QP runs `cc` (its line rate is the NIC's; `cc.qp.mtu` is
    /// taken from `cfg.payload`). Parameters are the caller's to check
    /// ([`CcConfig::validate`]).
    pub fn with_cc(cfg: SenderConfig, mut cc: CcConfig) -> SenderCore {
        cc.qp.mtu = cfg.payload;
        SenderCore {
            cfg,
            line_rate: cc.params.line_rate(),
            cc,
            hop_scratch: Vec::new(),
            slots: Vec::new(),
            free: Vec::new(),
            by_qpn: HashMap::new(),
            heap: BinaryHeap::new(),
            ready: VecDeque::new(),
            nic_free_ns: 0,
            next_gen: 0,
            stats: SenderStats::default(),
        }
    }

    pub fn config(&self) -> &SenderConfig {
        &self.cfg
    }

    /// The CC every QP runs.
    pub fn cc_config(&self) -> &CcConfig {
        &self.cc
    }

    /// QPs with a flow in progress.
    pub fn active(&self) -> usize {
        self.by_qpn.len()
    }

    /// Totals; the CC's counts include the active QPs'.
    pub fn stats(&self) -> SenderStats {
        let mut s = self.stats;
        for q in self.slots.iter().flatten() {
            s.add_counts(q.cc.counts());
        }
        s
    }

    /// Starts a flow; an error (one line) if its QP number is in use or the
    /// size does not fit the packet format.
    pub fn add_flow(&mut self, flow: NewFlow) -> Result<(), String> {
        if self.by_qpn.contains_key(&flow.qpn) {
            return Err(format!("QP number {} is still in use", flow.qpn));
        }
        let gbn = GbnSender::new(flow.size, self.cfg.payload)?;
        let gen = self.next_gen;
        self.next_gen += 1;
        let qp = Qp {
            flow,
            gen,
            gbn,
            cc: Cc::new(&self.cc.params, &self.cc.qp),
            hops: HopWidener::default(),
            next_avail_ns: flow.arrival_ns,
            scheduled: true,
            rto_deadline: None,
            rto_in_heap: false,
            timed: None,
            min_rtt_ns: None,
        };
        let slot = match self.free.pop() {
            Some(s) => {
                self.slots[s] = Some(qp);
                s
            }
            None => {
                self.slots.push(Some(qp));
                self.slots.len() - 1
            }
        };
        self.by_qpn.insert(flow.qpn, slot);
        self.heap
            .push(Reverse((flow.arrival_ns, Kind::Pace, slot, gen)));
        Ok(())
    }

    /// Drops a flow (its packets could not be sent); returns its tag.
    pub fn abort(&mut self, qpn: u32) -> Option<usize> {
        let slot = self.by_qpn.remove(&qpn)?;
        let qp = self.slots[slot].take()?;
        self.free.push(slot);
        self.stats.add_counts(qp.cc.counts());
        Some(qp.flow.tag)
    }

    /// An ACK or NAK for `qpn` carrying `psn` (the receiver's next expected
    /// PSN) and the ECN echo, without an INT block ([`Self::on_ack_with`]).
    pub fn on_ack(
        &mut self,
        now_ns: u64,
        qpn: u32,
        psn: u32,
        nak: bool,
        ecn_echo: bool,
    ) -> Option<Completion> {
        self.on_ack_with(now_ns, qpn, psn, nak, ecn_echo, None)
    }

    /// An ACK or NAK for `qpn` carrying `psn` (the receiver's next expected
    /// PSN), the ECN echo and the block it echoes (INT hops or a send
    /// time), in the simulator's order (`RdmaHw::ReceiveAck`): acknowledge,
    /// completion, go-back on a NAK, then the CC ([`Cc::on_ack`]). HPCC is
    /// given only ACKs that echo hops (a re-ACK of a duplicate carries
    /// none), TIMELY only those that echo a time.
    pub fn on_ack_with(
        &mut self,
        now_ns: u64,
        qpn: u32,
        psn: u32,
        nak: bool,
        ecn_echo: bool,
        int: Option<IntBlock<'_>>,
    ) -> Option<Completion> {
        let &slot = self.by_qpn.get(&qpn)?;
        let rto = self.cfg.rto_ns;
        let qp = self.slots[slot].as_mut()?;
        if ecn_echo {
            self.stats.ecn_echoes += 1;
        }
        match int {
            Some(b) if b.kind() == IntKind::Echo => {
                self.stats.int_echoes += 1;
                self.stats.int_overflows += u64::from(b.overflow());
            }
            Some(b) if b.kind() == IntKind::TimestampEcho => self.stats.timestamp_echoes += 1,
            _ => {}
        }
        let progress = if nak {
            self.stats.naks += 1;
            qp.gbn.on_nak(psn)
        } else {
            qp.gbn.on_ack(psn)
        };
        if progress {
            qp.rto_deadline = Some(now_ns.saturating_add(rto));
        }
        if let Some((timed_psn, sent)) = qp.timed {
            if psn > timed_psn {
                let sample = now_ns.saturating_sub(sent);
                qp.min_rtt_ns = Some(qp.min_rtt_ns.map_or(sample, |m| m.min(sample)));
                qp.timed = None;
            }
        }
        if qp.gbn.done() {
            let done = Completion {
                tag: qp.flow.tag,
                fct_ns: now_ns.saturating_sub(qp.flow.arrival_ns),
                min_rtt_ns: qp.min_rtt_ns,
            };
            self.abort(qpn);
            return Some(done);
        }
        if nak {
            self.went_back(slot, now_ns);
        }
        self.react(slot, now_ns, psn, ecn_echo, int);
        // A larger window, or packets acknowledged: a QP held by its
        // window may send again.
        self.wake(slot, now_ns);
        None
    }

    /// The CC's reaction to an ACK of QP `slot` (after go-back-N).
    fn react(
        &mut self,
        slot: usize,
        now_ns: u64,
        psn: u32,
        ecn_echo: bool,
        int: Option<IntBlock<'_>>,
    ) {
        let Some(qp) = self.slots[slot].as_mut() else {
            return;
        };
        let mut rtt_ns = None;
        let mut hops_echoed = false;
        match int.map(|b| (b.kind(), b)) {
            Some((IntKind::Echo, b)) => {
                qp.hops.widen(b.hops(), &mut self.hop_scratch);
                hops_echoed = true;
            }
            Some((IntKind::TimestampEcho, b)) => {
                rtt_ns = b.timestamp().map(|t| now_ns.saturating_sub(t));
            }
            _ => {}
        }
        if self.cc.kind() == CongestionControl::Hpcc && !hops_echoed {
            return;
        }
        let hops: &[IntHop] = if hops_echoed { &self.hop_scratch } else { &[] };
        let ack = Ack {
            now_ns,
            ack_seq: qp.gbn.byte_of(psn),
            snd_nxt: qp.gbn.byte_of(qp.gbn.snd_nxt()),
            ecn_echo,
            rtt_ns,
            int: hops,
        };
        qp.cc.on_ack(&self.cc.params, &ack);
    }

    /// A CNP for `qpn`.
    pub fn on_cnp(&mut self, now_ns: u64, qpn: u32) {
        let params = self.cc.params;
        if let Some(qp) = self.by_qpn.get(&qpn).and_then(|&s| self.slots[s].as_mut()) {
            self.stats.cnps += 1;
            qp.cc.on_cnp(&params, now_ns);
        }
    }

    /// Schedules an idle QP that has packets again (after a go-back, or
    /// an ACK that opened its window).
    fn wake(&mut self, slot: usize, now_ns: u64) {
        let Some(qp) = self.slots[slot].as_mut() else {
            return;
        };
        if !qp.scheduled && qp.gbn.has_data() {
            qp.scheduled = true;
            let at = qp.next_avail_ns.max(now_ns);
            qp.next_avail_ns = at;
            self.heap.push(Reverse((at, Kind::Pace, slot, qp.gen)));
        }
    }

    /// After snd_nxt moved back: the timed packet may be resent (Karn), and
    /// an idle QP has packets again.
    fn went_back(&mut self, slot: usize, now_ns: u64) {
        let Some(qp) = self.slots[slot].as_mut() else {
            return;
        };
        if qp.timed.is_some_and(|(p, _)| p >= qp.gbn.snd_una()) {
            qp.timed = None;
        }
        self.wake(slot, now_ns);
    }

    /// Moves QPs whose pacing time has come to the ready FIFO and fires
    /// due retransmission timeouts.
    pub fn expire(&mut self, now_ns: u64) {
        while let Some(&Reverse((t, kind, slot, gen))) = self.heap.peek() {
            if t > now_ns {
                break;
            }
            self.heap.pop();
            let Some(qp) = self.slots[slot].as_mut().filter(|q| q.gen == gen) else {
                continue;
            };
            match kind {
                Kind::Pace => self.ready.push_back((slot, gen)),
                Kind::Rto => match qp.rto_deadline {
                    Some(d) if d <= t => {
                        self.stats.timeouts += 1;
                        qp.gbn.go_back();
                        let next = t.saturating_add(self.cfg.rto_ns);
                        qp.rto_deadline = Some(next);
                        self.heap.push(Reverse((next, Kind::Rto, slot, gen)));
                        self.went_back(slot, now_ns);
                    }
                    Some(d) => self.heap.push(Reverse((d, Kind::Rto, slot, gen))),
                    None => qp.rto_in_heap = false,
                },
            }
        }
    }

    /// The next packet to send at `now_ns`, if the NIC is free and a QP is
    /// ready (call [`expire`](Self::expire) first).
    pub fn pop_departure(&mut self, now_ns: u64) -> Option<Departure> {
        if self.nic_free_ns > now_ns {
            return None;
        }
        while let Some((slot, gen)) = self.ready.pop_front() {
            let Some(qp) = self.slots[slot].as_mut().filter(|q| q.gen == gen) else {
                continue;
            };
            if !qp.gbn.has_data() {
                qp.scheduled = false;
                continue;
            }
            let params = &self.cc.params;
            let depart = qp
                .next_avail_ns
                .max(self.nic_free_ns)
                .max(now_ns.saturating_sub(MAX_CATCH_UP_NS));
            qp.cc.advance(params, depart);
            // `RdmaQueuePair::IsWinBound`: bytes in flight against the
            // window at the current rate; an ACK wakes the QP.
            if let Some(win) = self.cc.qp.window(qp.cc.rate(), self.line_rate) {
                let inflight = qp.gbn.byte_of(qp.gbn.snd_nxt()) - qp.gbn.byte_of(qp.gbn.snd_una());
                if inflight >= win {
                    qp.scheduled = false;
                    self.stats.window_stalls += 1;
                    continue;
                }
            }
            let Some(segment) = qp.gbn.next_segment() else {
                qp.scheduled = false;
                continue;
            };
            let block = match self.cc.kind().feedback() {
                Feedback::Ecn => DataBlock::None,
                Feedback::Int => DataBlock::Collect(self.cc.int_hops),
                Feedback::Timestamp => DataBlock::Timestamp(now_ns),
            };
            let bytes = frame_bytes(&segment) + block.len();
            qp.next_avail_ns = depart + tx_ns(bytes, qp.cc.rate());
            self.nic_free_ns = depart + tx_ns(bytes, self.line_rate);
            if qp.timed.is_none() && !segment.retransmission {
                qp.timed = Some((segment.psn, now_ns));
            }
            if qp.rto_deadline.is_none() {
                qp.rto_deadline = Some(now_ns.saturating_add(self.cfg.rto_ns));
            }
            if !qp.rto_in_heap {
                qp.rto_in_heap = true;
                let d = qp.rto_deadline.unwrap_or(now_ns);
                self.heap.push(Reverse((d, Kind::Rto, slot, gen)));
            }
            if qp.gbn.has_data() {
                self.heap
                    .push(Reverse((qp.next_avail_ns, Kind::Pace, slot, gen)));
            } else {
                qp.scheduled = false;
            }
            self.stats.packets += 1;
            self.stats.retransmissions += u64::from(segment.retransmission);
            return Some(Departure {
                qpn: qp.flow.qpn,
                tag: qp.flow.tag,
                dst: qp.flow.dst,
                sport: qp.flow.sport,
                va: qp.flow.va,
                size: qp.flow.size,
                segment,
                block,
            });
        }
        None
    }

    /// When something is next due: a pacing time, a timeout, or the NIC
    /// becoming free while QPs are ready.
    pub fn next_deadline(&self) -> Option<u64> {
        let heap = self.heap.peek().map(|Reverse((t, ..))| *t);
        let nic = (!self.ready.is_empty()).then_some(self.nic_free_ns);
        match (heap, nic) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The current rate of `qpn`'s QP, bit/s.
    pub fn rate(&self, qpn: u32) -> Option<f64> {
        self.cc(qpn).map(Cc::rate)
    }

    /// The CC state of `qpn`'s QP, as of its last event (DCQCN's timers
    /// run lazily: at its next departure or ACK).
    pub fn cc(&self, qpn: u32) -> Option<&Cc> {
        let &slot = self.by_qpn.get(&qpn)?;
        self.slots[slot].as_ref().map(|q| &q.cc)
    }

    /// The reaction point of `qpn`'s QP if it runs DCQCN.
    pub fn dcqcn(&self, qpn: u32) -> Option<&Dcqcn> {
        match self.cc(qpn)? {
            Cc::Dcqcn(d) => Some(d),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::cc::{CcParams, QpSetup};
    use super::*;
    use std::net::Ipv4Addr;

    fn core(line_rate: f64) -> SenderCore {
        SenderCore::new(SenderConfig {
            dcqcn: DcqcnParams {
                line_rate,
                ..DcqcnParams::default()
            },
            payload: 1000,
            rto_ns: 1_000_000_000,
        })
    }

    fn flow(qpn: u32, size: u64, arrival_ns: u64) -> NewFlow {
        NewFlow {
            qpn,
            size,
            arrival_ns,
            tag: qpn as usize,
            dst: SocketAddrV4::new(Ipv4Addr::new(10, 8, 0, 2), 4791),
            sport: 49152,
            va: 0,
        }
    }

    /// Drives the core at `now` until nothing more leaves.
    fn drain(c: &mut SenderCore, now: u64) -> Vec<(u32, u32)> {
        c.expire(now);
        std::iter::from_fn(|| c.pop_departure(now))
            .map(|d| (d.qpn, d.segment.psn))
            .collect()
    }

    #[test]
    fn frame_sizes() {
        // 14 + 20 + 8 + 12 + 16 + 1000 + 4 = 1074 for a First of 1000 bytes.
        let mut g = GbnSender::new(2001, 1000).unwrap();
        assert_eq!(frame_bytes(&g.next_segment().unwrap()), 1074);
        assert_eq!(frame_bytes(&g.next_segment().unwrap()), 1058);
        // Last of 1 byte: 54 + 1 + 3 pad + 4.
        assert_eq!(frame_bytes(&g.next_segment().unwrap()), 62);
    }

    #[test]
    fn paces_at_the_rate_and_shares_the_nic_round_robin() {
        // Line rate 8 Gbit/s = 1 byte/ns: a 1074-byte First takes 1074 ns,
        // a 1058-byte Middle 1058 ns, at the QP's rate too (Rc = line).
        let mut c = core(8e9);
        c.add_flow(flow(7, 3000, 0)).unwrap();
        assert_eq!(drain(&mut c, 0), vec![(7, 0)]);
        assert_eq!(c.next_deadline(), Some(1074));
        assert_eq!(drain(&mut c, 1073), vec![]);
        assert_eq!(drain(&mut c, 1074), vec![(7, 1)]);
        assert_eq!(drain(&mut c, 1074 + 1058), vec![(7, 2)]);
        assert_eq!(c.next_deadline(), Some(1_000_000_000), "only the RTO left");

        // Two QPs arriving together: the NIC alternates between them.
        let mut c = core(8e9);
        c.add_flow(flow(1, 3000, 0)).unwrap();
        c.add_flow(flow(2, 3000, 0)).unwrap();
        let mut order = Vec::new();
        let mut now = 0;
        while order.len() < 6 {
            order.extend(drain(&mut c, now));
            now = c.next_deadline().unwrap();
        }
        assert_eq!(order, vec![(1, 0), (2, 0), (1, 1), (2, 1), (1, 2), (2, 2)]);
        assert_eq!(c.stats().packets, 6);
    }

    #[test]
    fn acks_complete_naks_go_back_and_echoes_cut_the_rate() {
        let mut c = core(8e9);
        c.add_flow(flow(3, 3000, 0)).unwrap();
        let mut now = 0;
        let mut sent = Vec::new();
        while sent.len() < 3 {
            sent.extend(drain(&mut c, now));
            now = c.next_deadline().unwrap();
        }
        now = 10_000;
        assert_eq!(c.on_ack(now, 3, 1, false, true), None);
        // NAK 1: PSN 1 and 2 again.
        assert_eq!(c.on_ack(now + 1, 3, 1, true, false), None);
        let again = drain(&mut c, now + 1);
        assert_eq!(again, vec![(3, 1)]);
        let s = c.stats();
        assert_eq!((s.naks, s.ecn_echoes, s.retransmissions), (1, 1, 1));
        // The echo's decrease 4 us + 1 ns later halves Rc (alpha = 1).
        c.expire(now + 5_001);
        c.on_ack(now + 5_001, 3, 2, false, false);
        assert_eq!(c.rate(3), Some(4e9));
        let more = drain(&mut c, now + 100_000);
        assert_eq!(more, vec![(3, 2)]);
        let done = c.on_ack(now + 200_000, 3, 3, false, false).unwrap();
        assert_eq!(done.fct_ns, now + 200_000);
        // PSN 0 sent at 0, first ACK covering it at 10 us.
        assert_eq!(done.min_rtt_ns, Some(10_000));
        assert_eq!(c.active(), 0);
        assert_eq!(c.stats().rate_cuts, 1);
    }

    /// A core at 100G running `params` with the worked examples' QP
    /// (tests/cc_hand_worked.rs): a 100 KB window following the rate, an
    /// 8 us base RTT; 1000-byte payloads.
    fn cc_core(params: CcParams, win_bytes: u64) -> SenderCore {
        let cfg = SenderConfig {
            dcqcn: DcqcnParams::default(),
            payload: 1000,
            rto_ns: 1_000_000_000,
        };
        let qp = QpSetup {
            win_bytes,
            base_rtt_ns: 8_000,
            var_win: true,
            mtu: 1000,
        };
        SenderCore::with_cc(
            cfg,
            CcConfig {
                params,
                qp,
                int_hops: 5,
            },
        )
    }

    /// Releases departures (at each next deadline from `*now`) until
    /// `n` have left in all; returns them.
    fn send_n(c: &mut SenderCore, now: &mut u64, n: usize) -> Vec<Departure> {
        let mut out = Vec::new();
        while out.len() < n {
            c.expire(*now);
            while out.len() < n {
                match c.pop_departure(*now) {
                    Some(d) => out.push(d),
                    None => break,
                }
            }
            if out.len() < n {
                *now = c.next_deadline().unwrap().max(*now + 1);
            }
        }
        out
    }

    fn wire_hop(
        ts_ns: u32,
        tx_bytes: u32,
        qlen_bytes: u32,
        link_rate_kbps: u32,
    ) -> lcmp_wire::IntHop {
        lcmp_wire::IntHop {
            link_rate_kbps,
            qlen_bytes,
            tx_bytes,
            ts_ns,
        }
    }

    #[test]
    fn hpcc_reacts_to_echoed_hops_as_the_worked_example() {
        use super::super::hpcc::HpccParams;
        let mut c = cc_core(CcParams::Hpcc(HpccParams::default()), 100_000);
        c.add_flow(flow(9, 100_000, 0)).unwrap();
        let mut now = 0;
        // 20 packets out (snd_nxt = 20_000 bytes), each with an empty
        // collect block of 5 slots: 4 + 5 x 16 = 84 bytes on the frame.
        let first = send_n(&mut c, &mut now, 20);
        assert_eq!(first[0].block, DataBlock::Collect(5));
        // First: 1074 + 84 (tests above: 1074 without the block).
        assert_eq!(first[0].frame_bytes(), 1158);
        let echo = |hops: &[lcmp_wire::IntHop]| {
            let mut b = [0u8; MAX_INT_BLOCK];
            let n = lcmp_wire::write_echo(&mut b, hops, false).unwrap();
            b[..n].to_vec()
        };
        // The hops of tests/cc_hand_worked.rs's
        // hpcc_full_updates_and_fast_reactions, as the wire carries them
        // (100G = 100_000_000 kbit/s, 25G = 25_000_000).
        let (a, b) = (100_000_000, 25_000_000);
        // E1: ack 1000 bytes (PSN 1), snd_nxt 20_000: stored, rate 100G.
        let e1 = echo(&[wire_hop(1_000_000, 0, 0, a), wire_hop(1_000_500, 0, 0, b)]);
        c.on_ack_with(now, 9, 1, false, false, IntBlock::parse(&e1).ok());
        assert_eq!(c.rate(9), Some(100e9));
        // E2: ack 2000 (PSN 2), snd_nxt 21_000: a fast reaction to 95.05G.
        send_n(&mut c, &mut now, 1);
        let e2 = echo(&[
            wire_hop(1_002_000, 25_000, 40_000, a),
            wire_hop(1_002_500, 3_125, 0, b),
        ]);
        c.on_ack_with(now, 9, 2, false, false, IntBlock::parse(&e2).ok());
        let r = c.rate(9).unwrap();
        assert!((r - 95.05e9).abs() < 1.0, "{r}");
        // E3: ack 21_000 (PSN 21), snd_nxt 45_000: a full update to
        // 100G x 0.95 / 1.2 + 50M = 79.21666...G.
        send_n(&mut c, &mut now, 24);
        let e3 = echo(&[
            wire_hop(1_006_000, 75_000, 50_000, a),
            wire_hop(1_006_500, 15_625, 0, b),
        ]);
        c.on_ack_with(now, 9, 21, false, false, IntBlock::parse(&e3).ok());
        let r = c.rate(9).unwrap();
        assert!((r - 79_216_666_666.666_67).abs() < 1.0, "{r}");
        let s = c.stats();
        assert_eq!(
            (s.int_echoes, s.cc_updates, s.cc_fast_reactions, s.rate_cuts),
            (3, 1, 1, 0)
        );
        // An ACK without an echo (a duplicate's re-ACK) is not HPCC's.
        c.on_ack(now, 9, 21, false, false);
        assert_eq!(c.stats().cc_updates, 1);
    }

    #[test]
    fn timely_samples_now_minus_the_echoed_send_time() {
        use super::super::timely::TimelyParams;
        let mut c = cc_core(CcParams::Timely(TimelyParams::default()), 0);
        c.add_flow(flow(4, 3000, 0)).unwrap();
        let mut now = 0;
        let d0 = send_n(&mut c, &mut now, 1);
        // The send time is the clock at the departure: 0.
        assert_eq!(d0[0].block, DataBlock::Timestamp(0));
        assert_eq!(d0[0].frame_bytes(), 1074 + 12);
        let echo = |t: u64| {
            let mut b = [0u8; 12];
            lcmp_wire::write_timestamp(&mut b, IntKind::TimestampEcho, t).unwrap();
            b
        };
        // At 10_000 the echo of 0: RTT 10_000; the first sample is only
        // recorded (lastUpdateSeq = snd_nxt = 1000 bytes).
        let e = echo(0);
        c.on_ack_with(10_000, 4, 1, false, false, IntBlock::parse(&e).ok());
        let d1 = send_n(&mut c, &mut now, 1);
        let DataBlock::Timestamp(t1) = d1[0].block else {
            panic!("{:?}", d1[0].block);
        };
        // PSN 1's echo 18_000 ns after it left: ack 2000 > 1000, an
        // update. diff = 0.875 x (18_000 - 10_000) = 7000 ns; RTT below
        // T_low (50 us): an increase, the rate stays at the line (cap).
        let e = echo(t1);
        c.on_ack_with(t1 + 18_000, 4, 2, false, false, IntBlock::parse(&e).ok());
        let Some(Cc::Timely(t)) = c.cc(4) else {
            panic!("not timely");
        };
        assert_eq!((t.rtt_diff(), t.updates(), t.rate()), (7000.0, 1, 100e9));
        assert_eq!(c.stats().timestamp_echoes, 2);
    }

    #[test]
    fn a_full_window_holds_the_qp_until_an_ack() {
        use super::super::dctcp::DctcpParams;
        // DCTCP at the line rate with a 2000-byte window: two packets.
        let mut c = cc_core(CcParams::Dctcp(DctcpParams::default()), 2000);
        c.add_flow(flow(5, 5000, 0)).unwrap();
        let mut now = 0;
        let sent = send_n(&mut c, &mut now, 2);
        assert_eq!(sent[1].block, DataBlock::None);
        // PSN 2 is due but 2000 bytes are in flight: nothing leaves, and
        // only the timeout is left to wake the QP.
        let later = now + 100_000;
        assert_eq!(drain(&mut c, later), vec![]);
        assert_eq!(c.stats().window_stalls, 1);
        assert_eq!(c.next_deadline(), Some(1_000_000_000));
        // ACK of PSN 0 (no mark): 1000 in flight, PSN 2 leaves.
        c.on_ack(later, 5, 1, false, false);
        assert_eq!(drain(&mut c, later), vec![(5, 2)]);
    }

    #[test]
    fn timeout_goes_back_without_progress() {
        let mut c = core(8e9);
        c.add_flow(flow(4, 1000, 0)).unwrap();
        assert_eq!(drain(&mut c, 0), vec![(4, 0)]);
        assert_eq!(drain(&mut c, 999_999_999), vec![]);
        assert_eq!(drain(&mut c, 1_000_000_000), vec![(4, 0)]);
        let s = c.stats();
        assert_eq!((s.timeouts, s.retransmissions), (1, 1));
        assert!(c.add_flow(flow(4, 10, 0)).is_err(), "QP number in use");
    }
}

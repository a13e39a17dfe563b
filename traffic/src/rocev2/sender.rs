//! The sending host's queue pairs and NIC, without sockets: which packet
//! leaves when.
//!
//! Every flow is one queue pair (QP) with its DCQCN state and go-back-N
//! window. A QP's next packet may leave at its previous departure + that
//! packet's bytes / Rc (Rc as it was at the departure, as the simulator
//! computes `m_nextAvail`); the host NIC serializes packets at the line
//! rate on one host-wide virtual clock; QPs whose time has come wait in a
//! FIFO and are served round-robin. Times are virtual (the departures the
//! NIC would have made), so a late wake-up of the event loop does not
//! lower the rate, but by at most [`MAX_CATCH_UP_NS`]: a loop that fell
//! further behind does not burst to make up for it.
//!
//! One binary heap holds every QP's pacing deadline and retransmission
//! timeout (stale entries are skipped by generation), so thousands of QPs
//! cost O(log n) per packet and nothing while idle; DCQCN's timers are
//! evaluated lazily at the QP's events ([`super::dcqcn`]).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::net::SocketAddrV4;

use super::dcqcn::{Dcqcn, DcqcnParams};
use super::gbn::{GbnSender, Segment};
use super::wire::{Message, Reth, BTH_LEN, ICRC_LEN, IPV4_LEN, RETH_LEN, UDP_LEN};

/// How far behind real time a departure may be dated.
pub const MAX_CATCH_UP_NS: u64 = 200_000;
/// Ethernet header bytes counted in every frame's serialization.
pub const ETHERNET_HEADER: usize = 14;

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
}

impl Departure {
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
    pub rate_cuts: u64,
    pub timeouts: u64,
}

#[derive(Debug)]
struct Qp {
    flow: NewFlow,
    gen: u64,
    gbn: GbnSender,
    cc: Dcqcn,
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
    pub fn new(cfg: SenderConfig) -> SenderCore {
        SenderCore {
            cfg,
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

    /// QPs with a flow in progress.
    pub fn active(&self) -> usize {
        self.by_qpn.len()
    }

    /// Totals; rate cuts include the active QPs'.
    pub fn stats(&self) -> SenderStats {
        let mut s = self.stats;
        s.rate_cuts += self
            .slots
            .iter()
            .flatten()
            .map(|q| q.cc.rate_cuts())
            .sum::<u64>();
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
            cc: Dcqcn::new(&self.cfg.dcqcn),
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
        self.stats.rate_cuts += qp.cc.rate_cuts();
        Some(qp.flow.tag)
    }

    /// An ACK or NAK for `qpn` carrying `psn` (the receiver's next expected
    /// PSN) and the ECN echo, in the simulator's order: acknowledge,
    /// completion, go-back on a NAK, then the congestion reaction.
    pub fn on_ack(
        &mut self,
        now_ns: u64,
        qpn: u32,
        psn: u32,
        nak: bool,
        ecn_echo: bool,
    ) -> Option<Completion> {
        let &slot = self.by_qpn.get(&qpn)?;
        let rto = self.cfg.rto_ns;
        let params = self.cfg.dcqcn;
        let qp = self.slots[slot].as_mut()?;
        qp.cc.advance(&params, now_ns);
        if ecn_echo {
            self.stats.ecn_echoes += 1;
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
        if ecn_echo {
            if let Some(qp) = self.slots[slot].as_mut() {
                qp.cc.on_congestion(&params, now_ns);
            }
        }
        None
    }

    /// A CNP for `qpn`.
    pub fn on_cnp(&mut self, now_ns: u64, qpn: u32) {
        let params = self.cfg.dcqcn;
        if let Some(qp) = self.by_qpn.get(&qpn).and_then(|&s| self.slots[s].as_mut()) {
            self.stats.cnps += 1;
            qp.cc.on_congestion(&params, now_ns);
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
        if !qp.scheduled && qp.gbn.has_data() {
            qp.scheduled = true;
            let at = qp.next_avail_ns.max(now_ns);
            qp.next_avail_ns = at;
            self.heap.push(Reverse((at, Kind::Pace, slot, qp.gen)));
        }
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
            let Some(segment) = qp.gbn.next_segment() else {
                qp.scheduled = false;
                continue;
            };
            let params = &self.cfg.dcqcn;
            let depart = qp
                .next_avail_ns
                .max(self.nic_free_ns)
                .max(now_ns.saturating_sub(MAX_CATCH_UP_NS));
            qp.cc.advance(params, depart);
            let bytes = frame_bytes(&segment);
            qp.next_avail_ns = depart + tx_ns(bytes, qp.cc.rate());
            self.nic_free_ns = depart + tx_ns(bytes, params.line_rate);
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
        self.dcqcn(qpn).map(Dcqcn::rate)
    }

    /// The reaction point of `qpn`'s QP, as of its last event (timers run
    /// lazily: at its next departure or ACK).
    pub fn dcqcn(&self, qpn: u32) -> Option<&Dcqcn> {
        let &slot = self.by_qpn.get(&qpn)?;
        self.slots[slot].as_ref().map(|q| &q.cc)
    }
}

#[cfg(test)]
mod tests {
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

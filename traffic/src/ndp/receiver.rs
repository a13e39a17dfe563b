//! The receiving host's NDP flows and its pull pacer, without sockets.
//!
//! As htsim's `NdpSink` and `NdpPullPacer`:
//!
//! - Every data packet is answered at once: whole, by an ACK; trimmed to
//!   its headers by a switch, by a NACK (the sender then queues it for
//!   retransmission). Both carry the flow's pull counter as it is then.
//! - Every data packet of a flow not yet complete, whole or trimmed,
//!   queues one pull. One pacer per host releases the pulls of all its
//!   flows, round-robin over the flows with pulls waiting (NDP's fair pull
//!   queue), one per [`ReceiverConfig::pull_gap_ps`]: the time a full data
//!   frame takes on the host's link, so the packets they pull keep the
//!   host's downlink busy exactly. A pull finding the pacer idle for at
//!   least that long leaves at once. Each released pull raises its flow's
//!   counter by one, and carries it. (htsim sends the first pull in the
//!   ACK when the pacer is idle; here it is a PULL packet of its own, at
//!   the same instant. opera-sim gives every flow a pacer of its own; NDP,
//!   and this, one per receiving host.)
//! - Once every packet of a flow is in, its waiting pulls are dropped
//!   (htsim's `release_pulls`): they would pull nothing.
//! - Payload bytes are counted once per packet (duplicates are answered
//!   and counted as such).
//!
//! The pacer keeps its schedule in picoseconds, so pulls do not drift from
//! the link's rate when a frame's time is not a whole number of
//! nanoseconds; a pull is due at the first nanosecond at or after its
//! slot. A caller that polls late gets its pulls at most one gap in
//! arrears (no burst to make up for lost time).
//!
//! State per flow: a bit per packet while it runs (dropped when it
//! completes), keyed by (sender, flow id); nothing is allocated per
//! packet.

use std::collections::{HashMap, VecDeque};
use std::net::Ipv4Addr;

use super::{NdpParams, MAX_PACKETS};

/// How the receiver paces its pulls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReceiverConfig {
    /// Between two pulls, picoseconds.
    pub pull_gap_ps: u64,
}

impl ReceiverConfig {
    /// One pull per full data frame ([`NdpParams::full_frame_bytes`]) at
    /// the host link's `rate_bps` (0: unshaped, no pacing), rounded to the
    /// nearest picosecond.
    pub fn for_link(params: &NdpParams, rate_bps: u64) -> ReceiverConfig {
        let bits_ps = u128::from(params.full_frame_bytes()) * 8 * 1_000_000_000_000;
        let gap = match u128::from(rate_bps) {
            0 => 0,
            r => (bits_ps + r / 2) / r,
        };
        ReceiverConfig {
            pull_gap_ps: u64::try_from(gap).unwrap_or(u64::MAX),
        }
    }
}

/// The answer to a data packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    Ack,
    Nack,
}

/// An answer to send to the flow's sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answer {
    pub reply: Reply,
    pub flow: u32,
    /// The packet answered.
    pub seq: u32,
    /// The flow's pull counter (pulls released so far).
    pub pulls: u32,
}

/// A pull to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pull {
    /// The flow's sender.
    pub to: Ipv4Addr,
    /// The UDP source port its data comes from.
    pub sport: u16,
    pub flow: u32,
    /// The flow's pull counter, this pull included.
    pub pulls: u32,
    /// Its slot in the pacer's schedule, ns.
    pub due_ns: u64,
}

/// The receiver's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct RxStats {
    /// Data packets received (whole or trimmed, malformed included).
    pub data_packets: u64,
    /// Of those, trimmed.
    pub trimmed: u64,
    /// Whole packets received before, or for a complete flow.
    pub duplicates: u64,
    /// Payload bytes delivered, each packet's once.
    pub bytes: u64,
    pub acks_sent: u64,
    pub nacks_sent: u64,
    pub pulls_sent: u64,
    /// Pulls dropped because their flow completed.
    pub pulls_dropped: u64,
    pub flows_completed: u64,
    /// Data packets contradicting themselves or their flow (packet number
    /// out of range, a size of 0 or above [`MAX_PACKETS`] packets, another
    /// size than the flow's), not answered.
    pub malformed: u64,
}

type Key = (Ipv4Addr, u32);

#[derive(Debug)]
struct RxFlow {
    packets: u32,
    /// A bit per packet received whole; empty once complete.
    received: Vec<u64>,
    got: u32,
    bytes: u64,
    complete: bool,
    /// Pulls released, and waiting.
    released: u32,
    pending: u32,
    /// In the pacer's round-robin ring.
    in_ring: bool,
    sport: u16,
    last_ns: u64,
}

impl RxFlow {
    fn new(packets: u32, sport: u16, now_ns: u64) -> RxFlow {
        RxFlow {
            packets,
            received: vec![0; (packets as usize).div_ceil(64)],
            got: 0,
            bytes: 0,
            complete: false,
            released: 0,
            pending: 0,
            in_ring: false,
            sport,
            last_ns: now_ns,
        }
    }
}

/// The host's pull pacer: flows with pulls waiting, round-robin, and the
/// schedule.
#[derive(Debug)]
struct Pacer {
    gap_ps: u64,
    ring: VecDeque<Key>,
    /// Pulls waiting, all flows.
    pending: u64,
    /// The earliest time the next pull may leave, ps.
    free_ps: u64,
}

impl Pacer {
    fn queue(&mut self, key: Key, f: &mut RxFlow, now_ns: u64) {
        if self.pending == 0 {
            // An idle pacer: a pull may leave now, if the last one left at
            // least a gap ago.
            self.free_ps = self.free_ps.max(now_ns.saturating_mul(1000));
        }
        self.pending += 1;
        f.pending += 1;
        if !f.in_ring {
            f.in_ring = true;
            self.ring.push_back(key);
        }
    }

    fn flush(&mut self, f: &mut RxFlow) -> u32 {
        let n = f.pending;
        self.pending -= u64::from(n);
        f.pending = 0;
        n
    }
}

/// See the module docs.
#[derive(Debug)]
pub struct NdpReceiver {
    flows: HashMap<Key, RxFlow>,
    pacer: Pacer,
    pub stats: RxStats,
}

impl NdpReceiver {
    pub fn new(cfg: ReceiverConfig) -> NdpReceiver {
        NdpReceiver {
            flows: HashMap::new(),
            pacer: Pacer {
                gap_ps: cfg.pull_gap_ps,
                ring: VecDeque::with_capacity(1024),
                pending: 0,
                free_ps: 0,
            },
            stats: RxStats::default(),
        }
    }

    /// Flows held (running, or complete and not yet expired).
    pub fn held(&self) -> usize {
        self.flows.len()
    }

    /// Payload bytes delivered of flow `flow` from `src`, while held.
    pub fn delivered(&self, src: Ipv4Addr, flow: u32) -> Option<u64> {
        self.flows.get(&(src, flow)).map(|f| f.bytes)
    }

    /// Pulls waiting, all flows.
    pub fn pending_pulls(&self) -> u64 {
        self.pacer.pending
    }

    /// Drops flows idle since before `cutoff_ns` with no pulls waiting.
    pub fn expire(&mut self, cutoff_ns: u64) {
        self.flows
            .retain(|_, f| f.last_ns >= cutoff_ns || f.pending > 0);
    }

    /// A data packet of flow `flow` from `src` (UDP source port `sport`):
    /// packet `seq` of `packets`, `trimmed` or carrying `payload_len`
    /// bytes. The answer to send, or `None` for a malformed packet.
    #[allow(clippy::too_many_arguments)]
    pub fn on_data(
        &mut self,
        now_ns: u64,
        src: Ipv4Addr,
        sport: u16,
        flow: u32,
        seq: u32,
        packets: u32,
        trimmed: bool,
        payload_len: u32,
    ) -> Option<Answer> {
        self.stats.data_packets += 1;
        if packets == 0 || packets > MAX_PACKETS || seq >= packets {
            self.stats.malformed += 1;
            return None;
        }
        let key = (src, flow);
        let f = self
            .flows
            .entry(key)
            .or_insert_with(|| RxFlow::new(packets, sport, now_ns));
        if f.packets != packets {
            if !f.complete {
                self.stats.malformed += 1;
                return None;
            }
            // A new flow under the id of a completed one (ids wrapped).
            *f = RxFlow::new(packets, sport, now_ns);
        }
        f.last_ns = now_ns;
        let reply = if trimmed {
            self.stats.trimmed += 1;
            self.stats.nacks_sent += 1;
            Reply::Nack
        } else {
            let (word, bit) = ((seq / 64) as usize, 1u64 << (seq % 64));
            match f.received.get_mut(word) {
                Some(w) if *w & bit == 0 => {
                    *w |= bit;
                    f.got += 1;
                    f.bytes += u64::from(payload_len);
                    self.stats.bytes += u64::from(payload_len);
                }
                // Received before, or the flow is complete.
                _ => self.stats.duplicates += 1,
            }
            self.stats.acks_sent += 1;
            Reply::Ack
        };
        if !f.complete {
            if f.got == f.packets {
                f.complete = true;
                f.received = Vec::new();
                self.stats.flows_completed += 1;
                self.stats.pulls_dropped += u64::from(self.pacer.flush(f));
            } else {
                self.pacer.queue(key, f, now_ns);
            }
        }
        Some(Answer {
            reply,
            flow,
            seq,
            pulls: f.released,
        })
    }

    /// When the next pull is due, if any waits, ns.
    pub fn next_pull_ns(&self) -> Option<u64> {
        (self.pacer.pending > 0).then(|| self.pacer.free_ps.div_ceil(1000))
    }

    /// The next pull, if one is due at `now_ns`.
    pub fn pop_pull(&mut self, now_ns: u64) -> Option<Pull> {
        let due_ns = self.next_pull_ns().filter(|&t| t <= now_ns)?;
        let p = &mut self.pacer;
        while let Some(key) = p.ring.pop_front() {
            let Some(f) = self.flows.get_mut(&key) else {
                continue;
            };
            f.in_ring = false;
            if f.pending == 0 {
                continue;
            }
            f.pending -= 1;
            p.pending -= 1;
            f.released = f.released.saturating_add(1);
            if f.pending > 0 {
                f.in_ring = true;
                p.ring.push_back(key);
            }
            let late_ps = now_ns.saturating_mul(1000).saturating_sub(p.gap_ps);
            p.free_ps = p.free_ps.max(late_ps).saturating_add(p.gap_ps);
            self.stats.pulls_sent += 1;
            return Some(Pull {
                to: key.0,
                sport: f.sport,
                flow: key.1,
                pulls: f.released,
                due_ns,
            });
        }
        // Every flow in the ring is gone: nothing waits after all.
        p.pending = 0;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 2);
    const B: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 3);

    fn params(payload: u32) -> NdpParams {
        NdpParams {
            payload,
            ..NdpParams::default()
        }
    }

    /// Every pull due by `until`, polling at each due time: (due, flow,
    /// counter).
    fn pulls_until(r: &mut NdpReceiver, until: u64) -> Vec<(u64, u32, u32)> {
        let mut out = Vec::new();
        while let Some(t) = r.next_pull_ns().filter(|&t| t <= until) {
            let p = r.pop_pull(t).unwrap();
            assert_eq!(p.due_ns, t);
            out.push((t, p.flow, p.pulls));
        }
        out
    }

    fn data(r: &mut NdpReceiver, t: u64, src: Ipv4Addr, flow: u32, seq: u32, n: u32) -> Answer {
        r.on_data(t, src, 50000, flow, seq, n, false, 1000).unwrap()
    }

    #[test]
    fn the_gap_is_a_full_frame_at_the_link_rate() {
        // 58 + 1000 = 1058 bytes = 8464 bits: 1058 ns at 8 Gbit/s, 846.4
        // ns at 10 Gbit/s; 1500 bytes at 10 Gbit/s: 1200 ns.
        assert_eq!(
            ReceiverConfig::for_link(&params(1000), 8_000_000_000).pull_gap_ps,
            1_058_000
        );
        assert_eq!(
            ReceiverConfig::for_link(&params(1000), 10_000_000_000).pull_gap_ps,
            846_400
        );
        assert_eq!(
            ReceiverConfig::for_link(&NdpParams::default(), 10_000_000_000).pull_gap_ps,
            1_200_000
        );
        assert_eq!(ReceiverConfig::for_link(&params(1000), 0).pull_gap_ps, 0);
    }

    #[test]
    fn packets_arriving_together_are_pulled_one_frame_time_apart() {
        let mut r = NdpReceiver::new(ReceiverConfig::for_link(&params(1000), 8_000_000_000));
        // Four packets of a 10-packet flow at 5 us: the first pull at
        // once, the others 1058 ns apart.
        for seq in 0..4 {
            data(&mut r, 5_000, A, 1, seq, 10);
        }
        assert_eq!(r.pending_pulls(), 4);
        assert_eq!(
            pulls_until(&mut r, 100_000),
            vec![(5_000, 1, 1), (6_058, 1, 2), (7_116, 1, 3), (8_174, 1, 4)]
        );
        // The pacer has been idle since 9232 (8174 + 1058): a packet at
        // 20 us is pulled at once; one at 20.5 us waits for 21058.
        data(&mut r, 20_000, A, 1, 4, 10);
        assert_eq!(pulls_until(&mut r, 20_000), vec![(20_000, 1, 5)]);
        data(&mut r, 20_500, A, 1, 5, 10);
        assert_eq!(r.pop_pull(21_057), None);
        assert_eq!(r.next_pull_ns(), Some(21_058));
        assert_eq!(pulls_until(&mut r, 100_000), vec![(21_058, 1, 6)]);
        assert_eq!(r.stats.pulls_sent, 6);
    }

    #[test]
    fn a_gap_of_a_fraction_of_a_nanosecond_does_not_drift() {
        // 846.4 ns at 10 Gbit/s: slots at 1000, 1846.4, 2692.8 ns, 3539.2:
        // due at the nanoseconds 1000, 1847, 2693, 3540.
        let mut r = NdpReceiver::new(ReceiverConfig::for_link(&params(1000), 10_000_000_000));
        for seq in 0..4 {
            data(&mut r, 1_000, A, 9, seq, 10);
        }
        let due: Vec<u64> = pulls_until(&mut r, 10_000)
            .into_iter()
            .map(|p| p.0)
            .collect();
        assert_eq!(due, vec![1_000, 1_847, 2_693, 3_540]);
    }

    #[test]
    fn flows_share_the_pacer_round_robin() {
        let mut r = NdpReceiver::new(ReceiverConfig::for_link(&params(1000), 8_000_000_000));
        // Three packets of flow 1 from A, then two of flow 2 from B, all at
        // 0: A, B, A, B, A, 1058 ns apart.
        for seq in 0..3 {
            data(&mut r, 0, A, 1, seq, 10);
        }
        for seq in 0..2 {
            data(&mut r, 0, B, 2, seq, 10);
        }
        assert_eq!(
            pulls_until(&mut r, 100_000),
            vec![
                (0, 1, 1),
                (1_058, 2, 1),
                (2_116, 1, 2),
                (3_174, 2, 2),
                (4_232, 1, 3)
            ]
        );
        // The pull goes back to where the data came from.
        data(&mut r, 10_000, B, 2, 2, 10);
        let p = r.pop_pull(10_000).unwrap();
        assert_eq!((p.to, p.sport, p.flow, p.pulls), (B, 50000, 2, 3));
    }

    #[test]
    fn whole_packets_are_acked_trimmed_ones_nacked_bytes_counted_once() {
        let mut r = NdpReceiver::new(ReceiverConfig::for_link(&params(1000), 8_000_000_000));
        // A flow of 3 packets: 1000, 1000 and 500 bytes.
        let a = r.on_data(0, A, 50000, 4, 0, 3, false, 1000).unwrap();
        assert_eq!(
            a,
            Answer {
                reply: Reply::Ack,
                flow: 4,
                seq: 0,
                pulls: 0
            }
        );
        // Its pull leaves; the NACK of packet 1 (trimmed) carries counter 1.
        assert_eq!(r.pop_pull(0).map(|p| p.pulls), Some(1));
        let n = r.on_data(10, A, 50000, 4, 1, 3, true, 0).unwrap();
        assert_eq!((n.reply, n.seq, n.pulls), (Reply::Nack, 1, 1));
        let a = r.on_data(20, A, 50000, 4, 2, 3, false, 500).unwrap();
        assert_eq!(a.reply, Reply::Ack);
        // Packet 0 again: acked, not counted.
        let a = r.on_data(30, A, 50000, 4, 0, 3, false, 1000).unwrap();
        assert_eq!(a.reply, Reply::Ack);
        assert_eq!(r.delivered(A, 4), Some(1500));
        assert_eq!(r.pending_pulls(), 3);
        // Packet 1 resent whole: the flow is complete, its 3 waiting pulls
        // are dropped.
        let a = r.on_data(40, A, 50000, 4, 1, 3, false, 1000).unwrap();
        assert_eq!((a.reply, a.seq), (Reply::Ack, 1));
        assert_eq!(r.delivered(A, 4), Some(2500));
        assert_eq!(r.pending_pulls(), 0);
        assert_eq!(r.pop_pull(1_000_000), None);
        // After completion: whole copies acked as duplicates, trimmed ones
        // nacked, no pull.
        assert_eq!(
            r.on_data(50, A, 50000, 4, 2, 3, false, 500).unwrap().reply,
            Reply::Ack
        );
        assert_eq!(
            r.on_data(60, A, 50000, 4, 2, 3, true, 0).unwrap().reply,
            Reply::Nack
        );
        assert_eq!(r.pending_pulls(), 0);
        let s = r.stats;
        assert_eq!(
            (
                s.data_packets,
                s.trimmed,
                s.duplicates,
                s.bytes,
                s.acks_sent,
                s.nacks_sent
            ),
            (7, 2, 2, 2500, 5, 2)
        );
        assert_eq!(
            (s.flows_completed, s.pulls_sent, s.pulls_dropped),
            (1, 1, 3)
        );
    }

    #[test]
    fn contradictory_packets_are_refused() {
        let mut r = NdpReceiver::new(ReceiverConfig::for_link(&params(1000), 8_000_000_000));
        assert_eq!(r.on_data(0, A, 1, 1, 3, 3, false, 10), None);
        assert_eq!(r.on_data(0, A, 1, 1, 0, 0, false, 10), None);
        assert_eq!(r.on_data(0, A, 1, 1, 0, MAX_PACKETS + 1, false, 10), None);
        assert!(r.on_data(0, A, 1, 1, 0, 5, false, 10).is_some());
        // Another size for a flow in progress.
        assert_eq!(r.on_data(0, A, 1, 1, 1, 6, false, 10), None);
        assert_eq!(r.stats.malformed, 4);
        assert_eq!(r.held(), 1);
        // Idle flows are dropped, those with pulls waiting kept.
        r.expire(1);
        assert_eq!(r.held(), 1);
        assert!(r.pop_pull(0).is_some());
        r.expire(1);
        assert_eq!(r.held(), 0);
    }
}

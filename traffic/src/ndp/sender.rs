//! The sending host's NDP flows, without sockets: which data packet leaves
//! next, and when a flow is done.
//!
//! As htsim's `NdpSrc`:
//!
//! - A flow that starts puts its first min(W, N) packets
//!   ([`NdpParams::initial_window`]) in line for the NIC at once; the NIC
//!   sends them at its line rate.
//! - A pull carries the receiver's pull counter for the flow: the pulls it
//!   has released so far. The sender remembers the highest counter seen;
//!   one that is higher by k lets k more packets go (so a lost pull is made
//!   up by the next, and a late one, overtaken, does nothing). Each is
//!   taken from the retransmission queue first, in the order the NACKs
//!   came, then from new data; a pull that finds neither is spent (htsim's
//!   pulls are not banked). ACKs and NACKs carry the counter too and are
//!   read the same way.
//! - A NACK (the packet reached the receiver trimmed) queues the packet
//!   for retransmission; an ACK frees it (a queued or scheduled copy of an
//!   acked packet is not sent).
//! - A packet leaves in the order the host's packets were scheduled
//!   ([`NdpSender::pop_departure`]), one host-wide line as htsim's NIC
//!   queue, when the caller's NIC is free.
//! - Retransmission timeout: a packet sent (or NACKed and still waiting
//!   for its pull) [`NdpParams::min_rto_ns`] ago and not answered since is
//!   sent again without waiting for a pull, all such packets of the flow
//!   at once, oldest first (htsim's `retransmit_packet`). htsim's RTO is
//!   max(minRTO, srtt + 4 mdev) with minRTO jittered by +-25 %; in the
//!   networks it runs the estimate is far below 1 ms, so here the RTO is
//!   minRTO itself, without jitter (no random draw). Unlike htsim, a NACKed
//!   packet keeps a timer while it waits for its pull, so a flow whose last
//!   pulls are lost still ends.
//! - The flow completes when every packet is acked ([`Completion`]: its
//!   FCT from its arrival).
//!
//! Per flow the sender keeps a state byte and a time per packet and two
//! queues (retransmissions; events in time order for the timer); per host
//! one line of scheduled packets and one heap of timer deadlines (stale
//! entries skipped by generation), so a packet costs O(1) and a timer
//! O(log flows). Nothing is allocated per packet once the queues have
//! grown to a flow's needs.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::net::Ipv4Addr;

use super::{NdpParams, MAX_PACKETS};

/// Packet states (low bits of a state byte).
const UNSENT: u8 = 0;
/// In the host's line of departures.
const SCHEDULED: u8 = 1;
/// Sent, unanswered.
const IN_FLIGHT: u8 = 2;
/// NACKed, waiting in the retransmission queue for a pull.
const QUEUED: u8 = 3;
const ACKED: u8 = 4;
const STATE: u8 = 0x0f;
/// Flag: sent at least once.
const SENT: u8 = 0x10;
/// Flag: sent more than once (no RTT sample from its ACK).
const RESENT: u8 = 0x20;

/// A flow whose arrival has come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewFlow {
    /// Its id on the wire (unique among the sender's flows in progress).
    pub id: u32,
    /// Bytes.
    pub size: u64,
    /// When it arrived (its FCT counts from here), ns.
    pub arrival_ns: u64,
    /// The caller's handle (e.g. its record index).
    pub tag: usize,
    /// The receiver.
    pub dst: Ipv4Addr,
    /// Its UDP source port.
    pub sport: u16,
}

/// A data packet to send now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Departure {
    pub id: u32,
    pub tag: usize,
    pub dst: Ipv4Addr,
    pub sport: u16,
    /// The packet's number, from 0.
    pub seq: u32,
    /// The flow's size in packets (the header's value).
    pub packets: u32,
    /// Its payload's offset in the flow, bytes.
    pub offset: u64,
    /// Its payload's length, bytes.
    pub len: u32,
    /// The flow's last packet.
    pub last: bool,
    /// Sent before.
    pub retransmission: bool,
}

/// A flow whose every packet was acked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    pub tag: usize,
    /// From its arrival to its last ACK, ns.
    pub fct_ns: u64,
    /// The smallest departure-to-ACK time of its packets sent once.
    pub min_rtt_ns: Option<u64>,
}

/// Totals over the sender's lifetime.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SenderStats {
    /// Flows started.
    pub flows_started: u64,
    /// Flows whose every packet was acked.
    pub flows_completed: u64,
    /// Data packets sent.
    pub packets: u64,
    /// Of those, sent again (after a NACK or a timeout).
    pub retransmissions: u64,
    /// ACKs, NACKs and pulls received for flows in progress.
    pub acks: u64,
    pub nacks: u64,
    pub pulls: u64,
    /// Pulls whose counter was not above the highest seen (late or
    /// duplicated).
    pub old_pulls: u64,
    /// Pull increments that found nothing to send.
    pub unused_pulls: u64,
    /// Timer expiries that resent packets, and the packets they resent.
    pub timeouts: u64,
    pub timed_out_packets: u64,
    /// Answers for no flow in progress or no packet of it (a completed
    /// flow's late answers; bad sequence numbers), ignored.
    pub stale: u64,
}

#[derive(Debug)]
struct Flow {
    flow: NewFlow,
    gen: u64,
    packets: u32,
    payload: u32,
    /// Per packet: state and flags.
    state: Vec<u8>,
    /// Per packet: its last departure (in flight) or NACK (queued), ns.
    times: Vec<u64>,
    next_new: u32,
    acked: u32,
    last_pull: u32,
    /// NACKed packets in NACK order (entries no longer QUEUED are stale).
    rtx: VecDeque<u32>,
    /// (packet, time) of every departure and NACK, in time order; an entry
    /// is live while its packet is in flight or queued with that time.
    events: VecDeque<(u32, u64)>,
    /// A timer entry for the flow is in the heap.
    timer_armed: bool,
    min_rtt_ns: Option<u64>,
}

impl Flow {
    fn live(&self, seq: u32, t: u64) -> bool {
        let s = self.state[seq as usize] & STATE;
        (s == IN_FLIGHT || s == QUEUED) && self.times[seq as usize] == t
    }

    /// Drops stale events off the front; the oldest live one's time.
    fn oldest_event(&mut self) -> Option<u64> {
        while let Some(&(seq, t)) = self.events.front() {
            if self.live(seq, t) {
                return Some(t);
            }
            self.events.pop_front();
        }
        None
    }

    /// Schedules the next packet a pull lets go: a queued retransmission,
    /// else new data; false if there is neither.
    fn schedule_one(&mut self, line: &mut VecDeque<(usize, u64, u32)>, slot: usize) -> bool {
        while let Some(seq) = self.rtx.pop_front() {
            let s = &mut self.state[seq as usize];
            if *s & STATE == QUEUED {
                *s = (*s & !STATE) | SCHEDULED;
                line.push_back((slot, self.gen, seq));
                return true;
            }
        }
        if self.next_new < self.packets {
            let seq = self.next_new;
            self.next_new += 1;
            self.state[seq as usize] = SCHEDULED;
            line.push_back((slot, self.gen, seq));
            return true;
        }
        false
    }
}

/// Flow `id`'s slot and state.
fn lookup<'a>(
    by_id: &HashMap<u32, usize>,
    slots: &'a mut [Option<Flow>],
    id: u32,
) -> Option<(usize, &'a mut Flow)> {
    let &slot = by_id.get(&id)?;
    Some((slot, slots.get_mut(slot)?.as_mut()?))
}

/// See the module docs.
#[derive(Debug)]
pub struct NdpSender {
    params: NdpParams,
    slots: Vec<Option<Flow>>,
    free: Vec<usize>,
    by_id: HashMap<u32, usize>,
    /// The host's scheduled packets: (slot, generation, packet).
    line: VecDeque<(usize, u64, u32)>,
    /// Timer deadlines: (time, slot, generation).
    timers: BinaryHeap<Reverse<(u64, usize, u64)>>,
    next_gen: u64,
    stats: SenderStats,
}

impl NdpSender {
    /// A sender with `params` (validated by the caller:
    /// [`NdpParams::validate`]).
    pub fn new(params: NdpParams) -> NdpSender {
        NdpSender {
            params,
            slots: Vec::new(),
            free: Vec::new(),
            by_id: HashMap::new(),
            line: VecDeque::with_capacity(1024),
            timers: BinaryHeap::new(),
            next_gen: 0,
            stats: SenderStats::default(),
        }
    }

    pub fn params(&self) -> &NdpParams {
        &self.params
    }

    /// Flows in progress.
    pub fn active(&self) -> usize {
        self.by_id.len()
    }

    pub fn stats(&self) -> SenderStats {
        self.stats
    }

    /// Starts a flow: its initial window goes in line for the NIC. An
    /// error (one line) if its id is in use or its size does not fit the
    /// packet format.
    pub fn add_flow(&mut self, flow: NewFlow) -> Result<(), String> {
        if self.by_id.contains_key(&flow.id) {
            return Err(format!("NDP flow id {} is still in use", flow.id));
        }
        if flow.size == 0 {
            return Err("an NDP flow of 0 bytes".into());
        }
        let payload = self.params.payload.max(1);
        let packets = self.params.packets_of(flow.size);
        if packets > u64::from(MAX_PACKETS) {
            return Err(format!(
                "an NDP flow of {} bytes is {packets} packets of {payload} bytes; at most {MAX_PACKETS}",
                flow.size
            ));
        }
        let packets = packets as u32;
        let gen = self.next_gen;
        self.next_gen += 1;
        let window = self.params.initial_window.min(packets);
        let mut f = Flow {
            flow,
            gen,
            packets,
            payload,
            state: vec![UNSENT; packets as usize],
            times: vec![0; packets as usize],
            next_new: 0,
            acked: 0,
            last_pull: 0,
            rtx: VecDeque::new(),
            events: VecDeque::with_capacity(window as usize),
            timer_armed: false,
            min_rtt_ns: None,
        };
        let slot = self.free.pop().unwrap_or(self.slots.len());
        for _ in 0..window {
            f.schedule_one(&mut self.line, slot);
        }
        if slot == self.slots.len() {
            self.slots.push(Some(f));
        } else {
            self.slots[slot] = Some(f);
        }
        self.by_id.insert(flow.id, slot);
        self.stats.flows_started += 1;
        Ok(())
    }

    /// An ACK of packet `seq` of flow `id`, carrying the pull counter
    /// `pulls`; the flow's completion if this was its last unacked packet.
    pub fn on_ack(&mut self, now_ns: u64, id: u32, seq: u32, pulls: u32) -> Option<Completion> {
        let Some((slot, f)) = lookup(&self.by_id, &mut self.slots, id) else {
            self.stats.stale += 1;
            return None;
        };
        let Some(&st) = f.state.get(seq as usize) else {
            self.stats.stale += 1;
            return None;
        };
        self.stats.acks += 1;
        if st & STATE != ACKED {
            if st & STATE == IN_FLIGHT && st & RESENT == 0 {
                let sample = now_ns.saturating_sub(f.times[seq as usize]);
                f.min_rtt_ns = Some(f.min_rtt_ns.map_or(sample, |m| m.min(sample)));
            }
            f.state[seq as usize] = (st & !STATE) | ACKED;
            f.acked += 1;
            if f.acked == f.packets {
                let done = Completion {
                    tag: f.flow.tag,
                    fct_ns: now_ns.saturating_sub(f.flow.arrival_ns),
                    min_rtt_ns: f.min_rtt_ns,
                };
                self.by_id.remove(&id);
                self.slots[slot] = None;
                self.free.push(slot);
                self.stats.flows_completed += 1;
                return Some(done);
            }
        }
        self.pulled(slot, pulls);
        None
    }

    /// A NACK of packet `seq` of flow `id` (it arrived trimmed), carrying
    /// the pull counter `pulls`: the packet waits for a pull.
    pub fn on_nack(&mut self, now_ns: u64, id: u32, seq: u32, pulls: u32) {
        let Some((slot, f)) = lookup(&self.by_id, &mut self.slots, id) else {
            self.stats.stale += 1;
            return;
        };
        let Some(&st) = f.state.get(seq as usize) else {
            self.stats.stale += 1;
            return;
        };
        self.stats.nacks += 1;
        // Only a packet in flight is queued: one queued, scheduled again or
        // acked already needs nothing more.
        if st & STATE == IN_FLIGHT {
            f.state[seq as usize] = (st & !STATE) | QUEUED;
            f.times[seq as usize] = now_ns;
            f.rtx.push_back(seq);
            f.events.push_back((seq, now_ns));
            if !f.timer_armed {
                f.timer_armed = true;
                let t = now_ns.saturating_add(self.params.min_rto_ns);
                self.timers.push(Reverse((t, slot, f.gen)));
            }
        }
        self.pulled(slot, pulls);
    }

    /// A pull for flow `id` with the receiver's pull counter `pulls`.
    pub fn on_pull(&mut self, id: u32, pulls: u32) {
        let Some((slot, f)) = lookup(&self.by_id, &mut self.slots, id) else {
            self.stats.stale += 1;
            return;
        };
        self.stats.pulls += 1;
        if pulls <= f.last_pull {
            self.stats.old_pulls += 1;
            return;
        }
        self.pulled(slot, pulls);
    }

    /// Lets the packets go that a counter of `pulls` allows beyond the
    /// highest counter seen.
    fn pulled(&mut self, slot: usize, pulls: u32) {
        let Some(f) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        if pulls <= f.last_pull {
            return;
        }
        let n = pulls - f.last_pull;
        f.last_pull = pulls;
        for i in 0..n {
            if !f.schedule_one(&mut self.line, slot) {
                // Nothing left now: the rest are spent too.
                self.stats.unused_pulls += u64::from(n - i);
                return;
            }
        }
    }

    /// Fires the retransmission timers due at `now_ns`: every packet of
    /// such a flow unanswered for the timeout goes in line again, oldest
    /// first.
    pub fn expire(&mut self, now_ns: u64) {
        let rto = self.params.min_rto_ns;
        while let Some(&Reverse((t, slot, gen))) = self.timers.peek() {
            if t > now_ns {
                break;
            }
            self.timers.pop();
            let Some(f) = self
                .slots
                .get_mut(slot)
                .and_then(Option::as_mut)
                .filter(|f| f.gen == gen)
            else {
                continue;
            };
            let Some(oldest) = f.oldest_event() else {
                f.timer_armed = false;
                continue;
            };
            if oldest.saturating_add(rto) <= now_ns {
                self.stats.timeouts += 1;
                while let Some(&(seq, t0)) = f.events.front() {
                    if t0.saturating_add(rto) > now_ns {
                        break;
                    }
                    f.events.pop_front();
                    if f.live(seq, t0) {
                        let s = &mut f.state[seq as usize];
                        *s = (*s & !STATE) | SCHEDULED;
                        self.line.push_back((slot, gen, seq));
                        self.stats.timed_out_packets += 1;
                    }
                }
            }
            match f.oldest_event() {
                Some(t0) => self
                    .timers
                    .push(Reverse((t0.saturating_add(rto), slot, gen))),
                None => f.timer_armed = false,
            }
        }
    }

    /// The next data packet to send at `now_ns` (call when the NIC is
    /// free, after [`NdpSender::expire`]).
    pub fn pop_departure(&mut self, now_ns: u64) -> Option<Departure> {
        while let Some((slot, gen, seq)) = self.line.pop_front() {
            let Some(f) = self
                .slots
                .get_mut(slot)
                .and_then(Option::as_mut)
                .filter(|f| f.gen == gen)
            else {
                continue;
            };
            let st = f.state[seq as usize];
            if st & STATE != SCHEDULED {
                continue;
            }
            let retransmission = st & SENT != 0;
            let resent = if retransmission { RESENT } else { 0 };
            f.state[seq as usize] = IN_FLIGHT | SENT | resent | (st & RESENT);
            f.times[seq as usize] = now_ns;
            f.events.push_back((seq, now_ns));
            if !f.timer_armed {
                f.timer_armed = true;
                let t = now_ns.saturating_add(self.params.min_rto_ns);
                self.timers.push(Reverse((t, slot, gen)));
            }
            self.stats.packets += 1;
            self.stats.retransmissions += u64::from(retransmission);
            let offset = u64::from(seq) * u64::from(f.payload);
            let len = f.flow.size.saturating_sub(offset).min(u64::from(f.payload)) as u32;
            return Some(Departure {
                id: f.flow.id,
                tag: f.flow.tag,
                dst: f.flow.dst,
                sport: f.flow.sport,
                seq,
                packets: f.packets,
                offset,
                len,
                last: seq + 1 == f.packets,
                retransmission,
            });
        }
        None
    }

    /// Whether packets wait in line (some may turn out not to need sending).
    pub fn has_departures(&self) -> bool {
        !self.line.is_empty()
    }

    /// The earliest retransmission timer, ns: a flow's timer is moved
    /// lazily, when it comes (to its oldest unanswered packet's time + the
    /// timeout), so it may come before anything is due.
    pub fn next_timer_ns(&self) -> Option<u64> {
        self.timers.peek().map(|Reverse((t, ..))| *t)
    }

    /// The highest pull counter seen for flow `id`, while it runs.
    pub fn last_pull(&self, id: u32) -> Option<u32> {
        let &slot = self.by_id.get(&id)?;
        self.slots.get(slot)?.as_ref().map(|f| f.last_pull)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DST: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 2);

    /// Window 3, 1000-byte payloads, RTO 1 ms.
    fn sender() -> NdpSender {
        NdpSender::new(NdpParams {
            initial_window: 3,
            payload: 1000,
            min_rto_ns: 1_000_000,
        })
    }

    fn flow(id: u32, size: u64, arrival_ns: u64) -> NewFlow {
        NewFlow {
            id,
            size,
            arrival_ns,
            tag: id as usize * 10,
            dst: DST,
            sport: 50000,
        }
    }

    /// (packet, retransmission) of everything in line at `now`.
    fn drain(s: &mut NdpSender, now: u64) -> Vec<(u32, bool)> {
        s.expire(now);
        std::iter::from_fn(|| s.pop_departure(now))
            .map(|d| (d.seq, d.retransmission))
            .collect()
    }

    /// The next packet in line at `now`, alone (the NIC sends one at a
    /// time).
    fn one(s: &mut NdpSender, now: u64) -> Option<u32> {
        s.expire(now);
        s.pop_departure(now).map(|d| d.seq)
    }

    fn seqs(v: &[(u32, bool)]) -> Vec<u32> {
        v.iter().map(|&(s, _)| s).collect()
    }

    #[test]
    fn the_initial_window_goes_at_once_and_describes_its_packets() {
        let mut s = sender();
        // 4500 bytes: packets 0-3 of 1000 bytes and packet 4 of 500.
        s.add_flow(flow(7, 4500, 0)).unwrap();
        let d0 = s.pop_departure(0).unwrap();
        assert_eq!(
            d0,
            Departure {
                id: 7,
                tag: 70,
                dst: DST,
                sport: 50000,
                seq: 0,
                packets: 5,
                offset: 0,
                len: 1000,
                last: false,
                retransmission: false,
            }
        );
        // The window is 3: packets 1 and 2 follow, then nothing.
        assert_eq!(drain(&mut s, 0), vec![(1, false), (2, false)]);
        assert!(!s.has_departures());
        // A flow smaller than the window sends all it has: 1 packet of 10
        // bytes, its last.
        s.add_flow(flow(8, 10, 0)).unwrap();
        let d = s.pop_departure(0).unwrap();
        assert_eq!((d.id, d.seq, d.len, d.last, d.packets), (8, 0, 10, true, 1));
        assert_eq!(s.pop_departure(0), None);
        assert_eq!(s.stats().packets, 4);
        assert!(s.add_flow(flow(7, 1, 0)).unwrap_err().contains("in use"));
        assert!(s.add_flow(flow(9, 0, 0)).is_err());
    }

    #[test]
    fn the_pull_counter_not_the_number_of_pulls_decides() {
        let mut s = sender();
        s.add_flow(flow(1, 8000, 0)).unwrap(); // packets 0-7
        assert_eq!(seqs(&drain(&mut s, 0)), vec![0, 1, 2]);
        // Pull 1 lost; pull 2 arrives: two packets.
        s.on_pull(1, 2);
        assert_eq!(seqs(&drain(&mut s, 10)), vec![3, 4]);
        // Pull 1 arrives late: nothing.
        s.on_pull(1, 1);
        assert_eq!(drain(&mut s, 20), vec![]);
        // An ACK carrying counter 3: one more (and the ACK frees packet 0).
        assert_eq!(s.on_ack(30, 1, 0, 3), None);
        assert_eq!(seqs(&drain(&mut s, 30)), vec![5]);
        // Counter 10: packets 6 and 7, then nothing left: 5 pulls unused.
        s.on_pull(1, 10);
        assert_eq!(seqs(&drain(&mut s, 40)), vec![6, 7]);
        let st = s.stats();
        assert_eq!((st.pulls, st.old_pulls, st.unused_pulls), (3, 1, 5));
        assert_eq!(s.last_pull(1), Some(10));
        // Those pulls were spent, not banked: a NACK now waits for the
        // next pull.
        s.on_nack(50, 1, 6, 10);
        assert_eq!(drain(&mut s, 50), vec![]);
        s.on_pull(1, 11);
        assert_eq!(drain(&mut s, 60), vec![(6, true)]);
    }

    #[test]
    fn nacked_packets_go_first_in_nack_order_and_acked_ones_not_at_all() {
        let mut s = sender();
        s.add_flow(flow(2, 10_000, 0)).unwrap(); // packets 0-9
        assert_eq!(seqs(&drain(&mut s, 0)), vec![0, 1, 2]);
        // NACKs for 2, then 0; ACK for 1.
        s.on_nack(100, 2, 2, 0);
        s.on_nack(101, 2, 0, 0);
        assert_eq!(s.on_ack(102, 2, 1, 0), None);
        // Nothing without a pull.
        assert_eq!(drain(&mut s, 103), vec![]);
        // Three pulls (counter 3): 2 and 0 again, in NACK order, then new
        // packet 3.
        s.on_pull(2, 3);
        assert_eq!(drain(&mut s, 104), vec![(2, true), (0, true), (3, false)]);
        // 4 and 5 go; 4 is nacked, then acked (an older copy got through)
        // before its pull: the pull takes new data instead.
        s.on_pull(2, 5);
        assert_eq!(seqs(&drain(&mut s, 105)), vec![4, 5]);
        s.on_nack(200, 2, 4, 5);
        s.on_ack(201, 2, 4, 5);
        s.on_pull(2, 6);
        assert_eq!(drain(&mut s, 202), vec![(6, false)]);
        // A NACK for a packet already queued or acked changes nothing.
        s.on_nack(203, 2, 4, 6);
        s.on_nack(204, 2, 99, 6);
        let st = s.stats();
        assert_eq!((st.nacks, st.retransmissions, st.stale), (4, 2, 1));
    }

    #[test]
    fn the_timeout_resends_what_stayed_unanswered_oldest_first() {
        let mut s = sender();
        // Packets 0-4. The window leaves at 0, 100, 200 (the NIC's pace);
        // 0 is acked.
        s.add_flow(flow(3, 5000, 0)).unwrap();
        assert_eq!(one(&mut s, 0), Some(0));
        assert_eq!(one(&mut s, 100), Some(1));
        assert_eq!(one(&mut s, 200), Some(2));
        s.on_ack(5_000, 3, 0, 0);
        // Packet 3 leaves on a pull at 300_000; 2 is nacked at 400_000 and
        // waits for a pull that never comes.
        s.on_pull(3, 1);
        assert_eq!(seqs(&drain(&mut s, 300_000)), vec![3]);
        s.on_nack(400_000, 3, 2, 1);
        // The timer was set when packet 0 left (0 + 1 ms); 0 is acked, so
        // at 1 ms it moves to packet 1's: 100 + 1 ms.
        assert_eq!(s.next_timer_ns(), Some(1_000_000));
        assert_eq!(drain(&mut s, 1_000_000), vec![]);
        assert_eq!(s.next_timer_ns(), Some(1_000_100));
        assert_eq!(drain(&mut s, 1_000_099), vec![]);
        assert_eq!(drain(&mut s, 1_000_100), vec![(1, true)]);
        // Next: packet 3 (sent at 300_000), then 2 (nacked at 400_000).
        assert_eq!(s.next_timer_ns(), Some(1_300_000));
        assert_eq!(drain(&mut s, 1_300_000), vec![(3, true)]);
        assert_eq!(drain(&mut s, 1_400_000), vec![(2, true)]);
        // Resent at 1_000_100, packet 1 times out again at 2_000_100
        // unless answered: it is.
        s.on_ack(1_500_000, 3, 1, 1);
        assert_eq!(s.next_timer_ns(), Some(2_000_100));
        assert_eq!(drain(&mut s, 2_000_100), vec![]);
        let st = s.stats();
        assert_eq!((st.timeouts, st.timed_out_packets), (3, 3));
        assert_eq!(st.retransmissions, 3);
        // Several due at once go together, oldest first.
        let mut s = sender();
        s.add_flow(flow(4, 3000, 0)).unwrap();
        assert_eq!(seqs(&drain(&mut s, 0)), vec![0, 1, 2]);
        assert_eq!(
            drain(&mut s, 5_000_000),
            vec![(0, true), (1, true), (2, true)]
        );
        assert_eq!(s.stats().timeouts, 1);
    }

    #[test]
    fn a_flow_completes_when_every_packet_is_acked() {
        let mut s = sender();
        s.add_flow(flow(5, 2500, 1_000)).unwrap(); // packets 0-2
        assert_eq!(one(&mut s, 1_000), Some(0));
        assert_eq!(seqs(&drain(&mut s, 2_000)), vec![1, 2]);
        assert_eq!(s.on_ack(9_000, 5, 2, 0), None);
        // Packet 1 acked twice: counted once.
        assert_eq!(s.on_ack(9_500, 5, 1, 0), None);
        assert_eq!(s.on_ack(9_600, 5, 1, 0), None);
        let done = s.on_ack(10_000, 5, 0, 0).unwrap();
        // FCT from the arrival at 1 us; RTT samples 9000 - 2000 = 7000,
        // 9500 - 2000 = 7500 and 10000 - 1000 = 9000.
        assert_eq!(
            done,
            Completion {
                tag: 50,
                fct_ns: 9_000,
                min_rtt_ns: Some(7_000)
            }
        );
        assert_eq!(s.active(), 0);
        // Late answers for it are stale; its id may be used again.
        s.on_ack(11_000, 5, 0, 0);
        s.on_pull(5, 9);
        assert_eq!(s.stats().stale, 2);
        s.add_flow(flow(5, 1, 20_000)).unwrap();
        assert_eq!(s.stats().flows_completed, 1);
    }
}

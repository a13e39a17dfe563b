//! The queueing core of a rotor-aware ToR: one bounded queue per next-hop
//! ToR; a frame waits until a rotor connects this ToR to its next hop, and
//! is not started on the uplink unless its serialization ends before the
//! slot does (the next reconfiguration would cut it). Generic over the
//! frame handle, like [`crate::egress::Egress`], so it is tested without
//! packet I/O.
//!
//! Routing on the emulated graph: direct one hop (RotorNet) or the
//! next hop of a route table (de Bruijn shift routing, from
//! `lcmp_topology::rotor::routes`). Valiant two-phase routing needs a phase
//! mark in each packet and comes with the ToR's packet path.

use std::collections::VecDeque;

use crate::rotor::SlotClock;

/// How a ToR picks the next hop towards a destination ToR.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TorRouting {
    /// Straight to the destination: wait for its circuit (RotorNet).
    Direct,
    /// `next[dst]`: the next hop on the emulated graph (Mars's shift
    /// routing).
    Table(Vec<u32>),
}

/// Why a frame was not queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TorDrop {
    /// The queue of its next hop would exceed the buffer.
    QueueFull,
    /// The destination is this ToR or unknown.
    NoRoute,
}

/// Counters of a ToR's uplinks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TorCounters {
    /// Frames queued.
    pub queued: u64,
    /// Frames sent on an uplink.
    pub sent: u64,
    /// Dropped: queue full.
    pub dropped_queue_full: u64,
    /// Dropped: no route.
    pub dropped_no_route: u64,
    /// Times a queue head waited because it could not finish before the
    /// slot's end.
    pub deferred_slot_end: u64,
}

/// One ToR's uplink side.
pub struct RotorTor<F: Copy> {
    tor: u32,
    /// Per rotor (uplink), the matchings it cycles through.
    rotors: Vec<Vec<Vec<u32>>>,
    clock: SlotClock,
    /// Serialization of one byte, ns x 2^16.
    byte_ns_fp: u64,
    buffer_bytes: u64,
    routing: TorRouting,
    /// Per next-hop ToR: frames and their lengths.
    queues: Vec<VecDeque<(F, u32)>>,
    queued_bytes: Vec<u64>,
    /// Per uplink: when its current transmission ends, ns.
    busy_until: Vec<u64>,
    counters: TorCounters,
}

impl<F: Copy> RotorTor<F> {
    /// ToR `tor` of `tors`, its uplink r reaching `rotors[r][slot mod
    /// len][tor]`, uplinks of `rate_bps`, `buffer_bytes` per next-hop
    /// queue.
    pub fn new(
        tor: u32,
        tors: u32,
        rotors: Vec<Vec<Vec<u32>>>,
        clock: SlotClock,
        rate_bps: u64,
        buffer_bytes: u64,
        routing: TorRouting,
    ) -> Result<Self, String> {
        if tor >= tors {
            return Err(format!("ToR {tor} of {tors}"));
        }
        if rotors.is_empty() || rotors.iter().any(|r| r.is_empty()) {
            return Err("every uplink needs a schedule".into());
        }
        if rate_bps == 0 {
            return Err("uplinks need a rate".into());
        }
        if let TorRouting::Table(t) = &routing {
            if t.len() != tors as usize {
                return Err(format!(
                    "route table has {} entries for {tors} ToRs",
                    t.len()
                ));
            }
        }
        let n = tors as usize;
        Ok(RotorTor {
            tor,
            byte_ns_fp: ((8_000_000_000u128 << 16) / rate_bps as u128) as u64,
            busy_until: vec![0; rotors.len()],
            rotors,
            clock,
            buffer_bytes,
            routing,
            queues: (0..n).map(|_| VecDeque::new()).collect(),
            queued_bytes: vec![0; n],
            counters: TorCounters::default(),
        })
    }

    /// The next hop towards `dst`.
    pub fn next_hop(&self, dst: u32) -> Option<u32> {
        if dst == self.tor || dst as usize >= self.queues.len() {
            return None;
        }
        match &self.routing {
            TorRouting::Direct => Some(dst),
            TorRouting::Table(t) => t.get(dst as usize).copied().filter(|&h| h != self.tor),
        }
    }

    /// Queues a frame of `len` bytes for ToR `dst`.
    pub fn enqueue(&mut self, dst: u32, frame: F, len: u32) -> Result<(), TorDrop> {
        let Some(hop) = self.next_hop(dst) else {
            self.counters.dropped_no_route += 1;
            return Err(TorDrop::NoRoute);
        };
        let h = hop as usize;
        if self.queued_bytes[h] + len as u64 > self.buffer_bytes {
            self.counters.dropped_queue_full += 1;
            return Err(TorDrop::QueueFull);
        }
        self.queues[h].push_back((frame, len));
        self.queued_bytes[h] += len as u64;
        self.counters.queued += 1;
        Ok(())
    }

    /// Sends what the circuits up at `now_ns` allow: on each uplink, from
    /// the queue of the ToR it reaches in this slot, frames whose
    /// serialization (back to back after the uplink's current one) ends
    /// before the slot does. `out(uplink, frame, start_ns)` takes them.
    pub fn poll(&mut self, now_ns: u64, out: &mut impl FnMut(usize, F, u64)) -> usize {
        let pos = self.clock.at(now_ns);
        if pos.reconfiguring {
            return 0;
        }
        let mut sent = 0;
        for r in 0..self.rotors.len() {
            let sched = &self.rotors[r];
            let m = &sched[(pos.slot % sched.len() as u64) as usize];
            let Some(&to) = m.get(self.tor as usize) else {
                continue;
            };
            if to == self.tor {
                continue;
            }
            let q = to as usize;
            let mut t = self.busy_until[r].max(now_ns);
            while let Some(&(frame, len)) = self.queues[q].front() {
                let end = t + ((len as u64 * self.byte_ns_fp) >> 16);
                if end > pos.end_ns {
                    self.counters.deferred_slot_end += 1;
                    break;
                }
                self.queues[q].pop_front();
                self.queued_bytes[q] -= len as u64;
                out(r, frame, t);
                t = end;
                sent += 1;
            }
            self.busy_until[r] = t;
        }
        self.counters.sent += sent as u64;
        sent
    }

    /// Bytes queued for next hop `hop`.
    pub fn queue_bytes(&self, hop: u32) -> u64 {
        self.queued_bytes.get(hop as usize).copied().unwrap_or(0)
    }

    /// The counters.
    pub fn counters(&self) -> TorCounters {
        self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SLOT: u64 = 1_000_000;
    const RECONF: u64 = 100_000;

    /// ToR 0 of 4, one uplink: slot 0 reaches ToR 1, slot 1 ToR 2, slot 2
    /// ToR 3. 1 Gbit/s: a 1000-byte frame takes 8 us.
    fn tor(buffer: u64, routing: TorRouting) -> RotorTor<u32> {
        let m = vec![vec![1, 0, 3, 2], vec![2, 3, 0, 1], vec![3, 2, 1, 0]];
        RotorTor::new(
            0,
            4,
            vec![m],
            SlotClock {
                epoch_ns: 0,
                slot_ns: SLOT,
                reconfig_ns: RECONF,
            },
            1_000_000_000,
            buffer,
            routing,
        )
        .unwrap()
    }

    fn poll(t: &mut RotorTor<u32>, now: u64) -> Vec<(usize, u32, u64)> {
        let mut out = Vec::new();
        t.poll(now, &mut |r, f, at| out.push((r, f, at)));
        out
    }

    #[test]
    fn a_frame_waits_for_its_circuit() {
        let mut t = tor(1 << 20, TorRouting::Direct);
        t.enqueue(2, 7, 1000).unwrap();
        assert!(poll(&mut t, RECONF).is_empty(), "slot 0 reaches ToR 1");
        assert!(poll(&mut t, SLOT + 50_000).is_empty(), "reconfiguring");
        assert_eq!(poll(&mut t, SLOT + RECONF), vec![(0, 7, SLOT + RECONF)]);
        assert_eq!(t.queue_bytes(2), 0);
    }

    #[test]
    fn no_frame_starts_that_would_run_into_the_reconfiguration() {
        let mut t = tor(1 << 20, TorRouting::Direct);
        // 200 frames of 1000 B = 1.6 ms of serialization for ToR 1: a slot
        // (0.9 ms usable) carries 112 of them, the rest wait a period.
        for i in 0..200 {
            t.enqueue(1, i, 1000).unwrap();
        }
        let first = poll(&mut t, RECONF);
        assert_eq!(first.len(), 112);
        assert!(first.iter().all(|(_, _, at)| at + 8_000 <= SLOT));
        assert!(t.counters().deferred_slot_end >= 1);
        // The next slot with ToR 1 is slot 3.
        assert!(poll(&mut t, 2 * SLOT + RECONF).is_empty());
        assert_eq!(poll(&mut t, 3 * SLOT + RECONF).len(), 88);
    }

    #[test]
    fn queues_respect_the_buffer_and_routes() {
        let mut t = tor(3000, TorRouting::Direct);
        for i in 0..3 {
            t.enqueue(3, i, 1000).unwrap();
        }
        assert_eq!(t.enqueue(3, 9, 1), Err(TorDrop::QueueFull));
        assert_eq!(t.enqueue(0, 9, 100), Err(TorDrop::NoRoute), "itself");
        assert_eq!(t.enqueue(9, 9, 100), Err(TorDrop::NoRoute), "unknown");
        let c = t.counters();
        assert_eq!(
            (c.queued, c.dropped_queue_full, c.dropped_no_route),
            (3, 1, 2)
        );
        // Shift routing: ToR 3 via ToR 1.
        let mut s = tor(1 << 20, TorRouting::Table(vec![0, 1, 2, 1]));
        s.enqueue(3, 5, 100).unwrap();
        assert_eq!(s.queue_bytes(1), 100);
        assert_eq!(poll(&mut s, RECONF), vec![(0, 5, RECONF)]);
    }
}

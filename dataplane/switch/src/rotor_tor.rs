//! The queueing core of a rotor-aware ToR: one queue per next-hop ToR,
//! all sharing the ToR's buffer; a frame waits until a rotor connects this
//! ToR to its next hop, and is not started on the uplink unless its
//! serialization ends `guard` before the slot does (the next
//! reconfiguration would cut it). Generic over the frame handle, like
//! [`crate::egress::Egress`], so it is tested without packet I/O.
//!
//! Each uplink emulates its link rate: a frame occupies it from
//! `max(uplink free, slot usable, frame queued)` for its serialization
//! time and is handed out when that ends (the instant its last bit would
//! reach the rotor). A late poll hands out what is due in one burst
//! without losing the slot's capacity, but nothing once the slot's end
//! minus the guard has passed.
//!
//! Routing picks a frame's next hop towards a *target* ToR (its
//! destination, or its Valiant intermediate; the packet path decides
//! which): straight to the target (RotorNet), or the next hop of a route
//! table on the emulated graph (Mars's shift routing, from
//! `lcmp_topology::rotor::routes`).

use std::collections::VecDeque;

use crate::slot::SlotClock;

/// How a ToR picks the next hop towards a target ToR.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TorRouting {
    /// Straight to the target: wait for its circuit (RotorNet).
    Direct,
    /// `next[target]`: the next hop on the emulated graph (Mars's shift
    /// routing).
    Table(Vec<u32>),
}

/// Why a frame was not queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TorDrop {
    /// The ToR's buffer would overflow.
    QueueFull,
    /// The target is this ToR or unknown.
    NoRoute,
}

/// Counters of a ToR's uplinks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TorCounters {
    /// Frames queued.
    pub queued: u64,
    /// Frames handed to an uplink.
    pub sent: u64,
    /// Dropped: buffer full.
    pub dropped_queue_full: u64,
    /// Dropped: no route.
    pub dropped_no_route: u64,
    /// Slots in which a queue head waited because it could not finish
    /// before the slot's end (once per uplink and slot).
    pub deferred_slot_end: u64,
    /// Frames handed out after their serialization ended, and by how much
    /// in total, ns (the poll loop's lateness).
    pub late_frames: u64,
    /// Total lateness of those frames, ns.
    pub late_ns: u64,
}

/// One ToR's uplink side.
pub struct RotorTor<F: Copy> {
    tor: u32,
    /// Per rotor (uplink), the matchings it cycles through.
    rotors: Vec<Vec<Vec<u32>>>,
    clock: SlotClock,
    /// No rotor ever changes its matching: no reconfiguration, no slot
    /// ends (a static network).
    fixed: bool,
    guard_ns: u64,
    /// Serialization of one byte, ns x 2^16.
    byte_ns_fp: u64,
    buffer_bytes: u64,
    routing: TorRouting,
    /// Per next-hop ToR: frames, their lengths and when they were queued.
    queues: Vec<VecDeque<(F, u32, u64)>>,
    queued_bytes: Vec<u64>,
    total_bytes: u64,
    /// Per uplink: when its current transmission ends, ns.
    busy_until: Vec<u64>,
    /// Per uplink: the last slot a deferral was counted in.
    deferred_in: Vec<u64>,
    next_due: u64,
    /// The slot of the last frame handed out (`u64::MAX`: none yet).
    last_release_slot: u64,
    counters: TorCounters,
}

/// A ToR's settings.
#[derive(Clone, Debug)]
pub struct TorSettings {
    /// This ToR's index.
    pub tor: u32,
    /// ToRs in the network.
    pub tors: u32,
    /// Per rotor (uplink), the matchings it cycles through.
    pub rotors: Vec<Vec<Vec<u32>>>,
    /// Slot timing.
    pub clock: SlotClock,
    /// Uplink rate, bit/s.
    pub rate_bps: u64,
    /// Buffer of the ToR, bytes, shared by its next-hop queues.
    pub buffer_bytes: u64,
    /// Nothing is started that ends later than this before the slot's end.
    pub guard_ns: u64,
    /// Next hops.
    pub routing: TorRouting,
}

impl<F: Copy> RotorTor<F> {
    /// A ToR's uplink side.
    pub fn new(s: TorSettings) -> Result<Self, String> {
        if s.tor >= s.tors {
            return Err(format!("ToR {} of {}", s.tor, s.tors));
        }
        if s.rotors.is_empty() || s.rotors.iter().any(|r| r.is_empty()) {
            return Err("every uplink needs a schedule".into());
        }
        if s.rate_bps == 0 {
            return Err("uplinks need a rate".into());
        }
        if let TorRouting::Table(t) = &s.routing {
            if t.len() != s.tors as usize {
                return Err(format!(
                    "route table has {} entries for {} ToRs",
                    t.len(),
                    s.tors
                ));
            }
        }
        let n = s.tors as usize;
        Ok(RotorTor {
            tor: s.tor,
            fixed: s.rotors.iter().all(|r| r.len() == 1),
            byte_ns_fp: ((8_000_000_000u128 << 16) / s.rate_bps as u128) as u64,
            busy_until: vec![0; s.rotors.len()],
            deferred_in: vec![u64::MAX; s.rotors.len()],
            rotors: s.rotors,
            clock: s.clock,
            guard_ns: s.guard_ns,
            buffer_bytes: s.buffer_bytes,
            routing: s.routing,
            queues: (0..n).map(|_| VecDeque::new()).collect(),
            queued_bytes: vec![0; n],
            total_bytes: 0,
            next_due: u64::MAX,
            last_release_slot: u64::MAX,
            counters: TorCounters::default(),
        })
    }

    /// The next hop towards `target`.
    pub fn next_hop(&self, target: u32) -> Option<u32> {
        if target == self.tor || target as usize >= self.queues.len() {
            return None;
        }
        match &self.routing {
            TorRouting::Direct => Some(target),
            TorRouting::Table(t) => t
                .get(target as usize)
                .copied()
                .filter(|&h| h != self.tor && (h as usize) < self.queues.len()),
        }
    }

    /// Queues a frame of `len` bytes towards ToR `target` at `now_ns`.
    pub fn enqueue(&mut self, target: u32, frame: F, len: u32, now_ns: u64) -> Result<(), TorDrop> {
        let Some(hop) = self.next_hop(target) else {
            self.counters.dropped_no_route += 1;
            return Err(TorDrop::NoRoute);
        };
        let h = hop as usize;
        if self.total_bytes + len as u64 > self.buffer_bytes {
            self.counters.dropped_queue_full += 1;
            return Err(TorDrop::QueueFull);
        }
        self.queues[h].push_back((frame, len, now_ns));
        self.queued_bytes[h] += len as u64;
        self.total_bytes += len as u64;
        self.counters.queued += 1;
        // Wake at once: the frame may go now.
        self.next_due = now_ns;
        Ok(())
    }

    /// The ToR uplink `r` reaches in slot `slot`, if any.
    pub fn circuit(&self, r: usize, slot: u64) -> Option<u32> {
        let sched = self.rotors.get(r)?;
        let to = *sched[(slot % sched.len() as u64) as usize].get(self.tor as usize)?;
        (to != self.tor).then_some(to)
    }

    /// Hands out, on each uplink, the frames of the queue of the ToR it
    /// reaches in this slot whose serialization has ended by `now_ns` and
    /// ends `guard` before the slot does: `out(uplink, frame)`.
    pub fn poll(&mut self, now_ns: u64, out: &mut impl FnMut(usize, F)) -> usize {
        let pos = self.clock.at(now_ns);
        let slot_start = pos.end_ns.saturating_sub(self.clock.slot_ns);
        let (usable, limit) = if self.fixed {
            (0, u64::MAX)
        } else {
            (
                slot_start + self.clock.reconfig_ns,
                pos.end_ns.saturating_sub(self.guard_ns),
            )
        };
        if !self.fixed && pos.reconfiguring {
            self.next_due = if self.total_bytes > 0 {
                usable
            } else {
                u64::MAX
            };
            return 0;
        }
        let mut due = u64::MAX;
        let mut sent = 0;
        for r in 0..self.rotors.len() {
            let Some(to) = self.circuit(r, pos.slot) else {
                continue;
            };
            let q = to as usize;
            while let Some(&(frame, len, queued_ns)) = self.queues[q].front() {
                let start = self.busy_until[r].max(usable).max(queued_ns);
                let end = start + ((len as u64 * self.byte_ns_fp) >> 16);
                // A late poll must not hand out what would reach the
                // rotor after the guard either.
                if end.max(now_ns) > limit {
                    if self.deferred_in[r] != pos.slot {
                        self.deferred_in[r] = pos.slot;
                        self.counters.deferred_slot_end += 1;
                    }
                    break;
                }
                if end > now_ns {
                    due = due.min(end);
                    break;
                }
                self.queues[q].pop_front();
                self.queued_bytes[q] -= len as u64;
                self.total_bytes -= len as u64;
                self.busy_until[r] = end;
                if now_ns > end {
                    self.counters.late_frames += 1;
                    self.counters.late_ns += now_ns - end;
                }
                out(r, frame);
                self.last_release_slot = pos.slot;
                sent += 1;
            }
        }
        self.counters.sent += sent as u64;
        // Waiting frames wake the loop at the next slot's usable start at
        // the latest.
        if self.total_bytes > 0 && !self.fixed {
            due = due.min(pos.end_ns + self.clock.reconfig_ns);
        }
        self.next_due = due;
        sent
    }

    /// When [`RotorTor::poll`] next has something to do, ns (`u64::MAX`:
    /// nothing queued).
    pub fn next_deadline(&self) -> u64 {
        self.next_due
    }

    /// Whether a frame has been handed out in the slot `at_ns` falls in.
    pub fn released_in_slot_of(&self, at_ns: u64) -> bool {
        self.last_release_slot == self.clock.at(at_ns).slot
    }

    /// Bytes queued for next hop `hop`.
    pub fn queue_bytes(&self, hop: u32) -> u64 {
        self.queued_bytes.get(hop as usize).copied().unwrap_or(0)
    }

    /// Bytes queued in all.
    pub fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    /// Frames queued for next hop `hop`.
    pub fn queue_frames(&self, hop: u32) -> usize {
        self.queues.get(hop as usize).map_or(0, VecDeque::len)
    }

    /// Takes every queued frame out (shutdown).
    pub fn drain(&mut self, out: &mut impl FnMut(F)) {
        for q in &mut self.queues {
            for (f, _, _) in q.drain(..) {
                out(f);
            }
        }
        self.queued_bytes.iter_mut().for_each(|b| *b = 0);
        self.total_bytes = 0;
    }

    /// The counters.
    pub fn counters(&self) -> TorCounters {
        self.counters
    }

    /// The slot timing.
    pub fn clock(&self) -> SlotClock {
        self.clock
    }

    /// Sets the shared epoch (from the agent).
    pub fn set_epoch(&mut self, epoch_ns: u64) {
        self.clock.epoch_ns = epoch_ns;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SLOT: u64 = 1_000_000;
    const RECONF: u64 = 100_000;
    /// A 1000-byte frame at 1 Gbit/s.
    const SER: u64 = 8_000;

    /// ToR 0 of 4, one uplink: slot 0 reaches ToR 1, slot 1 ToR 2, slot 2
    /// ToR 3. 1 Gbit/s.
    fn tor(buffer: u64, guard: u64, routing: TorRouting) -> RotorTor<u32> {
        let m = vec![vec![1, 0, 3, 2], vec![2, 3, 0, 1], vec![3, 2, 1, 0]];
        RotorTor::new(TorSettings {
            tor: 0,
            tors: 4,
            rotors: vec![m],
            clock: SlotClock {
                epoch_ns: 0,
                slot_ns: SLOT,
                reconfig_ns: RECONF,
            },
            rate_bps: 1_000_000_000,
            buffer_bytes: buffer,
            guard_ns: guard,
            routing,
        })
        .unwrap()
    }

    fn poll(t: &mut RotorTor<u32>, now: u64) -> Vec<(usize, u32)> {
        let mut out = Vec::new();
        t.poll(now, &mut |r, f| out.push((r, f)));
        out
    }

    #[test]
    fn a_frame_waits_for_its_circuit_and_its_serialization() {
        let mut t = tor(1 << 20, 0, TorRouting::Direct);
        t.enqueue(2, 7, 1000, 0).unwrap();
        assert!(poll(&mut t, RECONF).is_empty(), "slot 0 reaches ToR 1");
        assert_eq!(t.next_deadline(), SLOT + RECONF, "next slot's start");
        assert!(poll(&mut t, SLOT + 50_000).is_empty(), "reconfiguring");
        assert!(poll(&mut t, SLOT + RECONF).is_empty(), "still serializing");
        assert_eq!(t.next_deadline(), SLOT + RECONF + SER);
        assert_eq!(poll(&mut t, SLOT + RECONF + SER), vec![(0, 7)]);
        assert_eq!(t.queue_bytes(2), 0);
        assert_eq!(t.next_deadline(), u64::MAX, "nothing left");
    }

    #[test]
    fn frames_leave_at_line_rate() {
        let mut t = tor(1 << 20, 0, TorRouting::Direct);
        for i in 0..10 {
            t.enqueue(1, i, 1000, 0).unwrap();
        }
        // 20 us into the usable slot: two frames have been serialized.
        assert_eq!(poll(&mut t, RECONF + 20_000), vec![(0, 0), (0, 1)]);
        assert_eq!(t.next_deadline(), RECONF + 3 * SER);
        assert_eq!(t.counters().late_frames, 2);
        // A frame queued later starts no earlier than it was queued.
        let mut u = tor(1 << 20, 0, TorRouting::Direct);
        u.enqueue(1, 5, 1000, 500_000).unwrap();
        assert!(poll(&mut u, 500_000 + SER - 1).is_empty());
        assert_eq!(poll(&mut u, 500_000 + SER), vec![(0, 5)]);
    }

    #[test]
    fn no_frame_starts_that_would_run_into_the_reconfiguration() {
        let mut t = tor(1 << 20, 0, TorRouting::Direct);
        // 200 frames of 1000 B = 1.6 ms of serialization for ToR 1: a slot
        // (0.9 ms usable) carries 112 of them, the rest wait a period.
        for i in 0..200 {
            t.enqueue(1, i, 1000, 0).unwrap();
        }
        // A poll at the slot's last instant hands out what fits, no more.
        assert_eq!(poll(&mut t, SLOT - 1).len(), 112);
        assert_eq!(t.counters().deferred_slot_end, 1);
        assert!(poll(&mut t, SLOT + RECONF + 1).is_empty());
        // The next slot with ToR 1 is slot 3.
        assert_eq!(poll(&mut t, 4 * SLOT - 1).len(), 88);
        // A guard of 10 us leaves room for one frame less.
        let mut g = tor(1 << 20, 10_000, TorRouting::Direct);
        for i in 0..200 {
            g.enqueue(1, i, 1000, 0).unwrap();
        }
        // A poll later than the guard hands out nothing: those frames
        // would reach the rotor as it reconfigures.
        assert!(poll(&mut g, SLOT - 5_000).is_empty());
        assert_eq!(poll(&mut g, SLOT - 10_000).len(), 111);
    }

    #[test]
    fn queues_share_the_buffer_and_need_routes() {
        let mut t = tor(3000, 0, TorRouting::Direct);
        t.enqueue(3, 1, 1000, 0).unwrap();
        t.enqueue(3, 2, 1000, 0).unwrap();
        t.enqueue(2, 3, 1000, 0).unwrap();
        assert_eq!(t.enqueue(1, 9, 1, 0), Err(TorDrop::QueueFull));
        assert_eq!(t.enqueue(0, 9, 100, 0), Err(TorDrop::NoRoute), "itself");
        assert_eq!(t.enqueue(9, 9, 100, 0), Err(TorDrop::NoRoute), "unknown");
        let c = t.counters();
        assert_eq!(
            (c.queued, c.dropped_queue_full, c.dropped_no_route),
            (3, 1, 2)
        );
        assert_eq!(t.total_bytes(), 3000);
        let mut drained = Vec::new();
        t.drain(&mut |f| drained.push(f));
        assert_eq!(drained.len(), 3);
        assert_eq!(t.total_bytes(), 0);
        // Shift routing: ToR 3 via ToR 1.
        let mut s = tor(1 << 20, 0, TorRouting::Table(vec![0, 1, 2, 1]));
        s.enqueue(3, 5, 100, 0).unwrap();
        assert_eq!(s.queue_bytes(1), 100);
        assert_eq!(poll(&mut s, SLOT - 1), vec![(0, 5)]);
    }

    #[test]
    fn a_static_network_never_reconfigures() {
        let mut t = RotorTor::new(TorSettings {
            tor: 0,
            tors: 4,
            rotors: vec![vec![vec![1, 2, 3, 0]]],
            clock: SlotClock {
                epoch_ns: 0,
                slot_ns: SLOT,
                reconfig_ns: RECONF,
            },
            rate_bps: 1_000_000_000,
            buffer_bytes: 1 << 20,
            guard_ns: 0,
            routing: TorRouting::Direct,
        })
        .unwrap();
        t.enqueue(1, 1, 1000, 0).unwrap();
        t.enqueue(1, 2, 1000, 0).unwrap();
        // Within what would be a reconfiguration, and across a slot end.
        assert_eq!(poll(&mut t, SER), vec![(0, 1)]);
        t.enqueue(1, 3, 1000, SLOT - 1000).unwrap();
        let mut got = poll(&mut t, SLOT + SER);
        got.sort();
        assert_eq!(got, vec![(0, 2), (0, 3)]);
    }
}

//! A rotor (circuit) switch: bufferless, in slot s port i is connected only
//! to port pi_s(i), and nothing crosses while it reconfigures. Frames are
//! not parsed or rewritten (a circuit carries whatever arrives); a frame
//! that arrives during reconfiguration, or on a port with no circuit in the
//! slot, is dropped and counted, as a circuit switch would lose it.
//!
//! The slot is computed from the clock and an epoch shared by every switch
//! of the network (the agent distributes it), never by counting wakeups:
//! two rotors started at different times agree on the slot, and a late
//! wakeup cannot shift the schedule.
//!
//! AF_XDP gives no arrival timestamps, and a rotor that sleeps between
//! frames is polled tens of microseconds after they arrive. A ToR of the
//! network stamps each circuit frame with the instant it sent it (in the
//! source MAC, see [`crate::tor_path::send_stamp`]); the rotor judges a
//! stamped frame by that instant, as if it had entered at once (links
//! without propagation delay), and any other frame by the poll's time.
//! A stamp is trusted up to [`STAMP_MAX_AGE_NS`] old: a rotor descheduled
//! for several slots still sends what it received through the circuit the
//! frame entered (late, as the host will see, but never through another).
//!
//! A rotor with a single matching (a static network) never reconfigures.
//! Until the epoch is known no slot is, and every frame is dropped
//! (`no_epoch`).

use crate::io::{Frame, PacketIo};
use crate::slot::PortTraffic;

pub use crate::slot::{SlotClock, SlotPosition};

/// How old a send stamp may be and still be trusted, ns.
pub const STAMP_MAX_AGE_NS: u64 = 1_000_000_000;

/// Counters of a rotor switch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RotorCounters {
    /// Frames received.
    pub rx_frames: u64,
    /// Frames that crossed a circuit.
    pub tx_frames: u64,
    /// Dropped: arrived while the rotor reconfigured.
    pub dropped_reconfiguring: u64,
    /// Dropped: no circuit from their port in the slot (self-loop).
    pub dropped_no_circuit: u64,
    /// Dropped: the output's transmit ring was full (no buffer to wait in).
    pub dropped_tx_full: u64,
    /// Dropped: no epoch yet.
    pub dropped_no_epoch: u64,
}

/// One rotor over packet I/O `IO`: port i faces ToR i.
pub struct RotorSwitch<IO: PacketIo> {
    io: IO,
    /// The matchings this rotor cycles through, one per slot.
    matchings: Vec<Vec<u32>>,
    clock: SlotClock,
    epoch_known: bool,
    counters: RotorCounters,
    traffic: Vec<PortTraffic>,
    rx: Vec<Frame>,
    out: Vec<Vec<Frame>>,
    dropped: Vec<Frame>,
}

impl<IO: PacketIo> RotorSwitch<IO> {
    /// A rotor applying `matchings[slot mod len]` (each a permutation of
    /// the ports) on the slots of `clock`, whose epoch is known.
    pub fn new(io: IO, matchings: Vec<Vec<u32>>, clock: SlotClock) -> Result<Self, String> {
        Self::with_epoch(io, matchings, clock, true)
    }

    /// As [`RotorSwitch::new`]; `epoch_known` false drops every frame
    /// until [`RotorSwitch::set_epoch`].
    pub fn with_epoch(
        io: IO,
        matchings: Vec<Vec<u32>>,
        clock: SlotClock,
        epoch_known: bool,
    ) -> Result<Self, String> {
        let n = io.ports();
        if matchings.is_empty() {
            return Err("a rotor needs at least one matching".into());
        }
        for (k, m) in matchings.iter().enumerate() {
            let mut seen = vec![false; n];
            if m.len() != n {
                return Err(format!(
                    "matching {k} has {} entries for {n} ports",
                    m.len()
                ));
            }
            for &j in m {
                match seen.get_mut(j as usize) {
                    Some(s) if !*s => *s = true,
                    _ => return Err(format!("matching {k} is not a permutation of the ports")),
                }
            }
        }
        if clock.reconfig_ns >= clock.slot_ns {
            return Err("reconfiguration must be shorter than the slot".into());
        }
        Ok(RotorSwitch {
            io,
            matchings,
            clock,
            epoch_known,
            counters: RotorCounters::default(),
            traffic: vec![PortTraffic::default(); n],
            rx: Vec::with_capacity(256),
            out: vec![Vec::with_capacity(256); n],
            dropped: Vec::with_capacity(256),
        })
    }

    /// The slot timing.
    pub fn clock(&self) -> SlotClock {
        self.clock
    }

    /// The counters.
    pub fn counters(&self) -> RotorCounters {
        self.counters
    }

    /// Per-port traffic.
    pub fn traffic(&self) -> &[PortTraffic] {
        &self.traffic
    }

    /// The matchings.
    pub fn matchings(&self) -> &[Vec<u32>] {
        &self.matchings
    }

    /// Sets the shared epoch; circuits start.
    pub fn set_epoch(&mut self, epoch_ns: u64) {
        self.clock.epoch_ns = epoch_ns;
        self.epoch_known = true;
    }

    /// Whether a single matching never changes (no reconfiguration).
    fn fixed(&self) -> bool {
        self.matchings.len() == 1
    }

    /// Whether the rotor is reconfiguring at `pos`.
    fn reconfiguring(&self, pos: &SlotPosition) -> bool {
        pos.reconfiguring && !self.fixed()
    }

    /// The packet I/O (tests inject and collect through it).
    pub fn io(&mut self) -> &mut IO {
        &mut self.io
    }

    /// Where port `port` is connected at `now_ns`, if anywhere.
    pub fn circuit(&self, port: usize, now_ns: u64) -> Option<usize> {
        let pos = self.clock.at(now_ns);
        if !self.epoch_known || self.reconfiguring(&pos) {
            return None;
        }
        let m = &self.matchings[(pos.slot % self.matchings.len() as u64) as usize];
        let to = *m.get(port)? as usize;
        (to != port).then_some(to)
    }

    /// One poll at `now_ns`: every received frame crosses the circuit its
    /// port had when it arrived, now, or is dropped (the rotor holds
    /// nothing).
    pub fn poll(&mut self, now_ns: u64) -> usize {
        let n = self.io.ports();
        let mut work = 0;
        for port in 0..n {
            self.rx.clear();
            self.io.recv(port, &mut self.rx, 256);
            work += self.rx.len();
            self.counters.rx_frames += self.rx.len() as u64;
            self.traffic[port].rx_frames += self.rx.len() as u64;
            for i in 0..self.rx.len() {
                let f = self.rx[i];
                self.traffic[port].rx_bytes += f.len as u64;
                if !self.epoch_known {
                    self.counters.dropped_no_epoch += 1;
                    self.dropped.push(f);
                    continue;
                }
                let arrived = crate::tor_path::sent_at(self.io.frame(f), now_ns, STAMP_MAX_AGE_NS)
                    .unwrap_or(now_ns);
                let pos = self.clock.at(arrived);
                if self.reconfiguring(&pos) {
                    self.counters.dropped_reconfiguring += 1;
                    self.dropped.push(f);
                    continue;
                }
                let m = (pos.slot % self.matchings.len() as u64) as usize;
                match Some(self.matchings[m][port] as usize).filter(|&t| t != port) {
                    Some(t) => self.out[t].push(f),
                    None => {
                        self.counters.dropped_no_circuit += 1;
                        self.dropped.push(f);
                    }
                }
            }
        }
        for port in 0..n {
            if self.out[port].is_empty() {
                continue;
            }
            let sent = self.io.send(port, &self.out[port]);
            self.counters.tx_frames += sent as u64;
            self.traffic[port].tx_frames += sent as u64;
            self.traffic[port].tx_bytes += self.out[port][..sent]
                .iter()
                .map(|f| f.len as u64)
                .sum::<u64>();
            let rest = self.out[port].len() - sent;
            self.counters.dropped_tx_full += rest as u64;
            self.dropped.extend_from_slice(&self.out[port][sent..]);
            self.out[port].clear();
        }
        if !self.dropped.is_empty() {
            self.io.release(&self.dropped);
            self.dropped.clear();
        }
        self.io.flush();
        work
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem_io::MemIo;

    const SLOT: u64 = 1_000_000;
    const RECONF: u64 = 100_000;

    fn clock(epoch_ns: u64) -> SlotClock {
        SlotClock {
            epoch_ns,
            slot_ns: SLOT,
            reconfig_ns: RECONF,
        }
    }

    /// 4 ports; slot 0: 0<->1, 2<->3; slot 1: 0->2->0, 1->3->1; slot 2:
    /// port 3 has no circuit (self-loop).
    fn rotor(epoch: u64) -> RotorSwitch<MemIo> {
        RotorSwitch::new(
            MemIo::new(4, 64),
            vec![vec![1, 0, 3, 2], vec![2, 3, 0, 1], vec![1, 2, 0, 3]],
            clock(epoch),
        )
        .unwrap()
    }

    fn send_all(r: &mut RotorSwitch<MemIo>, now: u64) -> Vec<(usize, usize)> {
        for p in 0..4 {
            assert!(r.io().inject(p, &[p as u8; 60]));
        }
        r.poll(now);
        let mut out = Vec::new();
        for p in 0..4 {
            for f in r.io().take_sent(p) {
                out.push((f[0] as usize, p));
            }
        }
        out.sort();
        out
    }

    #[test]
    fn frames_cross_only_the_slots_circuits() {
        let mut r = rotor(0);
        // Slot 0, after reconfiguration.
        assert_eq!(
            send_all(&mut r, RECONF + 1),
            vec![(0, 1), (1, 0), (2, 3), (3, 2)]
        );
        // Slot 1.
        assert_eq!(
            send_all(&mut r, SLOT + RECONF),
            vec![(0, 2), (1, 3), (2, 0), (3, 1)]
        );
        // Slot 2: port 3 is connected to nothing.
        assert_eq!(
            send_all(&mut r, 2 * SLOT + 500_000),
            vec![(0, 1), (1, 2), (2, 0)]
        );
        assert_eq!(r.counters().dropped_no_circuit, 1);
        // Slot 3 is slot 0 again.
        assert_eq!(
            send_all(&mut r, 3 * SLOT + SLOT - 1),
            vec![(0, 1), (1, 0), (2, 3), (3, 2)]
        );
    }

    #[test]
    fn nothing_crosses_during_reconfiguration() {
        let mut r = rotor(0);
        for t in [0, RECONF - 1, SLOT, SLOT + RECONF - 1, 7 * SLOT + 5] {
            assert!(send_all(&mut r, t).is_empty(), "at {t}");
        }
        assert_eq!(r.counters().dropped_reconfiguring, 20);
        assert_eq!(r.counters().tx_frames, 0);
        // Every buffer is back in the pool.
        assert_eq!(r.io().free_frames(), 64);
    }

    #[test]
    fn rotors_started_at_different_times_agree_on_the_slot() {
        let epoch = 5 * SLOT + 123;
        let a = rotor(epoch);
        let b = rotor(epoch);
        // b "started" much later: nothing of its own history matters.
        for t in (epoch..epoch + 10 * SLOT).step_by(77_777) {
            for p in 0..4 {
                assert_eq!(a.circuit(p, t), b.circuit(p, t), "port {p} at {t}");
            }
            let pos = a.clock().at(t);
            assert_eq!(pos.slot, (t - epoch) / SLOT);
            assert!(pos.end_ns > t && pos.end_ns - t <= SLOT);
        }
        // Before the epoch: no circuit.
        assert_eq!(a.circuit(0, epoch - 1), None);
    }

    #[test]
    fn without_an_epoch_nothing_crosses_and_a_single_matching_never_reconfigures() {
        let mut r =
            RotorSwitch::with_epoch(MemIo::new(2, 8), vec![vec![1, 0]], clock(0), false).unwrap();
        assert!(r.io().inject(0, &[0; 60]));
        r.poll(RECONF + 1);
        assert!(r.io().take_sent(1).is_empty());
        assert_eq!(r.counters().dropped_no_epoch, 1);
        r.set_epoch(0);
        // In what would be a reconfiguration: a static rotor has none.
        for t in [0, 5, SLOT + 1] {
            assert!(r.io().inject(0, &[1; 60]));
            r.poll(t);
            assert_eq!(r.io().take_sent(1).len(), 1, "at {t}");
        }
        assert_eq!(r.traffic()[1].tx_frames, 3);
        assert_eq!(r.traffic()[0].rx_bytes, 4 * 60);
    }

    #[test]
    fn a_stamped_frame_is_judged_by_when_it_was_sent() {
        let mut r = rotor(0);
        let frame = |sent: u64| {
            let mut f = vec![0u8; 60];
            f[..5].copy_from_slice(&crate::tor_path::TARGET_MAC_PREFIX);
            f[6..12].copy_from_slice(&crate::tor_path::send_stamp(sent));
            f
        };
        // Sent 10 us before slot 0 ended, polled 30 us into slot 1's
        // reconfiguration: it crossed slot 0's circuit (0 -> 1).
        assert!(r.io().inject(0, &frame(SLOT - 10_000)));
        r.poll(SLOT + 30_000);
        assert_eq!(r.io().take_sent(1).len(), 1);
        // Sent during the reconfiguration: lost, however late it is polled.
        assert!(r.io().inject(0, &frame(SLOT + 5_000)));
        r.poll(SLOT + RECONF + 50_000);
        assert_eq!(r.counters().dropped_reconfiguring, 1);
        // Sent in slot 0, polled three slots later: still slot 0's
        // circuit (0 -> 1).
        assert!(r.io().inject(0, &frame(RECONF + 10)));
        r.poll(3 * SLOT + RECONF + 50_000);
        assert_eq!(r.io().take_sent(1).len(), 1);
        // A stamp older than the limit is not trusted: judged by the poll
        // (slot 1000, like slot 1: 0 -> 2).
        assert!(r.io().inject(0, &frame(10)));
        r.poll(STAMP_MAX_AGE_NS + RECONF + 50_000);
        assert_eq!(r.io().take_sent(2).len(), 1);
        // Unstamped frames are judged by the poll.
        assert!(r.io().inject(0, &[0u8; 60]));
        r.poll(SLOT + 30_000);
        assert_eq!(r.counters().dropped_reconfiguring, 2);
    }

    #[test]
    fn bad_matchings_are_refused() {
        assert!(RotorSwitch::new(MemIo::new(2, 4), vec![vec![0, 0]], clock(0)).is_err());
        assert!(RotorSwitch::new(MemIo::new(2, 4), vec![vec![1]], clock(0)).is_err());
        assert!(RotorSwitch::new(MemIo::new(2, 4), vec![], clock(0)).is_err());
        let bad = SlotClock {
            epoch_ns: 0,
            slot_ns: 10,
            reconfig_ns: 10,
        };
        assert!(RotorSwitch::new(MemIo::new(2, 4), vec![vec![1, 0]], bad).is_err());
    }

    #[test]
    fn housekeeping_keeps_clear_of_slot_openings() {
        // Epoch 1000, Delta 1000, Delta_r 100: slots open at 1100, 2100, ...
        let c = SlotClock {
            epoch_ns: 1_000,
            slot_ns: 1_000,
            reconfig_ns: 100,
        };
        // (from, margin, quiet instant, why)
        let cases = [
            (1_200, 300, 1_200, "900 before the next opening"),
            (1_800, 300, 1_800, "exactly the margin"),
            (1_900, 300, 2_100, "too close: after the opening"),
            (2_050, 300, 2_100, "reconfiguring"),
            (2_100, 300, 2_100, "at an opening the next is a slot away"),
            (
                500,
                300,
                500,
                "before the epoch, far from the first opening",
            ),
            (900, 300, 1_100, "close to the first opening"),
            (1_900, 1_000, 1_900, "no slot has room for the margin"),
            (u64::MAX - 5, 300, u64::MAX - 5, "no overflow"),
        ];
        for (from, margin, quiet, why) in cases {
            assert_eq!(c.quiet_from(from, margin), quiet, "{why}");
        }
    }
}

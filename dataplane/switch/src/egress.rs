//! Emulation of one long-haul egress link: the port buffer (a byte-limited
//! FIFO with tail drop and ECN marking), a shaper at the link rate, and a
//! propagation-delay line.
//!
//! The kernel on the build machines has no netem, and AF_XDP TX bypasses the
//! qdisc layer anyway, so the switch emulates every inter-DC link itself.
//! This module is pure: no I/O, no clock reads (every call that needs time
//! takes `now_ns`, nanoseconds of the caller's monotonic clock) and no
//! allocation per packet: both FIFOs are preallocated in [`Egress::new`].
//!
//! # A frame's life
//!
//! 1. [`Egress::admit`] decides on the instantaneous queue (tail drop, then
//!    ECN) *before* the caller touches the frame, so the caller can set CE in
//!    the frame's bytes. A dropped frame never enters the egress: the caller
//!    recycles it at once.
//! 2. [`Egress::enqueue`] puts an admitted frame in the port buffer and fixes
//!    its departure time on the shaper's virtual clock.
//! 3. [`Egress::poll`] moves every frame whose departure time has come from
//!    the buffer into the delay line (release time = departure + delay) and
//!    hands every frame whose release time has come to the caller
//!    ([`Handoff::Transmit`]), in FIFO order. A frame that finds the delay
//!    line full (it holds [`EgressConfig::max_in_flight`] frames) is handed
//!    back as [`Handoff::Overflow`] for recycling: an emulation overflow, not
//!    a congestion drop.
//! 4. [`Egress::flush`] (port down) hands every held frame back.
//!
//! Every frame given to `enqueue` comes back exactly once, through `poll`
//! (transmit or overflow) or `flush`: nothing leaks, so the switch can
//! recycle every UMEM frame.
//!
//! # Shaper
//!
//! Virtual time, not token counting per wakeup. A frame starts serializing at
//! `max(its arrival, the end of the previous frame)` and occupies the link
//! for `len * 8 / rate` seconds; its *departure* is the end of serialization
//! (its last bit has left the port). A frame therefore occupies the port
//! buffer until it is fully sent, as in a real switch, and on an idle link a
//! frame's one-way latency is `len * 8 / rate + delay`, as on a real link.
//! An idle link accumulates no credit: the `max` restarts the clock from the
//! next arrival.
//!
//! The clock is kept in fixed point with 32 fractional bits of a nanosecond
//! (2^-32 ns), and the cost of a byte is precomputed in the same unit, so the
//! per-frame path has no division and the rate does not drift: at 1 Gbit/s a
//! 1500-byte frame takes exactly 12 000 ns; at 333 Mbit/s the rounding of
//! the per-byte cost is below 2^-33 ns, i.e. under 0.2 ns after 10^6 frames
//! of 1500 bytes (a clock in whole nanoseconds would drift by 36 us). A
//! departure is the clock rounded to the nearest nanosecond.
//!
//! When the caller polls late (timer slack is ~50 us), every frame whose
//! departure is due leaves in that poll but keeps its own virtual departure
//! time, so its release time is still exactly departure + delay: polling
//! late delays the hand-off, never the emulated schedule, and both rate and
//! delay stay exact on average.
//!
//! Bytes are the Ethernet frame length the caller gives (no preamble,
//! inter-frame gap or FCS). A link shaped to R therefore carries TCP goodput
//! of about `R * 1448 / 1514` (MSS 1448 with timestamps in a 1514-byte
//! frame), where a real Ethernet link of rate R would give `R * 1448 / 1538`.
//!
//! # ECN
//!
//! DCQCN/RED style on the instantaneous queue `q` (bytes in the port buffer
//! when the frame is admitted, without the frame itself): `q <= kmin` never
//! marks; `kmin < q < kmax` marks with probability
//! `pmax * (q - kmin) / (kmax - kmin)`; `q >= kmax` always marks. Only ECT
//! frames are marked; a non-ECT frame is never dropped for ECN, only by tail
//! drop (`q + len > buffer_bytes`). The probability is compared in fixed
//! point against the caller's uniform `u32`; the slope is precomputed, so
//! admission has no division either.
//!
//! # Caller contract
//!
//! `queue_bytes` changes only in `enqueue`, `poll` and `flush`: poll before
//! admitting a batch so admission and the congestion estimator see frames
//! that have departed as gone. A typical loop per port:
//!
//! ```
//! use lcmp_switch::egress::{Admit, Egress, EgressConfig, Handoff};
//!
//! let mut port = Egress::<u32>::new(EgressConfig {
//!     rate_bps: 1_000_000_000,
//!     delay_ns: 1_000_000,
//!     buffer_bytes: 150_000,
//!     ecn: None,
//!     max_in_flight: 4096,
//! });
//! let (mut tx, mut recycle) = (Vec::new(), Vec::new());
//! let now = 0;
//! port.poll(now, &mut |h| match h {
//!     Handoff::Transmit { frame, .. } => tx.push(frame),
//!     Handoff::Overflow { frame, .. } => recycle.push(frame),
//! });
//! let (frame, len, ect, random) = (7u32, 1500, true, 0x1234_5678);
//! match port.admit(len, ect, random) {
//!     Admit::Queued => port.enqueue(frame, len, now),
//!     Admit::QueuedMarkCe => {
//!         // set CE in the frame's IP header here, then:
//!         port.enqueue(frame, len, now)
//!     }
//!     Admit::DropQueueFull => recycle.push(frame),
//! }
//! // Event mode: sleep until `port.next_deadline()`, then poll again.
//! assert_eq!(port.next_deadline(), Some(12_000));
//! ```

use std::collections::VecDeque;

/// Fractional bits of the shaper's virtual clock (units of 2^-32 ns).
const CLOCK_FRAC_BITS: u32 = 32;
/// Smallest Ethernet frame without FCS; sizes the port buffer's FIFO.
const MIN_FRAME_BYTES: u64 = 60;
/// Preallocation cap per FIFO (a FIFO grows beyond it, amortised, only if
/// more frames than this are ever held at once).
const MAX_PREALLOC_SLOTS: usize = 1 << 20;

/// ECN marking thresholds (DCQCN/RED style on the instantaneous queue).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EcnConfig {
    /// At or below this many queued bytes nothing is marked.
    pub kmin_bytes: u64,
    /// At or above this many queued bytes every ECT frame is marked.
    pub kmax_bytes: u64,
    /// Marking probability reached just below `kmax_bytes`, in `0.0..=1.0`
    /// (clamped; NaN counts as 0). Stored in fixed point, units of 2^-32.
    pub pmax: f64,
}

/// The emulated link of one egress port.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EgressConfig {
    /// Link rate the shaper emulates, bits per second. 0: unshaped (a frame
    /// departs when it arrives).
    pub rate_bps: u64,
    /// One-way propagation delay of the link, nanoseconds. 0: none.
    pub delay_ns: u64,
    /// Port buffer: the most bytes that may wait for the shaper.
    pub buffer_bytes: u64,
    /// ECN marking, or `None` for tail drop only.
    pub ecn: Option<EcnConfig>,
    /// Frames the delay line may hold (the switch's frame budget for this
    /// link). A frame that departs when the line is full is handed back as
    /// an emulation overflow.
    pub max_in_flight: usize,
}

/// Admission verdict for one frame.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admit {
    /// Enqueue the frame unchanged.
    Queued,
    /// Set CE in the frame's IP header, then enqueue it.
    QueuedMarkCe,
    /// The port buffer is full: recycle the frame (it never entered).
    DropQueueFull,
}

impl Admit {
    /// Whether the frame is to be enqueued.
    pub fn is_queued(self) -> bool {
        !matches!(self, Admit::DropQueueFull)
    }
}

/// A frame handed back by [`Egress::poll`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handoff<F> {
    /// The frame has crossed the emulated link: transmit it now.
    Transmit {
        /// The frame handle given to [`Egress::enqueue`].
        frame: F,
        /// Its length in bytes.
        len: u32,
        /// Its emulated arrival at the far end: departure + delay. Never
        /// after the `now_ns` of the poll that hands it out.
        due_ns: u64,
    },
    /// The delay line was full when the frame departed: recycle it (count it
    /// as an emulation overflow).
    Overflow {
        /// The frame handle given to [`Egress::enqueue`].
        frame: F,
        /// Its length in bytes.
        len: u32,
    },
}

impl<F: Copy> Handoff<F> {
    /// The frame handle, whatever its fate.
    pub fn frame(&self) -> F {
        match *self {
            Handoff::Transmit { frame, .. } | Handoff::Overflow { frame, .. } => frame,
        }
    }
}

/// What one [`Egress::poll`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EgressStep {
    /// Frames that left the port buffer (their departure time had come).
    pub departed: usize,
    /// Frames handed out as [`Handoff::Transmit`].
    pub transmitted: usize,
    /// Frames handed out as [`Handoff::Overflow`].
    pub overflowed: usize,
}

/// Counters since construction. Conservation: `enqueued_frames ==
/// transmitted_frames + dropped_emulation_overflow + flushed + held()`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EgressStats {
    /// Frames put in the port buffer.
    pub enqueued_frames: u64,
    /// Bytes put in the port buffer.
    pub enqueued_bytes: u64,
    /// Admissions that asked for a CE mark.
    pub ce_marked: u64,
    /// Admissions refused because the port buffer was full.
    pub dropped_queue_full: u64,
    /// Frames handed back because the delay line was full.
    pub dropped_emulation_overflow: u64,
    /// Frames handed back by [`Egress::flush`].
    pub flushed: u64,
    /// Frames handed out for transmission.
    pub transmitted_frames: u64,
    /// Bytes handed out for transmission.
    pub transmitted_bytes: u64,
}

/// A held frame with its next event time (departure in the port buffer,
/// release in the delay line).
#[derive(Clone, Copy, Debug)]
struct Slot<F> {
    frame: F,
    len: u32,
    at_ns: u64,
}

/// ECN thresholds in the form the packet path uses.
#[derive(Clone, Copy, Debug)]
struct Marker {
    kmin: u64,
    kmax: u64,
    /// `pmax / (kmax - kmin)` in units of 2^-32 probability per byte, times
    /// 2^64 (so `(q - kmin) * slope >> 64` is the threshold for `random`).
    slope: u128,
}

impl Marker {
    fn new(ecn: &EcnConfig) -> Self {
        let pmax = if ecn.pmax.is_nan() {
            0.0
        } else {
            ecn.pmax.clamp(0.0, 1.0)
        };
        // `as` saturates: pmax = 1.0 gives u32::MAX (1 - 2^-32), which only
        // matters below kmax; at kmax and above every ECT frame is marked.
        let pmax_fp = (pmax * 4_294_967_296.0).round() as u32;
        let span = ecn.kmax_bytes.saturating_sub(ecn.kmin_bytes);
        // With span 0, every q > kmin is also >= kmax: the slope is unused.
        let slope = ((pmax_fp as u128) << 64) / (span.max(1) as u128);
        Marker {
            kmin: ecn.kmin_bytes,
            kmax: ecn.kmax_bytes,
            slope,
        }
    }

    /// Whether an ECT frame arriving at a queue of `q` bytes is marked.
    #[inline]
    fn mark(&self, q: u64, random: u32) -> bool {
        if q <= self.kmin {
            false
        } else if q >= self.kmax {
            true
        } else {
            // (q - kmin) < span, so the product is below pmax_fp * 2^64.
            let threshold = ((q - self.kmin) as u128 * self.slope + (1u128 << 63)) >> 64;
            (random as u128) < threshold
        }
    }
}

/// Serialization time of one byte at `rate_bps`, 2^-32 ns (0: unshaped).
fn byte_time_fp(rate_bps: u64) -> u128 {
    if rate_bps == 0 {
        return 0;
    }
    // 8e9 ns per byte-per-second, rounded to the nearest 2^-32 ns.
    let rate = rate_bps as u128;
    ((8_000_000_000u128 << CLOCK_FRAC_BITS) + rate / 2) / rate
}

/// One emulated egress link. `F` is the frame handle (the switch uses a UMEM
/// descriptor; tests use integers).
#[derive(Debug)]
pub struct Egress<F: Copy> {
    cfg: EgressConfig,
    marker: Option<Marker>,
    /// Serialization time of one byte, 2^-32 ns (0 when unshaped).
    byte_time_fp: u128,
    /// End of the last scheduled serialization, 2^-32 ns.
    link_free_fp: u128,
    /// The port buffer; `at_ns` is the departure time.
    queue: VecDeque<Slot<F>>,
    queue_bytes: u64,
    /// The delay line; `at_ns` is the release time.
    line: VecDeque<Slot<F>>,
    stats: EgressStats,
}

impl<F: Copy> Egress<F> {
    /// An idle link. Preallocates the port buffer for `buffer_bytes / 60 + 1`
    /// frames (60 bytes: the smallest Ethernet frame without FCS) and the
    /// delay line for `max_in_flight` frames, each capped at 2^20 slots.
    pub fn new(cfg: EgressConfig) -> Self {
        let byte_time_fp = byte_time_fp(cfg.rate_bps);
        let queue_slots = (cfg.buffer_bytes / MIN_FRAME_BYTES)
            .saturating_add(1)
            .min(MAX_PREALLOC_SLOTS as u64) as usize;
        let line_slots = cfg.max_in_flight.min(MAX_PREALLOC_SLOTS);
        Egress {
            marker: cfg.ecn.as_ref().map(Marker::new),
            cfg,
            byte_time_fp,
            link_free_fp: 0,
            queue: VecDeque::with_capacity(queue_slots),
            queue_bytes: 0,
            line: VecDeque::with_capacity(line_slots),
            stats: EgressStats::default(),
        }
    }

    /// The configuration in force.
    pub fn config(&self) -> &EgressConfig {
        &self.cfg
    }

    /// Changes the link live (rate, delay, buffer, ECN). Frames already
    /// scheduled keep their departure and release times, so nothing held
    /// is reordered or lost; frames admitted from now on see the new link.
    /// A smaller buffer admits nothing until the queue drains below it.
    pub fn reconfigure(&mut self, cfg: EgressConfig) {
        self.byte_time_fp = byte_time_fp(cfg.rate_bps);
        self.marker = cfg.ecn.as_ref().map(Marker::new);
        self.cfg = cfg;
    }

    /// Decides the fate of a frame of `len` bytes (ECT if `ect`) against the
    /// current port buffer: tail drop if `queue_bytes + len > buffer_bytes`,
    /// else an ECN mark as described in the module documentation. `random`
    /// is a uniform `u32` from the caller's PRNG. Counts drops and marks; an
    /// admitted frame must then be given to [`Egress::enqueue`].
    #[inline]
    pub fn admit(&mut self, len: u32, ect: bool, random: u32) -> Admit {
        let q = self.queue_bytes;
        if q.saturating_add(len as u64) > self.cfg.buffer_bytes {
            self.stats.dropped_queue_full += 1;
            return Admit::DropQueueFull;
        }
        match self.marker {
            Some(ref m) if ect && m.mark(q, random) => {
                self.stats.ce_marked += 1;
                Admit::QueuedMarkCe
            }
            _ => Admit::Queued,
        }
    }

    /// Puts an admitted frame of `len` bytes, arrived at `now_ns`, in the
    /// port buffer and schedules its departure on the shaper's clock.
    #[inline]
    pub fn enqueue(&mut self, frame: F, len: u32, now_ns: u64) {
        let start = self.link_free_fp.max((now_ns as u128) << CLOCK_FRAC_BITS);
        let end = start + len as u128 * self.byte_time_fp;
        self.link_free_fp = end;
        let departure = (end + (1u128 << (CLOCK_FRAC_BITS - 1))) >> CLOCK_FRAC_BITS;
        self.queue.push_back(Slot {
            frame,
            len,
            at_ns: u64::try_from(departure).unwrap_or(u64::MAX),
        });
        self.queue_bytes += len as u64;
        self.stats.enqueued_frames += 1;
        self.stats.enqueued_bytes += len as u64;
    }

    /// [`Egress::admit`], then [`Egress::enqueue`] if admitted. On
    /// `QueuedMarkCe` the caller sets CE in the frame before its next poll
    /// (nothing is transmitted outside `poll`); on `DropQueueFull` the frame
    /// is the caller's to recycle.
    #[inline]
    pub fn offer(&mut self, frame: F, len: u32, ect: bool, random: u32, now_ns: u64) -> Admit {
        let verdict = self.admit(len, ect, random);
        if verdict.is_queued() {
            self.enqueue(frame, len, now_ns);
        }
        verdict
    }

    /// Advances the link to `now_ns`: frames whose departure has come leave
    /// the port buffer for the delay line, and frames whose release has come
    /// are handed to `out` in FIFO order ([`Handoff::Transmit`]); frames that
    /// find the delay line full are handed to `out` as
    /// [`Handoff::Overflow`].
    pub fn poll(&mut self, now_ns: u64, out: &mut impl FnMut(Handoff<F>)) -> EgressStep {
        self.poll_budget(now_ns, usize::MAX, out)
    }

    /// [`Egress::poll`] handing out at most `max_transmit` frames for
    /// transmission (for a TX ring with that many free slots). Departures
    /// still follow the clock; frames due but not handed out stay in the
    /// delay line, first in line, and [`Egress::next_deadline`] is then
    /// `<= now_ns`.
    pub fn poll_budget(
        &mut self,
        now_ns: u64,
        max_transmit: usize,
        out: &mut impl FnMut(Handoff<F>),
    ) -> EgressStep {
        let mut step = EgressStep::default();
        // Release phase: the delay line is ordered by release time.
        while step.transmitted < max_transmit {
            match self.line.front() {
                Some(s) if s.at_ns <= now_ns => {
                    let s = *s;
                    self.line.pop_front();
                    self.transmit(s, &mut step, out);
                }
                _ => break,
            }
        }
        // Departure phase. Releases are monotonic (departures are, the delay
        // is constant), so a departed frame already due may skip the delay
        // line only if the line is empty; otherwise it queues behind.
        let delay = self.cfg.delay_ns;
        while let Some(s) = self.queue.front() {
            if s.at_ns > now_ns {
                break;
            }
            let mut s = *s;
            self.queue.pop_front();
            self.queue_bytes -= s.len as u64;
            step.departed += 1;
            s.at_ns = s.at_ns.saturating_add(delay);
            if s.at_ns <= now_ns && self.line.is_empty() && step.transmitted < max_transmit {
                self.transmit(s, &mut step, out);
            } else if self.line.len() < self.cfg.max_in_flight {
                self.line.push_back(s);
            } else {
                step.overflowed += 1;
                self.stats.dropped_emulation_overflow += 1;
                out(Handoff::Overflow {
                    frame: s.frame,
                    len: s.len,
                });
            }
        }
        step
    }

    #[inline]
    fn transmit(&mut self, s: Slot<F>, step: &mut EgressStep, out: &mut impl FnMut(Handoff<F>)) {
        step.transmitted += 1;
        self.stats.transmitted_frames += 1;
        self.stats.transmitted_bytes += s.len as u64;
        out(Handoff::Transmit {
            frame: s.frame,
            len: s.len,
            due_ns: s.at_ns,
        });
    }

    /// Earliest time at which a poll has something to do: the departure of
    /// the head of the port buffer or the release of the head of the delay
    /// line. `None` when nothing is held.
    pub fn next_deadline(&self) -> Option<u64> {
        match (self.next_departure(), self.next_release()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Departure time of the head of the port buffer.
    pub fn next_departure(&self) -> Option<u64> {
        self.queue.front().map(|s| s.at_ns)
    }

    /// Release time of the head of the delay line.
    pub fn next_release(&self) -> Option<u64> {
        self.line.front().map(|s| s.at_ns)
    }

    /// Bytes waiting in the port buffer (what the congestion estimator
    /// samples), as of the last `enqueue`/`poll`/`flush`.
    pub fn queue_bytes(&self) -> u64 {
        self.queue_bytes
    }

    /// Frames waiting in the port buffer.
    pub fn queued_frames(&self) -> usize {
        self.queue.len()
    }

    /// Frames in the delay line.
    pub fn in_flight(&self) -> usize {
        self.line.len()
    }

    /// Frames held (port buffer and delay line).
    pub fn held(&self) -> usize {
        self.queue.len() + self.line.len()
    }

    /// Port down: hands every held frame to `out` for recycling (delay line
    /// first, then the port buffer, so in FIFO order), returns how many, and
    /// leaves an idle link (the shaper's clock restarts at the next arrival).
    pub fn flush(&mut self, out: &mut impl FnMut(F)) -> usize {
        let n = self.held();
        for s in self.line.drain(..).chain(self.queue.drain(..)) {
            out(s.frame);
        }
        self.queue_bytes = 0;
        self.link_free_fp = 0;
        self.stats.flushed += n as u64;
        n
    }

    /// Counters since construction.
    pub fn stats(&self) -> EgressStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const GBIT: u64 = 1_000_000_000;
    const US: u64 = 1_000;
    const MS: u64 = 1_000_000;

    fn cfg(rate_bps: u64, delay_ns: u64, buffer_bytes: u64) -> EgressConfig {
        EgressConfig {
            rate_bps,
            delay_ns,
            buffer_bytes,
            ecn: None,
            max_in_flight: 1 << 16,
        }
    }

    /// Deterministic xorshift32 PRNG.
    struct XorShift(u32);

    impl XorShift {
        fn next(&mut self) -> u32 {
            let mut x = self.0;
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            self.0 = x;
            x
        }
    }

    /// Polls and collects every hand-off: (frame, len, due) for transmits,
    /// frames for overflows.
    #[derive(Default)]
    struct Sink {
        tx: Vec<(u32, u32, u64)>,
        overflow: Vec<u32>,
    }

    impl Sink {
        fn poll(&mut self, e: &mut Egress<u32>, now: u64) -> EgressStep {
            e.poll(now, &mut |h| match h {
                Handoff::Transmit { frame, len, due_ns } => self.tx.push((frame, len, due_ns)),
                Handoff::Overflow { frame, .. } => self.overflow.push(frame),
            })
        }
    }

    fn enqueue_n(e: &mut Egress<u32>, ids: std::ops::Range<u32>, len: u32, now: u64) {
        for id in ids {
            assert_eq!(e.admit(len, false, 0), Admit::Queued);
            e.enqueue(id, len, now);
        }
    }

    // ---- tail drop ----

    #[test]
    fn tail_drop_exactly_at_buffer_boundary() {
        let mut e = Egress::new(cfg(GBIT, 0, 3000));
        assert_eq!(e.offer(0, 1500, false, 0, 0), Admit::Queued); // 0 + 1500 <= 3000
        assert_eq!(e.offer(1, 1499, false, 0, 0), Admit::Queued); // 1500 + 1499 <= 3000
        assert_eq!(e.offer(2, 1, false, 0, 0), Admit::Queued); // 2999 + 1 == 3000
        assert_eq!(e.queue_bytes(), 3000);
        assert_eq!(e.offer(3, 1, false, 0, 0), Admit::DropQueueFull); // 3001 > 3000
        assert_eq!(e.offer(4, 64, true, 0, 0), Admit::DropQueueFull);
        assert_eq!(e.queue_bytes(), 3000);
        assert_eq!(e.stats().dropped_queue_full, 2);
        // Frame 0 departs at 1500 * 8 ns = 12 us: 1500 bytes free again.
        let mut sink = Sink::default();
        sink.poll(&mut e, 12 * US - 1);
        assert_eq!(e.queue_bytes(), 3000);
        sink.poll(&mut e, 12 * US);
        assert_eq!(sink.tx, vec![(0, 1500, 12 * US)]);
        assert_eq!(e.queue_bytes(), 1500);
        assert_eq!(e.offer(5, 1501, false, 0, 12 * US), Admit::DropQueueFull);
        assert_eq!(e.offer(6, 1500, false, 0, 12 * US), Admit::Queued);
        assert_eq!(e.queue_bytes(), 3000);
    }

    #[test]
    fn zero_buffer_drops_everything() {
        let mut e = Egress::<u32>::new(cfg(0, 0, 0));
        assert_eq!(e.admit(1, false, 0), Admit::DropQueueFull);
        assert_eq!(e.admit(1, true, 0), Admit::DropQueueFull);
        assert_eq!(e.stats().dropped_queue_full, 2);
    }

    // ---- ECN ----

    fn ecn_egress(kmin: u64, kmax: u64, pmax: f64) -> Egress<u32> {
        Egress::new(EgressConfig {
            ecn: Some(EcnConfig {
                kmin_bytes: kmin,
                kmax_bytes: kmax,
                pmax,
            }),
            // A slow link: nothing departs during these tests (no polls).
            ..cfg(1_000, 0, 1_000_000)
        })
    }

    /// Fills the queue of `e` with non-ECT frames to exactly `q` bytes.
    fn fill_to(e: &mut Egress<u32>, q: u64) {
        let mut left = q - e.queue_bytes();
        while left > 0 {
            let len = left.min(1500) as u32;
            assert_eq!(e.offer(0, len, false, 0, 0), Admit::Queued);
            left -= len as u64;
        }
        assert_eq!(e.queue_bytes(), q);
    }

    #[test]
    fn ecn_at_or_below_kmin_never_marks() {
        let mut e = ecn_egress(10_000, 50_000, 1.0);
        for q in [0, 1, 5_000, 9_999, 10_000] {
            fill_to(&mut e, q);
            // random = 0 is the value most likely to mark.
            assert_eq!(e.admit(1000, true, 0), Admit::Queued, "q = {q}");
        }
        assert_eq!(e.stats().ce_marked, 0);
    }

    #[test]
    fn ecn_at_or_above_kmax_always_marks_ect() {
        let mut e = ecn_egress(10_000, 50_000, 0.01);
        for q in [50_000, 50_001, 200_000, 999_000] {
            fill_to(&mut e, q);
            // random = u32::MAX is the value least likely to mark.
            assert_eq!(
                e.admit(1000, true, u32::MAX),
                Admit::QueuedMarkCe,
                "q = {q}"
            );
        }
        // Above kmax, a frame that does not fit is still tail-dropped.
        assert_eq!(e.admit(1001, true, 0), Admit::DropQueueFull);
        assert_eq!(e.stats().ce_marked, 4);
    }

    #[test]
    fn ecn_never_marks_non_ect() {
        let mut e = ecn_egress(10_000, 50_000, 1.0);
        let mut rng = XorShift(0x9E37_79B9);
        for q in [0, 10_001, 30_000, 50_000, 900_000] {
            fill_to(&mut e, q);
            for _ in 0..1000 {
                assert_eq!(e.admit(1000, false, rng.next()), Admit::Queued);
            }
            assert_eq!(e.admit(1000, false, 0), Admit::Queued);
        }
        assert_eq!(e.stats().ce_marked, 0);
    }

    #[test]
    fn ecn_threshold_is_exact_fixed_point() {
        // pmax 0.5, q halfway: p = 0.25, threshold 2^30.
        let mut e = ecn_egress(1_000, 3_000, 0.5);
        fill_to(&mut e, 2_000);
        assert_eq!(e.admit(100, true, (1 << 30) - 1), Admit::QueuedMarkCe);
        assert_eq!(e.admit(100, true, 1 << 30), Admit::Queued);
        // One byte above kmin: p = 0.5 / 2000 = 2^31 / 2000 = 1073741.824.
        let mut e = ecn_egress(1_000, 3_000, 0.5);
        fill_to(&mut e, 1_001);
        assert_eq!(e.admit(100, true, 1_073_741), Admit::QueuedMarkCe);
        assert_eq!(e.admit(100, true, 1_073_742), Admit::Queued);
        // pmax 0: never below kmax, always at kmax.
        let mut e = ecn_egress(1_000, 3_000, 0.0);
        fill_to(&mut e, 2_999);
        assert_eq!(e.admit(1, true, 0), Admit::Queued);
        fill_to(&mut e, 3_000);
        assert_eq!(e.admit(1, true, u32::MAX), Admit::QueuedMarkCe);
    }

    #[test]
    fn ecn_mark_fraction_follows_formula() {
        // pmax 0.2 between 10 000 and 50 000 bytes.
        let mut rng = XorShift(0x1234_5678);
        for (q, p) in [
            (20_000, 0.05),
            (30_000, 0.1),
            (45_000, 0.175),
            (49_000, 0.195),
        ] {
            let mut e = ecn_egress(10_000, 50_000, 0.2);
            fill_to(&mut e, q);
            let n = 200_000;
            let marked = (0..n)
                .filter(|_| e.admit(1000, true, rng.next()) == Admit::QueuedMarkCe)
                .count();
            assert_eq!(e.stats().ce_marked, marked as u64);
            let frac = marked as f64 / n as f64;
            assert!(
                (frac - p).abs() < 0.04 * p,
                "q = {q}: marked {frac}, expected {p}"
            );
        }
    }

    #[test]
    fn ecn_degenerate_thresholds() {
        // kmin == kmax: a step at kmin.
        let mut e = ecn_egress(5_000, 5_000, 0.3);
        fill_to(&mut e, 5_000);
        assert_eq!(e.admit(1, true, 0), Admit::Queued);
        fill_to(&mut e, 5_001);
        assert_eq!(e.admit(1, true, u32::MAX), Admit::QueuedMarkCe);
        // Out-of-range pmax is clamped to 1; NaN means 0.
        let mut e = ecn_egress(0, 1_000, 7.0);
        fill_to(&mut e, 500);
        assert_eq!(e.admit(1, true, (1 << 31) - 2), Admit::QueuedMarkCe);
        assert_eq!(e.admit(1, true, (1 << 31) + 1), Admit::Queued);
        let mut e = ecn_egress(0, 1_000, f64::NAN);
        fill_to(&mut e, 999);
        assert_eq!(e.admit(1, true, 0), Admit::Queued);
    }

    // ---- shaper ----

    #[test]
    fn shaper_1g_departures_exactly_12us_apart() {
        let mut e = Egress::new(cfg(GBIT, 0, 1_500_000));
        enqueue_n(&mut e, 0..1000, 1500, 0);
        assert_eq!(e.next_deadline(), Some(12 * US));
        let mut sink = Sink::default();
        // Poll exactly at each departure: one frame each time.
        for k in 1..=1000u64 {
            assert_eq!(e.next_deadline(), Some(k * 12 * US));
            sink.poll(&mut e, k * 12 * US - 1);
            assert_eq!(sink.tx.len() as u64, k - 1);
            let step = sink.poll(&mut e, k * 12 * US);
            assert_eq!(step.transmitted, 1);
            assert_eq!(e.queue_bytes(), (1000 - k) * 1500);
        }
        let expect: Vec<_> = (0..1000u32)
            .map(|i| (i, 1500, (i as u64 + 1) * 12 * US))
            .collect();
        assert_eq!(sink.tx, expect);
        assert_eq!(e.next_deadline(), None);
    }

    #[test]
    fn shaper_exact_under_late_irregular_polls() {
        // 1 Gbit/s, 5 ms delay; a source keeps the 100-frame buffer full; the
        // switch polls every 37..=90 us. Frame k departs at (k+1) * 12 us
        // exactly, whenever the poll happens.
        let delay = 5 * MS;
        let mut e = Egress::new(cfg(GBIT, delay, 150_000));
        let mut rng = XorShift(0xDEAD_BEEF);
        let mut next_id = 0u32;
        let mut now = 0u64;
        let mut sink = Sink::default();
        let mut handed_at = Vec::new(); // poll time of each transmit
        let end = 1_000 * MS + delay + 200 * US;
        while now <= end {
            let before = sink.tx.len();
            sink.poll(&mut e, now);
            handed_at.resize(sink.tx.len(), now);
            for &(_, _, due) in &sink.tx[before..] {
                assert!(due <= now && now - due < 90 * US, "due {due} at {now}");
            }
            while e.offer(next_id, 1500, false, 0, now).is_queued() {
                next_id += 1;
            }
            now += 37 * US + (rng.next() as u64 % (53 * US + 1));
        }
        assert!(sink.overflow.is_empty());
        for (k, &(id, _, due)) in sink.tx.iter().enumerate() {
            assert_eq!(id, k as u32);
            assert_eq!(due, (k as u64 + 1) * 12 * US + delay);
        }
        // Emulated schedule over 1 s after the first release: 1e9 / 12000.
        let in_first_second = sink.tx.iter().filter(|t| t.2 <= delay + 1_000 * MS).count();
        assert_eq!(in_first_second, 83_333);
        // Handed out by then: at most the 90 us slack (7.5 frames) behind.
        let by_then = handed_at
            .iter()
            .filter(|&&t| t <= delay + 1_000 * MS)
            .count();
        assert!((83_325..=83_333).contains(&by_then), "{by_then}");
    }

    /// Exact departure of frame k (1-based) of `len` bytes from a backlog
    /// queued at t = 0: k * len * 8e9 / rate, rounded to nearest ns.
    fn exact_departure(k: u64, len: u64, rate: u64) -> u64 {
        let num = k as u128 * len as u128 * 8_000_000_000;
        ((num + rate as u128 / 2) / rate as u128) as u64
    }

    #[test]
    fn shaper_odd_rates_do_not_drift_over_a_million_frames() {
        for rate in [
            333_000_000,
            300_000_000,
            7_000_000,
            100 * GBIT,
            25 * GBIT + 1,
        ] {
            let n = 1_000_000u32;
            let mut e = Egress::new(EgressConfig {
                max_in_flight: 0,
                ..cfg(rate, 0, 2_000_000_000)
            });
            enqueue_n(&mut e, 0..n, 1500, 0);
            let mut k = 0u64;
            let step = e.poll(u64::MAX, &mut |h| {
                let Handoff::Transmit { due_ns, .. } = h else {
                    panic!("overflow")
                };
                k += 1;
                let exact = exact_departure(k, 1500, rate);
                assert!(
                    due_ns.abs_diff(exact) <= 1,
                    "rate {rate} frame {k}: {due_ns} vs {exact}"
                );
            });
            assert_eq!(step.transmitted, n as usize);
            if rate == 333_000_000 {
                // 10^6 * 1500 * 8 / 333e6 s = 36.036036036036 s.
                assert_eq!(exact_departure(k, 1500, rate), 36_036_036_036);
            }
        }
        // Whole nanoseconds where the rate allows it: 200 Mbit/s is 40 ns/B.
        let mut e = Egress::new(cfg(200_000_000, 0, 1_000_000));
        enqueue_n(&mut e, 0..3, 1500, 0);
        let mut sink = Sink::default();
        sink.poll(&mut e, u64::MAX);
        let dues: Vec<_> = sink.tx.iter().map(|t| t.2).collect();
        assert_eq!(dues, vec![60_000, 120_000, 180_000]);
    }

    #[test]
    fn shaper_idle_link_accumulates_no_credit() {
        let mut e = Egress::new(cfg(GBIT, 0, 1_000_000));
        let mut sink = Sink::default();
        e.enqueue(0, 1500, 0);
        sink.poll(&mut e, 20 * US);
        assert_eq!(sink.tx, vec![(0, 1500, 12 * US)]);
        // Idle until 1 ms: a burst of 3 is still spaced by 12 us.
        enqueue_n(&mut e, 1..4, 1500, MS);
        // A frame arriving while the link is busy waits for it.
        e.enqueue(4, 1000, MS + 5 * US);
        // One arriving after the backlog has drained starts at its arrival.
        sink.poll(&mut e, 2 * MS);
        e.enqueue(5, 125, 3 * MS);
        sink.poll(&mut e, 4 * MS);
        let dues: Vec<_> = sink.tx.iter().map(|t| t.2).collect();
        assert_eq!(
            dues,
            vec![
                12 * US,
                MS + 12 * US,
                MS + 24 * US,
                MS + 36 * US,
                MS + 44 * US,
                3 * MS + US
            ]
        );
    }

    #[test]
    fn shaper_frame_arriving_mid_service_waits() {
        let mut e = Egress::new(cfg(GBIT, 0, 1_000_000));
        e.enqueue(0, 1500, 0); // 0 .. 12 us
        e.enqueue(1, 1500, 5 * US); // 12 .. 24 us
        e.enqueue(2, 64, 30 * US); // 30 .. 30.512 us
        let mut sink = Sink::default();
        sink.poll(&mut e, MS);
        assert_eq!(
            sink.tx,
            vec![
                (0, 1500, 12 * US),
                (1, 1500, 24 * US),
                (2, 64, 30 * US + 512)
            ]
        );
    }

    // ---- delay line ----

    #[test]
    fn delay_release_is_departure_plus_delay() {
        let delay = 10 * MS;
        let mut e = Egress::new(cfg(GBIT, delay, 1_000_000));
        enqueue_n(&mut e, 0..3, 1500, 0);
        let mut sink = Sink::default();
        // At 30 us two frames have departed into the delay line.
        let step = sink.poll(&mut e, 30 * US);
        assert_eq!((step.departed, step.transmitted), (2, 0));
        assert_eq!(
            (e.queued_frames(), e.in_flight(), e.queue_bytes()),
            (1, 2, 1500)
        );
        sink.poll(&mut e, delay + 12 * US - 1);
        assert!(sink.tx.is_empty());
        sink.poll(&mut e, delay + 12 * US);
        assert_eq!(sink.tx, vec![(0, 1500, delay + 12 * US)]);
        // A late poll hands out the rest with their own release times.
        sink.poll(&mut e, delay + 100 * US);
        assert_eq!(
            sink.tx,
            vec![
                (0, 1500, delay + 12 * US),
                (1, 1500, delay + 24 * US),
                (2, 1500, delay + 36 * US)
            ]
        );
        assert_eq!(e.held(), 0);
    }

    #[test]
    fn next_deadline_in_every_state() {
        let delay = 100 * US;
        let mut e = Egress::new(cfg(GBIT, delay, 1_000_000));
        let mut sink = Sink::default();
        // Empty.
        assert_eq!(e.next_deadline(), None);
        // Only the queue: the head's departure.
        enqueue_n(&mut e, 0..20, 1500, 0);
        assert_eq!(
            (e.next_departure(), e.next_release()),
            (Some(12 * US), None)
        );
        assert_eq!(e.next_deadline(), Some(12 * US));
        // Both, the queue first: frames 0..=4 departed (12..=60 us), the line
        // releases frame 0 at 112 us, frame 5 departs at 72 us.
        sink.poll(&mut e, 61 * US);
        assert_eq!(e.next_release(), Some(112 * US));
        assert_eq!(e.next_deadline(), Some(72 * US));
        // Both, the line first: at 110 us frames 0..=8 departed (line head
        // releases at 112 us), frame 9 departs at 120 us.
        sink.poll(&mut e, 110 * US);
        assert_eq!(e.next_departure(), Some(120 * US));
        assert_eq!(e.next_deadline(), Some(112 * US));
        // Only the line: all departed by 240 us, frames 0..=10 released.
        sink.poll(&mut e, 240 * US);
        assert_eq!(sink.tx.len(), 11);
        assert_eq!(e.next_departure(), None);
        assert_eq!(e.next_deadline(), Some(12 * 12 * US + delay));
        sink.poll(&mut e, MS);
        assert_eq!(sink.tx.len(), 20);
        assert_eq!(e.next_deadline(), None);
    }

    #[test]
    fn unshaped_undelayed_passes_straight_through() {
        let mut e = Egress::new(EgressConfig {
            max_in_flight: 0,
            ..cfg(0, 0, 10_000)
        });
        enqueue_n(&mut e, 0..5, 1000, 7);
        assert_eq!(e.next_deadline(), Some(7));
        let mut sink = Sink::default();
        let step = sink.poll(&mut e, 7);
        assert_eq!(step.transmitted, 5);
        let expect: Vec<_> = (0..5).map(|i| (i, 1000, 7)).collect();
        assert_eq!(sink.tx, expect);
        assert_eq!((e.held(), e.queue_bytes()), (0, 0));
    }

    #[test]
    fn unshaped_with_delay() {
        let mut e = Egress::new(cfg(0, MS, 10_000));
        e.enqueue(0, 100, 5);
        e.enqueue(1, 100, 9);
        let mut sink = Sink::default();
        sink.poll(&mut e, 9);
        assert_eq!((e.in_flight(), e.queue_bytes()), (2, 0));
        assert_eq!(e.next_deadline(), Some(MS + 5));
        sink.poll(&mut e, MS + 9);
        assert_eq!(sink.tx, vec![(0, 100, MS + 5), (1, 100, MS + 9)]);
    }

    #[test]
    fn max_in_flight_overflow_is_counted_and_handed_back() {
        let delay = 10 * MS;
        let mut e = Egress::new(EgressConfig {
            max_in_flight: 3,
            ..cfg(GBIT, delay, 1_000_000)
        });
        enqueue_n(&mut e, 0..5, 1500, 0);
        let mut sink = Sink::default();
        let step = sink.poll(&mut e, 60 * US);
        assert_eq!(
            step,
            EgressStep {
                departed: 5,
                transmitted: 0,
                overflowed: 2
            }
        );
        assert_eq!(sink.overflow, vec![3, 4]);
        assert_eq!(e.in_flight(), 3);
        assert_eq!(e.stats().dropped_emulation_overflow, 2);
        sink.poll(&mut e, delay + 60 * US);
        let ids: Vec<_> = sink.tx.iter().map(|t| t.0).collect();
        assert_eq!(ids, vec![0, 1, 2]);
        assert_eq!(e.stats().transmitted_frames, 3);
        // With room again, later frames enter.
        enqueue_n(&mut e, 5..6, 1500, delay + 60 * US);
        sink.poll(&mut e, 2 * delay + 72 * US - 1);
        assert_eq!(sink.tx.len(), 3);
        sink.poll(&mut e, 2 * delay + 72 * US);
        assert_eq!(sink.tx.last().unwrap(), &(5, 1500, 2 * delay + 72 * US));
    }

    #[test]
    fn due_frames_skip_a_full_delay_line_only_when_it_is_empty() {
        // max_in_flight 0 still passes frames that are due when they depart.
        let mut e = Egress::new(EgressConfig {
            max_in_flight: 0,
            ..cfg(GBIT, 5 * US, 1_000_000)
        });
        enqueue_n(&mut e, 0..3, 1500, 0);
        let mut sink = Sink::default();
        sink.poll(&mut e, 20 * US); // frame 0 due at 17 us; frame 1 departs at 24 us
        sink.poll(&mut e, 24 * US); // frame 1 departs, due at 29 us: overflow
        sink.poll(&mut e, 100 * US); // frame 2 departs at 36 us, due at 41 us
        assert_eq!(sink.tx, vec![(0, 1500, 17 * US), (2, 1500, 41 * US)]);
        assert_eq!(sink.overflow, vec![1]);
    }

    #[test]
    fn poll_budget_limits_transmits_and_keeps_order() {
        let mut e = Egress::new(cfg(GBIT, MS, 1_000_000));
        enqueue_n(&mut e, 0..10, 1500, 0);
        let mut got = Vec::new();
        let mut sink = |h: Handoff<u32>| got.push(h.frame());
        let s = e.poll_budget(MS + 60 * US, 3, &mut sink);
        assert_eq!((s.departed, s.transmitted), (10, 3));
        // Frames 3 and 4 are due but wait; the deadline says so.
        assert_eq!(e.next_deadline(), Some(MS + 48 * US));
        let s = e.poll_budget(MS + 60 * US, 0, &mut sink);
        assert_eq!(s.transmitted, 0);
        let s = e.poll_budget(MS + 61 * US, 100, &mut sink);
        assert_eq!(s.transmitted, 2);
        e.poll(2 * MS, &mut sink);
        assert_eq!(got, (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn flush_returns_everything_held() {
        let mut e = Egress::new(cfg(GBIT, MS, 1_000_000));
        enqueue_n(&mut e, 0..10, 1500, 0);
        let mut sink = Sink::default();
        sink.poll(&mut e, 50 * US); // 4 in the delay line, 6 queued
        assert_eq!((e.in_flight(), e.queued_frames()), (4, 6));
        let mut flushed = Vec::new();
        assert_eq!(e.flush(&mut |f| flushed.push(f)), 10);
        assert_eq!(flushed, (0..10).collect::<Vec<_>>());
        assert_eq!((e.held(), e.queue_bytes(), e.next_deadline()), (0, 0, None));
        let st = e.stats();
        assert_eq!(
            (st.enqueued_frames, st.flushed, st.transmitted_frames),
            (10, 10, 0)
        );
        // The link comes back idle: the next frame is not behind the old
        // backlog (which would have ended at 120 us).
        e.enqueue(10, 1500, 60 * US);
        assert_eq!(e.next_deadline(), Some(72 * US));
        assert_eq!(e.flush(&mut |_| {}), 1);
        assert_eq!(e.flush(&mut |_| panic!("empty")), 0);
    }

    #[test]
    fn stats_count_everything() {
        let mut e = Egress::new(EgressConfig {
            ecn: Some(EcnConfig {
                kmin_bytes: 0,
                kmax_bytes: 1,
                pmax: 1.0,
            }),
            max_in_flight: 1,
            ..cfg(GBIT, MS, 3000)
        });
        assert_eq!(e.offer(0, 1500, true, 0, 0), Admit::Queued); // q = 0
        assert_eq!(e.offer(1, 1000, true, 0, 0), Admit::QueuedMarkCe); // q >= kmax
        assert_eq!(e.offer(2, 1000, true, 0, 0), Admit::DropQueueFull);
        e.poll(30 * US, &mut |_| {}); // both depart; frame 1 overflows
        e.poll(2 * MS, &mut |_| {});
        assert_eq!(
            e.stats(),
            EgressStats {
                enqueued_frames: 2,
                enqueued_bytes: 2500,
                ce_marked: 1,
                dropped_queue_full: 1,
                dropped_emulation_overflow: 1,
                flushed: 0,
                transmitted_frames: 1,
                transmitted_bytes: 1500,
            }
        );
    }

    // ---- properties ----

    #[derive(Clone, Debug)]
    enum Op {
        Offer { len: u32, ect: bool, random: u32 },
        Advance(u64),
        Poll,
        PollBudget(usize),
        Flush,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => (1u32..=1514, any::<bool>(), any::<u32>())
                .prop_map(|(len, ect, random)| Op::Offer { len, ect, random }),
            4 => (0u64..200 * US).prop_map(Op::Advance),
            3 => Just(Op::Poll),
            2 => (0usize..4).prop_map(Op::PollBudget),
            1 => Just(Op::Flush),
        ]
    }

    fn config() -> impl Strategy<Value = EgressConfig> {
        (
            prop_oneof![
                Just(0u64),
                Just(GBIT),
                Just(333_000_000u64),
                1_000_000u64..100 * GBIT
            ],
            prop_oneof![Just(0u64), Just(50 * US), 0u64..2 * MS],
            0u64..20_000,
            proptest::option::of((0u64..10_000, 0u64..10_000, 0.0f64..=1.0)),
            0usize..12,
        )
            .prop_map(|(rate_bps, delay_ns, buffer_bytes, ecn, max_in_flight)| {
                EgressConfig {
                    rate_bps,
                    delay_ns,
                    buffer_bytes,
                    ecn: ecn.map(|(kmin_bytes, kmax_bytes, pmax)| EcnConfig {
                        kmin_bytes,
                        kmax_bytes,
                        pmax,
                    }),
                    max_in_flight,
                }
            })
    }

    proptest! {
        /// Random interleavings with monotonic time: no panic, FIFO order,
        /// every frame handed back exactly once, counters consistent.
        #[test]
        fn conserves_and_keeps_order(cfg in config(), ops in proptest::collection::vec(op(), 0..400)) {
            let mut e = Egress::<u32>::new(cfg);
            let mut now = 0u64;
            let mut next_id = 0u32;
            let mut lens = Vec::new(); // len of each enqueued id
            let mut seen = Vec::new(); // times each id was handed back
            let mut last_tx: Option<(u32, u64)> = None;
            let mut last_overflow: Option<u32> = None;
            let mut last_flushed: Option<u32> = None;
            for op in ops {
                match op {
                    Op::Offer { len, ect, random } => {
                        let before = e.queue_bytes();
                        match e.offer(next_id, len, ect, random, now) {
                            Admit::DropQueueFull => {
                                prop_assert!(before + len as u64 > cfg.buffer_bytes);
                            }
                            v => {
                                prop_assert!(ect || v == Admit::Queued);
                                lens.push(len);
                                seen.push(0u8);
                                next_id += 1;
                            }
                        }
                        prop_assert!(e.queue_bytes() <= cfg.buffer_bytes);
                    }
                    Op::Advance(dt) => now += dt,
                    Op::Poll | Op::PollBudget(_) => {
                        let budget = match op { Op::PollBudget(b) => b, _ => usize::MAX };
                        let mut bad = None;
                        let step = e.poll_budget(now, budget, &mut |h| {
                            let id = h.frame() as usize;
                            seen[id] += 1;
                            match h {
                                Handoff::Transmit { frame, len, due_ns } => {
                                    if len != lens[id] || due_ns > now
                                        || last_tx.is_some_and(|(f, d)| f >= frame || d > due_ns)
                                        || due_ns < cfg.delay_ns
                                    {
                                        bad = Some(format!("tx {frame} due {due_ns} after {last_tx:?} at {now}"));
                                    }
                                    last_tx = Some((frame, due_ns));
                                }
                                Handoff::Overflow { frame, .. } => {
                                    if last_overflow.is_some_and(|f| f >= frame) {
                                        bad = Some(format!("overflow {frame}"));
                                    }
                                    last_overflow = Some(frame);
                                }
                            }
                        });
                        prop_assert!(bad.is_none(), "{:?}", bad);
                        prop_assert!(step.transmitted <= budget);
                        // After a full poll nothing held is overdue.
                        if budget == usize::MAX {
                            prop_assert!(e.next_deadline().is_none_or(|d| d > now));
                        }
                    }
                    Op::Flush => {
                        let mut ids = Vec::new();
                        let n = e.flush(&mut |f| ids.push(f));
                        prop_assert_eq!(n, ids.len());
                        for f in ids {
                            seen[f as usize] += 1;
                            prop_assert!(last_flushed.is_none_or(|l| l < f));
                            last_flushed = Some(f);
                        }
                    }
                }
                // Held bytes: the unreturned frames still in the port buffer.
                let st = e.stats();
                prop_assert_eq!(
                    st.enqueued_frames,
                    st.transmitted_frames + st.dropped_emulation_overflow + st.flushed + e.held() as u64
                );
                prop_assert!(e.in_flight() <= cfg.max_in_flight);
                prop_assert!(seen.iter().all(|&s| s <= 1));
            }
            let held = e.held();
            let mut rest = 0;
            e.flush(&mut |f| { seen[f as usize] += 1; rest += 1; });
            prop_assert_eq!(rest, held);
            prop_assert!(seen.iter().all(|&s| s == 1));
            prop_assert_eq!(e.queue_bytes(), 0);
        }

        /// Departures match an exact rational model of the shaper within
        /// 1 ns, for arbitrary arrivals, lengths and rates.
        #[test]
        fn departures_match_exact_model(
            rate in 1_000u64..200 * GBIT,
            arrivals in proptest::collection::vec((0u64..50 * US, 1u32..=9000), 1..300),
        ) {
            let mut e = Egress::<u32>::new(cfg(rate, 0, 3_000_000));
            let mut now = 0u64;
            // Exact clock: end * rate, in ns * bit/s.
            let mut end_num = 0u128;
            let mut expect = Vec::new();
            for (i, &(gap, len)) in arrivals.iter().enumerate() {
                now += gap;
                e.enqueue(i as u32, len, now);
                end_num = end_num.max(now as u128 * rate as u128) + len as u128 * 8_000_000_000;
                expect.push(end_num);
            }
            let mut got = Vec::new();
            e.poll(u64::MAX, &mut |h| {
                if let Handoff::Transmit { due_ns, .. } = h {
                    got.push(due_ns);
                }
            });
            prop_assert_eq!(got.len(), expect.len());
            for (due, num) in got.iter().zip(&expect) {
                let due_num = *due as u128 * rate as u128;
                prop_assert!(due_num.abs_diff(*num) <= rate as u128, "{} vs {}/{}", due, num, rate);
            }
        }
    }
}

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
//!    ECN when marking at enqueue) *before* the caller touches the frame, so
//!    the caller can set CE in the frame's bytes. A dropped frame never
//!    enters the egress: the caller recycles it at once.
//! 2. [`Egress::enqueue_ecn`] (or [`Egress::enqueue`] for a frame never to
//!    be marked) puts an admitted frame in the port buffer and fixes its
//!    departure time on the shaper's virtual clock.
//! 3. [`Egress::poll`] moves every frame whose departure time has come from
//!    the buffer into the delay line (release time = departure + delay),
//!    deciding its ECN mark there when marking at dequeue, and counting it
//!    as departed ([`EgressStats::departed_bytes`]: a link's load is what
//!    goes onto it, counted a whole delay before the far end sees it), and
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
//! DCQCN/RED style on an instantaneous queue `q`: `q <= kmin` never
//! marks; `kmin < q < kmax` marks with probability
//! `pmax * (q - kmin) / (kmax - kmin)`; `q >= kmax` always marks. Only ECT
//! frames are marked; a non-ECT frame is never dropped for ECN, only by tail
//! drop (`q + len > buffer_bytes`). The probability is compared in fixed
//! point against the caller's uniform `u32`; the slope is precomputed, so
//! admission has no division either.
//!
//! Where `q` is taken is [`EcnConfig::mark_at`]:
//!
//! * [`EcnMarkAt::Enqueue`] (the default): `q` is the bytes in the port
//!   buffer when the frame is admitted, without the frame itself (the queue
//!   in front of it). [`Egress::admit`] says [`Admit::QueuedMarkCe`] and the
//!   caller sets CE before enqueueing.
//! * [`EcnMarkAt::Dequeue`], as the HPCC/LCMP ns-3 simulator does
//!   (`SwitchNode::SwitchNotifyDequeue` calling `ShouldSendCN`): `q` is the
//!   bytes left in the port buffer when the frame departs, after its own
//!   bytes are removed (the queue behind it). `admit` only tail-drops; the
//!   frame's ECT flag and the caller's `random` (drawn at admission, as in
//!   the other mode) are kept in its slot by [`Egress::enqueue_ecn`], the
//!   same thresholds are applied when it departs, and a marked frame comes
//!   out as `Handoff::Transmit { mark_ce: true, .. }`: the caller sets CE
//!   then. One difference from the simulator remains: it marks at
//!   `q > kmax` (at exactly `kmax` with probability `pmax`) where this
//!   marks from `q >= kmax`, in both modes. A frame's departure here is the
//!   end of its serialization, the simulator's dequeue its start, so `q`
//!   also counts what arrived while the frame was being sent.
//!
//! Each frame is judged once, in the mode in force when it was admitted (a
//! frame admitted under dequeue marking meets the thresholds in force at
//! its departure; if ECN was turned off by then, it is not marked).
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
//!     Handoff::Transmit { frame, mark_ce, .. } => {
//!         // With marking at dequeue: if mark_ce, set CE in the frame here.
//!         tx.push(frame)
//!     }
//!     Handoff::Overflow { frame, .. } => recycle.push(frame),
//! });
//! let (frame, len, ect, random) = (7u32, 1500, true, 0x1234_5678);
//! match port.admit(len, ect, random) {
//!     Admit::Queued => port.enqueue_ecn(frame, len, ect, random, now),
//!     Admit::QueuedMarkCe => {
//!         // set CE in the frame's IP header here, then:
//!         port.enqueue_ecn(frame, len, ect, random, now)
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

/// Where an ECN mark is decided (see the module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum EcnMarkAt {
    /// At admission, on the queue in front of the frame.
    #[default]
    Enqueue,
    /// At departure, on the queue left behind the frame (the HPCC/LCMP ns-3
    /// simulator's `SwitchNotifyDequeue`).
    Dequeue,
}

impl EcnMarkAt {
    /// Every mode, by [`EcnMarkAt::name`].
    pub const ALL: [EcnMarkAt; 2] = [EcnMarkAt::Enqueue, EcnMarkAt::Dequeue];

    /// `enqueue` or `dequeue` (the switch's `--ecn-mark-at` values).
    pub fn name(self) -> &'static str {
        match self {
            EcnMarkAt::Enqueue => "enqueue",
            EcnMarkAt::Dequeue => "dequeue",
        }
    }

    /// The mode called `name`.
    pub fn from_name(name: &str) -> Option<EcnMarkAt> {
        EcnMarkAt::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// `--ecn-mark-at`, named by [`EcnMarkAt::name`].
impl clap::ValueEnum for EcnMarkAt {
    fn value_variants<'a>() -> &'a [Self] {
        &EcnMarkAt::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        let help = match self {
            EcnMarkAt::Enqueue => "On the queue a frame finds on arrival",
            EcnMarkAt::Dequeue => {
                "On the queue a frame leaves behind at departure (the simulator's)"
            }
        };
        Some(clap::builder::PossibleValue::new(self.name()).help(help))
    }
}

impl std::fmt::Display for EcnMarkAt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

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
    /// Whether the queue is taken at admission or at departure.
    pub mark_at: EcnMarkAt,
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
    /// Set CE in the frame's IP header, then enqueue it (marking at enqueue
    /// only).
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
        /// Set CE in the frame's IP header before sending it: marked at its
        /// departure ([`EcnMarkAt::Dequeue`]). Always false when marking at
        /// enqueue (the caller marked at admission).
        mark_ce: bool,
        /// The link as the frame left the port buffer (what an INT hop
        /// records).
        departure: Departure,
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

/// The link as a frame left its port buffer, handed out with the frame
/// ([`Handoff::Transmit`]) for the INT hop a switch writes into it
/// ([`lcmp_wire::push_hop`]): what HPCC's switch records at dequeue
/// (`SwitchNotifyDequeue`). Taken at the frame's departure on the
/// emulated schedule, not when a late poll gets to it, so consecutive
/// frames' times and byte counts make the link's rate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Departure {
    /// When it left: the end of its serialization (the simulator's
    /// dequeue is its start), ns of the caller's clock. Derived from its
    /// release time less the link's delay, so off by the change for a
    /// frame in flight while the delay is reconfigured.
    pub at_ns: u64,
    /// Bytes it left behind in the port buffer (saturating).
    pub queue_bytes: u32,
    /// The link's departed-bytes counter before it
    /// ([`EgressStats::departed_bytes`], wrapping), as the simulator's
    /// `m_txBytes` before its `+= size`.
    pub departed_bytes: u32,
}

/// Where [`Egress::poll_into`] hands frames.
pub trait Sink<F> {
    /// A frame handed out: transmit it, or recycle an overflow.
    fn handoff(&mut self, h: Handoff<F>);

    /// A frame leaving the port buffer onto the link (into the delay line,
    /// out at once, or to overflow), in FIFO order, with the tag it was
    /// queued with ([`Egress::enqueue_tagged`], else [`NO_TAG`]) and its
    /// length; its handle from here on is the one returned.
    fn depart(&mut self, frame: F, tag: u16, len: u32) -> F {
        let _ = (tag, len);
        frame
    }
}

/// A closure takes the hand-offs; handles stay as they are.
impl<F, T: FnMut(Handoff<F>)> Sink<F> for T {
    fn handoff(&mut self, h: Handoff<F>) {
        self(h)
    }
}

/// What one [`Egress::poll`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EgressStep {
    /// Frames that left the port buffer onto the link (their departure
    /// time had come): into the delay line, or out at once when already
    /// due. A departing frame that finds the delay line full is counted in
    /// `overflowed` instead.
    pub departed: usize,
    /// Bytes of the `departed` frames.
    pub departed_bytes: u64,
    /// Frames handed out as [`Handoff::Transmit`].
    pub transmitted: usize,
    /// Frames handed out as [`Handoff::Overflow`].
    pub overflowed: usize,
}

/// Counters since construction. Conservation: `enqueued_frames ==
/// transmitted_frames + dropped_emulation_overflow + flushed + held()`,
/// and `departed_frames == transmitted_frames + in_flight()` + the frames
/// flushed from the delay line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EgressStats {
    /// Frames put in the port buffer.
    pub enqueued_frames: u64,
    /// Bytes put in the port buffer.
    pub enqueued_bytes: u64,
    /// Frames that left the port buffer onto the link, counted at their
    /// departure (the end of their serialization), a whole link delay
    /// before they are transmitted. Frames that overflow the delay line
    /// are not counted (they never cross the link).
    pub departed_frames: u64,
    /// Bytes of the `departed_frames`.
    pub departed_bytes: u64,
    /// CE marks asked for: at admission (`Admit::QueuedMarkCe`) or, when
    /// marking at dequeue, at departure (`mark_ce` of the hand-off; a frame
    /// that then overflows the delay line is counted too).
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

/// The tag of a frame queued untagged ([`Egress::enqueue_ecn`]).
pub const NO_TAG: u16 = u16::MAX;

/// A held frame with its next event time (departure in the port buffer,
/// release in the delay line).
#[derive(Clone, Copy, Debug)]
struct Slot<F> {
    frame: F,
    len: u32,
    /// The caller's tag (a switch's ingress port, for PFC accounting).
    tag: u16,
    /// In the port buffer: the caller's coin from admission (dequeue
    /// marking). In the delay line: the bytes the frame left behind in the
    /// port buffer ([`Departure::queue_bytes`]); one field for both keeps
    /// a slot 40 bytes.
    random: u32,
    /// In the delay line: [`Departure::departed_bytes`]. (Fits the slot's
    /// padding: no larger.)
    departed_before: u32,
    at_ns: u64,
    /// ECT and admitted under dequeue marking: judged at departure.
    mark_at_departure: bool,
    /// Marked at departure: the hand-off says `mark_ce`.
    ce: bool,
}

/// ECN thresholds in the form the packet path uses.
#[derive(Clone, Copy, Debug)]
struct Marker {
    kmin: u64,
    kmax: u64,
    /// Marks are decided at departure, not admission.
    at_dequeue: bool,
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
            at_dequeue: ecn.mark_at == EcnMarkAt::Dequeue,
            slope,
        }
    }

    /// Whether an ECT frame meeting a queue of `q` bytes (in front of it at
    /// admission, or behind it at departure) is marked.
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
    /// The peer paused the link (PFC): no frame starts serialization from
    /// `since_ns` until a resume or `until_ns`.
    paused: Option<Paused>,
}

/// A pause in force ([`Egress::pause`]).
#[derive(Clone, Copy, Debug)]
struct Paused {
    since_ns: u64,
    until_ns: u64,
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
            paused: None,
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
    /// else, when marking at enqueue, an ECN mark as described in the module
    /// documentation (marking at dequeue, never a mark here). `random` is a
    /// uniform `u32` from the caller's PRNG. Counts drops and marks; an
    /// admitted frame must then be given to [`Egress::enqueue_ecn`] with the
    /// same `ect` and `random`.
    #[inline]
    pub fn admit(&mut self, len: u32, ect: bool, random: u32) -> Admit {
        let q = self.queue_bytes;
        if q.saturating_add(len as u64) > self.cfg.buffer_bytes {
            self.stats.dropped_queue_full += 1;
            return Admit::DropQueueFull;
        }
        match self.marker {
            Some(ref m) if ect && !m.at_dequeue && m.mark(q, random) => {
                self.stats.ce_marked += 1;
                Admit::QueuedMarkCe
            }
            _ => Admit::Queued,
        }
    }

    /// Puts an admitted frame of `len` bytes, arrived at `now_ns`, in the
    /// port buffer and schedules its departure on the shaper's clock. The
    /// frame is never marked at departure: [`Egress::enqueue_ecn`] with
    /// `ect` false.
    #[inline]
    pub fn enqueue(&mut self, frame: F, len: u32, now_ns: u64) {
        self.enqueue_ecn(frame, len, false, 0, now_ns);
    }

    /// [`Egress::enqueue`] for a frame given to [`Egress::admit`] with
    /// `ect` and `random`: when marking at dequeue, an ECT frame is judged
    /// at its departure with this `random`. (Marking at enqueue, `ect` and
    /// `random` are not used: `admit` has judged the frame.)
    #[inline]
    pub fn enqueue_ecn(&mut self, frame: F, len: u32, ect: bool, random: u32, now_ns: u64) {
        self.enqueue_tagged(frame, len, ect, random, now_ns, NO_TAG);
    }

    /// [`Egress::enqueue_ecn`] with a tag the [`Sink`] is given back as the
    /// frame departs ([`Sink::depart`]) and a flush hands out
    /// ([`Egress::flush_tagged`]).
    #[inline]
    pub fn enqueue_tagged(
        &mut self,
        frame: F,
        len: u32,
        ect: bool,
        random: u32,
        now_ns: u64,
        tag: u16,
    ) {
        let mark_at_departure = ect && self.marker.as_ref().is_some_and(|m| m.at_dequeue);
        let start = self.link_free_fp.max((now_ns as u128) << CLOCK_FRAC_BITS);
        let end = start + len as u128 * self.byte_time_fp;
        self.link_free_fp = end;
        let departure = (end + (1u128 << (CLOCK_FRAC_BITS - 1))) >> CLOCK_FRAC_BITS;
        self.queue.push_back(Slot {
            frame,
            len,
            tag,
            random,
            departed_before: 0,
            at_ns: u64::try_from(departure).unwrap_or(u64::MAX),
            mark_at_departure,
            ce: false,
        });
        self.queue_bytes += len as u64;
        self.stats.enqueued_frames += 1;
        self.stats.enqueued_bytes += len as u64;
    }

    /// The peer asks the link to stop (a PFC pause) at `now_ns` until
    /// `until_ns` at the latest: a frame being serialized completes; the
    /// frames after it wait, and new ones queue behind them. A pause in
    /// force is extended (a refresh).
    pub fn pause(&mut self, now_ns: u64, until_ns: u64) {
        match &mut self.paused {
            Some(p) => p.until_ns = until_ns,
            None => {
                self.paused = Some(Paused {
                    since_ns: now_ns,
                    until_ns,
                })
            }
        }
    }

    /// The peer lets the link go again at `now_ns` (a PFC resume, or the
    /// pause's time ran out): the frames that waited are serialized back
    /// to back from then.
    pub fn resume(&mut self, now_ns: u64) {
        let Some(p) = self.paused.take() else {
            return;
        };
        let since_fp = u128::from(p.since_ns) << CLOCK_FRAC_BITS;
        let mut free_fp = u128::from(now_ns) << CLOCK_FRAC_BITS;
        for s in self.queue.iter_mut() {
            let ser = u128::from(s.len) * self.byte_time_fp;
            let end_fp = u128::from(s.at_ns) << CLOCK_FRAC_BITS;
            let start_fp = end_fp.saturating_sub(ser);
            if start_fp < since_fp {
                // On the wire when the pause came: it kept its time.
                free_fp = free_fp.max(end_fp);
                continue;
            }
            let end = free_fp.max(start_fp) + ser;
            s.at_ns = u64::try_from((end + (1u128 << (CLOCK_FRAC_BITS - 1))) >> CLOCK_FRAC_BITS)
                .unwrap_or(u64::MAX);
            free_fp = end;
        }
        self.link_free_fp = self.link_free_fp.max(free_fp);
    }

    /// Whether the peer has the link paused.
    pub fn is_paused(&self) -> bool {
        self.paused.is_some()
    }

    /// Whether the head of the port buffer may not start now: a pause in
    /// force that it did not start before.
    #[inline]
    fn held_by_pause(&self, s: &Slot<F>) -> bool {
        match self.paused {
            None => false,
            Some(p) => {
                let ser = (u128::from(s.len) * self.byte_time_fp) >> CLOCK_FRAC_BITS;
                u128::from(s.at_ns).saturating_sub(ser) >= u128::from(p.since_ns)
            }
        }
    }

    /// [`Egress::admit`], then [`Egress::enqueue_ecn`] if admitted. On
    /// `QueuedMarkCe` the caller sets CE in the frame before its next poll
    /// (nothing is transmitted outside `poll`); on `DropQueueFull` the frame
    /// is the caller's to recycle.
    #[inline]
    pub fn offer(&mut self, frame: F, len: u32, ect: bool, random: u32, now_ns: u64) -> Admit {
        let verdict = self.admit(len, ect, random);
        if verdict.is_queued() {
            self.enqueue_ecn(frame, len, ect, random, now_ns);
        }
        verdict
    }

    /// Advances the link to `now_ns`: frames whose departure has come leave
    /// the port buffer for the delay line (marking at dequeue, an ECT frame
    /// is judged then on the bytes it leaves behind), and frames whose
    /// release has come are handed to `out` in FIFO order
    /// ([`Handoff::Transmit`]); frames that find the delay line full are
    /// handed to `out` as [`Handoff::Overflow`].
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
        self.poll_into(now_ns, max_transmit, out)
    }

    /// [`Egress::poll_budget`] into a [`Sink`], which also sees each frame
    /// as it leaves the port buffer ([`Sink::depart`]) and may give it a
    /// new handle for the rest of its way (a switch that keeps only the
    /// bytes of what it holds: [`crate::flight`]).
    pub fn poll_into(
        &mut self,
        now_ns: u64,
        max_transmit: usize,
        out: &mut impl Sink<F>,
    ) -> EgressStep {
        let mut step = EgressStep::default();
        if let Some(p) = self.paused {
            if now_ns >= p.until_ns {
                self.resume(p.until_ns);
            }
        }
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
            if s.at_ns > now_ns || self.held_by_pause(s) {
                break;
            }
            let mut s = *s;
            self.queue.pop_front();
            self.queue_bytes -= s.len as u64;
            s.frame = out.depart(s.frame, s.tag, s.len);
            // Dequeue marking: the queue behind the frame, without it.
            if s.mark_at_departure {
                if let Some(ref m) = self.marker {
                    if m.mark(self.queue_bytes, s.random) {
                        s.ce = true;
                        self.stats.ce_marked += 1;
                    }
                }
            }
            // The coin is spent: the slot carries the departure's queue
            // from here (see `Slot::random`).
            s.random = u32::try_from(self.queue_bytes).unwrap_or(u32::MAX);
            // Wrapping, as INT carries it.
            s.departed_before = self.stats.departed_bytes as u32;
            s.at_ns = s.at_ns.saturating_add(delay);
            if s.at_ns <= now_ns && self.line.is_empty() && step.transmitted < max_transmit {
                self.depart(&s, &mut step);
                self.transmit(s, &mut step, out);
            } else if self.line.len() < self.cfg.max_in_flight {
                self.depart(&s, &mut step);
                self.line.push_back(s);
            } else {
                step.overflowed += 1;
                self.stats.dropped_emulation_overflow += 1;
                out.handoff(Handoff::Overflow {
                    frame: s.frame,
                    len: s.len,
                });
            }
        }
        step
    }

    /// Counts a frame going onto the link.
    #[inline]
    fn depart(&mut self, s: &Slot<F>, step: &mut EgressStep) {
        step.departed += 1;
        step.departed_bytes += s.len as u64;
        self.stats.departed_frames += 1;
        self.stats.departed_bytes += s.len as u64;
    }

    #[inline]
    fn transmit(&mut self, s: Slot<F>, step: &mut EgressStep, out: &mut impl Sink<F>) {
        step.transmitted += 1;
        self.stats.transmitted_frames += 1;
        self.stats.transmitted_bytes += s.len as u64;
        out.handoff(Handoff::Transmit {
            frame: s.frame,
            len: s.len,
            due_ns: s.at_ns,
            mark_ce: s.ce,
            departure: Departure {
                at_ns: s.at_ns.saturating_sub(self.cfg.delay_ns),
                queue_bytes: s.random,
                departed_bytes: s.departed_before,
            },
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

    /// Departure time of the head of the port buffer (paused: the pause's
    /// end, when the head waits for it).
    pub fn next_departure(&self) -> Option<u64> {
        let s = self.queue.front()?;
        match self.paused {
            Some(p) if self.held_by_pause(s) => Some(p.until_ns),
            _ => Some(s.at_ns),
        }
    }

    /// At most how many frames a poll at `now_ns` could hand out for
    /// transmission, counted up to `max`: those of the delay line due by
    /// then, and those of the port buffer that would be due on an empty
    /// line.
    pub fn due_frames(&self, now_ns: u64, max: usize) -> usize {
        let delay = self.cfg.delay_ns;
        let line = self
            .line
            .iter()
            .take(max)
            .take_while(|s| s.at_ns <= now_ns)
            .count();
        let queue = self
            .queue
            .iter()
            .take(max - line)
            .take_while(|s| s.at_ns.saturating_add(delay) <= now_ns && !self.held_by_pause(s))
            .count();
        line + queue
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
        self.flush_tagged(&mut |f, _, _| out(f))
    }

    /// [`Egress::flush`] handing out each frame with its tag and length
    /// (frames of the delay line have departed: their tag is [`NO_TAG`]).
    pub fn flush_tagged(&mut self, out: &mut impl FnMut(F, u16, u32)) -> usize {
        let n = self.held();
        for s in self.line.drain(..) {
            out(s.frame, NO_TAG, s.len);
        }
        for s in self.queue.drain(..) {
            out(s.frame, s.tag, s.len);
        }
        self.paused = None;
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
    /// the transmitted frames to be marked CE, frames for overflows.
    #[derive(Default)]
    struct Sink {
        tx: Vec<(u32, u32, u64)>,
        ce: Vec<u32>,
        overflow: Vec<u32>,
    }

    impl Sink {
        fn poll(&mut self, e: &mut Egress<u32>, now: u64) -> EgressStep {
            e.poll(now, &mut |h| match h {
                Handoff::Transmit {
                    frame,
                    len,
                    due_ns,
                    mark_ce,
                    ..
                } => {
                    self.tx.push((frame, len, due_ns));
                    if mark_ce {
                        self.ce.push(frame);
                    }
                }
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
    fn departures_carry_the_queue_left_behind_and_the_bytes_before() {
        // 1 Gbit/s, 1 ms delay: three 1500-byte frames queued at 0 depart
        // at 12, 24 and 36 us (1500 * 8 ns each), leaving 3000, 1500 and 0
        // bytes behind, with 0, 1500 and 3000 bytes departed before them.
        // One poll at 2 ms, long after all three: the values are those of
        // the emulated departures, not of the poll.
        let mut e = Egress::<u32>::new(cfg(GBIT, MS, 1 << 20));
        for f in 0..3 {
            e.enqueue(f, 1500, 0);
        }
        let mut seen = Vec::new();
        e.poll(2 * MS, &mut |h| {
            if let Handoff::Transmit {
                frame, departure, ..
            } = h
            {
                seen.push((frame, departure));
            }
        });
        let d = |at_ns, queue_bytes, departed_bytes| Departure {
            at_ns,
            queue_bytes,
            departed_bytes,
        };
        assert_eq!(
            seen,
            vec![
                (0, d(12 * US, 3000, 0)),
                (1, d(24 * US, 1500, 1500)),
                (2, d(36 * US, 0, 3000)),
            ]
        );
    }

    #[test]
    fn the_departure_fields_cost_a_slot_nothing() {
        // A frame handle (16 bytes), the release time (8), length, coin
        // or queue, departed bytes (4 each), tag (2), two flags: 38,
        // padded to 40, as before `departed_before` took 4 bytes of the
        // padding.
        assert_eq!(std::mem::size_of::<Slot<crate::io::Frame>>(), 40);
    }

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
                mark_at: EcnMarkAt::Enqueue,
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

    // ---- ECN at dequeue ----

    fn ecn_at(kmin: u64, kmax: u64, pmax: f64, mark_at: EcnMarkAt) -> Option<EcnConfig> {
        Some(EcnConfig {
            kmin_bytes: kmin,
            kmax_bytes: kmax,
            pmax,
            mark_at,
        })
    }

    /// 70 ECT frames of 1000 bytes offered at once to a 1 Gbit/s link (8 us
    /// each) with 1 ms of delay, kmin 10 000, kmax 50 000, pmax 1; frame i
    /// draws 0 if i is odd (marked anywhere above kmin) and u32::MAX if even
    /// (marked only at kmax and above). Returns the egress after all have
    /// been handed out, the verdicts of the offers and the ids marked at
    /// departure.
    fn seventy_frames(mark_at: EcnMarkAt) -> (Egress<u32>, Vec<Admit>, Vec<u32>) {
        let mut e = Egress::new(EgressConfig {
            ecn: ecn_at(10_000, 50_000, 1.0, mark_at),
            ..cfg(GBIT, MS, 1_000_000)
        });
        let random = |i: u32| if i % 2 == 1 { 0 } else { u32::MAX };
        let verdicts = (0..70)
            .map(|i| e.offer(i, 1000, true, random(i), 0))
            .collect();
        let mut sink = Sink::default();
        sink.poll(&mut e, 10 * MS);
        assert_eq!(sink.tx.len(), 70);
        (e, verdicts, sink.ce)
    }

    #[test]
    fn ecn_at_enqueue_judges_the_queue_in_front() {
        // Frame i finds 1000 * i bytes queued: i >= 50 is always marked
        // (20 frames; frame 60, for one, finds 60 000), 10 < i < 50 only if
        // odd (11, 13, .., 49: 20 frames). 40 marks, none at departure.
        let (e, verdicts, ce) = seventy_frames(EcnMarkAt::Enqueue);
        let marked: Vec<u32> = (0..70)
            .filter(|&i| verdicts[i as usize] == Admit::QueuedMarkCe)
            .collect();
        let expect: Vec<u32> = (11..50).step_by(2).chain(50..70).collect();
        assert_eq!(marked, expect);
        assert_eq!(marked.len(), 40);
        assert!(ce.is_empty());
        assert_eq!(e.stats().ce_marked, 40);
    }

    #[test]
    fn ecn_at_dequeue_judges_the_queue_left_behind() {
        // Frame i leaves 1000 * (69 - i) bytes behind it: 69 000, 68 000,
        // .., 0. Frames 0..=19 leave >= 50 000 (frame 19 exactly kmax):
        // always marked, 20 frames. Frames 20..=58 leave 49 000 down to
        // 11 000: marked if odd (21, 23, .., 57: 19 frames; frame 20, 1000
        // below kmax, draws u32::MAX). Frames 59..=69 leave <= 10 000:
        // never, not frame 59 (exactly kmin, drawing 0), nor frame 60, which
        // arrived on 60 000 bytes (marked at enqueue), nor frame 61, which
        // draws 0. 39 marks, all at departure. (Judging before removing the
        // frame's own bytes would mark frames 20 and 59 too.)
        let (e, verdicts, ce) = seventy_frames(EcnMarkAt::Dequeue);
        assert!(verdicts.iter().all(|&v| v == Admit::Queued), "{verdicts:?}");
        let expect: Vec<u32> = (0..20).chain((21..59).step_by(2)).collect();
        assert_eq!(ce, expect);
        assert_eq!(ce.len(), 39);
        assert_eq!(e.stats().ce_marked, 39);
    }

    #[test]
    fn ecn_at_dequeue_marks_when_the_frame_departs_not_when_released() {
        let mut e = Egress::new(EgressConfig {
            ecn: ecn_at(10_000, 50_000, 1.0, EcnMarkAt::Dequeue),
            ..cfg(GBIT, MS, 1_000_000)
        });
        for i in 0..70 {
            assert_eq!(e.offer(i, 1000, true, u32::MAX, 0), Admit::Queued);
        }
        assert_eq!(e.stats().ce_marked, 0, "nothing is judged at admission");
        let mut sink = Sink::default();
        // By 160 us frames 0..=19 have departed (8 us each), leaving
        // 69 000 .. 50 000 bytes: all marked, none released yet.
        sink.poll(&mut e, 160 * US);
        assert_eq!((e.queued_frames(), e.in_flight()), (50, 20));
        assert_eq!(e.stats().ce_marked, 20);
        // The rest leave at most 49 000 bytes and draw u32::MAX: unmarked.
        // The marks come out with the frames, 1 ms later.
        sink.poll(&mut e, MS + 160 * US - 1);
        assert!(sink.tx.len() == 19 && sink.ce == (0..19).collect::<Vec<_>>());
        sink.poll(&mut e, 10 * MS);
        assert_eq!(sink.ce, (0..20).collect::<Vec<_>>());
        assert_eq!(sink.tx.len(), 70);
        assert_eq!(e.stats().ce_marked, 20);
    }

    /// Whether an ECT frame of 100 bytes drawing `random`, with `behind`
    /// bytes of non-ECT frames queued after it, is marked at its departure.
    fn marked_at_departure(ecn: (u64, u64, f64), behind: u64, random: u32) -> bool {
        let mut e = Egress::new(EgressConfig {
            ecn: ecn_at(ecn.0, ecn.1, ecn.2, EcnMarkAt::Dequeue),
            ..cfg(0, 0, 1_000_000)
        });
        assert_eq!(e.offer(0, 100, true, random, 0), Admit::Queued);
        fill_to(&mut e, 100 + behind);
        let mut sink = Sink::default();
        sink.poll(&mut e, 0);
        assert_eq!(sink.tx.len() as u64, 1 + behind.div_ceil(1500));
        assert_eq!(e.stats().ce_marked, sink.ce.len() as u64);
        match sink.ce[..] {
            [] => false,
            [0] => true,
            _ => panic!("non-ECT frames marked: {:?}", sink.ce),
        }
    }

    #[test]
    fn ecn_at_dequeue_uses_the_enqueue_thresholds() {
        let ramp = (10_000, 50_000, 1.0);
        // At or below kmin never, even with the coin most likely to mark.
        assert!(!marked_at_departure(ramp, 0, 0));
        assert!(!marked_at_departure(ramp, 10_000, 0));
        // One byte above: p = 1 / 40 000, threshold 107 374.
        assert!(marked_at_departure(ramp, 10_001, 0));
        assert!(marked_at_departure(ramp, 10_001, 107_373));
        assert!(!marked_at_departure(ramp, 10_001, 107_374));
        // Below kmax pmax 1 is 1 - 2^-32: u32::MAX is never below it.
        assert!(!marked_at_departure(ramp, 49_999, u32::MAX));
        // At and above kmax always.
        assert!(marked_at_departure(ramp, 50_000, u32::MAX));
        assert!(marked_at_departure(ramp, 300_000, u32::MAX));
        // pmax 0.5, halfway: p = 0.25, threshold 2^30, as at enqueue.
        assert!(marked_at_departure(
            (1_000, 3_000, 0.5),
            2_000,
            (1 << 30) - 1
        ));
        assert!(!marked_at_departure((1_000, 3_000, 0.5), 2_000, 1 << 30));
    }

    #[test]
    fn ecn_at_dequeue_never_marks_non_ect() {
        let mut e = Egress::new(EgressConfig {
            ecn: ecn_at(10_000, 50_000, 1.0, EcnMarkAt::Dequeue),
            ..cfg(GBIT, 0, 1_000_000)
        });
        // Not ECT, drawing the coin most likely to mark, 69 000 bytes behind
        // the first: never marked.
        for i in 0..70 {
            assert_eq!(e.offer(i, 1000, false, 0, 0), Admit::Queued);
        }
        // Enqueued without ECN information: never marked either.
        for i in 70..140 {
            assert_eq!(e.admit(1000, true, 0), Admit::Queued);
            e.enqueue(i, 1000, 0);
        }
        // Every other frame ECT: only those are marked, each (drawing 0)
        // whenever it leaves more than kmin behind.
        for i in 140..240 {
            assert_eq!(e.offer(i, 1000, i % 2 == 0, 0, 0), Admit::Queued);
        }
        let mut sink = Sink::default();
        sink.poll(&mut e, MS * 10);
        assert_eq!(sink.tx.len(), 240);
        // Frame 140 + 2k leaves 99 000 - 2000 k bytes: above kmin for
        // k <= 44, i.e. frames 140, 142, .., 228.
        let expect: Vec<u32> = (140..229).step_by(2).collect();
        assert_eq!(sink.ce, expect);
        assert_eq!(e.stats().ce_marked, 45);
    }

    #[test]
    fn ecn_mode_change_judges_each_frame_once() {
        let enq = EgressConfig {
            ecn: ecn_at(0, 1, 1.0, EcnMarkAt::Enqueue),
            ..cfg(GBIT, 0, 1_000_000)
        };
        let deq = EgressConfig {
            ecn: ecn_at(0, 1, 1.0, EcnMarkAt::Dequeue),
            ..enq
        };
        let mut e = Egress::new(enq);
        assert_eq!(e.offer(0, 1000, true, 0, 0), Admit::Queued); // q = 0
        assert_eq!(e.offer(1, 1000, true, 0, 0), Admit::QueuedMarkCe);
        // Admitted under enqueue marking: not judged again at departure.
        e.reconfigure(deq);
        assert_eq!(e.offer(2, 1000, true, 0, 0), Admit::Queued);
        assert_eq!(e.offer(3, 1000, true, 0, 0), Admit::Queued);
        assert_eq!(e.offer(4, 1000, true, 0, 0), Admit::Queued);
        // Admitted under dequeue marking: judged at departure by the
        // thresholds then in force, whatever the mode; with ECN off, not.
        e.reconfigure(enq);
        assert_eq!(e.offer(5, 1000, true, 0, 0), Admit::QueuedMarkCe);
        let mut sink = Sink::default();
        sink.poll(&mut e, 24 * US); // frames 0..=2 depart
        e.reconfigure(EgressConfig { ecn: None, ..enq });
        sink.poll(&mut e, MS);
        // Frame 2 left 3000 bytes behind; frames 3 and 4 met no ECN.
        assert_eq!(sink.ce, vec![2]);
        assert_eq!(e.stats().ce_marked, 3);
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
    fn a_frame_counts_as_departed_when_it_goes_onto_the_link_not_when_released() {
        let delay = 10 * MS;
        let mut e = Egress::new(cfg(GBIT, delay, 1_000_000));
        // 1500 B at 1 Gbit/s: 1500 * 8 / 1e9 s = 12 us, so frame 0 departs
        // at t = 12 us and is released at t + D = 10 ms + 12 us.
        e.enqueue(0, 1500, 0);
        let mut sink = Sink::default();
        let counted = |e: &Egress<u32>| {
            let s = e.stats();
            (s.departed_bytes, s.transmitted_bytes)
        };
        sink.poll(&mut e, 12 * US - 1);
        assert_eq!(counted(&e), (0, 0));
        let step = sink.poll(&mut e, 12 * US);
        assert_eq!((step.departed, step.departed_bytes), (1, 1500));
        assert_eq!(counted(&e), (1500, 0));
        // All through the delay the link holds the frame: departed, not sent.
        sink.poll(&mut e, delay + 12 * US - 1);
        assert_eq!(counted(&e), (1500, 0));
        let step = sink.poll(&mut e, delay + 12 * US);
        assert_eq!((step.departed, step.transmitted), (0, 1));
        assert_eq!(counted(&e), (1500, 1500));
        // A frame polled only after its release departs and is transmitted
        // in the same poll, counted once each: 1000 B arriving at 20 ms
        // departs at 20 ms + 8 us, is due at 30 ms + 8 us.
        e.enqueue(1, 1000, 20 * MS);
        let step = sink.poll(&mut e, 31 * MS);
        assert_eq!(
            (step.departed, step.departed_bytes, step.transmitted),
            (1, 1000, 1)
        );
        assert_eq!(counted(&e), (2500, 2500));
        assert_eq!(e.stats().departed_frames, 2);
    }

    #[test]
    fn a_pause_holds_what_has_not_started_and_a_resume_restarts_it() {
        // 1 Gbit/s (8 ns/byte), no delay: three 100-byte frames queued at 0
        // would depart at 800, 1,600, 2,400.
        let mut e = Egress::new(cfg(GBIT, 0, 10_000));
        for id in 1..=3 {
            e.enqueue(id, 100, 0);
        }
        let mut out: Vec<u32> = Vec::new();
        e.poll(800, &mut |h: Handoff<u32>| out.push(h.frame()));
        // Paused at 1,000 until 10,000: frame 2 started at 800, it
        // completes at 1,600; frame 3 would start at 1,600: it waits.
        e.pause(1_000, 10_000);
        e.poll(1_600, &mut |h: Handoff<u32>| out.push(h.frame()));
        e.poll(2_400, &mut |h: Handoff<u32>| out.push(h.frame()));
        assert_eq!(out, [1, 2]);
        // Nothing to do before the pause's end.
        assert_eq!(e.next_deadline(), Some(10_000));
        // Resumed at 5,000: frame 3 starts then, departs at 5,800.
        e.resume(5_000);
        assert_eq!(e.next_deadline(), Some(5_800));
        e.poll(5_799, &mut |h: Handoff<u32>| out.push(h.frame()));
        assert_eq!(out, [1, 2]);
        e.poll(5_800, &mut |h: Handoff<u32>| out.push(h.frame()));
        assert_eq!(out, [1, 2, 3]);
        // A frame arriving later queues behind nothing: 6,000 + 800.
        e.enqueue(4, 100, 6_000);
        assert_eq!(e.next_deadline(), Some(6_800));
    }

    #[test]
    fn a_pause_runs_out_at_its_time_without_a_resume() {
        let mut e = Egress::new(cfg(GBIT, 0, 10_000));
        e.pause(0, 3_000);
        e.enqueue(1, 100, 0);
        e.enqueue(2, 100, 0);
        assert_eq!(e.next_deadline(), Some(3_000));
        let mut out = Vec::new();
        e.poll(3_000, &mut |h: Handoff<u32>| out.push(h.frame()));
        // Restarted at 3,000: departures 3,800 and 4,600.
        assert!(out.is_empty());
        assert!(!e.is_paused());
        assert_eq!(e.next_deadline(), Some(3_800));
        e.poll(4_600, &mut |h: Handoff<u32>| out.push(h.frame()));
        assert_eq!(out, [1, 2]);
    }

    #[test]
    fn tags_come_back_at_departure_and_from_a_flush() {
        // 1 Gbit/s (8 ns/byte), 1 us: 100-byte frames depart 800 ns apart.
        struct Tags(Vec<(u32, u16, u32)>);
        impl super::Sink<u32> for Tags {
            fn handoff(&mut self, _: Handoff<u32>) {}
            fn depart(&mut self, frame: u32, tag: u16, len: u32) -> u32 {
                self.0.push((frame, tag, len));
                frame
            }
        }
        let mut e = Egress::new(cfg(GBIT, US, 10_000));
        e.enqueue_tagged(1, 100, false, 0, 0, 5);
        e.enqueue_tagged(2, 100, false, 0, 0, 6);
        e.enqueue(3, 100, 0);
        let mut seen = Tags(Vec::new());
        e.poll_into(1_600, usize::MAX, &mut seen);
        assert_eq!(seen.0, [(1, 5, 100), (2, 6, 100)]);
        // 1 and 2 are in the delay line (departed: no tag any more), 3
        // waits in the buffer with its own.
        let mut flushed = Vec::new();
        assert_eq!(
            e.flush_tagged(&mut |f, tag, len| flushed.push((f, tag, len))),
            3
        );
        assert_eq!(
            flushed,
            [(1, NO_TAG, 100), (2, NO_TAG, 100), (3, NO_TAG, 100)]
        );
        let mut e = Egress::new(cfg(GBIT, US, 10_000));
        e.enqueue_tagged(4, 100, false, 0, 0, 7);
        flushed.clear();
        e.flush_tagged(&mut |f, tag, len| flushed.push((f, tag, len)));
        assert_eq!(flushed, [(4, 7, 100)]);
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
                departed: 3,
                departed_bytes: 3 * 1500,
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
                mark_at: EcnMarkAt::Enqueue,
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
                // Frame 0 only: frame 1 found the line (1 frame) full.
                departed_frames: 1,
                departed_bytes: 1500,
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
            proptest::option::of((0u64..10_000, 0u64..10_000, 0.0f64..=1.0, any::<bool>())),
            0usize..12,
        )
            .prop_map(|(rate_bps, delay_ns, buffer_bytes, ecn, max_in_flight)| {
                EgressConfig {
                    rate_bps,
                    delay_ns,
                    buffer_bytes,
                    ecn: ecn.map(|(kmin_bytes, kmax_bytes, pmax, dequeue)| EcnConfig {
                        kmin_bytes,
                        kmax_bytes,
                        pmax,
                        mark_at: if dequeue {
                            EcnMarkAt::Dequeue
                        } else {
                            EcnMarkAt::Enqueue
                        },
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
            let dequeue = cfg.ecn.is_some_and(|e| e.mark_at == EcnMarkAt::Dequeue);
            let mut ects = Vec::new(); // ECT flag of each enqueued id
            let mut marks_seen = 0u64; // QueuedMarkCe verdicts and mark_ce hand-offs
            let (mut departed, mut departed_bytes) = (0u64, 0u64); // summed over the steps
            let mut flushed_from_line = 0u64;
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
                                // Marking at dequeue, admission never marks.
                                prop_assert!(!dequeue || v == Admit::Queued);
                                marks_seen += u64::from(v == Admit::QueuedMarkCe);
                                ects.push(ect);
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
                                Handoff::Transmit { frame, len, due_ns, mark_ce, .. } => {
                                    if len != lens[id] || due_ns > now
                                        || last_tx.is_some_and(|(f, d)| f >= frame || d > due_ns)
                                        || due_ns < cfg.delay_ns
                                    {
                                        bad = Some(format!("tx {frame} due {due_ns} after {last_tx:?} at {now}"));
                                    }
                                    // Only ECT frames, only when marking at dequeue.
                                    if mark_ce && !(dequeue && ects[id]) {
                                        bad = Some(format!("tx {frame} marked at departure"));
                                    }
                                    marks_seen += u64::from(mark_ce);
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
                        departed += step.departed as u64;
                        departed_bytes += step.departed_bytes;
                        // After a full poll nothing held is overdue.
                        if budget == usize::MAX {
                            prop_assert!(e.next_deadline().is_none_or(|d| d > now));
                        }
                    }
                    Op::Flush => {
                        flushed_from_line += e.in_flight() as u64;
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
                // What went onto the link has been sent, is on it, or was
                // flushed from it.
                prop_assert_eq!((st.departed_frames, st.departed_bytes), (departed, departed_bytes));
                prop_assert_eq!(
                    st.departed_frames,
                    st.transmitted_frames + e.in_flight() as u64 + flushed_from_line
                );
                prop_assert!(st.departed_bytes >= st.transmitted_bytes);
                prop_assert!(e.in_flight() <= cfg.max_in_flight);
                prop_assert!(seen.iter().all(|&s| s <= 1));
                // Every mark counted was seen, or its frame overflowed, was
                // flushed or is still in the delay line.
                prop_assert!(marks_seen <= st.ce_marked);
                prop_assert!(
                    st.ce_marked
                        <= marks_seen + st.dropped_emulation_overflow + st.flushed + e.in_flight() as u64
                );
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

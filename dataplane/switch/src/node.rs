//! What the daemon ([`crate::daemon::Daemon`]) runs: a [`Node`], one per
//! kind of switch, over a [`Clock`].
//!
//! - [`crate::lcmp_node::LcmpNode`]: the LCMP DCI switch.
//! - [`crate::rotor_daemon::RotorNode`]: a rotor (circuit) switch.
//! - [`crate::rotor_daemon::TorNode`]: a rotor-aware ToR.
//!
//! The daemon owns what every kind shares (the control inbox, the stats
//! file, side work, sleeping until the earliest deadline, deferring
//! housekeeping to a quiet instant); a node owns its packet path, its
//! answers to control requests and its status (the stats file's JSON).

use lcmp_control::proto::Body;
use lcmp_control::snapshot::ControlStats;
use lcmp_control::Request;
use serde::Serialize;

use crate::io::PacketIo;

/// A source of time, ns.
pub trait Clock {
    /// Now.
    fn now_ns(&mut self) -> u64;
}

fn clock_ns(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec to a valid pointer.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// `CLOCK_MONOTONIC` (LCMP switches: emulated delays, flow timeouts).
#[derive(Clone, Copy, Debug, Default)]
pub struct MonotonicClock;

impl Clock for MonotonicClock {
    #[inline]
    fn now_ns(&mut self) -> u64 {
        clock_ns(libc::CLOCK_MONOTONIC)
    }
}

/// `CLOCK_REALTIME` (rotor networks: the slot clock every switch shares,
/// across machines synchronised by PTP).
#[derive(Clone, Copy, Debug, Default)]
pub struct RealtimeClock;

impl Clock for RealtimeClock {
    #[inline]
    fn now_ns(&mut self) -> u64 {
        clock_ns(libc::CLOCK_REALTIME)
    }
}

/// Any closure returning ns is a clock (tests pass a shared cell).
impl<F: FnMut() -> u64> Clock for F {
    fn now_ns(&mut self) -> u64 {
        self()
    }
}

/// What the daemon tells a node when it answers a request or reports.
#[derive(Clone, Debug)]
pub struct Context<'a> {
    /// The switch's name.
    pub name: &'a str,
    /// The daemon's clock now, ns.
    pub now_ns: u64,
    /// When the daemon started, ns of its clock.
    pub started_ns: u64,
    /// Control-socket counters (default without an inbox).
    pub control: ControlStats,
}

/// A switch the daemon runs.
pub trait Node {
    /// Its packet I/O.
    type Io: PacketIo;
    /// Its state as reported: the answer to its status request and the
    /// stats file's JSON.
    type Status: Serialize;

    /// One poll of every port, reading the time from `clock`; returns the
    /// frames received and transmitted (0: nothing happened).
    fn poll(&mut self, clock: &mut impl Clock) -> usize;

    /// The time the last poll ran at, ns of the daemon's clock.
    fn last_poll_ns(&self) -> u64;

    /// When the node next has timed work, given `now_ns` (`u64::MAX`:
    /// none); `None`: poll on without sleeping.
    fn next_wake(&self, now_ns: u64) -> Option<u64>;

    /// Periodic work of the node's own after each poll, at `now_ns` (the
    /// LCMP switch's flow log).
    fn after_poll(&mut self, _now_ns: u64) {}

    /// Answers one control request.
    fn handle(&mut self, request: Request, ctx: &Context<'_>) -> Body;

    /// The node's state now.
    fn status(&mut self, ctx: &Context<'_>) -> Self::Status;

    /// The packet I/O.
    fn io(&mut self) -> &mut Self::Io;

    /// The earliest instant from `t` on at which housekeeping that
    /// recently took `cost_ns` (control requests, the stats file) delays
    /// no time-critical work: `t` by default.
    fn housekeeping_at(&self, t: u64, _cost_ns: u64) -> u64 {
        t
    }

    /// How long housekeeping may wait for [`Node::housekeeping_at`] before
    /// it runs regardless, ns.
    fn max_housekeeping_delay_ns(&self) -> u64 {
        0
    }

    /// Shutdown: hands every held frame back to the pool (counted) and
    /// writes what the node writes a last time.
    fn finish(&mut self);
}

//! Counters of everything the switch does with a packet, drops by reason.

use lcmp_wire::ParseError;

/// Why a received frame was not forwarded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// The frame failed checked parsing (see the per-kind parse counters).
    Parse(ParseError),
    /// No route for the destination.
    NoRoute,
    /// The route has candidates but none is up.
    NoLivePort,
    /// The egress port went down while the frame waited (queue flushed).
    PortDown,
    /// The egress buffer was full (tail drop).
    QueueFull,
    /// The delay line of the link emulation was full.
    EmulationOverflow,
    /// The next hop's MAC address is not known yet.
    NoNeighbour,
    /// The transmit ring did not take the frame.
    TxRingFull,
}

/// Monotonic counters of one switch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Frames received, all ports.
    pub rx_frames: u64,
    /// Bytes received, all ports.
    pub rx_bytes: u64,
    /// Frames handed to a transmit ring, all ports.
    pub tx_frames: u64,
    /// Bytes handed to a transmit ring, all ports.
    pub tx_bytes: u64,
    /// Frames marked CE by an egress queue.
    pub ce_marked: u64,
    /// Drops by parse error kind, indexed by `ParseError::index()`.
    pub parse: [u64; ParseError::ALL.len()],
    /// See [`DropReason::NoRoute`].
    pub no_route: u64,
    /// See [`DropReason::NoLivePort`].
    pub no_live_port: u64,
    /// See [`DropReason::PortDown`].
    pub port_down: u64,
    /// See [`DropReason::QueueFull`].
    pub queue_full: u64,
    /// See [`DropReason::EmulationOverflow`].
    pub emulation_overflow: u64,
    /// See [`DropReason::NoNeighbour`].
    pub no_neighbour: u64,
    /// See [`DropReason::TxRingFull`].
    pub tx_ring_full: u64,
}

impl Counters {
    /// Counts one drop.
    #[inline]
    pub fn drop(&mut self, reason: DropReason) {
        match reason {
            DropReason::Parse(e) => self.parse[e.index()] += 1,
            DropReason::NoRoute => self.no_route += 1,
            DropReason::NoLivePort => self.no_live_port += 1,
            DropReason::PortDown => self.port_down += 1,
            DropReason::QueueFull => self.queue_full += 1,
            DropReason::EmulationOverflow => self.emulation_overflow += 1,
            DropReason::NoNeighbour => self.no_neighbour += 1,
            DropReason::TxRingFull => self.tx_ring_full += 1,
        }
    }

    /// Every drop counter as `(reason, count)`, parse kinds by name.
    pub fn drops(&self) -> Vec<(&'static str, u64)> {
        let mut v: Vec<(&'static str, u64)> = ParseError::ALL
            .iter()
            .map(|e| (e.as_str(), self.parse[e.index()]))
            .collect();
        v.extend([
            ("no_route", self.no_route),
            ("no_live_port", self.no_live_port),
            ("port_down", self.port_down),
            ("queue_full", self.queue_full),
            ("emulation_overflow", self.emulation_overflow),
            ("no_neighbour", self.no_neighbour),
            ("tx_ring_full", self.tx_ring_full),
        ]);
        v
    }

    /// All drops together.
    pub fn total_drops(&self) -> u64 {
        self.drops().iter().map(|(_, n)| n).sum()
    }
}

//! Counters of everything the switch does with a packet, per port, drops
//! by reason. Each counter is an enum variant with its name: the stats
//! file, the control socket and the metrics list them from here, so a new
//! counter is one line in an enum.

use std::collections::BTreeMap;

use lcmp_wire::ParseError;

/// A per-port traffic counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum Counter {
    /// Frames received on the port.
    RxFrames,
    /// Bytes received on the port.
    RxBytes,
    /// Frames handed to the port's transmit ring.
    TxFrames,
    /// Bytes handed to the port's transmit ring.
    TxBytes,
    /// ECT frames this switch marked CE on their way out of the port
    /// (frames that arrived CE already are not counted).
    CeMarked,
    /// ICMP errors (time exceeded, unreachable) the switch generated and
    /// queued on the port: each reuses the buffer of a frame counted as a
    /// drop, so `rx + icmp_sent = tx + drops + held`.
    IcmpSent,
    /// ICMP errors not sent because of the rate limit.
    IcmpRateLimited,
    /// RoCEv2 frames (UDP to port 4791) received on the port that parsed,
    /// a subset of `rx_frames`: shows RDMA traffic (SoftRoCE, NICs) crossing.
    RxRocev2Frames,
    /// Frames that left the port's buffer onto its emulated link (counted
    /// at departure, a link delay before `tx_frames` counts them; frames
    /// that overflow the delay line are drops, not departures).
    DepartedFrames,
    /// Bytes of `departed_frames`: what a link's utilization is made of,
    /// since bytes on a long link would reach `tx_bytes` only after its
    /// delay (2.5 s on some), outside a short measurement window.
    DepartedBytes,
    /// PFC frames the switch sent out of the port pausing its peer (the
    /// frames that arrived on the port hold too much of the buffer:
    /// [`crate::pfc`]); counted in `tx_frames` as they leave, so
    /// `rx + icmp_sent + pfc_sent = tx + drops + held + pfc_received`.
    PfcPausesSent,
    /// PFC frames the switch sent out of the port resuming its peer.
    PfcResumesSent,
    /// PFC frames received on the port (a peer pausing or resuming this
    /// switch): the port's egress stops and goes again as they say;
    /// consumed, not forwarded.
    PfcReceived,
    /// With INT on ([`crate::switch::Switch::set_int`]): frames leaving
    /// the port that got an INT hop record (RoCEv2 with a collect block
    /// with a free slot).
    IntPushed,
    /// With INT on: frames leaving the port whose INT collect block was
    /// full; its OVERFLOW flag is set, nothing else written.
    IntOverflow,
}

impl Counter {
    /// Every counter, in index order.
    pub const ALL: [Counter; 15] = [
        Counter::RxFrames,
        Counter::RxBytes,
        Counter::TxFrames,
        Counter::TxBytes,
        Counter::CeMarked,
        Counter::IcmpSent,
        Counter::IcmpRateLimited,
        Counter::RxRocev2Frames,
        Counter::DepartedFrames,
        Counter::DepartedBytes,
        Counter::PfcPausesSent,
        Counter::PfcResumesSent,
        Counter::PfcReceived,
        Counter::IntPushed,
        Counter::IntOverflow,
    ];

    /// Number of counters.
    pub const COUNT: usize = Self::ALL.len();

    /// The counter's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Counter::RxFrames => "rx_frames",
            Counter::RxBytes => "rx_bytes",
            Counter::TxFrames => "tx_frames",
            Counter::TxBytes => "tx_bytes",
            Counter::CeMarked => "ce_marked",
            Counter::IcmpSent => "icmp_sent",
            Counter::IcmpRateLimited => "icmp_rate_limited",
            Counter::RxRocev2Frames => "rx_rocev2_frames",
            Counter::DepartedFrames => "departed_frames",
            Counter::DepartedBytes => "departed_bytes",
            Counter::PfcPausesSent => "pfc_pauses_sent",
            Counter::PfcResumesSent => "pfc_resumes_sent",
            Counter::PfcReceived => "pfc_received",
            Counter::IntPushed => "int_pushed",
            Counter::IntOverflow => "int_overflow",
        }
    }
}

/// Why a received frame was not forwarded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// The frame failed checked parsing (counted per parse error kind).
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
    /// The transmit ring did not take a frame it had room for (the switch
    /// hands a ring only as many frames as it has free slots; frames that
    /// find the ring full wait in the egress).
    TxRingFull,
    /// Held in an egress buffer or delay line when the switch stopped.
    Shutdown,
    /// With PFC on, the frame's ingress port had used its share of the
    /// buffer and its headroom: its peer did not stop in time (a
    /// lossless fabric's loss, counted on the ingress port).
    PfcHeadroomFull,
}

const OTHER_REASONS: [DropReason; 9] = [
    DropReason::NoRoute,
    DropReason::NoLivePort,
    DropReason::PortDown,
    DropReason::QueueFull,
    DropReason::EmulationOverflow,
    DropReason::NoNeighbour,
    DropReason::TxRingFull,
    DropReason::Shutdown,
    DropReason::PfcHeadroomFull,
];

impl DropReason {
    /// Number of reasons (each parse error kind is one).
    pub const COUNT: usize = ParseError::ALL.len() + OTHER_REASONS.len();

    /// The reason's index in a counter array.
    #[inline]
    pub fn index(self) -> usize {
        const P: usize = ParseError::ALL.len();
        match self {
            DropReason::Parse(e) => e.index(),
            DropReason::NoRoute => P,
            DropReason::NoLivePort => P + 1,
            DropReason::PortDown => P + 2,
            DropReason::QueueFull => P + 3,
            DropReason::EmulationOverflow => P + 4,
            DropReason::NoNeighbour => P + 5,
            DropReason::TxRingFull => P + 6,
            DropReason::Shutdown => P + 7,
            DropReason::PfcHeadroomFull => P + 8,
        }
    }

    /// Every reason, in index order.
    pub fn all() -> impl Iterator<Item = DropReason> {
        ParseError::ALL
            .iter()
            .map(|e| DropReason::Parse(*e))
            .chain(OTHER_REASONS)
    }

    /// The reason's name in reports (parse errors by their kind).
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Parse(e) => e.as_str(),
            DropReason::NoRoute => "no_route",
            DropReason::NoLivePort => "no_live_port",
            DropReason::PortDown => "port_down",
            DropReason::QueueFull => "queue_full",
            DropReason::EmulationOverflow => "emulation_overflow",
            DropReason::NoNeighbour => "no_neighbour",
            DropReason::TxRingFull => "tx_ring_full",
            DropReason::Shutdown => "shutdown",
            DropReason::PfcHeadroomFull => "pfc_headroom_full",
        }
    }
}

/// Every counter by name, valued by `get`.
fn by_name(get: impl Fn(Counter) -> u64) -> BTreeMap<String, u64> {
    Counter::ALL
        .iter()
        .map(|c| (c.name().to_string(), get(*c)))
        .collect()
}

/// Every drop reason by name, valued by `dropped`.
fn drops_by_name(dropped: impl Fn(DropReason) -> u64) -> BTreeMap<String, u64> {
    DropReason::all()
        .map(|r| (r.name().to_string(), dropped(r)))
        .collect()
}

/// The counters of one port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortCounters {
    values: [u64; Counter::COUNT],
    drops: [u64; DropReason::COUNT],
}

impl Default for PortCounters {
    fn default() -> Self {
        PortCounters {
            values: [0; Counter::COUNT],
            drops: [0; DropReason::COUNT],
        }
    }
}

impl PortCounters {
    /// A counter's value.
    pub fn get(&self, c: Counter) -> u64 {
        self.values[c as usize]
    }

    /// Drops for one reason.
    pub fn dropped(&self, r: DropReason) -> u64 {
        self.drops[r.index()]
    }

    /// Every counter by name.
    pub fn named(&self) -> BTreeMap<String, u64> {
        by_name(|c| self.get(c))
    }

    /// Every drop counter by reason name.
    pub fn named_drops(&self) -> BTreeMap<String, u64> {
        drops_by_name(|r| self.dropped(r))
    }

    /// All drops together.
    pub fn total_drops(&self) -> u64 {
        self.drops.iter().sum()
    }
}

/// Monotonic counters of one switch: per port; switch-wide values are the
/// sums. Ingress drops (parse, route) count on the port the frame came in
/// on, egress drops on the port it was to leave by.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    ports: Vec<PortCounters>,
}

impl Counters {
    /// Zeroed counters for `ports` ports.
    pub fn new(ports: usize) -> Self {
        Counters {
            ports: vec![PortCounters::default(); ports],
        }
    }

    /// Adds `n` to a counter of `port`.
    #[inline]
    pub fn add(&mut self, port: usize, c: Counter, n: u64) {
        self.ports[port].values[c as usize] += n;
    }

    /// Counts one drop on `port`.
    #[inline]
    pub fn drop(&mut self, port: usize, reason: DropReason) {
        self.ports[port].drops[reason.index()] += 1;
    }

    /// Counts `n` drops on `port`.
    #[inline]
    pub fn drop_n(&mut self, port: usize, reason: DropReason, n: u64) {
        self.ports[port].drops[reason.index()] += n;
    }

    /// One port's counters.
    pub fn port(&self, port: usize) -> &PortCounters {
        &self.ports[port]
    }

    /// A counter summed over the ports.
    pub fn get(&self, c: Counter) -> u64 {
        self.ports.iter().map(|p| p.get(c)).sum()
    }

    /// Drops for one reason summed over the ports.
    pub fn dropped(&self, r: DropReason) -> u64 {
        self.ports.iter().map(|p| p.dropped(r)).sum()
    }

    /// Every switch-wide counter by name.
    pub fn named(&self) -> BTreeMap<String, u64> {
        by_name(|c| self.get(c))
    }

    /// Every switch-wide drop counter by reason name.
    pub fn named_drops(&self) -> BTreeMap<String, u64> {
        drops_by_name(|r| self.dropped(r))
    }

    /// All drops together.
    pub fn total_drops(&self) -> u64 {
        self.ports.iter().map(PortCounters::total_drops).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_has_its_own_slot_and_name() {
        let idx: Vec<usize> = DropReason::all().map(DropReason::index).collect();
        assert_eq!(idx, (0..DropReason::COUNT).collect::<Vec<_>>());
        let mut names: Vec<&str> = DropReason::all().map(DropReason::name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), DropReason::COUNT);
        assert!(names.contains(&"tx_ring_full") && names.contains(&"no_route"));
    }

    #[test]
    fn switch_totals_are_port_sums() {
        let mut c = Counters::new(2);
        c.add(0, Counter::RxFrames, 3);
        c.add(1, Counter::RxFrames, 4);
        c.drop(1, DropReason::QueueFull);
        c.drop(0, DropReason::Parse(ParseError::Truncated));
        assert_eq!(c.get(Counter::RxFrames), 7);
        assert_eq!(c.port(1).dropped(DropReason::QueueFull), 1);
        assert_eq!(c.total_drops(), 2);
        assert_eq!(c.named()["rx_frames"], 7);
        assert_eq!(c.named_drops()["queue_full"], 1);
    }
}

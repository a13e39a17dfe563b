//! Prometheus metrics of one or more switches, computed at scrape time
//! from their [`Snapshot`]s and `costs` replies.
//!
//! The values live in the switches, not here, so nothing is registered
//! ahead of time: a collector (prometheus-client's [`Collector`]) turns
//! the scrape results into constant counters and gauges each time the
//! registry is encoded. [`render`] does the whole round trip for a slice
//! of results and returns the OpenMetrics text.
//!
//! Every series but `lcmp_build_info` carries a `switch` label (the name
//! the scrape was made under); per-port series add `port` (the interface
//! name). Names follow the Prometheus conventions: base units in the name
//! (bytes, seconds, bytes per second), `_total` on counters, `_info` on
//! info families, `_timestamp_seconds` on points in time. A label
//! partitions a family only where summing over it means something (drops
//! by reason, frames by direction, a rotor ToR's frames by `link`: its
//! next-hop queues towards the uplinks or its host downlinks), so the
//! parts of one thing (alpha and beta, kmin and kmax, q, t and d) are
//! families of their own. A link rate is exposed in bytes per second
//! rather than bits per second because `promtool check metrics` rejects
//! `bits` as a non-base unit; dashboards multiply by 8.
//!
//! `lcmp_build_info` carries the version only: the git commit is not
//! known at build time without a build script, and this crate has none.
//!
//! A ToR's slot lateness is a summary (`quantile` 0.5, 0.99 and 1, and
//! `_count`), the Prometheus type for quantiles computed where the samples
//! are: the switch keeps the last 1024 samples and reports their p50, p99
//! and max (nearest rank; the max is the quantile 1 of the same rule) and
//! how many slots it has measured since start, not buckets, so a histogram
//! could only be made up. The summary has no `_sum`, which the status
//! lacks (OpenMetrics makes both optional). A histogram would need the
//! rotor daemon to count every sample since start into fixed buckets
//! (cumulative counts per upper bound, say 1 us to 1 ms in 1-2-5 steps, and
//! the sum in ns) and the rotor status to carry them; this module would
//! then encode them with prometheus-client's histogram. prometheus-client
//! has no summary type, so [`render_as`] writes that family's text itself
//! after the collector's.
//!
//! Counter and drop keys come from the switch's enums, so they are
//! handled generically: drops and XDP verdicts are labels, counters this
//! module has a family for go there, and any other counter key appears in
//! `lcmp_port_other_events_total` / `lcmp_switch_other_events_total` /
//! `lcmp_rotor_other_events_total` with a `counter` label, so a counter
//! added to the switch is exported before anyone writes a family for it.
//!
//! `dashboards/README.md` documents every family; a test holds the two
//! equal.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

use crate::proto::CostsReply;
use crate::snapshot::{EmulationMode, PortSnapshot, Snapshot};

/// Content type of [`Format::OpenMetrics`].
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Content type of [`Format::PrometheusText`].
pub const PROMETHEUS_TEXT_CONTENT_TYPE: &str =
    prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// Text exposition formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// OpenMetrics 1.0 text (what Prometheus asks for first).
    OpenMetrics,
    /// The Prometheus text format 0.0.4: what older tools such as the
    /// linter of `promtool check metrics` (Debian 12's 2.42) parse.
    PrometheusText,
}

impl Format {
    /// The HTTP content type of the format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => OPENMETRICS_CONTENT_TYPE,
            Format::PrometheusText => PROMETHEUS_TEXT_CONTENT_TYPE,
        }
    }
}

/// The result of scraping one switch.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SwitchScrape {
    /// The switch's name: the `switch` label of every series (used even
    /// when the snapshot names the switch differently, so the labels match
    /// `lcmp_switch_up` whether or not the scrape succeeded).
    pub switch: String,
    /// Its state; `None`: the scrape failed (`lcmp_switch_up` 0).
    pub snapshot: Option<Snapshot>,
    /// `costs` replies, one per destination of interest.
    pub costs: Vec<CostsReply>,
    /// How long the scrape took, if measured.
    pub duration: Option<Duration>,
    /// A rotor network's switch: its state instead of `snapshot`.
    pub rotor: Option<crate::rotor::RotorStatus>,
}

impl SwitchScrape {
    /// A successful scrape.
    pub fn up(switch: impl Into<String>, snapshot: Snapshot, costs: Vec<CostsReply>) -> Self {
        SwitchScrape {
            switch: switch.into(),
            snapshot: Some(snapshot),
            costs,
            duration: None,
            rotor: None,
        }
    }

    /// A successful scrape of a rotor network's switch.
    pub fn rotor(switch: impl Into<String>, status: crate::rotor::RotorStatus) -> Self {
        SwitchScrape {
            switch: switch.into(),
            rotor: Some(status),
            ..SwitchScrape::default()
        }
    }

    /// A failed scrape.
    pub fn down(switch: impl Into<String>) -> Self {
        SwitchScrape {
            switch: switch.into(),
            ..SwitchScrape::default()
        }
    }

    /// The same scrape with its duration.
    pub fn with_duration(mut self, duration: Duration) -> Self {
        self.duration = Some(duration);
        self
    }
}

/// The OpenMetrics text of `scrapes`, ending in `# EOF`.
pub fn render(scrapes: &[SwitchScrape]) -> String {
    render_as(scrapes, Format::OpenMetrics)
}

/// The exposition of `scrapes` in `format`.
pub fn render_as(scrapes: &[SwitchScrape], format: Format) -> String {
    let series = collect(scrapes);
    // Written before the collector takes the series; placed after its
    // families, where any complete family may stand.
    let summaries =
        encode_summaries(&series, format).expect("encoding metrics into a String cannot fail");
    let mut registry = Registry::default();
    registry.register_collector(Box::new(LcmpCollector { series }));
    let mut out = String::new();
    // prometheus-client fails only when the writer fails (a String never
    // does) or on native histograms, which nothing here produces.
    let done = match format {
        Format::OpenMetrics => {
            prometheus_client::encoding::text::encode_registry(&mut out, &registry)
        }
        Format::PrometheusText => {
            prometheus_client::encoding::prometheus_text::encode(&mut out, &registry)
        }
    };
    done.expect("encoding metrics into a String cannot fail");
    out.push_str(&summaries);
    if format == Format::OpenMetrics {
        prometheus_client::encoding::text::encode_eof(&mut out)
            .expect("encoding metrics into a String cannot fail");
    }
    out
}

/// The collector of one exposition's series: every family but the
/// summaries, which prometheus-client cannot encode.
struct LcmpCollector {
    series: Series,
}

impl fmt::Debug for LcmpCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LcmpCollector").finish_non_exhaustive()
    }
}

impl Collector for LcmpCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        encode_series(&self.series, &mut encoder)
    }
}

/// What a family counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
    /// An OpenMetrics info family: value 1, the information in labels.
    Info,
    /// Quantiles computed by the switch, and a count of observations.
    Summary,
}

/// Units named in family names (OpenMetrics `# UNIT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BaseUnit {
    Bytes,
    Seconds,
    BytesPerSecond,
}

impl BaseUnit {
    fn unit(self) -> Unit {
        match self {
            BaseUnit::Bytes => Unit::Bytes,
            BaseUnit::Seconds => Unit::Seconds,
            BaseUnit::BytesPerSecond => Unit::Other("bytes_per_second".into()),
        }
    }
}

/// One metric family.
#[derive(Debug)]
struct Def {
    /// The family name as exposed, with its unit, without the `_total`
    /// (counters) or `_info` (info) the encoder appends to samples.
    name: &'static str,
    kind: Kind,
    unit: Option<BaseUnit>,
    help: &'static str,
}

impl Def {
    /// The name without the unit suffix, and the unit: prometheus-client
    /// appends the unit itself. A name not ending in its unit (a mistake
    /// the unit tests catch) is exposed as written, without a unit.
    fn name_and_unit(&self) -> (&'static str, Option<Unit>) {
        let Some(base_unit) = self.unit else {
            return (self.name, None);
        };
        let unit = base_unit.unit();
        match self
            .name
            .strip_suffix(unit.as_str())
            .and_then(|n| n.strip_suffix('_'))
        {
            Some(base) => (base, Some(unit)),
            None => (self.name, None),
        }
    }
}

// One line per family: the enum variant used when filling in series, and
// its definition. Declaration order is exposition order.
macro_rules! families {
    ($($variant:ident: $kind:ident $name:literal $unit:expr, $help:literal;)*) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(usize)]
        enum F {
            $($variant,)*
        }

        const FAMILIES: &[Def] = &[
            $(Def { name: $name, kind: Kind::$kind, unit: $unit, help: $help },)*
        ];
    };
}

const BYTES: Option<BaseUnit> = Some(BaseUnit::Bytes);
const SECONDS: Option<BaseUnit> = Some(BaseUnit::Seconds);
const BYTES_PER_SECOND: Option<BaseUnit> = Some(BaseUnit::BytesPerSecond);

families! {
    BuildInfo: Info "lcmp_build" None,
        "The exporter's version (lcmp-control's crate version): one series, value 1.";
    SwitchUp: Gauge "lcmp_switch_up" None,
        "1 if the switch's state was scraped, 0 if the scrape failed.";
    ScrapeDuration: Gauge "lcmp_scrape_duration_seconds" SECONDS,
        "How long scraping the switch's state took.";
    SwitchInfo: Info "lcmp_switch" None,
        "The switch's path-selection policy.";
    SwitchUptime: Gauge "lcmp_switch_uptime_seconds" SECONDS,
        "Time since the switch started forwarding.";
    PolicyPathCostWeight: Gauge "lcmp_policy_path_cost_weight" None,
        "alpha, the weight of C_path in the fused cost (LCMP policies only).";
    PolicyCongestionCostWeight: Gauge "lcmp_policy_congestion_cost_weight" None,
        "beta, the weight of C_cong in the fused cost (LCMP policies only).";
    RouteTableGeneration: Gauge "lcmp_route_table_generation" None,
        "Route table generation: 1 at start, +1 per table replacement.";
    SwitchPolls: Counter "lcmp_switch_polls" None,
        "Poll-loop iterations.";
    SwitchPollsWithRx: Counter "lcmp_switch_polls_with_rx" None,
        "Poll-loop iterations that received at least one frame.";
    SwitchOther: Counter "lcmp_switch_other_events" None,
        "Switch-wide counters this exporter has no family for, by counter name.";
    PortInfo: Info "lcmp_port" None,
        "A port: index, link emulation mode and XDP attach mode.";
    PortUp: Gauge "lcmp_port_up" None,
        "1 if the port forwards (carrier and administratively up).";
    PortLinkUp: Gauge "lcmp_port_link_up" None,
        "1 if the port has carrier.";
    PortAdminUp: Gauge "lcmp_port_admin_up" None,
        "1 if the port is administratively up.";
    PortRxPackets: Counter "lcmp_port_rx_packets" None,
        "Frames received on the port.";
    PortRxBytes: Counter "lcmp_port_rx_bytes" BYTES,
        "Bytes received on the port.";
    PortTxPackets: Counter "lcmp_port_tx_packets" None,
        "Frames handed to the port's transmit ring.";
    PortTxBytes: Counter "lcmp_port_tx_bytes" BYTES,
        "Bytes handed to the port's transmit ring.";
    PortEnqueuedPackets: Counter "lcmp_port_enqueued_packets" None,
        "Frames put into the port's egress buffer.";
    PortDepartedPackets: Counter "lcmp_port_departed_packets" None,
        "Frames that left the port's egress buffer onto its emulated link (counted when they start crossing it, a link delay before tx).";
    PortDepartedBytes: Counter "lcmp_port_departed_bytes" BYTES,
        "Bytes that left the port's egress buffer onto its emulated link: the link's load, counted when they start crossing it.";
    PortEcnMarkedPackets: Counter "lcmp_port_ecn_marked_packets" None,
        "ECT frames the switch marked CE on their way out of the port.";
    PortRxRocev2Packets: Counter "lcmp_port_rx_rocev2_packets" None,
        "RoCEv2 frames (UDP to port 4791) received on the port: RDMA traffic crossing the switch.";
    PortOther: Counter "lcmp_port_other_events" None,
        "Per-port counters this exporter has no family for, by counter name.";
    PortDroppedPackets: Counter "lcmp_port_dropped_packets" None,
        "Frames dropped, by reason: ingress drops count on the port the frame came in on, egress drops on the port it was to leave by.";
    PortQueueBytes: Gauge "lcmp_port_queue_bytes" BYTES,
        "Bytes in the port's egress buffer.";
    PortQueuePackets: Gauge "lcmp_port_queue_packets" None,
        "Frames in the port's egress buffer.";
    PortDelayLinePackets: Gauge "lcmp_port_delay_line_packets" None,
        "Frames in the link emulation's delay line (sent by the shaper, not yet released).";
    PortEcnMinThreshold: Gauge "lcmp_port_ecn_min_threshold_bytes" BYTES,
        "kmin: ECN marking starts above this queue (absent: marking off).";
    PortEcnMaxThreshold: Gauge "lcmp_port_ecn_max_threshold_bytes" BYTES,
        "kmax: every ECT frame is marked above this queue (absent: marking off).";
    PortCongestionCost: Gauge "lcmp_port_congestion_cost" None,
        "The port's fused congestion cost C_cong.";
    PortCongestionQueueScore: Gauge "lcmp_port_congestion_queue_score" None,
        "q, the queue-level score C_cong is fused from.";
    PortCongestionTrendScore: Gauge "lcmp_port_congestion_trend_score" None,
        "t, the queue-trend score C_cong is fused from.";
    PortCongestionPersistenceScore: Gauge "lcmp_port_congestion_persistence_score" None,
        "d, the persistence score C_cong is fused from.";
    PortEmulationRate: Gauge "lcmp_port_emulation_rate_bytes_per_second" BYTES_PER_SECOND,
        "Rate of the link the port emulates (0: line rate).";
    PortEmulationDelay: Gauge "lcmp_port_emulation_delay_seconds" SECONDS,
        "One-way propagation delay of the link the port emulates.";
    PortEmulationBuffer: Gauge "lcmp_port_emulation_buffer_bytes" BYTES,
        "Egress buffer of the port.";
    PortXdpVerdicts: Counter "lcmp_port_xdp_verdicts" None,
        "Frames the port's XDP program handled, by verdict.";
    PortXskRxDroppedPackets: Counter "lcmp_port_xsk_rx_dropped_packets" None,
        "Frames the kernel dropped for lack of AF_XDP RX ring space or fill buffers.";
    PortXskRxRingFull: Counter "lcmp_port_xsk_rx_ring_full" None,
        "AF_XDP RX ring full events.";
    PortXskFillRingEmpty: Counter "lcmp_port_xsk_fill_ring_empty" None,
        "AF_XDP fill ring empty events.";
    PortXskTxInvalidDescriptors: Counter "lcmp_port_xsk_tx_invalid_descriptors" None,
        "Invalid AF_XDP TX descriptors.";
    PortXskSocketInfo: Info "lcmp_port_xsk_socket" None,
        "One series per AF_XDP socket of the port (an RX queue of its interface) with how it moves frames: bind_mode copy or zero-copy.";
    PortXskQueuePackets: Counter "lcmp_port_xsk_queue_packets" None,
        "Frames the switch received on an RX queue's socket, or queued for transmission on it (a port transmits on its first queue), by direction.";
    PortMemoryLinkPackets: Counter "lcmp_port_memory_link_packets" None,
        "Frames a memory link carried, by direction (sent to or received from its far end).";
    PortMemoryLinkBytes: Counter "lcmp_port_memory_link_bytes" BYTES,
        "Bytes a memory link carried, by direction.";
    PortMemoryLinkPeerBuffersEmpty: Counter "lcmp_port_memory_link_peer_buffers_empty" None,
        "Sends over a memory link cut short because its far end had lent no free buffer (the rest waited in the delay line).";
    FlowCacheFlows: Gauge "lcmp_flow_cache_flows" None,
        "Flows in the flow cache.";
    FlowCacheCapacity: Gauge "lcmp_flow_cache_capacity_flows" None,
        "Flows the flow cache can hold.";
    FlowCacheHits: Counter "lcmp_flow_cache_hits" None,
        "Packets of flows found in the flow cache.";
    FlowCacheMisses: Counter "lcmp_flow_cache_misses" None,
        "Packets of flows not in the flow cache (a path decision was made).";
    FlowCacheInserts: Counter "lcmp_flow_cache_inserts" None,
        "Flows put into the flow cache.";
    FlowCacheEvictions: Counter "lcmp_flow_cache_evictions" None,
        "Idle flows evicted from the flow cache.";
    FlowFailovers: Counter "lcmp_flow_failovers" None,
        "Cached flows moved off a port that died or left the flow's route.";
    FlowCacheFullDecisions: Counter "lcmp_flow_cache_full_decisions" None,
        "Path decisions not cached because the cache bucket was full.";
    AllCongestedDecisions: Counter "lcmp_all_congested_decisions" None,
        "Path decisions where every kept candidate was congested.";
    Decisions: Counter "lcmp_decisions" None,
        "New-flow and failover path decisions by policy and chosen port, since the route table was installed.";
    RoutePathCost: Gauge "lcmp_route_candidate_path_cost" None,
        "C_path of each candidate port of a destination prefix.";
    RouteCongestionCost: Gauge "lcmp_route_candidate_congestion_cost" None,
        "C_cong of each candidate port of a destination prefix.";
    RouteCost: Gauge "lcmp_route_candidate_cost" None,
        "Fused cost alpha * C_path + beta * C_cong of each candidate port of a destination prefix.";
    RouteKept: Gauge "lcmp_route_candidate_kept" None,
        "1 if the candidate is in the kept set new flows hash over.";
    RouteUp: Gauge "lcmp_route_candidate_up" None,
        "1 if the candidate port forwards.";
    FlowLogWritten: Counter "lcmp_flow_log_written_records" None,
        "Flow-log records written.";
    FlowLogDropped: Counter "lcmp_flow_log_dropped_records" None,
        "Flow-log records dropped because the buffer was full.";
    FlowLogWriteFailed: Counter "lcmp_flow_log_write_failed_records" None,
        "Flow-log records lost to a write error.";
    FlowLogBuffered: Gauge "lcmp_flow_log_buffered_records" None,
        "Flow-log records buffered, not written yet.";
    FlowLogCapacity: Gauge "lcmp_flow_log_capacity_records" None,
        "Flow-log buffer capacity.";
    ControlRequests: Counter "lcmp_control_requests" None,
        "Control-socket requests answered.";
    ControlErrors: Counter "lcmp_control_errors" None,
        "Control-socket requests answered with an error.";
    ControlRefused: Counter "lcmp_control_refused_connections" None,
        "Control-socket connections refused.";
    RotorInfo: Info "lcmp_rotor" None,
        "A rotor network's switch: role (rotor or tor), index, emulated graph, routing.";
    RotorSlot: Gauge "lcmp_rotor_slot" None,
        "The slot now, counted from the epoch (absent before an epoch is known).";
    RotorSlotLength: Gauge "lcmp_rotor_slot_length_seconds" SECONDS,
        "Slot length Delta.";
    RotorSlotReconfiguration: Gauge "lcmp_rotor_slot_reconfiguration_seconds" SECONDS,
        "Reconfiguration Delta_r at the start of every slot (no circuits meanwhile).";
    RotorEpoch: Gauge "lcmp_rotor_epoch_timestamp_seconds" SECONDS,
        "Start of slot 0, seconds since the Unix epoch (CLOCK_REALTIME; absent before an epoch is known).";
    RotorSlotLateness: Summary "lcmp_rotor_slot_lateness_seconds" SECONDS,
        "How late the ToR polled after the reconfiguration of a slot frames waited for ended: quantiles 0.5, 0.99 and 1 (the largest) over the last 1024 such slots, and their count since start.";
    RotorCircuit: Gauge "lcmp_rotor_circuit_tor" None,
        "The ToR a port (rotor) or uplink (ToR) reaches in the current slot (absent: reconfiguring or no circuit).";
    RotorQueueBytes: Gauge "lcmp_rotor_queue_bytes" BYTES,
        "Bytes a ToR holds for a next-hop ToR.";
    RotorQueuePackets: Gauge "lcmp_rotor_queue_packets" None,
        "Frames a ToR holds for a next-hop ToR.";
    RotorBuffer: Gauge "lcmp_rotor_buffer_bytes" BYTES,
        "A ToR's buffer, shared by its next-hop queues.";
    RotorDropped: Counter "lcmp_rotor_dropped_packets" None,
        "Frames a rotor network's switch dropped, by reason.";
    RotorQueuedPackets: Counter "lcmp_rotor_queued_packets" None,
        "Frames a ToR queued, by link: into its next-hop queues (uplink) or, with NDP trimming, its host downlinks (downlink).";
    RotorPriorityQueuedPackets: Counter "lcmp_rotor_priority_queued_packets" None,
        "Of the frames a ToR put into its next-hop queues, those queued at high priority (NDP trimming: control packets and trimmed headers).";
    RotorUplinkSentPackets: Counter "lcmp_rotor_uplink_sent_packets" None,
        "Frames a ToR handed from its next-hop queues to an uplink.";
    RotorSlotEndDeferrals: Counter "lcmp_rotor_slot_end_deferrals" None,
        "Slots in which a ToR's queue head waited because it could not finish before the slot's end (once per uplink and slot).";
    RotorPrioritySentPackets: Counter "lcmp_rotor_priority_sent_packets" None,
        "Frames a ToR sent from a high-priority queue (NDP trimming), by link: to an uplink or to a host port.";
    RotorLatePackets: Counter "lcmp_rotor_late_packets" None,
        "Frames a ToR handed out after their serialization should have ended (the poll loop was late), by link: to an uplink or, with NDP trimming, from a host downlink.";
    RotorLate: Counter "lcmp_rotor_late_seconds" SECONDS,
        "Total lateness of the frames lcmp_rotor_late_packets_total counts, by link (divided by it: the mean).";
    RotorDeliveredPackets: Counter "lcmp_rotor_delivered_packets" None,
        "Frames a ToR delivered to a host port.";
    RotorTrimmedPackets: Counter "lcmp_rotor_trimmed_packets" None,
        "NDP data packets a ToR cut to their headers because their data queue was full, by link: a next-hop queue (uplink) or a host downlink (downlink).";
    RotorValiantDetourPackets: Counter "lcmp_rotor_valiant_detour_packets" None,
        "Frames from hosts a ToR sent to a Valiant intermediate other than the destination's ToR.";
    RotorTransitPackets: Counter "lcmp_rotor_transit_packets" None,
        "Frames from an uplink a ToR queued onward (shift-routing transit, or the intermediate of a Valiant detour).";
    RotorOther: Counter "lcmp_rotor_other_events" None,
        "Counters of a rotor network's switch this exporter has no family for, by counter name.";
}

/// Per-port counter keys with a family of their own. The switch-wide
/// counters of the same names are the sums over the ports and are left
/// out, so summing a family over ports never counts a frame twice.
const PORT_COUNTERS: [(&str, F); 9] = [
    ("rx_frames", F::PortRxPackets),
    ("rx_bytes", F::PortRxBytes),
    ("tx_frames", F::PortTxPackets),
    ("tx_bytes", F::PortTxBytes),
    ("enqueued_frames", F::PortEnqueuedPackets),
    ("departed_frames", F::PortDepartedPackets),
    ("departed_bytes", F::PortDepartedBytes),
    ("ce_marked", F::PortEcnMarkedPackets),
    ("rx_rocev2_frames", F::PortRxRocev2Packets),
];

/// Switch-wide counter keys with a family of their own.
const SWITCH_COUNTERS: [(&str, F); 2] = [
    ("polls", F::SwitchPolls),
    ("polls_with_rx", F::SwitchPollsWithRx),
];

/// How a counter's value becomes a sample.
type ToSample = fn(u64) -> Num;

/// A rotor network switch's counter keys with a family of their own, the
/// `link` label of those a ToR counts at both ends of its queues (its
/// next-hop queues towards the uplinks, its host downlinks with NDP
/// trimming: keys without `_downlink` are the uplink side), and how a
/// value becomes a sample (`_ns` keys are nanoseconds). The names are
/// those of the ToR's status (`rotor_daemon`, `TorSwitch::trim_counters`).
#[rustfmt::skip]
const ROTOR_COUNTERS: [(&str, F, Option<&str>, ToSample); 16] = [
    ("queued",                 F::RotorQueuedPackets,         Some("uplink"),   Num::U),
    ("queued_downlink",        F::RotorQueuedPackets,         Some("downlink"), Num::U),
    ("queued_priority",        F::RotorPriorityQueuedPackets, None,             Num::U),
    ("sent_uplink",            F::RotorUplinkSentPackets,     None,             Num::U),
    ("sent_priority_uplink",   F::RotorPrioritySentPackets,   Some("uplink"),   Num::U),
    ("sent_priority_downlink", F::RotorPrioritySentPackets,   Some("downlink"), Num::U),
    ("deferred_slot_end",      F::RotorSlotEndDeferrals,      None,             Num::U),
    ("late_frames",            F::RotorLatePackets,           Some("uplink"),   Num::U),
    ("late_frames_downlink",   F::RotorLatePackets,           Some("downlink"), Num::U),
    ("late_ns",                F::RotorLate,                  Some("uplink"),   seconds_of_ns),
    ("late_ns_downlink",       F::RotorLate,                  Some("downlink"), seconds_of_ns),
    ("delivered",              F::RotorDeliveredPackets,      None,             Num::U),
    ("trimmed",                F::RotorTrimmedPackets,        Some("uplink"),   Num::U),
    ("trimmed_downlink",       F::RotorTrimmedPackets,        Some("downlink"), Num::U),
    ("valiant_detours",        F::RotorValiantDetourPackets,  None,             Num::U),
    ("transit",                F::RotorTransitPackets,        None,             Num::U),
];

/// A rotor network switch's counter keys left out because another family
/// has the same count: `rx_frames` and `tx_frames` are the sums of its
/// ports' (exported per port, as for the LCMP switch), and a ToR's
/// `sent_downlink` (what its host downlinks handed to the host ports) is
/// `delivered`, which counts those frames when trimming is on.
const ROTOR_DUPLICATES: [&str; 3] = ["rx_frames", "tx_frames", "sent_downlink"];

type Labels = Vec<(&'static str, String)>;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Num {
    U(u64),
    F(f64),
}

fn seconds_of_ns(ns: u64) -> Num {
    Num::F(ns as f64 / 1e9)
}

/// A summary's sample: each quantile (its label value) with its value,
/// and how many observations there were since start.
#[derive(Clone, Debug, PartialEq)]
struct Quantiles {
    values: Vec<(&'static str, f64)>,
    count: u64,
}

/// The series of every family, indexed by `F`: samples of the families
/// prometheus-client encodes, and those of the summaries.
struct Series {
    samples: Vec<Vec<(Labels, Num)>>,
    summaries: Vec<Vec<(Labels, Quantiles)>>,
}

impl Series {
    fn new() -> Self {
        Series {
            samples: FAMILIES.iter().map(|_| Vec::new()).collect(),
            summaries: FAMILIES.iter().map(|_| Vec::new()).collect(),
        }
    }

    fn push(&mut self, family: F, labels: Labels, value: Num) {
        self.samples[family as usize].push((labels, value));
    }

    fn summary(&mut self, family: F, labels: Labels, quantiles: Quantiles) {
        self.summaries[family as usize].push((labels, quantiles));
    }

    fn u(&mut self, family: F, labels: Labels, value: u64) {
        self.push(family, labels, Num::U(value));
    }

    fn flag(&mut self, family: F, labels: Labels, on: bool) {
        self.push(family, labels, Num::U(u64::from(on)));
    }
}

fn collect(scrapes: &[SwitchScrape]) -> Series {
    let mut out = Series::new();
    // The process's, not a switch's: the one series without `switch`.
    out.u(
        F::BuildInfo,
        vec![("version", env!("CARGO_PKG_VERSION").to_string())],
        1,
    );
    // A switch listed twice would produce duplicate series, which makes
    // the whole exposition invalid: the first result wins.
    let mut seen = HashSet::new();
    for scrape in scrapes {
        let sw = scrape.switch.as_str();
        if !seen.insert(sw) {
            continue;
        }
        out.flag(
            F::SwitchUp,
            switch_labels(sw),
            scrape.snapshot.is_some() || scrape.rotor.is_some(),
        );
        if let Some(d) = scrape.duration {
            out.push(
                F::ScrapeDuration,
                switch_labels(sw),
                Num::F(d.as_secs_f64()),
            );
        }
        if let Some(snapshot) = &scrape.snapshot {
            collect_snapshot(&mut out, sw, snapshot);
        }
        if let Some(status) = &scrape.rotor {
            collect_rotor(&mut out, sw, status);
        }
        collect_costs(&mut out, sw, &scrape.costs);
    }
    out
}

fn switch_labels(sw: &str) -> Labels {
    vec![("switch", sw.to_string())]
}

/// The `port` label: the interface name, or the index if it has none.
fn port_label(name: &str, index: u32) -> String {
    if name.is_empty() {
        index.to_string()
    } else {
        name.to_string()
    }
}

fn collect_snapshot(out: &mut Series, sw: &str, s: &Snapshot) {
    let labels = || switch_labels(sw);
    out.u(
        F::SwitchInfo,
        vec![
            ("switch", sw.to_string()),
            ("policy", s.policy.name.clone()),
        ],
        1,
    );
    out.push(F::SwitchUptime, labels(), Num::F(s.uptime_ms as f64 / 1e3));
    for (family, value) in [
        (F::PolicyPathCostWeight, s.policy.alpha),
        (F::PolicyCongestionCostWeight, s.policy.beta),
    ] {
        if let Some(v) = value {
            out.u(family, labels(), u64::from(v));
        }
    }
    out.u(F::RouteTableGeneration, labels(), s.table_generation);
    for (key, &value) in &s.counters {
        if let Some((_, family)) = SWITCH_COUNTERS.iter().find(|(k, _)| k == key) {
            out.u(*family, labels(), value);
        } else if !PORT_COUNTERS.iter().any(|(k, _)| k == key) {
            out.u(
                F::SwitchOther,
                vec![("switch", sw.to_string()), ("counter", key.clone())],
                value,
            );
        }
    }

    let mut seen_ports = HashSet::new();
    for port in &s.ports {
        let name = port_label(&port.name, port.index);
        // Two ports of one name would collide in every per-port family.
        if seen_ports.insert(name.clone()) {
            collect_port(out, sw, &name, port);
        }
    }

    let f = &s.flows;
    out.u(F::FlowCacheFlows, labels(), f.cached);
    out.u(F::FlowCacheCapacity, labels(), f.capacity);
    out.u(F::FlowCacheHits, labels(), f.hits);
    out.u(F::FlowCacheMisses, labels(), f.misses);
    out.u(F::FlowCacheInserts, labels(), f.inserts);
    out.u(F::FlowCacheEvictions, labels(), f.evictions);
    out.u(F::FlowFailovers, labels(), f.failovers);
    out.u(F::FlowCacheFullDecisions, labels(), f.cache_full_decisions);
    out.u(
        F::AllCongestedDecisions,
        labels(),
        f.all_congested_decisions,
    );

    // The snapshot counts per route and port; the family is per port, so
    // its cardinality does not grow with the route table.
    let mut by_port: BTreeMap<String, u64> = BTreeMap::new();
    for d in &s.decisions {
        *by_port.entry(port_label(&d.ifname, d.port)).or_default() += d.count;
    }
    for (port, count) in by_port {
        out.u(
            F::Decisions,
            vec![
                ("switch", sw.to_string()),
                ("policy", s.policy.name.clone()),
                ("port", port),
            ],
            count,
        );
    }

    if let Some(log) = &s.flow_log {
        out.u(F::FlowLogWritten, labels(), log.written);
        out.u(F::FlowLogDropped, labels(), log.dropped);
        out.u(F::FlowLogWriteFailed, labels(), log.write_failed);
        out.u(F::FlowLogBuffered, labels(), log.buffered);
        out.u(F::FlowLogCapacity, labels(), log.capacity);
    }

    out.u(F::ControlRequests, labels(), s.control.requests);
    out.u(F::ControlErrors, labels(), s.control.errors);
    out.u(F::ControlRefused, labels(), s.control.refused);
}

fn collect_rotor(out: &mut Series, sw: &str, s: &crate::rotor::RotorStatus) {
    let labels = || switch_labels(sw);
    let with = |key: &'static str, value: String| vec![("switch", sw.to_string()), (key, value)];
    out.u(
        F::RotorInfo,
        vec![
            ("switch", sw.to_string()),
            ("role", s.role.clone()),
            ("index", s.index.to_string()),
            ("graph", s.graph.clone()),
            ("routing", s.routing.clone()),
        ],
        1,
    );
    out.push(F::SwitchUptime, labels(), Num::F(s.uptime_ns as f64 / 1e9));
    out.push(F::RotorSlotLength, labels(), seconds_of_ns(s.slot_ns));
    out.push(
        F::RotorSlotReconfiguration,
        labels(),
        seconds_of_ns(s.reconfig_ns),
    );
    if let Some(e) = s.epoch_unix_ns {
        out.u(F::RotorSlot, labels(), s.slot);
        out.push(F::RotorEpoch, labels(), seconds_of_ns(e));
    }
    if s.role == "tor" {
        let l = &s.lateness;
        // OpenMetrics: a quantile over no observations is NaN.
        let seconds = |ns: u64| {
            if l.samples == 0 {
                f64::NAN
            } else {
                ns as f64 / 1e9
            }
        };
        out.summary(
            F::RotorSlotLateness,
            labels(),
            Quantiles {
                values: vec![
                    ("0.5", seconds(l.p50_ns)),
                    ("0.99", seconds(l.p99_ns)),
                    ("1", seconds(l.max_ns)),
                ],
                count: l.samples,
            },
        );
        out.u(F::RotorBuffer, labels(), s.buffer_bytes);
    }
    for (port, to) in s.ports.iter().zip(&s.circuits) {
        if let Some(t) = to {
            out.u(
                F::RotorCircuit,
                with("port", port.name.clone()),
                u64::from(*t),
            );
        }
    }
    for q in &s.queues {
        out.u(
            F::RotorQueueBytes,
            with("next_hop", q.next_hop.to_string()),
            q.bytes,
        );
        out.u(
            F::RotorQueuePackets,
            with("next_hop", q.next_hop.to_string()),
            q.frames,
        );
    }
    for (reason, n) in &s.drops {
        out.u(F::RotorDropped, with("reason", reason.clone()), *n);
    }
    for (counter, &n) in &s.counters {
        if ROTOR_DUPLICATES.contains(&counter.as_str()) {
            continue;
        }
        match ROTOR_COUNTERS.iter().find(|(k, ..)| k == counter) {
            Some(&(_, family, Some(link), value)) => {
                out.push(family, with("link", link.into()), value(n))
            }
            Some(&(_, family, None, value)) => out.push(family, labels(), value(n)),
            None => out.u(F::RotorOther, with("counter", counter.clone()), n),
        }
    }
    for p in &s.ports {
        let l = || with("port", p.name.clone());
        out.u(F::PortRxPackets, l(), p.rx_frames);
        out.u(F::PortRxBytes, l(), p.rx_bytes);
        out.u(F::PortTxPackets, l(), p.tx_frames);
        out.u(F::PortTxBytes, l(), p.tx_bytes);
        out.flag(F::PortLinkUp, l(), p.link_up);
    }
}

fn collect_port(out: &mut Series, sw: &str, name: &str, p: &PortSnapshot) {
    let labels = || vec![("switch", sw.to_string()), ("port", name.to_string())];
    let with = |key: &'static str, value: &str| {
        let mut l = labels();
        l.push((key, value.to_string()));
        l
    };

    let mut info = labels();
    info.push(("index", p.index.to_string()));
    info.push((
        "emulation_mode",
        match p.emulation.mode {
            EmulationMode::Switch => "switch",
            EmulationMode::None => "none",
            EmulationMode::Netem => "netem",
        }
        .to_string(),
    ));
    if !p.kind.is_empty() {
        info.push(("kind", p.kind.clone()));
    }
    if let Some(xsk) = &p.xsk {
        info.push(("xdp_mode", xsk.xdp_mode.clone()));
        if !xsk.bind_mode.is_empty() {
            info.push(("bind_mode", xsk.bind_mode.clone()));
        }
    }
    if let Some(m) = &p.memory_link {
        info.push(("peer", m.peer.clone()));
        info.push(("transfer", m.transfer.clone()));
    }
    out.u(F::PortInfo, info, 1);

    out.flag(F::PortUp, labels(), p.up);
    out.flag(F::PortLinkUp, labels(), p.link_up);
    out.flag(F::PortAdminUp, labels(), p.admin_up);

    for (key, &value) in &p.counters {
        match PORT_COUNTERS.iter().find(|(k, _)| k == key) {
            Some((_, family)) => out.u(*family, labels(), value),
            None => out.u(F::PortOther, with("counter", key), value),
        }
    }
    for (reason, &value) in &p.drops {
        out.u(F::PortDroppedPackets, with("reason", reason), value);
    }

    out.u(F::PortQueueBytes, labels(), p.queue_bytes);
    out.u(F::PortQueuePackets, labels(), p.queue_frames);
    out.u(F::PortDelayLinePackets, labels(), p.in_flight);
    if let Some(ecn) = &p.ecn {
        out.u(F::PortEcnMinThreshold, labels(), ecn.kmin_bytes);
        out.u(F::PortEcnMaxThreshold, labels(), ecn.kmax_bytes);
    }

    let c = &p.congestion;
    out.u(F::PortCongestionCost, labels(), u64::from(c.c_cong));
    for (family, value) in [
        (F::PortCongestionQueueScore, c.q),
        (F::PortCongestionTrendScore, c.t),
        (F::PortCongestionPersistenceScore, c.d),
    ] {
        out.u(family, labels(), u64::from(value));
    }

    let e = &p.emulation;
    out.push(
        F::PortEmulationRate,
        labels(),
        Num::F(e.rate_bps as f64 / 8.0),
    );
    out.push(
        F::PortEmulationDelay,
        labels(),
        Num::F(e.delay_ns as f64 / 1e9),
    );
    out.u(F::PortEmulationBuffer, labels(), e.buffer_bytes);

    if let Some(x) = &p.xsk {
        for (verdict, &value) in &x.xdp {
            out.u(F::PortXdpVerdicts, with("verdict", verdict), value);
        }
        out.u(F::PortXskRxDroppedPackets, labels(), x.rx_dropped);
        out.u(F::PortXskRxRingFull, labels(), x.rx_ring_full);
        out.u(F::PortXskFillRingEmpty, labels(), x.fill_ring_empty);
        out.u(F::PortXskTxInvalidDescriptors, labels(), x.tx_invalid);
        for q in &x.queues {
            let queue = || {
                let mut l = labels();
                l.push(("queue", q.queue.to_string()));
                l
            };
            let mut info = queue();
            info.push(("bind_mode", x.bind_mode.clone()));
            out.u(F::PortXskSocketInfo, info, 1);
            for (direction, value) in [("received", q.rx_frames), ("sent", q.tx_frames)] {
                let mut l = queue();
                l.push(("direction", direction.to_string()));
                out.u(F::PortXskQueuePackets, l, value);
            }
        }
    }
    if let Some(m) = &p.memory_link {
        let dir = |d: &'static str| with("direction", d);
        out.u(F::PortMemoryLinkPackets, dir("sent"), m.frames_sent);
        out.u(F::PortMemoryLinkPackets, dir("received"), m.frames_received);
        out.u(F::PortMemoryLinkBytes, dir("sent"), m.bytes_sent);
        out.u(F::PortMemoryLinkBytes, dir("received"), m.bytes_received);
        out.u(
            F::PortMemoryLinkPeerBuffersEmpty,
            labels(),
            m.peer_buffers_empty,
        );
    }
}

fn collect_costs(out: &mut Series, sw: &str, costs: &[CostsReply]) {
    // Two destinations of one route give the same prefix: its series once.
    let mut seen = HashSet::new();
    for reply in costs {
        if !seen.insert(reply.prefix.as_str()) {
            continue;
        }
        let mut seen_ports = HashSet::new();
        for c in &reply.candidates {
            let port = port_label(&c.ifname, c.port);
            if !seen_ports.insert(port.clone()) {
                continue;
            }
            let labels = || {
                vec![
                    ("switch", sw.to_string()),
                    ("prefix", reply.prefix.clone()),
                    ("port", port.clone()),
                ]
            };
            out.u(F::RoutePathCost, labels(), u64::from(c.c_path));
            out.u(F::RouteCongestionCost, labels(), u64::from(c.c_cong));
            out.u(F::RouteCost, labels(), c.cost);
            out.flag(F::RouteKept, labels(), c.kept);
            out.flag(F::RouteUp, labels(), c.up);
        }
    }
}

fn encode_series(series: &Series, encoder: &mut DescriptorEncoder) -> Result<(), fmt::Error> {
    // An info series has no labels of its own beyond the family's.
    let no_labels: [(&str, &str); 0] = [];
    for (def, rows) in FAMILIES.iter().zip(&series.samples) {
        let (name, unit) = def.name_and_unit();
        let metric_type = match def.kind {
            Kind::Counter => MetricType::Counter,
            Kind::Gauge => MetricType::Gauge,
            Kind::Info => MetricType::Info,
            // prometheus-client has no summary: see encode_summaries.
            Kind::Summary => continue,
        };
        // Families are declared even without series, so the set of names a
        // dashboard can rely on does not depend on what a switch reports.
        let mut metric = encoder.encode_descriptor(name, def.help, unit.as_ref(), metric_type)?;
        for (labels, value) in rows {
            let mut sample = metric.encode_family(labels)?;
            match (def.kind, *value) {
                (Kind::Info, _) => sample.encode_info(&no_labels)?,
                (Kind::Counter, Num::U(v)) => ConstCounter::new(v).encode(sample)?,
                (Kind::Counter, Num::F(v)) => ConstCounter::new(v).encode(sample)?,
                (_, Num::U(v)) => ConstGauge::new(v).encode(sample)?,
                (_, Num::F(v)) => ConstGauge::new(v).encode(sample)?,
            }
        }
    }
    Ok(())
}

/// The summary families in `format`, declared even without series as the
/// others are: `# HELP`, `# TYPE ... summary`, in OpenMetrics `# UNIT`,
/// then per series a sample per quantile (`quantile` label last) and
/// `_count`. The text prometheus-client would write for them, had it the
/// type: the same label escaping, and floats as Rust prints them (`NaN`,
/// `0.000031`), which both formats parse.
fn encode_summaries(series: &Series, format: Format) -> Result<String, fmt::Error> {
    use std::fmt::Write;
    let mut out = String::new();
    for (def, rows) in FAMILIES.iter().zip(&series.summaries) {
        if def.kind != Kind::Summary {
            continue;
        }
        let name = def.name;
        writeln!(out, "# HELP {name} {}", def.help)?;
        writeln!(out, "# TYPE {name} summary")?;
        if let (Format::OpenMetrics, (_, Some(unit))) = (format, def.name_and_unit()) {
            writeln!(out, "# UNIT {name} {}", unit.as_str())?;
        }
        for (labels, q) in rows {
            for &(quantile, value) in &q.values {
                let mut l = labels.clone();
                l.push(("quantile", quantile.to_string()));
                writeln!(out, "{name}{} {value}", label_set(&l))?;
            }
            writeln!(out, "{name}_count{} {}", label_set(labels), q.count)?;
        }
    }
    Ok(out)
}

/// `{k="v",...}` with the values escaped as the exposition formats require
/// (backslash, double quote, line feed); empty without labels.
fn label_set(labels: &[(&str, String)]) -> String {
    if labels.is_empty() {
        return String::new();
    }
    let pairs: Vec<String> = labels
        .iter()
        .map(|(k, v)| {
            let v = v
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('\n', "\\n");
            format!("{k}=\"{v}\"")
        })
        .collect();
    format!("{{{}}}", pairs.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_is_well_formed_and_unique() {
        let mut names = HashSet::new();
        for def in FAMILIES {
            assert!(names.insert(def.name), "{} twice", def.name);
            assert!(def.name.starts_with("lcmp_"), "{}", def.name);
            assert!(
                def.name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
                "{}",
                def.name
            );
            // The encoder appends `_total` and `_info`; an info family is
            // Kind::Info, never a gauge named like one.
            assert!(!def.name.ends_with("_total"), "{}", def.name);
            assert!(!def.name.ends_with("_info"), "{}", def.name);
            if def.name.ends_with("_timestamp_seconds") {
                assert_eq!(def.unit, SECONDS, "{}", def.name);
            }
            assert!(def.help.ends_with('.'), "{}", def.name);
            // encode_summaries writes help texts as they are.
            if def.kind == Kind::Summary {
                assert!(!def.help.contains(['\\', '\n', '"']), "{}", def.name);
            }
            let (base, unit) = def.name_and_unit();
            assert_eq!(unit.is_some(), def.unit.is_some(), "{}", def.name);
            if let Some(unit) = unit {
                assert_eq!(format!("{base}_{}", unit.as_str()), def.name);
            }
        }
    }

    #[test]
    fn the_family_enum_indexes_the_table() {
        assert_eq!(FAMILIES[F::SwitchUp as usize].name, "lcmp_switch_up");
        assert_eq!(
            FAMILIES[F::ControlRefused as usize].name,
            "lcmp_control_refused_connections"
        );
        assert_eq!(F::RotorOther as usize, FAMILIES.len() - 1);
    }

    #[test]
    fn a_failed_scrape_exports_only_its_health() {
        let text = render(&[SwitchScrape::down("s9")]);
        let samples: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        let build = format!(
            "lcmp_build_info{{version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        );
        assert_eq!(samples, [build.as_str(), "lcmp_switch_up{switch=\"s9\"} 0"]);
        assert!(text.ends_with("# EOF\n"));
    }

    fn tor(name: &str, lateness: crate::rotor::Lateness) -> SwitchScrape {
        SwitchScrape::rotor(
            name,
            crate::rotor::RotorStatus {
                role: "tor".into(),
                lateness,
                ..Default::default()
            },
        )
    }

    #[test]
    fn slot_lateness_is_a_summary_in_both_formats() {
        let lateness = crate::rotor::Lateness {
            samples: 7,
            p50_ns: 2_000,
            p99_ns: 31_000,
            max_ns: 40_000,
            last_ns: 5,
        };
        // A switch name needing every escape the formats have.
        let name = "t\\o\"r\n1";
        let scrapes = [tor(name, lateness), tor("tor2", Default::default())];
        let family = |text: &str| -> Vec<String> {
            text.lines()
                .filter(|l| l.contains("lcmp_rotor_slot_lateness_seconds"))
                .map(String::from)
                .collect()
        };
        let help = "# HELP lcmp_rotor_slot_lateness_seconds How late the ToR polled after the reconfiguration of a slot frames waited for ended: quantiles 0.5, 0.99 and 1 (the largest) over the last 1024 such slots, and their count since start.";
        let series = [
            // 2,000 ns = 0.000002 s; 31,000 ns = 0.000031 s; 40,000 ns =
            // 0.00004 s; 7 slots measured.
            r#"lcmp_rotor_slot_lateness_seconds{switch="t\\o\"r\n1",quantile="0.5"} 0.000002"#,
            r#"lcmp_rotor_slot_lateness_seconds{switch="t\\o\"r\n1",quantile="0.99"} 0.000031"#,
            r#"lcmp_rotor_slot_lateness_seconds{switch="t\\o\"r\n1",quantile="1"} 0.00004"#,
            r#"lcmp_rotor_slot_lateness_seconds_count{switch="t\\o\"r\n1"} 7"#,
            // No slot measured yet: no quantile has a value.
            r#"lcmp_rotor_slot_lateness_seconds{switch="tor2",quantile="0.5"} NaN"#,
            r#"lcmp_rotor_slot_lateness_seconds{switch="tor2",quantile="0.99"} NaN"#,
            r#"lcmp_rotor_slot_lateness_seconds{switch="tor2",quantile="1"} NaN"#,
            r#"lcmp_rotor_slot_lateness_seconds_count{switch="tor2"} 0"#,
        ];
        let mut om = vec![
            help,
            "# TYPE lcmp_rotor_slot_lateness_seconds summary",
            "# UNIT lcmp_rotor_slot_lateness_seconds seconds",
        ];
        om.extend(series);
        let om_text = render(&scrapes);
        assert_eq!(family(&om_text), om);
        assert!(om_text.ends_with("\n# EOF\n"));
        // The text format has no UNIT line.
        let mut text = vec![help, "# TYPE lcmp_rotor_slot_lateness_seconds summary"];
        text.extend(series);
        let prom_text = render_as(&scrapes, Format::PrometheusText);
        assert_eq!(family(&prom_text), text);
        assert!(!prom_text.contains("# EOF"));
    }
}

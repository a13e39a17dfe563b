//! The switch's state as one serializable value: the stats file, the
//! `status` reply of the control socket, the Prometheus metrics and the
//! tests all read this shape, so a counter added to the switch appears in
//! every one of them.
//!
//! Counters and drops are maps keyed by name (the switch's counter enums
//! give the names): adding a counter touches the enum only.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Version of the snapshot's shape; bumped when a field changes meaning.
pub const SNAPSHOT_VERSION: u32 = 2;

/// Everything a switch reports about itself at one instant.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// [`SNAPSHOT_VERSION`].
    pub version: u32,
    /// The switch's name in its topology.
    pub switch: String,
    /// Process id of the switch.
    pub pid: u32,
    /// Wall-clock time of the snapshot, ms since the Unix epoch.
    pub unix_time_ms: u64,
    /// Time since the switch started forwarding, ms.
    pub uptime_ms: u64,
    /// The path-selection policy and parameters in force.
    pub policy: PolicyState,
    /// Switch-wide counters by name (`rx_frames`, `tx_bytes`, `polls`, ...).
    pub counters: BTreeMap<String, u64>,
    /// Frames dropped, switch-wide, by reason.
    pub drops: BTreeMap<String, u64>,
    /// The sum of `drops`.
    pub drops_total: u64,
    /// Flow cache and decision counters.
    pub flows: FlowStats,
    /// Per port, in port order.
    pub ports: Vec<PortSnapshot>,
    /// New-flow decisions per route and chosen port since the route table
    /// was installed.
    pub decisions: Vec<DecisionCount>,
    /// The flow log's counters, when `--flow-log` is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_log: Option<FlowLogStats>,
    /// Control-socket counters.
    pub control: ControlStats,
    /// Route-table generation: 1 at start, +1 per table replacement.
    pub table_generation: u64,
}

/// The policy in force.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PolicyState {
    /// Policy name (`lcmp`, `ecmp`, `wcmp`, `ucmp`, `lcmp-rm-alpha`, ...).
    pub name: String,
    /// LCMP weight of C_path (LCMP policies only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alpha: Option<u32>,
    /// LCMP weight of C_cong (LCMP policies only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beta: Option<u32>,
    /// C_cong's weights (w_ql, w_tl, w_dp) of queue level, trend and
    /// persistence (LCMP policies only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion_weights: Option<[u32; 3]>,
    /// ECN marking thresholds as fractions of each port's buffer; `None`:
    /// marking is off (unless `ecn_link_time` is set).
    pub ecn: Option<EcnFractions>,
    /// ECN thresholds as time at each port's link rate; when set, they
    /// apply instead of `ecn`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecn_link_time: Option<EcnLinkTime>,
    /// Where ECN marks are decided (`lcmp-switch lcmp --ecn-mark-at`), with either
    /// kind of thresholds; left out when at enqueue (the default).
    #[serde(default, skip_serializing_if = "EcnMarkAt::is_enqueue")]
    pub ecn_mark_at: EcnMarkAt,
}

/// Where a switch decides its ECN marks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EcnMarkAt {
    /// When a frame is admitted, on the queue in front of it.
    #[default]
    Enqueue,
    /// When a frame departs, on the queue left behind it (the HPCC/LCMP
    /// ns-3 simulator's `SwitchNotifyDequeue`).
    Dequeue,
}

impl EcnMarkAt {
    /// Whether this is the default, [`EcnMarkAt::Enqueue`].
    pub fn is_enqueue(&self) -> bool {
        *self == EcnMarkAt::Enqueue
    }
}

/// ECN marking thresholds as fractions of a port's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct EcnFractions {
    /// Marking starts above this fraction of the buffer.
    pub kmin: f64,
    /// Every ECT frame is marked above this fraction.
    pub kmax: f64,
    /// Marking probability just below `kmax`.
    pub pmax: f64,
}

impl Default for EcnFractions {
    fn default() -> Self {
        EcnFractions {
            kmin: 0.2,
            kmax: 0.8,
            pmax: 0.2,
        }
    }
}

impl EcnFractions {
    /// `KMIN,KMAX,PMAX` as fractions of the buffer, checked with
    /// [`EcnFractions::check`] (the command lines of the switch and of
    /// `lcmp-ctl` both read them this way).
    pub fn parse(text: &str) -> Result<EcnFractions, String> {
        let parts: Vec<&str> = text.split(',').map(str::trim).collect();
        let [kmin, kmax, pmax] = parts.as_slice() else {
            return Err(format!(
                "{text:?} is not KMIN,KMAX,PMAX (three fractions, e.g. 0.2,0.8,0.2)"
            ));
        };
        let num = |name: &str, s: &str| {
            s.parse::<f64>()
                .map_err(|_| format!("{name} {s:?} is not a number"))
        };
        let e = EcnFractions {
            kmin: num("KMIN", kmin)?,
            kmax: num("KMAX", kmax)?,
            pmax: num("PMAX", pmax)?,
        };
        e.check().map_err(|m| {
            format!(
                "{m} (got kmin {}, kmax {}, pmax {})",
                e.kmin, e.kmax, e.pmax
            )
        })?;
        Ok(e)
    }

    /// Why these thresholds cannot be used, if they cannot.
    pub fn check(&self) -> Result<(), String> {
        let ok = 0.0 <= self.kmin
            && self.kmin < self.kmax
            && self.kmax <= 1.0
            && (0.0..=1.0).contains(&self.pmax);
        if ok {
            Ok(())
        } else {
            Err("ECN thresholds need 0 <= kmin < kmax <= 1 and 0 <= pmax <= 1".into())
        }
    }
}

/// ECN thresholds as queueing time at each port's link rate. DCQCN's
/// thresholds grow with the link rate (the LCMP simulator marks from 100 KB
/// to 400 KB at 25 Gbit/s and from 400 KB to 1600 KB at 100 Gbit/s: 32 us
/// to 128 us of transmission at any rate), so a testbed that scales rates
/// keeps them by keeping the time. A scaled-down link would then mark with
/// less than one frame queued; `kmin_floor_bytes` keeps a few frames, and
/// `kmax` is floored in the same ratio so the ramp keeps its shape.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct EcnLinkTime {
    /// Marking starts above this much queueing, nanoseconds at link rate.
    pub kmin_ns: u64,
    /// Every ECT frame is marked above this, nanoseconds at link rate.
    pub kmax_ns: u64,
    /// Marking probability just below `kmax`.
    pub pmax: f64,
    /// `kmin` is at least this many bytes.
    pub kmin_floor_bytes: u64,
}

impl EcnLinkTime {
    /// `KMIN_US,KMAX_US,PMAX,KMIN_FLOOR_BYTES` (e.g. `32,128,0.2,2000`).
    pub fn parse(text: &str) -> Result<EcnLinkTime, String> {
        let parts: Vec<&str> = text.split(',').map(str::trim).collect();
        let [kmin, kmax, pmax, floor] = parts.as_slice() else {
            return Err(format!(
                "{text:?} is not KMIN_US,KMAX_US,PMAX,KMIN_FLOOR_BYTES (e.g. 32,128,0.2,2000)"
            ));
        };
        let num = |name: &str, s: &str| {
            s.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| format!("{name} {s:?} is not a number >= 0"))
        };
        let (kmin_us, kmax_us) = (num("KMIN_US", kmin)?, num("KMAX_US", kmax)?);
        let pmax = num("PMAX", pmax)?;
        let floor = floor
            .parse::<u64>()
            .map_err(|_| format!("KMIN_FLOOR_BYTES {floor:?} is not a whole number of bytes"))?;
        if !(kmin_us < kmax_us && kmax_us <= 1e9 && pmax <= 1.0) {
            return Err(format!(
                "ECN link times need KMIN_US < KMAX_US <= 1e9 and PMAX <= 1 (got {text:?})"
            ));
        }
        Ok(EcnLinkTime {
            kmin_ns: (kmin_us * 1e3).round() as u64,
            kmax_ns: (kmax_us * 1e3).round() as u64,
            pmax,
            kmin_floor_bytes: floor,
        })
    }

    /// `(kmin, kmax)` bytes at `rate_bps` (0: an unshaped port, floors only).
    pub fn thresholds(&self, rate_bps: u64) -> (u64, u64) {
        let at_rate = |ns: u64| (rate_bps as u128 * ns as u128 / 8_000_000_000) as u64;
        let kmin = at_rate(self.kmin_ns).max(self.kmin_floor_bytes);
        let kmax_floor = (self.kmin_floor_bytes as u128 * self.kmax_ns as u128
            / self.kmin_ns.max(1) as u128) as u64;
        let kmax = at_rate(self.kmax_ns).max(kmax_floor).max(kmin + 1);
        (kmin, kmax)
    }
}

/// Flow cache and decision counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowStats {
    /// Flows in the cache now.
    pub cached: u64,
    /// Flows the cache can hold.
    pub capacity: u64,
    /// Packets of cached flows.
    pub hits: u64,
    /// Packets of flows not in the cache (a decision was made).
    pub misses: u64,
    /// New flows cached.
    pub inserts: u64,
    /// Idle flows evicted.
    pub evictions: u64,
    /// Cached flows moved off a port that died or left the flow's route.
    pub failovers: u64,
    /// Decisions not cached because the cache bucket was full.
    pub cache_full_decisions: u64,
    /// Decisions where every kept candidate was congested.
    pub all_congested_decisions: u64,
    /// Packets with no live candidate.
    pub no_live_port: u64,
}

/// One port.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PortSnapshot {
    /// Port index.
    pub index: u32,
    /// Interface name.
    pub name: String,
    /// Forwarding on the port: carrier and administratively up.
    pub up: bool,
    /// Carrier (the kernel's view of the link).
    pub link_up: bool,
    /// Administrative state (`lcmp-ctl link PORT up|down`).
    pub admin_up: bool,
    /// The far end's MAC in use, if known.
    pub peer_mac: Option<String>,
    /// Counters by name (`rx_frames`, `tx_bytes`, `ce_marked`, ...).
    /// `departed_frames`/`departed_bytes` count what left the egress
    /// buffer onto the emulated link, when it left: a link's load (the
    /// `tx_` counters see it one link delay later, when it is released).
    pub counters: BTreeMap<String, u64>,
    /// Frames dropped on this port by reason: ingress drops (parse, no
    /// route) count on the port the frame came in on, egress drops (queue
    /// full, emulation overflow, port down) on the port it was to leave by.
    pub drops: BTreeMap<String, u64>,
    /// Bytes in the egress buffer.
    pub queue_bytes: u64,
    /// Frames in the egress buffer.
    pub queue_frames: u64,
    /// Frames in the delay line (sent by the shaper, not yet released).
    pub in_flight: u64,
    /// Congestion monitor state.
    pub congestion: Congestion,
    /// The link the port emulates.
    pub emulation: Emulation,
    /// ECN marking thresholds in bytes; `None`: marking off.
    pub ecn: Option<EcnThresholds>,
    /// What the port is: `af_xdp` (a socket on an interface), `memory`
    /// (a memory link to a switch of the same process) or empty (an
    /// in-memory test port).
    #[serde(default)]
    pub kind: String,
    /// AF_XDP socket counters (daemon over AF_XDP only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xsk: Option<XskStats>,
    /// Memory-link counters (memory links only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_link: Option<MemoryLinkStats>,
}

/// Congestion monitor state of a port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Congestion {
    /// Queue-level score.
    pub q: u8,
    /// Trend score.
    pub t: u8,
    /// Persistence score.
    pub d: u8,
    /// The fused congestion cost C_cong.
    pub c_cong: u8,
}

/// How a port's link is emulated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EmulationMode {
    /// The switch's own shaper and delay line.
    #[default]
    Switch,
    /// Line rate, no emulation (`--no-emulation` or rate 0).
    None,
    /// The kernel's netem qdisc on the interface (set up by the agent where
    /// the kernel has `sch_netem` and the link carries kernel-forwarded
    /// traffic); the switch itself forwards at line rate.
    Netem,
}

/// The link a port emulates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Emulation {
    /// Who emulates it.
    pub mode: EmulationMode,
    /// Link rate, bit/s (0: line rate).
    pub rate_bps: u64,
    /// One-way propagation delay, ns.
    pub delay_ns: u64,
    /// Egress buffer, bytes.
    pub buffer_bytes: u64,
}

/// ECN thresholds of a port, bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EcnThresholds {
    /// Marking starts above this queue.
    pub kmin_bytes: u64,
    /// Every ECT frame is marked above this queue.
    pub kmax_bytes: u64,
    /// Marking probability just below `kmax_bytes`.
    pub pmax: f64,
}

/// AF_XDP socket counters of a port.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct XskStats {
    /// The XDP attach mode in use.
    pub xdp_mode: String,
    /// How the AF_XDP socket moves frames, as the kernel reports after
    /// bind: `copy` or `zero-copy` (empty: not known).
    #[serde(default)]
    pub bind_mode: String,
    /// Frames the kernel dropped for lack of RX ring space or fill buffers.
    pub rx_dropped: u64,
    /// RX ring full events.
    pub rx_ring_full: u64,
    /// Fill ring empty events.
    pub fill_ring_empty: u64,
    /// Invalid TX descriptors.
    pub tx_invalid: u64,
    /// The XDP program's verdicts by name (redirected, passed, ...).
    pub xdp: BTreeMap<String, u64>,
    /// Per socket, one for each RX queue bound (the port-level counters
    /// above are their sums). The first queue's socket also transmits.
    #[serde(default)]
    pub queues: Vec<XskQueueStats>,
}

/// One AF_XDP socket of a port: an RX queue of its interface.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct XskQueueStats {
    /// The interface's RX queue id.
    pub queue: u32,
    /// Frames the switch received on this queue.
    pub rx_frames: u64,
    /// Frames the switch queued for transmission on this socket.
    pub tx_frames: u64,
    /// Frames the kernel dropped for lack of RX ring space or fill buffers.
    pub rx_dropped: u64,
    /// RX ring full events.
    pub rx_ring_full: u64,
    /// Fill ring empty events.
    pub fill_ring_empty: u64,
    /// Invalid TX descriptors.
    pub tx_invalid: u64,
}

/// One end of a memory link between two switches of one process.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryLinkStats {
    /// The far end: `switch/port`.
    pub peer: String,
    /// How frames cross: `descriptor` (no copy) or `copy`.
    pub transfer: String,
    /// The link's carrier (both ends share it).
    pub carrier: bool,
    /// Frames handed to the far end.
    pub frames_sent: u64,
    /// Their bytes.
    pub bytes_sent: u64,
    /// Frames taken from the far end.
    pub frames_received: u64,
    /// Their bytes.
    pub bytes_received: u64,
    /// Sends cut short because the far end had lent no free buffer (its
    /// pool ran dry): the rest waited in this port's delay line.
    pub peer_buffers_empty: u64,
}

/// New-flow decisions of one route towards one port.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecisionCount {
    /// The route's prefix.
    pub prefix: String,
    /// Egress port index.
    pub port: u32,
    /// Egress interface name.
    pub ifname: String,
    /// Decisions (new flows and failovers) that chose this port.
    pub count: u64,
}

/// Flow-log counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowLogStats {
    /// Records written to the file.
    pub written: u64,
    /// Records dropped because the buffer was full at the decision.
    pub dropped: u64,
    /// Records lost to a write error.
    pub write_failed: u64,
    /// Records buffered, not written yet.
    pub buffered: u64,
    /// Buffer capacity, records.
    pub capacity: u64,
}

/// Control-socket counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControlStats {
    /// Requests answered.
    pub requests: u64,
    /// Requests answered with an error (malformed, refused, invalid).
    pub errors: u64,
    /// Connections refused (not root, or too many clients).
    pub refused: u64,
}

impl Snapshot {
    /// A port by interface name or index (as text).
    pub fn port(&self, name_or_index: &str) -> Option<&PortSnapshot> {
        self.ports
            .iter()
            .find(|p| p.name == name_or_index)
            .or_else(|| {
                name_or_index
                    .parse::<u32>()
                    .ok()
                    .and_then(|i| self.ports.iter().find(|p| p.index == i))
            })
    }

    /// A switch-wide counter, 0 if the switch does not have it.
    pub fn counter(&self, name: &str) -> u64 {
        self.counters.get(name).copied().unwrap_or(0)
    }

    /// A switch-wide drop counter, 0 if absent.
    pub fn dropped(&self, reason: &str) -> u64 {
        self.drops.get(reason).copied().unwrap_or(0)
    }
}

impl PortSnapshot {
    /// A port counter, 0 if absent.
    pub fn counter(&self, name: &str) -> u64 {
        self.counters.get(name).copied().unwrap_or(0)
    }

    /// A port drop counter, 0 if absent.
    pub fn dropped(&self, reason: &str) -> u64 {
        self.drops.get(reason).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_time_thresholds_follow_the_rate_above_their_floors() {
        let e = EcnLinkTime::parse("32,128,0.2,2000").unwrap();
        assert_eq!(
            (e.kmin_ns, e.kmax_ns, e.kmin_floor_bytes),
            (32_000, 128_000, 2000)
        );
        // The simulator's 25G and 100G thresholds: 100/400 KB and 400/1600 KB.
        assert_eq!(e.thresholds(25_000_000_000), (100_000, 400_000));
        assert_eq!(e.thresholds(100_000_000_000), (400_000, 1_600_000));
        // 200 Mbit/s: 800/3200 bytes at rate, floored to 2000 and 2000 x 4.
        assert_eq!(e.thresholds(200_000_000), (2000, 8000));
        // 1 Gbit/s: kmin 4000 at rate, kmax 16000 at rate.
        assert_eq!(e.thresholds(1_000_000_000), (4000, 16000));
        // An unshaped port: the floors.
        assert_eq!(e.thresholds(0), (2000, 8000));
    }

    #[test]
    fn link_time_parse_errors_name_the_field() {
        for (text, needle) in [
            ("32,128,0.2", "KMIN_US,KMAX_US,PMAX,KMIN_FLOOR_BYTES"),
            ("x,128,0.2,2000", "KMIN_US \"x\""),
            ("32,128,0.2,1.5", "KMIN_FLOOR_BYTES"),
            ("128,32,0.2,2000", "KMIN_US < KMAX_US"),
            ("32,128,1.5,2000", "PMAX <= 1"),
        ] {
            let err = EcnLinkTime::parse(text).unwrap_err();
            assert!(err.contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn ecn_mark_at_is_reported_only_when_at_dequeue() {
        let mut p = PolicyState::default();
        let text = serde_json::to_string(&p).unwrap();
        assert!(!text.contains("ecn_mark_at"), "{text}");
        // Snapshots of switches from before the setting read as enqueue.
        assert_eq!(serde_json::from_str::<PolicyState>(&text).unwrap(), p);
        p.ecn_mark_at = EcnMarkAt::Dequeue;
        let text = serde_json::to_string(&p).unwrap();
        assert!(text.contains(r#""ecn_mark_at":"dequeue""#), "{text}");
        assert_eq!(serde_json::from_str::<PolicyState>(&text).unwrap(), p);
    }
}

//! The state of a rotor-network switch (a rotor or a rotor-aware ToR):
//! one serializable type for its stats file, the `rotor` control verb,
//! `lcmp-ctl rotor` and the metrics.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A rotor-network switch's state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RotorStatus {
    /// Switch name (`tor3`, `rotor1`).
    pub name: String,
    /// `tor` or `rotor`.
    pub role: String,
    /// The ToR's or rotor's index.
    pub index: u32,
    /// `lcmp-switch` version.
    pub version: String,
    /// Process id.
    pub pid: u32,
    /// Since start, ns.
    pub uptime_ns: u64,
    /// Wall-clock time of the report, ms since the Unix epoch.
    pub unix_time_ms: u64,
    /// The emulated graph: `de-bruijn`, `complete`, `static` (not `kind`:
    /// that names the reply's type on the wire).
    pub graph: String,
    /// The ToRs' routing.
    pub routing: String,
    /// ToRs in the network.
    pub tors: u32,
    /// Rotors (uplinks per ToR).
    pub rotors: u32,
    /// Slot length Delta, ns.
    pub slot_ns: u64,
    /// Reconfiguration Delta_r, ns.
    pub reconfig_ns: u64,
    /// Start of slot 0, `CLOCK_REALTIME` ns; `None` until known (the
    /// switch forwards nothing before).
    pub epoch_unix_ns: Option<u64>,
    /// Where the epoch came from: `file`, `command line`, `agent`.
    pub epoch_source: Option<String>,
    /// The slot now (since the epoch).
    pub slot: u64,
    /// Slots this switch has seen begin (one wake-up each).
    pub slots_seen: u64,
    /// How late the switch woke after each slot's reconfiguration ended,
    /// over the most recent slots.
    pub lateness: Lateness,
    /// The matchings this switch follows: a rotor's own, or every rotor's
    /// for a ToR (`schedule[r][k]`: rotor r's k-th matching).
    pub schedule: Vec<Vec<Vec<u32>>>,
    /// Where each port (rotor) or uplink (ToR) is connected in the
    /// current slot; `None`: reconfiguring or no circuit.
    pub circuits: Vec<Option<u32>>,
    /// Per port.
    pub ports: Vec<RotorPort>,
    /// Drops by reason (every reason listed, zeros included).
    pub drops: BTreeMap<String, u64>,
    /// Other counters by name.
    pub counters: BTreeMap<String, u64>,
    /// ToR only: the per-next-hop queues.
    pub queues: Vec<NextHopQueue>,
    /// ToR only: its buffer, bytes (shared by the queues).
    pub buffer_bytes: u64,
    /// ToR only: bytes queued now (next-hop queues and, when trimming,
    /// the host downlinks' queues).
    pub queued_bytes: u64,
}

/// Slot lateness over the most recent slots.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Lateness {
    /// Slots measured.
    pub samples: u64,
    /// Median, ns.
    pub p50_ns: u64,
    /// 99th percentile, ns.
    pub p99_ns: u64,
    /// Largest, ns.
    pub max_ns: u64,
    /// The most recent slot's, ns.
    pub last_ns: u64,
}

/// One port of a rotor-network switch.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RotorPort {
    /// Interface.
    pub name: String,
    /// `uplink`, `host` (ToR) or `tor` (rotor).
    pub kind: String,
    /// Frames received.
    pub rx_frames: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Frames sent.
    pub tx_frames: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Carrier.
    pub link_up: bool,
}

/// A ToR's queue towards one next-hop ToR.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NextHopQueue {
    /// The next-hop ToR.
    pub next_hop: u32,
    /// Frames waiting.
    pub frames: u64,
    /// Bytes waiting.
    pub bytes: u64,
}

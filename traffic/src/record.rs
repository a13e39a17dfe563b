//! One row of `flows.csv`: what the client knows of one flow.
//!
//! This is the contract between the generator (which writes it) and the
//! experiment analysis in `lcmp-testbed` (which reads it); both use this
//! type, so the CSV header is the field list below in order.

use serde::{Deserialize, Serialize};

/// How a flow ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FlowStatus {
    /// Every byte was acknowledged by the receiver; `fct_ns` is set.
    Ok,
    /// The connection failed (refused, reset, no local port, ...); `error`
    /// says how.
    Failed,
    /// Still running when the drain deadline passed.
    Unfinished,
}

/// One flow. FCT is measured at the sender from just before `connect()` to
/// the moment it reads the receiver's one-byte acknowledgement, sent after
/// the receiver has read the flow's last byte: handshake (1 RTT) + transfer
/// + the last byte's trip and the acknowledgement's trip back (1 RTT).
///
/// A flow that found all `--max-concurrent` slots taken is timed from its
/// arrival (`start_ns`) instead, so its wait for a slot counts.
///
/// Under `--transport rocev2` (no handshake): FCT runs from the arrival
/// (when the flow's queue pair may send) to the ACK of its last packet;
/// `src` is `senderIP:udp_sport` of the queue pair, `dst` the receiver's
/// `IP:4791`, `min_rtt_us` the smallest data -> ACK time of the flow's
/// timed packets, `size_bytes` the size after `--size-scale`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowRecord {
    /// Unique within a run (clients get disjoint id ranges).
    pub id: u64,
    /// Name of the sending host (as given to the client).
    pub sender: String,
    /// Name of the receiving host.
    pub receiver: String,
    /// Local socket address of the flow (`10.1.0.2:43512`), empty if the
    /// connection never got one.
    pub src: String,
    /// Server address (`10.8.0.2:5001`).
    pub dst: String,
    /// Payload bytes sent.
    pub size_bytes: u64,
    /// Arrival time: nanoseconds since the client's start of arrivals.
    pub start_ns: u64,
    /// Flow completion time, nanoseconds; `None` unless `status` is `ok`.
    pub fct_ns: Option<u64>,
    /// The connection's minimum RTT seen by the kernel (`tcpi_min_rtt`),
    /// microseconds; identifies the path where paths differ in delay.
    pub min_rtt_us: Option<u64>,
    /// How the flow ended.
    pub status: FlowStatus,
    /// Why it failed; empty otherwise.
    pub error: String,
    /// Started during the warm-up (excluded from results).
    pub warmup: bool,
    /// The source switch's choice for the flow (the neighbour its first
    /// hop leads to), where it logged its decision: `lcmp-testbed` fills it
    /// in from the source switch's `--flow-log`; empty from the generator.
    #[serde(default)]
    pub path: Option<String>,
    /// The switches the flow's data crossed, sender's first
    /// (`dc1>dc3>dc6>dc13`), as `lcmp-testbed` reconstructs them from every
    /// switch's `--flow-log`; empty from the generator and where a switch
    /// on the way logged no decision for the flow.
    #[serde(default)]
    pub switch_path: Option<String>,
    /// The same for the flow's acknowledgements, receiver's switch first.
    #[serde(default)]
    pub reverse_switch_path: Option<String>,
}

impl FlowRecord {
    /// The record of a flow that has just arrived (status `unfinished`
    /// until it ends): the one place every sender (the TCP and RoCEv2
    /// socket clients, the engine's host) builds it.
    #[allow(clippy::too_many_arguments)]
    pub fn arrived(
        id: u64,
        sender: &str,
        receiver: &str,
        src: String,
        dst: String,
        size_bytes: u64,
        start_ns: u64,
        warmup: bool,
    ) -> FlowRecord {
        FlowRecord {
            id,
            sender: sender.to_string(),
            receiver: receiver.to_string(),
            src,
            dst,
            size_bytes,
            start_ns,
            fct_ns: None,
            min_rtt_us: None,
            status: FlowStatus::Unfinished,
            error: String::new(),
            warmup,
            path: None,
            switch_path: None,
            reverse_switch_path: None,
        }
    }
}

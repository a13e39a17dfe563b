//! NDP (Handley et al., SIGCOMM 2017), the trimming transport of the rotor
//! networks, as the Mars paper's simulator (htsim) runs it: socket-free
//! state machines for the sender ([`sender`]) and the receiver
//! ([`receiver`]); the host that joins them to frames on the virtual clock
//! is `lcmp_engine::ndp_host`, the wire format `lcmp_wire::ndp` (UDP port
//! 7247, a 16-byte header: kind data/ack/nack/pull, flags
//! trimmed/last/retransmission, flow id, sequence number, value). The same
//! machines run over the kernel's UDP sockets, for namespace hosts, in
//! `lcmp-traffic client|server --transport ndp`: [`socket`] (the sockets,
//! the datagrams, the options), [`client`] (the sender's loop, which with
//! `--serve` also receives) and [`server`] (the receiver's, its
//! per-packet work [`server::Receiving`] shared with the client's).
//!
//! In short:
//!
//! - The sender starts a flow with an initial window of
//!   [`NdpParams::initial_window`] packets at line rate (the NIC paces), then
//!   sends one packet per pull; the receiver's pull counter says how many
//!   pulls it has released for the flow, so a lost or late pull is made up
//!   by the next one. A NACK (the packet reached the receiver trimmed to its
//!   headers) queues the packet for retransmission, sent before new data on
//!   the next pull; an ACK frees it. A retransmission timeout
//!   ([`NdpParams::min_rto_ns`]) resends what stayed unanswered. The flow
//!   completes when every packet is acked.
//! - The receiver answers every data packet at once (ACK if whole, NACK if
//!   trimmed) and queues one pull for it; one pacer per host releases the
//!   pulls of all its flows round-robin, one per MTU time of its link, so
//!   that what they pull keeps the host's downlink exactly busy.
//!
//! What the sender and receiver see of a packet is its header's fields;
//! parsing and framing are the host's ([`socket`] here, over
//! `lcmp_wire::ndp`). Times are nanoseconds of the caller's clock; nothing here
//! reads a clock, and nothing is allocated per packet (per flow: its
//! packet states).

pub mod client;
pub mod receiver;
pub mod sender;
pub mod server;
pub mod socket;

use lcmp_topology::Scaling;

/// Bytes a frame carries besides its payload: Ethernet (14), IPv4 without
/// options (20), UDP (8) and the NDP header (16). A trimmed data packet and
/// every control packet is this long. (`lcmp_wire::ndp::HEADERS_LEN`; the
/// engine's host checks that the two agree.)
pub const FRAME_OVERHEAD: usize = 14 + 20 + 8 + 16;

/// htsim's packets are 1500 bytes with their headers; here too: a full
/// data frame of [`DEFAULT_PAYLOAD`] bytes is 1500 bytes on the wire
/// (Ethernet header included, as every host of the engine counts it).
pub const DEFAULT_PAYLOAD: u32 = 1500 - FRAME_OVERHEAD as u32;

/// The initial window, packets: opera-sim's runs of its rotor networks
/// (`-cwnd 20 -q 8`: 8-packet queues, as the Mars paper's), which the
/// Mars paper's simulations build on. (htsim's own default is 15 and the
/// NDP paper's permutation example 23; NDP is not sensitive to it.)
pub const DEFAULT_INITIAL_WINDOW: u32 = 20;

/// htsim's minimum retransmission timeout as the Mars paper sets it, 1 ms.
pub const DEFAULT_MIN_RTO_NS: u64 = 1_000_000;

/// The most packets a flow may have: the receiver keeps a bit per packet,
/// and a header claiming more is refused rather than allocated for
/// (2^26 packets: 90 GB at the default payload).
pub const MAX_PACKETS: u32 = 1 << 26;

/// The transport's constants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NdpParams {
    /// Packets a flow sends before its first pull.
    pub initial_window: u32,
    /// Payload bytes of a full packet (a flow's last packet carries the
    /// rest).
    pub payload: u32,
    /// Retransmission timeout, ns (htsim's `minRTO`; see [`sender`]).
    pub min_rto_ns: u64,
}

impl Default for NdpParams {
    fn default() -> Self {
        NdpParams {
            initial_window: DEFAULT_INITIAL_WINDOW,
            payload: DEFAULT_PAYLOAD,
            min_rto_ns: DEFAULT_MIN_RTO_NS,
        }
    }
}

impl NdpParams {
    /// The parameters as an emulation scaled by `s` runs them: the timeout
    /// stretched by its time dilation (at least 1 ns). Window and payload
    /// are packets and bytes, which scaling leaves alone; the pull pacing
    /// follows the (emulated) link rate the receiver is given.
    pub fn emulated(mut self, s: &Scaling) -> NdpParams {
        self.min_rto_ns = s.duration_ns(self.min_rto_ns).max(1);
        self
    }

    /// One line naming the first unusable parameter.
    pub fn validate(&self) -> Result<(), String> {
        if self.initial_window == 0 {
            return Err("the NDP initial window must be at least 1 packet".into());
        }
        if self.payload == 0 {
            return Err("the NDP payload must be at least 1 byte".into());
        }
        if self.min_rto_ns == 0 {
            return Err("the NDP retransmission timeout must be > 0".into());
        }
        Ok(())
    }

    /// Bytes of a full data frame ([`FRAME_OVERHEAD`] + the payload): the
    /// MTU-sized packet whose time on the link spaces the pulls.
    pub fn full_frame_bytes(&self) -> u64 {
        FRAME_OVERHEAD as u64 + u64::from(self.payload)
    }

    /// Packets of a flow of `size` bytes (at least 1).
    pub fn packets_of(&self, size: u64) -> u64 {
        size.div_ceil(u64::from(self.payload.max(1))).max(1)
    }
}

/// The wire's flow id of flow `id` (its low 32 bits: ids are unique in a
/// run, so the ids of one sender's flows in progress are too).
pub fn flow_id_of(id: u64) -> u32 {
    id as u32
}

/// The UDP source port of flow `flow`: its entropy for per-packet spraying
/// and hashing (the RoCEv2 QPs' fold, [`crate::rocev2::udp_sport_of`], of
/// the flow id), in 49152..=65535.
pub fn udp_sport_of(flow: u32) -> u16 {
    crate::rocev2::udp_sport_of(flow)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_scaling() {
        let p = NdpParams::default();
        // 1500 - 58 = 1442 payload bytes; the full frame is 1500.
        assert_eq!(FRAME_OVERHEAD, 58);
        assert_eq!((p.payload, p.full_frame_bytes()), (1442, 1500));
        assert_eq!((p.initial_window, p.min_rto_ns), (20, 1_000_000));
        // 1442 bytes: 1 packet; 1443: 2; 0 bytes still one packet.
        assert_eq!(
            (p.packets_of(1442), p.packets_of(1443), p.packets_of(0)),
            (1, 2, 1)
        );
        let slow = Scaling {
            time: 10.0,
            ..Scaling::rates(1000.0)
        };
        let e = p.emulated(&slow);
        assert_eq!(e.min_rto_ns, 10_000_000);
        assert_eq!((e.payload, e.initial_window), (1442, 20));
        assert_eq!(p.emulated(&Scaling::NONE), p);
        assert!(NdpParams {
            initial_window: 0,
            ..p
        }
        .validate()
        .unwrap_err()
        .contains("window"));
        assert!(p.validate().is_ok());
        assert_eq!(flow_id_of((7 << 32) | 9), 9);
        assert!(udp_sport_of(9) >= 49152);
    }
}

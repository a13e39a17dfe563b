//! The RoCEv2 message transport: every flow is one RC RDMA WRITE on its
//! own queue pair, sent as real RoCEv2 packets (UDP port 4791) paced by
//! its congestion control (DCQCN by default; HPCC, TIMELY, DCTCP: [`cc`]),
//! made reliable by go-back-N, acknowledged per packet by the receiver
//! with the ECN echo (or a CNP) and the echo of the packet's INT or
//! timestamp block, as the LCMP paper's simulator models RDMA hosts
//! (`/work/shared/docs/dcqcn.md`).
//!
//! Modules: [`wire`] (framing, ICRC), [`dcqcn`] (the reaction point),
//! [`hpcc`], [`timely`], [`dctcp`] (the simulator's other congestion
//! controls) and [`cc`] (the four by name, behind one match), [`gbn`]
//! (go-back-N sender and receiver), [`sender`] (the host's queue pairs
//! and NIC, no sockets), [`pattern`] (the payload bytes), [`net`]
//! (raw and UDP sockets, waiting), [`client`] and [`server`] (the socket
//! loops of `lcmp-traffic client|server --transport rocev2`).

pub mod cc;
pub mod client;
pub mod dcqcn;
pub mod dctcp;
pub mod gbn;
pub mod hpcc;
pub mod net;
pub mod pattern;
pub mod sender;
pub mod server;
pub mod timely;
pub mod wire;

/// The queue pair number of flow `id`: 24 bits, never the special QPs 0
/// and 1. Flow ids are unique in a run, so QP numbers are too (until ids
/// differ by a multiple of 2^24 - 2).
pub fn qpn_of(id: u64) -> u32 {
    (id % u64::from(wire::PSN_MASK - 1)) as u32 + 2
}

/// The UDP source port of a QP, RoCE's entropy: Linux's flow label of the
/// QP pair (here the same number at both ends), folded into 14 bits and
/// put in 49152..=65535.
pub fn udp_sport_of(qpn: u32) -> u16 {
    let mut v = u64::from(qpn) * u64::from(qpn);
    v ^= v >> 20;
    v ^= v >> 40;
    let fl = (v & 0xf_ffff) as u32;
    let low = (fl & 0x3fff) ^ (fl >> 14);
    0xc000 | (low & 0x3fff) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qp_numbers_and_ports() {
        assert_eq!(qpn_of(0), 2);
        assert_eq!(qpn_of(1), 3);
        assert_eq!(qpn_of(u64::from(wire::PSN_MASK) - 2), wire::PSN_MASK);
        assert_eq!(qpn_of(u64::from(wire::PSN_MASK) - 1), 2);
        // qpn 3: v = 9, fl = 9, port 0xc009.
        assert_eq!(udp_sport_of(3), 0xc009);
        // qpn 200: v = 40000 = 0x9c40; low = 0x1c40 ^ (0x9c40 >> 14 = 2) = 0x1c42.
        assert_eq!(udp_sport_of(200), 0xc000 | 0x1c42);
        let ports: std::collections::HashSet<u16> = (2..5002).map(udp_sport_of).collect();
        assert!(ports.len() > 4000, "{}", ports.len());
        assert!(ports.iter().all(|&p| p >= 49152));
    }
}

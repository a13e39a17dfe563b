//! The 5-tuple that identifies a flow.

use core::net::IpAddr;

/// Addresses, protocol and ports of a packet: plain data, cheap to copy,
/// hash and compare, so the switch can convert it into whatever key its flow
/// table uses.
///
/// Ports are the TCP/UDP ports; for ICMP and ICMPv6 echo requests and
/// replies the source port is the echo identifier (so ping sessions are
/// separate flows); for every other protocol (other ICMP, GRE, ESP, ...)
/// they are 0 and the flow is identified by addresses and protocol alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FlowTuple {
    /// An IPv4 flow.
    V4 {
        /// Source address.
        src: [u8; 4],
        /// Destination address.
        dst: [u8; 4],
        /// IP protocol number.
        proto: u8,
        /// Source port (0 if the protocol has none).
        sport: u16,
        /// Destination port (0 if the protocol has none).
        dport: u16,
    },
    /// An IPv6 flow.
    V6 {
        /// Source address.
        src: [u8; 16],
        /// Destination address.
        dst: [u8; 16],
        /// Upper-layer protocol (the IPv6 next header; never an extension
        /// header, as those are not parsed).
        proto: u8,
        /// Source port (0 if the protocol has none).
        sport: u16,
        /// Destination port (0 if the protocol has none).
        dport: u16,
    },
}

impl FlowTuple {
    /// IP protocol number.
    #[inline]
    pub const fn proto(&self) -> u8 {
        match *self {
            FlowTuple::V4 { proto, .. } | FlowTuple::V6 { proto, .. } => proto,
        }
    }

    /// Source port (0 for protocols without ports).
    #[inline]
    pub const fn sport(&self) -> u16 {
        match *self {
            FlowTuple::V4 { sport, .. } | FlowTuple::V6 { sport, .. } => sport,
        }
    }

    /// Destination port (0 for protocols without ports).
    #[inline]
    pub const fn dport(&self) -> u16 {
        match *self {
            FlowTuple::V4 { dport, .. } | FlowTuple::V6 { dport, .. } => dport,
        }
    }

    /// Source address.
    #[inline]
    pub fn src_ip(&self) -> IpAddr {
        match *self {
            FlowTuple::V4 { src, .. } => IpAddr::from(src),
            FlowTuple::V6 { src, .. } => IpAddr::from(src),
        }
    }

    /// Destination address.
    #[inline]
    pub fn dst_ip(&self) -> IpAddr {
        match *self {
            FlowTuple::V4 { dst, .. } => IpAddr::from(dst),
            FlowTuple::V6 { dst, .. } => IpAddr::from(dst),
        }
    }
}

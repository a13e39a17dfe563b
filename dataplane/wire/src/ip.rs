//! IP-level constants and small types shared by IPv4 and IPv6.

/// IP protocol / IPv6 next-header number of ICMP.
pub const PROTO_ICMP: u8 = 1;
/// IP protocol / IPv6 next-header number of TCP.
pub const PROTO_TCP: u8 = 6;
/// IP protocol / IPv6 next-header number of UDP.
pub const PROTO_UDP: u8 = 17;
/// IPv6 next-header number of ICMPv6.
pub const PROTO_ICMPV6: u8 = 58;

/// IPv6 next-header number of the Fragment extension header.
pub const IPV6_NH_FRAGMENT: u8 = 44;

/// Length of an IPv4 header without options.
pub const IPV4_HEADER_LEN: usize = 20;
/// Length of the IPv6 fixed header.
pub const IPV6_HEADER_LEN: usize = 40;

/// Whether IPv6 next-header value `nh` is an extension header (IANA "IPv6
/// Extension Header Types": Hop-by-Hop, Routing, Fragment, ESP, AH,
/// Destination Options, Mobility, HIP, Shim6 and the two experimental
/// values). ESP and AH are included: the ports behind them are not readable.
#[inline]
pub const fn is_ipv6_extension_header(nh: u8) -> bool {
    matches!(nh, 0 | 43 | 44 | 50 | 51 | 60 | 135 | 139 | 140 | 253 | 254)
}

/// IP version of a parsed frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum L3 {
    /// IPv4 (EtherType 0x0800).
    V4,
    /// IPv6 (EtherType 0x86DD).
    V6,
}

/// The 2-bit ECN field (RFC 3168) of the IPv4 TOS / IPv6 traffic class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Ecn {
    /// 0b00: Not ECN-Capable Transport.
    NotEct = 0,
    /// 0b01: ECN-Capable Transport (1) (L4S).
    Ect1 = 1,
    /// 0b10: ECN-Capable Transport (0).
    Ect0 = 2,
    /// 0b11: Congestion Experienced.
    Ce = 3,
}

impl Ecn {
    /// The ECN codepoint in the low two bits of `bits` (other bits ignored).
    #[inline]
    pub const fn from_bits(bits: u8) -> Self {
        match bits & 0b11 {
            0 => Ecn::NotEct,
            1 => Ecn::Ect1,
            2 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }

    /// The 2-bit codepoint.
    #[inline]
    pub const fn bits(self) -> u8 {
        self as u8
    }

    /// Whether the sender is ECN-capable (ECT(0), ECT(1) or already CE), i.e.
    /// whether congestion may be signalled by marking instead of dropping.
    #[inline]
    pub const fn is_ecn_capable(self) -> bool {
        !matches!(self, Ecn::NotEct)
    }
}

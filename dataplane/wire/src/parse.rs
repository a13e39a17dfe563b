//! The checked entry point for untrusted frames.

use core::fmt;

use crate::checksum::ones_complement_sum;
use crate::ethernet::{self, ETHERTYPE_IPV4, ETHERTYPE_IPV6};
use crate::flow::FlowTuple;
use crate::ip::{self, Ecn, IPV4_HEADER_LEN, IPV6_HEADER_LEN, L3};
use crate::transport::{self, Bth, ROCEV2_UDP_PORT};

/// Why a frame is not forwarded by the fast path.
///
/// Every variant is something the switch counts; [`ParseError::is_malformed`]
/// separates broken frames from well-formed ones the fast path does not
/// handle. Variants are listed in [`ParseError::ALL`] with a stable
/// [`index`](ParseError::index) for counter arrays and a metric label from
/// [`as_str`](ParseError::as_str).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParseError {
    /// The frame ends inside a header that must be read: Ethernet, the
    /// fixed IPv4/IPv6 header, IPv4 options, or the fixed TCP (20 bytes) or
    /// UDP (8 bytes) header within the IP payload.
    Truncated,
    /// EtherType is neither IPv4, IPv6 nor a VLAN tag: ARP, LLDP, 802.3
    /// length frames, ... (the kernel's business, not the switch's).
    NotIp,
    /// An 802.1Q / 802.1ad (or legacy 0x9100) tagged frame: the switch does
    /// not route VLANs.
    Vlan,
    /// IPv4 header inconsistent: version not 4, IHL < 5, total length less
    /// than the header or more than the bytes after the Ethernet header.
    BadIpv4Header,
    /// IPv4 header checksum does not verify.
    Ipv4Checksum,
    /// IPv4 header with options (IHL > 5): valid, but not for the fast path.
    Ipv4Options,
    /// A fragment: IPv4 with MF set or a nonzero fragment offset, or IPv6
    /// whose next header is the Fragment header. Fragments carry no (or not
    /// consistently) ports, so they cannot be given a flow.
    Fragment,
    /// IPv6 header inconsistent: version not 6, or payload length more than
    /// the bytes after the fixed header.
    BadIpv6Header,
    /// IPv6 next header is an extension header other than Fragment
    /// (Hop-by-Hop, Routing, Destination Options, AH, ESP, ...): not walked
    /// by the fast path.
    Ipv6ExtensionHeader,
    /// IPv4 TTL or IPv6 hop limit is 0 or 1: must not be forwarded.
    TtlExpired,
    /// TCP data offset < 5 or past the IP payload, or UDP length < 8 or past
    /// the IP payload.
    BadL4Header,
}

impl ParseError {
    /// Number of variants.
    pub const COUNT: usize = 11;

    /// Every variant, in [`index`](ParseError::index) order.
    pub const ALL: [ParseError; ParseError::COUNT] = [
        ParseError::Truncated,
        ParseError::NotIp,
        ParseError::Vlan,
        ParseError::BadIpv4Header,
        ParseError::Ipv4Checksum,
        ParseError::Ipv4Options,
        ParseError::Fragment,
        ParseError::BadIpv6Header,
        ParseError::Ipv6ExtensionHeader,
        ParseError::TtlExpired,
        ParseError::BadL4Header,
    ];

    /// A dense index in `0..COUNT`, for per-reason counter arrays.
    #[inline]
    pub const fn index(self) -> usize {
        self as usize
    }

    /// A snake_case name, suitable as a metric label value.
    pub const fn as_str(self) -> &'static str {
        match self {
            ParseError::Truncated => "truncated",
            ParseError::NotIp => "not_ip",
            ParseError::Vlan => "vlan",
            ParseError::BadIpv4Header => "bad_ipv4_header",
            ParseError::Ipv4Checksum => "ipv4_checksum",
            ParseError::Ipv4Options => "ipv4_options",
            ParseError::Fragment => "fragment",
            ParseError::BadIpv6Header => "bad_ipv6_header",
            ParseError::Ipv6ExtensionHeader => "ipv6_extension_header",
            ParseError::TtlExpired => "ttl_expired",
            ParseError::BadL4Header => "bad_l4_header",
        }
    }

    /// Whether the frame is broken (truncated, inconsistent lengths, bad
    /// checksum), as opposed to well-formed but not handled by the fast path
    /// (not IP, VLAN, options, fragments, extension headers, TTL expired).
    pub const fn is_malformed(self) -> bool {
        matches!(
            self,
            ParseError::Truncated
                | ParseError::BadIpv4Header
                | ParseError::Ipv4Checksum
                | ParseError::BadIpv6Header
                | ParseError::BadL4Header
        )
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl core::error::Error for ParseError {}

/// What the fast path needs to know about an accepted frame.
///
/// Offsets are from the start of the frame. Bytes past
/// `l3_offset + ip_total_len` are Ethernet padding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParsedFrame {
    /// IPv4 or IPv6.
    pub l3: L3,
    /// Offset of the IP header (14: VLAN-tagged frames are not accepted).
    pub l3_offset: usize,
    /// Offset of the transport header (IP header is 20 or 40 bytes: options
    /// and extension headers are not accepted).
    pub l4_offset: usize,
    /// Length of the IP datagram, header included: IPv4 total length, or 40
    /// plus the IPv6 payload length.
    pub ip_total_len: usize,
    /// Addresses, protocol and ports.
    pub flow: FlowTuple,
    /// DSCP (upper 6 bits of the IPv4 TOS / IPv6 traffic class).
    pub dscp: u8,
    /// ECN codepoint.
    pub ecn: Ecn,
    /// IPv4 TTL or IPv6 hop limit, as received (at least 2).
    pub ttl: u8,
    /// The RoCEv2 Base Transport Header, when the frame is RoCEv2 and
    /// carries one (see [`Bth`]).
    pub bth: Option<Bth>,
}

impl ParsedFrame {
    /// Whether this is RoCEv2: UDP to port 4791. The queue-pair entropy is in
    /// the UDP source port (`flow.sport()`).
    #[inline]
    pub const fn is_rocev2(&self) -> bool {
        self.flow.proto() == ip::PROTO_UDP && self.flow.dport() == ROCEV2_UDP_PORT
    }

    /// Length of the frame without Ethernet padding.
    #[inline]
    pub const fn frame_len_unpadded(&self) -> usize {
        // Both are bounded by the frame length, which fits in usize.
        self.l3_offset.wrapping_add(self.ip_total_len)
    }
}

/// Parses an untrusted Ethernet frame.
///
/// Accepts untagged Ethernet II carrying IPv4 without options and not
/// fragmented, or IPv6 without extension headers, with TTL / hop limit at
/// least 2, and a well-formed TCP or UDP header when the protocol is TCP or
/// UDP. Anything else is classified by a [`ParseError`]. Never panics and
/// never allocates.
#[inline]
pub fn parse(frame: &[u8]) -> Result<ParsedFrame, ParseError> {
    let (eth, rest) = frame
        .split_first_chunk::<{ ethernet::HEADER_LEN }>()
        .ok_or(ParseError::Truncated)?;
    let ethertype = u16::from_be_bytes([eth[12], eth[13]]);
    match ethertype {
        ETHERTYPE_IPV4 => parse_ipv4(rest),
        ETHERTYPE_IPV6 => parse_ipv6(rest),
        t if ethernet::is_vlan_tpid(t) => Err(ParseError::Vlan),
        _ => Err(ParseError::NotIp),
    }
}

/// `packet` is everything after the Ethernet header.
#[inline]
fn parse_ipv4(packet: &[u8]) -> Result<ParsedFrame, ParseError> {
    let (hdr, _) = packet
        .split_first_chunk::<IPV4_HEADER_LEN>()
        .ok_or(ParseError::Truncated)?;
    if hdr[0] >> 4 != 4 {
        return Err(ParseError::BadIpv4Header);
    }
    // IHL is at most 15 words = 60 bytes: cannot overflow.
    let header_len = usize::from(hdr[0] & 0x0F).wrapping_mul(4);
    if header_len < IPV4_HEADER_LEN {
        return Err(ParseError::BadIpv4Header);
    }
    let header = packet.get(..header_len).ok_or(ParseError::Truncated)?;
    let total_len = usize::from(u16::from_be_bytes([hdr[2], hdr[3]]));
    if total_len < header_len || total_len > packet.len() {
        return Err(ParseError::BadIpv4Header);
    }
    // A valid header sums to 0xFFFF (negative zero) including its checksum.
    // It cannot sum to +0: the version nibble makes the first word nonzero.
    if ones_complement_sum(header, 0) != 0xFFFF {
        return Err(ParseError::Ipv4Checksum);
    }
    let ttl = hdr[8];
    if ttl <= 1 {
        return Err(ParseError::TtlExpired);
    }
    if header_len != IPV4_HEADER_LEN {
        return Err(ParseError::Ipv4Options);
    }
    let flags_frag = u16::from_be_bytes([hdr[6], hdr[7]]);
    // MF flag, or a nonzero 13-bit fragment offset. DF and the reserved bit
    // do not matter.
    if flags_frag & 0x3FFF != 0 {
        return Err(ParseError::Fragment);
    }
    let proto = hdr[9];
    let payload = packet
        .get(IPV4_HEADER_LEN..total_len)
        .ok_or(ParseError::BadIpv4Header)?;
    let l4 = transport::parse_l4(proto, payload)?;
    let tos = hdr[1];
    Ok(ParsedFrame {
        l3: L3::V4,
        l3_offset: ethernet::HEADER_LEN,
        l4_offset: ethernet::HEADER_LEN.wrapping_add(IPV4_HEADER_LEN),
        ip_total_len: total_len,
        flow: FlowTuple::V4 {
            src: [hdr[12], hdr[13], hdr[14], hdr[15]],
            dst: [hdr[16], hdr[17], hdr[18], hdr[19]],
            proto,
            sport: l4.sport,
            dport: l4.dport,
        },
        dscp: tos >> 2,
        ecn: Ecn::from_bits(tos),
        ttl,
        bth: l4.bth,
    })
}

/// `packet` is everything after the Ethernet header.
#[inline]
fn parse_ipv6(packet: &[u8]) -> Result<ParsedFrame, ParseError> {
    // Fixed part (version .. hop limit), then the two addresses.
    let (hdr, rest) = packet
        .split_first_chunk::<8>()
        .ok_or(ParseError::Truncated)?;
    let (src, rest) = rest
        .split_first_chunk::<16>()
        .ok_or(ParseError::Truncated)?;
    let (dst, rest) = rest
        .split_first_chunk::<16>()
        .ok_or(ParseError::Truncated)?;
    if hdr[0] >> 4 != 6 {
        return Err(ParseError::BadIpv6Header);
    }
    let payload_len = usize::from(u16::from_be_bytes([hdr[4], hdr[5]]));
    let payload = rest.get(..payload_len).ok_or(ParseError::BadIpv6Header)?;
    let hop_limit = hdr[7];
    if hop_limit <= 1 {
        return Err(ParseError::TtlExpired);
    }
    let next_header = hdr[6];
    if next_header == ip::IPV6_NH_FRAGMENT {
        return Err(ParseError::Fragment);
    }
    if ip::is_ipv6_extension_header(next_header) {
        return Err(ParseError::Ipv6ExtensionHeader);
    }
    let l4 = transport::parse_l4(next_header, payload)?;
    // Traffic class: low nibble of byte 0, high nibble of byte 1.
    let traffic_class = (hdr[0] << 4) | (hdr[1] >> 4);
    Ok(ParsedFrame {
        l3: L3::V6,
        l3_offset: ethernet::HEADER_LEN,
        l4_offset: ethernet::HEADER_LEN.wrapping_add(IPV6_HEADER_LEN),
        ip_total_len: IPV6_HEADER_LEN.wrapping_add(payload_len),
        flow: FlowTuple::V6 {
            src: *src,
            dst: *dst,
            proto: next_header,
            sport: l4.sport,
            dport: l4.dport,
        },
        dscp: traffic_class >> 2,
        ecn: Ecn::from_bits(traffic_class),
        ttl: hop_limit,
        bth: l4.bth,
    })
}

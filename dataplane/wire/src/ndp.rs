//! NDP (Handley et al., SIGCOMM 2017) over UDP, as the rotor networks'
//! trimming transport carries it: the header the hosts exchange, and the
//! one rewrite a switch makes, cutting a data packet to its headers
//! ([`trim`]) when its queue is full, so that the receiver learns of the
//! loss at once and asks for the packet again.
//!
//! NDP has no assigned port or wire format of its own (the paper runs it
//! over raw IP in its simulator); this one is UDP to [`UDP_PORT`] with a
//! 16-byte header after the UDP header:
//!
//! ```text
//!  0  kind: 0 data, 1 ack, 2 nack, 3 pull
//!  1  flags: 0x01 trimmed (a data packet cut to its headers by a switch),
//!     0x02 last (the flow's last data packet), 0x04 retransmission
//!  2  zero
//!  4  flow id (u32, big-endian; the sender's, unique per sender)
//!  8  sequence number (u32): data: the packet's number from 0;
//!     ack and nack: the data packet they answer
//! 12  value (u32): data: the flow's size in packets; pull: the
//!     receiver's pull counter (the sender may send one packet per
//!     increment); ack and nack: the pull counter then
//! 16  payload (data only)
//! ```
//!
//! The UDP checksum is 0 (none: IPv4 allows it, and a trimmed packet
//! would need it recomputed); IPv4 only, no options, as the rest of the
//! fast path.
//!
//! Like the rest of the crate: no panics on any bytes, no allocation.

use core::fmt;

use crate::checksum::ipv4_checksum;
use crate::ethernet;

/// The UDP destination port of NDP packets (chosen here: NDP has none).
pub const UDP_PORT: u16 = 7247;
/// Bytes of the NDP header.
pub const HEADER_LEN: usize = 16;
/// Ethernet, IPv4 (no options), UDP and NDP headers: what a trimmed data
/// packet and every control packet is, bytes.
pub const HEADERS_LEN: usize = ethernet::HEADER_LEN + IPV4_LEN + UDP_LEN + HEADER_LEN;

/// Flag: a switch cut this data packet to its headers.
pub const FLAG_TRIMMED: u8 = 0x01;
/// Flag: the flow's last data packet.
pub const FLAG_LAST: u8 = 0x02;
/// Flag: a data packet sent again (after a nack or a timeout).
pub const FLAG_RETRANSMISSION: u8 = 0x04;

const IPV4_LEN: usize = 20;
const UDP_LEN: usize = 8;
const ETHERTYPE_IPV4: [u8; 2] = [0x08, 0x00];
const PROTO_UDP: u8 = 17;
const IP_OFFSET: usize = ethernet::HEADER_LEN;
const UDP_OFFSET: usize = ethernet::HEADER_LEN + IPV4_LEN;
const NDP_OFFSET: usize = UDP_OFFSET + UDP_LEN;

/// What an NDP packet is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Payload (or, trimmed, only its headers).
    Data,
    /// The receiver got this data packet.
    Ack,
    /// The receiver got this data packet's headers only: send it again.
    Nack,
    /// The receiver may take one more packet.
    Pull,
}

impl Kind {
    fn code(self) -> u8 {
        match self {
            Kind::Data => 0,
            Kind::Ack => 1,
            Kind::Nack => 2,
            Kind::Pull => 3,
        }
    }

    fn from_code(code: u8) -> Option<Kind> {
        Some(match code {
            0 => Kind::Data,
            1 => Kind::Ack,
            2 => Kind::Nack,
            3 => Kind::Pull,
            _ => return None,
        })
    }
}

/// The NDP header's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// What the packet is.
    pub kind: Kind,
    /// [`FLAG_TRIMMED`], [`FLAG_LAST`], [`FLAG_RETRANSMISSION`].
    pub flags: u8,
    /// The sender's flow id.
    pub flow: u32,
    /// See the module docs.
    pub seq: u32,
    /// See the module docs.
    pub value: u32,
}

impl Header {
    /// Whether a switch trimmed the packet.
    pub const fn trimmed(&self) -> bool {
        self.flags & FLAG_TRIMMED != 0
    }

    /// The header as it goes on the wire.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let [f0, f1, f2, f3] = self.flow.to_be_bytes();
        let [s0, s1, s2, s3] = self.seq.to_be_bytes();
        let [v0, v1, v2, v3] = self.value.to_be_bytes();
        [
            self.kind.code(),
            self.flags,
            0,
            0,
            f0,
            f1,
            f2,
            f3,
            s0,
            s1,
            s2,
            s3,
            v0,
            v1,
            v2,
            v3,
        ]
    }

    /// The header at the start of `bytes` (a UDP payload).
    pub fn parse(bytes: &[u8]) -> Result<Header, NdpError> {
        let (h, _) = bytes
            .split_first_chunk::<HEADER_LEN>()
            .ok_or(NdpError::Truncated)?;
        let kind = Kind::from_code(h[0]).ok_or(NdpError::BadKind(h[0]))?;
        if h[2] != 0 || h[3] != 0 {
            return Err(NdpError::Reserved);
        }
        Ok(Header {
            kind,
            flags: h[1],
            flow: u32::from_be_bytes([h[4], h[5], h[6], h[7]]),
            seq: u32::from_be_bytes([h[8], h[9], h[10], h[11]]),
            value: u32::from_be_bytes([h[12], h[13], h[14], h[15]]),
        })
    }
}

/// Why bytes are not an NDP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NdpError {
    /// Shorter than its headers.
    Truncated,
    /// Not IPv4 without options, UDP, to [`UDP_PORT`].
    NotNdp,
    /// An unknown kind code.
    BadKind(u8),
    /// The reserved bytes are not zero.
    Reserved,
    /// A control packet, or a data packet trimmed already: nothing to cut.
    NotTrimmable,
}

impl fmt::Display for NdpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NdpError::Truncated => f.write_str("shorter than the NDP headers"),
            NdpError::NotNdp => f.write_str("not IPv4/UDP to the NDP port"),
            NdpError::BadKind(k) => write!(f, "unknown NDP kind {k}"),
            NdpError::Reserved => f.write_str("NDP reserved bytes not zero"),
            NdpError::NotTrimmable => f.write_str("not an untrimmed NDP data packet"),
        }
    }
}

/// The NDP header of an Ethernet frame, if it carries one: IPv4 without
/// options, UDP to [`UDP_PORT`].
pub fn header_of(frame: &[u8]) -> Result<Header, NdpError> {
    let (headers, _) = frame
        .split_first_chunk::<HEADERS_LEN>()
        .ok_or(NdpError::Truncated)?;
    let ethertype = [headers[12], headers[13]];
    let version_ihl = headers[IP_OFFSET];
    let protocol = headers[IP_OFFSET + 9];
    let dport = u16::from_be_bytes([headers[UDP_OFFSET + 2], headers[UDP_OFFSET + 3]]);
    if ethertype != ETHERTYPE_IPV4 || version_ihl != 0x45 || protocol != PROTO_UDP {
        return Err(NdpError::NotNdp);
    }
    if dport != UDP_PORT {
        return Err(NdpError::NotNdp);
    }
    let (_, ndp) = headers.split_at(NDP_OFFSET);
    Header::parse(ndp)
}

/// Cuts the NDP data packet `frame` to its headers, as a switch does when
/// the packet's queue is full: sets [`FLAG_TRIMMED`], the IPv4 total
/// length (and header checksum) and the UDP length to the headers alone,
/// and returns the new frame length ([`HEADERS_LEN`]); the bytes past it
/// are left as they were, for the caller to drop. Anything but an
/// untrimmed data packet is refused and left unchanged.
pub fn trim(frame: &mut [u8]) -> Result<usize, NdpError> {
    let h = header_of(frame)?;
    if h.kind != Kind::Data || h.trimmed() {
        return Err(NdpError::NotTrimmable);
    }
    let (headers, _) = frame
        .split_first_chunk_mut::<HEADERS_LEN>()
        .ok_or(NdpError::Truncated)?;
    let [l0, l1] = ((IPV4_LEN + UDP_LEN + HEADER_LEN) as u16).to_be_bytes();
    headers[IP_OFFSET + 2] = l0;
    headers[IP_OFFSET + 3] = l1;
    headers[IP_OFFSET + 10] = 0;
    headers[IP_OFFSET + 11] = 0;
    let [c0, c1] = {
        let (_, ip) = headers.split_at(IP_OFFSET);
        let (ip_header, _) = ip
            .split_first_chunk::<IPV4_LEN>()
            .ok_or(NdpError::Truncated)?;
        ipv4_checksum(ip_header).to_be_bytes()
    };
    headers[IP_OFFSET + 10] = c0;
    headers[IP_OFFSET + 11] = c1;
    let [u0, u1] = ((UDP_LEN + HEADER_LEN) as u16).to_be_bytes();
    headers[UDP_OFFSET + 4] = u0;
    headers[UDP_OFFSET + 5] = u1;
    headers[UDP_OFFSET + 6] = 0;
    headers[UDP_OFFSET + 7] = 0;
    headers[NDP_OFFSET + 1] |= FLAG_TRIMMED;
    Ok(HEADERS_LEN)
}

#[cfg(test)]
#[allow(
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::unwrap_used
)]
mod tests {
    use super::*;
    use std::vec::Vec;

    /// An NDP data packet from 10.0.1.2:40000 to 10.0.2.2:7247, flow 7,
    /// packet 3 of 9, with 4 bytes of payload (hand-assembled; the IPv4
    /// checksum worked out by hand below).
    const DATA: &str = "020000000002 020000000001 0800 \
        4500 0030 0000 4000 4011 23ba 0a000102 0a000202 \
        9c40 1c4f 001c 0000 \
        00 00 0000 00000007 00000003 00000009 \
        deadbeef";

    fn hex(s: &str) -> Vec<u8> {
        let s: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
        s.chunks(2)
            .map(|p| u8::from_str_radix(core::str::from_utf8(p).unwrap(), 16).unwrap())
            .collect()
    }

    #[test]
    fn the_fixture_is_a_valid_ipv4_udp_datagram() {
        // Total length 0x30 = 48 = 20 + 8 + 16 + 4; checksum: the sum of
        // the header's words 4500 + 0030 + 0000 + 4000 + 4011 + 0a00 +
        // 0102 + 0a00 + 0202 = 0xdc45, complemented 0x23ba.
        let f = hex(DATA);
        assert_eq!(f.len(), 14 + 48);
        // A header with its checksum in place sums to zero.
        assert_eq!(ipv4_checksum(&f[14..34]), 0);
        assert_eq!(crate::parse(&f).unwrap().flow.dport(), UDP_PORT);
    }

    #[test]
    fn the_header_reads_as_written() {
        let f = hex(DATA);
        let h = header_of(&f).unwrap();
        assert_eq!(
            h,
            Header {
                kind: Kind::Data,
                flags: 0,
                flow: 7,
                seq: 3,
                value: 9
            }
        );
        assert_eq!(h.to_bytes(), f[42..58]);
        let pull = Header {
            kind: Kind::Pull,
            flags: 0,
            flow: 0x0102_0304,
            seq: 0,
            value: 77,
        };
        assert_eq!(Header::parse(&pull.to_bytes()), Ok(pull));
    }

    #[test]
    fn trimming_cuts_to_the_headers_and_fixes_the_lengths() {
        let mut f = hex(DATA);
        assert_eq!(trim(&mut f), Ok(HEADERS_LEN));
        let t = &f[..HEADERS_LEN];
        // IPv4 total length 44 (0x2c), its checksum 0x23be (the sum above
        // less 4: 0xdc41, complemented), UDP length 24 (0x18), checksum 0,
        // the trimmed flag set; everything else as it was.
        let want = hex("020000000002 020000000001 0800 \
             4500 002c 0000 4000 4011 23be 0a000102 0a000202 \
             9c40 1c4f 0018 0000 \
             00 01 0000 00000007 00000003 00000009");
        assert_eq!(t, &want[..]);
        assert!(header_of(t).unwrap().trimmed());
        assert_eq!(ipv4_checksum(&t[14..34]), 0);
        let parsed = crate::parse(t).unwrap();
        assert_eq!(parsed.ip_total_len, 44);
        // Once is all: a trimmed packet is not trimmed again.
        let mut again = t.to_vec();
        assert_eq!(trim(&mut again), Err(NdpError::NotTrimmable));
        assert_eq!(again, t);
    }

    #[test]
    fn only_untrimmed_ndp_data_is_cut() {
        let mut f = hex(DATA);
        f[42] = 3; // a pull
        let before = f.clone();
        assert_eq!(trim(&mut f), Err(NdpError::NotTrimmable));
        assert_eq!(f, before);
        let mut g = hex(DATA);
        g[36] = 0x12; // another destination port
        assert_eq!(trim(&mut g), Err(NdpError::NotNdp));
        let mut short = hex(DATA);
        short.truncate(HEADERS_LEN - 1);
        assert_eq!(trim(&mut short), Err(NdpError::Truncated));
        let mut kind = hex(DATA);
        kind[42] = 9;
        assert_eq!(header_of(&kind), Err(NdpError::BadKind(9)));
    }

    proptest::proptest! {
        #[test]
        fn no_bytes_make_it_panic(mut bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            let _ = header_of(&bytes);
            let len = bytes.len();
            if let Ok(n) = trim(&mut bytes) {
                proptest::prop_assert!(n <= len);
                proptest::prop_assert!(header_of(&bytes).unwrap().trimmed());
            }
        }
    }
}

//! The headers of the frames the one-process engines' hosts write, in
//! place in a pool buffer: the Ethernet header of every host's frames
//! ([`write_ethernet`]: untagged, EtherType IPv4, no FCS), and below it,
//! for the UDP and NDP hosts, IPv4 and UDP ([`write_udp_headers`]: IPv4
//! without options, TOS 0, id 0, DF, TTL 64; UDP checksum 0, "none", valid
//! in IPv4, which no hop reads and a trimmed NDP packet would have to
//! recompute). The RoCEv2 host's datagram is the transport's own
//! ([`crate::roce_frame`]). No input makes these panic; nothing is
//! allocated.

use std::net::Ipv4Addr;

use lcmp_wire::checksum::ipv4_checksum;
use lcmp_wire::ethernet::{ETHERTYPE_IPV4, HEADER_LEN as ETHERNET_LEN};
use lcmp_wire::ip::{IPV4_HEADER_LEN, PROTO_UDP};
use lcmp_wire::MacAddr;

const UDP_LEN: usize = 8;
/// Ethernet, IPv4 (no options) and UDP headers, bytes.
pub const HEADERS_LEN: usize = ETHERNET_LEN + IPV4_HEADER_LEN + UDP_LEN;
/// Where the IPv4 header starts in a frame.
pub const IP_OFFSET: usize = ETHERNET_LEN;
/// Where the UDP header starts in a frame.
pub const UDP_OFFSET: usize = IP_OFFSET + IPV4_HEADER_LEN;

/// Writes the Ethernet header of a frame from `src` to `dst` carrying IPv4.
pub fn write_ethernet(h: &mut [u8; ETHERNET_LEN], src: MacAddr, dst: MacAddr) {
    h[..6].copy_from_slice(&dst);
    h[6..12].copy_from_slice(&src);
    h[12..].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
}

/// Addresses of a UDP frame a host writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpRoute {
    /// The host's NIC (the frame's source MAC).
    pub mac: MacAddr,
    /// Its switch's port (the frame's destination MAC).
    pub gateway: MacAddr,
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub sport: u16,
    pub dport: u16,
}

/// Writes the Ethernet, IPv4 and UDP headers of a datagram with
/// `payload_len` bytes of UDP payload into `buf` (the payload follows
/// them, the caller's); the frame's length, or `None` if it does not fit
/// `buf` or the IPv4 length field.
pub fn write_udp_headers(buf: &mut [u8], r: &UdpRoute, payload_len: usize) -> Option<usize> {
    let len = HEADERS_LEN.checked_add(payload_len)?;
    let ip_total = u16::try_from(len - IP_OFFSET).ok()?;
    let (h, _) = buf.get_mut(..len)?.split_first_chunk_mut::<HEADERS_LEN>()?;
    let (eth, ip) = h.split_first_chunk_mut::<ETHERNET_LEN>()?;
    write_ethernet(eth, r.mac, r.gateway);
    let (ip, udp) = ip.split_first_chunk_mut::<IPV4_HEADER_LEN>()?;
    let [t0, t1] = ip_total.to_be_bytes();
    // Version 4, IHL 5; TOS 0; total length; id 0; DF; TTL 64; UDP;
    // checksum (below); addresses.
    ip[..12].copy_from_slice(&[0x45, 0, t0, t1, 0, 0, 0x40, 0, 64, PROTO_UDP, 0, 0]);
    ip[12..16].copy_from_slice(&r.src.octets());
    ip[16..].copy_from_slice(&r.dst.octets());
    let sum = ipv4_checksum(ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    let [u0, u1] = (ip_total - IPV4_HEADER_LEN as u16).to_be_bytes();
    let [s0, s1] = r.sport.to_be_bytes();
    let [d0, d1] = r.dport.to_be_bytes();
    udp.copy_from_slice(&[s0, s1, d0, d1, u0, u1, 0, 0]);
    Some(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route() -> UdpRoute {
        UdpRoute {
            mac: [2, 0, 0, 0, 0, 1],
            gateway: [2, 0, 0, 0, 0, 2],
            src: Ipv4Addr::new(10, 0, 1, 2),
            dst: Ipv4Addr::new(10, 0, 2, 2),
            sport: 40000,
            dport: 7000,
        }
    }

    #[test]
    fn headers_are_as_written_by_hand() {
        let r = route();
        let mut buf = [0xeeu8; 64];
        assert_eq!(write_udp_headers(&mut buf, &r, 10), Some(52));
        // IPv4 total 20 + 8 + 10 = 38 = 0x26, UDP length 18 = 0x12. The
        // header checksum by hand: the 16-bit words 4500 0026 0000 4000
        // 4011 0a00 0102 0a00 0202 sum to 0xdc3b (no carry), inverted
        // 0x23c4.
        let expected: [u8; 42] = [
            2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00, // Ethernet
            0x45, 0, 0, 0x26, 0, 0, 0x40, 0, 64, 17, 0x23, 0xc4, 10, 0, 1, 2, 10, 0, 2, 2, 0x9c,
            0x40, 0x1b, 0x58, 0, 0x12, 0, 0, // UDP 40000 -> 7000
        ];
        assert_eq!(buf[..42], expected);
        // The payload is the caller's: untouched.
        assert!(buf[42..].iter().all(|&b| b == 0xee));
        // As the switch's parser reads it: a valid IPv4 UDP frame.
        let p = lcmp_wire::parse(&buf[..52]).unwrap();
        assert_eq!((p.flow.sport(), p.flow.dport()), (40000, 7000));
    }

    /// The UDP host built its frames with the tests' `FrameBuilder` (DF,
    /// TTL 64) and zeroed the UDP checksum: the same bytes.
    #[test]
    fn headers_are_the_frame_builders_but_the_udp_checksum() {
        let r = route();
        let payload: Vec<u8> = (0..100u8).collect();
        let mut expected = lcmp_wire::testing::FrameBuilder::ipv4(r.src.octets(), r.dst.octets())
            .macs(r.mac, r.gateway)
            .ttl(64)
            .ipv4_fragment(false, true, 0)
            .udp(r.sport, r.dport)
            .payload(&payload)
            .build();
        expected[40..42].fill(0);
        let mut buf = [0u8; 256];
        let n = write_udp_headers(&mut buf, &r, payload.len()).unwrap();
        buf[42..n].copy_from_slice(&payload);
        assert_eq!(buf[..n], expected[..]);
    }

    #[test]
    fn what_does_not_fit_is_refused() {
        let r = route();
        let mut buf = [0u8; 60];
        // 42 + 19 = 61 bytes in a 60-byte buffer.
        assert_eq!(write_udp_headers(&mut buf, &r, 19), None);
        assert_eq!(write_udp_headers(&mut buf, &r, 18), Some(60));
        // An IPv4 total of 65536 (14 + 65536 bytes of frame) overflows
        // the length field whatever the buffer.
        let mut big = vec![0u8; 70_000];
        assert_eq!(write_udp_headers(&mut big, &r, 65_536 - 28), None);
        assert_eq!(
            write_udp_headers(&mut big, &r, 65_535 - 28),
            Some(14 + 65_535)
        );
        assert_eq!(write_udp_headers(&mut buf, &r, usize::MAX), None);
    }
}

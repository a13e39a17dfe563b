//! ICMP errors built by `lcmp_wire::icmp::build_error`: the fields and
//! checksums worked out by hand, the cases that must get no error, and no
//! panic (nothing written when no error is sent) on any bytes.

use std::net::{Ipv4Addr, Ipv6Addr};

use lcmp_wire::checksum::ones_complement_sum;
use lcmp_wire::icmp::{build_error, IcmpError};
use lcmp_wire::testing::FrameBuilder;
use lcmp_wire::MacAddr;
use proptest::prelude::*;

const MAC: MacAddr = [2, 0, 0, 0, 0, 0x99];
const PEER: MacAddr = [2, 0, 0, 0, 0, 0x01];
const R4: Ipv4Addr = Ipv4Addr::new(10, 255, 0, 1);
const R6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);

#[test]
fn time_exceeded_v4_by_hand() {
    // A 20-byte IPv4 header + 8-byte UDP header + 4 bytes of payload
    // from 10.0.0.2 to 10.0.1.2, TTL 1, in a frame from PEER.
    let frame = FrameBuilder::ipv4([10, 0, 0, 2], [10, 0, 1, 2])
        .macs(PEER, MAC)
        .udp(1000, 2000)
        .ttl(1)
        .payload(&[1, 2, 3, 4])
        .build();
    let original_ip = frame[14..].to_vec();
    let mut buf = vec![0u8; 2048];
    buf[..frame.len()].copy_from_slice(&frame);
    let n = build_error(&mut buf, frame.len(), IcmpError::TimeExceeded, MAC, R4, R6)
        .expect("an error is sent");
    // Ethernet 14 + IP 20 + ICMP 8 + the whole 32-byte packet.
    assert_eq!(n, 14 + 20 + 8 + 32);
    assert_eq!(&buf[0..6], &PEER);
    assert_eq!(&buf[6..12], &MAC);
    assert_eq!(&buf[12..14], &[0x08, 0x00]);
    let ip = &buf[14..34];
    assert_eq!(ip[0], 0x45);
    assert_eq!(u16::from_be_bytes([ip[2], ip[3]]), 60);
    assert_eq!((ip[8], ip[9]), (64, 1));
    assert_eq!(&ip[12..16], &[10, 255, 0, 1]);
    assert_eq!(&ip[16..20], &[10, 0, 0, 2]);
    // A valid header sums to 0xffff with its checksum.
    assert_eq!(ones_complement_sum(ip, 0), 0xffff);
    let icmp = &buf[34..n];
    assert_eq!((icmp[0], icmp[1]), (11, 0));
    assert_eq!(&icmp[4..8], &[0, 0, 0, 0]);
    assert_eq!(&icmp[8..], &original_ip[..]);
    assert_eq!(ones_complement_sum(icmp, 0), 0xffff);
}

#[test]
fn no_route_v6_by_hand() {
    let src = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
    let dst = [0xfd, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2];
    let frame = FrameBuilder::ipv6(src, dst)
        .macs(PEER, MAC)
        .udp(1000, 2000)
        .payload(&[9; 10])
        .build();
    let mut buf = vec![0u8; 2048];
    buf[..frame.len()].copy_from_slice(&frame);
    let n = build_error(&mut buf, frame.len(), IcmpError::NoRoute, MAC, R4, R6)
        .expect("an error is sent");
    // The quoted packet: 40 + 8 + 10 = 58 bytes.
    assert_eq!(n, 14 + 40 + 8 + 58);
    assert_eq!(&buf[12..14], &[0x86, 0xdd]);
    let ip = &buf[14..54];
    assert_eq!(ip[0], 0x60);
    assert_eq!(u16::from_be_bytes([ip[4], ip[5]]), 8 + 58);
    assert_eq!((ip[6], ip[7]), (58, 64));
    assert_eq!(&ip[8..24], &R6.octets());
    assert_eq!(&ip[24..40], &src);
    let icmp = &buf[54..n];
    assert_eq!((icmp[0], icmp[1]), (1, 0));
    // Checksum over pseudo-header + message, worked the long way.
    let mut pseudo = [0u8; 40];
    pseudo[..16].copy_from_slice(&R6.octets());
    pseudo[16..32].copy_from_slice(&src);
    pseudo[35] = 66;
    pseudo[39] = 58;
    let s = ones_complement_sum(icmp, ones_complement_sum(&pseudo, 0));
    assert_eq!(s, 0xffff);
}

#[test]
fn no_error_about_errors_or_to_bad_sources() {
    let cases = [
        // An ICMP time exceeded from 10.0.0.2: an error about an error.
        FrameBuilder::ipv4([10, 0, 0, 2], [10, 0, 1, 2])
            .protocol(1)
            .payload(&[11, 0, 0, 0, 0, 0, 0, 0])
            .build(),
        // Broadcast, loopback and "this network" sources.
        FrameBuilder::ipv4([255, 255, 255, 255], [10, 0, 1, 2]).build(),
        FrameBuilder::ipv4([127, 0, 0, 1], [10, 0, 1, 2]).build(),
        FrameBuilder::ipv4([0, 1, 2, 3], [10, 0, 1, 2]).build(),
    ];
    for frame in cases {
        let mut buf = vec![0u8; 2048];
        buf[..frame.len()].copy_from_slice(&frame);
        let before = buf.clone();
        assert_eq!(
            build_error(&mut buf, frame.len(), IcmpError::NoRoute, MAC, R4, R6),
            None
        );
        assert_eq!(buf, before, "nothing written when no error is sent");
    }
    // An echo request does get an error.
    let echo = FrameBuilder::ipv4([10, 0, 0, 2], [10, 0, 1, 2])
        .icmp_echo(1, 1)
        .build();
    let mut buf = vec![0u8; 2048];
    buf[..echo.len()].copy_from_slice(&echo);
    assert!(build_error(&mut buf, echo.len(), IcmpError::NoRoute, MAC, R4, R6).is_some());
}

#[test]
fn no_room_no_error() {
    let frame = FrameBuilder::ipv4([10, 0, 0, 2], [10, 0, 1, 2]).build();
    // The error needs 28 more bytes than the frame has.
    let mut buf = frame.clone();
    assert_eq!(
        build_error(&mut buf, frame.len(), IcmpError::NoRoute, MAC, R4, R6),
        None
    );
    assert_eq!(buf, frame);
}

proptest! {
    /// Any bytes, any claimed length, any buffer size: no panic; when an
    /// error is built it fits the buffer, its IPv4 header checksum (or the
    /// ICMP checksum alone for IPv6) is valid, and when none is built the
    /// buffer is untouched.
    #[test]
    fn any_bytes_no_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..700),
        extra in 0usize..700,
        claimed in 0usize..1400,
        v6 in any::<bool>(),
    ) {
        let mut buf = bytes.clone();
        if bytes.len() > 13 {
            // Half the cases look like IP so the builders get past the
            // ethertype.
            let ethertype: [u8; 2] = if v6 { [0x86, 0xdd] } else { [0x08, 0x00] };
            buf[12..14].copy_from_slice(&ethertype);
        }
        buf.resize(bytes.len() + extra, 0);
        let before = buf.clone();
        let len = claimed.min(buf.len());
        match build_error(&mut buf, len, IcmpError::TimeExceeded, MAC, R4, R6) {
            None => prop_assert_eq!(buf, before),
            Some(n) => {
                prop_assert!(n <= buf.len());
                if buf[12..14] == [0x08, 0x00] {
                    prop_assert_eq!(ones_complement_sum(&buf[14..34], 0), 0xffff);
                    prop_assert_eq!(ones_complement_sum(&buf[34..n], 0), 0xffff);
                }
            }
        }
    }
}

//! Packet fixtures: input frame -> expected verdict and fields; input frame
//! -> rewrite -> expected output frame.
//!
//! The hand-written hex frames were laid out byte by byte with their
//! checksums worked out independently of this crate; they also pin down the
//! `testing::FrameBuilder` output.

use lcmp_wire::ethernet::{ETHERTYPE_ARP, ETHERTYPE_QINQ};
use lcmp_wire::testing::{
    fix_ipv4_checksum, ipv4_header_checksum_ok, l4_checksum_ok, tcp_flags, FrameBuilder,
};
use lcmp_wire::{
    forward_rewrite, mark_ce, parse, Bth, CeMark, Ecn, FlowTuple, ParseError, ParsedFrame,
    RewriteError, L3,
};

const V4_SRC: [u8; 4] = [10, 0, 0, 1];
const V4_DST: [u8; 4] = [10, 0, 0, 2];
const V6_SRC: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const V6_DST: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
const NEW_SRC_MAC: [u8; 6] = [0xaa; 6];
const NEW_DST_MAC: [u8; 6] = [0xbb; 6];

/// IPv4 UDP 10.0.0.1:1234 -> 10.0.0.2:80, TOS 0x02 (ECT(0)), ID 0x1c46, DF,
/// TTL 64, payload de ad be ef.
const V4_UDP: [u8; 46] = [
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x00, 0x45, 0x02,
    0x00, 0x20, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x11, 0x0a, 0x83, 0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00,
    0x00, 0x02, 0x04, 0xd2, 0x00, 0x50, 0x00, 0x0c, 0x49, 0x14, 0xde, 0xad, 0xbe, 0xef,
];

/// `V4_UDP` after `forward_rewrite(src aa.., dst bb..)`: TTL 63, checksum
/// 0x0a83 -> 0x0b83.
const V4_UDP_FORWARDED: [u8; 46] = [
    0xbb, 0xbb, 0xbb, 0xbb, 0xbb, 0xbb, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0x08, 0x00, 0x45, 0x02,
    0x00, 0x20, 0x1c, 0x46, 0x40, 0x00, 0x3f, 0x11, 0x0b, 0x83, 0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00,
    0x00, 0x02, 0x04, 0xd2, 0x00, 0x50, 0x00, 0x0c, 0x49, 0x14, 0xde, 0xad, 0xbe, 0xef,
];

/// `V4_UDP` after `mark_ce`: TOS 0x03, checksum 0x0a83 -> 0x0a82.
const V4_UDP_CE: [u8; 46] = [
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x00, 0x45, 0x03,
    0x00, 0x20, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x11, 0x0a, 0x82, 0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00,
    0x00, 0x02, 0x04, 0xd2, 0x00, 0x50, 0x00, 0x0c, 0x49, 0x14, 0xde, 0xad, 0xbe, 0xef,
];

/// IPv6 TCP [2001:db8::1]:40000 -> [2001:db8::2]:443, traffic class 0x29
/// (DSCP 10, ECT(1)), flow label 0x12345, hop limit 64, PSH|ACK, payload "hi".
const V6_TCP: [u8; 76] = [
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x86, 0xdd, 0x62, 0x91,
    0x23, 0x45, 0x00, 0x16, 0x06, 0x40, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x9c, 0x40, 0x01, 0xbb, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00,
    0x00, 0x01, 0x50, 0x18, 0xff, 0xff, 0x4d, 0xef, 0x00, 0x00, 0x68, 0x69,
];

fn v4_udp_builder() -> FrameBuilder {
    FrameBuilder::ipv4(V4_SRC, V4_DST)
        .udp(1234, 80)
        .ecn(Ecn::Ect0)
        .ipv4_id(0x1c46)
        .payload(&[0xde, 0xad, 0xbe, 0xef])
}

fn v6_tcp_builder() -> FrameBuilder {
    FrameBuilder::ipv6(V6_SRC, V6_DST)
        .tcp(40000, 443)
        .tcp_flags(tcp_flags::PSH | tcp_flags::ACK)
        .dscp(10)
        .ecn(Ecn::Ect1)
        .flow_label(0x12345)
        .payload(b"hi")
}

#[test]
fn builder_matches_hand_written_frames() {
    assert_eq!(v4_udp_builder().build(), V4_UDP);
    assert_eq!(v6_tcp_builder().build(), V6_TCP);
    assert_eq!(l4_checksum_ok(&V4_UDP), Some(true));
    assert_eq!(l4_checksum_ok(&V6_TCP), Some(true));
    assert_eq!(ipv4_header_checksum_ok(&V4_UDP), Some(true));
}

#[test]
fn parses_ipv4_udp() {
    let p = parse(&V4_UDP).unwrap();
    assert_eq!(
        p,
        ParsedFrame {
            l3: L3::V4,
            l3_offset: 14,
            l4_offset: 34,
            ip_total_len: 32,
            flow: FlowTuple::V4 {
                src: V4_SRC,
                dst: V4_DST,
                proto: 17,
                sport: 1234,
                dport: 80,
            },
            dscp: 0,
            ecn: Ecn::Ect0,
            ttl: 64,
            bth: None,
        }
    );
    assert!(!p.is_rocev2());
    assert_eq!(p.frame_len_unpadded(), 46);
    assert_eq!(p.flow.src_ip().to_string(), "10.0.0.1");
}

#[test]
fn parses_ipv6_tcp() {
    let p = parse(&V6_TCP).unwrap();
    assert_eq!(
        p,
        ParsedFrame {
            l3: L3::V6,
            l3_offset: 14,
            l4_offset: 54,
            ip_total_len: 62,
            flow: FlowTuple::V6 {
                src: V6_SRC,
                dst: V6_DST,
                proto: 6,
                sport: 40000,
                dport: 443,
            },
            dscp: 10,
            ecn: Ecn::Ect1,
            ttl: 64,
            bth: None,
        }
    );
    assert_eq!(p.flow.dst_ip().to_string(), "2001:db8::2");
}

#[test]
fn ethernet_padding_is_allowed() {
    let frame = v4_udp_builder().pad_to(60).build();
    assert_eq!(frame.len(), 60);
    let p = parse(&frame).unwrap();
    assert_eq!(p, parse(&V4_UDP).unwrap());
    assert_eq!(p.frame_len_unpadded(), 46);

    let frame = v6_tcp_builder().pad_to(128).build();
    assert_eq!(parse(&frame).unwrap(), parse(&V6_TCP).unwrap());
}

#[test]
fn portless_protocols_get_zero_ports_and_echoes_their_identifier() {
    // (frame, protocol, source port): an echo's identifier keys its ping
    // session; other ICMP messages and other protocols have no ports.
    let cases = [
        (
            FrameBuilder::ipv4(V4_SRC, V4_DST).icmp_echo(7, 1).build(),
            1,
            7,
        ),
        (
            FrameBuilder::ipv6(V6_SRC, V6_DST)
                .icmp_echo(0xbeef, 1)
                .build(),
            58,
            0xbeef,
        ),
        (
            // ICMP destination unreachable (type 3): no identifier.
            FrameBuilder::ipv4(V4_SRC, V4_DST)
                .protocol(1)
                .payload(&[3, 1, 0, 0, 0x12, 0x34, 0, 0])
                .build(),
            1,
            0,
        ),
        (
            // An echo request cut before its identifier.
            FrameBuilder::ipv4(V4_SRC, V4_DST)
                .protocol(1)
                .payload(&[8, 0, 0])
                .build(),
            1,
            0,
        ),
        (
            FrameBuilder::ipv4(V4_SRC, V4_DST)
                .protocol(47)
                .payload(&[0; 4])
                .build(),
            47,
            0,
        ),
        (
            FrameBuilder::ipv6(V6_SRC, V6_DST).protocol(59).build(),
            59,
            0,
        ),
        (
            FrameBuilder::ipv4(V4_SRC, V4_DST).protocol(132).build(),
            132,
            0,
        ),
    ];
    for (frame, proto, sport) in cases {
        let p = parse(&frame).unwrap_or_else(|e| panic!("proto {proto}: {e}"));
        assert_eq!(
            (p.flow.proto(), p.flow.sport(), p.flow.dport()),
            (proto, sport, 0)
        );
    }
    // Two ping sessions between the same hosts are two flows.
    let a = parse(&FrameBuilder::ipv4(V4_SRC, V4_DST).icmp_echo(1, 9).build()).unwrap();
    let b = parse(&FrameBuilder::ipv4(V4_SRC, V4_DST).icmp_echo(2, 9).build()).unwrap();
    assert_ne!(a.flow, b.flow);
    assert_eq!(
        l4_checksum_ok(&FrameBuilder::ipv6(V6_SRC, V6_DST).icmp_echo(7, 1).build()),
        Some(true)
    );
}

#[test]
fn rocev2_with_bth() {
    let bth = Bth {
        opcode: 0x04, // RC SEND only
        pkey: 0xffff,
        dest_qp: 0x00ab_cdef,
        ack_request: true,
        psn: 0x0012_3456,
    };
    let frame = FrameBuilder::ipv4(V4_SRC, V4_DST)
        .rocev2(0xc123, bth)
        .ecn(Ecn::Ect0)
        .payload(&[1; 64])
        .build();
    let p = parse(&frame).unwrap();
    assert!(p.is_rocev2());
    assert_eq!(p.flow.sport(), 0xc123);
    assert_eq!(p.bth, Some(bth));
    assert_eq!(l4_checksum_ok(&frame), Some(true));

    let v6 = FrameBuilder::ipv6(V6_SRC, V6_DST).rocev2(1, bth).build();
    assert_eq!(parse(&v6).unwrap().bth, Some(bth));
}

#[test]
fn rocev2_without_usable_bth() {
    // Too short for a BTH: still RoCEv2 by port, no BTH.
    let frame = FrameBuilder::ipv4(V4_SRC, V4_DST)
        .udp(5, 4791)
        .payload(&[0; 11])
        .build();
    let p = parse(&frame).unwrap();
    assert!(p.is_rocev2());
    assert_eq!(p.bth, None);

    // Transport header version 1: not a BTH we understand.
    let mut frame = FrameBuilder::ipv4(V4_SRC, V4_DST)
        .udp(5, 4791)
        .payload(&[0; 16])
        .build();
    frame[34 + 8 + 1] = 0x01;
    let p = parse(&frame).unwrap();
    assert!(p.is_rocev2());
    assert_eq!(p.bth, None);

    // The BTH must lie within the UDP length, not in trailing bytes.
    let mut frame = FrameBuilder::ipv4(V4_SRC, V4_DST)
        .udp(5, 4791)
        .payload(&[0; 16])
        .build();
    frame[38..40].copy_from_slice(&8u16.to_be_bytes());
    assert_eq!(parse(&frame).unwrap().bth, None);

    // Port 4791 as source is not RoCEv2.
    let frame = FrameBuilder::ipv4(V4_SRC, V4_DST).udp(4791, 5).build();
    assert!(!parse(&frame).unwrap().is_rocev2());
}

#[test]
fn tcp_with_options_is_accepted() {
    let mut frame = FrameBuilder::ipv4(V4_SRC, V4_DST)
        .tcp(1, 2)
        .payload(&[1; 40])
        .build();
    frame[34 + 12] = 15 << 4; // 60-byte TCP header: 40 option bytes
    assert_eq!(parse(&frame).unwrap().flow.dport(), 2);
}

#[test]
fn udp_shorter_than_ip_payload_is_accepted() {
    let mut frame = FrameBuilder::ipv4(V4_SRC, V4_DST)
        .udp(1, 2)
        .payload(&[0; 10])
        .build();
    frame[38..40].copy_from_slice(&12u16.to_be_bytes());
    assert_eq!(parse(&frame).unwrap().flow.sport(), 1);
}

#[test]
fn ttl_two_and_reserved_flag_are_accepted() {
    assert!(parse(&v4_udp_builder().ttl(2).build()).is_ok());
    assert!(parse(&v6_tcp_builder().ttl(2).build()).is_ok());
    let mut frame = v4_udp_builder().build();
    frame[20] |= 0x80; // reserved flag bit
    assert!(fix_ipv4_checksum(&mut frame));
    assert!(parse(&frame).is_ok());
}

/// A frame mutated by `f`, with the IPv4 header checksum fixed afterwards
/// when `fix` is set.
fn mutate(mut frame: Vec<u8>, fix: bool, f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    f(&mut frame);
    if fix {
        fix_ipv4_checksum(&mut frame);
    }
    frame
}

fn ethertype(t: u16, len: usize) -> Vec<u8> {
    let mut frame = vec![0u8; len];
    frame[12..14].copy_from_slice(&t.to_be_bytes());
    frame
}

#[test]
fn rejections() {
    let v4 = || v4_udp_builder().build();
    let v6 = || v6_tcp_builder().build();
    let cases: Vec<(&str, Vec<u8>, ParseError)> = vec![
        ("empty", vec![], ParseError::Truncated),
        ("13 bytes", V4_UDP[..13].to_vec(), ParseError::Truncated),
        (
            "ethernet only",
            V4_UDP[..14].to_vec(),
            ParseError::Truncated,
        ),
        ("arp", ethertype(ETHERTYPE_ARP, 42), ParseError::NotIp),
        ("lldp", ethertype(0x88cc, 60), ParseError::NotIp),
        ("802.3 length", ethertype(0x002e, 60), ParseError::NotIp),
        (
            "802.1q",
            v4_udp_builder().vlan(100).build(),
            ParseError::Vlan,
        ),
        ("802.1ad", ethertype(ETHERTYPE_QINQ, 64), ParseError::Vlan),
        ("legacy qinq", ethertype(0x9100, 64), ParseError::Vlan),
        ("vlan header only", ethertype(0x8100, 14), ParseError::Vlan),
        // IPv4 structure.
        (
            "ipv4 19 bytes",
            V4_UDP[..33].to_vec(),
            ParseError::Truncated,
        ),
        (
            "ipv4 version 6",
            mutate(v4(), true, |f| f[14] = 0x65),
            ParseError::BadIpv4Header,
        ),
        (
            "ipv4 ihl 4",
            mutate(v4(), true, |f| f[14] = 0x44),
            ParseError::BadIpv4Header,
        ),
        (
            "ipv4 ihl 0",
            mutate(v4(), true, |f| f[14] = 0x40),
            ParseError::BadIpv4Header,
        ),
        (
            "total length 19",
            mutate(v4(), true, |f| {
                f[16..18].copy_from_slice(&19u16.to_be_bytes())
            }),
            ParseError::BadIpv4Header,
        ),
        (
            "total length past frame",
            mutate(v4(), true, |f| {
                f[16..18].copy_from_slice(&33u16.to_be_bytes())
            }),
            ParseError::BadIpv4Header,
        ),
        (
            "frame cut inside datagram",
            V4_UDP[..45].to_vec(),
            ParseError::BadIpv4Header,
        ),
        (
            "bad checksum",
            mutate(v4(), false, |f| f[24] ^= 1),
            ParseError::Ipv4Checksum,
        ),
        (
            "bad checksum (field)",
            mutate(v4(), false, |f| f[22] ^= 0x40),
            ParseError::Ipv4Checksum,
        ),
        (
            "options",
            v4_udp_builder().ipv4_options(&[0x94, 0x04, 0, 0]).build(),
            ParseError::Ipv4Options,
        ),
        (
            "options truncated",
            v4_udp_builder().ipv4_options(&[1; 8]).build()[..14 + 24].to_vec(),
            ParseError::Truncated,
        ),
        (
            "options, ihl 15 past total length",
            mutate(v4(), true, |f| {
                f.resize(14 + 60, 0);
                f[14] = 0x4f;
            }),
            ParseError::BadIpv4Header,
        ),
        (
            "more fragments",
            v4_udp_builder().ipv4_fragment(true, false, 0).build(),
            ParseError::Fragment,
        ),
        (
            "fragment offset",
            v4_udp_builder().ipv4_fragment(false, false, 185).build(),
            ParseError::Fragment,
        ),
        (
            "ttl 1",
            v4_udp_builder().ttl(1).build(),
            ParseError::TtlExpired,
        ),
        (
            "ttl 0",
            v4_udp_builder().ttl(0).build(),
            ParseError::TtlExpired,
        ),
        // IPv6 structure.
        (
            "ipv6 39 bytes",
            V6_TCP[..14 + 39].to_vec(),
            ParseError::Truncated,
        ),
        (
            "ipv6 version 4",
            mutate(v6(), false, |f| f[14] = 0x42),
            ParseError::BadIpv6Header,
        ),
        (
            "ipv6 payload length past frame",
            mutate(v6(), false, |f| {
                f[18..20].copy_from_slice(&23u16.to_be_bytes())
            }),
            ParseError::BadIpv6Header,
        ),
        (
            "ipv6 frame cut",
            V6_TCP[..75].to_vec(),
            ParseError::BadIpv6Header,
        ),
        (
            "hop limit 1",
            v6_tcp_builder().ttl(1).build(),
            ParseError::TtlExpired,
        ),
        (
            "hop limit 0",
            v6_tcp_builder().ttl(0).build(),
            ParseError::TtlExpired,
        ),
        (
            "hop-by-hop",
            mutate(v6(), false, |f| f[20] = 0),
            ParseError::Ipv6ExtensionHeader,
        ),
        (
            "routing",
            mutate(v6(), false, |f| f[20] = 43),
            ParseError::Ipv6ExtensionHeader,
        ),
        (
            "dest options",
            mutate(v6(), false, |f| f[20] = 60),
            ParseError::Ipv6ExtensionHeader,
        ),
        (
            "ah",
            mutate(v6(), false, |f| f[20] = 51),
            ParseError::Ipv6ExtensionHeader,
        ),
        (
            "esp",
            mutate(v6(), false, |f| f[20] = 50),
            ParseError::Ipv6ExtensionHeader,
        ),
        (
            "ipv6 fragment",
            mutate(v6(), false, |f| f[20] = 44),
            ParseError::Fragment,
        ),
        // L4.
        (
            "tcp truncated",
            FrameBuilder::ipv4(V4_SRC, V4_DST)
                .protocol(6)
                .payload(&[0; 19])
                .build(),
            ParseError::Truncated,
        ),
        (
            "udp truncated",
            FrameBuilder::ipv6(V6_SRC, V6_DST)
                .protocol(17)
                .payload(&[0; 7])
                .build(),
            ParseError::Truncated,
        ),
        (
            "udp truncated by total length, padding present",
            mutate(v4_udp_builder().pad_to(60).build(), true, |f| {
                f[16..18].copy_from_slice(&24u16.to_be_bytes())
            }),
            ParseError::Truncated,
        ),
        (
            "tcp data offset 4",
            mutate(v6(), false, |f| f[54 + 12] = 4 << 4),
            ParseError::BadL4Header,
        ),
        (
            "tcp data offset past payload",
            mutate(v6(), false, |f| f[54 + 12] = 6 << 4),
            ParseError::BadL4Header,
        ),
        (
            "udp length 7",
            mutate(v4(), false, |f| {
                f[38..40].copy_from_slice(&7u16.to_be_bytes())
            }),
            ParseError::BadL4Header,
        ),
        (
            "udp length past payload",
            mutate(v4(), false, |f| {
                f[38..40].copy_from_slice(&13u16.to_be_bytes())
            }),
            ParseError::BadL4Header,
        ),
        // Classification order.
        (
            "bad checksum beats ttl",
            mutate(v4_udp_builder().ttl(1).build(), false, |f| f[24] ^= 1),
            ParseError::Ipv4Checksum,
        ),
        (
            "ttl beats fragment",
            v4_udp_builder()
                .ttl(1)
                .ipv4_fragment(true, false, 0)
                .build(),
            ParseError::TtlExpired,
        ),
        (
            "ttl beats options",
            v4_udp_builder().ttl(1).ipv4_options(&[1]).build(),
            ParseError::TtlExpired,
        ),
        (
            "hop limit beats extension header",
            mutate(v6_tcp_builder().ttl(1).build(), false, |f| f[20] = 0),
            ParseError::TtlExpired,
        ),
    ];
    for (name, frame, expected) in cases {
        assert_eq!(parse(&frame), Err(expected), "case {name:?}");
    }
}

#[test]
fn error_kinds_are_indexed_and_named() {
    for (i, e) in ParseError::ALL.iter().enumerate() {
        assert_eq!(e.index(), i);
        assert_eq!(e.to_string(), e.as_str());
    }
    let mut names: Vec<_> = ParseError::ALL.iter().map(|e| e.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), ParseError::COUNT);
    assert!(ParseError::Ipv4Checksum.is_malformed());
    assert!(!ParseError::TtlExpired.is_malformed());
}

#[test]
fn forward_rewrite_ipv4_fixture() {
    let mut frame = V4_UDP;
    let p = parse(&frame).unwrap();
    forward_rewrite(&mut frame, &p, NEW_SRC_MAC, NEW_DST_MAC).unwrap();
    assert_eq!(frame, V4_UDP_FORWARDED);
    assert_eq!(parse(&frame).unwrap().ttl, 63);
}

#[test]
fn forward_rewrite_ipv6_fixture() {
    let mut frame = V6_TCP;
    let p = parse(&frame).unwrap();
    forward_rewrite(&mut frame, &p, NEW_SRC_MAC, NEW_DST_MAC).unwrap();
    let mut expected = V6_TCP;
    expected[..6].copy_from_slice(&NEW_DST_MAC);
    expected[6..12].copy_from_slice(&NEW_SRC_MAC);
    expected[21] = 63;
    assert_eq!(frame, expected);
    // Hop limit is outside the TCP pseudo-header.
    assert_eq!(l4_checksum_ok(&frame), Some(true));
}

#[test]
fn forward_rewrite_down_to_ttl_one() {
    let mut frame = v4_udp_builder().ttl(2).build();
    let p = parse(&frame).unwrap();
    forward_rewrite(&mut frame, &p, NEW_SRC_MAC, NEW_DST_MAC).unwrap();
    assert_eq!(frame[22], 1);
    assert_eq!(ipv4_header_checksum_ok(&frame), Some(true));
    // The next hop will not forward it.
    assert_eq!(parse(&frame), Err(ParseError::TtlExpired));
}

#[test]
fn mark_ce_ipv4_fixture() {
    let mut frame = V4_UDP;
    let p = parse(&frame).unwrap();
    assert_eq!(mark_ce(&mut frame, &p), Ok(CeMark::Marked));
    assert_eq!(frame, V4_UDP_CE);
    assert_eq!(parse(&frame).unwrap().ecn, Ecn::Ce);
    assert_eq!(mark_ce(&mut frame, &p), Ok(CeMark::AlreadyCe));
    assert_eq!(frame, V4_UDP_CE);
}

#[test]
fn mark_ce_ipv6_fixture() {
    let mut frame = V6_TCP;
    let p = parse(&frame).unwrap();
    assert_eq!(mark_ce(&mut frame, &p), Ok(CeMark::Marked));
    let mut expected = V6_TCP;
    expected[15] = 0xb1; // traffic class 0x29 -> 0x2b; flow label nibble kept
    assert_eq!(frame, expected);
    let q = parse(&frame).unwrap();
    assert_eq!((q.ecn, q.dscp), (Ecn::Ce, 10));
    assert_eq!(mark_ce(&mut frame, &p), Ok(CeMark::AlreadyCe));
    assert_eq!(frame, expected);
}

#[test]
fn mark_ce_leaves_not_ect_alone() {
    for mut frame in [
        v4_udp_builder().ecn(Ecn::NotEct).dscp(46).build(),
        v6_tcp_builder().ecn(Ecn::NotEct).dscp(46).build(),
    ] {
        let before = frame.clone();
        let p = parse(&frame).unwrap();
        assert_eq!(mark_ce(&mut frame, &p), Ok(CeMark::NotEct));
        assert_eq!(frame, before);
    }
    for ecn in [Ecn::Ect0, Ecn::Ect1] {
        let mut frame = v4_udp_builder().ecn(ecn).dscp(46).build();
        let p = parse(&frame).unwrap();
        assert_eq!(mark_ce(&mut frame, &p), Ok(CeMark::Marked));
        let q = parse(&frame).unwrap();
        assert_eq!((q.ecn, q.dscp), (Ecn::Ce, 46));
    }
}

/// An untagged frame holding only a 20-byte IPv4 header (protocol 253,
/// experimental: no L4 header needed) with the given ID, TTL and TOS and its
/// fully computed checksum.
fn header_frame(id: u16, ttl: u8, tos: u8) -> Vec<u8> {
    let mut f = vec![0u8; 14];
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    f.extend_from_slice(&[
        0x45, tos, 0x00, 0x14, 0, 0, 0x40, 0x00, ttl, 253, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ]);
    f[18..20].copy_from_slice(&id.to_be_bytes());
    assert!(fix_ipv4_checksum(&mut f));
    f
}

fn checksum_field(f: &[u8]) -> u16 {
    u16::from_be_bytes([f[24], f[25]])
}

fn full_recompute(f: &[u8]) -> u16 {
    let mut g = f.to_vec();
    fix_ipv4_checksum(&mut g);
    checksum_field(&g)
}

/// The corners of ones' complement arithmetic: a checksum that must come
/// out as 0x0000 after the update (never 0xFFFF), and one that is 0x0000
/// before it. Every ID is tried, so both corners are hit.
#[test]
fn checksum_zero_corners() {
    let mut zero_after = 0;
    let mut zero_before = 0;
    for (ttl, tos) in [(2u8, 0x02u8), (64, 0x01), (255, 0xfe)] {
        for id in 0..=u16::MAX {
            let mut f = header_frame(id, ttl, tos);
            zero_before += usize::from(checksum_field(&f) == 0);
            let p = parse(&f).unwrap_or_else(|e| panic!("id {id}: {e}"));

            forward_rewrite(&mut f, &p, NEW_SRC_MAC, NEW_DST_MAC).unwrap();
            let after = checksum_field(&f);
            assert_eq!(after, full_recompute(&f), "ttl {ttl} id {id}");
            zero_after += usize::from(after == 0);

            assert_eq!(mark_ce(&mut f, &p), Ok(CeMark::Marked));
            let after = checksum_field(&f);
            assert_eq!(after, full_recompute(&f), "tos {tos} id {id}");
            zero_after += usize::from(after == 0);
        }
    }
    assert!(zero_after >= 6, "corner not reached");
    assert!(zero_before >= 3, "corner not reached");
}

/// A sender may write a zero checksum as 0xFFFF (negative zero): it
/// verifies, and both rewrites keep it verifying.
#[test]
fn negative_zero_checksum_input() {
    let mut f = (0..=u16::MAX)
        .map(|id| header_frame(id, 64, Ecn::Ect0.bits()))
        .find(|f| checksum_field(f) == 0)
        .unwrap();
    f[24..26].copy_from_slice(&[0xff, 0xff]);
    assert_eq!(ipv4_header_checksum_ok(&f), Some(true));
    let p = parse(&f).unwrap();
    assert_eq!(mark_ce(&mut f, &p), Ok(CeMark::Marked));
    assert_eq!(ipv4_header_checksum_ok(&f), Some(true));
    forward_rewrite(&mut f, &p, NEW_SRC_MAC, NEW_DST_MAC).unwrap();
    assert_eq!(ipv4_header_checksum_ok(&f), Some(true));
    assert_eq!(parse(&f).unwrap().ttl, 63);
}

#[test]
fn rewrite_rejects_foreign_parsed_frame() {
    let p4 = parse(&V4_UDP).unwrap();
    let p6 = parse(&V6_TCP).unwrap();

    // IPv4 description, IPv6 bytes (and the reverse): refused, untouched.
    let mut frame = V6_TCP;
    assert_eq!(
        forward_rewrite(&mut frame, &p4, NEW_SRC_MAC, NEW_DST_MAC),
        Err(RewriteError::FrameMismatch)
    );
    assert_eq!(mark_ce(&mut frame, &p4), Err(RewriteError::FrameMismatch));
    assert_eq!(frame, V6_TCP);
    let mut frame = V4_UDP;
    assert_eq!(
        forward_rewrite(&mut frame, &p6, NEW_SRC_MAC, NEW_DST_MAC),
        Err(RewriteError::FrameMismatch)
    );
    assert_eq!(mark_ce(&mut frame, &p6), Err(RewriteError::FrameMismatch));
    assert_eq!(frame, V4_UDP);

    // Frame too short, or offsets out of range.
    for len in 0..V4_UDP.len().min(34) {
        let mut short = V4_UDP[..len].to_vec();
        assert_eq!(
            forward_rewrite(&mut short, &p4, NEW_SRC_MAC, NEW_DST_MAC),
            Err(RewriteError::FrameMismatch)
        );
        assert_eq!(mark_ce(&mut short, &p4), Err(RewriteError::FrameMismatch));
        assert_eq!(short, V4_UDP[..len]);
    }
    for l3_offset in [0, 11, usize::MAX, usize::MAX - 5] {
        let bogus = ParsedFrame { l3_offset, ..p4 };
        let mut frame = V4_UDP;
        assert!(forward_rewrite(&mut frame, &bogus, NEW_SRC_MAC, NEW_DST_MAC).is_err());
        assert!(mark_ce(&mut frame, &bogus).is_err());
        assert_eq!(frame, V4_UDP);
    }

    // TTL changed to 1 since parsing: refused, untouched.
    let mut frame = V4_UDP;
    frame[22] = 1;
    assert_eq!(
        forward_rewrite(&mut frame, &p4, NEW_SRC_MAC, NEW_DST_MAC),
        Err(RewriteError::TtlExpired)
    );
    let mut frame = V6_TCP;
    frame[21] = 0;
    assert_eq!(
        forward_rewrite(&mut frame, &p6, NEW_SRC_MAC, NEW_DST_MAC),
        Err(RewriteError::TtlExpired)
    );
    assert_eq!(frame[..12], V6_TCP[..12]);
}

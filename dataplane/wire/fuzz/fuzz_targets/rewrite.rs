//! Structure-aware fuzzing of the in-place rewrites.
//!
//! The `parse` target mutates raw bytes, so almost every mutated IPv4 header
//! fails its checksum and `forward_rewrite` / `mark_ce` are rarely reached.
//! Here the input is decoded (with `arbitrary`) into the fields of a frame
//! that is then built with a correct header checksum: IPv4 or IPv6, TCP,
//! UDP, RoCEv2, ICMP echo or any other protocol, every ECN codepoint, every
//! TTL / hop limit (1 and 2 get their own variants), and an IPv4 header
//! checksum steered to a chosen value (by picking the identification field),
//! so that checksums at and around 0x0000 / 0xFFFF occur before and after a
//! rewrite. Each frame is then checked:
//!
//! * `parse` accepts it with exactly the fields it was built from, or
//!   refuses it for the reason its fields imply (TTL <= 1, IPv6 extension
//!   header, ...);
//! * `forward_rewrite` changes the MACs, decrements TTL / hop limit by one
//!   and stores the IPv4 header checksum a full recompute gives, and changes
//!   no other byte; the L4 checksum keeps its validity; a frame whose TTL is
//!   0 or 1 is refused with `TtlExpired`, unchanged;
//! * `mark_ce` leaves Not-ECT and CE frames unchanged (reporting `NotEct`
//!   and `AlreadyCe`) and turns ECT(0)/ECT(1) into CE with a recomputed
//!   checksum and no other change;
//! * marking then forwarding gives the same bytes as forwarding then
//!   marking;
//! * a `ParsedFrame` applied to a shorter or different-version frame gives
//!   `FrameMismatch`, with the frame unchanged.
#![no_main]

use arbitrary::Arbitrary;
use lcmp_wire::checksum::add;
use lcmp_wire::ip::{is_ipv6_extension_header, IPV6_NH_FRAGMENT, PROTO_TCP, PROTO_UDP};
use lcmp_wire::testing::{ipv4_header_checksum_ok, l4_checksum_ok, FrameBuilder};
use lcmp_wire::{
    forward_rewrite, ipv4_checksum, mark_ce, parse, Bth, CeMark, Ecn, FlowTuple, ParseError,
    ParsedFrame, RewriteError, L3,
};
use libfuzzer_sys::fuzz_target;

/// Ethernet header length: the IP header starts here.
const ETH: usize = 14;
/// Frame offsets of the IPv4 fields the rewrites touch.
const V4_TOS: usize = ETH + 1;
const V4_TTL: usize = ETH + 8;
const V4_CSUM: usize = ETH + 10;
const V4_END: usize = ETH + 20;
/// Frame offsets of the IPv6 fields the rewrites touch.
const V6_TC_LOW: usize = ETH + 1;
const V6_HOP: usize = ETH + 7;
/// Largest application payload built: keeps every frame under 1514 bytes.
const MAX_PAYLOAD: usize = 1400;

#[derive(Arbitrary, Debug)]
enum Ip {
    V4 {
        src: [u8; 4],
        dst: [u8; 4],
        dont_fragment: bool,
        /// The header checksum to steer to (IPv4 only).
        checksum: ChecksumTarget,
        /// Store a 0x0000 checksum as 0xFFFF (the other ones' complement
        /// zero, which verifies just as well).
        negative_zero: bool,
    },
    V6 {
        src: [u8; 16],
        dst: [u8; 16],
        flow_label: u32,
    },
}

/// The IPv4 header checksum the frame is built with.
#[derive(Arbitrary, Debug)]
enum ChecksumTarget {
    /// Whatever identification 0 gives.
    Natural,
    /// `base + delta` (wrapping), `delta` in -128..=127: around 0x0000 and
    /// 0xFFFF, and around 0xFEFF, which a TTL decrement turns into 0x0000.
    Near { base: Edge, delta: i8 },
    /// Any value.
    Exact(u16),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Edge {
    Zero,
    Max,
    /// A TTL decrement adds 0x0100 to the checksum: this becomes 0x0000.
    ZeroAfterTtl,
    /// A CE mark subtracts 1 or 2 from the checksum: around 0x0001 the
    /// result is at the zero edge.
    One,
}

#[derive(Arbitrary, Debug)]
enum L4 {
    Tcp {
        sport: u16,
        dport: u16,
        seq: u32,
        ack: u32,
        flags: u8,
    },
    Udp {
        sport: u16,
        dport: u16,
        /// IPv4 only: a zero UDP checksum ("none").
        no_checksum: bool,
    },
    Rocev2 {
        sport: u16,
        opcode: u8,
        pkey: u16,
        dest_qp: u32,
        ack_request: bool,
        psn: u32,
    },
    IcmpEcho {
        ident: u16,
        seq: u16,
    },
    /// Any protocol number; the payload is the whole IP payload.
    Other(u8),
}

/// TTL / hop limit; the values around expiry get variants of their own so
/// the fuzzer hits them as often as the whole rest of the range.
#[derive(Arbitrary, Debug)]
enum Ttl {
    Zero,
    One,
    Two,
    Three,
    Max,
    Any(u8),
}

#[derive(Arbitrary, Debug)]
enum EcnBits {
    NotEct,
    Ect0,
    Ect1,
    Ce,
}

#[derive(Arbitrary, Debug)]
struct Input {
    ip: Ip,
    l4: L4,
    ttl: Ttl,
    dscp: u8,
    ecn: EcnBits,
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    new_src_mac: [u8; 6],
    new_dst_mac: [u8; 6],
    /// Flip this mask into the L4 checksum after building (0: valid).
    corrupt_l4: u16,
    /// Ethernet padding after the datagram (its content must survive).
    padding: [u8; 8],
    padding_len: u8,
    /// Length the `FrameMismatch` check truncates the frame to.
    cut: u8,
    payload: Vec<u8>,
}

impl Ttl {
    fn value(&self) -> u8 {
        match *self {
            Ttl::Zero => 0,
            Ttl::One => 1,
            Ttl::Two => 2,
            Ttl::Three => 3,
            Ttl::Max => 255,
            Ttl::Any(t) => t,
        }
    }
}

impl EcnBits {
    fn ecn(&self) -> Ecn {
        match self {
            EcnBits::NotEct => Ecn::NotEct,
            EcnBits::Ect0 => Ecn::Ect0,
            EcnBits::Ect1 => Ecn::Ect1,
            EcnBits::Ce => Ecn::Ce,
        }
    }
}

impl ChecksumTarget {
    fn value(&self) -> Option<u16> {
        match *self {
            ChecksumTarget::Natural => None,
            ChecksumTarget::Near { base, delta } => {
                let base: u16 = match base {
                    Edge::Zero => 0x0000,
                    Edge::Max => 0xFFFF,
                    Edge::ZeroAfterTtl => 0xFEFF,
                    Edge::One => 0x0001,
                };
                Some(base.wrapping_add(delta as i16 as u16))
            }
            ChecksumTarget::Exact(c) => Some(c),
        }
    }
}

/// What the frame was built from, for checking `parse`.
struct Built {
    frame: Vec<u8>,
    /// Frame length without the padding.
    unpadded: usize,
    proto: u8,
}

fn builder(input: &Input, ipv4_id: u16) -> FrameBuilder {
    let b = match input.ip {
        Ip::V4 {
            src,
            dst,
            dont_fragment,
            ..
        } => FrameBuilder::ipv4(src, dst)
            .ipv4_fragment(false, dont_fragment, 0)
            .ipv4_id(ipv4_id),
        Ip::V6 {
            src,
            dst,
            flow_label,
        } => FrameBuilder::ipv6(src, dst).flow_label(flow_label),
    };
    let b = b
        .macs(input.src_mac, input.dst_mac)
        .ttl(input.ttl.value())
        .dscp(input.dscp)
        .ecn(input.ecn.ecn())
        .payload(&input.payload[..input.payload.len().min(MAX_PAYLOAD)]);
    match input.l4 {
        L4::Tcp {
            sport,
            dport,
            seq,
            ack,
            flags,
        } => b.tcp(sport, dport).tcp_seq(seq, ack).tcp_flags(flags),
        L4::Udp { sport, dport, .. } => b.udp(sport, dport),
        L4::Rocev2 {
            sport,
            opcode,
            pkey,
            dest_qp,
            ack_request,
            psn,
        } => b.rocev2(
            sport,
            Bth {
                opcode,
                pkey,
                dest_qp,
                ack_request,
                psn,
            },
        ),
        L4::IcmpEcho { ident, seq } => b.icmp_echo(ident, seq),
        L4::Other(proto) => b.protocol(proto),
    }
}

/// The full recompute of an IPv4 header checksum: the reference the
/// incremental updates must equal.
fn recomputed(frame: &[u8]) -> u16 {
    let mut h = [0u8; 20];
    h.copy_from_slice(&frame[ETH..V4_END]);
    h[10] = 0;
    h[11] = 0;
    ipv4_checksum(&h)
}

fn stored_checksum(frame: &[u8]) -> u16 {
    u16::from_be_bytes([frame[V4_CSUM], frame[V4_CSUM + 1]])
}

/// Offset of the L4 checksum field from the L4 header, when the frame's
/// protocol has one the builder fills in.
fn l4_checksum_at(l4: &L4) -> Option<usize> {
    match l4 {
        L4::Tcp { .. } => Some(16),
        L4::Udp { .. } | L4::Rocev2 { .. } => Some(6),
        L4::IcmpEcho { .. } => Some(2),
        L4::Other(_) => None,
    }
}

fn build(input: &Input) -> Built {
    let is_v4 = matches!(input.ip, Ip::V4 { .. });
    let mut frame = builder(input, 0).build();
    if let Ip::V4 {
        checksum,
        negative_zero,
        ..
    } = &input.ip
    {
        if let Some(target) = checksum.value() {
            // With identification 0 the header sums to !c0; identification
            // id makes it !c0 +' id, so id = !target -' !c0 gives checksum
            // `target`. 0xFFFF would need a zero sum, which a header with
            // version 4 cannot have: it stays unreachable.
            let sum0 = !stored_checksum(&frame);
            let id = add(!target, !sum0);
            frame = builder(input, id).build();
            if target != 0xFFFF {
                assert_eq!(stored_checksum(&frame), target, "checksum steering");
            }
        }
        if *negative_zero && stored_checksum(&frame) == 0 {
            frame[V4_CSUM] = 0xFF;
            frame[V4_CSUM + 1] = 0xFF;
        }
        assert_eq!(ipv4_header_checksum_ok(&frame), Some(true));
    }
    let l4_offset = if is_v4 { V4_END } else { ETH + 40 };
    if let (Some(at), true) = (l4_checksum_at(&input.l4), input.corrupt_l4 != 0) {
        let [hi, lo] = input.corrupt_l4.to_be_bytes();
        frame[l4_offset + at] ^= hi;
        frame[l4_offset + at + 1] ^= lo;
    }
    if let L4::Udp {
        no_checksum: true, ..
    } = input.l4
    {
        if is_v4 {
            frame[l4_offset + 6] = 0;
            frame[l4_offset + 7] = 0;
        }
    }
    let unpadded = frame.len();
    let pad = usize::from(input.padding_len) % (input.padding.len() + 1);
    frame.extend_from_slice(&input.padding[..pad]);
    let proto = match (&input.l4, is_v4) {
        (L4::Tcp { .. }, _) => PROTO_TCP,
        (L4::Udp { .. } | L4::Rocev2 { .. }, _) => PROTO_UDP,
        (L4::IcmpEcho { .. }, true) => 1,
        (L4::IcmpEcho { .. }, false) => 58,
        (L4::Other(p), _) => *p,
    };
    Built {
        frame,
        unpadded,
        proto,
    }
}

/// Checks `parse` against the fields the frame was built from. Returns the
/// parsed frame when it is accepted.
fn check_parse(input: &Input, built: &Built) -> Option<ParsedFrame> {
    let ttl = input.ttl.value();
    let is_v4 = matches!(input.ip, Ip::V4 { .. });
    let result = parse(&built.frame);
    if ttl <= 1 {
        assert_eq!(result, Err(ParseError::TtlExpired));
        return None;
    }
    if !is_v4 && built.proto == IPV6_NH_FRAGMENT {
        assert_eq!(result, Err(ParseError::Fragment));
        return None;
    }
    if !is_v4 && is_ipv6_extension_header(built.proto) {
        assert_eq!(result, Err(ParseError::Ipv6ExtensionHeader));
        return None;
    }
    let raw_l4 = matches!(input.l4, L4::Other(PROTO_TCP | PROTO_UDP));
    let p = match result {
        Ok(p) => p,
        // A raw payload under protocol number 6 or 17 need not hold a
        // valid TCP/UDP header.
        Err(ParseError::Truncated | ParseError::BadL4Header) if raw_l4 => return None,
        Err(e) => panic!("built frame refused: {e:?}"),
    };
    assert_eq!(p.l3, if is_v4 { L3::V4 } else { L3::V6 });
    assert_eq!(p.l3_offset, ETH);
    assert_eq!(p.l4_offset, if is_v4 { V4_END } else { ETH + 40 });
    assert_eq!(p.frame_len_unpadded(), built.unpadded);
    assert_eq!(p.ttl, ttl);
    assert_eq!(p.ecn, input.ecn.ecn());
    assert_eq!(p.dscp, input.dscp & 0x3F);
    assert_eq!(p.flow.proto(), built.proto);
    match (&input.ip, &p.flow) {
        (Ip::V4 { src, dst, .. }, FlowTuple::V4 { src: s, dst: d, .. }) => {
            assert_eq!((src, dst), (s, d));
        }
        (Ip::V6 { src, dst, .. }, FlowTuple::V6 { src: s, dst: d, .. }) => {
            assert_eq!((src, dst), (s, d));
        }
        (ip, flow) => panic!("{ip:?} parsed as {flow:?}"),
    }
    let ports = (p.flow.sport(), p.flow.dport());
    match input.l4 {
        L4::Tcp { sport, dport, .. } | L4::Udp { sport, dport, .. } => {
            assert_eq!(ports, (sport, dport));
        }
        L4::Rocev2 {
            sport,
            opcode,
            pkey,
            dest_qp,
            ack_request,
            psn,
        } => {
            assert_eq!(ports, (sport, lcmp_wire::ROCEV2_UDP_PORT));
            assert!(p.is_rocev2());
            assert_eq!(
                p.bth,
                Some(Bth {
                    opcode,
                    pkey,
                    dest_qp: dest_qp & 0xFF_FFFF,
                    ack_request,
                    psn: psn & 0xFF_FFFF,
                })
            );
        }
        L4::IcmpEcho { ident, .. } => assert_eq!(ports, (ident, 0)),
        L4::Other(_) => {}
    }
    Some(p)
}

/// Indices where `a` and `b` differ (same length asserted).
fn changed(a: &[u8], b: &[u8]) -> Vec<usize> {
    assert_eq!(a.len(), b.len(), "a rewrite changed the frame length");
    (0..a.len()).filter(|&i| a[i] != b[i]).collect()
}

/// `mark_ce` on a copy of `frame`: returns the copy.
fn check_mark_ce(frame: &[u8], p: &ParsedFrame) -> Vec<u8> {
    let mut marked = frame.to_vec();
    let outcome = mark_ce(&mut marked, p).expect("mark_ce on an accepted frame");
    let tos_at = match p.l3 {
        L3::V4 => V4_TOS,
        L3::V6 => V6_TC_LOW,
    };
    match p.ecn {
        Ecn::NotEct => {
            assert_eq!(outcome, CeMark::NotEct);
            assert_eq!(marked, frame, "Not-ECT frame changed");
        }
        Ecn::Ce => {
            assert_eq!(outcome, CeMark::AlreadyCe);
            assert_eq!(marked, frame, "CE frame changed");
        }
        Ecn::Ect0 | Ecn::Ect1 => {
            assert_eq!(outcome, CeMark::Marked);
            let diff = changed(frame, &marked);
            match p.l3 {
                L3::V4 => {
                    assert!(
                        diff.iter()
                            .all(|&i| i == V4_TOS || i == V4_CSUM || i == V4_CSUM + 1),
                        "mark_ce changed {diff:?}"
                    );
                    assert_eq!(marked[V4_TOS], frame[V4_TOS] | 0b11);
                    assert_eq!(
                        stored_checksum(&marked),
                        recomputed(&marked),
                        "CE checksum {:#06x} -> {:#06x}",
                        stored_checksum(frame),
                        stored_checksum(&marked)
                    );
                    assert_eq!(ipv4_header_checksum_ok(&marked), Some(true));
                }
                L3::V6 => {
                    assert_eq!(diff, [tos_at], "mark_ce changed {diff:?}");
                    assert_eq!(marked[tos_at], frame[tos_at] | 0b11 << 4);
                }
            }
            let again = parse(&marked).expect("a marked frame still parses");
            assert_eq!(again.ecn, Ecn::Ce);
            assert_eq!((again.flow, again.dscp, again.ttl), (p.flow, p.dscp, p.ttl));
            // Marking twice is a no-op.
            let mut twice = marked.clone();
            assert_eq!(mark_ce(&mut twice, p), Ok(CeMark::AlreadyCe));
            assert_eq!(twice, marked);
        }
    }
    marked
}

/// `forward_rewrite` on a copy of `frame`: returns the copy.
/// `p` is the `ParsedFrame` of the unmarked frame, as in the switch, which
/// marks after parsing; `frame` may be marked already.
fn check_forward(input: &Input, frame: &[u8], p: &ParsedFrame) -> Vec<u8> {
    let ecn = parse(frame).expect("the frame to forward parses").ecn;
    let mut out = frame.to_vec();
    forward_rewrite(&mut out, p, input.new_src_mac, input.new_dst_mac)
        .expect("forward_rewrite on an accepted frame");
    assert_eq!(out[0..6], input.new_dst_mac);
    assert_eq!(out[6..12], input.new_src_mac);
    let diff = changed(frame, &out);
    match p.l3 {
        L3::V4 => {
            assert!(
                diff.iter()
                    .all(|&i| i < 12 || i == V4_TTL || i == V4_CSUM || i == V4_CSUM + 1),
                "forward_rewrite changed {diff:?}"
            );
            assert_eq!(out[V4_TTL], frame[V4_TTL] - 1);
            assert_eq!(
                stored_checksum(&out),
                recomputed(&out),
                "TTL checksum {:#06x} -> {:#06x}",
                stored_checksum(frame),
                stored_checksum(&out)
            );
            assert_eq!(ipv4_header_checksum_ok(&out), Some(true));
        }
        L3::V6 => {
            assert!(
                diff.iter().all(|&i| i < 12 || i == V6_HOP),
                "forward_rewrite changed {diff:?}"
            );
            assert_eq!(out[V6_HOP], frame[V6_HOP] - 1);
        }
    }
    match parse(&out) {
        Ok(after) => {
            assert_eq!(after.ttl, p.ttl - 1);
            assert_eq!((after.flow, after.ecn, after.dscp), (p.flow, ecn, p.dscp));
            assert_eq!(after.frame_len_unpadded(), p.frame_len_unpadded());
            // The pseudo-header covers neither TTL nor TOS: the L4
            // checksum verifies after exactly when it did before.
            let before = l4_checksum_ok(frame);
            assert_eq!(l4_checksum_ok(&out), before);
        }
        Err(e) => assert_eq!((e, p.ttl), (ParseError::TtlExpired, 2)),
    }
    out
}

/// A frame whose TTL / hop limit is 0 or 1 (with a valid checksum) is
/// refused by `forward_rewrite` and left unchanged, even with a
/// `ParsedFrame` taken before its TTL dropped.
fn check_expired(input: &Input, frame: &[u8], p: &ParsedFrame, expired_ttl: u8) {
    let mut stale = frame.to_vec();
    match p.l3 {
        L3::V4 => {
            stale[V4_TTL] = expired_ttl;
            stale[V4_CSUM] = 0;
            stale[V4_CSUM + 1] = 0;
            let c = recomputed(&stale);
            stale[V4_CSUM..V4_CSUM + 2].copy_from_slice(&c.to_be_bytes());
        }
        L3::V6 => stale[V6_HOP] = expired_ttl,
    }
    assert_eq!(parse(&stale), Err(ParseError::TtlExpired));
    let before = stale.clone();
    assert_eq!(
        forward_rewrite(&mut stale, p, input.new_src_mac, input.new_dst_mac),
        Err(RewriteError::TtlExpired)
    );
    assert_eq!(stale, before, "a refused rewrite changed the frame");
}

/// A `ParsedFrame` that does not fit the bytes gives `FrameMismatch` and
/// leaves them alone: a truncated frame, and the other IP version.
fn check_mismatch(input: &Input, frame: &[u8], p: &ParsedFrame) {
    let cut = usize::from(input.cut).min(frame.len());
    // Bytes of the IP header each function reads.
    let needs = ETH
        + match p.l3 {
            L3::V4 => 20,
            L3::V6 => 8,
        };
    let mut short = frame[..cut].to_vec();
    let r = forward_rewrite(&mut short, p, input.new_src_mac, input.new_dst_mac);
    if cut < needs {
        assert_eq!(r, Err(RewriteError::FrameMismatch));
        assert_eq!(short, frame[..cut], "a refused rewrite changed the frame");
    } else {
        assert_eq!(r, Ok(()));
    }
    let mut short = frame[..cut].to_vec();
    let r = mark_ce(&mut short, p);
    if cut < needs {
        assert_eq!(r, Err(RewriteError::FrameMismatch));
        assert_eq!(short, frame[..cut], "a refused mark changed the frame");
    } else {
        assert!(r.is_ok());
    }
    let mut other = *p;
    other.l3 = match p.l3 {
        L3::V4 => L3::V6,
        L3::V6 => L3::V4,
    };
    let mut copy = frame.to_vec();
    assert_eq!(
        forward_rewrite(&mut copy, &other, input.new_src_mac, input.new_dst_mac),
        Err(RewriteError::FrameMismatch)
    );
    assert_eq!(mark_ce(&mut copy, &other), Err(RewriteError::FrameMismatch));
    assert_eq!(copy, frame, "a refused rewrite changed the frame");
}

fuzz_target!(|input: Input| {
    let built = build(&input);
    let Some(p) = check_parse(&input, &built) else {
        return;
    };
    let frame = &built.frame;
    let marked = check_mark_ce(frame, &p);
    let forwarded = check_forward(&input, frame, &p);
    // The switch marks, then forwards: the order must not matter.
    let marked_then_forwarded = check_forward(&input, &marked, &p);
    let mut forwarded_then_marked = forwarded.clone();
    mark_ce(&mut forwarded_then_marked, &p).expect("mark_ce after forwarding");
    assert_eq!(marked_then_forwarded, forwarded_then_marked);
    check_expired(&input, frame, &p, p.ttl % 2);
    check_mismatch(&input, frame, &p);
});

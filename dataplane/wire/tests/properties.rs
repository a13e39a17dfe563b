//! Property tests: `parse` never panics on arbitrary or mutated frames; for
//! every accepted frame the rewrites never panic and keep the IPv4 header
//! checksum valid; incremental checksum updates equal a full recompute.

use lcmp_wire::testing::{
    fix_ipv4_checksum, ipv4_header_checksum_ok, l4_checksum_ok, FrameBuilder,
};
use lcmp_wire::{
    forward_rewrite, mark_ce, parse, Bth, CeMark, Ecn, FlowTuple, ParsedFrame, RewriteError, L3,
};
use proptest::prelude::*;

const SRC_MAC: [u8; 6] = [0x02, 0xaa, 0, 0, 0, 1];
const DST_MAC: [u8; 6] = [0x02, 0xbb, 0, 0, 0, 2];

#[derive(Clone, Debug)]
enum L4Kind {
    Tcp(u16, u16),
    Udp(u16, u16),
    RoCe(u16, Bth),
    Icmp(u16, u16),
    Other(u8),
}

#[derive(Clone, Debug)]
struct Spec {
    v6: bool,
    src: [u8; 16],
    dst: [u8; 16],
    ttl: u8,
    dscp: u8,
    ecn: Ecn,
    id: u16,
    l4: L4Kind,
    payload: Vec<u8>,
    pad_to: usize,
}

impl Spec {
    fn builder(&self) -> FrameBuilder {
        let b = if self.v6 {
            FrameBuilder::ipv6(self.src, self.dst)
        } else {
            let mut s = [0; 4];
            let mut d = [0; 4];
            s.copy_from_slice(&self.src[..4]);
            d.copy_from_slice(&self.dst[..4]);
            FrameBuilder::ipv4(s, d)
        };
        let b = match self.l4 {
            L4Kind::Tcp(s, d) => b.tcp(s, d),
            L4Kind::Udp(s, d) => b.udp(s, d),
            L4Kind::RoCe(s, bth) => b.rocev2(s, bth),
            L4Kind::Icmp(i, q) => b.icmp_echo(i, q),
            L4Kind::Other(p) => b.protocol(p),
        };
        b.ttl(self.ttl)
            .dscp(self.dscp)
            .ecn(self.ecn)
            .ipv4_id(self.id)
            .payload(&self.payload)
            .pad_to(self.pad_to)
    }
}

fn ecn() -> impl Strategy<Value = Ecn> {
    (0u8..4).prop_map(Ecn::from_bits)
}

fn bth() -> impl Strategy<Value = Bth> {
    (
        any::<u8>(),
        any::<u16>(),
        0u32..1 << 24,
        any::<bool>(),
        0u32..1 << 24,
    )
        .prop_map(|(opcode, pkey, dest_qp, ack_request, psn)| Bth {
            opcode,
            pkey,
            dest_qp,
            ack_request,
            psn,
        })
}

/// Protocols that are neither TCP, UDP, ICMP nor an IPv6 extension header.
fn other_proto() -> impl Strategy<Value = u8> {
    prop_oneof![
        Just(47u8),
        Just(59),
        Just(132),
        Just(4),
        Just(41),
        Just(103)
    ]
}

fn l4() -> impl Strategy<Value = L4Kind> {
    prop_oneof![
        (any::<u16>(), any::<u16>()).prop_map(|(s, d)| L4Kind::Tcp(s, d)),
        (any::<u16>(), any::<u16>()).prop_map(|(s, d)| L4Kind::Udp(s, d)),
        (any::<u16>(), bth()).prop_map(|(s, b)| L4Kind::RoCe(s, b)),
        (any::<u16>(), any::<u16>()).prop_map(|(i, q)| L4Kind::Icmp(i, q)),
        other_proto().prop_map(L4Kind::Other),
    ]
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        any::<bool>(),
        any::<[u8; 16]>(),
        any::<[u8; 16]>(),
        2u8..=255,
        0u8..64,
        ecn(),
        any::<u16>(),
        l4(),
        prop::collection::vec(any::<u8>(), 0..96),
        prop_oneof![Just(0usize), Just(60), 0usize..200],
    )
        .prop_map(
            |(v6, src, dst, ttl, dscp, ecn, id, l4, payload, pad_to)| Spec {
                v6,
                src,
                dst,
                ttl,
                dscp,
                ecn,
                id,
                l4,
                payload,
                pad_to,
            },
        )
}

/// A frame `parse` accepted: the rewrites must not panic, must keep the
/// IPv4 header checksum valid and equal to a full recompute (when it was
/// the canonical one), and must change only what they are meant to.
fn check_rewrites(frame: &[u8], p: &ParsedFrame) -> Result<(), TestCaseError> {
    let canonical = {
        let mut g = frame.to_vec();
        fix_ipv4_checksum(&mut g);
        g == frame
    };

    let mut f = frame.to_vec();
    let outcome = mark_ce(&mut f, p);
    prop_assert!(outcome.is_ok());
    let q = parse(&f).map_err(|e| TestCaseError::fail(format!("after mark_ce: {e}")))?;
    let expected_ecn = if p.ecn == Ecn::NotEct {
        Ecn::NotEct
    } else {
        Ecn::Ce
    };
    prop_assert_eq!(q.ecn, expected_ecn);
    prop_assert_eq!(q.dscp, p.dscp);
    prop_assert_eq!(q.flow, p.flow);
    prop_assert_eq!(outcome == Ok(CeMark::Marked), f != frame);
    check_ipv4_checksum(&f, p, canonical)?;

    forward_rewrite(&mut f, p, SRC_MAC, DST_MAC).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&f[..6], &DST_MAC);
    prop_assert_eq!(&f[6..12], &SRC_MAC);
    check_ipv4_checksum(&f, p, canonical)?;
    match parse(&f) {
        Ok(q) => {
            prop_assert_eq!(q.ttl, p.ttl - 1);
            prop_assert_eq!(q.flow, p.flow);
        }
        Err(e) => {
            prop_assert_eq!(p.ttl, 2);
            prop_assert_eq!(e, lcmp_wire::ParseError::TtlExpired);
        }
    }
    // Bytes beyond the IP header and the MACs are untouched.
    prop_assert_eq!(&f[12..p.l3_offset], &frame[12..p.l3_offset]);
    prop_assert_eq!(&f[p.l4_offset..], &frame[p.l4_offset..]);
    Ok(())
}

fn check_ipv4_checksum(f: &[u8], p: &ParsedFrame, canonical: bool) -> Result<(), TestCaseError> {
    if p.l3 == L3::V4 {
        prop_assert_eq!(ipv4_header_checksum_ok(f), Some(true));
        if canonical {
            let mut g = f.to_vec();
            fix_ipv4_checksum(&mut g);
            prop_assert_eq!(&g[24..26], &f[24..26], "incremental != full recompute");
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn parse_never_panics_on_arbitrary_bytes(frame in prop::collection::vec(any::<u8>(), 0..256)) {
        if let Ok(p) = parse(&frame) {
            check_rewrites(&frame, &p)?;
        }
    }

    /// Arbitrary bytes behind an IPv4 or IPv6 EtherType and a plausible
    /// first IP byte, to get past the first checks more often.
    #[test]
    fn parse_never_panics_on_ip_like_bytes(
        v6 in any::<bool>(),
        first in prop_oneof![Just(0x45u8), Just(0x46), Just(0x4f), Just(0x60), any::<u8>()],
        rest in prop::collection::vec(any::<u8>(), 0..160),
    ) {
        let mut frame = vec![0u8; 12];
        frame.extend_from_slice(&(if v6 { 0x86ddu16 } else { 0x0800 }).to_be_bytes());
        frame.push(first);
        frame.extend_from_slice(&rest);
        if let Ok(p) = parse(&frame) {
            check_rewrites(&frame, &p)?;
        }
    }

    /// Built frames parse to exactly what they were built from, and carry
    /// valid checksums.
    #[test]
    fn built_frames_parse_back(s in spec()) {
        let frame = s.builder().build();
        let p = parse(&frame).map_err(|e| TestCaseError::fail(format!("{e}")))?;
        let (proto, sport, dport) = match s.l4 {
            L4Kind::Tcp(a, b) => (6, a, b),
            L4Kind::Udp(a, b) => (17, a, b),
            L4Kind::RoCe(a, _) => (17, a, 4791),
            // An echo's identifier keys its ping session.
            L4Kind::Icmp(ident, _) => (if s.v6 { 58 } else { 1 }, ident, 0),
            L4Kind::Other(p) => (p, 0, 0),
        };
        let flow = if s.v6 {
            FlowTuple::V6 { src: s.src, dst: s.dst, proto, sport, dport }
        } else {
            let mut src = [0; 4];
            let mut dst = [0; 4];
            src.copy_from_slice(&s.src[..4]);
            dst.copy_from_slice(&s.dst[..4]);
            FlowTuple::V4 { src, dst, proto, sport, dport }
        };
        prop_assert_eq!(p.flow, flow);
        prop_assert_eq!(p.l3, if s.v6 { L3::V6 } else { L3::V4 });
        prop_assert_eq!(p.ttl, s.ttl);
        prop_assert_eq!(p.dscp, s.dscp);
        prop_assert_eq!(p.ecn, s.ecn);
        prop_assert!(p.frame_len_unpadded() <= frame.len());
        prop_assert_eq!(p.frame_len_unpadded(), frame.len().min(s.builder().pad_to(0).build().len()));
        match s.l4 {
            L4Kind::RoCe(_, b) => {
                prop_assert!(p.is_rocev2());
                prop_assert_eq!(p.bth, Some(b));
            }
            L4Kind::Udp(_, 4791) => prop_assert!(p.is_rocev2()),
            _ => prop_assert!(!p.is_rocev2()),
        }
        match s.l4 {
            L4Kind::Other(_) => prop_assert_eq!(l4_checksum_ok(&frame), None),
            _ => prop_assert_eq!(l4_checksum_ok(&frame), Some(true)),
        }
        if !s.v6 {
            prop_assert_eq!(ipv4_header_checksum_ok(&frame), Some(true));
        }
        check_rewrites(&frame, &p)?;
    }

    /// Every prefix of a valid frame: no panic, and anything cut inside the
    /// IP datagram is refused.
    #[test]
    fn truncation_at_every_length(s in spec()) {
        let frame = s.builder().build();
        let p = parse(&frame).map_err(|e| TestCaseError::fail(format!("{e}")))?;
        for len in 0..frame.len() {
            let prefix = &frame[..len];
            match parse(prefix) {
                Ok(q) => {
                    // Only Ethernet padding may be cut.
                    prop_assert!(len >= p.frame_len_unpadded());
                    prop_assert_eq!(q, p);
                    check_rewrites(prefix, &q)?;
                }
                Err(_) => prop_assert!(len < p.frame_len_unpadded()),
            }
            // A ParsedFrame for the whole frame applied to a prefix: an
            // error or a rewrite, never a panic or a write past the end.
            let mut short = prefix.to_vec();
            let _ = forward_rewrite(&mut short, &p, SRC_MAC, DST_MAC);
            let _ = mark_ce(&mut short, &p);
            prop_assert_eq!(short.len(), len);
        }
    }

    /// Random byte flips and overwrites of valid frames.
    #[test]
    fn mutated_frames(
        s in spec(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), any::<bool>()), 1..6),
        fix_checksum in any::<bool>(),
    ) {
        let mut frame = s.builder().build();
        for (at, byte, xor) in edits {
            let i = at.index(frame.len());
            if xor { frame[i] ^= byte } else { frame[i] = byte }
        }
        if fix_checksum && frame.len() > 14 && frame[12..14] == [0x08, 0x00] {
            fix_ipv4_checksum(&mut frame);
        }
        if let Ok(p) = parse(&frame) {
            prop_assert!(p.ttl >= 2);
            prop_assert!(p.frame_len_unpadded() <= frame.len());
            prop_assert!(p.l4_offset <= p.frame_len_unpadded());
            check_rewrites(&frame, &p)?;
        }
    }

    /// Incremental update == full recompute for arbitrary IPv4 headers
    /// (every TOS, ID, flag, TTL, protocol and address bit pattern the fast
    /// path accepts), for both rewrites and in both orders.
    #[test]
    fn incremental_checksum_equals_full_recompute(
        mut hdr in any::<[u8; 20]>(),
        ttl in 2u8..=255,
        ce_first in any::<bool>(),
    ) {
        hdr[0] = 0x45;
        hdr[2..4].copy_from_slice(&20u16.to_be_bytes());
        hdr[6] &= 0xc0; // keep DF and the reserved bit, no MF or offset
        hdr[7] = 0;
        hdr[8] = ttl;
        if matches!(hdr[9], 6 | 17) {
            hdr[9] = 253;
        }
        let mut frame = vec![0u8; 12];
        frame.extend_from_slice(&[0x08, 0x00]);
        frame.extend_from_slice(&hdr);
        fix_ipv4_checksum(&mut frame);
        let p = parse(&frame).map_err(|e| TestCaseError::fail(format!("{e}")))?;
        let mut f = frame.clone();
        if ce_first {
            prop_assert!(mark_ce(&mut f, &p).is_ok());
            check_ipv4_checksum(&f, &p, true)?;
        }
        prop_assert_eq!(forward_rewrite(&mut f, &p, SRC_MAC, DST_MAC), Ok(()));
        check_ipv4_checksum(&f, &p, true)?;
        if !ce_first {
            prop_assert!(mark_ce(&mut f, &p).is_ok());
            check_ipv4_checksum(&f, &p, true)?;
        }
        // Decrement until the TTL runs out: every step stays exact.
        let mut steps = 1usize;
        loop {
            match forward_rewrite(&mut f, &p, SRC_MAC, DST_MAC) {
                Ok(()) => check_ipv4_checksum(&f, &p, true)?,
                Err(e) => {
                    prop_assert_eq!(e, RewriteError::TtlExpired);
                    break;
                }
            }
            steps += 1;
        }
        prop_assert_eq!(steps, usize::from(ttl) - 1);
        prop_assert_eq!(f[22], 1);
    }
}

//! The INT / timestamp block: hand-written hex fixtures (every byte and
//! checksum worked out by hand below), then properties (never panics,
//! round trips, a push changes only what it says).

use lcmp_wire::int::{BTH_INT_BYTE, INT_FLAG_OVERFLOW};
use lcmp_wire::testing::{l4_checksum_ok, FrameBuilder};
use lcmp_wire::{
    block_len, parse, push_hop, write_collect, write_echo, write_timestamp, Bth, IntBlock,
    IntError, IntHop, IntKind, PushOutcome, BTH_INT, INT_MAX_SLOTS,
};
use proptest::prelude::*;

/// A named change to a frame.
type Change = (&'static str, Box<dyn Fn(&mut Vec<u8>)>);
/// A named change to a frame and the error it makes.
type Broken = (&'static str, Box<dyn Fn(&mut Vec<u8>)>, IntError);

/// RoCEv2 RDMA WRITE Only 10.0.0.1:49152 -> 10.0.0.2:4791, QP 0x11, PSN 5,
/// ack request, BTH byte 4 = 0x20 (BTH_INT), a collect block of capacity 2,
/// no payload, ICRC zero.
///
/// UDP length 8 + 12 + (4 + 2 * 16) + 4 = 60 = 0x3c; IPv4 total 80 = 0x50.
/// IPv4 checksum: 4500 + 0050 + 0000 + 4000 + 4011 + 0a00 + 0001 + 0a00 +
/// 0002 = d964, complement 269b.
/// UDP checksum: pseudo header 0a00 + 0001 + 0a00 + 0002 + 0011 + 003c =
/// 1450; UDP header c000 + 12b7 + 003c -> e743; BTH 0a40 + ffff + 2000 +
/// 0011 + 8000 + 0005 -> 1450 + d2f3 = e743, + 0a40 = f183, + ffff =
/// f183 (end-around carry), + 2000 = 1184, + 0011 = 1195, + 8000 = 9195,
/// + 0005 = 919a; block 0102 -> 929c; complement 6d63.
#[rustfmt::skip]
const COLLECT2: [u8; 94] = [
    // Ethernet
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x00,
    // IPv4
    0x45, 0x00, 0x00, 0x50, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x26, 0x9b,
    0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x00, 0x02,
    // UDP
    0xc0, 0x00, 0x12, 0xb7, 0x00, 0x3c, 0x6d, 0x63,
    // BTH
    0x0a, 0x40, 0xff, 0xff, 0x20, 0x00, 0x00, 0x11, 0x80, 0x00, 0x00, 0x05,
    // block: collect, capacity 2, nhop 0, flags 0, two empty slots
    0x01, 0x02, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    // ICRC
    0x00, 0x00, 0x00, 0x00,
];

/// Where the UDP checksum and the block are in `COLLECT2`.
const UDP_CSUM_AT: usize = 14 + 20 + 6;
const BLOCK_AT: usize = 14 + 20 + 8 + 12;

/// 50 Mbit/s (100 Gbit/s / 2000) = 50 000 kbit/s = 0xc350; 3000 = 0xbb8
/// bytes queued; the counters near their wrap.
const HOP1: IntHop = IntHop {
    link_rate_kbps: 50_000,
    qlen_bytes: 3_000,
    tx_bytes: 0x1234_5678,
    ts_ns: 0xffff_fff0,
};
const HOP1_BYTES: [u8; 16] = [
    0x00, 0x00, 0xc3, 0x50, 0x00, 0x00, 0x0b, 0xb8, 0x12, 0x34, 0x56, 0x78, 0xff, 0xff, 0xff, 0xf0,
];
/// 25 Gbit/s = 25 000 000 kbit/s = 0x017d7840.
const HOP2: IntHop = IntHop {
    link_rate_kbps: 25_000_000,
    qlen_bytes: 0,
    tx_bytes: 5,
    ts_ns: 0x10,
};
const HOP2_BYTES: [u8; 16] = [
    0x01, 0x7d, 0x78, 0x40, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x10,
];

fn collect2_builder() -> FrameBuilder {
    let mut block = [0u8; 36];
    assert_eq!(write_collect(&mut block, 2), Ok(36));
    FrameBuilder::ipv4([10, 0, 0, 1], [10, 0, 0, 2])
        .rocev2(
            49152,
            Bth {
                opcode: 0x0a,
                pkey: 0xffff,
                dest_qp: 0x11,
                ack_request: true,
                psn: 5,
            },
        )
        .int_block(&block)
}

#[test]
fn the_builder_lays_out_the_fixture() {
    let mut built = collect2_builder().build();
    // The builder leaves BTH byte 1 at 0; the fixture has M (0x40) as
    // lcmp-traffic sends it: the builder's sum is 0x0040 less, so its
    // complement is 6d63 + 0040 = 6da3.
    assert_eq!(&built[..40], &COLLECT2[..40]);
    assert_eq!(&built[40..42], &[0x6d, 0xa3]);
    built[40..42].copy_from_slice(&[0x6d, 0x63]);
    built[43] = 0x40;
    assert_eq!(built, COLLECT2);
    assert_eq!(l4_checksum_ok(&COLLECT2), Some(true));
    // The fast path accepts it as RoCEv2.
    let p = parse(&COLLECT2).unwrap();
    assert!(p.is_rocev2());
    assert_eq!(p.bth.unwrap().psn, 5);
}

#[test]
fn two_hops_then_overflow() {
    let mut f = COLLECT2;
    assert_eq!(push_hop(&mut f, HOP1), Ok(PushOutcome::Pushed));
    let mut want = COLLECT2;
    want[UDP_CSUM_AT..UDP_CSUM_AT + 2].copy_from_slice(&[0, 0]);
    want[BLOCK_AT + 2] = 1; // nhop
    want[BLOCK_AT + 4..BLOCK_AT + 20].copy_from_slice(&HOP1_BYTES);
    assert_eq!(f, want);

    assert_eq!(push_hop(&mut f, HOP2), Ok(PushOutcome::Pushed));
    want[BLOCK_AT + 2] = 2;
    want[BLOCK_AT + 20..BLOCK_AT + 36].copy_from_slice(&HOP2_BYTES);
    assert_eq!(f, want);

    // Full: OVERFLOW (flags 0x01), no slot or nhop touched.
    assert_eq!(push_hop(&mut f, HOP1), Ok(PushOutcome::Overflow));
    want[BLOCK_AT + 3] = 0x01;
    assert_eq!(f, want);
    // Again: nothing more to change.
    assert_eq!(push_hop(&mut f, HOP2), Ok(PushOutcome::Overflow));
    assert_eq!(f, want);

    let block = IntBlock::in_udp_payload(&f[42..]).unwrap().unwrap();
    assert_eq!(block.kind(), IntKind::Collect);
    assert_eq!((block.capacity(), block.nhop()), (2, 2));
    assert!(block.overflow());
    assert_eq!(block.len(), 36);
    assert_eq!(block.hops().collect::<Vec<_>>(), vec![HOP1, HOP2]);
    assert_eq!(block.hop(1), Some(HOP2));
    assert_eq!(block.hop(2), None);
    assert_eq!(block.timestamp(), None);
}

#[test]
fn setting_overflow_zeroes_the_checksum_once() {
    // A block that arrives full but without OVERFLOW: the flag is a write,
    // so the UDP checksum goes to 0 with it.
    let mut f = COLLECT2;
    f[BLOCK_AT + 1] = 0; // capacity 0: full at once
    assert_eq!(push_hop(&mut f, HOP1), Ok(PushOutcome::Overflow));
    let mut want = COLLECT2;
    want[BLOCK_AT + 1] = 0;
    want[BLOCK_AT + 3] = INT_FLAG_OVERFLOW;
    want[UDP_CSUM_AT..UDP_CSUM_AT + 2].copy_from_slice(&[0, 0]);
    assert_eq!(f, want);
}

#[test]
fn frames_without_a_collect_block_are_left_alone() {
    let cases: Vec<Change> = vec![
        ("BTH_INT clear", Box::new(|f| f[42 + BTH_INT_BYTE] = 0)),
        ("timestamp kind", Box::new(|f| f[BLOCK_AT] = 2)),
        ("echo kind", Box::new(|f| f[BLOCK_AT] = 3)),
        ("timestamp echo kind", Box::new(|f| f[BLOCK_AT] = 4)),
        ("UDP port 4790", Box::new(|f| f[37] = 0xb6)),
        ("TCP", Box::new(|f| f[23] = 6)),
        (
            "IPv6 ethertype",
            Box::new(|f| f[12..14].copy_from_slice(&[0x86, 0xdd])),
        ),
        ("fragment", Box::new(|f| f[20] = 0x20)),
        ("BTH version 1", Box::new(|f| f[43] = 0x41)),
        ("cut inside the BTH", Box::new(|f| f.truncate(50))),
        (
            "cut inside the Ethernet header",
            Box::new(|f| f.truncate(10)),
        ),
    ];
    for (what, change) in cases {
        let mut f = COLLECT2.to_vec();
        change(&mut f);
        let before = f.clone();
        assert_eq!(push_hop(&mut f, HOP1), Ok(PushOutcome::NotInt), "{what}");
        assert_eq!(f, before, "{what}");
    }
    // A RoCEv2 frame as the builder makes it without a block.
    let mut plain = FrameBuilder::ipv4([10, 0, 0, 1], [10, 0, 0, 2])
        .rocev2(49152, Bth::parse(&COLLECT2[42..54]).unwrap())
        .payload(&[7; 64])
        .build();
    let before = plain.clone();
    assert_eq!(push_hop(&mut plain, HOP1), Ok(PushOutcome::NotInt));
    assert_eq!(plain, before);
}

#[test]
fn broken_blocks_are_errors_and_left_alone() {
    let cases: Vec<Broken> = vec![
        (
            "unknown kind",
            Box::new(|f| f[BLOCK_AT] = 9),
            IntError::BadKind(9),
        ),
        (
            "17 slots",
            Box::new(|f| f[BLOCK_AT + 1] = 17),
            IntError::BadCapacity(17),
        ),
        (
            "3 hops in 2 slots",
            Box::new(|f| f[BLOCK_AT + 2] = 3),
            IntError::BadNhop {
                nhop: 3,
                capacity: 2,
            },
        ),
        // 3 slots need 8 + 12 + 52 + 4 = 76 UDP bytes; the datagram has 60.
        (
            "slots past the ICRC",
            Box::new(|f| f[BLOCK_AT + 1] = 3),
            IntError::Truncated,
        ),
        // UDP length 0x3b: one byte short of block + ICRC.
        (
            "UDP too short",
            Box::new(|f| f[39] = 0x3b),
            IntError::Truncated,
        ),
        // UDP length 0x40 = 64 > the 60 bytes after the IPv4 header.
        (
            "UDP longer than IP",
            Box::new(|f| f[39] = 0x40),
            IntError::Truncated,
        ),
        (
            "cut in the block header",
            Box::new(|f| f.truncate(BLOCK_AT + 2)),
            IntError::Truncated,
        ),
        (
            "cut in the slots",
            Box::new(|f| f.truncate(BLOCK_AT + 10)),
            IntError::Truncated,
        ),
    ];
    for (what, change, err) in cases {
        let mut f = COLLECT2.to_vec();
        change(&mut f);
        let before = f.clone();
        assert_eq!(push_hop(&mut f, HOP1), Err(err), "{what}");
        assert_eq!(f, before, "{what}");
    }
}

#[test]
fn writers_lay_out_the_blocks() {
    let mut buf = [0xaau8; 300];
    assert_eq!(
        write_timestamp(&mut buf, IntKind::Timestamp, 0x0102_0304_0506_0708),
        Ok(12)
    );
    assert_eq!(
        buf[..13],
        [2, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0xaa],
        "12 bytes, nothing after"
    );
    let ts = IntBlock::parse(&buf).unwrap();
    assert_eq!(ts.kind(), IntKind::Timestamp);
    assert_eq!(ts.timestamp(), Some(0x0102_0304_0506_0708));
    assert_eq!(ts.hops().len(), 0);
    assert_eq!(
        write_timestamp(&mut buf, IntKind::Echo, 1),
        Err(IntError::WrongKind(IntKind::Echo))
    );
    assert_eq!(
        write_timestamp(&mut buf[..11], IntKind::TimestampEcho, 1),
        Err(IntError::Truncated)
    );

    let mut buf = [0xaau8; 40];
    assert_eq!(write_echo(&mut buf, &[HOP2, HOP1], true), Ok(36));
    let mut want = [0xaau8; 40];
    want[..4].copy_from_slice(&[3, 2, 2, 1]);
    want[4..20].copy_from_slice(&HOP2_BYTES);
    want[20..36].copy_from_slice(&HOP1_BYTES);
    assert_eq!(buf, want);
    assert_eq!(
        write_echo(&mut buf[..35], &[HOP2, HOP1], false),
        Err(IntError::Truncated)
    );
    assert_eq!(
        write_echo(&mut [0u8; 400], &[HOP1; 17], false),
        Err(IntError::BadCapacity(17))
    );

    // write_collect zeroes the slots it reserves and nothing beyond.
    let mut buf = [0xaau8; 22];
    assert_eq!(write_collect(&mut buf, 1), Ok(20));
    let mut want = [0u8; 22];
    want[..4].copy_from_slice(&[1, 1, 0, 0]);
    want[20..].copy_from_slice(&[0xaa, 0xaa]);
    assert_eq!(buf, want);
    assert_eq!(write_collect(&mut buf, 17), Err(IntError::BadCapacity(17)));
    assert_eq!(write_collect(&mut buf, 2), Err(IntError::Truncated));
}

#[test]
fn the_receiver_echoes_what_it_got() {
    // A capacity-4 collect block with one hop: the echo has capacity = nhop
    // = 1, 4 + 16 = 20 bytes, the flags' OVERFLOW bit only.
    let mut collect = [0u8; 68];
    collect[..4].copy_from_slice(&[1, 4, 1, 0x81]);
    collect[4..20].copy_from_slice(&HOP1_BYTES);
    collect[20..36].fill(0x55); // unfilled slot garbage is not echoed
    let block = IntBlock::parse(&collect).unwrap();
    let mut ack = [0xaau8; 24];
    assert_eq!(block.echo_into(&mut ack), Ok(20));
    let mut want = [0xaau8; 24];
    want[..4].copy_from_slice(&[3, 1, 1, 1]);
    want[4..20].copy_from_slice(&HOP1_BYTES);
    assert_eq!(ack, want);
    let echo = IntBlock::parse(&ack).unwrap();
    assert_eq!(echo.kind(), IntKind::Echo);
    assert!(echo.overflow());
    assert_eq!(echo.hops().collect::<Vec<_>>(), vec![HOP1]);

    let mut ts = [0u8; 12];
    write_timestamp(&mut ts, IntKind::Timestamp, 42).unwrap();
    let mut ack = [0u8; 12];
    assert_eq!(IntBlock::parse(&ts).unwrap().echo_into(&mut ack), Ok(12));
    assert_eq!(ack, [4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 42]);
    assert_eq!(
        IntBlock::parse(&ts).unwrap().echo_into(&mut [0u8; 11]),
        Err(IntError::Truncated)
    );
}

#[test]
fn parse_refuses_inconsistent_headers() {
    assert_eq!(IntBlock::parse(&[1, 2, 0]), Err(IntError::Truncated));
    // Flags of a timestamp block mean nothing: no slots, no overflow
    // (found by the `int` fuzz target: its echo dropped them).
    let ts = IntBlock::parse(&[2, 0, 0, 0xff, 0, 0, 0, 0, 0, 0, 0, 9]).unwrap();
    assert!(!ts.overflow());
    assert_eq!(ts.timestamp(), Some(9));
    assert_eq!(IntBlock::parse(&[0, 0, 0, 0]), Err(IntError::BadKind(0)));
    assert_eq!(
        IntBlock::parse(&[2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
        Err(IntError::BadCapacity(1)),
        "a timestamp block has no slots"
    );
    assert_eq!(
        IntBlock::parse(&[4, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
        Err(IntError::BadNhop {
            nhop: 1,
            capacity: 0
        })
    );
    assert_eq!(
        IntBlock::parse(&[1, 1, 0, 0, 0]),
        Err(IntError::Truncated),
        "one slot is 20 bytes"
    );
    // No BTH_INT: no block, whatever follows.
    let mut payload = COLLECT2[42..].to_vec();
    payload[BTH_INT_BYTE] &= !BTH_INT;
    assert_eq!(IntBlock::in_udp_payload(&payload), Ok(None));
    assert_eq!(IntBlock::in_udp_payload(&payload[..5]), Ok(None));
}

fn hop() -> impl Strategy<Value = IntHop> {
    (any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>()).prop_map(|(r, q, b, t)| IntHop {
        link_rate_kbps: r,
        qlen_bytes: q,
        tx_bytes: b,
        ts_ns: t,
    })
}

/// A RoCEv2 frame with a collect block of `capacity` slots, `filled` of
/// them filled with `0x5a`, and `payload` after it.
fn collect_frame(capacity: u8, filled: u8, payload: &[u8]) -> Vec<u8> {
    let len = block_len(IntKind::Collect, capacity).unwrap();
    let mut block = vec![0u8; len];
    write_collect(&mut block, capacity).unwrap();
    block[2] = filled;
    block[4..4 + 16 * usize::from(filled)].fill(0x5a);
    FrameBuilder::ipv4([10, 0, 0, 1], [10, 0, 0, 2])
        .rocev2(
            1000,
            Bth {
                opcode: 0x07,
                pkey: 0xffff,
                dest_qp: 3,
                ack_request: false,
                psn: 9,
            },
        )
        .int_block(&block)
        .payload(payload)
        .build()
}

proptest! {
    #[test]
    fn push_never_panics_on_any_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..400), h in hop()) {
        let mut f = bytes.clone();
        match push_hop(&mut f, h) {
            Ok(PushOutcome::NotInt) | Err(_) => prop_assert_eq!(f, bytes),
            Ok(_) => prop_assert_eq!(f.len(), bytes.len()),
        }
    }

    #[test]
    fn push_never_panics_on_mutated_frames(
        cap in 0u8..=INT_MAX_SLOTS,
        filled_frac in 0u8..=16,
        payload in proptest::collection::vec(any::<u8>(), 0..64),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6),
        cut in any::<usize>(),
        h in hop(),
    ) {
        let filled = filled_frac.min(cap);
        let mut f = collect_frame(cap, filled, &payload);
        for (at, v) in flips {
            let i = at % f.len();
            f[i] = v;
        }
        f.truncate(cut % (f.len() + 1));
        let before = f.clone();
        let out = push_hop(&mut f, h);
        if matches!(out, Ok(PushOutcome::NotInt) | Err(_)) {
            prop_assert_eq!(f, before);
        }
    }

    /// Pushing into a valid frame changes exactly nhop and one slot (or
    /// the flag) and the UDP checksum, and the hop reads back.
    #[test]
    fn push_writes_only_its_slot(
        cap in 0u8..=INT_MAX_SLOTS,
        filled_frac in 0u8..=16,
        payload in proptest::collection::vec(any::<u8>(), 0..64),
        h in hop(),
    ) {
        let filled = filled_frac.min(cap);
        let before = collect_frame(cap, filled, &payload);
        let mut f = before.clone();
        let out = push_hop(&mut f, h).unwrap();
        let block_at = 54;
        let mut want = before.clone();
        want[40..42].copy_from_slice(&[0, 0]);
        if filled < cap {
            prop_assert_eq!(out, PushOutcome::Pushed);
            want[block_at + 2] = filled + 1;
            let slot = block_at + 4 + 16 * usize::from(filled);
            want[slot..slot + 16].copy_from_slice(&h.to_bytes());
            let block = IntBlock::in_udp_payload(&f[42..]).unwrap().unwrap();
            prop_assert_eq!(block.hops().last(), Some(h));
            prop_assert_eq!(block.hops().len(), usize::from(filled) + 1);
        } else {
            prop_assert_eq!(out, PushOutcome::Overflow);
            want[block_at + 3] = INT_FLAG_OVERFLOW;
        }
        prop_assert_eq!(&f, &want);
        // The forwarding parse still accepts it.
        prop_assert!(parse(&f).is_ok());
    }

    #[test]
    fn block_parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        if let Ok(b) = IntBlock::parse(&bytes) {
            prop_assert!(b.len() <= bytes.len());
            prop_assert_eq!(b.hops().count(), if b.kind().has_hops() { usize::from(b.nhop()) } else { 0 });
            prop_assert_eq!(b.timestamp().is_some(), !b.kind().has_hops());
            let mut out = [0u8; 300];
            let n = b.echo_into(&mut out).unwrap();
            let echo = IntBlock::parse(&out[..n]).unwrap();
            prop_assert!(echo.hops().eq(b.hops()));
            prop_assert_eq!(echo.timestamp(), b.timestamp());
            prop_assert_eq!(echo.overflow(), b.overflow());
        }
    }

    #[test]
    fn echo_round_trips(hops in proptest::collection::vec(hop(), 0..=16), overflow in any::<bool>()) {
        let mut buf = [0u8; 260];
        let n = write_echo(&mut buf, &hops, overflow).unwrap();
        prop_assert_eq!(n, 4 + 16 * hops.len());
        let b = IntBlock::parse(&buf[..n]).unwrap();
        prop_assert_eq!(b.kind(), IntKind::Echo);
        prop_assert_eq!(b.overflow(), overflow);
        prop_assert_eq!(b.hops().collect::<Vec<_>>(), hops);
    }

    #[test]
    fn timestamps_round_trip(ts in any::<u64>(), echo in any::<bool>()) {
        let kind = if echo { IntKind::TimestampEcho } else { IntKind::Timestamp };
        let mut buf = [0u8; 12];
        write_timestamp(&mut buf, kind, ts).unwrap();
        let b = IntBlock::parse(&buf).unwrap();
        prop_assert_eq!((b.kind(), b.timestamp()), (kind, Some(ts)));
    }

    #[test]
    fn hops_round_trip(h in hop()) {
        prop_assert_eq!(IntHop::parse(&h.to_bytes()), Ok(h));
    }
}

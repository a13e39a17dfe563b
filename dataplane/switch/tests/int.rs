//! INT through the switch, in memory: a RoCEv2 frame with a collect block
//! crosses two switches and comes out with both hops, byte for byte as
//! worked out by hand from the ports' rates, the queue arranged in front
//! of and behind it, and the switch clock; a full block gets OVERFLOW and
//! nothing else; with INT off nothing but the forwarding rewrite changes;
//! the UDP checksum goes to 0 only in a frame a hop was written into.

mod common;

use common::{bed, mac, peer, unshaped, Bed, HOST_A, MS, US};
use lcmp_policy::Policy;
use lcmp_switch::counters::Counter;
use lcmp_switch::egress::EgressConfig;
use lcmp_wire::testing::{fix_ipv4_checksum, l4_checksum_ok, FrameBuilder};
use lcmp_wire::{write_collect, Bth};

/// 5 s: the switch clock is past 2^32 ns, so the hops' times wrap:
/// 5 000 000 000 - 4 294 967 296 = 705 032 704.
const T0: u64 = 5_000 * MS;
/// When the frames reach the second switch.
const T1: u64 = T0 + 2 * MS;

/// Offsets in the frames built here: UDP checksum, BTH, INT block.
const UDP_CSUM: usize = 14 + 20 + 6;
const BLOCK: usize = 14 + 20 + 8 + 12;

fn shaped(rate_bps: u64, delay_ns: u64) -> EgressConfig {
    EgressConfig {
        rate_bps,
        delay_ns,
        ..unshaped()
    }
}

/// A switch whose three path ports emulate `rate_bps` links.
fn switch(rate_bps: u64, delay_ns: u64, int: bool, park: bool) -> Bed {
    let link = shaped(rate_bps, delay_ns);
    let mut b = bed(
        Policy::from_name("lcmp").unwrap(),
        [unshaped(), link, link, link],
    );
    b.sw.set_int(int);
    if park {
        b.sw.park_in_flight();
    }
    b
}

/// RoCEv2 10.0.1.2:49152 -> 10.0.2.2:4791 (one flow: one path port),
/// `payload` bytes, with a collect block of `capacity` slots if given.
fn rocev2(capacity: Option<u8>, payload: usize) -> Vec<u8> {
    let b = FrameBuilder::ipv4([10, 0, 1, 2], [10, 0, 2, 2])
        .macs(HOST_A, mac(0))
        .rocev2(
            49152,
            Bth {
                opcode: 0x07,
                pkey: 0xffff,
                dest_qp: 0x11,
                ack_request: false,
                psn: 3,
            },
        )
        .payload(&vec![0xab; payload]);
    match capacity {
        Some(c) => {
            let mut block = vec![0; 4 + 16 * usize::from(c)];
            write_collect(&mut block, c).unwrap();
            b.int_block(&block).build()
        }
        None => b.build(),
    }
}

/// Injects `frames` into port 0 at `at`, lets every link run out (a poll
/// 1 ms later: the hops carry the emulated departures, not the poll's
/// time), and returns what left, in order, with its port.
fn cross(b: &mut Bed, frames: &[Vec<u8>], at: u64) -> Vec<(usize, Vec<u8>)> {
    for f in frames {
        assert!(b.sw.io().inject(0, f));
    }
    b.sw.poll(at);
    b.sw.poll(at + MS);
    let mut out = Vec::new();
    for p in 0..4 {
        out.extend(b.sw.io().take_sent(p).into_iter().map(|f| (p, f)));
    }
    out
}

/// `input` as switch `port` of the second switch forwards it (MACs, TTL
/// 64 - 2, IPv4 checksum), the UDP checksum as `udp_csum`.
fn forwarded_twice(input: &[u8], port: u8, udp_csum: [u8; 2]) -> Vec<u8> {
    let mut f = input.to_vec();
    f[..6].copy_from_slice(&peer(port));
    f[6..12].copy_from_slice(&mac(port));
    f[14 + 8] = 62;
    assert!(fix_ipv4_checksum(&mut f));
    f[UDP_CSUM..UDP_CSUM + 2].copy_from_slice(&udp_csum);
    f
}

/// One port of `b` carried everything; returns it.
fn only_port(out: &[(usize, Vec<u8>)]) -> usize {
    let p = out[0].0;
    assert!(out.iter().all(|(q, _)| *q == p), "one flow, one port");
    assert!(p >= 1);
    p
}

#[test]
fn two_switches_push_two_hops_with_the_values_worked_out_by_hand() {
    for park in [false, true] {
        // The INT frame: 14 + 20 + 8 + 12 + (4 + 2 * 16) + 64 + 4 = 158
        // bytes; a filler: 14 + 20 + 8 + 12 + 1000 + 4 = 1058 bytes.
        let int = rocev2(Some(2), 64);
        let filler = rocev2(None, 1000);
        assert_eq!((int.len(), filler.len()), (158, 1058));

        // Switch 1, 1 Gbit/s (8 ns a byte), 10 us delay: filler, INT
        // frame, filler arrive at T0. The INT frame departs at T0 + (1058 +
        // 158) * 8 = T0 + 9728 ns, after 1058 bytes, leaving 1058 behind.
        let mut s1 = switch(1_000_000_000, 10 * US, true, park);
        let out1 = cross(&mut s1, &[filler.clone(), int.clone(), filler.clone()], T0);
        assert_eq!(out1.len(), 3);
        let p1 = only_port(&out1);
        // Fillers carry no block: untouched by INT, checksum still valid.
        for (_, f) in [&out1[0], &out1[2]] {
            assert_eq!(l4_checksum_ok(f), Some(true));
            assert_ne!(f[UDP_CSUM..UDP_CSUM + 2], [0, 0]);
        }
        let c1 = s1.sw.counters().port(p1).clone();
        assert_eq!(
            (c1.get(Counter::IntPushed), c1.get(Counter::IntOverflow)),
            (1, 0)
        );

        // Switch 2, 100 Mbit/s (80 ns a byte), no delay: filler, filler,
        // INT frame at T1. The INT frame departs at T1 + (2 * 1058 + 158)
        // * 80 = T1 + 181 920 ns, after 2116 bytes, leaving none.
        let mut s2 = switch(100_000_000, 0, true, park);
        let in2 = [out1[0].1.clone(), out1[2].1.clone(), out1[1].1.clone()];
        let out2 = cross(&mut s2, &in2, T1);
        assert_eq!(out2.len(), 3);
        let p2 = only_port(&out2);
        let got = &out2[2].1;

        #[rustfmt::skip]
        let block: [u8; 36] = [
            // collect, capacity 2, nhop 2, no overflow
            0x01, 0x02, 0x02, 0x00,
            // hop 1: 1 000 000 kbit/s = 0x000f4240; queue 1058 = 0x422;
            // tx bytes 1058; time 705 032 704 + 9728 = 705 042 432 =
            // 0x2a061800
            0x00, 0x0f, 0x42, 0x40, 0x00, 0x00, 0x04, 0x22,
            0x00, 0x00, 0x04, 0x22, 0x2a, 0x06, 0x18, 0x00,
            // hop 2: 100 000 kbit/s = 0x000186a0; queue 0; tx bytes 2116 =
            // 0x844; time (705 032 704 + 2 000 000) + 181 920 =
            // 707 214 624 = 0x2a273d20
            0x00, 0x01, 0x86, 0xa0, 0x00, 0x00, 0x00, 0x00,
            0x00, 0x00, 0x08, 0x44, 0x2a, 0x27, 0x3d, 0x20,
        ];
        let mut want = forwarded_twice(&int, p2 as u8, [0, 0]);
        want[BLOCK..BLOCK + 36].copy_from_slice(&block);
        assert_eq!(got, &want, "parked {park}");
        let c2 = s2.sw.counters().port(p2).clone();
        assert_eq!(
            (c2.get(Counter::IntPushed), c2.get(Counter::IntOverflow)),
            (1, 0)
        );
        // The fillers left switch 2 with their checksums.
        for (_, f) in &out2[..2] {
            assert_eq!(l4_checksum_ok(f), Some(true));
        }
    }
}

#[test]
fn a_full_block_gets_overflow_and_nothing_else() {
    // One slot: switch 1 fills it, switch 2 finds it full.
    let int = rocev2(Some(1), 64);
    let mut s1 = switch(1_000_000_000, 0, true, false);
    let out1 = cross(&mut s1, std::slice::from_ref(&int), T0);
    let mut s2 = switch(100_000_000, 0, true, false);
    let out2 = cross(&mut s2, &[out1[0].1.clone()], T1);
    let (p1, p2) = (out1[0].0, out2[0].0);
    // After switch 1: nhop 1 and its hop: 1 000 000 kbit/s, nothing queued
    // or sent before, departed at 705 032 704 + 142 * 8 = 705 033 840 =
    // 0x2a05f670 (the frame: 14 + 20 + 8 + 12 + 20 + 64 + 4 = 142 bytes).
    assert_eq!(int.len(), 142);
    #[rustfmt::skip]
    let one_hop: [u8; 20] = [
        0x01, 0x01, 0x01, 0x00,
        0x00, 0x0f, 0x42, 0x40, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x2a, 0x05, 0xf6, 0x70,
    ];
    assert_eq!(out1[0].1[BLOCK..BLOCK + 20], one_hop);
    // After switch 2: the same, with OVERFLOW (flags 0x01); the forwarding
    // rewrite is the only other change.
    let mut want = forwarded_twice(&int, p2 as u8, [0, 0]);
    want[BLOCK..BLOCK + 20].copy_from_slice(&one_hop);
    want[BLOCK + 3] = 0x01;
    assert_eq!(out2[0].1, want);
    let c1 = s1.sw.counters().port(p1);
    assert_eq!(
        (c1.get(Counter::IntPushed), c1.get(Counter::IntOverflow)),
        (1, 0)
    );
    let c2 = s2.sw.counters().port(p2);
    assert_eq!(
        (c2.get(Counter::IntPushed), c2.get(Counter::IntOverflow)),
        (0, 1)
    );
    assert_eq!(s2.sw.counters().named()["int_overflow"], 1);
}

#[test]
fn with_int_off_the_frame_is_only_forwarded() {
    for park in [false, true] {
        let int = rocev2(Some(2), 64);
        let mut s1 = switch(1_000_000_000, 10 * US, false, park);
        let mut s2 = switch(100_000_000, 0, false, park);
        assert!(!s1.sw.int_enabled());
        let out1 = cross(&mut s1, std::slice::from_ref(&int), T0);
        let out2 = cross(&mut s2, &[out1[0].1.clone()], T1);
        let p2 = out2[0].0;
        // The builder's UDP checksum, kept: the pseudo header has no TTL.
        let csum = [int[UDP_CSUM], int[UDP_CSUM + 1]];
        assert_ne!(csum, [0, 0]);
        assert_eq!(out2[0].1, forwarded_twice(&int, p2 as u8, csum));
        assert_eq!(l4_checksum_ok(&out2[0].1), Some(true));
        for s in [&s1, &s2] {
            let named = s.sw.counters().named();
            assert_eq!((named["int_pushed"], named["int_overflow"]), (0, 0));
        }
    }
}

//! The whole switch, frame in -> frame out, over in-memory ports: no root,
//! synthetic clock.

use lcmp_control::snapshot::FlowLogStats;
use lcmp_policy::Policy;
use lcmp_switch::control::{snapshot, DaemonInfo};
use lcmp_switch::counters::{Counter, DropReason};
use lcmp_switch::egress::{EcnConfig, EcnMarkAt, EgressConfig};
use lcmp_switch::flow_log::{DecisionReason, FlowLog, FlowRecord};
use lcmp_wire::testing::{
    fix_ipv4_checksum, ipv4_header_checksum_ok, l4_checksum_ok, FrameBuilder,
};
use lcmp_wire::{Ecn, FlowTuple};

mod common;
use common::*;

#[test]
fn forwards_and_rewrites_ipv4() {
    let mut b = bed(
        Policy::Ecmp,
        [unshaped(), unshaped(), unshaped(), unshaped()],
    );
    let input = udp_a_to_b(1000, 1);
    let out = run(&mut b, std::slice::from_ref(&input), 0);
    assert_eq!(out.len(), 1);
    let (port, f) = &out[0];
    assert!((1..=3).contains(port));
    assert_eq!(&f[0..6], &peer(*port as u8));
    assert_eq!(&f[6..12], &mac(*port as u8));
    assert_eq!(f[14 + 8], 63, "TTL decremented");
    assert_eq!(ipv4_header_checksum_ok(f), Some(true));
    assert_eq!(l4_checksum_ok(f), Some(true));
    // Only the MACs, TTL and header checksum changed.
    assert_eq!(f.len(), input.len());
    let changed: Vec<usize> = (0..f.len()).filter(|&i| f[i] != input[i]).collect();
    assert!(
        changed
            .iter()
            .all(|&i| i < 12 || i == 22 || i == 24 || i == 25),
        "{changed:?}"
    );
}

#[test]
fn forwards_ipv6_and_back_to_the_host() {
    let mut b = bed(
        Policy::Ecmp,
        [unshaped(), unshaped(), unshaped(), unshaped()],
    );
    let v6 = FrameBuilder::ipv6(
        "fd00:1::2".parse::<std::net::Ipv6Addr>().unwrap().octets(),
        "fd00:2::2".parse::<std::net::Ipv6Addr>().unwrap().octets(),
    )
    .macs(HOST_A, mac(0))
    .ttl(9)
    .tcp(40000, 80)
    .build();
    let out = run(&mut b, &[v6], 0);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].1[14 + 7], 8, "hop limit decremented");
    assert_eq!(l4_checksum_ok(&out[0].1), Some(true));
    // The reverse direction: from a path port to host A.
    let back = FrameBuilder::ipv4([10, 0, 2, 2], [10, 0, 1, 2])
        .macs(peer(2), mac(2))
        .udp(5001, 1000)
        .build();
    assert!(b.sw.io().inject(2, &back));
    b.sw.poll(0);
    let sent = b.sw.io().take_sent(0);
    assert_eq!(sent.len(), 1);
    assert_eq!(&sent[0][0..6], &HOST_A);
}

#[test]
fn every_flow_leaves_by_one_port_in_order() {
    let mut b = bed(
        lcmp_keep_two_of_three(),
        [unshaped(), unshaped(), unshaped(), unshaped()],
    );
    let mut frames = Vec::new();
    for seq in 0..50u16 {
        for flow in 0..40u16 {
            frames.push(udp_a_to_b(2000 + flow, seq));
        }
    }
    let mut ports_of: std::collections::HashMap<u16, usize> = Default::default();
    let mut next_seq: std::collections::HashMap<u16, u16> = Default::default();
    for chunk in frames.chunks(400) {
        for (port, f) in run(&mut b, chunk, 0) {
            let sport = u16::from_be_bytes([f[34], f[35]]);
            let seq = u16::from_be_bytes([f[42], f[43]]);
            assert_eq!(
                *ports_of.entry(sport).or_insert(port),
                port,
                "flow {sport} moved"
            );
            let want = next_seq.entry(sport).or_insert(0);
            assert_eq!(seq, *want, "flow {sport} reordered");
            *want += 1;
        }
    }
    assert_eq!(next_seq.values().map(|&n| n as usize).sum::<usize>(), 2000);
    // LCMP keeping 2 of 3 at light load: the costliest path (port 3) unused.
    let used: std::collections::HashSet<usize> = ports_of.values().copied().collect();
    assert_eq!(used, [1, 2].into_iter().collect());
    assert_eq!(b.sw.router_stats().inserts, 40);
}

#[test]
fn ecmp_uses_every_path() {
    let mut b = bed(
        Policy::Ecmp,
        [unshaped(), unshaped(), unshaped(), unshaped()],
    );
    let frames: Vec<Vec<u8>> = (0..60).map(|f| udp_a_to_b(3000 + f, 0)).collect();
    let used: std::collections::HashSet<usize> = run(&mut b, &frames, 0)
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    assert_eq!(used, [1, 2, 3].into_iter().collect());
}

#[test]
fn link_down_moves_only_its_flows() {
    let mut b = bed(
        Policy::Ecmp,
        [unshaped(), unshaped(), unshaped(), unshaped()],
    );
    let frames: Vec<Vec<u8>> = (0..60).map(|f| udp_a_to_b(4000 + f, 0)).collect();
    let first: std::collections::HashMap<u16, usize> = run(&mut b, &frames, 0)
        .into_iter()
        .map(|(p, f)| (u16::from_be_bytes([f[34], f[35]]), p))
        .collect();
    b.sw.io().set_link(2, false);
    // The next poll after the link check interval sees it.
    let later = run(&mut b, &frames, MS);
    assert_eq!(later.len(), 60, "nothing lost after the link check");
    for (p, f) in later {
        let sport = u16::from_be_bytes([f[34], f[35]]);
        assert_ne!(p, 2);
        if first[&sport] != 2 {
            assert_eq!(p, first[&sport], "flow {sport} on a live path moved");
        }
    }
    let moved = first.values().filter(|&&p| p == 2).count() as u64;
    assert!(moved > 0);
    assert_eq!(b.sw.router_stats().failovers, moved);
}

#[test]
fn shaper_and_delay_line_emulate_the_link() {
    // Path ports at 100 Mbit/s and 5 ms: a 1000-byte frame takes 80 us.
    let link = EgressConfig {
        rate_bps: 100_000_000,
        delay_ns: 5 * MS,
        buffer_bytes: 1 << 20,
        ecn: None,
        max_in_flight: 4096,
    };
    let mut b = bed(Policy::Ecmp, [unshaped(), link, link, link]);
    // One flow, 10 frames of 1000 bytes at t = 0.
    let frames: Vec<Vec<u8>> = (0..10)
        .map(|seq| {
            FrameBuilder::ipv4([10, 0, 1, 2], [10, 0, 2, 2])
                .macs(HOST_A, mac(0))
                .udp(5555, 5001)
                .payload(&[seq as u8; 958])
                .build()
        })
        .collect();
    assert_eq!(frames[0].len(), 1000);
    for f in &frames {
        b.sw.io().inject(0, f);
    }
    b.sw.poll(0);
    let sent_at = |b: &mut Bed, t: u64| -> usize {
        b.sw.poll(t);
        (1..4).map(|p| b.sw.io().take_sent(p).len()).sum()
    };
    // Frame k finishes serializing at 80(k+1) us and arrives 5 ms later.
    assert_eq!(sent_at(&mut b, 5 * MS + 80 * US - 1), 0);
    assert_eq!(sent_at(&mut b, 5 * MS + 80 * US), 1);
    assert_eq!(sent_at(&mut b, 5 * MS + 239 * US), 1);
    assert_eq!(sent_at(&mut b, 5 * MS + 800 * US), 8);
    assert!(b.sw.next_deadline() > 5 * MS + 800 * US);
    assert_eq!(sent_at(&mut b, 10 * MS), 0);
}

#[test]
fn departed_bytes_count_when_a_frame_goes_onto_the_link_not_when_released() {
    // Path ports at 100 Mbit/s and 2.5 s, a long-haul link: a 1000-byte
    // frame arriving at 0 departs at 1000 * 8 / 1e8 s = 80 us and is
    // released (transmitted) at 2.5 s + 80 us.
    let link = EgressConfig {
        rate_bps: 100_000_000,
        delay_ns: 2_500 * MS,
        buffer_bytes: 1 << 20,
        ecn: None,
        max_in_flight: 4096,
    };
    let mut b = bed(Policy::Ecmp, [unshaped(), link, link, link]);
    let frame = FrameBuilder::ipv4([10, 0, 1, 2], [10, 0, 2, 2])
        .macs(HOST_A, mac(0))
        .udp(5555, 5001)
        .payload(&[0; 958])
        .build();
    assert_eq!(frame.len(), 1000);
    assert!(b.sw.io().inject(0, &frame));
    // (departed_frames, departed_bytes, tx_frames, tx_bytes) over the ports.
    let counted = |b: &Bed| {
        let c = b.sw.counters();
        [
            Counter::DepartedFrames,
            Counter::DepartedBytes,
            Counter::TxFrames,
            Counter::TxBytes,
        ]
        .map(|k| c.get(k))
    };
    b.sw.poll(0);
    assert_eq!(counted(&b), [0, 0, 0, 0], "still serializing");
    b.sw.poll(80 * US);
    assert_eq!(counted(&b), [1, 1000, 0, 0], "on the link, not sent");
    // The snapshot (stats file, status, metrics) has it on the one port
    // the flow took, with the frame in that port's delay line.
    let stats = snapshot(&b.sw, &DaemonInfo::default());
    let on_link: Vec<_> = stats
        .ports
        .iter()
        .filter(|p| p.counter("departed_bytes") > 0)
        .collect();
    assert_eq!(on_link.len(), 1, "{:?}", stats.ports);
    let p = on_link[0];
    assert!((1..4).contains(&p.index), "a path port: {}", p.index);
    assert_eq!(
        (
            p.counter("departed_frames"),
            p.counter("departed_bytes"),
            p.counter("tx_bytes"),
            p.in_flight
        ),
        (1, 1000, 0, 1)
    );
    assert_eq!(stats.counter("departed_bytes"), 1000);
    b.sw.poll(2_500 * MS + 80 * US - 1);
    assert_eq!(counted(&b), [1, 1000, 0, 0]);
    b.sw.poll(2_500 * MS + 80 * US);
    // Released: tx counts it now; departures do not count it again.
    assert_eq!(counted(&b), [1, 1000, 1, 1000]);
    assert_eq!(b.sw.io().take_sent(p.index as usize).len(), 1);
}

#[test]
fn full_buffer_tail_drops_and_counts() {
    let small = EgressConfig {
        rate_bps: 1_000_000,
        delay_ns: 0,
        buffer_bytes: 5_000,
        ecn: None,
        max_in_flight: 4096,
    };
    let mut b = bed(Policy::Ecmp, [unshaped(), small, small, small]);
    let frames: Vec<Vec<u8>> = (0..20)
        .map(|_| {
            FrameBuilder::ipv4([10, 0, 1, 2], [10, 0, 2, 2])
                .macs(HOST_A, mac(0))
                .udp(7777, 5001)
                .payload(&[0; 958])
                .build()
        })
        .collect();
    run(&mut b, &frames, 0);
    let c = b.sw.counters();
    // 5 frames of 1000 bytes fit the buffer (one may have left already).
    assert!(
        c.dropped(DropReason::QueueFull) >= 14 && c.dropped(DropReason::QueueFull) <= 15,
        "{c:?}"
    );
}

#[test]
fn drop_headroom_holds_what_the_buffer_would_drop() {
    let small = EgressConfig {
        rate_bps: 1_000_000,
        delay_ns: 0,
        buffer_bytes: 5_000,
        ecn: None,
        max_in_flight: 4096,
    };
    let mut b = bed_with(Policy::Ecmp, [unshaped(), small, small, small], 4096, 4);
    let frames: Vec<Vec<u8>> = (0..30)
        .map(|_| {
            FrameBuilder::ipv4([10, 0, 1, 2], [10, 0, 2, 2])
                .macs(HOST_A, mac(0))
                .udp(7777, 5001)
                .payload(&[0; 958])
                .build()
        })
        .collect();
    run(&mut b, &frames, 0);
    let c = b.sw.counters();
    // 4 x 5000 bytes hold 20 frames of 1000 bytes (one may have left
    // already): 9 or 10 of 30 are dropped, where the buffer alone drops 25.
    let dropped = c.dropped(DropReason::QueueFull);
    assert!((9..=10).contains(&dropped), "{c:?}");
    // The port still reports its own buffer.
    assert_eq!(b.sw.link(1).buffer_bytes, 5_000);
}

#[test]
fn ecn_marks_ect_frames_in_a_deep_queue() {
    let marking = EgressConfig {
        rate_bps: 1_000_000,
        delay_ns: 0,
        buffer_bytes: 1 << 20,
        ecn: Some(EcnConfig {
            kmin_bytes: 2_000,
            kmax_bytes: 4_000,
            pmax: 0.5,
            mark_at: EcnMarkAt::Enqueue,
        }),
        max_in_flight: 4096,
    };
    let mut b = bed(Policy::Ecmp, [unshaped(), marking, marking, marking]);
    let frames: Vec<Vec<u8>> = (0..40)
        .map(|_| {
            FrameBuilder::ipv4([10, 0, 1, 2], [10, 0, 2, 2])
                .macs(HOST_A, mac(0))
                .ecn(Ecn::Ect0)
                .udp(8888, 5001)
                .payload(&[0; 958])
                .build()
        })
        .collect();
    run(&mut b, &frames, 0);
    // Beyond 4 kB queued, every frame is marked: at least 35 of 40.
    assert!(
        b.sw.counters().get(Counter::CeMarked) >= 35,
        "{:?}",
        b.sw.counters()
    );
    // Marked frames leave with CE set and a valid checksum.
    let out = run(&mut b, &[], 10_000 * MS);
    let ce = out.iter().filter(|(_, f)| f[15] & 3 == 3).count();
    assert!(ce >= 35);
    assert!(out
        .iter()
        .all(|(_, f)| ipv4_header_checksum_ok(f) == Some(true)));
}

/// The ECN field of a forwarded IPv4 or IPv6 frame.
fn ecn_bits(f: &[u8]) -> u8 {
    match f[14] >> 4 {
        4 => f[15] & 3,
        6 => (f[15] >> 4) & 3,
        v => panic!("IP version {v}"),
    }
}

#[test]
fn ecn_at_dequeue_marks_frames_by_the_queue_they_leave_behind() {
    // 1 Mbit/s: a 1000-byte frame takes 8 ms. Marks from 2000 to 4000
    // bytes, decided at departure.
    let marking = EgressConfig {
        rate_bps: 1_000_000,
        delay_ns: 0,
        buffer_bytes: 1 << 20,
        ecn: Some(EcnConfig {
            kmin_bytes: 2_000,
            kmax_bytes: 4_000,
            pmax: 0.5,
            mark_at: EcnMarkAt::Dequeue,
        }),
        max_in_flight: 4096,
    };
    let v4 = |ecn| {
        FrameBuilder::ipv4([10, 0, 1, 2], [10, 0, 2, 2])
            .macs(HOST_A, mac(0))
            .ecn(ecn)
            .udp(8888, 5001)
            .payload(&[0; 958])
            .build()
    };
    let v6 = |ecn| {
        FrameBuilder::ipv6(
            "fd00:1::2".parse::<std::net::Ipv6Addr>().unwrap().octets(),
            "fd00:2::2".parse::<std::net::Ipv6Addr>().unwrap().octets(),
        )
        .macs(HOST_A, mac(0))
        .ecn(ecn)
        .udp(8888, 5001)
        .payload(&[0; 938])
        .build()
    };
    for make in [&v4 as &dyn Fn(Ecn) -> Vec<u8>, &v6] {
        let mut b = bed(Policy::Ecmp, [unshaped(), marking, marking, marking]);
        // One flow of 40 ECT frames of 1000 bytes at t = 0: one port.
        let frames: Vec<Vec<u8>> = (0..40).map(|_| make(Ecn::Ect0)).collect();
        assert_eq!(frames[0].len(), 1000);
        assert!(run(&mut b, &frames, 0).is_empty());
        // Queued up to 39 000 bytes deep, but nothing is marked on arrival.
        assert_eq!(b.sw.counters().get(Counter::CeMarked), 0);
        let out = run(&mut b, &[], 10_000 * MS);
        assert_eq!(out.len(), 40);
        assert!(
            out.iter().all(|(p, _)| *p == out[0].0),
            "one flow, one port"
        );
        // Frame i leaves 1000 * (39 - i) bytes behind: frames 0..=35 leave
        // at least kmax (4000) and are marked; frame 36 leaves 3000 (marked
        // with probability 0.25); frames 37..=39 leave at most kmin.
        let ce: Vec<bool> = out.iter().map(|(_, f)| ecn_bits(f) == 3).collect();
        assert!(ce[..36].iter().all(|&c| c), "{ce:?}");
        assert!(ce[37..].iter().all(|&c| !c), "{ce:?}");
        let marked = ce.iter().filter(|&&c| c).count() as u64;
        assert_eq!(b.sw.counters().get(Counter::CeMarked), marked);
        let port = out[0].0;
        assert_eq!(b.sw.port_reports()[port].egress.ce_marked, marked);
        // IPv4: the checksum is still what a full recompute gives; the rest
        // of the frame is as forwarded without a mark.
        for (_, f) in &out {
            assert_ne!(ipv4_header_checksum_ok(f), Some(false));
            assert_eq!(l4_checksum_ok(f), Some(true));
        }
        let mut unmarked = out[0].1.clone();
        if unmarked[14] >> 4 == 4 {
            unmarked[15] = (unmarked[15] & !3) | Ecn::Ect0.bits();
            assert!(fix_ipv4_checksum(&mut unmarked));
        } else {
            unmarked[15] = (unmarked[15] & !0x30) | (Ecn::Ect0.bits() << 4);
        }
        assert_eq!(unmarked, out[39].1, "frame 0 is frame 39 but for CE");

        // Frames that arrive CE stay CE and are not counted as marked here.
        let arrived_ce: Vec<Vec<u8>> = (0..10).map(|_| make(Ecn::Ce)).collect();
        run(&mut b, &arrived_ce, 10_000 * MS);
        let out = run(&mut b, &[], 20_000 * MS);
        assert_eq!(out.len(), 10);
        assert!(out.iter().all(|(_, f)| ecn_bits(f) == 3));
        assert_eq!(b.sw.counters().get(Counter::CeMarked), marked);
    }
}

#[test]
fn malformed_frames_are_counted_and_forwarding_goes_on() {
    let mut b = bed(
        Policy::Ecmp,
        [unshaped(), unshaped(), unshaped(), unshaped()],
    );
    let good = udp_a_to_b(9000, 0);
    let mut bad: Vec<Vec<u8>> = vec![
        good[..20].to_vec(), // truncated
        FrameBuilder::ipv4([10, 0, 1, 2], [10, 0, 2, 2])
            .ttl(1)
            .udp(1, 2)
            .build(),
        FrameBuilder::ipv4([10, 0, 1, 2], [10, 0, 2, 2])
            .ipv4_options(&[1, 1, 1, 1])
            .udp(1, 2)
            .build(),
        FrameBuilder::ipv4([10, 0, 1, 2], [10, 0, 2, 2])
            .ipv4_fragment(true, false, 0)
            .udp(1, 2)
            .build(),
        FrameBuilder::ipv4([10, 0, 1, 2], [10, 0, 2, 2])
            .vlan(5)
            .udp(1, 2)
            .build(),
        FrameBuilder::ipv4([10, 0, 1, 2], [192, 0, 2, 1])
            .udp(1, 2)
            .build(), // no route
        vec![0xff; 60],
        vec![],
    ];
    let mut bad_ihl = good.clone();
    bad_ihl[14] = 0x44;
    bad.push(bad_ihl);
    let mut rng = 0x1234_5678_9abc_def0u64;
    for _ in 0..2000 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let len = (rng % 200) as usize;
        bad.push((0..len).map(|i| (rng >> (i % 56)) as u8).collect());
    }
    let n_bad = bad.len() as u64;
    let mut frames = bad;
    frames.push(good);
    let out = run(&mut b, &frames, 0);
    let forwarded: Vec<_> = out.iter().filter(|(p, _)| *p != 0).collect();
    assert_eq!(forwarded.len(), 1, "the good frame still crosses");
    // Back out of port 0 only ICMP errors (TTL 1, no route), IPv4 here.
    let errors = out.iter().filter(|(p, _)| *p == 0).count() as u64;
    assert!(out.iter().filter(|(p, _)| *p == 0).all(|(_, f)| f[23] == 1));
    let c = b.sw.counters();
    assert_eq!(c.total_drops(), n_bad, "{c:?}");
    assert_eq!(c.get(Counter::RxFrames), n_bad + 1);
    assert_eq!(c.get(Counter::IcmpSent), errors);
    assert!(errors >= 2, "time exceeded and unreachable: {errors}");
}

#[test]
fn no_frame_is_lost_from_the_pool() {
    let small = EgressConfig {
        rate_bps: 10_000_000,
        delay_ns: 2 * MS,
        buffer_bytes: 20_000,
        ecn: None,
        max_in_flight: 8,
    };
    let mut b = bed(Policy::Ecmp, [unshaped(), small, small, small]);
    let before = b.sw.io().free_frames();
    let frames: Vec<Vec<u8>> = (0..300)
        .map(|i| udp_a_to_b(100 + (i % 7) as u16, i as u16))
        .collect();
    let out = run(&mut b, &frames, 0);
    drop(out);
    for t in 1..50 {
        run(&mut b, &[], t * MS);
    }
    b.sw.drain();
    assert_eq!(b.sw.io().free_frames(), before);
    let c = b.sw.counters().clone();
    assert_eq!(
        c.get(Counter::RxFrames),
        c.get(Counter::TxFrames) + c.total_drops(),
        "{c:?}"
    );
    assert!(c.dropped(DropReason::EmulationOverflow) > 0 || c.dropped(DropReason::QueueFull) > 0);
}

// The flow-decision log (`--flow-log`).

fn tcp_a_to_b_v4(sport: u16) -> Vec<u8> {
    FrameBuilder::ipv4([10, 0, 1, 2], [10, 0, 2, 2])
        .macs(HOST_A, mac(0))
        .tcp(sport, 80)
        .build()
}

fn tcp_a_to_b_v6(sport: u16) -> Vec<u8> {
    FrameBuilder::ipv6(
        "fd00:1::2".parse::<std::net::Ipv6Addr>().unwrap().octets(),
        "fd00:2::2".parse::<std::net::Ipv6Addr>().unwrap().octets(),
    )
    .macs(HOST_A, mac(0))
    .tcp(sport, 443)
    .build()
}

fn logged(b: &Bed) -> Vec<FlowRecord> {
    b.sw.flow_log().unwrap().records().to_vec()
}

fn unshaped_bed(policy: Policy) -> Bed {
    bed(policy, [unshaped(), unshaped(), unshaped(), unshaped()])
}

#[test]
fn flow_log_records_each_new_flow_once_with_its_egress_port() {
    let mut b = unshaped_bed(lcmp_keep_two_of_three());
    assert!(b.sw.flow_log().is_none());
    b.sw.enable_flow_log(64);
    let out = run(&mut b, &[tcp_a_to_b_v4(40000)], 1_500 * US);
    assert_eq!(out.len(), 1);
    let v4_port = out[0].0;
    assert!((1..=3).contains(&v4_port));
    let out = run(&mut b, &[tcp_a_to_b_v6(50000)], 2 * MS);
    assert_eq!(out.len(), 1);
    let v6_port = out[0].0;
    assert!((1..=3).contains(&v6_port));
    assert_eq!(
        logged(&b),
        vec![
            FlowRecord {
                time_ns: 1_500_000,
                flow: FlowTuple::V4 {
                    src: [10, 0, 1, 2],
                    dst: [10, 0, 2, 2],
                    proto: 6,
                    sport: 40000,
                    dport: 80,
                },
                port: v4_port as u8,
                reason: DecisionReason::New,
            },
            FlowRecord {
                time_ns: 2_000_000,
                flow: FlowTuple::V6 {
                    src: [0xfd, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
                    dst: [0xfd, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
                    proto: 6,
                    sport: 50000,
                    dport: 443,
                },
                port: v6_port as u8,
                reason: DecisionReason::New,
            },
        ]
    );
    // Later packets of both flows hit the cache: no further record.
    let later = [
        tcp_a_to_b_v4(40000),
        tcp_a_to_b_v6(50000),
        tcp_a_to_b_v4(40000),
        tcp_a_to_b_v6(50000),
    ];
    let out = run(&mut b, &later, 3 * MS);
    assert_eq!(out.len(), 4);
    assert_eq!(logged(&b).len(), 2);
    let s = b.sw.flow_log().unwrap().stats();
    assert_eq!((s.dropped, s.written, s.buffered), (0, 0, 2));
}

#[test]
fn flow_log_records_a_failover_to_another_port() {
    let mut b = unshaped_bed(Policy::Ecmp);
    b.sw.enable_flow_log(64);
    let out = run(&mut b, &[tcp_a_to_b_v4(40001)], 0);
    assert_eq!(out.len(), 1);
    let first = out[0].0;
    b.sw.io().set_link(first, false);
    // The next poll after the link check interval (100 us) sees it.
    let out = run(&mut b, &[tcp_a_to_b_v4(40001)], MS);
    assert_eq!(out.len(), 1);
    let second = out[0].0;
    assert_ne!(second, first);
    assert!((1..=3).contains(&second));
    let flow = FlowTuple::V4 {
        src: [10, 0, 1, 2],
        dst: [10, 0, 2, 2],
        proto: 6,
        sport: 40001,
        dport: 80,
    };
    assert_eq!(
        logged(&b),
        vec![
            FlowRecord {
                time_ns: 0,
                flow,
                port: first as u8,
                reason: DecisionReason::New,
            },
            FlowRecord {
                time_ns: 1_000_000,
                flow,
                port: second as u8,
                reason: DecisionReason::Failover,
            },
        ]
    );
}

#[test]
fn flow_log_records_decisions_the_full_cache_could_not_keep() {
    // One bucket of 8 flows: the 9th flow is decided but not cached, and
    // decided (and logged) again at its next packet.
    let mut b = bed_with_cache(
        Policy::Ecmp,
        [unshaped(), unshaped(), unshaped(), unshaped()],
        8,
    );
    b.sw.enable_flow_log(64);
    let frames: Vec<Vec<u8>> = (0..9).map(|i| tcp_a_to_b_v4(41000 + i)).collect();
    assert_eq!(run(&mut b, &frames, 0).len(), 9);
    assert_eq!(run(&mut b, &frames[8..], 10 * US).len(), 1);
    let reasons: Vec<(u16, DecisionReason, u64)> = logged(&b)
        .iter()
        .map(|r| (r.flow.sport(), r.reason, r.time_ns))
        .collect();
    let mut want: Vec<(u16, DecisionReason, u64)> = (41000..41008)
        .map(|p| (p, DecisionReason::New, 0))
        .collect();
    want.push((41008, DecisionReason::CacheFull, 0));
    want.push((41008, DecisionReason::CacheFull, 10_000));
    assert_eq!(reasons, want);
    assert_eq!(b.sw.router_stats().cache_full_decisions, 2);
}

#[test]
fn flow_log_full_buffer_drops_and_counts() {
    let mut b = unshaped_bed(Policy::Ecmp);
    b.sw.enable_flow_log(3);
    let frames: Vec<Vec<u8>> = (0..10).map(|i| tcp_a_to_b_v4(42000 + i)).collect();
    // Every frame still crosses; decisions beyond 3 are not logged.
    assert_eq!(run(&mut b, &frames, 0).len(), 10);
    let kept: Vec<u16> = logged(&b).iter().map(|r| r.flow.sport()).collect();
    assert_eq!(kept, vec![42000, 42001, 42002]);
    let stats = snapshot(&b.sw, &DaemonInfo::default());
    assert_eq!(
        stats.flow_log,
        Some(FlowLogStats {
            written: 0,
            dropped: 7,
            write_failed: 0,
            buffered: 3,
            capacity: 3,
        })
    );
    // A write makes room again; the counts go on.
    let mut out = Vec::new();
    assert_eq!(b.sw.write_flow_log(&mut out).unwrap(), 3);
    assert_eq!(out.iter().filter(|&&c| c == b'\n').count(), 3);
    assert_eq!(run(&mut b, &[tcp_a_to_b_v4(42100)], 0).len(), 1);
    let log = snapshot(&b.sw, &DaemonInfo::default()).flow_log.unwrap();
    assert_eq!((log.written, log.dropped, log.buffered), (3, 7, 1));
}

#[test]
fn flow_log_csv_text_is_exact() {
    // The route to host A has one candidate (port 0, "p0"), so the chosen
    // port is known in advance.
    let mut b = unshaped_bed(Policy::Ecmp);
    b.sw.enable_flow_log(16);
    let v4 = FrameBuilder::ipv4([10, 0, 2, 2], [10, 0, 1, 2])
        .macs(peer(2), mac(2))
        .tcp(80, 40000)
        .build();
    let icmp = FrameBuilder::ipv4([10, 0, 2, 9], [10, 0, 1, 2])
        .macs(peer(3), mac(3))
        .icmp_echo(7, 1)
        .build();
    assert!(b.sw.io().inject(2, &v4));
    assert!(b.sw.io().inject(3, &icmp));
    b.sw.poll(123_456_789);
    assert_eq!(b.sw.io().take_sent(0).len(), 2);
    let mut out = Vec::new();
    FlowLog::write_header(&mut out).unwrap();
    assert_eq!(b.sw.write_flow_log(&mut out).unwrap(), 2);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "time_ns,src,dst,proto,sport,dport,port,ifname,reason,prefix\n\
         123456789,10.0.2.2,10.0.1.2,6,80,40000,0,p0,new,10.0.1.2/32\n\
         123456789,10.0.2.9,10.0.1.2,1,7,0,0,p0,new,10.0.1.2/32\n"
    );
    assert!(b.sw.flow_log().unwrap().records().is_empty());
    // An IPv6 decision over a path port: its line, port and interface
    // agree with where the frame left.
    let out = run(&mut b, &[tcp_a_to_b_v6(50001)], 5 * MS);
    assert_eq!(out.len(), 1);
    let port = out[0].0;
    let mut text = Vec::new();
    b.sw.write_flow_log(&mut text).unwrap();
    let want = match port {
        1 => "5000000,fd00:1::2,fd00:2::2,6,50001,443,1,p1,new,fd00:2::/64\n",
        2 => "5000000,fd00:1::2,fd00:2::2,6,50001,443,2,p2,new,fd00:2::/64\n",
        _ => "5000000,fd00:1::2,fd00:2::2,6,50001,443,3,p3,new,fd00:2::/64\n",
    };
    assert_eq!(String::from_utf8(text).unwrap(), want);
}

// ICMP errors: what a router sends back.

fn icmp_bed() -> Bed {
    let mut b = unshaped_bed(Policy::Ecmp);
    b.sw.set_port_addresses(
        0,
        &["10.0.1.1".parse().unwrap(), "fd00:1::1".parse().unwrap()],
    );
    b
}

#[test]
fn an_expiring_ipv4_packet_gets_time_exceeded_from_the_ingress_address() {
    let mut b = icmp_bed();
    let probe = FrameBuilder::ipv4([10, 0, 1, 2], [10, 0, 2, 2])
        .macs(HOST_A, mac(0))
        .ttl(1)
        .udp(33434, 33435)
        .payload(&[7; 32])
        .build();
    let out = run(&mut b, std::slice::from_ref(&probe), 0);
    assert_eq!(out.len(), 1);
    let (port, f) = &out[0];
    assert_eq!(*port, 0, "back where it came from");
    assert_eq!(&f[0..6], &HOST_A);
    assert_eq!(&f[6..12], &mac(0));
    assert_eq!(ipv4_header_checksum_ok(f), Some(true));
    assert_eq!(f[14 + 9], 1, "ICMP");
    assert_eq!(
        &f[14 + 12..14 + 16],
        &[10, 0, 1, 1],
        "from the port's address"
    );
    assert_eq!(&f[14 + 16..14 + 20], &[10, 0, 1, 2], "to the sender");
    assert_eq!((f[34], f[35]), (11, 0), "time exceeded in transit");
    assert_eq!(l4_checksum_ok(f), Some(true));
    // The whole offending packet is quoted (it is short).
    assert_eq!(&f[42..], &probe[14..]);
    let c = b.sw.counters();
    assert_eq!(c.get(Counter::IcmpSent), 1);
    assert_eq!(
        c.dropped(DropReason::Parse(lcmp_wire::ParseError::TtlExpired)),
        1
    );
}

#[test]
fn ipv6_no_route_gets_unreachable_and_icmp_errors_get_none() {
    let mut b = icmp_bed();
    let lost = FrameBuilder::ipv6(
        [0xfd, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
        [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
    )
    .macs(HOST_A, mac(0))
    .udp(5000, 53)
    .build();
    let out = run(&mut b, std::slice::from_ref(&lost), 0);
    assert_eq!(out.len(), 1);
    let f = &out[0].1;
    assert_eq!(f[14 + 6], 58, "ICMPv6");
    assert_eq!(
        &f[14 + 8..14 + 24],
        &[0xfd, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]
    );
    assert_eq!((f[54], f[55]), (1, 0), "no route to destination");
    assert_eq!(l4_checksum_ok(f), Some(true));
    // That error, sent back in (TTL 1) as if it looped: no error about it.
    let mut looped = f.clone();
    looped[14 + 7] = 1;
    looped[0..6].copy_from_slice(&mac(0));
    looped[6..12].copy_from_slice(&HOST_A);
    assert!(run(&mut b, &[looped], 0).is_empty());
}

#[test]
fn icmp_errors_are_rate_limited() {
    let mut b = icmp_bed();
    let probes: Vec<Vec<u8>> = (0..200)
        .map(|i| {
            FrameBuilder::ipv4([10, 0, 1, 2], [10, 0, 2, 2])
                .macs(HOST_A, mac(0))
                .ttl(1)
                .udp(40000 + i, 33435)
                .build()
        })
        .collect();
    let out = run(&mut b, &probes, 0);
    let sent = b.sw.counters().get(Counter::IcmpSent);
    assert_eq!(out.len() as u64, sent);
    assert_eq!(sent, lcmp_switch::switch::ICMP_BURST as u64);
    assert_eq!(b.sw.counters().get(Counter::IcmpRateLimited), 200 - sent);
}

#[test]
fn rocev2_frames_are_counted_on_their_ingress_port() {
    let mut b = bed(
        Policy::Ecmp,
        [unshaped(), unshaped(), unshaped(), unshaped()],
    );
    let bth = lcmp_wire::Bth {
        opcode: 0x04, // RC SEND only
        pkey: 0xffff,
        dest_qp: 0x11,
        ack_request: true,
        psn: 7,
    };
    let roce: Vec<Vec<u8>> = (0..3)
        .map(|qp| {
            FrameBuilder::ipv4([10, 0, 1, 2], [10, 0, 2, 2])
                .macs(HOST_A, mac(0))
                .rocev2(49152 + qp, bth)
                .payload(&[0xab; 64])
                .build()
        })
        .collect();
    // Two plain UDP frames, one of them from port 4791 (not to it).
    let mut frames = roce.clone();
    frames.push(udp_a_to_b(5000, 0));
    frames.push(
        FrameBuilder::ipv4([10, 0, 1, 2], [10, 0, 2, 2])
            .macs(HOST_A, mac(0))
            .udp(4791, 5001)
            .build(),
    );
    assert_eq!(run(&mut b, &frames, 0).len(), 5);
    let c = b.sw.counters();
    assert_eq!(c.port(0).get(Counter::RxFrames), 5);
    assert_eq!(c.port(0).get(Counter::RxRocev2Frames), 3);
    assert_eq!(c.get(Counter::RxRocev2Frames), 3);
}

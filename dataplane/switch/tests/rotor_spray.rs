//! Packet spraying in the rotor ToR (issue 27): with shift routing a ToR
//! sends each packet to one of its target's equal-cost next hops, chosen
//! uniformly at random, over in-memory ports.
//!
//! The network is static (one matching per rotor, never reconfigured):
//! 6 ToRs, rotor 0 the shift +1, rotor 1 the shift +3, so ToR 0's uplink 0
//! reaches ToR 1 and uplink 1 ToR 3. From ToR 0, ToR k = a + 3 b (mod 6)
//! is a + b hops away at the least: ToR 2 = 1 + 1 is 2 hops, via ToR 1
//! only (from ToR 3 it is 3 more: 3 + 1 + 1 + 3); ToR 4 = 1 + 3 = 3 + 1
//! is 2 hops via ToR 1 or via ToR 3; ToR 5 = 1 + 1 + 3 is 3 hops via
//! ToR 1 (then 4 left, 2 hops) or ToR 3 (then 2 left, 2 hops).

use lcmp_switch::mem_io::MemIo;
use lcmp_switch::rotor_tor::TorRouting;
use lcmp_switch::tor_path::{TorConfig, TorSwitch};
use lcmp_topology::rotor::{self, Schedule, ScheduleKind};
use lcmp_topology::rotor_net::{RotorNetwork, RotorRouting};
use lcmp_wire::testing::FrameBuilder;

const SLOT: u64 = 1_000_000;
const RECONF: u64 = 100_000;
const HOST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x11];
const HOST_PORT: usize = 2;
/// Frames injected per poll (the ToR's receive batch is 256).
const BATCH: usize = 200;

fn mac(port: usize) -> [u8; 6] {
    [0x02, 0xaa, 0, 0, 0, port as u8]
}

/// The static +1 / +3 network on 6 ToRs (the module docs), shift routing
/// (the default of a static network), a buffer for every frame here.
fn net() -> RotorNetwork {
    let shift = |k: u32| (0..6).map(|x| (x + k) % 6).collect::<Vec<u32>>();
    let s = Schedule {
        kind: ScheduleKind::Static,
        tors: 6,
        rotors: 2,
        matchings: vec![shift(1), shift(3)],
    };
    let mut n = RotorNetwork::from_schedule(&s, SLOT, RECONF);
    n.tx_guard_ns = 0;
    n.buffer_bytes = Some(1 << 22);
    n
}

fn tor(t: u32, net: &RotorNetwork, seed: u64) -> TorSwitch<MemIo> {
    TorSwitch::new(
        MemIo::new(3, 4096),
        TorConfig::for_network(
            net,
            t,
            (0..3).map(mac).collect(),
            vec![Some(HOST_MAC)],
            0,
            seed,
        )
        .unwrap(),
        true,
    )
    .unwrap()
}

/// A 100-byte UDP frame from host (0, 0) to host (d, 0).
fn frame(d: u8) -> Vec<u8> {
    FrameBuilder::ipv4([10, 0, 0, 2], [10, d, 0, 2])
        .macs(HOST_MAC, mac(HOST_PORT))
        .udp(4000, 5000)
        .pad_to(100)
        .build()
}

/// Sends `count` frames from ToR `t`'s host to ToR `d`'s, polled at
/// `now`: each is queued at its next hop, none has finished serializing.
fn send(t: &mut TorSwitch<MemIo>, d: u8, count: usize, now: u64) {
    let mut left = count;
    while left > 0 {
        let n = left.min(BATCH);
        for _ in 0..n {
            assert!(t.io().inject(HOST_PORT, &frame(d)));
        }
        t.poll(now);
        left -= n;
    }
}

#[test]
fn the_routing_of_a_network_is_its_equal_cost_next_hops() {
    let n = net();
    let want: Vec<Vec<u32>> = vec![vec![], vec![1], vec![1], vec![3], vec![1, 3], vec![1, 3]];
    assert_eq!(
        TorRouting::for_network(&n, 0),
        Ok(TorRouting::Spray(want.clone()))
    );
    let t = tor(0, &n, 7);
    for (d, set) in want.iter().enumerate() {
        assert_eq!(t.core().next_hops(d as u32), &set[..], "towards {d}");
    }
    // Shift-Valiant sprays the same way; direct and Valiant go straight.
    let mut sv = net();
    sv.routing = Some(RotorRouting::ShiftValiant);
    assert_eq!(TorRouting::for_network(&sv, 0), Ok(TorRouting::Spray(want)));
    for r in [RotorRouting::Direct, RotorRouting::Valiant] {
        let mut d = net();
        d.routing = Some(r);
        assert_eq!(TorRouting::for_network(&d, 5), Ok(TorRouting::Direct));
    }
    assert_eq!(
        TorRouting::for_network(&n, 6),
        Err("ToR 6: the rotor network has 6 (tor0..tor5)".into())
    );
    // The static expander the experiments compare against.
    let e = RotorNetwork::from_schedule(&rotor::static_expander(16, 2).unwrap(), SLOT, RECONF);
    assert_eq!(
        TorRouting::for_network(&e, 3),
        Ok(TorRouting::Spray(rotor::equal_cost_next_hops_from(
            &e.schedule().unwrap(),
            3
        )))
    );
}

#[test]
fn packets_to_a_target_of_two_shortest_paths_are_sprayed_over_both() {
    let n = net();
    let mut t = tor(0, &n, 7);
    send(&mut t, 4, 2000, 0);
    // Every packet takes ToR 1 or ToR 3 with probability 1/2: of 2000,
    // mean 1000, sd sqrt(2000 / 4) = 22.4; within 5 sd, 888 to 1112 each
    // (seeded, so reproducible; a fair coin misses that once in 1.7
    // million seeds).
    let (via1, via3) = (t.core().queue_frames(1), t.core().queue_frames(3));
    assert_eq!(via1 + via3, 2000);
    assert!((888..=1112).contains(&via1), "{via1} via 1, {via3} via 3");
    // ToR 2 has one shortest path, via ToR 1: every packet takes it.
    send(&mut t, 2, 500, 0);
    assert_eq!(
        (t.core().queue_frames(1), t.core().queue_frames(3)),
        (via1 + 500, via3)
    );
    // A static network has no slots: after 2500 x 100 bytes at 100 Mbit/s
    // (20 ms) everything has left, ToR 1's on uplink 0 and ToR 3's on
    // uplink 1, still marked for their targets.
    t.poll(SLOT * 100);
    let up0 = t.io().take_sent(0);
    let up1 = t.io().take_sent(1);
    assert_eq!((up0.len(), up1.len()), (via1 + 500, via3));
    assert!(up1.iter().all(|f| f[5] == 4));
    assert_eq!(up0.iter().filter(|f| f[5] == 4).count(), via1);
    assert_eq!(up0.iter().filter(|f| f[5] == 2).count(), 500);
    assert_eq!(t.counters().valiant_detours, 0);
}

#[test]
fn the_same_seed_sprays_the_same_way() {
    let n = net();
    // Per packet, the uplink it leaves on.
    let uplinks = |seed: u64| {
        let mut t = tor(0, &n, seed);
        // One packet a slot; 100 bytes at 100 Mbit/s take 8 us.
        (0..64u64)
            .map(|i| {
                send(&mut t, 5, 1, i * SLOT);
                let before = t.core().queue_frames(3);
                t.poll(i * SLOT + SLOT / 2);
                let out = (t.io().take_sent(0).len(), t.io().take_sent(1).len());
                assert_eq!(before, out.1);
                out
            })
            .collect::<Vec<_>>()
    };
    let a = uplinks(7);
    assert!(a.iter().all(|&(u0, u1)| u0 + u1 == 1));
    assert_eq!(a, uplinks(7));
    assert_ne!(a, uplinks(8));
}

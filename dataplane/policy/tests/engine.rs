//! Behaviour of the whole engine as the switch uses it: FlowRouter over
//! estimator-fed ports.

use std::net::Ipv4Addr;

use lcmp_policy::{
    Candidate, CandidateSet, CongestionParams, FlowCache, FlowHasher, FlowKey, FlowRouter, Policy,
    PortStates, RouteOutcome, Selector,
};

const G: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;
const SEC: u64 = 1_000 * MS;
const BUFFER: u64 = 1_000_000;

fn key(i: u32) -> FlowKey {
    FlowKey::V4 {
        src: Ipv4Addr::from(0x0a01_0000 + (i >> 12)),
        dst: Ipv4Addr::new(10, 8, 0, 2),
        proto: 17,
        sport: 49_152 + (i & 0xfff) as u16,
        dport: 4791,
    }
}

/// Six candidates with C_path 18, 182, 38, 104, 60, 93 (the 8-DC paths via
/// DC2..DC7 under default weights), ports 0..6.
fn six_paths() -> CandidateSet {
    let c_path = [18, 182, 38, 104, 60, 93];
    let caps = [200, 200, 100, 100, 25, 25];
    let v: Vec<Candidate> = (0..6)
        .map(|i| Candidate {
            port: i as u8,
            c_path: c_path[i],
            capacity_bps: caps[i] * G,
        })
        .collect();
    CandidateSet::new(&v).unwrap()
}

fn ports(n: usize) -> PortStates {
    PortStates::new(&CongestionParams::default(), &vec![(10 * G, BUFFER); n])
}

fn router(policy: &str, capacity: usize) -> FlowRouter {
    FlowRouter::new(
        Selector::new(Policy::from_name(policy).unwrap()),
        FlowCache::new(capacity, SEC),
    )
}

#[test]
fn herd_of_new_flows_spreads_evenly_over_the_kept_set() {
    // 10,000 flows start against one congestion snapshot. LCMP keeps ports
    // 0, 2, 4 (costs 54, 114, 180 against 279, 312, 546) and must spread the
    // herd over them instead of piling onto the cheapest.
    let mut r = router("lcmp", 1 << 15);
    let set = six_paths();
    let mut ports = ports(6);
    // One snapshot with some queue everywhere (not enough to reorder).
    for p in 0..6 {
        ports.sample(p, 0, 5_000);
    }
    let hasher = FlowHasher::new(0x5eed);
    let mut counts = [0u32; 6];
    for i in 0..10_000 {
        let out = r.route(hasher.hash(&key(i)), &set, &ports, MS);
        assert!(matches!(out, RouteOutcome::New(_)), "{out:?}");
        counts[out.port().unwrap() as usize] += 1;
    }
    assert_eq!(counts[1] + counts[3] + counts[5], 0, "{counts:?}");
    let even = 10_000.0 / 3.0;
    for p in [0, 2, 4] {
        let share = counts[p] as f64;
        assert!(
            (share - even).abs() <= 0.05 * even,
            "port {p}: {share} flows, even is {even:.0} ({counts:?})"
        );
    }
    println!("herd: {counts:?}");
}

#[test]
fn cached_flows_stay_put_when_congestion_changes() {
    let mut r = router("lcmp", 1 << 12);
    let set = six_paths();
    let mut ports = ports(6);
    let hasher = FlowHasher::new(1);
    let first: Vec<u8> = (0..300)
        .map(|i| {
            r.route(hasher.hash(&key(i)), &set, &ports, 0)
                .port()
                .unwrap()
        })
        .collect();
    // Congest the kept ports heavily: new flows go elsewhere, old ones stay.
    for p in [0, 2, 4] {
        for t in 0..50 {
            ports.sample(p, t * 100_000, BUFFER);
        }
    }
    for (i, &port) in first.iter().enumerate() {
        let out = r.route(hasher.hash(&key(i as u32)), &set, &ports, 10 * MS);
        assert_eq!(out, RouteOutcome::Cached(port));
    }
    let moved = (1000..1300)
        .map(|i| {
            r.route(hasher.hash(&key(i)), &set, &ports, 10 * MS)
                .port()
                .unwrap()
        })
        .filter(|p| [1, 3, 5].contains(p))
        .count();
    assert!(moved > 0, "new flows ignored congestion");
    assert_eq!(r.stats().hits, 300);
}

#[test]
fn all_congested_falls_back_to_minimum_cost() {
    let mut r = router("lcmp", 1 << 12);
    let set = six_paths();
    // With the default weights a full but steady queue scores at most
    // (2*255 + 0 + 255) >> 2 = 191: "congested" (>= 204) also needs the
    // queue to keep growing. 1 Gbit/s ports with 100 MB buffers: fill to
    // 90 MB (Q = 255), then grow 5 kB per 100 us interval (T -> 5 kB, 40%
    // of the drain: 102) for
    // 1,100 intervals (D = 255): (510 + 102 + 255) >> 2 = 216.
    let mut ports = PortStates::new(&CongestionParams::default(), &[(G, 100_000_000); 6]);
    for p in 0..6 {
        for t in 0..=1_100u64 {
            ports.sample(p, t * 100_000, 90_000_000 + t * 5_000);
        }
        assert_eq!(ports.estimator(p).c_cong(), 216);
    }
    let hasher = FlowHasher::new(1);
    for i in 0..200 {
        let out = r.route(hasher.hash(&key(i)), &set, &ports, 111 * MS);
        assert_eq!(out, RouteOutcome::New(0), "min-cost candidate is port 0");
    }
    assert_eq!(r.stats().all_congested_decisions, 200);
}

#[test]
fn failover_moves_only_flows_of_the_dead_port() {
    let mut r = router("ecmp", 1 << 12);
    let set = six_paths();
    let mut ports = ports(6);
    let hasher = FlowHasher::new(3);
    let hashes: Vec<_> = (0..600).map(|i| hasher.hash(&key(i))).collect();
    let before: Vec<u8> = hashes
        .iter()
        .map(|&h| r.route(h, &set, &ports, 0).port().unwrap())
        .collect();
    assert!(before.contains(&2));
    ports.set_up(2, false);
    let mut after = Vec::new();
    for (&h, &old) in hashes.iter().zip(&before) {
        let out = r.route(h, &set, &ports, MS);
        if old == 2 {
            assert!(
                matches!(out, RouteOutcome::FailedOver(p) if p != 2),
                "{out:?}"
            );
        } else {
            assert_eq!(out, RouteOutcome::Cached(old));
        }
        after.push(out.port().unwrap());
    }
    let failed_over = before.iter().filter(|&&p| p == 2).count() as u64;
    assert_eq!(r.stats().failovers, failed_over);
    // The port comes back: flows that moved stay on their new port.
    ports.set_up(2, true);
    for (&h, &port) in hashes.iter().zip(&after) {
        assert_eq!(r.route(h, &set, &ports, 2 * MS), RouteOutcome::Cached(port));
    }
}

#[test]
fn failover_spreads_a_dead_paths_flows_over_the_live_ones() {
    // LCMP keeping all 3 of a 3-path route: whichever rank dies, its flows
    // must spread over both survivors, not follow each other to one.
    let set = {
        let v: Vec<Candidate> = (0..3)
            .map(|i| Candidate {
                port: i,
                c_path: 20 * i,
                capacity_bps: G,
            })
            .collect();
        CandidateSet::new(&v).unwrap()
    };
    let hasher = FlowHasher::new(11);
    let hashes: Vec<_> = (0..3000).map(|i| hasher.hash(&key(i))).collect();
    for dead in 0..3u8 {
        let mut r = router("lcmp", 1 << 13);
        let mut ports = ports(3);
        let before: Vec<u8> = hashes
            .iter()
            .map(|&h| r.route(h, &set, &ports, 0).port().unwrap())
            .collect();
        ports.set_up(dead, false);
        let mut moved_to = [0u32; 3];
        for (&h, &old) in hashes.iter().zip(&before) {
            if old == dead {
                moved_to[r.route(h, &set, &ports, MS).port().unwrap() as usize] += 1;
            }
        }
        let total: u32 = moved_to.iter().sum();
        assert!(total > 800, "{moved_to:?}");
        for p in (0..3).filter(|&p| p != dead as usize) {
            let share = moved_to[p] as f64 / total as f64;
            assert!((0.4..0.6).contains(&share), "dead {dead}: {moved_to:?}");
        }
    }
}

#[test]
fn no_live_port_is_reported_and_counted() {
    let mut r = router("lcmp", 64);
    let set = six_paths();
    let mut ports = ports(6);
    for p in 0..6 {
        ports.set_up(p, false);
    }
    let h = FlowHasher::new(1).hash(&key(1));
    assert_eq!(r.route(h, &set, &ports, 0), RouteOutcome::NoLivePort);
    assert_eq!(r.stats().no_live_port, 1);
    assert!(r.cache().is_empty());
}

#[test]
fn full_cache_still_decides_and_keeps_what_it_has() {
    let mut r = router("ecmp", 64);
    let set = six_paths();
    let ports = ports(6);
    let hasher = FlowHasher::new(1);
    let mut cached = Vec::new();
    let mut uncached = 0;
    for i in 0..500 {
        let h = hasher.hash(&key(i));
        match r.route(h, &set, &ports, 0) {
            RouteOutcome::New(p) => cached.push((h, p)),
            RouteOutcome::Uncached(_) => uncached += 1,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(cached.len(), 64);
    assert_eq!(uncached, 436);
    let s = r.stats();
    assert_eq!((s.inserts, s.cache_full_decisions), (64, 436));
    for (h, p) in cached {
        assert_eq!(r.route(h, &set, &ports, MS), RouteOutcome::Cached(p));
    }
}

#[test]
fn idle_flows_are_evicted_incrementally_and_re_decided() {
    let mut r = router("lcmp", 1 << 10);
    let set = six_paths();
    let ports = ports(6);
    let hasher = FlowHasher::new(1);
    for i in 0..100 {
        r.route(hasher.hash(&key(i)), &set, &ports, 0);
    }
    let mut evicted = 0;
    for _ in 0..(1 << 10) / 8 {
        evicted += r.evict_step(3 * SEC, 1);
    }
    assert_eq!(evicted, 100);
    assert_eq!(r.stats().evictions, 100);
    let out = r.route(hasher.hash(&key(1)), &set, &ports, 3 * SEC);
    assert!(matches!(out, RouteOutcome::New(_)));
}

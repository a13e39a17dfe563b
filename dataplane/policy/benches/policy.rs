//! Criterion benchmarks of the policy engine's per-packet work.
//!
//! - `decide/N`: one LCMP decision over N candidates whose ports' congestion
//!   has been sampled (the new-flow path, without the cache).
//! - `policy/NAME`: one decision of each registered policy over the same 8
//!   sampled candidates (every arm of the policy dispatch).
//! - `flow_cache/hit_50k`, `hit_1m`: hash a 5-tuple and find it among 50k or
//!   1M cached flows (the per-packet path of an established flow), in random
//!   order so the 1M case pays its cache misses.
//! - `flow_cache/insert_1m`: cache a new flow in a table holding ~1M.
//! - `flow_cache/evict_step`: one bounded sweep step (64 buckets) of a full
//!   table.
//!
//! Prints `bytes_per_flow: N` (cache memory / capacity) before measuring.

use std::hint::black_box;
use std::net::Ipv4Addr;

use criterion::{criterion_group, criterion_main, Criterion};
use lcmp_policy::{
    Candidate, CandidateSet, CongestionParams, FlowCache, FlowHasher, FlowKey, Policy, PortStates,
    Selector,
};

const G: u64 = 1_000_000_000;
const SEC: u64 = 1_000_000_000;

fn key(i: u32) -> FlowKey {
    FlowKey::V4 {
        src: Ipv4Addr::from(0x0a01_0000 | (i >> 16)),
        dst: Ipv4Addr::from(0x0a08_0000 | (i & 0xffff)),
        proto: 17,
        sport: (i as u16).wrapping_mul(7919),
        dport: 4791,
    }
}

/// A cheap deterministic permutation-ish shuffle (xorshift), so lookups hit
/// the table in random order.
fn shuffled(n: u32) -> Vec<u32> {
    let mut v: Vec<u32> = (0..n).collect();
    let mut s: u64 = 0x2545_F491_4F6C_DD1D;
    for i in (1..v.len()).rev() {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        v.swap(i, (s % (i as u64 + 1)) as usize);
    }
    v
}

/// N candidates whose ports' congestion has been sampled.
fn sampled_route(n: usize) -> (PortStates, CandidateSet) {
    let links: Vec<(u64, u64)> = (0..n).map(|i| ((25 << i) * G, 32_000_000)).collect();
    let mut ports = PortStates::new(&CongestionParams::default(), &links);
    for p in 0..n {
        // Varied queues so costs differ and the sort does work.
        ports.sample(p as u8, 0, (p as u64 * 7_919_123) % 32_000_000);
        ports.sample(p as u8, 100_000, (p as u64 * 3_331_777) % 32_000_000);
    }
    let cands: Vec<Candidate> = (0..n)
        .map(|i| Candidate {
            port: i as u8,
            c_path: ((i * 97) % 256) as u8,
            capacity_bps: links[i].0,
        })
        .collect();
    (ports, CandidateSet::new(&cands).unwrap())
}

fn bench_decide(c: &mut Criterion) {
    let mut group = c.benchmark_group("decide");
    let hasher = FlowHasher::new(1);
    let hashes: Vec<_> = (0..1024).map(|i| hasher.hash(&key(i))).collect();
    for n in [2usize, 4, 6, 8] {
        let (ports, set) = sampled_route(n);
        let sel = Selector::new(Policy::from_name("lcmp").unwrap());
        let mut i = 0usize;
        group.bench_function(n.to_string(), |b| {
            b.iter(|| {
                i = (i + 1) & 1023;
                black_box(sel.decide(black_box(&set), &ports, hashes[i]))
            })
        });
    }
    group.finish();
}

fn bench_policies(c: &mut Criterion) {
    let mut group = c.benchmark_group("policy");
    let hasher = FlowHasher::new(1);
    let hashes: Vec<_> = (0..1024).map(|i| hasher.hash(&key(i))).collect();
    let (ports, set) = sampled_route(8);
    for name in Policy::NAMES {
        let sel = Selector::new(Policy::from_name(name).unwrap());
        let mut i = 0usize;
        group.bench_function(name, |b| {
            b.iter(|| {
                i = (i + 1) & 1023;
                black_box(sel.decide(black_box(&set), &ports, hashes[i]))
            })
        });
    }
    group.finish();
}

/// A cache filled with `flows` flows; returns it with the keys' shuffled
/// lookup order.
fn filled(capacity: usize, flows: u32, hasher: &FlowHasher) -> (FlowCache, Vec<FlowKey>, u64) {
    let mut cache = FlowCache::new(capacity, 2 * SEC);
    let mut full = 0;
    for i in 0..flows {
        if cache
            .insert(hasher.hash(&key(i)).0, (i % 6) as u8, 0)
            .is_err()
        {
            full += 1;
        }
    }
    let keys = shuffled(flows).into_iter().map(key).collect();
    (cache, keys, full)
}

fn bench_flow_cache(c: &mut Criterion) {
    let hasher = FlowHasher::new(1);
    let probe = FlowCache::new(1 << 20, 2 * SEC);
    println!(
        "bytes_per_flow: {}",
        probe.memory_bytes() / probe.capacity()
    );
    drop(probe);

    let mut group = c.benchmark_group("flow_cache");
    for (id, capacity, flows) in [("hit_50k", 1 << 16, 50_000), ("hit_1m", 1 << 20, 1_000_000)] {
        let (mut cache, keys, full) = filled(capacity, flows, &hasher);
        println!("{id}: {flows} flows in {capacity} slots, {full} refused (bucket full)");
        let mut i = 0usize;
        group.bench_function(id, |b| {
            b.iter(|| {
                i += 1;
                if i == keys.len() {
                    i = 0;
                }
                let h = hasher.hash(black_box(&keys[i]));
                black_box(cache.lookup(h.0, SEC))
            })
        });
    }

    // Insert into a table holding ~1M flows (90% of 2^20 slots): time a
    // run of inserts, then remove them untimed so the load stays put.
    let (mut cache, _, _) = filled(1 << 20, 950_000, &hasher);
    let fresh: Vec<u64> = (0..20_000)
        .map(|i| hasher.hash(&key(2_000_000 + i)).0)
        .collect();
    group.bench_function("insert_1m", |b| {
        b.iter_custom(|iters| {
            let mut spent = std::time::Duration::ZERO;
            let mut left = iters as usize;
            while left > 0 {
                let run = &fresh[..left.min(fresh.len())];
                let start = std::time::Instant::now();
                for &h in run {
                    let _ = black_box(cache.insert(h, 1, SEC));
                }
                spent += start.elapsed();
                for &h in run {
                    cache.remove(h);
                }
                left -= run.len();
            }
            spent
        })
    });

    let (mut cache, _, _) = filled(1 << 20, 900_000, &hasher);
    let mut now = SEC;
    group.bench_function("evict_step", |b| {
        b.iter(|| {
            // Time advances slowly: entries stay live, so every step scans
            // 64 full buckets, the worst case for a step.
            now += 1;
            black_box(cache.evict_step(now, 64))
        })
    });
    group.finish();
}

criterion_group!(benches, bench_decide, bench_policies, bench_flow_cache);
criterion_main!(benches);

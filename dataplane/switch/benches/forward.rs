//! The switch's user-space work per frame, over in-memory ports: receive a
//! batch, parse, flow cache, rewrite, egress (unshaped), transmit. No
//! kernel, no cross-core cache misses: the floor of the AF_XDP fast path.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use lcmp_policy::{Candidate, CandidateSet, CongestionParams, Policy};
use lcmp_switch::egress::EgressConfig;
use lcmp_switch::mem_io::MemIo;
use lcmp_switch::routing::Route;
use lcmp_switch::switch::{PortConfig, Switch, SwitchConfig};
use lcmp_wire::testing::FrameBuilder;

fn switch(paths: usize) -> Switch<MemIo> {
    let ports = (0..=paths)
        .map(|i| PortConfig {
            name: format!("p{i}"),
            mac: [2, 0, 0, 0, 1, i as u8],
            peer_mac: Some([2, 0, 0, 0, 2, i as u8]),
            egress: EgressConfig {
                rate_bps: 0,
                delay_ns: 0,
                buffer_bytes: 1 << 24,
                ecn: None,
                max_in_flight: 4096,
            },
        })
        .collect();
    let cands: Vec<Candidate> = (1..=paths)
        .map(|p| Candidate {
            port: p as u8,
            c_path: (p * 30) as u8,
            capacity_bps: 100_000_000_000,
        })
        .collect();
    let config = SwitchConfig {
        ports,
        routes: vec![Route {
            prefix: "198.18.1.0/24".parse().unwrap(),
            candidates: CandidateSet::new(&cands).unwrap(),
        }],
        policy: Policy::from_name("lcmp").unwrap(),
        congestion: CongestionParams::default(),
        flow_capacity: 1 << 16,
        flow_idle_timeout_ns: 1_000_000_000,
        seed: 1,
        batch_size: 64,
        link_check_interval_ns: 1_000_000,
    };
    Switch::new(config, MemIo::new(paths + 1, 4096)).unwrap()
}

fn bench_forward(c: &mut Criterion) {
    let mut group = c.benchmark_group("forward");
    for (id, flows) in [("batch64_1flow", 1u16), ("batch64_1k_flows", 1000)] {
        let frames: Vec<Vec<u8>> = (0..flows)
            .map(|f| {
                FrameBuilder::ipv4([198, 18, 0, 2], [198, 18, 1, 2])
                    .macs([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 1, 0])
                    .udp(1000 + f, 9)
                    .pad_to(64)
                    .build()
            })
            .collect();
        let mut sw = switch(3);
        let mut next = 0usize;
        let mut now = 0u64;
        group.throughput(criterion::Throughput::Elements(64));
        group.bench_function(id, |b| {
            b.iter_custom(|iters| {
                let mut spent = Duration::ZERO;
                for _ in 0..iters {
                    for _ in 0..64 {
                        sw.io().inject(0, &frames[next]);
                        next = (next + 1) % frames.len();
                    }
                    let start = Instant::now();
                    now += 1_000;
                    sw.poll(now);
                    spent += start.elapsed();
                    for p in 1..4 {
                        sw.io().take_sent(p);
                    }
                }
                spent
            })
        });
        let c = sw.counters().clone();
        let free = sw.io().free_frames();
        println!(
            "{id}: rx {} tx {} drops {} (free frames {free})",
            c.rx_frames,
            c.tx_frames,
            c.total_drops(),
        );
    }
    group.finish();
}

criterion_group!(benches, bench_forward);
criterion_main!(benches);

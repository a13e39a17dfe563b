//! The switch's user-space work per frame, over in-memory ports: receive a
//! batch, parse, flow cache, rewrite, egress (unshaped), transmit. No
//! kernel, no cross-core cache misses: the floor of the AF_XDP fast path.
//! Also the flow log's off-path cost (`flow_log/write_1k_records`), and
//! INT's: RoCEv2 frames carrying a five-slot INT collect block with INT off
//! and on (`batch64_1flow_rocev2_int_off` / `_on`: the difference over 64
//! is the cost per frame of writing a hop).

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use ipnet::IpNet;
use lcmp_policy::{Candidate, CandidateSet, CongestionParams, Policy};
use lcmp_switch::counters::Counter;
use lcmp_switch::egress::EgressConfig;
use lcmp_switch::flow_log::{DecisionReason, FlowLog, FlowRecord};
use lcmp_switch::lpm::Route;
use lcmp_switch::mem_io::MemIo;
use lcmp_switch::switch::{PortConfig, Switch, SwitchConfig};
use lcmp_wire::testing::FrameBuilder;
use lcmp_wire::{write_collect, Bth, FlowTuple};

/// A switch with `paths` path ports plus one ingress port, a flow cache of
/// `flow_capacity` flows, the flow log on if `flow_log`, INT on if `int`.
fn switch(paths: usize, flow_capacity: usize, flow_log: bool, int: bool) -> Switch<MemIo> {
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
        flow_capacity,
        flow_idle_timeout_ns: 1_000_000_000,
        seed: 1,
        batch_size: 64,
        link_check_interval_ns: 1_000_000,
        ecn: None,
        ecn_link_time: None,
        ecn_mark_at: Default::default(),
        drop_headroom: 1,
    };
    let mut sw = Switch::new(config, MemIo::new(paths + 1, 4096)).unwrap();
    if flow_log {
        sw.enable_flow_log(65536);
    }
    sw.set_int(int);
    sw
}

/// What a bench case forwards.
#[derive(Clone, Copy)]
enum Frames {
    /// 64-byte UDP frames.
    Udp,
    /// RoCEv2 frames with an empty five-slot INT collect block and 64
    /// bytes of payload: 14 + 20 + 8 + 12 + (4 + 5 * 16) + 64 + 4 = 206
    /// bytes.
    RoceInt,
}

fn frame(kind: Frames, f: u16) -> Vec<u8> {
    let b = FrameBuilder::ipv4([198, 18, 0, 2], [198, 18, 1, 2])
        .macs([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 1, 0]);
    match kind {
        Frames::Udp => b.udp(1000 + f, 9).pad_to(64).build(),
        Frames::RoceInt => {
            let mut block = [0u8; 84];
            write_collect(&mut block, 5).unwrap();
            b.rocev2(
                1000 + f,
                Bth {
                    opcode: 0x07,
                    pkey: 0xffff,
                    dest_qp: 1,
                    ack_request: false,
                    psn: 0,
                },
            )
            .int_block(&block)
            .payload(&[0; 64])
            .build()
        }
    }
}

fn bench_forward(c: &mut Criterion) {
    let mut group = c.benchmark_group("forward");
    // Cache hits (the first packet of each flow is a decision, then warm
    // hits), and decisions: 1000 flows over a one-bucket (8-flow) cache, so
    // nearly every frame is decided anew (`cache_full`). Each with the flow
    // log off and on; the log is written to a sink outside the timing.
    // INT: the same RoCEv2 frames with a collect block, INT off and on.
    let cases = [
        ("batch64_1flow", 1u16, 1 << 16, false, Frames::Udp, false),
        ("batch64_1k_flows", 1000, 1 << 16, false, Frames::Udp, false),
        ("batch64_decisions", 1000, 8, false, Frames::Udp, false),
        (
            "batch64_1flow_flowlog",
            1,
            1 << 16,
            true,
            Frames::Udp,
            false,
        ),
        (
            "batch64_1k_flows_flowlog",
            1000,
            1 << 16,
            true,
            Frames::Udp,
            false,
        ),
        (
            "batch64_decisions_flowlog",
            1000,
            8,
            true,
            Frames::Udp,
            false,
        ),
        (
            "batch64_1flow_rocev2_int_off",
            1,
            1 << 16,
            false,
            Frames::RoceInt,
            false,
        ),
        (
            "batch64_1flow_rocev2_int_on",
            1,
            1 << 16,
            false,
            Frames::RoceInt,
            true,
        ),
    ];
    for (id, flows, flow_capacity, flow_log, kind, int) in cases {
        let frames: Vec<Vec<u8>> = (0..flows).map(|f| frame(kind, f)).collect();
        let mut sw = switch(3, flow_capacity, flow_log, int);
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
                    if sw.flow_log().is_some_and(|l| l.half_full()) {
                        sw.write_flow_log(&mut std::io::sink()).unwrap();
                    }
                }
                spent
            })
        });
        let c = sw.counters().clone();
        let free = sw.io().free_frames();
        let r = sw.router_stats();
        let log = sw.flow_log().map(|l| l.stats());
        println!(
            "{id}: rx {} tx {} drops {} (free frames {free}), decisions {}, flow log {log:?}, int hops {}",
            c.get(Counter::RxFrames),
            c.get(Counter::TxFrames),
            c.total_drops(),
            r.inserts + r.cache_full_decisions + r.failovers,
            c.get(Counter::IntPushed),
        );
    }
    group.finish();
}

/// The daemon's off-path work for the flow log: formatting 1024 buffered
/// decisions (half IPv4, half IPv6) as CSV and one write to a sink.
fn bench_flow_log_write(c: &mut Criterion) {
    let mut log = FlowLog::new(1024);
    let records: Vec<FlowRecord> = (0..1024u16)
        .map(|i| FlowRecord {
            time_ns: 1_000_000_000_000 + u64::from(i) * 977,
            flow: if i % 2 == 0 {
                FlowTuple::V4 {
                    src: [198, 18, 0, 2],
                    dst: [198, 18, 1, 2],
                    proto: 6,
                    sport: 1000 + i,
                    dport: 5001,
                }
            } else {
                FlowTuple::V6 {
                    src: [0xfd, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
                    dst: [0xfd, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
                    proto: 17,
                    sport: 1000 + i,
                    dport: 4791,
                }
            },
            port: (i % 3 + 1) as u8,
            reason: DecisionReason::New,
        })
        .collect();
    let prefix4: IpNet = "198.18.1.0/24".parse().unwrap();
    let prefix6: IpNet = "fd00:2::/64".parse().unwrap();
    let mut group = c.benchmark_group("flow_log");
    group.throughput(criterion::Throughput::Elements(1024));
    group.bench_function("write_1k_records", |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            for _ in 0..iters {
                for r in &records {
                    log.record(*r);
                }
                let start = Instant::now();
                let n = log
                    .write_csv(
                        &mut std::io::sink(),
                        |_| "p1",
                        |a| Some(if a.is_ipv4() { prefix4 } else { prefix6 }),
                    )
                    .unwrap();
                spent += start.elapsed();
                assert_eq!(n, 1024);
            }
            spent
        })
    });
    group.finish();
}

criterion_group!(benches, bench_forward, bench_flow_log_write);
criterion_main!(benches);

//! Costs of the RoCEv2 transport's packet path, in memory: encode + parse
//! of a 1000-byte data packet, one DCQCN event, and the sender's
//! scheduling per packet with 1, 1000 and 10000 active queue pairs.

use std::hint::black_box;
use std::net::{Ipv4Addr, SocketAddrV4};

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};

use lcmp_traffic::rocev2::dcqcn::{Dcqcn, DcqcnParams};
use lcmp_traffic::rocev2::sender::{NewFlow, SenderConfig, SenderCore};
use lcmp_traffic::rocev2::wire::{self, DataOpcode, Endpoints, Message, Reth, ECN_ECT0};

fn codec(c: &mut Criterion) {
    let ep = Endpoints {
        src: Ipv4Addr::new(10, 1, 0, 2),
        dst: Ipv4Addr::new(10, 8, 0, 2),
        sport: 49200,
        dport: 4791,
    };
    let payload = [0x5au8; 1000];
    let m = Message::Data {
        opcode: DataOpcode::First,
        qp: 77,
        psn: 0,
        fecn: false,
        ack_req: true,
        reth: Some(Reth {
            va: 1,
            rkey: 2,
            dma_len: 50_000,
        }),
        payload: &payload,
    };
    let mut buf = Vec::with_capacity(2048);
    let mut g = c.benchmark_group("wire");
    g.throughput(Throughput::Elements(1));
    g.bench_function("encode+parse 1000-byte data packet", |b| {
        b.iter(|| {
            buf.clear();
            wire::encode_datagram(&mut buf, &ep, ECN_ECT0, black_box(&m)).unwrap();
            black_box(wire::parse_datagram(&buf).unwrap());
        })
    });
    g.finish();
}

fn dcqcn(c: &mut Criterion) {
    let p = DcqcnParams::default().emulated(&lcmp_topology::Scaling::rates(1000.0));
    let mut g = c.benchmark_group("dcqcn");
    g.throughput(Throughput::Elements(1));
    // An event every 84 us (a 1054-byte packet at 100 Mbit/s), one in ten
    // with an ECN echo: the steady state of a congested flow.
    g.bench_function("advance per event (84 us apart, 10% echoes)", |b| {
        let mut d = Dcqcn::new(&p);
        let mut t = 0u64;
        let mut k = 0u64;
        b.iter(|| {
            t += 84_320;
            k += 1;
            if k % 10 == 0 {
                d.on_congestion(&p, t);
            } else {
                d.advance(&p, t);
            }
            black_box(d.rate());
        })
    });
    g.finish();
}

fn scheduling(c: &mut Criterion) {
    let mut g = c.benchmark_group("sender");
    // Each iteration releases 100 packets.
    g.throughput(Throughput::Elements(100));
    for qps in [1usize, 1000, 10_000] {
        g.bench_function(format!("schedule one packet, {qps} active QPs"), |b| {
            b.iter_batched_ref(
                || {
                    let mut core = SenderCore::new(SenderConfig {
                        dcqcn: DcqcnParams::default()
                            .emulated(&lcmp_topology::Scaling::rates(1000.0)),
                        payload: 1000,
                        rto_ns: 4_000_000_000,
                    });
                    for q in 0..qps {
                        core.add_flow(NewFlow {
                            qpn: q as u32 + 2,
                            size: 1 << 31,
                            arrival_ns: (q as u64) * 10,
                            tag: q,
                            dst: SocketAddrV4::new(Ipv4Addr::new(10, 8, 0, 2), 4791),
                            sport: 49152,
                            va: q as u64,
                        })
                        .unwrap();
                    }
                    (core, 0u64)
                },
                |(core, now)| {
                    // Jump to the next deadline and release one packet.
                    for _ in 0..100 {
                        *now = core.next_deadline().unwrap_or(*now).max(*now);
                        core.expire(*now);
                        black_box(core.pop_departure(*now));
                    }
                },
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, codec, dcqcn, scheduling);
criterion_main!(benches);

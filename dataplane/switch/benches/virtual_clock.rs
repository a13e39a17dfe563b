//! The virtual-clock engine's speed: frame-hops per second through a
//! chain of LCMP switches joined by memory links, every switch a daemon
//! of one [`VirtualNet`] on one thread. Criterion's throughput is in
//! frame-hops (frames x switches crossed).
//!
//! Two shapes: `paced` (10 Gbit/s links: every hop's egress spaces the
//! frames 800 ns apart, so each poll forwards one frame, the engine's
//! worst case per hop) and `unshaped` (no rate, no delay: a burst crosses
//! each switch in batches).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use lcmp_policy::Policy;
use lcmp_switch::config::Options;
use lcmp_switch::daemon::DaemonConfig;
use lcmp_switch::frames::FrameShare;
use lcmp_switch::in_memory::{self, port_name};
use lcmp_switch::lcmp_node::LcmpNode;
use lcmp_switch::mem_link::MemoryLinks;
use lcmp_switch::virtual_clock::VirtualNet;
use lcmp_topology::Topology;
use lcmp_wire::testing::FrameBuilder;

/// Switches in the chain.
const SWITCHES: usize = 8;
/// Frames per burst.
const BURST: usize = 256;
const HOST_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0xa];

/// The chain a - c1 - ... - c8 - b (also `lcmp-bench virtual-chain`'s).
const CHAIN: &str = include_str!("chain8.toml");

/// The chain as a virtual network, its links at 10 Gbit/s and 10 us or
/// unshaped (no rate, no delay); returns it, host a's (node, port) and
/// host b's.
fn chain(shaped: bool) -> (VirtualNet, (usize, usize), (usize, usize)) {
    let topo = Topology::parse(CHAIN, "chain8.toml").unwrap();
    let names: Vec<&str> = topo.switches().iter().map(|s| s.name.as_str()).collect();
    let mut links = MemoryLinks::build(&topo, &names, 1024, &|_, i| port_name(i)).unwrap();
    let shares = FrameShare::split_area(&vec![4096; names.len()]).unwrap();
    let mut net = VirtualNet::new(0);
    let opts = Options {
        policy: Policy::from_name("lcmp").unwrap(),
        ..Default::default()
    };
    for (name, share) in names.iter().zip(shares) {
        let mut sw = in_memory::switch(&topo, name, &opts, &mut links, Vec::new(), share, &|_| {
            HOST_MAC
        })
        .unwrap();
        if !shaped {
            for p in 0..sw.port_count() {
                sw.set_link(p, 0, 0, 4 << 20);
            }
        }
        let node = LcmpNode::new(sw, name, None, 1).unwrap();
        net.add_node(node, DaemonConfig::quiet(name));
    }
    net.join_links(&links).unwrap();
    let port = |host: &str| {
        let h = topo.host_by_name(host).unwrap();
        let sw = net.index_of(&topo.switch(h.switch).name).unwrap();
        (sw, usize::from(h.port))
    };
    let (a, b) = (port("a"), port("b"));
    (net, a, b)
}

/// Sends a burst from a, runs until it has all reached b (the virtual
/// time it takes, at most `span_ns`), returns how many did.
fn burst(
    net: &mut VirtualNet,
    frames: &[Vec<u8>],
    a: (usize, usize),
    b: (usize, usize),
    span_ns: u64,
) -> usize {
    for f in frames {
        net.node(a.0).inject(a.1, f);
    }
    net.wake(a.0);
    net.run_until(net.now_ns() + span_ns);
    net.node(b.0).discard_sent(b.1)
}

fn frames() -> Vec<Vec<u8>> {
    // 16 flows.
    (0..BURST)
        .map(|k| {
            FrameBuilder::ipv4([10, 0, 1, 2], [10, 0, 2, 2])
                .macs(HOST_MAC, [2, 0, 0, 0, 0, 1])
                .ttl(64)
                .udp(7000 + (k % 16) as u16, 5001)
                .pad_to(1000)
                .build()
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let frames = frames();
    let mut g = c.benchmark_group("virtual_clock");
    g.throughput(Throughput::Elements((BURST * SWITCHES) as u64));
    // 256 frames of 1000 bytes at 10 Gbit/s: 205 us to leave each hop,
    // 8 x (10 us + serialization) of latency: all at b within 1 ms.
    for (label, shaped, span) in [("paced_10g", true, 1_000_000), ("unshaped", false, 1_000)] {
        let (mut net, a, b) = chain(shaped);
        assert_eq!(burst(&mut net, &frames, a, b, span), BURST, "{label}");
        g.bench_function(format!("chain{SWITCHES}_{label}"), |bench| {
            bench.iter(|| burst(&mut net, &frames, a, b, span));
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

//! `lcmp-bench virtual-chain`: what one LCMP switch of a virtual-clock
//! network holds in memory, measured on the network of the criterion bench
//! `virtual_clock` (`dataplane/switch/benches/virtual_clock.rs`): 8 LCMP
//! switches in a chain a - c1 - ... - c8 - b, 10 Gbit/s and 10 us links,
//! 4096 frames per switch, memory links 1024 frames deep; and its
//! frame-hops per second of wall time for paced bursts, as that bench
//! sends them.

use std::time::Instant;

use lcmp_policy::Policy;
use lcmp_switch::config::Options;
use lcmp_switch::daemon::DaemonConfig;
use lcmp_switch::frames::{FrameShare, FRAME_SIZE};
use lcmp_switch::in_memory::{self, port_name};
use lcmp_switch::lcmp_node::LcmpNode;
use lcmp_switch::mem_link::MemoryLinks;
use lcmp_switch::virtual_clock::VirtualNet;
use lcmp_topology::units::human_bytes;
use lcmp_topology::Topology;
use lcmp_wire::testing::FrameBuilder;

use crate::heap;

pub const HELP: &str = "\
lcmp-bench virtual-chain: memory and speed of LCMP switches on the virtual clock (no root)

USAGE: lcmp-bench virtual-chain [--bursts N]

The network of the criterion bench virtual_clock: 8 LCMP switches in a
chain a - c1 - ... - c8 - b (10 Gbit/s, 10 us links, 4 MB buffers), one
daemon each on one virtual clock, memory links 1024 frames deep, 4096
frames per switch. Prints each switch's heap (a counting allocator: bytes
allocated while building it and still held), its frame-area share
(chunks x 2048 B, mapped populated), the links' heap, peak RSS (VmHWM),
and frame-hops per second of wall time over --bursts bursts of 256
1000-byte frames in 16 flows [20].";

const SWITCHES: usize = 8;
const FRAMES: usize = 4096;
const DEPTH: usize = 1024;
const BURST: usize = 256;
const HOST_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0xa];

/// The criterion bench's chain a - c1 - ... - c8 - b.
const CHAIN: &str = include_str!("../../../../dataplane/switch/benches/chain8.toml");

/// The chain, each switch's heap, the links' heap and their number.
struct Chain {
    net: VirtualNet,
    a: (usize, usize),
    b: (usize, usize),
    switch_heap: Vec<isize>,
    links_heap: isize,
    links: usize,
}

fn chain() -> Result<Chain, String> {
    let topo = Topology::parse(CHAIN, "chain8.toml").map_err(|e| e.to_string())?;
    let names: Vec<&str> = topo.switches().iter().map(|s| s.name.as_str()).collect();
    let (links_heap, links) =
        heap::held_by(|| MemoryLinks::build(&topo, &names, DEPTH, &|_, i| port_name(i)));
    let mut links = links.map_err(|e| format!("memory links: {e}"))?;
    let shares = FrameShare::split_area(&vec![FRAMES; names.len()])?;
    let mut net = VirtualNet::new(0);
    let mut switch_heap = Vec::new();
    let opts = Options {
        policy: Policy::from_name("lcmp").ok_or("no policy lcmp")?,
        ..Default::default()
    };
    for (name, share) in names.iter().zip(shares) {
        let (held, added) = heap::held_by(|| -> Result<usize, String> {
            let sw = in_memory::switch(&topo, name, &opts, &mut links, Vec::new(), share, &|_| {
                HOST_MAC
            })?;
            let node = LcmpNode::new(sw, name, None, 1).map_err(|e| e.to_string())?;
            Ok(net.add_node(node, DaemonConfig::quiet(name)))
        });
        added?;
        switch_heap.push(held);
    }
    net.join_links(&links)?;
    let port = |net: &VirtualNet, host: &str| -> Result<(usize, usize), String> {
        let h = topo.host_by_name(host).ok_or("host")?;
        let sw = net
            .index_of(&topo.switch(h.switch).name)
            .ok_or("host's switch")?;
        Ok((sw, usize::from(h.port)))
    };
    Ok(Chain {
        a: port(&net, "a")?,
        b: port(&net, "b")?,
        net,
        switch_heap,
        links_heap,
        links: links.len(),
    })
}

/// `lcmp-bench virtual-chain --bursts N`.
pub fn main(bursts: usize) -> Result<(), String> {
    let mut c = chain()?;
    let mean = c.switch_heap.iter().sum::<isize>() / c.switch_heap.len() as isize;
    let (min, max) = (
        c.switch_heap.iter().min().copied().unwrap_or(0),
        c.switch_heap.iter().max().copied().unwrap_or(0),
    );
    let link = c.links_heap / c.links.max(1) as isize;
    println!(
        "{SWITCHES} LCMP switches, {} memory links ({DEPTH} deep): per switch heap {} (min {}, max {}) + frames {} ({FRAMES} x 2048 B); per memory link heap {}",
        c.links,
        human_bytes(mean.max(0) as u64),
        human_bytes(min.max(0) as u64),
        human_bytes(max.max(0) as u64),
        human_bytes((FRAMES * FRAME_SIZE) as u64),
        human_bytes(link.max(0) as u64)
    );
    let frames: Vec<Vec<u8>> = (0..BURST)
        .map(|k| {
            FrameBuilder::ipv4([10, 0, 1, 2], [10, 0, 2, 2])
                .macs(HOST_MAC, [2, 0, 0, 0, 0, 1])
                .ttl(64)
                .udp(7000 + (k % 16) as u16, 5001)
                .pad_to(1000)
                .build()
        })
        .collect();
    // 256 frames of 1000 bytes at 10 Gbit/s leave each hop in 205 us; 8 x
    // (10 us + serialization) of latency: all at b within 1 ms.
    let (mut arrived, polls) = (0, c.net.polls());
    let t0 = Instant::now();
    for _ in 0..bursts {
        for f in &frames {
            c.net.node(c.a.0).inject(c.a.1, f);
        }
        c.net.wake(c.a.0);
        c.net.run_until(c.net.now_ns() + 1_000_000);
        arrived += c.net.node(c.b.0).discard_sent(c.b.1);
    }
    let wall = t0.elapsed().as_secs_f64();
    let hops = arrived * SWITCHES;
    println!(
        "{bursts} paced bursts of {BURST}: {arrived} of {} frames arrived, {hops} frame-hops, {} polls in {wall:.3} s wall: {:.0} frame-hops/s",
        bursts * BURST,
        c.net.polls() - polls,
        hops as f64 / wall
    );
    println!(
        "peak RSS (VmHWM): {}",
        human_bytes(heap::proc_status_bytes("VmHWM").unwrap_or(0))
    );
    if arrived != bursts * BURST {
        return Err(format!("{} frames lost", bursts * BURST - arrived));
    }
    Ok(())
}

//! Whole networks of daemons on the virtual clock ([`VirtualNet`]): the
//! LCMP chain of `mem_links.rs` and the rotor network of `rotor_net.rs`,
//! driven by the discrete-event driver instead of a hand-stepped fake
//! clock. Every instant asserted is worked out by hand.

use std::path::Path;

use lcmp_control::snapshot::Snapshot;
use lcmp_policy::Policy;
use lcmp_switch::config::Options;
use lcmp_switch::daemon::{DaemonConfig, PollMode};
use lcmp_switch::frames::FrameShare;
use lcmp_switch::in_memory;
use lcmp_switch::lcmp_node::LcmpNode;
use lcmp_switch::linked_io::LinkedIo;
use lcmp_switch::mem_io::MemIo;
use lcmp_switch::mem_link::{MemoryLinks, Transfer};
use lcmp_switch::virtual_clock::{Delivery, VirtualNet};
use lcmp_topology::{Peer, Topology};
use lcmp_wire::testing::FrameBuilder;

const US: u64 = 1_000;
const MS: u64 = 1_000_000;

/// Host a - c1 - c2 - c3 - host b (as in `mem_links.rs`). c1 -> c2: 10
/// Gbit/s, 5 ms; c2 -> c3: 100 Mbit/s, 2 ms, a 30 kB buffer; c3 -> b: 10
/// Gbit/s, 10 us.
const CHAIN: &str = r#"
[[dc]]
name = "DC1"
[[dc]]
name = "DC2"
[[switch]]
name = "c1"
dc = "DC1"
prefixes = ["10.0.1.0/24"]
[[switch]]
name = "c2"
[[switch]]
name = "c3"
dc = "DC2"
prefixes = ["10.0.2.0/24"]
[[host]]
name = "a"
switch = "c1"
addresses = ["10.0.1.2/24"]
rate = "10Gbps"
delay = "10us"
buffer = "1MB"
[[host]]
name = "b"
switch = "c3"
addresses = ["10.0.2.2/24"]
rate = "10Gbps"
delay = "10us"
buffer = "1MB"
[[link]]
a = "c1"
b = "c2"
rate = "10Gbps"
delay = "5ms"
buffer = "1MB"
[[link]]
a = "c2"
b = "c3"
rate = "100Mbps"
delay = "2ms"
buffer = "30kB"
"#;

const HOST_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
const POOL: usize = 512;

type Lcmp = LcmpNode<LinkedIo<MemIo>>;

/// Every switch of `topo` as an LCMP daemon of one virtual network, memory
/// links between them, hosts on in-memory ports; the switch named in
/// `flow_log` writes its flow log to that file.
fn lcmp_net(topo: &Topology, policy: Policy, flow_log: Option<(&str, &Path)>) -> VirtualNet {
    let names: Vec<&str> = topo.switches().iter().map(|s| s.name.as_str()).collect();
    let mut links = MemoryLinks::build(topo, &names, 64, &|_, i| in_memory::port_name(i)).unwrap();
    let shares = FrameShare::split_area(&vec![POOL; names.len()]).unwrap();
    let mut net = VirtualNet::new(0);
    let opts = Options {
        policy,
        ..Default::default()
    };
    for (name, share) in names.iter().zip(shares) {
        let mut sw = in_memory::switch(topo, name, &opts, &mut links, Vec::new(), share, &|_| {
            HOST_MAC
        })
        .unwrap();
        let log = flow_log.filter(|(s, _)| s == name).map(|(_, p)| p);
        if log.is_some() {
            sw.enable_flow_log(4096);
        }
        let node = LcmpNode::new(sw, name, log, 10 * MS).unwrap();
        net.add_node(
            node,
            DaemonConfig {
                name: name.to_string(),
                poll: PollMode::Event,
                stats_file: None,
                stats_interval_ns: 1_000 * MS,
            },
        );
    }
    net.join_links(&links).unwrap();
    net
}

/// The node and (switch) port of host `host`.
fn host_port(net: &VirtualNet, topo: &Topology, host: &str) -> (usize, usize) {
    let h = topo.host_by_name(host).unwrap();
    let sw = &topo.switch(h.switch).name;
    (net.index_of(sw).unwrap(), usize::from(h.port))
}

fn udp(sport: u16, seq: u16, len: usize) -> Vec<u8> {
    FrameBuilder::ipv4([10, 0, 1, 2], [10, 0, 2, 2])
        .macs(HOST_MAC, [2, 0, 0, 0, 0, 1])
        .ttl(64)
        .udp(sport, 5001)
        .payload(&seq.to_be_bytes())
        .pad_to(len)
        .build()
}

fn seq(frame: &[u8]) -> u16 {
    // Ethernet 14 + IPv4 20 + UDP 8: the payload's first two bytes.
    u16::from_be_bytes([frame[42], frame[43]])
}

/// The free buffers of the first `switches` nodes' pools, summed.
fn free_frames(net: &mut VirtualNet, switches: usize) -> usize {
    (0..switches)
        .map(|i| {
            net.daemon::<Lcmp>(i)
                .unwrap()
                .switch()
                .io()
                .inner()
                .free_frames()
        })
        .sum()
}

fn ecmp() -> Policy {
    Policy::from_name("ecmp").unwrap()
}

#[test]
fn the_chain_delivers_at_the_emulated_instants_and_the_clock_jumps() {
    let topo = Topology::parse(CHAIN, "chain.toml").unwrap();
    let mut net = lcmp_net(&topo, ecmp(), None);
    let (c1, a) = host_port(&net, &topo, "a");
    let (c3, b) = host_port(&net, &topo, "b");
    let c2 = net.index_of("c2").unwrap();
    net.watch(c3, b);
    for k in 0..10 {
        net.inject_at(0, c1, a, udp(7000, k, 1000));
    }
    // Every switch's first poll at 0, then only events. Frame k leaves c1
    // (1000 bytes at 10 Gbit/s: 800 ns each) by 8 us; the last reaches c2
    // at 5 ms + 8 us. Between, nothing happens but congestion samples
    // while c1's estimator settles: far fewer polls than the span in
    // microseconds.
    net.run_until(100 * US);
    let before: Vec<u64> = (0..3).map(|i| net.node_polls(i)).collect();
    net.run_until(4_900 * US);
    let idle: Vec<u64> = (0..3).map(|i| net.node_polls(i) - before[i]).collect();
    assert_eq!(net.now_ns(), 4_900 * US);
    // c2 and c3 have seen nothing yet: their only deadline is the link
    // check at 100 ms. c1 polls at most at each congestion sample (every
    // 100 us: 48 in 4.8 ms) while its estimator settles. A clock stepping
    // by 1 us would poll each switch 4800 times.
    assert_eq!((idle[c2], idle[c3]), (0, 0), "{idle:?}");
    assert!(idle[c1] <= 48, "{idle:?}");
    net.run_until(20 * MS);
    let got = net.take_delivered();
    assert_eq!(got.len(), 10);
    // c1 -> c2 at 10 Gbit/s: frame k (800 ns) reaches c2 at 5 ms + 800 ns
    // (k + 1). c2 -> c3 at 100 Mbit/s (80 us a frame), busy from frame 0's
    // arrival on: frame k has left c2 at 5.0008 ms + 80 us (k + 1) and
    // reaches c3 2 ms later; c3 -> b: 800 ns to send, 10 us to arrive. So b
    // has frame k at 7.0916 ms + k x 80 us.
    for (k, d) in got.iter().enumerate() {
        assert_eq!((d.node, d.port), (c3, b));
        assert_eq!(seq(&d.frame), k as u16, "in order");
        assert_eq!(d.at_ns, 7_091_600 + k as u64 * 80 * US, "frame {k}");
        assert_eq!(d.frame[22], 61, "three hops: TTL 64 -> 61");
    }
    // By 20 ms every queue and estimator has long been empty: the only
    // deadlines left are the link checks, each switch's first at its
    // first poll (0) and then every 100 ms. So nothing from 20 to 99.9 ms,
    // and one poll per switch at 100 ms.
    let before = net.polls();
    net.run_until(100 * MS - 1);
    assert_eq!(net.polls(), before);
    net.run_until(100 * MS);
    assert_eq!(net.polls(), before + 3);
    // Every buffer back in a pool once the daemons let go.
    for s in net.finish() {
        s.unwrap();
    }
    let free = free_frames(&mut net, 3);
    assert_eq!(free, 3 * POOL);
}

#[test]
fn a_long_idle_span_costs_a_handful_of_polls() {
    let topo = Topology::parse(CHAIN, "chain.toml").unwrap();
    let mut net = lcmp_net(&topo, ecmp(), None);
    // Nothing sent: each switch's only deadline is its link check, every
    // 100 ms (config default). One second: the first poll of each of the 3
    // switches at 0, then checks at 100, 200, ..., 1000 ms: 3 x 11 polls.
    net.run_until(1_000 * MS);
    assert_eq!(net.polls(), 33);
    for i in 0..3 {
        assert_eq!(net.node_polls(i), 11);
    }
}

/// The 2dc-3path testbed's topology (a - s1 = p1 | p2 | p3 = s2 - b).
fn two_dc() -> Topology {
    Topology::load(Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../topologies/2dc-3path.toml"
    )))
    .unwrap()
}

/// 60 flows of 3 frames each from a to b, spread over 2 ms, and a frame
/// back from b; s1 logs its decisions to `log`. Returns what reached the
/// hosts, every switch's status (wall-clock fields cleared) and the flow
/// log's bytes.
fn two_dc_run(log: &Path) -> (Vec<Delivery>, Vec<Vec<u8>>, Vec<u8>) {
    let topo = two_dc();
    let lcmp = Policy::from_name("lcmp").unwrap();
    let mut net = lcmp_net(&topo, lcmp, Some(("s1", log)));
    let (s1, a) = host_port(&net, &topo, "a");
    let (s2, b) = host_port(&net, &topo, "b");
    net.watch(s2, b);
    net.watch(s1, a);
    for f in 0..60u16 {
        for k in 0..3u16 {
            let t = u64::from(f) * 30 * US + u64::from(k) * 7 * US;
            net.inject_at(t, s1, a, udp(4000 + f, k, 1200));
        }
    }
    let back = FrameBuilder::ipv4([10, 0, 2, 2], [10, 0, 1, 2])
        .macs(HOST_MAC, [2, 0, 0, 0, 0, 1])
        .udp(5001, 4000)
        .pad_to(200)
        .build();
    net.inject_at(MS, s2, b, back);
    net.run_until(200 * MS);
    let delivered = net.take_delivered();
    let finals = net.finish();
    let statuses = finals
        .into_iter()
        .map(|s| {
            let mut s: Snapshot = serde_json::from_slice(&s.unwrap()).unwrap();
            // Wall-clock time of the run, the only field not of the run.
            s.unix_time_ms = 0;
            serde_json::to_vec(&s).unwrap()
        })
        .collect();
    (delivered, statuses, std::fs::read(log).unwrap())
}

#[test]
fn two_runs_of_one_network_are_identical() {
    let dir = std::env::temp_dir();
    let pid = std::process::id();
    let (l1, l2) = (
        dir.join(format!("lcmp-virtual-{pid}-1.csv")),
        dir.join(format!("lcmp-virtual-{pid}-2.csv")),
    );
    let first = two_dc_run(&l1);
    let second = two_dc_run(&l2);
    let _ = (std::fs::remove_file(&l1), std::fs::remove_file(&l2));
    // Everything arrived: 180 frames at b (s2, node 4 in file order), 1
    // at a.
    let topo = two_dc();
    let s2 = topo.switches().iter().position(|s| s.name == "s2").unwrap();
    assert_eq!(first.0.iter().filter(|d| d.node == s2).count(), 180);
    assert_eq!(first.0.len(), 181);
    assert_eq!(first.0, second.0, "the same frames at the same instants");
    assert_eq!(first.1, second.1, "the same switch states");
    // s1 decided once per flow, on the flow's first frame, at virtual
    // instants: a header, 60 flows a -> b (flow f at f x 30 us), and b's
    // frame to a.
    let log = String::from_utf8(first.2.clone()).unwrap();
    let times: Vec<&str> = log
        .lines()
        .skip(1)
        .map(|l| l.split(',').next().unwrap())
        .collect();
    assert_eq!(times.len(), 61, "{log}");
    for (f, t) in times[..60].iter().enumerate() {
        assert_eq!(t.parse::<u64>().unwrap(), f as u64 * 30 * US);
    }
    assert_eq!(first.2, second.2, "byte-identical flow logs");
}

#[test]
fn links_are_declared_between_existing_ports_once() {
    let topo = Topology::parse(CHAIN, "chain.toml").unwrap();
    let mut net = lcmp_net(&topo, ecmp(), None);
    // c1 has 2 ports (host a, link to c2); c1 port 0 is joined already.
    assert!(net.join((0, 5), (1, 1)).unwrap_err().contains("2 ports"));
    assert!(net.join((0, 0), (0, 0)).unwrap_err().contains("itself"));
    assert!(net.join((7, 0), (1, 1)).unwrap_err().contains("no node 7"));
    let c1_link = topo
        .ports(topo.switch_by_name("c1").unwrap().id)
        .iter()
        .position(|p| matches!(p.peer, Peer::Switch { .. }))
        .unwrap();
    assert!(net
        .join((0, c1_link), (2, 0))
        .unwrap_err()
        .contains("joined already"));
}

mod rotor {
    use lcmp_switch::rotor_daemon::{RotorNode, RotorNodeConfig, TorNode};

    use lcmp_switch::tor_path::{TorConfig, TorSwitch};
    use lcmp_topology::rotor;
    use lcmp_topology::rotor_net::{RotorNetwork, RotorRouting};

    use super::*;

    const SLOT: u64 = 1_000_000;
    const RECONF: u64 = 100_000;
    /// A 1000-byte frame at 100 Mbit/s.
    const SER: u64 = 80_000;
    const EPOCH: u64 = 7 * SLOT;
    const HOST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x11];
    /// A ToR's ports: uplinks to rotor 0 and 1, then its host.
    const HOST_PORT: usize = 2;

    fn mac(port: usize) -> [u8; 6] {
        [0x02, 0xaa, 0, 0, 0, port as u8]
    }

    /// 4 ToRs x 2 rotors, complete graph (as in `rotor_net.rs`): rotor 0
    /// cycles shifts +1 (even slots), +2 (odd slots); rotor 1 shift +3
    /// (even slots), idle (odd slots).
    fn network() -> RotorNetwork {
        let mut n = RotorNetwork::from_schedule(&rotor::complete(4, 2).unwrap(), SLOT, RECONF);
        n.routing = Some(RotorRouting::Direct);
        n.tx_guard_ns = 0;
        n.buffer_bytes = Some(10_000);
        n
    }

    fn node_config(ports: &[&str]) -> RotorNodeConfig {
        RotorNodeConfig {
            port_names: ports.iter().map(|p| p.to_string()).collect(),
            epoch: Some((EPOCH, "file".into())),
            spin_ns: 0,
        }
    }

    fn daemon_config(name: &str) -> DaemonConfig {
        DaemonConfig {
            name: name.into(),
            poll: PollMode::Event,
            stats_file: None,
            stats_interval_ns: 1_000 * MS,
        }
    }

    /// The whole network in memory on the virtual clock: ToRs 0-3 (nodes
    /// 0-3), rotors 0-1 (nodes 4-5), every uplink a memory link.
    fn rotor_net(n: &RotorNetwork) -> VirtualNet {
        let wiring = n.wiring().unwrap();
        let names: Vec<&str> = wiring.switches().iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["tor0", "tor1", "tor2", "tor3", "rotor0", "rotor1"]);
        let ifnames = |sw: &str, i: u8| {
            let role = n.role(sw).unwrap();
            n.port_names(role)[usize::from(i)].clone()
        };
        let mut links = MemoryLinks::build(&wiring, &names, 16, &ifnames).unwrap();
        let mut shares = FrameShare::split_area(&[64; 6]).unwrap().into_iter();
        let mut net = VirtualNet::new(EPOCH);
        for t in 0..4u32 {
            let io = MemIo::in_share(1, shares.next().unwrap());
            let name = format!("tor{t}");
            let io = LinkedIo::new(io, links.layout(&name, 3), Transfer::Descriptor).unwrap();
            let sw = TorSwitch::new(
                io,
                TorConfig::for_network(n, t, (0..3).map(mac).collect(), vec![Some(HOST_MAC)], 0, 7)
                    .unwrap(),
                false,
            )
            .unwrap();
            let node = TorNode::new(sw, node_config(&["u0", "u1", "h0"]));
            assert_eq!(net.add_node(node, daemon_config(&name)), t as usize);
        }
        for r in 0..2u32 {
            let io = MemIo::in_share(0, shares.next().unwrap());
            let name = format!("rotor{r}");
            let io = LinkedIo::new(io, links.layout(&name, 4), Transfer::Descriptor).unwrap();
            let node = RotorNode::new(io, n, r, node_config(&["t0", "t1", "t2", "t3"])).unwrap();
            net.add_node(node, daemon_config(&name));
        }
        net.join_links(&links).unwrap();
        net
    }

    /// A 1000-byte UDP frame from host (s, 0) to host (d, 0), TTL 64.
    fn frame(s: u8, d: u8) -> Vec<u8> {
        FrameBuilder::ipv4([10, s, 0, 2], [10, d, 0, 2])
            .macs(HOST_MAC, mac(HOST_PORT))
            .udp(4000, u16::from(d))
            .pad_to(1000)
            .build()
    }

    #[test]
    fn frames_are_delivered_at_the_slot_openings_worked_out_by_hand() {
        let n = network();
        let mut net = rotor_net(&n);
        for t in 1..4 {
            net.watch(t, HOST_PORT);
        }
        // Host (0, 0) sends to the hosts of ToRs 1, 2 and 3 half way
        // through slot 1 (odd) since the epoch, then to ToR 1 again at the
        // end of slot 2's reconfiguration.
        let sent = EPOCH + SLOT + 500_000;
        for d in [1, 2, 3] {
            net.inject_at(sent, 0, HOST_PORT, frame(0, d));
        }
        let slot2_open = EPOCH + 2 * SLOT + RECONF;
        net.inject_at(slot2_open, 0, HOST_PORT, frame(0, 1));
        net.run_until(EPOCH + 6 * SLOT);
        let got: Vec<(u64, usize)> = net
            .take_delivered()
            .iter()
            .map(|d| {
                assert_eq!(d.frame[14 + 8], 62, "one hop per ToR: TTL 64 -> 62");
                assert_eq!(d.frame[..6], HOST_MAC);
                (d.at_ns, d.node)
            })
            .collect();
        // ToR 2 (shift +2: rotor 0, odd slots): slot 1 is open; the frame
        // starts on uplink 0 at once and is handed over one serialization
        // later: 8.5 ms + 80 us = 8.58 ms. The rotor and ToR 2 pass it on
        // at that instant.
        // ToR 1 (shift +1: rotor 0, even slots) and ToR 3 (shift +3: rotor
        // 1, even slots) wait for slot 2: it opens at 7 + 2 + 0.1 = 9.1 ms,
        // each starts on its own uplink then: 9.18 ms.
        // The second frame for ToR 1 arrives at 9.1 ms behind the first on
        // uplink 0: it starts when that one is done, 9.18 ms, and is out
        // at 9.26 ms, inside slot 2.
        assert_eq!(
            got,
            vec![
                (sent + SER, 2),
                (slot2_open + SER, 1),
                (slot2_open + SER, 3),
                (slot2_open + 2 * SER, 1),
            ]
        );
        // The rotors carried them: rotor 0 three (two to ToR 1, one to ToR
        // 2), rotor 1 one.
        let carried = |net: &mut VirtualNet, i: usize| -> u64 {
            let s: lcmp_control::rotor::RotorStatus =
                serde_json::from_slice(&net.node(i).status_json().unwrap()).unwrap();
            s.counters["tx_frames"]
        };
        assert_eq!((carried(&mut net, 4), carried(&mut net, 5)), (3, 1));
        // A ToR with nothing queued and a rotor never wake on their own:
        // ToR 2 was polled at the epoch (its first poll) and when the frame
        // reached it; polls at other instants would be the clock stepping.
        assert_eq!(net.node_polls(2), 2);
        for s in net.finish() {
            s.unwrap();
        }
    }
}

/// The chain with c2 -> c3 as fast as the rest (10 Gbit/s, 1 MB).
fn fast_chain() -> Topology {
    let text = CHAIN
        .replace("rate = \"100Mbps\"", "rate = \"10Gbps\"")
        .replace("buffer = \"30kB\"", "buffer = \"1MB\"");
    Topology::parse(&text, "chain.toml").unwrap()
}

#[test]
fn a_link_of_small_frames_holds_its_bandwidth_delay_product() {
    // 30,000 frames of 60 bytes at line rate (48 ns each at 10 Gbit/s) are
    // all on c1 -> c2 (5 ms) at once: more than that link's budget in
    // 256-byte frames (6.25 MB / 256 = 24,414), which a switch holding
    // pool buffers keeps, and within what the link can carry (6.25 MB / 60
    // = 104,166), which one that keeps bytes allows. An ACK-only reverse
    // path at full size overflowed (821,415 drops in the 8-DC replay).
    let topo = fast_chain();
    let mut net = lcmp_net(&topo, ecmp(), None);
    let (c1, a) = host_port(&net, &topo, "a");
    let (c3, b) = host_port(&net, &topo, "b");
    net.watch(c3, b);
    const N: u64 = 30_000;
    for k in 0..N {
        net.inject_at(k * 48, c1, a, udp(7000, k as u16, 60));
    }
    net.run_until(20 * MS);
    let got = net.take_delivered();
    assert_eq!(got.len() as u64, N);
    // As below with 48 ns a frame: b has frame k at 7.01 ms + 48 (k + 3).
    for (k, d) in got.iter().enumerate() {
        assert_eq!(seq(&d.frame), k as u16, "in order");
        assert_eq!(d.at_ns, 7_010_000 + 48 * (k as u64 + 3), "frame {k}");
    }
    for s in net.finish() {
        let s: Snapshot = serde_json::from_slice(&s.unwrap()).unwrap();
        assert_eq!(s.drops_total, 0, "{}: {:?}", s.switch, s.drops);
    }
}

#[test]
fn a_link_holds_more_frames_in_flight_than_its_switch_has_buffers() {
    let topo = fast_chain();
    let mut net = lcmp_net(&topo, ecmp(), None);
    let (c1, a) = host_port(&net, &topo, "a");
    let (c3, b) = host_port(&net, &topo, "b");
    net.watch(c3, b);
    // 3000 frames of 1000 bytes at c1's line rate (one every 800 ns): c1 ->
    // c2 (5 ms) then carries 6250 at once, far more than c1's 512 buffers.
    // Its switch keeps their bytes only (parking); without, its pool runs
    // dry and c1 can take no more frames from a.
    const N: u64 = 3000;
    for k in 0..N {
        net.inject_at(k * 800, c1, a, udp(7000, k as u16, 1000));
    }
    net.run_until(20 * MS);
    let got = net.take_delivered();
    assert_eq!(got.len() as u64, N);
    // Frame k: at c1 at 800 k, sent by 800 (k + 1), at c2 5 ms later; c2
    // and c3 forward it in 800 ns each on idle 10 Gbit/s links (2 ms, then
    // the host link's 10 us): b has it at 7.01 ms + 800 (k + 3).
    for (k, d) in got.iter().enumerate() {
        assert_eq!(seq(&d.frame), k as u16, "in order");
        assert_eq!(d.at_ns, 7_010_000 + 800 * (k as u64 + 3), "frame {k}");
        assert_eq!(d.frame.len(), 1000);
    }
    // 100 more, stopped while on c1 -> c2: c1 gives up their bytes at
    // shutdown, counted, and no buffer is missing.
    for k in 0..100 {
        net.inject_at(20 * MS + k * 800, c1, a, udp(7001, k as u16, 1000));
    }
    net.run_until(21 * MS);
    let finals = net.finish();
    for (i, s) in finals.into_iter().enumerate() {
        let s: Snapshot = serde_json::from_slice(&s.unwrap()).unwrap();
        let in_flight = if i == c1 { 100 } else { 0 };
        assert_eq!(s.drops_total, in_flight, "{}: {:?}", s.switch, s.drops);
        assert_eq!(s.drops.get("shutdown").copied().unwrap_or(0), in_flight);
    }
    let free = free_frames(&mut net, 3);
    assert_eq!(free, 3 * POOL, "every buffer back in a pool");
}

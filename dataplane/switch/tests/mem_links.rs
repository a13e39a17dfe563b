//! Switches of one process joined by memory links, over in-memory host
//! ports and a fake clock: a memory link carries every frame in order at
//! the instants the sending port's emulation gives, a full buffer drops
//! and counts as on any port, a port taken down (administratively, or the
//! link's carrier) moves only its flows, and every buffer is accounted
//! for.

use lcmp_control::proto::{hex_decode, Body, CaptureReply, Reply};
use lcmp_control::Request;
use lcmp_policy::Policy;
use lcmp_switch::config::{from_topology, Options};
use lcmp_switch::control::{self, DaemonInfo};
use lcmp_switch::counters::DropReason;
use lcmp_switch::flow_log::DecisionReason;
use lcmp_switch::frames::FrameShare;
use lcmp_switch::io::PacketIo;
use lcmp_switch::linked_io::LinkedIo;
use lcmp_switch::mem_io::MemIo;
use lcmp_switch::mem_link::{port_mac, MemoryLinks, Transfer};
use lcmp_switch::switch::Switch;
use lcmp_topology::{Peer, Topology};
use lcmp_wire::testing::FrameBuilder;
use lcmp_wire::FlowTuple;

const US: u64 = 1_000;
const MS: u64 = 1_000_000;

/// Host a - c1 - c2 - c3 - host b. c1 -> c2: 10 Gbit/s, 5 ms; c2 -> c3:
/// 100 Mbit/s, 2 ms, a 30 kB buffer (30 frames of 1000 bytes); c3 -> b:
/// 10 Gbit/s, 10 us.
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

/// The hosts' MAC (every host: they are on different switches).
const HOST_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0xa];

/// Frames each switch's pool starts with.
const POOL: usize = 512;

/// Every switch of a topology in this process, memory links between them,
/// hosts on in-memory ports.
struct Net {
    topo: Topology,
    switches: Vec<(String, Switch<LinkedIo<MemIo>>)>,
}

impl Net {
    fn new(text: &str, policy: Policy, transfer: Transfer) -> Net {
        let topo = Topology::parse(text, "test.toml").unwrap();
        let names: Vec<&str> = topo.switches().iter().map(|s| s.name.as_str()).collect();
        let mut links = MemoryLinks::build(&topo, &names, 64, &|_, i| format!("p{i}")).unwrap();
        let shares = FrameShare::split_area(&vec![POOL; names.len()]).unwrap();
        let mut switches = Vec::new();
        for (name, share) in names.iter().zip(shares) {
            let sw = topo.switch_by_name(name).unwrap();
            let n = topo.ports(sw.id).len();
            let mut opts = Options {
                policy,
                ifnames: (0..n).map(|i| format!("p{i}")).collect(),
                ..Default::default()
            };
            for (i, p) in topo.ports(sw.id).iter().enumerate() {
                let peer = match p.peer {
                    Peer::Host { .. } => HOST_MAC,
                    Peer::Switch { .. } => links.peer_mac(name, i as u8).unwrap(),
                };
                opts.peer_macs.insert(format!("p{i}"), peer);
            }
            let own = |ifname: &str| {
                let i: u8 = ifname[1..].parse().unwrap();
                Ok(port_mac(name, i))
            };
            let config = from_topology(&topo, name, &opts, own).unwrap();
            let io = MemIo::in_share(n - links.count(name, n), share);
            let io = LinkedIo::new(io, links.layout(name, n), transfer).unwrap();
            switches.push((name.to_string(), Switch::new(config, io).unwrap()));
        }
        Net { topo, switches }
    }

    fn sw(&mut self, name: &str) -> &mut Switch<LinkedIo<MemIo>> {
        &mut self.switches.iter_mut().find(|(n, _)| n == name).unwrap().1
    }

    /// The switch and in-memory port of host `host`.
    fn host_port(&self, host: &str) -> (String, usize) {
        let h = self.topo.host_by_name(host).unwrap();
        let sw = self.topo.switch(h.switch);
        // In-memory ports are the switch's ports that are not memory
        // links, in order.
        let inner = self.topo.ports(h.switch)[..h.port as usize]
            .iter()
            .filter(|p| matches!(p.peer, Peer::Host { .. }))
            .count();
        (sw.name.clone(), inner)
    }

    fn send(&mut self, host: &str, frames: &[Vec<u8>]) {
        let (sw, port) = self.host_port(host);
        for f in frames {
            assert!(self.sw(&sw).io().inner_mut().inject(port, f));
        }
    }

    fn take(&mut self, host: &str) -> Vec<Vec<u8>> {
        let (sw, port) = self.host_port(host);
        self.sw(&sw).io().inner_mut().take_sent(port)
    }

    /// Polls every switch at `t`, in topology order.
    fn poll(&mut self, t: u64) {
        for (_, sw) in &mut self.switches {
            sw.poll(t);
        }
    }

    /// Runs from `from` to `until` in event-mode steps, each to the
    /// earliest deadline of any switch; after each step, frames that
    /// reached `host` are recorded with the step's time.
    fn run(&mut self, from: u64, until: u64, host: &str) -> Vec<(u64, Vec<u8>)> {
        let mut got = Vec::new();
        let mut t = from;
        while t <= until {
            // A frame handed over in one step is received in the next at
            // the same instant, as over a veth.
            self.poll(t);
            self.poll(t);
            got.extend(self.take(host).into_iter().map(|f| (t, f)));
            let next = self
                .switches
                .iter()
                .map(|(_, s)| s.next_deadline())
                .min()
                .unwrap();
            t = next.max(t + 1);
        }
        got
    }

    /// Buffers in the pools, in the links and held by the switches.
    fn free_frames(&mut self) -> usize {
        self.switches
            .iter_mut()
            .map(|(_, s)| s.io().inner().free_frames())
            .sum()
    }
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

fn ecmp() -> Policy {
    Policy::from_name("ecmp").unwrap()
}

#[test]
fn every_frame_arrives_in_order_at_the_emulated_instants() {
    for transfer in [Transfer::Descriptor, Transfer::Copy] {
        let mut net = Net::new(CHAIN, ecmp(), transfer);
        let burst: Vec<Vec<u8>> = (0..10).map(|k| udp(7000, k, 1000)).collect();
        net.send("a", &burst);
        let got = net.run(0, 20 * MS, "b");
        assert_eq!(got.len(), 10, "{transfer:?}");
        // c1 -> c2 at 10 Gbit/s: frame k (1000 bytes: 800 ns) reaches c2
        // at 5 ms + 800 ns (k + 1). c2 -> c3 at 100 Mbit/s (80 us a
        // frame), busy from frame 0's arrival on: frame k has left c2 at
        // 5.0008 ms + 80 us (k + 1) and reaches c3 2 ms later; c3 -> b:
        // 800 ns to send, 10 us to arrive. So b has frame k at
        // 7.0916 ms + k x 80 us.
        for (k, (t, f)) in got.iter().enumerate() {
            assert_eq!(seq(f), k as u16, "{transfer:?}: in order");
            assert_eq!(
                *t,
                7_091_600 + k as u64 * 80 * US,
                "{transfer:?}: frame {k}"
            );
            // Three hops: TTL 64 -> 61.
            assert_eq!(f[22], 61);
            assert_eq!(f.len(), 1000);
        }
        // Every buffer is back in a pool once the switches let go.
        for (_, sw) in &mut net.switches {
            sw.drain();
        }
        assert_eq!(net.free_frames(), POOL * 3, "{transfer:?}");
    }
}

#[test]
fn a_full_buffer_behind_a_memory_link_drops_and_counts() {
    let mut net = Net::new(CHAIN, ecmp(), Transfer::Descriptor);
    // 50 frames reach c2 800 ns apart (5.0008 to 5.04 ms), before the
    // first leaves for c3 (5.0808 ms): its 30 kB buffer takes the first
    // 30, drops 20.
    let burst: Vec<Vec<u8>> = (0..50).map(|k| udp(7000, k, 1000)).collect();
    net.send("a", &burst);
    let got = net.run(0, 20 * MS, "b");
    let seqs: Vec<u16> = got.iter().map(|(_, f)| seq(f)).collect();
    assert_eq!(seqs, (0..30).collect::<Vec<u16>>());
    let c2 = net.sw("c2");
    let to_c3 = c2.port_by_name("p1").unwrap();
    assert_eq!(c2.counters().port(to_c3).dropped(DropReason::QueueFull), 20);
    let report = &c2.port_reports()[to_c3];
    assert_eq!(report.egress.dropped_queue_full, 20);
    assert_eq!(report.egress.transmitted_frames, 30);
    // The memory link into c2 carried all 50.
    let m = c2.io_ref().memory_link_stats(0).unwrap();
    assert_eq!((m.peer.as_str(), m.frames_received), ("c1/p0", 50));
    for (_, sw) in &mut net.switches {
        sw.drain();
    }
    assert_eq!(net.free_frames(), POOL * 3);
}

/// The 2dc-3path testbed: a - s1 = p1 | p2 | p3 = s2 - b, every switch in
/// this process.
fn two_dc() -> Net {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../topologies/2dc-3path.toml"
    ))
    .unwrap();
    let mut net = Net::new(&text, ecmp(), Transfer::Descriptor);
    net.sw("s1").enable_flow_log(4096);
    net
}

/// s1's decisions so far, oldest first: (source port, s1 port, reason).
fn decisions(net: &mut Net) -> Vec<(u16, u8, DecisionReason)> {
    net.sw("s1")
        .flow_log()
        .unwrap()
        .records()
        .iter()
        .map(|r| match r.flow {
            FlowTuple::V4 { sport, .. } | FlowTuple::V6 { sport, .. } => (sport, r.port, r.reason),
        })
        .collect()
}

/// 60 flows (source ports 4000..4060) of one frame each from a to b,
/// sent at `t`; returns how many reached b within 25 ms (the longest
/// path takes 20 ms).
fn one_frame_per_flow(net: &mut Net, t: u64, seq_no: u16) -> usize {
    let frames: Vec<Vec<u8>> = (0..60).map(|f| udp(4000 + f, seq_no, 200)).collect();
    net.send("a", &frames);
    net.run(t, t + 25 * MS, "b").len()
}

/// Takes s1's port to p2 down with `down`, then checks that exactly the
/// flows that were on it moved (each once, to a live port) and nothing
/// was lost.
fn down_moves_only_its_flows(down: impl FnOnce(&mut Net)) {
    let mut net = two_dc();
    assert_eq!(one_frame_per_flow(&mut net, 0, 0), 60);
    let first: std::collections::HashMap<u16, u8> = decisions(&mut net)
        .into_iter()
        .map(|(sport, port, reason)| {
            assert_eq!(reason, DecisionReason::New);
            (sport, port)
        })
        .collect();
    assert_eq!(first.len(), 60);
    // s1 port 1 leads to p2 (2dc-3path.toml).
    let on_p2 = first.values().filter(|&&p| p == 1).count();
    assert!(on_p2 > 0, "ECMP put no flow on p2: {first:?}");
    down(&mut net);
    // Within s1's flow timeout (80 ms: twice the longest RTT), so the
    // flows are still cached.
    assert_eq!(one_frame_per_flow(&mut net, 30 * MS, 1), 60, "nothing lost");
    let moved: Vec<(u16, u8, DecisionReason)> = decisions(&mut net).into_iter().skip(60).collect();
    assert_eq!(moved.len(), on_p2, "{moved:?}");
    for (sport, port, reason) in moved {
        assert_eq!(reason, DecisionReason::Failover);
        assert_eq!(first[&sport], 1, "flow {sport} was on a live port");
        assert_ne!(port, 1);
    }
    assert_eq!(net.sw("s1").router_stats().failovers, on_p2 as u64);
}

#[test]
fn admin_down_moves_only_its_flows() {
    down_moves_only_its_flows(|net| net.sw("s1").set_admin(1, false));
}

#[test]
fn carrier_loss_at_the_far_end_moves_only_its_flows() {
    down_moves_only_its_flows(|net| {
        // p2's port 0 faces s1: the cable pulled there is down at s1 too.
        net.sw("p2").io().set_carrier(0, false).unwrap();
        net.poll(26 * MS);
        let s1 = net.sw("s1");
        assert!(!s1.port_reports()[1].link_up);
        assert!(!s1.io_ref().memory_link_stats(1).unwrap().carrier);
        assert!(!net.sw("p2").port_reports()[0].link_up);
    });
}

#[test]
fn a_port_on_an_interface_has_no_carrier_of_the_switchs() {
    let mut net = two_dc();
    // s1 port 3 is host a's (an in-memory port here, a veth in a testbed).
    let e = net.sw("s1").io().set_carrier(3, false).unwrap_err();
    assert!(e.contains("ip link set"), "{e}");
}

/// A control request to switch `name` of `net` at `now`.
fn ask(net: &mut Net, name: &str, request: Request, now: u64) -> Reply {
    let mut info = DaemonInfo {
        name: name.into(),
        ..Default::default()
    };
    match control::handle(net.sw(name), &mut info, request, now) {
        Body::Ok(r) => *r,
        Body::Error(e) => panic!("{name}: {}", e.message),
    }
}

fn capture_reply(r: Reply) -> CaptureReply {
    match r {
        Reply::Capture(c) => c,
        other => panic!("not a capture reply: {other:?}"),
    }
}

#[test]
fn a_memory_link_is_captured_both_ways_in_order() {
    let mut net = Net::new(CHAIN, ecmp(), Transfer::Descriptor);
    // c2's port 0 is its end of the c1 - c2 memory link.
    let started = ask(
        &mut net,
        "c2",
        Request::CaptureStart {
            port: "p0".into(),
            snaplen: 64,
            max_frames: 100,
            max_bytes: 1 << 20,
            duration_ns: 50 * MS,
        },
        0,
    );
    assert_eq!(capture_reply(started).port, "p0");
    // Three frames a -> b, and one b -> a (it leaves c2 by p0).
    let to_b: Vec<Vec<u8>> = (0..3).map(|k| udp(7000, k, 1000)).collect();
    net.send("a", &to_b);
    let back = FrameBuilder::ipv4([10, 0, 2, 2], [10, 0, 1, 2])
        .macs(HOST_MAC, [2, 0, 0, 0, 0, 1])
        .ttl(64)
        .udp(5001, 7000)
        .payload(&[9, 9])
        .pad_to(200)
        .build();
    net.send("b", &[back]);
    net.run(0, 20 * MS, "b");
    let c = capture_reply(ask(&mut net, "c2", Request::CaptureStop, 20 * MS));
    assert!(c.done);
    assert_eq!((c.captured, c.dropped), (4, 0));
    let (inbound, outbound): (Vec<_>, Vec<_>) = c.frames.iter().partition(|f| !f.outbound);
    assert_eq!(inbound.len(), 3);
    assert_eq!(outbound.len(), 1);
    for (k, f) in inbound.iter().enumerate() {
        let bytes = hex_decode(&f.data).unwrap();
        // Cut to the snaplen; the length is the frame's; c1 has rewritten
        // it (TTL 63) and addressed it to c2's port.
        assert_eq!((bytes.len(), f.orig_len), (64, 1000));
        assert_eq!(seq(&bytes), k as u16);
        assert_eq!(bytes[22], 63);
        assert_eq!(bytes[..6], port_mac("c2", 0));
    }
    // b's frame leaves c2 towards c1 after c3 forwarded it: TTL 62.
    let bytes = hex_decode(&outbound[0].data).unwrap();
    assert_eq!((bytes[22], outbound[0].orig_len), (62, 200));
    assert_eq!(bytes[..6], port_mac("c1", 0));
    // In time order.
    let times: Vec<u64> = c.frames.iter().map(|f| f.time_unix_ns).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    // Stopped: nothing more to fetch.
    let mut info = DaemonInfo::default();
    let e = control::handle(net.sw("c2"), &mut info, Request::CaptureFetch, 30 * MS);
    assert!(matches!(e, Body::Error(_)));
}

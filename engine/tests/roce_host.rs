//! RoCEv2/DCQCN hosts as nodes on memory links to LCMP switches in one
//! process, stepped by hand with a fake clock (each step jumps to the
//! earliest `next_wake` of any node), with exact expectations worked by
//! hand below.

use std::net::Ipv4Addr;

use lcmp_control::snapshot::EcnFractions;
use lcmp_engine::host::{HostConfig, RoceHost};
use lcmp_engine::{host_io, roce_frame};
use lcmp_policy::Policy;
use lcmp_switch::config::{from_topology, Options};
use lcmp_switch::egress::EgressConfig;
use lcmp_switch::frames::FrameShare;
use lcmp_switch::io::{Frame, PacketIo};
use lcmp_switch::lcmp_node::LcmpNode;
use lcmp_switch::linked_io::LinkedIo;
use lcmp_switch::mem_io::MemIo;
use lcmp_switch::mem_link::{mem_link, port_mac, MemoryLinks, Transfer};
use lcmp_switch::node::Node;
use lcmp_switch::pfc::ROCE_PRIORITY;
use lcmp_switch::switch::Switch;
use lcmp_topology::{Peer, Topology};
use lcmp_traffic::client::Destination;
use lcmp_traffic::flows::{Arrivals, FlowSource, ScheduledFlow};
use lcmp_traffic::record::FlowStatus;
use lcmp_traffic::rocev2::dcqcn::DcqcnParams;
use lcmp_traffic::rocev2::sender::SenderConfig;
use lcmp_traffic::rocev2::wire::{
    Aeth, DataOpcode, Endpoints, Message, Reth, CREDIT_INVALID, ECN_ECT0, ROCEV2_PORT,
};
use lcmp_traffic::rocev2::{qpn_of, udp_sport_of};
use lcmp_wire::pfc::Pfc;
use proptest::prelude::*;

type Io = LinkedIo<MemIo>;

/// a1, a2 - s1 = s2 - b. Host links 8 Gbit/s (1 byte/ns), 1 us; s1 - s2
/// 800 Mbit/s (10 ns/byte), 10 us: the bottleneck. Buffers of 1 MB
/// everywhere (nothing is dropped here).
const NET: &str = r#"
[[dc]]
name = "DC1"
[[dc]]
name = "DC2"
[[switch]]
name = "s1"
dc = "DC1"
prefixes = ["10.0.1.0/24"]
[[switch]]
name = "s2"
dc = "DC2"
prefixes = ["10.0.2.0/24"]
[[host]]
name = "a1"
switch = "s1"
addresses = ["10.0.1.2/24"]
rate = "8Gbps"
delay = "1us"
buffer = "1MB"
[[host]]
name = "a2"
switch = "s1"
addresses = ["10.0.1.3/24"]
rate = "8Gbps"
delay = "1us"
buffer = "1MB"
[[host]]
name = "b"
switch = "s2"
addresses = ["10.0.2.2/24"]
rate = "8Gbps"
delay = "1us"
buffer = "1MB"
[[link]]
a = "s1"
b = "s2"
rate = "800Mbps"
delay = "10us"
buffer = "1MB"
"#;

/// Buffers each node's pool starts with.
const POOL: usize = 2048;
/// Ring entries per direction of each memory link.
const DEPTH: usize = 256;

fn sender() -> SenderConfig {
    SenderConfig {
        // The line rate is the host link's (HostConfig::from_topology).
        dcqcn: DcqcnParams::default(),
        payload: 1000,
        // Nothing is lost here: no timeout may fire.
        rto_ns: 1_000_000_000,
    }
}

/// Every switch and host of a topology in this process: switches joined
/// by memory links, each host on a memory link to its switch's port.
struct Net {
    switches: Vec<LcmpNode<Io>>,
    hosts: Vec<(String, RoceHost<Io>)>,
    now: u64,
}

impl Net {
    /// `flows`: per sending host, its flows (all to b).
    fn new(text: &str, ecn: Option<EcnFractions>, flows: &[(&str, Vec<ScheduledFlow>)]) -> Net {
        let topo = Topology::parse(text, "test.toml").unwrap();
        let names: Vec<&str> = topo.switches().iter().map(|s| s.name.as_str()).collect();
        let mut links = MemoryLinks::build(&topo, &names, DEPTH, &|_, i| format!("p{i}")).unwrap();
        let hosts = topo.hosts();
        let mut shares = FrameShare::split_area(&vec![POOL; names.len() + hosts.len()]).unwrap();
        let host_shares = shares.split_off(names.len());
        let mut host_ends = Vec::new();
        let mut switches = Vec::new();
        let mut host_ports: Vec<Vec<(u8, _)>> = (0..names.len()).map(|_| Vec::new()).collect();
        for h in hosts {
            let sw = &topo.switch(h.switch).name;
            let (at_switch, at_host) = mem_link(
                DEPTH,
                (&format!("{sw}/p{}", h.port), &format!("{}/nic", h.name)),
            )
            .unwrap();
            let at = names.iter().position(|n| n == sw).unwrap();
            host_ports[at].push((h.port, at_switch));
            host_ends.push(at_host);
        }
        for ((name, share), mut ends) in names.iter().zip(shares).zip(host_ports) {
            let sw = topo.switch_by_name(name).unwrap();
            let n = topo.ports(sw.id).len();
            let mut opts = Options {
                policy: Policy::from_name("ecmp").unwrap(),
                ifnames: (0..n).map(|i| format!("p{i}")).collect(),
                ecn,
                ..Default::default()
            };
            for (i, p) in topo.ports(sw.id).iter().enumerate() {
                let peer = match p.peer {
                    Peer::Host { host, .. } => port_mac(&topo.host(host).name, 0),
                    Peer::Switch { .. } => links.peer_mac(name, i as u8).unwrap(),
                };
                opts.peer_macs.insert(format!("p{i}"), peer);
            }
            let own = |ifname: &str| Ok(port_mac(name, ifname[1..].parse().unwrap()));
            let config = from_topology(&topo, name, &opts, own).unwrap();
            let mut layout = links.layout(name, n);
            for (port, end) in ends.drain(..) {
                layout[port as usize] = Some(end);
            }
            let plain = layout.iter().filter(|p| p.is_none()).count();
            let io =
                LinkedIo::new(MemIo::in_share(plain, share), layout, Transfer::Descriptor).unwrap();
            let sw = Switch::new(config, io).unwrap();
            switches.push(LcmpNode::new(sw, name, None, 1_000_000_000).unwrap());
        }
        let b = Destination {
            name: "b".into(),
            addr: "10.0.2.2:4791".parse().unwrap(),
        };
        let mut nodes = Vec::new();
        for ((h, share), end) in hosts.iter().zip(host_shares).zip(host_ends) {
            let mine = flows
                .iter()
                .find(|(n, _)| *n == h.name)
                .map(|(_, f)| f.clone())
                .unwrap_or_default();
            let source = FlowSource::new(Arrivals::Schedule(mine), 0, 0, 0.0, 1.0, 1);
            let cfg = HostConfig::from_topology(&topo, &h.name, sender()).unwrap();
            let io = host_io(share, end, Transfer::Descriptor);
            let host = RoceHost::new(cfg, io, source, std::slice::from_ref(&b)).unwrap();
            nodes.push((h.name.clone(), host));
        }
        Net {
            switches,
            hosts: nodes,
            now: 0,
        }
    }

    fn host(&self, name: &str) -> &RoceHost<Io> {
        &self.hosts.iter().find(|(n, _)| n == name).unwrap().1
    }

    /// Polls every node at `now` until none has work: a frame a link hands
    /// over at `now` is taken by its peer at `now`, as a memory link is
    /// instantaneous.
    fn settle(&mut self) {
        let t = self.now;
        loop {
            let mut work = 0;
            for s in &mut self.switches {
                work += s.poll(&mut || t);
            }
            for (_, h) in &mut self.hosts {
                work += h.poll(&mut || t);
            }
            if work == 0 {
                return;
            }
        }
    }

    /// The earliest time any node next has work.
    fn next_wake(&self) -> u64 {
        let t = self.now;
        let switches = self.switches.iter().map(|s| s.next_wake(t));
        let hosts = self.hosts.iter().map(|(_, h)| h.next_wake(t));
        switches
            .chain(hosts)
            .map(|w| w.unwrap_or(t))
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Runs every instant up to and including `until`, or until every
    /// host is done.
    fn run_until(&mut self, until: u64) {
        loop {
            self.settle();
            if self.hosts.iter().all(|(_, h)| h.done()) {
                return;
            }
            let next = self.next_wake().max(self.now + 1);
            if next > until {
                return;
            }
            self.now = next;
        }
    }
}

fn flow(id: u64, size: u64, start_ns: u64) -> ScheduledFlow {
    ScheduledFlow {
        id,
        dst: 0,
        size,
        start_ns,
    }
}

#[test]
fn one_flow_completes_in_the_path_rtt_plus_serialization_at_the_bottleneck() {
    let mut net = Net::new(NET, None, &[("a1", vec![flow(7, 3000, 0)])]);
    net.run_until(1_000_000);
    // 3000 bytes, 1000 per packet: First 1074 bytes (14 Ethernet + 20 IPv4
    // + 8 UDP + 12 BTH + 16 RETH + 1000 + 4 ICRC), Middle and Last 1058.
    //
    // a1's sender starts them at 0, 1074, 2132 (paced at 8 Gbit/s = 1
    // byte/ns); its NIC ends them at 1074, 2132, 3190; they reach s1 1 us
    // later: 2074, 3132, 4190. s1 -> s2 (10 ns/byte) is busy from 2074 on:
    // ends at 2074 + 10740 = 12814, + 10580 = 23394, + 10580 = 33974; the
    // Last reaches s2 10 us later, 43974, ends on s2 -> b at 45032 and
    // reaches b at 46032. b's ACK (62 bytes: 14 + 20 + 8 + 12 + 4 AETH +
    // 4): b's NIC 62 ns + 1 us -> s2 at 47094; s2 -> s1 620 ns + 10 us ->
    // s1 at 57714; s1 -> a1 62 ns + 1 us -> a1 at 58776.
    //
    // That is the path's RTT 2 (1 + 10 + 1) us = 24000 ns, plus the
    // flow's serialization at the bottleneck 10 x (1074 + 1058 + 1058) =
    // 31900, plus the store-and-forward terms of this model: the First at
    // a1's NIC (1074) and the Last on s2 -> b (1058), where the bottleneck
    // does not hide them, and the ACK at each of its three hops (62 + 620
    // + 62): 24000 + 31900 + 1074 + 1058 + 744 = 58776.
    let a1 = net.host("a1");
    let [rec] = a1.records() else {
        panic!("{:?}", a1.records());
    };
    assert_eq!(rec.status, FlowStatus::Ok);
    assert_eq!(rec.fct_ns, Some(58_776));
    assert_eq!((rec.id, rec.size_bytes, rec.start_ns), (7, 3000, 0));
    assert_eq!((rec.sender.as_str(), rec.receiver.as_str()), ("a1", "b"));
    // QP of flow 7: 7 + 2 = 9; its UDP port 0xc000 | (81 ^ 0) = 49233.
    assert_eq!(qpn_of(7), 9);
    assert_eq!(rec.src, format!("10.0.1.2:{}", udp_sport_of(9)));
    assert_eq!(udp_sport_of(9), 49233);
    assert_eq!(rec.dst, "10.0.2.2:4791");
    // The First's ACK: the First reaches s2 at 22814, b at 22814 + 1074 +
    // 1000 = 24888; its ACK reaches a1 24888 + 62 + 1000 + 620 + 10000 +
    // 62 + 1000 = 37632 after the First left at 0: 37.632 us -> 38.
    assert_eq!(rec.min_rtt_us, Some(38));
    assert!(rec.error.is_empty() && !rec.warmup && rec.path.is_none());
    let mut csv = Vec::new();
    a1.write_flows_csv(&mut csv).unwrap();
    assert_eq!(
        String::from_utf8(csv).unwrap(),
        "id,sender,receiver,src,dst,size_bytes,start_ns,fct_ns,min_rtt_us,status,error,warmup,path,switch_path,reverse_switch_path\n\
         7,a1,b,10.0.1.2:49233,10.0.2.2:4791,3000,0,58776,38,ok,,false,,,\n"
    );
    // b received the message whole: three packets, the pattern intact,
    // three ACKs; a1 sent three packets and no retransmission.
    let rx = net.host("b").receiver().stats;
    assert_eq!(
        (rx.flows_completed, rx.bytes, rx.data_packets, rx.acks_sent),
        (1, 3000, 3, 3)
    );
    assert_eq!((rx.payload_errors, rx.malformed, rx.ce_marked), (0, 0, 0));
    let s = a1.sender().stats();
    assert_eq!((s.packets, s.retransmissions, s.timeouts), (3, 0, 0));
    assert_eq!(a1.stats().frames_sent, 3);
    assert_eq!(a1.stats().malformed, 0);
    assert!(a1.done());
    // Every buffer is back in a pool once the nodes let go (the hosts'
    // NICs, the links' rings and lent buffers included).
    for s in &mut net.switches {
        s.finish();
    }
    for (_, h) in &mut net.hosts {
        h.finish();
    }
    let free: usize = net
        .switches
        .iter_mut()
        .map(|s| s.io().inner().free_frames())
        .sum::<usize>()
        + net
            .hosts
            .iter_mut()
            .map(|(_, h)| h.io().inner().free_frames())
            .sum::<usize>();
    assert_eq!(free, POOL * 5);
}

#[test]
fn a_host_of_a_topology() {
    let topo = Topology::parse(NET, "test.toml").unwrap();
    let cfg = HostConfig::from_topology(&topo, "a2", sender()).unwrap();
    assert_eq!(cfg.ip, Ipv4Addr::new(10, 0, 1, 3));
    assert_eq!(cfg.mac, port_mac("a2", 0));
    let port = topo.host_by_name("a2").unwrap().port;
    assert_eq!(cfg.gateway_mac, port_mac("s1", port));
    // The NIC is the host link: 8 Gbit/s, 1 us, the 1 MB buffer, no ECN;
    // its delay line the switch's minimum of 1024 frames (the link's
    // bandwidth-delay product is 1000 bytes). DCQCN starts at its rate.
    assert_eq!(
        cfg.nic,
        EgressConfig {
            rate_bps: 8_000_000_000,
            delay_ns: 1_000,
            buffer_bytes: 1_000_000,
            ecn: None,
            max_in_flight: 1024,
        }
    );
    assert_eq!(cfg.sender.dcqcn.line_rate, 8e9);
    assert!(HostConfig::from_topology(&topo, "s1", sender()).is_err());
}

#[test]
fn two_flows_on_one_bottleneck_halve_their_rates_at_the_first_cut() {
    // s1 marks every ECT frame that finds a queue (kmin = kmax = 0 bytes:
    // q <= 0 never, q >= 0, i.e. q > 0, always).
    let ecn = EcnFractions {
        kmin: 0.0,
        kmax: 0.0,
        pmax: 1.0,
    };
    // a1's flow 1 at 0, a2's flow 2 at 500 ns: 1 MB each, running all along.
    let mut net = Net::new(
        NET,
        Some(ecn),
        &[
            ("a1", vec![flow(1, 1_000_000, 0)]),
            ("a2", vec![flow(2, 1_000_000, 500)]),
        ],
    );
    let (q1, q2) = (qpn_of(1), qpn_of(2));
    // Both send at 8 Gbit/s: flow 1's packet k reaches s1 at 2074 + 1058 k
    // (the First is 1074 bytes, the rest 1058), flow 2's at 2574 + 1058 k.
    // s1's port to s2 (10 ns/byte) serves them in that order: F1p0 (found
    // an empty queue: unmarked) ends at 12814, F2p0 (found F1p0: marked)
    // at 23554, F1p1 (marked) at 34134, F2p1 at 44714, F1p2 at 55294.
    //
    // Flow 2's first echo: F2p0 reaches s2 at 33554, b at 33554 + 1074 +
    // 1000 = 35628; its ACK a2 at 35628 + 62 + 1000 + 620 + 10000 + 62 +
    // 1000 = 48372. Flow 1's: F1p1 reaches b at 44134 + 1058 + 1000 =
    // 46192, its ACK a1 at 46192 + 12744 = 58936 (F1p0's ACK, at 37632,
    // carried no echo).
    //
    // DCQCN (dcqcn.md; the defaults of rocev2::dcqcn): the first echo sets
    // alpha = 1 and Rc = Rt = 1.0 x Rc = 8 Gbit/s, and starts the decrease
    // timer 4 us + 1 ns later; the rate does not change at the echo.
    net.run_until(52_372);
    let a2 = net.host("a2").sender().dcqcn(q2).unwrap();
    assert_eq!((a2.rate(), a2.target(), a2.alpha()), (8e9, 8e9, 1.0));
    assert_eq!(a2.rate_cuts(), 0);
    // Flow 2's cut at 48372 + 4001 = 52373: Rc = Rc (1 - alpha / 2) = 4
    // Gbit/s; Rt stays 8 Gbit/s (stage 0: no target clamping). Flow 1's
    // at 58936 + 4001 = 62937, the same. The next echoes come a bottleneck
    // round later (flow 2's F2p1 ends at s1 at 44714 and its ACK reaches
    // a2 at 44714 + 10000 + 1058 + 1000 + 12744 = 69516, so its second
    // cut is at the first decrease tick after it, 52373 + 5 x 4000 =
    // 72373); the alpha timer (every 55 us from the echo) has not run.
    // Timers run lazily, at a QP's next departure: both QPs send every
    // ~1 to 2 us, so by 70000 both cuts are applied.
    net.run_until(70_000);
    for (host, qpn) in [("a1", q1), ("a2", q2)] {
        let cc = net.host(host).sender().dcqcn(qpn).unwrap();
        assert_eq!(
            (cc.rate(), cc.target(), cc.alpha()),
            (4e9, 8e9, 1.0),
            "{host}"
        );
        assert_eq!(cc.rate_cuts(), 1, "{host}");
        assert_eq!(net.host(host).sender().rate(qpn), Some(4e9), "{host}");
    }
    // Flow 2's second cut at 72373 halves again (alpha still 1, Rt still
    // 8 Gbit/s at stage 0); flow 1's second echo reaches a1 at 55294 +
    // 10000 + 1058 + 1000 + 12744 = 80096, so it is still at 4 Gbit/s.
    net.run_until(75_000);
    let cc2 = net.host("a2").sender().dcqcn(q2).unwrap();
    assert_eq!((cc2.rate(), cc2.target(), cc2.rate_cuts()), (2e9, 8e9, 2));
    let cc1 = net.host("a1").sender().dcqcn(q1).unwrap();
    assert_eq!((cc1.rate(), cc1.rate_cuts()), (4e9, 1));
    // By 75000 b has had F1p0 (at 24888), F2p0, F1p1, F2p1 and F1p2 (at
    // 55294 + 12058 = 67352; F2p2 ends at s1 at 65874 and reaches b at
    // 77932): five packets, the last four marked, each echoed, no CNP.
    let b = net.host("b").receiver().stats;
    assert_eq!(
        (b.data_packets, b.ce_marked, b.ecn_echoes_sent, b.cnps_sent),
        (5, 4, 4, 0)
    );
    for host in ["a1", "a2"] {
        let s = net.host(host).sender().stats();
        assert_eq!((s.naks, s.retransmissions, s.timeouts), (0, 0, 0), "{host}");
    }
}

/// A host (a1 of [`NET`]) on a memory link whose other end the test
/// holds (with its own pool in the same area), sending `flows` to b.
fn lone_host(flows: Vec<ScheduledFlow>) -> (RoceHost<Io>, Io) {
    let topo = Topology::parse(NET, "test.toml").unwrap();
    let mut shares = FrameShare::split_area(&[64, 64]).unwrap();
    let (host_end, test_end) = mem_link(16, ("a1/nic", "s1/p1")).unwrap();
    let mut test_io = host_io(shares.pop().unwrap(), test_end, Transfer::Descriptor);
    let cfg = HostConfig::from_topology(&topo, "a1", sender()).unwrap();
    let io = host_io(shares.pop().unwrap(), host_end, Transfer::Descriptor);
    let source = FlowSource::new(Arrivals::Schedule(flows), 0, 0, 0.0, 1.0, 1);
    let b = Destination {
        name: "b".into(),
        addr: "10.0.2.2:4791".parse().unwrap(),
    };
    let mut host = RoceHost::new(cfg, io, source, &[b]).unwrap();
    // Each end lends the other buffers to send into.
    test_io.flush();
    host.poll(&mut || 0);
    (host, test_io)
}

/// Sends `frames` from the test's end of the link.
fn send(io: &mut Io, frames: &[Vec<u8>]) {
    let mut bufs = Vec::new();
    io.take_free(frames.len(), &mut bufs);
    let out: Vec<Frame> = frames
        .iter()
        .zip(bufs)
        .map(|(bytes, addr)| {
            io.frame_room_mut(Frame { addr, len: 0 })[..bytes.len()].copy_from_slice(bytes);
            Frame {
                addr,
                len: bytes.len() as u32,
            }
        })
        .collect();
    assert_eq!(io.send(0, &out), frames.len());
}

/// A RoCEv2 frame from b to `ip` (a 100-byte message in one packet to QP
/// 5 if `data`, else an ACK), Ethernet-addressed to `mac`.
fn roce(mac: [u8; 6], ip: Ipv4Addr, data: bool) -> Vec<u8> {
    roce_qp(mac, ip, data, 5)
}

fn roce_qp(mac: [u8; 6], ip: Ipv4Addr, data: bool, qp: u32) -> Vec<u8> {
    let payload = [7u8; 100];
    let m = if data {
        Message::Data {
            opcode: DataOpcode::Only,
            qp,
            psn: 0,
            fecn: false,
            ack_req: true,
            reth: Some(Reth {
                va: 1,
                rkey: 2,
                dma_len: 100,
            }),
            payload: &payload,
        }
    } else {
        Message::Ack {
            qp,
            psn: 1,
            becn: false,
            aeth: Aeth::Ack {
                credit: CREDIT_INVALID,
                msn: 0,
            },
        }
    };
    let ep = Endpoints {
        src: Ipv4Addr::new(10, 0, 2, 2),
        dst: ip,
        sport: ROCEV2_PORT,
        dport: ROCEV2_PORT,
    };
    let mut buf = vec![0u8; 2048];
    let len = roce_frame::encode(
        &mut buf,
        &mut Vec::new(),
        [2, 0, 0, 0, 0, 9],
        mac,
        &ep,
        ECN_ECT0,
        &m,
    )
    .unwrap();
    buf.truncate(len);
    buf
}

#[test]
fn malformed_frames_are_counted_and_dropped() {
    let (mut host, mut peer) = lone_host(Vec::new());
    let mac = host.config().mac;
    let ip = host.config().ip;
    let mut bad_icrc = roce(mac, ip, true);
    let n = bad_icrc.len();
    bad_icrc[n - 10] ^= 0xff; // a payload byte: the ICRC no longer matches
    let mut header_only = roce(mac, ip, true);
    header_only.truncate(14 + 10);
    let mut garbage = vec![0xffu8; 2048];
    garbage[..6].copy_from_slice(&mac);
    garbage[12..14].copy_from_slice(&[0x08, 0x00]);
    let mut zeros = vec![0u8; 60];
    zeros[..6].copy_from_slice(&mac);
    let frames = vec![
        vec![1, 2, 3, 4, 5],                          // shorter than Ethernet
        zeros,                                        // EtherType 0
        roce([2, 0, 0, 0, 0, 0x77], ip, true),        // another MAC
        roce(mac, Ipv4Addr::new(10, 0, 1, 99), true), // another address
        bad_icrc,
        header_only,
        garbage,
    ];
    send(&mut peer, &frames);
    host.poll(&mut || 1_000);
    let s = host.stats();
    assert_eq!((s.frames_received, s.malformed), (7, 7));
    // Nothing reached the receiver or the sender, nothing was answered.
    assert_eq!(host.receiver().stats.data_packets, 0);
    assert_eq!(host.nic_stats().enqueued_frames, 0);
    // The same data packet, intact, is answered: one ACK queued.
    send(&mut peer, &[roce(mac, ip, true)]);
    host.poll(&mut || 2_000);
    assert_eq!(host.stats().malformed, 7);
    assert_eq!(host.receiver().stats.acks_sent, 1);
    assert_eq!(host.nic_stats().enqueued_frames, 1);
    // An ACK for a QP the host does not have is ignored, not malformed.
    send(&mut peer, &[roce(mac, ip, false)]);
    host.poll(&mut || 3_000);
    assert_eq!(host.stats().malformed, 7);
}

/// Polls `host` at each of its wakes and `inject`'s times up to
/// `until_ns`, sending each of `inject`'s frames from the test's end of
/// the link at its time; returns what reached that end, when: `(t, 'D',
/// psn)` for data, `(t, 'A', qp)` for an ACK, `(t, 'C', qp)` for a CNP.
fn drive(
    host: &mut RoceHost<Io>,
    peer: &mut Io,
    mut inject: Vec<(u64, Vec<Vec<u8>>)>,
    until_ns: u64,
) -> Vec<(u64, char, u32)> {
    let gateway = host.config().gateway_mac;
    inject.reverse();
    let mut got = Vec::new();
    let mut t = 0;
    while t <= until_ns {
        if inject.last().is_some_and(|(at, _)| *at == t) {
            let (_, frames) = inject.pop().unwrap();
            send(peer, &frames);
        }
        host.poll(&mut || t);
        peer.flush();
        let mut rx = Vec::new();
        peer.recv(0, &mut rx, 64);
        for f in &rx {
            let d = roce_frame::parse(peer.frame(*f), gateway).unwrap();
            got.push(match d.message {
                Message::Data { psn, .. } => (t, 'D', psn),
                Message::Ack { qp, .. } => (t, 'A', qp),
                Message::Cnp { qp } => (t, 'C', qp),
            });
        }
        peer.release(&rx);
        let wake = host.next_wake(t).unwrap();
        let next_inject = inject.last().map_or(u64::MAX, |(at, _)| *at);
        t = wake.min(next_inject).max(t + 1);
    }
    got
}

#[test]
fn acks_go_before_data_waiting_for_the_nic() {
    // a1 sends 4000 bytes to b from 0: First 1074 bytes, then three of
    // 1058, paced at its 8 Gbit/s line (1 byte/ns), link delay 1 us. b (the
    // test) sends a1 ten one-packet messages at 500 and one more at 2200;
    // a1 answers each with a 62-byte ACK.
    let (mut host, mut peer) = lone_host(vec![flow(1, 4000, 0)]);
    let (mac, ip) = (host.config().mac, host.config().ip);
    let burst: Vec<Vec<u8>> = (100..110).map(|qp| roce_qp(mac, ip, true, qp)).collect();
    let inject = vec![(500, burst), (2200, vec![roce_qp(mac, ip, true, 110)])];
    let got = drive(&mut host, &mut peer, inject, 10_000);
    // The First leaves the NIC at 1074 (arrives 2074). The ten ACKs,
    // queued at 500 behind it, leave at 1074 + 62 k, k = 1..=10 (1136 to
    // 1694). The Middle due at 1074 waits for them: 1694 to 2752. The ACK
    // queued at 2200 goes after that frame, not after the next data
    // packet (due at 2132 by the pacing): 2752 + 62 = 2814. Then the
    // second Middle, 2814 to 3872, and the Last, due at 3190, 3872 to
    // 4930. Everything arrives 1 us later. (With data queued behind ACKs
    // instead, the second Middle would have gone at 2752 - 3810 and the
    // late ACK only at 3872.)
    let mut want = vec![(2074, 'D', 0)];
    want.extend((0..10).map(|k| (2136 + 62 * k, 'A', 100 + k as u32)));
    want.extend([
        (3752, 'D', 1),
        (3814, 'A', 110),
        (4872, 'D', 2),
        (5930, 'D', 3),
    ]);
    assert_eq!(got, want);
    assert_eq!(host.receiver().stats.acks_sent, 11);
}

#[test]
fn a_paused_host_holds_its_acks_until_the_pause_ends() {
    // a1's NIC: 8 Gbit/s (1 byte/ns), link delay 1 us. Its switch pauses
    // it at 0 for 50 quanta of 512 bit times (3200 ns) and at 5000 for
    // 65535 (4 194 240 ns), resumed at 7000; b (the test) sends it a
    // one-packet message at 100 and one at 5100. Each 62-byte ACK waits
    // for the end of its pause: 3200 to 3262 and 7000 to 7062, at b 1 us
    // later. (Not held, they would reach b at 1162 and 6162.)
    let (mut host, mut peer) = lone_host(Vec::new());
    let (mac, ip, gateway) = (
        host.config().mac,
        host.config().ip,
        host.config().gateway_mac,
    );
    let pfc = |quanta| lcmp_wire::pfc::frame(gateway, &Pfc::pause(ROCE_PRIORITY, quanta).unwrap());
    let inject = vec![
        (0, vec![pfc(50).to_vec()]),
        (100, vec![roce_qp(mac, ip, true, 100)]),
        (5000, vec![pfc(u16::MAX).to_vec()]),
        (5100, vec![roce_qp(mac, ip, true, 101)]),
        (7000, vec![pfc(0).to_vec()]),
    ];
    let got = drive(&mut host, &mut peer, inject, 20_000);
    assert_eq!(got, [(4262, 'A', 100), (8062, 'A', 101)]);
    let s = host.stats();
    // Paused 0-3200 (its time ran out) and 5000-7000 (resumed).
    assert_eq!((s.pfc_pauses, s.pfc_resumes, s.pfc_paused_ns), (2, 1, 5200));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any bytes after a header addressed to the host: counted, never a
    /// panic, never an answer.
    #[test]
    fn any_frame_is_handled_without_panic(tail in proptest::collection::vec(any::<u8>(), 0..2034)) {
        let (mut host, mut peer) = lone_host(Vec::new());
        let mut frame = host.config().mac.to_vec();
        frame.extend_from_slice(&[2, 0, 0, 0, 0, 9, 0x08, 0x00]);
        frame.extend_from_slice(&tail);
        send(&mut peer, &[frame]);
        host.poll(&mut || 1_000);
        prop_assert_eq!(host.stats().frames_received, 1);
        prop_assert_eq!(host.stats().malformed, 1);
    }
}

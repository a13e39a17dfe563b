//! The engine's RoCEv2 host running HPCC ([`HostConfig::with_cc`]), with
//! the INT hops a switch would write injected by hand at the other end of
//! its link: its data packets carry an empty collect block, the test
//! writes hops into them (`lcmp_wire::push_hop`, the switch's write) and
//! answers with their echo, and the host's rate follows HPCC's worked
//! example (traffic/tests/cc_hand_worked.rs); as a receiver it echoes a
//! data packet's hops byte-exact.

use std::net::Ipv4Addr;

use lcmp_engine::host::{HostConfig, RoceHost};
use lcmp_engine::{host_io, roce_frame};
use lcmp_switch::frames::FrameShare;
use lcmp_switch::io::{Frame, PacketIo};
use lcmp_switch::linked_io::LinkedIo;
use lcmp_switch::mem_io::MemIo;
use lcmp_switch::mem_link::{mem_link, Transfer};
use lcmp_switch::node::Node;
use lcmp_topology::Topology;
use lcmp_traffic::client::Destination;
use lcmp_traffic::flows::{Arrivals, FlowSource, ScheduledFlow};
use lcmp_traffic::rocev2::cc::{CcConfig, CcParams, QpSetup};
use lcmp_traffic::rocev2::dcqcn::DcqcnParams;
use lcmp_traffic::rocev2::hpcc::HpccParams;
use lcmp_traffic::rocev2::qpn_of;
use lcmp_traffic::rocev2::sender::SenderConfig;
use lcmp_traffic::rocev2::wire::{
    Aeth, DataOpcode, Endpoints, IntKind, Message, Reth, CREDIT_INVALID, ECN_ECT0, MAX_INT_BLOCK,
    ROCEV2_PORT,
};
use lcmp_wire::{push_hop, IntHop, PushOutcome};

type Io = LinkedIo<MemIo>;

/// a - s - b, host links 100 Gbit/s (HPCC's worked example's line rate),
/// 1 us.
const NET: &str = r#"
[[switch]]
name = "s"
prefixes = ["10.0.1.0/24"]
[[host]]
name = "a"
switch = "s"
addresses = ["10.0.1.2/24"]
rate = "100Gbps"
delay = "1us"
buffer = "1MB"
[[host]]
name = "b"
switch = "s"
addresses = ["10.0.1.3/24"]
rate = "100Gbps"
delay = "1us"
buffer = "1MB"
"#;

/// Host a running HPCC with the worked example's QP (a 100 KB window
/// following the rate, 8 us base RTT, 5 hop slots), sending `flows` to b,
/// on a memory link whose other end the test holds.
fn hpcc_host(flows: Vec<ScheduledFlow>) -> (RoceHost<Io>, Io) {
    let topo = Topology::parse(NET, "test.toml").unwrap();
    let mut shares = FrameShare::split_area(&[256, 256]).unwrap();
    let (host_end, test_end) = mem_link(64, ("a/nic", "s/p1")).unwrap();
    let mut test_io = host_io(shares.pop().unwrap(), test_end, Transfer::Descriptor);
    let sender = SenderConfig {
        dcqcn: DcqcnParams::default(),
        payload: 1000,
        rto_ns: 1_000_000_000,
    };
    let cc = CcConfig {
        params: CcParams::Hpcc(HpccParams::default()),
        qp: QpSetup {
            win_bytes: 100_000,
            base_rtt_ns: 8_000,
            var_win: true,
            mtu: 1000,
        },
        int_hops: 5,
    };
    let cfg = HostConfig::from_topology(&topo, "a", sender)
        .unwrap()
        .with_cc(cc);
    assert_eq!(cfg.cc.params.line_rate(), 100e9);
    let io = host_io(shares.pop().unwrap(), host_end, Transfer::Descriptor);
    let source = FlowSource::new(Arrivals::Schedule(flows), 0, 0, 0.0, 1.0, 1);
    let b = Destination {
        name: "b".into(),
        addr: "10.0.1.3:4791".parse().unwrap(),
    };
    let mut host = RoceHost::new(cfg, io, source, &[b]).unwrap();
    test_io.flush();
    host.poll(&mut || 0);
    (host, test_io)
}

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

/// Polls the host at its wakes from `*t` up to `until`; returns the
/// frames that reached the test's end.
fn run(host: &mut RoceHost<Io>, peer: &mut Io, t: &mut u64, until: u64) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    while *t <= until {
        let now = *t;
        host.poll(&mut || now);
        peer.flush();
        let mut rx = Vec::new();
        peer.recv(0, &mut rx, 64);
        got.extend(rx.iter().map(|f| peer.frame(*f).to_vec()));
        peer.release(&rx);
        *t = host.next_wake(now).unwrap().max(now + 1);
    }
    got
}

fn hop(ts_ns: u32, tx_bytes: u32, qlen_bytes: u32, link_rate_kbps: u32) -> IntHop {
    IntHop {
        link_rate_kbps,
        qlen_bytes,
        tx_bytes,
        ts_ns,
    }
}

/// b's ACK of `psn` to QP `qp` carrying `echo` after its BTH, addressed to
/// a's MAC.
fn ack(mac: [u8; 6], qp: u32, psn: u32, echo: &[u8]) -> Vec<u8> {
    let m = Message::Ack {
        qp,
        psn,
        becn: false,
        aeth: Aeth::Ack {
            credit: CREDIT_INVALID,
            msn: 0,
        },
    };
    let ep = Endpoints {
        src: Ipv4Addr::new(10, 0, 1, 3),
        dst: Ipv4Addr::new(10, 0, 1, 2),
        sport: ROCEV2_PORT,
        dport: ROCEV2_PORT,
    };
    let mut buf = vec![0u8; 2048];
    let len = roce_frame::encode_with(
        &mut buf,
        &mut Vec::new(),
        [2, 0, 0, 0, 0, 9],
        mac,
        &ep,
        0,
        &m,
        Some(echo),
    )
    .unwrap();
    buf.truncate(len);
    buf
}

#[test]
fn hpcc_host_follows_hops_written_by_hand() {
    let (mut host, mut peer) = hpcc_host(vec![ScheduledFlow {
        id: 7,
        dst: 0,
        size: 100_000,
        start_ns: 0,
    }]);
    let qpn = qpn_of(7);
    let gateway = host.config().gateway_mac;
    let mac = host.config().mac;
    let mut t = 0;
    // 5 us: at 100G (a 1158-byte frame every 92.64 ns) some 40 packets
    // leave, each with an empty collect block of 5 slots.
    let mut data = run(&mut host, &mut peer, &mut t, 5_000);
    assert!(data.len() >= 3, "{}", data.len());
    for f in &data {
        let d = roce_frame::parse(f, gateway).unwrap();
        let b = d.int.unwrap();
        assert_eq!((b.kind(), b.capacity(), b.nhop()), (IntKind::Collect, 5, 0));
    }
    // Two switches write their hops into PSN 0 and 1 (E1 and E2 of
    // cc_hand_worked.rs: a 100G hop A and a 25G hop B, in kbit/s).
    let (a, b) = (100_000_000, 25_000_000);
    let hops = [
        [hop(1_000_000, 0, 0, a), hop(1_000_500, 0, 0, b)],
        [
            hop(1_002_000, 25_000, 40_000, a),
            hop(1_002_500, 3_125, 0, b),
        ],
    ];
    let mut echoes = Vec::new();
    for (f, hs) in data.iter_mut().zip(hops) {
        for h in hs {
            assert_eq!(push_hop(f, h), Ok(PushOutcome::Pushed));
        }
        // b's receiver echoes them (the ICRC still holds after the write).
        let d = roce_frame::parse(f, gateway).unwrap();
        let mut e = [0u8; MAX_INT_BLOCK];
        let n = d.int.unwrap().echo_into(&mut e).unwrap();
        echoes.push(e[..n].to_vec());
    }
    // E1 (ack PSN 1 = 1000 bytes): stored; the rate stays 100G.
    send(&mut peer, &[ack(mac, qpn, 1, &echoes[0])]);
    let now = t;
    run(&mut host, &mut peer, &mut t, now);
    assert_eq!(host.sender().rate(qpn), Some(100e9));
    // E2 (ack 2000 bytes <= snd_nxt at E1): a fast reaction. u_A = 25_000
    // B x 8 / 2 us / 100G = 1.0, U = 1, c = 1 / 0.95: R = 100G x 0.95 +
    // 50M = 95.05G.
    send(&mut peer, &[ack(mac, qpn, 2, &echoes[1])]);
    let now = t;
    run(&mut host, &mut peer, &mut t, now);
    let r = host.sender().rate(qpn).unwrap();
    assert!((r - 95.05e9).abs() < 1.0, "{r}");
    let s = host.sender().stats();
    assert_eq!((s.int_echoes, s.cc_updates, s.cc_fast_reactions), (2, 0, 1));
}

#[test]
fn the_host_echoes_a_data_packets_hops() {
    let (mut host, mut peer) = hpcc_host(Vec::new());
    let (mac, gateway) = (host.config().mac, host.config().gateway_mac);
    // A one-packet message from b with a collect block of 2 slots, both
    // written by switches.
    let mut block = [0u8; MAX_INT_BLOCK];
    let n = lcmp_wire::write_collect(&mut block, 2).unwrap();
    let payload = [7u8; 100];
    let m = Message::Data {
        opcode: DataOpcode::Only,
        qp: 5,
        psn: 0,
        fecn: false,
        ack_req: true,
        reth: Some(Reth {
            va: 1,
            rkey: 2,
            dma_len: 100,
        }),
        payload: &payload,
    };
    let ep = Endpoints {
        src: Ipv4Addr::new(10, 0, 1, 3),
        dst: Ipv4Addr::new(10, 0, 1, 2),
        sport: ROCEV2_PORT,
        dport: ROCEV2_PORT,
    };
    let mut frame = vec![0u8; 2048];
    let len = roce_frame::encode_with(
        &mut frame,
        &mut Vec::new(),
        [2, 0, 0, 0, 0, 9],
        mac,
        &ep,
        ECN_ECT0,
        &m,
        Some(&block[..n]),
    )
    .unwrap();
    frame.truncate(len);
    let (h1, h2) = (hop(5, 6, 7, 8), hop(0xffff_ffff, 1, 2, 3));
    assert_eq!(push_hop(&mut frame, h1), Ok(PushOutcome::Pushed));
    assert_eq!(push_hop(&mut frame, h2), Ok(PushOutcome::Pushed));
    send(&mut peer, &[frame]);
    let mut t = 1_000;
    let got = run(&mut host, &mut peer, &mut t, 10_000);
    assert_eq!(got.len(), 1);
    let d = roce_frame::parse(&got[0], gateway).unwrap();
    assert!(matches!(d.message, Message::Ack { qp: 5, psn: 1, .. }));
    // The echo: kind 3, capacity = nhop = 2, no overflow, then the hops
    // as written: 5, 6, 7, 8 is link rate 8, qlen 7, tx 6, time 5.
    let echo = d.int.unwrap().as_bytes();
    let mut want = vec![3u8, 2, 2, 0];
    for w in [8u32, 7, 6, 5, 3, 2, 1, 0xffff_ffff] {
        want.extend_from_slice(&w.to_be_bytes());
    }
    assert_eq!(echo, &want[..]);
    assert_eq!(host.receiver().stats.int_echoes_sent, 1);
}

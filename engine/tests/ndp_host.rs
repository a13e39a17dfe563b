//! Two NDP hosts ([`lcmp_engine::ndp_host`]) on the virtual clock, joined
//! through a test node that trims every k-th data packet from a to b (as
//! a switch whose queue is full does): a - t - b over memory links. The
//! node forwards at once, so every link's timing is the sending host's
//! NIC (its rate and delay), and every instant below is worked out by
//! hand.

use std::net::Ipv4Addr;

use lcmp_control::proto::{Body, ErrorKind, ErrorReply};
use lcmp_control::Request;
use lcmp_engine::host_io;
use lcmp_engine::ndp_host::{NdpHost, NdpHostConfig};
use lcmp_switch::daemon::DaemonConfig;
use lcmp_switch::egress::EgressConfig;
use lcmp_switch::frames::FrameShare;
use lcmp_switch::io::{Frame, PacketIo};
use lcmp_switch::linked_io::LinkedIo;
use lcmp_switch::mem_io::MemIo;
use lcmp_switch::mem_link::{mem_link, port_mac, Transfer};
use lcmp_switch::node::{Clock, Context, Node};
use lcmp_switch::virtual_clock::VirtualNet;
use lcmp_traffic::client::Destination;
use lcmp_traffic::flows::{Arrivals, FlowSource, ScheduledFlow};
use lcmp_traffic::ndp::receiver::RxStats;
use lcmp_traffic::ndp::sender::SenderStats;
use lcmp_traffic::ndp::NdpParams;
use lcmp_traffic::record::{FlowRecord, FlowStatus};
use lcmp_wire::ndp::{header_of, Kind};
use lcmp_wire::MacAddr;

type Io = LinkedIo<MemIo>;

const POOL: usize = 1024;
const DEPTH: usize = 256;
const A_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 2);
const B_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 2);

/// Forwards port 0 <-> port 1 at once, rewriting the MACs as a switch
/// does, and trims every `every`-th NDP data packet from port 0 (0:
/// none).
struct Trimmer {
    io: Io,
    every: u64,
    /// The host behind each port.
    host_macs: [MacAddr; 2],
    own_macs: [MacAddr; 2],
    data_seen: u64,
    trimmed: u64,
    frames: Vec<Frame>,
    last_poll_ns: u64,
}

impl Trimmer {
    fn forward(&mut self, from: usize) -> usize {
        let to = 1 - from;
        self.frames.clear();
        self.io.recv(from, &mut self.frames, 256);
        for f in &mut self.frames {
            let bytes = self.io.frame_mut(*f);
            let is_data = header_of(bytes).is_ok_and(|h| h.kind == Kind::Data && !h.trimmed());
            if from == 0 && is_data {
                self.data_seen += 1;
                if self.every > 0 && self.data_seen.is_multiple_of(self.every) {
                    f.len = lcmp_wire::ndp::trim(bytes).unwrap() as u32;
                    self.trimmed += 1;
                }
            }
            let bytes = self.io.frame_mut(*f);
            bytes[..6].copy_from_slice(&self.host_macs[to]);
            bytes[6..12].copy_from_slice(&self.own_macs[to]);
        }
        let n = self.frames.len();
        let sent = self.io.send(to, &self.frames);
        assert_eq!(sent, n, "the test's links take everything");
        n
    }
}

impl Node for Trimmer {
    type Io = Io;
    type Status = u64;

    fn poll(&mut self, clock: &mut impl Clock) -> usize {
        self.last_poll_ns = clock.now_ns();
        let n = self.forward(0) + self.forward(1);
        self.io.flush();
        n
    }

    fn last_poll_ns(&self) -> u64 {
        self.last_poll_ns
    }

    fn next_wake(&self, _now_ns: u64) -> Option<u64> {
        Some(u64::MAX)
    }

    fn handle(&mut self, _request: Request, _ctx: &Context<'_>) -> Body {
        Body::Error(ErrorReply::new(ErrorKind::Unsupported, "a test node"))
    }

    fn status(&mut self, _ctx: &Context<'_>) -> u64 {
        self.trimmed
    }

    fn io(&mut self) -> &mut Io {
        &mut self.io
    }

    fn finish(&mut self) {
        self.io.shutdown();
    }
}

/// Host links of 8 Gbit/s (1 byte/ns) and 1 us; window 4; 1000-byte
/// payloads (1058-byte frames; control frames 58); RTO 1 ms (never
/// reached here).
fn host_config(name: &str, ip: Ipv4Addr, t_port: u8) -> NdpHostConfig {
    NdpHostConfig {
        name: name.into(),
        ip,
        mac: port_mac(name, 0),
        gateway_mac: port_mac("t", t_port),
        nic: EgressConfig {
            rate_bps: 8_000_000_000,
            delay_ns: 1_000,
            buffer_bytes: 1_000_000,
            ecn: None,
            max_in_flight: 1024,
        },
        params: NdpParams {
            initial_window: 4,
            payload: 1000,
            min_rto_ns: 1_000_000,
        },
        start_ns: 0,
        rx_idle_timeout_ns: 60_000_000_000,
    }
}

fn source(flows: Vec<ScheduledFlow>) -> FlowSource {
    FlowSource::new(Arrivals::Schedule(flows), 0, 0, 0.0, 1.0, 1)
}

/// What a run leaves behind.
#[derive(Debug, PartialEq)]
struct Outcome {
    records: Vec<FlowRecord>,
    csv: String,
    sender: SenderStats,
    receiver: RxStats,
    delivered: Option<u64>,
    trimmed: u64,
    data_seen: u64,
    malformed: (u64, u64),
    end_ns: u64,
}

/// Host a sends one flow of `size` bytes (id 7) to b at 0; t trims every
/// `every`-th data packet. Runs until a is done.
fn run(size: u64, every: u64) -> Outcome {
    let mut shares = FrameShare::split_area(&[POOL; 3]).unwrap().into_iter();
    let (a_end, ta_end) = mem_link(DEPTH, ("a/nic", "t/p0")).unwrap();
    let (tb_end, b_end) = mem_link(DEPTH, ("t/p1", "b/nic")).unwrap();
    let dsts = [Destination {
        name: "b".into(),
        addr: "10.0.2.2:7247".parse().unwrap(),
    }];
    let flow = ScheduledFlow {
        id: 7,
        dst: 0,
        size,
        start_ns: 0,
    };
    let a = NdpHost::new(
        host_config("a", A_IP, 0),
        host_io(shares.next().unwrap(), a_end, Transfer::Descriptor),
        source(vec![flow]),
        &dsts,
    )
    .unwrap();
    let t = Trimmer {
        io: LinkedIo::new(
            MemIo::in_share(0, shares.next().unwrap()),
            vec![Some(ta_end), Some(tb_end)],
            Transfer::Descriptor,
        )
        .unwrap(),
        every,
        host_macs: [port_mac("a", 0), port_mac("b", 0)],
        own_macs: [port_mac("t", 0), port_mac("t", 1)],
        data_seen: 0,
        trimmed: 0,
        frames: Vec::with_capacity(256),
        last_poll_ns: 0,
    };
    let b = NdpHost::new(
        host_config("b", B_IP, 1),
        host_io(shares.next().unwrap(), b_end, Transfer::Descriptor),
        source(Vec::new()),
        &[],
    )
    .unwrap();
    let mut net = VirtualNet::new(0);
    let ia = net.add_node(a, DaemonConfig::quiet("a"));
    let it = net.add_node(t, DaemonConfig::quiet("t"));
    let ib = net.add_node(b, DaemonConfig::quiet("b"));
    net.join((ia, 0), (it, 0)).unwrap();
    net.join((it, 1), (ib, 0)).unwrap();
    net.run_while(|n| !n.daemon::<NdpHost<Io>>(ia).unwrap().node().done());
    let end_ns = net.now_ns();
    // Nothing more may happen to the flow afterwards: a's last ACK was
    // its last packet's.
    net.run_until(end_ns + 10_000_000);
    let (trimmed, data_seen) = {
        let t = net.daemon::<Trimmer>(it).unwrap().node();
        (t.trimmed, t.data_seen)
    };
    let (delivered, receiver, b_malformed) = {
        let b = net.daemon::<NdpHost<Io>>(ib).unwrap().node();
        (
            b.receiver().delivered(A_IP, 7),
            b.receiver().stats,
            b.stats().malformed,
        )
    };
    let a = net.daemon::<NdpHost<Io>>(ia).unwrap().node();
    let mut csv = Vec::new();
    a.write_flows_csv(&mut csv).unwrap();
    let out = Outcome {
        records: a.records().to_vec(),
        csv: String::from_utf8(csv).unwrap(),
        sender: a.sender().stats(),
        receiver,
        delivered,
        trimmed,
        data_seen,
        malformed: (a.stats().malformed, b_malformed),
        end_ns,
    };
    for r in net.finish() {
        r.unwrap();
    }
    out
}

/// 20 packets: 19 of 1000 bytes (1058-byte frames) and one of 500 (558).
const SIZE: u64 = 19_500;

#[test]
fn without_trimming_the_flow_takes_its_window_then_its_pulls_at_line_rate() {
    let out = run(SIZE, 0);
    // a sends packet j at j x 1058 ns, back to back: the window (0-3) at
    // once, then one per pull. b gets packet i at t_i = (i + 1) x 1058 +
    // 1000 and answers at once: its ACK (58 ns on its NIC), then the pull
    // (due at t_i too: the packets come one full frame apart, the pacer's
    // gap), which leaves b's NIC at t_i + 116 and reaches a at t_i + 1116
    // = (i + 3) x 1058, a frame's time before packet i + 4 is due at
    // (i + 4) x 1058: the line never idles.
    //
    // The last packet starts at 19 x 1058 = 20102, ends at 20660, reaches
    // b at 21660; its ACK leaves b at 21718 and reaches a at 22718: the
    // FCT is the first packet's serialization and every other's (19 x
    // 1058 + 558 = 20660), the path there (1000) and the ACK's way back
    // (58 + 1000).
    let [rec] = &out.records[..] else {
        panic!("{:?}", out.records);
    };
    assert_eq!(rec.status, FlowStatus::Ok);
    assert_eq!(rec.fct_ns, Some(22_718));
    assert_eq!(out.end_ns, 22_718);
    // RTTs: a full packet's 1058 + 1000 + 58 + 1000 = 3116, the last's
    // 558 + 2058 = 2616: 2.616 us, rounded 3.
    assert_eq!(rec.min_rtt_us, Some(3));
    // The flow's port: udp_sport_of(7) = 0xc000 | (49 ^ 0) = 49201.
    assert_eq!(
        out.csv,
        "id,sender,receiver,src,dst,size_bytes,start_ns,fct_ns,min_rtt_us,status,error,warmup,path,switch_path,reverse_switch_path\n\
         7,a,b,10.0.1.2:49201,10.0.2.2:7247,19500,0,22718,3,ok,,false,,,\n"
    );
    // Every byte once; 20 packets, 20 ACKs, no NACK; a pull for every
    // packet but the last (which completes the flow): 19, of which the
    // 16 after the window pull packets and 3 find nothing left.
    assert_eq!(out.delivered, Some(SIZE));
    let rx = out.receiver;
    assert_eq!(
        (
            rx.bytes,
            rx.data_packets,
            rx.duplicates,
            rx.acks_sent,
            rx.nacks_sent
        ),
        (SIZE, 20, 0, 20, 0)
    );
    assert_eq!((rx.pulls_sent, rx.flows_completed), (19, 1));
    let tx = out.sender;
    assert_eq!((tx.packets, tx.retransmissions, tx.timeouts), (20, 0, 0));
    assert_eq!((tx.pulls, tx.unused_pulls, tx.acks), (19, 3, 20));
    assert_eq!((out.trimmed, out.data_seen), (0, 20));
    assert_eq!(out.malformed, (0, 0));
}

#[test]
fn trimmed_packets_are_nacked_and_resent_once_and_every_byte_arrives_once() {
    let out = run(SIZE, 5);
    // As without trimming, departure j (counting retransmissions) starts
    // at j x 1058 and reaches b at (j + 1) x 1058 + 1000, trimmed or not
    // (t trims as it forwards, at once). b NACKs a trimmed one: the NACK
    // reaches a at (j + 3) x 1058 - 58, just before that departure's pull
    // at (j + 3) x 1058, which therefore sends the packet again as
    // departure j + 4. t trims departures 4, 9, 14 and 19 (the 5th,
    // 10th, 15th and 20th data packets):
    //
    //   d0-d3 p0-p3 | d4 p4 (trimmed) | d5-d7 p5-p7 | d8 p4 again |
    //   d9 p8 (trimmed) | d10-d12 p9-p11 | d13 p8 | d14 p12 (trimmed) |
    //   d15-d17 p13-p15 | d18 p12 | d19 p16 (trimmed) | d20-d22 p17-p19 |
    //   d23 p16
    //
    // 24 departures: the 25th data packet, which would be trimmed, never
    // exists. d22 is the short last packet (558 bytes, 23276 to 23834);
    // d23 (p16) follows at 23834, ends at 24892, reaches b at 25892 and
    // completes the flow there; its ACK reaches a at 25892 + 58 + 1000 =
    // 26950.
    assert_eq!((out.trimmed, out.data_seen), (4, 24));
    let [rec] = &out.records[..] else {
        panic!("{:?}", out.records);
    };
    assert_eq!(rec.status, FlowStatus::Ok);
    assert_eq!(rec.fct_ns, Some(26_950));
    // One retransmission per trimmed packet, no timeout.
    let tx = out.sender;
    assert_eq!(
        (tx.packets, tx.retransmissions, tx.nacks, tx.timeouts),
        (24, 4, 4, 0)
    );
    // Every byte exactly once: 20 whole packets, no duplicate, 4 trimmed
    // ones nacked. Pulls: one per arrival but the last, 23; the 20 after
    // the window send packets, 3 find nothing left.
    assert_eq!(out.delivered, Some(SIZE));
    let rx = out.receiver;
    assert_eq!(
        (rx.bytes, rx.data_packets, rx.trimmed, rx.duplicates),
        (SIZE, 24, 4, 0)
    );
    assert_eq!((rx.acks_sent, rx.nacks_sent, rx.pulls_sent), (20, 4, 23));
    assert_eq!((tx.pulls, tx.unused_pulls), (23, 3));
    assert_eq!(out.malformed, (0, 0));
}

#[test]
fn two_runs_are_identical() {
    let first = run(SIZE, 3);
    let second = run(SIZE, 3);
    assert_eq!(first, second);
    // And the run did trim, and deliver.
    assert!(first.trimmed > 0);
    assert_eq!(first.delivered, Some(SIZE));
    assert_eq!(first.records[0].status, FlowStatus::Ok);
}

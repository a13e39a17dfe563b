//! The whole forwarding pipeline over in-memory ports, driven by a
//! fuzz-chosen script.
//!
//! The input (decoded with `arbitrary`) is a switch setup like the test bed
//! of `tests/common` (port 0 faces host A, ports 1-3 are three paths to
//! 10.0.2.0/24 and fd00:2::/64), with fuzz-chosen policy, links (shaped or
//! not, delay, buffer, delay-line size, ECN marked at enqueue or at
//! dequeue), pool size, batch size and
//! flow cache, and then a sequence of operations: bursts of well-formed
//! frames built from fuzz-chosen fields, raw frames, time steps, taking what
//! the ports sent, carrier and admin changes, transmit ring room, ECN and
//! link changes, policy and route table changes, and drains.
//!
//! Every injected frame that `parse` accepts, or refuses only for its TTL,
//! is tagged (IPv4 identification or IPv6 flow label, with the header
//! checksum fixed) and remembered, so each transmitted frame is matched to
//! the frame it came from, and sent at most once:
//!
//! * a forwarded frame is checked byte for byte: MACs of the egress port and
//!   its peer, TTL / hop limit one less, ECN unchanged or (ECT only) CE, the
//!   IPv4 header checksum equal to a full recompute, nothing else changed,
//!   and it left by a port its route allows;
//! * an ICMP error the switch sent (time exceeded for an expired TTL,
//!   destination unreachable for no route; recognised by its tag 0) went
//!   back out of the port the frame came in on, to its sender, from the
//!   port's address, with valid checksums, and quotes the frame as received.
//!
//! After every operation the frame accounting is checked: every received
//! frame, and every ICMP error made from one, is transmitted, counted as a
//! drop (`Switch::drain` counts what it hands back as `shutdown` drops),
//! or still held by an egress; every pool buffer is free, waiting
//! to be received, held, or in a transmit queue; per-port counters agree
//! with the egress statistics. At the end the switch is run until idle and
//! drained, and then `rx_frames + icmp_sent == tx_frames + total_drops`
//! and the pool is whole again.
#![no_main]

use std::collections::HashMap;
use std::net::IpAddr;

use arbitrary::Arbitrary;
use lcmp_control::snapshot::EcnFractions;
use lcmp_policy::{AllCongested, Candidate, CandidateSet, CongestionParams, LcmpParams, Policy};
use lcmp_switch::counters::{Counter, DropReason};
use lcmp_switch::egress::{EcnConfig, EcnMarkAt, EgressConfig};
use lcmp_switch::mem_io::{MemIo, FRAME_SIZE};
use lcmp_switch::lpm::Route;
use lcmp_switch::switch::{PortConfig, Switch, SwitchConfig};
use lcmp_wire::testing::{
    fix_ipv4_checksum, ipv4_header_checksum_ok, l4_checksum_ok, FrameBuilder,
};
use lcmp_wire::{ipv4_checksum, parse, Bth, Ecn, FlowTuple, ParseError, L3};
use libfuzzer_sys::fuzz_target;

const PORTS: usize = 4;
const MS: u64 = 1_000_000;
const US: u64 = 1_000;
const HOST_A: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
/// Operations run per input: bounds the time one input takes.
const MAX_OPS: usize = 400;
/// Frames built per burst, at most.
const MAX_BURST: usize = 16;
/// Largest payload of a built frame: every frame fits a pool buffer.
const MAX_PAYLOAD: usize = 1400;
/// Time step of the final poll: far beyond any emulated link's drain time
/// (the slowest link, 1 Mbit/s with a 1 MiB buffer, empties in 8.4 s, plus
/// at most 50 ms of delay).
const SETTLE_STEP_NS: u64 = 1_000 * 1_000 * MS;

/// Offsets in an untagged frame.
const ETH: usize = 14;
const V4_TOS: usize = ETH + 1;
const V4_ID: usize = ETH + 4;
const V4_TTL: usize = ETH + 8;
const V4_CSUM: usize = ETH + 10;
const V6_TC_LOW: usize = ETH + 1;
const V6_HOP: usize = ETH + 7;

fn mac(port: usize) -> [u8; 6] {
    [2, 0, 0, 0, 1, port as u8]
}

fn peer(port: usize) -> [u8; 6] {
    [2, 0, 0, 0, 2, port as u8]
}

/// The addresses a port may be given (`Setup::port_addresses`): ICMP
/// errors sent out of it come from them.
fn port_v4(port: usize) -> [u8; 4] {
    [10, 0, 9, 1 + port as u8]
}

fn port_v6(port: usize) -> [u8; 16] {
    let mut a = [0u8; 16];
    a[..4].copy_from_slice(&[0xfd, 0, 0, 9]);
    a[15] = 1 + port as u8;
    a
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum PolicyChoice {
    Ecmp,
    Wcmp,
    Ucmp,
    Lcmp {
        alpha: u8,
        beta: u8,
        keep_num: u8,
        keep_den: u8,
        keep_all_up_to: u8,
        congested_mark: u8,
        hash_all: bool,
    },
}

impl PolicyChoice {
    fn policy(self) -> Policy {
        match self {
            PolicyChoice::Ecmp => Policy::Ecmp,
            PolicyChoice::Wcmp => Policy::Wcmp,
            PolicyChoice::Ucmp => Policy::Ucmp,
            PolicyChoice::Lcmp {
                alpha,
                beta,
                keep_num,
                keep_den,
                keep_all_up_to,
                congested_mark,
                hash_all,
            } => Policy::Lcmp(LcmpParams {
                alpha: alpha.into(),
                beta: beta.into(),
                keep_num,
                keep_den,
                keep_all_up_to,
                congested_mark,
                all_congested: if hash_all {
                    AllCongested::HashAll
                } else {
                    AllCongested::MinCost
                },
            }),
        }
    }
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Rate {
    Unshaped,
    Mbit1,
    Mbit10,
    Mbit100,
    Gbit1,
    Gbit10,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Delay {
    Zero,
    Us10,
    Ms1,
    Ms5,
    Ms50,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Buffer {
    Zero,
    OneFrame,
    B5k,
    B20k,
    B150k,
    Mib1,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum InFlight {
    One,
    Eight,
    K4,
}

/// ECN thresholds in 1/255 of the buffer, probability in 1/255, and where
/// marks are decided (the switch-wide choice is the setup's; `SetEcn`
/// keeps the switch's).
#[derive(Arbitrary, Debug, Clone, Copy)]
struct EcnChoice {
    kmin: u8,
    kmax: u8,
    pmax: u8,
    at_dequeue: bool,
}

impl EcnChoice {
    fn mark_at(self) -> EcnMarkAt {
        if self.at_dequeue {
            EcnMarkAt::Dequeue
        } else {
            EcnMarkAt::Enqueue
        }
    }

    fn fractions(self) -> EcnFractions {
        EcnFractions {
            kmin: f64::from(self.kmin) / 255.0,
            kmax: f64::from(self.kmax) / 255.0,
            pmax: f64::from(self.pmax) / 255.0,
        }
    }
}

#[derive(Arbitrary, Debug, Clone, Copy)]
struct Link {
    rate: Rate,
    delay: Delay,
    buffer: Buffer,
    in_flight: InFlight,
    ecn: Option<EcnChoice>,
}

impl Link {
    fn rate_bps(self) -> u64 {
        match self.rate {
            Rate::Unshaped => 0,
            Rate::Mbit1 => 1_000_000,
            Rate::Mbit10 => 10_000_000,
            Rate::Mbit100 => 100_000_000,
            Rate::Gbit1 => 1_000_000_000,
            Rate::Gbit10 => 10_000_000_000,
        }
    }

    fn delay_ns(self) -> u64 {
        match self.delay {
            Delay::Zero => 0,
            Delay::Us10 => 10 * US,
            Delay::Ms1 => MS,
            Delay::Ms5 => 5 * MS,
            Delay::Ms50 => 50 * MS,
        }
    }

    fn buffer_bytes(self) -> u64 {
        match self.buffer {
            Buffer::Zero => 0,
            Buffer::OneFrame => 1_514,
            Buffer::B5k => 5_000,
            Buffer::B20k => 20_000,
            Buffer::B150k => 150_000,
            Buffer::Mib1 => 1 << 20,
        }
    }

    fn egress(self) -> EgressConfig {
        let buffer = self.buffer_bytes();
        EgressConfig {
            rate_bps: self.rate_bps(),
            delay_ns: self.delay_ns(),
            buffer_bytes: buffer,
            ecn: self.ecn.map(|e| {
                let f = e.fractions();
                EcnConfig {
                    kmin_bytes: (buffer as f64 * f.kmin) as u64,
                    kmax_bytes: (buffer as f64 * f.kmax) as u64,
                    pmax: f.pmax,
                    mark_at: e.mark_at(),
                }
            }),
            max_in_flight: match self.in_flight {
                InFlight::One => 1,
                InFlight::Eight => 8,
                InFlight::K4 => 4096,
            },
        }
    }
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Pool {
    Frames16,
    Frames64,
    Frames512,
}

#[derive(Arbitrary, Debug)]
struct Setup {
    policy: PolicyChoice,
    links: [Link; PORTS],
    /// Ports whose peer MAC is configured; the others learn it from the
    /// first frame they receive (until then frames to them are dropped).
    peer_known: [bool; PORTS],
    /// Ports given their own addresses (`port_v4`, `port_v6`).
    port_addresses: [bool; PORTS],
    pool: Pool,
    /// Receive batch: 1 + this % 64.
    batch: u8,
    /// A flow cache of one bucket (8 flows) instead of 4096 flows.
    small_flow_cache: bool,
    /// Flows idle for 1 ms instead of 1 s may be re-routed.
    short_idle_timeout: bool,
    ecn: Option<EcnChoice>,
    seed: u64,
}

/// Where a built frame goes.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Dst {
    /// 10.0.2.x: the three paths.
    PathV4(u8),
    /// 10.0.1.2: port 0.
    HostA,
    /// Anything outside the routes' prefixes (made so when inside).
    OtherV4([u8; 4]),
    /// fd00:2::x: the three paths.
    PathV6(u16),
    /// fd00:1::x: no route.
    OtherV6(u16),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum L4 {
    Tcp { sport: u16, dport: u16 },
    Udp { sport: u16, dport: u16 },
    Rocev2 { sport: u16, dest_qp: u32, psn: u32 },
    IcmpEcho { ident: u16 },
    Other(u8),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Ttl {
    One,
    Two,
    Default,
    Any(u8),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum EcnBits {
    NotEct,
    Ect0,
    Ect1,
    Ce,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
struct FrameSpec {
    /// Low byte of the source host (10.0.1.x / fd00:1::x).
    src: u8,
    dst: Dst,
    l4: L4,
    ttl: Ttl,
    ecn: EcnBits,
    dscp: u8,
    payload_len: u16,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Step {
    Zero,
    Us1,
    Us100,
    Ms1,
    Ms10,
    S1,
    /// Microseconds.
    Us(u16),
}

impl Step {
    fn ns(self) -> u64 {
        match self {
            Step::Zero => 0,
            Step::Us1 => US,
            Step::Us100 => 100 * US,
            Step::Ms1 => MS,
            Step::Ms10 => 10 * MS,
            Step::S1 => 1_000 * MS,
            Step::Us(u) => u64::from(u) * US,
        }
    }
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Room {
    None,
    One,
    Four,
    Unlimited,
}

/// Route tables the switch may be given; every one keeps the paths'
/// prefixes on ports 1-3 and host A on port 0.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Table {
    /// As at start.
    Full,
    /// Fewer paths: ports 1 and 2 for IPv4, 2 and 3 for IPv6.
    Fewer,
    /// As at start plus 10.0.2.128/25 on port 3 only.
    MoreSpecific,
    /// No IPv4 path route (IPv4 to 10.0.2.0/24 has no route).
    NoV4Paths,
}

#[derive(Arbitrary, Debug)]
enum Op {
    /// `1 + copies % 16` copies of a frame built from `spec`, into `port`.
    Frames {
        port: u8,
        spec: FrameSpec,
        copies: u8,
    },
    /// Raw bytes into `port`.
    Raw {
        port: u8,
        bytes: Vec<u8>,
    },
    /// Advances the clock and polls.
    Poll(Step),
    /// Takes (and checks) what `port` transmitted.
    Take(u8),
    Carrier {
        port: u8,
        up: bool,
    },
    Admin {
        port: u8,
        up: bool,
    },
    TxRoom(Room),
    Drain,
    SetEcn(Option<EcnChoice>),
    SetLink {
        port: u8,
        link: Link,
    },
    SetPolicy(PolicyChoice),
    Routes(Table),
}

#[derive(Arbitrary, Debug)]
struct Input {
    setup: Setup,
    ops: Vec<Op>,
}

fn candidates(ports: &[(u8, u8)]) -> CandidateSet {
    let c: Vec<Candidate> = ports
        .iter()
        .map(|&(port, c_path)| Candidate {
            port,
            c_path,
            capacity_bps: if port == 0 {
                10_000_000_000
            } else {
                1_000_000_000 * u64::from(port)
            },
        })
        .collect();
    CandidateSet::new(&c).expect("at most 3 candidates")
}

fn routes(table: Table) -> Vec<Route> {
    let paths = [(1, 10), (2, 40), (3, 80)];
    let mut r = Vec::new();
    let v4_paths: &[(u8, u8)] = match table {
        Table::Fewer => &paths[..2],
        _ => &paths,
    };
    if !matches!(table, Table::NoV4Paths) {
        r.push(Route {
            prefix: "10.0.2.0/24".parse().expect("prefix"),
            candidates: candidates(v4_paths),
        });
    }
    r.push(Route {
        prefix: "fd00:2::/64".parse().expect("prefix"),
        candidates: candidates(if matches!(table, Table::Fewer) {
            &paths[1..]
        } else {
            &paths
        }),
    });
    r.push(Route {
        prefix: "10.0.1.2/32".parse().expect("prefix"),
        candidates: candidates(&[(0, 0)]),
    });
    if matches!(table, Table::MoreSpecific) {
        r.push(Route {
            prefix: "10.0.2.128/25".parse().expect("prefix"),
            candidates: candidates(&[(3, 5)]),
        });
    }
    r
}

/// The egress ports a forwarded frame may leave by: its destination's
/// route in any table above. Nothing else is routed.
fn allowed_ports(flow: &FlowTuple) -> &'static [usize] {
    match *flow {
        FlowTuple::V4 { dst, .. } if dst[..3] == [10, 0, 2] => &[1, 2, 3],
        FlowTuple::V4 { dst, .. } if dst == [10, 0, 1, 2] => &[0],
        FlowTuple::V6 { dst, .. } if dst[..8] == [0xfd, 0, 0, 2, 0, 0, 0, 0] => &[1, 2, 3],
        _ => &[],
    }
}

fn build(spec: &FrameSpec, tag: u16) -> Vec<u8> {
    let v6 = |prefix: [u8; 4], host: u16| {
        let mut a = [0u8; 16];
        a[..4].copy_from_slice(&prefix);
        a[14..].copy_from_slice(&host.to_be_bytes());
        a
    };
    let b = match spec.dst {
        Dst::PathV4(h) => FrameBuilder::ipv4([10, 0, 1, spec.src], [10, 0, 2, h]),
        Dst::HostA => FrameBuilder::ipv4([10, 0, 2, spec.src], [10, 0, 1, 2]),
        Dst::OtherV4(mut d) => {
            // Keep it off every route: 10.0.1.2 and 10.0.2.0/24 are routed.
            if d[..2] == [10, 0] && (d[2] == 2 || d == [10, 0, 1, 2]) {
                d[0] = 192;
            }
            FrameBuilder::ipv4([10, 0, 1, spec.src], d)
        }
        Dst::PathV6(h) => {
            FrameBuilder::ipv6(v6([0xfd, 0, 0, 1], spec.src.into()), v6([0xfd, 0, 0, 2], h))
        }
        Dst::OtherV6(h) => {
            FrameBuilder::ipv6(v6([0xfd, 0, 0, 2], spec.src.into()), v6([0xfd, 0, 0, 1], h))
        }
    };
    let b = b
        .ipv4_id(tag)
        .flow_label(tag.into())
        .macs(HOST_A, mac(0))
        .ttl(match spec.ttl {
            Ttl::One => 1,
            Ttl::Two => 2,
            Ttl::Default => 64,
            Ttl::Any(t) => t,
        })
        .dscp(spec.dscp)
        .ecn(match spec.ecn {
            EcnBits::NotEct => Ecn::NotEct,
            EcnBits::Ect0 => Ecn::Ect0,
            EcnBits::Ect1 => Ecn::Ect1,
            EcnBits::Ce => Ecn::Ce,
        })
        .payload(&vec![
            tag as u8;
            usize::from(spec.payload_len) % (MAX_PAYLOAD + 1)
        ]);
    let b = match spec.l4 {
        L4::Tcp { sport, dport } => b.tcp(sport, dport),
        L4::Udp { sport, dport } => b.udp(sport, dport),
        L4::Rocev2 {
            sport,
            dest_qp,
            psn,
        } => b.rocev2(
            sport,
            Bth {
                opcode: 0x04,
                pkey: 0xFFFF,
                dest_qp,
                ack_request: false,
                psn,
            },
        ),
        L4::IcmpEcho { ident } => b.icmp_echo(ident, tag),
        L4::Other(p) => b.protocol(p),
    };
    b.build()
}

fn ipv4_header_checksum(frame: &[u8]) -> u16 {
    let mut h = [0u8; 20];
    h.copy_from_slice(&frame[ETH..ETH + 20]);
    h[10] = 0;
    h[11] = 0;
    ipv4_checksum(&h)
}

/// Writes `tag` into a frame with a valid IP header (IPv4 identification,
/// with the header checksum recomputed, or IPv6 flow label): neither is
/// read by the switch nor changed by a rewrite.
fn set_tag(frame: &mut [u8], l3: L3, tag: u16) {
    match l3 {
        L3::V4 => {
            frame[V4_ID..V4_ID + 2].copy_from_slice(&tag.to_be_bytes());
            assert!(fix_ipv4_checksum(frame));
        }
        L3::V6 => {
            // Flow label: low nibble of byte 1 and bytes 2-3 of the header.
            frame[ETH + 1] &= 0xF0;
            frame[ETH + 2..ETH + 4].copy_from_slice(&tag.to_be_bytes());
        }
    }
}

/// The IP version of a frame whose IP header is valid: accepted, or
/// refused only because its TTL / hop limit expired (structural checks
/// come first). Such a frame is forwarded or answered with an ICMP error.
fn answerable(frame: &[u8]) -> Option<L3> {
    match parse(frame) {
        Ok(p) => Some(p.l3),
        Err(ParseError::TtlExpired) => match u16::from_be_bytes([frame[12], frame[13]]) {
            0x0800 => Some(L3::V4),
            _ => Some(L3::V6),
        },
        Err(_) => None,
    }
}

fn tag_of(frame: &[u8]) -> (L3, u16) {
    match u16::from_be_bytes([frame[12], frame[13]]) {
        0x0800 => (L3::V4, u16::from_be_bytes([frame[V4_ID], frame[V4_ID + 1]])),
        0x86DD => (L3::V6, u16::from_be_bytes([frame[ETH + 2], frame[ETH + 3]])),
        t => panic!("transmitted a frame with EtherType {t:#06x}"),
    }
}

struct Harness {
    sw: Switch<MemIo>,
    now: u64,
    pool: usize,
    /// Answerable frames injected and not yet seen on a port (forwarded,
    /// or quoted by an ICMP error), by tag, with their ingress port.
    pending: HashMap<(L3, u16), (Vec<u8>, usize)>,
    /// The addresses each port sends ICMP errors from, where known.
    icmp_from: [(Option<[u8; 4]>, Option<[u8; 16]>); PORTS],
    next_tag: u16,
    /// Frames `inject` took into a receive queue.
    injected: u64,
    /// Frames taken from the transmit queues.
    taken: u64,
    /// Transmitted frames this switch marked CE.
    seen_marked: u64,
    /// A port went admin down since the last poll: the frames it dropped
    /// may still wait in the switch to be handed back to the pool.
    release_pending: bool,
}

impl Harness {
    fn new(setup: &Setup) -> Self {
        let pool = match setup.pool {
            Pool::Frames16 => 16,
            Pool::Frames64 => 64,
            Pool::Frames512 => 512,
        };
        let ports = (0..PORTS)
            .map(|i| PortConfig {
                name: format!("p{i}"),
                mac: mac(i),
                peer_mac: setup.peer_known[i].then(|| if i == 0 { HOST_A } else { peer(i) }),
                egress: setup.links[i].egress(),
            })
            .collect();
        let config = SwitchConfig {
            ports,
            routes: routes(Table::Full),
            policy: setup.policy.policy(),
            congestion: CongestionParams::default(),
            flow_capacity: if setup.small_flow_cache { 8 } else { 4096 },
            flow_idle_timeout_ns: if setup.short_idle_timeout {
                MS
            } else {
                1_000 * MS
            },
            seed: setup.seed,
            batch_size: 1 + usize::from(setup.batch % 64),
            link_check_interval_ns: 100 * US,
            ecn: setup.ecn.map(EcnChoice::fractions),
            ecn_link_time: None,
            ecn_mark_at: setup.ecn.map_or(EcnMarkAt::Enqueue, EcnChoice::mark_at),
            drop_headroom: 1,
        };
        let mut sw = Switch::new(config, MemIo::new(PORTS, pool)).expect("valid test switch");
        let mut icmp_from = [(None, None); PORTS];
        for port in (0..PORTS).filter(|&p| setup.port_addresses[p]) {
            sw.set_port_addresses(
                port,
                &[IpAddr::from(port_v4(port)), IpAddr::from(port_v6(port))],
            );
        }
        // A port without addresses of its own sends from the first port's
        // that has some (without any, from a default not checked here).
        let first = (0..PORTS).find(|&p| setup.port_addresses[p]);
        for (port, from) in icmp_from.iter_mut().enumerate() {
            if let Some(a) = if setup.port_addresses[port] {
                Some(port)
            } else {
                first
            } {
                *from = (Some(port_v4(a)), Some(port_v6(a)));
            }
        }
        Harness {
            sw,
            icmp_from,
            now: 0,
            pool,
            pending: HashMap::new(),
            next_tag: 0,
            injected: 0,
            taken: 0,
            seen_marked: 0,
            release_pending: false,
        }
    }

    /// Injects a frame; remembers it under a fresh tag if it is
    /// answerable.
    fn inject(&mut self, port: usize, mut frame: Vec<u8>, tag: u16) {
        frame.truncate(FRAME_SIZE);
        let l3 = answerable(&frame);
        if let Some(l3) = l3 {
            let before = parse(&frame).map(|p| p.flow);
            set_tag(&mut frame, l3, tag);
            let after = parse(&frame).map(|p| p.flow);
            assert_eq!(after, before, "tagging changed how the frame parses");
            let fresh = self
                .pending
                .insert((l3, tag), (frame.clone(), port))
                .is_none();
            assert!(fresh, "tag {tag} reused");
        }
        if self.sw.io().inject(port, &frame) {
            self.injected += 1;
        } else if let Some(l3) = l3 {
            // The pool was empty: the frame never entered.
            self.pending.remove(&(l3, tag));
        }
    }

    /// Tags start at 1: the switch's own ICMP errors carry 0.
    fn fresh_tag(&mut self) -> u16 {
        self.next_tag = self.next_tag.wrapping_add(1);
        assert_ne!(self.next_tag, 0, "more frames than tags");
        self.next_tag
    }

    fn take(&mut self, port: usize) {
        let sent = self.sw.io().take_sent(port);
        self.taken += sent.len() as u64;
        let peer_mac = self.sw.port_reports()[port].peer_mac;
        for f in sent {
            self.check_sent(port, &f, peer_mac);
        }
    }

    /// A transmitted frame is its injected frame, forwarded once, or an
    /// ICMP error about one.
    fn check_sent(&mut self, port: usize, f: &[u8], peer_mac: Option<[u8; 6]>) {
        let key = tag_of(f);
        if key.1 == 0 {
            return self.check_icmp_error(port, f);
        }
        let Some((orig, _)) = self.pending.remove(&key) else {
            panic!("port {port} sent {key:?}, not injected or sent before: {f:02x?}");
        };
        let p = parse(&orig).expect("a forwarded frame was accepted");
        assert!(
            allowed_ports(&p.flow).contains(&port),
            "{:?} left by port {port}",
            p.flow
        );
        let peer_mac = peer_mac.expect("a port sent with no peer MAC");
        let mut want = orig.clone();
        want[0..6].copy_from_slice(&peer_mac);
        want[6..12].copy_from_slice(&mac(port));
        let marked = p.ecn.is_ecn_capable()
            && p.ecn != Ecn::Ce
            && match p.l3 {
                L3::V4 => f[V4_TOS] & 0b11 == 0b11,
                L3::V6 => (f[V6_TC_LOW] >> 4) & 0b11 == 0b11,
            };
        match p.l3 {
            L3::V4 => {
                want[V4_TTL] -= 1;
                if marked {
                    want[V4_TOS] |= 0b11;
                }
                // The switch updates the checksum incrementally; it must be
                // what a full recompute gives.
                let c = ipv4_header_checksum(&want);
                want[V4_CSUM..V4_CSUM + 2].copy_from_slice(&c.to_be_bytes());
            }
            L3::V6 => {
                want[V6_HOP] -= 1;
                if marked {
                    want[V6_TC_LOW] |= 0b11 << 4;
                }
            }
        }
        if marked {
            self.seen_marked += 1;
        }
        assert_eq!(f, &want[..], "port {port} sent a frame other than expected");
    }

    /// An ICMP error the switch made of a frame it could not forward.
    fn check_icmp_error(&mut self, port: usize, f: &[u8]) {
        let e = parse(f).expect("an ICMP error the switch sent parses");
        assert_eq!(e.ttl, 64);
        assert_ne!(ipv4_header_checksum_ok(f), Some(false));
        assert_eq!(l4_checksum_ok(f), Some(true), "ICMP checksum");
        // The error's headers (IP, then the ICMP type, code, checksum and 4
        // unused bytes), then the quote.
        let (proto, headers) = match e.l3 {
            L3::V4 => (1, ETH + 20 + 8),
            L3::V6 => (58, ETH + 40 + 8),
        };
        assert_eq!(e.flow.proto(), proto);
        let quote = &f[headers..];
        assert!(quote.len() >= 8, "an ICMP error quoting nothing");
        let tag = match e.l3 {
            L3::V4 => u16::from_be_bytes([quote[4], quote[5]]),
            L3::V6 => u16::from_be_bytes([quote[2], quote[3]]),
        };
        let Some((orig, in_port)) = self.pending.remove(&(e.l3, tag)) else {
            panic!("port {port} sent an ICMP error about a frame not injected or answered before: {f:02x?}");
        };
        assert_eq!(port, in_port, "an ICMP error left by another port");
        let expired = parse(&orig) == Err(ParseError::TtlExpired);
        let icmp = (f[headers - 8], f[headers - 7]);
        let ip = &orig[ETH..];
        let want_quote = match e.l3 {
            L3::V4 => {
                assert_eq!(icmp, if expired { (11, 0) } else { (3, 0) });
                let ihl = usize::from(ip[0] & 0x0F) * 4;
                let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
                total.min(ip.len()).min(576 - 28).max(ihl.min(ip.len()))
            }
            L3::V6 => {
                assert_eq!(icmp, if expired { (3, 0) } else { (1, 0) });
                let payload = usize::from(u16::from_be_bytes([ip[4], ip[5]]));
                (40 + payload).min(ip.len()).min(1280 - 48)
            }
        };
        assert_eq!(
            quote,
            &ip[..want_quote],
            "the quote is the frame as received"
        );
        assert_eq!(f[0..6], orig[6..12], "to the frame's sender MAC");
        assert_eq!(f[6..12], mac(port));
        match (e.flow, self.icmp_from[port]) {
            (FlowTuple::V4 { src, dst, .. }, (from, _)) => {
                assert_eq!(dst[..], ip[12..16], "to the frame's source");
                if let Some(from) = from {
                    assert_eq!(src, from, "from the port's address");
                }
            }
            (FlowTuple::V6 { src, dst, .. }, (_, from)) => {
                assert_eq!(dst[..], ip[8..24], "to the frame's source");
                if let Some(from) = from {
                    assert_eq!(src, from, "from the port's address");
                }
            }
        }
    }

    fn poll(&mut self, step: u64) {
        self.now += step;
        self.sw.poll(self.now);
        self.release_pending = false;
    }

    /// Frames held by the egresses (port buffers and delay lines).
    fn held(&self) -> u64 {
        self.sw
            .port_reports()
            .iter()
            .map(|r| (r.queue_frames + r.in_flight) as u64)
            .sum()
    }

    /// Every frame and every pool buffer is accounted for.
    fn check_accounting(&self) {
        let c = self.sw.counters();
        let reports = self.sw.port_reports();
        let rx = c.get(Counter::RxFrames);
        let tx = c.get(Counter::TxFrames);
        let held = self.held();
        // An ICMP error reuses the buffer of a frame counted as a drop.
        assert_eq!(
            rx + c.get(Counter::IcmpSent),
            tx + c.total_drops() + held,
            "frames lost or made up: held {held}, {c:?}"
        );
        assert!(rx <= self.injected, "received more than injected");
        assert_eq!(
            c.dropped(DropReason::TxRingFull),
            0,
            "the switch gave a ring more than its room"
        );
        let mut flushed = 0;
        for (port, r) in reports.iter().enumerate() {
            let e = r.egress;
            let pc = c.port(port);
            assert_eq!(
                e.enqueued_frames,
                e.transmitted_frames
                    + e.dropped_emulation_overflow
                    + e.flushed
                    + (r.queue_frames + r.in_flight) as u64,
                "egress of port {port} lost frames: {e:?}"
            );
            assert_eq!(pc.get(Counter::TxFrames), e.transmitted_frames);
            // The egress also counts the ICMP errors it refuses; the switch
            // does not (their frame is counted as dropped already).
            assert!(pc.dropped(DropReason::QueueFull) <= e.dropped_queue_full);
            assert_eq!(
                pc.dropped(DropReason::EmulationOverflow),
                e.dropped_emulation_overflow
            );
            assert!(pc.get(Counter::CeMarked) <= e.ce_marked);
            flushed += e.flushed;
        }
        assert_eq!(
            flushed,
            c.dropped(DropReason::PortDown) + c.dropped(DropReason::Shutdown),
            "flushed frames are port-down or shutdown drops"
        );
        assert!(self.seen_marked <= c.get(Counter::CeMarked));
        if !self.release_pending {
            let waiting_rx = self.injected - rx;
            let untaken = tx - self.taken;
            assert_eq!(
                self.sw.io_ref().free_frames() as u64 + waiting_rx + held + untaken,
                self.pool as u64,
                "pool buffers leaked or freed twice"
            );
        }
    }

    fn run(&mut self, op: &Op) {
        match *op {
            Op::Frames {
                port,
                ref spec,
                copies,
            } => {
                for _ in 0..=usize::from(copies) % MAX_BURST {
                    let tag = self.fresh_tag();
                    let frame = build(spec, tag);
                    self.inject(usize::from(port) % PORTS, frame, tag);
                }
            }
            Op::Raw { port, ref bytes } => {
                let tag = self.fresh_tag();
                self.inject(usize::from(port) % PORTS, bytes.clone(), tag);
            }
            Op::Poll(step) => self.poll(step.ns()),
            Op::Take(port) => self.take(usize::from(port) % PORTS),
            Op::Carrier { port, up } => self.sw.io().set_link(usize::from(port) % PORTS, up),
            Op::Admin { port, up } => {
                self.sw.set_admin(usize::from(port) % PORTS, up);
                self.release_pending = true;
            }
            Op::TxRoom(room) => self.sw.io().set_tx_room(match room {
                Room::None => 0,
                Room::One => 1,
                Room::Four => 4,
                Room::Unlimited => usize::MAX,
            }),
            Op::Drain => {
                self.sw.drain();
                self.release_pending = false;
                assert_eq!(self.held(), 0, "drain left frames in an egress");
            }
            Op::SetEcn(e) => self.sw.set_ecn(e.map(EcnChoice::fractions)),
            Op::SetLink { port, link } => self.sw.set_link(
                usize::from(port) % PORTS,
                link.rate_bps(),
                link.delay_ns(),
                link.buffer_bytes(),
            ),
            Op::SetPolicy(p) => self.sw.set_policy(p.policy()),
            Op::Routes(t) => {
                self.sw.replace_routes(routes(t)).expect("valid table");
            }
        }
    }

    /// Runs the switch until it has received every injected frame and
    /// holds none, then drains it and checks the final accounting.
    fn finish(&mut self) {
        self.sw.io().set_tx_room(usize::MAX);
        // First receive what still waits, without letting time pass: a step
        // of more than 110 ms costs up to 1100 congestion samples per port
        // per poll, most of a run's time if paid once per receive batch.
        // Each poll receives at least one frame per port.
        let mut polls = 0;
        while self.injected > self.sw.counters().get(Counter::RxFrames) {
            assert!(polls <= self.pool, "the switch stops receiving");
            self.poll(0);
            self.check_accounting();
            polls += 1;
        }
        // Then one poll long after every held frame's departure and release
        // (a port buffer empties in at most 8.4 s, plus at most 50 ms of
        // delay), with unlimited ring room, hands every one of them out.
        self.poll(SETTLE_STEP_NS);
        self.check_accounting();
        assert_eq!(
            self.held(),
            0,
            "frames still held long after their departure: {:?}",
            self.sw.port_reports()
        );
        self.sw.drain();
        self.release_pending = false;
        self.check_accounting();
        let c = self.sw.counters();
        assert_eq!(
            c.get(Counter::RxFrames) + c.get(Counter::IcmpSent),
            c.get(Counter::TxFrames) + c.total_drops(),
            "{c:?}"
        );
        let untaken = c.get(Counter::TxFrames) - self.taken;
        assert_eq!(
            self.sw.io_ref().free_frames() as u64,
            self.pool as u64 - untaken
        );
        for port in 0..PORTS {
            self.take(port);
        }
        assert_eq!(self.sw.io_ref().free_frames(), self.pool);
    }
}

fuzz_target!(|input: Input| {
    let mut h = Harness::new(&input.setup);
    for op in input.ops.iter().take(MAX_OPS) {
        h.run(op);
        h.check_accounting();
    }
    h.finish();
});

//! NDP hosts ([`lcmp_engine::ndp_host`]) through a rotor network of 4
//! ToRs x 2 rotors on the virtual clock ([`lcmp_engine::rotor`]) whose
//! ToRs trim (`lcmp-switch rotor --trim-packets K`): an incast that
//! overflows the receiver's downlink and the uplinks' K-frame queues
//! still delivers every byte exactly once, the trims show in the ToRs'
//! counters, each one answered by a NACK and a retransmission, and the
//! ToRs never hold more than their queues allow.

use lcmp_engine::rotor::{RotorNdp, RotorNdpSender, RotorNet, RotorRun};
use lcmp_switch::rotor_tor::TrimSettings;
use lcmp_topology::rotor;
use lcmp_topology::rotor_net::{RotorNetwork, RotorRouting};
use lcmp_traffic::flows::{Arrivals, FlowSource, ScheduledFlow};
use lcmp_traffic::ndp::NdpParams;
use lcmp_traffic::record::FlowStatus;

const US: u64 = 1_000;
const MS: u64 = 1_000_000;
/// K: frames a next hop's (and a downlink's) data queue holds.
const K: u32 = 4;
/// Every flow, bytes: 100 full packets of the default 1,442-byte payload
/// (1,500-byte frames less the 58 bytes of headers).
const FLOW: u64 = 144_200;

/// 4 ToRs x 2 rotors, RotorNet's complete graph with Valiant routing
/// (so frames also cross intermediate ToRs), 10 Gbit/s, 10 us slots with
/// 1 us reconfiguration, two hosts per ToR.
fn network() -> RotorNetwork {
    let mut n = RotorNetwork::from_schedule(&rotor::complete(4, 2).unwrap(), 10 * US, US);
    n.routing = Some(RotorRouting::Valiant);
    // Memory links have no delay: nothing is in flight at a slot's end.
    n.tx_guard_ns = 0;
    n.rate_bps = 10_000_000_000;
    // Room for every next hop's queue pair, so K binds, not the buffer:
    // 3 next hops x (4 data frames + 6,000 priority bytes).
    n.buffer_bytes = Some(3 * (4 * 1500 + 6000));
    n.hosts_per_tor = 2;
    n
}

/// Host (t, 0) for t = 1, 2, 3 each sends two flows to host (0, 0) at
/// time 0 and 5 us: six senders' initial windows (20 packets each) at
/// once into one 10 Gbit/s downlink of K frames.
fn incast() -> RotorNdp {
    let senders = (1..4)
        .map(|t| RotorNdpSender {
            tor: t,
            host: 0,
            flows: FlowSource::new(
                Arrivals::Schedule(
                    (0..2)
                        .map(|k| ScheduledFlow {
                            id: u64::from(t * 10 + k),
                            dst: 0,
                            size: FLOW,
                            start_ns: u64::from(k) * 5 * US,
                        })
                        .collect(),
                ),
                0,
                0,
                0.0,
                1.0,
                1,
            ),
            dsts: vec![(0, 0)],
        })
        .collect();
    RotorNdp {
        params: NdpParams::default(),
        senders,
    }
}

fn build(trim: Option<TrimSettings>) -> RotorNet {
    RotorNet::build(RotorRun {
        network: network(),
        traffic: Vec::new(),
        nic_rate_bps: None,
        listen_port: 0,
        window_ns: 0..0,
        ndp: Some(incast()),
        trim,
    })
    .unwrap()
}

/// The ToRs' counter `name` (or drops for reason `name`), summed.
fn tor_counter(rn: &mut RotorNet, name: &str) -> u64 {
    rn.switch_status()
        .unwrap()
        .iter()
        .filter(|(n, _)| n.starts_with("tor"))
        .map(|(_, s)| {
            s.counters
                .get(name)
                .or(s.drops.get(name))
                .copied()
                .unwrap_or(0)
        })
        .sum()
}

#[test]
fn an_incast_over_trimming_tors_delivers_every_byte_once() {
    let mut rn = build(Some(TrimSettings::new(K)));
    // Bounds on what a ToR may hold at any instant: its shared buffer
    // (3 x 12,000 bytes) plus two downlinks of 4 x 1,500 data and 6,000
    // priority bytes each: 36,000 + 24,000 = 60,000.
    let mut peak = 0;
    let mut t = 0;
    while t < 20 * MS {
        t += US;
        rn.run_until(t);
        for tor in 0..4 {
            peak = peak.max(rn.tor_queued_bytes(tor).unwrap());
        }
    }
    assert!(peak <= 60_000, "a ToR held {peak} bytes");
    assert!(peak > 0);

    // Six flows of 144,200 bytes: 865,200 bytes, each once.
    let rx = rn.ndp_host(0, 0).unwrap().receiver().stats;
    assert_eq!(rx.bytes, 6 * FLOW);
    assert_eq!(rx.flows_completed, 6);
    let mut retransmissions = 0;
    let mut nacks = 0;
    for t in 1..4 {
        let h = rn.ndp_host(t, 0).unwrap();
        assert!(h.done(), "host {t}x0 has flows left");
        let recs = h.records();
        assert_eq!(recs.len(), 2);
        for r in recs {
            assert_eq!(r.status, FlowStatus::Ok, "{r:?}");
            assert_eq!(r.size_bytes, FLOW);
        }
        let s = h.sender().stats();
        retransmissions += s.retransmissions;
        nacks += s.nacks;
        // 100 packets a flow, each sent once plus its retransmissions.
        assert_eq!(s.packets, 200 + s.retransmissions);
    }
    // The incast overflowed K: packets were trimmed, each trimmed header
    // reached the receiver, which NACKed it, and the sender resent it
    // (no timeout fired: every loss was a trim).
    let trimmed = tor_counter(&mut rn, "trimmed") + tor_counter(&mut rn, "trimmed_downlink");
    assert!(trimmed > 0, "nothing was trimmed");
    assert_eq!(rx.trimmed, trimmed);
    assert_eq!(rx.nacks_sent, trimmed);
    assert_eq!(nacks, trimmed);
    assert_eq!(retransmissions, trimmed);
    // The other hosts received nothing.
    assert_eq!(rn.ndp_host(0, 1).unwrap().receiver().stats.bytes, 0);
    rn.finish().unwrap();
}

/// Without trimming the same incast overflows the ToRs' queues: frames
/// are dropped, not trimmed, and the flows recover only by timeouts
/// (the contrast that makes trimming worth having). Every byte still
/// arrives once.
#[test]
fn without_trimming_losses_wait_for_timeouts() {
    let mut rn = build(None);
    rn.run_until(200 * MS);
    let rx = rn.ndp_host(0, 0).unwrap().receiver().stats;
    assert_eq!(rx.trimmed, 0);
    assert_eq!(rx.bytes, 6 * FLOW);
    let timeouts: u64 = (1..4)
        .map(|t| rn.ndp_host(t, 0).unwrap().sender().stats().timeouts)
        .sum();
    let dropped = tor_counter(&mut rn, "queue_full");
    assert!(dropped > 0, "nothing was dropped");
    assert!(timeouts > 0, "no timeout fired");
    rn.finish().unwrap();
}

/// Hosts are UDP or NDP, not both; a sender towards a host the network
/// lacks is refused in one line.
#[test]
fn mixed_or_misplaced_hosts_are_refused_in_one_line() {
    let mut ndp = incast();
    ndp.senders[0].dsts = vec![(0, 7)];
    let err = RotorNet::build(RotorRun {
        network: network(),
        traffic: Vec::new(),
        nic_rate_bps: None,
        listen_port: 0,
        window_ns: 0..0,
        ndp: Some(ndp),
        trim: None,
    })
    .err()
    .unwrap();
    assert!(err.contains("sends to (0, 7)"), "{err}");
    assert!(!err.contains('\n'));
}

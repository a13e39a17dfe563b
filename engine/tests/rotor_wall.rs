//! A rotor network of NDP hosts ([`lcmp_engine::rotor`]) on the wall clock
//! ([`RotorNet::pace_with_wall_clock`]): 4 ToRs x 2 rotors whose ToRs trim
//! (as in `rotor_ndp.rs`), slowed down to 8 Mbit/s links and 4 ms slots so
//! that a loaded 2-core machine keeps up. Every flow completes and every
//! byte arrives exactly once, as on the virtual clock (run alongside for
//! the cross-check), while every event of the run waited for its time on
//! the monotonic clock: the ToRs' slots and the hosts ran off real time.

use std::time::Instant;

use lcmp_engine::rotor::{RotorNdp, RotorNdpSender, RotorNet, RotorRun};
use lcmp_switch::rotor_tor::TrimSettings;
use lcmp_topology::rotor;
use lcmp_topology::rotor_net::RotorNetwork;
use lcmp_traffic::flows::{Arrivals, FlowSource, ScheduledFlow};
use lcmp_traffic::ndp::{NdpParams, DEFAULT_PAYLOAD};
use lcmp_traffic::record::FlowStatus;

const US: u64 = 1_000;
const MS: u64 = 1_000_000;
/// K: frames a next hop's (and a downlink's) data queue holds.
const K: u32 = 4;
/// Every flow, bytes: 10 full packets of the default 1,442-byte payload.
const FLOW: u64 = 10 * DEFAULT_PAYLOAD as u64;
/// Flows each sender starts, one every [`FLOW_EVERY_NS`] from 0.
const FLOWS: u32 = 4;
/// The time between a sender's flow starts.
const FLOW_EVERY_NS: u64 = 250 * MS;
/// A run that has not finished its flows by then fails.
const LIMIT_NS: u64 = 3_000 * MS;

/// 4 ToRs x 2 rotors, RotorNet's complete graph (direct routing), 8 Mbit/s
/// (a 1,500-byte frame takes 1.5 ms), 4 ms slots with 200 us of
/// reconfiguration (two full frames an uplink a slot), two hosts per ToR.
fn network() -> RotorNetwork {
    let mut n = RotorNetwork::from_schedule(&rotor::complete(4, 2).unwrap(), 4 * MS, 200 * US);
    // Memory links have no delay: nothing is in flight at a slot's end.
    n.tx_guard_ns = 0;
    n.rate_bps = 8_000_000;
    // Room for every next hop's queue pair, as in rotor_ndp.rs: 3 next
    // hops x (4 data frames + 6,000 priority bytes).
    n.buffer_bytes = Some(3 * (4 * 1500 + 6000));
    n.hosts_per_tor = 2;
    n
}

/// Host (t, 0) of every ToR t sends a flow every 250 ms from 0 to 750 ms,
/// alternately to host (t + 1 mod 4, 1) and host (t + 2 mod 4, 1): each
/// host (x, 1) receives four flows (two from ToR x - 1, two from ToR
/// x - 2), hosts (x, 0) none.
fn flows() -> RotorNdp {
    let senders = (0..4)
        .map(|t| RotorNdpSender {
            tor: t,
            host: 0,
            flows: FlowSource::new(
                Arrivals::Schedule(
                    (0..FLOWS)
                        .map(|k| ScheduledFlow {
                            id: u64::from(t * 10 + k),
                            dst: (k % 2) as usize,
                            size: FLOW,
                            start_ns: u64::from(k) * FLOW_EVERY_NS,
                        })
                        .collect(),
                ),
                0,
                0,
                0.0,
                1.0,
                1,
            ),
            dsts: vec![((t + 1) % 4, 1), ((t + 2) % 4, 1)],
        })
        .collect();
    RotorNdp {
        params: NdpParams {
            // A frame may wait for its circuit a few slots, and a trimmed
            // one is answered by a NACK: the timeout is for real losses
            // only (1 ms, the default, would fire on every packet here).
            min_rto_ns: 500 * MS,
            ..NdpParams::default()
        },
        senders,
    }
}

fn build() -> RotorNet {
    RotorNet::build(RotorRun {
        network: network(),
        traffic: Vec::new(),
        nic_rate_bps: None,
        listen_port: 0,
        window_ns: 0..0,
        ndp: Some(flows()),
        trim: Some(TrimSettings::new(K)),
    })
    .unwrap()
}

/// Runs `rn` in 10 ms steps until every sender has finished its flows.
fn run_to_completion(rn: &mut RotorNet) {
    let mut t = 0;
    while !(0..4).all(|tor| rn.ndp_host(tor, 0).unwrap().done()) {
        assert!(t < LIMIT_NS, "flows left at {} ms", t / MS);
        t += 10 * MS;
        rn.run_until(t);
    }
}

/// Every flow completed and every byte arrived once, where it was sent.
fn check_delivery(rn: &mut RotorNet) {
    for t in 0..4 {
        let h = rn.ndp_host(t, 0).unwrap();
        let recs = h.records();
        assert_eq!(recs.len(), 4, "host {t}x0");
        for r in recs {
            assert_eq!(r.status, FlowStatus::Ok, "{r:?}");
            assert_eq!(r.size_bytes, FLOW);
        }
        // 4 flows x 10 packets, each sent once plus its retransmissions.
        let s = h.sender().stats();
        assert_eq!(s.packets, 40 + s.retransmissions, "host {t}x0");
        // Four flows of 14,420 bytes into each host (t, 1) (57,680
        // bytes), each once; nothing into the senders.
        let rx = rn.ndp_host(t, 1).unwrap().receiver().stats;
        assert_eq!(rx.bytes, 4 * FLOW, "host {t}x1");
        assert_eq!(rx.flows_completed, 4, "host {t}x1");
        assert_eq!(rn.ndp_host(t, 0).unwrap().receiver().stats.bytes, 0);
    }
}

#[test]
fn on_the_virtual_clock_every_flow_completes() {
    // The reference the wall-clock run is checked against.
    let mut rn = build();
    run_to_completion(&mut rn);
    assert!(!rn.is_paced());
    assert_eq!(rn.lateness(), None);
    check_delivery(&mut rn);
    rn.finish().unwrap();
}

#[test]
fn on_the_wall_clock_every_flow_completes_and_every_byte_arrives_once() {
    let mut rn = build();
    rn.pace_with_wall_clock();
    let before = Instant::now();
    run_to_completion(&mut rn);
    // Slot 0 started at or after `before`, so the run took at least its
    // span of real time (a lower bound, not a timing): the last flows
    // alone start at 750 ms.
    let span = rn.now_ns();
    assert!(span >= 3 * FLOW_EVERY_NS, "ended at {span} ns");
    assert!(before.elapsed().as_nanos() >= u128::from(span));
    // Every poll waited for its time on the wall clock (no outside
    // events here) and was counted.
    let late = rn.lateness().unwrap();
    assert_eq!(late.events, rn.polls());
    assert!(late.late <= late.events);
    eprintln!(
        "wall clock: {} events over {} ms, {} late by more than 100 us, mean {} us, max {} us; \
         {} retransmissions",
        late.events,
        span / MS,
        late.late,
        late.mean_ns() / US,
        late.max_ns / US,
        (0..4)
            .map(|t| rn.ndp_host(t, 0).unwrap().sender().stats().retransmissions)
            .sum::<u64>()
    );
    check_delivery(&mut rn);
    rn.finish().unwrap();
}

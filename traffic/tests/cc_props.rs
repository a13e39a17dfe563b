//! Properties of every congestion control over arbitrary feedback (issue
//! 28): the rate stays finite within [min rate, line rate] and the window
//! within [1, win], whatever the ACKs carry (zero or huge RTTs, huge
//! queues, zero link rates, counters going back, sequences out of order).

use lcmp_topology::Scaling;
use lcmp_traffic::rocev2::cc::{Ack, Cc, CcParams, CongestionControl, QpSetup};
use lcmp_traffic::rocev2::hpcc::{HpccParams, IntHop, MAX_HOPS};
use proptest::prelude::*;

/// Values with the edges weighted in.
fn edgy() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(1u64),
        Just(u64::MAX),
        0u64..2_000_000,
        any::<u64>(),
    ]
}

fn hop() -> impl Strategy<Value = IntHop> {
    (
        edgy(),
        edgy(),
        edgy(),
        prop_oneof![Just(0u64), Just(25_000_000_000u64), edgy()],
    )
        .prop_map(|(qlen_bytes, tx_bytes, ts_ns, link_rate_bps)| IntHop {
            qlen_bytes,
            tx_bytes,
            ts_ns,
            link_rate_bps,
        })
}

#[derive(Debug, Clone)]
struct Event {
    dt_ns: u64,
    ack_seq: u64,
    snd_nxt: u64,
    ecn: bool,
    rtt_ns: Option<u64>,
    hops: Vec<IntHop>,
    cnp: bool,
}

fn event() -> impl Strategy<Value = Event> {
    (
        edgy(),
        edgy(),
        edgy(),
        any::<bool>(),
        proptest::option::of(edgy()),
        // Mostly short paths; sometimes at and past the most hops.
        prop_oneof![
            8 => proptest::collection::vec(hop(), 0..4),
            1 => proptest::collection::vec(hop(), MAX_HOPS..=MAX_HOPS + 1),
        ],
        any::<bool>(),
    )
        .prop_map(|(dt_ns, ack_seq, snd_nxt, ecn, rtt_ns, hops, cnp)| Event {
            dt_ns: dt_ns % 10_000_000,
            ack_seq,
            snd_nxt,
            ecn,
            rtt_ns,
            hops,
            cnp,
        })
}

/// A plausible ACK stream: sequences rising one packet at a time, hops
/// advancing in time and bytes, so the updates really run.
fn steady(n: usize) -> impl Strategy<Value = Vec<Event>> {
    proptest::collection::vec(
        (
            1u64..20_000,
            0u64..200_000,
            0u64..2_000_000,
            any::<bool>(),
            0u64..5,
        ),
        1..n,
    )
    .prop_map(|steps| {
        let (mut t, mut seq, mut tx) = (1_000_000u64, 0u64, 0u64);
        steps
            .into_iter()
            .map(|(dt, bytes, qlen, ecn, hops)| {
                t += dt;
                seq += 1000;
                tx += bytes;
                let h = IntHop {
                    qlen_bytes: qlen,
                    tx_bytes: tx,
                    ts_ns: t,
                    link_rate_bps: 100_000_000_000,
                };
                Event {
                    dt_ns: dt,
                    ack_seq: seq,
                    snd_nxt: seq + 20_000,
                    ecn,
                    rtt_ns: Some(dt * 10),
                    hops: vec![h; hops as usize],
                    cnp: false,
                }
            })
            .collect()
    })
}

fn params() -> impl Strategy<Value = CcParams> {
    let base = prop_oneof![
        Just(CcParams::default_for(CongestionControl::Dcqcn)),
        Just(CcParams::default_for(CongestionControl::Hpcc)),
        Just(CcParams::default_for(CongestionControl::Timely)),
        Just(CcParams::default_for(CongestionControl::Dctcp)),
        Just(CcParams::Hpcc(HpccParams {
            multi_rate: true,
            mi_thresh: 5,
            ..HpccParams::default()
        })),
        Just(CcParams::Hpcc(HpccParams {
            sample_feedback: true,
            fast_react: false,
            ..HpccParams::default()
        })),
    ];
    (base, prop_oneof![Just(1.0f64), Just(1000.0), Just(1e4)]).prop_map(|(p, rate)| {
        p.emulated(&Scaling {
            rate,
            buffer: rate,
            size: 1.0,
            time: if rate > 1.0 { 10.0 } else { 1.0 },
        })
    })
}

fn qp() -> impl Strategy<Value = QpSetup> {
    (
        edgy(),
        edgy(),
        any::<bool>(),
        prop_oneof![Just(0u32), Just(1000u32), any::<u32>()],
    )
        .prop_map(|(win_bytes, base_rtt_ns, var_win, mtu)| QpSetup {
            win_bytes,
            base_rtt_ns,
            var_win,
            mtu,
        })
}

fn run(p: &CcParams, qp: &QpSetup, events: &[Event]) -> Result<(), TestCaseError> {
    prop_assert!(p.validate().is_ok(), "{:?}", p.validate());
    let mut cc = Cc::new(p, qp);
    let mut now = 0u64;
    for e in events {
        now = now.saturating_add(e.dt_ns);
        let ack = Ack {
            now_ns: now,
            ack_seq: e.ack_seq,
            snd_nxt: e.snd_nxt,
            ecn_echo: e.ecn,
            rtt_ns: e.rtt_ns,
            int: &e.hops,
        };
        cc.on_ack(p, &ack);
        if e.cnp {
            cc.on_cnp(p, now);
        }
        cc.advance(p, now);
        let r = cc.rate();
        prop_assert!(
            r.is_finite() && r >= p.min_rate() && r <= p.line_rate(),
            "{:?}: rate {} outside [{}, {}]",
            p.kind(),
            r,
            p.min_rate(),
            p.line_rate()
        );
        if let Some(w) = qp.window(r, p.line_rate()) {
            prop_assert!(
                w >= 1 && w <= qp.win_bytes,
                "window {w} of {}",
                qp.win_bytes
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn arbitrary_feedback_keeps_rates_bounded(
        p in params(),
        qp in qp(),
        events in proptest::collection::vec(event(), 1..40),
    ) {
        run(&p, &qp, &events)?;
    }

    #[test]
    fn steady_feedback_keeps_rates_bounded(
        p in params(),
        events in steady(200),
    ) {
        let qp = QpSetup { win_bytes: 100_000, base_rtt_ns: 8_000, var_win: true, mtu: 1000 };
        run(&p, &qp, &events)?;
    }
}

/// The edges named in the issue, one by one, on every CC.
#[test]
fn extreme_single_inputs() {
    let qp = QpSetup {
        win_bytes: 0,
        base_rtt_ns: 0,
        var_win: true,
        mtu: 0,
    };
    let huge = IntHop {
        qlen_bytes: u64::MAX,
        tx_bytes: u64::MAX,
        ts_ns: u64::MAX,
        link_rate_bps: 1,
    };
    let zero_rate = IntHop {
        link_rate_bps: 0,
        ..huge
    };
    for cc in CongestionControl::ALL {
        let p = CcParams::default_for(cc);
        let mut s = Cc::new(&p, &qp);
        let acks = [
            (1, 0, Some(0), vec![IntHop::default()]),
            (u64::MAX, u64::MAX, Some(u64::MAX), vec![huge]),
            (u64::MAX, 0, Some(0), vec![zero_rate, huge]),
        ];
        for (i, (ack_seq, snd_nxt, rtt_ns, hops)) in acks.iter().enumerate() {
            s.on_ack(
                &p,
                &Ack {
                    now_ns: i as u64 * (u64::MAX / 8),
                    ack_seq: *ack_seq,
                    snd_nxt: *snd_nxt,
                    ecn_echo: true,
                    rtt_ns: *rtt_ns,
                    int: hops,
                },
            );
            // Half of u64's range (292 years): DCQCN's saturating timers
            // would spin at u64::MAX itself (see the report).
            s.advance(&p, u64::MAX / 2);
            let r = s.rate();
            assert!(
                r.is_finite() && r >= p.min_rate() && r <= p.line_rate(),
                "{cc}: {r}"
            );
        }
    }
}

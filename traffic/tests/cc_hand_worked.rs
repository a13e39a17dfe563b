//! HPCC, TIMELY and DCTCP as the simulator's `rdma-hw.cc` runs them
//! (issue 28): rates, windows, alpha after given feedback sequences, each
//! worked by hand in the comments.

use lcmp_traffic::rocev2::cc::QpSetup;
use lcmp_traffic::rocev2::dctcp::{Dctcp, DctcpParams};
use lcmp_traffic::rocev2::hpcc::{Hpcc, HpccParams, IntHop, MAX_HOPS};
use lcmp_traffic::rocev2::timely::{Timely, TimelyParams};

const G100: f64 = 100e9;
const G25: u64 = 25_000_000_000;
const L100: u64 = 100_000_000_000;

fn close(got: f64, want: f64, what: &str) {
    assert!(
        (got - want).abs() <= want.abs() * 1e-12,
        "{what}: got {got}, want {want}"
    );
}

/// A 100G host, a window of 100 KB (the BDP at 100G of the 8 us base RTT:
/// 100e9 * 8e-6 / 8), the window following the rate, 1000-byte packets.
const QP: QpSetup = QpSetup {
    win_bytes: 100_000,
    base_rtt_ns: 8_000,
    var_win: true,
    mtu: 1000,
};

fn hop(ts_ns: u64, tx_bytes: u64, qlen_bytes: u64, link_rate_bps: u64) -> IntHop {
    IntHop {
        qlen_bytes,
        tx_bytes,
        ts_ns,
        link_rate_bps,
    }
}

/// The artifact's HPCC (single rate, MI_THRESH 0, fast reaction) over a
/// 100G hop A and a 25G hop B.
#[test]
fn hpcc_full_updates_and_fast_reactions() {
    let p = HpccParams::default();
    let mut h = Hpcc::new(&p, &QP);
    assert_eq!((h.rate(), h.utilization()), (G100, 1.0));

    // E1, the first ACK: the hops are stored, lastUpdateSeq = snd_nxt =
    // 20_000; nothing else changes.
    h.on_ack(
        &p,
        1_000,
        20_000,
        &[hop(1_000_000, 0, 0, L100), hop(1_000_500, 0, 0, G25)],
    );
    assert_eq!((h.rate(), h.updates()), (G100, (0, 0)));

    // E2, ack 2_000 <= 20_000: a fast reaction. tau = 2 us on both.
    // A: 25_000 B * 8 / 2e-6 s = 100G -> 100G / 100G = 1.0; queue term
    //    min(40_000, 0) = 0 -> u_A = 1.0.
    // B: 3_125 * 8 / 2e-6 = 12.5G / 25G = 0.5 -> u_B = 0.5.
    // U' = 1.0, dt = 2_000: U = (1.0 * (8000 - 2000) + 1.0 * 2000) / 8000 = 1.
    // c = 1 / 0.95 >= 1: R = 100G / c + 50M = 95G + 50M = 95.05G. Paced at
    // R; Rc (committed) stays 100G.
    h.on_ack(
        &p,
        2_000,
        21_000,
        &[
            hop(1_002_000, 25_000, 40_000, L100),
            hop(1_002_500, 3_125, 0, G25),
        ],
    );
    close(h.rate(), 95.05e9, "E2 rate");
    assert_eq!(h.committed_rate(), G100);
    assert_eq!(h.updates(), (0, 1));
    // Window: 100_000 * 95.05G / 100G = 95_050 bytes.
    assert_eq!(QP.window(h.rate(), p.line_rate), Some(95_050));

    // E3, ack 21_000 > 20_000: a full update. tau = 4 us.
    // A: 50_000 B * 8 / 4e-6 = 100G -> 1.0; queue min(50_000, 40_000) =
    //    40_000 * 100G / 100G / 100_000 = 0.4 -> u_A = 1.4.
    // B: 12_500 * 8 / 4e-6 = 25G / 25G = 1.0; queue 0 -> u_B = 1.0.
    // U' = 1.4, dt = 4_000: U = (1.0 * 4000 + 1.4 * 4000) / 8000 = 1.2.
    // c = 1.2 / 0.95: R = 100G (Rc, not the paced 95.05G) * 0.95 / 1.2 +
    // 50M = 79.1666...G + 50M = 79.21666...G, committed; stage 0.
    h.on_ack(
        &p,
        21_000,
        45_000,
        &[
            hop(1_006_000, 75_000, 50_000, L100),
            hop(1_006_500, 15_625, 0, G25),
        ],
    );
    close(h.utilization(), 1.2, "E3 U");
    close(h.rate(), 79_216_666_666.666_67, "E3 rate");
    assert_eq!(h.committed_rate(), h.rate());
    assert_eq!((h.inc_stage(), h.updates()), (0, (1, 1)));
    // 100_000 * 79_216_666_666 / 100_000_000_000 = 79_216.67 -> 79_216.
    assert_eq!(QP.window(h.rate(), p.line_rate), Some(79_216));

    // E4, ack 30_000 <= 45_000: fast. tau = 8 us = T.
    // A: 40_000 * 8 / 8e-6 = 40G -> 0.4; queue min(10_000, 50_000) =
    //    10_000 / 100_000 = 0.1 -> u_A = 0.5.
    // B: 10_000 * 8 / 8e-6 = 10G / 25G = 0.4.
    // U = (1.2 * 0 + 0.5 * 8000) / 8000 = 0.5; c = 0.5 / 0.95 < 1 but stage
    // 0 >= MI_THRESH 0: multiplicative, R = 79.2167G * 1.9 + 50M = 150.56G,
    // capped at 100G. Not committed.
    h.on_ack(
        &p,
        30_000,
        46_000,
        &[
            hop(1_014_000, 115_000, 10_000, L100),
            hop(1_014_500, 25_625, 0, G25),
        ],
    );
    close(h.utilization(), 0.5, "E4 U");
    assert_eq!(h.rate(), G100);
    close(h.committed_rate(), 79_216_666_666.666_67, "E4 Rc");
    assert_eq!(h.updates(), (1, 2));

    // E5, ack 46_001 > 45_000: full. tau = 8 us.
    // A: 100_000 * 8 / 8e-6 = 100G -> 1.0; queue min(0, 10_000) = 0 -> 1.0.
    // B: 10_000 * 8 / 8e-6 = 10G / 25G = 0.4.
    // U = 1.0; c = 1 / 0.95: R = 79.21666...G * 0.95 + 50M = 75.25583...G
    // + 50M = 75.30583...G, from the committed Rc, not the paced 100G.
    h.on_ack(
        &p,
        46_001,
        60_000,
        &[
            hop(1_022_000, 215_000, 0, L100),
            hop(1_022_500, 35_625, 0, G25),
        ],
    );
    close(h.rate(), 75_305_833_333.333_33, "E5 rate");
    assert_eq!(h.committed_rate(), h.rate());
    assert_eq!(h.updates(), (2, 2));
}

/// MI_THRESH 5 (the simulator's `RdmaHw` default): five additive steps of
/// W_AI before a multiplicative one.
#[test]
fn hpcc_additive_stages_then_multiplicative() {
    let p = HpccParams {
        mi_thresh: 5,
        ..HpccParams::default()
    };
    let mut h = Hpcc::new(&p, &QP);
    h.on_ack(&p, 1_000, 10_000, &[hop(1_000_000, 0, 50_000, L100)]);

    // E2 (full): tau 8 us; 100_000 * 8 / 8e-6 = 100G -> 1.0; queue
    // min(50_000, 50_000) / 100_000 = 0.5 -> u = 1.5 = U (dt = T).
    // c = 1.5 / 0.95 >= 1: R = 100G * 0.95 / 1.5 + 50M = 63.38333...G, stage 0.
    h.on_ack(&p, 11_000, 20_000, &[hop(1_008_000, 100_000, 50_000, L100)]);
    close(h.rate(), 63_383_333_333.333_33, "cut");
    assert_eq!(h.inc_stage(), 0);

    // E3..E7: 50_000 B per 8 us = 50G -> u = U = 0.5, c = 0.526 < 1 and
    // stage < 5: R = Rc + 50M, stage + 1.
    let mut tx = 100_000;
    for k in 1..=5u64 {
        tx += 50_000;
        h.on_ack(
            &p,
            11_000 + 10_000 * k,
            20_000 + 10_000 * k,
            &[hop(1_008_000 + 8_000 * k, tx, 0, L100)],
        );
        close(
            h.rate(),
            63_383_333_333.333_33 + 50e6 * k as f64,
            "additive",
        );
        assert_eq!(h.inc_stage(), k as u32);
    }
    // Rc = 63.38333G + 5 * 50M = 63.63333G.
    // E8: 90_000 B per 8 us = 90G -> U = 0.9; c = 0.9 / 0.95 < 1 but stage
    // 5 >= 5: R = 63.63333G * 0.95 / 0.9 + 50M = 67.16852G + 50M =
    // 67.21852G, stage 0.
    h.on_ack(&p, 71_000, 80_000, &[hop(1_056_000, tx + 90_000, 0, L100)]);
    close(h.rate(), 67_218_518_518.518_52, "multiplicative");
    assert_eq!(h.inc_stage(), 0);
}

/// MULTI_RATE 1: one U, Rc and stage per hop; the rate is the least Rc.
#[test]
fn hpcc_multi_rate_takes_the_least_hop_rate() {
    let p = HpccParams {
        multi_rate: true,
        ..HpccParams::default()
    };
    let mut h = Hpcc::new(&p, &QP);
    h.on_ack(
        &p,
        1_000,
        10_000,
        &[hop(1_000_000, 0, 0, L100), hop(1_000_000, 0, 20_000, G25)],
    );

    // E2 (full), tau 4 us:
    // A: 50_000 * 8 / 4e-6 = 100G -> 1.0, queue 0: U_A = (1 * 4000 + 1.0 *
    //    4000) / 8000 = 1.0; Rc_A = 100G * 0.95 + 50M = 95.05G.
    // B: 6_250 * 8 / 4e-6 = 12.5G / 25G = 0.5; queue min(30_000, 20_000) *
    //    100G / 25G / 100_000 = 0.8 -> u_B = 1.3; U_B = (1 * 4000 + 1.3 *
    //    4000) / 8000 = 1.15; Rc_B = 100G * 0.95 / 1.15 + 50M = 82.6587G.
    // Rate = min(100G, 95.05G, 82.6587G).
    h.on_ack(
        &p,
        11_000,
        20_000,
        &[
            hop(1_004_000, 50_000, 0, L100),
            hop(1_004_000, 6_250, 30_000, G25),
        ],
    );
    let (ua, rca, _) = h.hop_state(0).unwrap();
    let (ub, rcb, _) = h.hop_state(1).unwrap();
    close(ua, 1.0, "U_A");
    close(rca, 95.05e9, "Rc_A");
    close(ub, 1.15, "U_B");
    close(rcb, 82_658_695_652.174, "Rc_B");
    close(h.rate(), 82_658_695_652.174, "E2 rate");

    // E3 (full), tau 8 us = T:
    // A: 40_000 * 8 / 8e-6 = 40G -> U_A = 0.4; Rc_A = 95.05G * 0.95 / 0.4
    //    + 50M = 225.8G -> 100G.
    // B: 25_000 * 8 / 8e-6 = 25G -> 1.0, queue min(0, 30_000) = 0: U_B =
    //    1.0; Rc_B = 82.6587G * 0.95 + 50M = 78.52576G + 50M = 78.57576G.
    h.on_ack(
        &p,
        21_000,
        30_000,
        &[
            hop(1_012_000, 90_000, 0, L100),
            hop(1_012_000, 31_250, 0, G25),
        ],
    );
    assert_eq!(h.hop_state(0).unwrap().1, G100);
    close(h.rate(), 78_575_760_869.565_22, "E3 rate");
}

/// Hops the simulator cannot compute give no sample; too many hops, no
/// update at all.
#[test]
fn hpcc_skips_undefined_hops() {
    let p = HpccParams::default();
    let mut h = Hpcc::new(&p, &QP);
    h.on_ack(&p, 1_000, 10_000, &[hop(1_000, 0, 0, L100)]);
    // Same timestamp (tau = 0) and a zero link rate: no sample, no update.
    h.on_ack(&p, 11_000, 20_000, &[hop(1_000, 1_000_000, 1 << 40, L100)]);
    h.on_ack(&p, 21_000, 30_000, &[hop(9_000, 1_000_000, 1 << 40, 0)]);
    assert_eq!(
        (h.rate(), h.utilization(), h.updates()),
        (G100, 1.0, (0, 0))
    );
    // MAX_HOPS + 1 hops: ignored (the simulator's nhop <= maxHop).
    let many = vec![hop(100_000, 1 << 30, 1 << 30, L100); MAX_HOPS + 1];
    h.on_ack(&p, 31_000, 40_000, &many);
    assert_eq!((h.rate(), h.updates()), (G100, (0, 0)));
    // The stored hop moved on to ts 9_000 despite no sample: from there,
    // tau = 8 us, 100_000 B -> 100G -> u = 1.0 (queue min(0, 2^40) = 0),
    // U = 1.0, R = 95.05G.
    h.on_ack(&p, 41_000, 50_000, &[hop(17_000, 1_100_000, 0, L100)]);
    close(h.rate(), 95.05e9, "after the skipped hops");
}

/// The artifact's TIMELY (the `RdmaHw` defaults: T_low 50 us, T_high 500
/// us, minRTT 20 us, alpha 0.875, beta 0.8; AI 50M, HAI 100M after 5).
#[test]
fn timely_rate_after_an_rtt_sequence() {
    let p = TimelyParams::default();
    let mut t = Timely::new(&p);
    // First ACK: records rtt 60 us and lastUpdateSeq 10_000.
    t.on_ack(&p, 1_000, 10_000, 60_000);
    assert_eq!((t.rate(), t.updates()), (G100, 0));
    // Within the same window: nothing, however large the RTT.
    t.on_ack(&p, 2_000, 11_000, 1_000_000);
    assert_eq!((t.rate(), t.updates()), (G100, 0));

    // rtt 80 us (between the thresholds): diff = 0.125 * 0 + 0.875 *
    // (80_000 - 60_000) = 17_500; gradient = 17_500 / 20_000 = 0.875 > 0:
    // Rc = 100G * (1 - 0.8 * 0.875) = 100G * 0.3 = 30G.
    t.on_ack(&p, 11_000, 20_000, 80_000);
    assert_eq!(t.rtt_diff(), 17_500.0);
    close(t.rate(), 30e9, "gradient cut");
    assert_eq!(t.inc_stage(), 0);

    // rtt 70 us: diff = 0.125 * 17_500 + 0.875 * -10_000 = 2_187.5 - 8_750
    // = -6_562.5 -> gradient < 0: Rc = 30G + 50M, stage 1.
    t.on_ack(&p, 21_000, 30_000, 70_000);
    assert_eq!(t.rtt_diff(), -6_562.5);
    close(t.rate(), 30.05e9, "negative gradient");

    // rtt 40 us < T_low: increase. diff = 0.125 * -6_562.5 + 0.875 *
    // -30_000 = -820.3125 - 26_250 = -27_070.312_5. Stages 2..5 at +50M:
    // 30.1G, 30.15G, 30.2G, 30.25G.
    let mut seq = 31_000;
    for (stage, rate) in [(2, 30.1e9), (3, 30.15e9), (4, 30.2e9), (5, 30.25e9)] {
        t.on_ack(&p, seq, seq + 9_000, 40_000);
        seq += 10_000;
        close(t.rate(), rate, "additive");
        assert_eq!(t.inc_stage(), stage);
        if stage == 2 {
            assert_eq!(t.rtt_diff(), -27_070.312_5);
        }
    }
    // Stage 5 = N: the hyper-active step, +100M: 30.35G.
    t.on_ack(&p, seq, seq + 9_000, 40_000);
    seq += 10_000;
    close(t.rate(), 30.35e9, "HAI");
    assert_eq!(t.inc_stage(), 6);

    // rtt 1 ms > T_high: Rc = 30.35G * (1 - 0.8 * (1 - 500 / 1000)) =
    // 30.35G * 0.6 = 18.21G, stage 0.
    t.on_ack(&p, seq, seq + 9_000, 1_000_000);
    seq += 10_000;
    close(t.rate(), 18.21e9, "above T_high");
    assert_eq!(t.inc_stage(), 0);

    // rtt 300 us (between): diff falls by 0.875 * 700_000, gradient < 0:
    // +50M = 18.26G.
    t.on_ack(&p, seq, seq + 9_000, 300_000);
    close(t.rate(), 18.26e9, "falling RTT");
    // Updates: 80, 70, four at 40, HAI, 1 ms, 300 us = 9.
    assert_eq!(t.updates(), 9);
}

#[test]
fn timely_gradient_floors_at_min_rate_and_t_low_wins() {
    let p = TimelyParams::default();
    // 60 us then 100 us: diff = 0.875 * 40_000 = 35_000, gradient 1.75,
    // 1 - 0.8 * 1.75 = -0.4 -> 0: Rc = max(100M, 0) = 100M.
    let mut t = Timely::new(&p);
    t.on_ack(&p, 1_000, 10_000, 60_000);
    t.on_ack(&p, 11_000, 20_000, 100_000);
    assert_eq!(t.rate(), 100e6);

    // 20 us then 45 us: gradient 0.875 * 25_000 / 20_000 > 0, but 45 us <
    // T_low decides first: 100G + 50M capped at 100G, stage 1.
    let mut t = Timely::new(&p);
    t.on_ack(&p, 1_000, 10_000, 20_000);
    t.on_ack(&p, 11_000, 20_000, 45_000);
    assert_eq!((t.rate(), t.inc_stage()), (G100, 1));
}

/// The artifact's DCTCP (g = 1/256, AI 1 Gbit/s, MTU 1000): alpha, the
/// rate, the window after a mark sequence.
#[test]
fn dctcp_alpha_and_window_after_marks() {
    let p = DctcpParams::default();
    let mut d = Dctcp::new(&p, &QP);
    assert_eq!((d.rate(), d.alpha()), (G100, 1.0));

    // D1: ack 1_000 > 0: a new window, the first: 10_000 / 1000 + 1 = 11
    // packets. No mark, not in CWR: AI, min(100G, 101G) = 100G.
    d.on_ack(&p, 1_000, 10_000, false);
    assert_eq!((d.rate(), d.window_packets(), d.alpha()), (G100, 11, 1.0));

    // D2: a mark, 1 counted: 100G * (1 - 1 / 2) = 50G; CWR until 11_000.
    d.on_ack(&p, 2_000, 11_000, true);
    assert_eq!((d.rate(), d.in_cwr(), d.rate_cuts()), (50e9, true, 1));
    // D3: a mark in CWR: counted (2), no cut.
    d.on_ack(&p, 3_000, 12_000, true);
    assert_eq!((d.rate(), d.rate_cuts()), (50e9, 1));

    // D4: ack 11_000 > 10_000, a new window: F = 2 / 11; alpha = 255/256 +
    // (1/256)(2/11) = (255 * 11 + 2) / 2816 = 2807 / 2816. The next window:
    // (20_000 - 11_000) / 1000 + 1 = 10 packets. 11_000 is not past
    // 11_000: still CWR, no AI.
    d.on_ack(&p, 11_000, 20_000, false);
    let a1 = 2807.0 / 2816.0;
    close(d.alpha(), a1, "alpha after window 1");
    assert_eq!((d.rate(), d.window_packets(), d.in_cwr()), (50e9, 10, true));

    // D5: ack 12_000 > 11_000 ends CWR; a mark: 50G * (1 - a1 / 2) = 50G *
    // 2825 / 5632 = 25.0799005...G; CWR until 21_000.
    d.on_ack(&p, 12_000, 21_000, true);
    close(d.rate(), 25_079_900_568.181_82, "second cut");
    assert_eq!((d.in_cwr(), d.rate_cuts()), (true, 2));

    // D6: ack 21_000 > 20_000, a new window: F = 1 / 10; alpha = (255/256)
    // a1 + (1/256)(1/10) = (7_157_850 + 2_816) / 7_208_960 =
    // 7_160_666 / 7_208_960. 21_000 is not past 21_000: no AI.
    d.on_ack(&p, 21_000, 30_000, false);
    let a2 = 7_160_666.0 / 7_208_960.0;
    close(d.alpha(), a2, "alpha after window 2");
    close(d.rate(), 25_079_900_568.181_82, "no AI in CWR");

    // D7: a new window without marks: alpha = (255/256) a2; CWR ends (31_000
    // > 21_000); AI: 25.0799G + 1G = 26.0799G.
    d.on_ack(&p, 31_000, 40_000, false);
    close(d.alpha(), a2 * 255.0 / 256.0, "alpha after window 3");
    close(d.rate(), 26_079_900_568.181_82, "AI");
    assert!(!d.in_cwr());
    // Window: 100_000 * 26_079_900_568 / 100G = 26_079.9 -> 26_079 bytes.
    assert_eq!(QP.window(d.rate(), p.line_rate), Some(26_079));
}

#[test]
fn dctcp_cuts_once_per_window_and_floors_at_min_rate() {
    let p = DctcpParams::default();
    let mut d = Dctcp::new(&p, &QP);
    // Every ACK marked, one packet per ACK, snd_nxt 10 packets ahead. Each
    // window of 10 ACKs cuts once (the first ACK past the CWR end) and
    // alpha stays 1 (F = 1): the k-th cut leaves 100G / 2^k; the 10th,
    // 97.7M, is floored at 100M.
    let mut cuts_seen = Vec::new();
    for k in 1..=120u64 {
        d.on_ack(&p, k * 1000, k * 1000 + 10_000, true);
        cuts_seen.push(d.rate_cuts());
    }
    assert_eq!(d.rate(), 100e6);
    // The first cut at ACK 1; then one at each first ACK past the end of
    // the previous CWR (snd_nxt at the cut, 10 packets later): ACKs 1, 12,
    // 23, ... -> 11 cuts within 120 ACKs.
    assert_eq!(d.rate_cuts(), 11);
    assert_eq!(cuts_seen[10], 1);
    assert_eq!(cuts_seen[11], 2);
}

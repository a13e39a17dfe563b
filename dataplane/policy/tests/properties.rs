//! Property tests of the engine's guarantees.

use std::collections::HashMap;

use lcmp_policy::path_cost::{PathCostError, MAX_PATH_SHIFT};
use lcmp_policy::select::MAX_CANDIDATES;
use lcmp_policy::{
    Candidate, CandidateSet, CongestionEstimator, CongestionParams, FlowCache, FlowHash,
    FlowRouter, LcmpParams, PathCostModel, PathCostParams, Policy, PortId, PortView, Ranking,
    RouteOutcome, Selector,
};
use proptest::prelude::*;

const SEC: u64 = 1_000_000_000;

/// Ports whose state is set directly.
#[derive(Clone, Debug)]
struct Ports {
    c_cong: Vec<u8>,
    up: Vec<bool>,
}

impl PortView for Ports {
    fn is_up(&self, port: PortId) -> bool {
        self.up.get(port as usize).copied().unwrap_or(false)
    }
    fn c_cong(&self, port: PortId) -> u8 {
        self.c_cong.get(port as usize).copied().unwrap_or(255)
    }
}

/// A route over `n` distinct ports with arbitrary C_path, and arbitrary
/// port states.
fn route_and_ports() -> impl Strategy<Value = (CandidateSet, Ports)> {
    (1..=MAX_CANDIDATES)
        .prop_flat_map(|n| {
            (
                Just(n),
                prop::collection::vec(any::<u8>(), n),
                prop::collection::vec(any::<u8>(), n),
                prop::collection::vec(prop::bool::weighted(0.8), n),
                prop::collection::vec(1u64..=400, n),
            )
        })
        .prop_map(|(n, c_path, c_cong, up, caps)| {
            let v: Vec<Candidate> = (0..n)
                .map(|i| Candidate {
                    port: i as u8,
                    c_path: c_path[i],
                    capacity_bps: caps[i] * 1_000_000_000,
                })
                .collect();
            (CandidateSet::new(&v).unwrap(), Ports { c_cong, up })
        })
}

/// `alpha * c_path + beta * c_cong` in u128, where no u32 weight can wrap.
fn reference_cost(p: &LcmpParams, c_path: u8, c_cong: u8) -> u128 {
    p.alpha as u128 * c_path as u128 + p.beta as u128 * c_cong as u128
}

/// Live candidates as `(cost, port)` in ranking order, written plainly.
fn reference_ranking(p: &LcmpParams, set: &CandidateSet, ports: &Ports) -> Vec<(u128, u8)> {
    let mut live: Vec<(u128, u8)> = set
        .as_slice()
        .iter()
        .filter(|c| ports.is_up(c.port))
        .map(|c| (reference_cost(p, c.c_path, ports.c_cong(c.port)), c.port))
        .collect();
    live.sort();
    live
}

/// The kept set as the spec states it (default kept fraction), written
/// plainly.
fn reference_kept(p: &LcmpParams, set: &CandidateSet, ports: &Ports) -> (Vec<u8>, bool) {
    let live = reference_ranking(p, set, ports);
    let n = live.len();
    let keep = if n <= 3 { n } else { n / 2 };
    let kept: Vec<u8> = live[..keep].iter().map(|&(_, port)| port).collect();
    let all_congested = p.beta != 0 && kept.iter().all(|&port| ports.c_cong(port) >= 204);
    (kept, all_congested)
}

proptest! {
    #[test]
    fn c_path_is_monotone_in_delay(
        cap_us in 1u64..10_000_000,
        d1 in 0u64..20_000_000,
        d2 in 0u64..20_000_000,
        capacity in 1u64..1_000_000_000_000,
    ) {
        let m = PathCostModel::new(PathCostParams::default(), cap_us, 400_000_000_000).unwrap();
        let (lo, hi) = (d1.min(d2), d1.max(d2));
        prop_assert!(m.delay_score(lo) <= m.delay_score(hi));
        prop_assert!(m.c_path(lo, capacity) <= m.c_path(hi, capacity));
    }

    #[test]
    fn c_path_does_not_rise_with_capacity(
        c1 in 0u64..1_000_000_000_000,
        c2 in 0u64..1_000_000_000_000,
        delay in 0u64..1_000_000,
    ) {
        let m = PathCostModel::new(PathCostParams::default(), 1 << 19, 400_000_000_000).unwrap();
        let (lo, hi) = (c1.min(c2), c1.max(c2));
        prop_assert!(m.c_path(delay, hi) <= m.c_path(delay, lo));
    }

    /// Every weight and shift `lcmp-agent paths` accepts (u32 weights,
    /// `--path-shift` 0..=40): C_path is the weighted sum, computed without
    /// wrapping, shifted and capped at 255; so it never falls as the delay
    /// rises.
    #[test]
    fn c_path_is_exact_for_any_weights_and_shift(
        w_delay in any::<u32>(),
        w_capacity in any::<u32>(),
        shift in 0..=MAX_PATH_SHIFT,
        d1 in 0u64..1_000_000,
        d2 in 0u64..1_000_000,
        capacity in 0u64..400_000_000_000,
    ) {
        let p = PathCostParams { w_delay, w_capacity, shift, ..Default::default() };
        let m = PathCostModel::new(p, 1 << 19, 200_000_000_000).unwrap();
        let (lo, hi) = (d1.min(d2), d1.max(d2));
        let sum = w_delay as u128 * m.delay_score(lo) as u128
            + w_capacity as u128 * m.capacity_score(capacity) as u128;
        prop_assert_eq!(m.c_path(lo, capacity) as u128, (sum >> shift).min(255));
        prop_assert!(m.c_path(lo, capacity) <= m.c_path(hi, capacity));
    }

    #[test]
    fn path_shift_beyond_the_sum_is_refused(shift in MAX_PATH_SHIFT + 1..=u32::MAX) {
        let p = PathCostParams { shift, ..Default::default() };
        prop_assert_eq!(
            PathCostModel::new(p, 1 << 19, 200_000_000_000).unwrap_err(),
            PathCostError::BadShift(shift)
        );
    }

    /// Over every weight (alpha, beta in 0..=u32::MAX) and score: the cost
    /// is the exact sum, so it never falls as C_path or C_cong rises and is
    /// never below either term.
    #[test]
    fn lcmp_cost_is_exact_and_monotone(
        alpha in any::<u32>(),
        beta in any::<u32>(),
        c_path in any::<u8>(),
        c_cong in any::<u8>(),
        up in any::<u8>(),
    ) {
        let p = LcmpParams { alpha, beta, ..Default::default() };
        let c = p.cost_exact(c_path, c_cong);
        prop_assert_eq!(c as u128, reference_cost(&p, c_path, c_cong));
        prop_assert!(c >= alpha as u64 * c_path as u64);
        prop_assert!(c >= beta as u64 * c_cong as u64);
        prop_assert!(p.cost_exact(c_path.max(up), c_cong) >= c);
        prop_assert!(p.cost_exact(c_path, c_cong.max(up)) >= c);
    }

    /// For any weights the ranking is the live candidates ordered by exact
    /// cost, then port, and LCMP picks from its kept prefix.
    #[test]
    fn ranking_orders_by_exact_cost_for_any_weights(
        (set, ports) in route_and_ports(),
        alpha in any::<u32>(),
        beta in any::<u32>(),
        hash in any::<u64>(),
    ) {
        let p = LcmpParams { alpha, beta, ..Default::default() };
        let r = Ranking::new(&p, &set, &ports);
        let got: Vec<(u128, u8)> = (0..r.live())
            .map(|i| { let (port, cost) = r.get(i); (cost as u128, port) })
            .collect();
        prop_assert_eq!(got, reference_ranking(&p, &set, &ports));
        let (kept, all_congested) = reference_kept(&p, &set, &ports);
        prop_assert_eq!(r.kept_ports().collect::<Vec<_>>(), kept.clone());
        if let Some(d) = Selector::new(Policy::Lcmp(p)).decide(&set, &ports, FlowHash(hash)) {
            if all_congested {
                prop_assert_eq!(d.port, kept[0]);
            } else {
                prop_assert!(kept.contains(&d.port), "{} not in {:?}", d.port, kept);
            }
        }
    }

    #[test]
    fn congestion_cost_is_monotone_in_each_signal(
        q in any::<u8>(), t in any::<u8>(), d in any::<u8>(), up in any::<u8>(),
    ) {
        let p = CongestionParams::default();
        let base = p.cost(q, t, d);
        prop_assert!(p.cost(q.max(up), t, d) >= base);
        prop_assert!(p.cost(q, t.max(up), d) >= base);
        prop_assert!(p.cost(q, t, d.max(up)) >= base);
    }

    /// Two ports with the same history but a larger last queue sample: the
    /// larger queue never costs less (Q, T and D are all monotone in it).
    #[test]
    fn estimator_cost_is_monotone_in_queue_level(
        history in prop::collection::vec(0u64..2_000_000, 0..40),
        last_a in 0u64..2_000_000,
        last_b in 0u64..2_000_000,
    ) {
        let params = CongestionParams::default();
        let mut a = CongestionEstimator::new(&params, 10_000_000_000, 1_000_000);
        let mut b = a.clone();
        for (i, &q) in history.iter().enumerate() {
            a.sample(i as u64 * 100_000, q);
            b.sample(i as u64 * 100_000, q);
        }
        let t = history.len() as u64 * 100_000;
        a.sample(t, last_a.min(last_b));
        b.sample(t, last_a.max(last_b));
        prop_assert!(a.c_cong() <= b.c_cong());
        prop_assert!(a.q() <= b.q());
        prop_assert!(a.trend_bytes() <= b.trend_bytes());
    }

    /// Queue growth that is larger at every step gives a trend at least as
    /// large, and so a trend level at least as large.
    #[test]
    fn estimator_trend_is_monotone_in_growth(
        steps in prop::collection::vec((-50_000i64..50_000, 0i64..50_000), 1..40),
    ) {
        let params = CongestionParams::default();
        let mut slow = CongestionEstimator::new(&params, 10_000_000_000, 100_000_000);
        let mut fast = slow.clone();
        let (mut qs, mut qf) = (50_000_000i64, 50_000_000i64);
        slow.sample(0, qs as u64);
        fast.sample(0, qf as u64);
        for (i, &(growth, extra)) in steps.iter().enumerate() {
            qs += growth;
            qf += growth + extra;
            let t = (i as u64 + 1) * 100_000;
            slow.sample(t, qs as u64);
            fast.sample(t, qf as u64);
            prop_assert!(slow.trend_bytes() <= fast.trend_bytes());
            prop_assert!(slow.t() <= fast.t());
        }
    }

    /// LCMP picks a live candidate of the kept set, or the minimum-cost one
    /// when every kept candidate is congested.
    #[test]
    fn lcmp_picks_only_live_kept_candidates(
        (set, ports) in route_and_ports(),
        hash in any::<u64>(),
    ) {
        let p = LcmpParams::default();
        let sel = Selector::new(Policy::Lcmp(p));
        let (kept, all_congested) = reference_kept(&p, &set, &ports);
        match sel.decide(&set, &ports, FlowHash(hash)) {
            None => prop_assert!(kept.is_empty()),
            Some(d) => {
                prop_assert!(ports.is_up(d.port));
                if all_congested {
                    prop_assert_eq!(d.port, kept[0]);
                } else {
                    prop_assert!(kept.contains(&d.port), "{} not in {:?}", d.port, kept);
                }
            }
        }
    }

    #[test]
    fn baselines_pick_only_live_candidates(
        (set, ports) in route_and_ports(),
        hash in any::<u64>(),
    ) {
        for policy in [Policy::Ecmp, Policy::Wcmp, Policy::Ucmp] {
            let any_live = set.as_slice().iter().any(|c| ports.is_up(c.port));
            match Selector::new(policy).decide(&set, &ports, FlowHash(hash)) {
                None => prop_assert!(!any_live),
                Some(d) => prop_assert!(ports.is_up(d.port)),
            }
        }
    }

    /// Whatever happens to congestion and to other ports, a cached flow
    /// keeps its port while that port stays up.
    #[test]
    fn cached_flow_keeps_its_port_while_it_is_up(
        ops in prop::collection::vec(
            prop_oneof![
                (0u64..40).prop_map(Op::Packet),
                (0u8..6, any::<u8>()).prop_map(|(p, c)| Op::Congest(p, c)),
                (0u8..6).prop_map(Op::Toggle),
            ],
            1..300,
        ),
        policy in prop::sample::select(Policy::NAMES.to_vec()),
    ) {
        let set = CandidateSet::new(&(0..6).map(|i| Candidate {
            port: i,
            c_path: i * 40,
            capacity_bps: (1 + i as u64) * 1_000_000_000,
        }).collect::<Vec<_>>()).unwrap();
        let mut ports = Ports { c_cong: vec![0; 6], up: vec![true; 6] };
        let mut r = FlowRouter::new(
            Selector::new(Policy::from_name(policy).unwrap()),
            FlowCache::new(1024, SEC),
        );
        let mut assigned: HashMap<u64, u8> = HashMap::new();
        for (step, op) in ops.into_iter().enumerate() {
            let now = step as u64 * 1_000_000;
            match op {
                Op::Packet(f) => {
                    let h = FlowHash(f.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ f << 33);
                    let out = r.route(h, &set, &ports, now);
                    if let Some(&port) = assigned.get(&f) {
                        if ports.is_up(port) {
                            prop_assert_eq!(out, RouteOutcome::Cached(port));
                        }
                    }
                    match out.port() {
                        Some(p) => { assigned.insert(f, p); }
                        None => prop_assert!(ports.up.iter().all(|u| !u)),
                    }
                }
                Op::Congest(p, c) => ports.c_cong[p as usize] = c,
                Op::Toggle(p) => ports.up[p as usize] = !ports.up[p as usize],
            }
        }
    }

    /// The sweep and insert-time reclaim never evict a flow seen within the
    /// idle timeout; the sweep does evict flows idle well past it.
    #[test]
    fn eviction_spares_flows_seen_within_the_timeout(
        seen in prop::collection::vec(0u64..10 * SEC, 1..200),
        timeout in SEC / 10..3 * SEC,
        now_extra in 0u64..5 * SEC,
        extra_inserts in 0usize..200,
    ) {
        let mut c = FlowCache::new(64, timeout);
        let mut live = Vec::new();
        // The clock is monotonic: flows arrive in time order.
        let mut seen = seen;
        seen.sort();
        let now = 10 * SEC + now_extra;
        for (i, &t) in seen.iter().enumerate() {
            let h = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            if c.insert(h, 1, t).is_ok() {
                live.push((h, t));
            }
        }
        // New flows at `now` may reclaim expired entries only.
        for j in 0..extra_inserts {
            let _ = c.insert((j as u64 + 1000).wrapping_mul(0xD1B5_4A32_D192_ED03), 2, now);
        }
        c.evict_step(now, usize::MAX);
        for &(h, t) in &live {
            let idle = now - t;
            let present = c.lookup(h, now).is_some();
            if idle <= timeout {
                prop_assert!(present, "flow idle {idle} ns <= timeout {timeout} ns was evicted");
            } else if idle > timeout + 3 * lcmp_policy::flow_cache::TICK_NS {
                prop_assert!(!present, "flow idle {idle} ns > timeout {timeout} ns survived");
            }
        }
    }
}

/// The weights where u32 arithmetic broke, swept over every pair of scores
/// (random weights rarely land on them): 16,843,009 = u32::MAX / 255 is the
/// largest weight with an exact u32 cost, 23,598,722 the probe's alpha.
#[test]
fn lcmp_cost_is_monotone_at_the_edge_weights() {
    const EDGES: [u32; 10] = [
        0,
        1,
        3,
        255,
        16_843_009,
        16_843_010,
        23_598_722,
        1 << 31,
        u32::MAX - 1,
        u32::MAX,
    ];
    for alpha in EDGES {
        for beta in EDGES {
            let p = LcmpParams {
                alpha,
                beta,
                ..Default::default()
            };
            for c_path in 0..=255u8 {
                for c_cong in 0..=255u8 {
                    let c = p.cost_exact(c_path, c_cong);
                    assert_eq!(c as u128, reference_cost(&p, c_path, c_cong));
                    assert!(c >= alpha as u64 * c_path as u64);
                    assert!(c >= beta as u64 * c_cong as u64);
                    if c_path < 255 {
                        assert!(p.cost_exact(c_path + 1, c_cong) >= c);
                    }
                    if c_cong < 255 {
                        assert!(p.cost_exact(c_path, c_cong + 1) >= c);
                    }
                }
            }
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Packet(u64),
    Congest(u8, u8),
    Toggle(u8),
}

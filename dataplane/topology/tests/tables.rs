//! Route tables of one switch in a large network: with the C_path scales
//! given (`resolve_scales`, computed once for the network) building them
//! searches from that switch alone, and they equal the tables built with
//! the scales derived from every switch's candidates.

use lcmp_policy::PathCostParams;
use lcmp_topology::tables::{
    path_cost_model, resolve_scales, switch_tables, CandidatePath, PathMetric, SwitchTables,
};
use lcmp_topology::{IpNet, Topology};

mod common;
use common::switches_and_links;

const G10: u64 = 10_000_000_000;

/// `s0 - s1 - ... - s{n-1}`, 10 Gbit/s and 1 ms a link; switch `i`
/// delivers `10.<i / 256>.<i % 256>.0/24`; link `i - 1` joins `s{i-1}` and
/// `s{i}`, so every switch but the ends has port 0 towards `s{i-1}` and
/// port 1 towards `s{i+1}`.
fn chain(n: usize) -> Topology {
    Topology::parse(&switches_and_links(n, |i| i - 1), "chain.toml").unwrap()
}

fn prefix(i: usize) -> IpNet {
    format!("10.{}.{}.0/24", i / 256, i % 256).parse().unwrap()
}

/// (prefix, destination switch, candidates) of every route.
fn routes(t: &SwitchTables) -> Vec<(IpNet, String, Vec<CandidatePath>)> {
    t.routes
        .iter()
        .map(|r| (r.prefix, r.dest_switch.clone(), r.paths.clone()))
        .collect()
}

#[test]
fn one_switch_with_the_scales_given_equals_the_network_wide_model() {
    let n = 2_000;
    let topo = chain(n);
    let params = PathCostParams::default();
    let metric = PathMetric::Path;
    // The longest candidate is s0 -> s1999 (or back): 1999 hops of 1 ms =
    // 1,999,000 us; the delay cap is the next power of two, 2^21 =
    // 2,097,152 us. Every bottleneck is 10 Gbit/s.
    let model = path_cost_model(&topo, params, metric).unwrap();
    assert_eq!(
        (model.delay_cap_us(), model.max_capacity_bps()),
        (2_097_152, G10)
    );
    let given = resolve_scales(&topo, params, metric).unwrap();
    assert_eq!(
        (given.max_delay_us, given.max_capacity_bps),
        (Some(2_097_152), Some(G10))
    );
    let one = path_cost_model(&topo, given, metric).unwrap();
    assert_eq!(
        (one.delay_cap_us(), one.max_capacity_bps()),
        (2_097_152, G10)
    );

    let candidate = |port: u8, next: usize, hops: u32, c_path: u8| CandidatePath {
        port,
        next_hop: format!("s{next}"),
        hops,
        delay_us: u64::from(hops) * 1_000,
        capacity_bps: G10,
        c_path,
    };
    for s in [0, 1, 1_000, 1_998, 1_999] {
        let id = topo.switch_by_name(&format!("s{s}")).unwrap().id;
        let all = switch_tables(&topo, id, &model, metric).unwrap();
        let mine = switch_tables(&topo, id, &one, metric).unwrap();
        assert_eq!(routes(&mine), routes(&all), "s{s}");
        // One route per other switch, in switch order.
        assert_eq!(mine.routes.len(), n - 1, "s{s}");
        let to = |j: usize| &mine.routes[if j < s { j } else { j - 1 }];
        for j in [0, 1, 999, 1_000, 1_001, 1_999] {
            if j == s {
                continue;
            }
            let r = to(j);
            assert_eq!(
                (r.prefix, r.dest_switch.as_str()),
                (prefix(j), &*format!("s{j}"))
            );
            // Towards j > s the only next hop is s+1, out of port 1 (port 0
            // on s0, which has no link towards s-1); towards j < s it is
            // s-1, out of port 0.
            let (port, next) = if j > s {
                (u8::from(s > 0), s + 1)
            } else {
                (0, s - 1)
            };
            let hops = s.abs_diff(j) as u32;
            // C_path = (3 * delayScore + 1 * capScore) >> 2 with
            // delayScore = delay_us * 255 >> 21 and capScore 0 (every path
            // is in the top class).
            let delay_score = (u64::from(hops) * 1_000 * 255) >> 21;
            let c_path = ((3 * delay_score) >> 2) as u8;
            assert_eq!(
                r.paths,
                [candidate(port, next, hops, c_path)],
                "s{s} -> s{j}"
            );
        }
    }
    // Worked out: s1000 -> s1999, 999 hops: 999,000 * 255 >> 21 = 121,
    // C_path 3 * 121 >> 2 = 90; s0 -> s1999: 1,999,000 * 255 >> 21 = 243,
    // C_path 182; one hop: 1,000 * 255 >> 21 = 0.
    let s1000 = switch_tables(
        &topo,
        topo.switch_by_name("s1000").unwrap().id,
        &one,
        metric,
    )
    .unwrap();
    assert_eq!(s1000.routes[1_998].paths[0].c_path, 90);
    let s0 = switch_tables(&topo, topo.switch_by_name("s0").unwrap().id, &one, metric).unwrap();
    assert_eq!(s0.routes[1_998].paths[0].c_path, 182);
    assert_eq!(s0.routes[0].paths[0].c_path, 0);
}

#[test]
fn scales_from_the_local_links_and_with_a_link_down() {
    // The local-link metric reads only first links: every candidate is
    // 1 ms and 10 Gbit/s, so the cap is 1,000 us -> 1,024 us.
    let topo = chain(50);
    let params = PathCostParams::default();
    let local = resolve_scales(&topo, params, PathMetric::LocalLink).unwrap();
    assert_eq!(
        (local.max_delay_us, local.max_capacity_bps),
        (Some(1_024), Some(G10))
    );
    // With link s24 - s25 (link 24) down the longest path is s25 -> s49
    // (24 hops, 24,000 us -> 32,768), not 49.
    let cut = topo.with_links_down(&[topo.link_between("s24", "s25").unwrap()]);
    let path = resolve_scales(&cut, params, PathMetric::Path).unwrap();
    assert_eq!(path.max_delay_us, Some(32_768));
    // Given scales are kept.
    let fixed = PathCostParams {
        max_delay_us: Some(5_000),
        ..params
    };
    let got = resolve_scales(&topo, fixed, PathMetric::Path).unwrap();
    // 5,000 us rounds up to the power of two 8,192.
    assert_eq!(
        (got.max_delay_us, got.max_capacity_bps),
        (Some(8_192), Some(G10))
    );
}

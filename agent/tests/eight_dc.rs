//! The paper's 8-DC topology through the control plane and the engine.

use lcmp_agent::report::kept_at_idle;
use lcmp_policy::{LcmpParams, PathCostParams};
use lcmp_topology::tables::{path_cost_model, switch_tables, PathMetric};
use lcmp_topology::Topology;

fn dc1_to_dc8() -> lcmp_topology::tables::RouteTable {
    let topo = Topology::parse(lcmp_agent::DEFAULT_TOPOLOGY, "8dc.toml").unwrap();
    let model = path_cost_model(&topo, PathCostParams::default(), PathMetric::Path).unwrap();
    let dc1 = topo.switch_by_name("dc1").unwrap().id;
    let tables = switch_tables(&topo, dc1, &model, PathMetric::Path).unwrap();
    tables
        .routes
        .into_iter()
        .find(|r| r.dest_switch == "dc8")
        .unwrap()
}

/// DC1 -> DC8 with empty queues and default weights (alpha 3, beta 1;
/// w_dl 3, w_lc 1, S_path 2). The six two-hop paths:
///
/// | via | delay  | capacity | delayScore | capScore | C_path | cost |
/// |-----|--------|----------|------------|----------|--------|------|
/// | DC2 |  50 ms | 200G     |  24        |   0      |  18    |  54  |
/// | DC3 | 500 ms | 200G     | 243        |   0      | 182    | 546  |
/// | DC4 |  20 ms | 100G     |   9        | 128      |  38    | 114  |
/// | DC5 | 200 ms | 100G     |  97        | 128      | 104    | 312  |
/// | DC6 |  10 ms |  25G     |   4        | 230      |  60    | 180  |
/// | DC7 | 100 ms |  25G     |  48        | 230      |  93    | 279  |
///
/// The delay cap is 2^19 us (524.288 ms, the next power of two above the
/// longest candidate path, 500 ms via DC3) and the capacity classes are of
/// the largest path capacity, 200G. Six candidates keep three: the cheapest
/// costs are DC2, DC4 and DC6. DC2 is slower than DC4 and DC6 but has the
/// top capacity; DC4 and DC6 are the two shortest paths, and their lower
/// capacity costs less than the extra delay of DC7 (100 ms) or DC5
/// (200 ms), since delay weighs three times capacity. DC3 has the top
/// capacity but the longest delay, the trap a capacity-only scheme (UCMP)
/// falls into.
#[test]
fn lcmp_kept_set_for_dc1_to_dc8() {
    let route = dc1_to_dc8();
    let by_hop: Vec<(String, u64, u64, u8)> = route
        .paths
        .iter()
        .map(|p| {
            (
                p.next_hop.clone(),
                p.delay_us,
                p.capacity_bps / 1_000_000_000,
                p.c_path,
            )
        })
        .collect();
    let expect = [
        ("dc2", 50_000, 200, 18),
        ("dc3", 500_000, 200, 182),
        ("dc4", 20_000, 100, 38),
        ("dc5", 200_000, 100, 104),
        ("dc6", 10_000, 25, 60),
        ("dc7", 100_000, 25, 93),
    ];
    for (hop, delay, cap, c_path) in expect {
        assert!(
            by_hop.contains(&(hop.to_string(), delay, cap, c_path)),
            "{hop}: expected {delay} us, {cap}G, C_path {c_path}; got {by_hop:?}"
        );
    }
    let kept = kept_at_idle(&route, &LcmpParams::default());
    let kept_hops: Vec<&str> = kept
        .iter()
        .map(|&port| {
            route
                .paths
                .iter()
                .find(|p| p.port == port)
                .unwrap()
                .next_hop
                .as_str()
        })
        .collect();
    println!("DC1->DC8 LCMP kept set (cheapest first): {kept_hops:?}");
    assert_eq!(kept_hops, ["dc2", "dc4", "dc6"]);
}

#[test]
fn ablations_change_the_kept_set_as_expected() {
    let route = dc1_to_dc8();
    let hops = |kept: Vec<u8>| -> Vec<String> {
        let mut v: Vec<String> = kept
            .iter()
            .map(|&port| {
                route
                    .paths
                    .iter()
                    .find(|p| p.port == port)
                    .unwrap()
                    .next_hop
                    .clone()
            })
            .collect();
        v.sort();
        v
    };
    // rm-alpha: every path costs 0 at empty queues; ties break by port, so
    // the kept set is just the three lowest port numbers.
    let rm_alpha = LcmpParams {
        alpha: 0,
        ..Default::default()
    };
    let mut lowest: Vec<u8> = route.paths.iter().map(|p| p.port).collect();
    lowest.sort();
    assert_eq!(
        hops(kept_at_idle(&route, &rm_alpha)),
        hops(lowest[..3].to_vec())
    );
    // rm-beta at empty queues keeps what LCMP keeps.
    let rm_beta = LcmpParams {
        beta: 0,
        ..Default::default()
    };
    assert_eq!(hops(kept_at_idle(&route, &rm_beta)), ["dc2", "dc4", "dc6"]);
}

#[test]
fn local_link_metric_halves_the_delays() {
    let topo = Topology::parse(lcmp_agent::DEFAULT_TOPOLOGY, "8dc.toml").unwrap();
    let model = path_cost_model(&topo, PathCostParams::default(), PathMetric::LocalLink).unwrap();
    let dc1 = topo.switch_by_name("dc1").unwrap().id;
    let tables = switch_tables(&topo, dc1, &model, PathMetric::LocalLink).unwrap();
    let route = tables
        .routes
        .iter()
        .find(|r| r.dest_switch == "dc8")
        .unwrap();
    let via_dc3 = route.paths.iter().find(|p| p.next_hop == "dc3").unwrap();
    assert_eq!(via_dc3.delay_us, 250_000);
    // The cap follows: 250 ms local links -> 2^18 us.
    assert_eq!(model.delay_cap_us(), 262_144);
}

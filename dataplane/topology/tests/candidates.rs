//! Candidate paths: hand-worked examples, and the one-search-per-source
//! computation behind `routes` compared with the straightforward
//! computation per (source, destination) pair kept here as a reference.

use std::collections::VecDeque;
use std::fmt::Write;

use lcmp_topology::{LinkId, Peer, PortPaths, SwitchId, Topology};
use proptest::prelude::*;

const MS: u64 = 1_000_000;
const G: u64 = 1_000_000_000;

/// s0..s4; ports of s0: 0 = L0 (to s1), 1 = L1 (to s2), 2 = L2 (to s1,
/// parallel to L0). Ports of s3: 0 = L3 (s1), 1 = L4 (s2), 2 = L5 (s4).
const DIAMOND: &str = r#"
[[switch]]
name = "s0"
prefixes = ["10.0.0.0/24"]
[[switch]]
name = "s1"
[[switch]]
name = "s2"
[[switch]]
name = "s3"
prefixes = ["10.0.3.0/24"]
[[switch]]
name = "s4"
prefixes = ["10.0.4.0/24", "10.0.5.0/24"]

[[link]]
a = "s0"
b = "s1"
rate = "10Gbps"
delay = "1ms"
[[link]]
a = "s0"
b = "s2"
rate = "40Gbps"
delay = "2ms"
[[link]]
a = "s0"
b = "s1"
rate = "25Gbps"
delay = "3ms"
[[link]]
a = "s1"
b = "s3"
rate = "100Gbps"
delay = "4ms"
[[link]]
a = "s2"
b = "s3"
rate = "10Gbps"
delay = "1ms"
[[link]]
a = "s3"
b = "s4"
rate = "40Gbps"
delay = "5ms"
"#;

#[allow(clippy::too_many_arguments)]
fn cand(
    port: u8,
    link: usize,
    next_hop: usize,
    hops: u32,
    delay_ms: u64,
    bottleneck_g: u64,
    local_delay_ms: u64,
    local_rate_g: u64,
) -> PortPaths {
    PortPaths {
        port,
        link: LinkId(link),
        next_hop: SwitchId(next_hop),
        hops,
        delay_ns: delay_ms * MS,
        bottleneck_bps: bottleneck_g * G,
        local_delay_ns: local_delay_ms * MS,
        local_rate_bps: local_rate_g * G,
    }
}

#[test]
fn diamond_with_parallel_links_by_hand() {
    let topo = Topology::parse(DIAMOND, "diamond.toml").unwrap();
    let s = SwitchId;
    // s0 -> s4, 3 hops: via L0 s0-s1-s3-s4 = 1+4+5 = 10 ms, min(10, 100,
    // 40) = 10G; via L1 s0-s2-s3-s4 = 2+1+5 = 8 ms, min(40, 10, 40) = 10G;
    // via L2 = 3+4+5 = 12 ms, min(25, 100, 40) = 25G.
    let to_s4 = vec![
        cand(0, 0, 1, 3, 10, 10, 1, 10),
        cand(1, 1, 2, 3, 8, 10, 2, 40),
        cand(2, 2, 1, 3, 12, 25, 3, 25),
    ];
    assert_eq!(topo.candidates(s(0), s(4)), to_s4);
    // s0 -> s3, 2 hops: 1+4 = 5 ms / 10G; 2+1 = 3 ms / 10G; 3+4 = 7 ms / 25G.
    assert_eq!(
        topo.candidates(s(0), s(3)),
        vec![
            cand(0, 0, 1, 2, 5, 10, 1, 10),
            cand(1, 1, 2, 2, 3, 10, 2, 40),
            cand(2, 2, 1, 2, 7, 25, 3, 25),
        ]
    );
    // s3 -> s0, 2 hops. Via s1 the best delay (4 + 1 over L0 = 5 ms) and
    // the best bottleneck (min(100, 25) over L2 = 25G) come from different
    // paths; via s2: 1 + 2 = 3 ms, min(10, 40) = 10G.
    assert_eq!(
        topo.candidates(s(3), s(0)),
        vec![
            cand(0, 3, 1, 2, 5, 25, 4, 100),
            cand(1, 4, 2, 2, 3, 10, 1, 10)
        ]
    );
    // s4 -> s0, 3 hops, one port: 5 + min(5, 3) = 8 ms, min(40, max(25, 10)).
    assert_eq!(
        topo.candidates(s(4), s(0)),
        vec![cand(0, 5, 3, 3, 8, 25, 5, 40)]
    );
    // Direct neighbours: only the direct links, parallel ones separately.
    assert_eq!(
        topo.candidates(s(0), s(1)),
        vec![
            cand(0, 0, 1, 1, 1, 10, 1, 10),
            cand(2, 2, 1, 1, 3, 25, 3, 25)
        ]
    );
    assert!(topo.candidates(s(2), s(2)).is_empty());

    // routes: destination switches in order (s3, s4), prefixes in file
    // order, the same candidates for both prefixes of s4.
    let routes = topo.routes(s(0));
    let got: Vec<(String, usize)> = routes
        .iter()
        .map(|r| (r.prefix.to_string(), r.dest_switch.0))
        .collect();
    assert_eq!(
        got,
        [
            ("10.0.3.0/24".to_string(), 3),
            ("10.0.4.0/24".to_string(), 4),
            ("10.0.5.0/24".to_string(), 4)
        ]
    );
    assert_eq!(routes[1].candidates, to_s4);
    assert_eq!(routes[2].candidates, to_s4);

    // L4 (s2-s3) down: s2 only leads back through s0, so s0 -> s4 keeps
    // the two ports towards s1; s0 -> s2 keeps its direct link.
    let cut = topo.with_links_down(&[LinkId(4)]);
    assert_eq!(
        cut.candidates(s(0), s(4)),
        vec![
            cand(0, 0, 1, 3, 10, 10, 1, 10),
            cand(2, 2, 1, 3, 12, 25, 3, 25)
        ]
    );
    assert_eq!(
        cut.candidates(s(0), s(2)),
        vec![cand(1, 1, 2, 1, 2, 40, 2, 40)]
    );
    // s2 -> s3 now goes s2-s0-s1-s3 (3 hops): 2+1+4 = 7 ms, min(40, 10,
    // 100) = 10G over L0 or min(40, 25, 100) = 25G over L2.
    assert_eq!(
        cut.candidates(s(2), s(3)),
        vec![cand(0, 1, 0, 3, 7, 25, 2, 40)]
    );
}

/// The switch-to-switch ports of `s` whose links are up:
/// (port, link, neighbour, rate, delay).
fn neighbours(topo: &Topology, s: SwitchId) -> Vec<(u8, LinkId, SwitchId, u64, u64)> {
    topo.ports(s)
        .iter()
        .filter_map(|p| match p.peer {
            Peer::Switch { link, switch, .. } if !topo.down_links().contains(&link) => {
                Some((p.index, link, switch, p.rate_bps, p.delay_ns))
            }
            _ => None,
        })
        .collect()
}

/// The straightforward computation for one pair: breadth-first search from
/// the destination, best delay and bottleneck of every switch's minimum-hop
/// paths to it, then the ports of `from` whose neighbour is one hop closer.
fn per_pair(topo: &Topology, from: SwitchId, to: SwitchId) -> Vec<PortPaths> {
    if from == to {
        return Vec::new();
    }
    let n = topo.switches().len();
    let mut hops: Vec<Option<u32>> = vec![None; n];
    let mut order = Vec::new();
    let mut queue = VecDeque::from([to]);
    hops[to.0] = Some(0);
    while let Some(s) = queue.pop_front() {
        order.push(s);
        for (_, _, nb, _, _) in neighbours(topo, s) {
            if hops[nb.0].is_none() {
                hops[nb.0] = Some(hops[s.0].unwrap() + 1);
                queue.push_back(nb);
            }
        }
    }
    let mut delay = vec![u64::MAX; n];
    let mut bottleneck = vec![0u64; n];
    delay[to.0] = 0;
    bottleneck[to.0] = u64::MAX;
    for &s in order.iter().skip(1) {
        let closer = hops[s.0].map(|h| h - 1);
        for (_, _, nb, rate, d) in neighbours(topo, s) {
            if hops[nb.0] == closer {
                delay[s.0] = delay[s.0].min(d.saturating_add(delay[nb.0]));
                bottleneck[s.0] = bottleneck[s.0].max(rate.min(bottleneck[nb.0]));
            }
        }
    }
    let Some(h) = hops[from.0] else {
        return Vec::new();
    };
    neighbours(topo, from)
        .into_iter()
        .filter(|&(_, _, nb, _, _)| hops[nb.0] == Some(h - 1))
        .map(|(port, link, nb, rate, d)| PortPaths {
            port,
            link,
            next_hop: nb,
            hops: h,
            delay_ns: d.saturating_add(delay[nb.0]),
            bottleneck_bps: rate.min(bottleneck[nb.0]),
            local_delay_ns: d,
            local_rate_bps: rate,
        })
        .collect()
}

#[derive(Debug, Clone)]
struct Net {
    n: usize,
    /// (a, b, rate in Gbps, delay in ms); the first n - 1 form a spanning
    /// tree, the rest may repeat pairs (parallel links).
    links: Vec<(usize, usize, u64, u64)>,
    /// Indices into `links` to fail (may disconnect the network).
    down: Vec<usize>,
}

fn net() -> impl Strategy<Value = Net> {
    (2usize..=24).prop_flat_map(|n| {
        let tree: Vec<_> = (1..n).map(|i| (0..i).prop_map(move |p| (p, i))).collect();
        let extra = prop::collection::vec((0..n, 0..n), 0..=2 * n);
        // Few distinct values, so that equal delays and rates (ties) are
        // common.
        let attrs = prop::collection::vec(
            (
                prop::sample::select(vec![10u64, 25, 40, 100]),
                prop::sample::select(vec![0u64, 1, 2, 5]),
            ),
            3 * n,
        );
        let down = prop::collection::vec(0..3 * n, 0..=3);
        (tree, extra, attrs, down).prop_map(move |(tree, extra, attrs, down)| {
            let links: Vec<_> = tree
                .into_iter()
                .chain(extra.into_iter().filter(|(a, b)| a != b))
                .zip(attrs)
                .map(|((a, b), (rate, delay))| (a, b, rate, delay))
                .collect();
            let down = down.into_iter().filter(|&d| d < links.len()).collect();
            Net { n, links, down }
        })
    })
}

fn to_toml(net: &Net) -> String {
    let mut s = String::new();
    for i in 0..net.n {
        // Every third switch is transit only.
        if i % 3 == 2 {
            writeln!(s, "[[switch]]\nname = \"s{i}\"").unwrap();
        } else {
            writeln!(
                s,
                "[[switch]]\nname = \"s{i}\"\nprefixes = [\"10.{i}.0.0/16\"]"
            )
            .unwrap();
        }
    }
    for &(a, b, rate, delay) in &net.links {
        writeln!(
            s,
            "[[link]]\na = \"s{a}\"\nb = \"s{b}\"\nrate = \"{rate}Gbps\"\ndelay = \"{delay}ms\""
        )
        .unwrap();
    }
    s
}

proptest! {
    #[test]
    fn one_search_per_source_matches_the_per_pair_computation(net in net()) {
        let topo = Topology::parse(&to_toml(&net), "random.toml").unwrap();
        let down: Vec<LinkId> = net.down.iter().map(|&d| LinkId(d)).collect();
        let topo = topo.with_links_down(&down);
        for s in topo.switches() {
            for t in topo.switches() {
                prop_assert_eq!(
                    topo.candidates(s.id, t.id),
                    per_pair(&topo, s.id, t.id),
                    "s{} -> s{}", s.id.0, t.id.0
                );
            }
            for r in topo.routes(s.id) {
                prop_assert_eq!(
                    &r.candidates,
                    &per_pair(&topo, s.id, r.dest_switch),
                    "route s{} -> {}", s.id.0, r.prefix
                );
            }
        }
    }
}

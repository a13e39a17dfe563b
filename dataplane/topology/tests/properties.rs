//! Random connected topologies: candidate sets are never empty, and they
//! match a brute-force enumeration of all simple paths.

use std::collections::BTreeMap;
use std::fmt::Write;

use lcmp_topology::{LinkId, SwitchId, Topology};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Net {
    /// Whether switch i delivers a prefix (others are transit only).
    has_prefix: Vec<bool>,
    /// (a, b, rate in Gbps, delay in us); the first n-1 form a spanning tree.
    links: Vec<(usize, usize, u64, u64)>,
}

fn net() -> impl Strategy<Value = Net> {
    (2usize..=7).prop_flat_map(|n| {
        let tree: Vec<_> = (1..n).map(|i| (0..i).prop_map(move |p| (p, i))).collect();
        let extra = prop::collection::vec((0..n, 0..n), 0..=8);
        let attrs = prop::collection::vec(
            (
                prop::sample::select(vec![25u64, 40, 100, 200, 400]),
                1u64..=50_000,
            ),
            n - 1 + 8,
        );
        let prefixes = prop::collection::vec(any::<bool>(), n);
        (tree, extra, attrs, prefixes).prop_map(|(tree, extra, attrs, has_prefix)| {
            let pairs = tree
                .into_iter()
                .chain(extra.into_iter().filter(|(a, b)| a != b));
            let links = pairs
                .zip(attrs)
                .map(|((a, b), (rate, delay))| (a, b, rate, delay))
                .collect();
            Net { has_prefix, links }
        })
    })
}

fn to_toml(net: &Net) -> String {
    let mut s = String::new();
    for (i, &p) in net.has_prefix.iter().enumerate() {
        writeln!(s, "[[switch]]\nname = \"s{i}\"").unwrap();
        if p {
            writeln!(s, "prefixes = [\"10.{i}.0.0/16\", \"fd00:{i}::/64\"]").unwrap();
        }
    }
    for &(a, b, rate, delay) in &net.links {
        writeln!(
            s,
            "[[link]]\na = \"s{a}\"\nb = \"s{b}\"\nrate = \"{rate}Gbps\"\ndelay = \"{delay}us\""
        )
        .unwrap();
    }
    s
}

/// Per first port: (hops, best delay, best bottleneck, local delay, local
/// rate) over all minimum-length simple paths from `from` to `to`.
type Oracle = BTreeMap<u8, (u32, u64, u64, u64, u64)>;

fn brute_force(topo: &Topology, from: SwitchId, to: SwitchId) -> Oracle {
    // All simple paths as lists of (port on the current switch, link).
    fn walk(
        topo: &Topology,
        at: SwitchId,
        to: SwitchId,
        seen: &mut Vec<SwitchId>,
        path: &mut Vec<(u8, u64, u64)>,
        out: &mut Vec<Vec<(u8, u64, u64)>>,
    ) {
        if at == to {
            out.push(path.clone());
            return;
        }
        for p in topo.ports(at) {
            let Some(next) = p.peer_switch() else {
                continue;
            };
            if seen.contains(&next) {
                continue;
            }
            seen.push(next);
            path.push((p.index, p.delay_ns, p.rate_bps));
            walk(topo, next, to, seen, path, out);
            path.pop();
            seen.pop();
        }
    }
    let mut paths = Vec::new();
    walk(topo, from, to, &mut vec![from], &mut Vec::new(), &mut paths);
    let Some(min) = paths.iter().map(Vec::len).min() else {
        return Oracle::new();
    };
    let mut oracle = Oracle::new();
    for path in paths.iter().filter(|p| p.len() == min) {
        let delay: u64 = path.iter().map(|h| h.1).sum();
        let bottleneck = path.iter().map(|h| h.2).min().unwrap();
        let (port, local_delay, local_rate) = path[0];
        let e = oracle
            .entry(port)
            .or_insert((min as u32, u64::MAX, 0, local_delay, local_rate));
        e.1 = e.1.min(delay);
        e.2 = e.2.max(bottleneck);
    }
    oracle
}

proptest! {
    #[test]
    fn candidates_match_brute_force(net in net()) {
        let text = to_toml(&net);
        let topo = Topology::parse(&text, "random.toml").unwrap();
        prop_assert!(topo.is_connected());
        for s in topo.switches() {
            // Port numbering: indices are positions, links in file order.
            for (i, p) in topo.ports(s.id).iter().enumerate() {
                prop_assert_eq!(usize::from(p.index), i);
            }
            for t in topo.switches() {
                if s.id == t.id {
                    continue;
                }
                let got = topo.candidates(s.id, t.id);
                prop_assert!(!got.is_empty(), "s{} -> s{}", s.id.0, t.id.0);
                let got: Oracle = got
                    .iter()
                    .map(|c| {
                        (c.port, (c.hops, c.delay_ns, c.bottleneck_bps, c.local_delay_ns, c.local_rate_bps))
                    })
                    .collect();
                prop_assert_eq!(got, brute_force(&topo, s.id, t.id), "s{} -> s{}", s.id.0, t.id.0);
            }
            // One route per remote prefix, none for local ones, none empty.
            let remote: usize = topo
                .switches()
                .iter()
                .filter(|t| t.id != s.id)
                .map(|t| t.prefixes.len())
                .sum();
            let routes = topo.routes(s.id);
            prop_assert_eq!(routes.len(), remote);
            prop_assert!(routes.iter().all(|r| !r.candidates.is_empty() && r.dest_switch != s.id));
        }
    }
}

/// A file cannot be partitioned, but failed links can cut a switch off:
/// its routes stay, without candidates.
#[test]
fn disconnected_switch_has_empty_candidates() {
    let text = "[[switch]]\nname = \"a\"\n[[switch]]\nname = \"b\"\nprefixes = [\"10.0.0.0/8\"]\n\
                [[link]]\na = \"a\"\nb = \"b\"\nrate = \"1Gbps\"\ndelay = \"1ms\"\n";
    let topo = Topology::parse(text, "t.toml").unwrap();
    assert!(topo.is_connected());
    let topo = topo.with_links_down(&[LinkId(0)]);
    assert!(!topo.is_connected());
    let routes = topo.routes(SwitchId(0));
    assert_eq!(routes.len(), 1);
    assert!(routes[0].candidates.is_empty());
    assert!(topo.candidates(SwitchId(0), SwitchId(1)).is_empty());
}

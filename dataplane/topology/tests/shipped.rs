//! The topology files shipped in `topologies/`: they load, and their
//! candidate sets match the paper/artifact.

use std::collections::BTreeMap;
use std::path::Path;

use lcmp_topology::units::{parse_delay, parse_rate};
use lcmp_topology::{IpNet, Peer, PortPaths, SwitchId, Topology};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../topologies");

const MS: u64 = 1_000_000;
const GBPS: u64 = 1_000_000_000;
const MBPS: u64 = 1_000_000;

fn load(name: &str) -> Topology {
    let path = Path::new(DIR).join(name);
    Topology::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

fn id(topo: &Topology, name: &str) -> SwitchId {
    topo.switch_by_name(name)
        .unwrap_or_else(|| panic!("no switch {name}"))
        .id
}

fn net(s: &str) -> IpNet {
    s.parse().unwrap()
}

/// The candidates of `from`'s route to `prefix`, keyed by next-hop name.
fn by_next_hop(topo: &Topology, from: &str, prefix: &str) -> BTreeMap<String, PortPaths> {
    let routes = topo.routes(id(topo, from));
    let route = routes
        .iter()
        .find(|r| r.prefix == net(prefix))
        .unwrap_or_else(|| panic!("{from} has no route to {prefix}"));
    let ports: Vec<u8> = route.candidates.iter().map(|c| c.port).collect();
    let mut sorted = ports.clone();
    sorted.sort_unstable();
    assert_eq!(ports, sorted, "candidates sorted by port");
    route
        .candidates
        .iter()
        .map(|c| (topo.switch(c.next_hop).name.clone(), c.clone()))
        .collect()
}

#[test]
fn eight_dc_dc1_to_dc8() {
    let topo = load("8dc.toml");
    assert_eq!(topo.switches().len(), 8);
    assert_eq!(topo.links().len(), 12);
    assert_eq!(topo.default_buffer_bytes(), 128 << 20);
    let c = by_next_hop(&topo, "dc1", "10.8.0.0/16");
    let want = [
        ("dc2", 50, 200),
        ("dc3", 500, 200),
        ("dc4", 20, 100),
        ("dc5", 200, 100),
        ("dc6", 10, 25),
        ("dc7", 100, 25),
    ];
    assert_eq!(c.len(), 6);
    for (port, (via, delay_ms, gbps)) in want.into_iter().enumerate() {
        let cand = &c[via];
        assert_eq!(cand.hops, 2, "via {via}");
        assert_eq!(cand.delay_ns, delay_ms * MS, "via {via}");
        assert_eq!(cand.delay_us(), delay_ms * 1_000, "via {via}");
        assert_eq!(cand.bottleneck_bps, gbps * GBPS, "via {via}");
        assert_eq!(cand.local_delay_ns, delay_ms * MS / 2, "via {via}");
        assert_eq!(cand.local_rate_bps, gbps * GBPS, "via {via}");
        assert_eq!(usize::from(cand.port), port, "via {via}");
        let p = topo.port(id(&topo, "dc1"), cand.port).unwrap();
        assert_eq!(p.peer_switch(), Some(id(&topo, via)));
        assert_eq!(p.buffer_bytes, 128 << 20);
    }
}

#[test]
fn eight_dc_dc2_to_dc3_goes_via_dc1_or_dc8() {
    let topo = load("8dc.toml");
    let c = by_next_hop(&topo, "dc2", "10.3.0.0/16");
    assert_eq!(c.keys().collect::<Vec<_>>(), ["dc1", "dc8"]);
    for cand in c.values() {
        assert_eq!(cand.hops, 2);
        assert_eq!(cand.delay_ns, 275 * MS);
        assert_eq!(cand.bottleneck_bps, 200 * GBPS);
    }
    // DC1's own prefix is local: no route to it from dc1.
    let dc1 = id(&topo, "dc1");
    let routes = topo.routes(dc1);
    assert_eq!(routes.len(), 7);
    assert!(routes.iter().all(|r| r.prefix != net("10.1.0.0/16")));
    assert!(topo.candidates(dc1, dc1).is_empty());
}

#[test]
fn thirteen_dc_dc1_to_dc13() {
    let topo = load("13dc.toml");
    assert_eq!(topo.switches().len(), 13);
    assert_eq!(topo.links().len(), 20);
    let c = by_next_hop(&topo, "dc1", "10.13.0.0/16");
    assert_eq!(c.len(), 1);
    let only = &c["dc3"];
    assert_eq!(only.hops, 5);
    // Best delay: 286-288-291-295-297-298, all 1 ms. Best bottleneck: the
    // all-200G paths via DC5 or DC7.
    assert_eq!(only.delay_ns, 5 * MS);
    assert_eq!(only.bottleneck_bps, 200 * GBPS);
    assert_eq!(only.local_delay_ns, MS);
}

#[test]
fn thirteen_dc_choices_at_dc3_and_dc6() {
    let topo = load("13dc.toml");
    let c = by_next_hop(&topo, "dc3", "10.13.0.0/16");
    assert_eq!(c.keys().collect::<Vec<_>>(), ["dc2", "dc5", "dc6", "dc7"]);
    let want = [
        // 288-287-293-297-298: 40G,40G,40G,200G; 1 ms each.
        ("dc2", 4, 40, 1, 40),
        // 288-290-296-297-298: 200G; 5,5,5,1 ms.
        ("dc5", 16, 200, 5, 200),
        // 288-291-295-297-298 (1 ms each) beats 288-291-294-297-298 (12 ms); 100G.
        ("dc6", 4, 100, 1, 100),
        // 288-292-296-297-298: 200G; 10,10,5,1 ms.
        ("dc7", 26, 200, 10, 200),
    ];
    for (via, delay_ms, gbps, local_ms, local_gbps) in want {
        let cand = &c[via];
        assert_eq!(cand.hops, 4, "via {via}");
        assert_eq!(cand.delay_ns, delay_ms * MS, "via {via}");
        assert_eq!(cand.bottleneck_bps, gbps * GBPS, "via {via}");
        assert_eq!(cand.local_delay_ns, local_ms * MS, "via {via}");
        assert_eq!(cand.local_rate_bps, local_gbps * GBPS, "via {via}");
    }
    let c = by_next_hop(&topo, "dc6", "10.13.0.0/16");
    assert_eq!(c.keys().collect::<Vec<_>>(), ["dc10", "dc9"]);
    assert_eq!(c["dc9"].delay_ns, 11 * MS);
    assert_eq!(c["dc10"].delay_ns, 3 * MS);
    assert_eq!(c["dc9"].hops, 3);
}

#[test]
fn two_dc_three_paths() {
    let topo = load("2dc-3path.toml");
    let s1 = id(&topo, "s1");
    for prefix in ["10.0.2.0/24", "fd00:2::/64"] {
        let c = by_next_hop(&topo, "s1", prefix);
        assert_eq!(c.keys().collect::<Vec<_>>(), ["p1", "p2", "p3"]);
        assert_eq!(
            (c["p1"].delay_ns, c["p1"].bottleneck_bps),
            (10 * MS, 1000 * MBPS)
        );
        assert_eq!(
            (c["p2"].delay_ns, c["p2"].bottleneck_bps),
            (20 * MS, 500 * MBPS)
        );
        assert_eq!(
            (c["p3"].delay_ns, c["p3"].bottleneck_bps),
            (4 * MS, 200 * MBPS)
        );
        assert!(c.values().all(|x| x.hops == 2));
        // Host links do not count in path attributes.
        assert_eq!(c["p1"].port, 0);
    }
    // Ports: three links, then the host.
    let ports = topo.ports(s1);
    assert_eq!(ports.len(), 4);
    let a = topo.host_by_name("a").unwrap();
    assert_eq!(ports[3].peer, Peer::Host { host: a.id });
    assert_eq!(a.port, 3);
    assert_eq!(a.delay_us(), 10);
    // Transit switches route both ways and deliver nothing themselves.
    let p2 = id(&topo, "p2");
    let routes = topo.routes(p2);
    assert_eq!(routes.len(), 4);
    assert!(routes
        .iter()
        .all(|r| r.candidates.len() == 1 && r.candidates[0].hops == 1));
    // Longest-prefix lookup of host addresses.
    let b = topo.host_by_name("b").unwrap();
    for addr in &b.addresses {
        assert_eq!(
            topo.switch_for_address(addr.addr()).map(|(_, s)| s),
            Some(id(&topo, "s2"))
        );
    }
}

/// Every shipped topology: every switch has a non-empty candidate set for
/// every prefix of every other switch, and all candidates are min-hop.
#[test]
fn every_remote_prefix_has_candidates() {
    for file in ["8dc.toml", "13dc.toml", "2dc-3path.toml"] {
        let topo = load(file);
        assert!(topo.is_connected(), "{file}");
        let remote_prefixes = |s: SwitchId| -> usize {
            topo.switches()
                .iter()
                .filter(|t| t.id != s)
                .map(|t| t.prefixes.len())
                .sum()
        };
        for s in topo.switches() {
            let routes = topo.routes(s.id);
            assert_eq!(routes.len(), remote_prefixes(s.id), "{file} {}", s.name);
            for r in &routes {
                assert!(
                    !r.candidates.is_empty(),
                    "{file}: {} -> {}",
                    s.name,
                    r.prefix
                );
                let hops = r.candidates[0].hops;
                assert!(r.candidates.iter().all(|c| c.hops == hops));
            }
        }
    }
}

/// The TOML files carry exactly the artifact's inter-DC links (DCI switch
/// `first_dci + k - 1` is `dc<k>`).
#[test]
fn dci_links_match_the_artifact_files() {
    for (toml_file, artifact) in [
        ("8dc.toml", "topology_LeafSpine_MultiDC8.txt"),
        ("13dc.toml", "topology_LeafSpine_MultiDC13.txt"),
    ] {
        let topo = load(toml_file);
        let text = std::fs::read_to_string(Path::new(DIR).join("artifact").join(artifact)).unwrap();
        let from_artifact = artifact_dci_links(&text);
        let mut from_toml: Vec<(String, String, u64, u64)> = topo
            .links()
            .iter()
            .map(|l| {
                (
                    topo.switch(l.a).name.clone(),
                    topo.switch(l.b).name.clone(),
                    l.rate_bps,
                    l.delay_ns,
                )
            })
            .collect();
        from_toml.sort();
        assert_eq!(from_toml, from_artifact, "{toml_file} vs {artifact}");
        assert_eq!(topo.switches().len(), dci_count(&text));
    }
}

fn data_tokens(text: &str) -> impl Iterator<Item = Vec<&str>> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.split_whitespace().collect())
}

fn dci_count(text: &str) -> usize {
    data_tokens(text).next().unwrap()[2].parse().unwrap()
}

/// Links of the artifact format whose ends are both DCI switches, as
/// (dc name, dc name, rate, delay), sorted.
fn artifact_dci_links(text: &str) -> Vec<(String, String, u64, u64)> {
    let mut lines = data_tokens(text);
    let header = lines.next().unwrap();
    let intra: usize = header[1].parse().unwrap();
    let dci: usize = header[2].parse().unwrap();
    let link_count: usize = header[3].parse().unwrap();
    let mut ids: Vec<u32> = Vec::new();
    while ids.len() < intra + dci {
        ids.extend(
            lines
                .next()
                .unwrap()
                .iter()
                .map(|t| t.parse::<u32>().unwrap()),
        );
    }
    let dci_ids = &ids[intra..];
    let dc_name = |node: u32| {
        dci_ids
            .iter()
            .position(|&d| d == node)
            .map(|i| format!("dc{}", i + 1))
    };
    let links: Vec<Vec<&str>> = lines.collect();
    assert_eq!(links.len(), link_count);
    let mut out: Vec<_> = links
        .iter()
        .filter_map(|l| {
            let a = dc_name(l[0].parse().unwrap())?;
            let b = dc_name(l[1].parse().unwrap())?;
            Some((a, b, parse_rate(l[2]).unwrap(), parse_delay(l[3]).unwrap()))
        })
        .collect();
    out.sort();
    out
}

#[test]
fn a_failed_far_link_removes_its_path_from_upstream_routes_only() {
    let t = load("2dc-3path.toml");
    let p1_s2 = t.link_between("p1", "s2").expect("p1-s2 exists");
    assert_eq!(t.link_between("s2", "p1"), Some(p1_s2));
    let down = t.with_links_down(&[p1_s2]);
    assert_eq!(down.down_links(), &[p1_s2]);
    let ports = |topo: &Topology, sw: &str, prefix: &str| -> Vec<u8> {
        let r = topo.routes(id(topo, sw));
        r.iter()
            .find(|r| r.prefix == net(prefix))
            .unwrap()
            .candidates
            .iter()
            .map(|c| c.port)
            .collect()
    };
    // s1 loses the path through p1 (port 0) although its own link is up.
    assert_eq!(ports(&t, "s1", "10.0.2.0/24"), vec![0, 1, 2]);
    assert_eq!(ports(&down, "s1", "10.0.2.0/24"), vec![1, 2]);
    assert_eq!(ports(&down, "s2", "10.0.1.0/24"), vec![1, 2]);
    // Ports keep their indices: s1's port 0 still leads to p1.
    assert_eq!(t.ports(id(&t, "s1")), down.ports(id(&down, "s1")));
    // p1 now reaches s2 the long way round, back through s1.
    assert_eq!(ports(&down, "p1", "10.0.2.0/24"), vec![0]);
}

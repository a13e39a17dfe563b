//! Candidate next hops for LCMP: the egress ports that lie on minimum-hop
//! paths to a destination switch, with the attributes of the best such path
//! behind each port.
//!
//! Only switch-to-switch links are considered. Hosts are not transit nodes,
//! and the host links at either end do not count in a path's delay or
//! capacity: the attributes describe the long-haul path between the two
//! switches.

use std::collections::VecDeque;

use ipnet::IpNet;

use crate::model::{LinkId, Peer, SwitchId, Topology};

/// One candidate egress port towards a destination switch: the minimum-hop
/// paths that leave through it, summarized (a name apart from the policy
/// engine's `Candidate` and the tables' `CandidatePath`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortPaths {
    /// Egress port index on the deciding switch.
    pub port: u8,
    /// The link behind the port.
    pub link: LinkId,
    /// The neighbouring switch at the far end of that link.
    pub next_hop: SwitchId,
    /// Switch-to-switch hops to the destination (the same for every
    /// candidate of a route: all are minimum-hop).
    pub hops: u32,
    /// The smallest total one-way delay of the minimum-hop paths that leave
    /// through this port (sum of link delays).
    pub delay_ns: u64,
    /// The largest bottleneck rate of the minimum-hop paths that leave
    /// through this port (a path's bottleneck is its slowest link). The path
    /// achieving it may differ from the one achieving `delay_ns`.
    pub bottleneck_bps: u64,
    /// One-way delay of the first (local) link only.
    pub local_delay_ns: u64,
    /// Rate of the first (local) link only.
    pub local_rate_bps: u64,
}

impl PortPaths {
    /// `delay_ns` in whole microseconds (rounded down).
    pub fn delay_us(&self) -> u64 {
        self.delay_ns / 1_000
    }

    /// `local_delay_ns` in whole microseconds (rounded down).
    pub fn local_delay_us(&self) -> u64 {
        self.local_delay_ns / 1_000
    }
}

/// The candidates of one switch for one remote destination prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrefixPaths {
    /// The destination prefix.
    pub prefix: IpNet,
    /// The switch that delivers `prefix`.
    pub dest_switch: SwitchId,
    /// Sorted by port index. Empty only if `dest_switch` is unreachable.
    pub candidates: Vec<PortPaths>,
}

impl Topology {
    /// The routes of `switch` to every prefix delivered by another switch,
    /// ordered by destination switch and then by the prefix's order in the
    /// file. Prefixes of `switch` itself are local and not listed.
    pub fn routes(&self, switch: SwitchId) -> Vec<PrefixPaths> {
        // One search from `switch` serves every destination.
        let paths = PathsFrom::new(self, switch);
        let mut routes = Vec::new();
        for dest in self.switches() {
            if dest.id == switch || dest.prefixes.is_empty() {
                continue;
            }
            let candidates = paths.candidates(dest.id);
            routes.extend(dest.prefixes.iter().map(|&prefix| PrefixPaths {
                prefix,
                dest_switch: dest.id,
                candidates: candidates.clone(),
            }));
        }
        routes
    }

    /// Calls `f(switch, destination, candidate)` for every candidate of every switch
    /// towards every other switch that delivers prefixes: what
    /// [`Topology::routes`] lists for all switches, once per destination
    /// switch (its prefixes share the candidates), in no set order and
    /// without collecting them.
    ///
    /// One search from each destination `t` serves every switch. Port `p`
    /// of switch `u`, to neighbour `v`, is a candidate towards `t` exactly
    /// when `v` is one hop closer to `t`; the minimum-hop paths through it
    /// are the link followed by `v`'s minimum-hop paths to `t`. So its best
    /// delay is the link's delay plus the smallest delay of `v`'s paths, its
    /// best bottleneck the smaller of the link's rate and the largest
    /// bottleneck of `v`'s paths; breadth-first from `t`, `v` is done before
    /// `u`. Time destinations x (switches + links), memory one search: a
    /// search from every switch ([`PathsFrom`]) costs that times the
    /// switches' port counts.
    pub(crate) fn for_each_candidate(&self, mut f: impl FnMut(SwitchId, SwitchId, &PortPaths)) {
        let n = self.switches().len();
        // The links that are up, in one array (a switch's from
        // `start[s]`): the ports also hold names and buffers, and a compact
        // copy keeps each search in cache.
        let mut start = Vec::with_capacity(n + 1);
        let mut adjacent = Vec::new();
        for s in self.switches() {
            start.push(adjacent.len());
            adjacent.extend(self.neighbours(s.id));
        }
        start.push(adjacent.len());

        const UNREACHED: u32 = u32::MAX;
        let mut hops = vec![UNREACHED; n];
        // Smallest delay and largest bottleneck of the minimum-hop paths to
        // the destination.
        let mut delay_ns = vec![0u64; n];
        let mut bottleneck_bps = vec![0u64; n];
        let mut queue: Vec<usize> = Vec::with_capacity(n);
        for t in self.switches().iter().filter(|s| !s.prefixes.is_empty()) {
            hops.fill(UNREACHED);
            queue.clear();
            hops[t.id.0] = 0;
            queue.push(t.id.0);
            let mut next = 0;
            while let Some(&u) = queue.get(next) {
                next += 1;
                let h = hops[u];
                if h == 0 {
                    // The destination: no link limits its paths.
                    (delay_ns[u], bottleneck_bps[u]) = (0, u64::MAX);
                } else {
                    (delay_ns[u], bottleneck_bps[u]) = (u64::MAX, 0);
                }
                for nb in &adjacent[start[u]..start[u + 1]] {
                    let v = nb.switch.0;
                    if hops[v] == UNREACHED {
                        hops[v] = h + 1;
                        queue.push(v);
                        continue;
                    }
                    if hops[v] + 1 != h {
                        continue;
                    }
                    let c = PortPaths {
                        port: nb.port,
                        link: nb.link,
                        next_hop: nb.switch,
                        hops: h,
                        delay_ns: nb.delay_ns.saturating_add(delay_ns[v]),
                        bottleneck_bps: nb.rate_bps.min(bottleneck_bps[v]),
                        local_delay_ns: nb.delay_ns,
                        local_rate_bps: nb.rate_bps,
                    };
                    delay_ns[u] = delay_ns[u].min(c.delay_ns);
                    bottleneck_bps[u] = bottleneck_bps[u].max(c.bottleneck_bps);
                    f(SwitchId(u), t.id, &c);
                }
            }
        }
    }

    /// The candidate ports of `from` towards switch `to`, sorted by port
    /// index: every port whose link leads one hop closer to `to` (by hop
    /// count over switch-to-switch links). Empty if `from == to` or `to` is
    /// unreachable.
    ///
    /// Each call searches from `from` anew; [`Topology::routes`] does it
    /// once for all destinations.
    pub fn candidates(&self, from: SwitchId, to: SwitchId) -> Vec<PortPaths> {
        PathsFrom::new(self, from).candidates(to)
    }

    /// Whether every switch can reach every other over switch links that
    /// are up (a topology without switches counts as connected).
    pub fn is_connected(&self) -> bool {
        self.components().len() <= 1
    }

    /// The groups of switches that reach each other over switch links that
    /// are up: each group in switch order, the groups ordered by their
    /// first switch. One group for a connected topology.
    pub(crate) fn components(&self) -> Vec<Vec<SwitchId>> {
        let mut seen = vec![false; self.switches().len()];
        let mut out = Vec::new();
        for s in self.switches() {
            if seen[s.id.0] {
                continue;
            }
            let group: Vec<SwitchId> = PathsFrom::hop_counts(self, s.id)
                .0
                .iter()
                .enumerate()
                .filter(|(_, h)| h.is_some())
                .map(|(i, _)| SwitchId(i))
                .collect();
            for m in &group {
                seen[m.0] = true;
            }
            out.push(group);
        }
        out
    }

    /// The same network with `links` failed: routes avoid them (a path
    /// that crosses one is no candidate), while every port keeps its index,
    /// so tables computed from it fit the running switches.
    pub fn with_links_down(&self, links: &[LinkId]) -> Topology {
        let mut t = self.clone();
        t.down_links = links.to_vec();
        t.down_links.sort();
        t.down_links.dedup();
        t
    }

    /// The links marked down by [`Topology::with_links_down`].
    pub fn down_links(&self) -> &[LinkId] {
        &self.down_links
    }

    /// The link between switches `a` and `b`, if one exists (either
    /// direction; the first in file order).
    pub fn link_between(&self, a: &str, b: &str) -> Option<LinkId> {
        let (a, b) = (self.switch_by_name(a)?.id, self.switch_by_name(b)?.id);
        self.ports(a).iter().find_map(|p| match p.peer {
            Peer::Switch { link, switch, .. } if switch == b => Some(link),
            _ => None,
        })
    }

    /// The switch-to-switch ports of `switch` whose links are up, in port
    /// order.
    fn neighbours(&self, switch: SwitchId) -> impl Iterator<Item = Neighbour> + '_ {
        self.ports(switch).iter().filter_map(|p| match p.peer {
            // Sorted by `with_links_down`.
            Peer::Switch { link, .. } if self.down_links.binary_search(&link).is_ok() => None,
            Peer::Switch { link, switch, .. } => Some(Neighbour {
                port: p.index,
                link,
                switch,
                rate_bps: p.rate_bps,
                delay_ns: p.delay_ns,
            }),
            Peer::Host { .. } => None,
        })
    }
}

struct Neighbour {
    port: u8,
    link: LinkId,
    switch: SwitchId,
    rate_bps: u64,
    delay_ns: u64,
}

/// The minimum-hop paths from one switch to every other, grouped by the
/// first hop (the egress port): for each reachable destination and each
/// port that starts a minimum-hop path to it, the best delay and the best
/// bottleneck of those paths.
///
/// A path from the source `s` of `h` hops to `t` through first hop `n` is
/// minimum-hop exactly when every switch on it is one hop further from `s`
/// than the one before, so these paths are the paths of the breadth-first
/// DAG from `s`; a dynamic programme over that DAG, nearest switches first,
/// gives every destination in one pass. This equals, per destination, the
/// ports whose neighbour is one hop closer to it, since links are symmetric.
struct PathsFrom {
    /// Hops from the source; `None`: unreachable.
    hops: Vec<Option<u32>>,
    /// The source's switch-to-switch ports that are up, in port order.
    first: Vec<Neighbour>,
    /// `best[t * first.len() + k]`: smallest delay and largest bottleneck
    /// of the minimum-hop paths to `t` that leave through `first[k]`;
    /// `None` if none does.
    best: Vec<Option<(u64, u64)>>,
}

impl PathsFrom {
    fn new(topo: &Topology, source: SwitchId) -> PathsFrom {
        let (hops, order) = Self::hop_counts(topo, source);
        let first: Vec<Neighbour> = topo.neighbours(source).collect();
        let k = first.len();
        let mut best: Vec<Option<(u64, u64)>> = vec![None; topo.switches().len() * k];
        // One hop: only the direct links (parallel links are separate
        // first hops).
        for (i, nb) in first.iter().enumerate() {
            best[nb.switch.0 * k + i] = Some((nb.delay_ns, nb.rate_bps));
        }
        // Further: extend the paths of the switches one hop nearer. `order`
        // is by non-decreasing hops, so those are final already.
        for &t in &order {
            let Some(h) = hops[t.0].filter(|&h| h >= 2) else {
                continue;
            };
            for nb in topo.neighbours(t) {
                if hops[nb.switch.0] != Some(h - 1) {
                    continue;
                }
                for i in 0..k {
                    let Some((d, b)) = best[nb.switch.0 * k + i] else {
                        continue;
                    };
                    let d = d.saturating_add(nb.delay_ns);
                    let b = b.min(nb.rate_bps);
                    let slot = &mut best[t.0 * k + i];
                    *slot = Some(match *slot {
                        None => (d, b),
                        Some((d0, b0)) => (d0.min(d), b0.max(b)),
                    });
                }
            }
        }
        PathsFrom { hops, first, best }
    }

    /// Breadth-first hop counts from `source` over links that are up, and
    /// the reached switches by non-decreasing hop count.
    fn hop_counts(topo: &Topology, source: SwitchId) -> (Vec<Option<u32>>, Vec<SwitchId>) {
        let n = topo.switches().len();
        let mut hops = vec![None; n];
        let mut order = Vec::with_capacity(n);
        let mut queue = VecDeque::from([source]);
        hops[source.0] = Some(0);
        while let Some(s) = queue.pop_front() {
            order.push(s);
            let next = hops[s.0].map(|h| h + 1);
            for nb in topo.neighbours(s) {
                if hops[nb.switch.0].is_none() {
                    hops[nb.switch.0] = next;
                    queue.push_back(nb.switch);
                }
            }
        }
        (hops, order)
    }

    /// The candidates towards `to`, in port order (as `first` is).
    fn candidates(&self, to: SwitchId) -> Vec<PortPaths> {
        let hops = match self.hops[to.0] {
            Some(h) if h > 0 => h,
            _ => return Vec::new(),
        };
        let k = self.first.len();
        self.first
            .iter()
            .zip(&self.best[to.0 * k..(to.0 + 1) * k])
            .filter_map(|(nb, best)| {
                let (delay_ns, bottleneck_bps) = (*best)?;
                Some(PortPaths {
                    port: nb.port,
                    link: nb.link,
                    next_hop: nb.switch,
                    hops,
                    delay_ns,
                    bottleneck_bps,
                    local_delay_ns: nb.delay_ns,
                    local_rate_bps: nb.rate_bps,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt::Write as _;

    /// Every (switch, destination, candidate) as [`Topology::routes`] gives
    /// them (once per destination switch), sorted.
    fn by_routes(t: &Topology) -> Vec<(SwitchId, SwitchId, PortPaths)> {
        let mut out = Vec::new();
        for s in t.switches() {
            let mut last = None;
            for r in t.routes(s.id) {
                if last == Some(r.dest_switch) {
                    continue;
                }
                last = Some(r.dest_switch);
                out.extend(r.candidates.into_iter().map(|c| (s.id, r.dest_switch, c)));
            }
        }
        out.sort_by_key(|(s, d, c)| (*s, *d, c.port));
        out
    }

    fn by_destination(t: &Topology) -> Vec<(SwitchId, SwitchId, PortPaths)> {
        let mut out = Vec::new();
        t.for_each_candidate(|s, d, c| out.push((s, d, c.clone())));
        out.sort_by_key(|(s, d, c)| (*s, *d, c.port));
        out
    }

    /// `n` switches on a ring with chords and parallel links, delays and
    /// rates varied by a fixed pseudo-random sequence; every third switch
    /// is transit (no prefix).
    fn mesh(n: usize, extra: usize, seed: u64) -> Topology {
        let mut x = seed;
        let mut next = |m: usize| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (x >> 33) as usize % m
        };
        let mut t = String::new();
        for i in 0..n {
            let p = if i % 3 == 2 {
                String::new()
            } else {
                format!("prefixes = [\"10.{i}.0.0/16\", \"fd00:{i}::/64\"]")
            };
            let _ = write!(t, "[[switch]]\nname = \"s{i}\"\n{p}\n\n");
        }
        let mut links: Vec<(usize, usize)> = (0..n).map(|i| (i, (i + 1) % n)).collect();
        while links.len() < n + extra {
            let (a, b) = (next(n), next(n));
            if a != b {
                links.push((a, b));
            }
        }
        // A parallel link.
        links.push(links[0]);
        for (a, b) in links {
            let _ = write!(
                t,
                "[[link]]\na = \"s{a}\"\nb = \"s{b}\"\nrate = \"{}Gbps\"\ndelay = \"{}us\"\n\n",
                [1, 10, 25, 100][next(4)],
                1 + next(5) * 100
            );
        }
        Topology::parse(&t, "mesh.toml").unwrap()
    }

    #[test]
    fn one_search_per_destination_finds_what_one_per_switch_does() {
        for (n, extra, seed) in [(2, 0, 1), (5, 3, 2), (12, 10, 3), (30, 15, 4), (40, 60, 5)] {
            let t = mesh(n, extra, seed);
            let want = by_routes(&t);
            assert!(!want.is_empty());
            assert_eq!(by_destination(&t), want, "mesh({n}, {extra}, {seed})");
            // With links down, some switches cut off.
            let down: Vec<LinkId> = t.links().iter().step_by(3).map(|l| l.id).collect();
            let cut = t.with_links_down(&down);
            assert_eq!(
                by_destination(&cut),
                by_routes(&cut),
                "mesh({n}, {extra}, {seed}) cut"
            );
        }
        for file in [
            include_str!("../../../topologies/8dc-fabric.toml"),
            include_str!("../../../topologies/13dc-fabric.toml"),
            include_str!("../../../topologies/geant2009.toml"),
        ] {
            let t = Topology::parse(file, "shipped.toml").unwrap();
            assert_eq!(by_destination(&t), by_routes(&t));
        }
    }
}

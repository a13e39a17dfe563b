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

/// One candidate egress port towards a destination switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
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

impl Candidate {
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
pub struct Route {
    /// The destination prefix.
    pub prefix: IpNet,
    /// The switch that delivers `prefix`.
    pub dest_switch: SwitchId,
    /// Sorted by port index. Empty only if `dest_switch` is unreachable.
    pub candidates: Vec<Candidate>,
}

impl Topology {
    /// The routes of `switch` to every prefix delivered by another switch,
    /// ordered by destination switch and then by the prefix's order in the
    /// file. Prefixes of `switch` itself are local and not listed.
    pub fn routes(&self, switch: SwitchId) -> Vec<Route> {
        let mut routes = Vec::new();
        for dest in self.switches() {
            if dest.id == switch || dest.prefixes.is_empty() {
                continue;
            }
            let candidates = self.candidates(switch, dest.id);
            routes.extend(dest.prefixes.iter().map(|&prefix| Route {
                prefix,
                dest_switch: dest.id,
                candidates: candidates.clone(),
            }));
        }
        routes
    }

    /// The candidate ports of `from` towards switch `to`, sorted by port
    /// index: every port whose link leads one hop closer to `to` (by hop
    /// count over switch-to-switch links). Empty if `from == to` or `to` is
    /// unreachable.
    pub fn candidates(&self, from: SwitchId, to: SwitchId) -> Vec<Candidate> {
        if from == to {
            return Vec::new();
        }
        let tree = PathTree::towards(self, to);
        let Some(hops) = tree.hops[from.0] else {
            return Vec::new();
        };
        let mut out: Vec<Candidate> = self
            .neighbours(from)
            .filter(|n| tree.hops[n.switch.0] == Some(hops - 1))
            .map(|n| Candidate {
                port: n.port,
                link: n.link,
                next_hop: n.switch,
                hops,
                delay_ns: n.delay_ns.saturating_add(tree.delay_ns[n.switch.0]),
                bottleneck_bps: n.rate_bps.min(tree.bottleneck_bps[n.switch.0]),
                local_delay_ns: n.delay_ns,
                local_rate_bps: n.rate_bps,
            })
            .collect();
        out.sort_by_key(|c| c.port);
        out
    }

    /// Whether every switch can reach every other over switch links.
    pub fn is_connected(&self) -> bool {
        match self.switches().first() {
            None => true,
            Some(s) => PathTree::towards(self, s.id)
                .hops
                .iter()
                .all(Option::is_some),
        }
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
            Peer::Switch { link, .. } if self.down_links.contains(&link) => None,
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

/// Hop distances to one destination and, for every switch, the best delay
/// and the best bottleneck over its minimum-hop paths to it.
struct PathTree {
    hops: Vec<Option<u32>>,
    delay_ns: Vec<u64>,
    bottleneck_bps: Vec<u64>,
}

impl PathTree {
    fn towards(topo: &Topology, dest: SwitchId) -> PathTree {
        let n = topo.switches().len();
        let mut hops = vec![None; n];
        // Breadth-first from the destination; links are symmetric, so the
        // distance from `dest` is the distance to it. `order` lists switches
        // by non-decreasing distance.
        let mut order = Vec::with_capacity(n);
        let mut queue = VecDeque::from([dest]);
        hops[dest.0] = Some(0);
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

        // Dynamic programme over the min-hop DAG, nearest switches first:
        // every edge towards `dest` goes from distance h to h - 1, whose
        // values are final by the time distance h is processed.
        let mut delay_ns = vec![u64::MAX; n];
        let mut bottleneck_bps = vec![0; n];
        delay_ns[dest.0] = 0;
        bottleneck_bps[dest.0] = u64::MAX;
        for &s in order.iter().skip(1) {
            let closer = hops[s.0].map(|h| h - 1);
            for nb in topo.neighbours(s) {
                if hops[nb.switch.0] != closer {
                    continue;
                }
                let d = nb.delay_ns.saturating_add(delay_ns[nb.switch.0]);
                let b = nb.rate_bps.min(bottleneck_bps[nb.switch.0]);
                delay_ns[s.0] = delay_ns[s.0].min(d);
                bottleneck_bps[s.0] = bottleneck_bps[s.0].max(b);
            }
        }
        PathTree {
            hops,
            delay_ns,
            bottleneck_bps,
        }
    }
}

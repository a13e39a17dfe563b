//! Longest-prefix-match table: destination address -> the route's
//! candidate next hops. Consulted only for packets that miss the flow cache
//! (the first packet of a flow, or failover), so a hash map per prefix
//! length is fast enough and keeps IPv6 simple.

use std::net::{Ipv4Addr, Ipv6Addr};

use foldhash::HashMap;
use ipnet::IpNet;
use lcmp_policy::CandidateSet;

/// One route: a prefix and its candidates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// Destination prefix.
    pub prefix: IpNet,
    /// Candidate egress ports with their C_path.
    pub candidates: CandidateSet,
}

/// Routes by longest prefix match, IPv4 and IPv6.
#[derive(Clone, Debug, Default)]
pub struct RoutingTable {
    routes: Vec<Route>,
    /// (prefix length, masked network -> route index), longest first.
    v4: Vec<(u8, HashMap<u32, usize>)>,
    v6: Vec<(u8, HashMap<u128, usize>)>,
}

fn mask4(len: u8) -> u32 {
    u32::MAX.checked_shl(32 - len as u32).unwrap_or(0)
}

fn mask6(len: u8) -> u128 {
    u128::MAX.checked_shl(128 - len as u32).unwrap_or(0)
}

/// The map of prefix length `len` in a longest-first list, made if absent.
fn slot<K>(by_len: &mut Vec<(u8, HashMap<K, usize>)>, len: u8) -> &mut HashMap<K, usize> {
    let at = match by_len.iter().position(|(l, _)| *l <= len) {
        Some(i) if by_len[i].0 == len => i,
        Some(i) => {
            by_len.insert(i, (len, HashMap::default()));
            i
        }
        None => {
            by_len.push((len, HashMap::default()));
            by_len.len() - 1
        }
    };
    &mut by_len[at].1
}

impl RoutingTable {
    /// A table of `routes`. A prefix given twice keeps the last (both stay
    /// in [`Self::routes`]; lookups find the last).
    pub fn new(routes: Vec<Route>) -> Self {
        let mut t = RoutingTable::default();
        for (i, r) in routes.iter().enumerate() {
            match r.prefix {
                IpNet::V4(p) => {
                    let len = p.prefix_len();
                    let net = u32::from(p.network()) & mask4(len);
                    t.slot4(len).insert(net, i);
                }
                IpNet::V6(p) => {
                    let len = p.prefix_len();
                    let net = u128::from(p.network()) & mask6(len);
                    t.slot6(len).insert(net, i);
                }
            }
        }
        t.routes = routes;
        t
    }

    fn slot4(&mut self, len: u8) -> &mut HashMap<u32, usize> {
        slot(&mut self.v4, len)
    }

    fn slot6(&mut self, len: u8) -> &mut HashMap<u128, usize> {
        slot(&mut self.v6, len)
    }

    /// The route of an IPv4 destination.
    pub fn lookup_v4(&self, dst: Ipv4Addr) -> Option<&Route> {
        self.find_v4(dst).map(|(_, r)| r)
    }

    /// The route of an IPv6 destination.
    pub fn lookup_v6(&self, dst: Ipv6Addr) -> Option<&Route> {
        self.find_v6(dst).map(|(_, r)| r)
    }

    /// The route of an IPv4 destination and its index in [`Self::routes`].
    #[inline]
    pub fn find_v4(&self, dst: Ipv4Addr) -> Option<(usize, &Route)> {
        let a = u32::from(dst);
        self.v4
            .iter()
            .find_map(|(len, m)| m.get(&(a & mask4(*len))))
            .map(|&i| (i, &self.routes[i]))
    }

    /// The route of an IPv6 destination and its index in [`Self::routes`].
    #[inline]
    pub fn find_v6(&self, dst: Ipv6Addr) -> Option<(usize, &Route)> {
        let a = u128::from(dst);
        self.v6
            .iter()
            .find_map(|(len, m)| m.get(&(a & mask6(*len))))
            .map(|&i| (i, &self.routes[i]))
    }

    /// Every route.
    pub fn routes(&self) -> &[Route] {
        &self.routes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lcmp_policy::Candidate;

    fn route(prefix: &str, port: u8) -> Route {
        Route {
            prefix: prefix.parse().unwrap(),
            candidates: CandidateSet::new(&[Candidate {
                port,
                c_path: 0,
                capacity_bps: 1,
            }])
            .unwrap(),
        }
    }

    fn port_of(r: Option<&Route>) -> Option<u8> {
        r.map(|r| r.candidates.as_slice()[0].port)
    }

    #[test]
    fn longest_prefix_wins() {
        let t = RoutingTable::new(vec![
            route("10.0.0.0/8", 1),
            route("10.1.0.0/16", 2),
            route("10.1.2.3/32", 3),
            route("0.0.0.0/0", 4),
            route("fd00::/16", 5),
            route("fd00:2::/64", 6),
        ]);
        assert_eq!(port_of(t.lookup_v4("10.1.2.3".parse().unwrap())), Some(3));
        assert_eq!(port_of(t.lookup_v4("10.1.2.4".parse().unwrap())), Some(2));
        assert_eq!(port_of(t.lookup_v4("10.9.0.1".parse().unwrap())), Some(1));
        assert_eq!(port_of(t.lookup_v4("192.0.2.1".parse().unwrap())), Some(4));
        assert_eq!(port_of(t.lookup_v6("fd00:2::9".parse().unwrap())), Some(6));
        assert_eq!(port_of(t.lookup_v6("fd00:3::9".parse().unwrap())), Some(5));
        assert_eq!(port_of(t.lookup_v6("2001:db8::1".parse().unwrap())), None);
    }

    #[test]
    fn empty_table_has_no_route() {
        let t = RoutingTable::new(vec![]);
        assert!(t.lookup_v4("10.0.0.1".parse().unwrap()).is_none());
    }
}

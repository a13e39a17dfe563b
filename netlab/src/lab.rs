//! A topology built out of namespaces and veth pairs.

use std::collections::HashSet;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use lcmp_topology::{HostId, IpNet, LinkId, Peer, SwitchId, Topology};

use crate::netns::Netns;
use crate::{Error, Result};

/// An Ethernet address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Mac(pub [u8; 6]);

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

impl std::str::FromStr for Mac {
    type Err = Error;

    fn from_str(s: &str) -> Result<Mac> {
        let mut m = [0u8; 6];
        let mut parts = s.trim().split(':');
        for b in &mut m {
            let p = parts
                .next()
                .ok_or_else(|| Error::new(format!("bad MAC {s:?}")))?;
            *b = u8::from_str_radix(p, 16).map_err(|_| Error::new(format!("bad MAC {s:?}")))?;
        }
        if parts.next().is_some() {
            return Err(Error::new(format!("bad MAC {s:?}")));
        }
        Ok(Mac(m))
    }
}

/// The deterministic, locally administered MAC of a testbed interface:
/// `02:4c:<kind>:<node hi>:<node lo>:<port>`, kind 0 for a switch port and
/// 1 for a host. Namespaces isolate testbeds, so equal MACs in two testbeds
/// never meet.
fn mac_for(kind: u8, node: usize, port: u8) -> Mac {
    Mac([0x02, 0x4c, kind, (node >> 8) as u8, node as u8, port])
}

/// What is behind a switch port in the testbed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortPeer {
    /// A link to port `port` of another switch.
    Switch {
        /// The topology link.
        link: LinkId,
        /// The neighbour.
        switch: SwitchId,
        /// Its port index.
        port: u8,
    },
    /// An end host.
    Host(HostId),
}

/// One switch port: a veth end inside the switch's namespace.
#[derive(Debug, Clone)]
pub struct PortNode {
    /// Port index in the topology (`Topology::ports(switch)[i].index`).
    pub index: u8,
    /// Interface name inside the switch namespace: the topology's ifname if
    /// it gives one, else `p<index>`.
    pub ifname: String,
    /// This interface's MAC.
    pub mac: Mac,
    /// The MAC of the veth end at the other side (neighbour switch port or
    /// host interface).
    pub peer_mac: Mac,
    /// Interface name of the other end (in the peer's namespace).
    pub peer_ifname: String,
    /// What the port leads to.
    pub peer: PortPeer,
    /// Host ports only: the gateway addresses configured on this interface
    /// (as /32 and /128), which the host uses as next hop.
    pub gateways: Vec<IpAddr>,
}

/// A switch: its namespace and ports.
#[derive(Debug)]
pub struct SwitchNode {
    /// Topology name.
    pub name: String,
    /// Topology id.
    pub id: SwitchId,
    /// Ports in index order (`ports[i].index == i`).
    pub ports: Vec<PortNode>,
    /// The namespace (deleted with the testbed).
    pub netns: Netns,
}

impl SwitchNode {
    /// Port `index`. Panics if there is no such port.
    pub fn port(&self, index: u8) -> &PortNode {
        &self.ports[usize::from(index)]
    }

    /// Interface names in port-index order.
    pub fn ifnames(&self) -> Vec<&str> {
        self.ports.iter().map(|p| p.ifname.as_str()).collect()
    }

    /// `["--port", "<ifname of port 0>", "--port", ...]` in index order,
    /// for starting a switch daemon inside [`SwitchNode::netns`].
    pub fn port_args(&self) -> Vec<String> {
        self.ports
            .iter()
            .flat_map(|p| ["--port".to_string(), p.ifname.clone()])
            .collect()
    }
}

/// An end host: namespace, interface and addresses.
#[derive(Debug)]
pub struct HostNode {
    /// Topology name.
    pub name: String,
    /// Topology id.
    pub id: HostId,
    /// Interface name (`eth0` unless the topology says otherwise).
    pub ifname: String,
    /// Its MAC.
    pub mac: Mac,
    /// Addresses with prefix length, as in the topology.
    pub addresses: Vec<IpNet>,
    /// Default gateways, one per address family present (IPv4 first).
    pub gateways: Vec<IpAddr>,
    /// The switch it hangs off.
    pub switch: SwitchId,
    /// The switch port index.
    pub switch_port: u8,
    /// Interface name of that port in the switch namespace.
    pub switch_ifname: String,
    /// MAC of that port (the static neighbour entry for the gateways).
    pub switch_mac: Mac,
    /// The namespace (deleted with the testbed).
    pub netns: Netns,
}

impl HostNode {
    /// The first IPv4 address.
    pub fn ipv4(&self) -> Option<Ipv4Addr> {
        self.addresses.iter().find_map(|a| match a.addr() {
            IpAddr::V4(v) => Some(v),
            IpAddr::V6(_) => None,
        })
    }

    /// The first IPv6 address.
    pub fn ipv6(&self) -> Option<Ipv6Addr> {
        self.addresses.iter().find_map(|a| match a.addr() {
            IpAddr::V6(v) => Some(v),
            IpAddr::V4(_) => None,
        })
    }
}

/// How the links between two switches are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SwitchLinks {
    /// A veth pair, an end in each switch's namespace.
    #[default]
    Veth,
    /// Not at all: the switches, run in one process, join them in memory
    /// (`lcmp-switch lcmp --links memory`). Host links stay veths.
    Memory,
}

impl SwitchLinks {
    /// The name on command lines and in files (`veth`, `memory`).
    pub fn name(self) -> &'static str {
        match self {
            SwitchLinks::Veth => "veth",
            SwitchLinks::Memory => "memory",
        }
    }

    /// From [`SwitchLinks::name`]; the error names both.
    pub fn from_name(s: &str) -> std::result::Result<SwitchLinks, String> {
        match s {
            "veth" => Ok(SwitchLinks::Veth),
            "memory" => Ok(SwitchLinks::Memory),
            other => Err(format!("links {other:?}: expected \"memory\" or \"veth\"")),
        }
    }
}

/// Namespaces and veths built from a [`Topology`]; everything is deleted
/// when it drops (each namespace has its own guard).
#[derive(Debug)]
pub struct Lab {
    topo: Topology,
    /// How its switch-to-switch links are made.
    pub switch_links: SwitchLinks,
    /// Switches in topology order (`switches[id.0]`).
    pub switches: Vec<SwitchNode>,
    /// Hosts in topology order (`hosts[id.0]`).
    pub hosts: Vec<HostNode>,
}

/// Sysctls set in every namespace before its interfaces exist, so the
/// `default` values apply to them.
const BASE_SYSCTLS: &[&str] = &[
    "net.ipv6.conf.all.disable_ipv6=0",
    "net.ipv6.conf.default.disable_ipv6=0",
    "net.ipv6.conf.all.accept_dad=0",
    "net.ipv6.conf.default.accept_dad=0",
    "net.ipv6.conf.all.dad_transmits=0",
    "net.ipv6.conf.default.dad_transmits=0",
    "net.ipv4.conf.all.rp_filter=0",
    "net.ipv4.conf.default.rp_filter=0",
];

/// The host address of link `i`'s end `a` (`b` is the next one), as /31.
fn link_v4(i: usize, b_end: bool) -> Ipv4Addr {
    let base = u32::from(Ipv4Addr::new(169, 254, 0, 0)) + 2 * i as u32 + u32::from(b_end);
    Ipv4Addr::from(base)
}

/// The link-local address of a link end (every link reuses the pair).
fn link_v6(b_end: bool) -> Ipv6Addr {
    Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, if b_end { 2 } else { 1 })
}

/// The gateway for host address `net`: the first address of its subnet
/// (falling back to the switch prefix that contains it, for /31, /32, /127
/// and /128 hosts) that is neither the subnet's own address nor any host's.
fn pick_gateway(net: &IpNet, switch_prefixes: &[IpNet], used: &HashSet<IpAddr>) -> Option<IpAddr> {
    let mut spaces = vec![net.trunc()];
    spaces.extend(
        switch_prefixes
            .iter()
            .filter(|p| p.contains(&net.addr()))
            .copied(),
    );
    spaces.into_iter().find_map(|space| {
        space
            .hosts()
            .take(4096)
            .find(|a| *a != space.network() && *a != net.addr() && !used.contains(a))
    })
}

fn family_flag(addr: &IpAddr) -> &'static str {
    if addr.is_ipv4() {
        "-4"
    } else {
        "-6"
    }
}

impl Lab {
    /// Builds the testbed: one namespace per switch and per host, one veth
    /// pair per link and per host attachment (created directly inside the
    /// two namespaces, so names only need to be unique per namespace),
    /// TSO/GSO/GRO and TX checksum offload off on every veth, host
    /// addresses, gateway addresses on the switch side of host ports, static
    /// neighbour entries both ways on host links and default routes on the
    /// hosts. Switches forward nothing yet: call
    /// [`Lab::kernel_routing`], or start a switch on the ports.
    pub fn from_topology(topo: &Topology) -> Result<Lab> {
        Self::build(topo, &mut |node| Netns::new(node))
    }

    /// [`Lab::from_topology`] with namespaces made by `make_ns(node
    /// name)`, e.g. [`Netns::create`] with a testbed-specific name. If
    /// building fails, the namespaces made so far are deleted (their
    /// guards drop) unless `make_ns` returned persisted ones.
    pub fn build(topo: &Topology, make_ns: &mut dyn FnMut(&str) -> Result<Netns>) -> Result<Lab> {
        Self::build_with(topo, make_ns, SwitchLinks::Veth)
    }

    /// [`Lab::build`] with the switch-to-switch links made as `links`
    /// says: with [`SwitchLinks::Memory`] only the host links are veths.
    pub fn build_with(
        topo: &Topology,
        make_ns: &mut dyn FnMut(&str) -> Result<Netns>,
        links: SwitchLinks,
    ) -> Result<Lab> {
        let mut switch_ns = Vec::new();
        for sw in topo.switches() {
            let ns = make_ns(&sw.name)?;
            ns.sysctl(BASE_SYSCTLS)?;
            switch_ns.push(ns);
        }
        let mut host_ns = Vec::new();
        for h in topo.hosts() {
            let ns = make_ns(&h.name)?;
            ns.sysctl(BASE_SYSCTLS)?;
            host_ns.push(ns);
        }
        let tb = Self::layout(topo, switch_ns, host_ns, links);
        tb.wire()?;
        Ok(tb)
    }

    /// The testbed of `topo` whose namespaces already exist (built earlier,
    /// possibly by another process), named by `ns_name(node name)`, its
    /// switch links made as `links` says; nothing is created, and nothing
    /// is deleted when it drops.
    pub fn attach(
        topo: &Topology,
        ns_name: &dyn Fn(&str) -> String,
        links: SwitchLinks,
    ) -> Result<Lab> {
        let switch_ns = topo
            .switches()
            .iter()
            .map(|s| Netns::open(&ns_name(&s.name)))
            .collect::<Result<Vec<_>>>()?;
        let host_ns = topo
            .hosts()
            .iter()
            .map(|h| Netns::open(&ns_name(&h.name)))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self::layout(topo, switch_ns, host_ns, links))
    }

    /// Keeps every namespace when the testbed drops (see [`Netns::persist`]).
    pub fn persist(&mut self) {
        for s in &mut self.switches {
            s.netns.persist();
        }
        for h in &mut self.hosts {
            h.netns.persist();
        }
    }

    /// Ports, MACs, gateways and host records of `topo` over the given
    /// namespaces (in topology order); creates nothing.
    fn layout(
        topo: &Topology,
        switch_ns: Vec<Netns>,
        host_ns: Vec<Netns>,
        switch_links: SwitchLinks,
    ) -> Lab {
        let port_ifname = |sw: SwitchId, idx: u8| -> String {
            topo.port(sw, idx)
                .and_then(|p| p.ifname.clone())
                .unwrap_or_else(|| format!("p{idx}"))
        };
        let host_ifname = |h: HostId| -> String { topo.host(h).ifname_or_default().to_string() };

        let used: HashSet<IpAddr> = topo
            .hosts()
            .iter()
            .flat_map(|h| h.addresses.iter().map(|a| a.addr()))
            .collect();
        let gateways: Vec<Vec<IpAddr>> = topo
            .hosts()
            .iter()
            .map(|h| {
                let prefixes = &topo.switch(h.switch).prefixes;
                let v4 = h.addresses.iter().find(|a| a.addr().is_ipv4());
                let v6 = h.addresses.iter().find(|a| a.addr().is_ipv6());
                [v4, v6]
                    .into_iter()
                    .flatten()
                    .filter_map(|a| pick_gateway(a, prefixes, &used))
                    .collect()
            })
            .collect();

        let mut switches = Vec::new();
        for (sw, ns) in topo.switches().iter().zip(switch_ns) {
            let ports = topo
                .ports(sw.id)
                .iter()
                .map(|p| {
                    let (peer, peer_mac, peer_ifname, gws) = match p.peer {
                        Peer::Switch { link, switch, port } => (
                            PortPeer::Switch { link, switch, port },
                            mac_for(0, switch.0, port),
                            port_ifname(switch, port),
                            Vec::new(),
                        ),
                        Peer::Host { host } => (
                            PortPeer::Host(host),
                            mac_for(1, host.0, 0),
                            host_ifname(host),
                            gateways[host.0].clone(),
                        ),
                    };
                    PortNode {
                        index: p.index,
                        ifname: port_ifname(sw.id, p.index),
                        mac: mac_for(0, sw.id.0, p.index),
                        peer_mac,
                        peer_ifname,
                        peer,
                        gateways: gws,
                    }
                })
                .collect();
            switches.push(SwitchNode {
                name: sw.name.clone(),
                id: sw.id,
                ports,
                netns: ns,
            });
        }
        let hosts: Vec<HostNode> = topo
            .hosts()
            .iter()
            .zip(host_ns)
            .map(|(h, ns)| HostNode {
                name: h.name.clone(),
                id: h.id,
                ifname: host_ifname(h.id),
                mac: mac_for(1, h.id.0, 0),
                addresses: h.addresses.clone(),
                gateways: gateways[h.id.0].clone(),
                switch: h.switch,
                switch_port: h.port,
                switch_ifname: port_ifname(h.switch, h.port),
                switch_mac: mac_for(0, h.switch.0, h.port),
                netns: ns,
            })
            .collect();
        Lab {
            topo: topo.clone(),
            switch_links,
            switches,
            hosts,
        }
    }

    /// Creates the veths and configures hosts and host ports.
    fn wire(&self) -> Result<()> {
        // One veth pair per link, unless the switches join them in memory.
        let links = match self.switch_links {
            SwitchLinks::Veth => self.topo.links(),
            SwitchLinks::Memory => &[],
        };
        for l in links {
            let a = &self.switches[l.a.0];
            let b = &self.switches[l.b.0];
            veth(
                (&a.netns, a.port(l.a_port)),
                (&b.netns, &b.port(l.b_port).ifname, b.port(l.b_port).mac),
            )?;
        }
        // One per host.
        for h in &self.hosts {
            let sw = &self.switches[h.switch.0];
            veth(
                (&sw.netns, sw.port(h.switch_port)),
                (&h.netns, &h.ifname, h.mac),
            )?;
        }
        for sw in &self.switches {
            for p in &sw.ports {
                if let PortPeer::Host(hid) = p.peer {
                    let h = &self.hosts[hid.0];
                    for gw in &p.gateways {
                        let plen = if gw.is_ipv4() { 32 } else { 128 };
                        let a = format!("{gw}/{plen}");
                        let mut args = vec!["addr", "add", a.as_str(), "dev", p.ifname.as_str()];
                        if gw.is_ipv6() {
                            args.push("nodad");
                        }
                        sw.netns.ip(&args)?;
                    }
                    let mac = p.peer_mac.to_string();
                    for a in &h.addresses {
                        let addr = a.addr();
                        let host_route = format!("{addr}/{}", a.max_prefix_len());
                        sw.netns.ip(&[
                            family_flag(&addr),
                            "route",
                            "replace",
                            &host_route,
                            "dev",
                            &p.ifname,
                        ])?;
                        sw.netns.ip(&[
                            "neigh",
                            "replace",
                            &addr.to_string(),
                            "lladdr",
                            &mac,
                            "dev",
                            &p.ifname,
                            "nud",
                            "permanent",
                        ])?;
                    }
                }
            }
        }
        for h in &self.hosts {
            for a in &h.addresses {
                let s = a.to_string();
                let mut args = vec!["addr", "add", s.as_str(), "dev", h.ifname.as_str()];
                if a.addr().is_ipv6() {
                    args.push("nodad");
                }
                h.netns.ip(&args)?;
            }
            let mac = h.switch_mac.to_string();
            // Other hosts inside one of this host's subnets look on-link to
            // it, but sit behind the switch on their own ports: resolve them
            // to the switch port too, so the switch routes between them.
            for other in self.hosts.iter().filter(|o| o.id != h.id) {
                for a in &other.addresses {
                    let addr = a.addr();
                    if h.addresses.iter().any(|own| own.contains(&addr)) {
                        h.netns.ip(&[
                            "neigh",
                            "replace",
                            &addr.to_string(),
                            "lladdr",
                            &mac,
                            "dev",
                            &h.ifname,
                            "nud",
                            "permanent",
                        ])?;
                    }
                }
            }
            for gw in &h.gateways {
                let g = gw.to_string();
                h.netns.ip(&[
                    "neigh",
                    "replace",
                    &g,
                    "lladdr",
                    &mac,
                    "dev",
                    &h.ifname,
                    "nud",
                    "permanent",
                ])?;
                h.netns.ip(&[
                    family_flag(gw),
                    "route",
                    "replace",
                    "default",
                    "via",
                    &g,
                    "dev",
                    &h.ifname,
                    "onlink",
                ])?;
            }
        }
        Ok(())
    }

    /// The topology it was built from.
    pub fn topology(&self) -> &Topology {
        &self.topo
    }

    /// The switch named `name`. Panics if there is none.
    pub fn switch(&self, name: &str) -> &SwitchNode {
        self.switches
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no switch {name:?} in the testbed"))
    }

    /// The host named `name`. Panics if there is none.
    pub fn host(&self, name: &str) -> &HostNode {
        self.hosts
            .iter()
            .find(|h| h.name == name)
            .unwrap_or_else(|| panic!("no host {name:?} in the testbed"))
    }

    /// Names of all the testbed's namespaces.
    pub fn namespaces(&self) -> Vec<String> {
        self.switches
            .iter()
            .map(|s| s.netns.name().to_string())
            .chain(self.hosts.iter().map(|h| h.netns.name().to_string()))
            .collect()
    }

    /// The addresses [`Lab::kernel_routing`] gives link `link`'s end on
    /// switch `a` (`b_end == false`) or `b`: an IPv4 /31 out of
    /// 169.254.0.0/16 and the link-local fe80::1 / fe80::2.
    pub fn link_addresses(link: LinkId, b_end: bool) -> (Ipv4Addr, Ipv6Addr) {
        (link_v4(link.0, b_end), link_v6(b_end))
    }

    /// Makes every switch namespace a kernel IP router, the baseline that
    /// a user already has: forwarding on for IPv4 and IPv6, link addresses
    /// (see [`Lab::link_addresses`]) and one static route per remote
    /// prefix from `Topology::routes`: a plain route for one candidate, a
    /// kernel multipath route (`nexthop via A dev X nexthop via B dev Y`)
    /// with an L4 hash (`fib_multipath_hash_policy=1`) for several.
    pub fn kernel_routing(&self) -> Result<()> {
        for sw in &self.switches {
            sw.netns.sysctl(&[
                "net.ipv4.ip_forward=1",
                "net.ipv6.conf.all.forwarding=1",
                "net.ipv4.fib_multipath_hash_policy=1",
                "net.ipv6.fib_multipath_hash_policy=1",
            ])?;
        }
        for l in self.topo.links() {
            for (sw, port, b_end) in [(l.a, l.a_port, false), (l.b, l.b_port, true)] {
                let node = &self.switches[sw.0];
                let dev = &node.port(port).ifname;
                let (v4, v6) = Self::link_addresses(l.id, b_end);
                node.netns
                    .ip(&["addr", "add", &format!("{v4}/31"), "dev", dev])?;
                node.netns
                    .ip(&["addr", "add", &format!("{v6}/64"), "dev", dev, "nodad"])?;
            }
        }
        for sw in &self.switches {
            for route in self.topo.routes(sw.id) {
                if route.candidates.is_empty() {
                    continue;
                }
                let v4 = route.prefix.addr().is_ipv4();
                let mut hops: Vec<(String, String)> = Vec::new();
                for c in &route.candidates {
                    let link = self.topo.link(c.link);
                    // The next hop is the far end of the link.
                    let far_is_b = link.a == sw.id;
                    let (a4, a6) = Self::link_addresses(c.link, far_is_b);
                    let via = if v4 { a4.to_string() } else { a6.to_string() };
                    hops.push((via, sw.port(c.port).ifname.clone()));
                }
                let prefix = route.prefix.to_string();
                let mut args: Vec<&str> = vec![
                    if v4 { "-4" } else { "-6" },
                    "route",
                    "replace",
                    prefix.as_str(),
                ];
                if hops.len() == 1 {
                    args.extend(["via", hops[0].0.as_str(), "dev", hops[0].1.as_str()]);
                } else {
                    for (via, dev) in &hops {
                        args.extend(["nexthop", "via", via.as_str(), "dev", dev.as_str()]);
                    }
                }
                sw.netns.ip(&args)?;
            }
        }
        Ok(())
    }
}

/// Creates a veth pair with end A (name/MAC of `a.1`) in namespace `a.0`
/// and end B in `b.0`, then sets both up with offloads off.
fn veth(a: (&Netns, &PortNode), b: (&Netns, &str, Mac)) -> Result<()> {
    let (a_ns, a_port) = a;
    let (b_ns, b_name, b_mac) = b;
    crate::netns::run(&[
        "ip",
        "link",
        "add",
        "name",
        &a_port.ifname,
        "address",
        &a_port.mac.to_string(),
        "netns",
        a_ns.name(),
        "type",
        "veth",
        "peer",
        "name",
        b_name,
        "address",
        &b_mac.to_string(),
        "netns",
        b_ns.name(),
    ])?;
    for (ns, dev) in [(a_ns, a_port.ifname.as_str()), (b_ns, b_name)] {
        ns.exec(&[
            "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off", "tx", "off",
        ])?;
        ns.ip(&["link", "set", dev, "up"])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gateways() {
        let used: HashSet<IpAddr> = ["10.0.1.1", "10.0.1.2"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        let net: IpNet = "10.0.1.2/24".parse().unwrap();
        assert_eq!(
            pick_gateway(&net, &[], &used),
            Some("10.0.1.3".parse().unwrap())
        );
        let net: IpNet = "fd00:1::2/64".parse().unwrap();
        assert_eq!(
            pick_gateway(&net, &[], &HashSet::new()),
            Some("fd00:1::1".parse().unwrap())
        );
        let net: IpNet = "10.0.1.7/32".parse().unwrap();
        let pfx: IpNet = "10.0.1.0/24".parse().unwrap();
        assert_eq!(
            pick_gateway(&net, &[pfx], &used),
            Some("10.0.1.3".parse().unwrap())
        );
    }

    #[test]
    fn link_addressing() {
        assert_eq!(link_v4(0, false), Ipv4Addr::new(169, 254, 0, 0));
        assert_eq!(link_v4(0, true), Ipv4Addr::new(169, 254, 0, 1));
        assert_eq!(link_v4(200, true), Ipv4Addr::new(169, 254, 1, 145));
    }

    #[test]
    fn mac_roundtrip() {
        let m = mac_for(1, 258, 3);
        assert_eq!(m.to_string(), "02:4c:01:01:02:03");
        assert_eq!(m.to_string().parse::<Mac>().unwrap(), m);
    }
}

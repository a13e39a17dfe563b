//! The validated topology: DCs, switches, hosts, links and the ports they
//! give each switch.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::path::Path;

use ipnet::IpNet;
use lcmp_policy::select::MAX_CANDIDATES;

use crate::error::{echo, Reporter, TopologyError};
use crate::raw::{self, RawFile, Str};
use crate::units;

/// Buffer per port when neither the link/host nor `[defaults]` gives one:
/// 32 MiB (the LCMP artifact's intra-DC `BUFFER_SIZE 32`, in MiB).
pub const DEFAULT_BUFFER_BYTES: u64 = 32 << 20;

/// Most ports a switch may have. Port indices are `u8`, `0..MAX_PORTS`;
/// index 255 is never used, so it stays free as a "no port" sentinel.
pub const MAX_PORTS: usize = 255;

/// Longest interface name Linux accepts (IFNAMSIZ - 1).
const MAX_IFNAME: usize = 15;

/// Longest switch name, in bytes. The tightest place a switch name goes is
/// its testbed control socket `/run/lcmp-testbed/<testbed>/<switch>.sock`
/// (`lcmp_control::paths::testbed_socket`), whose path must fit in
/// `sun_path`: 108 bytes with the terminating NUL, so 107. That leaves
/// 107 - 18 (`/run/lcmp-testbed/`) - 16 (longest testbed name,
/// `lcmp_testbed::state::MAX_NAME_LEN`) - 1 (`/`) - 5 (`.sock`) = 67.
/// The other uses are looser: the standalone socket
/// `/run/lcmp-switch/<switch>.sock` allows 107 - 17 - 5 = 85, the
/// namespace `lcmptb-<testbed>-<switch>` allows [`MAX_HOST_NAME`], and no
/// interface name is made from a node name (ports are the file's
/// `*_ifname` or `p<index>`, so IFNAMSIZ does not bound node names).
const MAX_SWITCH_NAME: usize = 67;
const SWITCH_NAME_LIMIT: &str =
    "its control socket /run/lcmp-testbed/<testbed>/<switch>.sock must fit in 107 bytes";

/// Longest host name, in bytes. A host becomes only the network namespace
/// `lcmptb-<testbed>-<host>` (`lcmp_control::paths::testbed_netns_prefix`),
/// a file in /run/netns: a file name, like the argument `ip netns add`
/// checks, has at most NAME_MAX = 255 bytes. That leaves 255 - 7
/// (`lcmptb-`) - 16 (longest testbed name) - 1 (`-`) = 231. Generated
/// hosts (`<switch>h<n>` with n <= 255, at most 67 + 1 + 3 bytes) always
/// fit.
const MAX_HOST_NAME: usize = 231;
const HOST_NAME_LIMIT: &str = "its network namespace lcmptb-<testbed>-<host> must fit in 255 bytes";

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub usize);

        impl $name {
            /// The position in file order (0-based).
            pub fn index(self) -> usize {
                self.0
            }
        }
    };
}

id_type!(
    /// Index of a `[[dc]]` in file order.
    DcId
);
id_type!(
    /// Index of a `[[switch]]` in file order.
    SwitchId
);
id_type!(
    /// Index of a `[[host]]` in file order.
    HostId
);
id_type!(
    /// Index of a `[[link]]` in file order.
    LinkId
);

/// A datacenter: only a name that switches can refer to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dc {
    /// Position in file order.
    pub id: DcId,
    /// Unique DC name.
    pub name: String,
}

/// A switch and the destination prefixes it delivers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Switch {
    /// Position in file order.
    pub id: SwitchId,
    /// Unique node name (switches and hosts share one namespace).
    pub name: String,
    /// The DC the switch belongs to, if given.
    pub dc: Option<DcId>,
    /// Destinations delivered by this switch (IPv4 and/or IPv6), in file
    /// order. Empty for a pure transit switch.
    pub prefixes: Vec<IpNet>,
    /// The policy this switch runs whatever an experiment compares (a
    /// data-centre fabric switch that hashes, as the modelled network's
    /// does); `None`: the experiment's.
    pub policy: Option<lcmp_policy::PolicyName>,
}

/// An end host attached to one switch port (used by the testbed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// Position in file order.
    pub id: HostId,
    /// Unique node name (switches and hosts share one namespace).
    pub name: String,
    /// The switch the host is attached to.
    pub switch: SwitchId,
    /// Index of the switch port the host is attached to.
    pub port: u8,
    /// Host addresses with their prefix length (`10.0.1.2/24`); each lies
    /// inside one of the switch's prefixes.
    pub addresses: Vec<IpNet>,
    /// Rate of the host link, bits per second.
    pub rate_bps: u64,
    /// One-way delay of the host link.
    pub delay_ns: u64,
    /// Buffer of the switch port (and the host's interface), bytes.
    pub buffer_bytes: u64,
    /// Interface name on the host side, if given.
    pub ifname: Option<String>,
    /// Interface name of the switch port, if given.
    pub switch_ifname: Option<String>,
}

/// A full-duplex, symmetric switch-to-switch link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// Position in file order.
    pub id: LinkId,
    /// First end, as written (`a = ...`).
    pub a: SwitchId,
    /// Second end, as written (`b = ...`).
    pub b: SwitchId,
    /// Index of this link's port on switch `a`.
    pub a_port: u8,
    /// Index of this link's port on switch `b`.
    pub b_port: u8,
    /// Rate in each direction, bits per second.
    pub rate_bps: u64,
    /// One-way propagation delay.
    pub delay_ns: u64,
    /// Buffer of each of the two ports, bytes.
    pub buffer_bytes: u64,
    /// Interface name of the port on `a`, if given.
    pub a_ifname: Option<String>,
    /// Interface name of the port on `b`, if given.
    pub b_ifname: Option<String>,
}

/// What is at the other end of a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Peer {
    /// Another switch, through `link`, arriving on its port `port`.
    Switch {
        /// The link behind the port.
        link: LinkId,
        /// The neighbouring switch.
        switch: SwitchId,
        /// The link's port index on the neighbouring switch.
        port: u8,
    },
    /// An attached end host.
    Host {
        /// The host.
        host: HostId,
    },
}

/// One port of a switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Port {
    /// The switch owning the port.
    pub switch: SwitchId,
    /// Port number on that switch (see [`Topology`] for the rule).
    pub index: u8,
    /// The link or host the port belongs to, and the far end.
    pub peer: Peer,
    /// Interface name, if the file gives one.
    pub ifname: Option<String>,
    /// Rate of the attached link, bits per second.
    pub rate_bps: u64,
    /// One-way delay of the attached link.
    pub delay_ns: u64,
    /// Egress buffer of the port, bytes.
    pub buffer_bytes: u64,
}

impl Port {
    /// The switch-to-switch link of this port, if it is not a host port.
    pub fn link(&self) -> Option<LinkId> {
        match self.peer {
            Peer::Switch { link, .. } => Some(link),
            Peer::Host { .. } => None,
        }
    }

    /// The neighbouring switch, if it is not a host port.
    pub fn peer_switch(&self) -> Option<SwitchId> {
        match self.peer {
            Peer::Switch { switch, .. } => Some(switch),
            Peer::Host { .. } => None,
        }
    }

    /// The one-way delay in whole microseconds (rounded down).
    pub fn delay_us(&self) -> u64 {
        self.delay_ns / 1_000
    }
}

/// The host-side interface name of a host link the file names none for.
pub const DEFAULT_HOST_IFNAME: &str = "eth0";

impl Host {
    /// The one-way delay in whole microseconds (rounded down).
    pub fn delay_us(&self) -> u64 {
        self.delay_ns / 1_000
    }

    /// The host-side interface: the file's name, else
    /// [`DEFAULT_HOST_IFNAME`].
    pub fn ifname_or_default(&self) -> &str {
        self.ifname.as_deref().unwrap_or(DEFAULT_HOST_IFNAME)
    }
}

impl Link {
    /// The one-way delay in whole microseconds (rounded down).
    pub fn delay_us(&self) -> u64 {
        self.delay_ns / 1_000
    }

    /// The end of the link that is not `switch` (`None` if `switch` is on
    /// neither end).
    pub fn other_end(&self, switch: SwitchId) -> Option<SwitchId> {
        if switch == self.a {
            Some(self.b)
        } else if switch == self.b {
            Some(self.a)
        } else {
            None
        }
    }
}

/// A validated topology. Build it with [`Topology::parse`] or
/// [`Topology::load`].
///
/// Port numbering: each switch's ports are numbered from 0, first one per
/// incident `[[link]]` in file order, then one per attached `[[host]]` in
/// file order. A link listed as `a = "x", b = "x"` is rejected, so every
/// link gives exactly one port to each of its two switches.
///
/// Two topologies are equal (`==`) when they describe the same network:
/// the same DCs, switches, hosts, links (and so ports) and default buffer.
/// The [`source`](Topology::source) name is not compared, so a topology
/// equals the one parsed back from its [`to_toml`](Topology::to_toml).
#[derive(Debug, Clone)]
pub struct Topology {
    pub(crate) source: String,
    pub(crate) default_buffer_bytes: u64,
    pub(crate) dcs: Vec<Dc>,
    pub(crate) switches: Vec<Switch>,
    pub(crate) hosts: Vec<Host>,
    pub(crate) links: Vec<Link>,
    pub(crate) ports: Vec<Vec<Port>>,
    /// Links that are down (failed): routes avoid them, ports keep their
    /// indices. Empty for a topology as loaded.
    pub(crate) down_links: Vec<LinkId>,
}

impl PartialEq for Topology {
    fn eq(&self, other: &Self) -> bool {
        // `source` is only a label for messages, not part of the network.
        self.default_buffer_bytes == other.default_buffer_bytes
            && self.dcs == other.dcs
            && self.switches == other.switches
            && self.hosts == other.hosts
            && self.links == other.links
            && self.ports == other.ports
            && self.down_links == other.down_links
    }
}

impl Eq for Topology {}

impl Topology {
    /// Reads and validates the topology file at `path`; errors name the path.
    pub fn load(path: &Path) -> Result<Topology, TopologyError> {
        let file = path.display().to_string();
        let text = crate::read_bounded(path, crate::MAX_FILE_BYTES).map_err(|error| {
            TopologyError::Io {
                file: file.clone(),
                error,
            }
        })?;
        Topology::parse(&text, &file)
    }

    /// Parses and validates topology TOML. `source` names the text in error
    /// messages (normally the file path).
    pub fn parse(text: &str, source: &str) -> Result<Topology, TopologyError> {
        let rep = Reporter { file: source, text };
        let raw = raw::read(&rep)?;
        crate::limits::check(&raw, &rep)?;
        Builder::new(&rep).build(raw, source)
    }

    /// The source name given when parsing (normally the file path).
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The buffer used where a link or host does not give one.
    pub fn default_buffer_bytes(&self) -> u64 {
        self.default_buffer_bytes
    }

    /// All DCs in file order (indexed by [`DcId`]).
    pub fn dcs(&self) -> &[Dc] {
        &self.dcs
    }

    /// All switches in file order (indexed by [`SwitchId`]).
    pub fn switches(&self) -> &[Switch] {
        &self.switches
    }

    /// All hosts in file order (indexed by [`HostId`]).
    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }

    /// All links in file order (indexed by [`LinkId`]).
    pub fn links(&self) -> &[Link] {
        &self.links
    }

    /// The DC with this id. Panics if the id is not from this topology.
    pub fn dc(&self, id: DcId) -> &Dc {
        &self.dcs[id.0]
    }

    /// The switch with this id. Panics if the id is not from this topology.
    pub fn switch(&self, id: SwitchId) -> &Switch {
        &self.switches[id.0]
    }

    /// The host with this id. Panics if the id is not from this topology.
    pub fn host(&self, id: HostId) -> &Host {
        &self.hosts[id.0]
    }

    /// The link with this id. Panics if the id is not from this topology.
    pub fn link(&self, id: LinkId) -> &Link {
        &self.links[id.0]
    }

    /// The DC named `name`.
    pub fn dc_by_name(&self, name: &str) -> Option<&Dc> {
        self.dcs.iter().find(|d| d.name == name)
    }

    /// The switch named `name`.
    pub fn switch_by_name(&self, name: &str) -> Option<&Switch> {
        self.switches.iter().find(|s| s.name == name)
    }

    /// The host named `name`.
    pub fn host_by_name(&self, name: &str) -> Option<&Host> {
        self.hosts.iter().find(|h| h.name == name)
    }

    /// The switches of a DC, in file order.
    pub fn switches_in_dc(&self, dc: DcId) -> impl Iterator<Item = &Switch> + '_ {
        self.switches.iter().filter(move |s| s.dc == Some(dc))
    }

    /// The ports of `switch`, indexed by port number (see the numbering
    /// rule on [`Topology`]).
    pub fn ports(&self, switch: SwitchId) -> &[Port] {
        &self.ports[switch.0]
    }

    /// Port `index` of `switch`, if it exists.
    pub fn port(&self, switch: SwitchId, index: u8) -> Option<&Port> {
        self.ports[switch.0].get(usize::from(index))
    }

    /// The switch whose prefix is the longest match for `addr`, with that
    /// prefix.
    pub fn switch_for_address(&self, addr: IpAddr) -> Option<(IpNet, SwitchId)> {
        self.switches
            .iter()
            .flat_map(|s| s.prefixes.iter().map(move |p| (*p, s.id)))
            .filter(|(p, _)| p.contains(&addr))
            .max_by_key(|(p, _)| p.prefix_len())
    }
}

/// Validation state while turning a [`RawFile`] into a [`Topology`].
struct Builder<'a> {
    rep: &'a Reporter<'a>,
    /// Switch and host names share one namespace (both become network
    /// namespaces in the testbed); with the byte offset of the first use.
    nodes: HashMap<String, (Node, usize)>,
}

#[derive(Clone, Copy)]
enum Node {
    Switch(SwitchId),
    Host,
}

impl<'a> Builder<'a> {
    fn new(rep: &'a Reporter<'a>) -> Self {
        Builder {
            rep,
            nodes: HashMap::new(),
        }
    }

    fn err(&self, s: &Str, field: String, message: impl Into<String>) -> TopologyError {
        self.rep.at(&s.span(), field, message)
    }

    /// A name must be non-empty, use only `[A-Za-z0-9_.-]` and not start
    /// with `-` or `.`, so it can name a network namespace, a metric label
    /// and a file, and is never taken for a command-line option (`-rf`) or
    /// a directory (`.`, `..`). `kind` ("switch", "host", "DC") and
    /// `max_len` add the length limit of that kind of name, if any.
    fn check_name(
        &self,
        s: &Str,
        field: String,
        kind: &str,
        max_len: Option<(usize, &str)>,
    ) -> Result<String, TopologyError> {
        let name = s.get_ref();
        let chars_ok = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
        let problem = if !chars_ok {
            "use letters, digits, '_', '.', '-'".to_string()
        } else if name.starts_with(['-', '.']) {
            "it must not start with '-' or '.'".to_string()
        } else if let Some((max, why)) = max_len.filter(|&(max, _)| name.len() > max) {
            format!("{} bytes, at most {max}: {why}", name.len())
        } else {
            return Ok(name.clone());
        };
        Err(self.err(
            s,
            field,
            format!("{} is not a valid {kind} name ({problem})", echo(name)),
        ))
    }

    fn check_ifname(
        &self,
        s: &Option<Str>,
        field: String,
    ) -> Result<Option<String>, TopologyError> {
        let Some(s) = s else { return Ok(None) };
        let name = s.get_ref();
        let ok = !name.is_empty()
            && name.len() <= MAX_IFNAME
            && name != "."
            && name != ".."
            && !name
                .chars()
                .any(|c| c == '/' || c == ':' || c.is_whitespace() || c.is_control());
        if ok {
            Ok(Some(name.clone()))
        } else {
            Err(self.err(
                s,
                field,
                format!(
                    "{} is not a valid interface name (1 to {MAX_IFNAME} bytes, \
                     no '/', ':' or spaces)",
                    echo(name)
                ),
            ))
        }
    }

    fn unit(
        &self,
        s: &Str,
        field: String,
        parse: fn(&str) -> Result<u64, units::UnitError>,
    ) -> Result<u64, TopologyError> {
        parse(s.get_ref()).map_err(|e| self.err(s, field, e.to_string()))
    }

    fn buffer(&self, s: &Option<Str>, field: String, default: u64) -> Result<u64, TopologyError> {
        match s {
            Some(s) => self.unit(s, field, units::parse_buffer),
            None => Ok(default),
        }
    }

    fn add_node(&mut self, s: &Str, field: String, node: Node) -> Result<String, TopologyError> {
        let name = match node {
            Node::Switch(_) => self.check_name(
                s,
                field.clone(),
                "switch",
                Some((MAX_SWITCH_NAME, SWITCH_NAME_LIMIT)),
            )?,
            Node::Host => self.check_name(
                s,
                field.clone(),
                "host",
                Some((MAX_HOST_NAME, HOST_NAME_LIMIT)),
            )?,
        };
        if let Some(&(_, first)) = self.nodes.get(&name) {
            return Err(self.err(
                s,
                field,
                format!(
                    "duplicate name {name:?} (first used at line {})",
                    self.rep.line_of(first)
                ),
            ));
        }
        self.nodes.insert(name.clone(), (node, s.span().start));
        Ok(name)
    }

    fn switch_ref(&self, s: &Str, field: String) -> Result<SwitchId, TopologyError> {
        match self.nodes.get(s.get_ref()) {
            Some((Node::Switch(id), _)) => Ok(*id),
            Some((Node::Host, _)) => Err(self.err(
                s,
                field,
                format!(
                    "{} is a host, not a switch (hosts are attached with [[host]])",
                    echo(s.get_ref())
                ),
            )),
            None => Err(self.err(s, field, format!("unknown switch {}", echo(s.get_ref())))),
        }
    }

    fn build(mut self, raw: RawFile, source: &str) -> Result<Topology, TopologyError> {
        let default_buffer_bytes = match raw
            .defaults
            .as_ref()
            .and_then(|d| d.get_ref().buffer.as_ref())
        {
            Some(b) => self.unit(b, "defaults.buffer".into(), units::parse_buffer)?,
            None => DEFAULT_BUFFER_BYTES,
        };

        // Lines are counted only for an error: counting them for every entry
        // made parsing quadratic in the file's size. The maps keep byte
        // offsets instead.

        // [[dc]]
        let mut dcs: Vec<Dc> = Vec::new();
        let mut dc_ids: HashMap<String, (DcId, usize)> = HashMap::new();
        for (i, d) in raw.dc.iter().enumerate() {
            let d = d.get_ref();
            let field = format!("dc[{i}].name");
            // DC names become nothing on the system (no socket, no
            // namespace), so they have no length limit.
            let name = self.check_name(&d.name, field.clone(), "DC", None)?;
            if let Some(&(_, first)) = dc_ids.get(&name) {
                return Err(self.err(
                    &d.name,
                    field,
                    format!(
                        "duplicate DC name {name:?} (first used at line {})",
                        self.rep.line_of(first)
                    ),
                ));
            }
            dc_ids.insert(name.clone(), (DcId(i), d.name.span().start));
            dcs.push(Dc { id: DcId(i), name });
        }

        // [[switch]]
        let mut switches: Vec<Switch> = Vec::new();
        let mut prefix_offsets: HashMap<IpNet, usize> = HashMap::new();
        for (i, s) in raw.switch.iter().enumerate() {
            let s = s.get_ref();
            let id = SwitchId(i);
            let name = self.add_node(&s.name, format!("switch[{i}].name"), Node::Switch(id))?;
            let dc = match &s.dc {
                None => None,
                Some(d) => Some(dc_ids.get(d.get_ref()).map(|&(id, _)| id).ok_or_else(|| {
                    self.err(
                        d,
                        format!("switch[{i}].dc"),
                        format!("unknown DC {} (declare it with [[dc]])", echo(d.get_ref())),
                    )
                })?),
            };
            let mut prefixes = Vec::new();
            for (j, p) in s.prefixes.iter().enumerate() {
                let field = format!("switch[{i}].prefixes[{j}]");
                let net = self.prefix(p, field.clone())?;
                if let Some(&first) = prefix_offsets.get(&net) {
                    return Err(self.err(
                        p,
                        field,
                        format!(
                            "prefix {net} is already delivered by another entry (line {})",
                            self.rep.line_of(first)
                        ),
                    ));
                }
                prefix_offsets.insert(net, p.span().start);
                prefixes.push(net);
            }
            let policy = match &s.policy {
                None => None,
                Some(p) => Some(
                    p.get_ref()
                        .parse::<lcmp_policy::PolicyName>()
                        .map_err(|e| self.err(p, format!("switch[{i}].policy"), e.to_string()))?,
                ),
            };
            switches.push(Switch {
                id,
                name,
                dc,
                prefixes,
                policy,
            });
        }

        // [[host]] names first, so links can say "that is a host".
        for (i, h) in raw.host.iter().enumerate() {
            self.add_node(&h.get_ref().name, format!("host[{i}].name"), Node::Host)?;
        }

        // Port counter per switch; links first, then hosts.
        let mut next_port = vec![0usize; switches.len()];
        let take_port = |next: &mut Vec<usize>, sw: SwitchId| -> Option<u8> {
            let n = next[sw.0];
            next[sw.0] += 1;
            u8::try_from(n).ok().filter(|_| n < MAX_PORTS)
        };
        let too_many = |sw: &Switch| {
            format!(
                "switch {:?} would have more than {MAX_PORTS} ports",
                sw.name
            )
        };

        // [[link]]
        let mut links: Vec<Link> = Vec::new();
        // Per pair of switches, its links so far and where the first is.
        let mut pair_links: HashMap<(usize, usize), (usize, usize)> = HashMap::new();
        for (i, l) in raw.link.iter().enumerate() {
            let l = l.get_ref();
            let f = |name: &str| format!("link[{i}].{name}");
            let a = self.switch_ref(&l.a, f("a"))?;
            let b = self.switch_ref(&l.b, f("b"))?;
            if a == b {
                return Err(self.err(
                    &l.b,
                    f("b"),
                    format!("link from {:?} to itself", l.a.get_ref()),
                ));
            }
            // Each parallel link is a candidate next hop of the routes
            // across it: more than a route holds would be refused only
            // when tables are built (`lcmp-agent paths`, the switch).
            let (n, first) = pair_links
                .entry((a.0.min(b.0), a.0.max(b.0)))
                .or_insert((0, l.a.span().start));
            *n += 1;
            if *n > MAX_CANDIDATES {
                return Err(self.err(
                    &l.a,
                    format!("link[{i}]"),
                    format!(
                        "more than {MAX_CANDIDATES} links between {:?} and {:?} (the first at \
                         line {}); a route has at most {MAX_CANDIDATES} candidate next hops",
                        l.a.get_ref(),
                        l.b.get_ref(),
                        self.rep.line_of(*first)
                    ),
                ));
            }
            let rate_bps = self.unit(&l.rate, f("rate"), units::parse_rate)?;
            let delay_ns = self.unit(&l.delay, f("delay"), units::parse_delay)?;
            let buffer_bytes = self.buffer(&l.buffer, f("buffer"), default_buffer_bytes)?;
            let a_ifname = self.check_ifname(&l.a_ifname, f("a_ifname"))?;
            let b_ifname = self.check_ifname(&l.b_ifname, f("b_ifname"))?;
            let a_port = take_port(&mut next_port, a)
                .ok_or_else(|| self.err(&l.a, f("a"), too_many(&switches[a.0])))?;
            let b_port = take_port(&mut next_port, b)
                .ok_or_else(|| self.err(&l.b, f("b"), too_many(&switches[b.0])))?;
            links.push(Link {
                id: LinkId(i),
                a,
                b,
                a_port,
                b_port,
                rate_bps,
                delay_ns,
                buffer_bytes,
                a_ifname,
                b_ifname,
            });
        }

        // [[host]]
        let mut hosts: Vec<Host> = Vec::new();
        let mut address_offsets: HashMap<IpAddr, usize> = HashMap::new();
        // Per switch with hosts, its prefixes for the containment check.
        let mut prefix_sets: HashMap<SwitchId, PrefixSet> = HashMap::new();
        for (i, h) in raw.host.iter().enumerate() {
            let h = h.get_ref();
            let f = |name: &str| format!("host[{i}].{name}");
            let switch = self.switch_ref(&h.switch, f("switch"))?;
            let sw = &switches[switch.0];
            if h.addresses.is_empty() {
                return Err(self.err(&h.name, f("addresses"), "a host needs at least one address"));
            }
            let mut addresses = Vec::new();
            for (j, a) in h.addresses.iter().enumerate() {
                let field = format!("host[{i}].addresses[{j}]");
                let net = self.host_address(a, field.clone())?;
                let within = prefix_sets
                    .entry(switch)
                    .or_insert_with(|| PrefixSet::new(&sw.prefixes))
                    .contains(net.addr());
                if !within {
                    return Err(self.err(
                        a,
                        field,
                        format!(
                            "{} is not inside any prefix of switch {:?} ({})",
                            net.addr(),
                            sw.name,
                            list(&sw.prefixes)
                        ),
                    ));
                }
                if let Some(&first) = address_offsets.get(&net.addr()) {
                    return Err(self.err(
                        a,
                        field,
                        format!(
                            "address {} is already used (line {})",
                            net.addr(),
                            self.rep.line_of(first)
                        ),
                    ));
                }
                address_offsets.insert(net.addr(), a.span().start);
                addresses.push(net);
            }
            let rate_bps = self.unit(&h.rate, f("rate"), units::parse_rate)?;
            let delay_ns = self.unit(&h.delay, f("delay"), units::parse_delay)?;
            let buffer_bytes = self.buffer(&h.buffer, f("buffer"), default_buffer_bytes)?;
            let ifname = self.check_ifname(&h.ifname, f("ifname"))?;
            let switch_ifname = self.check_ifname(&h.switch_ifname, f("switch_ifname"))?;
            let port = take_port(&mut next_port, switch)
                .ok_or_else(|| self.err(&h.switch, f("switch"), too_many(sw)))?;
            hosts.push(Host {
                id: HostId(i),
                name: h.name.get_ref().clone(),
                switch,
                port,
                addresses,
                rate_bps,
                delay_ns,
                buffer_bytes,
                ifname,
                switch_ifname,
            });
        }

        let ports = build_ports(&switches, &links, &hosts);
        self.check_unique_ifnames(&raw, &ports, &links)?;

        let topo = Topology {
            source: source.to_string(),
            default_buffer_bytes,
            dcs,
            switches,
            hosts,
            links,
            ports,
            down_links: Vec::new(),
        };
        self.check_connected(&topo)?;
        Ok(topo)
    }

    /// A file without switches (empty, or only comments or DCs) is almost
    /// certainly the wrong file, and switches that cannot reach each other
    /// would get routes without candidates; both are rejected here rather
    /// than when traffic goes nowhere.
    fn check_connected(&self, topo: &Topology) -> Result<(), TopologyError> {
        let whole = |message: String| TopologyError::Invalid {
            file: self.rep.file.to_string(),
            line: None,
            field: None,
            message,
        };
        if topo.switches.is_empty() {
            return Err(whole(
                "the topology has no switches (declare at least one [[switch]])".to_string(),
            ));
        }
        let mut groups = topo.components();
        if groups.len() == 1 {
            return Ok(());
        }
        // Largest first; equal sizes stay in switch order (sort is stable).
        groups.sort_by_key(|g| std::cmp::Reverse(g.len()));
        let name = |id: SwitchId| format!("{:?}", topo.switches[id.0].name);
        let sizes: Vec<String> = groups.iter().map(|g| g.len().to_string()).collect();
        let firsts: Vec<String> = groups.iter().map(|g| name(g[0])).collect();
        Err(whole(format!(
            "the switches are not all connected: switch {} cannot reach switch {} \
             ({} groups of {} switches; one switch of each: {}); \
             links must join every switch to every other",
            firsts[0],
            firsts[1],
            groups.len(),
            sizes.join(", "),
            firsts.join(", ")
        )))
    }

    fn prefix(&self, s: &Str, field: String) -> Result<IpNet, TopologyError> {
        let net: IpNet = s.get_ref().trim().parse().map_err(|_| {
            self.err(
                s,
                field.clone(),
                format!(
                    "{} is not a prefix (expected e.g. \"10.1.0.0/16\" or \"fd00:1::/64\")",
                    echo(s.get_ref())
                ),
            )
        })?;
        if net.trunc() != net {
            return Err(self.err(
                s,
                field,
                format!("{net} has host bits set (did you mean {}?)", net.trunc()),
            ));
        }
        Ok(net)
    }

    fn host_address(&self, s: &Str, field: String) -> Result<IpNet, TopologyError> {
        let net: IpNet = s.get_ref().trim().parse().map_err(|_| {
            self.err(
                s,
                field.clone(),
                format!(
                    "{} is not a host address with prefix length \
                     (expected e.g. \"10.1.0.2/24\" or \"fd00:1::2/64\")",
                    echo(s.get_ref())
                ),
            )
        })?;
        // The subnet's own address (and IPv4 broadcast) cannot be a host.
        let max = net.max_prefix_len();
        let special = net.prefix_len() + 1 < max
            && (net.addr() == net.network()
                || (matches!(net, IpNet::V4(_)) && net.addr() == net.broadcast()));
        if special {
            return Err(self.err(
                s,
                field,
                format!(
                    "{} is not a usable host address in {}",
                    net.addr(),
                    net.trunc()
                ),
            ));
        }
        Ok(net)
    }

    /// Interface names must be unique per switch.
    fn check_unique_ifnames(
        &self,
        raw: &RawFile,
        ports: &[Vec<Port>],
        links: &[Link],
    ) -> Result<(), TopologyError> {
        for sw_ports in ports {
            let mut seen: HashSet<&str> = HashSet::new();
            for p in sw_ports {
                let Some(name) = p.ifname.as_deref() else {
                    continue;
                };
                if seen.insert(name) {
                    continue;
                }
                let (s, field) = match p.peer {
                    Peer::Switch { link, .. } => {
                        let l = &links[link.0];
                        let r = raw.link[link.0].get_ref();
                        if l.a == p.switch {
                            (r.a_ifname.as_ref(), format!("link[{}].a_ifname", link.0))
                        } else {
                            (r.b_ifname.as_ref(), format!("link[{}].b_ifname", link.0))
                        }
                    }
                    Peer::Host { host } => (
                        raw.host[host.0].get_ref().switch_ifname.as_ref(),
                        format!("host[{}].switch_ifname", host.0),
                    ),
                };
                let s = s.expect("a port with an ifname came from a field");
                return Err(self.err(
                    s,
                    field,
                    format!("interface name {name:?} is used twice on this switch"),
                ));
            }
        }
        Ok(())
    }
}

/// A switch's prefixes, to tell whether an address lies in one in time
/// independent of their number (a switch may have thousands, each of its
/// hosts' addresses is checked).
struct PrefixSet {
    prefixes: HashSet<IpNet>,
    /// The distinct prefix lengths (at most 33 + 129).
    lengths: Vec<u8>,
}

impl PrefixSet {
    fn new(prefixes: &[IpNet]) -> PrefixSet {
        let mut lengths: Vec<u8> = prefixes.iter().map(IpNet::prefix_len).collect();
        lengths.sort_unstable();
        lengths.dedup();
        PrefixSet {
            prefixes: prefixes.iter().copied().collect(),
            lengths,
        }
    }

    fn contains(&self, addr: IpAddr) -> bool {
        // Prefixes are stored truncated: the address's network at each
        // length is looked up. A length longer than the address family's
        // belongs to the other family.
        self.lengths
            .iter()
            .any(|&len| IpNet::new(addr, len).is_ok_and(|n| self.prefixes.contains(&n.trunc())))
    }
}

/// The prefixes for a message: the first few, so that the line stays
/// readable when a switch has thousands.
fn list(prefixes: &[IpNet]) -> String {
    const SHOWN: usize = 8;
    if prefixes.is_empty() {
        return "it has none".to_string();
    }
    let mut out = prefixes
        .iter()
        .take(SHOWN)
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    if prefixes.len() > SHOWN {
        out.push_str(&format!(" and {} more", prefixes.len() - SHOWN));
    }
    out
}

pub(crate) fn build_ports(switches: &[Switch], links: &[Link], hosts: &[Host]) -> Vec<Vec<Port>> {
    let mut ports: Vec<Vec<Port>> = vec![Vec::new(); switches.len()];
    for l in links {
        for (me, my_port, ifname, peer, peer_port) in [
            (l.a, l.a_port, &l.a_ifname, l.b, l.b_port),
            (l.b, l.b_port, &l.b_ifname, l.a, l.a_port),
        ] {
            ports[me.0].push(Port {
                switch: me,
                index: my_port,
                peer: Peer::Switch {
                    link: l.id,
                    switch: peer,
                    port: peer_port,
                },
                ifname: ifname.clone(),
                rate_bps: l.rate_bps,
                delay_ns: l.delay_ns,
                buffer_bytes: l.buffer_bytes,
            });
        }
    }
    for h in hosts {
        ports[h.switch.0].push(Port {
            switch: h.switch,
            index: h.port,
            peer: Peer::Host { host: h.id },
            ifname: h.switch_ifname.clone(),
            rate_bps: h.rate_bps,
            delay_ns: h.delay_ns,
            buffer_bytes: h.buffer_bytes,
        });
    }
    for (s, p) in ports.iter().enumerate() {
        debug_assert!(
            p.iter()
                .enumerate()
                .all(|(i, port)| usize::from(port.index) == i),
            "ports of switch {s} are not numbered in order"
        );
    }
    ports
}

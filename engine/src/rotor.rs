//! A whole rotor network in one process on the virtual clock (or, paced,
//! on the wall clock: [`RotorNet::pace_with_wall_clock`]): the ToRs
//! ([`TorNode`]) and rotors ([`RotorNode`]) that `lcmp-switch rotor` runs,
//! and a host per server, every link (ToR to rotor and host to ToR) a
//! memory link, on one [`VirtualNet`] ([`RotorNet::build`]). The hosts are
//! constant-rate [`UdpHost`]s (the throughput experiment) or, with
//! [`RotorRun::ndp`], [`NdpHost`]s carrying flows (the flow experiments;
//! the ToRs then trim as [`RotorRun::trim`] says, `lcmp-switch rotor
//! --trim-packets K`).
//!
//! - The network is the [`RotorNetwork`] the namespace engine starts (the
//!   file the switches read), wired as [`RotorNetwork::wiring`] wires it:
//!   ToR t is `tor{t}` with uplinks `u{r}` then host ports `h{h}`, rotor r
//!   is `rotor{r}`, host (t, h) is `h{t}x{h}` at 10.t.h.2. The ToRs are
//!   configured as `lcmp-switch rotor` configures them (route tables,
//!   Valiant seed from the switch's name, the file's guard), except what a
//!   process would learn: port MACs are the memory links' ([`port_mac`]),
//!   each host's MAC is given.
//! - Slot 0 starts at virtual time 0 (a file's epoch is not used: the
//!   agent would replace it on the namespace engine too); every switch has
//!   the epoch from the start, so nothing waits for an agent.
//! - A host's NIC emulates its host link (the wiring's rate, delay and
//!   buffer) unless [`RotorRun::nic_rate_bps`] gives its rate; the ToR's
//!   port towards a host is not shaped (as on the namespace engine, where
//!   it is a veth) unless the ToRs trim, which emulates host downlinks at
//!   the network's rate.
//! - Pools: a ToR's holds its buffer in minimum-size frames (and, when it
//!   trims, its next hops' high-priority bytes in trimmed headers, and its
//!   host downlinks' queues: K frames and as many header bytes each), a
//!   rotor's nothing, a host's its NIC's buffer likewise; each also what it
//!   lends its links' peers. They are cut from one unpopulated frame area,
//!   so memory is touched as buffers are used.
//! - Wall-clock mode ([`RotorNet::pace_with_wall_clock`], the rotor
//!   networks' wall-clock engine): the same network, its [`VirtualNet`]
//!   paced by `CLOCK_MONOTONIC` (see [`lcmp_switch::virtual_clock`]):
//!   slot 0 starts when the first event runs, ToRs change slots and hosts
//!   send when real time says, and late when the machine is slow, as the
//!   daemons would; [`RotorNet::lateness`] says how late. For a
//!   cross-check of the virtual engine against real time.

use std::ops::Range;

use lcmp_control::rotor::RotorStatus;
use lcmp_switch::config::{delay_line_frames, seed_of};
use lcmp_switch::daemon::DaemonConfig;
use lcmp_switch::egress::EgressConfig;
use lcmp_switch::frames::FrameShare;
use lcmp_switch::linked_io::LinkedIo;
use lcmp_switch::mem_io::MemIo;
use lcmp_switch::mem_link::{mem_link, port_mac, MemoryLinks, Transfer};
use lcmp_switch::rotor_daemon::{RotorNode, RotorNodeConfig, TorNode};
use lcmp_switch::rotor_tor::TrimSettings;
use lcmp_switch::tor_path::{TorConfig, TorSwitch};
use lcmp_switch::virtual_clock::{PaceLateness, VirtualNet};
use lcmp_topology::rotor_net::{RotorNetwork, RotorRole};
use lcmp_traffic::client::Destination;
use lcmp_traffic::flows::{Arrivals, FlowSource};
use lcmp_traffic::ndp::NdpParams;
use lcmp_wire::ndp::{HEADERS_LEN, UDP_PORT};

use crate::host_io;
use crate::ndp_host::{NdpHost, NdpHostConfig};
use crate::udp_host::{UdpHost, UdpHostConfig, UdpSchedule};

type Io = LinkedIo<MemIo>;

/// Ring entries per direction of every memory link: a ToR hands a host
/// at most one frame per uplink at an instant, a rotor one per ToR.
pub const LINK_DEPTH: usize = 64;
/// Buffers a pool holds beyond what it lends and queues: a receive batch
/// (a ToR takes up to 256 frames a port) and the host's spares.
const POOL_SLACK: usize = 2 * 256;
/// The smallest frame a buffer is counted for (Ethernet's minimum
/// without FCS).
const MIN_FRAME: u64 = 60;

/// One host's traffic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RotorHostTraffic {
    /// Its ToR.
    pub tor: u32,
    /// Its index under the ToR.
    pub host: u32,
    /// What it sends.
    pub send: UdpSchedule,
}

/// One NDP host's flows.
#[derive(Debug)]
pub struct RotorNdpSender {
    /// Its ToR.
    pub tor: u32,
    /// Its index under the ToR.
    pub host: u32,
    /// Its flows; a flow's `dst` indexes `dsts`.
    pub flows: FlowSource,
    /// The hosts (ToR, index) its flows go to.
    pub dsts: Vec<(u32, u32)>,
}

/// NDP hosts instead of UDP ones: every host runs an [`NdpHost`]
/// (receiver always, sender of the flows given for it).
#[derive(Debug)]
pub struct RotorNdp {
    /// Every host's transport parameters.
    pub params: NdpParams,
    /// The senders' flows; every other host only receives.
    pub senders: Vec<RotorNdpSender>,
}

/// A rotor network to build, with its hosts' traffic.
#[derive(Debug)]
pub struct RotorRun {
    /// The network (its epoch is not used: slot 0 starts at time 0).
    pub network: RotorNetwork,
    /// The UDP senders; every other host only receives. Empty with `ndp`.
    pub traffic: Vec<RotorHostTraffic>,
    /// Every host's NIC rate, bit/s (`None`: the host link's).
    pub nic_rate_bps: Option<u64>,
    /// The UDP port every host counts arrivals on.
    pub listen_port: u16,
    /// Arrivals in this span count in the hosts' window figures, ns.
    pub window_ns: Range<u64>,
    /// NDP hosts instead of UDP ones (`traffic` must then be empty).
    pub ndp: Option<RotorNdp>,
    /// Every ToR trims NDP packets with these bounds (`lcmp-switch rotor
    /// --trim-packets K`) and emulates its host downlinks.
    pub trim: Option<TrimSettings>,
}

/// A host's configuration before it is built: a UDP host, or an NDP host
/// with its flows and their destinations (none: it only receives).
enum HostCfg {
    Udp(UdpHostConfig),
    Ndp(Box<NdpHostConfig>, Option<(FlowSource, Vec<Destination>)>),
}

impl HostCfg {
    fn name(&self) -> &str {
        match self {
            HostCfg::Udp(c) => &c.name,
            HostCfg::Ndp(c, _) => &c.name,
        }
    }

    fn nic(&self) -> &EgressConfig {
        match self {
            HostCfg::Udp(c) => &c.nic,
            HostCfg::Ndp(c, _) => &c.nic,
        }
    }

    fn nic_mut(&mut self) -> &mut EgressConfig {
        match self {
            HostCfg::Udp(c) => &mut c.nic,
            HostCfg::Ndp(c, _) => &mut c.nic,
        }
    }
}

/// A host node of either kind.
enum HostNode {
    Udp(usize),
    Ndp(usize),
}

impl HostNode {
    fn index(&self) -> usize {
        match self {
            HostNode::Udp(i) | HostNode::Ndp(i) => *i,
        }
    }
}

/// A rotor network built on the virtual clock (paced by the wall clock
/// if asked: [`RotorNet::pace_with_wall_clock`]): run it
/// ([`RotorNet::run_until`]), read its switches ([`RotorNet::switch_status`])
/// and hosts ([`RotorNet::host`]).
pub struct RotorNet {
    net: VirtualNet,
    network: RotorNetwork,
    /// Every switch's name and node, in the wiring's order (ToRs, then
    /// rotors).
    switches: Vec<(String, usize)>,
    /// Host (t, h)'s node is `hosts[t * hosts_per_tor + h]`.
    hosts: Vec<HostNode>,
}

impl RotorNet {
    /// Builds `run`'s network (see the module docs). Errors are one line.
    pub fn build(run: RotorRun) -> Result<RotorNet, String> {
        let RotorRun {
            network: n,
            traffic,
            nic_rate_bps,
            listen_port,
            window_ns,
            mut ndp,
            trim,
        } = run;
        let wiring = n.wiring().map_err(|e| e.to_string())?;
        // Refused here in one line rather than by every switch.
        n.schedule()?;
        if ndp.is_some() && !traffic.is_empty() {
            return Err("a rotor run's hosts are UDP or NDP, not both".into());
        }
        let ndp_senders = ndp.as_ref().map_or(&[][..], |x| &x.senders[..]);
        let placed: Vec<(u32, u32)> = traffic
            .iter()
            .map(|t| (t.tor, t.host))
            .chain(ndp_senders.iter().map(|s| (s.tor, s.host)))
            .collect();
        let in_network = |&(t, h): &(u32, u32)| t < n.tors && h < n.hosts_per_tor;
        for p @ (t, h) in &placed {
            if !in_network(p) {
                return Err(format!(
                    "host ({t}, {h}) is not one of the network's {} ToRs x {} hosts",
                    n.tors, n.hosts_per_tor
                ));
            }
            if placed.iter().filter(|q| *q == p).count() > 1 {
                return Err(format!("host ({t}, {h}) is given twice"));
            }
        }
        for s in ndp_senders {
            if let Some((t, h)) = s.dsts.iter().find(|d| !in_network(d)) {
                return Err(format!(
                    "host ({}, {}) sends to ({t}, {h}), not one of the network's {} ToRs x {} hosts",
                    s.tor, s.host, n.tors, n.hosts_per_tor
                ));
            }
        }
        let names: Vec<&str> = wiring.switches().iter().map(|s| s.name.as_str()).collect();
        let ifname = |sw: &str, i: u8| match n.role(sw) {
            Ok(role) => n.port_names(role)[usize::from(i)].clone(),
            Err(_) => format!("p{i}"),
        };
        let mut links = MemoryLinks::build(&wiring, &names, LINK_DEPTH, &ifname)
            .map_err(|e| format!("memory links: {e}"))?;
        let uplinks = n.rotors as usize;
        let tor_ports = uplinks + n.hosts_per_tor as usize;

        // Host configurations first: their NICs size their pools.
        let mut host_cfgs = Vec::new();
        for h in wiring.hosts() {
            let udp = UdpHostConfig::from_topology(&wiring, &h.name)?;
            let (t, i) = n
                .host_of(udp.ip)
                .ok_or_else(|| format!("host {} has no address of the network", h.name))?;
            let mut cfg = match &mut ndp {
                None => {
                    let mut cfg = udp;
                    cfg.listen_port = listen_port;
                    cfg.window_ns = window_ns.clone();
                    cfg.send = traffic
                        .iter()
                        .find(|x| (x.tor, x.host) == (t, i))
                        .map(|x| x.send.clone());
                    HostCfg::Udp(cfg)
                }
                Some(ndp) => {
                    let cfg = NdpHostConfig::from_topology(&wiring, &h.name, ndp.params)?;
                    let flows = match ndp.senders.iter().position(|s| (s.tor, s.host) == (t, i)) {
                        Some(k) => {
                            let s = ndp.senders.swap_remove(k);
                            let dsts = s
                                .dsts
                                .iter()
                                .map(|&(dt, dh)| Destination {
                                    name: RotorNetwork::host_name(dt, dh),
                                    addr: (RotorNetwork::host_ip(dt, dh), UDP_PORT).into(),
                                })
                                .collect();
                            Some((s.flows, dsts))
                        }
                        None => None,
                    };
                    HostCfg::Ndp(Box::new(cfg), flows)
                }
            };
            if let Some(rate) = nic_rate_bps {
                let nic = cfg.nic_mut();
                nic.rate_bps = rate;
                nic.max_in_flight = delay_line_frames(rate, nic.delay_ns);
            }
            host_cfgs.push((t, i, h.switch.index(), h.port, cfg));
        }

        // A trimming ToR holds, beyond its shared buffer (data only, then),
        // every next hop's high-priority bytes as headers, and each host
        // downlink's K data frames and high-priority bytes likewise.
        let (hop_frames, downlink_frames) = trim.map_or((0, 0), |k| {
            let headers = k.priority_bytes.div_ceil(HEADERS_LEN as u64) as usize;
            (headers, k.data_packets as usize + headers)
        });
        let tor_pool = tor_ports * LINK_DEPTH
            + n.buffer().div_ceil(MIN_FRAME) as usize
            + n.tors as usize * hop_frames
            + n.hosts_per_tor as usize * downlink_frames
            + POOL_SLACK;
        let rotor_pool = n.tors as usize * LINK_DEPTH + POOL_SLACK;
        let mut pools = vec![tor_pool; n.tors as usize];
        pools.resize((n.tors + n.rotors) as usize, rotor_pool);
        for (.., cfg) in &host_cfgs {
            let nic = cfg.nic();
            let queue = nic.buffer_bytes.div_ceil(MIN_FRAME) as usize;
            pools.push(LINK_DEPTH + queue + nic.max_in_flight + POOL_SLACK);
        }
        let mut shares = FrameShare::split_area_unpopulated(&pools)?.into_iter();

        // Each host's link: the ToR's end into its host port.
        let mut host_ends = Vec::new();
        let mut at_tor: Vec<Vec<(usize, _)>> = (0..n.tors).map(|_| Vec::new()).collect();
        for (_, _, sw, port, cfg) in &host_cfgs {
            let tor = names[*sw];
            let host_name = cfg.name();
            let (tor_end, host_end) = mem_link(
                LINK_DEPTH,
                (
                    &format!("{tor}/{}", ifname(tor, *port)),
                    &format!("{}/eth0", host_name),
                ),
            )
            .map_err(|e| format!("memory link of host {}: {e}", host_name))?;
            let RotorRole::Tor(t) = n.role(tor)? else {
                return Err(format!("host {} hangs off {tor}, not a ToR", host_name));
            };
            at_tor[t as usize].push((usize::from(*port), tor_end));
            host_ends.push(host_end);
        }

        let mut net = VirtualNet::new(0);
        let node_config = |role| RotorNodeConfig {
            port_names: n.port_names(role),
            epoch: Some((0, "virtual clock".into())),
            spin_ns: 0,
        };
        let mut switches = Vec::new();
        for (t, ends) in (0..n.tors).zip(at_tor) {
            let name = format!("tor{t}");
            let share = shares.next().ok_or("frame shares")?;
            let mut layout = links.layout(&name, tor_ports);
            for (port, end) in ends {
                layout[port] = Some(end);
            }
            let io = LinkedIo::new(MemIo::in_share(0, share), layout, Transfer::Descriptor)
                .map_err(|e| format!("{name}: {e}"))?;
            let host_macs = (0..n.hosts_per_tor)
                .map(|h| Some(port_mac(&RotorNetwork::host_name(t, h), 0)))
                .collect();
            let cfg = TorConfig::for_network(
                &n,
                t,
                (0..tor_ports).map(|p| port_mac(&name, p as u8)).collect(),
                host_macs,
                0,
                // `lcmp-switch rotor`'s default (no --seed).
                seed_of(&name),
            )
            .map_err(|e| format!("{name}: {e}"))?;
            let mut sw = TorSwitch::new(io, cfg, true).map_err(|e| format!("{name}: {e}"))?;
            sw.set_trimming(trim).map_err(|e| format!("{name}: {e}"))?;
            let node = TorNode::new(sw, node_config(RotorRole::Tor(t)));
            let i = net.add_node(node, DaemonConfig::quiet(&name));
            switches.push((name, i));
        }
        for r in 0..n.rotors {
            let name = format!("rotor{r}");
            let share = shares.next().ok_or("frame shares")?;
            let layout = links.layout(&name, n.tors as usize);
            let io = LinkedIo::new(MemIo::in_share(0, share), layout, Transfer::Descriptor)
                .map_err(|e| format!("{name}: {e}"))?;
            let node = RotorNode::new(io, &n, r, node_config(RotorRole::Rotor(r)))?;
            let i = net.add_node(node, DaemonConfig::quiet(&name));
            switches.push((name, i));
        }
        net.join_links(&links)?;

        let mut hosts: Vec<Option<HostNode>> =
            (0..n.tors * n.hosts_per_tor).map(|_| None).collect();
        for ((t, h, sw, port, cfg), end) in host_cfgs.into_iter().zip(host_ends) {
            let share = shares.next().ok_or("frame shares")?;
            let io = host_io(share, end, Transfer::Descriptor);
            let name = cfg.name().to_string();
            let node = match cfg {
                HostCfg::Udp(cfg) => {
                    HostNode::Udp(net.add_node(UdpHost::new(cfg, io)?, DaemonConfig::quiet(&name)))
                }
                HostCfg::Ndp(cfg, flows) => {
                    let (flows, dsts) = flows.unwrap_or_else(|| {
                        // A receiver only: no flows to start.
                        let none =
                            FlowSource::new(Arrivals::Schedule(Vec::new()), 0, 0, 0.0, 1.0, 1);
                        (none, Vec::new())
                    });
                    let host = NdpHost::new(*cfg, io, flows, &dsts)?;
                    HostNode::Ndp(net.add_node(host, DaemonConfig::quiet(&name)))
                }
            };
            net.join((switches[sw].1, usize::from(port)), (node.index(), 0))?;
            hosts[(t * n.hosts_per_tor + h) as usize] = Some(node);
        }
        let hosts = hosts
            .into_iter()
            .collect::<Option<Vec<_>>>()
            .ok_or("the wiring lacks a host of the network")?;
        Ok(RotorNet {
            net,
            network: n,
            switches,
            hosts,
        })
    }

    /// The network.
    pub fn network(&self) -> &RotorNetwork {
        &self.network
    }

    /// Runs on the wall clock from here on (the module docs): call it
    /// before the first [`RotorNet::run_until`], whose first event then
    /// starts slot 0 at that instant.
    pub fn pace_with_wall_clock(&mut self) {
        self.net.pace_with_wall_clock();
    }

    /// Whether it runs on the wall clock.
    pub fn is_paced(&self) -> bool {
        self.net.is_paced()
    }

    /// How late events ran on the wall clock so far; `None` on the
    /// virtual clock.
    pub fn lateness(&self) -> Option<PaceLateness> {
        self.net.lateness()
    }

    /// Runs every event up to and including `t_ns`; paced, returns once the
    /// wall clock has reached `t_ns` as well.
    pub fn run_until(&mut self, t_ns: u64) {
        self.net.run_until(t_ns);
    }

    /// The time now, ns (virtual; paced: since slot 0 on the wall clock).
    pub fn now_ns(&self) -> u64 {
        self.net.now_ns()
    }

    /// Node polls so far.
    pub fn polls(&self) -> u64 {
        self.net.polls()
    }

    /// Every switch's status now (what its stats file would hold), by
    /// name, ToRs then rotors.
    pub fn switch_status(&mut self) -> Result<Vec<(String, RotorStatus)>, String> {
        let mut out = Vec::with_capacity(self.switches.len());
        for (name, i) in &self.switches {
            let json = self
                .net
                .node(*i)
                .status_json()
                .map_err(|e| format!("{name}: status: {e}"))?;
            let s = serde_json::from_slice(&json).map_err(|e| format!("{name}: status: {e}"))?;
            out.push((name.clone(), s));
        }
        Ok(out)
    }

    /// Host (`tor`, `host`)'s node.
    fn host_node(&self, tor: u32, host: u32) -> Option<&HostNode> {
        if tor >= self.network.tors || host >= self.network.hosts_per_tor {
            return None;
        }
        self.hosts
            .get((tor * self.network.hosts_per_tor + host) as usize)
    }

    /// Host `host` of ToR `tor`, if the hosts are UDP ones.
    pub fn host(&mut self, tor: u32, host: u32) -> Option<&mut UdpHost<Io>> {
        let &HostNode::Udp(i) = self.host_node(tor, host)? else {
            return None;
        };
        Some(self.net.daemon::<UdpHost<Io>>(i)?.node())
    }

    /// Host `host` of ToR `tor`, if the hosts are NDP ones.
    pub fn ndp_host(&mut self, tor: u32, host: u32) -> Option<&mut NdpHost<Io>> {
        let &HostNode::Ndp(i) = self.host_node(tor, host)? else {
            return None;
        };
        Some(self.net.daemon::<NdpHost<Io>>(i)?.node())
    }

    /// Bytes ToR `tor` holds now: its next hops' queues (the shared
    /// buffer) and, when it trims, its host downlinks' queues.
    pub fn tor_queued_bytes(&mut self, tor: u32) -> Option<u64> {
        let (_, i) = self.switches.get(tor as usize)?;
        let sw = self.net.daemon::<TorNode<Io>>(*i)?.node().switch();
        let downlinks: u64 = (0..self.network.hosts_per_tor as usize)
            .filter_map(|h| sw.downlink(h).map(|d| d.bytes()))
            .sum();
        Some(sw.core().total_bytes() + downlinks)
    }

    /// Shutdown of every node: the switches' final status, as
    /// [`RotorNet::switch_status`].
    pub fn finish(mut self) -> Result<Vec<(String, RotorStatus)>, String> {
        let finals = self.net.finish();
        self.switches
            .iter()
            .map(|(name, i)| {
                let json = finals[*i]
                    .as_ref()
                    .map_err(|e| format!("{name}: status: {e}"))?;
                let s = serde_json::from_slice(json).map_err(|e| format!("{name}: status: {e}"))?;
                Ok((name.clone(), s))
            })
            .collect()
    }
}

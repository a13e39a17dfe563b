//! A whole rotor network in one process on the virtual clock: the ToRs
//! ([`TorNode`]) and rotors ([`RotorNode`]) that `lcmp-switch rotor` runs,
//! and a constant-rate [`UdpHost`] per host, every link (ToR to rotor and
//! host to ToR) a memory link, on one [`VirtualNet`] ([`RotorNet::build`]).
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
//!   it is a veth).
//! - Pools: a ToR's holds its buffer in minimum-size frames, a rotor's
//!   nothing, a host's its NIC's buffer likewise; each also what it lends
//!   its links' peers. They are cut from one unpopulated frame area, so
//!   memory is touched as buffers are used.

use std::ops::Range;

use lcmp_control::rotor::RotorStatus;
use lcmp_switch::config::{delay_line_frames, seed_of};
use lcmp_switch::daemon::DaemonConfig;
use lcmp_switch::frames::FrameShare;
use lcmp_switch::linked_io::LinkedIo;
use lcmp_switch::mem_io::MemIo;
use lcmp_switch::mem_link::{mem_link, port_mac, MemoryLinks, Transfer};
use lcmp_switch::rotor::SlotClock;
use lcmp_switch::rotor_daemon::{RotorNode, RotorNodeConfig, TorNode};
use lcmp_switch::rotor_tor::{TorRouting, TorSettings};
use lcmp_switch::tor_path::{TorConfig, TorSwitch};
use lcmp_switch::virtual_clock::VirtualNet;
use lcmp_topology::rotor_net::{RotorNetwork, RotorRole};

use crate::host_io;
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

/// A rotor network to build, with its hosts' traffic.
#[derive(Debug, Clone)]
pub struct RotorRun {
    /// The network (its epoch is not used: slot 0 starts at time 0).
    pub network: RotorNetwork,
    /// The senders; every other host only receives.
    pub traffic: Vec<RotorHostTraffic>,
    /// Every host's NIC rate, bit/s (`None`: the host link's).
    pub nic_rate_bps: Option<u64>,
    /// The UDP port every host counts arrivals on.
    pub listen_port: u16,
    /// Arrivals in this span count in the hosts' window figures, ns.
    pub window_ns: Range<u64>,
}

/// A rotor network built on the virtual clock: run it
/// ([`RotorNet::run_until`]), read its switches ([`RotorNet::switch_status`])
/// and hosts ([`RotorNet::host`]).
pub struct RotorNet {
    net: VirtualNet,
    network: RotorNetwork,
    /// Every switch's name and node, in the wiring's order (ToRs, then
    /// rotors).
    switches: Vec<(String, usize)>,
    /// Host (t, h)'s node is `hosts[t * hosts_per_tor + h]`.
    hosts: Vec<usize>,
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
        } = run;
        let wiring = n.wiring().map_err(|e| e.to_string())?;
        let schedule = n.schedule()?;
        for t in &traffic {
            if t.tor >= n.tors || t.host >= n.hosts_per_tor {
                return Err(format!(
                    "host ({}, {}) is not one of the network's {} ToRs x {} hosts",
                    t.tor, t.host, n.tors, n.hosts_per_tor
                ));
            }
            if traffic
                .iter()
                .filter(|u| (u.tor, u.host) == (t.tor, t.host))
                .count()
                > 1
            {
                return Err(format!("host ({}, {}) is given twice", t.tor, t.host));
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
            let mut cfg = UdpHostConfig::from_topology(&wiring, &h.name)?;
            let (t, i) = n
                .host_of(cfg.ip)
                .ok_or_else(|| format!("host {} has no address of the network", h.name))?;
            if let Some(rate) = nic_rate_bps {
                cfg.nic.rate_bps = rate;
                cfg.nic.max_in_flight = delay_line_frames(rate, cfg.nic.delay_ns);
            }
            cfg.listen_port = listen_port;
            cfg.window_ns = window_ns.clone();
            cfg.send = traffic
                .iter()
                .find(|x| (x.tor, x.host) == (t, i))
                .map(|x| x.send.clone());
            host_cfgs.push((t, i, h.switch.index(), h.port, cfg));
        }

        let tor_pool =
            tor_ports * LINK_DEPTH + n.buffer().div_ceil(MIN_FRAME) as usize + POOL_SLACK;
        let rotor_pool = n.tors as usize * LINK_DEPTH + POOL_SLACK;
        let mut pools = vec![tor_pool; n.tors as usize];
        pools.resize((n.tors + n.rotors) as usize, rotor_pool);
        for (.., cfg) in &host_cfgs {
            let queue = cfg.nic.buffer_bytes.div_ceil(MIN_FRAME) as usize;
            pools.push(LINK_DEPTH + queue + cfg.nic.max_in_flight + POOL_SLACK);
        }
        let mut shares = FrameShare::split_area_unpopulated(&pools)?.into_iter();

        // Each host's link: the ToR's end into its host port.
        let mut host_ends = Vec::new();
        let mut at_tor: Vec<Vec<(usize, _)>> = (0..n.tors).map(|_| Vec::new()).collect();
        for (_, _, sw, port, cfg) in &host_cfgs {
            let tor = names[*sw];
            let (tor_end, host_end) = mem_link(
                LINK_DEPTH,
                (
                    &format!("{tor}/{}", ifname(tor, *port)),
                    &format!("{}/eth0", cfg.name),
                ),
            )
            .map_err(|e| format!("memory link of host {}: {e}", cfg.name))?;
            let RotorRole::Tor(t) = n.role(tor)? else {
                return Err(format!("host {} hangs off {tor}, not a ToR", cfg.name));
            };
            at_tor[t as usize].push((usize::from(*port), tor_end));
            host_ends.push(host_end);
        }

        let mut net = VirtualNet::new(0);
        let clock = SlotClock {
            epoch_ns: 0,
            slot_ns: n.slot_ns,
            reconfig_ns: n.reconfig_ns,
        };
        let node_config = |role| RotorNodeConfig {
            port_names: n.port_names(role),
            epoch: Some((0, "virtual clock".into())),
            spin_ns: 0,
        };
        let routes = n
            .routing()
            .shift()
            .then(|| lcmp_topology::rotor::routes(&schedule).0);
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
            let sw = TorSwitch::new(
                io,
                TorConfig {
                    tor: t,
                    net: n.clone(),
                    port_macs: (0..tor_ports).map(|p| port_mac(&name, p as u8)).collect(),
                    host_macs,
                    settings: TorSettings {
                        tor: t,
                        tors: n.tors,
                        rotors: (0..n.rotors).map(|r| n.rotor_matchings(r)).collect(),
                        clock,
                        rate_bps: n.rate_bps,
                        buffer_bytes: n.buffer(),
                        guard_ns: n.tx_guard_ns,
                        routing: match &routes {
                            Some(r) => TorRouting::Table(r[t as usize].clone()),
                            None => TorRouting::Direct,
                        },
                    },
                    // `lcmp-switch rotor`'s default (no --seed).
                    seed: seed_of(&name),
                    deliver_send_stamps: false,
                },
                true,
            )
            .map_err(|e| format!("{name}: {e}"))?;
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

        let mut hosts = vec![usize::MAX; (n.tors * n.hosts_per_tor) as usize];
        for ((t, h, sw, port, cfg), end) in host_cfgs.into_iter().zip(host_ends) {
            let share = shares.next().ok_or("frame shares")?;
            let name = cfg.name.clone();
            let node = UdpHost::new(cfg, host_io(share, end, Transfer::Descriptor))?;
            let i = net.add_node(node, DaemonConfig::quiet(&name));
            net.join((switches[sw].1, usize::from(port)), (i, 0))?;
            hosts[(t * n.hosts_per_tor + h) as usize] = i;
        }
        if hosts.contains(&usize::MAX) {
            return Err("the wiring lacks a host of the network".into());
        }
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

    /// Runs every event up to and including `t_ns`.
    pub fn run_until(&mut self, t_ns: u64) {
        self.net.run_until(t_ns);
    }

    /// The virtual time now, ns.
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

    /// Host `host` of ToR `tor`.
    pub fn host(&mut self, tor: u32, host: u32) -> Option<&mut UdpHost<Io>> {
        if tor >= self.network.tors || host >= self.network.hosts_per_tor {
            return None;
        }
        let i = self.hosts[(tor * self.network.hosts_per_tor + host) as usize];
        Some(self.net.daemon::<UdpHost<Io>>(i)?.node())
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

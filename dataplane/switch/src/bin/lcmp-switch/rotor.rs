//! The rotors and rotor-aware ToRs of a rotor network (see docs/rotor.md):
//! one, or several on shared event loops, each opened inside its network
//! namespace, the links between them veths or in memory.

use lcmp_control::server::Inbox;
use lcmp_ebpf::RouteSocket;
use lcmp_switch::daemon::{Daemon, DaemonConfig, Loop, PollMode as LoopMode, RealtimeClock};
use lcmp_switch::mem_link::port_mac;
use lcmp_switch::rotor_daemon::{RotorNode, RotorNodeConfig, TorNode};
use lcmp_switch::rotor_tor::TrimSettings;
use lcmp_switch::tor_path::{TorConfig, TorSwitch};
use lcmp_topology::rotor_net::{RotorNetwork, RotorRole};
use tracing::{info, warn};

use super::many::{self, Plan, Ports, Wiring};
use super::{neighbour_macs, PollMode, RotorArgs};

/// A rotor or a ToR, opened (boxed: one per switch, stepped through a
/// pointer either way).
enum RotorDaemon {
    Rotor(Box<Daemon<RotorNode<Ports>, RealtimeClock>>),
    Tor(Box<Daemon<TorNode<Ports>, RealtimeClock>>),
}

impl RotorDaemon {
    fn inner(&mut self) -> &mut dyn Loop {
        match self {
            RotorDaemon::Rotor(d) => &mut **d,
            RotorDaemon::Tor(d) => &mut **d,
        }
    }
}

impl Loop for RotorDaemon {
    fn step(&mut self) -> usize {
        self.inner().step()
    }
    fn event_mode(&self) -> bool {
        match self {
            RotorDaemon::Rotor(d) => d.event_mode(),
            RotorDaemon::Tor(d) => d.event_mode(),
        }
    }
    fn timeout_ns(&mut self) -> u64 {
        self.inner().timeout_ns()
    }
    fn poll_fds(&mut self) -> &mut [libc::pollfd] {
        self.inner().poll_fds()
    }
    fn after_poll(&mut self) {
        self.inner().after_poll()
    }
}

impl many::Opened for RotorDaemon {
    type Report = String;

    fn close(self, plan: &Plan) -> String {
        many::close_in_netns(self, plan, |d| {
            let status = match d {
                RotorDaemon::Rotor(d) => serde_json::to_string(&d.finish()),
                RotorDaemon::Tor(d) => serde_json::to_string(&d.finish()),
            };
            status.expect("rotor status serializes")
        })
    }
}

/// Switch `plan`'s interface names in port order: `--port`'s, else the
/// network's.
fn port_names(net: &RotorNetwork, plan: &Plan) -> Result<Vec<String>, String> {
    let role = net.role(&plan.name)?;
    let defaults = net.port_names(role);
    if plan.ports.is_empty() {
        Ok(defaults)
    } else if plan.ports.len() == defaults.len() {
        Ok(plan.ports.clone())
    } else {
        Err(format!(
            "{} has {} ports ({}); --port gave {}",
            plan.name,
            defaults.len(),
            defaults.join(", "),
            plan.ports.len()
        ))
    }
}

/// Opens rotor-network switch `plan` on the calling thread, inside its
/// namespace for the duration (see the LCMP switch's `open_switch`).
fn open_switch(
    args: &RotorArgs,
    net: &RotorNetwork,
    epoch: &Option<(u64, String)>,
    plan: &Plan,
    inbox: Inbox,
    wiring: Wiring,
) -> Result<RotorDaemon, Box<dyn std::error::Error>> {
    let _in_netns = plan
        .netns
        .as_deref()
        .map(lcmp_switch::netns::NetnsGuard::enter)
        .transpose()?;
    let role = net.role(&plan.name)?;
    let ifnames = port_names(net, plan)?;
    // A circuit port's peer MAC is of no use (circuit frames carry the
    // target ToR and the send time instead), but naming one is no mistake:
    // a testbed gives every port's.
    for (ifname, _) in &plan.peer_macs {
        if !ifnames.iter().any(|p| p == ifname) {
            return Err(format!(
                "--peer-mac {ifname}=...: {ifname} is not a port of {} (ports: {})",
                plan.name,
                ifnames.join(", ")
            )
            .into());
        }
    }
    let mut layout = wiring.layout;
    layout.resize_with(ifnames.len(), || None);
    let mut route = RouteSocket::open().map_err(|e| format!("netlink route socket: {e}"))?;
    // A memory-link port has no interface: its address is the link's.
    let macs = ifnames
        .iter()
        .zip(&layout)
        .enumerate()
        .map(|(i, (n, end))| match end {
            Some(_) => Ok(port_mac(&plan.name, i as u8)),
            None => match route.link_by_name(n) {
                Ok(link) => link
                    .mac
                    .ok_or_else(|| format!("port {n}: not an Ethernet interface (no MAC)")),
                Err(e) => Err(format!("port {n}: no such interface ({e})")),
            },
        })
        .collect::<Result<Vec<_>, _>>()?;
    let io = many::open_ports(
        &plan.name,
        &args.common,
        &plan.queues,
        &ifnames,
        Wiring {
            layout,
            share: wiring.share,
        },
        args.several.memory_link_transfer,
    )?;
    if epoch.is_none() {
        warn!(switch = %plan.name, "no epoch yet (file or --epoch-unix-ns): forwarding nothing into the circuits until the agent sets one");
    }
    let node_cfg = RotorNodeConfig {
        port_names: ifnames.clone(),
        epoch: epoch.clone(),
        spin_ns: args.slot_spin_us * 1_000,
    };
    let daemon_cfg = DaemonConfig {
        name: plan.name.clone(),
        poll: match args.common.poll {
            PollMode::Busy => LoopMode::Busy,
            PollMode::Event => LoopMode::Event,
        },
        stats_file: plan.stats_file.clone(),
        stats_interval_ns: args.common.stats_interval_ms.max(10) * 1_000_000,
    };
    info!(
        switch = %plan.name,
        kind = %net.kind,
        routing = net.routing().name(),
        slot_ns = net.slot_ns,
        reconfig_ns = net.reconfig_ns,
        ports = %ifnames.join(","),
        netns = %plan.netns.as_deref().unwrap_or("(own)"),
        "rotor network switch forwarding"
    );
    let opened = match role {
        RotorRole::Rotor(r) => {
            let node = RotorNode::new(io, net, r, node_cfg)?;
            let mut d = Daemon::new(node, RealtimeClock, daemon_cfg);
            d.attach_inbox(inbox);
            RotorDaemon::Rotor(Box::new(d))
        }
        RotorRole::Tor(t) => {
            let epoch_ns = epoch.as_ref().map_or(0, |e| e.0);
            let arp = neighbour_macs(&mut route);
            let host_macs = ifnames
                .iter()
                .skip(net.rotors as usize)
                .map(|n| {
                    plan.peer_macs
                        .iter()
                        .find(|(i, _)| i == n)
                        .map(|(_, m)| *m)
                        .or_else(|| arp.get(n).copied())
                })
                .collect();
            let seed = args
                .common
                .seed
                .unwrap_or_else(|| lcmp_switch::config::seed_of(&plan.name));
            let cfg = TorConfig {
                deliver_send_stamps: args.deliver_send_stamps,
                ..TorConfig::for_network(net, t, macs, host_macs, epoch_ns, seed)?
            };
            let mut sw = TorSwitch::new(io, cfg, epoch.is_some())?;
            sw.set_trimming(args.trim_packets.map(TrimSettings::new))?;
            let mut d = Daemon::new(TorNode::new(sw, node_cfg), RealtimeClock, daemon_cfg);
            d.attach_inbox(inbox);
            RotorDaemon::Tor(Box::new(d))
        }
    };
    Ok(opened)
}

/// Runs the rotor-network switches `args` selects until SIGINT/SIGTERM,
/// then prints each one's final status.
pub(super) fn run(args: RotorArgs, net: RotorNetwork) -> Result<(), Box<dyn std::error::Error>> {
    let wiring_topo = net
        .wiring()
        .map_err(|e| format!("the rotor network's wiring: {e}"))?;
    let known: Vec<String> = wiring_topo
        .switches()
        .iter()
        .map(|s| s.name.clone())
        .collect();
    let plans = many::plans(&many::Selection {
        names: if args.several.all_switches {
            known.clone()
        } else {
            args.several.switches.clone()
        },
        known,
        source: "the rotor network",
        common: &args.common,
        netns: &args.several.netns,
        netns_prefix: args.several.netns_prefix.as_deref(),
        flow_log: None,
    })?;
    for plan in &plans {
        port_names(&net, plan)?;
    }
    let loops = usize::from(args.several.loops);
    let (inboxes, _sockets) = many::prepare(&args.common, &plans, loops)?;
    let epoch = match (args.epoch_unix_ns, net.epoch_unix_ns) {
        (Some(e), _) => Some((e, "command line".to_string())),
        (None, Some(e)) => Some((e, "file".to_string())),
        (None, None) => None,
    };
    let names = |p: &Plan| port_names(&net, p).unwrap_or_default();
    let wirings = many::wiring(
        args.several.links,
        &args.common,
        &wiring_topo,
        &plans,
        &names,
    )?;
    let open = |plan: &Plan, inbox: Inbox, wiring: Wiring| {
        open_switch(&args, &net, &epoch, plan, inbox, wiring)
    };
    let reports = many::run(&args.common, loops, &plans, inboxes, wirings, &open)?;
    for (_, status) in &reports {
        eprintln!("{status}");
    }
    Ok(())
}

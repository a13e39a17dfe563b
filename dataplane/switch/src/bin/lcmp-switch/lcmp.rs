//! The LCMP switches of a topology: one, or several on shared event loops,
//! each opened inside its network namespace.

use std::collections::HashMap;

use lcmp_control::server::Inbox;
use lcmp_ebpf::RouteSocket;
use lcmp_policy::{CongestionParams, LcmpParams, PathCostParams, Policy};
use lcmp_switch::config::{from_topology, Options};
use lcmp_switch::daemon::{Daemon, DaemonConfig, MonotonicClock, PollMode as LoopMode};
use lcmp_switch::lcmp_node::LcmpNode;
use lcmp_switch::mem_link::port_mac;
use lcmp_switch::switch::Switch;
use lcmp_topology::Topology;
use tracing::info;

use super::many::{self, Plan, Ports, Wiring};
use super::{neighbour_macs, LcmpArgs, PollMode};

/// Fills in unknown peer MACs from the kernel's IPv4 neighbour table of
/// the ports' namespace (read over the switch's route socket). A host that
/// has sent nothing yet is not in it: a datagram to the discard port, sent
/// from `udp` (a socket of that namespace), makes the kernel (which owns
/// the gateway address on the port) resolve it by ARP, which the XDP
/// program leaves to the kernel. True while some peer is still unknown.
fn resolve_peers(
    sw: &mut Switch<Ports>,
    ifnames: &[String],
    host_v4: &[(usize, std::net::Ipv4Addr)],
    udp: Option<&std::net::UdpSocket>,
) -> bool {
    let missing = sw.ports_without_peer();
    if missing.is_empty() {
        return false;
    }
    let table = sw.io().inner_mut().route().neighbours().unwrap_or_default();
    for port in missing {
        let io = sw.io_ref();
        let ifindex = io.io_port(port).and_then(|p| io.inner().port_ifindex(p));
        let mac = table
            .iter()
            .filter(|n| n.addr.is_ipv4() && n.is_valid() && Some(n.ifindex) == ifindex)
            .find_map(|n| n.mac);
        match mac {
            Some(mac) => {
                info!(port = %ifnames[port], "peer MAC from the ARP table");
                sw.set_peer_mac(port, mac);
            }
            None => {
                if let Some(sock) = udp {
                    for (_, ip) in host_v4.iter().filter(|(p, _)| *p == port) {
                        let _ = sock.send_to(&[0], (*ip, 9));
                    }
                }
            }
        }
    }
    !sw.ports_without_peer().is_empty()
}

/// The switches to run and their per-switch settings from the command line.
fn plans(args: &LcmpArgs, topo: &Topology) -> Result<Vec<Plan>, String> {
    let known: Vec<String> = topo.switches().iter().map(|s| s.name.clone()).collect();
    many::plans(&many::Selection {
        names: if args.several.all_switches {
            known.clone()
        } else {
            args.several.switches.clone()
        },
        known,
        source: topo.source(),
        common: &args.common,
        netns: &args.several.netns,
        netns_prefix: args.several.netns_prefix.as_deref(),
        flow_log: args.flow_log.as_deref(),
    })
}

/// The switch options shared by every switch of the process.
pub(super) fn options(args: &LcmpArgs) -> Options {
    let lcmp = LcmpParams {
        alpha: args.alpha,
        beta: args.beta,
        keep_num: args.keep.0,
        keep_den: args.keep.1,
        keep_all_up_to: args.keep_all_up_to,
        ..Default::default()
    };
    let policy = match args.policy.policy() {
        Policy::Lcmp(p) => Policy::Lcmp(LcmpParams {
            alpha: if p.alpha == 0 { 0 } else { lcmp.alpha },
            beta: if p.beta == 0 { 0 } else { lcmp.beta },
            ..lcmp
        }),
        other => other,
    };
    Options {
        policy,
        path_cost: PathCostParams {
            w_delay: args.w_delay,
            w_capacity: args.w_capacity,
            ..Default::default()
        },
        metric: args.metric,
        congestion: CongestionParams {
            w_queue: args.w_queue,
            w_trend: args.w_trend,
            w_persist: args.w_persist,
            sample_interval_ns: args.sample_interval_us * 1_000,
            ..Default::default()
        },
        emulate_links: !args.no_emulation,
        ecn: (!args.no_ecn).then_some(args.ecn),
        ecn_link_time: args.ecn_link_time,
        ecn_mark_at: args.ecn_mark_at,
        drop_headroom: args.drop_headroom,
        int: args.int,
        flow_capacity: args.flow_capacity,
        flow_idle_timeout_ns: args.flow_timeout_ms.map(|ms| ms * 1_000_000),
        seed: args.common.seed,
        batch_size: args.batch,
        link_check_interval_ns: args.link_check_ms.max(1) * 1_000_000,
        ifnames: Vec::new(),
        peer_macs: HashMap::new(),
        scaling: args.scaling,
    }
}

/// A switch opened by [`open_switch`], ready to run on a loop.
type SwitchDaemon = Daemon<LcmpNode<Ports>, MonotonicClock>;

/// Switch `plan`'s interface names in port order: `--port`'s, else the
/// topology's; a port without either is `None`.
fn port_names(topo: &Topology, plan: &Plan) -> Vec<Option<String>> {
    let Some(sw) = topo.switch_by_name(&plan.name) else {
        return Vec::new();
    };
    topo.ports(sw.id)
        .iter()
        .enumerate()
        .map(|(i, p)| plan.ports.get(i).cloned().or_else(|| p.ifname.clone()))
        .collect()
}

/// Opens switch `plan` on the calling thread: inside its namespace for
/// the duration (netlink and AF_XDP sockets, XDP programs and the UDP
/// socket that makes the kernel ARP for silent hosts all belong to it), and
/// back in the thread's own namespace when this returns. Nothing is left
/// attached on an error. Memory-link ports have no interface: their
/// addresses are the link's.
fn open_switch(
    args: &LcmpArgs,
    topo: &Topology,
    base: &Options,
    plan: &Plan,
    inbox: Inbox,
    wiring: Wiring,
) -> Result<SwitchDaemon, Box<dyn std::error::Error>> {
    let _in_netns = plan
        .netns
        .as_deref()
        .map(lcmp_switch::netns::NetnsGuard::enter)
        .transpose()?;
    let route = std::cell::RefCell::new(
        RouteSocket::open().map_err(|e| format!("netlink route socket: {e}"))?,
    );
    let mut peer_macs = neighbour_macs(&mut route.borrow_mut());
    peer_macs.extend(plan.peer_macs.iter().cloned());
    let names = port_names(topo, plan);
    // Memory-link ports by interface name: own and far-end MACs.
    let mut memory: HashMap<String, ([u8; 6], Option<[u8; 6]>)> = HashMap::new();
    for (i, end) in wiring.layout.iter().enumerate() {
        if let (Some(end), Some(Some(name))) = (end, names.get(i)) {
            memory.insert(
                name.clone(),
                (port_mac(&plan.name, i as u8), end.peer_mac()),
            );
        }
    }
    for (name, (_, peer)) in &memory {
        if let Some(mac) = peer {
            peer_macs.insert(name.clone(), *mac);
        }
    }
    let opts = Options {
        ifnames: plan.ports.clone(),
        peer_macs,
        ..base.clone()
    };
    let own_mac = |ifname: &str| -> Result<[u8; 6], String> {
        if let Some((mac, _)) = memory.get(ifname) {
            return Ok(*mac);
        }
        let link = route
            .borrow_mut()
            .link_by_name(ifname)
            .map_err(|e| format!("no such interface ({e})"))?;
        link.mac
            .ok_or_else(|| "the interface has no Ethernet address".to_string())
    };
    let config = from_topology(topo, &plan.name, &opts, own_mac)?;
    // Mistakes in the command line, before anything is attached.
    for (ifname, _) in &plan.peer_macs {
        if !config.ports.iter().any(|p| &p.name == ifname) {
            let ports: Vec<&str> = config.ports.iter().map(|p| p.name.as_str()).collect();
            return Err(format!(
                "--peer-mac {ifname}=...: {ifname} is not a port of switch {} (ports: {})",
                plan.name,
                ports.join(", ")
            )
            .into());
        }
    }
    let ifnames: Vec<String> = config.ports.iter().map(|p| p.name.clone()).collect();
    let io = many::open_ports(
        &plan.name,
        &args.common,
        &plan.queues,
        &ifnames,
        wiring,
        args.several.memory_link_transfer,
    )?;
    // The ports' own addresses, as the XDP programs read them at attach:
    // the source of the ICMP errors sent out of them (traffic to them is
    // the kernel's). A memory link has none.
    let xsk_addresses: Vec<Vec<std::net::IpAddr>> = io
        .inner()
        .steering()
        .map(|s| s.local_addresses().to_vec())
        .collect();
    let addresses: Vec<Vec<std::net::IpAddr>> = (0..ifnames.len())
        .map(|i| {
            io.io_port(i)
                .and_then(|j| xsk_addresses.get(j).cloned())
                .unwrap_or_default()
        })
        .collect();
    let mut sw = Switch::new(config, io)?;
    sw.set_int(opts.int);
    for (i, a) in addresses.iter().enumerate() {
        sw.set_port_addresses(i, a);
    }
    if plan.flow_log.is_some() {
        sw.enable_flow_log(args.flow_log_capacity);
    }
    let interval_ns = args.common.stats_interval_ms.max(10) * 1_000_000;
    let node = LcmpNode::new(sw, &plan.name, plan.flow_log.as_deref(), interval_ns)?;
    let mut daemon = Daemon::new(
        node,
        MonotonicClock,
        DaemonConfig {
            name: plan.name.clone(),
            poll: match args.common.poll {
                PollMode::Busy => LoopMode::Busy,
                PollMode::Event => LoopMode::Event,
            },
            stats_file: plan.stats_file.clone(),
            stats_interval_ns: interval_ns,
        },
    );
    daemon.attach_inbox(inbox);
    // IPv4 host addresses behind each port, to make the kernel resolve a
    // silent host's MAC (see `resolve_peers`).
    let sw_id = topo.switch_by_name(&plan.name).map(|s| s.id);
    let host_v4: Vec<(usize, std::net::Ipv4Addr)> = topo
        .hosts()
        .iter()
        .filter(|h| Some(h.switch) == sw_id)
        .flat_map(|h| {
            h.addresses.iter().filter_map(move |a| match a.addr() {
                std::net::IpAddr::V4(v4) => Some((h.port as usize, v4)),
                _ => None,
            })
        })
        .collect();
    let udp = std::net::UdpSocket::bind("0.0.0.0:0").ok();
    daemon.add_side_task(Box::new(move |node, now| {
        if resolve_peers(node.switch(), &ifnames, &host_v4, udp.as_ref()) {
            now + 200_000_000
        } else {
            u64::MAX
        }
    }));
    info!(
        switch = %plan.name,
        netns = %plan.netns.as_deref().unwrap_or("(own)"),
        policy = base.policy.name(),
        ecn_mark_at = %base.ecn_mark_at,
        routes = daemon.switch_ref().routes().len(),
        poll = ?args.common.poll,
        control = %plan.control.as_ref().map_or("off".into(), |p| p.display().to_string()),
        "forwarding"
    );
    Ok(daemon)
}

impl many::Opened for SwitchDaemon {
    type Report = lcmp_control::Snapshot;

    fn close(self, plan: &Plan) -> lcmp_control::Snapshot {
        many::close_in_netns(self, plan, |d| d.finish())
    }
}

/// Runs the LCMP switches `args` selects until SIGINT/SIGTERM.
pub(super) fn run(args: LcmpArgs, topo: Topology) -> Result<(), Box<dyn std::error::Error>> {
    let plans = plans(&args, &topo)?;
    let loops = usize::from(args.several.loops);
    let base = options(&args);
    let (inboxes, _sockets) = many::prepare(&args.common, &plans, loops)?;
    if let Some(addr) = args.metrics_listen {
        let submits: Vec<(String, lcmp_control::server::Submitter)> = plans
            .iter()
            .zip(&inboxes)
            .map(|(p, i)| (p.name.clone(), i.sender()))
            .collect();
        let bound = lcmp_control::http::serve(addr, move |format| {
            let scrapes: Vec<_> = submits
                .iter()
                .map(|(name, submit)| {
                    lcmp_control::scrape::scrape(name, |r| {
                        match submit.call(r.clone(), std::time::Duration::from_secs(2)) {
                            lcmp_control::Body::Ok(reply) => Some(*reply),
                            lcmp_control::Body::Error(_) => None,
                        }
                    })
                })
                .collect();
            lcmp_control::metrics::render_as(&scrapes, format)
        })
        .map_err(|e| format!("metrics endpoint {addr}: {e}"))?;
        info!(%bound, "metrics at http://{bound}/metrics");
    }
    let names = |p: &Plan| -> Vec<String> {
        port_names(&topo, p)
            .into_iter()
            .enumerate()
            .map(|(i, n)| n.unwrap_or_else(|| format!("p{i}")))
            .collect()
    };
    let wirings = many::wiring(args.several.links, &args.common, &topo, &plans, &names)?;
    let open = |plan: &Plan, inbox: Inbox, wiring: Wiring| {
        open_switch(&args, &topo, &base, plan, inbox, wiring)
    };
    let snapshots = many::run(&args.common, loops, &plans, inboxes, wirings, &open)?;
    for (_, snapshot) in &snapshots {
        eprintln!(
            "{}",
            serde_json::to_string(snapshot).expect("snapshots serialize")
        );
    }
    Ok(())
}

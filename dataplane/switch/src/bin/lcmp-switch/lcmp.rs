//! The LCMP switches of a topology: one, or several on shared event loops,
//! each opened inside its network namespace.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use lcmp_control::server::{serve, Inbox};
use lcmp_ebpf::RouteSocket;
use lcmp_policy::{CongestionParams, LcmpParams, PathCostParams, Policy};
use lcmp_switch::config::{from_topology, Options};
use lcmp_switch::daemon::{run_many, Daemon, DaemonConfig, MonotonicClock, PollMode as LoopMode};
use lcmp_switch::frames::FrameShare;
use lcmp_switch::lcmp_node::LcmpNode;
use lcmp_switch::linked_io::LinkedIo;
use lcmp_switch::mem_link::{port_mac, LinkEnd, MemoryLinks};
use lcmp_switch::switch::Switch;
use lcmp_switch::xsk::XskIo;
use lcmp_topology::Topology;
use tracing::{info, warn};

use super::{
    check_stats_path, install_signal_handlers, neighbour_macs, tune_poll_thread, xsk_config,
    LcmpArgs, LinkKind, PollMode, STOP,
};

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

/// One switch this process runs: which, in which namespace, on which
/// interfaces, and where it reports.
#[derive(Clone, Debug)]
struct Plan {
    name: String,
    /// Network namespace of its ports (`None`: the process's own).
    netns: Option<String>,
    /// Interfaces in port order (empty: the topology's names).
    ports: Vec<String>,
    peer_macs: Vec<(String, [u8; 6])>,
    stats_file: Option<PathBuf>,
    flow_log: Option<PathBuf>,
    control: Option<PathBuf>,
}

/// A switch's ports: AF_XDP sockets and memory links.
type Ports = LinkedIo<XskIo>;

/// What a switch is wired to beyond its interfaces: its memory links (by
/// port, `None` for a port on an interface) and its share of the frame
/// area the process's switches share (`None`: an area of its own).
#[derive(Default)]
struct Wiring {
    layout: Vec<Option<LinkEnd>>,
    share: Option<FrameShare>,
}

/// The memory links between the switches of `plans` (with `--links
/// memory`), and each switch's wiring: its links and, when it has any, its
/// share of one frame area for all (a frame crossing a memory link stays
/// where it is).
fn wiring(
    args: &LcmpArgs,
    topo: &Topology,
    plans: &[Plan],
) -> Result<Vec<Wiring>, Box<dyn std::error::Error>> {
    if args.links == LinkKind::Veth || plans.len() < 2 {
        return Ok(plans.iter().map(|_| Wiring::default()).collect());
    }
    let names: Vec<&str> = plans.iter().map(|p| p.name.as_str()).collect();
    let ifname = |sw: &str, port: u8| -> String {
        plans
            .iter()
            .find(|p| p.name == sw)
            .and_then(|p| port_names(topo, p).swap_remove(usize::from(port)))
            .unwrap_or_else(|| format!("p{port}"))
    };
    // Each direction lends as many buffers as an AF_XDP RX ring holds.
    let depth = args.common.rx_ring_size.next_power_of_two() as usize;
    let mut links = MemoryLinks::build(topo, &names, depth, &ifname)
        .map_err(|e| format!("memory links: {e}"))?;
    let cfg = xsk_config(&args.common);
    let mut frames = Vec::new();
    let mut ports = Vec::new();
    for plan in plans {
        let sw = topo.switch_by_name(&plan.name).expect("checked by plans");
        let n = topo.ports(sw.id).len();
        let memory = links.count(&plan.name, n);
        frames.push(XskIo::frames_needed(n - memory, &cfg) + depth * memory);
        ports.push(n);
    }
    info!(
        links = links.len(),
        frames = frames.iter().sum::<usize>(),
        "memory links between the switches of this process"
    );
    let shares = FrameShare::split_area(&frames)?;
    Ok(plans
        .iter()
        .zip(ports)
        .zip(shares)
        .map(|((plan, n), share)| Wiring {
            layout: links.layout(&plan.name, n),
            share: Some(share),
        })
        .collect())
}

/// Placeholder for the switch's name in per-switch paths.
const SWITCH_PLACEHOLDER: &str = "{switch}";

/// `path` for switch `name`: `{switch}` replaced by the name. Running
/// several switches, a path without the placeholder would be shared, which
/// is refused.
fn per_switch_path(
    path: &std::path::Path,
    name: &str,
    several: bool,
    option: &str,
) -> Result<PathBuf, String> {
    let text = path.to_string_lossy();
    if text.contains(SWITCH_PLACEHOLDER) {
        Ok(PathBuf::from(text.replace(SWITCH_PLACEHOLDER, name)))
    } else if several {
        Err(format!(
            "{option} {}: running several switches, the path needs {SWITCH_PLACEHOLDER} (each switch gets its own)",
            path.display()
        ))
    } else {
        Ok(path.to_path_buf())
    }
}

/// Splits `SWITCH/VALUE` (a value for one of several switches) from a
/// plain `VALUE` (the only switch's).
fn for_switch<'a>(
    value: &'a str,
    names: &[String],
    option: &str,
) -> Result<(String, &'a str), String> {
    match value.split_once('/') {
        Some((sw, rest)) if names.iter().any(|n| n == sw) => Ok((sw.to_string(), rest)),
        Some((sw, _)) => Err(format!(
            "{option} {value}: {sw} is not one of the switches run ({})",
            names.join(", ")
        )),
        None if names.len() == 1 => Ok((names[0].clone(), value)),
        None => Err(format!(
            "{option} {value}: running several switches, say whose: SWITCH/{value}"
        )),
    }
}

/// The switches to run and their per-switch settings from the command line.
fn plans(args: &LcmpArgs, topo: &Topology) -> Result<Vec<Plan>, String> {
    let names: Vec<String> = if args.all_switches {
        topo.switches().iter().map(|s| s.name.clone()).collect()
    } else {
        args.switches.clone()
    };
    if names.is_empty() {
        return Err("no switch given: --switch NAME (repeatable) or --all-switches".into());
    }
    for (i, n) in names.iter().enumerate() {
        if topo.switch_by_name(n).is_none() {
            let known: Vec<&str> = topo.switches().iter().map(|s| s.name.as_str()).collect();
            return Err(format!(
                "{}: no switch named {n:?} (switches: {})",
                topo.source(),
                known.join(", ")
            ));
        }
        if names[..i].contains(n) {
            return Err(format!("switch {n} is given twice"));
        }
    }
    let several = names.len() > 1;
    let mut plans: Vec<Plan> = Vec::new();
    for name in &names {
        let stats_file = args
            .common
            .stats_file
            .as_deref()
            .map(|p| per_switch_path(p, name, several, "--stats-file"))
            .transpose()?;
        let flow_log = args
            .flow_log
            .as_deref()
            .map(|p| per_switch_path(p, name, several, "--flow-log"))
            .transpose()?;
        let control = if args.common.no_control {
            None
        } else {
            Some(match &args.common.control_socket {
                Some(p) => per_switch_path(p, name, several, "--control-socket")?,
                None => lcmp_control::paths::switch_socket(name),
            })
        };
        let netns = args
            .netns_prefix
            .as_ref()
            .map(|prefix| format!("{prefix}{name}"));
        plans.push(Plan {
            name: name.clone(),
            netns,
            ports: Vec::new(),
            peer_macs: Vec::new(),
            stats_file,
            flow_log,
            control,
        });
    }
    let plan_of = |plans: &mut Vec<Plan>, sw: &str| -> usize {
        plans
            .iter()
            .position(|p| p.name == sw)
            .expect("checked by for_switch")
    };
    for (sw, ns) in &args.netns {
        if !names.contains(sw) {
            return Err(format!(
                "--netns {sw}={ns}: {sw} is not one of the switches run ({})",
                names.join(", ")
            ));
        }
        let i = plan_of(&mut plans, sw);
        plans[i].netns = Some(ns.clone());
    }
    for port in &args.common.ports {
        let (sw, ifname) = for_switch(port, &names, "--port")?;
        let i = plan_of(&mut plans, &sw);
        plans[i].ports.push(ifname.to_string());
    }
    for (ifname, mac) in &args.common.peer_macs {
        let (sw, ifname) = for_switch(ifname, &names, "--peer-mac")?;
        let i = plan_of(&mut plans, &sw);
        plans[i].peer_macs.push((ifname.to_string(), *mac));
    }
    Ok(plans)
}

/// The switch options shared by every switch of the process.
fn options(args: &LcmpArgs) -> Options {
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
            sample_interval_ns: args.sample_interval_us * 1_000,
            ..Default::default()
        },
        emulate_links: !args.no_emulation,
        ecn: (!args.no_ecn).then_some(args.ecn),
        ecn_link_time: args.ecn_link_time,
        ecn_mark_at: args.ecn_mark_at,
        drop_headroom: args.drop_headroom,
        flow_capacity: args.flow_capacity,
        flow_idle_timeout_ns: args.flow_timeout_ms.map(|ms| ms * 1_000_000),
        seed: args.common.seed,
        batch_size: args.batch,
        link_check_interval_ns: args.link_check_ms.max(1) * 1_000_000,
        ifnames: Vec::new(),
        peer_macs: HashMap::new(),
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
    let mut layout = wiring.layout;
    layout.resize_with(ifnames.len(), || None);
    let xsk_ifnames: Vec<String> = ifnames
        .iter()
        .zip(&layout)
        .filter(|(_, end)| end.is_none())
        .map(|(n, _)| n.clone())
        .collect();
    let cfg = xsk_config(&args.common);
    let xsk = match wiring.share {
        Some(share) => XskIo::open_in(&xsk_ifnames, &cfg, share)?,
        None => XskIo::open(&xsk_ifnames, &cfg)?,
    };
    for p in xsk.port_info() {
        info!(switch = %plan.name, port = %p.name, xdp_mode = %p.xdp_mode, "port ready (AF_XDP copy mode, queue 0)");
    }
    // The ports' own addresses, as the XDP programs read them at attach:
    // the source of the ICMP errors sent out of them (traffic to them is
    // the kernel's). A memory link has none.
    let xsk_addresses: Vec<Vec<std::net::IpAddr>> = xsk
        .steering()
        .map(|s| s.local_addresses().to_vec())
        .collect();
    let io = LinkedIo::new(xsk, layout, args.memory_link_transfer)?;
    let addresses: Vec<Vec<std::net::IpAddr>> = (0..ifnames.len())
        .map(|i| {
            io.io_port(i)
                .and_then(|j| xsk_addresses.get(j).cloned())
                .unwrap_or_default()
        })
        .collect();
    for (i, name) in ifnames.iter().enumerate() {
        if let Some(end) = io.link(i) {
            info!(switch = %plan.name, port = %name, peer = %end.peer_name(), transfer = %args.memory_link_transfer.name(), "memory link ready");
        }
    }
    let mut sw = Switch::new(config, io)?;
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

/// Closes switch `d` inside its namespace (a program attached through
/// netlink, on kernels without XDP links, is detached by interface index
/// there) and returns its final snapshot.
fn close_switch(mut d: SwitchDaemon, plan: &Plan) -> lcmp_control::Snapshot {
    let snapshot = d.finish();
    let guard = plan
        .netns
        .as_deref()
        .map(lcmp_switch::netns::NetnsGuard::enter);
    if let Some(Err(e)) = &guard {
        warn!(switch = %plan.name, "{e}: detaching from the process's namespace");
    }
    drop(d);
    drop(guard);
    snapshot
}

/// Opens the switches of `plans` on the calling thread, reports the
/// outcome on `ready`, and if every switch of the process opened, runs them
/// on one loop until SIGINT/SIGTERM. Returns the final snapshots.
fn run_loop(
    args: &LcmpArgs,
    topo: &Topology,
    base: &Options,
    group: Vec<(Plan, Inbox, Wiring)>,
    ready: std::sync::mpsc::Sender<Result<(), String>>,
    go: &std::sync::Barrier,
    all_ok: &AtomicBool,
) -> Vec<(String, lcmp_control::Snapshot)> {
    let mut daemons = Vec::new();
    let mut plans = Vec::new();
    let mut failed = None;
    for (plan, inbox, wiring) in group {
        match open_switch(args, topo, base, &plan, inbox, wiring) {
            Ok(d) => {
                daemons.push(d);
                plans.push(plan);
            }
            Err(e) => {
                failed = Some(if args.all_switches || args.switches.len() > 1 {
                    format!("switch {}: {e}", plan.name)
                } else {
                    e.to_string()
                });
                break;
            }
        }
    }
    let _ = ready.send(failed.map_or(Ok(()), Err));
    // Every loop waits for the verdict on all of them: forwarding starts
    // only once every switch is open, and a failure anywhere closes all.
    go.wait();
    if all_ok.load(Ordering::SeqCst) {
        tune_poll_thread(&args.common);
        run_many(&mut daemons, &STOP);
        info!("stopping: detaching XDP programs");
    }
    daemons
        .into_iter()
        .zip(&plans)
        .map(|(d, p)| (p.name.clone(), close_switch(d, p)))
        .collect()
}

/// Blocks SIGINT and SIGTERM on the calling thread, so they reach the
/// process's main thread, whose loop they wake at once.
fn block_stop_signals() {
    // SAFETY: a zeroed sigset_t is valid input for sigemptyset, which
    // initialises it; pthread_sigmask reads it and changes only the
    // calling thread's mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Runs the LCMP switches `args` selects until SIGINT/SIGTERM.
pub(super) fn run(args: LcmpArgs, topo: Topology) -> Result<(), Box<dyn std::error::Error>> {
    let plans = plans(&args, &topo)?;
    let loops = usize::from(args.loops);
    if loops > cores() {
        return Err(format!(
            "--loops {loops}: at most one loop per core ({} here)",
            cores()
        )
        .into());
    }
    if loops > plans.len() {
        return Err(format!(
            "--loops {loops}: more loops than switches ({})",
            plans.len()
        )
        .into());
    }
    if loops > 1 && args.common.cpu.is_some() {
        return Err("--cpu pins one loop; with --loops above 1 the kernel places the loops".into());
    }
    let base = options(&args);
    // Everything that can fail on the user's input before anything is
    // attached: the stats files, the control sockets.
    for plan in &plans {
        if let Some(path) = &plan.stats_file {
            check_stats_path(path)?;
        }
    }
    let mut inboxes = Vec::new();
    for plan in &plans {
        // The inbox also feeds the metrics endpoint, socket or not.
        let inbox = Inbox::new()?;
        if let Some(path) = &plan.control {
            serve(path, &inbox).map_err(|e| format!("control socket {}: {e}", path.display()))?;
        }
        inboxes.push(inbox);
    }
    let remove_sockets = || {
        for p in &plans {
            if let Some(path) = &p.control {
                let _ = std::fs::remove_file(path);
            }
        }
    };
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
        .map_err(|e| {
            remove_sockets();
            format!("metrics endpoint {addr}: {e}")
        })?;
        info!(%bound, "metrics at http://{bound}/metrics");
    }
    // Switch i runs on loop i % loops; loop 0 is this thread, so a signal
    // (blocked on the others) wakes a loop at once.
    let wirings = wiring(&args, &topo, &plans).inspect_err(|_| remove_sockets())?;
    let mut groups: Vec<Vec<(Plan, Inbox, Wiring)>> = (0..loops).map(|_| Vec::new()).collect();
    for (i, ((plan, inbox), w)) in plans.iter().cloned().zip(inboxes).zip(wirings).enumerate() {
        groups[i % loops].push((plan, inbox, w));
    }
    install_signal_handlers();
    let go = std::sync::Barrier::new(loops + 1);
    let all_ok = AtomicBool::new(false);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let mut groups = groups.into_iter();
    let first = groups.next().expect("at least one loop");
    let (snapshots, error) = std::thread::scope(|s| {
        let others: Vec<_> = groups
            .enumerate()
            .map(|(i, group)| {
                let ready = ready_tx.clone();
                let (args, topo, base, go, all_ok) = (&args, &topo, &base, &go, &all_ok);
                std::thread::Builder::new()
                    .name(format!("loop{}", i + 1))
                    .spawn_scoped(s, move || {
                        block_stop_signals();
                        run_loop(args, topo, base, group, ready, go, all_ok)
                    })
                    .expect("spawn a loop thread")
            })
            .collect();
        // The verdict: every loop's opening outcome, then go (or not).
        let decider = {
            let (go, all_ok) = (&go, &all_ok);
            let ready_rx = ready_rx;
            s.spawn(move || {
                let mut error = None;
                for _ in 0..loops {
                    match ready_rx.recv() {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => {
                            error.get_or_insert(e);
                        }
                        Err(_) => {
                            error.get_or_insert("a loop thread died while opening".into());
                        }
                    }
                }
                all_ok.store(error.is_none(), Ordering::SeqCst);
                go.wait();
                error
            })
        };
        let mut snapshots = run_loop(&args, &topo, &base, first, ready_tx, &go, &all_ok);
        // Others may be asleep until their next deadline (a link check):
        // STOP is already set for them.
        STOP.store(true, Ordering::SeqCst);
        for h in others {
            snapshots.extend(h.join().expect("loop thread"));
        }
        (snapshots, decider.join().expect("decider thread"))
    });
    remove_sockets();
    if let Some(e) = error {
        return Err(e.into());
    }
    for (_, snapshot) in &snapshots {
        eprintln!(
            "{}",
            serde_json::to_string(snapshot).expect("snapshots serialize")
        );
    }
    Ok(())
}

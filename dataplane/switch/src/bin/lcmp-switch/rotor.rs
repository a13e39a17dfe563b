//! A rotor or a rotor-aware ToR of a rotor network (see docs/rotor.md).

use lcmp_control::server::{serve, Inbox};
use lcmp_ebpf::RouteSocket;
use lcmp_switch::daemon::{Daemon, DaemonConfig, Node, PollMode as LoopMode, RealtimeClock};
use lcmp_switch::rotor::SlotClock;
use lcmp_switch::rotor_daemon::{RotorNode, RotorNodeConfig, TorNode};
use lcmp_switch::rotor_tor::{TorRouting, TorSettings};
use lcmp_switch::tor_path::{TorConfig, TorSwitch};
use lcmp_switch::xsk::XskIo;
use lcmp_topology::rotor_net::{RotorNetwork, RotorRole};
use tracing::{info, warn};

use super::{
    check_stats_file, control_path, install_signal_handlers, neighbour_macs, open_ports,
    tune_poll_thread, PollMode, RotorArgs, STOP,
};

/// A rotor or a ToR of a rotor network.
pub(super) fn run(args: RotorArgs, net: RotorNetwork) -> Result<(), Box<dyn std::error::Error>> {
    let role = net.role(&args.switch)?;
    let defaults = net.port_names(role);
    let ifnames = if args.common.ports.is_empty() {
        defaults.clone()
    } else if args.common.ports.len() == defaults.len() {
        args.common.ports.clone()
    } else {
        return Err(format!(
            "{} has {} ports ({}); --port gave {}",
            args.switch,
            defaults.len(),
            defaults.join(", "),
            args.common.ports.len()
        )
        .into());
    };
    // A circuit port's peer MAC is of no use (circuit frames carry the
    // target ToR and the send time instead), but naming one is no mistake:
    // a testbed gives every port's.
    for (ifname, _) in &args.common.peer_macs {
        if !ifnames.iter().any(|p| p == ifname) {
            return Err(format!(
                "--peer-mac {ifname}=...: {ifname} is not a port of {} (ports: {})",
                args.switch,
                ifnames.join(", ")
            )
            .into());
        }
    }
    let mut route = RouteSocket::open().map_err(|e| format!("netlink route socket: {e}"))?;
    let macs = ifnames
        .iter()
        .map(|n| match route.link_by_name(n) {
            Ok(link) => link
                .mac
                .ok_or_else(|| format!("port {n}: not an Ethernet interface (no MAC)")),
            Err(e) => Err(format!("port {n}: no such interface ({e})")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    check_stats_file(&args.common)?;
    let epoch = match (args.epoch_unix_ns, net.epoch_unix_ns) {
        (Some(e), _) => Some((e, "command line".to_string())),
        (None, Some(e)) => Some((e, "file".to_string())),
        (None, None) => None,
    };
    let control_path = control_path(&args.common, &args.switch);
    let inbox = Inbox::new()?;
    if let Some(path) = &control_path {
        serve(path, &inbox).map_err(|e| format!("control socket {}: {e}", path.display()))?;
    }
    let io = open_ports(&args.common, &ifnames)?;
    if epoch.is_none() {
        warn!("no epoch yet (file or --epoch-unix-ns): forwarding nothing into the circuits until the agent sets one");
    }
    let cfg = RotorNodeConfig {
        port_names: ifnames.clone(),
        epoch: epoch.clone(),
        spin_ns: args.slot_spin_us * 1_000,
    };
    let daemon_cfg = DaemonConfig {
        name: args.switch.clone(),
        poll: match args.common.poll {
            PollMode::Busy => LoopMode::Busy,
            PollMode::Event => LoopMode::Event,
        },
        stats_file: args.common.stats_file.clone(),
        stats_interval_ns: args.common.stats_interval_ms.max(10) * 1_000_000,
    };
    match role {
        RotorRole::Rotor(r) => {
            let node = RotorNode::new(io, &net, r, cfg)?;
            serve_node(
                &args,
                &net,
                &ifnames,
                node,
                daemon_cfg,
                inbox,
                &control_path,
            )
        }
        RotorRole::Tor(t) => {
            let clock = SlotClock {
                epoch_ns: epoch.as_ref().map_or(0, |e| e.0),
                slot_ns: net.slot_ns,
                reconfig_ns: net.reconfig_ns,
            };
            let arp = neighbour_macs(&mut route);
            let host_macs = ifnames
                .iter()
                .skip(net.rotors as usize)
                .map(|n| {
                    args.common
                        .peer_macs
                        .iter()
                        .find(|(i, _)| i == n)
                        .map(|(_, m)| *m)
                        .or_else(|| arp.get(n).copied())
                })
                .collect();
            let schedule = net.schedule()?;
            let routing = if net.routing().shift() {
                TorRouting::Table(lcmp_topology::rotor::routes(&schedule).0[t as usize].clone())
            } else {
                TorRouting::Direct
            };
            let sw = TorSwitch::new(
                io,
                TorConfig {
                    tor: t,
                    net: net.clone(),
                    port_macs: macs,
                    host_macs,
                    settings: TorSettings {
                        tor: t,
                        tors: net.tors,
                        rotors: (0..net.rotors).map(|r| net.rotor_matchings(r)).collect(),
                        clock,
                        rate_bps: net.rate_bps,
                        buffer_bytes: net.buffer(),
                        guard_ns: net.tx_guard_ns,
                        routing,
                    },
                    seed: args
                        .common
                        .seed
                        .unwrap_or_else(|| lcmp_switch::config::seed_of(&args.switch)),
                    deliver_send_stamps: args.deliver_send_stamps,
                },
                epoch.is_some(),
            )?;
            let node = TorNode::new(sw, cfg);
            serve_node(
                &args,
                &net,
                &ifnames,
                node,
                daemon_cfg,
                inbox,
                &control_path,
            )
        }
    }
}

/// Runs `node` until SIGINT/SIGTERM, then prints its final status.
fn serve_node<N: Node<Io = XskIo>>(
    args: &RotorArgs,
    net: &RotorNetwork,
    ifnames: &[String],
    node: N,
    cfg: DaemonConfig,
    inbox: Inbox,
    control_path: &Option<std::path::PathBuf>,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut daemon = Daemon::new(node, RealtimeClock, cfg);
    daemon.attach_inbox(inbox);
    info!(
        switch = %args.switch,
        kind = %net.kind,
        routing = net.routing().name(),
        slot_ns = net.slot_ns,
        reconfig_ns = net.reconfig_ns,
        ports = %ifnames.join(","),
        "rotor network switch forwarding"
    );
    install_signal_handlers();
    tune_poll_thread(&args.common);
    daemon.run(&STOP);
    let status = daemon.finish();
    if let Some(path) = control_path {
        let _ = std::fs::remove_file(path);
    }
    eprintln!(
        "{}",
        serde_json::to_string(&status).expect("rotor status serializes")
    );
    Ok(())
}

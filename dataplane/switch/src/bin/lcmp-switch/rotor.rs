//! A rotor or a rotor-aware ToR of a rotor network (see docs/rotor.md).

use lcmp_control::server::{serve, Inbox};
use lcmp_ebpf::RouteSocket;
use lcmp_switch::daemon::PollMode as LoopMode;
use lcmp_switch::rotor::{RotorSwitch, SlotClock};
use lcmp_switch::rotor_daemon::{RealtimeClock, RotorDaemon, RotorDaemonConfig, RotorNode};
use lcmp_switch::rotor_tor::{TorRouting, TorSettings};
use lcmp_switch::tor_path::{TorConfig, TorSwitch};
use lcmp_topology::rotor_net::{RotorNetwork, RotorRole};
use tracing::{info, warn};

use super::{
    check_stats_file, control_path, install_signal_handlers, neighbour_macs, open_ports,
    tune_poll_thread, Args, PollMode, STOP,
};

/// A rotor or a ToR of a rotor network.
pub(super) fn run(args: Args, net: RotorNetwork) -> Result<(), Box<dyn std::error::Error>> {
    let role = net.role(&args.switch)?;
    if args.metrics_listen.is_some() {
        return Err("--metrics-listen: a rotor network's metrics are served by its agent (lcmp-agent run --metrics-listen)".into());
    }
    let defaults = net.port_names(role);
    let ifnames = if args.ports.is_empty() {
        defaults.clone()
    } else if args.ports.len() == defaults.len() {
        args.ports.clone()
    } else {
        return Err(format!(
            "{} has {} ports ({}); --port gave {}",
            args.switch,
            defaults.len(),
            defaults.join(", "),
            args.ports.len()
        )
        .into());
    };
    // A circuit port's peer MAC is of no use (circuit frames carry the
    // target ToR and the send time instead), but naming one is no mistake:
    // a testbed gives every port's.
    for (ifname, _) in &args.peer_macs {
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
    check_stats_file(&args)?;
    let epoch = match (args.epoch_unix_ns, net.epoch_unix_ns) {
        (Some(e), _) => Some((e, "command line".to_string())),
        (None, Some(e)) => Some((e, "file".to_string())),
        (None, None) => None,
    };
    let control_path = control_path(&args);
    let inbox = Inbox::new()?;
    if let Some(path) = &control_path {
        serve(path, &inbox).map_err(|e| format!("control socket {}: {e}", path.display()))?;
    }
    let io = open_ports(&args, &ifnames)?;
    let clock = SlotClock {
        epoch_ns: epoch.as_ref().map_or(0, |e| e.0),
        slot_ns: net.slot_ns,
        reconfig_ns: net.reconfig_ns,
    };
    let node = match role {
        RotorRole::Rotor(r) => RotorNode::Rotor(RotorSwitch::with_epoch(
            io,
            net.rotor_matchings(r),
            clock,
            epoch.is_some(),
        )?),
        RotorRole::Tor(t) => {
            let arp = neighbour_macs(&mut route);
            let host_macs = ifnames
                .iter()
                .skip(net.rotors as usize)
                .map(|n| {
                    args.peer_macs
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
            RotorNode::Tor(Box::new(TorSwitch::new(
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
                        .seed
                        .unwrap_or_else(|| lcmp_switch::config::seed_of(&args.switch)),
                    deliver_send_stamps: args.deliver_send_stamps,
                },
                epoch.is_some(),
            )?))
        }
    };
    if epoch.is_none() {
        warn!("no epoch yet (file or --epoch-unix-ns): forwarding nothing into the circuits until the agent sets one");
    }
    let mut daemon = RotorDaemon::new(
        node,
        RealtimeClock,
        RotorDaemonConfig {
            name: args.switch.clone(),
            net: net.clone(),
            role,
            port_names: ifnames.clone(),
            poll: match args.poll {
                PollMode::Busy => LoopMode::Busy,
                PollMode::Event => LoopMode::Event,
            },
            stats_file: args.stats_file.clone(),
            stats_interval_ns: args.stats_interval_ms.max(10) * 1_000_000,
            epoch,
            spin_ns: args.slot_spin_us * 1_000,
        },
    );
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
    tune_poll_thread(&args);
    daemon.run(&STOP);
    let status = daemon.finish();
    if let Some(path) = &control_path {
        let _ = std::fs::remove_file(path);
    }
    eprintln!(
        "{}",
        serde_json::to_string(&status).expect("rotor status serializes")
    );
    Ok(())
}

//! Several switches of one kind in one process, for both subcommands:
//! which (the plans from the command line), their memory links (the
//! wiring), and running them on event loops (threads), each switch opened
//! on its loop's thread inside its namespace. What a kind adds is how to
//! open one of its switches and what it reports when it stops.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use lcmp_control::server::{serve, Inbox};
use lcmp_switch::daemon::{run_many, Loop};
use lcmp_switch::frames::FrameShare;
use lcmp_switch::linked_io::LinkedIo;
use lcmp_switch::mem_link::{LinkEnd, MemoryLinks, Transfer};
use lcmp_switch::xsk::XskIo;
use lcmp_topology::Topology;
use tracing::{info, warn};

use super::{check_stats_path, tune_poll_thread, xsk_config, Common, LinkKind, STOP};

/// One switch this process runs: which, in which namespace, on which
/// interfaces, and where it reports.
#[derive(Clone, Debug)]
pub(super) struct Plan {
    pub name: String,
    /// Network namespace of its ports (`None`: the process's own).
    pub netns: Option<String>,
    /// Interfaces in port order (empty: the network file's names).
    pub ports: Vec<String>,
    pub peer_macs: Vec<(String, [u8; 6])>,
    /// RX queues to bind by interface (unlisted: all).
    pub queues: Vec<(String, Vec<u32>)>,
    pub stats_file: Option<PathBuf>,
    pub flow_log: Option<PathBuf>,
    pub control: Option<PathBuf>,
}

/// What a switch is wired to beyond its interfaces: its memory links (by
/// port, `None` for a port on an interface) and its share of the frame
/// area the process's switches share (`None`: an area of its own).
#[derive(Default)]
pub(super) struct Wiring {
    pub layout: Vec<Option<LinkEnd>>,
    pub share: Option<FrameShare>,
}

/// Placeholder for the switch's name in per-switch paths.
const SWITCH_PLACEHOLDER: &str = "{switch}";

/// `path` for switch `name`: `{switch}` replaced by the name. Running
/// several switches, a path without the placeholder would be shared, which
/// is refused.
fn per_switch_path(
    path: &Path,
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

/// What the command line says about which switches run and where.
pub(super) struct Selection<'a> {
    /// The switches to run, in order.
    pub names: Vec<String>,
    /// Every switch of the network file (for naming a wrong one).
    pub known: Vec<String>,
    /// The network file, for errors.
    pub source: &'a str,
    pub common: &'a Common,
    pub netns: &'a [(String, String)],
    pub netns_prefix: Option<&'a str>,
    pub flow_log: Option<&'a Path>,
}

/// The switches to run and their per-switch settings from the command line.
pub(super) fn plans(sel: &Selection<'_>) -> Result<Vec<Plan>, String> {
    let names = &sel.names;
    if names.is_empty() {
        return Err("no switch given: --switch NAME (repeatable) or --all-switches".into());
    }
    for (i, n) in names.iter().enumerate() {
        if !sel.known.contains(n) {
            return Err(format!(
                "{}: no switch named {n:?} (switches: {})",
                sel.source,
                sel.known.join(", ")
            ));
        }
        if names[..i].contains(n) {
            return Err(format!("switch {n} is given twice"));
        }
    }
    let several = names.len() > 1;
    let common = sel.common;
    let mut plans: Vec<Plan> = Vec::new();
    for name in names {
        let path = |p: Option<&Path>, option: &str| {
            p.map(|p| per_switch_path(p, name, several, option))
                .transpose()
        };
        let control = if common.no_control {
            None
        } else {
            Some(match &common.control_socket {
                Some(p) => per_switch_path(p, name, several, "--control-socket")?,
                None => lcmp_control::paths::switch_socket(name),
            })
        };
        plans.push(Plan {
            name: name.clone(),
            netns: sel.netns_prefix.map(|prefix| format!("{prefix}{name}")),
            ports: Vec::new(),
            peer_macs: Vec::new(),
            queues: Vec::new(),
            stats_file: path(common.stats_file.as_deref(), "--stats-file")?,
            flow_log: path(sel.flow_log, "--flow-log")?,
            control,
        });
    }
    let plan_of = |plans: &mut Vec<Plan>, sw: &str| -> usize {
        plans
            .iter()
            .position(|p| p.name == sw)
            .expect("checked by for_switch")
    };
    for (sw, ns) in sel.netns {
        if !names.contains(sw) {
            return Err(format!(
                "--netns {sw}={ns}: {sw} is not one of the switches run ({})",
                names.join(", ")
            ));
        }
        let i = plan_of(&mut plans, sw);
        plans[i].netns = Some(ns.clone());
    }
    for port in &common.ports {
        let (sw, ifname) = for_switch(port, names, "--port")?;
        let i = plan_of(&mut plans, &sw);
        plans[i].ports.push(ifname.to_string());
    }
    for (ifname, mac) in &common.peer_macs {
        let (sw, ifname) = for_switch(ifname, names, "--peer-mac")?;
        let i = plan_of(&mut plans, &sw);
        plans[i].peer_macs.push((ifname.to_string(), *mac));
    }
    for (ifname, list) in &common.queues {
        let (sw, ifname) = for_switch(ifname, names, "--queues")?;
        let i = plan_of(&mut plans, &sw);
        if plans[i].queues.iter().any(|(n, _)| n == ifname) {
            return Err(format!("--queues: {ifname} of {sw} is given twice"));
        }
        plans[i].queues.push((ifname.to_string(), list.clone()));
    }
    Ok(plans)
}

/// The memory links between the switches of `plans` (with `--links
/// memory`) over the links of `topo`, and each switch's wiring: its links
/// and, when there are any, its share of one frame area for all (a frame
/// crossing a memory link stays where it is). `port_names(plan)` gives a
/// switch's interface names in port order.
pub(super) fn wiring(
    links: LinkKind,
    common: &Common,
    topo: &Topology,
    plans: &[Plan],
    port_names: &dyn Fn(&Plan) -> Vec<String>,
) -> Result<Vec<Wiring>, Box<dyn std::error::Error>> {
    if links == LinkKind::Veth || plans.len() < 2 {
        return Ok(plans.iter().map(|_| Wiring::default()).collect());
    }
    let names: Vec<&str> = plans.iter().map(|p| p.name.as_str()).collect();
    let ifname = |sw: &str, port: u8| -> String {
        plans
            .iter()
            .find(|p| p.name == sw)
            .and_then(|p| port_names(p).get(usize::from(port)).cloned())
            .unwrap_or_else(|| format!("p{port}"))
    };
    // Each direction lends as many buffers as an AF_XDP RX ring holds.
    let depth = common.rx_ring_size.next_power_of_two() as usize;
    let mut memory = MemoryLinks::build(topo, &names, depth, &ifname)
        .map_err(|e| format!("memory links: {e}"))?;
    let cfg = xsk_config(common);
    let mut frames = Vec::new();
    let mut ports = Vec::new();
    for plan in plans {
        let n = topo
            .switch_by_name(&plan.name)
            .map_or(0, |s| topo.ports(s.id).len());
        let m = memory.count(&plan.name, n);
        frames.push(XskIo::frames_needed(n - m, &cfg) + depth * m);
        ports.push(n);
    }
    info!(
        links = memory.len(),
        frames = frames.iter().sum::<usize>(),
        "memory links between the switches of this process"
    );
    let shares = FrameShare::split_area(&frames)?;
    Ok(plans
        .iter()
        .zip(ports)
        .zip(shares)
        .map(|((plan, n), share)| Wiring {
            layout: memory.layout(&plan.name, n),
            share: Some(share),
        })
        .collect())
}

/// A switch's ports: AF_XDP sockets and memory links.
pub(super) type Ports = LinkedIo<XskIo>;

/// Switch `name`'s ports: an AF_XDP socket on each interface of
/// `ifnames` whose port has no memory link in `wiring` (over the wiring's
/// share of the frame area, or an area of its own), and the memory links,
/// in port order; each port logged.
pub(super) fn open_ports(
    name: &str,
    common: &Common,
    queues: &[(String, Vec<u32>)],
    ifnames: &[String],
    wiring: Wiring,
    transfer: Transfer,
) -> Result<Ports, Box<dyn std::error::Error>> {
    let mut layout = wiring.layout;
    layout.resize_with(ifnames.len(), || None);
    let xsk_ifnames: Vec<String> = ifnames
        .iter()
        .zip(&layout)
        .filter(|(_, end)| end.is_none())
        .map(|(n, _)| n.clone())
        .collect();
    let mut cfg = xsk_config(common);
    cfg.queues = queues.iter().cloned().collect();
    let xsk = match wiring.share {
        Some(share) => XskIo::open_in(&xsk_ifnames, &cfg, share)?,
        None => XskIo::open(&xsk_ifnames, &cfg)?,
    };
    for p in xsk.port_info() {
        info!(switch = %name, port = %p.name, xdp_mode = %p.xdp_mode, bind_mode = p.bind_mode, queues = ?p.queues, "port ready (AF_XDP)");
    }
    let io = LinkedIo::new(xsk, layout, transfer)?;
    for (i, port) in ifnames.iter().enumerate() {
        if let Some(end) = io.link(i) {
            info!(switch = %name, port = %port, peer = %end.peer_name(), transfer = %transfer.name(), "memory link ready");
        }
    }
    Ok(io)
}

/// The control sockets of the plans, removed when dropped.
pub(super) struct ControlSockets(Vec<PathBuf>);

impl Drop for ControlSockets {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Checks what can fail on the user's input before anything is attached
/// (`--loops`, the stats files) and serves each plan's control socket;
/// returns each plan's inbox (it also feeds a metrics endpoint, socket or
/// not).
pub(super) fn prepare(
    common: &Common,
    plans: &[Plan],
    loops: usize,
) -> Result<(Vec<Inbox>, ControlSockets), Box<dyn std::error::Error>> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if loops > cores {
        return Err(format!("--loops {loops}: at most one loop per core ({cores} here)").into());
    }
    if loops > plans.len() {
        return Err(format!(
            "--loops {loops}: more loops than switches ({})",
            plans.len()
        )
        .into());
    }
    if loops > 1 && common.cpu.is_some() {
        return Err("--cpu pins one loop; with --loops above 1 the kernel places the loops".into());
    }
    for plan in plans {
        if let Some(path) = &plan.stats_file {
            check_stats_path(path)?;
        }
    }
    let mut sockets = ControlSockets(Vec::new());
    let mut inboxes = Vec::new();
    for plan in plans {
        let inbox = Inbox::new()?;
        if let Some(path) = &plan.control {
            serve(path, &inbox).map_err(|e| format!("control socket {}: {e}", path.display()))?;
            sockets.0.push(path.clone());
        }
        inboxes.push(inbox);
    }
    Ok((inboxes, sockets))
}

/// A switch opened on a loop: what it reports when it stops.
pub(super) trait Opened: Loop {
    /// Its final report.
    type Report;

    /// Shutdown: hands every frame back, writes its files a last time,
    /// detaches (inside its namespace: a program attached through netlink
    /// is detached by interface index there) and reports.
    fn close(self, plan: &Plan) -> Self::Report;
}

/// Closes `opened` inside `plan`'s namespace after `finish` (see
/// [`Opened::close`]).
pub(super) fn close_in_netns<T, R>(opened: T, plan: &Plan, finish: impl FnOnce(&mut T) -> R) -> R {
    let mut opened = opened;
    let report = finish(&mut opened);
    let guard = plan
        .netns
        .as_deref()
        .map(lcmp_switch::netns::NetnsGuard::enter);
    if let Some(Err(e)) = &guard {
        warn!(switch = %plan.name, "{e}: detaching from the process's namespace");
    }
    drop(opened);
    drop(guard);
    report
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

/// How a kind opens one of its switches on the calling thread.
pub(super) type Open<'a, O> =
    dyn Fn(&Plan, Inbox, Wiring) -> Result<O, Box<dyn std::error::Error>> + Sync + 'a;

/// Opens the switches of `group` on the calling thread, reports the
/// outcome on `ready`, and if every switch of the process opened, runs them
/// on one loop until SIGINT/SIGTERM. Returns their final reports.
fn run_loop<O: Opened>(
    common: &Common,
    group: Vec<(Plan, Inbox, Wiring)>,
    open: &Open<'_, O>,
    several: bool,
    ready: std::sync::mpsc::Sender<Result<(), String>>,
    go: &std::sync::Barrier,
    all_ok: &AtomicBool,
) -> Vec<(String, O::Report)> {
    let mut opened = Vec::new();
    let mut plans = Vec::new();
    let mut failed = None;
    for (plan, inbox, wiring) in group {
        match open(&plan, inbox, wiring) {
            Ok(o) => {
                opened.push(o);
                plans.push(plan);
            }
            Err(e) => {
                failed = Some(if several {
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
        tune_poll_thread(common);
        run_many(&mut opened, &STOP);
        info!("stopping: detaching XDP programs");
    }
    opened
        .into_iter()
        .zip(&plans)
        .map(|(o, p)| (p.name.clone(), o.close(p)))
        .collect()
}

/// Runs the switches of `plans` (with their inboxes and wirings) on
/// `loops` event loops until SIGINT/SIGTERM: switch i on loop i mod
/// `loops`, loop 0 on this thread (so a signal, blocked on the others,
/// wakes a loop at once). Each is opened by `open` on its loop's thread;
/// if any fails to open, none runs and the first failure is returned.
/// Returns the final reports.
pub(super) fn run<O: Opened>(
    common: &Common,
    loops: usize,
    plans: &[Plan],
    inboxes: Vec<Inbox>,
    wirings: Vec<Wiring>,
    open: &Open<'_, O>,
) -> Result<Vec<(String, O::Report)>, String>
where
    O::Report: Send,
{
    let several = plans.len() > 1;
    let mut groups: Vec<Vec<(Plan, Inbox, Wiring)>> = (0..loops).map(|_| Vec::new()).collect();
    for (i, ((plan, inbox), w)) in plans.iter().cloned().zip(inboxes).zip(wirings).enumerate() {
        groups[i % loops].push((plan, inbox, w));
    }
    super::install_signal_handlers();
    let go = std::sync::Barrier::new(loops + 1);
    let all_ok = AtomicBool::new(false);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let mut groups = groups.into_iter();
    let first = groups.next().expect("at least one loop");
    let (reports, error) = std::thread::scope(|s| {
        let others: Vec<_> = groups
            .enumerate()
            .map(|(i, group)| {
                let ready = ready_tx.clone();
                let (go, all_ok) = (&go, &all_ok);
                std::thread::Builder::new()
                    .name(format!("loop{}", i + 1))
                    .spawn_scoped(s, move || {
                        block_stop_signals();
                        run_loop(common, group, open, several, ready, go, all_ok)
                    })
                    .expect("spawn a loop thread")
            })
            .collect();
        // The verdict: every loop's opening outcome, then go (or not).
        let decider = {
            let (go, all_ok) = (&go, &all_ok);
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
        let mut reports = run_loop(common, first, open, several, ready_tx, &go, &all_ok);
        // Others may be asleep until their next deadline (a link check):
        // STOP is already set for them.
        STOP.store(true, Ordering::SeqCst);
        for h in others {
            reports.extend(h.join().expect("loop thread"));
        }
        (reports, decider.join().expect("decider thread"))
    });
    match error {
        Some(e) => Err(e),
        None => Ok(reports),
    }
}

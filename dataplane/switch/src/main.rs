//! `lcmp-switch`: the AF_XDP DCI switch daemon.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::{Parser, ValueEnum};
use lcmp_control::server::{serve, Inbox};
use lcmp_ebpf::{RouteSocket, XdpMode};
use lcmp_policy::{CongestionParams, LcmpParams, PathCostParams, Policy};
use lcmp_switch::config::{defaults, from_topology, EcnFractions, Options};
use lcmp_switch::daemon::{run_many, Daemon, DaemonConfig, MonotonicClock, PollMode as LoopMode};
use lcmp_switch::rotor::{RotorSwitch, SlotClock};
use lcmp_switch::rotor_daemon::{RealtimeClock, RotorDaemon, RotorDaemonConfig, RotorNode};
use lcmp_switch::rotor_tor::{TorRouting, TorSettings};
use lcmp_switch::switch::Switch;
use lcmp_switch::tor_path::{TorConfig, TorSwitch};
use lcmp_switch::xsk::{XskConfig, XskIo};
use lcmp_topology::rotor_net::{RotorNetwork, RotorRole};
use lcmp_topology::tables::PathMetric;
use lcmp_topology::Topology;
use tracing::{info, warn};

#[derive(Parser, Debug)]
#[command(
    version,
    about = "LCMP inter-datacenter switch over AF_XDP",
    long_about = "LCMP inter-datacenter switch over AF_XDP.\n\n\
    Reads its ports and routes from the topology file (the part of switch \
    --switch), attaches an XDP program to every port that steers IPv4/IPv6 \
    data into an AF_XDP socket (ARP, ND and everything else stays with the \
    kernel), and forwards: each new flow's egress port is chosen by the \
    policy among the route's candidate next hops and kept for the flow's \
    life. Each egress port has a byte-limited buffer with ECN marking and, \
    unless --no-emulation, emulates its link's rate and one-way delay from \
    the topology (AF_XDP transmission bypasses \
    qdiscs). A control socket (--control-socket) serves lcmp-ctl and \
    lcmp-agent: status, ports, flows, costs, and live changes of policy, \
    parameters, route tables and links between polls, hitless for cached \
    flows. SIGINT/SIGTERM detach the XDP programs and exit.\n\n\
    Rotor networks (Mars): given a rotor network file (a [rotor] table, \
    written by `lcmp-agent rotor-plan --schedule`), --switch rotorR runs \
    a bufferless circuit switch that connects port i to the port of its \
    matching in each slot, and --switch torT a rotor-aware ToR (uplinks \
    u0.., host ports h0..) with per-next-hop queues that send only while \
    the circuit to the next hop is up and never past the slot's end, \
    routing direct, Valiant, or by shift routing on the emulated graph. \
    Slots come from CLOCK_REALTIME and the epoch (--epoch-unix-ns, the \
    file, or the agent's set_epoch). The stats file then holds the rotor \
    status (slot, lateness, queues, drops); `lcmp-ctl rotor` shows it."
)]
struct Args {
    /// Topology file (TOML).
    #[arg(long, short)]
    topology: PathBuf,
    /// Name of a switch in the topology file. Repeat it to run several
    /// switches in this process, each with its own ports, tables, flow
    /// cache, counters, stats file and control socket (see --netns,
    /// --loops; per-switch paths take a {switch} placeholder).
    #[arg(
        long = "switch",
        short,
        value_name = "NAME",
        required_unless_present = "all_switches"
    )]
    switches: Vec<String>,
    /// Run every switch of the topology in this process.
    #[arg(long, conflicts_with = "switches")]
    all_switches: bool,
    /// The one switch of a rotor network (set from --switch).
    #[arg(skip)]
    switch: String,
    /// The network namespace of a switch's ports: SWITCH=NAME (a namespace
    /// of `ip netns`, or a path such as /proc/PID/ns/net). The switch's
    /// sockets and XDP programs are opened inside it. Default: this
    /// process's namespace.
    #[arg(long = "netns", value_name = "SWITCH=NS", value_parser = parse_netns)]
    netns: Vec<(String, String)>,
    /// The network namespace of every switch is PREFIX followed by its name
    /// (a testbed's are lcmptb-TESTBED-); --netns overrides it per switch.
    #[arg(long, value_name = "PREFIX")]
    netns_prefix: Option<String>,
    /// Event loops (threads) the switches share, at most one per core:
    /// switch i runs on loop i mod N. One loop sleeps in one poll over all
    /// its switches' sockets, which costs less CPU than a process per
    /// switch.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    loops: u16,
    /// Interface of each port, in the topology's port order (repeat, or
    /// comma-separate); SWITCH/IFNAME when running several switches.
    /// Default: the interface names in the topology file.
    #[arg(long = "port", value_delimiter = ',')]
    ports: Vec<String>,
    /// MAC address of the device at the far end of a port: IFNAME=MAC, or
    /// SWITCH/IFNAME=MAC when running several switches (repeatable). Ports
    /// without one use the kernel's ARP table, else learn it from the first
    /// frame they receive.
    #[arg(long = "peer-mac", value_parser = parse_peer_mac)]
    peer_macs: Vec<(String, [u8; 6])>,
    /// Path-selection policy.
    #[arg(long, default_value = "lcmp", value_parser = parse_policy)]
    policy: Policy,
    /// LCMP: weight of the path cost C_path.
    #[arg(long, default_value_t = defaults::ALPHA)]
    alpha: u32,
    /// LCMP: weight of the congestion cost C_cong.
    #[arg(long, default_value_t = defaults::BETA)]
    beta: u32,
    /// LCMP: fraction of the live candidates kept, as N/D.
    #[arg(long, default_value = "1/2", value_parser = parse_fraction)]
    keep: (u8, u8),
    /// LCMP: routes with at most this many live candidates keep them all.
    #[arg(long, default_value_t = 3)]
    keep_all_up_to: u8,
    /// What C_path describes: the whole path or the local link only.
    #[arg(long, value_enum, default_value = "path")]
    metric: Metric,
    /// Weight of the delay score in C_path.
    #[arg(long, default_value_t = 3)]
    w_delay: u32,
    /// Weight of the capacity score in C_path.
    #[arg(long, default_value_t = 1)]
    w_capacity: u32,
    /// Congestion sampling interval, microseconds.
    #[arg(long, default_value_t = defaults::SAMPLE_INTERVAL_US)]
    sample_interval_us: u64,
    /// Flow cache capacity (flows).
    #[arg(long, default_value_t = defaults::FLOW_CAPACITY)]
    flow_capacity: usize,
    /// Idle time after which a flow may change path, milliseconds. Default:
    /// 1 s or twice the largest path RTT, whichever is larger.
    #[arg(long)]
    flow_timeout_ms: Option<u64>,
    /// Flow hash seed. Default: derived from the switch name.
    #[arg(long)]
    seed: Option<u64>,
    /// Forward at line rate: no link-rate shaping or delay emulation.
    #[arg(long)]
    no_emulation: bool,
    /// ECN marking thresholds as fractions of the port buffer: KMIN,KMAX,PMAX.
    #[arg(long, default_value = "0.2,0.8,0.2", value_parser = parse_ecn)]
    ecn: EcnFractions,
    /// Disable ECN marking.
    #[arg(long)]
    no_ecn: bool,
    /// XDP attach mode.
    #[arg(long, value_enum, default_value = "auto")]
    xdp_mode: Mode,
    /// Busy: spin on one core (lowest latency). Event: sleep in poll() on
    /// the sockets and timer deadlines (near zero CPU when idle; several
    /// switches can share cores).
    #[arg(long, value_enum, default_value = "event")]
    poll: PollMode,
    /// Pin the poll thread to this CPU (one loop only).
    #[arg(long)]
    cpu: Option<usize>,
    /// Run the poll thread under SCHED_FIFO at this priority (1-99): in
    /// event mode a due deadline or frame then preempts ordinary tasks
    /// instead of waiting for them (rotor slots; see docs/rotor.md). The
    /// kernel's real-time throttling still leaves others 5 % of each CPU.
    #[arg(long, value_name = "PRIO", value_parser = clap::value_parser!(i32).range(1..=99))]
    rt_priority: Option<i32>,
    /// Frames received per port per poll.
    #[arg(long, default_value_t = defaults::BATCH)]
    batch: usize,
    /// Frames in the shared UMEM (all ports).
    #[arg(long, default_value_t = defaults::FRAMES)]
    frames: u32,
    /// Entries per AF_XDP TX and completion ring.
    #[arg(long, default_value_t = defaults::RING_SIZE)]
    ring_size: u32,
    /// Entries per AF_XDP RX and fill ring. veth delivers redirected frames
    /// in bursts of thousands; deeper rings absorb them at the cost of UMEM
    /// (each fill-ring entry holds a 2 KiB frame; the UMEM is raised to at
    /// least twice this per port).
    #[arg(long, default_value_t = defaults::RX_RING_SIZE)]
    rx_ring_size: u32,
    /// Write counters as JSON to this file (atomically replaced). A
    /// {switch} in the path is replaced by the switch's name (required
    /// when running several).
    #[arg(long)]
    stats_file: Option<PathBuf>,
    /// How often the stats file is written, milliseconds.
    #[arg(long, default_value_t = defaults::STATS_INTERVAL_MS)]
    stats_interval_ms: u64,
    /// Log every path decision to this file as CSV (created or truncated
    /// at start): a new flow (`new`), a flow moved off a dead port
    /// (`failover`), a flow decided but not cached because the flow cache
    /// was full (`cache_full`, logged at each of its decisions). Columns:
    /// time_ns,src,dst,proto,sport,dport,port,ifname,reason,prefix, where
    /// time_ns is CLOCK_MONOTONIC at the decision, sport is the echo
    /// identifier for ICMP echoes, sport/dport are 0 for
    /// protocols without ports, port is the egress port's index and prefix
    /// the route chosen over. Decisions are buffered in memory and written
    /// every --stats-interval-ms, when the buffer is half full, and at
    /// exit; counters in the stats file under "flow_log". {switch} as in
    /// --stats-file.
    #[arg(long, value_name = "FILE")]
    flow_log: Option<PathBuf>,
    /// Decisions the flow log buffers between writes. A decision that
    /// finds the buffer full is not logged and is counted in the stats
    /// file ("flow_log": {"dropped": N}).
    #[arg(long, default_value_t = defaults::FLOW_LOG_CAPACITY, value_parser = parse_capacity)]
    flow_log_capacity: usize,
    /// Link-state check interval, milliseconds. Link events (netlink) also
    /// trigger a check at once; this is the fallback.
    #[arg(long, default_value_t = defaults::LINK_CHECK_MS)]
    link_check_ms: u64,
    /// Control socket (Unix, mode 0600, root only) that `lcmp-ctl` and
    /// `lcmp-agent` talk to; {switch} as in --stats-file. Default:
    /// /run/lcmp-switch/SWITCH.sock.
    #[arg(long, value_name = "PATH")]
    control_socket: Option<PathBuf>,
    /// Serve no control socket.
    #[arg(long, conflicts_with = "control_socket")]
    no_control: bool,
    /// Serve Prometheus/OpenMetrics metrics of this process's switches at
    /// http://ADDR/metrics (e.g. 127.0.0.1:9464). In a testbed the agent
    /// serves every switch's metrics instead.
    #[arg(long, value_name = "ADDR")]
    metrics_listen: Option<std::net::SocketAddr>,
    /// Rotor networks, ToRs in event mode: stop sleeping this long before
    /// a slot in which frames wait, and poll from there, so the first frame
    /// leaves on time despite wake-up latency (tens of microseconds on a
    /// VM). 0: always sleep.
    #[arg(long, value_name = "US", default_value_t = 0)]
    slot_spin_us: u64,
    /// Rotor networks, ToRs: deliver frames from the circuits to hosts with
    /// the instant the sending ToR put them on its uplink as source MAC
    /// (02:TT:TT:TT:TT:TT, the low 40 bits of CLOCK_REALTIME ns) instead of
    /// the port's own: instrumentation for measuring slot boundaries at the
    /// hosts (`lcmp-testbed rotor-timing`).
    #[arg(long)]
    deliver_send_stamps: bool,
    /// Rotor networks: the start of slot 0, CLOCK_REALTIME ns (overrides
    /// the file's epoch_unix_ns). Without either the switch forwards
    /// nothing into the circuits until the agent sets one.
    #[arg(long, value_name = "NS")]
    epoch_unix_ns: Option<u64>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Metric {
    Path,
    Local,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Mode {
    Auto,
    Native,
    Generic,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum PollMode {
    Busy,
    Event,
}

fn parse_policy(s: &str) -> Result<Policy, String> {
    Policy::from_name(s)
        .ok_or_else(|| format!("unknown policy; one of {}", Policy::NAMES.join(", ")))
}

fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        return Err(format!("{s:?} is not a MAC address (aa:bb:cc:dd:ee:ff)"));
    }
    let mut m = [0u8; 6];
    for (b, p) in m.iter_mut().zip(parts) {
        *b = u8::from_str_radix(p, 16).map_err(|_| format!("{s:?} is not a MAC address"))?;
    }
    Ok(m)
}

fn parse_peer_mac(s: &str) -> Result<(String, [u8; 6]), String> {
    let (ifname, mac) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected IFNAME=MAC"))?;
    Ok((ifname.to_string(), parse_mac(mac)?))
}

fn parse_netns(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((sw, ns)) if !sw.is_empty() && !ns.is_empty() => Ok((sw.to_string(), ns.to_string())),
        _ => Err(format!("{s:?}: expected SWITCH=NAMESPACE")),
    }
}

fn parse_fraction(s: &str) -> Result<(u8, u8), String> {
    let (n, d) = s.split_once('/').ok_or("expected N/D, e.g. 1/2")?;
    let n: u8 = n.trim().parse().map_err(|_| "bad numerator")?;
    let d: u8 = d.trim().parse().map_err(|_| "bad denominator")?;
    if d == 0 || n == 0 || n > d {
        return Err("need 0 < N <= D".into());
    }
    Ok((n, d))
}

fn parse_ecn(s: &str) -> Result<EcnFractions, String> {
    EcnFractions::parse(s)
}

fn parse_capacity(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{s:?}: expected a number of records, at least 1")),
    }
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

fn install_signal_handlers() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is
        // async-signal-safe; sigaction is given a zeroed, then filled,
        // struct that lives across the call.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// Fills in unknown peer MACs from the kernel's IPv4 neighbour table of
/// the ports' namespace (read over the switch's route socket). A host that
/// has sent nothing yet is not in it: a datagram to the discard port, sent
/// from `udp` (a socket of that namespace), makes the kernel (which owns
/// the gateway address on the port) resolve it by ARP, which the XDP
/// program leaves to the kernel. True while some peer is still unknown.
fn resolve_peers(
    sw: &mut Switch<XskIo>,
    ifnames: &[String],
    host_v4: &[(usize, std::net::Ipv4Addr)],
    udp: Option<&std::net::UdpSocket>,
) -> bool {
    let missing = sw.ports_without_peer();
    if missing.is_empty() {
        return false;
    }
    let table = sw.io().route().neighbours().unwrap_or_default();
    for port in missing {
        let ifindex = sw.io().port_ifindex(port);
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

/// Peer MACs of interfaces from the IPv4 neighbour table, read over
/// `route` (the namespace's own table; the peer of a point-to-point port is
/// its only neighbour there).
fn neighbour_macs(route: &mut RouteSocket) -> HashMap<String, [u8; 6]> {
    let mut out = HashMap::new();
    for n in route.neighbours().unwrap_or_default() {
        if let (true, Some(mac)) = (n.addr.is_ipv4() && n.is_valid(), n.mac) {
            if let Ok(link) = route.link(n.ifindex) {
                out.insert(link.name, mac);
            }
        }
    }
    out
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
fn plans(args: &Args, topo: &Topology) -> Result<Vec<Plan>, String> {
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
            .stats_file
            .as_deref()
            .map(|p| per_switch_path(p, name, several, "--stats-file"))
            .transpose()?;
        let flow_log = args
            .flow_log
            .as_deref()
            .map(|p| per_switch_path(p, name, several, "--flow-log"))
            .transpose()?;
        let control = if args.no_control {
            None
        } else {
            Some(match &args.control_socket {
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
    for port in &args.ports {
        let (sw, ifname) = for_switch(port, &names, "--port")?;
        let i = plan_of(&mut plans, &sw);
        plans[i].ports.push(ifname.to_string());
    }
    for (ifname, mac) in &args.peer_macs {
        let (sw, ifname) = for_switch(ifname, &names, "--peer-mac")?;
        let i = plan_of(&mut plans, &sw);
        plans[i].peer_macs.push((ifname.to_string(), *mac));
    }
    Ok(plans)
}

/// The switch options shared by every switch of the process.
fn options(args: &Args) -> Options {
    let lcmp = LcmpParams {
        alpha: args.alpha,
        beta: args.beta,
        keep_num: args.keep.0,
        keep_den: args.keep.1,
        keep_all_up_to: args.keep_all_up_to,
        ..Default::default()
    };
    let policy = match args.policy {
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
        metric: match args.metric {
            Metric::Path => PathMetric::Path,
            Metric::Local => PathMetric::LocalLink,
        },
        congestion: CongestionParams {
            sample_interval_ns: args.sample_interval_us * 1_000,
            ..Default::default()
        },
        emulate_links: !args.no_emulation,
        ecn: (!args.no_ecn).then_some(args.ecn),
        flow_capacity: args.flow_capacity,
        flow_idle_timeout_ns: args.flow_timeout_ms.map(|ms| ms * 1_000_000),
        seed: args.seed,
        batch_size: args.batch,
        link_check_interval_ns: args.link_check_ms.max(1) * 1_000_000,
        ifnames: Vec::new(),
        peer_macs: HashMap::new(),
    }
}

/// A switch opened by [`open_switch`], ready to run on a loop.
type SwitchDaemon = Daemon<XskIo, MonotonicClock>;

/// Opens switch `plan` on the calling thread: inside its namespace for
/// the duration (netlink and AF_XDP sockets, XDP programs and the UDP
/// socket that makes the kernel ARP for silent hosts all belong to it), and
/// back in the thread's own namespace when this returns. Nothing is left
/// attached on an error.
fn open_switch(
    args: &Args,
    topo: &Topology,
    base: &Options,
    plan: &Plan,
    inbox: Inbox,
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
    let opts = Options {
        ifnames: plan.ports.clone(),
        peer_macs,
        ..base.clone()
    };
    let own_mac = |ifname: &str| -> Result<[u8; 6], String> {
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
    let io = open_ports(args, &ifnames)?;
    for p in io.port_info() {
        info!(switch = %plan.name, port = %p.name, xdp_mode = %p.xdp_mode, "port ready (AF_XDP copy mode, queue 0)");
    }
    // The ports' own addresses, as the XDP programs read them at attach:
    // the source of the ICMP errors sent out of them (traffic to them is
    // the kernel's).
    let addresses: Vec<Vec<std::net::IpAddr>> = io
        .steering()
        .map(|s| s.local_addresses().to_vec())
        .collect();
    let mut sw = Switch::new(config, io)?;
    for (i, a) in addresses.iter().enumerate() {
        sw.set_port_addresses(i, a);
    }
    if plan.flow_log.is_some() {
        sw.enable_flow_log(args.flow_log_capacity);
    }
    let mut daemon = Daemon::new(
        sw,
        MonotonicClock,
        DaemonConfig {
            name: plan.name.clone(),
            poll: match args.poll {
                PollMode::Busy => LoopMode::Busy,
                PollMode::Event => LoopMode::Event,
            },
            stats_file: plan.stats_file.clone(),
            stats_interval_ns: args.stats_interval_ms.max(10) * 1_000_000,
            flow_log: plan.flow_log.clone(),
        },
    )?;
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
    daemon.add_side_task(Box::new(move |sw, now| {
        if resolve_peers(sw, &ifnames, &host_v4, udp.as_ref()) {
            now + 200_000_000
        } else {
            u64::MAX
        }
    }));
    info!(
        switch = %plan.name,
        netns = %plan.netns.as_deref().unwrap_or("(own)"),
        policy = base.policy.name(),
        routes = daemon.switch_ref().routes().len(),
        poll = ?args.poll,
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
    args: &Args,
    topo: &Topology,
    base: &Options,
    group: Vec<(Plan, Inbox)>,
    ready: std::sync::mpsc::Sender<Result<(), String>>,
    go: &std::sync::Barrier,
    all_ok: &AtomicBool,
) -> Vec<(String, lcmp_control::Snapshot)> {
    let mut daemons = Vec::new();
    let mut plans = Vec::new();
    let mut failed = None;
    for (plan, inbox) in group {
        match open_switch(args, topo, base, &plan, inbox) {
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
        tune_poll_thread(args);
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

fn run(mut args: Args) -> Result<(), Box<dyn std::error::Error>> {
    if args.rt_priority.is_some() && args.poll == PollMode::Busy {
        return Err("--rt-priority with --poll busy would starve every other task on the CPU; use --poll event".into());
    }
    let text = std::fs::read_to_string(&args.topology)
        .map_err(|e| format!("{}: {e}", args.topology.display()))?;
    if RotorNetwork::is_rotor_file(&text) {
        if args.switches.len() != 1
            || args.all_switches
            || !args.netns.is_empty()
            || args.netns_prefix.is_some()
            || args.loops != 1
        {
            return Err("a rotor network runs one switch per process: one --switch, no --all-switches, --netns, --netns-prefix or --loops".into());
        }
        args.switch = args.switches[0].clone();
        let net = RotorNetwork::parse(&text, &args.topology.display().to_string())?;
        return run_rotor(args, net);
    }
    if args.epoch_unix_ns.is_some() {
        return Err(format!(
            "--epoch-unix-ns is for rotor networks; {} is not one (no [rotor] table)",
            args.topology.display()
        )
        .into());
    }
    let topo = Topology::load(&args.topology)?;
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
    if loops > 1 && args.cpu.is_some() {
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
    let mut groups: Vec<Vec<(Plan, Inbox)>> = (0..loops).map(|_| Vec::new()).collect();
    for (i, (plan, inbox)) in plans.iter().cloned().zip(inboxes).enumerate() {
        groups[i % loops].push((plan, inbox));
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

/// The ports' AF_XDP sockets and XDP programs.
fn open_ports(args: &Args, ifnames: &[String]) -> Result<XskIo, Box<dyn std::error::Error>> {
    Ok(XskIo::open(
        ifnames,
        &XskConfig {
            frames: args.frames,
            ring_size: args.ring_size,
            rx_ring_size: args.rx_ring_size,
            xdp_mode: match args.xdp_mode {
                Mode::Auto => XdpMode::Auto,
                Mode::Native => XdpMode::Native,
                Mode::Generic => XdpMode::Generic,
            },
        },
    )?)
}

/// Fails now, naming the file, if the stats file cannot be written.
fn check_stats_file(args: &Args) -> Result<(), String> {
    match &args.stats_file {
        Some(path) => check_stats_path(path),
        None => Ok(()),
    }
}

/// Fails now, naming the file, if a stats file cannot be written at `path`.
fn check_stats_path(path: &std::path::Path) -> Result<(), String> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, b"{}")
        .and_then(|_| std::fs::remove_file(&tmp))
        .map_err(|e| format!("cannot write the stats file {}: {e}", path.display()))
}

/// Where the control socket is served, if at all.
fn control_path(args: &Args) -> Option<PathBuf> {
    (!args.no_control).then(|| {
        args.control_socket
            .clone()
            .unwrap_or_else(|| lcmp_control::paths::switch_socket(&args.switch))
    })
}

/// CPU pinning, real-time priority and timer slack of the poll thread
/// (the calling thread).
fn tune_poll_thread(args: &Args) {
    if let Some(cpu) = args.cpu {
        // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes
        // within it; sched_setaffinity reads it.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            if libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) != 0 {
                warn!(
                    "cannot pin to CPU {cpu}: {}",
                    std::io::Error::last_os_error()
                );
            }
        }
    }
    if let Some(prio) = args.rt_priority {
        let param = libc::sched_param {
            sched_priority: prio,
        };
        // SAFETY: sched_setscheduler reads one sched_param from a valid
        // pointer; pid 0 is the calling thread.
        if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
            warn!(
                "cannot run under SCHED_FIFO {prio}: {}",
                std::io::Error::last_os_error()
            );
        }
    }
    if args.poll == PollMode::Event {
        // SAFETY: PR_SET_TIMERSLACK takes an integer argument; 1 ns slack
        // makes timer deadlines (shaper, delay line, slots) wake on time.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
    }
}

/// A rotor or a ToR of a rotor network.
fn run_rotor(args: Args, net: RotorNetwork) -> Result<(), Box<dyn std::error::Error>> {
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
    for (ifname, _) in &args.peer_macs {
        if !ifnames.iter().any(|p| p == ifname) || !matches!(role, RotorRole::Tor(_)) {
            return Err(format!(
                "--peer-mac {ifname}=...: not a host port of {} (host ports: {})",
                args.switch,
                ifnames
                    .iter()
                    .skip(net.rotors as usize)
                    .filter(|_| matches!(role, RotorRole::Tor(_)))
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
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

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lcmp-switch: {e}");
            ExitCode::FAILURE
        }
    }
}

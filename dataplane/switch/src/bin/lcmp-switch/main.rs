//! `lcmp-switch`: the AF_XDP switch daemon: `lcmp` (the DCI switch) or
//! `rotor` (a rotor network's rotor or ToR).

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::{Args, Parser, Subcommand, ValueEnum};
use lcmp_ebpf::{RouteSocket, XdpMode};
use lcmp_policy::{FlowCache, PolicyName};
use lcmp_switch::config::{defaults, EcnFractions, EcnLinkTime, EcnMarkAt};
use lcmp_switch::mem_link::Transfer;
use lcmp_switch::xsk::{BindMode, XskConfig};
use lcmp_topology::network::Network;
use lcmp_topology::tables::PathMetric;
use tracing::warn;

mod lcmp;
mod many;
mod rotor;

// Bounds of the flags the switch turns into nanoseconds, so that no value
// overflows u64 (the network-time ones are further stretched by at most the
// scaling's time factor, 1e6, which the bounds leave far inside u64 too).

/// Longest --sample-interval-us, 1 s (10,000 times the default): C_cong
/// sampled more rarely would be older than most flows it steers.
const MAX_SAMPLE_INTERVAL_US: u64 = 1_000_000;

/// Longest --flow-timeout-ms: the flow cache's own limit (about 2.4 h),
/// beyond which the switch refuses the timeout anyway.
const MAX_FLOW_TIMEOUT_MS: u64 = FlowCache::MAX_IDLE_TIMEOUT_NS / 1_000_000;

/// Longest --stats-interval-ms and --link-check-ms, a day: a stats write or
/// fallback link check more rarely than that is as good as never.
const MAX_INTERVAL_MS: u64 = 86_400_000;

/// Longest --slot-spin-us, 1 s: the spin covers wake-up latency (tens of
/// microseconds), and slots are microseconds to milliseconds long.
const MAX_SLOT_SPIN_US: u64 = 1_000_000;

#[derive(Parser, Debug)]
#[command(
    version,
    about = "LCMP inter-datacenter switch and rotor-network switch over AF_XDP",
    long_about = "LCMP inter-datacenter switch and rotor-network switch over AF_XDP.\n\n\
    `lcmp-switch lcmp` runs LCMP switches of a DCI topology file, \
    `lcmp-switch rotor` a rotor or ToR of a rotor network file ([rotor] \
    table). Both attach an XDP program to every port that steers IPv4/IPv6 \
    data into an AF_XDP socket (ARP, ND and everything else stays with the \
    kernel), serve a control socket for lcmp-ctl and lcmp-agent and write \
    a stats file. SIGINT/SIGTERM detach the XDP programs and exit. Needs \
    Linux 6.1 or newer (older kernels are refused at start). \
    `lcmp-switch lcmp --help` and `lcmp-switch rotor --help` list each \
    one's options."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once at start: the size difference of the variants costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
enum Command {
    /// LCMP switches of a DCI topology (one or several in this process).
    #[command(
        long_about = "LCMP switches of a DCI topology file.\n\n\
    Reads its ports and routes from the topology file (the part of switch \
    --switch), and forwards: each new flow's egress port is chosen by the \
    policy among the route's candidate next hops and kept for the flow's \
    life. Each egress port has a byte-limited buffer with ECN marking and, \
    unless --no-emulation, emulates its link's rate and one-way delay from \
    the topology (AF_XDP transmission bypasses qdiscs). The control socket \
    (--control-socket) serves status, ports, flows, costs, and live changes \
    of policy, parameters, route tables and links between polls, hitless \
    for cached flows. Several switches can run in one process (repeat \
    --switch, or --all-switches), each in its namespace (--netns, \
    --netns-prefix) on shared event loops (--loops).\n\n\
    An option given twice takes its last value (a testbed's defaults come \
    first, its user's arguments after them); --no-ecn and --ecn-link-time \
    likewise: the later one wins.",
        args_override_self = true
    )]
    Lcmp(LcmpArgs),
    /// Rotors and rotor-aware ToRs of a rotor network (one or several in
    /// this process).
    #[command(
        long_about = "A rotor or a rotor-aware ToR of a rotor network (Mars).\n\n\
    Given a rotor network file (a [rotor] table, written by `lcmp-agent \
    rotor-plan --schedule`), --switch rotorR runs a bufferless circuit \
    switch that connects port i to the port of its matching in each slot, \
    and --switch torT a rotor-aware ToR (uplinks u0.., host ports h0..) \
    with per-next-hop queues that send only while the circuit to the next \
    hop is up and never past the slot's end, routing direct, Valiant, or \
    by shift routing on the emulated graph. Slots come from CLOCK_REALTIME \
    and the epoch (--epoch-unix-ns, the file, or the agent's set_epoch). \
    The stats file holds the rotor status (slot, lateness, queues, drops); \
    `lcmp-ctl rotor` shows it; metrics are served by the agent (lcmp-agent \
    run --metrics-listen). Several switches can run in one process (repeat \
    --switch, or --all-switches) on shared event loops (--loops), the links \
    between them in memory (--links memory): a large network then fits a \
    few cores, at the cost of slot timing when a loop is busy."
    )]
    Rotor(RotorArgs),
}

/// The options both kinds of switch take: the file, ports, AF_XDP and
/// polling, stats and control socket.
#[derive(Args, Debug)]
struct Common {
    /// Network file (TOML): a DCI topology for `lcmp`, a rotor network
    /// for `rotor`.
    #[arg(long, short)]
    topology: PathBuf,
    /// Interface of each port, in the topology's port order (repeat, or
    /// comma-separate); SWITCH/IFNAME when `lcmp` runs several switches.
    /// Default: the interface names in the topology file.
    #[arg(long = "port", value_delimiter = ',')]
    ports: Vec<String>,
    /// MAC address of the device at the far end of a port: IFNAME=MAC, or
    /// SWITCH/IFNAME=MAC when `lcmp` runs several switches (repeatable). Ports
    /// without one use the kernel's ARP table, else learn it from the first
    /// frame they receive.
    #[arg(long = "peer-mac", value_parser = parse_peer_mac)]
    peer_macs: Vec<(String, [u8; 6])>,
    /// Flow hash seed. Default: derived from the switch name.
    #[arg(long)]
    seed: Option<u64>,
    /// XDP attach mode.
    #[arg(long, value_enum, default_value = "auto")]
    xdp_mode: Mode,
    /// How the AF_XDP sockets move frames: zero-copy (the NIC reads and
    /// writes the switch's frame memory; needs driver support and native
    /// XDP), copy (the kernel copies each frame; all veth offers), or auto:
    /// zero-copy when every port's driver has it, else copy. The mode in use
    /// is logged and shown per socket by `lcmp-ctl ports` and the metrics.
    #[arg(long, value_enum, default_value = "auto")]
    bind_mode: Bind,
    /// RX queues of a port's interface that get a socket: IFNAME=LIST
    /// (SWITCH/IFNAME=LIST when `lcmp` runs several switches), LIST like
    /// 0-3,6 (repeatable). Default: every queue the interface has (`ethtool
    /// -l`). Traffic on a queue without a socket goes to the kernel.
    #[arg(long = "queues", value_name = "IFNAME=LIST", value_parser = parse_queues)]
    queues: Vec<(String, Vec<u32>)>,
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
    /// when `lcmp` runs several).
    #[arg(long)]
    stats_file: Option<PathBuf>,
    /// How often the stats file is written, milliseconds (at least 10 are
    /// used, at most a day is accepted).
    #[arg(long, default_value_t = defaults::STATS_INTERVAL_MS, value_parser = clap::value_parser!(u64).range(..=MAX_INTERVAL_MS))]
    stats_interval_ms: u64,
    /// Control socket (Unix, mode 0600, root only) that `lcmp-ctl` and
    /// `lcmp-agent` talk to; {switch} as in --stats-file. Default:
    /// /run/lcmp-switch/SWITCH.sock.
    #[arg(long, value_name = "PATH")]
    control_socket: Option<PathBuf>,
    /// Serve no control socket.
    #[arg(long, conflicts_with = "control_socket")]
    no_control: bool,
}

/// What a link between two switches of the process is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum LinkKind {
    /// A veth pair: each end an AF_XDP port.
    Veth,
    /// In memory (`lcmp_switch::mem_link`).
    Memory,
}

/// Which switches of the network file this process runs, where, and how
/// the links between them are made (both subcommands).
#[derive(Args, Debug)]
struct Several {
    /// Name of a switch in the network file. Repeat it to run several
    /// switches in this process, each with its own ports, tables (or
    /// schedule), counters, stats file and control socket (see --netns,
    /// --loops; per-switch paths take a {switch} placeholder).
    #[arg(
        long = "switch",
        short,
        value_name = "NAME",
        required_unless_present = "all_switches"
    )]
    switches: Vec<String>,
    /// Run every switch of the network file in this process.
    #[arg(long, conflicts_with = "switches")]
    all_switches: bool,
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
    /// How links between two switches of this process are made: `veth`
    /// (each end's interface, as given with --port) or `memory` (frames
    /// cross in memory, no interface: each direction keeps its emulation
    /// in the sending port, and the kernel's copy-mode transmit, the veth
    /// and the peer's XDP program are skipped). Links to a host or to a
    /// switch elsewhere stay on their interfaces. A memory link's carrier
    /// is set with `lcmp-ctl carrier`, its frames seen with `lcmp-ctl
    /// capture`.
    #[arg(long, value_enum, default_value_t = LinkKind::Veth)]
    links: LinkKind,
    /// How a frame crosses a memory link: `descriptor` (it moves, no copy)
    /// or `copy` (into a buffer of the receiving switch; for measuring).
    #[arg(long, value_enum, default_value_t = Transfer::Descriptor)]
    memory_link_transfer: Transfer,
}

/// `lcmp-switch lcmp`: the LCMP switches of a DCI topology.
#[derive(Args, Debug)]
struct LcmpArgs {
    #[command(flatten)]
    common: Common,
    #[command(flatten)]
    several: Several,
    /// Path-selection policy.
    #[arg(long, value_enum, default_value_t = PolicyName::Lcmp)]
    policy: PolicyName,
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
    metric: PathMetric,
    /// Weight of the delay score in C_path (the paper's w_dl).
    #[arg(long, default_value_t = 3)]
    w_delay: u32,
    /// Weight of the capacity score in C_path (the paper's w_lc).
    #[arg(long, default_value_t = 1)]
    w_capacity: u32,
    /// Weight of the queue level Q in C_cong (the paper's w_ql).
    #[arg(long, default_value_t = lcmp_policy::CongestionParams::default().w_queue)]
    w_queue: u32,
    /// Weight of the queue trend T in C_cong (the paper's w_tl).
    #[arg(long, default_value_t = lcmp_policy::CongestionParams::default().w_trend)]
    w_trend: u32,
    /// Weight of the persistence D in C_cong (the paper's w_dp).
    #[arg(long, default_value_t = lcmp_policy::CongestionParams::default().w_persist)]
    w_persist: u32,
    /// Congestion sampling interval, microseconds of the network's time
    /// (stretched by --scaling's time factor); at most 1 s.
    #[arg(long, default_value_t = defaults::SAMPLE_INTERVAL_US, value_parser = clap::value_parser!(u64).range(..=MAX_SAMPLE_INTERVAL_US))]
    sample_interval_us: u64,
    /// Flow cache capacity (flows).
    #[arg(long, default_value_t = defaults::FLOW_CAPACITY)]
    flow_capacity: usize,
    /// Idle time after which a flow may change path, milliseconds of the
    /// network's time. Default: 1 s or twice the largest path RTT,
    /// whichever is larger. At most the flow cache's limit (about 2.4 h).
    #[arg(long, value_parser = clap::value_parser!(u64).range(..=MAX_FLOW_TIMEOUT_MS))]
    flow_timeout_ms: Option<u64>,
    /// An experiment's scaling of the network in the topology file:
    /// `rate=R,buffer=B,time=T` (factors left out are 1; buffer follows
    /// rate), or `none`. The switch emulates each link at rate / (R x T),
    /// buffer / B and delay x T, and runs its durations (sampling, ECN link
    /// times, flow timeout) T times slower; its routes, C_path and kept sets
    /// stay those of the file's network, so scaling changes no decision.
    #[arg(long, value_name = "SCALING", default_value = "none")]
    scaling: lcmp_topology::Scaling,
    /// Forward at line rate: no link-rate shaping or delay emulation.
    #[arg(long)]
    no_emulation: bool,
    /// ECN marking thresholds as fractions of the port buffer: KMIN,KMAX,PMAX.
    #[arg(long, default_value = "0.2,0.8,0.2", value_parser = parse_ecn)]
    ecn: EcnFractions,
    /// ECN thresholds as queueing time at each port's link rate instead:
    /// KMIN_US,KMAX_US,PMAX,KMIN_FLOOR_BYTES. `32,128,0.2,2000` gives the
    /// LCMP simulator's DCQCN marking (100-400 KB at 25 Gbit/s, 400-1600
    /// KB at 100 Gbit/s) at any rate scale, with kmin at least 2000 bytes
    /// and kmax floored in the same ratio (8000).
    #[arg(long, value_name = "KMIN_US,KMAX_US,PMAX,FLOOR", value_parser = parse_ecn_link_time, overrides_with = "no_ecn")]
    ecn_link_time: Option<EcnLinkTime>,
    /// Disable ECN marking.
    #[arg(long, overrides_with = "ecn_link_time")]
    no_ecn: bool,
    /// When the ECN mark is decided, with --ecn and --ecn-link-time alike.
    /// `enqueue`: when a frame is admitted, on the bytes queued in front of
    /// it. `dequeue`: when it leaves the port buffer, on the bytes left
    /// behind it, as the HPCC/LCMP ns-3 simulator does
    /// (SwitchNotifyDequeue, ShouldSendCN): choose it to reproduce the
    /// simulator's DCQCN feedback, which is fresher (the mark reflects the
    /// queue when the frame departs, not the queue it found one queueing
    /// delay earlier, so marks start and stop sooner as the queue moves).
    /// The same thresholds apply either way.
    #[arg(long, value_enum, value_name = "WHEN", default_value = "enqueue")]
    ecn_mark_at: EcnMarkAt,
    /// Drop only when a port's queue would exceed N times its buffer
    /// (default 1: at the buffer). N > 1 stands in for a lossless (PFC)
    /// fabric such as the LCMP simulator's, which holds back at the senders
    /// what a full buffer would drop; congestion levels (C_cong) and ECN
    /// stay relative to the buffer itself.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    drop_headroom: u64,
    /// In-band network telemetry for HPCC: every RoCEv2 frame carrying an
    /// INT collect block (BTH bit 0x20, lcmp-wire's `int` module) gets a
    /// hop record as it leaves a port: the port's emulated rate (kbit/s),
    /// the bytes it left queued, the port's departed-bytes counter and
    /// the switch clock at its departure (both wrapping at 2^32); a full
    /// block gets its OVERFLOW flag. The UDP checksum of a frame written
    /// to becomes 0. Counted as int_pushed and int_overflow per port.
    #[arg(long)]
    int: bool,
    /// Frames received per port per poll.
    #[arg(long, default_value_t = defaults::BATCH)]
    batch: usize,
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
    /// trigger a check at once; this is the fallback (0 checks every
    /// millisecond; at most a day).
    #[arg(long, default_value_t = defaults::LINK_CHECK_MS, value_parser = clap::value_parser!(u64).range(..=MAX_INTERVAL_MS))]
    link_check_ms: u64,
    /// Serve Prometheus/OpenMetrics metrics of this process's switches at
    /// http://ADDR/metrics (e.g. 127.0.0.1:9464). In a testbed the agent
    /// serves every switch's metrics instead.
    #[arg(long, value_name = "ADDR")]
    metrics_listen: Option<std::net::SocketAddr>,
}

/// `lcmp-switch rotor`: one rotor or ToR of a rotor network.
#[derive(Args, Debug)]
struct RotorArgs {
    #[command(flatten)]
    common: Common,
    /// The rotor network's switches to run: rotorR (a rotor), torT (a
    /// ToR).
    #[command(flatten)]
    several: Several,
    /// ToRs in event mode: stop sleeping this long before a slot in which
    /// frames wait, and poll from there, so the first frame leaves on time
    /// despite wake-up latency (tens of microseconds on a VM). 0: always
    /// sleep. At most 1 s.
    #[arg(long, value_name = "US", default_value_t = 0, value_parser = clap::value_parser!(u64).range(..=MAX_SLOT_SPIN_US))]
    slot_spin_us: u64,
    /// ToRs: deliver frames from the circuits to hosts with the instant
    /// the sending ToR put them on its uplink as source MAC
    /// (02:TT:TT:TT:TT:TT, the low 40 bits of CLOCK_REALTIME ns) instead of
    /// the port's own: instrumentation for measuring slot boundaries at the
    /// hosts (`lcmp-testbed rotor-timing`).
    #[arg(long)]
    deliver_send_stamps: bool,
    /// ToRs: NDP packet trimming, the Mars paper's transport: a next-hop
    /// queue and an emulated host downlink (at the network's rate) hold at
    /// most K data frames; an NDP data packet beyond is cut to its headers
    /// and sent ahead at high priority, anything else dropped. Off by
    /// default (host ports unshaped, queues bounded by the buffer only).
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u32).range(1..))]
    trim_packets: Option<u32>,
    /// The start of slot 0, CLOCK_REALTIME ns (overrides the file's
    /// epoch_unix_ns). Without either the switch forwards nothing into the
    /// circuits until the agent sets one.
    #[arg(long, value_name = "NS")]
    epoch_unix_ns: Option<u64>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Mode {
    Auto,
    Native,
    Generic,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Bind {
    Auto,
    ZeroCopy,
    Copy,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum PollMode {
    Busy,
    Event,
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

/// `IFNAME=LIST`, LIST comma-separated queue ids and ranges (`0-3,6`).
fn parse_queues(s: &str) -> Result<(String, Vec<u32>), String> {
    let (ifname, list) = s
        .split_once('=')
        .filter(|(i, l)| !i.is_empty() && !l.is_empty())
        .ok_or_else(|| format!("{s:?}: expected IFNAME=LIST, e.g. eth0=0-3"))?;
    let max = lcmp_ebpf::MAX_QUEUES;
    let id = |t: &str| -> Result<u32, String> {
        t.trim()
            .parse::<u32>()
            .ok()
            .filter(|q| *q < max)
            .ok_or_else(|| format!("{t:?}: not a queue id (0-{})", max - 1))
    };
    let mut queues = Vec::new();
    for part in list.split(',') {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (id(a)?, id(b)?),
            None => (id(part)?, id(part)?),
        };
        if a > b {
            return Err(format!("{part:?}: a range runs from low to high"));
        }
        for q in a..=b {
            if queues.contains(&q) {
                return Err(format!("{s:?}: queue {q} is listed twice"));
            }
            queues.push(q);
        }
    }
    Ok((ifname.to_string(), queues))
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

fn parse_ecn_link_time(s: &str) -> Result<EcnLinkTime, String> {
    EcnLinkTime::parse(s)
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

/// The AF_XDP settings of the command line (queues: none listed; a
/// switch's own come from its plan).
fn xsk_config(args: &Common) -> XskConfig {
    XskConfig {
        frames: args.frames,
        ring_size: args.ring_size,
        rx_ring_size: args.rx_ring_size,
        xdp_mode: match args.xdp_mode {
            Mode::Auto => XdpMode::Auto,
            Mode::Native => XdpMode::Native,
            Mode::Generic => XdpMode::Generic,
        },
        bind_mode: match args.bind_mode {
            Bind::Auto => BindMode::Auto,
            Bind::ZeroCopy => BindMode::ZeroCopy,
            Bind::Copy => BindMode::Copy,
        },
        queues: Default::default(),
    }
}

/// Fails now, naming the file, if a stats file cannot be written at `path`.
fn check_stats_path(path: &std::path::Path) -> Result<(), String> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, b"{}")
        .and_then(|_| std::fs::remove_file(&tmp))
        .map_err(|e| format!("cannot write the stats file {}: {e}", path.display()))
}

/// CPU pinning, real-time priority and timer slack of the poll thread
/// (the calling thread).
fn tune_poll_thread(args: &Common) {
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

/// Refuses contradictory options and a network file of the other kind,
/// then runs the LCMP switches or the rotor network's switch.
fn run(cli: Cli) -> Result<(), Box<dyn std::error::Error>> {
    let (common, want) = match &cli.command {
        Command::Lcmp(a) => (&a.common, "lcmp"),
        Command::Rotor(a) => (&a.common, "rotor"),
    };
    if common.rt_priority.is_some() && common.poll == PollMode::Busy {
        return Err("--rt-priority with --poll busy would starve every other task on the CPU; use --poll event".into());
    }
    let file = common.topology.clone();
    let network = Network::load(&file)?;
    let file = file.display();
    match (cli.command, network) {
        (Command::Lcmp(args), Network::Dci(topo)) => lcmp::run(args, topo),
        (Command::Rotor(args), Network::Rotor(net)) => rotor::run(args, net),
        (_, Network::Dci(_)) => Err(format!(
            "`lcmp-switch {want}` was given {file}, a DCI topology; run it with `lcmp-switch lcmp`"
        )
        .into()),
        (_, Network::Rotor(_)) => Err(format!(
            "`lcmp-switch {want}` was given {file}, a rotor network; run it with `lcmp-switch rotor`"
        )
        .into()),
    }
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
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lcmp-switch: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("lcmp-switch").chain(args.iter().copied()))
    }

    #[test]
    fn each_subcommand_takes_its_own_flags_only() {
        Cli::command().debug_assert();
        assert!(parse(&["lcmp", "-t", "f.toml", "-s", "a", "-s", "b", "--loops", "2"]).is_ok());
        assert!(parse(&["lcmp", "-t", "f.toml", "--all-switches", "--policy", "ecmp"]).is_ok());
        assert!(parse(&[
            "rotor",
            "-t",
            "f.toml",
            "-s",
            "tor0",
            "--epoch-unix-ns",
            "1"
        ])
        .is_ok());
        // Several rotor-network switches share loops and memory links.
        assert!(parse(&[
            "rotor",
            "-t",
            "f.toml",
            "--all-switches",
            "--loops",
            "2",
            "--links",
            "memory",
            "--netns-prefix",
            "tb-"
        ])
        .is_ok());
        for bad in [
            &["lcmp", "-t", "f.toml", "-s", "a", "--epoch-unix-ns", "1"][..],
            &["lcmp", "-t", "f.toml", "-s", "a", "--slot-spin-us", "5"],
            &[
                "rotor",
                "-t",
                "f.toml",
                "-s",
                "tor0",
                "--metrics-listen",
                "127.0.0.1:1",
            ],
            &["rotor", "-t", "f.toml", "-s", "tor0", "--policy", "ecmp"],
            &["rotor", "-t", "f.toml", "-s", "tor0", "--all-switches"],
            &["lcmp", "-t", "f.toml", "-s", "a", "--policy", "ospf"],
            &["-t", "f.toml", "-s", "a"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?} parsed");
        }
    }

    /// Each duration flag takes its bound (tests/cli.rs: one more is
    /// refused): the bounds in ns, 1e9 (1 s), 8,796,090,000,000 (the cache's
    /// 8,796,090,925,056 ns in whole ms) and 8.64e13 (a day), convert without
    /// overflow.
    #[test]
    fn duration_flags_take_values_up_to_their_bound() {
        assert_eq!(MAX_FLOW_TIMEOUT_MS, 8_796_090);
        let parse_lcmp =
            |flag: &str, value: &str| match parse(&["lcmp", "-t", "f", "-s", "a", flag, value])
                .unwrap_or_else(|e| panic!("{flag} {value}: {e}"))
                .command
            {
                Command::Lcmp(a) => a,
                Command::Rotor(_) => panic!("lcmp expected"),
            };
        let a = parse_lcmp("--sample-interval-us", "1000000");
        assert_eq!(
            lcmp::options(&a).congestion.sample_interval_ns,
            1_000_000_000
        );
        let a = parse_lcmp("--flow-timeout-ms", "8796090");
        assert_eq!(
            lcmp::options(&a).flow_idle_timeout_ns,
            Some(8_796_090_000_000)
        );
        let a = parse_lcmp("--link-check-ms", "86400000");
        assert_eq!(lcmp::options(&a).link_check_interval_ns, 86_400_000_000_000);
        assert_eq!(
            parse_lcmp("--stats-interval-ms", "86400000")
                .common
                .stats_interval_ms,
            86_400_000
        );
        let rotor = parse(&[
            "rotor",
            "-t",
            "f",
            "-s",
            "tor0",
            "--slot-spin-us",
            "1000000",
        ]);
        match rotor.unwrap().command {
            Command::Rotor(a) => assert_eq!(a.slot_spin_us, 1_000_000),
            Command::Lcmp(_) => panic!("rotor expected"),
        }
    }

    /// The weights of C_path and C_cong reach the options: the paper's
    /// 3,1 and 2,1,1 by default, the flags' values when given.
    #[test]
    fn cost_weight_flags_set_the_path_and_congestion_weights() {
        let lcmp = |args: &[&str]| match parse(args).unwrap().command {
            Command::Lcmp(a) => lcmp::options(&a),
            Command::Rotor(_) => panic!("lcmp expected"),
        };
        let o = lcmp(&["lcmp", "-t", "f", "-s", "a"]);
        let weights = |o: &lcmp_switch::config::Options| {
            let (p, c) = (o.path_cost, o.congestion);
            [p.w_delay, p.w_capacity, c.w_queue, c.w_trend, c.w_persist]
        };
        assert_eq!(weights(&o), [3, 1, 2, 1, 1]);
        let o = lcmp(&[
            "lcmp",
            "-t",
            "f",
            "-s",
            "a",
            "--w-delay=1",
            "--w-capacity=3",
            "--w-queue=1",
            "--w-trend=2",
            "--w-persist=5",
        ]);
        assert_eq!(weights(&o), [1, 3, 1, 2, 5]);
    }

    /// INT is off unless --int asks for it.
    #[test]
    fn int_flag_turns_int_on() {
        let lcmp = |args: &[&str]| match parse(args).unwrap().command {
            Command::Lcmp(a) => lcmp::options(&a),
            Command::Rotor(_) => panic!("lcmp expected"),
        };
        assert!(!lcmp(&["lcmp", "-t", "f", "-s", "a"]).int);
        assert!(lcmp(&["lcmp", "-t", "f", "-s", "a", "--int"]).int);
    }

    #[test]
    fn a_repeated_lcmp_option_takes_its_last_value_and_lists_still_collect() {
        let lcmp = |args: &[&str]| match parse(args).unwrap().command {
            Command::Lcmp(a) => a,
            Command::Rotor(_) => panic!("lcmp expected"),
        };
        // A testbed's defaults, then its user's: the user's win.
        let a = lcmp(&[
            "lcmp",
            "-t",
            "f.toml",
            "-s",
            "a",
            "-s",
            "b",
            "--drop-headroom=1000",
            "--loops",
            "2",
            "--scaling",
            "rate=1000,time=10",
            "--drop-headroom=1",
            "--loops",
            "1",
            "--scaling",
            "none",
        ]);
        assert_eq!(a.drop_headroom, 1);
        assert_eq!(a.several.loops, 1);
        assert_eq!(a.scaling, lcmp_topology::Scaling::NONE);
        assert_eq!(a.several.switches, ["a", "b"]);
        // --no-ecn and --ecn-link-time: the later one.
        let off = lcmp(&[
            "lcmp",
            "-t",
            "f",
            "-s",
            "a",
            "--ecn-link-time=32,128,0.2,2000",
            "--no-ecn",
        ]);
        assert!(off.no_ecn && off.ecn_link_time.is_none());
        let on = lcmp(&[
            "lcmp",
            "-t",
            "f",
            "-s",
            "a",
            "--no-ecn",
            "--ecn-link-time=32,128,0.2,2000",
        ]);
        assert!(!on.no_ecn && on.ecn_link_time.is_some());
    }

    #[test]
    fn a_file_of_the_other_kind_names_the_subcommand_to_use() {
        let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../../topologies/8dc.toml");
        let cli = parse(&["rotor", "-t", file, "-s", "tor0"]).unwrap();
        assert_eq!(
            run(cli).unwrap_err().to_string(),
            format!(
                "`lcmp-switch rotor` was given {file}, a DCI topology; run it with `lcmp-switch lcmp`"
            )
        );
    }
}

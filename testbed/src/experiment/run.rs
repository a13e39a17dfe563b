//! One run of an experiment: fresh switches with the run's policy, traffic
//! clients on the source DC's hosts, progress, the measurement window's
//! switch counters (every port of every switch) and CPU, every switch's
//! decision log (each flow's path through the switches), and the checks
//! that flag a run whose emulation was not faithful.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use lcmp_control::Snapshot as SwitchStats;
use lcmp_netlab::{Bg, Lab};
use lcmp_results::analysis::{link_name, LinkLoad, LinkSpec, NetworkInput};
use lcmp_topology::{SwitchId, Topology};
use lcmp_traffic::record::FlowRecord;
use serde_json::Value;

use super::config::Transport;
use crate::bed;
use crate::flow_paths::{self, SwitchDecisions, Tuple};
use crate::state::{State, SwitchSettings};
use crate::{Error, Result};

/// Set by SIGINT/SIGTERM: loops stop and the experiment tears down.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Fails if the user asked to stop.
pub fn check_interrupted() -> Result<()> {
    if INTERRUPTED.load(Ordering::Relaxed) {
        Err(Error::new("interrupted"))
    } else {
        Ok(())
    }
}

/// A switch may use at most this share of one core before the run is
/// flagged: beyond it, the testbed rather than the network sets the pace.
pub const MAX_SWITCH_CPU: f64 = 0.90;
/// The whole machine must keep at least this share idle.
pub const MIN_MACHINE_IDLE: f64 = 0.05;
/// Drops that a real link would not make (AF_XDP TX ring full, emulation
/// overflow) may be at most this fraction of forwarded frames.
pub const MAX_ARTIFACT_DROP_SHARE: f64 = 0.001;

/// What one run measured besides the flows.
#[derive(Debug, Clone, Default)]
pub struct RunMeasurements {
    /// Bytes sent by the source switch per port index during the window.
    pub port_tx_bytes: HashMap<u8, u64>,
    /// Length of the measurement window, seconds.
    pub window_s: f64,
    /// Why the run's emulation is suspect (empty: faithful).
    pub notes: Vec<String>,
    /// Time of the failure, seconds after the arrivals started.
    pub failure_at_s: Option<f64>,
    /// Flow-cache failovers counted by the source switch.
    pub failovers: u64,
    /// What every switch saw: each link direction's bytes in the window,
    /// the flows whose switch paths could not be reconstructed from the
    /// decision logs (by reason), the logs' lost records, and which
    /// switches after the source have a choice.
    pub network: NetworkInput,
    /// The transport's counters, summed over the senders.
    pub transport_counters: BTreeMap<String, u64>,
    /// Frames the switches dropped in the run, by reason, summed over the
    /// switches; `xsk_rx_ring_full` and `xsk_rx_dropped` are the kernel's
    /// AF_XDP drops before a switch saw the frame.
    pub switch_drops: BTreeMap<String, u64>,
}

/// An `lcmp-traffic client` log's final progress line (`"done":true`),
/// once the client has printed it.
pub(crate) fn done_line_of(log: &str) -> Option<Value> {
    log.lines()
        .rev()
        .filter(|l| l.starts_with('{'))
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["done"] == Value::Bool(true))
}

/// The counters of the client's final progress line under its
/// transport's key (`"rocev2": {...}`); empty for TCP.
fn transport_counters_of(log: &str) -> BTreeMap<String, u64> {
    done_line_of(log)
        .and_then(|v| {
            v["rocev2"].as_object().map(|o| {
                o.iter()
                    .filter_map(|(k, n)| Some((k.clone(), n.as_u64()?)))
                    .collect()
            })
        })
        .unwrap_or_default()
}

/// Every switch's decision log (`lcmp-switch lcmp --flow-log`), by switch id
/// (`None` where there is no log file), each copied into `dir` as
/// `decisions-<switch>.csv`.
fn read_decision_logs(
    topo: &Topology,
    st: &State,
    dir: &Path,
) -> Result<Vec<Option<SwitchDecisions>>> {
    let mut out = vec![None; topo.switches().len()];
    for p in &st.procs {
        let Some(sw) = topo.switch_by_name(&p.name) else {
            continue;
        };
        let log = bed::flow_log_path(&p.stats);
        if !log.is_file() {
            continue;
        }
        let file =
            std::fs::File::open(&log).map_err(|e| Error::new(format!("{}: {e}", log.display())))?;
        out[sw.id.0] = Some(
            SwitchDecisions::from_csv(std::io::BufReader::new(file), &log.display().to_string())
                .map_err(Error::new)?,
        );
        let copy = dir.join(format!("decisions-{}.csv", p.name));
        std::fs::copy(&log, &copy).map_err(|e| Error::new(format!("{}: {e}", copy.display())))?;
    }
    Ok(out)
}

/// The tuple a flow's acknowledgements carry back to the sender: TCP's
/// come from the receiver's socket to the sender's (the flow's tuple
/// swapped); rocev2's go from the receiver's address and port to the
/// sender's port 4791, the same for every queue pair between two hosts
/// (`lcmp-traffic server --transport rocev2`), so those flows share one
/// reverse path: the switches' last decision for it.
fn reverse_tuple(transport: Transport, (src, dst): Tuple) -> Tuple {
    match transport {
        Transport::Tcp => (dst, src),
        Transport::Rocev2 => (
            dst,
            SocketAddr::new(src.ip(), lcmp_traffic::rocev2::wire::ROCEV2_PORT),
        ),
    }
}

/// Client progress as printed by `lcmp-traffic client`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Progress {
    /// Flows started.
    pub started: u64,
    /// Flows completed.
    pub completed: u64,
    /// Flows failed.
    pub failed: u64,
    /// Flows in flight.
    pub active: u64,
}

fn last_progress(log: &str) -> Progress {
    let Some(v) = log
        .lines()
        .rev()
        .filter(|l| l.starts_with('{'))
        .find_map(|l| serde_json::from_str::<Value>(l).ok())
    else {
        return Progress::default();
    };
    let n = |k: &str| v[k].as_u64().unwrap_or(0);
    Progress {
        started: n("started"),
        completed: n("completed"),
        failed: n("failed"),
        active: n("active"),
    }
}

/// CPU time (user + system) of a process, seconds.
fn process_cpu_s(pid: u32) -> Option<f64> {
    cpu_s_of_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Switches busy at most this share of a core count as settled.
const SETTLED_CPU: f64 = 0.5;

/// Waits until the switch processes' start-up work is over: a switch that
/// has written its first stats file may still be faulting in its rings'
/// memory and loading programs for its other ports for a second or two,
/// which would fall into a run whose load comes at once (a trace replay).
/// Settled: below [`SETTLED_CPU`] of a core over 200 ms, at most 20 s.
/// Returns the seconds waited.
pub fn wait_until_settled(pids: &[u32]) -> f64 {
    let mut unique = pids.to_vec();
    unique.sort_unstable();
    unique.dedup();
    let total = || unique.iter().filter_map(|&p| process_cpu_s(p)).sum::<f64>();
    let start = Instant::now();
    let mut before = total();
    while start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(200));
        let now = total();
        if (now - before) / 0.2 < SETTLED_CPU {
            break;
        }
        before = now;
    }
    start.elapsed().as_secs_f64()
}

/// CPU seconds of each event loop of a process that runs several switches:
/// its main thread (loop 0) and its threads named `loop*`, by thread id.
/// One loop is one core, so each must stay within [`MAX_SWITCH_CPU`].
fn loop_cpu_s(pid: u32) -> Vec<(u32, f64)> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| {
            let tid: u32 = t.file_name().to_str()?.parse().ok()?;
            let comm = std::fs::read_to_string(t.path().join("comm")).ok()?;
            if tid != pid && !comm.starts_with("loop") {
                return None;
            }
            Some((
                tid,
                cpu_s_of_stat(&std::fs::read_to_string(t.path().join("stat")).ok()?)?,
            ))
        })
        .collect()
}

/// A note for each event loop (thread id, CPU seconds at the start and
/// the end of a window of `wall` seconds) above [`MAX_SWITCH_CPU`].
fn busy_loops(start: &[(u32, f64)], end: &[(u32, f64)], wall: f64) -> Vec<String> {
    end.iter()
        .enumerate()
        .filter_map(|(n, (tid, b))| {
            let (_, a) = start.iter().find(|(t, _)| t == tid)?;
            let share = (b - a) / wall;
            (share > MAX_SWITCH_CPU).then(|| {
                format!(
                    "event loop {n} of the switches' process used {:.0}% of a core (limit {:.0}%)",
                    share * 100.0,
                    MAX_SWITCH_CPU * 100.0
                )
            })
        })
        .collect()
}

/// utime + stime of a `/proc/.../stat` line, seconds.
fn cpu_s_of_stat(stat: &str) -> Option<f64> {
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After the command: state is field 3 of stat(5), utime 14, stime 15.
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    // SAFETY: sysconf(3) has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some(ticks / hz.max(1.0))
}

/// (available, total) jiffies of the whole machine: available is idle,
/// iowait and niced time. Niced work (a build beside the testbed) yields
/// the CPU to the testbed's processes as soon as they wake (CFS weight 15
/// at nice 19 against 1024), so it does not starve them.
fn machine_jiffies() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    machine_jiffies_of(stat.lines().next()?)
}

/// [`machine_jiffies`] of `/proc/stat`'s `cpu` line (user nice system idle
/// iowait ...).
fn machine_jiffies_of(cpu: &str) -> Option<(u64, u64)> {
    let v: Vec<u64> = cpu
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let available = v.get(1)? + v.get(3)? + v.get(4).copied().unwrap_or(0);
    Some((available, v.iter().sum()))
}

fn read_stats(path: &Path) -> Option<SwitchStats> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

/// Bytes each port (by index) of a switch's stats has put onto its link.
///
/// A link's load is counted when its bytes depart from the port buffer
/// (`departed_bytes`), not when the switch transmits them (`tx_bytes`):
/// the switch emulates the propagation delay by holding frames after
/// departure, so `tx_bytes` trails by a whole link delay, and a long link
/// (2.5 s) would read idle in a shorter window however busy it was.
fn departed_bytes_by_port(stats: &SwitchStats, ifnames: &[String]) -> HashMap<u8, u64> {
    let mut m = HashMap::new();
    for p in &stats.ports {
        if let Some(i) = ifnames.iter().position(|n| p.name == *n) {
            m.insert(i as u8, p.counter("departed_bytes"));
        }
    }
    m
}

/// Bytes put onto the link ([`departed_bytes_by_port`]) per port index of
/// every switch (by switch id) at one moment; `None` where a switch's stats
/// were not readable.
pub(super) type PortTx = Vec<Option<HashMap<u8, u64>>>;

/// Bytes port `port` of switch `switch` sent between two [`PortTx`]
/// readings; `None` if either lacks it. A counter that went backwards (a
/// restarted switch) gives 0.
fn tx_delta(start: &PortTx, end: &PortTx, switch: SwitchId, port: u8) -> Option<u64> {
    let read = |t: &PortTx| t.get(switch.0)?.as_ref()?.get(&port).copied();
    Some(read(end)?.saturating_sub(read(start)?))
}

/// What every direction of every switch-to-switch link of `topo` carried
/// between the readings `start` and `end`, in topology order (links in file
/// order, `a -> b` then `b -> a`).
pub(super) fn link_loads(topo: &Topology, start: &PortTx, end: &PortTx) -> Vec<LinkLoad> {
    let mut out = Vec::new();
    for l in topo.links() {
        for (from, port, to) in [(l.a, l.a_port, l.b), (l.b, l.b_port, l.a)] {
            let (f, t) = (&topo.switch(from).name, &topo.switch(to).name);
            out.push(LinkLoad {
                link: LinkSpec {
                    name: link_name(f, t),
                    from: f.clone(),
                    to: t.clone(),
                    rate_bps: topo.port(from, port).map_or(l.rate_bps, |p| p.rate_bps),
                },
                tx_bytes: tx_delta(start, end, from, port),
            });
        }
    }
    out
}

/// Snapshot of what a run compares between the window's start and end.
struct Snapshot {
    at: Instant,
    tx: PortTx,
    switch_cpu: Vec<Option<f64>>,
    /// Per process: its event loops' CPU seconds, by thread id (shared
    /// processes only).
    loop_cpu: Vec<Vec<(u32, f64)>>,
    machine: Option<(u64, u64)>,
}

/// Everything a run needs that stays the same across runs.
pub struct RunEnv<'a> {
    /// The testbed's state (switch pids are updated by each run).
    pub state: &'a mut State,
    /// The testbed.
    pub tb: &'a Lab,
    /// lcmp-switch.
    pub switch_bin: &'a Path,
    /// lcmp-traffic.
    pub traffic_bin: &'a Path,
    /// Name of the source DC switch.
    pub from: &'a str,
    /// Sender host names.
    pub senders: &'a [String],
    /// `--dst` arguments (`NAME=ADDR:PORT`) for the clients.
    pub dsts: &'a [String],
}

/// What one run is.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// Run id (directory name).
    pub id: String,
    /// Policy.
    pub policy: String,
    /// LCMP alpha and beta.
    pub alpha: u32,
    /// LCMP beta.
    pub beta: u32,
    /// The switches' settings (the policy's included).
    pub switches: SwitchSettings,
    /// Workload name or file.
    pub workload: String,
    /// Offered payload rate per sender, bits per second.
    pub rate_bps_per_sender: f64,
    /// Seed.
    pub seed: u64,
    /// Arrivals, seconds.
    pub duration_s: f64,
    /// Warm-up, seconds.
    pub warmup_s: f64,
    /// Drain bound, seconds.
    pub drain_s: f64,
    /// In-flight bound per client.
    pub max_concurrent: Option<u32>,
    /// Congestion control of the flows: the kernel's under tcp (`None`:
    /// its default), the RoCEv2 one under rocev2 (always named).
    pub cc: Option<String>,
    /// Under rocev2 with HPCC: its base RTT, the largest between hosts,
    /// ns of the network's (unscaled) time ([`super::max_host_rtt_ns`]).
    pub base_rtt_ns: Option<u64>,
    /// Link to take down mid-run, and when (seconds).
    pub failure: Option<(lcmp_topology::LinkId, f64)>,
    /// How flows are carried.
    pub transport: Transport,
    /// The experiment's scaling: flow sizes are divided by its size
    /// factor; under rocev2 the hosts run their line rate, DCQCN and
    /// timers as its rate and time factors say.
    pub scaling: lcmp_topology::Scaling,
    /// Extra client arguments under rocev2.
    pub rocev2_args: Vec<String>,
    /// A trace replay: each sender's schedule file (`lcmp-traffic client
    /// --schedule`), by sender; the senders without one send nothing.
    pub schedules: Option<BTreeMap<String, PathBuf>>,
}

/// Runs one run; writes `<dir>/flows.csv` and returns the flows and
/// measurements. `tick(elapsed_s, progress)` is called about four times a
/// second.
pub fn run_one(
    env: &mut RunEnv<'_>,
    spec: &RunSpec,
    dir: &Path,
    tick: &dyn Fn(f64, Progress),
) -> Result<(Vec<FlowRecord>, RunMeasurements)> {
    std::fs::create_dir_all(dir).map_err(|e| Error::new(format!("{}: {e}", dir.display())))?;
    // Fresh switches: empty flow caches, zero counters.
    bed::stop_switches(env.state)?;
    env.state.switches = spec.switches.clone();
    bed::start_switches(env.state, env.tb, env.switch_bin)?;
    let pids: Vec<u32> = env.state.procs.iter().map(|p| p.pid).collect();
    let settle = wait_until_settled(&pids);

    let topo = env.tb.topology();
    let src = env.tb.switch(env.from).id;
    let src_stats_path = env
        .state
        .procs
        .iter()
        .find(|p| p.name == env.from)
        .map(|p| p.stats.clone())
        .ok_or_else(|| Error::new(format!("no switch process for {}", env.from)))?;
    // Every switch's stats file and interface names, by switch id.
    let switch_ports: Vec<(Option<PathBuf>, Vec<String>)> = env
        .tb
        .switches
        .iter()
        .map(|n| {
            let stats = env.state.procs.iter().find(|p| p.name == n.name);
            (
                stats.map(|p| p.stats.clone()),
                n.ports.iter().map(|p| p.ifname.clone()).collect(),
            )
        })
        .collect();
    let shared: Vec<bool> = env.state.procs.iter().map(|p| p.shared).collect();
    let snapshot = || Snapshot {
        at: Instant::now(),
        tx: switch_ports
            .iter()
            .map(|(stats, ifnames)| {
                read_stats(stats.as_deref()?).map(|s| departed_bytes_by_port(&s, ifnames))
            })
            .collect(),
        switch_cpu: pids.iter().map(|&p| process_cpu_s(p)).collect(),
        loop_cpu: pids
            .iter()
            .zip(&shared)
            .map(|(&p, &sh)| if sh { loop_cpu_s(p) } else { Vec::new() })
            .collect(),
        machine: machine_jiffies(),
    };

    let mut clients: Vec<(Bg, PathBuf)> = Vec::new();
    let start = snapshot();
    for (i, s) in env.senders.iter().enumerate() {
        let host = env.tb.host(s);
        let out = dir.join(format!("flows-{s}.csv"));
        let Some(args) = client_args(env, spec, i, s, &out) else {
            continue;
        };
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        clients.push((host.netns.spawn(&argv)?, out));
    }

    let mut end: Option<Snapshot> = None;
    let mut failure_at = None;
    let deadline = spec.duration_s + spec.drain_s + 30.0;
    loop {
        check_interrupted()?;
        std::thread::sleep(Duration::from_millis(250));
        let elapsed = start.at.elapsed().as_secs_f64();
        tick(elapsed, total_progress(&clients));
        if let Some((link, at)) = spec.failure {
            if failure_at.is_none() && elapsed >= at {
                crate::bed::set_carrier(&env.state.name, env.tb, link, false)?;
                failure_at = Some(elapsed);
            }
        }
        if end.is_none() && elapsed >= spec.duration_s {
            end = Some(snapshot());
        }
        let mut running = 0;
        for (bg, _) in &mut clients {
            if let Some(status) = bg.exited() {
                if !status.success() {
                    return Err(Error::new(format!(
                        "lcmp-traffic client failed ({status}): {}",
                        bg.log()
                            .lines()
                            .rev()
                            .take(5)
                            .collect::<Vec<_>>()
                            .join(" | ")
                    )));
                }
            } else {
                running += 1;
            }
        }
        if running == 0 {
            break;
        }
        if elapsed > deadline {
            return Err(Error::new(format!(
                "traffic clients still running {deadline:.0} s after the start (drain bound \
                 {} s)",
                spec.drain_s
            )));
        }
    }
    let end = end.unwrap_or_else(snapshot);
    let transport_counters = clients_transport_counters(&clients);

    let mut meas = RunMeasurements {
        window_s: end.at.duration_since(start.at).as_secs_f64(),
        failure_at_s: failure_at,
        transport_counters,
        ..Default::default()
    };
    if settle >= 20.0 {
        meas.notes.push(format!(
            "the switches still used over {:.0}% of a core {settle:.0} s after they started",
            SETTLED_CPU * 100.0
        ));
    }
    if let Some((link, _)) = spec.failure {
        crate::bed::set_carrier(&env.state.name, env.tb, link, true)?;
    }
    for port in 0..switch_ports[src.0].1.len() as u8 {
        if let Some(bytes) = tx_delta(&start.tx, &end.tx, src, port) {
            meas.port_tx_bytes.insert(port, bytes);
        }
    }
    meas.network.links = link_loads(topo, &start.tx, &end.tx);
    check_faithfulness(env.state, &start, &end, &mut meas);
    if let Some(s) = read_stats(&src_stats_path) {
        meas.failovers = s.flows.failovers;
    }
    // Stopping the switches flushes their decision logs (the next run
    // starts fresh ones anyway).
    bed::stop_switches(env.state)?;
    // Their final stats, written at shutdown: the whole run (they started
    // fresh).
    meas.switch_drops = switch_drops(env.state);
    meas.network.flow_log_lost = flow_log_lost(env.state);
    let decisions = read_decision_logs(topo, env.state, dir)?;
    let mut flows = read_client_flows(&clients)?;
    annotate_paths(
        topo,
        &decisions,
        Some(src),
        spec.transport,
        &mut flows,
        &mut meas.network,
    );
    let pairs = env
        .dsts
        .iter()
        .filter_map(|d| Some((src, topo.host_by_name(d.split_once('=')?.0)?.switch)));
    meas.network.transit_choices = Some(transit_choices(topo, pairs));
    write_flows(&dir.join("flows.csv"), &flows, |_| None::<()>)?;
    for (_, path) in &clients {
        let _ = std::fs::remove_file(path);
    }

    Ok((flows, meas))
}

/// The seed of the `i`-th sender's Poisson arrivals in a run of `seed`:
/// every sender its own stream.
pub(crate) fn sender_seed(seed: u64, i: usize) -> u64 {
    seed * 1_000_003 + i as u64
}

/// The first flow id of the `i`-th sender's Poisson arrivals: disjoint
/// ranges of a billion ids.
pub(crate) fn sender_id_base(i: usize) -> u64 {
    i as u64 * 1_000_000_000
}

/// `lcmp-traffic client`'s arguments for sender `s` (the `i`-th), writing
/// its flows to `out`; `None` for a sender a trace replay has no schedule
/// for.
fn client_args(
    env: &RunEnv<'_>,
    spec: &RunSpec,
    i: usize,
    s: &str,
    out: &Path,
) -> Option<Vec<String>> {
    let mut args: Vec<String> = vec![
        env.traffic_bin.display().to_string(),
        "client".into(),
        "--transport".into(),
        spec.transport.name().into(),
        "--name".into(),
        s.to_string(),
    ];
    match &spec.schedules {
        Some(files) => {
            let file = files.get(s)?;
            args.extend(["--schedule".into(), file.display().to_string()]);
        }
        None => args.extend([
            "--workload".into(),
            spec.workload.clone(),
            "--rate-bps".into(),
            format!("{:.0}", spec.rate_bps_per_sender),
            "--duration".into(),
            spec.duration_s.to_string(),
            "--seed".into(),
            sender_seed(spec.seed, i).to_string(),
            "--id-base".into(),
            sender_id_base(i).to_string(),
        ]),
    }
    args.extend([
        "--size-scale".into(),
        spec.scaling.size.to_string(),
        "--warmup".into(),
        spec.warmup_s.to_string(),
        "--drain".into(),
        spec.drain_s.to_string(),
        "--out".into(),
        out.display().to_string(),
        "--progress-ms".into(),
        "250".into(),
    ]);
    if spec.transport == Transport::Rocev2 {
        args.extend(["--rate-scale".into(), spec.scaling.rate.to_string()]);
        args.extend(["--time-scale".into(), spec.scaling.time.to_string()]);
    }
    if let Some(cc) = &spec.cc {
        args.extend(["--cc".into(), cc.clone()]);
    }
    if let Some(ns) = spec.base_rtt_ns {
        // The network's time: the client's --time-scale stretches it.
        args.extend(["--base-rtt-us".into(), (ns as f64 / 1e3).to_string()]);
    }
    if spec.transport == Transport::Rocev2 {
        // Last: a CC parameter of the user's (`--hpcc-eta=0.9`) goes to
        // the CC named above.
        args.extend(spec.rocev2_args.iter().cloned());
    }
    if let Some(m) = spec.max_concurrent {
        args.extend(["--max-concurrent".into(), m.to_string()]);
    }
    for d in env.dsts {
        args.extend(["--dst".into(), d.clone()]);
    }
    Some(args)
}

/// The clients' progress added up.
fn total_progress(clients: &[(Bg, PathBuf)]) -> Progress {
    let mut total = Progress::default();
    for (bg, _) in clients {
        let p = last_progress(&bg.log());
        total.started += p.started;
        total.completed += p.completed;
        total.failed += p.failed;
        total.active += p.active;
    }
    total
}

/// The clients' transport counters (their done lines) added up.
fn clients_transport_counters(clients: &[(Bg, PathBuf)]) -> BTreeMap<String, u64> {
    let mut transport_counters = BTreeMap::new();
    for (bg, _) in clients {
        for (k, v) in transport_counters_of(&bg.log()) {
            *transport_counters.entry(k).or_insert(0) += v;
        }
    }
    transport_counters
}

/// Every client's flows, by id.
fn read_client_flows(clients: &[(Bg, PathBuf)]) -> Result<Vec<FlowRecord>> {
    let mut flows = Vec::new();
    for (_, path) in clients {
        let mut rd = csv::Reader::from_path(path)
            .map_err(|e| Error::new(format!("{}: {e}", path.display())))?;
        for row in rd.deserialize::<FlowRecord>() {
            flows.push(row.map_err(|e| Error::new(format!("{}: {e}", path.display())))?);
        }
    }
    flows.sort_by_key(|f| f.id);
    Ok(flows)
}

/// Each flow's path as the decision logs tell it: `path` (the neighbour
/// behind the port the source switch `src` logged; without one, when
/// every DC sends, the flow's sender's switch), `switch_path` and
/// `reverse_switch_path` end to end; the flows after warm-up whose paths
/// the logs do not complete are tallied in `network`.
pub(super) fn annotate_paths(
    topo: &Topology,
    decisions: &[Option<SwitchDecisions>],
    src: Option<SwitchId>,
    transport: Transport,
    flows: &mut [FlowRecord],
    network: &mut NetworkInput,
) {
    for f in flows {
        let Some(src) = src.or_else(|| Some(topo.host_by_name(&f.sender)?.switch)) else {
            continue;
        };
        let tuple = f
            .src
            .parse::<SocketAddr>()
            .ok()
            .zip(f.dst.parse::<SocketAddr>().ok());
        // `path`: the neighbour behind the port the source switch logged.
        f.path = tuple.and_then(|t| {
            let port = decisions[src.0].as_ref()?.port(&t)?;
            flow_paths::neighbour_name(topo, src, port)
        });
        let paths = flow_paths::flow_paths(
            topo,
            decisions,
            &f.sender,
            &f.receiver,
            tuple,
            tuple.map(|t| reverse_tuple(transport, t)),
        );
        if !f.warmup {
            flow_paths::tally(&mut network.forward_paths_missing, &paths.forward);
            flow_paths::tally(&mut network.reverse_paths_missing, &paths.reverse);
        }
        let name =
            |p: &flow_paths::PathResult| p.as_ref().ok().map(|p| flow_paths::path_name(topo, p));
        f.switch_path = name(&paths.forward);
        f.reverse_switch_path = name(&paths.reverse);
    }
}

/// Writes the run's merged `flows.csv`: every [`FlowRecord`] with, where
/// `extra` gives them, more columns after its own (which stay as they
/// are: readers take the record's columns by name).
pub(super) fn write_flows<E: serde::Serialize>(
    merged: &Path,
    flows: &[FlowRecord],
    extra: impl Fn(&FlowRecord) -> Option<E>,
) -> Result<()> {
    let mut wr = csv::Writer::from_path(merged)
        .map_err(|e| Error::new(format!("{}: {e}", merged.display())))?;
    for f in flows {
        match extra(f) {
            Some(e) => wr.serialize((f, e)),
            None => wr.serialize(f),
        }
        .map_err(|e| Error::new(format!("{}: {e}", merged.display())))?;
    }
    wr.flush()?;
    Ok(())
}

/// The switches after the source that choose a next hop, over every
/// (source switch, destination switch) of `pairs`, by name in topology
/// order.
pub(super) fn transit_choices(
    topo: &Topology,
    pairs: impl IntoIterator<Item = (SwitchId, SwitchId)>,
) -> Vec<String> {
    let mut pairs: Vec<(SwitchId, SwitchId)> = pairs.into_iter().collect();
    pairs.sort();
    pairs.dedup();
    let mut choosing: Vec<SwitchId> = pairs
        .into_iter()
        .flat_map(|(src, to)| flow_paths::transit_choices(topo, src, to))
        .collect();
    choosing.sort();
    choosing.dedup();
    choosing
        .into_iter()
        .map(|s| topo.switch(s).name.clone())
        .collect()
}

/// The final stats of every switch process that wrote readable ones, by
/// switch name.
fn final_stats(st: &State) -> Vec<(String, SwitchStats)> {
    st.procs
        .iter()
        .filter_map(|p| Some((p.name.clone(), read_stats(&p.stats)?)))
        .collect()
}

/// Decision-log records each switch lost (its log buffer was full, or a
/// write failed), by switch; switches that lost none are left out.
fn flow_log_lost(st: &State) -> BTreeMap<String, u64> {
    flow_log_lost_of(&final_stats(st))
}

/// [`flow_log_lost`] of switch snapshots by name.
pub(super) fn flow_log_lost_of(switches: &[(String, SwitchStats)]) -> BTreeMap<String, u64> {
    switches
        .iter()
        .filter_map(|(name, s)| {
            let l = s.flow_log.as_ref()?;
            let n = l.dropped + l.write_failed;
            (n > 0).then(|| (name.clone(), n))
        })
        .collect()
}

/// Every drop of every switch by reason, with the AF_XDP sockets' own.
fn switch_drops(st: &State) -> BTreeMap<String, u64> {
    switch_drops_of(&final_stats(st))
}

/// [`switch_drops`] of switch snapshots by name.
pub(super) fn switch_drops_of(switches: &[(String, SwitchStats)]) -> BTreeMap<String, u64> {
    let mut total = BTreeMap::new();
    for (name, s) in switches {
        for (reason, &n) in &s.drops {
            *total.entry(reason.clone()).or_insert(0) += n;
        }
        // Where the buffers overflowed: `queue_full@<switch>:<port>`.
        for port in &s.ports {
            let n = port.dropped("queue_full");
            if n > 0 {
                total.insert(format!("queue_full@{}:{}", name, port.name), n);
            }
        }
        for x in s.ports.iter().filter_map(|p| p.xsk.as_ref()) {
            *total.entry("xsk_rx_ring_full".into()).or_insert(0) += x.rx_ring_full;
            *total.entry("xsk_rx_dropped".into()).or_insert(0) += x.rx_dropped;
        }
    }
    total.retain(|_, n| *n > 0);
    total
}

/// Flags the run if a switch or the machine ran out of CPU, or switches
/// dropped frames for reasons a real link would not.
fn check_faithfulness(st: &State, start: &Snapshot, end: &Snapshot, meas: &mut RunMeasurements) {
    let wall = end.at.duration_since(start.at).as_secs_f64().max(1e-3);
    for (i, p) in st.procs.iter().enumerate() {
        // Switches sharing a process: judged once, loop by loop.
        if st.procs[..i].iter().any(|q| q.pid == p.pid) {
            continue;
        }
        if p.shared {
            // One loop is one core: each loop within the limit.
            let (Some(a), Some(b)) = (start.loop_cpu.get(i), end.loop_cpu.get(i)) else {
                continue;
            };
            meas.notes.extend(busy_loops(a, b, wall));
            continue;
        }
        let who = format!("switch {}", p.name);
        if let (Some(Some(a)), Some(Some(b))) = (start.switch_cpu.get(i), end.switch_cpu.get(i)) {
            let share = (b - a) / wall;
            if share > MAX_SWITCH_CPU {
                meas.notes.push(format!(
                    "{who} used {:.0}% of a core (limit {:.0}%)",
                    share * 100.0,
                    MAX_SWITCH_CPU * 100.0
                ));
            }
        }
    }
    if let (Some((i0, t0)), Some((i1, t1))) = (start.machine, end.machine) {
        let total = t1.saturating_sub(t0).max(1) as f64;
        let idle = i1.saturating_sub(i0) as f64 / total;
        if idle < MIN_MACHINE_IDLE {
            meas.notes.push(format!(
                "machine CPU saturated: {:.1}% idle or niced (limit {:.0}%)",
                idle * 100.0,
                MIN_MACHINE_IDLE * 100.0
            ));
        }
    }
    let (mut artifact, mut forwarded) = (0u64, 0u64);
    for p in &st.procs {
        if let Some(s) = read_stats(&p.stats) {
            artifact += s.dropped("tx_ring_full") + s.dropped("emulation_overflow");
            // Frames the kernel could not hand to a switch that fell behind.
            artifact += s
                .ports
                .iter()
                .filter_map(|p| p.xsk.as_ref())
                .map(|x| x.rx_ring_full + x.rx_dropped)
                .sum::<u64>();
            forwarded += s.counter("tx_frames");
        }
    }
    if artifact as f64 > MAX_ARTIFACT_DROP_SHARE * forwarded.max(1) as f64 {
        meas.notes.push(format!(
            "switches dropped {artifact} frames at the AF_XDP RX or TX ring or the emulation's \
             delay line ({:.2}% of {forwarded} forwarded; limit {:.1}%)",
            100.0 * artifact as f64 / forwarded.max(1) as f64,
            MAX_ARTIFACT_DROP_SHARE * 100.0
        ));
    }
}

#[cfg(test)]
mod tests {
    use lcmp_control::snapshot::PortSnapshot;

    use super::*;

    /// s1 -100 Mbit/s- s2 -10 Mbit/s- s3. Ports: s1 0 -> s2; s2 0 -> s1,
    /// 1 -> s3; s3 0 -> s2.
    fn chain() -> Topology {
        Topology::parse(
            r#"
            [[switch]]
            name = "s1"
            [[switch]]
            name = "s2"
            [[switch]]
            name = "s3"
            [[link]]
            a = "s1"
            b = "s2"
            rate = "100Mbps"
            delay = "1ms"
            [[link]]
            a = "s2"
            b = "s3"
            rate = "10Mbps"
            delay = "1ms"
            "#,
            "chain.toml",
        )
        .unwrap()
    }

    fn ports(v: &[(u8, u64)]) -> Option<HashMap<u8, u64>> {
        Some(v.iter().copied().collect())
    }

    /// One switch's reading of `departed_bytes_by_port`: its stats hold,
    /// per interface (name, departed_bytes, tx_bytes); `ifnames` are its
    /// ports in index order.
    fn reading(ifnames: &[&str], counters: &[(&str, u64, u64)]) -> Option<HashMap<u8, u64>> {
        let stats = SwitchStats {
            ports: counters
                .iter()
                .map(|&(name, departed, tx)| PortSnapshot {
                    name: name.into(),
                    counters: BTreeMap::from([
                        ("departed_bytes".to_string(), departed),
                        ("tx_bytes".to_string(), tx),
                    ]),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        let ifnames: Vec<String> = ifnames.iter().map(|n| n.to_string()).collect();
        Some(departed_bytes_by_port(&stats, &ifnames))
    }

    #[test]
    fn link_utilization_from_snapshots_by_hand() {
        let t = chain();
        let (s1, s2, s3) = (["s1-s2"], ["s2-s1", "s2-s3"], ["s3-s2"]);
        // tx_bytes trails departed_bytes by what is in each 1 ms delay
        // line: 100 Mbit/s * 1 ms = 12 500 B, 10 Mbit/s * 1 ms = 1 250 B.
        // The loads are the departed deltas; s3's stats were unreadable at
        // the start; s2 lists its ports out of index order.
        let start: PortTx = vec![
            reading(&s1, &[("s1-s2", 1_000, 1_000)]),
            reading(&s2, &[("s2-s3", 0, 0), ("s2-s1", 500, 500)]),
            None,
        ];
        let end: PortTx = vec![
            reading(&s1, &[("s1-s2", 12_501_000, 12_488_500)]),
            reading(
                &s2,
                &[
                    ("s2-s3", 1_250_000, 1_248_750),
                    ("s2-s1", 2_500_500, 2_488_000),
                ],
            ),
            reading(&s3, &[("s3-s2", 7, 7)]),
        ];
        let loads = link_loads(&t, &start, &end);
        let got: Vec<(&str, u64, Option<u64>)> = loads
            .iter()
            .map(|l| (l.link.name.as_str(), l.link.rate_bps, l.tx_bytes))
            .collect();
        assert_eq!(
            got,
            [
                ("s1->s2", 100_000_000, Some(12_500_000)),
                ("s2->s1", 100_000_000, Some(2_500_000)),
                ("s2->s3", 10_000_000, Some(1_250_000)),
                ("s3->s2", 10_000_000, None),
            ]
        );
        // 12_501_000 - 1_000 = 12_500_000 B departed (tx: 12_487_500);
        // 2_500_500 - 500 = 2_500_000; 1_250_000 - 0. A 2 s window: s1->s2
        // 100 Mbit over 200 Mbit of capacity, s2->s1 20 of 200, s2->s3 10
        // of 20.
        let u = |i: usize| {
            lcmp_results::analysis::utilization(
                loads[i].tx_bytes.unwrap(),
                loads[i].link.rate_bps,
                2.0,
            )
        };
        assert_eq!((u(0), u(1), u(2)), (Some(0.5), Some(0.1), Some(0.5)));
        // A counter that went backwards (a restarted switch) counts 0; a
        // port missing from a reading is unknown.
        let later: PortTx = vec![ports(&[(0, 10)]), ports(&[(1, 5)]), None];
        assert_eq!(tx_delta(&start, &later, SwitchId(0), 0), Some(0));
        assert_eq!(tx_delta(&start, &later, SwitchId(1), 0), None);
        assert_eq!(tx_delta(&start, &later, SwitchId(7), 0), None);
    }

    #[test]
    fn acknowledgements_carry_the_transports_reverse_tuple() {
        let t: Tuple = (
            "10.1.0.2:49152".parse().unwrap(),
            "10.8.0.2:4791".parse().unwrap(),
        );
        assert_eq!(reverse_tuple(Transport::Tcp, t), (t.1, t.0));
        // RoCEv2 ACKs go to the sender's port 4791, not the queue pair's.
        assert_eq!(
            reverse_tuple(Transport::Rocev2, t),
            (
                "10.8.0.2:4791".parse().unwrap(),
                "10.1.0.2:4791".parse().unwrap()
            )
        );
    }

    #[test]
    fn transit_choices_toward_the_receivers() {
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies/13dc.toml");
        let host = lcmp_topology::HostTemplate {
            rate_bps: None,
            delay_ns: 0,
            buffer_bytes: None,
        };
        let t = Topology::load(&file)
            .unwrap()
            .with_generated_hosts(2, host)
            .unwrap();
        let id = |n: &str| t.switch_by_name(n).unwrap().id;
        let (dc1, dc3, dc13) = (id("dc1"), id("dc3"), id("dc13"));
        // Two receivers behind DC13: one pair.
        assert_eq!(
            transit_choices(&t, [(dc1, dc13), (dc1, dc13)]),
            ["dc3", "dc6"]
        );
        // Toward DC3 itself nobody after DC1 chooses.
        assert!(transit_choices(&t, [(dc1, dc3)]).is_empty());
        assert_eq!(
            transit_choices(&t, [(dc1, dc3), (dc1, dc13)]),
            ["dc3", "dc6"]
        );
    }

    #[test]
    fn niced_time_is_available_to_the_testbed() {
        // user 100, nice 300, system 50, idle 500, iowait 50, irq 0,
        // softirq 0, steal 0: available 300 + 500 + 50 of 1000.
        assert_eq!(
            machine_jiffies_of("cpu  100 300 50 500 50 0 0 0 0 0"),
            Some((850, 1000))
        );
        assert_eq!(machine_jiffies_of("cpu 1 2"), None);
    }

    #[test]
    fn progress_lines() {
        let log = "listening\n{\"t_s\":1.0,\"started\":5,\"completed\":3,\"failed\":0,\"active\":2,\"deferred\":0}\nnoise\n{\"t_s\":1.5,\"started\":9,\"completed\":7,\"failed\":1,\"active\":1,\"deferred\":0}\n";
        let p = last_progress(log);
        assert_eq!((p.started, p.completed, p.failed, p.active), (9, 7, 1, 1));
        assert_eq!(last_progress("").started, 0);
    }

    #[test]
    fn transport_counters_come_from_the_done_line() {
        let log = "{\"t_s\":1.0,\"started\":5}\n{\"done\":true,\"started\":5,\"rocev2\":{\"packets\":120,\"naks\":2,\"rate_cuts\":7}}\n";
        let c = transport_counters_of(log);
        assert_eq!(
            c.into_iter().collect::<Vec<_>>(),
            [
                ("naks".to_string(), 2),
                ("packets".to_string(), 120),
                ("rate_cuts".to_string(), 7)
            ]
        );
        // TCP's done line has no transport counters.
        assert!(transport_counters_of("{\"done\":true,\"started\":5}\n").is_empty());
    }

    #[test]
    fn own_cpu_time_is_readable() {
        let t = process_cpu_s(std::process::id()).expect("own /proc/self/stat");
        assert!(t >= 0.0);
        let (idle, total) = machine_jiffies().unwrap();
        assert!(idle <= total);
    }

    #[test]
    fn each_loop_is_held_to_one_core() {
        // 10 s: loop 0 used 9.5 s (95 %), loop 1 5 s; a thread that was not
        // there at the start is not judged.
        let start = [(100, 1.0), (101, 2.0)];
        let end = [(100, 10.5), (101, 7.0), (102, 9.9)];
        assert_eq!(
            busy_loops(&start, &end, 10.0),
            vec![
                "event loop 0 of the switches' process used 95% of a core (limit 90%)".to_string()
            ]
        );
        // Together 140 % of a core, each below the limit: faithful.
        assert!(busy_loops(&[(100, 0.0), (101, 0.0)], &[(100, 8.0), (101, 6.0)], 10.0).is_empty());
    }

    #[test]
    fn cpu_time_of_a_stat_line_with_spaces_in_the_name() {
        // utime 250 and stime 150 ticks (fields 14 and 15).
        let stat =
            "4242 (lcmp switch) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 150 0 0 20 0 3 0 1000 0 0";
        // SAFETY: sysconf(3) has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        assert_eq!(cpu_s_of_stat(stat), Some(400.0 / hz));
        assert_eq!(cpu_s_of_stat("4242 (x) S 1"), None);
    }

    #[test]
    fn the_loops_of_a_process_are_its_main_thread_and_loop_threads() {
        let pid = std::process::id();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        // A thread names itself once it runs: read after both did.
        let started = std::sync::Arc::new(std::sync::Barrier::new(3));
        let spawn = |name: &str| {
            let (stop, started) = (stop.clone(), started.clone());
            std::thread::Builder::new()
                .name(name.into())
                .spawn(move || {
                    started.wait();
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        std::thread::sleep(std::time::Duration::from_millis(1));
                    }
                })
                .unwrap()
        };
        let (a, b) = (spawn("loop1"), spawn("control"));
        started.wait();
        let loops = loop_cpu_s(pid);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        a.join().unwrap();
        b.join().unwrap();
        // The main thread (loop 0) and loop1, not the control thread nor
        // the test harness's threads.
        assert!(loops.iter().any(|(t, _)| *t == pid), "{loops:?}");
        assert_eq!(loops.len(), 2, "{loops:?}");
    }
}

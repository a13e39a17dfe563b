//! Bringing a testbed up and down: namespaces and veths from the topology
//! (`lcmp_netlab::Lab`), host tuning, one `lcmp-switch` daemon per
//! switch, the reachability check, and teardown that works from the state
//! file alone.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use lcmp_netlab::daemon::{switch_argv, switches_argv, wait_ready, SwitchKind};
use lcmp_netlab::netns::{self, process_running, spawn_detached};
use lcmp_netlab::{Lab, Netns, SwitchNode};
use lcmp_topology::network::Network;
use lcmp_topology::{HostTemplate, Topology};

use crate::state::{self, AgentProc, State, SwitchProc, SwitchSettings};
use crate::{Error, Result};

/// How often switches rewrite their stats file in a testbed.
pub const STATS_INTERVAL_MS: u64 = 200;

/// What `lcmp-testbed up` is asked for.
#[derive(Debug, Clone)]
pub struct UpOptions {
    /// Testbed name (see [`state::validate_name`]).
    pub name: String,
    /// Topology file (`None`: the built-in 8-DC topology).
    pub topology: Option<PathBuf>,
    /// Hosts generated on every DC switch that has none in the file.
    pub hosts_per_dc: usize,
    /// Generate them on these DC switches only (`None`: on every one).
    pub host_switches: Option<Vec<String>>,
    /// Divide link rates (and buffers) by this.
    pub scale: f64,
    /// Divide buffers by this instead of `scale`.
    pub buffer_scale: Option<f64>,
    /// Dilate time by this: delays multiplied, rates divided by it (on top
    /// of `scale`); 1 for real time.
    pub time_scale: f64,
    /// Policy and parameters of the switches.
    pub switches: SwitchSettings,
    /// Hosts' TCP congestion control (`None`: the kernel's default).
    pub cc: Option<String>,
    /// Hosts' initial congestion and receive windows, in segments, on
    /// their default routes (`None`: the kernel's default of 10).
    pub initcwnd: Option<u32>,
    /// Start the agent (`None`: no agent).
    pub agent: Option<AgentOptions>,
    /// One process for all switches, or one each.
    pub switch_processes: SwitchProcesses,
}

/// How the switches of a testbed run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SwitchProcesses {
    /// One `lcmp-switch` process runs every switch, on one event loop per
    /// core (switch i on loop i mod cores), opening each switch's ports in
    /// its namespace: the default, as it takes about two thirds of the CPU
    /// per forwarded gigabit of a process per switch with emulated links
    /// and a quarter of the drops at transit switches (README, "Switches
    /// per process").
    #[default]
    One,
    /// One `lcmp-switch` process per switch, inside its namespace (a crash
    /// or a `kill` then takes down one switch, not all).
    PerSwitch,
}

/// The command line's `--switch-processes`, named by [`SwitchProcesses::name`].
impl clap::ValueEnum for SwitchProcesses {
    fn value_variants<'a>() -> &'a [Self] {
        &Self::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.name()))
    }
}

impl SwitchProcesses {
    /// The command-line name (`one`, `per-switch`).
    pub fn name(self) -> &'static str {
        match self {
            SwitchProcesses::One => "one",
            SwitchProcesses::PerSwitch => "per-switch",
        }
    }

    /// Both ways.
    pub const ALL: [SwitchProcesses; 2] = [SwitchProcesses::One, SwitchProcesses::PerSwitch];

    /// From the command-line name.
    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|h| h.name() == s)
    }

    /// How the switches of `st` ran last (the default before they ever ran).
    pub fn of(st: &State) -> Self {
        match st.procs.first() {
            Some(p) if p.shared => SwitchProcesses::One,
            Some(_) => SwitchProcesses::PerSwitch,
            None => SwitchProcesses::default(),
        }
    }
}

/// How the testbed's agent runs.
#[derive(Debug, Clone, Default)]
pub struct AgentOptions {
    /// Where its metrics endpoint listens (`None`: no metrics). Port 9464
    /// when taken falls back to a free port (said in the output).
    pub metrics_listen: Option<std::net::SocketAddr>,
}

/// The metrics port Prometheus exporters of this kind conventionally use.
pub const DEFAULT_METRICS_LISTEN: &str = "127.0.0.1:9464";

/// Fails unless running as root, naming why root is needed.
pub fn require_root() -> Result<()> {
    if lcmp_netlab::is_root() {
        Ok(())
    } else {
        Err(Error::new(
            "must run as root: a testbed creates network namespaces, veths and XDP programs",
        ))
    }
}

/// Finds a program of the project: `$<env>` if set, else next to this
/// executable (cargo puts all of a workspace's binaries in one directory),
/// else on `PATH`.
pub fn find_program(name: &str, env: &str) -> Result<PathBuf> {
    if let Some(p) = lcmp_netlab::daemon::program_from_env(env) {
        return p;
    }
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        let p = dir.join(name);
        if p.is_file() {
            return Ok(p);
        }
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for d in std::env::split_paths(&path) {
        let p = d.join(name);
        if p.is_file() {
            return Ok(p);
        }
    }
    Err(Error::new(format!(
        "cannot find {name}: build it with `cargo build --release -p {name}` (it is looked for \
         next to lcmp-testbed and on PATH), or set {env}"
    )))
}

/// The effective topology of a testbed: the file, plus `hosts_per_dc`
/// generated hosts on DC switches without hosts (on `host_switches` only,
/// if given), rates divided by `scale` x `time_scale`, buffers by
/// `buffer_scale` (by default `scale`) and delays multiplied by
/// `time_scale`.
pub fn effective_topology(
    file: Option<&Path>,
    hosts_per_dc: usize,
    host_switches: Option<&[String]>,
    scale: f64,
    buffer_scale: Option<f64>,
    time_scale: f64,
) -> Result<Topology> {
    crate::experiment::config::check_scale(scale)?;
    crate::experiment::config::check_time_scale(time_scale)?;
    if let Some(b) = buffer_scale {
        crate::experiment::config::check_scale(b).map_err(|_| {
            Error::new(format!("--buffer-scale must be a positive number, not {b}"))
        })?;
    }
    let topo = crate::experiment::config::load_topology(file)?;
    let source = topo.source().to_string();
    let only = host_switches
        .map(|names| {
            names
                .iter()
                .map(|n| {
                    topo.switch_by_name(n)
                        .map(|s| s.id)
                        .ok_or_else(|| Error::new(format!("{source}: no switch {n:?}")))
                })
                .collect::<Result<Vec<_>>>()
        })
        .transpose()?;
    let topo = if hosts_per_dc > 0 {
        topo.with_generated_hosts_on(
            hosts_per_dc,
            HostTemplate {
                rate_bps: None,
                delay_ns: 10_000,
                buffer_bytes: None,
            },
            only.as_deref(),
        )
        .map_err(|e| Error::new(e.to_string()))?
    } else {
        topo
    };
    if topo.hosts().is_empty() {
        return Err(Error::new(format!(
            "{source}: the topology has no hosts; give --hosts-per-dc N (N >= 1)"
        )));
    }
    topo.scaled_apart(scale * time_scale, buffer_scale.unwrap_or(scale))
        .and_then(|t| t.dilated(time_scale))
        .map_err(|e| Error::new(e.to_string()))
}

/// The switches' time constants that a time dilation of `time_scale`
/// stretches, added to `args` unless given there: the congestion sampling
/// interval (the flow idle timeout follows the dilated RTTs by itself).
pub fn dilate_switch_args(args: &mut Vec<String>, time_scale: f64) {
    if time_scale != 1.0 && !args.iter().any(|a| a.starts_with("--sample-interval-us")) {
        let us = (SAMPLE_INTERVAL_US as f64 * time_scale).round().max(1.0);
        args.push(format!("--sample-interval-us={us}"));
    }
}

/// The switch's default congestion sampling interval (lcmp-switch
/// `--sample-interval-us`), microseconds.
const SAMPLE_INTERVAL_US: u64 = 100;

/// Brings testbed `opts.name` up and returns its state. On any failure
/// everything made so far is removed again.
pub fn up(opts: &UpOptions, progress: &dyn Fn(&str)) -> Result<State> {
    check_free(&opts.name)?;
    if let Some(cc) = &opts.cc {
        check_congestion_control(cc)?;
    }
    let topo = effective_topology(
        opts.topology.as_deref(),
        opts.hosts_per_dc,
        opts.host_switches.as_deref(),
        opts.scale,
        opts.buffer_scale,
        opts.time_scale,
    )?;
    let switch_bin = find_program("lcmp-switch", "LCMP_SWITCH_BIN")?;
    match up_inner(opts, &topo, &switch_bin, progress) {
        Ok(st) => Ok(st),
        Err(e) => {
            let _ = down(&opts.name);
            Err(e)
        }
    }
}

fn up_inner(
    opts: &UpOptions,
    topo: &Topology,
    switch_bin: &Path,
    progress: &dyn Fn(&str),
) -> Result<State> {
    let dir = state::dir(&opts.name);
    std::fs::create_dir_all(&dir).map_err(|e| Error::new(format!("{}: {e}", dir.display())))?;
    let topology_file = dir.join("topology.toml");
    std::fs::write(&topology_file, topo.to_toml())
        .map_err(|e| Error::new(format!("{}: {e}", topology_file.display())))?;
    let namespaces: Vec<String> = topo
        .switches()
        .iter()
        .map(|s| s.name.as_str())
        .chain(topo.hosts().iter().map(|h| h.name.as_str()))
        .map(|n| state::netns_name(&opts.name, n))
        .collect();
    let mut st = State {
        name: opts.name.clone(),
        created_unix_s: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        topology_source: match &opts.topology {
            Some(t) => std::fs::canonicalize(t)
                .unwrap_or_else(|_| t.clone())
                .display()
                .to_string(),
            None => crate::experiment::config::BUILTIN_NAME.to_string(),
        },
        topology_file,
        hosts_per_dc: opts.hosts_per_dc,
        scale: opts.scale,
        switches: opts.switches.clone(),
        namespaces,
        procs: Vec::new(),
        agent: None,
        complete: false,
    };
    // Written before anything exists, so that `down` finds it all after a
    // crash.
    st.save()?;

    progress(&format!(
        "creating {} switch and {} host namespaces",
        topo.switches().len(),
        topo.hosts().len()
    ));
    let name = opts.name.clone();
    let mut tb = Lab::build(topo, &mut |node| {
        Netns::create(&state::netns_name(&name, node))
    })?;
    tune_hosts(&tb, opts.cc.as_deref(), opts.initcwnd)?;
    progress(&format!(
        "starting {} switches (policy {})",
        tb.switches.len(),
        opts.switches.policy
    ));
    start_switches_as(&mut st, &tb, switch_bin, opts.switch_processes)?;
    progress("checking that every host reaches every other");
    // A dilated testbed's longest paths may take seconds to answer.
    check_reachability(
        &tb,
        (longest_route_rtt(topo) * 3 / 2).max(Duration::from_secs(3)),
    )?;
    if let Some(agent) = &opts.agent {
        progress("starting the agent");
        start_agent(&mut st, agent)?;
    }
    tb.persist();
    st.complete = true;
    st.save()?;
    Ok(st)
}

/// Fails unless we are root and testbed `name` is a valid name that is not
/// in use (no state directory, no namespace).
pub fn check_free(name: &str) -> Result<()> {
    require_root()?;
    state::validate_name(name)?;
    if State::path(name).exists() || !netns::list_with_prefix(&state::netns_prefix(name)).is_empty()
    {
        return Err(Error::new(format!(
            "testbed {name:?} is already up: `lcmp-testbed down --name {name}` first, or pick another name"
        )));
    }
    Ok(())
}

/// Fails with the list of available algorithms if `cc` is not one.
pub fn check_congestion_control(cc: &str) -> Result<()> {
    let avail = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .unwrap_or_default();
    if avail.split_whitespace().any(|a| a == cc) {
        Ok(())
    } else {
        Err(Error::new(format!(
            "TCP congestion control {cc:?} is not available in this kernel (available: {})",
            avail.trim()
        )))
    }
}

/// Host settings for FCT experiments: ECN on; buffers large enough for a
/// long-haul bandwidth-delay product (and a 1 MB default, so a large
/// initial window is not clamped by the first advertised window); the
/// whole ephemeral port range and TIME_WAIT reuse (one connection per flow,
/// the client closes first); no per-destination metrics cache (a cached
/// ssthresh would make later flows start in congestion avoidance); the
/// chosen congestion control and initial windows.
fn tune_hosts(tb: &Lab, cc: Option<&str>, initcwnd: Option<u32>) -> Result<()> {
    const SETTINGS: [&str; 6] = [
        "net.ipv4.tcp_ecn=1",
        "net.ipv4.tcp_no_metrics_save=1",
        "net.ipv4.tcp_rmem=4096 1048576 67108864",
        "net.ipv4.tcp_wmem=4096 1048576 67108864",
        "net.ipv4.ip_local_port_range=1024 65535",
        "net.ipv4.tcp_tw_reuse=1",
    ];
    for h in &tb.hosts {
        h.netns.sysctl(&SETTINGS)?;
        if let Some(cc) = cc {
            h.netns
                .sysctl(&[&format!("net.ipv4.tcp_congestion_control={cc}")])
                .map_err(|_| {
                    let allowed = std::fs::read_to_string(
                        "/proc/sys/net/ipv4/tcp_allowed_congestion_control",
                    )
                    .unwrap_or_default();
                    Error::new(format!(
                        "--cc {cc}: this kernel lets a network namespace default only to {} \
                         (net.ipv4.tcp_allowed_congestion_control); experiments set it per \
                         connection instead (lcmp-traffic --cc)",
                        allowed.trim()
                    ))
                })?;
        }
        if let Some(w) = initcwnd {
            let w = w.to_string();
            for gw in &h.gateways {
                let fam = if gw.is_ipv4() { "-4" } else { "-6" };
                let g = gw.to_string();
                h.netns.ip(&[
                    fam, "route", "change", "default", "via", &g, "dev", &h.ifname, "onlink",
                    "initcwnd", &w, "initrwnd", &w,
                ])?;
            }
        }
    }
    Ok(())
}

/// Starts the switches of `tb` with `st.switches`, run as they ran last
/// ([`SwitchProcesses::of`]), and waits until all are ready; records their
/// pids in the state file.
pub fn start_switches(st: &mut State, tb: &Lab, switch_bin: &Path) -> Result<()> {
    let how = SwitchProcesses::of(st);
    start_switches_as(st, tb, switch_bin, how)
}

/// Starts the switches of `tb` with `st.switches`, detached: one process
/// for all of them or one each (`how`), and waits until all are ready;
/// records their pids in the state file.
pub fn start_switches_as(
    st: &mut State,
    tb: &Lab,
    switch_bin: &Path,
    how: SwitchProcesses,
) -> Result<()> {
    let s = &st.switches;
    let mut extra: Vec<String> = vec![
        "--policy".into(),
        s.policy.clone(),
        "--alpha".into(),
        s.alpha.to_string(),
        "--beta".into(),
        s.beta.to_string(),
    ];
    extra.extend(s.extra_args.iter().cloned());
    let topology = st.topology_file.clone();
    if how == SwitchProcesses::One {
        let dir = state::dir(&st.name);
        let flow_log = flow_log_path(&dir.join("{switch}.stats.json"));
        extra.extend(["--flow-log".into(), flow_log.display().to_string()]);
        // A loop per core unless `--switch-arg=--loops=N` says otherwise: a
        // single loop is a single core, which the 8-DC experiments
        // saturate.
        if !extra.iter().any(|a| a.starts_with("--loops")) {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            let loops = cores.min(tb.switches.len()).max(1);
            extra.extend(["--loops".into(), loops.to_string()]);
        }
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let argv = switches_argv(
            switch_bin,
            &topology,
            &tb.switches,
            &dir,
            STATS_INTERVAL_MS,
            &extra,
        );
        return launch_one_process(st, tb, &argv);
    }
    launch_switches(st, tb, &|node, stats| {
        let mut extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let flow_log_arg = flow_log_path(stats).display().to_string();
        extra.extend(["--flow-log", flow_log_arg.as_str()]);
        switch_argv(
            switch_bin,
            SwitchKind::Lcmp,
            &topology,
            node,
            stats,
            STATS_INTERVAL_MS,
            &extra,
        )
    })
}

/// Starts one detached switch per switch of `tb`, each with the command
/// line `argv(node, stats file)` (logs and stats files in the state
/// directory), records their pids in the state file, and waits until every
/// one has written its first stats file.
pub fn launch_switches(
    st: &mut State,
    tb: &Lab,
    argv: &dyn Fn(&SwitchNode, &Path) -> Vec<String>,
) -> Result<()> {
    let dir = state::dir(&st.name);
    st.procs.clear();
    for node in &tb.switches {
        let stats = dir.join(format!("{}.stats.json", node.name));
        let log = dir.join(format!("{}.log", node.name));
        let _ = std::fs::remove_file(&stats);
        let argv = argv(node, &stats);
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let pid = spawn_detached(&argv, &log)?;
        st.procs.push(SwitchProc {
            name: node.name.clone(),
            pid,
            log,
            stats,
            shared: false,
        });
        st.save()?;
    }
    wait_all_ready(st)
}

/// Waits until every switch of `st` has written its first stats file (or
/// its process died, with the log's end).
fn wait_all_ready(st: &State) -> Result<()> {
    for p in &st.procs {
        wait_ready(&p.name, &p.stats, Duration::from_secs(30), || {
            (!process_running(p.pid)).then(|| tail(&p.log, 20))
        })?;
    }
    Ok(())
}

/// Starts `argv`, one detached `lcmp-switch` running every switch of `tb`
/// (stats files `DIR/<switch>.stats.json`), logging to `DIR/switches.log`;
/// records it as every switch's process in the state file and waits until
/// every switch has written its first stats file.
fn launch_one_process(st: &mut State, tb: &Lab, argv: &[String]) -> Result<()> {
    let dir = state::dir(&st.name);
    let log = dir.join("switches.log");
    st.procs.clear();
    for node in &tb.switches {
        let _ = std::fs::remove_file(dir.join(format!("{}.stats.json", node.name)));
    }
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let pid = spawn_detached(&argv, &log)?;
    for node in &tb.switches {
        st.procs.push(SwitchProc {
            name: node.name.clone(),
            pid,
            log: log.clone(),
            stats: dir.join(format!("{}.stats.json", node.name)),
            shared: true,
        });
    }
    st.save()?;
    wait_all_ready(st)
}

/// Starts the testbed's agent (`lcmp-agent run --testbed NAME`), detached,
/// and waits until it has adopted the switches (its state file names its
/// pid and, with metrics, the address bound).
pub fn start_agent(st: &mut State, opts: &AgentOptions) -> Result<()> {
    let bin = find_program("lcmp-agent", "LCMP_AGENT_BIN")?;
    let dir = state::dir(&st.name);
    let log = dir.join("agent.log");
    let state_file = dir.join("agent.json");
    let _ = std::fs::remove_file(&state_file);
    let mut argv: Vec<String> = vec![
        bin.display().to_string(),
        "run".into(),
        "--testbed".into(),
        st.name.clone(),
    ];
    // The agent computes C_path as the switches do: their options for it
    // (given with --switch-arg) go to the agent too.
    argv.extend(path_cost_args(&st.switches.extra_args));
    match opts.metrics_listen {
        Some(mut addr) => {
            // Another testbed's agent (or any exporter) may hold the
            // default port: take a free one rather than fail.
            if std::net::TcpListener::bind(addr).is_err() && addr.port() != 0 {
                addr.set_port(0);
            }
            argv.extend(["--metrics-listen".into(), addr.to_string()]);
        }
        None => argv.push("--no-metrics".into()),
    }
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let pid = spawn_detached(&argv, &log)?;
    st.agent = Some(AgentProc {
        pid,
        log: log.clone(),
        metrics: None,
    });
    st.save()?;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let written: Option<serde_json::Value> = std::fs::read_to_string(&state_file)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok());
        if let Some(v) = written.filter(|v| v["pid"] == pid) {
            let metrics = v["metrics"].as_str().map(str::to_string);
            if metrics.is_some() || opts.metrics_listen.is_none() {
                if let Some(a) = st.agent.as_mut() {
                    a.metrics = metrics;
                }
                return st.save();
            }
        }
        if !process_running(pid) {
            return Err(Error::new(format!(
                "the agent exited at start:\n{}",
                tail(&log, 20)
            )));
        }
        if Instant::now() >= deadline {
            return Err(Error::new(format!(
                "the agent did not adopt the switches within 20 s:\n{}",
                tail(&log, 20)
            )));
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// The options among a switch's extra arguments that shape C_path
/// (`--metric`, `--w-delay`, `--w-capacity`, as `--x=v` or `--x v`).
fn path_cost_args(extra: &[String]) -> Vec<String> {
    const FLAGS: [&str; 3] = ["--metric", "--w-delay", "--w-capacity"];
    let mut out = Vec::new();
    let mut it = extra.iter();
    while let Some(a) = it.next() {
        let flag = a.split('=').next().unwrap_or("");
        if !FLAGS.contains(&flag) {
            continue;
        }
        out.push(a.clone());
        if !a.contains('=') {
            if let Some(v) = it.next() {
                out.push(v.clone());
            }
        }
    }
    out
}

/// Stops the testbed's agent (SIGTERM); the switches keep forwarding.
pub fn stop_agent(st: &mut State) -> Result<()> {
    if let Some(a) = st.agent.as_mut() {
        if a.pid != 0 && is_program(a.pid, "lcmp-agent") {
            signal_and_wait(&[a.pid], Duration::from_secs(3));
        }
        a.pid = 0;
    }
    st.save()
}

/// Whether the testbed's agent runs.
pub fn agent_running(st: &State) -> bool {
    st.agent
        .as_ref()
        .is_some_and(|a| a.pid != 0 && is_program(a.pid, "lcmp-agent"))
}

/// The flow-decision log (`lcmp-switch lcmp --flow-log`) beside a switch's
/// stats file: which port the switch chose for each new flow.
pub fn flow_log_path(stats: &Path) -> PathBuf {
    let name = stats
        .file_name()
        .map(|n| n.to_string_lossy().replace(".stats.json", ".flows.csv"))
        .unwrap_or_else(|| "flows.csv".into());
    stats.with_file_name(name)
}

/// The last `n` lines of a log file.
pub fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Whether `pid` runs the program `name` (guards against a reused pid).
pub fn is_program(pid: u32, name: &str) -> bool {
    process_running(pid)
        && std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|c| {
                c.split(|&b| b == 0)
                    .next()
                    .is_some_and(|argv0| argv0.ends_with(name.as_bytes()))
            })
            .unwrap_or(false)
}

/// Pids of the switch daemons of `st` that still run, each once (switches
/// sharing a process share its pid).
fn running_switches(st: &State) -> Vec<u32> {
    let mut pids: Vec<u32> = st
        .procs
        .iter()
        .map(|p| p.pid)
        .filter(|&pid| pid != 0 && is_program(pid, "lcmp-switch"))
        .collect();
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// Stops the switch daemons of `st` (SIGTERM: they detach their XDP
/// programs; SIGKILL after 3 s) and clears their pids.
pub fn stop_switches(st: &mut State) -> Result<()> {
    let pids = running_switches(st);
    signal_and_wait(&pids, Duration::from_secs(3));
    for p in &mut st.procs {
        p.pid = 0;
    }
    st.save()
}

/// SIGTERM to every pid, then SIGKILL to those still running after
/// `grace`; returns once all are gone (or a further 2 s have passed).
fn signal_and_wait(pids: &[u32], grace: Duration) {
    for &pid in pids {
        // SAFETY: kill(2) on a pid checked to run one of our programs just
        // before; at worst it has exited since (ESRCH).
        unsafe {
            libc::kill(pid as i32, libc::SIGTERM);
        }
    }
    let deadline = Instant::now() + grace;
    while pids.iter().any(|&p| process_running(p)) && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    for &pid in pids.iter().filter(|&&p| process_running(p)) {
        // SAFETY: as above.
        unsafe {
            libc::kill(pid as i32, libc::SIGKILL);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    while pids.iter().any(|&p| process_running(p)) && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
}

/// What `down` removed.
#[derive(Debug, Default)]
pub struct DownReport {
    /// Switch processes stopped.
    pub processes: usize,
    /// Namespaces deleted.
    pub namespaces: usize,
}

/// Removes testbed `name`: its switch processes, every namespace (with the
/// veths, XDP programs and any process inside) and its state directory.
/// Works from whatever is left: the state file, the namespaces, or both.
pub fn down(name: &str) -> Result<DownReport> {
    require_root()?;
    state::validate_name(name)?;
    let mut report = DownReport::default();
    let st = State::load(name).ok();
    let mut namespaces = netns::list_with_prefix(&state::netns_prefix(name));
    if let Some(st) = &st {
        // The agent first: it must not push tables into switches going
        // away.
        if let Some(a) = st.agent.as_ref().filter(|_| agent_running(st)) {
            signal_and_wait(&[a.pid], Duration::from_secs(3));
        }
        let pids = running_switches(st);
        report.processes = pids.len();
        signal_and_wait(&pids, Duration::from_secs(3));
        for ns in &st.namespaces {
            if Path::new(netns::NETNS_DIR).join(ns).exists() && !namespaces.contains(ns) {
                namespaces.push(ns.clone());
            }
        }
    }
    let dir = state::dir(name);
    if st.is_none() && namespaces.is_empty() && !dir.exists() {
        return Err(Error::new(format!("no testbed {name:?} is up")));
    }
    // Deleting namespaces one by one costs a few `ip` runs each; do them in
    // parallel (bounded) so a 30-node testbed goes down in a second or two.
    report.namespaces = namespaces.len();
    parallel(&namespaces, 8, |ns| {
        netns::delete(ns);
        Ok(())
    })?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(report)
}

/// Runs `f` over `items` on at most `width` threads; the first error wins.
pub fn parallel<T: Sync>(
    items: &[T],
    width: usize,
    f: impl Fn(&T) -> Result<()> + Sync,
) -> Result<()> {
    let next = AtomicUsize::new(0);
    let first_err: Mutex<Option<Error>> = Mutex::new(None);
    thread::scope(|s| {
        for _ in 0..width.clamp(1, items.len().max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                if let Err(e) = f(item) {
                    first_err
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get_or_insert(e);
                }
            });
        }
    });
    match first_err.into_inner().unwrap_or_else(|e| e.into_inner()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// The longest RTT between switches along any path a switch may choose
/// (twice the largest one-way delay of a route's candidates).
pub fn longest_route_rtt(topo: &Topology) -> Duration {
    let one_way = topo
        .switches()
        .iter()
        .flat_map(|s| topo.routes(s.id))
        .flat_map(|r| r.candidates.into_iter().map(|c| c.delay_ns))
        .max()
        .unwrap_or(0);
    Duration::from_nanos(one_way.saturating_mul(2))
}

/// Checks that every host reaches every other over each address family
/// both have (one ping, retried: the first packets of a path may wait for
/// a switch to learn a neighbour), and names the pairs that do not. Each
/// ping waits up to `wait` for its reply (rotor networks hold a packet
/// until its circuit comes up).
pub fn check_reachability(tb: &Lab, wait: Duration) -> Result<()> {
    let mut pairs = Vec::new();
    for (i, a) in tb.hosts.iter().enumerate() {
        for (j, b) in tb.hosts.iter().enumerate() {
            if i == j {
                continue;
            }
            let dsts = [
                b.ipv4().map(std::net::IpAddr::V4),
                b.ipv6().map(std::net::IpAddr::V6),
            ];
            for dst in dsts.into_iter().flatten() {
                let src_has_family = if dst.is_ipv4() {
                    a.ipv4().is_some()
                } else {
                    a.ipv6().is_some()
                };
                if src_has_family {
                    pairs.push((i, j, dst));
                }
            }
        }
    }
    let failed: Mutex<Vec<String>> = Mutex::new(Vec::new());
    // Pings over long (dilated or rotor) paths mostly wait: more at once.
    let width = if wait > Duration::from_secs(3) {
        128
    } else {
        16
    };
    parallel(&pairs, width, |&(i, j, dst)| {
        let a = &tb.hosts[i];
        let d = dst.to_string();
        let w = format!("{:.3}", wait.as_secs_f64());
        let ok = (0..3).any(|_| {
            a.netns
                .exec_output(
                    &["ping", "-c", "1", "-W", &w, "-q", &d],
                    wait + Duration::from_secs(7),
                )
                .is_ok_and(|o| o.status.success())
        });
        if !ok {
            failed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(format!("{} -> {} ({d})", a.name, tb.hosts[j].name));
        }
        Ok(())
    })?;
    let failed = failed.into_inner().unwrap_or_else(|e| e.into_inner());
    if failed.is_empty() {
        Ok(())
    } else {
        // The first few name the problem; hundreds would bury it.
        const SHOWN: usize = 10;
        let more = match failed.len().saturating_sub(SHOWN) {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        Err(Error::new(format!(
            "{} of {} host pairs cannot reach each other: {}{more}",
            failed.len(),
            pairs.len(),
            failed[..failed.len().min(SHOWN)].join(", ")
        )))
    }
}

/// The topology of a testbed's effective topology file: the file itself,
/// or for a rotor network file the topology of its namespaces and veths
/// ([`crate::rotor::topology_of`]).
pub fn testbed_topology(file: &Path) -> Result<Topology> {
    match Network::load(file).map_err(|e| Error::new(e.to_string()))? {
        Network::Rotor(net) => crate::rotor::topology_of(&net),
        Network::Dci(topo) => Ok(topo),
    }
}

/// The testbed of a state file, attached to its existing namespaces.
pub fn attach(st: &State) -> Result<(Topology, Lab)> {
    let topo = testbed_topology(&st.topology_file)?;
    let name = st.name.clone();
    let tb = Lab::attach(&topo, &|node| state::netns_name(&name, node))?;
    Ok((topo, tb))
}

#[cfg(test)]
mod agent_args_tests {
    use super::path_cost_args;

    #[test]
    fn only_the_path_cost_options_reach_the_agent() {
        let extra: Vec<String> = [
            "--no-ecn",
            "--metric",
            "local",
            "--w-delay=5",
            "--keep",
            "1/3",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            path_cost_args(&extra),
            vec!["--metric", "local", "--w-delay=5"]
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dilation_stretches_delays_and_divides_rates_on_top_of_the_scale() {
        // The built-in 8-DC topology, rates / 1000 and time x 10.
        let t = effective_topology(None, 1, None, 1000.0, None, 10.0).unwrap();
        let l = &t.links()[0];
        // dc1 - dc2: 200 Gbit/s / (1000 x 10); 25 ms x 10; 128 MiB / 1000
        // (buffers follow the rate scale only: bytes per BDP are kept).
        assert_eq!(
            (l.rate_bps, l.delay_ns, l.buffer_bytes),
            (20_000_000, 250_000_000, 134_217)
        );
        // The longest route: dc1 - dc3 - dc8, 2 x 250 ms one way, x 10.
        assert_eq!(longest_route_rtt(&t), Duration::from_secs(10));
        let real = effective_topology(None, 1, None, 1000.0, None, 1.0).unwrap();
        assert_eq!(longest_route_rtt(&real), Duration::from_secs(1));
        let e = effective_topology(None, 1, None, 1000.0, None, 0.0).unwrap_err();
        assert!(e.to_string().contains("--time-scale"), "{e}");
    }
}

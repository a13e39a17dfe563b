//! Bringing a testbed up and down: namespaces and veths from the topology
//! (`lcmp_netlab::Lab`), host tuning, the switch daemons and the agent,
//! the reachability check, and teardown that works from the state file
//! alone.

mod agent;
mod link;
mod process;
mod reach;
mod switches;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lcmp_netlab::netns;
use lcmp_netlab::{Lab, Netns, SwitchLinks};
use lcmp_topology::network::Network;
use lcmp_topology::{HostTemplate, Scaling, Topology};

pub use crate::experiment::config::find_link;
pub use agent::{agent_running, start_agent, stop_agent};
pub use link::{set_carrier, set_port_carrier};
pub use process::{find_program, is_program, parallel, tail};
pub use reach::{check_reachability, longest_route_rtt};
pub use switches::{
    flow_log_path, launch_one_process, launch_switches, start_switches, start_switches_as,
    stop_switches,
};

use crate::state::{self, State, SwitchSettings};
use crate::{Error, Result};
use process::signal_and_wait;
use switches::running_switches;

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
    /// How the network is scaled for emulation (rates, buffers, time):
    /// the switches and the agent apply it to what they emulate, never to
    /// what they decide from.
    pub scaling: Scaling,
    /// Policy and parameters of the switches.
    pub switches: SwitchSettings,
    /// Hosts' TCP congestion control (`None`: the kernel's default).
    pub cc: Option<String>,
    /// Hosts' initial congestion and receive windows, in segments, on
    /// their default routes (`None`: the kernel's default of 10).
    pub initcwnd: Option<u32>,
    /// Start the agent (`None`: no agent).
    pub agent: Option<AgentOptions>,
    /// How links between switches are made (`None`: in memory when one
    /// process runs the switches, else veths; see [`links_for`]).
    pub links: Option<SwitchLinks>,
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
    /// and a quarter of the drops at transit switches (docs/performance.md, "Switches
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

/// The network of a testbed as the switches decide from it: the file,
/// plus `hosts_per_dc` generated hosts on DC switches without hosts (on
/// `host_switches` only, if given), unscaled.
pub fn testbed_network(
    file: Option<&Path>,
    hosts_per_dc: usize,
    host_switches: Option<&[String]>,
) -> Result<Topology> {
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
    Ok(topo)
}

/// The network of [`testbed_network`] as it is emulated under `scaling`
/// (what calibration, the ideal FCT and link utilization measure against).
pub fn effective_topology(
    file: Option<&Path>,
    hosts_per_dc: usize,
    host_switches: Option<&[String]>,
    scaling: Scaling,
) -> Result<Topology> {
    scaling.check().map_err(Error::new)?;
    let topo = testbed_network(file, hosts_per_dc, host_switches)?;
    scaling
        .emulated(&topo)
        .map_err(|e| Error::new(e.to_string()))
}

/// `--links`: `memory` or `veth`.
pub fn parse_links(s: &str) -> std::result::Result<SwitchLinks, String> {
    SwitchLinks::from_name(s)
}

/// How the links between switches are made when the switches run as
/// `how` and `links` was asked for: in memory by default where one process
/// runs them all (a frame then costs a fraction of the CPU of a veth hop),
/// veths otherwise; memory links between processes are refused.
pub fn links_for(how: SwitchProcesses, links: Option<SwitchLinks>) -> Result<SwitchLinks> {
    match (how, links) {
        (SwitchProcesses::PerSwitch, Some(SwitchLinks::Memory)) => Err(Error::new(
            "--links memory joins switches of one process: it needs --switch-processes one",
        )),
        (_, Some(l)) => Ok(l),
        (SwitchProcesses::One, None) => Ok(SwitchLinks::Memory),
        (SwitchProcesses::PerSwitch, None) => Ok(SwitchLinks::Veth),
    }
}

/// Brings testbed `opts.name` up and returns its state. On any failure
/// everything made so far is removed again.
pub fn up(opts: &UpOptions, progress: &dyn Fn(&str)) -> Result<State> {
    let links = links_for(opts.switch_processes, opts.links)?;
    check_free(&opts.name)?;
    if let Some(cc) = &opts.cc {
        check_congestion_control(cc)?;
    }
    opts.scaling.check().map_err(Error::new)?;
    let network = testbed_network(
        opts.topology.as_deref(),
        opts.hosts_per_dc,
        opts.host_switches.as_deref(),
    )?;
    let topo = opts
        .scaling
        .emulated(&network)
        .map_err(|e| Error::new(e.to_string()))?;
    let switch_bin = find_program("lcmp-switch", "LCMP_SWITCH_BIN")?;
    match up_inner(opts, &network, &topo, &switch_bin, links, progress) {
        Ok(st) => Ok(st),
        Err(e) => {
            let _ = down(&opts.name);
            Err(e)
        }
    }
}

/// `network` is what the switches and the agent read (unscaled), `topo`
/// the same network as emulated under `opts.scaling`.
fn up_inner(
    opts: &UpOptions,
    network: &Topology,
    topo: &Topology,
    switch_bin: &Path,
    links: SwitchLinks,
    progress: &dyn Fn(&str),
) -> Result<State> {
    let dir = state::dir(&opts.name);
    std::fs::create_dir_all(&dir).map_err(|e| Error::new(format!("{}: {e}", dir.display())))?;
    let topology_file = dir.join("topology.toml");
    std::fs::write(&topology_file, network.to_toml())
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
        scaling: opts.scaling,
        switches: opts.switches.clone(),
        namespaces,
        procs: Vec::new(),
        agent: None,
        links,
        complete: false,
    };
    // Written before anything exists, so that `down` finds it all after a
    // crash.
    st.save()?;

    progress(&format!(
        "creating {} switch and {} host namespaces ({} links between switches)",
        topo.switches().len(),
        topo.hosts().len(),
        links.name()
    ));
    let name = opts.name.clone();
    let mut tb = Lab::build_with(
        topo,
        &mut |node| Netns::create(&state::netns_name(&name, node)),
        links,
    )?;
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
            "testbed {name:?} is already up: `lcmp-testbed down --testbed {name}` first, or pick another name"
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

/// The topology of a testbed's effective topology file: the file itself,
/// or for a rotor network file the topology of its namespaces and veths
/// ([`crate::rotor::topology_of`]).
pub fn testbed_topology(file: &Path) -> Result<Topology> {
    match Network::load(file).map_err(|e| Error::new(e.to_string()))? {
        Network::Rotor(net) => crate::rotor::topology_of(&net),
        Network::Dci(topo) => Ok(topo),
    }
}

/// The network of a testbed as it is emulated: its network file under its
/// scaling.
pub fn emulated_topology(st: &State) -> Result<Topology> {
    let topo = testbed_topology(&st.topology_file)?;
    st.scaling
        .emulated(&topo)
        .map_err(|e| Error::new(format!("{}: {e}", st.topology_file.display())))
}

/// The testbed of a state file, attached to its existing namespaces; the
/// topology as emulated.
pub fn attach(st: &State) -> Result<(Topology, Lab)> {
    let topo = emulated_topology(st)?;
    let name = st.name.clone();
    let tb = Lab::attach(&topo, &|node| state::netns_name(&name, node), st.links)?;
    Ok((topo, tb))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dilation_stretches_delays_and_divides_rates_on_top_of_the_scale() {
        // The built-in 8-DC topology, rates / 1000 and time x 10.
        let scaling = |rate: f64, time: f64| Scaling {
            time,
            ..Scaling::rates(rate)
        };
        let t = effective_topology(None, 1, None, scaling(1000.0, 10.0)).unwrap();
        let l = &t.links()[0];
        // dc1 - dc2: 200 Gbit/s / (1000 x 10); 25 ms x 10; 128 MiB / 1000
        // (buffers follow the rate scale only: bytes per BDP are kept).
        assert_eq!(
            (l.rate_bps, l.delay_ns, l.buffer_bytes),
            (20_000_000, 250_000_000, 134_217)
        );
        // The longest route: dc1 - dc3 - dc8, 2 x 250 ms one way, x 10.
        assert_eq!(longest_route_rtt(&t), Duration::from_secs(10));
        let real = effective_topology(None, 1, None, scaling(1000.0, 1.0)).unwrap();
        assert_eq!(longest_route_rtt(&real), Duration::from_secs(1));
        let e = effective_topology(None, 1, None, scaling(1000.0, 0.0)).unwrap_err();
        assert!(e.to_string().contains("time scale"), "{e}");
        // The network the switches read is the file's, unscaled.
        let n = testbed_network(None, 1, None).unwrap();
        assert_eq!(n.links()[0].rate_bps, 200_000_000_000);
        assert_eq!(n.links()[0].delay_ns, 25_000_000);
    }
}

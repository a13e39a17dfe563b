//! Rotor networks (Mars, SIGMETRICS 2023) in namespaces: `lcmp-testbed up`
//! of a rotor network file (`lcmp_topology::rotor_net`), the built-in
//! default network, the throughput experiment ([`experiment`]) and the
//! slot-boundary measurement ([`boundary`]).
//!
//! A rotor network is wired as a [`Topology`] ([`topology_of`]) so that the
//! namespaces, veths, host addresses and teardown are the ordinary
//! testbed's: ToR t is switch `tor{t}` with uplink r on `u{r}` and host
//! port h on `h{h}`; rotor r is `rotor{r}` with the port facing ToR t on
//! `t{t}`; one veth pair per (ToR, rotor) and per host; host (t, h) is
//! `h{t}x{h}` with 10.t.h.2/24 behind gateway 10.t.h.1. The switches read
//! the rotor network file itself (the state directory's `topology.toml`,
//! the testbed's `topology_file`); the testbed's agent gives them the
//! epoch of slot 0 (`lcmp-agent run --testbed`), unless the file has one.

pub mod boundary;
pub mod clock_floor;
pub mod experiment;
pub mod flows;
mod flows_ns;
pub mod one_process;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use lcmp_control::rotor::RotorStatus;
use lcmp_netlab::daemon::{switch_argv, switches_argv, SwitchKind};
use lcmp_netlab::{Lab, Netns};
use lcmp_results::rotor::{Design, RotorParams, DEFAULT_PARAMS};
use lcmp_topology::rotor::{self, DegreeChoice, RotorInputs};
use lcmp_topology::rotor_net::{RotorNetwork, RotorRole, RotorRouting};
use lcmp_topology::Topology;

use crate::bed;
use crate::state::{self, State, SwitchSettings};
use crate::{Error, Result};

/// Name under which the built-in network is reported.
pub const BUILTIN_NAME: &str = "built-in rotor network (8 ToRs x 2 rotors, Mars de Bruijn)";

/// The network file's name in the state directory: where
/// `lcmp-agent run --testbed NAME` reads the testbed's network.
pub const NETWORK_FILE: &str = "topology.toml";

/// The node name of host `h` of ToR `t`.
pub fn host_name(tor: u32, host: u32) -> String {
    RotorNetwork::host_name(tor, host)
}

/// The topology whose namespaces and veths wire `net`
/// ([`RotorNetwork::wiring`]).
pub fn topology_of(net: &RotorNetwork) -> Result<Topology> {
    net.wiring().map_err(|e| Error::new(e.to_string()))
}

/// The planner's inputs for `p`.
pub fn inputs(p: &RotorParams) -> RotorInputs {
    RotorInputs {
        tors: p.tors,
        uplinks: p.rotors,
        slot_ns: p.slot_ns,
        reconfig_ns: p.reconfig_ns,
        rate_bps: p.rate_bps,
        buffer_bytes: p.buffer_bytes,
        max_delay_ns: p.max_delay_ns,
    }
}

/// What an experiment sets of a design's network beyond [`RotorParams`].
#[derive(Clone, Copy, Debug, Default)]
pub struct NetworkOptions {
    /// Mars's degree, forced (as the paper fixes 8 at 64 ToRs) whatever
    /// the planner's budget says; `None`: the planner's choice.
    pub mars_degree: Option<u32>,
    /// The ToRs' guard before a slot's end, ns; `None`: the file's
    /// default.
    pub tx_guard_ns: Option<u64>,
}

/// The network of `design` on `p` (no epoch yet), with Mars's chosen
/// candidate for [`Design::Mars`] (see [`NetworkOptions`]).
pub fn network(
    design: Design,
    p: &RotorParams,
    opts: NetworkOptions,
) -> Result<(RotorNetwork, Option<DegreeChoice>)> {
    let e = |e: rotor::RotorError| Error::new(e.to_string());
    let (schedule, routing, chosen) = match design {
        Design::Complete => (
            rotor::complete(p.tors, p.rotors).map_err(e)?,
            RotorRouting::Direct,
            None,
        ),
        Design::CompleteValiant => (
            rotor::complete(p.tors, p.rotors).map_err(e)?,
            RotorRouting::Valiant,
            None,
        ),
        Design::Static => (
            rotor::static_expander(p.tors, p.rotors).map_err(e)?,
            RotorRouting::Shift,
            None,
        ),
        Design::Mars | Design::MarsShift => {
            let chosen = match opts.mars_degree {
                Some(d) => rotor::candidate(&inputs(p), d),
                None => rotor::plan(&inputs(p)).map_err(e)?.chosen,
            };
            (
                rotor::de_bruijn(p.tors, chosen.degree, p.rotors)
                    .map_err(|x| Error::new(format!("mars: {x}")))?,
                if design == Design::Mars {
                    RotorRouting::ShiftValiant
                } else {
                    RotorRouting::Shift
                },
                Some(chosen),
            )
        }
    };
    let mut net = RotorNetwork::from_schedule(&schedule, p.slot_ns, p.reconfig_ns);
    net.rate_bps = p.rate_bps;
    net.buffer_bytes = Some(p.buffer_bytes);
    net.routing = Some(routing);
    net.hosts_per_tor = p.hosts_per_tor;
    if let Some(g) = opts.tx_guard_ns {
        net.tx_guard_ns = g;
    }
    // Checked as the switches will check it.
    let net = RotorNetwork::parse(&net.to_toml(), design.name()).map_err(e)?;
    Ok((net, chosen))
}

/// The built-in network of `lcmp-testbed up --rotor`: Mars on
/// [`DEFAULT_PARAMS`].
pub fn default_network() -> RotorNetwork {
    network(Design::Mars, &DEFAULT_PARAMS, NetworkOptions::default())
        .expect("the built-in parameters plan")
        .0
}

/// `CLOCK_REALTIME` now, rounded down to a whole second: an epoch in the
/// past (slots count from it) that a person can read.
pub fn epoch_now() -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    now * 1_000_000_000
}

/// How long a ping may wait for its reply: a packet crosses up to two
/// phases of a full route, each hop waiting up to a full period for its
/// circuit, there and back; ten times that, and at least 2 s.
pub fn reach_wait(net: &RotorNetwork) -> Duration {
    // A parsed network has a schedule; the longest route is at least 1.
    let longest = net
        .schedule()
        .ok()
        .and_then(|s| {
            let (_, hops) = rotor::routes(&s);
            hops.into_iter().flatten().filter(|h| *h != u32::MAX).max()
        })
        .unwrap_or(1)
        .max(1) as u64;
    let phases = if net.routing().valiant() { 2 } else { 1 };
    let hops = if net.routing().shift() { longest } else { 1 };
    let period = net.slot_ns * u64::from(net.per_rotor);
    let round_trip = 2 * phases * hops * period;
    Duration::from_nanos(10 * round_trip).max(Duration::from_secs(2))
}

/// What `lcmp-testbed up` of a rotor network is asked for.
#[derive(Debug, Clone)]
pub struct RotorUpOptions {
    /// Testbed name.
    pub name: String,
    /// The network (its epoch, if absent, is set at start).
    pub network: RotorNetwork,
    /// Where it came from (file path or [`BUILTIN_NAME`]), for `status`.
    pub source: String,
    /// Extra arguments for every `lcmp-switch`.
    pub switch_args: Vec<String>,
    /// How the ToR-rotor links are made: veths, a process per switch (the
    /// default: each switch keeps a core's timing to itself), or in memory,
    /// every switch in one process on an event loop per core (a large
    /// network fits two cores).
    pub links: lcmp_netlab::SwitchLinks,
}

/// The state directory's copy of the network file.
pub fn network_file(name: &str) -> PathBuf {
    state::dir(name).join(NETWORK_FILE)
}

/// The network a rotor testbed's switches run (its state directory's
/// file, epoch included).
pub fn load_network(st: &State) -> Result<RotorNetwork> {
    RotorNetwork::load(&st.topology_file).map_err(|e| Error::new(e.to_string()))
}

/// Whether testbed `st` is a rotor network (an unreadable or invalid
/// file is not: its loader reports why).
pub fn is_rotor(st: &State) -> bool {
    matches!(
        lcmp_topology::network::Network::load(&st.topology_file),
        Ok(lcmp_topology::network::Network::Rotor(_))
    )
}

/// Brings a rotor network up: namespaces and veths of [`topology_of`],
/// the network file in the state directory, one
/// `lcmp-switch` per ToR and rotor, and returns once every host has pinged
/// every other (through the rotors). On failure everything made so far is
/// removed again. The agent distributes the epoch.
pub fn up(opts: &RotorUpOptions, progress: &dyn Fn(&str)) -> Result<State> {
    bed::check_free(&opts.name)?;
    let switch_bin = bed::find_program("lcmp-switch", "LCMP_SWITCH_BIN")?;
    match up_inner(opts, &switch_bin, progress) {
        Ok(st) => Ok(st),
        Err(e) => {
            let _ = bed::down(&opts.name);
            Err(e)
        }
    }
}

fn up_inner(opts: &RotorUpOptions, switch_bin: &Path, progress: &dyn Fn(&str)) -> Result<State> {
    let net = &opts.network;
    let topo = topology_of(net)?;
    let dir = state::dir(&opts.name);
    std::fs::create_dir_all(&dir).map_err(|e| Error::new(format!("{}: {e}", dir.display())))?;
    let mut st = State {
        name: opts.name.clone(),
        created_unix_s: epoch_now() / 1_000_000_000,
        topology_source: opts.source.clone(),
        topology_file: network_file(&opts.name),
        hosts_per_dc: net.hosts_per_tor as usize,
        scaling: lcmp_topology::Scaling::NONE,
        switches: settings(net, &opts.switch_args),
        namespaces: topo
            .switches()
            .iter()
            .map(|s| s.name.as_str())
            .chain(topo.hosts().iter().map(|h| h.name.as_str()))
            .map(|n| state::netns_name(&opts.name, n))
            .collect(),
        procs: Vec::new(),
        agent: None,
        links: opts.links,
        complete: false,
    };
    // Written before anything exists, so that `down` finds it all after a
    // crash.
    write_network(&st.topology_file, net)?;
    st.save()?;
    progress(&format!(
        "creating {} ToR, {} rotor and {} host namespaces",
        net.tors,
        net.rotors,
        topo.hosts().len()
    ));
    let name = opts.name.clone();
    let mut tb = Lab::build_with(
        &topo,
        &mut |node| Netns::create(&state::netns_name(&name, node)),
        opts.links,
    )?;
    start(&mut st, &tb, net, switch_bin, progress)?;
    tb.persist();
    st.complete = true;
    st.save()?;
    Ok(st)
}

fn settings(net: &RotorNetwork, extra: &[String]) -> SwitchSettings {
    SwitchSettings {
        policy: format!("rotor {} ({} routing)", net.kind, net.routing().name()),
        alpha: 0,
        beta: 0,
        extra_args: extra.to_vec(),
        ..SwitchSettings::default()
    }
}

/// Writes `net` to `path`.
fn write_network(path: &Path, net: &RotorNetwork) -> Result<()> {
    std::fs::write(path, net.to_toml()).map_err(|e| Error::new(format!("{}: {e}", path.display())))
}

/// Starts the switches of `net` and waits until every host reaches every
/// other.
fn start(
    st: &mut State,
    tb: &Lab,
    net: &RotorNetwork,
    switch_bin: &Path,
    progress: &dyn Fn(&str),
) -> Result<()> {
    progress(&format!(
        "starting {} switches ({} schedule, {} routing)",
        tb.switches.len(),
        net.kind,
        net.routing().name()
    ));
    let file = st.topology_file.clone();
    let mut extra = st.switches.extra_args.clone();
    match st.links {
        lcmp_netlab::SwitchLinks::Veth => {
            let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
            bed::launch_switches(st, tb, &|node, stats| {
                switch_argv(
                    switch_bin,
                    SwitchKind::Rotor,
                    &file,
                    node,
                    stats,
                    bed::STATS_INTERVAL_MS,
                    &extra,
                )
            })?;
        }
        lcmp_netlab::SwitchLinks::Memory => {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            if !extra.iter().any(|a| a.starts_with("--loops")) {
                let loops = cores.min(tb.switches.len()).max(1);
                extra.extend(["--loops".into(), loops.to_string()]);
            }
            extra.extend(["--links".into(), "memory".into()]);
            let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
            let argv = switches_argv(
                switch_bin,
                SwitchKind::Rotor,
                &file,
                &tb.switches,
                &state::dir(&st.name),
                bed::STATS_INTERVAL_MS,
                &extra,
            );
            bed::launch_one_process(st, tb, &argv)?;
        }
    }
    // The switches forward nothing into the circuits until they have the
    // epoch: the agent gives every switch the same one.
    progress("starting the agent (it distributes the epoch of slot 0)");
    bed::start_agent(
        st,
        &bed::AgentOptions {
            metrics_listen: Some(
                bed::DEFAULT_METRICS_LISTEN
                    .parse()
                    .expect("the default metrics address parses"),
            ),
        },
    )?;
    wait_for_epoch(st)?;
    progress("checking that every host reaches every other through the rotors");
    bed::check_reachability(tb, reach_wait(net))
}

/// Replaces the running network of a rotor testbed by `net` (same ToRs,
/// rotors and hosts, so the same wiring): stops the switches, writes the
/// file with a new epoch, starts them again and checks reachability.
pub fn restart(
    st: &mut State,
    tb: &Lab,
    net: &RotorNetwork,
    progress: &dyn Fn(&str),
) -> Result<()> {
    let old = load_network(st)?;
    if (old.tors, old.rotors, old.hosts_per_tor) != (net.tors, net.rotors, net.hosts_per_tor) {
        return Err(Error::new(format!(
            "testbed {} wires {} ToRs x {} rotors x {} hosts; the new network needs a new testbed",
            st.name, old.tors, old.rotors, old.hosts_per_tor
        )));
    }
    let switch_bin = bed::find_program("lcmp-switch", "LCMP_SWITCH_BIN")?;
    bed::stop_agent(st)?;
    bed::stop_switches(st)?;
    write_network(&st.topology_file, net)?;
    st.switches = settings(net, &st.switches.extra_args);
    st.save()?;
    start(st, tb, net, &switch_bin, progress)
}

/// The role of each switch of the testbed, by name.
pub fn roles(net: &RotorNetwork, tb: &Lab) -> Vec<(String, RotorRole)> {
    tb.switches
        .iter()
        .filter_map(|s| net.role(&s.name).ok().map(|r| (s.name.clone(), r)))
        .collect()
}

/// The counters of a rotor-network switch's state by name, for
/// differences over a window: `drops.<reason>`, `counters.<name>`,
/// `ports.<kind>.{rx,tx}_{frames,bytes}` (summed over the ports of a kind)
/// and `slots_seen`.
pub fn counters(s: &RotorStatus) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for (k, v) in &s.drops {
        out.insert(format!("drops.{k}"), *v as f64);
    }
    for (k, v) in &s.counters {
        out.insert(format!("counters.{k}"), *v as f64);
    }
    for p in &s.ports {
        for (what, v) in [
            ("rx_frames", p.rx_frames),
            ("rx_bytes", p.rx_bytes),
            ("tx_frames", p.tx_frames),
            ("tx_bytes", p.tx_bytes),
        ] {
            *out.entry(format!("ports.{}.{what}", p.kind)).or_insert(0.0) += v as f64;
        }
    }
    out.insert("slots_seen".into(), s.slots_seen as f64);
    out
}

/// Reads a rotor-network switch's stats file.
pub fn read_status(path: &Path) -> Result<RotorStatus> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::new(format!("{}: {e}", path.display())))?;
    serde_json::from_str(&text).map_err(|e| Error::new(format!("{}: {e}", path.display())))
}

/// The epoch every switch of the testbed runs on; fails if they do not
/// all have the same one.
pub fn epoch(st: &State) -> Result<u64> {
    let status = fresh_status(st)?;
    let epochs: std::collections::BTreeSet<Option<u64>> =
        status.values().map(|s| s.epoch_unix_ns).collect();
    match epochs.into_iter().collect::<Vec<_>>()[..] {
        [Some(e)] => Ok(e),
        ref other => Err(Error::new(format!(
            "the switches of testbed {} do not share one epoch: {other:?}",
            st.name
        ))),
    }
}

/// Waits (at most 10 s) until every switch has the agent's epoch.
fn wait_for_epoch(st: &State) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match epoch(st) {
            Ok(_) => return Ok(()),
            Err(e) if Instant::now() >= deadline => {
                return Err(Error::new(format!(
                    "{e} 10 s after the agent started:\n{}",
                    st.agent
                        .as_ref()
                        .map_or(String::new(), |a| bed::tail(&a.log, 20))
                )))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// Each switch's stats file, read once every file has been rewritten
/// after this call (so the figures are not older than the call); at most
/// 3 s.
pub fn fresh_status(st: &State) -> Result<BTreeMap<String, RotorStatus>> {
    let asked = SystemTime::now();
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut out = BTreeMap::new();
    for p in &st.procs {
        loop {
            let newer = std::fs::metadata(&p.stats)
                .and_then(|m| m.modified())
                .is_ok_and(|t| t > asked);
            if newer {
                break;
            }
            if Instant::now() >= deadline {
                return Err(Error::new(format!(
                    "switch {} did not rewrite its stats file {} within 3 s",
                    p.name,
                    p.stats.display()
                )));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        out.insert(p.name.clone(), read_status(&p.stats)?);
    }
    Ok(out)
}

/// `after - before` of every counter present in `after`.
pub fn counter_delta(
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
) -> BTreeMap<String, f64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use lcmp_topology::Peer;

    #[test]
    fn the_wiring_follows_the_networks_names() {
        let net = default_network();
        let topo = topology_of(&net).unwrap();
        assert_eq!(topo.switches().len(), 10);
        assert_eq!(topo.hosts().len(), 8);
        for name in ["tor3", "rotor1"] {
            let role = net.role(name).unwrap();
            let sw = topo.switch_by_name(name).unwrap();
            let ifnames: Vec<String> = topo
                .ports(sw.id)
                .iter()
                .map(|p| p.ifname.clone().unwrap())
                .collect();
            assert_eq!(ifnames, net.port_names(role), "{name}");
        }
        // tor3's uplink 1 is rotor1's port 3, and its host port h0 holds
        // h3x0 = 10.3.0.2/24.
        let tor3 = topo.switch_by_name("tor3").unwrap().id;
        let rotor1 = topo.switch_by_name("rotor1").unwrap().id;
        match topo.port(tor3, 1).unwrap().peer {
            Peer::Switch { switch, port, .. } => assert_eq!((switch, port), (rotor1, 3)),
            p => panic!("{p:?}"),
        }
        let h = topo.host_by_name("h3x0").unwrap();
        assert_eq!(h.addresses[0].to_string(), "10.3.0.2/24");
        assert_eq!((h.switch, h.port), (tor3, 2));
        assert_eq!(topo.port(tor3, 0).unwrap().rate_bps, 100_000_000);
    }

    #[test]
    fn the_built_in_network_is_mars_degree_4() {
        let net = default_network();
        assert_eq!((net.tors, net.rotors, net.hosts_per_tor), (8, 2, 1));
        assert_eq!(net.kind, "de-bruijn");
        assert_eq!(net.matchings.len(), 4);
        assert_eq!(net.per_rotor, 2);
        assert_eq!(net.buffer(), 50_000);
        assert_eq!(net.routing(), RotorRouting::ShiftValiant);
        assert_eq!(net.epoch_unix_ns, None);
        let (_, chosen) =
            network(Design::Mars, &DEFAULT_PARAMS, NetworkOptions::default()).unwrap();
        let c = chosen.unwrap();
        assert_eq!((c.degree, c.diameter), (4, 2));
        assert!((c.throughput_bound - 0.225).abs() < 1e-12);
    }

    #[test]
    fn designs_share_the_figures() {
        for d in Design::ALL {
            let (net, _) = network(d, &DEFAULT_PARAMS, NetworkOptions::default()).unwrap();
            assert_eq!(Design::from_name(d.name()), Some(d));
            assert_eq!(
                (net.tors, net.rotors, net.slot_ns, net.reconfig_ns),
                (8, 2, 1_000_000, 100_000)
            );
            assert_eq!((net.rate_bps, net.buffer()), (100_000_000, 50_000));
        }
        let (s, _) = network(Design::Static, &DEFAULT_PARAMS, NetworkOptions::default()).unwrap();
        assert_eq!(s.per_rotor, 1);
        let (c, _) = network(
            Design::CompleteValiant,
            &DEFAULT_PARAMS,
            NetworkOptions::default(),
        )
        .unwrap();
        assert_eq!(c.routing(), RotorRouting::Valiant);
    }

    #[test]
    fn ping_waits_cover_the_longest_route() {
        // Mars: 2 phases x 2 hops x a 2 ms period, there and back = 16 ms;
        // ten times that is below the 2 s floor.
        assert_eq!(reach_wait(&default_network()), Duration::from_secs(2));
        let mut slow = default_network();
        slow.slot_ns = 100_000_000;
        slow.reconfig_ns = 10_000_000;
        // 2 x 2 x 2 x 200 ms x 10.
        assert_eq!(reach_wait(&slow), Duration::from_secs(16));
    }

    #[test]
    fn counters_add_up_ports_and_diff() {
        let port = |kind: &str, rx: u64| lcmp_control::rotor::RotorPort {
            name: "x".into(),
            kind: kind.into(),
            rx_frames: rx,
            ..Default::default()
        };
        let mut a = RotorStatus {
            ports: vec![port("uplink", 3), port("uplink", 4), port("host", 1)],
            drops: BTreeMap::from([("queue_full".into(), 2)]),
            slots_seen: 10,
            ..Default::default()
        };
        let ca = counters(&a);
        assert_eq!(ca["ports.uplink.rx_frames"], 7.0);
        assert_eq!(ca["ports.host.rx_frames"], 1.0);
        a.ports[0].rx_frames = 10;
        a.drops.insert("queue_full".into(), 5);
        a.drops.insert("reconfiguring".into(), 1);
        a.slots_seen = 30;
        let d = counter_delta(&ca, &counters(&a));
        assert_eq!(d["ports.uplink.rx_frames"], 7.0);
        assert_eq!(d["ports.host.rx_frames"], 0.0);
        assert_eq!(d["drops.queue_full"], 3.0);
        assert_eq!(d["drops.reconfiguring"], 1.0);
        assert_eq!(d["slots_seen"], 20.0);
    }
}

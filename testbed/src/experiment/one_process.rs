//! The FCT experiment with the whole network in this process, no
//! namespaces: on the virtual clock (`--engine virtual`,
//! [`lcmp_engine::run_virtual`]: no root, deterministic) or on the wall
//! clock (`--engine wall`, [`lcmp_engine::network::run_wall`]: dilated by
//! the experiment's time scale as the namespace engine is; each switch's
//! control socket is the testbed's, so `lcmp-ctl --testbed NAME` reaches
//! it while the run goes on, where this process may create it (root);
//! Ctrl-C ends the run, its running flows reported unfinished).
//!
//! Everything around the runs is the namespace engine's: the same runs
//! (`plan_runs`), the same flows per sender (the trace's schedules, or
//! Poisson arrivals at the same rate with the same seeds as the
//! `lcmp-traffic` clients get), the same files per run (`flows.csv` with
//! the switch paths from the decision logs, `decisions-<switch>.csv`) and
//! the same `summary.json`, report, plots and fidelity. What differs:
//! calibration is the topology's own RTTs (exact on the virtual clock; on
//! the wall clock frames never leave early, so the configured RTT is the
//! floor; the flows' `min_rtt_us` say how far above it a run was);
//! every switch's final snapshot is kept (`switch-<name>.json`) and every
//! host's final counters (`hosts.json`, by host name), and the switches'
//! counters, which cover the whole run, give the drops and the link loads;
//! `summary.json` says which engine ran and each run's virtual and wall
//! time.
//!
//! Captures (`capture = ["dc1:p2"]`, `--capture`): the switch's own
//! capture of a port (`lcmp-ctl capture`'s) records the run's frames on
//! it, both directions, at the network's clock (virtual ns, or the wall
//! run's clock from its start), until `capture_max_bytes`; after the run
//! they are written as `runs/<run>/capture-<switch>.pcapng` by
//! [`lcmp_control::pcapng`], the writer of `lcmp-ctl capture` too
//! (nanosecond timestamps). A capture that reached its cap says so in one
//! line, with the frames not recorded.
//!
//! On the wall clock, as root, each run is a testbed while it runs: the
//! testbed's state file (its switches in this process, their stats files)
//! and network file are written, the switches serve its control sockets
//! and `lcmp-agent` runs against them (metrics on 127.0.0.1:9464 or a
//! free port), so `lcmp-testbed status`, `lcmp-ctl --testbed NAME` and a
//! Prometheus scrape see the run; all of it is removed when the run ends,
//! on every way out. A testbed of the experiment's name already up is
//! refused.

use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use lcmp_control::pcapng::PcapngFile;
use lcmp_control::Snapshot;
use lcmp_engine::network::{CaptureAt, PortCapture, Recording, WallOptions};
use lcmp_engine::{HostTraffic, VirtualRun};
use lcmp_policy::{Policy, PolicyName};
use lcmp_results::analysis::{self, NetworkInput};
use lcmp_switch::config::Options;
use lcmp_switch::egress::EcnMarkAt;
use lcmp_topology::{Scaling, SwitchId, Topology};
use lcmp_traffic::cdf::Cdf;
use lcmp_traffic::client::Destination;
use lcmp_traffic::flows::{self, Arrivals, FlowSource};
use lcmp_traffic::record::FlowRecord;
use lcmp_traffic::rocev2::cc::{CcParams, CongestionControl};
use lcmp_traffic::rocev2::client::RoceOptions;
use serde_json::json;

use super::ideals::{Ideals, Pair};
use super::run::{self, RunMeasurements, RunSpec};
use super::{calibrate, config, framework, ExperimentConfig, Results, RunOutcome, ROCEV2_PORT};
use crate::flow_paths::SwitchDecisions;
use crate::state::{self, State, SwitchProc, SwitchSettings};
use crate::{bed, Error, Result};

/// What `calibration.json` says of a calibration on the virtual engine.
const EXACT_NOTE: &str = "virtual engine: every RTT is the topology's, exactly (the virtual \
    clock delays each frame by exactly its links' delays and serialization; nothing measured)";
/// What `calibration.json` says of a calibration on the wall engine.
const FLOOR_NOTE: &str = "wall engine: every RTT is the topology's, as a floor (a frame never \
    leaves a link before its delay and serialization; the machine falling behind adds to them; \
    nothing measured: the flows' min_rtt_us show it)";

/// Runs experiment `cfg` on its one-process engine (virtual or wall),
/// writing under `out` what the namespace engine writes (see the module
/// docs).
pub fn run(cfg: &ExperimentConfig, out: &Path, say: &dyn Fn(&str)) -> Result<analysis::Summary> {
    let topo = cfg.validate()?;
    // The engine emulates the network as written and applies the
    // scaling itself, as the switches do on the namespace engine.
    let network = bed::testbed_network(
        cfg.topology.as_deref(),
        cfg.hosts_per_dc,
        cfg.host_switches().as_deref(),
    )?;
    let super::Ends {
        pair,
        senders,
        receivers,
    } = super::Ends::of(cfg, &topo);
    let replay = super::trace_schedules(cfg, &topo, &senders, &receivers)?;
    let dsts = destinations(&topo, &receivers)?;
    // One DC pair's calibration, or, when every DC sends, each pair's:
    // the topology's RTTs, exact on this engine.
    let ideals = match (pair, &replay) {
        (Some((from, to)), _) => {
            let cal = calibrate::configured(&topo, from, to)?;
            let ideal = super::ideal_model(cfg.transport, cal.base_rtt_ns, cal.bottleneck_bps);
            Ideals::One(Pair { cal, ideal })
        }
        (None, Some((t, schedules))) => Ideals::of_pairs(&topo, cfg.transport, t, schedules)?,
        (None, None) => unreachable!("only a trace sends between any two DCs"),
    };

    std::fs::create_dir_all(out.join("runs"))
        .map_err(|e| Error::new(format!("{}: {e}", out.display())))?;
    std::fs::write(
        out.join("experiment.toml"),
        toml::to_string(cfg).expect("config serializes"),
    )?;
    write_calibration(
        ideals.calibration_json(&topo),
        cfg.engine,
        &out.join("calibration.json"),
    )?;
    let paths = ideals.first_hops();
    let ideal = ideals.run_ideal();

    let switches = super::switch_settings(cfg, "ecmp");
    let cc = super::host_cc(cfg)?;
    let base_spec =
        |policy: &str, seed: u64| super::run_spec(cfg, &switches, &cc, policy, seed, None);
    let (specs, trace_echo) =
        super::plan_runs(cfg, &topo, &senders, replay.as_ref(), Some(out), &base_spec)?;

    let wall = cfg.engine == config::Engine::Wall;
    if wall {
        framework::catch_signals();
        if lcmp_netlab::is_root() {
            refuse_testbed_up(&cfg.name)?;
        } else {
            say("not root: the wall runs' switches are not reachable (their control sockets, lcmp-testbed status and the agent's metrics need the testbed's directory under /run)");
        }
    }
    // The network has the topology's switches and ports (hosts included).
    let captures = cfg.captures(&network)?;
    let bed = VirtualBed {
        wall_testbed: wall.then_some(cfg.name.as_str()),
        captures: &captures,
        topology_source: cfg.topology.as_ref().map_or_else(
            || config::BUILTIN_NAME.to_string(),
            |t| {
                std::fs::canonicalize(t)
                    .unwrap_or_else(|_| t.clone())
                    .display()
                    .to_string()
            },
        ),
        hosts_per_dc: cfg.hosts_per_dc,
        topo: &topo,
        network: &network,
        src: pair.map(|(from, _)| from),
        ideals: &ideals,
        senders: &senders,
        dsts: &dsts,
        pfc: cfg.pfc,
    };
    let started = Instant::now();
    let mut outcomes = Vec::new();
    let mut timings = Vec::new();
    for (k, (load, spec)) in specs.iter().enumerate() {
        say(&format!(
            "run {}/{} {} on the {} clock",
            k + 1,
            specs.len(),
            spec.id,
            if wall { "wall" } else { "virtual" }
        ));
        let dir = out.join("runs").join(&spec.id);
        let (flows, meas, timing) = bed.run(spec, &dir, say)?;
        let mut input = super::run_input(spec, *load, flows, &meas, ideals.notes(), &paths);
        input.flow_ideals = ideals.flow_ideals(&topo, &input.flows);
        say(&format!(
            "{}  [{:.6} s of the network's clock in {:.2} s wall]",
            super::run_line(&input, &meas.network, ideal),
            timing.virtual_s,
            timing.wall_s
        ));
        timings.push(json!({
            "run": spec.id,
            "virtual_s": timing.virtual_s,
            "wall_s": timing.wall_s,
            "polls": timing.polls,
            "frame_hops": timing.frame_hops,
        }));
        outcomes.push(RunOutcome {
            input,
            network: meas.network,
            failure: None,
        });
    }
    say(&format!(
        "{} runs in {:.1} s; writing results",
        outcomes.len(),
        started.elapsed().as_secs_f64()
    ));
    let results = Results {
        cfg,
        topo: &topo,
        senders: &senders,
        receivers: &receivers,
        ideals: &ideals,
        trace_echo,
        rates_per_sender: cfg
            .loads
            .iter()
            .map(|&l| super::rate_per_sender(&topo, cfg, &senders, l))
            .collect(),
        engine: json!({
            "name": cfg.engine.name(),
            "clock": if wall {
                "wall: the monotonic clock from each run's start, dilated by time_scale as on the namespaces engine; virtual_s is how long each run went on that clock"
            } else {
                "virtual: FCTs and counters in the modeled network's time; wall_s is what each run cost"
            },
            "runs": timings,
        }),
    };
    super::write_results(results, outcomes, out, say)
}

/// `calibration.json`: the namespace engine's schema (`cal`; when every
/// DC sends, per pair), with a note of what the configured RTTs are on
/// `engine`.
fn write_calibration(mut v: serde_json::Value, engine: config::Engine, file: &Path) -> Result<()> {
    v["engine"] = json!(engine.name());
    if engine == config::Engine::Wall {
        v["floor"] = json!(FLOOR_NOTE);
    } else {
        v["exact"] = json!(EXACT_NOTE);
    }
    std::fs::write(
        file,
        serde_json::to_string_pretty(&v).expect("calibration serializes"),
    )
    .map_err(|e| Error::new(format!("{}: {e}", file.display())))
}

/// Every receiver as the senders address it: `NAME=IPv4:4791`, as the
/// namespace engine's servers listen (the engine's hosts are IPv4).
fn destinations(topo: &Topology, receivers: &[String]) -> Result<Vec<Destination>> {
    receivers
        .iter()
        .map(|r| {
            let h = topo.host_by_name(r).expect("a host of the topology");
            let ip = h
                .addresses
                .iter()
                .map(|a| a.addr())
                .find(std::net::IpAddr::is_ipv4)
                .ok_or_else(|| {
                    Error::new(format!(
                        "host {r} has no IPv4 address: the virtual engine's RoCEv2 hosts are IPv4"
                    ))
                })?;
            Ok(Destination {
                name: r.clone(),
                addr: std::net::SocketAddr::new(ip, ROCEV2_PORT),
            })
        })
        .collect()
}

/// What a run cost and how far its virtual clock went.
struct Timing {
    virtual_s: f64,
    wall_s: f64,
    polls: u64,
    frame_hops: u64,
}

/// Refuses a wall-engine experiment whose name is a testbed that is up:
/// its runs serve their switches as that testbed's.
fn refuse_testbed_up(name: &str) -> Result<()> {
    state::validate_name(name)?;
    if State::path(name).exists()
        || !lcmp_netlab::netns::list_with_prefix(&state::netns_prefix(name)).is_empty()
    {
        return Err(Error::new(format!(
            "testbed {name:?} is up, and a wall-engine run is testbed {name:?} while it runs: \
             `lcmp-testbed down --name {name}` first, or give the experiment another name \
             (name = \"...\", --name)"
        )));
    }
    Ok(())
}

/// A wall-engine run as a testbed while it runs (as root): its state file
/// (the switches in this process, their stats files), its network file
/// and its agent. Removed when dropped, on every way out: the agent
/// stopped, the files written here deleted (the sockets go with the
/// run), the directory too if it made it.
struct WallTestbed {
    st: State,
    made_dir: bool,
}

impl WallTestbed {
    /// Testbed `name` for a run of `spec` on `network` (unscaled, hosts
    /// included), its agent started (or why not, said); `None` without
    /// root (the run then goes on unreachable).
    fn open(
        name: &str,
        network: &Topology,
        spec: &RunSpec,
        source: &str,
        hosts_per_dc: usize,
        say: &dyn Fn(&str),
    ) -> Result<Option<WallTestbed>> {
        if !lcmp_netlab::is_root() {
            return Ok(None);
        }
        refuse_testbed_up(name)?;
        let dir = state::dir(name);
        let made_dir = !dir.exists();
        std::fs::create_dir_all(&dir).map_err(|e| Error::new(format!("{}: {e}", dir.display())))?;
        let pid = std::process::id();
        let mut bed = WallTestbed {
            st: State {
                name: name.to_string(),
                created_unix_s: SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs()),
                topology_source: source.to_string(),
                topology_file: dir.join("topology.toml"),
                hosts_per_dc,
                scaling: spec.scaling,
                switches: spec.switches.clone(),
                // None: the switches and hosts are nodes of this process.
                namespaces: Vec::new(),
                procs: network
                    .switches()
                    .iter()
                    .map(|s| SwitchProc {
                        name: s.name.clone(),
                        pid,
                        log: PathBuf::new(),
                        stats: Self::stats_file(name, &s.name),
                        shared: true,
                    })
                    .collect(),
                agent: None,
                links: lcmp_netlab::SwitchLinks::Memory,
                complete: true,
            },
            made_dir,
        };
        std::fs::write(&bed.st.topology_file, network.to_toml())
            .map_err(|e| Error::new(format!("{}: {e}", bed.st.topology_file.display())))?;
        bed.st.save()?;
        // The agent is for watching the run: without it (not built, or it
        // failed) the run goes on, said in one line.
        if let Err(e) = bed::start_agent(
            &mut bed.st,
            &bed::AgentOptions {
                metrics_listen: bed::DEFAULT_METRICS_LISTEN.parse().ok(),
            },
        ) {
            let e = e.to_string();
            say(&format!(
                "run {}: no agent, so no metrics while it runs: {}",
                spec.id,
                e.lines().next().unwrap_or_default()
            ));
        }
        Ok(Some(bed))
    }

    /// Switch `switch`'s stats file in testbed `name`'s directory, as the
    /// namespace engine's switches write theirs.
    fn stats_file(name: &str, switch: &str) -> PathBuf {
        state::dir(name).join(format!("{switch}.stats.json"))
    }

    /// Ends it after the run, keeping the agent's log as `agent.log` in
    /// the run's directory.
    fn close(mut self, run_dir: &Path) {
        self.stop_agent();
        if let Some(a) = &self.st.agent {
            let _ = std::fs::copy(&a.log, run_dir.join("agent.log"));
        }
    }

    fn stop_agent(&mut self) {
        if bed::agent_running(&self.st) {
            let _ = bed::stop_agent(&mut self.st);
        }
    }
}

impl Drop for WallTestbed {
    fn drop(&mut self) {
        self.stop_agent();
        let dir = state::dir(&self.st.name);
        if self.made_dir {
            let _ = std::fs::remove_dir_all(&dir);
            return;
        }
        let mut files = vec![
            State::path(&self.st.name),
            self.st.topology_file.clone(),
            dir.join("agent.json"),
            dir.join("agent.log"),
        ];
        for p in &self.st.procs {
            files.push(p.stats.with_extension("tmp"));
            files.push(p.stats.clone());
        }
        for f in files {
            let _ = std::fs::remove_file(f);
        }
        // Only if empty: what was there before is not this run's.
        let _ = std::fs::remove_dir(&dir);
    }
}

/// What every run on a one-process engine shares.
struct VirtualBed<'a> {
    /// On the wall clock: the testbed's name, whose control sockets the
    /// switches serve. `None`: the virtual clock.
    wall_testbed: Option<&'a str>,
    /// The ports whose frames every run records.
    captures: &'a [CaptureAt],
    /// The topology as the user named it (the wall runs' state files).
    topology_source: String,
    /// Hosts generated per DC switch (the same).
    hosts_per_dc: usize,
    /// The effective topology (scaled as the experiment says): paths,
    /// link loads, names.
    topo: &'a Topology,
    /// The network as written, hosts included, that the engine runs.
    network: &'a Topology,
    /// The source DC switch; `None` when every DC sends.
    src: Option<SwitchId>,
    /// What the flows' slowdowns rest on (when every DC sends, the DC
    /// pair of each flow, written beside it in `flows.csv`).
    ideals: &'a Ideals,
    senders: &'a [String],
    dsts: &'a [Destination],
    /// Priority flow control on the switches that can keep it lossless.
    pfc: bool,
}

impl VirtualBed<'_> {
    /// Runs `spec` on the virtual clock; writes `dir`'s `flows.csv`,
    /// `decisions-<switch>.csv` and `switch-<name>.json`, and returns the
    /// flows, what the switches saw and what the run cost.
    fn run(
        &self,
        spec: &RunSpec,
        dir: &Path,
        say: &dyn Fn(&str),
    ) -> Result<(Vec<FlowRecord>, RunMeasurements, Timing)> {
        std::fs::create_dir_all(dir).map_err(|e| Error::new(format!("{}: {e}", dir.display())))?;
        let traffic = self.traffic(spec)?;
        let virtual_run = VirtualRun {
            network: self.network.clone(),
            switch: switch_options(&spec.switches, spec.scaling)?,
            roce: roce_options(spec)?,
            traffic,
            end_ns: ((spec.duration_s + spec.drain_s) * 1e9).round() as u64,
            flow_log: Some(dir.join("decisions-{switch}.csv")),
            pfc: self.pfc,
        };
        let wall = Instant::now();
        let outcome = match self.wall_testbed {
            None => lcmp_engine::network::run_virtual_recorded(
                virtual_run,
                &Recording {
                    captures: self.captures,
                    stats_file: None,
                },
                u64::MAX,
                &mut |_| {},
            ),
            Some(testbed) => {
                // Without root /run is not ours: the run goes on unreachable.
                let bed = WallTestbed::open(
                    testbed,
                    self.network,
                    spec,
                    &self.topology_source,
                    self.hosts_per_dc,
                    say,
                )?;
                let socket = |switch: &str| lcmp_control::paths::testbed_socket(testbed, switch);
                let stats = |switch: &str| WallTestbed::stats_file(testbed, switch);
                let reachable = bed.is_some();
                let outcome = lcmp_engine::network::run_wall_recorded(
                    virtual_run,
                    &WallOptions {
                        control_socket: reachable.then_some(&socket as &dyn Fn(&str) -> _),
                        stop: Some(&run::INTERRUPTED),
                    },
                    &Recording {
                        captures: self.captures,
                        stats_file: reachable.then_some(&stats as &dyn Fn(&str) -> _),
                    },
                );
                if let Some(bed) = bed {
                    bed.close(dir);
                }
                outcome
            }
        }
        .map_err(Error::new)?;
        for pc in &outcome.captures {
            self.write_capture(pc, dir, say)?;
        }
        let timing = Timing {
            virtual_s: outcome.end_ns as f64 / 1e9,
            wall_s: wall.elapsed().as_secs_f64(),
            polls: outcome.polls,
            frame_hops: outcome.frame_hops,
        };
        for (name, snapshot) in &outcome.switches {
            let file = dir.join(format!("switch-{name}.json"));
            let mut snapshot = snapshot.clone();
            if self.wall_testbed.is_none() {
                // On the virtual clock no process runs the switch and the
                // wall clock is not the network's (uptime_ms is): without
                // them the file is the same every run.
                snapshot.pid = 0;
                snapshot.unix_time_ms = 0;
            }
            std::fs::write(
                &file,
                serde_json::to_string_pretty(&snapshot).expect("snapshot serializes"),
            )
            .map_err(|e| Error::new(format!("{}: {e}", file.display())))?;
        }
        // Every host's final counters in one file (a network has up to
        // hundreds): DCQCN's ECN echoes and rate cuts, go-back-N's
        // retransmissions, the NIC's drops and PFC pauses.
        let hosts: serde_json::Map<String, serde_json::Value> =
            outcome.hosts.iter().cloned().collect();
        let file = dir.join("hosts.json");
        std::fs::write(
            &file,
            serde_json::to_string_pretty(&hosts).expect("host statuses serialize"),
        )
        .map_err(|e| Error::new(format!("{}: {e}", file.display())))?;
        let mut meas = self.measurements(&outcome.switches, timing.virtual_s);
        let decisions = self.decision_logs(dir)?;
        let mut flows: Vec<FlowRecord> = outcome.records.into_iter().flat_map(|(_, r)| r).collect();
        flows.sort_by_key(|f| f.id);
        run::annotate_paths(
            self.topo,
            &decisions,
            self.src,
            spec.transport,
            &mut flows,
            &mut meas.network,
        );
        let pairs = match self.src {
            Some(src) => self
                .dsts
                .iter()
                .filter_map(|d| Some((src, self.topo.host_by_name(&d.name)?.switch)))
                .collect(),
            None => self.ideals.pairs(),
        };
        meas.network.transit_choices = Some(run::transit_choices(self.topo, pairs));
        run::write_flows(&dir.join("flows.csv"), &flows, |f| {
            self.ideals.columns(self.topo, f)
        })?;
        Ok((flows, meas, timing))
    }

    /// Writes `pc` as `dir/capture-<switch>.pcapng` (see [`write_pcapng`]);
    /// says in one line what its cap kept out.
    fn write_capture(&self, pc: &PortCapture, dir: &Path, say: &dyn Fn(&str)) -> Result<()> {
        let max_bytes = self
            .captures
            .iter()
            .find(|c| c.switch == pc.switch)
            .map_or(u64::MAX, |c| c.max_bytes);
        let file = dir.join(format!("capture-{}.pcapng", pc.switch));
        write_pcapng(pc, max_bytes, &file)?;
        let missing = pc.not_recorded();
        if missing > 0 {
            say(&format!(
                "capture {}:{}: the {} cap was reached: {} of the port's {} frames recorded, {missing} not recorded{} (capture_max_bytes, --capture-max-bytes)",
                pc.switch,
                pc.port,
                lcmp_topology::units::human_bytes(max_bytes),
                pc.frames.len(),
                pc.seen,
                if pc.dropped > 0 {
                    format!(", {} of them lost while the machine fell behind", pc.dropped)
                } else {
                    String::new()
                },
            ));
        }
        Ok(())
    }

    /// Each sender's flows as its `lcmp-traffic client` would start them
    /// (`run::client_args`): a trace replay's schedule file, or Poisson
    /// arrivals at the run's rate (whole bits per second, as the client is
    /// given it) with the sender's seed and id range; senders without a
    /// schedule send nothing.
    fn traffic(&self, spec: &RunSpec) -> Result<Vec<HostTraffic>> {
        let mut out = Vec::new();
        for (i, s) in self.senders.iter().enumerate() {
            let (arrivals, seed, id_base) = match &spec.schedules {
                Some(files) => {
                    let Some(file) = files.get(s) else {
                        continue;
                    };
                    let text = std::fs::read_to_string(file)
                        .map_err(|e| Error::new(format!("{}: {e}", file.display())))?;
                    let list = flows::parse_schedule(
                        &text,
                        &file.display().to_string(),
                        self.dsts,
                        spec.scaling.size,
                    )
                    .map_err(Error::new)?;
                    // A schedule's ids are its own; the client's seed and
                    // id base are then unused (its defaults).
                    (Arrivals::Schedule(list), 1, 0)
                }
                None => {
                    let cdf = Cdf::load(&spec.workload).map_err(|e| Error::new(e.to_string()))?;
                    let rate_bps: f64 = format!("{:.0}", spec.rate_bps_per_sender)
                        .parse()
                        .expect("a formatted number parses");
                    let lambda =
                        rate_bps / (8.0 * flows::mean_scaled_size(&cdf, spec.scaling.size));
                    (
                        Arrivals::Poisson {
                            cdf,
                            lambda,
                            duration_s: spec.duration_s,
                        },
                        run::sender_seed(spec.seed, i),
                        run::sender_id_base(i),
                    )
                }
            };
            out.push(HostTraffic {
                host: s.clone(),
                flows: FlowSource::new(
                    arrivals,
                    seed,
                    id_base,
                    spec.warmup_s,
                    spec.scaling.size,
                    self.dsts.len(),
                ),
                dsts: self.dsts.to_vec(),
            });
        }
        Ok(out)
    }

    /// What the switches' final snapshots say (they started with the run,
    /// so their counters are the whole run's, `window_s` long): the source
    /// switch's bytes per port, every link direction's load, drops by
    /// reason, lost decision-log records and failovers.
    fn measurements(&self, switches: &[(String, Snapshot)], window_s: f64) -> RunMeasurements {
        let mut departed: run::PortTx = vec![None; self.topo.switches().len()];
        for (name, s) in switches {
            if let Some(sw) = self.topo.switch_by_name(name) {
                departed[sw.id.0] = Some(
                    s.ports
                        .iter()
                        .filter_map(|p| {
                            Some((u8::try_from(p.index).ok()?, p.counter("departed_bytes")))
                        })
                        .collect(),
                );
            }
        }
        // Fresh switches: every counter started at zero.
        let zero: run::PortTx = departed
            .iter()
            .map(|d| d.as_ref().map(|m| m.keys().map(|&p| (p, 0)).collect()))
            .collect();
        // Every DC sends: every switch is a source, and no one switch's
        // ports are the paths.
        let is_src = |name: &str| self.src.is_none_or(|s| self.topo.switch(s).name == name);
        RunMeasurements {
            port_tx_bytes: self
                .src
                .and_then(|s| departed[s.0].clone())
                .unwrap_or_default(),
            window_s,
            notes: Vec::new(),
            failure_at_s: None,
            failovers: switches
                .iter()
                .filter(|(n, _)| is_src(n))
                .map(|(_, s)| s.flows.failovers)
                .sum(),
            network: NetworkInput {
                links: run::link_loads(self.topo, &zero, &departed),
                flow_log_lost: run::flow_log_lost_of(switches),
                ..Default::default()
            },
            // The hosts' transport counters are not part of the engine's
            // outcome.
            transport_counters: Default::default(),
            switch_drops: run::switch_drops_of(switches),
        }
    }

    /// Every switch's decision log the engine wrote into `dir`, by switch
    /// id (`None` where there is none).
    fn decision_logs(&self, dir: &Path) -> Result<Vec<Option<SwitchDecisions>>> {
        self.topo
            .switches()
            .iter()
            .map(|sw| {
                let log = dir.join(format!("decisions-{}.csv", sw.name));
                if !log.is_file() {
                    return Ok(None);
                }
                let file = std::fs::File::open(&log)
                    .map_err(|e| Error::new(format!("{}: {e}", log.display())))?;
                SwitchDecisions::from_csv(std::io::BufReader::new(file), &log.display().to_string())
                    .map(Some)
                    .map_err(Error::new)
            })
            .collect()
    }
}

/// Writes `pc`'s frames as pcapng to `file` ([`PcapngFile`], the one
/// writer `lcmp-ctl capture` uses too: nanosecond times of the network's
/// clock, each frame's direction in its flags, the interface named
/// `<switch>/<port>`), at most `max_bytes` of them as kept (the last frame
/// cut to what is left, as `lcmp-ctl capture --max-bytes` does).
fn write_pcapng(pc: &PortCapture, max_bytes: u64, file: &Path) -> Result<()> {
    let failed = |e: std::io::Error| Error::new(format!("{}: {e}", file.display()));
    let created = std::fs::File::create(file).map_err(failed)?;
    let if_name = format!("{}/{}", pc.switch, pc.port);
    let snaplen = u32::try_from(pc.snaplen).unwrap_or(u32::MAX);
    let mut out = PcapngFile::new(created, &if_name, snaplen).map_err(failed)?;
    let mut kept = 0u64;
    for f in &pc.frames {
        if kept >= max_bytes {
            break;
        }
        let room = usize::try_from(max_bytes - kept).unwrap_or(usize::MAX);
        let data = &pc.data[f.start..f.start + f.len.min(room)];
        kept += data.len() as u64;
        out.write(f.time_ns, f.outbound, f.orig_len, data)
            .map_err(failed)?;
    }
    out.finish().map_err(failed)
}

/// The hosts' RoCEv2 options of `spec`: its scaling, its congestion
/// control at the simulator's parameters (DCQCN when it names none) with
/// HPCC's base RTT; the defaults otherwise.
fn roce_options(spec: &RunSpec) -> Result<RoceOptions> {
    let cc = match &spec.cc {
        Some(name) => CongestionControl::from_name(name).map_err(Error::new)?,
        None => CongestionControl::Dcqcn,
    };
    Ok(RoceOptions {
        scaling: spec.scaling,
        cc: CcParams::default_for(cc),
        base_rtt_ns: spec.base_rtt_ns.unwrap_or(0),
        ..RoceOptions::default()
    })
}

/// The switch options `settings` describe, as `lcmp-switch lcmp` reads its
/// arguments (`SwitchSettings::argv`): the policy with the experiment's
/// alpha and beta (an ablation's zero kept), the weights of C_path and
/// C_cong, the ECN thresholds and where they are decided, the drop
/// headroom, the run's scaling; the switch's defaults otherwise.
fn switch_options(settings: &SwitchSettings, scaling: Scaling) -> Result<Options> {
    let name: PolicyName = settings.policy.parse().map_err(Error::new)?;
    let policy = match name.policy() {
        Policy::Lcmp(p) => Policy::Lcmp(lcmp_policy::LcmpParams {
            alpha: if p.alpha == 0 { 0 } else { settings.alpha },
            beta: if p.beta == 0 { 0 } else { settings.beta },
            ..p
        }),
        other => other,
    };
    let ecn_link_time = settings
        .ecn_link_time
        .as_deref()
        .map(lcmp_control::snapshot::EcnLinkTime::parse)
        .transpose()
        .map_err(Error::new)?;
    let ecn_mark_at = match settings.ecn_mark_at.as_deref() {
        None => EcnMarkAt::default(),
        Some(n) => EcnMarkAt::from_name(n)
            .ok_or_else(|| Error::new(format!("ecn_mark_at {n:?}: expected enqueue or dequeue")))?,
    };
    let metric = match settings.metric.as_deref() {
        None => Options::default().metric,
        Some(m) => <lcmp_topology::tables::PathMetric as clap::ValueEnum>::from_str(m, false)
            .map_err(|_| Error::new(format!("metric {m:?}: expected path or local")))?,
    };
    let defaults = Options::default();
    Ok(Options {
        policy,
        path_cost: lcmp_policy::PathCostParams {
            w_delay: settings.w_delay.unwrap_or(defaults.path_cost.w_delay),
            w_capacity: settings.w_capacity.unwrap_or(defaults.path_cost.w_capacity),
            ..defaults.path_cost
        },
        congestion: lcmp_policy::CongestionParams {
            w_queue: settings.w_queue.unwrap_or(defaults.congestion.w_queue),
            w_trend: settings.w_trend.unwrap_or(defaults.congestion.w_trend),
            w_persist: settings.w_persist.unwrap_or(defaults.congestion.w_persist),
            ..defaults.congestion
        },
        ecn_link_time,
        ecn_mark_at,
        metric,
        drop_headroom: settings.drop_headroom.unwrap_or(1),
        int: settings.int,
        scaling,
        ..defaults
    })
}

#[cfg(test)]
mod tests {
    use lcmp_control::snapshot::EcnLinkTime;
    use lcmp_policy::LcmpParams;

    use super::*;
    use crate::experiment::Transport;

    #[test]
    fn switch_options_are_what_the_switch_reads_from_the_settings_argv() {
        let mut cfg: ExperimentConfig = toml::from_str(
            "from='dc1'\nto='dc8'\nworkloads=['websearch']\nloads=[0.3]\npolicies=['lcmp']\n\
             duration_s=1\ntransport='rocev2'\nengine='virtual'\nalpha=5\nbeta=2",
        )
        .unwrap();
        let scaling = Scaling::rates(4.0);
        let o = switch_options(&super::super::switch_settings(&cfg, "lcmp"), scaling).unwrap();
        // --alpha 5 --beta 2 on LCMP's defaults otherwise.
        assert_eq!(
            o.policy,
            Policy::Lcmp(LcmpParams {
                alpha: 5,
                beta: 2,
                ..LcmpParams::default()
            })
        );
        // --ecn-link-time=32,128,0.2,2000 --ecn-mark-at=dequeue
        // --drop-headroom=1000: 32 us and 128 us of queueing.
        assert_eq!(
            o.ecn_link_time,
            Some(EcnLinkTime {
                kmin_ns: 32_000,
                kmax_ns: 128_000,
                pmax: 0.2,
                kmin_floor_bytes: 2000,
            })
        );
        assert_eq!(o.ecn_mark_at, EcnMarkAt::Dequeue);
        assert_eq!(o.drop_headroom, 1000);
        assert_eq!(o.scaling, scaling);
        // The ablations keep their zero weight.
        let o = switch_options(
            &super::super::switch_settings(&cfg, "lcmp-rm-alpha"),
            scaling,
        )
        .unwrap();
        assert_eq!(
            o.policy,
            Policy::Lcmp(LcmpParams {
                alpha: 0,
                beta: 2,
                ..LcmpParams::default()
            })
        );
        let o = switch_options(&super::super::switch_settings(&cfg, "ecmp"), scaling).unwrap();
        assert_eq!(o.policy, Policy::Ecmp);
        // A spec's weights, as --alpha 1 --w-delay=1 --w-capacity=3
        // --w-queue=1 --w-trend=2 set them; beta the experiment's 2, w_dp
        // the switch's 1.
        let o = switch_options(
            &super::super::switch_settings(&cfg, "lcmp:alpha=1:w_dl=1:w_lc=3:w_ql=1:w_tl=2"),
            scaling,
        )
        .unwrap();
        assert_eq!(
            o.policy,
            Policy::Lcmp(LcmpParams {
                alpha: 1,
                beta: 2,
                ..LcmpParams::default()
            })
        );
        assert_eq!((o.path_cost.w_delay, o.path_cost.w_capacity), (1, 3));
        assert_eq!(
            (
                o.congestion.w_queue,
                o.congestion.w_trend,
                o.congestion.w_persist
            ),
            (1, 2, 1)
        );
        // The rest of C_cong's parameters stay the switch's.
        assert_eq!(o.congestion.sample_interval_ns, 100_000);
        // Without rocev2's settings, the switch's defaults.
        cfg.transport = Transport::Tcp;
        let o = switch_options(&super::super::switch_settings(&cfg, "ecmp"), scaling).unwrap();
        assert_eq!(
            (o.ecn_link_time, o.ecn_mark_at, o.drop_headroom),
            (None, EcnMarkAt::Enqueue, 1)
        );
    }
}

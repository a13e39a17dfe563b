//! `lcmp-testbed`: multi-DC DCI testbeds in network namespaces, and FCT
//! experiments on them.

use lcmp_topology::{out, outln};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use lcmp_results::fidelity;
use lcmp_testbed::bed::{self, UpOptions};
use lcmp_testbed::state::{self, State, SwitchSettings};
use lcmp_testbed::{experiment, rdma, rotor, status, Error, Result};
use lcmp_topology::network::Network;
use lcmp_topology::rotor_net::RotorNetwork;

#[derive(Parser, Debug)]
#[command(
    version,
    about = "Multi-DC DCI testbeds in network namespaces, and FCT experiments on them",
    long_about = "Multi-DC DCI testbeds in network namespaces, and FCT experiments on them.\n\n\
    `up` builds a testbed from a topology file: one network namespace per switch and per host \
    (named lcmptb-<testbed>-<node>), one veth pair per link, and one lcmp-switch daemon per \
    switch in event mode, emulating each link's rate (divided by --scale) and real one-way \
    delay. It returns once every host reaches every other. The testbed stays up until `down`; \
    its state lives in /run/lcmp-testbed/<name>/ (switch logs and stats files too). \
    `experiment` runs workloads through a testbed and compares path-selection policies by \
    flow completion time. Needs root."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Build a testbed and start its switches.
    Up(UpArgs),
    /// Show a testbed's switches, ports, links and health.
    Status {
        /// Testbed name.
        #[arg(long)]
        name: String,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Run a command in a host's (or switch's) namespace, e.g.
    /// `lcmp-testbed exec --name tb dc1h1 -- ping 10.8.0.2`.
    Exec {
        /// Testbed name.
        #[arg(long)]
        name: String,
        /// Host or switch name in the topology.
        node: String,
        /// The command and its arguments (after `--`).
        #[arg(last = true, required = true)]
        cmd: Vec<String>,
    },
    /// Remove a testbed: its switches, namespaces, veths and XDP programs.
    /// Works after `kill -9` of the tool or of a switch.
    Down {
        /// Testbed name.
        #[arg(long, required_unless_present = "all", conflicts_with = "all")]
        name: Option<String>,
        /// Remove every testbed (and any leftover lcmptb-* namespace).
        #[arg(long)]
        all: bool,
    },
    /// List the testbeds that are up.
    List,
    /// Start the testbed's agent if it is not running (after `kill -9`, or
    /// `--no-agent`): it re-adopts the running switches without moving a
    /// flow. `--stop` stops it; the switches keep forwarding.
    Agent {
        /// Testbed name.
        #[arg(long)]
        name: String,
        /// Stop the agent instead.
        #[arg(long)]
        stop: bool,
        /// Where its metrics are served.
        #[arg(long, default_value = bed::DEFAULT_METRICS_LISTEN)]
        metrics_listen: std::net::SocketAddr,
        /// Serve no metrics.
        #[arg(long)]
        no_metrics: bool,
    },
    /// Run an FCT experiment (see `lcmp-testbed experiment --help`).
    Experiment(Box<experiment::ExperimentArgs>),
    /// Rotor networks: delivered throughput of RotorNet/Sirius (complete
    /// graph), a static expander and Mars under all-to-all and permutation
    /// traffic, next to their bounds (summary.json, report.md, a bar
    /// chart).
    RotorExperiment(rotor::experiment::RotorExperimentArgs),
    /// Rotor networks: how precisely slot boundaries hold, measured at a
    /// receiving host (complete schedule, direct routing; one ToR streams
    /// to another above line rate). Builds its own testbed and removes it.
    RotorTiming(RotorTimingArgs),
    /// Compare a run's FCT slowdowns with a reference simulator's, by flow
    /// size.
    #[command(
        long_about = "Compare an experiment's FCT slowdowns with a reference simulator's \
        (the HPCC ns-3 FCT output of the LCMP artifact, e.g. experiments/reference/lcmp-artifact-8dc/), \
        the way the paper compared its testbed with its simulator (Pearson r 0.95 at the median, \
        0.97 at p99).\n\n\
        Slowdown = max(1, FCT / ideal) on both sides (the reference's ideal is its standalone FCT, \
        ours the run's ideal model). Each side is cut into 20 equal-count buckets of its own flow \
        sizes; bucket k of ours is compared with bucket k of the reference, and r is the Pearson \
        correlation of ln(slowdown) over the buckets at the median and at p99, per policy and \
        pooled over the policies given. Ours pools the completed non-warm-up flows of a policy's \
        runs (seeds) of one (workload, load): --load/--workload pick it when the run has several. \
        Without runs/*/flows.csv, summary.json's size buckets are used (and the report says so).\n\n\
        Prints a table, and writes DIR/fidelity.json, DIR/plots/fidelity.svg and .png, and a \
        fidelity section of DIR/report.md (replaced, not added, on a second run). Needs no root."
    )]
    Fidelity(FidelityArgs),
}

/// `lcmp-testbed fidelity`.
#[derive(Args, Debug, Clone)]
struct FidelityArgs {
    /// The experiment's output directory (summary.json, runs/*/flows.csv).
    #[arg(long, value_name = "DIR")]
    run: std::path::PathBuf,
    /// A policy of the run and the reference's FCT file for it (format
    /// hpcc-fct: `sip dip sport dport size_bytes start_ns fct_ns
    /// standalone_ns`). Repeatable.
    #[arg(long = "reference", value_name = "POLICY=FILE", required = true, value_parser = fidelity::parse_reference)]
    references: Vec<(String, std::path::PathBuf)>,
    /// The load to compare, where the run has several.
    #[arg(long)]
    load: Option<f64>,
    /// The workload to compare, where the run has several.
    #[arg(long)]
    workload: Option<String>,
}

/// A duration with a unit, in nanoseconds.
fn parse_duration(s: &str) -> std::result::Result<u64, String> {
    lcmp_topology::units::parse_duration(s).map_err(|e| e.to_string())
}

/// `lcmp-testbed rotor-timing`.
#[derive(Args, Debug, Clone)]
struct RotorTimingArgs {
    /// Testbed name.
    #[arg(long, default_value = "rotortime")]
    name: String,
    /// ToRs.
    #[arg(long, default_value_t = 4)]
    tors: u32,
    /// Rotors (uplinks per ToR).
    #[arg(long, default_value_t = 2)]
    rotors: u32,
    /// Slot Delta, microseconds.
    #[arg(long, default_value_t = 1000)]
    slot_us: u64,
    /// Slot Delta with a unit instead of --slot-us: 1ms, 500us.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, conflicts_with = "slot_us")]
    slot: Option<u64>,
    /// Reconfiguration Delta_r, microseconds.
    #[arg(long, default_value_t = 100)]
    reconfig_us: u64,
    /// Reconfiguration Delta_r with a unit instead of --reconfig-us:
    /// 100us.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, conflicts_with = "reconfig_us")]
    reconfig: Option<u64>,
    /// Uplink rate c, Mbit/s.
    #[arg(long, default_value_t = 100)]
    rate_mbps: u64,
    /// Sending ToR.
    #[arg(long, default_value_t = 0)]
    from: u32,
    /// Receiving ToR.
    #[arg(long, default_value_t = 1)]
    to: u32,
    /// Offered rate as a multiple of c.
    #[arg(long, default_value_t = 1.2)]
    load: f64,
    /// How long the sender sends: a bare number is seconds, or with a
    /// unit (3s, 500ms).
    #[arg(long, value_name = "SECS", default_value = "3", value_parser = lcmp_topology::secs::parse)]
    seconds: f64,
    /// Ethernet frame size, bytes.
    #[arg(long, default_value_t = 1500)]
    frame_bytes: u32,
    /// Extra argument for every lcmp-switch (repeatable).
    #[arg(long = "switch-arg", allow_hyphen_values = true)]
    switch_args: Vec<String>,
    /// Print the full report (every window) as JSON instead of a summary.
    #[arg(long)]
    json: bool,
}

/// The topology options shared by `up` and `experiment`.
#[derive(Args, Debug, Clone)]
pub struct UpArgs {
    /// Testbed name: 1 to 16 of a-z, 0-9, _.
    #[arg(long, default_value = "tb")]
    name: String,
    #[command(flatten)]
    topo: experiment::TopologyArgs,
    /// Path-selection policy of the switches: lcmp, ecmp, wcmp, ucmp,
    /// lcmp-rm-alpha, lcmp-rm-beta (checked by lcmp_policy::PolicyName,
    /// with a one-line error).
    #[arg(long, default_value = "lcmp")]
    policy: String,
    /// Extra argument for every lcmp-switch (repeatable), e.g.
    /// `--switch-arg=--no-ecn`.
    #[arg(long = "switch-arg", allow_hyphen_values = true)]
    switch_args: Vec<String>,
    /// Create SoftRoCE (rdma_rxe) devices on the hosts, where the kernel
    /// has it.
    #[arg(long)]
    rdma: bool,
    /// `one`: one lcmp-switch process runs every switch, an event loop per
    /// core (about two thirds of the CPU per gigabit of `per-switch`, and
    /// fewer drops where a real network has none); `per-switch`: a process
    /// per switch inside its namespace (a crash takes down one switch).
    /// Rotor networks always run a process per switch.
    #[arg(long, value_name = "HOW", value_enum, default_value = "one")]
    switch_processes: bed::SwitchProcesses,
    /// Where the agent serves Prometheus metrics of every switch (port 0:
    /// any free port; the default port, when taken, falls back to a free
    /// one). `lcmp-testbed status` shows the address.
    #[arg(long, default_value = bed::DEFAULT_METRICS_LISTEN)]
    metrics_listen: std::net::SocketAddr,
    /// Serve no metrics.
    #[arg(long)]
    no_metrics: bool,
    /// Start no agent: switches keep the tables they computed at start,
    /// and a link failure is seen only by the switches at its ends.
    #[arg(long)]
    no_agent: bool,
    /// Bring up the built-in rotor network instead of a topology: 8 ToRs x
    /// 2 rotors, one host per ToR, Mars's de Bruijn schedule as the
    /// planner chooses it (degree 4) for Delta = 1 ms, Delta_r = 100 us,
    /// c = 100 Mbit/s, B = 4 c Delta = 50 kB, delay budget 8.5 Delta;
    /// shift routing with Valiant load balancing. A --topology file with a
    /// [rotor] table (lcmp-agent rotor-plan --schedule) is a rotor network
    /// too. Rotor networks get no agent: the network file in the state
    /// directory carries the epoch of slot 0 (set at `up`).
    #[arg(long, conflicts_with = "topology")]
    rotor: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("lcmp-testbed: {e}");
            ExitCode::from(2)
        }
    }
}

/// The rotor network `up` brings up, with where it came from: the
/// built-in one (`--rotor`) or a `--topology` file that is one; `None`
/// for a DCI topology (read again by the DCI path).
fn rotor_network(a: &UpArgs) -> Result<Option<(RotorNetwork, String)>> {
    if a.rotor {
        return Ok(Some((
            rotor::default_network(),
            rotor::BUILTIN_NAME.to_string(),
        )));
    }
    let Some(f) = &a.topo.topology else {
        return Ok(None);
    };
    match Network::load(f).map_err(|e| Error::new(e.to_string()))? {
        Network::Rotor(net) => Ok(Some((
            net,
            std::fs::canonicalize(f)
                .unwrap_or_else(|_| f.clone())
                .display()
                .to_string(),
        ))),
        Network::Dci(_) => Ok(None),
    }
}

/// `up` of a rotor network.
fn up_rotor(a: &UpArgs, network: RotorNetwork, source: String) -> Result<ExitCode> {
    let st = rotor::up(
        &rotor::RotorUpOptions {
            name: a.name.clone(),
            network,
            source,
            switch_args: a.switch_args.clone(),
        },
        &say,
    )?;
    let s = status::status(&st.name)?;
    out!("{}", status::render(&s));
    say(&format!(
        "rotor network {} is up; `lcmp-testbed exec --name {} h0x0 -- ping 10.1.0.2` runs a command on a host, `lcmp-testbed down --name {}` removes it",
        st.name, st.name, st.name
    ));
    Ok(ExitCode::SUCCESS)
}

fn say(msg: &str) {
    eprintln!("lcmp-testbed: {msg}");
}

fn run(cli: Cli) -> Result<ExitCode> {
    if let Cmd::Up(a) = &cli.cmd {
        if let Some((network, source)) = rotor_network(a)? {
            return up_rotor(a, network, source);
        }
    }
    match cli.cmd {
        Cmd::Up(a) => {
            experiment::check_policy(&a.policy)?;
            a.topo.validate()?;
            if a.rdma {
                // Checked first: a testbed that cannot have what was asked
                // for is not built.
                rdma::check_available()?;
            }
            let opts = UpOptions {
                name: a.name.clone(),
                topology: a.topo.topology.clone(),
                hosts_per_dc: a.topo.hosts_per_dc,
                host_switches: None,
                scale: a.topo.scale(),
                buffer_scale: a.topo.buffer_scale,
                time_scale: a.topo.time_scale.unwrap_or(1.0),
                switches: SwitchSettings {
                    policy: a.policy.clone(),
                    alpha: a.topo.alpha,
                    beta: a.topo.beta,
                    extra_args: {
                        let mut args = a.switch_args.clone();
                        bed::dilate_switch_args(&mut args, a.topo.time_scale.unwrap_or(1.0));
                        args
                    },
                },
                cc: a.topo.cc.clone(),
                initcwnd: a.topo.initcwnd,
                agent: (!a.no_agent).then(|| bed::AgentOptions {
                    metrics_listen: (!a.no_metrics).then_some(a.metrics_listen),
                }),
                switch_processes: a.switch_processes,
            };
            let st = bed::up(&opts, &say)?;
            if a.rdma {
                if let Err(e) = rdma::add_devices(&st) {
                    let _ = bed::down(&st.name);
                    return Err(e);
                }
            }
            let s = status::status(&st.name)?;
            out!("{}", status::render(&s));
            say(&format!(
                "testbed {} is up; `lcmp-testbed exec --name {} HOST -- CMD` runs a command on a \
                 host, `lcmp-testbed down --name {}` removes it",
                st.name, st.name, st.name
            ));
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Status { name, json } => {
            let s = status::status(&name)?;
            if json {
                outln!(
                    "{}",
                    serde_json::to_string_pretty(&s).expect("status serializes")
                );
            } else {
                out!("{}", status::render(&s));
            }
            Ok(if s.health == "ok" {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Cmd::Exec { name, node, cmd } => {
            bed::require_root()?;
            let st = State::load(&name)?;
            let ns = state::netns_name(&name, &node);
            if !st.namespaces.contains(&ns) {
                let nodes: Vec<&str> = st
                    .namespaces
                    .iter()
                    .filter_map(|n| n.strip_prefix(&state::netns_prefix(&name)))
                    .collect();
                return Err(Error::new(format!(
                    "no host or switch {node:?} in testbed {name} (nodes: {})",
                    nodes.join(", ")
                )));
            }
            let status = std::process::Command::new("ip")
                .args(["netns", "exec", &ns])
                .args(&cmd)
                .status()
                .map_err(|e| Error::new(format!("cannot run ip netns exec: {e}")))?;
            Ok(ExitCode::from(
                status.code().unwrap_or(1).clamp(0, 255) as u8
            ))
        }
        Cmd::Down { name, all } => {
            let names = if all {
                bed::require_root()?;
                state::list()
            } else {
                vec![name.expect("clap requires --name without --all")]
            };
            if all && names.is_empty() {
                say("no testbed is up");
            }
            for n in names {
                let r = bed::down(&n)?;
                say(&format!(
                    "testbed {n} is down ({} switch processes stopped, {} namespaces removed)",
                    r.processes, r.namespaces
                ));
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::List => {
            for n in state::list() {
                match status::status(&n) {
                    Ok(s) => outln!(
                        "{n}\t{}\t{} switches\t{} hosts\t{}",
                        s.topology,
                        s.switches.len(),
                        s.hosts.len(),
                        s.health
                    ),
                    Err(e) => outln!("{n}\t(broken: {e}; `lcmp-testbed down --name {n}`)"),
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Agent {
            name,
            stop,
            metrics_listen,
            no_metrics,
        } => {
            bed::require_root()?;
            let mut st = State::load(&name)?;
            if stop {
                bed::stop_agent(&mut st)?;
                say(&format!(
                    "the agent of {name} is stopped; its switches keep forwarding"
                ));
            } else if bed::agent_running(&st) {
                let a = st.agent.as_ref().expect("running agent has a record");
                say(&format!(
                    "the agent of {name} runs already (pid {}, metrics {})",
                    a.pid,
                    a.metrics.as_deref().unwrap_or("off")
                ));
            } else {
                bed::start_agent(
                    &mut st,
                    &bed::AgentOptions {
                        metrics_listen: (!no_metrics).then_some(metrics_listen),
                    },
                )?;
                let a = st.agent.as_ref().expect("just started");
                say(&format!(
                    "agent of {name} started (pid {}, metrics {}); log {}",
                    a.pid,
                    a.metrics.as_deref().unwrap_or("off"),
                    a.log.display()
                ));
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Experiment(a) => {
            experiment::run_cli(&a, &say)?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::RotorExperiment(a) => {
            rotor::experiment::run_cli(&a, &say)?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Fidelity(a) => {
            let sel = fidelity::Selector {
                workload: a.workload,
                load: a.load,
            };
            let r = fidelity::run_fidelity_with(&a.run, &a.references, &sel).map_err(Error::new)?;
            out!("{}", fidelity::render_text(&r));
            say(&format!(
                "wrote {0}/fidelity.json, {0}/plots/fidelity.svg and .png, and the fidelity section of {0}/report.md",
                a.run.display()
            ));
            Ok(ExitCode::SUCCESS)
        }
        Cmd::RotorTiming(a) => {
            if !(a.seconds.is_finite() && a.seconds > 0.0) {
                return Err(Error::new("--seconds must be a positive number"));
            }
            let r = rotor::boundary::measure(
                &rotor::boundary::TimingOptions {
                    name: a.name,
                    setup: rotor::boundary::TimingSetup {
                        tors: a.tors,
                        rotors: a.rotors,
                        slot_ns: a.slot.unwrap_or(a.slot_us * 1000),
                        reconfig_ns: a.reconfig.unwrap_or(a.reconfig_us * 1000),
                        rate_bps: a.rate_mbps * 1_000_000,
                        from: a.from,
                        to: a.to,
                        frame_bytes: a.frame_bytes,
                    },
                    load: a.load,
                    duration: std::time::Duration::from_secs_f64(a.seconds),
                    switch_args: a.switch_args,
                },
                &say,
            )?;
            if a.json {
                outln!(
                    "{}",
                    serde_json::to_string_pretty(&r).expect("report serializes")
                );
            } else {
                out!("{}", rotor::boundary::render(&r));
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

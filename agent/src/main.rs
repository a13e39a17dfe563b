//! `lcmp-agent`: the LCMP control plane's command line.

use lcmp_topology::{out, outln};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use lcmp_agent::report;
use lcmp_policy::path_cost::MAX_PATH_SHIFT;
use lcmp_policy::{LcmpParams, PathCostParams};
use lcmp_topology::tables::{path_cost_model, switch_tables, PathMetric};
use lcmp_topology::Topology;

#[derive(Parser)]
#[command(version, about = "LCMP control plane for the AF_XDP DCI switch")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print each switch's candidate next hops per destination prefix, with
    /// path delay, bottleneck capacity, C_path, the fused LCMP cost at empty
    /// queues and the LCMP kept set.
    Paths(PathsArgs),
    /// Manage running switches: push each switch's tables from the
    /// topology (hitless), watch the file and SIGHUP, take links that fail
    /// anywhere out of every switch's candidates and put them back when
    /// they return, report who emulates each link, and serve Prometheus
    /// metrics of every switch. The switches keep forwarding with their
    /// last tables while the agent is away; a restarted agent re-adopts
    /// them without moving a flow.
    Run(RunArgs),
    /// Plan a rotor (Mars) network: for each degree d the uplinks allow,
    /// the diameter, throughput bound, worst-case delay and buffer need
    /// (reconstructed bounds, see the rotor module), Mars's choice, and
    /// with --schedule the schedule (which matching each rotor applies in
    /// each slot) as TOML.
    RotorPlan(RotorPlanArgs),
}

#[derive(clap::Args)]
struct RotorPlanArgs {
    /// ToR switches.
    #[arg(long)]
    tors: u32,
    /// Uplinks per ToR (= rotor switches).
    #[arg(long)]
    uplinks: u32,
    /// Slot length, e.g. 100us or 1ms.
    #[arg(long, value_parser = parse_duration)]
    slot: u64,
    /// Reconfiguration time within a slot, e.g. 10us.
    #[arg(long, value_parser = parse_duration, default_value = "0us")]
    reconfig: u64,
    /// Link rate, e.g. 400Gbps.
    #[arg(long, value_parser = parse_rate)]
    rate: u64,
    /// Buffer per ToR, e.g. 20MB.
    #[arg(long, value_parser = parse_buffer)]
    buffer: u64,
    /// Largest acceptable worst-case delay, e.g. 850us.
    #[arg(long, value_parser = parse_delay)]
    max_delay: u64,
    /// Print JSON (chosen_degree, diameter, throughput_bound, candidates).
    #[arg(long)]
    json: bool,
    /// Write the schedule as TOML to this file.
    #[arg(long)]
    schedule: Option<PathBuf>,
    /// Which graph the schedule emulates: mars (de Bruijn of the chosen
    /// degree), complete (RotorNet/Sirius), static (a fixed expander).
    #[arg(long, value_enum, default_value = "mars")]
    kind: RotorKind,
}

#[derive(Clone, Copy, ValueEnum)]
enum RotorKind {
    Mars,
    Complete,
    Static,
}

fn parse_delay(s: &str) -> Result<u64, String> {
    lcmp_topology::units::parse_delay(s).map_err(|e| e.to_string())
}

fn parse_duration(s: &str) -> Result<u64, String> {
    lcmp_topology::units::parse_duration(s).map_err(|e| e.to_string())
}

fn parse_rate(s: &str) -> Result<u64, String> {
    lcmp_topology::units::parse_rate(s).map_err(|e| e.to_string())
}

fn parse_buffer(s: &str) -> Result<u64, String> {
    lcmp_topology::units::parse_buffer(s).map_err(|e| e.to_string())
}

#[derive(clap::Args)]
struct RunArgs {
    /// Manage the switches of this lcmp-testbed testbed (its topology,
    /// sockets and state directory under /run/lcmp-testbed/NAME).
    #[arg(long, conflicts_with_all = ["topology", "socket_dir"])]
    testbed: Option<String>,
    /// Topology file the switches run (without --testbed).
    #[arg(long, short)]
    topology: Option<PathBuf>,
    /// Directory of the switches' control sockets (SWITCH.sock).
    #[arg(long, default_value = lcmp_control::paths::SWITCH_RUN_DIR)]
    socket_dir: PathBuf,
    /// Where the metrics endpoint listens: that address only, one in use
    /// stops the agent naming what holds it (port 0: any free port; the
    /// bound address is logged and written to the state file).
    #[arg(long, default_value = "127.0.0.1:9464")]
    metrics_listen: std::net::SocketAddr,
    /// Serve no metrics.
    #[arg(long)]
    no_metrics: bool,
    /// How often every switch's port state is read, milliseconds (link
    /// failures propagate within about this plus one table push).
    #[arg(long, default_value_t = 20)]
    watch_interval_ms: u64,
    /// What C_path describes; must match the switches' --metric.
    #[arg(long, value_enum, default_value = "path")]
    metric: PathMetric,
    /// The experiment's scaling of the topology's network, as the
    /// switches' --scaling: the links the agent sets up are emulated
    /// scaled; the tables it pushes are the file's network's.
    #[arg(long, value_name = "SCALING", default_value = "none")]
    scaling: lcmp_topology::Scaling,
    /// Weight of the delay score in C_path; must match the switches'.
    #[arg(long, default_value_t = 3)]
    w_delay: u32,
    /// Weight of the capacity score in C_path; must match the switches'.
    #[arg(long, default_value_t = 1)]
    w_capacity: u32,
    /// Write the agent's state (pid, metrics address, down links, link
    /// emulation plan) as JSON here. Default with --testbed: agent.json in
    /// the testbed's directory.
    #[arg(long)]
    state_file: Option<PathBuf>,
}

#[derive(clap::Args)]
struct PathsArgs {
    /// Topology file (TOML). Default: the paper's 8-DC topology, built in.
    #[arg(long, short)]
    topology: Option<PathBuf>,
    /// Only this switch (repeatable). Default: every switch.
    #[arg(long, short)]
    switch: Vec<String>,
    /// What C_path describes.
    #[arg(long, value_enum, default_value = "path")]
    metric: PathMetric,
    /// Weight of C_path in the LCMP cost.
    #[arg(long, default_value_t = 3)]
    alpha: u32,
    /// Weight of C_cong in the LCMP cost.
    #[arg(long, default_value_t = 1)]
    beta: u32,
    /// Weight of the delay score in C_path (w_dl).
    #[arg(long, default_value_t = 3)]
    w_delay: u32,
    /// Weight of the capacity score in C_path (w_lc).
    #[arg(long, default_value_t = 1)]
    w_capacity: u32,
    /// Right shift of the C_path sum (S_path), 0..=40: the weighted sum is
    /// below 2^41, so a larger shift makes every C_path 0.
    #[arg(
        long,
        default_value_t = 2,
        value_parser = clap::value_parser!(u32).range(0..=MAX_PATH_SHIFT as i64)
    )]
    path_shift: u32,
    /// Delay where the delay score saturates, microseconds (rounded up to a
    /// power of two), 1..=2^63. Default: the longest candidate path of the
    /// topology.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=MAX_DELAY_CAP_US))]
    max_delay_us: Option<u64>,
    /// Capacity of the top capacity class, Gbit/s. Default: the largest
    /// candidate capacity of the topology.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=MAX_CAPACITY_GBPS))]
    max_capacity_gbps: Option<u64>,
}

/// The largest `--max-delay-us`: the largest power of two in a u64, so
/// that every value rounds up to a cap at or above it (the cost model
/// would keep 2^63 below a larger one).
const MAX_DELAY_CAP_US: u64 = 1 << 63;

/// The largest `--max-capacity-gbps` whose bit/s fit in a u64.
const MAX_CAPACITY_GBPS: u64 = u64::MAX / 1_000_000_000;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Paths(args) => paths(args),
        Command::Run(args) => run(args),
        Command::RotorPlan(args) => rotor_plan(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lcmp-agent: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: RunArgs) -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
    let (topology, socket_dir, state_file, netns) = match &args.testbed {
        Some(tb) => {
            let dir = PathBuf::from(lcmp_control::paths::TESTBED_RUN_DIR).join(tb);
            if !dir.is_dir() {
                return Err(format!("no testbed {tb:?} ({} does not exist)", dir.display()).into());
            }
            (
                lcmp_control::paths::testbed_topology(tb),
                dir.clone(),
                Some(args.state_file.clone().unwrap_or(dir.join("agent.json"))),
                Some(lcmp_control::paths::testbed_netns_prefix(tb)),
            )
        }
        None => (
            args.topology
                .clone()
                .ok_or("give --testbed NAME or --topology FILE")?,
            args.socket_dir.clone(),
            args.state_file.clone(),
            None,
        ),
    };
    lcmp_agent::run::run(lcmp_agent::run::RunOptions {
        topology,
        socket_dir,
        metrics_listen: (!args.no_metrics).then_some(args.metrics_listen),
        watch_interval: std::time::Duration::from_millis(args.watch_interval_ms.max(1)),
        tables: lcmp_agent::failover::TableOptions {
            metric: args.metric,
            path_cost: PathCostParams {
                w_delay: args.w_delay,
                w_capacity: args.w_capacity,
                ..Default::default()
            },
        },
        state_file,
        host_netns_prefix: netns,
        timeout: std::time::Duration::from_secs(2),
        scaling: args.scaling,
    })?;
    Ok(())
}

fn rotor_plan(args: RotorPlanArgs) -> Result<(), Box<dyn std::error::Error>> {
    use lcmp_topology::rotor;
    use lcmp_topology::units::{format_bytes, format_delay};
    if args.schedule.is_some() {
        // Before the plan is printed: a schedule this large cannot be
        // built (nor written as a rotor network file).
        rotor::schedule_size(args.tors)?;
    }
    let inputs = rotor::RotorInputs {
        tors: args.tors,
        uplinks: args.uplinks,
        slot_ns: args.slot,
        reconfig_ns: args.reconfig,
        rate_bps: args.rate,
        buffer_bytes: args.buffer,
        max_delay_ns: args.max_delay,
    };
    let plan = rotor::plan(&inputs)?;
    if args.json {
        let cands: Vec<serde_json::Value> = plan
            .candidates
            .iter()
            .map(|c| {
                serde_json::json!({
                    "degree": c.degree,
                    "diameter": c.diameter,
                    "throughput_bound": c.throughput_bound,
                    "delay_ns": c.delay_ns,
                    "buffer_bytes": c.buffer_bytes,
                    "feasible": c.feasible,
                })
            })
            .collect();
        outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "chosen_degree": plan.chosen.degree,
                "diameter": plan.chosen.diameter,
                "throughput_bound": plan.chosen.throughput_bound,
                "bounds": "reconstructed from the Mars paper's worked numbers",
                "candidates": cands,
            }))?
        );
    } else {
        outln!(
            "{} ToRs x {} uplinks, slot {}, reconfiguration {}, buffer {}, delay budget {} (bounds reconstructed from the Mars paper)",
            args.tors,
            args.uplinks,
            format_delay(args.slot),
            format_delay(args.reconfig),
            format_bytes(args.buffer),
            format_delay(args.max_delay)
        );
        outln!("  DEGREE  DIAMETER  THROUGHPUT  WORST DELAY      BUFFER  FITS");
        for c in &plan.candidates {
            outln!(
                "{} {:>6} {:>9} {:>11.4} {:>12} {:>11}  {}",
                if c.degree == plan.chosen.degree {
                    "*"
                } else {
                    " "
                },
                c.degree,
                c.diameter,
                c.throughput_bound,
                format_delay(c.delay_ns),
                format_bytes(c.buffer_bytes),
                if c.feasible { "yes" } else { "no" }
            );
        }
        outln!("* Mars's choice: d = {}", plan.chosen.degree);
    }
    if let Some(path) = &args.schedule {
        let s = match args.kind {
            RotorKind::Mars => rotor::de_bruijn(args.tors, plan.chosen.degree, args.uplinks)?,
            RotorKind::Complete => rotor::complete(args.tors, args.uplinks)?,
            RotorKind::Static => rotor::static_expander(args.tors, args.uplinks)?,
        };
        let mut net =
            lcmp_topology::rotor_net::RotorNetwork::from_schedule(&s, args.slot, args.reconfig);
        net.rate_bps = args.rate;
        net.buffer_bytes = Some(args.buffer);
        std::fs::write(path, net.to_toml()).map_err(|e| format!("{}: {e}", path.display()))?;
        eprintln!("schedule written to {}", path.display());
    }
    Ok(())
}

fn paths(args: PathsArgs) -> Result<(), Box<dyn std::error::Error>> {
    let (topo, source) = match &args.topology {
        Some(path) => (Topology::load(path)?, path.display().to_string()),
        None => (
            Topology::parse(
                lcmp_agent::DEFAULT_TOPOLOGY,
                lcmp_agent::DEFAULT_TOPOLOGY_NAME,
            )?,
            lcmp_agent::DEFAULT_TOPOLOGY_NAME.to_string(),
        ),
    };
    let metric = args.metric;
    let params = PathCostParams {
        w_delay: args.w_delay,
        w_capacity: args.w_capacity,
        shift: args.path_shift,
        max_delay_us: args.max_delay_us,
        // Cannot overflow: the flag's parser bounds it.
        max_capacity_bps: args.max_capacity_gbps.map(|g| g * 1_000_000_000),
        ..Default::default()
    };
    let lcmp = LcmpParams {
        alpha: args.alpha,
        beta: args.beta,
        ..Default::default()
    };
    let model = path_cost_model(&topo, params, metric)?;
    let mut switches = Vec::new();
    if args.switch.is_empty() {
        switches.extend(topo.switches().iter().map(|s| s.id));
    }
    for name in &args.switch {
        let s = topo
            .switch_by_name(name)
            .ok_or_else(|| format!("{source}: no switch named {name:?}"))?;
        switches.push(s.id);
    }
    out!("{}", report::header(&source, &model, &lcmp));
    for id in switches {
        let tables = switch_tables(&topo, id, &model, metric)?;
        out!("{}", report::switch_report(&tables, &lcmp));
    }
    Ok(())
}

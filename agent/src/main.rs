//! `lcmp-agent`: the LCMP control plane's command line.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use lcmp_agent::report;
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
}

#[derive(Clone, Copy, ValueEnum)]
enum Metric {
    /// Whole path through the port: summed delay, bottleneck capacity.
    Path,
    /// The local egress link only (the LCMP artifact's choice).
    Local,
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
    metric: Metric,
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
    /// Right shift of the C_path sum (S_path).
    #[arg(long, default_value_t = 2)]
    path_shift: u32,
    /// Delay where the delay score saturates, microseconds (rounded up to a
    /// power of two). Default: the longest candidate path of the topology.
    #[arg(long)]
    max_delay_us: Option<u64>,
    /// Capacity of the top capacity class, Gbit/s. Default: the largest
    /// candidate capacity of the topology.
    #[arg(long)]
    max_capacity_gbps: Option<u64>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Paths(args) => paths(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lcmp-agent: {e}");
            ExitCode::FAILURE
        }
    }
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
    let metric = match args.metric {
        Metric::Path => PathMetric::Path,
        Metric::Local => PathMetric::LocalLink,
    };
    let params = PathCostParams {
        w_delay: args.w_delay,
        w_capacity: args.w_capacity,
        shift: args.path_shift,
        max_delay_us: args.max_delay_us,
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
    print!("{}", report::header(&source, &model, &lcmp));
    for id in switches {
        let tables = switch_tables(&topo, id, &model, metric)?;
        print!("{}", report::switch_report(&tables, &lcmp));
    }
    Ok(())
}

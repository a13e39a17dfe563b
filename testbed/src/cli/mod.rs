//! The command line: the subcommands' arguments and one function per
//! subcommand (in the module of its name), which [`run`] dispatches to.

mod fidelity;
mod manage;
mod rotor_timing;
mod up;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use lcmp_testbed::{experiment, rotor, Result};

#[derive(Parser, Debug)]
#[command(
    version,
    about = "Multi-DC DCI testbeds in network namespaces, and FCT experiments on them",
    long_about = "Multi-DC DCI testbeds in network namespaces, and FCT experiments on them.\n\n\
    `up` builds a testbed from a topology file: one network namespace per switch and per host \
    (named lcmptb-<testbed>-<node>), a veth pair per host link, and the switches in event mode \
    in one lcmp-switch process with the links between them in memory (--switch-processes and \
    --links choose a process per switch and veth pairs instead), each link's rate (divided by \
    --scale) and real one-way delay emulated by the switches. It returns once every host reaches every other. The testbed stays up until `down`; \
    its state lives in /run/lcmp-testbed/<name>/ (switch logs and stats files too). \
    `experiment` runs workloads through a testbed and compares path-selection policies by \
    flow completion time. Needs root."
)]
pub struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Build a testbed and start its switches.
    Up(up::UpArgs),
    /// Show a testbed's switches, ports, links and health.
    Status(manage::StatusArgs),
    /// Run a command in a host's (or switch's) namespace, e.g.
    /// `lcmp-testbed exec --testbed tb dc1h1 -- ping 10.8.0.2`.
    Exec(manage::ExecArgs),
    /// Fail or restore a link between two switches, as pulling or plugging
    /// its cable would: both ends see it down (a veth's carrier, or a
    /// memory link's), e.g. `lcmp-testbed link --testbed tb p1-s2 down`.
    Link(manage::LinkArgs),
    /// Remove a testbed: its switches, namespaces, veths and XDP programs.
    /// Works after `kill -9` of the tool or of a switch.
    Down(manage::DownArgs),
    /// List the testbeds that are up.
    List,
    /// Start the testbed's agent if it is not running (after `kill -9`, or
    /// `--no-agent`): it re-adopts the running switches without moving a
    /// flow. `--stop` stops it; the switches keep forwarding.
    Agent(manage::AgentArgs),
    /// Run an FCT experiment: policies compared over runs on a topology
    /// (workloads or a trace, loads, seeds), on an engine of your choice;
    /// writes flows, summary, report, plots and fidelity to a directory.
    Experiment(Box<experiment::ExperimentArgs>),
    /// Rotor networks: delivered throughput of RotorNet/Sirius (complete
    /// graph), a static expander and Mars under all-to-all and permutation
    /// traffic, next to their bounds (summary.json, report.md, a bar
    /// chart).
    RotorExperiment(rotor::experiment::RotorExperimentArgs),
    /// Rotor networks: how precisely slot boundaries hold, measured at a
    /// receiving host (complete schedule, direct routing; one ToR streams
    /// to another above line rate). Builds its own testbed and removes it.
    RotorTiming(rotor_timing::RotorTimingArgs),
    /// Compare a run's FCT slowdowns with a reference simulator's, as
    /// distributions per policy.
    #[command(
        long_about = "Compare an experiment's FCT slowdowns with a reference simulator's \
        (the HPCC ns-3 FCT output of the LCMP artifact, e.g. experiments/reference/lcmp-artifact-8dc/), \
        as distributions, per policy.\n\n\
        Slowdown = max(1, FCT / ideal) on both sides (the reference's ideal is its standalone FCT, \
        ours the run's ideal model). Headline, per policy: W1 (mean absolute difference of the \
        quantiles) and KS (largest CDF gap) of ln(slowdown) between our flows and the \
        reference's; the ratios ours / reference of the median and the p99 slowdown; FCT minus \
        ideal per MB on both sides (model time, per MB of the unscaled flow). With --rerun, a \
        second reference run of a policy, the same figures between the two reference runs are \
        printed as the floor (the simulator against itself); without one, the known floor for \
        LCMP (W1 0.256) is cited as quoted, not measured.\n\n\
        Secondary: each side cut into 20 equal-count buckets of its own flow sizes, bucket k of \
        ours against bucket k of the reference, r = Pearson correlation of ln(slowdown) over the \
        buckets at the median and p99 (the paper's 0.95 and 0.97); the r pooled over policies \
        only measures that the policies differ. Ours pools the completed non-warm-up flows of a \
        policy's runs (seeds) of one (workload, load): --load/--workload pick it when the run has \
        several. Without runs/*/flows.csv, summary.json's size buckets are used (the ratios from \
        its seed means; W1, KS and our per MB undefined; the report says so).\n\n\
        Prints a table, and writes DIR/fidelity.json, DIR/plots/fidelity.svg and .png, and a \
        fidelity section of DIR/report.md (replaced, not added, on a second run). Needs no root.\n\n\
        With --against B instead of --reference: B is another experiment output of ours (the same \
        experiment on another engine, say); per policy in both, each run's slowdowns against its \
        own ideal, the same W1, KS and median/p99 ratios (A over B); writes \
        DIR/fidelity-against.json."
    )]
    Fidelity(fidelity::FidelityArgs),
}

/// Runs the subcommand; its exit code, or the error to print.
pub fn run(cli: Cli) -> Result<ExitCode> {
    match cli.cmd {
        Cmd::Up(a) => up::cmd_up(a),
        Cmd::Status(a) => manage::cmd_status(a),
        Cmd::Exec(a) => manage::cmd_exec(a),
        Cmd::Link(a) => manage::cmd_link(a),
        Cmd::Down(a) => manage::cmd_down(a),
        Cmd::List => manage::cmd_list(),
        Cmd::Agent(a) => manage::cmd_agent(a),
        Cmd::Experiment(a) => cmd_experiment(&a),
        Cmd::RotorExperiment(a) => cmd_rotor_experiment(&a),
        Cmd::Fidelity(a) => fidelity::cmd_fidelity(a),
        Cmd::RotorTiming(a) => rotor_timing::cmd_rotor_timing(a),
    }
}

/// `lcmp-testbed experiment`.
fn cmd_experiment(a: &experiment::ExperimentArgs) -> Result<ExitCode> {
    experiment::run_cli(a, &say)?;
    Ok(ExitCode::SUCCESS)
}

/// `lcmp-testbed rotor-experiment`.
fn cmd_rotor_experiment(a: &rotor::experiment::RotorExperimentArgs) -> Result<ExitCode> {
    rotor::experiment::run_cli(a, &say)?;
    Ok(ExitCode::SUCCESS)
}

/// Progress and notes, on stderr (stdout is the commands' output).
fn say(msg: &str) {
    eprintln!("lcmp-testbed: {msg}");
}

//! `lcmp-testbed fidelity`: a run's FCT slowdowns against a reference
//! simulator's, as distributions (W1 and KS of ln slowdown, median and p99
//! ratios, FCT minus ideal per MB), with the simulator's distance from its
//! own rerun as the floor; or, with `--against`, against another run of
//! ours (e.g. the same replay on the other engine), policy by policy.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{ArgGroup, Args};
use lcmp_results::fidelity::{self, against};
use lcmp_testbed::{Error, Result};
use lcmp_topology::out;

use super::say;

/// `lcmp-testbed fidelity`.
#[derive(Args, Debug, Clone)]
#[command(group(ArgGroup::new("compared_with").required(true).args(["references", "against"])))]
pub struct FidelityArgs {
    /// The experiment's output directory (summary.json, runs/*/flows.csv).
    #[arg(long, value_name = "DIR")]
    run: PathBuf,
    /// A policy of the run and the reference's FCT file for it (format
    /// hpcc-fct: `sip dip sport dport size_bytes start_ns fct_ns
    /// standalone_ns`). Repeatable.
    #[arg(long = "reference", value_name = "POLICY=FILE", value_parser = fidelity::parse_reference)]
    references: Vec<(String, PathBuf)>,
    /// Another experiment output directory (summary.json,
    /// runs/*/flows.csv) to compare the run with instead of a reference:
    /// every policy of both, each run's slowdowns against its own ideal;
    /// prints the table and writes fidelity-against.json into the
    /// run's DIR (fidelity.json stays the reference mode's).
    #[arg(long, value_name = "B")]
    against: Option<PathBuf>,
    /// A second reference run of POLICY (the simulator rerun, same
    /// format): its W1, KS and ratios against the first are printed as
    /// the floor, the distance the simulator has from itself. Repeatable,
    /// once per policy.
    #[arg(long = "rerun", value_name = "POLICY=FILE", conflicts_with = "against", value_parser = fidelity::parse_reference)]
    reruns: Vec<(String, PathBuf)>,
    /// The load to compare, where the run has several (with --against, in
    /// both runs).
    #[arg(long)]
    load: Option<f64>,
    /// The workload to compare, where the run has several (with --against,
    /// in both runs).
    #[arg(long)]
    workload: Option<String>,
    /// The trace the run replayed, where summary.json's path to it
    /// (experiment.trace.file, relative to the directory the experiment
    /// ran in) does not resolve from the current directory.
    #[arg(long, value_name = "FILE", conflicts_with = "against")]
    trace: Option<PathBuf>,
}

/// `lcmp-testbed fidelity`: prints the table and writes the files.
pub fn cmd_fidelity(a: FidelityArgs) -> Result<ExitCode> {
    let sel = fidelity::Selector {
        workload: a.workload,
        load: a.load,
        trace: a.trace,
    };
    if let Some(b) = &a.against {
        let r = against::run(&a.run, b, &sel).map_err(Error::new)?;
        out!("{}", against::render_text(&r));
        say(&format!("wrote {}", a.run.join(against::FILE).display()));
        return Ok(ExitCode::SUCCESS);
    }
    let r =
        fidelity::run_fidelity_with(&a.run, &a.references, &a.reruns, &sel).map_err(Error::new)?;
    out!("{}", fidelity::render_text(&r));
    say(&format!(
        "wrote {0}/fidelity.json, {0}/plots/fidelity.svg and .png, and the fidelity section of {0}/report.md",
        a.run.display()
    ));
    Ok(ExitCode::SUCCESS)
}

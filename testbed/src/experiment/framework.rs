//! What every experiment does around its runs, in one place: root, the
//! output directory and `experiment.toml`, SIGINT/SIGTERM, a testbed that
//! is up for the experiment and torn down on every exit path, a progress
//! bar over the runs' seconds and a result line per run. An experiment
//! says what differs ([`Experiment`]); [`run`] does the rest.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use lcmp_netlab::Lab;
use lcmp_topology::Topology;
use serde::Serialize;

use super::run::{check_interrupted, INTERRUPTED};
use crate::bed;
use crate::state::State;
use crate::{Error, Result};

/// An experiment's testbed while it is up.
pub struct Testbed {
    /// Its state (runs that restart switches update their pids).
    pub state: State,
    /// Its effective topology (generated hosts, scaled rates).
    pub topo: Topology,
    /// Its namespaces and links.
    pub lab: Lab,
}

/// What one experiment does that another does not; [`run`] calls these in
/// order: `up`, `plan`, `run` for each run, `finish`.
pub trait Experiment {
    /// What `experiment.toml` records.
    type Config: Serialize;
    /// One run, as planned.
    type Run;
    /// What one run yields, for [`Experiment::finish`].
    type Outcome;
    /// What the experiment returns.
    type Summary;

    /// The experiment's configuration.
    fn config(&self) -> &Self::Config;

    /// Brings the experiment's testbed up ([`run`] tears it down).
    fn up(&mut self, say: &dyn Fn(&str)) -> Result<State>;

    /// Everything on the testbed before the first run (calibration,
    /// servers) and the runs, in order.
    fn plan(&mut self, bed: &mut Testbed, out: &Path, say: &dyn Fn(&str))
        -> Result<Vec<Self::Run>>;

    /// The run's name in the progress messages.
    fn run_id(run: &Self::Run) -> &str;

    /// How long the run sends traffic, seconds: its share of the progress
    /// bar.
    fn seconds(&self, run: &Self::Run) -> f64;

    /// Runs `run`, ticking `progress`; returns what it yields and its
    /// result line.
    fn run(
        &mut self,
        bed: &mut Testbed,
        run: &Self::Run,
        progress: &RunProgress<'_>,
        out: &Path,
        say: &dyn Fn(&str),
    ) -> Result<(Self::Outcome, String)>;

    /// After the last run (the runs began at `runs_started`), on the
    /// testbed still up: writes `summary.json`, the report and the plots
    /// under `out`.
    fn finish(
        self,
        outcomes: Vec<Self::Outcome>,
        runs_started: Instant,
        out: &Path,
        say: &dyn Fn(&str),
    ) -> Result<Self::Summary>;
}

/// Runs the experiment that `prepare` checks and returns (before anything
/// is made), writing everything under `out`.
pub fn run<E: Experiment>(
    out: &Path,
    say: &dyn Fn(&str),
    prepare: impl FnOnce() -> Result<E>,
) -> Result<E::Summary> {
    bed::require_root()?;
    let mut exp = prepare()?;
    std::fs::create_dir_all(out.join("runs"))
        .map_err(|e| Error::new(format!("{}: {e}", out.display())))?;
    std::fs::write(
        out.join("experiment.toml"),
        toml::to_string(exp.config()).expect("config serializes"),
    )?;
    catch_signals();
    let state = exp.up(say)?;
    let _guard = TestbedGuard(state.name.clone());
    // `exp` (servers, the testbed's handles) is dropped in there, before
    // the guard tears the testbed down.
    run_on_testbed(exp, state, out, say)
}

fn run_on_testbed<E: Experiment>(
    mut exp: E,
    state: State,
    out: &Path,
    say: &dyn Fn(&str),
) -> Result<E::Summary> {
    let (topo, lab) = bed::attach(&state)?;
    let mut bed = Testbed { state, topo, lab };
    check_interrupted()?;
    let runs = exp.plan(&mut bed, out, say)?;
    let total_s: f64 = runs.iter().map(|r| exp.seconds(r)).sum();
    let bar = progress_bar((total_s * 10.0) as u64);
    let mut outcomes = Vec::new();
    let started = Instant::now();
    let mut base_s = 0.0;
    for (k, r) in runs.iter().enumerate() {
        check_interrupted()?;
        let progress = RunProgress {
            bar: &bar,
            base_s,
            run_s: exp.seconds(r),
            name: format!("run {}/{} {}", k + 1, runs.len(), E::run_id(r)),
        };
        let (outcome, line) = exp.run(&mut bed, r, &progress, out, say)?;
        base_s += progress.run_s;
        bar.println(line.clone());
        if bar.is_hidden() {
            say(&line);
        }
        outcomes.push(outcome);
    }
    bar.finish_and_clear();
    exp.finish(outcomes, started, out, say)
}

/// One run's share of the progress bar.
pub struct RunProgress<'a> {
    bar: &'a ProgressBar,
    /// Seconds of the runs before this one.
    base_s: f64,
    /// This run's seconds.
    run_s: f64,
    /// `run K/N ID`.
    name: String,
}

impl RunProgress<'_> {
    /// `elapsed_s` seconds into the run.
    pub fn tick(&self, elapsed_s: f64) {
        self.set_position(elapsed_s);
        self.bar.set_message(self.name.clone());
    }

    /// `elapsed_s` seconds into the run, doing `detail`.
    pub fn tick_with(&self, elapsed_s: f64, detail: &str) {
        self.set_position(elapsed_s);
        self.bar.set_message(format!("{}: {detail}", self.name));
    }

    fn set_position(&self, elapsed_s: f64) {
        let s = self.base_s + elapsed_s.min(self.run_s).max(0.0);
        self.bar.set_position((s * 10.0) as u64);
    }

    /// Runs `f` with the bar hidden, so that what `f` prints is not
    /// drawn over.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        self.bar.suspend(f)
    }
}

/// Tears the experiment's testbed down on every exit path.
pub struct TestbedGuard(pub String);

impl Drop for TestbedGuard {
    fn drop(&mut self) {
        if let Err(e) = bed::down(&self.0) {
            eprintln!("lcmp-testbed: tearing down testbed {}: {e}", self.0);
        }
    }
}

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// SIGINT/SIGTERM stop the experiment between steps, so that the testbed
/// is torn down rather than left behind.
pub fn catch_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is
        // async-signal-safe.
        unsafe {
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
}

/// The progress bar of an experiment's runs: `len` steps (tenths of a
/// second of traffic), elapsed time, the run's message and the ETA.
pub fn progress_bar(len: u64) -> ProgressBar {
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {msg} (ETA {eta})")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar
}

//! The flow experiment ([`super::flows`]) on the namespace engine: one
//! testbed for every run, its switches restarted with each design's
//! network and K (`lcmp-switch rotor --trim-packets K`, which also
//! emulates the host downlinks at c), and on every host one `lcmp-traffic
//! client --transport ndp --serve` that sends the host's flows (the draw
//! of [`super::flows::host_flows`]: seed, id range, destinations in
//! order) and answers the flows sent to it, both on its port 7247.
//!
//! A run starts every host's process, reads the switches' stats files at
//! the window's start and end (counter changes) and at every rewrite in
//! between (ToR occupancy), waits for every client's done line (its flows
//! finished or the drain over), stops the processes (SIGTERM: the normal
//! end of a serving client) and reads each one's flows file and receiver
//! counters, whose `window_bytes` are the payload it took in once in
//! [warm-up, warm-up + window) of its own clock, the window its flows'
//! arrivals are measured in.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use lcmp_netlab::traffic::realtime_ns;
use lcmp_netlab::Bg;
use lcmp_results::rotor::experiment::{derangement, Pattern, RotorExperimentConfig};
use lcmp_results::rotor::flows::{
    flow_result_line, write_flow_results, FlowOutcome, FlowRunResult, FlowSummary,
};
use lcmp_topology::rotor_net::RotorNetwork;
use lcmp_traffic::record::{FlowRecord, FlowStatus};

use super::experiment::{links_of, wait_until, write_run_counters, DesignNet};
use super::flows::{
    flow_rate_bps, host_flows, plan, run_input, run_network, Counters, FlowMeasured, FlowRun,
    HostFlows,
};
use super::{host_name, RotorUpOptions};
use crate::experiment::framework;
use crate::experiment::run::done_line_of;
use crate::state::State;
use crate::{bed, Error, Result};

/// The switches' option that sets K.
const TRIM_FLAG: &str = "--trim-packets";

/// How long past its drain a client may take to print its done line
/// before the run fails: start-up, and a loaded machine's lag.
const DONE_GRACE: Duration = Duration::from_secs(20);

/// Runs the flow experiment on namespaces (see the module docs).
pub fn run(
    cfg: &RotorExperimentConfig,
    designs: &[DesignNet],
    patterns: &[Pattern],
    out: &Path,
    say: &dyn Fn(&str),
) -> Result<FlowSummary> {
    if cfg
        .switch_args
        .iter()
        .any(|a| a == TRIM_FLAG || a.starts_with("--trim-packets="))
    {
        return Err(Error::new(
            "switch_args sets --trim-packets: the flow experiment sets it from trim_packets",
        ));
    }
    framework::run(out, say, || {
        Ok(FlowExperiment {
            cfg,
            designs,
            runs: plan(cfg, designs, patterns),
            perm: derangement(cfg.tors, cfg.seed),
            traffic_bin: bed::find_program("lcmp-traffic", "LCMP_TRAFFIC_BIN")?,
            running: (0, 0),
        })
    })
}

struct FlowExperiment<'a> {
    cfg: &'a RotorExperimentConfig,
    designs: &'a [DesignNet],
    runs: Vec<FlowRun>,
    perm: Vec<u32>,
    traffic_bin: PathBuf,
    /// The (design, K) the switches run.
    running: (usize, u32),
}

/// The switches' arguments with K.
fn switch_args(cfg: &RotorExperimentConfig, k: u32) -> Vec<String> {
    let mut args = cfg.switch_args.clone();
    args.extend([TRIM_FLAG.into(), k.to_string()]);
    args
}

impl framework::Experiment for FlowExperiment<'_> {
    type Config = RotorExperimentConfig;
    type Run = (String, FlowRun);
    type Outcome = FlowRunResult;
    type Summary = FlowSummary;

    fn config(&self) -> &RotorExperimentConfig {
        self.cfg
    }

    /// Up with the first run's network and K.
    fn up(&mut self, say: &dyn Fn(&str)) -> Result<State> {
        let first = self.runs[0];
        let dn = &self.designs[first.design];
        self.running = (first.design, first.k);
        super::up(
            &RotorUpOptions {
                name: self.cfg.name.clone(),
                network: run_network(dn, first.k),
                source: format!("rotor-experiment ({}, ndp)", dn.design.name()),
                switch_args: switch_args(self.cfg, first.k),
                links: links_of(self.cfg)?,
            },
            say,
        )
    }

    fn plan(
        &mut self,
        _: &mut framework::Testbed,
        _: &Path,
        _: &dyn Fn(&str),
    ) -> Result<Vec<(String, FlowRun)>> {
        Ok(self.runs.iter().map(|r| (r.id(self.designs), *r)).collect())
    }

    fn run_id(run: &(String, FlowRun)) -> &str {
        &run.0
    }

    fn seconds(&self, _: &(String, FlowRun)) -> f64 {
        self.cfg.warmup_s + self.cfg.window_s + self.cfg.drain_seconds()
    }

    fn run(
        &mut self,
        bed: &mut framework::Testbed,
        (id, run): &(String, FlowRun),
        progress: &framework::RunProgress<'_>,
        out: &Path,
        say: &dyn Fn(&str),
    ) -> Result<(FlowRunResult, String)> {
        let dn = &self.designs[run.design];
        if (run.design, run.k) != self.running {
            bed.state.switches.extra_args = switch_args(self.cfg, run.k);
            let net = run_network(dn, run.k);
            progress.suspend(|| super::restart(&mut bed.state, &bed.lab, &net, say))?;
            self.running = (run.design, run.k);
        }
        let dir = out.join("runs").join(id);
        std::fs::create_dir_all(&dir).map_err(|e| Error::new(format!("{}: {e}", dir.display())))?;
        let m = measure(self, bed, run, &dir, progress)?;
        let (input, per_switch) = run_input(self.cfg, dn, run, m);
        let r = FlowRunResult::from_input(&input).map_err(Error::new)?;
        write_run_counters(out, id, &per_switch)?;
        let line = flow_result_line(&r);
        Ok((r, line))
    }

    fn finish(
        self,
        results: Vec<FlowRunResult>,
        _: Instant,
        out: &Path,
        _: &dyn Fn(&str),
    ) -> Result<FlowSummary> {
        write_flow_results(
            self.cfg,
            super::experiment::mars_json(self.designs),
            results,
            out,
        )
        .map_err(Error::new)
    }
}

/// A host's process and its files.
struct HostProc {
    name: String,
    bg: Bg,
    flows: PathBuf,
    stats: PathBuf,
}

/// `lcmp-traffic client --transport ndp --serve` for host `hf`.
fn client_argv(
    x: &FlowExperiment<'_>,
    run: &FlowRun,
    hf: &HostFlows,
    flows: &Path,
    stats: &Path,
) -> Vec<String> {
    let cfg = x.cfg;
    let mut argv: Vec<String> = vec![
        x.traffic_bin.display().to_string(),
        "client".into(),
        "--transport".into(),
        "ndp".into(),
        "--serve".into(),
        "--name".into(),
        host_name(hf.tor, hf.host),
        "--workload".into(),
        cfg.workload.clone(),
        "--size-scale".into(),
        cfg.size_scale.to_string(),
        "--rate-bps".into(),
        format!("{:.0}", flow_rate_bps(cfg, run.load)),
        "--duration".into(),
        (cfg.warmup_s + cfg.window_s).to_string(),
        "--warmup".into(),
        cfg.warmup_s.to_string(),
        "--drain".into(),
        cfg.drain_seconds().to_string(),
        "--seed".into(),
        hf.seed.to_string(),
        "--id-base".into(),
        hf.id_base.to_string(),
        "--line-rate".into(),
        cfg.host_rate_bps().to_string(),
        "--rto-ms".into(),
        (cfg.min_rto_us as f64 / 1000.0).to_string(),
        "--initial-window".into(),
        cfg.initial_window.to_string(),
        "--progress-ms".into(),
        "500".into(),
        "--out".into(),
        flows.display().to_string(),
        "--stats".into(),
        stats.display().to_string(),
    ];
    for &(t, h) in &hf.dsts {
        argv.extend([
            "--dst".into(),
            format!(
                "{}={}:{}",
                host_name(t, h),
                RotorNetwork::host_ip(t, h),
                lcmp_wire::ndp::UDP_PORT
            ),
        ]);
    }
    argv
}

/// Every switch's counters, read fresh.
fn counters_now(st: &State) -> Result<Counters> {
    Ok(super::fresh_status(st)?
        .iter()
        .map(|(name, s)| (name.clone(), super::counters(s)))
        .collect())
}

/// Runs `run`'s hosts on the testbed and gathers what they measured.
fn measure(
    x: &FlowExperiment<'_>,
    bed: &framework::Testbed,
    run: &FlowRun,
    dir: &Path,
    progress: &framework::RunProgress<'_>,
) -> Result<FlowMeasured> {
    let cfg = x.cfg;
    let tick = |elapsed: f64| progress.tick(elapsed);
    let start = realtime_ns();
    let mut procs = Vec::new();
    for hf in host_flows(cfg, run.pattern, &x.perm) {
        let name = host_name(hf.tor, hf.host);
        let flows = dir.join(format!("{name}.csv"));
        let stats = dir.join(format!("{name}.stats.json"));
        let argv = client_argv(x, run, &hf, &flows, &stats);
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let bg = bed.lab.host(&name).netns.spawn(&argv)?;
        procs.push(HostProc {
            name,
            bg,
            flows,
            stats,
        });
    }
    let s = |secs: f64| start + (secs * 1e9) as u64;
    wait_until(start, s(cfg.warmup_s), &tick);
    let before = counters_now(&bed.state)?;
    // The ToRs' occupancy at every stats-file rewrite in the window.
    let window_end = s(cfg.warmup_s + cfg.window_s);
    let mut occupancy = Vec::new();
    while realtime_ns() < window_end {
        crate::experiment::run::check_interrupted()?;
        for st in super::fresh_status(&bed.state)?.values() {
            if st.role == "tor" {
                occupancy.push(st.queued_bytes);
            }
        }
        tick(realtime_ns().saturating_sub(start) as f64 / 1e9);
    }
    let after = counters_now(&bed.state)?;
    let deadline = Instant::now() + Duration::from_secs_f64(cfg.drain_seconds()) + DONE_GRACE;
    for p in &mut procs {
        loop {
            crate::experiment::run::check_interrupted()?;
            if done_line_of(&p.bg.log()).is_some() {
                break;
            }
            if let Some(status) = p.bg.exited() {
                return Err(Error::new(format!(
                    "{}: lcmp-traffic ended ({status}) before its done line: {}",
                    p.name,
                    bed::tail(p.bg.log_path(), 5)
                )));
            }
            if Instant::now() >= deadline {
                return Err(Error::new(format!(
                    "{}: lcmp-traffic printed no done line {} s after its drain: {}",
                    p.name,
                    DONE_GRACE.as_secs(),
                    bed::tail(p.bg.log_path(), 5)
                )));
            }
            tick(realtime_ns().saturating_sub(start) as f64 / 1e9);
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    // Every sender is done: the receivers may stop.
    for p in &procs {
        p.bg.signal(libc::SIGTERM);
    }
    let mut flows = Vec::new();
    let mut delivered_bytes = 0;
    for mut p in procs {
        match p.bg.wait_timeout(Duration::from_secs(10)) {
            Some(s) if s.success() => {}
            other => {
                return Err(Error::new(format!(
                    "{}: lcmp-traffic did not end cleanly on SIGTERM ({}): {}",
                    p.name,
                    other.map_or("still running".into(), |s| s.to_string()),
                    bed::tail(p.bg.log_path(), 5)
                )))
            }
        }
        std::fs::copy(p.bg.log_path(), dir.join(format!("{}.log", p.name)))?;
        flows.extend(read_flows(&p.flows)?);
        delivered_bytes += window_bytes(&p.stats)?;
    }
    Ok(FlowMeasured {
        flows,
        delivered_bytes,
        occupancy,
        before,
        after,
    })
}

/// A client's flows: size, arrival and FCT (ok flows only have one).
fn read_flows(path: &Path) -> Result<Vec<FlowOutcome>> {
    let mut rd =
        csv::Reader::from_path(path).map_err(|e| Error::new(format!("{}: {e}", path.display())))?;
    let mut out = Vec::new();
    for row in rd.deserialize::<FlowRecord>() {
        let r = row.map_err(|e| Error::new(format!("{}: {e}", path.display())))?;
        out.push(FlowOutcome {
            size: r.size_bytes,
            arrival_ns: r.start_ns,
            fct_ns: r.fct_ns.filter(|_| r.status == FlowStatus::Ok),
        });
    }
    Ok(out)
}

/// A serving client's payload bytes received once in the window.
fn window_bytes(path: &Path) -> Result<u64> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::new(format!("{}: {e}", path.display())))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| Error::new(format!("{}: {e}", path.display())))?;
    v["window_bytes"]
        .as_u64()
        .ok_or_else(|| Error::new(format!("{}: no window_bytes", path.display())))
}

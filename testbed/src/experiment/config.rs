//! What an experiment is: from the command line or a TOML file, checked
//! before anything is started.

use std::path::{Path, PathBuf};

use clap::Args;
use lcmp_engine::network::CaptureAt;
use lcmp_results::trace::TraceFormat;
use lcmp_topology::Topology;
use lcmp_traffic::rocev2::cc::CongestionControl;
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// The built-in default topology: the LCMP paper's 8-DC testbed.
pub const BUILTIN_TOPOLOGY: &str = include_str!("../../../topologies/8dc.toml");

/// Name under which the built-in topology is reported.
pub const BUILTIN_NAME: &str = "built-in 8dc.toml";

/// Topology options shared by `up` and `experiment`.
#[derive(Args, Debug, Clone)]
pub struct TopologyArgs {
    /// Topology file (TOML). Default: the built-in 8-DC topology of the
    /// LCMP paper (topologies/8dc.toml).
    #[arg(long)]
    pub topology: Option<PathBuf>,
    /// Hosts generated on every DC switch that has none in the file
    /// (named <switch>h1, <switch>h2, ...).
    #[arg(long, default_value_t = 1)]
    pub hosts_per_dc: usize,
    /// Divide every link's rate (and buffer) by S; delays stay real.
    /// Default: 1, and 1000 for an experiment under --transport rocev2 on
    /// the namespace engine (docs/experiments.md, RDMA-faithful experiments).
    #[arg(long, value_name = "S")]
    pub scale: Option<f64>,
    /// Divide buffers by B instead of --scale: deeper buffers stand in for
    /// a lossless (PFC) fabric, which holds back what a scaled buffer
    /// would drop.
    #[arg(long, value_name = "B")]
    pub buffer_scale: Option<f64>,
    /// Dilate time by T: every delay multiplied by T and every rate divided
    /// by T (on top of --scale), so bandwidth-delay products and slowdowns
    /// stay while flows per second drop T-fold; the switches' sampling
    /// interval and the rocev2 transport's timers stretch alike. FCTs are
    /// wall-clock (T times the modeled network's). Default: 1, and 10 for
    /// an experiment under --transport rocev2 on the namespace engine
    /// (docs/experiments.md, time dilation).
    #[arg(long, value_name = "T")]
    pub time_scale: Option<f64>,
    /// LCMP weight of the path cost C_path.
    #[arg(long, default_value_t = 3)]
    pub alpha: u32,
    /// LCMP weight of the congestion cost C_cong.
    #[arg(long, default_value_t = 1)]
    pub beta: u32,
    /// Hosts' TCP congestion control (cubic, bbr, reno; dctcp where the
    /// kernel has it). Default: the kernel's. For `experiment --transport
    /// rocev2` the RoCEv2 congestion control: dcqcn (default), hpcc,
    /// timely or dctcp, at the simulator's parameters.
    #[arg(long)]
    pub cc: Option<String>,
    /// Hosts' initial congestion and receive window in segments (route
    /// initcwnd/initrwnd), so that short flows start near line rate as
    /// RDMA flows do. Default: the kernel's (10).
    #[arg(long)]
    pub initcwnd: Option<u32>,
}

/// The rate scale of a rocev2 experiment that gives none: with sizes scaled
/// alike, the LCMP artifact's 8-DC trace is about 18,000 packets, which the
/// testbed replays on 2 cores (at 2000 it was no less CPU-bound: flows per
/// second do not scale).
pub const ROCEV2_DEFAULT_SCALE: f64 = 1000.0;

/// The time dilation of a rocev2 experiment that gives none: the 8-DC
/// trace starts 35,000 flows per second, more than 2 cores carry (about
/// 100 us of CPU per flow in the transport alone); stretched ten-fold,
/// 3,500 per second leave the machine idle time.
pub const ROCEV2_DEFAULT_TIME_SCALE: f64 = 10.0;

/// What the switches' C_path describes (`lcmp-switch --metric`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    /// A candidate's whole path.
    Path,
    /// Its egress link.
    Local,
}

impl Metric {
    /// The name as `lcmp-switch --metric` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Path => "path",
            Metric::Local => "local",
        }
    }
}

/// Where an experiment runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// For TCP, and RoCEv2 through real sockets: a network namespace per
    /// switch and host, the switches as lcmp-switch processes on AF_XDP,
    /// the traffic as lcmp-traffic processes, real kernels on the wall
    /// clock (needs root)
    #[default]
    Namespaces,
    /// For RoCEv2 only: the whole network in this one process on a virtual
    /// clock, the same LCMP switches and the RoCEv2/DCQCN hosts joined by
    /// memory links, time jumping from event to event; deterministic (two
    /// runs give identical flows.csv), delays and rates exact, no root
    Virtual,
    /// For RoCEv2 only: the same network in this one process on the wall
    /// clock (dilated by time_scale, as the namespaces engine), no kernel
    /// on any hop; lcmp-ctl reaches its switches while it runs (as root);
    /// results are what the machine kept up with
    Wall,
}

impl Engine {
    /// The name `--engine` and `engine =` take.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Namespaces => "namespaces",
            Engine::Virtual => "virtual",
            Engine::Wall => "wall",
        }
    }
}

/// The rate scale and time dilation of an experiment that gives none, the
/// one place they are decided: under rocev2 on the namespace engine
/// [`ROCEV2_DEFAULT_SCALE`] and [`ROCEV2_DEFAULT_TIME_SCALE`], which exist
/// only so that real processes on 2 cores keep up (the wall engine, on the
/// wall clock too, the same); the virtual engine pays in CPU per event, not
/// in real time, so it runs the network as written (1 and 1); TCP is never
/// scaled by default.
pub fn default_factors(transport: Transport, engine: Engine) -> (f64, f64) {
    match (engine, transport) {
        (Engine::Namespaces | Engine::Wall, Transport::Rocev2) => {
            (ROCEV2_DEFAULT_SCALE, ROCEV2_DEFAULT_TIME_SCALE)
        }
        (Engine::Virtual, _) | (_, Transport::Tcp) => (1.0, 1.0),
    }
}

impl TopologyArgs {
    /// `--scale`, 1 if not given.
    pub fn scale(&self) -> f64 {
        self.scale.unwrap_or(1.0)
    }

    /// The testbed's scaling from `--scale`, `--buffer-scale` and
    /// `--time-scale` (flow sizes are the experiment's).
    pub fn scaling(&self) -> lcmp_topology::Scaling {
        lcmp_topology::Scaling {
            rate: self.scale(),
            buffer: self.buffer_scale.unwrap_or(self.scale()),
            size: 1.0,
            time: self.time_scale.unwrap_or(1.0),
        }
    }

    /// Rejects values that cannot work, before anything is built.
    pub fn validate(&self) -> Result<()> {
        check_scale(self.scale())?;
        if let Some(t) = self.time_scale {
            check_time_scale(t)?;
        }
        if let Some(cc) = &self.cc {
            crate::bed::check_congestion_control(cc)?;
        }
        if self.initcwnd == Some(0) {
            return Err(Error::new("--initcwnd must be at least 1"));
        }
        Ok(())
    }
}

/// `--time-scale` must be a positive number, at most 1e6 (beyond, the
/// transport's dilated intervals stop being representable).
pub fn check_time_scale(t: f64) -> Result<()> {
    if t.is_finite() && t > 0.0 && t <= 1e6 {
        Ok(())
    } else {
        Err(Error::new(format!(
            "--time-scale must be a number in (0, 1e6] (delays are multiplied by it), not {t}"
        )))
    }
}

/// `--scale` must be a positive finite number.
pub fn check_scale(scale: f64) -> Result<()> {
    if scale.is_finite() && scale > 0.0 {
        Ok(())
    } else {
        Err(Error::new(format!(
            "--scale must be a positive number (rates are divided by it), not {scale}"
        )))
    }
}

/// Loads the user's topology file, or the built-in one.
pub fn load_topology(file: Option<&Path>) -> Result<Topology> {
    match file {
        Some(f) => Topology::load(f).map_err(|e| Error::new(e.to_string())),
        None => {
            Topology::parse(BUILTIN_TOPOLOGY, BUILTIN_NAME).map_err(|e| Error::new(e.to_string()))
        }
    }
}

/// How offered load is defined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum LoadDefinition {
    /// Offered bytes/s over the source DC switch's inter-DC capacity (sum
    /// of the rates of its links to other DCs' switches): load 1.0 fills
    /// every path.
    InterDc,
    /// The LCMP artifact's: each sender host offers load x its NIC rate,
    /// which overloads the source DC's uplinks when senders' NICs add up to
    /// more than them.
    HostNic,
}

/// How the flows are carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// A TCP connection per flow (the kernel's congestion control).
    #[default]
    Tcp,
    /// A RoCEv2 queue pair per flow with DCQCN, as the LCMP paper's
    /// simulator runs RDMA (`lcmp-traffic --transport rocev2`).
    Rocev2,
}

impl Transport {
    /// The name `lcmp-traffic --transport` takes.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Tcp => "tcp",
            Transport::Rocev2 => "rocev2",
        }
    }
}

/// Bytes kept of each captured frame by default (`capture_snaplen`): a
/// whole data frame, as `lcmp-ctl capture` keeps.
pub const DEFAULT_CAPTURE_SNAPLEN: u32 = 2048;
/// Bytes (as kept) a capture file holds by default (`capture_max_bytes`),
/// `lcmp-ctl capture`'s default: 64 MB.
pub const DEFAULT_CAPTURE_MAX_BYTES: u64 = 64_000_000;

/// A link taken down during every run (failure experiment).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Failure {
    /// The link, as `<switch>-<switch>` (either order).
    pub link: String,
    /// When, seconds after the run's arrivals start (a number, or a
    /// string with a unit: "15s").
    #[serde(deserialize_with = "lcmp_topology::secs::deserialize")]
    pub at_s: f64,
}

/// A whole experiment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExperimentConfig {
    /// Testbed name used for the experiment.
    #[serde(default = "default_name")]
    pub name: String,
    /// Topology file (relative to the config file), or the built-in 8-DC.
    #[serde(default)]
    pub topology: Option<PathBuf>,
    /// Hosts generated per DC switch.
    #[serde(default = "one")]
    pub hosts_per_dc: usize,
    /// Rate divisor.
    #[serde(default = "one_f")]
    pub scale: f64,
    /// Buffer divisor (default: `scale`).
    #[serde(default)]
    pub buffer_scale: Option<f64>,
    /// Time dilation (default: 10 under rocev2 on the namespace engine,
    /// else 1; see [`default_factors`]).
    #[serde(default)]
    pub time_scale: Option<f64>,
    /// LCMP alpha.
    #[serde(default = "three")]
    pub alpha: u32,
    /// LCMP beta.
    #[serde(default = "one_u32")]
    pub beta: u32,
    /// Source DC switch: its hosts send. With a trace, `from` and `to`
    /// may both be left out: its flows then go between any two DCs
    /// ([`ExperimentConfig::all_pairs`]).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub from: String,
    /// Destination DC switch: its hosts receive.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub to: String,
    /// Workload names (websearch, alistorage, fbhadoop, googlerpc, datamining) or CDF
    /// files; not with `trace`.
    #[serde(default)]
    pub workloads: Vec<String>,
    /// Offered loads (fractions, > 0); not with `trace`.
    #[serde(default)]
    pub loads: Vec<f64>,
    /// Policies compared: names, or specs with LCMP's weights
    /// (`lcmp:w_ql=1:w_tl=2:w_dp=1`; [`lcmp_policy::spec`]), each run's
    /// label in its canonical spelling.
    pub policies: Vec<String>,
    /// Repetitions with different seeds (seeds 1..=seeds).
    #[serde(default = "one_u32")]
    pub seeds: u32,
    /// Arrivals last this long, seconds (a trace: until its last start).
    /// Also `duration`; a number of seconds or a string with a unit
    /// ("30s"), as are `warmup_s` and `drain_s`.
    #[serde(
        default,
        alias = "duration",
        deserialize_with = "lcmp_topology::secs::deserialize"
    )]
    pub duration_s: f64,
    /// Flows starting in the first `warmup_s` (or `warmup`) are excluded.
    #[serde(
        default,
        alias = "warmup",
        deserialize_with = "lcmp_topology::secs::deserialize_opt"
    )]
    pub warmup_s: Option<f64>,
    /// After the arrivals stop, flows get at most this long to finish
    /// (also `drain`).
    #[serde(
        default = "default_drain",
        alias = "drain",
        deserialize_with = "lcmp_topology::secs::deserialize"
    )]
    pub drain_s: f64,
    /// How load is defined.
    #[serde(default = "default_load_def")]
    pub load_definition: LoadDefinition,
    /// Hosts' congestion control: under tcp the kernel's (cubic, bbr, ...;
    /// default the kernel's), under rocev2 the RoCEv2 one
    /// ([`ExperimentConfig::rocev2_cc`]: dcqcn, hpcc, timely, dctcp;
    /// default dcqcn).
    #[serde(default)]
    pub cc: Option<String>,
    /// Hosts' initial windows (segments).
    #[serde(default)]
    pub initcwnd: Option<u32>,
    /// Extra arguments for every lcmp-switch.
    #[serde(default)]
    pub switch_args: Vec<String>,
    /// How the switches run: `one` (one process, an event loop per core;
    /// the default) or `per-switch` (a process each).
    #[serde(default)]
    pub switch_processes: Option<String>,
    /// How links between switches are made: `memory` (the default with
    /// one process) or `veth` (the default, and the only kind, with a
    /// process per switch).
    #[serde(default)]
    pub links: Option<String>,
    /// In-flight flow bound per sender.
    #[serde(default)]
    pub max_concurrent: Option<u32>,
    /// A link to fail mid-run.
    #[serde(default)]
    pub failure: Option<Failure>,
    /// How flows are carried.
    #[serde(default)]
    pub transport: Transport,
    /// Where the experiment runs: `namespaces` (the default) or `virtual`.
    #[serde(default)]
    pub engine: Engine,
    /// Priority flow control (one-process engines): every switch whose
    /// buffer covers its ports' headroom pauses the hosts and switches
    /// upstream of a port that holds too much of it, as the paper's
    /// simulator does; the hosts stop their data while paused.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pfc: bool,
    /// Ports whose frames every run records (one-process engines), as
    /// `SWITCH:PORT` (`dc1:p2`, or `dc1:2`: the port as `lcmp-ctl
    /// capture` names it), or `SWITCH` for a switch with one port; into
    /// `runs/<run>/capture-<switch>.pcapng` with the network's clock's
    /// times (virtual ns on the virtual engine). One port per switch.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capture: Vec<String>,
    /// Bytes kept of each captured frame (default
    /// [`DEFAULT_CAPTURE_SNAPLEN`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture_snaplen: Option<u32>,
    /// Bytes (as kept) each capture file holds at most, a size with its
    /// unit (`"64MB"`, the default; `"500kB"`): frames past it are not
    /// recorded, counted and said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture_max_bytes: Option<String>,
    /// What the switches' C_path describes: `path` (a candidate's whole
    /// path: total delay, bottleneck; the default) or `local` (its egress
    /// link, as the LCMP artifact does: with the DC fabric modelled, the
    /// whole path's bottleneck is a 100 Gbit/s leaf link for every
    /// candidate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<Metric>,
    /// Flow sizes are divided by this (at least one byte, i.e. one packet).
    /// Default: `scale` under rocev2 (the paper's size/BDP and
    /// transfer-time/RTT ratios), 1 under tcp.
    #[serde(default)]
    pub size_scale: Option<f64>,
    /// Replay this trace's flows instead of Poisson arrivals (relative to
    /// the config file).
    #[serde(default)]
    pub trace: Option<PathBuf>,
    /// Format of `trace`: `hpcc-fct` or `hpcc-flow`.
    #[serde(default)]
    pub trace_format: Option<String>,
    /// Extra `lcmp-traffic client` arguments under rocev2 (DCQCN
    /// parameters, e.g. `--dcqcn-rate-ai=25M`).
    #[serde(default)]
    pub rocev2_args: Vec<String>,
    /// Reference FCT files by policy (the simulator's `fct` output): a
    /// fidelity section compares the runs with them. `policy = "FILE"`, or
    /// `policy = ["FILE", "RERUN"]` with a second run of the simulator,
    /// whose distance from the first is the fidelity floor.
    #[serde(default)]
    pub reference: std::collections::BTreeMap<String, ReferenceFiles>,
}

/// One policy's entry of `[reference]`: the simulator's FCT file, or two
/// runs of the simulator (the second gives the floor of `lcmp-testbed
/// fidelity`: the simulator against its own rerun).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ReferenceFiles {
    /// `"FILE"`.
    One(PathBuf),
    /// `["FILE", "RERUN"]`.
    WithRerun([PathBuf; 2]),
}

impl ReferenceFiles {
    /// The reference file.
    pub fn file(&self) -> &Path {
        match self {
            ReferenceFiles::One(f) | ReferenceFiles::WithRerun([f, _]) => f,
        }
    }

    /// The second run, if given.
    pub fn rerun(&self) -> Option<&Path> {
        match self {
            ReferenceFiles::One(_) => None,
            ReferenceFiles::WithRerun([_, r]) => Some(r),
        }
    }

    /// Every file, the reference first.
    pub fn files_mut(&mut self) -> &mut [PathBuf] {
        match self {
            ReferenceFiles::One(f) => std::slice::from_mut(f),
            ReferenceFiles::WithRerun(both) => both,
        }
    }
}

impl From<PathBuf> for ReferenceFiles {
    fn from(file: PathBuf) -> Self {
        ReferenceFiles::One(file)
    }
}

impl ExperimentConfig {
    /// `[reference]` as `lcmp_results::fidelity` takes it: `(policy, file)`
    /// of every policy and `(policy, rerun)` of those with a second run.
    pub fn fidelity_references(
        &self,
    ) -> (
        Vec<lcmp_results::fidelity::PolicyFile>,
        Vec<lcmp_results::fidelity::PolicyFile>,
    ) {
        let files = self
            .reference
            .iter()
            .map(|(p, r)| (p.clone(), r.file().to_path_buf()))
            .collect();
        let reruns = self
            .reference
            .iter()
            .filter_map(|(p, r)| Some((p.clone(), r.rerun()?.to_path_buf())))
            .collect();
        (files, reruns)
    }
}

fn default_name() -> String {
    "exp".into()
}
fn one() -> usize {
    1
}
fn one_f() -> f64 {
    1.0
}
fn one_u32() -> u32 {
    1
}
fn three() -> u32 {
    3
}
fn default_drain() -> f64 {
    30.0
}
fn default_load_def() -> LoadDefinition {
    LoadDefinition::InterDc
}

/// `lcmp-testbed experiment`.
#[derive(Args, Debug, Clone)]
#[command(
    long_about = "Runs an FCT experiment: builds the testbed, calibrates it (per-path RTT with \
    the other paths down, rate of the minimum-delay path), then for every workload x load x seed \
    x policy restarts the switches (empty flow caches) with that policy, runs lcmp-traffic \
    servers on the destination DC's hosts and clients on the source DC's hosts (Poisson \
    arrivals, sizes from the workload CDF, one TCP connection per flow), excludes the warm-up, \
    drains in-flight flows (bounded), and writes DIR/runs/<run>/flows.csv, DIR/summary.json, \
    DIR/report.md and plots (SVG and PNG). FCT slowdown = FCT / ideal FCT, ideal = 2 x the \
    measured base RTT of the minimum-delay path + size over its bottleneck (FCT counts the \
    handshake and the receiver's acknowledgement of the last byte). Tears the testbed down at \
    the end, also on error or Ctrl-C. That is the namespaces engine (needs root); --engine \
    virtual runs the same rocev2 experiment in this one process on a virtual clock instead \
    (no root, no namespaces, deterministic; calibration is the topology's exact RTTs, and every \
    switch's final counters are written as runs/<run>/switch-<name>.json); --engine wall runs \
    that one process on the wall clock (dilated as the namespaces engine; lcmp-ctl --testbed \
    NAME reaches its switches while it runs, as root). Engines: namespaces, wall, virtual."
)]
pub struct ExperimentArgs {
    /// Experiment file (TOML; fields as the flags, see experiments/).
    /// Beside it --policies, --engine, --links, --switch-processes, --pfc,
    /// --cc and --trace (with its file's references dropped) override the
    /// file; any other flag that describes the experiment is an error (the
    /// file's field is what runs).
    #[arg(long, conflicts_with_all = [
        "name", "topology", "hosts_per_dc", "scale", "buffer_scale", "time_scale", "alpha",
        "beta", "initcwnd", "from", "to", "workload", "load", "transport", "size_scale",
        "reference", "rocev2_args", "seeds", "duration", "warmup", "drain", "load_definition",
        "switch_args",
    ])]
    pub config: Option<PathBuf>,
    /// Output directory.
    #[arg(long, required_unless_present = "check")]
    pub out: Option<PathBuf>,
    /// Check the experiment as a run would before building anything (the
    /// file, its topology, workloads, trace and references, the engine's
    /// options) and print the runs it would make; build and write nothing.
    /// Needs no root. Exit 0 when it would run, 2 with the problem if not.
    #[arg(long)]
    pub check: bool,
    /// Testbed name for the experiment.
    #[arg(long, default_value = "exp")]
    pub name: String,
    #[command(flatten)]
    pub topo: TopologyArgs,
    /// Source DC switch (its hosts send). Without --from and --to a
    /// --trace's flows go between any two DCs (one-process engines).
    #[arg(long = "from", required_unless_present_any = ["config", "trace"])]
    pub from: Option<String>,
    /// Destination DC switch (its hosts receive).
    #[arg(long = "to", required_unless_present_any = ["config", "trace"])]
    pub to: Option<String>,
    /// Workload name or CDF file (comma-separated for several).
    #[arg(long, value_delimiter = ',', required_unless_present_any = ["config", "trace"], conflicts_with = "trace")]
    pub workload: Vec<String>,
    /// Offered load(s), e.g. 0.3,0.5,0.8.
    #[arg(long, value_delimiter = ',', required_unless_present_any = ["config", "trace"], conflicts_with = "trace")]
    pub load: Vec<f64>,
    /// Replay the flows of this trace (source, destination, size, start)
    /// instead of Poisson arrivals; every policy replays the same flows on
    /// fresh switches. Host id i is host i % 16 + 1 of DC i / 16 + 1 (give
    /// --hosts-per-dc 16 for the LCMP artifact's traces). Beside --config
    /// it replaces the file's trace (same format unless --trace-format).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Format of --trace: hpcc-fct (the simulator's FCT output, `sip dip
    /// sport dport size start_ns fct_ns standalone_ns`) or hpcc-flow (its
    /// flow file, `src dst pg dport size start_s`).
    #[arg(long, value_name = "FORMAT", value_parser = parse_trace_format)]
    pub trace_format: Option<TraceFormat>,
    /// How flows are carried: tcp (a connection per flow) or rocev2 (a
    /// queue pair per flow with DCQCN, the paper's RDMA; the switches then
    /// mark ECN at the simulator's 32-128 us of queueing at link rate).
    #[arg(long, value_enum, default_value = "tcp")]
    pub transport: Transport,
    /// Where the experiment runs (default: namespaces; overrides the
    /// file's `engine`): namespaces, wall or virtual (rotor-experiment
    /// runs on namespaces or virtual); the one-process engines (wall,
    /// virtual) write every switch's final counters and the hosts' with
    /// the results (runs/<run>/switch-<name>.json, hosts.json); the virtual engine
    /// scales nothing by default (the namespaces and wall engines default
    /// rocev2 to --scale 1000 --time-scale 10 so that 2 cores keep up).
    #[arg(long, value_enum, value_name = "ENGINE")]
    pub engine: Option<Engine>,
    /// Priority flow control on the one-process engines (also `pfc = true`
    /// in the file): switches pause the senders of a port that holds too
    /// much of their buffer, as the paper's simulator does; a switch whose
    /// buffer cannot cover its ports' headroom (long-haul links) runs
    /// without, said on stderr.
    #[arg(long)]
    pub pfc: bool,
    /// Record a port's frames in every run into
    /// runs/<run>/capture-<switch>.pcapng (one-process engines; also
    /// `capture = [...]` in the file, which this replaces): SWITCH:PORT,
    /// the port as lcmp-ctl capture names it (dc1:p2 or dc1:2), or SWITCH
    /// for a switch with one port; one port per switch; times are the
    /// network's clock (virtual ns on the virtual engine). Repeatable or
    /// comma-separated.
    #[arg(long, value_name = "SWITCH[:PORT]", value_delimiter = ',')]
    pub capture: Vec<String>,
    /// Bytes kept of each captured frame (default 2048).
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u32).range(1..))]
    pub capture_snaplen: Option<u32>,
    /// Bytes (as kept) per capture file at most (default 64MB): frames
    /// past it are not recorded, counted and said.
    #[arg(long, value_name = "SIZE")]
    pub capture_max_bytes: Option<String>,
    /// Divide flow sizes by S (a flow is at least one packet). Default:
    /// --scale under rocev2, which keeps the paper's size/BDP and
    /// transfer-time/RTT ratios; 1 under tcp.
    #[arg(long, value_name = "S")]
    pub size_scale: Option<f64>,
    /// Compare the runs of POLICY with the simulator's FCT file (a
    /// fidelity section in report.md; see `lcmp-testbed fidelity`).
    /// Repeatable.
    #[arg(long, value_name = "POLICY=FILE")]
    pub reference: Vec<String>,
    /// Extra `lcmp-traffic client` argument under rocev2, e.g.
    /// --rocev2-arg=--dcqcn-rate-ai=25M (repeatable).
    #[arg(long = "rocev2-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub rocev2_args: Vec<String>,
    /// Policies to compare (comma-separated; names as lcmp_policy::PolicyName
    /// spells them, or specs with LCMP's weights such as
    /// lcmp:alpha=1:beta=3, keys alpha, beta, w_dl, w_lc, w_ql, w_tl,
    /// w_dp; checked with the experiment, in one line). Default
    /// lcmp,ecmp,ucmp,wcmp; with --config, the policies of the file to run
    /// instead of its list (e.g. one policy of a long experiment per run).
    #[arg(long, value_delimiter = ',', value_name = "POLICY,...")]
    pub policies: Option<Vec<String>>,
    /// Repetitions (seeds 1..=K).
    #[arg(long, default_value_t = 1)]
    pub seeds: u32,
    /// Arrival period per run (default 30 s; a trace lasts until its last
    /// start). A bare number is seconds, or with a unit: 30s, 1.5s, 500ms.
    #[arg(long, value_name = "SECS", value_parser = lcmp_topology::secs::parse, conflicts_with = "trace")]
    pub duration: Option<f64>,
    /// Warm-up excluded from results. Default: 10% of the duration. A bare
    /// number is seconds, or with a unit: 3s, 500ms.
    #[arg(long, value_name = "SECS", value_parser = lcmp_topology::secs::parse)]
    pub warmup: Option<f64>,
    /// Bound on the wait for in-flight flows after the arrivals. A bare
    /// number is seconds, or with a unit: 30s, 500ms.
    #[arg(long, value_name = "SECS", default_value = "30", value_parser = lcmp_topology::secs::parse)]
    pub drain: f64,
    /// Load definition.
    #[arg(long, value_enum, default_value = "inter-dc")]
    pub load_definition: LoadDefinition,
    /// Extra argument for every lcmp-switch (repeatable).
    #[arg(long = "switch-arg", allow_hyphen_values = true)]
    pub switch_args: Vec<String>,
    /// `one` (default): one process runs every switch, an event loop per
    /// core; `per-switch`: a process per switch. Overrides the file.
    #[arg(long, value_name = "HOW", value_enum)]
    pub switch_processes: Option<crate::bed::SwitchProcesses>,
    /// How links between switches are made: `memory` (default with one
    /// process: frames cross in memory) or `veth`. Overrides the file.
    #[arg(long, value_name = "KIND", value_parser = crate::bed::parse_links)]
    pub links: Option<lcmp_netlab::SwitchLinks>,
}

impl ExperimentArgs {
    /// The experiment these flags (or the file) describe.
    pub fn to_config(&self) -> Result<ExperimentConfig> {
        if let Some(file) = &self.config {
            let text = std::fs::read_to_string(file)
                .map_err(|e| Error::new(format!("{}: {e}", file.display())))?;
            // One line, located as a topology's errors are (toml's own report
            // repeats the file's line, and has no line for a key nested too
            // deep).
            let mut c: ExperimentConfig = toml::from_str(&text)
                .map_err(|e| Error::new(lcmp_topology::TomlError::new(&text, &e).in_file(file)))?;
            // A relative topology path is relative to the config file.
            let base = file.parent().unwrap_or(Path::new("."));
            let rebase = |p: &PathBuf| {
                if p.is_relative() {
                    base.join(p)
                } else {
                    p.clone()
                }
            };
            c.topology = c.topology.as_ref().map(rebase);
            c.trace = c.trace.as_ref().map(rebase);
            for f in c.reference.values_mut().flat_map(ReferenceFiles::files_mut) {
                *f = rebase(f);
            }
            if let Some(how) = self.switch_processes {
                c.switch_processes = Some(how.name().to_string());
            }
            if let Some(links) = self.links {
                c.links = Some(links.name().to_string());
            }
            if let Some(engine) = self.engine {
                c.engine = engine;
            }
            c.pfc |= self.pfc;
            if let Some(cc) = &self.topo.cc {
                // One file, each congestion control in turn.
                c.cc = Some(cc.clone());
            }
            if !self.capture.is_empty() {
                c.capture = self.capture.clone();
            }
            if self.capture_snaplen.is_some() {
                c.capture_snaplen = self.capture_snaplen;
            }
            if self.capture_max_bytes.is_some() {
                c.capture_max_bytes = self.capture_max_bytes.clone();
            }
            if let Some(trace) = &self.trace {
                // Another trace: the file's references are of its own
                // trace's flows, nothing to compare this one with.
                c.trace = Some(trace.clone());
                c.reference.clear();
            }
            if let Some(format) = self.trace_format {
                c.trace_format = Some(format.name().to_string());
            }
            if let Some(policies) = &self.policies {
                // A reference of a policy not run has nothing to compare.
                let run: Vec<String> = policies.iter().map(|q| canonical_policy(q)).collect();
                c.reference
                    .retain(|p, _| run.contains(&canonical_policy(p)));
                c.policies = policies.clone();
            }
            return Ok(canonical_policies(c));
        }
        let engine = self.engine.unwrap_or_default();
        Ok(canonical_policies(ExperimentConfig {
            name: self.name.clone(),
            topology: self.topo.topology.clone(),
            hosts_per_dc: self.topo.hosts_per_dc,
            scale: self
                .topo
                .scale
                .unwrap_or(default_factors(self.transport, engine).0),
            buffer_scale: self.topo.buffer_scale,
            time_scale: self.topo.time_scale,
            alpha: self.topo.alpha,
            beta: self.topo.beta,
            from: self.from.clone().unwrap_or_default(),
            to: self.to.clone().unwrap_or_default(),
            workloads: self.workload.clone(),
            loads: self.load.clone(),
            policies: self
                .policies
                .clone()
                .unwrap_or_else(|| ["lcmp", "ecmp", "ucmp", "wcmp"].map(String::from).to_vec()),
            seeds: self.seeds,
            duration_s: match (&self.trace, self.duration) {
                (Some(_), _) => 0.0,
                (None, d) => d.unwrap_or(30.0),
            },
            warmup_s: self.warmup,
            drain_s: self.drain,
            load_definition: self.load_definition,
            cc: self.topo.cc.clone(),
            initcwnd: self.topo.initcwnd,
            switch_args: self.switch_args.clone(),
            switch_processes: self.switch_processes.map(|h| h.name().to_string()),
            links: self.links.map(|l| l.name().to_string()),
            max_concurrent: None,
            failure: None,
            transport: self.transport,
            engine,
            pfc: self.pfc,
            capture: self.capture.clone(),
            capture_snaplen: self.capture_snaplen,
            capture_max_bytes: self.capture_max_bytes.clone(),
            metric: None,
            size_scale: self.size_scale,
            trace: self.trace.clone(),
            trace_format: self.trace_format.map(|f| f.name().to_string()),
            rocev2_args: self.rocev2_args.clone(),
            reference: self
                .reference
                .iter()
                .map(|r| {
                    let (policy, file) = r.split_once('=').ok_or_else(|| {
                        Error::new(format!("--reference {r:?}: expected POLICY=FILE"))
                    })?;
                    Ok((policy.to_string(), PathBuf::from(file).into()))
                })
                .collect::<Result<_>>()?,
        }))
    }
}

/// `--trace-format`, by the trace module's one spelling of the names.
fn parse_trace_format(text: &str) -> std::result::Result<TraceFormat, String> {
    text.parse().map_err(|e: lcmp_results::Error| e.to_string())
}

/// Fails in one line if `spec` is not a policy spec: a policy name,
/// optionally with LCMP's weights (`lcmp:alpha=1:beta=3`;
/// [`lcmp_policy::spec`]).
pub fn check_policy(spec: &str) -> Result<()> {
    spec.parse::<lcmp_policy::PolicySpec>()
        .map(|_| ())
        .map_err(Error::new)
}

/// `spec` in its canonical spelling (the runs' label), or as written if
/// it does not parse (validation refuses it).
fn canonical_policy(spec: &str) -> String {
    spec.parse::<lcmp_policy::PolicySpec>()
        .map_or_else(|_| spec.to_string(), |s| s.to_string())
}

/// Spells every policy and reference key of `c` canonically, so that a
/// spec's keys in any order label the same runs and find its reference.
fn canonical_policies(mut c: ExperimentConfig) -> ExperimentConfig {
    for p in &mut c.policies {
        *p = canonical_policy(p);
    }
    c.reference = std::mem::take(&mut c.reference)
        .into_iter()
        .map(|(p, files)| (canonical_policy(&p), files))
        .collect();
    c
}

impl ExperimentConfig {
    /// How the switches run (`switch_processes`, checked).
    pub fn processes(&self) -> Result<crate::bed::SwitchProcesses> {
        match self.switch_processes.as_deref() {
            None => Ok(crate::bed::SwitchProcesses::default()),
            Some(how) => crate::bed::SwitchProcesses::from_name(how).ok_or_else(|| {
                Error::new(format!(
                    "switch_processes = \"{how}\": expected \"one\" or \"per-switch\""
                ))
            }),
        }
    }

    /// How links between switches are made, if the file says (`links`,
    /// checked).
    pub fn links(&self) -> Result<Option<lcmp_netlab::SwitchLinks>> {
        self.links
            .as_deref()
            .map(lcmp_netlab::SwitchLinks::from_name)
            .transpose()
            .map_err(Error::new)
    }

    /// The warm-up, seconds (none by default for a trace: every flow of it
    /// counts, as in the simulator's output).
    pub fn warmup(&self) -> f64 {
        match &self.trace {
            Some(_) => self.warmup_s.unwrap_or(0.0),
            None => self.warmup_s.unwrap_or(self.duration_s * 0.1),
        }
    }

    /// The time dilation.
    pub fn time_scale(&self) -> f64 {
        self.time_scale
            .unwrap_or(default_factors(self.transport, self.engine).1)
    }

    /// The experiment's scaling: rates, buffers, flow sizes and time, the
    /// one value every part of the testbed applies.
    pub fn scaling(&self) -> lcmp_topology::Scaling {
        lcmp_topology::Scaling {
            rate: self.scale,
            buffer: self.buffer_scale.unwrap_or(self.scale),
            size: self.size_scale(),
            time: self.time_scale(),
        }
    }

    /// Flow sizes are divided by this.
    pub fn size_scale(&self) -> f64 {
        self.size_scale.unwrap_or(match self.transport {
            Transport::Rocev2 => self.scale,
            Transport::Tcp => 1.0,
        })
    }

    /// The DC switches that get generated hosts: the two that send and
    /// receive, or every one (`None`) when a trace's flows go between any
    /// two DCs.
    pub fn host_switches(&self) -> Option<Vec<String>> {
        (!self.all_pairs()).then(|| vec![self.from.clone(), self.to.clone()])
    }

    /// Whether the flows go between any two DCs: a trace, and neither
    /// `from` nor `to` (every host may send and receive; each flow's ideal
    /// is its own DC pair's).
    pub fn all_pairs(&self) -> bool {
        self.trace.is_some() && self.from.is_empty() && self.to.is_empty()
    }

    /// Refuses, in one line each, what the engine cannot run: on the
    /// one-process engines (wall, virtual) TCP and every option that
    /// configures the namespace engine's processes, kernels or links.
    fn check_engine(&self) -> Result<()> {
        if self.engine == Engine::Namespaces {
            if self.all_pairs() {
                return Err(Error::new(
                    "a trace between any DCs (no from and to) runs on a one-process engine \
                     (engine = \"virtual\" or \"wall\"); on the namespaces give from and to",
                ));
            }
            if self.pfc {
                return Err(Error::new(
                    "pfc (--pfc): a one-process engine option (engine = \"virtual\" or \"wall\"); \
                     on the namespaces the switches run over AF_XDP, where PFC is the NIC's",
                ));
            }
            if !self.capture.is_empty() {
                return Err(Error::new(
                    "capture (--capture): a one-process engine option (engine = \"virtual\" or \
                     \"wall\"); on the namespaces run `lcmp-ctl --testbed NAME capture SWITCH PORT \
                     --out FILE` during a run, or tcpdump in a host's namespace",
                ));
            }
            return Ok(());
        }
        if self.transport == Transport::Tcp {
            return Err(Error::new(
                "tcp runs on the namespaces engine only (kernel TCP stacks); the wall and virtual \
                 engines carry rocev2 (transport = \"rocev2\", --transport rocev2)",
            ));
        }
        let namespace_only = [
            (
                self.switch_processes.is_some(),
                "switch_processes (--switch-processes) chooses lcmp-switch processes",
            ),
            (
                self.links.is_some(),
                "links (--links) chooses veth or memory links between switch processes",
            ),
            (
                self.initcwnd.is_some(),
                "initcwnd (--initcwnd) sets the kernel's TCP",
            ),
            (
                !self.switch_args.is_empty(),
                "switch_args (--switch-arg) are lcmp-switch command-line arguments",
            ),
            (
                !self.rocev2_args.is_empty(),
                "rocev2_args (--rocev2-arg) are lcmp-traffic command-line arguments",
            ),
            (
                self.max_concurrent.is_some(),
                "max_concurrent bounds lcmp-traffic's TCP sockets",
            ),
            (
                self.failure.is_some(),
                "failure takes a link's carrier down in the namespaces",
            ),
        ];
        match namespace_only.iter().find(|(given, _)| *given) {
            Some((_, what)) => Err(Error::new(format!(
                "{what}: a namespaces engine option, not with engine {}",
                self.engine.name()
            ))),
            None => Ok(()),
        }
    }

    /// Under rocev2 its congestion control (`cc`, dcqcn when not given;
    /// one line listing the four otherwise); `None` under tcp, whose `cc`
    /// is the kernel's.
    pub fn rocev2_cc(&self) -> Result<Option<CongestionControl>> {
        match self.transport {
            Transport::Tcp => Ok(None),
            Transport::Rocev2 => {
                CongestionControl::from_name(self.cc.as_deref().unwrap_or("dcqcn"))
                    .map(Some)
                    .map_err(|e| Error::new(format!("cc (--cc) under transport rocev2: {e}")))
            }
        }
    }

    /// The congestion control the hosts run, by name, as `summary.json`
    /// records it: the RoCEv2 one under rocev2, the kernel's under tcp
    /// (`None`: the kernel's default).
    pub fn cc_name(&self) -> Option<String> {
        match self.rocev2_cc() {
            Ok(Some(cc)) => Some(cc.name().to_string()),
            _ => self.cc.clone(),
        }
    }

    /// Checks everything that can be checked without building anything:
    /// numbers, policies, workloads, that `from`/`to` are DC switches of
    /// the topology with hosts, the captures' ports. Returns the effective
    /// topology.
    pub fn validate(&self) -> Result<Topology> {
        let topo = self.validate_runs()?;
        self.captures(&topo)?;
        Ok(topo)
    }

    /// The captures (`capture`, `capture_snaplen`, `capture_max_bytes`)
    /// on the switches of `topo`, checked: one line naming a spelling, a
    /// switch or port the network does not have, a second port of a
    /// switch, or a size that is not one.
    pub fn captures(&self, topo: &Topology) -> Result<Vec<CaptureAt>> {
        let snaplen = self.capture_snaplen.unwrap_or(DEFAULT_CAPTURE_SNAPLEN);
        if snaplen == 0 {
            return Err(Error::new("capture_snaplen must be at least 1 byte"));
        }
        let max_bytes = match &self.capture_max_bytes {
            None => DEFAULT_CAPTURE_MAX_BYTES,
            Some(text) => lcmp_topology::units::parse_buffer(text)
                .map_err(|e| Error::new(format!("capture_max_bytes (--capture-max-bytes): {e}")))?,
        };
        let mut out: Vec<CaptureAt> = Vec::new();
        for text in &self.capture {
            let (switch, port) = match text.split_once(':') {
                Some((s, p)) => (s.trim(), Some(p.trim())),
                None => (text.trim(), None),
            };
            let Some(sw) = topo.switch_by_name(switch) else {
                let names: Vec<&str> = topo.switches().iter().map(|s| s.name.as_str()).collect();
                return Err(Error::new(format!(
                    "capture {text:?}: no switch {switch:?} in the topology (switches: {})",
                    names.join(", ")
                )));
            };
            let ports = topo.ports(sw.id).len();
            let last = ports.saturating_sub(1);
            let index = match port {
                None if ports == 1 => 0,
                None => {
                    return Err(Error::new(format!(
                        "capture {text:?}: {switch} has {ports} ports; name one ({switch}:p0 to \
                         {switch}:p{last}): a switch captures one port"
                    )))
                }
                Some(p) => p
                    .strip_prefix('p')
                    .unwrap_or(p)
                    .parse::<usize>()
                    .ok()
                    .filter(|&i| i < ports)
                    .ok_or_else(|| {
                        Error::new(format!(
                            "capture {text:?}: {switch} has no port {p:?} (its ports are p0 to \
                             p{last}, or 0 to {last}, as lcmp-ctl capture names them)"
                        ))
                    })?,
            };
            if let Some(other) = out.iter().find(|c| c.switch == switch) {
                return Err(Error::new(format!(
                    "capture {text:?}: {switch}:{} is captured already; a switch captures one port",
                    other.port
                )));
            }
            out.push(CaptureAt {
                switch: switch.to_string(),
                port: format!("p{index}"),
                snaplen: snaplen as usize,
                max_bytes,
            });
        }
        Ok(out)
    }

    /// [`ExperimentConfig::validate`] but the captures.
    fn validate_runs(&self) -> Result<Topology> {
        crate::state::validate_name(&self.name)?;
        crate::bed::links_for(self.processes()?, self.links()?)?;
        check_scale(self.scale)?;
        check_time_scale(self.time_scale())?;
        if self.trace.is_some() {
            if !self.workloads.is_empty() || !self.loads.is_empty() {
                return Err(Error::new(
                    "a trace gives the flows: no workloads or loads beside it",
                ));
            }
            if self.trace_format.is_none() {
                return Err(Error::new(
                    "a trace needs its format: trace_format = \"hpcc-fct\" or \"hpcc-flow\"",
                ));
            }
        } else {
            if self.loads.is_empty() {
                return Err(Error::new("no load given"));
            }
            if self.workloads.is_empty() {
                return Err(Error::new("no workload given"));
            }
            if self.trace_format.is_some() {
                return Err(Error::new("a trace format without a trace"));
            }
        }
        for &l in &self.loads {
            if !(l.is_finite() && l > 0.0) {
                return Err(Error::new(format!(
                    "load must be a positive fraction (e.g. 0.3), not {l}"
                )));
            }
        }
        if self.policies.is_empty() {
            return Err(Error::new("no policy given"));
        }
        for (i, p) in self.policies.iter().enumerate() {
            check_policy(p)?;
            // Two runs of one label would write one directory.
            if self.policies[..i].contains(p) {
                return Err(Error::new(format!("policy {p:?} is listed twice")));
            }
            // The testbed's agent pushes every switch's tables, C_path
            // computed with its own path weights (one set, from
            // --switch-arg), over those a run's switches computed.
            let spec: lcmp_policy::PolicySpec = p.parse().map_err(Error::new)?;
            let w = spec.weights();
            if self.engine != Engine::Virtual && (w.w_dl.is_some() || w.w_lc.is_some()) {
                return Err(Error::new(format!(
                    "policy spec {p:?}: the path weights w_dl, w_lc run on engine virtual only \
                     (elsewhere the testbed's agent pushes tables with C_path at its own weights)"
                )));
            }
        }
        for w in &self.workloads {
            lcmp_traffic::cdf::Cdf::load(w).map_err(|e| Error::new(e.to_string()))?;
        }
        if self.seeds == 0 {
            return Err(Error::new("--seeds must be at least 1"));
        }
        if let Some(s) = self.size_scale {
            if !(s.is_finite() && s > 0.0) {
                return Err(Error::new(format!(
                    "--size-scale must be a positive number (flow sizes are divided by it), not {s}"
                )));
            }
        }
        self.check_engine()?;
        match self.transport {
            Transport::Rocev2 => {
                self.rocev2_cc()?;
                if self.initcwnd.is_some() {
                    return Err(Error::new(
                        "initcwnd (--initcwnd) is a TCP option; not with transport rocev2",
                    ));
                }
                if self.max_concurrent.is_some() {
                    return Err(Error::new(
                        "max_concurrent is a TCP option (a socket per flow); rocev2 has none",
                    ));
                }
            }
            Transport::Tcp => {
                if let Some(a) = self.rocev2_args.first() {
                    return Err(Error::new(format!(
                        "rocev2 option {a:?} (--rocev2-arg) needs transport rocev2"
                    )));
                }
            }
        }
        for p in self.reference.keys() {
            if !self.policies.contains(p) {
                return Err(Error::new(format!(
                    "reference for policy {p:?}, which the experiment does not run ({})",
                    self.policies.join(", ")
                )));
            }
        }
        if self.trace.is_none() && !(self.duration_s.is_finite() && self.duration_s > 0.0) {
            return Err(Error::new(format!(
                "duration must be positive, not {}",
                self.duration_s
            )));
        }
        let warm = self.warmup();
        if self.trace.is_none() && !(warm.is_finite() && (0.0..self.duration_s).contains(&warm)) {
            return Err(Error::new(format!(
                "warm-up ({warm} s) must be at least 0 and shorter than the duration ({} s)",
                self.duration_s
            )));
        }
        if !(self.drain_s.is_finite() && self.drain_s >= 0.0) {
            return Err(Error::new(format!(
                "drain must be >= 0, not {}",
                self.drain_s
            )));
        }
        if let (Transport::Tcp, Some(cc)) = (self.transport, &self.cc) {
            crate::bed::check_congestion_control(cc)?;
        }
        if self.all_pairs() {
            if !self.reference.is_empty() {
                return Err(Error::new(
                    "[reference] (--reference) compares one DC pair's flows with the simulator's; \
                     a trace between any DCs (no from and to) has none",
                ));
            }
            // Hosts on every DC switch; the trace's hosts are checked
            // against them as it is read.
            return crate::bed::effective_topology(
                self.topology.as_deref(),
                self.hosts_per_dc,
                None,
                self.scaling(),
            );
        }
        if self.from.is_empty() || self.to.is_empty() {
            return Err(Error::new(
                "from and to (--from, --to): the DC switches whose hosts send and receive; \
                 only a trace may leave both out, its flows then between any two DCs",
            ));
        }
        // The names first: the hosts are generated on them.
        let file_topo = load_topology(self.topology.as_deref())?;
        let topo = if [&self.from, &self.to]
            .iter()
            .all(|n| file_topo.switch_by_name(n).is_some())
        {
            crate::bed::effective_topology(
                self.topology.as_deref(),
                self.hosts_per_dc,
                self.host_switches().as_deref(),
                self.scaling(),
            )?
        } else {
            crate::bed::effective_topology(
                self.topology.as_deref(),
                self.hosts_per_dc,
                None,
                self.scaling(),
            )?
        };
        let names: Vec<&str> = topo
            .switches()
            .iter()
            .filter(|s| !s.prefixes.is_empty())
            .map(|s| s.name.as_str())
            .collect();
        for (what, sw) in [("--from", &self.from), ("--to", &self.to)] {
            let Some(s) = topo.switch_by_name(sw) else {
                return Err(Error::new(format!(
                    "{what}: no switch {sw:?} in the topology (DC switches: {})",
                    names.join(", ")
                )));
            };
            if super::hosts_behind(&topo, s.id).is_empty() {
                return Err(Error::new(format!(
                    "{what}: switch {sw:?} has no hosts, on it or in its DC (DC switches: {})",
                    names.join(", ")
                )));
            }
        }
        if self.from == self.to {
            return Err(Error::new("--from and --to must be different switches"));
        }
        if let Some(f) = &self.failure {
            find_link(&topo, &f.link)?;
            if !(f.at_s > 0.0 && f.at_s < self.duration_s) {
                return Err(Error::new(format!(
                    "failure.at_s ({}) must lie within the run (0, {})",
                    f.at_s, self.duration_s
                )));
            }
        }
        Ok(topo)
    }
}

/// The link written `a-b` (either order).
pub fn find_link<'t>(topo: &'t Topology, spec: &str) -> Result<&'t lcmp_topology::Link> {
    let (a, b) = spec
        .split_once('-')
        .ok_or_else(|| Error::new(format!("link {spec:?}: expected <switch>-<switch>")))?;
    let id = |n: &str| {
        topo.switch_by_name(n)
            .map(|s| s.id)
            .ok_or_else(|| Error::new(format!("link {spec:?}: no switch {n:?}")))
    };
    let (a, b) = (id(a)?, id(b)?);
    topo.links()
        .iter()
        .find(|l| (l.a == a && l.b == b) || (l.a == b && l.b == a))
        .ok_or_else(|| Error::new(format!("no link {spec:?} in the topology")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `lcmp-testbed experiment ARGS` would run.
    fn config_of(args: &[&str]) -> Result<ExperimentConfig> {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            args: ExperimentArgs,
        }
        let argv = std::iter::once("x").chain(args.iter().copied());
        let Cli { args } = <Cli as clap::Parser>::try_parse_from(argv).unwrap();
        args.to_config()
    }

    fn base() -> ExperimentConfig {
        toml::from_str(
            r#"
            from = "dc1"
            to = "dc8"
            workloads = ["websearch"]
            loads = [0.3]
            policies = ["lcmp", "ecmp"]
            duration_s = 10
            "#,
        )
        .unwrap()
    }

    #[test]
    fn durations_take_numbers_or_units() {
        let parse = |extra: &str| -> std::result::Result<ExperimentConfig, String> {
            toml::from_str(&format!(
                "from = \"dc1\"\nto = \"dc8\"\nworkloads = [\"websearch\"]\nloads = [0.3]\npolicies = [\"lcmp\"]\n{extra}"
            ))
            .map_err(|e| e.to_string())
        };
        let c = parse("duration = \"30s\"\nwarmup = \"1.5s\"\ndrain = \"250ms\"").unwrap();
        assert_eq!(
            (c.duration_s, c.warmup_s, c.drain_s),
            (30.0, Some(1.5), 0.25)
        );
        let c = parse("duration_s = 20\nwarmup_s = 2\ndrain_s = 20").unwrap();
        assert_eq!(
            (c.duration_s, c.warmup_s, c.drain_s),
            (20.0, Some(2.0), 20.0)
        );
        let c = parse("duration_s = \"20\"").unwrap();
        assert_eq!(c.duration_s, 20.0);
        let e = parse("duration = \"20 s\"").unwrap_err();
        assert!(e.contains("write \"20s\""), "{e}");
        let e = parse("duration = \"20S\"").unwrap_err();
        assert!(e.contains("units are case-sensitive; write \"20s\""), "{e}");
    }

    #[test]
    fn defaults_and_checks() {
        let c = base();
        assert_eq!(c.name, "exp");
        assert_eq!(c.hosts_per_dc, 1);
        assert_eq!(c.warmup(), 1.0);
        assert_eq!(c.load_definition, LoadDefinition::InterDc);
        let topo = c.validate().unwrap();
        // Hosts on the sending and the receiving DC only.
        let hosts: Vec<&str> = topo.hosts().iter().map(|h| h.name.as_str()).collect();
        assert_eq!(hosts, ["dc1h1", "dc8h1"]);

        let bad = |f: &dyn Fn(&mut ExperimentConfig), msg: &str| {
            let mut c = base();
            f(&mut c);
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains(msg), "{e:?} lacks {msg:?}");
        };
        bad(&|c| c.loads = vec![0.0], "load must be a positive");
        bad(&|c| c.loads = vec![-1.0], "load must be a positive");
        bad(
            &|c| c.policies = vec!["ospf".into()],
            "unknown policy \"ospf\"",
        );
        bad(&|c| c.from = "dc9".into(), "no switch \"dc9\"");
        bad(&|c| c.to = "dc1".into(), "must be different");
        bad(&|c| c.scale = 0.0, "--scale must be a positive");
        bad(
            &|c| c.workloads = vec!["/nonexistent.cdf".into()],
            "nonexistent",
        );
        bad(&|c| c.warmup_s = Some(10.0), "shorter than the duration");
        bad(
            &|c| c.links = Some("fibre".into()),
            "links \"fibre\": expected",
        );
        bad(
            &|c| {
                c.switch_processes = Some("per-switch".into());
                c.links = Some("memory".into());
            },
            "needs --switch-processes one",
        );
        bad(
            &|c| {
                c.failure = Some(Failure {
                    link: "dc1-dc8".into(),
                    at_s: 5.0,
                })
            },
            "no link \"dc1-dc8\"",
        );
    }

    #[test]
    fn transport_and_trace_options_are_checked() {
        let bad = |f: &dyn Fn(&mut ExperimentConfig), msg: &str| {
            let mut c = base();
            f(&mut c);
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains(msg), "{e:?} lacks {msg:?}");
        };
        bad(
            &|c| c.size_scale = Some(0.0),
            "--size-scale must be a positive",
        );
        bad(
            &|c| {
                c.transport = Transport::Rocev2;
                c.cc = Some("cubic".into());
            },
            "cc (--cc) under transport rocev2: unknown congestion control \"cubic\": \
             expected one of dcqcn, hpcc, timely, dctcp",
        );
        bad(
            &|c| c.rocev2_args = vec!["--dcqcn-rate-ai=25M".into()],
            "\"--dcqcn-rate-ai=25M\" (--rocev2-arg) needs transport rocev2",
        );
        bad(
            &|c| {
                c.reference
                    .insert("wcmp".into(), PathBuf::from("fct_wcmp.txt").into());
            },
            "reference for policy \"wcmp\", which the experiment does not run",
        );
        bad(
            &|c| {
                c.trace = Some("t.txt".into());
                c.trace_format = Some("hpcc-fct".into());
            },
            "no workloads or loads beside it",
        );
        bad(
            &|c| {
                c.workloads.clear();
                c.loads.clear();
                c.trace = Some("t.txt".into());
            },
            "a trace needs its format",
        );
        // Sizes follow the rate scale under rocev2 unless given.
        let mut c = base();
        c.scale = 1000.0;
        assert_eq!(c.size_scale(), 1.0);
        c.transport = Transport::Rocev2;
        assert_eq!(c.size_scale(), 1000.0);
        c.size_scale = Some(10.0);
        assert_eq!(c.size_scale(), 10.0);
        // Time is dilated ten-fold under rocev2 unless given, not under tcp.
        assert_eq!(c.time_scale(), 10.0);
        c.transport = Transport::Tcp;
        assert_eq!(c.time_scale(), 1.0);
        for t in [0.0, -1.0, f64::NAN, 1e7] {
            bad(
                &|c| c.time_scale = Some(t),
                "--time-scale must be a number in (0, 1e6]",
            );
        }
    }

    #[test]
    fn the_virtual_engine_runs_rocev2_unscaled_and_refuses_namespace_options() {
        let flags = |extra: &[&str]| {
            let mut argv = vec![
                "--out",
                "/nonexistent",
                "--from",
                "dc1",
                "--to",
                "dc8",
                "--workload",
                "websearch",
                "--load",
                "0.3",
                "--transport",
                "rocev2",
            ];
            argv.extend_from_slice(extra);
            config_of(&argv).unwrap()
        };
        // The namespaces engine scales rocev2 (rate / 1000, time x 10); the
        // virtual engine runs the network as written, unless told.
        let ns = flags(&[]);
        assert_eq!(ns.engine, Engine::Namespaces);
        assert_eq!(
            ns.scaling().to_string(),
            "rate=1000,buffer=1000,size=1000,time=10"
        );
        let v = flags(&["--engine", "virtual"]);
        assert_eq!(v.engine, Engine::Virtual);
        assert_eq!(v.scaling(), lcmp_topology::Scaling::NONE);
        v.validate().unwrap();
        // The wall engine must keep up with the wall clock, as the
        // namespaces engine: the same defaults.
        let w = flags(&["--engine", "wall"]);
        assert_eq!(w.engine, Engine::Wall);
        assert_eq!(
            w.scaling().to_string(),
            "rate=1000,buffer=1000,size=1000,time=10"
        );
        w.validate().unwrap();
        let mut w_tcp = w.clone();
        w_tcp.transport = Transport::Tcp;
        assert!(w_tcp
            .validate()
            .unwrap_err()
            .to_string()
            .contains("tcp runs on the namespaces engine only"));
        // Under rocev2 `cc` names the RoCEv2 CC on every engine: a
        // kernel's is refused, one of the four runs.
        let mut w_cc = w;
        w_cc.cc = Some("cubic".into());
        assert_eq!(
            w_cc.validate().unwrap_err().to_string(),
            "cc (--cc) under transport rocev2: unknown congestion control \"cubic\": \
             expected one of dcqcn, hpcc, timely, dctcp"
        );
        w_cc.cc = Some("timely".into());
        w_cc.validate().unwrap();
        assert_eq!(w_cc.cc_name().as_deref(), Some("timely"));
        let told = flags(&["--engine", "virtual", "--scale", "10", "--time-scale", "2"]);
        assert_eq!(
            told.scaling().to_string(),
            "rate=10,buffer=10,size=10,time=2"
        );
        // A file's `engine`, and --engine over it.
        let mut c = base();
        c.transport = Transport::Rocev2;
        assert_eq!(c.time_scale(), 10.0);
        c.engine = Engine::Virtual;
        assert_eq!(c.scaling(), lcmp_topology::Scaling::NONE);
        let parsed: ExperimentConfig = toml::from_str(
            "from='dc1'\nto='dc8'\nworkloads=['websearch']\nloads=[0.3]\npolicies=['lcmp']\n\
             duration_s=1\ntransport='rocev2'\nengine='virtual'",
        )
        .unwrap();
        assert_eq!(parsed.engine, Engine::Virtual);

        let bad = |f: &dyn Fn(&mut ExperimentConfig), msg: &str| {
            let mut c = base();
            c.transport = Transport::Rocev2;
            c.engine = Engine::Virtual;
            f(&mut c);
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains(msg), "{e:?} lacks {msg:?}");
            assert_eq!(e.lines().count(), 1, "{e}");
        };
        bad(
            &|c| c.transport = Transport::Tcp,
            "tcp runs on the namespaces engine only (kernel TCP stacks); the wall and virtual \
             engines carry rocev2",
        );
        let namespace_only = "a namespaces engine option, not with engine virtual";
        bad(
            &|c| c.switch_processes = Some("one".into()),
            "switch_processes (--switch-processes)",
        );
        bad(
            &|c| c.links = Some("memory".into()),
            &format!(
                "links (--links) chooses veth or memory links between switch processes: \
                      {namespace_only}"
            ),
        );
        // Under rocev2 `cc` is the RoCEv2 CC, on every engine.
        bad(
            &|c| c.cc = Some("bbr".into()),
            "cc (--cc) under transport rocev2: unknown congestion control \"bbr\"",
        );
        bad(&|c| c.initcwnd = Some(10), "initcwnd (--initcwnd)");
        bad(
            &|c| c.switch_args = vec!["--no-ecn".into()],
            "switch_args (--switch-arg)",
        );
        bad(
            &|c| c.rocev2_args = vec!["--dcqcn-rate-ai=25M".into()],
            "rocev2_args (--rocev2-arg)",
        );
        bad(&|c| c.max_concurrent = Some(4), "max_concurrent");
        bad(
            &|c| {
                c.failure = Some(Failure {
                    link: "dc1-dc2".into(),
                    at_s: 5.0,
                })
            },
            "failure takes a link's carrier down",
        );
    }

    #[test]
    fn shipped_experiments_are_valid() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../experiments");
        let mut checked = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            // The rotor experiments (rotor-experiment's files) have their
            // own format and test (testbed/tests/rotor_flows.rs).
            if !name.ends_with(".toml") || name.starts_with("rotor") || name.starts_with("mars") {
                continue;
            }
            let c =
                config_of(&["--config", path.to_str().unwrap(), "--out", "/nonexistent"]).unwrap();
            c.validate().unwrap_or_else(|e| panic!("{name}: {e}"));
            if let Some(t) = &c.trace {
                assert!(t.is_file(), "{name}: trace {} missing", t.display());
            }
            for f in c
                .reference
                .values()
                .flat_map(|r| [Some(r.file()), r.rerun()])
                .flatten()
            {
                assert!(f.is_file(), "{name}: reference {} missing", f.display());
            }
            checked += 1;
        }
        assert!(checked >= 6, "only {checked} experiment files");
    }

    #[test]
    fn unknown_field_is_an_error() {
        let e = toml::from_str::<ExperimentConfig>(
            "from='a'\nto='b'\nworkloads=[]\nloads=[]\npolicies=[]\nduration_s=1\nlod=3",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("lod"), "{e}");
    }

    #[test]
    fn policies_with_a_config_run_those_and_keep_their_references() {
        let dir = std::env::temp_dir().join(format!("lcmp-config-pol-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("exp.toml");
        std::fs::write(
            &file,
            "from='dc1'\nto='dc8'\nworkloads=['websearch']\nloads=[0.3]\n\
             policies=['lcmp','ecmp','ucmp']\nduration_s=1\n[reference]\n\
             lcmp = 'fct_lcmp.txt'\necmp = 'fct_ecmp.txt'\n",
        )
        .unwrap();
        let parse = |extra: &[&str]| {
            let mut argv = vec!["--config", file.to_str().unwrap(), "--out", "/x"];
            argv.extend_from_slice(extra);
            config_of(&argv).unwrap()
        };
        // The file's list when none is given.
        assert_eq!(parse(&[]).policies, ["lcmp", "ecmp", "ucmp"]);
        let c = parse(&["--policies", "ecmp"]);
        assert_eq!(c.policies, ["ecmp"]);
        // lcmp is not run: its reference goes with it.
        assert_eq!(c.reference.keys().collect::<Vec<_>>(), ["ecmp"]);
        c.validate().unwrap();
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn policy_specs_are_run_under_their_canonical_spelling_and_checked() {
        let c = config_of(&[
            "--from",
            "dc1",
            "--to",
            "dc8",
            "--workload",
            "websearch",
            "--load",
            "0.3",
            "--out",
            "/x",
            "--policies",
            "ecmp,lcmp:w_dp=1:w_ql=1:w_tl=2,lcmp:beta=3:alpha=1",
        ])
        .unwrap();
        assert_eq!(
            c.policies,
            ["ecmp", "lcmp:w_ql=1:w_tl=2:w_dp=1", "lcmp:alpha=1:beta=3"]
        );
        c.validate().unwrap();
        let refused = |policies: &[&str]| {
            let mut c = c.clone();
            c.policies = policies.iter().map(|p| p.to_string()).collect();
            c.validate().unwrap_err().to_string()
        };
        assert_eq!(
            refused(&["lcmp:w_ql=0:w_tl=0:w_dp=0"]),
            "policy spec \"lcmp:w_ql=0:w_tl=0:w_dp=0\": the congestion weights w_ql + w_tl + w_dp sum to 0"
        );
        assert!(refused(&["ecmp:alpha=1"]).contains("ecmp takes no weights"));
        // This experiment runs on the namespaces engine.
        assert_eq!(
            refused(&["lcmp:w_dl=1:w_lc=1"]),
            "policy spec \"lcmp:w_dl=1:w_lc=1\": the path weights w_dl, w_lc run on engine \
             virtual only (elsewhere the testbed's agent pushes tables with C_path at its own \
             weights)"
        );
        let mut v = c.clone();
        v.engine = Engine::Virtual;
        v.transport = Transport::Rocev2;
        v.policies = vec!["lcmp:w_dl=1:w_lc=1".into()];
        v.validate().unwrap();
        assert_eq!(
            refused(&["lcmp", "ecmp", "lcmp"]),
            "policy \"lcmp\" is listed twice"
        );
    }

    #[test]
    fn a_spec_in_a_file_finds_its_reference_whatever_its_key_order() {
        let dir = std::env::temp_dir().join(format!("lcmp-config-spec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("exp.toml");
        std::fs::write(
            &file,
            "from='dc1'\nto='dc8'\nworkloads=['websearch']\nloads=[0.3]\n\
             policies=['lcmp:beta=3:alpha=1','ecmp']\nduration_s=1\n[reference]\n\
             'lcmp:alpha=1:beta=3' = 'fct_a.txt'\necmp = 'fct_ecmp.txt'\n",
        )
        .unwrap();
        let parse = |extra: &[&str]| {
            let mut argv = vec!["--config", file.to_str().unwrap(), "--out", "/x"];
            argv.extend_from_slice(extra);
            config_of(&argv).unwrap()
        };
        let c = parse(&[]);
        assert_eq!(c.policies, ["lcmp:alpha=1:beta=3", "ecmp"]);
        assert_eq!(
            c.reference.keys().collect::<Vec<_>>(),
            ["ecmp", "lcmp:alpha=1:beta=3"]
        );
        c.validate().unwrap();
        // --policies in another order keeps the spec's reference.
        let c = parse(&["--policies", "lcmp:beta=3:alpha=1"]);
        assert_eq!(
            c.reference.keys().collect::<Vec<_>>(),
            ["lcmp:alpha=1:beta=3"]
        );
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_reference_may_name_a_second_run() {
        let dir = std::env::temp_dir().join(format!("lcmp-config-ref-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("exp.toml");
        std::fs::write(
            &file,
            "from='dc1'\nto='dc8'\nworkloads=['websearch']\nloads=[0.3]\n\
             policies=['lcmp','ecmp']\nduration_s=1\n[reference]\n\
             lcmp = ['fct_lcmp.txt', '/abs/fct_lcmp_rerun.txt']\necmp = 'fct_ecmp.txt'\n",
        )
        .unwrap();
        let c = config_of(&["--config", file.to_str().unwrap(), "--out", "/nonexistent"]).unwrap();
        // Relative paths are the config file's, both of a pair.
        let (files, reruns) = c.fidelity_references();
        assert_eq!(
            files,
            [
                ("ecmp".to_string(), dir.join("fct_ecmp.txt")),
                ("lcmp".to_string(), dir.join("fct_lcmp.txt")),
            ]
        );
        assert_eq!(
            reruns,
            [("lcmp".to_string(), PathBuf::from("/abs/fct_lcmp_rerun.txt"))]
        );
        // Three files are not a reference.
        let e = toml::from_str::<ExperimentConfig>(
            "from='a'\nto='b'\nworkloads=[]\nloads=[]\npolicies=[]\nduration_s=1\n\
             [reference]\nlcmp=['a','b','c']",
        );
        assert!(e.is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A config file's TOML error is one line naming the file and line: a
    /// key of 5,000 dotted parts said "recursion limit" with no line, and
    /// toml's report repeated the line, a key that is a terminal escape raw.
    #[test]
    fn a_config_file_error_is_one_line_with_its_line() {
        let dir = std::env::temp_dir().join(format!("lcmp-config-toml-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("exp.toml");
        let error = |text: &str| {
            std::fs::write(&file, text).unwrap();
            config_of(&["--config", file.to_str().unwrap(), "--out", "/nonexistent"])
                .unwrap_err()
                .to_string()
        };
        let deep = error(&format!(
            "from = 'dc1'\n{} = 1\n",
            vec!["a"; 5000].join(".")
        ));
        assert_eq!(
            deep,
            format!(
                "{}:2: a dotted key of more than 80 parts; the TOML reader nests at most 80",
                file.display()
            )
        );
        let escape = error("from = 'dc1'\n\"\\u001b[31m\" = 1\n");
        assert!(
            escape.starts_with(&format!(
                "{}:2: unknown field \"\\u{{1b}}[31m\", expected one of `name`, ",
                file.display()
            )),
            "{escape:?}"
        );
        assert!(!escape.chars().any(char::is_control), "{escape:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

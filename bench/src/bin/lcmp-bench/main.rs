//! `lcmp-bench`: packet rate and latency of a forwarder on veth (root),
//! kernel against `lcmp-switch`, in alternating pairs; writes
//! `target/bench/forwarding.json`. `lcmp-bench --help` explains the method.
//! `lcmp-bench virtual-rotor` and `lcmp-bench virtual-chain` measure the
//! virtual-clock engine instead (no root).

mod heap;
mod rig;
mod stats;
mod testbeds;
mod virtual_chain;
mod virtual_hosts;
mod virtual_rotor;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Duration;

use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};
use lcmp_netlab::{release_binary, Error, Result};

use rig::{
    check_stop, log, measure_latency, measure_rate, Path2, Prog, Rig, Settings, Switch, TempDir,
};
use stats::{
    busy, median_share, per_core, per_core_ratio, ratio, round, summary_lines, Charge, PerCore,
    Report,
};

/// The method, shown by `--help` before the options (`-h` omits it).
const METHOD: &str = "\
Packet rate and latency of a forwarder on veth (needs root): the kernel
against lcmp-switch, in alternating pairs; writes target/bench/forwarding.json
(scripts/bench-forwarding.sh wraps it). The subcommands virtual-rotor and
virtual-chain measure the virtual-clock engine instead (no root; each has
its own --help).

RIG. Three namespaces lcmpt-<pid>-*-bench-{gen,dut,sink} (removed on every
exit, Ctrl-C included; leftovers of a killed run are swept):
  gen g0 198.18.0.2 --- d0 198.18.0.1 dut d1 198.18.1.1 --- s0 198.18.1.2 sink
  gen g1 198.18.2.2 ---------------------------------------- s1 198.18.2.1 sink
(device names carry the pid). g1-s1 is the direct pair: the generator's own
rate and the latency reference. Static neighbours, offloads off.

SOURCE AND SINK. The generator is the XDP live-frames generator of
lcmp-bench-tool (BPF_PROG_TEST_RUN + XDP_TX out of g0), run unpaced on a
thread pinned to --gen-cpu; one UDP flow to 198.18.1.2:9, frame sizes
without FCS. The sink is XDP_DROP on s0 (s1), counted by veth's
rx_queue_*_xdp_packets. pps = frames counted at the sink / generator time;
a rate counts only if the source offered >2% more than was forwarded,
else a WARNING line says the figure is a lower bound.

FORWARDERS (the DUT):
  kernel          IP forwarding, RPS on d0 to --fwd-cpu (its own core);
                  d0 carries XDP_PASS only to turn on veth NAPI.
  kernel_deep     the same with net.core.netdev_max_backlog = --deep-backlog
                  (global sysctl, restored on every exit path).
  kernel_inline   veth default: all inline on the generator's CPU (offered
                  = forwarded by construction; a reference).
  xdp_redirect    bpf_redirect d0 -> d1 (the platform's upper bound).
  switch          lcmp-switch lcmp --poll busy --no-emulation pinned to --fwd-cpu,
                  RX ring --switch-rx-ring. With --switch-napi threaded (the
                  default) d0's NAPI runs in a kthread (/sys/class/net/d0/
                  threaded = 1) pinned to --fwd-cpu, so the port's receive
                  (its XDP program and the copy into the AF_XDP ring) is
                  charged to the forwarding core, shared with the switch by
                  the scheduler, and not to the generator's (which is then
                  not source-bound at 1500 B); threaded-fifo also makes the
                  kthread SCHED_FIFO 1 (it preempts the busy poller when
                  frames arrive, at the risk of starving it under overload);
                  inline is the veth default (receive in the generator's
                  softirq; source-bound at 1500 B).
The kernel and the switch run in --pairs alternating pairs per size
(kernel, switch, kernel, switch, ...); each figure is the median of its
trials, with min, max, quartiles, IQR and (max-min)/median in the JSON's
`spread`; a figure whose (max-min)/median exceeds --spread-limit-pct is
listed in `spread_flagged` and gets a WARNING line. Each trial also
records where the two CPUs' time went (/proc/stat), the check that the
port's receive is charged to the forwarding core.

PER BUSY CORE (the headline). The raw pps measure the rig too: a forwarder
whose core idles while veth drops at its ring is not slower per CPU. Every
forwarder's trial also gets pps / busy cores, its busy share of the two
CPUs over the generator's run (/proc/stat), in cores:
  kernel paths    (kernel, kernel_deep, kernel_inline, xdp_redirect)
                  softirq (with hard irq) on both CPUs: they run only
                  there (with RPS, d0's receive in the generator CPU's
                  softirq, the forwarding on the forwarding CPU); the
                  generator's own work is system time, and user or system
                  time on the forwarding CPU is another process's.
  switch          the forwarding CPU's user + system + softirq (the
                  busy-polling process, its port's NAPI kthread, its
                  transmit's softirq; a busy poller keeps its core busy
                  whatever the load) + softirq on the generator CPU (the
                  port's receive with --switch-napi inline).
Both include the sink's XDP_DROP receive (veth runs it on the sender's
CPU). Another process on the forwarding CPU counts as the switch's (a busy
poller's core is never idle), not as the kernel's: on a loaded machine the
ratio understates the switch. The figure is unavailable, with the reason,
when the trial did not run, no busy time was charged, or the generator
and the switch share a CPU. The headline per size is the median over the pairs of each pair's
switch/kernel per busy core, with its spread (`headline` in the JSON,
per-forwarder figures in `per_core`); the raw switch/kernel stays beside
it as the rig's figure.

LATENCY. --probe-count UDP probes --probe-gap-us apart from gen, stamped
just before send(), to sink (kernel receive timestamp, SO_TIMESTAMPNS):
added one-way latency = delay quantile through the DUT - the same quantile
over the direct pair (p50, p99). Kernel: plain DUT (no XDP, no RPS).

TESTBEDS (lcmp-testbed). Idle CPU of one switch in event mode (without and
with a stats file); the 5-hop chain a-c1..c5-b at 1 Gbit/s with iperf3 -P 4
-b 100M, CPU s per forwarded Gbit, a process per switch (veth links), one
process (--loops=1) with veth links, with memory links and with memory
links that copy each frame (memory_links_cpu_gain_5hop: one process on
veth over memory links); the dense 2dc-3path testbed with iperf3 -P 8 (a
process per switch, one process on veth, one on memory links): goodput,
drops, transit drops/CE marks and CPU per forwarded Gbit. --testbed-runs
runs of each, alternating; medians reported.

Numbers mean nothing on a loaded machine: run it on an idle one. The
defaults finish in about 5 minutes on 2 cores.";

/// After the options, in `-h` and `--help` alike.
const AFTER_HELP: &str = "\
ENVIRONMENT:
  LCMP_SWITCH_BIN, LCMP_TESTBED_BIN  the binaries to run, else cargo build
                                     --release (with the caller's
                                     CARGO_TARGET_DIR)

EXAMPLES:
  The whole run (about 5 minutes on 2 cores), writes --out:
    sudo scripts/bench-forwarding.sh
    sudo lcmp-bench --out /tmp/forwarding.json
  The kernel/switch pairs alone at 64 B, JSON on stdout only:
    sudo lcmp-bench --only pairs --sizes 64 --pairs 3 --duration 5
  The switch alone with an extra lcmp-switch flag (one word per --switch-arg):
    sudo lcmp-bench --only switch --switch-arg=--drop-headroom=1000
  The virtual-clock engine (no root):
    lcmp-bench virtual-rotor --tors 16 --kind complete
    lcmp-bench virtual-chain --bursts 50
    lcmp-bench virtual-hosts

EXIT CODES:
  0  the run finished and printed its JSON (virtual-*: its report)
  1  not root, a tool missing, the rig, a trial or writing --out failed,
     or SIGINT/SIGTERM stopped it (after the rig was removed)
  2  bad arguments (the subcommands' too)";

#[derive(Parser, Debug)]
#[command(
    name = "lcmp-bench",
    version,
    about = "Packet rate and latency of a forwarder on veth, kernel against lcmp-switch (needs root)",
    long_about = METHOD,
    after_help = AFTER_HELP,
    // As the hand parser did: a repeated option replaces the earlier value
    // (scripts/bench-forwarding.sh appends "$@" after its own options).
    args_override_self = true,
    // The harness's options mean nothing to virtual-rotor/-chain.
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    virtual_bench: Option<VirtualBench>,
    #[command(flatten)]
    run: RunArgs,
}

// The variants are the subcommands' names (virtual-*).
#[allow(clippy::enum_variant_names)]
#[derive(Subcommand, Debug)]
enum VirtualBench {
    /// A rotor network on the virtual clock (no root).
    // virtual_rotor::parse_args owns these options (with their unit
    // grammar and checks) and its HELP: clap hands the words over as they
    // are.
    #[command(name = "virtual-rotor", override_help = virtual_rotor::HELP)]
    VirtualRotor {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// LCMP switches on the virtual clock (no root).
    #[command(name = "virtual-chain", override_help = virtual_chain::HELP)]
    VirtualChain {
        /// Bursts of 256 1000-byte frames.
        #[arg(long, value_name = "N", default_value_t = 20)]
        bursts: usize,
    },
    /// Memory per host and per queue pair of the virtual engine (no root).
    #[command(name = "virtual-hosts", override_help = virtual_hosts::HELP)]
    VirtualHosts(virtual_hosts::Opts),
}

#[derive(Args, Debug)]
struct RunArgs {
    /// Generator run per rate trial, in seconds.
    #[arg(long, value_name = "SECS", default_value = "3", value_parser = positive_secs)]
    duration: Duration,
    /// Kernel/switch pairs per size (0 runs one).
    #[arg(long, value_name = "N", default_value_t = 5)]
    pairs: usize,
    /// Frame sizes of the pairs, 42..=1514.
    // Set, not the derive's Append, so that a repeat replaces the list.
    #[arg(long, value_name = "A,B", value_delimiter = ',', action = ArgAction::Set,
          default_value = "64,1500", value_parser = frame_size)]
    sizes: Vec<usize>,
    /// Generator CPU.
    #[arg(long, value_name = "N", default_value_t = 0)]
    gen_cpu: usize,
    /// Forwarding CPU [1; the generator's on one CPU].
    #[arg(long, value_name = "N")]
    fwd_cpu: Option<usize>,
    /// Where d0's receive runs for the switch (see FORWARDERS).
    #[arg(long, value_name = "MODE", value_enum, default_value_t = Napi::Threaded)]
    switch_napi: Napi,
    /// The switch's RX ring (and 4N frames).
    #[arg(long, value_name = "N", default_value_t = 32768)]
    switch_rx_ring: u32,
    /// netdev_max_backlog of kernel_deep.
    #[arg(long, value_name = "N", default_value_t = 32768)]
    deep_backlog: u64,
    /// Extra lcmp-switch argument (repeatable; may start with '-').
    #[arg(long, value_name = "ARG", allow_hyphen_values = true)]
    switch_arg: Vec<String>,
    /// Latency probes per path.
    #[arg(long, value_name = "N", default_value_t = 3000)]
    probe_count: u64,
    /// Gap between probes in microseconds.
    #[arg(long, value_name = "US", default_value_t = 1000)]
    probe_gap_us: u64,
    /// Idle-CPU window in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 5)]
    idle_secs: u64,
    /// iperf3 time on the chain in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    chain_duration: u64,
    /// iperf3 time on 2dc-3path in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    dense_duration: u64,
    /// iperf3 -b per stream on 2dc-3path [unlimited].
    #[arg(long, value_name = "RATE")]
    dense_rate: Option<String>,
    /// Runs per testbed mode (0 runs one).
    #[arg(long, value_name = "N", default_value_t = 3)]
    testbed_runs: usize,
    /// Flag limit on (max-min)/median, in percent.
    #[arg(long, value_name = "P", default_value_t = 10.0)]
    spread_limit_pct: f64,
    /// What to run; anything but all prints the JSON and does not write --out.
    #[arg(long, value_name = "WHAT", value_enum, default_value_t = Only::All)]
    only: Only,
    /// The JSON report [target/bench/forwarding.json].
    #[arg(long, value_name = "PATH")]
    out: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Napi {
    /// d0's NAPI in a kthread pinned to --fwd-cpu.
    Threaded,
    /// The same, SCHED_FIFO 1.
    ThreadedFifo,
    /// The veth default: receive in the generator's softirq.
    Inline,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Only {
    /// Everything.
    All,
    /// The rate and latency cases, no testbeds.
    Rates,
    /// The kernel/switch pairs alone (no references, latency or testbeds).
    Pairs,
    /// The switch's pairs.
    Switch,
    /// The kernel's pairs.
    Kernel,
    /// The 5-hop chain testbed.
    Chain,
    /// The 2dc-3path testbed.
    Dense,
}

fn positive_secs(s: &str) -> std::result::Result<Duration, String> {
    let secs: f64 = s.parse().map_err(|_| "expected seconds, e.g. 3 or 0.5")?;
    if secs.is_nan() || secs <= 0.0 {
        return Err("must be positive".into());
    }
    Duration::try_from_secs_f64(secs).map_err(|e| e.to_string())
}

fn frame_size(s: &str) -> std::result::Result<usize, String> {
    match s.trim().parse() {
        Ok(n @ 42..=1514) => Ok(n),
        _ => Err("a size is 42..=1514 (an Ethernet frame without FCS)".into()),
    }
}

struct Opts {
    s: Settings,
    pairs: usize,
    sizes: Vec<usize>,
    deep_backlog: u64,
    idle_secs: u64,
    tb: testbeds::TbSettings,
    spread_limit: f64,
    only: String,
    out: PathBuf,
}

impl Opts {
    /// The run `a` asks for, with the defaults that depend on the machine
    /// (--fwd-cpu) or the checkout (--out).
    fn new(a: RunArgs) -> Opts {
        let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
        let fwd_cpu = a.fwd_cpu.unwrap_or(if ncpu < 2 { a.gen_cpu } else { 1 });
        Opts {
            s: Settings {
                duration: a.duration,
                gen_cpu: a.gen_cpu,
                fwd_cpu,
                probe_count: a.probe_count,
                probe_gap: Duration::from_micros(a.probe_gap_us),
                switch_rx_ring: a.switch_rx_ring,
                threaded_napi: a.switch_napi != Napi::Inline,
                napi_fifo: a.switch_napi == Napi::ThreadedFifo,
                switch_args: a.switch_arg.clone(),
            },
            pairs: a.pairs.max(1),
            sizes: a.sizes,
            deep_backlog: a.deep_backlog,
            idle_secs: a.idle_secs,
            tb: testbeds::TbSettings {
                chain_duration: a.chain_duration,
                dense_duration: a.dense_duration,
                runs: a.testbed_runs.max(1),
                dense_rate: a.dense_rate,
                switch_args: a.switch_arg,
            },
            spread_limit: a.spread_limit_pct,
            only: a
                .only
                .to_possible_value()
                .expect("a derived ValueEnum names every variant")
                .get_name()
                .to_string(),
            out: a
                .out
                .unwrap_or_else(|| lcmp_netlab::repo_root().join("target/bench/forwarding.json")),
        }
    }
}

/// The --switch-napi mode of the settings.
fn napi_mode(s: &Settings) -> &'static str {
    match (s.threaded_napi, s.napi_fifo) {
        (false, _) => "inline",
        (true, false) => "threaded",
        (true, true) => "threaded-fifo",
    }
}

/// The global backlog sysctl, restored on drop (it outlives namespaces).
struct Backlog(u64);

const BACKLOG: &str = "/proc/sys/net/core/netdev_max_backlog";

fn read_backlog() -> Result<u64> {
    let t = std::fs::read_to_string(BACKLOG)?;
    t.trim()
        .parse()
        .map_err(|_| Error::new(format!("{BACKLOG}: {t:?}")))
}

fn write_backlog(v: u64) -> Result<()> {
    std::fs::write(BACKLOG, v.to_string()).map_err(|e| Error::new(format!("{BACKLOG}: {e}")))
}

impl Drop for Backlog {
    fn drop(&mut self) {
        let _ = write_backlog(self.0);
    }
}

extern "C" fn on_signal(_: libc::c_int) {
    rig::STOP.store(true, Ordering::Relaxed);
}

/// SIGINT/SIGTERM only set [`rig::STOP`]: the run then unwinds through its
/// guards. Handlers reset to default in exec'd children.
fn install_signal_handlers() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the sigaction struct is zero-initialised plain data with
        // the handler set; the handler only stores to an atomic, which is
        // async-signal-safe. No SA_RESTART: a blocking call returns EINTR.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// Per-size kernel and switch trials of the pairs.
#[derive(Default)]
struct Trials {
    kernel: Vec<rig::Rate>,
    switch: Vec<Option<rig::Rate>>,
}

/// The CPU both sides run on when the generator and the forwarder share it.
fn shared_cpu(s: &Settings) -> Option<usize> {
    (s.gen_cpu == s.fwd_cpu).then_some(s.fwd_cpu)
}

/// A kernel path's trial per busy core (softirq on both CPUs).
fn kernel_per_core(s: &Settings, x: &rig::Rate) -> PerCore {
    per_core(Some(x.pps), busy(&x.cpu, Charge::Softirq, shared_cpu(s)))
}

/// A switch trial per busy core; None: the switch did not start.
fn switch_per_core(s: &Settings, x: Option<&rig::Rate>) -> PerCore {
    match x {
        Some(x) => per_core(
            Some(x.pps),
            busy(&x.cpu, Charge::ForwardingCpu, shared_cpu(s)),
        ),
        None => per_core(
            None,
            Err("the trial did not run (the switch did not start)".into()),
        ),
    }
}

fn rate_cases(o: &Opts, rig: &Rig, dir: &TempDir, r: &mut Report) -> Result<()> {
    let s = &o.s;
    let with_kernel = o.only != "switch";
    let with_switch = o.only != "kernel";
    let with_refs = o.only == "all" || o.only == "rates";
    let switch_bin = if with_switch {
        Some(release_binary(
            "lcmp-switch",
            "lcmp-switch",
            "LCMP_SWITCH_BIN",
        )?)
    } else {
        None
    };
    if with_refs {
        // The generator alone, straight into the sink (g1 -> s1).
        rig.xdp(&rig.sink, &rig.s1, Some(Prog::Drop))?;
        r.generator_pps_64 = Some(measure_rate(rig, s, "generator", 64, Path2::Direct, true)?.pps);
        r.generator_pps_1500 =
            Some(measure_rate(rig, s, "generator", 1500, Path2::Direct, true)?.pps);
        rig.xdp(&rig.sink, &rig.s1, None)?;
    }
    rig.xdp(&rig.sink, &rig.s0, Some(Prog::Drop))?;
    if with_refs {
        rig.dut_kernel(s, true)?;
        let orig = Backlog(read_backlog()?);
        write_backlog(o.deep_backlog)?;
        let d = measure_rate(rig, s, "kernel_deep", 64, Path2::Dut, false)?;
        drop(orig);
        r.kernel_deep_backlog_pps_64 = Some(d.pps);
        r.kernel_deep_backlog_forwarder_bound_64 = Some(d.forwarder_bound);
        r.add_per_core("kernel_deep_64", vec![kernel_per_core(s, &d)]);
        rig.dut_kernel(s, false)?;
        let ki = measure_rate(rig, s, "kernel_inline", 64, Path2::Dut, true)?;
        r.kernel_inline_pps_64 = Some(ki.pps);
        r.add_per_core("kernel_inline_64", vec![kernel_per_core(s, &ki)]);
        rig.dut_plain()?;
        rig.xdp(&rig.dut, &rig.d0, Some(Prog::Redirect(&rig.d1)))?;
        rig.napi_inline()?;
        let x = measure_rate(rig, s, "xdp_redirect", 64, Path2::Dut, false)?;
        r.add_per_core("xdp_redirect_64", vec![kernel_per_core(s, &x)]);
        r.xdp_redirect_pps_64 = Some(x.pps);
        r.xdp_redirect_offered_pps_64 = Some(x.offered_pps);
        r.xdp_redirect_forwarder_bound_64 = Some(x.forwarder_bound);
        rig.dut_plain()?;
    }
    // The pairs: kernel, switch, kernel, switch, ... per size.
    let mut trials: Vec<Trials> = o.sizes.iter().map(|_| Trials::default()).collect();
    for i in 0..o.pairs {
        for (k, &size) in o.sizes.iter().enumerate() {
            log(&format!("pair {}/{} at {size} B", i + 1, o.pairs));
            if with_kernel {
                rig.dut_kernel(s, true)?;
                trials[k]
                    .kernel
                    .push(measure_rate(rig, s, "kernel", size, Path2::Dut, false)?);
                rig.dut_plain()?;
            }
            if let Some(bin) = &switch_bin {
                // A switch that fails to start is a null trial, not the end
                // of the run (the kernel figures still count).
                let t = match Switch::start(rig, s, bin, "busy", true, &dir.0) {
                    Ok(sw) => {
                        let m = measure_rate(rig, s, "switch", size, Path2::Dut, false);
                        sw.stop();
                        Some(m?)
                    }
                    Err(e) => {
                        check_stop()?;
                        log(&format!("WARNING: switch trial skipped: {e}"));
                        None
                    }
                };
                trials[k].switch.push(t);
            }
        }
    }
    let napi = napi_mode(s);
    for (k, &size) in o.sizes.iter().enumerate() {
        let t = &trials[k];
        let kp: Vec<Option<f64>> = t.kernel.iter().map(|x| Some(x.pps)).collect();
        let ko: Vec<Option<f64>> = t.kernel.iter().map(|x| Some(x.offered_pps)).collect();
        let sp: Vec<Option<f64>> = t.switch.iter().map(|x| x.map(|x| x.pps)).collect();
        let km = r.add_spread(&format!("kernel_pps_{size}"), &kp);
        let kom = r.add_spread(&format!("kernel_offered_pps_{size}"), &ko);
        let sm = r.add_spread(&format!("switch_pps_{size}"), &sp);
        // Conservative: the kernel figure is the forwarder's only if every
        // trial was forwarder-bound.
        let kb = (!t.kernel.is_empty()).then(|| t.kernel.iter().all(|x| x.forwarder_bound));
        let pr: Vec<Option<f64>> = if with_kernel && with_switch {
            kp.iter().zip(&sp).map(|(k, s)| ratio(*s, *k)).collect()
        } else {
            Vec::new()
        };
        r.add_spread(&format!("switch_to_kernel_{size}_pair_ratio"), &pr);
        let kc: Vec<_> = t.kernel.iter().map(|x| x.cpu).collect();
        let sc: Vec<_> = t.switch.iter().flatten().map(|x| x.cpu).collect();
        if let Some(c) = median_share(&kc) {
            r.kernel_cpu_share.insert(size.to_string(), c);
        }
        if let Some(c) = median_share(&sc) {
            r.switch_cpu_share.insert(size.to_string(), c);
        }
        let ratio_m = ratio(sm, km);
        match size {
            64 => {
                (
                    r.kernel_pps_64,
                    r.kernel_offered_pps_64,
                    r.kernel_forwarder_bound_64,
                ) = (km, kom, kb);
                r.switch_pps_64 = sm;
                r.kernel_pps_64_trials = kp.clone();
                r.switch_pps_64_trials = sp.clone();
                r.switch_to_kernel_64 = ratio_m;
                r.switch_to_kernel_64_pair_ratios = pr;
            }
            1500 => {
                (
                    r.kernel_pps_1500,
                    r.kernel_offered_pps_1500,
                    r.kernel_forwarder_bound_1500,
                ) = (km, kom, kb);
                r.switch_pps_1500 = sm;
                r.kernel_pps_1500_trials = kp.clone();
                r.switch_pps_1500_trials = sp.clone();
                r.switch_to_kernel_1500 = ratio_m;
                r.switch_to_kernel_1500_pair_ratios = pr;
            }
            _ => {}
        }
        // Per busy core: the forwarders' own figure (the raw one also
        // counts what the rig lets through, e.g. drops at a veth ring while
        // the kernel's core idles).
        let kpc: Vec<PerCore> = t.kernel.iter().map(|x| kernel_per_core(s, x)).collect();
        let spc: Vec<PerCore> = t
            .switch
            .iter()
            .map(|x| switch_per_core(s, x.as_ref()))
            .collect();
        let pairs: Vec<std::result::Result<f64, String>> = if with_kernel && with_switch {
            spc.iter()
                .zip(&kpc)
                .map(|(s, k)| per_core_ratio(s, k))
                .collect()
        } else {
            Vec::new()
        };
        let kf = with_kernel.then(|| r.add_per_core(&format!("kernel_{size}"), kpc));
        let sf = with_switch.then(|| r.add_per_core(&format!("switch_{size}"), spc));
        let h = r.add_headline(size, &pairs, ratio_m);
        let f = |v: Option<f64>| v.map_or("null".into(), |x| format!("{x}"));
        log(&format!(
            "{size} B medians of {}: kernel {} pps {kp:?}, switch {} pps ({napi} NAPI) {sp:?}; raw switch/kernel {} (the rig's figure)",
            o.pairs,
            f(km),
            f(sm),
            f(ratio_m)
        ));
        let pc = |x: &Option<stats::PerCoreFigure>| {
            x.as_ref().map_or("null".into(), |x| {
                format!(
                    "{} pps/core at {} cores",
                    f(x.pps_per_busy_core),
                    f(x.busy_cores)
                )
            })
        };
        log(&format!(
            "{size} B per busy core: kernel {}, switch {}; switch/kernel per busy core {} {:?} (headline)",
            pc(&kf),
            pc(&sf),
            f(h.switch_to_kernel_per_busy_core),
            h.pair_ratios
        ));
    }
    rig.xdp(&rig.sink, &rig.s0, None)?;
    if with_refs {
        rig.dut.sysctl(&["net.ipv4.ip_forward=1"])?;
        (r.kernel_latency_p50_us, r.kernel_latency_p99_us) = measure_latency(rig, s, "kernel")?;
        rig.dut_plain()?;
        if let Some(bin) = &switch_bin {
            let sw = Switch::start(rig, s, bin, "busy", true, &dir.0)?;
            (r.switch_latency_p50_us, r.switch_latency_p99_us) = measure_latency(rig, s, "switch")?;
            sw.stop();
        }
    }
    Ok(())
}

fn run(o: &Opts) -> Result<Report> {
    let mut r = Report {
        duration_s: o.s.duration.as_secs_f64(),
        generator: format!(
            "lcmp-bench-tool gen (XDP live frames, 1 thread on CPU {})",
            o.s.gen_cpu
        ),
        forwarding_cpu: o.s.fwd_cpu,
        switch_rx_ring: o.s.switch_rx_ring,
        kernel_netdev_max_backlog: read_backlog()?,
        pairs: o.pairs,
        sizes: o.sizes.clone(),
        generator_cpu: o.s.gen_cpu,
        switch_rx_napi: napi_mode(&o.s).into(),
        spread_limit_pct: o.spread_limit,
        busy_cores_method: stats::BUSY_CORES_METHOD.into(),
        ..Report::default()
    };
    let dir = TempDir::new("work")?;
    if matches!(
        o.only.as_str(),
        "all" | "rates" | "pairs" | "switch" | "kernel"
    ) {
        let rig = Rig::new()?;
        log(&format!(
            "namespaces {} / {} / {}; {:?} per trial, {} pairs of sizes {:?}; generator on CPU {}, forwarding core CPU {}, switch NAPI {}",
            rig.gen.name(), rig.dut.name(), rig.sink.name(), o.s.duration, o.pairs, o.sizes, o.s.gen_cpu, o.s.fwd_cpu, r.switch_rx_napi
        ));
        rate_cases(o, &rig, &dir, &mut r)?;
        if o.only == "all" {
            let bin = release_binary("lcmp-switch", "lcmp-switch", "LCMP_SWITCH_BIN")?;
            r.idle_cpu_percent_event_mode =
                testbeds::idle_cpu(&rig, &o.s, &bin, false, o.idle_secs, &dir.0)?;
            r.idle_cpu_percent_event_mode_stats_file =
                testbeds::idle_cpu(&rig, &o.s, &bin, true, o.idle_secs, &dir.0)?;
            let f = |v: Option<f64>| v.map_or("null".into(), |x| x.to_string());
            log(&format!(
                "idle CPU of lcmp-switch in event mode: {}% of one core ({}% with a stats file)",
                f(r.idle_cpu_percent_event_mode),
                f(r.idle_cpu_percent_event_mode_stats_file)
            ));
        }
    }
    if matches!(o.only.as_str(), "all" | "chain" | "dense") {
        let tb = release_binary("lcmp-testbed", "lcmp-testbed", "LCMP_TESTBED_BIN")?;
        if o.only != "dense" {
            use testbeds::Mode;
            let modes = [
                Mode::Processes,
                Mode::OneProcess,
                Mode::MemoryLinks,
                Mode::MemoryLinksCopy,
            ];
            let runs = testbeds::chain_cases(&tb, &o.tb, &dir.0, &modes)?;
            let medians: Vec<Option<f64>> = modes
                .iter()
                .zip(&runs)
                .map(|(m, trials)| {
                    r.add_spread(&format!("cpu_s_per_gbit_5hop_{}", m.suffix()), trials)
                })
                .collect();
            let mut runs = runs.into_iter();
            let mut trials = || runs.next().unwrap_or_default();
            (
                r.cpu_s_per_gbit_5hop_processes,
                r.cpu_s_per_gbit_5hop_processes_trials,
            ) = (medians[0], trials());
            (
                r.cpu_s_per_gbit_5hop_one_process,
                r.cpu_s_per_gbit_5hop_one_process_trials,
            ) = (medians[1], trials());
            (
                r.cpu_s_per_gbit_5hop_memory_links,
                r.cpu_s_per_gbit_5hop_memory_links_trials,
            ) = (medians[2], trials());
            (
                r.cpu_s_per_gbit_5hop_memory_links_copy,
                r.cpu_s_per_gbit_5hop_memory_links_copy_trials,
            ) = (medians[3], trials());
            r.memory_links_cpu_gain_5hop = ratio(
                r.cpu_s_per_gbit_5hop_one_process,
                r.cpu_s_per_gbit_5hop_memory_links,
            );
        }
        if o.only != "chain" {
            use testbeds::Mode;
            let modes = [Mode::Processes, Mode::OneProcess, Mode::MemoryLinks];
            let runs = testbeds::dense_cases(&tb, &o.tb, &modes)?;
            let mut med = |m: Mode, i: usize| {
                let k = modes.iter().position(|x| *x == m).expect("a mode run");
                let v: Vec<Option<f64>> = runs[k].iter().map(|x| x.map(|d| d[i])).collect();
                r.add_spread(
                    &format!("{}_2dc_{}", testbeds::DENSE_KEYS[i], m.suffix()),
                    &v,
                )
            };
            let m: Vec<[Option<f64>; 3]> = (0..6)
                .map(|i| {
                    [
                        med(Mode::Processes, i),
                        med(Mode::OneProcess, i),
                        med(Mode::MemoryLinks, i),
                    ]
                })
                .collect();
            [
                r.goodput_gbps_2dc_processes,
                r.goodput_gbps_2dc_one_process,
                r.goodput_gbps_2dc_memory_links,
            ] = m[0];
            [
                r.tx_ring_full_per_gbit_2dc_processes,
                r.tx_ring_full_per_gbit_2dc_one_process,
                r.tx_ring_full_per_gbit_2dc_memory_links,
            ] = m[1];
            [
                r.drops_per_gbit_2dc_processes,
                r.drops_per_gbit_2dc_one_process,
                r.drops_per_gbit_2dc_memory_links,
            ] = m[2];
            [
                r.transit_drops_per_gbit_2dc_processes,
                r.transit_drops_per_gbit_2dc_one_process,
                r.transit_drops_per_gbit_2dc_memory_links,
            ] = m[3];
            [
                r.transit_ce_marks_per_gbit_2dc_processes,
                r.transit_ce_marks_per_gbit_2dc_one_process,
                r.transit_ce_marks_per_gbit_2dc_memory_links,
            ] = m[4];
            [
                r.cpu_s_per_gbit_2dc_processes,
                r.cpu_s_per_gbit_2dc_one_process,
                r.cpu_s_per_gbit_2dc_memory_links,
            ] = m[5];
            r.memory_links_cpu_gain_2dc = ratio(
                r.cpu_s_per_gbit_2dc_one_process,
                r.cpu_s_per_gbit_2dc_memory_links,
            );
        }
    }
    for name in &r.spread_flagged {
        let s = &r.spread[name];
        log(&format!(
            "WARNING: {name}: spread {}% of the median (min {}, median {}, max {}, n {}) exceeds {}%: not a stable figure",
            s.range_pct,
            round(s.min, 3),
            round(s.median, 3),
            round(s.max, 3),
            s.n,
            o.spread_limit
        ));
    }
    // The summary last, where it is read: the testbeds' logs come before.
    if !r.headline.is_empty() || !r.per_core.is_empty() {
        log("summary (the headline is switch/kernel per busy core; busy cores: --help):");
        for l in summary_lines(&r) {
            log(&format!("  {l}"));
        }
    }
    Ok(r)
}

/// Counts live heap bytes for the virtual-clock benchmarks' memory figures.
#[global_allocator]
static ALLOC: heap::Counting = heap::Counting;

/// `lcmp-bench virtual-*`: virtual-rotor's options parsed (exit 2 when
/// they are wrong, as for the harness), the benchmark run.
fn virtual_bench(bench: VirtualBench) -> ExitCode {
    let (name, result) = match bench {
        VirtualBench::VirtualRotor { args } => match virtual_rotor::parse_args(&args) {
            Ok(Some(o)) => ("virtual-rotor", virtual_rotor::main(&o)),
            // --help after other words, which clap passed on.
            Ok(None) => {
                println!("{}", virtual_rotor::HELP);
                return ExitCode::SUCCESS;
            }
            Err(e) => {
                eprintln!("lcmp-bench virtual-rotor: {e} (see --help)");
                return ExitCode::from(2);
            }
        },
        VirtualBench::VirtualChain { bursts } => ("virtual-chain", virtual_chain::main(bursts)),
        VirtualBench::VirtualHosts(o) => ("virtual-hosts", virtual_hosts::main(&o)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lcmp-bench {name}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let cli: Cli = match lcmp_topology::cli::parse_or_exit("lcmp-bench") {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    if let Some(bench) = cli.virtual_bench {
        return virtual_bench(bench);
    }
    let o = Opts::new(cli.run);
    if !lcmp_netlab::is_root() {
        eprintln!("lcmp-bench: needs root (network namespaces, XDP)");
        return ExitCode::FAILURE;
    }
    let need: &[&str] = match o.only.as_str() {
        "chain" | "dense" => &["ip", "iperf3"],
        "all" => &["ip", "ethtool", "taskset", "iperf3"],
        _ => &["ip", "ethtool", "taskset"],
    };
    let missing = lcmp_netlab::missing_tools(need);
    if !missing.is_empty() {
        eprintln!(
            "lcmp-bench: missing {}: run scripts/install-deps.sh",
            missing.join(", ")
        );
        return ExitCode::FAILURE;
    }
    install_signal_handlers();
    let report = match run(&o) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("lcmp-bench: {e}");
            return ExitCode::FAILURE;
        }
    };
    let json = match serde_json::to_string_pretty(&report) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("lcmp-bench: JSON: {e}");
            return ExitCode::FAILURE;
        }
    };
    if o.only == "all" {
        if let Some(d) = o.out.parent() {
            let _ = std::fs::create_dir_all(d);
        }
        if let Err(e) = std::fs::write(&o.out, format!("{json}\n")) {
            eprintln!("lcmp-bench: {}: {e}", o.out.display());
            return ExitCode::FAILURE;
        }
        log(&format!("wrote {}", o.out.display()));
    }
    println!("{json}");
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(args: &[&str]) -> std::result::Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("lcmp-bench").chain(args.iter().copied()))
    }

    fn opts(args: &[&str]) -> Opts {
        let cli = parse(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        assert!(cli.virtual_bench.is_none(), "{args:?}");
        Opts::new(cli.run)
    }

    /// The arguments scripts/bench-forwarding.sh passes to lcmp-bench for
    /// `env` and `extra` ("$@"): the script run as it is, with a stand-in
    /// for the release binary that prints them, one per line.
    fn script_args(env: &[(&str, &str)], extra: &[&str]) -> Vec<String> {
        let root = lcmp_netlab::repo_root();
        let dir = std::env::temp_dir().join(format!("lcmp-bench-args-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("release")).unwrap();
        let fake = dir.join("release/lcmp-bench");
        std::fs::write(
            &fake,
            "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done\n",
        )
        .unwrap();
        std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let out = std::process::Command::new("bash")
            .arg(root.join("scripts/bench-forwarding.sh"))
            .args(extra)
            // Only what the test sets: a caller's DURATION etc. must not leak in.
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("SKIP_BUILD", "1")
            .env("CARGO_TARGET_DIR", &dir)
            .envs(env.iter().copied())
            .output()
            .unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(String::from)
            .collect()
    }

    #[test]
    fn every_option_bench_forwarding_sh_passes_parses() {
        Cli::command().debug_assert();
        let args = script_args(
            &[
                ("DURATION", "2.5"),
                ("PAIRS", "7"),
                ("GEN_CPU", "1"),
                ("FWD_CPU", "0"),
                ("PROBE_COUNT", "100"),
                ("PROBE_GAP_US", "250"),
                ("SWITCH_RX_RING", "4096"),
                ("DEEP_BACKLOG", "1000"),
                ("SWITCH_ARGS", "--loops=1 --policy ecmp"),
                ("CHAIN_DURATION", "4"),
                ("DENSE_DURATION", "6"),
                ("DENSE_RATE", "200M"),
                ("CHAIN_RUNS", "2"),
                ("OUT", "/tmp/f.json"),
                ("ONLY_SWITCH", "1"),
                ("ONLY_KERNEL", "1"),
            ],
            // "$@" comes last: its --pairs replaces PAIRS's.
            &["--sizes", "64, 1500,128", "--pairs", "2"],
        );
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        assert!(
            argv.contains(&"--only") && argv.contains(&"pairs"),
            "{argv:?}"
        );
        let o = opts(&argv);
        assert_eq!(o.s.duration, Duration::from_millis(2500));
        assert_eq!(o.pairs, 2);
        assert_eq!(o.sizes, [64, 1500, 128]);
        assert_eq!((o.s.gen_cpu, o.s.fwd_cpu), (1, 0));
        assert_eq!(o.s.probe_count, 100);
        assert_eq!(o.s.probe_gap, Duration::from_micros(250));
        assert_eq!(o.s.switch_rx_ring, 4096);
        assert_eq!(o.deep_backlog, 1000);
        let switch_args = ["--loops=1", "--policy", "ecmp"];
        assert_eq!(o.s.switch_args, switch_args);
        assert_eq!(o.tb.switch_args, switch_args);
        assert_eq!((o.tb.chain_duration, o.tb.dense_duration), (4, 6));
        assert_eq!(o.tb.dense_rate.as_deref(), Some("200M"));
        assert_eq!(o.tb.runs, 2);
        assert_eq!(o.out, PathBuf::from("/tmp/f.json"));
        assert_eq!(o.only, "pairs");
        // Not set: the defaults.
        assert_eq!((o.s.threaded_napi, o.s.napi_fifo), (true, false));
        assert_eq!((o.idle_secs, o.spread_limit), (5, 10.0));

        for (var, only) in [
            ("ONLY_SWITCH", "switch"),
            ("ONLY_KERNEL", "kernel"),
            ("ONLY_CHAIN", "chain"),
            ("ONLY_DENSE", "dense"),
        ] {
            let args = script_args(&[(var, "1")], &[]);
            assert_eq!(args, ["--only", only]);
            assert_eq!(opts(&[&args[0], &args[1]]).only, only);
        }
    }

    #[test]
    fn defaults_are_the_documented_ones() {
        let o = opts(&[]);
        assert_eq!(o.s.duration, Duration::from_secs(3));
        assert_eq!((o.pairs, o.sizes.as_slice()), (5, &[64, 1500][..]));
        let one_cpu = std::thread::available_parallelism().map_or(1, |n| n.get()) < 2;
        assert_eq!((o.s.gen_cpu, o.s.fwd_cpu), (0, if one_cpu { 0 } else { 1 }));
        assert_eq!((o.s.switch_rx_ring, o.deep_backlog), (32768, 32768));
        assert_eq!((o.s.threaded_napi, o.s.napi_fifo), (true, false));
        assert!(o.s.switch_args.is_empty());
        assert_eq!(o.s.probe_count, 3000);
        assert_eq!(o.s.probe_gap, Duration::from_millis(1));
        assert_eq!(o.idle_secs, 5);
        assert_eq!((o.tb.chain_duration, o.tb.dense_duration), (10, 10));
        assert_eq!((o.tb.dense_rate, o.tb.runs), (None, 3));
        assert_eq!((o.spread_limit, o.only.as_str()), (10.0, "all"));
        assert_eq!(
            o.out,
            lcmp_netlab::repo_root().join("target/bench/forwarding.json")
        );
    }

    #[test]
    fn values_keep_the_hand_parsers_meaning() {
        // --key=value, a repeat replaces (the list too), 0 pairs/runs run one.
        let o = opts(&[
            "--sizes=1500",
            "--sizes",
            "42,1514",
            "--pairs=0",
            "--testbed-runs",
            "0",
            "--switch-napi",
            "threaded-fifo",
            "--spread-limit-pct",
            "12.5",
            "--idle-secs",
            "1",
            "--switch-arg",
            "-v",
            "--switch-arg=--batch=8",
        ]);
        assert_eq!(o.sizes, [42, 1514]);
        assert_eq!((o.pairs, o.tb.runs), (1, 1));
        assert_eq!((o.s.threaded_napi, o.s.napi_fifo), (true, true));
        assert_eq!((o.spread_limit, o.idle_secs), (12.5, 1));
        assert_eq!(o.s.switch_args, ["-v", "--batch=8"]);
        let o = opts(&["--switch-napi", "inline", "--only", "rates"]);
        assert_eq!((o.s.threaded_napi, o.only.as_str()), (false, "rates"));

        for bad in [
            &["--duration", "0"][..],
            &["--duration", "nan"],
            &["--sizes", "64,41"],
            &["--sizes", "1515"],
            &["--switch-napi", "busy"],
            &["--only", "latency"],
            &["--pairs"],
            &["--nope", "1"],
            &["word"],
            &["--pairs", "3", "virtual-chain"],
        ] {
            let e = parse(bad).err().unwrap_or_else(|| panic!("{bad:?} parsed"));
            assert_eq!(e.exit_code(), 2, "{bad:?}");
            assert!(
                !lcmp_topology::cli::clap_error_line(&e).contains('\n'),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn the_virtual_benches_get_their_words() {
        let words = "--tors 16 --slot 100us --rate=1Gbps --kind complete";
        let mut argv = vec!["virtual-rotor"];
        argv.extend(words.split_whitespace());
        let Some(VirtualBench::VirtualRotor { args }) = parse(&argv).unwrap().virtual_bench else {
            panic!("not virtual-rotor")
        };
        assert_eq!(args, words.split_whitespace().collect::<Vec<_>>());
        let o = virtual_rotor::parse_args(&args).unwrap().unwrap();
        assert_eq!((o.tors, o.slot_ns, o.mars), (16, 100_000, false));

        for (argv, want) in [
            (&["virtual-chain"][..], 20),
            (&["virtual-chain", "--bursts", "50"], 50),
            (&["virtual-chain", "--bursts=3"], 3),
        ] {
            let Some(VirtualBench::VirtualChain { bursts }) = parse(argv).unwrap().virtual_bench
            else {
                panic!("{argv:?}: not virtual-chain")
            };
            assert_eq!(bursts, want, "{argv:?}");
        }
        let e = parse(&["virtual-chain", "--help"]).err().unwrap();
        assert_eq!(e.kind(), clap::error::ErrorKind::DisplayHelp);
        assert!(e.to_string().starts_with(virtual_chain::HELP));
        let e = parse(&["virtual-rotor", "--help"]).err().unwrap();
        assert!(e.to_string().starts_with(virtual_rotor::HELP));
    }
}

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
mod virtual_rotor;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Duration;

use lcmp_netlab::{release_binary, Error, Result};

use rig::{
    check_stop, log, measure_latency, measure_rate, Path2, Prog, Rig, Settings, Switch, TempDir,
};
use stats::{
    busy, median_share, per_core, per_core_ratio, ratio, round, summary_lines, Charge, PerCore,
    Report,
};

const HELP: &str = "\
lcmp-bench: packet rate and latency of a forwarder on veth (needs root)

USAGE: lcmp-bench [OPTIONS]          (scripts/bench-forwarding.sh wraps it)
       lcmp-bench virtual-rotor ...  a rotor network on the virtual clock
       lcmp-bench virtual-chain ...  LCMP switches on the virtual clock
                                     (no root; each has its own --help)

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

Numbers mean nothing on a loaded machine: run it on an idle one.

OPTIONS (defaults finish in about 5 minutes on 2 cores):
  --duration SECS        generator run per rate trial [3]
  --pairs N              kernel/switch pairs per size [5]
  --sizes A,B            frame sizes of the pairs (42..=1514) [64,1500]
  --gen-cpu N            generator CPU [0]
  --fwd-cpu N            forwarding CPU [1; the generator's on one CPU]
  --switch-napi MODE     threaded | threaded-fifo | inline [threaded]
  --switch-rx-ring N     the switch's RX ring (and 4N frames) [32768]
  --deep-backlog N       netdev_max_backlog of kernel_deep [32768]
  --switch-arg ARG       extra lcmp-switch argument (repeatable)
  --probe-count N        latency probes per path [3000]
  --probe-gap-us US      gap between probes [1000]
  --idle-secs SECS       idle-CPU window [5]
  --chain-duration SECS  iperf3 time on the chain [10]
  --dense-duration SECS  iperf3 time on 2dc-3path [10]
  --dense-rate RATE      iperf3 -b per stream on 2dc-3path [unlimited]
  --testbed-runs N       runs per testbed mode [3]
  --spread-limit-pct P   flag limit on (max-min)/median [10]
  --only WHAT            all | rates | pairs | switch | kernel | chain |
                         dense [all]; pairs: the kernel/switch pairs alone
                         (no references, latency or testbeds); anything
                         but all prints the JSON and does not write --out
  --out PATH             [target/bench/forwarding.json]
  -h, --help             this text
Binaries: $LCMP_SWITCH_BIN / $LCMP_TESTBED_BIN, else cargo build --release
(with the caller's CARGO_TARGET_DIR).";

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

fn parse_args(args: &[String]) -> std::result::Result<Option<Opts>, String> {
    let mut kv: HashMap<&str, String> = HashMap::new();
    let mut switch_args = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "-h" || a == "--help" {
            return Ok(None);
        }
        let Some(k) = a.strip_prefix("--") else {
            return Err(format!("unexpected argument {a:?}"));
        };
        let (k, inline) = match k.split_once('=') {
            Some((k, v)) => (k, Some(v.to_string())),
            None => (k, None),
        };
        const KEYS: [&str; 18] = [
            "duration",
            "pairs",
            "sizes",
            "gen-cpu",
            "fwd-cpu",
            "switch-napi",
            "switch-rx-ring",
            "deep-backlog",
            "switch-arg",
            "probe-count",
            "probe-gap-us",
            "idle-secs",
            "chain-duration",
            "dense-duration",
            "dense-rate",
            "testbed-runs",
            "spread-limit-pct",
            "only",
        ];
        if !KEYS.contains(&k) && k != "out" {
            return Err(format!("unknown option --{k}"));
        }
        let v = match inline {
            Some(v) => v,
            None => it
                .next()
                .ok_or_else(|| format!("--{k} needs a value"))?
                .clone(),
        };
        if k == "switch-arg" {
            switch_args.push(v);
        } else {
            kv.insert(k, v);
        }
    }
    fn get<T: std::str::FromStr>(
        kv: &HashMap<&str, String>,
        k: &str,
        d: T,
    ) -> std::result::Result<T, String> {
        kv.get(k)
            .map_or(Ok(d), |v| v.parse().map_err(|_| format!("bad --{k} {v:?}")))
    }
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
    let gen_cpu = get(&kv, "gen-cpu", 0usize)?;
    let fwd_cpu = get(&kv, "fwd-cpu", if ncpu < 2 { gen_cpu } else { 1 })?;
    let sizes: Vec<usize> = match kv.get("sizes") {
        Some(v) => v
            .split(',')
            .map(|x| x.trim().parse().map_err(|_| format!("bad size {x:?}")))
            .collect::<std::result::Result<_, _>>()?,
        None => vec![64, 1500],
    };
    if let Some(bad) = sizes.iter().find(|s| !(42..=1514).contains(*s)) {
        return Err(format!("--sizes: {bad} is not 42..=1514"));
    }
    let napi = kv.get("switch-napi").map_or("threaded", String::as_str);
    if !["threaded", "threaded-fifo", "inline"].contains(&napi) {
        return Err(format!(
            "--switch-napi must be threaded, threaded-fifo or inline, not {napi:?}"
        ));
    }
    let only = kv.get("only").cloned().unwrap_or_else(|| "all".into());
    if ![
        "all", "rates", "pairs", "switch", "kernel", "chain", "dense",
    ]
    .contains(&only.as_str())
    {
        return Err(format!("--only: unknown {only:?}"));
    }
    let pairs = get(&kv, "pairs", 5usize)?.max(1);
    let duration = get(&kv, "duration", 3.0f64)?;
    if duration.is_nan() || duration <= 0.0 {
        return Err("--duration must be positive".into());
    }
    Ok(Some(Opts {
        s: Settings {
            duration: Duration::from_secs_f64(duration),
            gen_cpu,
            fwd_cpu,
            probe_count: get(&kv, "probe-count", 3000u64)?,
            probe_gap: Duration::from_micros(get(&kv, "probe-gap-us", 1000u64)?),
            switch_rx_ring: get(&kv, "switch-rx-ring", 32768u32)?,
            threaded_napi: napi != "inline",
            napi_fifo: napi == "threaded-fifo",
            switch_args: switch_args.clone(),
        },
        pairs,
        sizes,
        deep_backlog: get(&kv, "deep-backlog", 32768u64)?,
        idle_secs: get(&kv, "idle-secs", 5u64)?,
        tb: testbeds::TbSettings {
            chain_duration: get(&kv, "chain-duration", 10u64)?,
            dense_duration: get(&kv, "dense-duration", 10u64)?,
            runs: get(&kv, "testbed-runs", 3usize)?.max(1),
            dense_rate: kv.get("dense-rate").cloned(),
            switch_args,
        },
        spread_limit: get(&kv, "spread-limit-pct", 10.0f64)?,
        only,
        out: kv.get("out").map_or_else(
            || lcmp_netlab::repo_root().join("target/bench/forwarding.json"),
            PathBuf::from,
        ),
    }))
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

/// `lcmp-bench virtual-*`: `--help` printed, options parsed (exit 2 when
/// they are wrong, as for the harness), the benchmark run.
fn virtual_bench(name: &str, args: &[String]) -> ExitCode {
    enum Bench {
        Rotor(virtual_rotor::Options),
        Chain(usize),
    }
    let parsed = match name {
        "virtual-rotor" => virtual_rotor::parse_args(args).map(|o| o.map(Bench::Rotor)),
        _ => match args {
            [] => Ok(Some(Bench::Chain(20))),
            [h] if h == "-h" || h == "--help" => Ok(None),
            [k, v] if k == "--bursts" => v
                .parse()
                .map(|n| Some(Bench::Chain(n)))
                .map_err(|_| format!("bad --bursts {v:?}")),
            _ => Err(format!("unexpected arguments {args:?}")),
        },
    };
    let result = match parsed {
        Ok(Some(Bench::Rotor(o))) => virtual_rotor::main(&o),
        Ok(Some(Bench::Chain(bursts))) => virtual_chain::main(bursts),
        Ok(None) => {
            let help = match name {
                "virtual-rotor" => virtual_rotor::HELP,
                _ => virtual_chain::HELP,
            };
            println!("{help}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("lcmp-bench {name}: {e} (see --help)");
            return ExitCode::from(2);
        }
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
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(name @ ("virtual-rotor" | "virtual-chain")) = args.first().map(String::as_str) {
        return virtual_bench(name, &args[1..]);
    }
    let o = match parse_args(&args) {
        Ok(Some(o)) => o,
        Ok(None) => {
            println!("{HELP}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("lcmp-bench: {e} (see --help)");
            return ExitCode::from(2);
        }
    };
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

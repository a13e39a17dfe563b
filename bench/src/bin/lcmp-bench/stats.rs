//! The pure part of the harness: medians and spreads of repeated trials,
//! the spread flag, and the JSON report (field names are a contract with
//! readers of `target/bench/forwarding.json`).

use lcmp_stats::{quantile_sorted, sorted_finite};
use serde::Serialize;

/// Median and spread of one figure's trials.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Spread {
    /// Number of trials (nulls excluded).
    pub n: usize,
    /// Median (the mean of the two middle values for an even count).
    pub median: f64,
    /// Smallest trial.
    pub min: f64,
    /// Largest trial.
    pub max: f64,
    /// First and third quartiles (linear interpolation between order
    /// statistics, as numpy's default).
    pub q1: f64,
    pub q3: f64,
    /// q3 - q1 relative to the median, percent.
    pub iqr_pct: f64,
    /// max / min (null when min is 0).
    pub max_over_min: Option<f64>,
    /// (max - min) relative to the median, percent: the figure the flag
    /// tests, because with a handful of trials one outlier is exactly what
    /// makes a single comparison misleading.
    pub range_pct: f64,
    /// range_pct exceeds the limit: the median is not a stable figure.
    pub flagged: bool,
}

/// Median and spread of `trials` (None entries ignored); None if no trial
/// has a value. Flagged when (max - min) / median exceeds `limit_pct`.
pub fn spread(trials: &[Option<f64>], limit_pct: f64) -> Option<Spread> {
    let v = sorted_finite(&trials.iter().flatten().copied().collect::<Vec<f64>>());
    let q = |p| quantile_sorted(&v, p);
    let (median, min, max) = (q(0.5)?, q(0.0)?, q(1.0)?);
    let (q1, q3) = (q(0.25)?, q(0.75)?);
    let rel = |x: f64| {
        if median != 0.0 {
            100.0 * x / median.abs()
        } else if x == 0.0 {
            0.0
        } else {
            f64::INFINITY
        }
    };
    let range_pct = rel(max - min);
    Some(Spread {
        n: v.len(),
        median,
        min,
        max,
        q1,
        q3,
        iqr_pct: round(rel(q3 - q1), 1),
        max_over_min: (min > 0.0).then(|| round(max / min, 3)),
        range_pct: round(range_pct, 1),
        flagged: range_pct > limit_pct,
    })
}

/// `x` rounded to `digits` decimals.
pub fn round(x: f64, digits: i32) -> f64 {
    let m = 10f64.powi(digits);
    (x * m).round() / m
}

/// Everything the harness writes. After `headline`, the first block of
/// fields (down to the 2dc figures) are the ones
/// `scripts/bench-forwarding.sh` wrote, with the same names and meanings;
/// the rest are new. Option fields are `null` when a case did not run or
/// failed.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// First so that it leads the file (new): by frame size (numeric order;
    /// the JSON keys are strings), switch/kernel pps per busy core, median
    /// and spread over the pairs, with the raw ratio beside it as the rig's
    /// figure.
    pub headline: std::collections::BTreeMap<usize, Headline>,
    pub duration_s: f64,
    pub generator: String,
    pub forwarding_cpu: usize,
    pub switch_rx_ring: u32,
    pub kernel_netdev_max_backlog: u64,
    pub generator_pps_64: Option<f64>,
    pub generator_pps_1500: Option<f64>,
    pub kernel_pps_64: Option<f64>,
    pub kernel_offered_pps_64: Option<f64>,
    pub kernel_forwarder_bound_64: Option<bool>,
    pub kernel_pps_1500: Option<f64>,
    pub kernel_offered_pps_1500: Option<f64>,
    pub kernel_forwarder_bound_1500: Option<bool>,
    pub kernel_deep_backlog_pps_64: Option<f64>,
    pub kernel_deep_backlog_forwarder_bound_64: Option<bool>,
    pub kernel_inline_pps_64: Option<f64>,
    pub xdp_redirect_pps_64: Option<f64>,
    pub xdp_redirect_offered_pps_64: Option<f64>,
    pub xdp_redirect_forwarder_bound_64: Option<bool>,
    pub kernel_latency_p50_us: Option<f64>,
    pub kernel_latency_p99_us: Option<f64>,
    pub switch_pps_64: Option<f64>,
    pub switch_pps_1500: Option<f64>,
    pub switch_latency_p50_us: Option<f64>,
    pub switch_latency_p99_us: Option<f64>,
    pub kernel_pps_64_trials: Vec<Option<f64>>,
    pub switch_pps_64_trials: Vec<Option<f64>>,
    pub switch_to_kernel_64: Option<f64>,
    pub idle_cpu_percent_event_mode: Option<f64>,
    pub idle_cpu_percent_event_mode_stats_file: Option<f64>,
    pub cpu_s_per_gbit_5hop_processes: Option<f64>,
    pub cpu_s_per_gbit_5hop_one_process: Option<f64>,
    pub cpu_s_per_gbit_5hop_processes_trials: Vec<Option<f64>>,
    pub cpu_s_per_gbit_5hop_one_process_trials: Vec<Option<f64>>,
    pub goodput_gbps_2dc_processes: Option<f64>,
    pub goodput_gbps_2dc_one_process: Option<f64>,
    pub tx_ring_full_per_gbit_2dc_processes: Option<f64>,
    pub tx_ring_full_per_gbit_2dc_one_process: Option<f64>,
    pub drops_per_gbit_2dc_processes: Option<f64>,
    pub drops_per_gbit_2dc_one_process: Option<f64>,
    pub transit_drops_per_gbit_2dc_processes: Option<f64>,
    pub transit_drops_per_gbit_2dc_one_process: Option<f64>,
    pub transit_ce_marks_per_gbit_2dc_processes: Option<f64>,
    pub transit_ce_marks_per_gbit_2dc_one_process: Option<f64>,
    pub cpu_s_per_gbit_2dc_processes: Option<f64>,
    pub cpu_s_per_gbit_2dc_one_process: Option<f64>,
    // New fields.
    /// Alternating kernel/switch pairs per frame size.
    pub pairs: usize,
    /// Frame sizes of the paired runs.
    pub sizes: Vec<usize>,
    pub generator_cpu: usize,
    /// How the switch port's receive runs: "threaded" (its NAPI kthread
    /// pinned to the forwarding CPU) or "inline" (veth default: in the
    /// generator's softirq).
    pub switch_rx_napi: String,
    pub kernel_pps_1500_trials: Vec<Option<f64>>,
    pub switch_pps_1500_trials: Vec<Option<f64>>,
    pub switch_to_kernel_1500: Option<f64>,
    /// switch/kernel of each pair (the pair's two trials run back to back).
    pub switch_to_kernel_64_pair_ratios: Vec<Option<f64>>,
    pub switch_to_kernel_1500_pair_ratios: Vec<Option<f64>>,
    /// Percent limit on a figure's range / median before it is flagged.
    pub spread_limit_pct: f64,
    /// Median and spread of every repeated figure, by figure name.
    pub spread: std::collections::BTreeMap<String, Spread>,
    /// Names of the figures whose spread exceeds the limit.
    pub spread_flagged: Vec<String>,
    /// Where the CPU time went during the switch trials (medians of the
    /// trials, percent of each CPU), by "<size>": the evidence that the
    /// port's receive is charged to the forwarding CPU.
    pub switch_cpu_share: std::collections::BTreeMap<String, CpuPair>,
    /// The same during the kernel trials.
    pub kernel_cpu_share: std::collections::BTreeMap<String, CpuPair>,
    /// The 5-hop chain in one process with memory links between its
    /// switches (descriptors move), and with memory links that copy.
    pub cpu_s_per_gbit_5hop_memory_links: Option<f64>,
    pub cpu_s_per_gbit_5hop_memory_links_copy: Option<f64>,
    pub cpu_s_per_gbit_5hop_memory_links_trials: Vec<Option<f64>>,
    pub cpu_s_per_gbit_5hop_memory_links_copy_trials: Vec<Option<f64>>,
    /// cpu_s_per_gbit_5hop_one_process / cpu_s_per_gbit_5hop_memory_links:
    /// how many times less CPU memory links take (the goal is 3).
    pub memory_links_cpu_gain_5hop: Option<f64>,
    /// The dense testbed in one process with memory links.
    pub goodput_gbps_2dc_memory_links: Option<f64>,
    pub tx_ring_full_per_gbit_2dc_memory_links: Option<f64>,
    pub drops_per_gbit_2dc_memory_links: Option<f64>,
    pub transit_drops_per_gbit_2dc_memory_links: Option<f64>,
    pub transit_ce_marks_per_gbit_2dc_memory_links: Option<f64>,
    pub cpu_s_per_gbit_2dc_memory_links: Option<f64>,
    /// cpu_s_per_gbit_2dc_one_process / cpu_s_per_gbit_2dc_memory_links.
    pub memory_links_cpu_gain_2dc: Option<f64>,
    /// What busy_cores charges to each forwarder ([`BUSY_CORES_METHOD`]).
    pub busy_cores_method: String,
    /// pps per busy core beside the raw pps, by "<forwarder>_<size>"
    /// (kernel, switch, kernel_deep, kernel_inline, xdp_redirect).
    pub per_core: std::collections::BTreeMap<String, PerCoreFigure>,
}

/// Time split of one CPU over a trial, percent (from /proc/stat).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct CpuShare {
    pub user_pct: f64,
    pub system_pct: f64,
    pub softirq_pct: f64,
    pub idle_pct: f64,
}

/// The generator's and the forwarder's CPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct CpuPair {
    pub generator_cpu: CpuShare,
    pub forwarding_cpu: CpuShare,
}

/// Component-wise medians of CPU shares.
pub fn median_share(v: &[CpuPair]) -> Option<CpuPair> {
    if v.is_empty() {
        return None;
    }
    let med = |f: &dyn Fn(&CpuPair) -> f64| {
        let t: Vec<Option<f64>> = v.iter().map(|p| Some(f(p))).collect();
        round(spread(&t, f64::INFINITY).map_or(0.0, |s| s.median), 1)
    };
    let side = |g: &dyn Fn(&CpuPair) -> CpuShare| CpuShare {
        user_pct: med(&|p: &CpuPair| g(p).user_pct),
        system_pct: med(&|p: &CpuPair| g(p).system_pct),
        softirq_pct: med(&|p: &CpuPair| g(p).softirq_pct),
        idle_pct: med(&|p: &CpuPair| g(p).idle_pct),
    };
    Some(CpuPair {
        generator_cpu: side(&|p: &CpuPair| p.generator_cpu),
        forwarding_cpu: side(&|p: &CpuPair| p.forwarding_cpu),
    })
}

/// Whose CPU time a forwarder is charged with, from a trial's /proc/stat
/// split of the generator's and the forwarding CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Charge {
    /// Kernel paths (IP forwarding, with RPS or inline, and XDP redirect):
    /// softirq (with hard irq) on both CPUs. They run only there; the
    /// generator's own work is system time (its BPF_PROG_TEST_RUN call),
    /// and user or system time on the forwarding CPU is another process's.
    Softirq,
    /// lcmp-switch: the forwarding CPU's user + system + softirq (its
    /// busy-polling process, the port's NAPI kthread and its transmit's
    /// softirq are pinned there) plus softirq on the generator CPU (the
    /// port's receive when NAPI runs inline).
    ForwardingCpu,
}

/// How `busy_cores` is charged, written to the JSON beside the figures.
pub const BUSY_CORES_METHOD: &str = "busy_cores = the forwarder's busy share of \
the generator and forwarding CPUs over the generator's run (/proc/stat), in cores. \
Kernel paths (kernel, kernel_deep, kernel_inline, xdp_redirect): softirq (with \
hard irq) on both CPUs, because they run only there: with RPS the receive of d0 \
runs in the generator CPU's softirq and the forwarding on the forwarding CPU, \
while the generator's own work is system time. lcmp-switch: the forwarding CPU's \
user + system + softirq (its busy-polling process, its port's NAPI kthread, its \
transmit's softirq; a busy poller keeps its core busy whatever the load) plus \
softirq on the generator CPU (the port's receive with inline NAPI). Both include \
the sink's XDP_DROP receive, which veth runs on the sender's CPU. Another \
process on the forwarding CPU counts as the switch's (a busy poller's core is \
never idle), not as the kernel's: on a loaded machine the ratio understates \
the switch. \
pps_per_busy_core = pps / busy_cores; null with the reason in `unavailable` when \
the trial did not run, no busy time was charged, or the generator and the \
switch share a CPU (not separable).";

/// A forwarder's busy share of the two CPUs in one trial, percent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Busy {
    pub forwarding_cpu_pct: f64,
    pub generator_cpu_pct: f64,
}

impl Busy {
    /// Both shares in cores, 3 decimals (the shares have 0.1 % steps).
    pub fn cores(&self) -> f64 {
        round(
            (self.forwarding_cpu_pct + self.generator_cpu_pct) / 100.0,
            3,
        )
    }
}

/// The busy share charged to a forwarder (see [`Charge`]); `shared_cpu` is
/// the CPU when the generator and the forwarder share it. Err(reason) when
/// the forwarder's time cannot be told from the generator's.
pub fn busy(cpu: &CpuPair, charge: Charge, shared_cpu: Option<usize>) -> Result<Busy, String> {
    let (f, g) = (&cpu.forwarding_cpu, &cpu.generator_cpu);
    match (charge, shared_cpu) {
        // One CPU: its softirq is still all forwarding, counted once.
        (Charge::Softirq, Some(_)) => Ok(Busy {
            forwarding_cpu_pct: f.softirq_pct,
            generator_cpu_pct: 0.0,
        }),
        (Charge::Softirq, None) => Ok(Busy {
            forwarding_cpu_pct: f.softirq_pct,
            generator_cpu_pct: g.softirq_pct,
        }),
        // The switch's system time (its sendto copies) and the generator's
        // are one figure on a shared CPU.
        (Charge::ForwardingCpu, Some(c)) => Err(format!(
            "the generator and the switch share CPU {c}: the switch's time is not separable"
        )),
        (Charge::ForwardingCpu, None) => Ok(Busy {
            forwarding_cpu_pct: round(f.user_pct + f.system_pct + f.softirq_pct, 1),
            generator_cpu_pct: g.softirq_pct,
        }),
    }
}

/// A forwarder's rate per busy core in one trial, beside its raw rate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PerCore {
    /// Forwarded pps (null: the trial did not run).
    pub pps: Option<f64>,
    /// The forwarder's busy share of each CPU, percent, and their sum in
    /// cores (see `busy_cores_method`).
    pub busy_pct_forwarding_cpu: Option<f64>,
    pub busy_pct_generator_cpu: Option<f64>,
    pub busy_cores: Option<f64>,
    /// pps / busy_cores, whole packets.
    pub pps_per_busy_core: Option<f64>,
    /// Why pps_per_busy_core is null (null when it is there).
    pub unavailable: Option<String>,
}

/// The per-busy-core figure of a trial of `pps` (None: it did not run) and
/// its busy share. Never divides by zero: no busy time is a reason.
pub fn per_core(pps: Option<f64>, busy: Result<Busy, String>) -> PerCore {
    let mut p = PerCore {
        pps,
        busy_pct_forwarding_cpu: None,
        busy_pct_generator_cpu: None,
        busy_cores: None,
        pps_per_busy_core: None,
        unavailable: None,
    };
    let b = match busy {
        Ok(b) => b,
        Err(e) => {
            p.unavailable = Some(e);
            return p;
        }
    };
    // A broken split (not from /proc/stat's counters) is no figure.
    if !(b.forwarding_cpu_pct.is_finite() && b.generator_cpu_pct.is_finite()) {
        p.unavailable = Some("the CPU split has no finite busy share".into());
        return p;
    }
    let cores = b.cores();
    p.busy_pct_forwarding_cpu = Some(b.forwarding_cpu_pct);
    p.busy_pct_generator_cpu = Some(b.generator_cpu_pct);
    p.busy_cores = Some(cores);
    p.unavailable = match pps {
        None => Some("the trial did not run".into()),
        Some(x) if !x.is_finite() || x < 0.0 => Some("no finite rate".into()),
        // Below the split's 0.1 % step: nothing to divide by.
        _ if cores <= 0.0 => Some(format!(
            "no busy time charged to it ({} % of the forwarding CPU, {} % of the generator's)",
            b.forwarding_cpu_pct, b.generator_cpu_pct
        )),
        Some(x) => {
            p.pps_per_busy_core = Some((x / cores).round());
            None
        }
    };
    p
}

/// switch / kernel pps per busy core of one pair, or why there is none.
pub fn per_core_ratio(switch: &PerCore, kernel: &PerCore) -> Result<f64, String> {
    let why = |who: &str, p: &PerCore| {
        format!("{who}: {}", p.unavailable.as_deref().unwrap_or("no figure"))
    };
    let s = switch
        .pps_per_busy_core
        .ok_or_else(|| why("switch", switch))?;
    let k = kernel
        .pps_per_busy_core
        .ok_or_else(|| why("kernel", kernel))?;
    ratio(Some(s), Some(k)).ok_or_else(|| "kernel: 0 pps per busy core".into())
}

/// A forwarder's per-busy-core figures over its trials at one size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PerCoreFigure {
    /// Medians over the trials that have a value (pps_per_busy_core is the
    /// median of the trials' ratios, not a ratio of medians).
    pub pps: Option<f64>,
    pub busy_cores: Option<f64>,
    pub pps_per_busy_core: Option<f64>,
    /// When no trial has pps_per_busy_core: the trials' reasons, once each.
    pub unavailable: Option<String>,
    pub trials: Vec<PerCore>,
}

/// The headline of one frame size: switch/kernel per busy core.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Headline {
    /// Median over the pairs of switch/kernel pps per busy core: what the
    /// forwarders do with the CPU they use.
    pub switch_to_kernel_per_busy_core: Option<f64>,
    /// Its spread over the pairs.
    pub pairs: Option<Spread>,
    /// Each pair's ratio (null where unavailable).
    pub pair_ratios: Vec<Option<f64>>,
    /// Why pairs lack a ratio (null when every pair has one).
    pub unavailable: Option<String>,
    /// switch_pps / kernel_pps medians (switch_to_kernel_<size>): the rig's
    /// figure, how much got through this rig whatever share of a core each
    /// forwarder used (the kernel's may idle while veth drops).
    pub raw_switch_to_kernel_rig: Option<f64>,
}

/// The printed summary: each size's headline (per busy core) with the raw
/// ratio beside it, then every forwarder's rate per busy core.
pub fn summary_lines(r: &Report) -> Vec<String> {
    let m = |x: Option<f64>| x.map_or("-".into(), |x| format!("{:.3}", x / 1e6));
    let mut out = Vec::new();
    for (size, h) in &r.headline {
        let raw = h
            .raw_switch_to_kernel_rig
            .map_or("unavailable".into(), |x| x.to_string());
        let head = match (&h.switch_to_kernel_per_busy_core, &h.pairs) {
            (Some(v), Some(s)) => format!(
                "{v} (over {} pairs: min {}, max {}, IQR {} %)",
                s.n,
                round(s.min, 3),
                round(s.max, 3),
                s.iqr_pct
            ),
            _ => "unavailable".into(),
        };
        let why = h
            .unavailable
            .as_ref()
            .map_or(String::new(), |w| format!("; missing: {w}"));
        out.push(format!(
            "{size} B: switch/kernel per busy core {head}; raw {raw} (the rig's figure){why}"
        ));
    }
    // Each size's pair first, then the references.
    let pairs = r
        .headline
        .keys()
        .flat_map(|z| [format!("kernel_{z}"), format!("switch_{z}")]);
    let mut names: Vec<String> = pairs.filter(|n| r.per_core.contains_key(n)).collect();
    for n in r.per_core.keys() {
        if !names.contains(n) {
            names.push(n.clone());
        }
    }
    for name in &names {
        let f = &r.per_core[name];
        out.push(match (f.pps_per_busy_core, &f.unavailable) {
            (Some(ppc), _) => format!(
                "{name}: {} Mpps at {} busy cores = {} Mpps per busy core",
                m(f.pps),
                f.busy_cores.map_or("-".into(), |c| format!("{c:.3}")),
                m(Some(ppc))
            ),
            (None, why) => format!(
                "{name}: {} Mpps, per busy core unavailable: {}",
                m(f.pps),
                why.as_deref().unwrap_or("no figure")
            ),
        });
    }
    out
}

/// a / b of two optional figures, 3 decimals; None unless both are there
/// and b > 0.
pub fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(round(a / b, 3)),
        _ => None,
    }
}

impl Report {
    /// Records the per-busy-core figure `name` ("<forwarder>_<size>") of
    /// its trials, with the spread of pps_per_busy_core when there are
    /// several; returns the figure.
    pub fn add_per_core(&mut self, name: &str, trials: Vec<PerCore>) -> PerCoreFigure {
        let col = |f: fn(&PerCore) -> Option<f64>| trials.iter().map(f).collect::<Vec<_>>();
        let med = |v: &[Option<f64>]| spread(v, f64::INFINITY).map(|s| s.median);
        let ppc = col(|t| t.pps_per_busy_core);
        let median_ppc = if trials.len() > 1 {
            self.add_spread(&format!("{name}_pps_per_busy_core"), &ppc)
        } else {
            med(&ppc)
        };
        let mut reasons: Vec<&str> = Vec::new();
        for r in trials.iter().filter_map(|t| t.unavailable.as_deref()) {
            if !reasons.contains(&r) {
                reasons.push(r);
            }
        }
        let fig = PerCoreFigure {
            pps: med(&col(|t| t.pps)),
            busy_cores: med(&col(|t| t.busy_cores)).map(|c| round(c, 3)),
            pps_per_busy_core: median_ppc.map(f64::round),
            unavailable: (median_ppc.is_none()).then(|| {
                if trials.is_empty() {
                    "no trial ran".to_string()
                } else {
                    reasons.join("; ")
                }
            }),
            trials,
        };
        self.per_core.insert(name.to_string(), fig.clone());
        fig
    }

    /// Records the headline of frame size `size` from its pairs' ratios
    /// (Err: why a pair has none) and the raw ratio; the pairs' spread also
    /// goes to `spread` as switch_to_kernel_<size>_per_core_pair_ratio, so
    /// that it is flagged as any other figure.
    pub fn add_headline(
        &mut self,
        size: usize,
        pairs: &[Result<f64, String>],
        raw: Option<f64>,
    ) -> Headline {
        let pair_ratios: Vec<Option<f64>> =
            pairs.iter().map(|r| r.as_ref().ok().copied()).collect();
        let why: Vec<String> = pairs
            .iter()
            .enumerate()
            .filter_map(|(i, r)| r.as_ref().err().map(|e| format!("pair {}: {e}", i + 1)))
            .collect();
        let name = format!("switch_to_kernel_{size}_per_core_pair_ratio");
        // Rounded as the ratios are (the mean of two middle values is not).
        let median = self.add_spread(&name, &pair_ratios).map(|m| round(m, 3));
        let h = Headline {
            switch_to_kernel_per_busy_core: median,
            pairs: median.and(self.spread.get(&name).cloned()),
            pair_ratios,
            unavailable: if pairs.is_empty() {
                Some("no kernel/switch pairs ran".into())
            } else {
                (!why.is_empty()).then(|| why.join("; "))
            },
            raw_switch_to_kernel_rig: raw,
        };
        self.headline.insert(size, h.clone());
        h
    }

    /// Records the spread of `name`'s trials; returns the median.
    pub fn add_spread(&mut self, name: &str, trials: &[Option<f64>]) -> Option<f64> {
        let s = spread(trials, self.spread_limit_pct)?;
        let m = s.median;
        if s.flagged {
            self.spread_flagged.push(name.to_string());
        }
        self.spread.insert(name.to_string(), s);
        Some(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_of_five() {
        // Sorted: 0.9 1.0 1.1 1.2 1.3 (in Mpps). Median 1.1; q1 at h = 1
        // -> 1.0, q3 at h = 3 -> 1.2; range 0.4 / 1.1 = 36.4 %; IQR 0.2 /
        // 1.1 = 18.2 %; max/min 1.3 / 0.9 = 1.444.
        let t = [Some(1.2), Some(0.9), None, Some(1.3), Some(1.0), Some(1.1)];
        let s = spread(&t, 10.0).unwrap();
        assert_eq!(s.n, 5);
        assert!((s.median - 1.1).abs() < 1e-12);
        assert!((s.q1 - 1.0).abs() < 1e-12);
        assert!((s.q3 - 1.2).abs() < 1e-12);
        assert_eq!((s.min, s.max), (0.9, 1.3));
        assert_eq!(s.range_pct, 36.4);
        assert_eq!(s.iqr_pct, 18.2);
        assert_eq!(s.max_over_min, Some(1.444));
        assert!(s.flagged);
    }

    #[test]
    fn spread_of_four_and_flag_threshold() {
        // Sorted 100 102 104 109: median (102 + 104) / 2 = 103; q1 at
        // h = 0.75 -> 100 + 0.75 * 2 = 101.5; q3 at h = 2.25 -> 104 + 0.25
        // * 5 = 105.25; range 9 / 103 = 8.74 % -> not flagged at 10 %.
        let t = [Some(104.0), Some(100.0), Some(109.0), Some(102.0)];
        let s = spread(&t, 10.0).unwrap();
        assert_eq!(s.median, 103.0);
        assert_eq!(s.q1, 101.5);
        assert_eq!(s.q3, 105.25);
        assert_eq!(s.range_pct, 8.7);
        assert!(!s.flagged);
        // The same trials against a 5 % limit are flagged.
        assert!(spread(&t, 5.0).unwrap().flagged);
        assert_eq!(spread(&[None, None], 10.0), None);
        let one = spread(&[Some(7.0)], 10.0).unwrap();
        assert_eq!((one.median, one.range_pct, one.flagged), (7.0, 0.0, false));
    }

    #[test]
    fn report_spread_and_ratio() {
        let mut r = Report {
            spread_limit_pct: 10.0,
            ..Report::default()
        };
        assert_eq!(
            r.add_spread("a", &[Some(1.0), Some(2.0), Some(3.0)]),
            Some(2.0)
        );
        assert_eq!(r.add_spread("b", &[Some(10.0), Some(10.5)]), Some(10.25));
        assert_eq!(r.add_spread("c", &[None]), None);
        assert_eq!(r.spread_flagged, vec!["a".to_string()]);
        assert_eq!(ratio(Some(1.2), Some(1.0)), Some(1.2));
        assert_eq!(ratio(Some(1.0), Some(3.0)), Some(0.333));
        assert_eq!(ratio(Some(1.0), Some(0.0)), None);
        assert_eq!(ratio(None, Some(1.0)), None);
    }

    #[test]
    fn json_field_names() {
        // Every field the shell harness wrote keeps its name.
        let old = [
            "duration_s",
            "generator",
            "forwarding_cpu",
            "switch_rx_ring",
            "kernel_netdev_max_backlog",
            "generator_pps_64",
            "generator_pps_1500",
            "kernel_pps_64",
            "kernel_offered_pps_64",
            "kernel_forwarder_bound_64",
            "kernel_pps_1500",
            "kernel_offered_pps_1500",
            "kernel_forwarder_bound_1500",
            "kernel_deep_backlog_pps_64",
            "kernel_deep_backlog_forwarder_bound_64",
            "kernel_inline_pps_64",
            "xdp_redirect_pps_64",
            "xdp_redirect_offered_pps_64",
            "xdp_redirect_forwarder_bound_64",
            "kernel_latency_p50_us",
            "kernel_latency_p99_us",
            "switch_pps_64",
            "switch_pps_1500",
            "switch_latency_p50_us",
            "switch_latency_p99_us",
            "kernel_pps_64_trials",
            "switch_pps_64_trials",
            "switch_to_kernel_64",
            "idle_cpu_percent_event_mode",
            "idle_cpu_percent_event_mode_stats_file",
            "cpu_s_per_gbit_5hop_processes",
            "cpu_s_per_gbit_5hop_one_process",
            "cpu_s_per_gbit_5hop_processes_trials",
            "cpu_s_per_gbit_5hop_one_process_trials",
            "goodput_gbps_2dc_processes",
            "goodput_gbps_2dc_one_process",
            "tx_ring_full_per_gbit_2dc_processes",
            "tx_ring_full_per_gbit_2dc_one_process",
            "drops_per_gbit_2dc_processes",
            "drops_per_gbit_2dc_one_process",
            "transit_drops_per_gbit_2dc_processes",
            "transit_drops_per_gbit_2dc_one_process",
            "transit_ce_marks_per_gbit_2dc_processes",
            "transit_ce_marks_per_gbit_2dc_one_process",
            "cpu_s_per_gbit_2dc_processes",
            "cpu_s_per_gbit_2dc_one_process",
        ];
        let new = [
            "pairs",
            "sizes",
            "generator_cpu",
            "switch_rx_napi",
            "kernel_pps_1500_trials",
            "switch_pps_1500_trials",
            "switch_to_kernel_1500",
            "switch_to_kernel_64_pair_ratios",
            "switch_to_kernel_1500_pair_ratios",
            "spread_limit_pct",
            "spread",
            "spread_flagged",
            "switch_cpu_share",
            "kernel_cpu_share",
            "cpu_s_per_gbit_5hop_memory_links",
            "cpu_s_per_gbit_5hop_memory_links_copy",
            "cpu_s_per_gbit_5hop_memory_links_trials",
            "cpu_s_per_gbit_5hop_memory_links_copy_trials",
            "memory_links_cpu_gain_5hop",
            "goodput_gbps_2dc_memory_links",
            "tx_ring_full_per_gbit_2dc_memory_links",
            "drops_per_gbit_2dc_memory_links",
            "transit_drops_per_gbit_2dc_memory_links",
            "transit_ce_marks_per_gbit_2dc_memory_links",
            "cpu_s_per_gbit_2dc_memory_links",
            "memory_links_cpu_gain_2dc",
            "headline",
            "busy_cores_method",
            "per_core",
        ];
        let mut r = Report {
            spread_limit_pct: 10.0,
            kernel_pps_64_trials: vec![Some(1.0), None],
            ..Report::default()
        };
        r.add_spread("kernel_pps_64", &[Some(1.0), Some(1.5)]);
        let v = serde_json::to_value(&r).unwrap();
        let obj = v.as_object().unwrap();
        for k in old.iter().chain(new.iter()) {
            assert!(obj.contains_key(*k), "missing field {k}");
        }
        assert_eq!(obj.len(), old.len() + new.len(), "unexpected extra fields");
        // Absent figures are null, trials are arrays with nulls kept.
        assert!(obj["switch_pps_64"].is_null());
        assert_eq!(v["kernel_pps_64_trials"], serde_json::json!([1.0, null]));
        let s = &v["spread"]["kernel_pps_64"];
        for k in [
            "n",
            "median",
            "min",
            "max",
            "q1",
            "q3",
            "iqr_pct",
            "max_over_min",
            "range_pct",
            "flagged",
        ] {
            assert!(s.get(k).is_some(), "spread lacks {k}");
        }
        assert_eq!(s["median"], 1.25);
        assert_eq!(s["flagged"], true);
        assert_eq!(v["spread_flagged"], serde_json::json!(["kernel_pps_64"]));
    }

    #[test]
    fn cpu_share_medians() {
        let p = |s: f64| CpuPair {
            generator_cpu: CpuShare {
                softirq_pct: s,
                ..CpuShare::default()
            },
            forwarding_cpu: CpuShare {
                idle_pct: 100.0 - s,
                ..CpuShare::default()
            },
        };
        let m = median_share(&[p(10.0), p(30.0), p(20.0)]).unwrap();
        assert_eq!(m.generator_cpu.softirq_pct, 20.0);
        assert_eq!(m.forwarding_cpu.idle_pct, 80.0);
        assert_eq!(median_share(&[]), None);
    }

    /// A trial's split: (user, system, softirq) percent of the forwarding
    /// CPU and (system, softirq) of the generator's; the rest idle.
    fn split(fwd: (f64, f64, f64), gen: (f64, f64)) -> CpuPair {
        CpuPair {
            generator_cpu: CpuShare {
                user_pct: 0.0,
                system_pct: gen.0,
                softirq_pct: gen.1,
                idle_pct: 100.0 - gen.0 - gen.1,
            },
            forwarding_cpu: CpuShare {
                user_pct: fwd.0,
                system_pct: fwd.1,
                softirq_pct: fwd.2,
                idle_pct: 100.0 - fwd.0 - fwd.1 - fwd.2,
            },
        }
    }

    #[test]
    fn per_core_hand_worked() {
        // Issue 29's run: the kernel's forwarding core 38 % idle. Its
        // 0.62 busy cores: softirq 40 % of the forwarding CPU + 22 % of the
        // generator's (d0's receive before RPS); the generator's own 70 %
        // system and another process's 3 % user on the forwarding CPU are
        // not the kernel's. 320000 / 0.62 = 516129.03 -> 516129.
        let k = busy(
            &split((3.0, 0.0, 40.0), (70.0, 22.0)),
            Charge::Softirq,
            None,
        )
        .unwrap();
        assert_eq!((k.forwarding_cpu_pct, k.generator_cpu_pct), (40.0, 22.0));
        assert_eq!(k.cores(), 0.62);
        let kp = per_core(Some(320_000.0), Ok(k));
        assert_eq!(kp.busy_cores, Some(0.62));
        assert_eq!(kp.pps_per_busy_core, Some(516_129.0));
        assert_eq!(kp.unavailable, None);
        // The busy-polling switch: 60 + 30 + 10 = 100 % of its core, no
        // softirq on the generator's (threaded NAPI): 330000 / 1.00.
        let sw = busy(
            &split((60.0, 30.0, 10.0), (95.0, 0.0)),
            Charge::ForwardingCpu,
            None,
        )
        .unwrap();
        assert_eq!(sw.cores(), 1.0);
        let sp = per_core(Some(330_000.0), Ok(sw));
        assert_eq!(sp.pps_per_busy_core, Some(330_000.0));
        // Raw 330000 / 320000 = 1.031 (the rig's figure); per busy core
        // 330000 / 516129 = 0.63937 -> 0.639.
        assert_eq!(ratio(sp.pps, kp.pps), Some(1.031));
        assert_eq!(per_core_ratio(&sp, &kp), Ok(0.639));
        // With inline NAPI the port's receive is the generator CPU's
        // softirq, charged to the switch: 100 % + 35 % = 1.35 cores.
        let inline = busy(
            &split((70.0, 25.0, 5.0), (60.0, 35.0)),
            Charge::ForwardingCpu,
            None,
        )
        .unwrap();
        assert_eq!(inline.cores(), 1.35);
        // 540000 / 1.35 = 400000.
        assert_eq!(
            per_core(Some(540_000.0), Ok(inline)).pps_per_busy_core,
            Some(400_000.0)
        );
    }

    #[test]
    fn per_core_edge_cases() {
        // No busy time: no division, a reason, null in the JSON.
        let idle = busy(&split((0.0, 0.0, 0.0), (50.0, 0.0)), Charge::Softirq, None);
        let idle = per_core(Some(250_000.0), idle);
        assert_eq!(idle.busy_cores, Some(0.0));
        assert_eq!(idle.pps_per_busy_core, None);
        assert_eq!(
            idle.unavailable.as_deref(),
            Some("no busy time charged to it (0 % of the forwarding CPU, 0 % of the generator's)")
        );
        let j = serde_json::to_value(&idle).unwrap();
        assert!(j["pps_per_busy_core"].is_null());
        assert_eq!(j["pps"], 250_000.0);
        // A NaN share (a broken split) is no busy time either, not NaN.
        let nan = Busy {
            forwarding_cpu_pct: f64::NAN,
            generator_cpu_pct: 0.0,
        };
        let p = per_core(Some(1.0), Ok(nan));
        assert_eq!((p.busy_cores, p.pps_per_busy_core), (None, None));
        assert_eq!(
            p.unavailable.as_deref(),
            Some("the CPU split has no finite busy share")
        );
        assert!(!serde_json::to_string(&p).unwrap().contains("NaN"));
        // Missing split: the switch beside the generator on one CPU.
        let one = busy(
            &split((60.0, 30.0, 10.0), (60.0, 10.0)),
            Charge::ForwardingCpu,
            Some(0),
        );
        let ps = per_core(Some(100_000.0), one);
        assert_eq!(ps.busy_cores, None);
        assert_eq!(
            ps.unavailable.as_deref(),
            Some("the generator and the switch share CPU 0: the switch's time is not separable")
        );
        // The kernel on one CPU: its softirq counted once (the two sides
        // of the split are the same CPU).
        let k1 = busy(
            &split((0.0, 0.0, 45.0), (50.0, 45.0)),
            Charge::Softirq,
            Some(0),
        )
        .unwrap();
        assert_eq!(k1.cores(), 0.45);
        // A trial that did not run.
        let none = per_core(
            None,
            Err("the trial did not run (the switch did not start)".into()),
        );
        assert_eq!(none.pps_per_busy_core, None);
        // A pair lacking a side says which; a kernel at 0 pps per busy
        // core is no divisor.
        let k = per_core(Some(200_000.0), Ok(k1));
        assert_eq!(k.pps_per_busy_core, Some(444_444.0));
        assert_eq!(
            per_core_ratio(&none, &k),
            Err("switch: the trial did not run (the switch did not start)".into())
        );
        assert_eq!(
            per_core_ratio(&ps, &idle),
            Err("switch: the generator and the switch share CPU 0: the switch's time is not separable".into())
        );
        assert_eq!(
            per_core_ratio(&k, &idle),
            Err("kernel: no busy time charged to it (0 % of the forwarding CPU, 0 % of the generator's)".into())
        );
        let zero = per_core(Some(0.0), Ok(k1));
        assert_eq!(zero.pps_per_busy_core, Some(0.0));
        assert_eq!(
            per_core_ratio(&k, &zero),
            Err("kernel: 0 pps per busy core".into())
        );
        assert_eq!(per_core_ratio(&zero, &k), Ok(0.0));
    }

    #[test]
    fn per_core_figure_of_trials() {
        let b = |cores: f64| {
            Ok(Busy {
                forwarding_cpu_pct: 100.0 * cores,
                generator_cpu_pct: 0.0,
            })
        };
        let mut r = Report {
            spread_limit_pct: 10.0,
            ..Report::default()
        };
        // 300000 / 0.6 = 500000, 330000 / 0.55 = 600000, 360000 / 0.9 =
        // 400000, and one trial without busy time: median 500000 (not
        // median pps 320000 / median cores 0.575); range 200000 / 500000 =
        // 40 %: flagged.
        let f = r.add_per_core(
            "kernel_64",
            vec![
                per_core(Some(300_000.0), b(0.6)),
                per_core(Some(330_000.0), b(0.55)),
                per_core(Some(360_000.0), b(0.9)),
                per_core(Some(310_000.0), b(0.0)),
            ],
        );
        assert_eq!(f.pps, Some(320_000.0));
        assert_eq!(f.busy_cores, Some(0.575));
        assert_eq!(f.pps_per_busy_core, Some(500_000.0));
        assert_eq!(f.unavailable, None);
        assert_eq!(f.trials.len(), 4);
        assert_eq!(r.spread["kernel_64_pps_per_busy_core"].n, 3);
        assert_eq!(r.spread_flagged, vec!["kernel_64_pps_per_busy_core"]);
        assert_eq!(r.per_core["kernel_64"], f);
        // No trial with a figure: the reasons, once each; one trial adds
        // no spread.
        let why = || Err("the trial did not run (the switch did not start)".to_string());
        let f = r.add_per_core(
            "switch_1500",
            vec![per_core(None, why()), per_core(None, why())],
        );
        assert_eq!(f.pps_per_busy_core, None);
        assert_eq!(
            f.unavailable.as_deref(),
            Some("the trial did not run (the switch did not start)")
        );
        let f = r.add_per_core("xdp_redirect_64", vec![per_core(Some(6e6), b(0.75))]);
        assert_eq!(f.pps_per_busy_core, Some(8e6));
        assert!(!r.spread.contains_key("xdp_redirect_64_pps_per_busy_core"));
        assert_eq!(
            r.add_per_core("kernel_1500", Vec::new())
                .unavailable
                .as_deref(),
            Some("no trial ran")
        );
    }

    #[test]
    fn headline_over_pairs() {
        let mut r = Report {
            spread_limit_pct: 10.0,
            ..Report::default()
        };
        // Sorted 0.60 0.64 0.66 0.70: median 0.65; q1 at h = 0.75 -> 0.63,
        // q3 at h = 2.25 -> 0.67, IQR 0.04 / 0.65 = 6.2 %; range 0.1 / 0.65
        // = 15.4 %: flagged at 10 %.
        let h = r.add_headline(
            64,
            &[
                Ok(0.64),
                Ok(0.60),
                Err("switch: the trial did not run".into()),
                Ok(0.70),
                Ok(0.66),
            ],
            Some(1.04),
        );
        assert_eq!(h.switch_to_kernel_per_busy_core, Some(0.65));
        let p = h.pairs.as_ref().unwrap();
        assert_eq!((p.n, p.min, p.max), (4, 0.6, 0.7));
        assert!((p.q1 - 0.63).abs() < 1e-12 && (p.q3 - 0.67).abs() < 1e-12);
        assert_eq!((p.iqr_pct, p.range_pct, p.flagged), (6.2, 15.4, true));
        assert_eq!(
            h.pair_ratios,
            vec![Some(0.64), Some(0.6), None, Some(0.7), Some(0.66)]
        );
        assert_eq!(
            h.unavailable.as_deref(),
            Some("pair 3: switch: the trial did not run")
        );
        assert_eq!(h.raw_switch_to_kernel_rig, Some(1.04));
        assert_eq!(r.headline[&64], h);
        assert_eq!(
            r.spread_flagged,
            vec!["switch_to_kernel_64_per_core_pair_ratio"]
        );
        // No pairs (--only kernel), or none with a ratio: null with why.
        let h = r.add_headline(1500, &[], None);
        assert_eq!((h.switch_to_kernel_per_busy_core, h.pairs), (None, None));
        assert_eq!(h.unavailable.as_deref(), Some("no kernel/switch pairs ran"));
        let h = r.add_headline(128, &[Err("kernel: no figure".into())], Some(0.9));
        assert_eq!(h.switch_to_kernel_per_busy_core, None);
        assert_eq!(h.unavailable.as_deref(), Some("pair 1: kernel: no figure"));
        // The mean of two middle values, rounded as a ratio: (0.207 +
        // 0.257) / 2 is 0.23199999999999998 in f64.
        let h = r.add_headline(256, &[Ok(0.207), Ok(0.257)], None);
        assert_eq!(h.switch_to_kernel_per_busy_core, Some(0.232));
        let j = serde_json::to_value(&r).unwrap();
        assert!(j["headline"]["1500"]["switch_to_kernel_per_busy_core"].is_null());
        assert_eq!(j["headline"]["64"]["raw_switch_to_kernel_rig"], 1.04);
        // The headline leads the file.
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.starts_with("{\"headline\":"));
    }

    #[test]
    fn summary_lines_lead_with_the_headline() {
        let mut r = Report {
            spread_limit_pct: 10.0,
            ..Report::default()
        };
        // Sizes in numeric order, each size's pair before the references.
        r.add_headline(1500, &[], Some(0.6));
        r.add_headline(64, &[Ok(0.639)], Some(1.031));
        let b = |cores: f64| {
            Ok(Busy {
                forwarding_cpu_pct: 100.0 * cores,
                generator_cpu_pct: 0.0,
            })
        };
        r.add_per_core("kernel_deep_64", vec![per_core(Some(1.5e6), b(1.2))]);
        r.add_per_core("kernel_1500", vec![per_core(Some(0.6e6), b(0.5))]);
        let k = busy(
            &split((0.0, 0.0, 40.0), (70.0, 22.0)),
            Charge::Softirq,
            None,
        );
        r.add_per_core("kernel_64", vec![per_core(Some(320_000.0), k)]);
        r.add_per_core(
            "switch_64",
            vec![per_core(None, Err("the trial did not run".into()))],
        );
        assert_eq!(
            summary_lines(&r),
            vec![
                "64 B: switch/kernel per busy core 0.639 (over 1 pairs: min 0.639, max 0.639, IQR 0 %); raw 1.031 (the rig's figure)",
                "1500 B: switch/kernel per busy core unavailable; raw 0.6 (the rig's figure); missing: no kernel/switch pairs ran",
                "kernel_64: 0.320 Mpps at 0.620 busy cores = 0.516 Mpps per busy core",
                "switch_64: - Mpps, per busy core unavailable: the trial did not run",
                "kernel_1500: 0.600 Mpps at 0.500 busy cores = 1.200 Mpps per busy core",
                "kernel_deep_64: 1.500 Mpps at 1.200 busy cores = 1.250 Mpps per busy core",
            ]
        );
    }
}

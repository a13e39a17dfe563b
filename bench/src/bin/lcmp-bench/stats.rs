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

/// Everything the harness writes. The first block of fields (down to the
/// 2dc figures) are the ones `scripts/bench-forwarding.sh` wrote, with the
/// same names and meanings; the rest are new. Option fields are `null` when
/// a case did not run or failed.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
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

/// a / b of two optional figures, 3 decimals; None unless both are there
/// and b > 0.
pub fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(round(a / b, 3)),
        _ => None,
    }
}

impl Report {
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
}

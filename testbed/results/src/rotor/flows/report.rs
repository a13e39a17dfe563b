//! The flow experiment's text: the table printed at the end and
//! `report.md`.

use std::fmt::Write as _;

use super::{same, FlowRunResult, FlowSummary, SHORT_FLOW_BYTES};
use crate::format::{fmt_bytes, pct, DASH};
use crate::rotor::experiment::{counted, paper, PaperNumber, Pattern};
use crate::rotor::Design;
use crate::table::{Table, L, R};

/// An FCT cell: microseconds, "unfinished" where the rank fell on an
/// unfinished flow, a dash where the class is empty.
pub(super) fn fct_cell(v: Option<f64>, arrived: usize) -> String {
    match v {
        Some(us) if us >= 10_000.0 => format!("{:.1} ms", us / 1e3),
        Some(us) => format!("{us:.0} us"),
        None if arrived > 0 => "unfinished".into(),
        None => DASH.into(),
    }
}

fn bytes_cell(v: Option<f64>) -> String {
    v.map_or(DASH.into(), |b| fmt_bytes(b.max(0.0).round() as u64))
}

fn ratio_cell(v: Option<f64>) -> String {
    v.map_or(DASH.into(), |v| format!("{v:.2}x"))
}

/// The result table printed at the end.
pub fn flow_table(s: &FlowSummary) -> String {
    let mut t = Table::text(&[
        ("design", L, 17),
        ("pattern", L, 12),
        ("load", R, 5),
        ("K", R, 3),
        ("utilization", R, 11),
        ("of offered", R, 10),
        ("p99 short", R, 11),
        ("p99 long", R, 11),
        ("unfinished", R, 10),
    ]);
    for r in &s.runs {
        t.row([
            r.design.clone(),
            r.pattern.clone(),
            format!("{}", r.load),
            r.buffer_pkts.to_string(),
            pct(Some(r.downlink_utilization)),
            format!("{:.0} %", r.delivered_fraction * 100.0),
            fct_cell(r.p99_fct_short_us, r.short_arrived),
            fct_cell(r.p99_fct_long_us, r.long_arrived),
            format!(
                "{}/{}",
                r.short_arrived + r.long_arrived - r.short_finished - r.long_finished,
                r.short_arrived + r.long_arrived
            ),
        ]);
    }
    format!("\n{}", t.text_lines())
}

/// Mars's utilization over `design`'s in `pattern` at `load`, `k`.
fn mars_over(s: &FlowSummary, design: &str, pattern: &str, load: f64, k: u32) -> Option<f64> {
    let m = s.find("mars", pattern, load, k)?;
    let d = s.find(design, pattern, load, k)?;
    (d.downlink_utilization > 0.0).then(|| m.downlink_utilization / d.downlink_utilization)
}

/// The paper's comparison for `design` in `pattern`, as a cell.
fn paper_cell(design: &str, pattern: &str) -> String {
    Design::from_name(design)
        .zip(Pattern::from_name(pattern))
        .and_then(|(d, p)| paper::throughput(d, p))
        .map_or(DASH.into(), |n| format!("{}x ({})", n.value, n.versus))
}

fn designs_of(n: &PaperNumber) -> String {
    if n.designs.is_empty() {
        "not built here".into()
    } else {
        n.designs
            .iter()
            .map(|d| d.name())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// `report.md`.
pub fn flow_report(s: &FlowSummary) -> String {
    let c = &s.config;
    let mut out = String::new();
    let _ = writeln!(out, "# Rotor networks: NDP flows\n");
    let mean = lcmp_traffic::cdf::Cdf::load(&c.workload)
        .map(|w| format!(", mean {}", fmt_bytes(w.mean().round() as u64)))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "{} ToRs x {} rotors (uplinks), {} host(s) per ToR; Delta = {} us, Delta_r = {} us, \
         uplinks c = {} Mbit/s, host links {} Mbit/s. Workload {}{mean}; Poisson arrivals at \
         each load (a fraction of the host link rate per host), {} demand. NDP: initial \
         window {} packets, minRTO {} us; ToRs trim at K packets per next-hop queue. \
         {} s warm-up, {} s window, then {} s for the window's flows to finish.\n",
        c.tors,
        c.rotors,
        c.hosts_per_tor,
        c.slot_us,
        c.reconfig_us,
        c.rate_mbps,
        c.host_rate_bps() / 1_000_000,
        c.workload,
        s.patterns().join(" and "),
        c.initial_window,
        c.min_rto_us,
        c.warmup_s,
        c.window_s,
        c.drain_seconds(),
    );
    if let Some(m) = &s.mars {
        let _ = writeln!(
            out,
            "Mars: degree d = {} ({}), diameter {}.\n",
            m["degree"],
            if c.mars_degree.is_some() {
                "forced by mars_degree"
            } else {
                "the planner's choice"
            },
            m["diameter"],
        );
    }
    let _ = writeln!(
        out,
        "Utilization: unique payload bytes the hosts received in the window x 8 / (hosts x \
         host rate x window), the paper's server downlink utilization. \"of offered\": \
         utilization / load. FCTs are of the flows that arrived in the window, short < {} \
         and long from there; a flow not finished by the run's end counts as slower than \
         every finished one, and a percentile that falls on one reads \"unfinished\" (it is \
         not computed from the finished flows alone). p99 over few flows is a rough figure: \
         the counts are in the FCT table.\n",
        fmt_bytes(SHORT_FLOW_BYTES),
    );
    let (Some(k_ref), Some(load_ref)) = (s.reference_k(), s.reference_load()) else {
        let _ = writeln!(out, "No run finished.");
        return out;
    };
    let loads = s.loads();
    let ks = s.ks();
    let patterns = s.patterns();
    let designs = s.designs();
    let util = |r: Option<&FlowRunResult>| {
        r.map_or(DASH.into(), |r| {
            format!(
                "{} ({:.0} %)",
                pct(Some(r.downlink_utilization)),
                r.delivered_fraction * 100.0
            )
        })
    };

    let _ = writeln!(
        out,
        "## Server downlink utilization (K = {k_ref})\n\nPer load: utilization (of offered).\n"
    );
    let mut t = Table::new(
        ["pattern", "design", "routing"]
            .map(String::from)
            .into_iter()
            .chain(loads.iter().map(|l| format!("load {l}"))),
    )
    .right(3..3 + loads.len());
    for pat in &patterns {
        for d in &designs {
            let routing = s
                .runs
                .iter()
                .find(|r| &r.design == d && &r.pattern == pat)
                .map_or(DASH.into(), |r| r.routing.clone());
            t.row(
                [pat.clone(), d.clone(), routing]
                    .into_iter()
                    .chain(loads.iter().map(|&l| util(s.find(d, pat, l, k_ref)))),
            );
        }
    }
    out += &t.markdown();

    let _ = writeln!(
        out,
        "\n## Mars over the others (load {load_ref}, K = {k_ref})\n\nThe paper's ratios are at \
         load {} with K = {} (websearch); RotorNet and Sirius ran there with Valiant load \
         balancing (our complete-valiant), and complete is their direct variant.\n",
        paper::LOAD,
        paper::BUFFER_PKTS
    );
    let mut t = Table::new([
        "pattern",
        "design",
        "Mars utilization",
        "design utilization",
        "Mars / design (measured)",
        "paper",
    ])
    .right(2..5);
    for pat in &patterns {
        let mars = s.find("mars", pat, load_ref, k_ref);
        for d in designs.iter().filter(|d| *d != "mars") {
            let r = s.find(d, pat, load_ref, k_ref);
            t.row([
                pat.clone(),
                d.clone(),
                pct(mars.map(|m| m.downlink_utilization)),
                pct(r.map(|r| r.downlink_utilization)),
                ratio_cell(mars_over(s, d, pat, load_ref, k_ref)),
                paper_cell(d, pat),
            ]);
        }
        for n in paper::THROUGHPUT
            .iter()
            .filter(|n| n.designs.is_empty() && n.pattern.name() == pat)
        {
            t.row([
                pat.clone(),
                format!("{} ({})", n.versus, designs_of(n)),
                pct(mars.map(|m| m.downlink_utilization)),
                DASH.into(),
                DASH.into(),
                format!("{}x", n.value),
            ]);
        }
    }
    out += &t.markdown();

    let _ = writeln!(
        out,
        "\n## Buffer sweep (load {load_ref})\n\nUtilization per K (packets per next-hop \
         queue). The paper: at K = {} Mars carries {}x the others on average; RotorNet/Sirius \
         need K = {} to carry load {}.\n",
        paper::SMALL_BUFFER.0,
        paper::SMALL_BUFFER.1,
        paper::ROTORNET_NEEDS_PKTS,
        paper::LOAD
    );
    let mut t = Table::new(
        ["pattern", "design"]
            .map(String::from)
            .into_iter()
            .chain(ks.iter().map(|k| format!("K = {k}"))),
    )
    .right(2..2 + ks.len());
    for pat in &patterns {
        for d in &designs {
            t.row(
                [pat.clone(), d.clone()]
                    .into_iter()
                    .chain(ks.iter().map(|&k| {
                        pct(s.find(d, pat, load_ref, k).map(|r| r.downlink_utilization))
                    })),
            );
        }
    }
    out += &t.markdown();
    let (small_k, _) = paper::SMALL_BUFFER;
    if ks.contains(&small_k) {
        for pat in &patterns {
            let ratios: Vec<f64> = designs
                .iter()
                .filter(|d| *d != "mars")
                .filter_map(|d| mars_over(s, d, pat, load_ref, small_k))
                .collect();
            if !ratios.is_empty() {
                let _ = writeln!(
                    out,
                    "\n{pat}, K = {small_k}: Mars / others, mean over {} design(s): {:.2}x \
                     (paper {}x).",
                    ratios.len(),
                    ratios.iter().sum::<f64>() / ratios.len() as f64,
                    paper::SMALL_BUFFER.1
                );
            }
        }
    }

    let _ = writeln!(out, "\n## Flow completion times\n");
    let mut t = Table::new([
        "pattern",
        "design",
        "load",
        "K",
        "short finished / arrived",
        "short p50",
        "short p99",
        "long finished / arrived",
        "long p50",
        "long p99",
    ])
    .right(2..10);
    for r in &s.runs {
        t.row([
            r.pattern.clone(),
            r.design.clone(),
            format!("{}", r.load),
            r.buffer_pkts.to_string(),
            format!("{} / {}", r.short_finished, r.short_arrived),
            fct_cell(r.p50_fct_short_us, r.short_arrived),
            fct_cell(r.p99_fct_short_us, r.short_arrived),
            format!("{} / {}", r.long_finished, r.long_arrived),
            fct_cell(r.p50_fct_long_us, r.long_arrived),
            fct_cell(r.p99_fct_long_us, r.long_arrived),
        ]);
    }
    out += &t.markdown();
    let fct_load = loads.iter().copied().find(|&l| same(l, paper::FCT_LOAD));
    let _ = writeln!(
        out,
        "\nShort flows' p99 FCT, Mars against each design (1 - Mars / design), all-to-all at \
         load {} with K = {k_ref}:\n",
        paper::FCT_LOAD
    );
    let mut t = Table::new(["design", "measured", "paper"]).right(1..3);
    let reduction = |d: &str| {
        let l = fct_load?;
        let m = s.find("mars", "all-to-all", l, k_ref)?.p99_fct_short_us?;
        let o = s.find(d, "all-to-all", l, k_ref)?.p99_fct_short_us?;
        (o > 0.0).then(|| 1.0 - m / o)
    };
    for d in designs.iter().filter(|d| *d != "mars") {
        let paper = Design::from_name(d)
            .and_then(|d| {
                paper::SHORT_P99_REDUCTION
                    .iter()
                    .find(|n| n.designs.contains(&d))
            })
            .map_or(DASH.into(), |n| {
                format!("{:.0} % ({})", n.value * 100.0, n.versus)
            });
        t.row([
            d.clone(),
            reduction(d).map_or(DASH.into(), |v| format!("{:.0} %", v * 100.0)),
            paper,
        ]);
    }
    for n in paper::SHORT_P99_REDUCTION
        .iter()
        .filter(|n| n.designs.is_empty())
    {
        t.row([
            format!("{} ({})", n.versus, designs_of(n)),
            DASH.into(),
            format!("{:.0} %", n.value * 100.0),
        ]);
    }
    out += &t.markdown();

    let _ = writeln!(
        out,
        "\n## ToR buffer occupancy\n\nOver every ToR's samples in the window (bytes; a full \
         1500-byte packet per K per next hop is the trimming threshold).\n"
    );
    let mut t = Table::new([
        "pattern", "design", "load", "K", "samples", "p50", "p90", "p99", "max",
    ])
    .right(2..9);
    for r in &s.runs {
        t.row([
            r.pattern.clone(),
            r.design.clone(),
            format!("{}", r.load),
            r.buffer_pkts.to_string(),
            r.occupancy_samples.to_string(),
            bytes_cell(r.occupancy_p50_bytes),
            bytes_cell(r.occupancy_p90_bytes),
            bytes_cell(r.occupancy_p99_bytes),
            bytes_cell(r.occupancy_max_bytes.map(|b| b as f64)),
        ]);
    }
    out += &t.markdown();
    for pat in &patterns {
        let mars = s
            .find("mars", pat, load_ref, k_ref)
            .and_then(|r| r.occupancy_p99_bytes);
        for d in ["complete", "complete-valiant"] {
            let other = s
                .find(d, pat, load_ref, k_ref)
                .and_then(|r| r.occupancy_p99_bytes);
            if let (Some(m), Some(o)) = (mars, other) {
                let _ = writeln!(
                    out,
                    "\n{pat}, load {load_ref}, K = {k_ref}: p99 occupancy {d} / Mars = {} \
                     (paper: RotorNet/Sirius's tail {}x Mars's).",
                    ratio_cell((m > 0.0).then(|| o / m)),
                    paper::TAIL_OCCUPANCY_RATIO
                );
            }
        }
    }

    let _ = writeln!(out, "\n## Switch drops and trims during the window\n");
    let mut t = Table::new(["pattern", "design", "load", "K", "ToRs", "rotors"]);
    for r in &s.runs {
        t.row([
            r.pattern.clone(),
            r.design.clone(),
            format!("{}", r.load),
            r.buffer_pkts.to_string(),
            counted(&r.tor_counters, &["drop", "trim"]),
            counted(&r.rotor_counters, &["drop", "trim"]),
        ]);
    }
    out += &t.markdown();
    let _ = writeln!(
        out,
        "\nEvery run's figures are in `summary.json`.\n\n\
         ![utilization vs load](plots/flow-utilization.png)\n\n\
         ![utilization vs buffer](plots/flow-buffer.png)\n\n\
         ![p99 FCT vs load](plots/flow-fct.png)\n\n\
         ![buffer occupancy CDF](plots/flow-occupancy.png)"
    );
    out
}

//! `report.md`: an experiment's [`Summary`] as markdown, next to the
//! paper's numbers; its fidelity section ([`render_fidelity_section`]);
//! and the table printed at the end of a run ([`result_table`]).

use std::fmt::Write as _;
use std::path::PathBuf;

use crate::analysis::{
    groups, paths_missing_note, transit_choices, Aggregate, BucketTable, LinkSpec, Reduction,
    RunSummary, Summary,
};
use crate::fidelity::{FidelityReport, OursSource};

/// One claim of the paper (EuroSys 2026, 8-DC testbed, RDMA with DCQCN):
/// LCMP's change of the median and p99 slowdown against a baseline, in
/// percent (negative = LCMP lower). A range `(a, b)` spans the loads the
/// claim covers; `a == b` is a single number.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PaperClaim {
    /// Normalized workload key (see [`workload_key`]).
    pub workload: &'static str,
    /// Loads (fractions) the claim covers.
    pub loads: &'static [f64],
    /// The policy compared with.
    pub baseline: &'static str,
    /// Change of the median slowdown, percent.
    pub median_pct: Option<(f64, f64)>,
    /// Change of the p99 slowdown, percent.
    pub p99_pct: Option<(f64, f64)>,
    /// Where in the paper.
    pub source: &'static str,
}

/// The paper's claims (from `docs/experiments.md`). It has no WCMP numbers.
pub const PAPER_CLAIMS: &[PaperClaim] = &[
    PaperClaim {
        workload: "websearch",
        loads: &[0.3, 0.5, 0.8],
        baseline: "ecmp",
        median_pct: Some((-36.0, -41.0)),
        p99_pct: Some((-56.0, -68.0)),
        source: "8-DC, 30/50/80 %",
    },
    PaperClaim {
        workload: "websearch",
        loads: &[0.3, 0.5, 0.8],
        baseline: "ucmp",
        median_pct: Some((-76.0, -76.0)),
        p99_pct: Some((-45.0, -64.0)),
        source: "8-DC, 30/50/80 %",
    },
    PaperClaim {
        workload: "websearch",
        loads: &[0.3],
        baseline: "ecmp",
        median_pct: Some((-36.0, -36.0)),
        p99_pct: Some((-58.0, -58.0)),
        source: "Fig. 9",
    },
    PaperClaim {
        workload: "websearch",
        loads: &[0.3],
        baseline: "ucmp",
        median_pct: Some((-76.0, -76.0)),
        p99_pct: Some((-82.0, -82.0)),
        source: "Fig. 9",
    },
    PaperClaim {
        workload: "alistorage",
        loads: &[0.3],
        baseline: "ecmp",
        median_pct: Some((-32.0, -32.0)),
        p99_pct: Some((-68.0, -68.0)),
        source: "Fig. 9",
    },
    PaperClaim {
        workload: "alistorage",
        loads: &[0.3],
        baseline: "ucmp",
        median_pct: Some((-80.0, -80.0)),
        p99_pct: Some((-68.0, -68.0)),
        source: "Fig. 9",
    },
    PaperClaim {
        workload: "fbhadoop",
        loads: &[0.3],
        baseline: "ecmp",
        median_pct: Some((-26.0, -26.0)),
        p99_pct: Some((-69.0, -69.0)),
        source: "Fig. 9",
    },
    PaperClaim {
        workload: "fbhadoop",
        loads: &[0.3],
        baseline: "ucmp",
        median_pct: Some((-78.0, -78.0)),
        p99_pct: Some((-69.0, -69.0)),
        source: "Fig. 9",
    },
];

/// The paper's name for a workload given as a name or file name
/// (`WebSearch_distribution.txt` -> `websearch`, `FbHdp_distribution2015`
/// -> `fbhadoop`); `None` if it is none of the paper's three.
pub fn workload_key(workload: &str) -> Option<&'static str> {
    let w: String = workload
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    if w.contains("websearch") {
        Some("websearch")
    } else if w.contains("alistorage") {
        Some("alistorage")
    } else if w.contains("fbhdp") || w.contains("hadoop") {
        Some("fbhadoop")
    } else {
        None
    }
}

/// The claims for one (workload, load, baseline); the load may be given as
/// a fraction or in percent.
pub fn paper_claims(workload: &str, load: f64, baseline: &str) -> Vec<&'static PaperClaim> {
    let Some(key) = workload_key(workload) else {
        return Vec::new();
    };
    PAPER_CLAIMS
        .iter()
        .filter(|c| {
            c.workload == key
                && c.baseline.eq_ignore_ascii_case(baseline)
                && c.loads
                    .iter()
                    .any(|&l| (l - load).abs() < 1e-9 || (l * 100.0 - load).abs() < 1e-6)
        })
        .collect()
}

const DASH: &str = "—";

fn num(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn opt_num(v: Option<f64>) -> String {
    v.map_or_else(|| DASH.to_string(), num)
}

fn mean_ci(mean: Option<f64>, ci: Option<f64>) -> String {
    match (mean, ci) {
        (Some(m), Some(c)) => format!("{} ± {}", num(m), num(c)),
        (Some(m), None) => num(m),
        _ => "no completed flows".to_string(),
    }
}

/// A fraction in percent, one decimal (`—` for none).
pub(crate) fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| DASH.to_string(), |v| format!("{:.1} %", v * 100.0))
}

fn signed_pct(v: Option<f64>) -> String {
    v.map_or_else(|| DASH.to_string(), |v| format!("{:+.1} %", v * 100.0))
}

fn claim_range((a, b): (f64, f64)) -> String {
    if a == b {
        format!("{a:.0} %")
    } else {
        format!("{a:.0}..{b:.0} %")
    }
}

fn claims_cell(claims: &[&PaperClaim], pick: impl Fn(&PaperClaim) -> Option<(f64, f64)>) -> String {
    let parts: Vec<String> = claims
        .iter()
        .filter_map(|c| pick(c).map(|r| format!("{} ({})", claim_range(r), c.source)))
        .collect();
    if parts.is_empty() {
        DASH.to_string()
    } else {
        parts.join("; ")
    }
}

pub use lcmp_topology::units::human_bytes as fmt_bytes;

/// Markdown table cells must not contain `|` or line breaks.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace(['\n', '\r'], " ")
}

fn json_cell(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => cell(s),
        serde_json::Value::Number(_) | serde_json::Value::Bool(_) => v.to_string(),
        serde_json::Value::Null => DASH.to_string(),
        serde_json::Value::Array(items)
            if items.iter().all(|i| !i.is_array() && !i.is_object()) =>
        {
            items.iter().map(json_cell).collect::<Vec<_>>().join(", ")
        }
        other => format!("`{}`", cell(&other.to_string())),
    }
}

/// Splits the experiment echo into `dotted.key -> cell` settings and
/// arrays of objects (per-path calibration, failures), which read better
/// as their own tables than as JSON in a cell.
fn flatten<'a>(
    key: &str,
    v: &'a serde_json::Value,
    scalars: &mut Vec<(String, String)>,
    tables: &mut Vec<(String, &'a [serde_json::Value])>,
) {
    let join = |k: &str| {
        if key.is_empty() {
            k.to_string()
        } else {
            format!("{key}.{k}")
        }
    };
    match v {
        serde_json::Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                flatten(&join(k), v, scalars, tables);
            }
        }
        serde_json::Value::Array(items)
            if !items.is_empty() && items.iter().all(|i| i.is_object()) =>
        {
            tables.push((key.to_string(), items));
        }
        serde_json::Value::Null => scalars.push((key.to_string(), DASH.to_string())),
        serde_json::Value::Array(items) if items.is_empty() => {
            scalars.push((key.to_string(), "none".to_string()))
        }
        other => scalars.push((key.to_string(), json_cell(other))),
    }
}

/// An array of objects as a table, one column per key (first-seen order).
fn object_table(out: &mut String, name: &str, items: &[serde_json::Value]) {
    let mut cols: Vec<&str> = Vec::new();
    for i in items {
        if let serde_json::Value::Object(m) = i {
            for k in m.keys() {
                if !cols.contains(&k.as_str()) {
                    cols.push(k);
                }
            }
        }
    }
    let _ = writeln!(out, "{}:\n", cell(name));
    header(out, &cols.iter().map(|c| cell(c)).collect::<Vec<_>>());
    for i in items {
        let cells = cols
            .iter()
            .map(|c| i.get(*c).map_or_else(|| DASH.to_string(), json_cell))
            .collect::<Vec<_>>();
        row(out, &cells);
    }
    out.push('\n');
}

/// One markdown table row.
pub(crate) fn row(out: &mut String, cells: &[String]) {
    let _ = writeln!(out, "| {} |", cells.join(" | "));
}

fn header(out: &mut String, cells: &[String]) {
    row(out, cells);
    row(out, &vec!["---".to_string(); cells.len()]);
}

/// The items without repeats, in first-seen order.
pub(crate) fn distinct<T: PartialEq + Clone>(items: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut out = Vec::new();
    for i in items {
        if !out.contains(&i) {
            out.push(i);
        }
    }
    out
}

fn setup(out: &mut String, s: &Summary) {
    let _ = writeln!(out, "## Setup\n");
    match &s.experiment {
        v @ serde_json::Value::Object(map) if !map.is_empty() => {
            let mut scalars = Vec::new();
            let mut tables = Vec::new();
            flatten("", v, &mut scalars, &mut tables);
            // The configuration first, measurements (calibration) last.
            let rank = |k: &str| {
                let top = k.split('.').next().unwrap_or(k);
                match top {
                    "config" | "name" => 0,
                    "topology" | "from" | "to" | "senders" | "receivers" => 1,
                    "calibration" | "failures" => 3,
                    _ => 2,
                }
            };
            scalars.sort_by_key(|(k, _)| rank(k));
            tables.sort_by_key(|(k, _)| rank(k));
            header(out, &["setting".into(), "value".into()]);
            for (k, v) in &scalars {
                row(out, &[cell(k), v.clone()]);
            }
            out.push('\n');
            for (k, items) in tables {
                object_table(out, &k, items);
            }
        }
        serde_json::Value::Null => {
            let _ = writeln!(out, "No experiment configuration was recorded.\n");
        }
        other => {
            let pretty = serde_json::to_string_pretty(other).unwrap_or_default();
            let _ = writeln!(out, "```json\n{pretty}\n```\n");
        }
    }
    let runs = &s.runs;
    let list = |v: Vec<String>| v.join(", ");
    let _ = writeln!(
        out,
        "Runs: {} (workloads: {}; loads: {}; policies: {}; seeds: {}).\n",
        runs.len(),
        list(distinct(runs.iter().map(|r| r.workload.clone()))),
        list(distinct(runs.iter().map(|r| r.load.to_string()))),
        list(distinct(runs.iter().map(|r| r.policy.clone()))),
        list(distinct(runs.iter().map(|r| r.seed.to_string()))),
    );
    let m = &s.ideal;
    // Per byte (a message transport, the simulator's standalone FCT) or
    // per TCP segment with its handshake and acknowledgement.
    let ideal = if m.mss_bytes == 1 && m.wire_bytes_per_segment == 1 {
        format!(
            "{} x base RTT ({:.3} ms) + size x 8 / {} Mbit/s",
            m.rtts,
            m.base_rtt_ns as f64 / 1e6,
            num(m.bottleneck_bps as f64 / 1e6)
        )
    } else {
        format!(
            "{} x base RTT ({:.3} ms) + ceil(size / {} B) x {} B x 8 / {} Mbit/s",
            m.rtts,
            m.base_rtt_ns as f64 / 1e6,
            m.mss_bytes,
            m.wire_bytes_per_segment,
            num(m.bottleneck_bps as f64 / 1e6)
        )
    };
    let definition = s.experiment["ideal"]["definition"]
        .as_str()
        .unwrap_or("the flow alone on the minimum-delay path");
    // A model without a rate is no run-wide ideal: each flow has its own
    // (a trace between any DCs: its DC pair's), which the definition says.
    let ideal = if m.bottleneck_bps == 0 {
        definition.to_string()
    } else {
        format!("{ideal}: {definition}")
    };
    let _ = writeln!(
        out,
        "Ideal FCT = {ideal}. Slowdown = FCT / ideal, not clamped at 1 \
         (\"below ideal\" counts completed flows under 1: a flow on a fatter \
         path than the minimum-delay one can beat the ideal). Flows still \
         unfinished when the drain bound ran out count at FCT = deadline - \
         start, a lower bound, so where there are any the tail quantiles are \
         lower bounds. Quantiles interpolate linearly between closest \
         ranks; the CI is the 95 % Student-t interval of the mean over seeds. \
         Warm-up flows are excluded.\n",
    );
}

fn slowdown_table(out: &mut String, aggs: &[&Aggregate]) {
    let _ = writeln!(out, "### Slowdown\n");
    header(
        out,
        &[
            "policy".into(),
            "runs".into(),
            "flows completed / started".into(),
            "median slowdown (mean ± 95 % CI)".into(),
            "p99 slowdown (mean ± 95 % CI)".into(),
            "below ideal".into(),
            "calibration ok runs".into(),
        ],
    );
    for a in aggs {
        row(
            out,
            &[
                cell(&a.policy),
                a.runs.to_string(),
                format!("{} / {}", a.flows_completed, a.flows_started),
                mean_ci(a.median_mean, a.median_ci95),
                mean_ci(a.p99_mean, a.p99_ci95),
                pct(a.share_below_ideal_mean),
                format!("{} / {}", a.calibration_ok_runs, a.runs),
            ],
        );
    }
    out.push('\n');
    for a in aggs {
        if a.share_below_ideal_mean.is_some_and(|s| s > 0.05) {
            let _ = writeln!(
                out,
                "**Warning:** {} of {}'s flows finished faster than the ideal: \
                 the ideal's base RTT or rate is off.\n",
                pct(a.share_below_ideal_mean),
                cell(&a.policy)
            );
        }
    }
}

fn bucket_table(out: &mut String, t: &BucketTable) {
    let _ = writeln!(
        out,
        "### Slowdown by flow size\n\n{} equal-count buckets of flow size over all policies and seeds; \
         slowdowns pooled over seeds (median / p99, flows).\n",
        t.bounds.len()
    );
    if t.bounds.is_empty()
        || t.per_policy
            .iter()
            .all(|p| p.counts.iter().all(|&c| c == 0))
    {
        let _ = writeln!(out, "No completed flows.\n");
        return;
    }
    let mut head = vec!["flow size".to_string()];
    head.extend(t.per_policy.iter().map(|p| cell(&p.policy)));
    header(out, &head);
    for (i, &(lo, hi)) in t.bounds.iter().enumerate() {
        let range = if lo == hi {
            fmt_bytes(lo)
        } else {
            format!("{} – {}", fmt_bytes(lo), fmt_bytes(hi))
        };
        let mut cells = vec![range];
        for p in &t.per_policy {
            let count = p.counts.get(i).copied().unwrap_or(0);
            cells.push(if count == 0 {
                DASH.to_string()
            } else {
                format!(
                    "{} / {} ({count})",
                    opt_num(p.medians.get(i).copied().flatten()),
                    opt_num(p.p99s.get(i).copied().flatten())
                )
            });
        }
        row(out, &cells);
    }
    out.push('\n');
}

fn path_table(out: &mut String, aggs: &[&Aggregate], runs: &[&RunSummary]) {
    let _ = writeln!(out, "### Path use (mean over seeds)\n");
    let choosing = transit_choices(runs.iter().copied());
    if !choosing.is_empty() {
        let _ = writeln!(
            out,
            "Omitted: switches after the source ({}) also choose among several next hops toward \
             the destination, so the bytes leaving a source port belong to no single path; see the \
             link utilization.\n",
            cell(&choosing.join(", "))
        );
        return;
    }
    let _ = writeln!(
        out,
        "Utilization = bytes the source switch's egress port sent in the \
         measurement window / (window x path bottleneck rate); a flow's path is the port the source \
         switch logged for it (`lcmp-switch lcmp --flow-log`).\n"
    );
    let names = distinct(
        aggs.iter()
            .flat_map(|a| a.paths.iter().map(|p| p.name.clone())),
    );
    if names.is_empty() {
        let _ = writeln!(out, "No paths recorded.\n");
        return;
    }
    let mut head = vec!["policy".to_string()];
    head.extend(
        names
            .iter()
            .map(|n| format!("{}: utilization (flows)", cell(n))),
    );
    header(out, &head);
    for a in aggs {
        let mut cells = vec![cell(&a.policy)];
        for n in &names {
            cells.push(match a.paths.iter().find(|p| &p.name == n) {
                Some(p) => format!("{} ({:.0})", pct(p.utilization_mean), p.flows_mean),
                None => DASH.to_string(),
            });
        }
        row(out, &cells);
    }
    out.push('\n');
}

fn link_table(out: &mut String, aggs: &[&Aggregate], links: &[LinkSpec]) {
    if links.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "### Link utilization (mean over seeds)\n\nUtilization = bytes a switch's port sent toward \
         its neighbour in the measurement window / (window x the port's rate), for both directions \
         of every switch-to-switch link, in topology order; {DASH} where not measured.\n"
    );
    let mut head = vec!["link".to_string(), "rate".to_string()];
    head.extend(aggs.iter().map(|a| cell(&a.policy)));
    header(out, &head);
    for l in links {
        let mut cells = vec![
            cell(&l.name),
            format!("{} Mbit/s", num(l.rate_bps as f64 / 1e6)),
        ];
        cells.extend(
            aggs.iter()
                .map(|a| pct(a.link_utilization.get(&l.name).copied())),
        );
        row(out, &cells);
    }
    out.push('\n');
}

/// Which runs have flows whose switch path was not reconstructed, and why
/// (only for runs whose switches' logs were read).
fn switch_paths(out: &mut String, runs: &[RunSummary]) {
    let known: Vec<&RunSummary> = runs
        .iter()
        .filter(|r| r.transit_choices.is_some())
        .collect();
    if known.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "## Switch paths\n\nEach flow's forward and reverse path is the sequence of switches that \
         forwarded it, read from every switch's decision log (`decisions-<switch>.csv` in the run's \
         directory); a path is missing where a switch on the way has no decision for the flow \
         (`no_decision@<switch>`), a port leads elsewhere (`wrong_host`, `no_port`) or the \
         decisions loop (`loop`), counted by reason, never guessed.\n"
    );
    let missing: Vec<(&RunSummary, String)> = known
        .iter()
        .filter_map(|r| Some((*r, paths_missing_note(r)?)))
        .collect();
    if missing.is_empty() {
        let _ = writeln!(
            out,
            "Every flow's paths were reconstructed in all {} runs.\n",
            known.len()
        );
        return;
    }
    for (r, note) in missing {
        let _ = writeln!(
            out,
            "- {} / load {} / {} / seed {}: {}",
            cell(&r.workload),
            r.load,
            cell(&r.policy),
            r.seed,
            note
        );
    }
    out.push('\n');
}

fn reduction_table(out: &mut String, reds: &[&Reduction]) {
    let _ = writeln!(
        out,
        "### LCMP vs baselines\n\n(LCMP - baseline) / baseline of the seed-mean slowdowns: \
         negative = LCMP lower (better). The paper's numbers come from its 8-DC RDMA/DCQCN \
         testbed at full rates: compare direction and rough size, not digits.\n"
    );
    if reds.is_empty() {
        let _ = writeln!(out, "No LCMP runs or no baseline to compare with.\n");
        return;
    }
    header(
        out,
        &[
            "baseline".into(),
            "median: here".into(),
            "median: paper".into(),
            "p99: here".into(),
            "p99: paper".into(),
        ],
    );
    for r in reds {
        let claims = paper_claims(&r.workload, r.load, &r.baseline);
        row(
            out,
            &[
                cell(&r.baseline),
                signed_pct(r.median_reduction),
                claims_cell(&claims, |c| c.median_pct),
                signed_pct(r.p99_reduction),
                claims_cell(&claims, |c| c.p99_pct),
            ],
        );
    }
    out.push('\n');
}

fn calibration(out: &mut String, runs: &[RunSummary]) {
    let _ = writeln!(out, "## Calibration\n");
    let bad: Vec<&RunSummary> = runs.iter().filter(|r| !r.calibration_ok).collect();
    if bad.is_empty() {
        let _ = writeln!(out, "All {} runs passed calibration.\n", runs.len());
        return;
    }
    let _ = writeln!(
        out,
        "{} of {} runs deviated beyond tolerance; their numbers are included above and flagged here.\n",
        bad.len(),
        runs.len()
    );
    for r in bad {
        let notes = if r.calibration_notes.is_empty() {
            "no notes".to_string()
        } else {
            r.calibration_notes.join("; ")
        };
        let _ = writeln!(
            out,
            "- {} / load {} / {} / seed {}: {}",
            r.workload,
            r.load,
            r.policy,
            r.seed,
            notes.replace('\n', " ")
        );
    }
    out.push('\n');
}

fn runs_table(out: &mut String, runs: &[RunSummary]) {
    if runs.is_empty() {
        return;
    }
    let _ = writeln!(out, "## Runs\n");
    header(
        out,
        &[
            "workload".into(),
            "load".into(),
            "policy".into(),
            "seed".into(),
            "started".into(),
            "completed".into(),
            "failed".into(),
            "unfinished".into(),
            "median".into(),
            "p90".into(),
            "p99".into(),
            "flows per path".into(),
            "unassigned".into(),
            "calibration".into(),
        ],
    );
    for r in runs {
        let per_path: Vec<String> = r
            .paths
            .iter()
            .map(|p| format!("{} {}", cell(&p.name), p.flows))
            .collect();
        row(
            out,
            &[
                cell(&r.workload),
                r.load.to_string(),
                cell(&r.policy),
                r.seed.to_string(),
                r.flows_started.to_string(),
                r.flows_completed.to_string(),
                r.flows_failed.to_string(),
                r.flows_unfinished.to_string(),
                opt_num(r.median_slowdown),
                opt_num(r.p90_slowdown),
                opt_num(r.p99_slowdown),
                per_path.join(", "),
                r.flows_unassigned.to_string(),
                if r.calibration_ok { "ok" } else { "FAILED" }.to_string(),
            ],
        );
    }
    out.push('\n');
}

fn plots_section(out: &mut String, plots: &[PathBuf]) {
    if plots.is_empty() {
        return;
    }
    let _ = writeln!(out, "## Plots\n");
    let stems = distinct(plots.iter().map(|p| p.with_extension("")));
    for stem in stems {
        let find = |ext: &str| {
            plots
                .iter()
                .find(|p| p.with_extension("") == stem && p.extension().is_some_and(|e| e == ext))
        };
        let title = stem
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let link = |p: &PathBuf| p.to_string_lossy().replace(' ', "%20");
        match (find("png"), find("svg")) {
            (Some(png), Some(svg)) => {
                let _ = writeln!(out, "![{title}]({})\n\n[SVG]({})\n", link(png), link(svg));
            }
            (Some(one), None) | (None, Some(one)) => {
                let _ = writeln!(out, "![{title}]({})\n", link(one));
            }
            (None, None) => {
                for p in plots.iter().filter(|p| p.with_extension("") == stem) {
                    let _ = writeln!(out, "- [{title}]({})", link(p));
                }
                out.push('\n');
            }
        }
    }
}

/// The report: setup, per (workload, load) slowdown, size-bucket,
/// path-use (or why not), link-utilization and LCMP-vs-baseline tables,
/// calibration failures, flows without a reconstructed switch path,
/// `plots` (paths relative to the report's directory) as images, and one
/// row per run.
pub fn render_report(summary: &Summary, plots: &[PathBuf]) -> String {
    let mut out = String::from("# FCT experiment report\n\n");
    setup(&mut out, summary);
    let mut keys = groups(summary.runs.iter().map(|r| (r.workload.as_str(), r.load)));
    for (w, l) in groups(
        summary
            .aggregates
            .iter()
            .map(|a| (a.workload.as_str(), a.load)),
    ) {
        if !keys
            .iter()
            .any(|(kw, kl)| *kw == w && kl.to_bits() == l.to_bits())
        {
            keys.push((w, l));
        }
    }
    if keys.is_empty() {
        let _ = writeln!(out, "No runs: no completed flows.\n");
    }
    let same = |w: &str, l: f64, (kw, kl): &(String, f64)| w == kw && l.to_bits() == kl.to_bits();
    for key in &keys {
        let _ = writeln!(out, "## {}, load {}\n", cell(&key.0), key.1);
        let aggs: Vec<&Aggregate> = summary
            .aggregates
            .iter()
            .filter(|a| same(&a.workload, a.load, key))
            .collect();
        if aggs.iter().all(|a| a.flows_completed == 0) {
            let _ = writeln!(out, "No completed flows.\n");
        }
        slowdown_table(&mut out, &aggs);
        if let Some(t) = summary
            .buckets
            .iter()
            .find(|t| same(&t.workload, t.load, key))
        {
            bucket_table(&mut out, t);
        }
        let runs: Vec<&RunSummary> = summary
            .runs
            .iter()
            .filter(|r| same(&r.workload, r.load, key))
            .collect();
        path_table(&mut out, &aggs, &runs);
        link_table(&mut out, &aggs, &summary.links);
        let reds: Vec<&Reduction> = summary
            .reductions
            .iter()
            .filter(|r| same(&r.workload, r.load, key))
            .collect();
        reduction_table(&mut out, &reds);
    }
    calibration(&mut out, &summary.runs);
    switch_paths(&mut out, &summary.runs);
    plots_section(&mut out, plots);
    runs_table(&mut out, &summary.runs);
    out
}

/// The table `lcmp-testbed experiment` prints at the end: the mean
/// median and p99 slowdowns per (workload, load, policy) over seeds, and
/// LCMP's reductions against each baseline.
pub fn result_table(s: &Summary) -> String {
    let mut out = String::new();
    let q = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}"));
    let _ = writeln!(
        out,
        "\n{:<12} {:>5} {:<14} {:>4} {:>16} {:>16} {:>10}",
        "workload", "load", "policy", "runs", "median slowdown", "p99 slowdown", "calib ok"
    );
    for a in &s.aggregates {
        let _ = writeln!(
            out,
            "{:<12} {:>5} {:<14} {:>4} {:>16} {:>16} {:>7}/{}",
            a.workload,
            a.load,
            a.policy,
            a.runs,
            q(a.median_mean),
            q(a.p99_mean),
            a.calibration_ok_runs,
            a.runs
        );
    }
    if !s.reductions.is_empty() {
        let _ = writeln!(out, "\nLCMP vs baseline (negative = LCMP lower):");
        for r in &s.reductions {
            let pct = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:+.0}%", v * 100.0));
            let _ = writeln!(
                out,
                "{:<12} {:>5} vs {:<14} median {:>6}  p99 {:>6}",
                r.workload,
                r.load,
                r.baseline,
                pct(r.median_reduction),
                pct(r.p99_reduction)
            );
        }
    }
    out
}

/// Where the fidelity section starts and ends in `report.md`, so that a
/// second `fidelity` run replaces it instead of adding another.
pub const FIDELITY_BEGIN: &str = "<!-- lcmp-testbed fidelity: begin -->";
pub const FIDELITY_END: &str = "<!-- lcmp-testbed fidelity: end -->";

fn size_range(lo: u64, hi: u64) -> String {
    if lo == hi {
        fmt_bytes(lo)
    } else {
        format!("{} – {}", fmt_bytes(lo), fmt_bytes(hi))
    }
}

fn r_cell(r: Option<f64>) -> String {
    r.map_or_else(|| "undefined".to_string(), |r| format!("{r:.3}"))
}

fn pair_cell(a: Option<f64>, b: Option<f64>) -> String {
    format!("{} / {}", opt_num(a), opt_num(b))
}

fn d_cell(v: Option<f64>) -> String {
    v.map_or_else(|| DASH.to_string(), |v| format!("{v:.3}"))
}

fn ratio_cell(ratio: Option<f64>, ours: Option<f64>, reference: Option<f64>) -> String {
    match ratio {
        Some(x) => format!("{x:.2} ({})", pair_cell(ours, reference)),
        None => pair_cell(ours, reference),
    }
}

/// The fidelity section (between [`FIDELITY_BEGIN`] and [`FIDELITY_END`]):
/// first the headline per policy (W1 and KS of ln slowdown, the median
/// and p99 ratios ours / reference, FCT minus ideal per MB both sides)
/// with the floor, then, secondary, r over the size buckets (the pooled r
/// labelled as measuring that the policies differ), a table per policy of
/// ours and the reference per size bucket, notes, and `plots` (paths
/// relative to the report) as images.
pub fn render_fidelity_section(r: &FidelityReport, plots: &[PathBuf]) -> String {
    let mut out = format!("{FIDELITY_BEGIN}\n## Fidelity: testbed vs reference simulator\n\n");
    let _ = writeln!(
        out,
        "{}, load {}. Slowdown = max(1, FCT / ideal) (the LCMP artifact's; the reference's \
         ideal is the simulator's standalone FCT). Ours: {}. Fidelity is compared as \
         distributions: per policy, W1 (mean absolute difference of the quantiles) and KS \
         (largest gap between the CDFs) of ln(slowdown) between our flows and the \
         reference's, the ratios ours / reference of the median and the p99 slowdown, and FCT \
         minus ideal per MB (ms per MB of the unscaled flow, model time; slope between the \
         smallest and the largest of {} equal-count size buckets' medians).\n",
        cell(&r.workload),
        r.load,
        match r.ours_source {
            OursSource::Flows =>
                "the completed non-warm-up flows of runs/*/flows.csv, pooled over seeds",
            OursSource::SummaryBuckets =>
                "summary.json's size buckets (the run directory has no flows.csv)",
        },
        r.buckets
    );
    header(
        &mut out,
        &[
            "policy".into(),
            "reference".into(),
            "runs".into(),
            "flows ours / reference".into(),
            "W1 ln slowdown".into(),
            "KS ln slowdown".into(),
            "median ratio (ours / reference)".into(),
            "p99 ratio (ours / reference)".into(),
            "FCT − ideal, ms/MB ours / reference".into(),
        ],
    );
    for p in &r.policies {
        row(
            &mut out,
            &[
                cell(&p.policy),
                format!("`{}`", cell(&p.reference_file)),
                p.runs.to_string(),
                format!("{} / {}", p.ours_flows, p.reference_flows),
                d_cell(p.distance.w1_ln_slowdown),
                d_cell(p.distance.ks_ln_slowdown),
                ratio_cell(p.distance.median_ratio, p.ours_median, p.reference_median),
                ratio_cell(p.distance.p99_ratio, p.ours_p99, p.reference_p99),
                pair_cell(p.ours_excess_ms_per_mb, p.reference_excess_ms_per_mb),
            ],
        );
    }
    out.push('\n');
    let floors: Vec<_> = r
        .policies
        .iter()
        .filter_map(|p| Some((p, p.floor.as_ref()?)))
        .collect();
    if !floors.is_empty() {
        let _ = writeln!(
            out,
            "Floor: the reference against a second run of the simulator (the same figures, \
             the rerun in place of ours), measured here:\n"
        );
        header(
            &mut out,
            &[
                "policy".into(),
                "rerun".into(),
                "flows rerun / reference".into(),
                "W1 ln slowdown".into(),
                "KS ln slowdown".into(),
                "median ratio (rerun / reference)".into(),
                "p99 ratio (rerun / reference)".into(),
                "FCT − ideal, ms/MB rerun / reference".into(),
            ],
        );
        for (p, f) in floors {
            row(
                &mut out,
                &[
                    cell(&p.policy),
                    format!("`{}`", cell(&f.rerun_file)),
                    format!("{} / {}", f.rerun_flows, p.reference_flows),
                    d_cell(f.distance.w1_ln_slowdown),
                    d_cell(f.distance.ks_ln_slowdown),
                    ratio_cell(f.distance.median_ratio, f.rerun_median, p.reference_median),
                    ratio_cell(f.distance.p99_ratio, f.rerun_p99, p.reference_p99),
                    pair_cell(f.rerun_excess_ms_per_mb, p.reference_excess_ms_per_mb),
                ],
            );
        }
        out.push('\n');
    }
    if let Some(w1) = r.quoted_floor_lcmp_w1 {
        let _ = writeln!(
            out,
            "Floor, quoted (issue 26), not measured here: the simulator against its own rerun \
             of LCMP has W1 {w1} (no second reference run was given).\n"
        );
    }
    let _ = writeln!(
        out,
        "### Secondary: r over size buckets\n\nEach side cut into {} equal-count buckets of \
         its own flow sizes, bucket k of ours against bucket k of the reference; r = Pearson \
         correlation of ln(slowdown) over the buckets (the paper reports r = {} at the median \
         and {} at p99 between its testbed and its simulator). r pooled over the policies \
         measures that the policies differ, not that we match them: {} at the median, {} at \
         p99.\n",
        r.buckets,
        r.paper_r_median,
        r.paper_r_p99,
        r_cell(r.pooled_r_median),
        r_cell(r.pooled_r_p99)
    );
    header(
        &mut out,
        &["policy".into(), "r median".into(), "r p99".into()],
    );
    for p in &r.policies {
        row(
            &mut out,
            &[cell(&p.policy), r_cell(p.r_median), r_cell(p.r_p99)],
        );
    }
    out.push('\n');
    for p in &r.policies {
        let _ = writeln!(out, "#### {} by flow size\n", cell(&p.policy));
        header(
            &mut out,
            &[
                "bucket".into(),
                "sizes ours".into(),
                "sizes reference".into(),
                "flows ours / ref".into(),
                "median ours".into(),
                "median ref".into(),
                "p99 ours".into(),
                "p99 ref".into(),
            ],
        );
        for b in &p.buckets {
            row(
                &mut out,
                &[
                    (b.bucket + 1).to_string(),
                    size_range(b.ours_lo, b.ours_hi),
                    size_range(b.reference_lo, b.reference_hi),
                    format!("{} / {}", b.ours_flows, b.reference_flows),
                    opt_num(b.ours_median),
                    opt_num(b.reference_median),
                    opt_num(b.ours_p99),
                    opt_num(b.reference_p99),
                ],
            );
        }
        out.push('\n');
        for n in &p.notes {
            let _ = writeln!(out, "- {}", n.replace('\n', " "));
        }
        if !p.notes.is_empty() {
            out.push('\n');
        }
    }
    for n in &r.notes {
        let _ = writeln!(out, "Note: {}\n", n.replace('\n', " "));
    }
    let link = |p: &PathBuf| p.to_string_lossy().replace(' ', "%20");
    let png = plots
        .iter()
        .find(|p| p.extension().is_some_and(|e| e == "png"));
    let svg = plots
        .iter()
        .find(|p| p.extension().is_some_and(|e| e == "svg"));
    if let Some(png) = png {
        let _ = writeln!(out, "![fidelity]({})\n", link(png));
    }
    if let Some(svg) = svg {
        let _ = writeln!(out, "[SVG]({})\n", link(svg));
    }
    out.push_str(FIDELITY_END);
    out.push('\n');
    out
}

/// `report` with `section` (from [`render_fidelity_section`]) in place of
/// its fidelity section, or inserted before the per-run table (`## Runs`)
/// or at the end when it has none: a second run leaves one section.
pub fn with_fidelity_section(report: &str, section: &str) -> String {
    if let Some(b) = report.find(FIDELITY_BEGIN) {
        if let Some(e) = report[b..].find(FIDELITY_END) {
            let mut end = b + e + FIDELITY_END.len();
            if report[end..].starts_with('\n') {
                end += 1;
            }
            return format!("{}{section}{}", &report[..b], &report[end..]);
        }
    }
    if let Some(at) = report.find("\n## Runs\n") {
        return format!("{}{section}{}", &report[..at + 1], &report[at..]);
    }
    if report.is_empty() {
        return section.to_string();
    }
    let sep = if report.ends_with("\n\n") {
        ""
    } else if report.ends_with('\n') {
        "\n"
    } else {
        "\n\n"
    };
    format!("{report}{sep}{section}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::tests::{flow, ideal, run};
    use crate::analysis::{build_summary, RunInput};

    fn inputs() -> Vec<RunInput> {
        const I: u64 = 41_211_200; // ideal of 14480 bytes
        let mut v = Vec::new();
        for seed in [1, 2] {
            let k = seed; // seed 2 is a little slower
            v.push(run(
                "lcmp",
                seed,
                &[(14_480, I), (14_480, (1 + k) * I), (14_480, 2 * I)],
            ));
            v.push(run(
                "ecmp",
                seed,
                &[(14_480, 2 * I), (14_480, (3 + k) * I), (14_480, 4 * I)],
            ));
            v.push(run(
                "ucmp",
                seed,
                &[(14_480, 4 * I), (14_480, 8 * I), (14_480, 8 * I)],
            ));
        }
        v[4].calibration_ok = false;
        v[4].calibration_notes = vec!["dc2 RTT 23.1 ms vs 20 ms configured".into()];
        v
    }

    fn summary() -> Summary {
        let exp = serde_json::json!({
            "config": {"from": "dc1", "to": "dc4", "cc": null},
            "calibration": {"ok": false, "paths": [
                {"name": "dc2", "measured_rtt_us": 23100, "ok": false},
                {"name": "dc3", "measured_rtt_us": null, "ok": true}
            ]},
            "topology": "topologies/2dc-3path.toml",
            "from": "dc1", "to": "dc4",
            "workloads": ["websearch"], "loads": [0.3],
            "policies": ["lcmp", "ecmp", "ucmp"], "seeds": [1, 2],
            "scale": 1000, "load_definition": "fraction of DC1 inter-DC capacity",
            "duration_s": 10, "warmup_s": 2
        });
        build_summary(exp, &inputs(), &ideal())
    }

    #[test]
    fn result_table_has_a_row_per_policy_and_baseline() {
        let t = result_table(&summary());
        // The slowdowns as in `report_has_key_rows`; ecmp's seed 2 failed
        // its calibration.
        for row in [
            "websearch      0.3 lcmp              2             2.00             2.49       2/2",
            "websearch      0.3 ecmp              2             4.00             4.49       1/2",
            "websearch      0.3 ucmp              2             8.00             8.00       2/2",
            "websearch      0.3 vs ecmp           median   -50%  p99   -45%",
            "websearch      0.3 vs ucmp           median   -75%  p99   -69%",
        ] {
            assert!(t.lines().any(|l| l == row), "{row:?} in\n{t}");
        }
    }

    #[test]
    fn report_has_key_rows() {
        let plots = vec![
            PathBuf::from("cdf-websearch-0.3.svg"),
            PathBuf::from("cdf-websearch-0.3.png"),
        ];
        let md = render_report(&summary(), &plots);
        // Setup echo.
        assert!(
            md.contains("| topology | topologies/2dc-3path.toml |"),
            "{md}"
        );
        assert!(md.contains("| policies | lcmp, ecmp, ucmp |"), "{md}");
        assert!(
            md.contains("| load_definition | fraction of DC1 inter-DC capacity |"),
            "{md}"
        );
        assert!(md.contains("## websearch, load 0.3"), "{md}");
        // Seed 1: lcmp slowdowns 1, 2, 2 (median 2); seed 2: 1, 3, 2 (median 2).
        // ecmp: 2, 4, 4 (4) and 2, 5, 4 (4); ucmp: 4, 8, 8 (8) both.
        assert!(md.contains("| lcmp | 2 | 6 / 6 | 2.00 ± 0.00 |"), "{md}");
        assert!(md.contains("| ecmp | 2 | 6 / 6 | 4.00 ± 0.00 |"), "{md}");
        // lcmp calibration: both ok; ecmp seed 2 failed.
        assert!(md.contains("| 0.0 % | 2 / 2 |"), "{md}");
        assert!(md.contains("| 0.0 % | 1 / 2 |"), "{md}");
        // Reductions: median (2 - 4) / 4 = -50 %, vs UCMP (2 - 8) / 8 = -75 %.
        assert!(
            md.contains("| ecmp | -50.0 % | -36..-41 % (8-DC, 30/50/80 %); -36 % (Fig. 9) |"),
            "{md}"
        );
        assert!(
            md.contains("| ucmp | -75.0 % | -76 % (8-DC, 30/50/80 %); -76 % (Fig. 9) |"),
            "{md}"
        );
        // One size bucket (all flows 14480 B).
        assert!(md.contains("| 14.5 kB | 2.00 / "), "{md}");
        // Path use: all flows on dc2, 10 % utilization, 3 flows per run.
        assert!(md.contains("| lcmp | 10.0 % (3) | 0.0 % (0) |"), "{md}");
        // Calibration failure listed with its note.
        assert!(
            md.contains(
                "- websearch / load 0.3 / ecmp / seed 2: dc2 RTT 23.1 ms vs 20 ms configured"
            ),
            "{md}"
        );
        assert!(
            md.contains("![cdf-websearch-0.3](cdf-websearch-0.3.png)"),
            "{md}"
        );
        assert!(md.contains("[SVG](cdf-websearch-0.3.svg)"), "{md}");
        assert!(md.contains("| seeds | 1, 2 |"), "{md}");
        assert!(md.contains("| config.from | dc1 |"), "{md}");
        assert!(md.contains("| config.cc | — |"), "{md}");
        assert!(md.contains("| calibration.ok | false |"), "{md}");
        assert!(
            md.contains("calibration.paths:\n\n| measured_rtt_us | name | ok |"),
            "{md}"
        );
        assert!(md.contains("| — | dc3 | true |"), "{md}");
        let setup = &md[..md.find("calibration.ok").unwrap()];
        assert!(
            setup.contains("| config.from | dc1 |"),
            "config before calibration: {md}"
        );
        // Per-run row: slowdowns 2, 5, 4 -> median 4, p90 4.8, p99 4.98.
        assert!(
            md.contains("| websearch | 0.3 | ecmp | 2 | 3 | 3 | 0 | 0 | 4.00 | 4.80 | 4.98 | dc2 3, dc3 0 | 0 | FAILED |"),
            "{md}"
        );
    }

    #[test]
    fn network_sections_where_transit_switches_choose() {
        use crate::analysis::NetworkInput;
        use crate::analysis::{build_summary_with_network, link_name, LinkLoad, LinkSpec};
        let link = |from: &str, to: &str, tx| LinkLoad {
            link: LinkSpec {
                name: link_name(from, to),
                from: from.into(),
                to: to.into(),
                rate_bps: 10_000_000,
            },
            tx_bytes: tx,
        };
        // Run i (lcmp, ecmp, ucmp of seed 1, then of seed 2) sent
        // 125 kB x (i + 1) dc1->dc3 in its 1 s window: 1 Mbit x (i + 1) of
        // 10, so lcmp (0.1 + 0.4) / 2, ecmp (0.2 + 0.5) / 2, ucmp
        // (0.3 + 0.6) / 2.
        let networks = |missing: bool| -> Vec<NetworkInput> {
            (0..6u64)
                .map(|i| NetworkInput {
                    links: vec![
                        link("dc1", "dc3", Some(125_000 * (i + 1))),
                        link("dc3", "dc1", None),
                    ],
                    forward_paths_missing: if missing && i == 0 {
                        [("no_decision@dc6".to_string(), 2)].into()
                    } else {
                        Default::default()
                    },
                    transit_choices: Some(vec!["dc3".into(), "dc6".into()]),
                    ..NetworkInput::default()
                })
                .collect()
        };
        let s =
            build_summary_with_network(serde_json::json!({}), &inputs(), &networks(true), &ideal());
        let md = render_report(&s, &[]);
        assert!(
            md.contains(
                "### Path use (mean over seeds)\n\nOmitted: switches after the source (dc3, dc6) \
                 also choose"
            ),
            "{md}"
        );
        assert!(!md.contains("utilization (flows)"), "{md}");
        assert!(md.contains("| link | rate | lcmp | ecmp | ucmp |"), "{md}");
        assert!(
            md.contains("| dc1->dc3 | 10.0 Mbit/s | 25.0 % | 35.0 % | 45.0 % |"),
            "{md}"
        );
        assert!(
            md.contains("| dc3->dc1 | 10.0 Mbit/s | — | — | — |"),
            "{md}"
        );
        assert!(
            md.contains(
                "- websearch / load 0.3 / lcmp / seed 1: switch paths missing of 3 flows: \
                 forward 2 (no_decision@dc6 2)\n"
            ),
            "{md}"
        );
        let s = build_summary_with_network(
            serde_json::json!({}),
            &inputs(),
            &networks(false),
            &ideal(),
        );
        let md = render_report(&s, &[]);
        assert!(
            md.contains("Every flow's paths were reconstructed in all 6 runs."),
            "{md}"
        );
        // Without the switches' view (an older runner): no such sections.
        let md = render_report(&summary(), &[]);
        assert!(!md.contains("## Switch paths"), "{md}");
        assert!(!md.contains("### Link utilization"), "{md}");
    }

    #[test]
    fn wcmp_and_unknown_workloads_have_no_paper_numbers() {
        assert!(paper_claims("websearch", 0.3, "wcmp").is_empty());
        assert!(paper_claims("googlerpc", 0.3, "ecmp").is_empty());
        assert_eq!(
            paper_claims("WebSearch_distribution.txt", 30.0, "ECMP").len(),
            2
        );
        assert_eq!(paper_claims("websearch", 0.5, "ecmp").len(), 1);
        assert_eq!(paper_claims("FbHdp_distribution2015", 0.3, "ucmp").len(), 1);
        assert!(paper_claims("fbhadoop", 0.5, "ucmp").is_empty());
        let mut s = summary();
        for r in s.reductions.iter_mut() {
            r.baseline = "wcmp".into();
        }
        let md = render_report(&s, &[]);
        assert!(md.contains("| wcmp | -50.0 % | — | -"), "{md}");
    }

    #[test]
    fn fidelity_section_is_replaced_not_added() {
        let sec = |n: u32| format!("{FIDELITY_BEGIN}\n## Fidelity {n}\n{FIDELITY_END}\n");
        // No per-run table: appended after a blank line.
        let once = with_fidelity_section("# R\n\ntext\n", &sec(1));
        assert_eq!(once, format!("# R\n\ntext\n\n{}", sec(1)));
        let twice = with_fidelity_section(&once, &sec(2));
        assert_eq!(twice, format!("# R\n\ntext\n\n{}", sec(2)));
        // Before `## Runs`, and kept there.
        let md = "# R\n\nA\n\n## Runs\n\n| r |\n";
        let once = with_fidelity_section(md, &sec(1));
        assert_eq!(once, format!("# R\n\nA\n\n{}\n## Runs\n\n| r |\n", sec(1)));
        assert_eq!(
            with_fidelity_section(&once, &sec(2)),
            format!("# R\n\nA\n\n{}\n## Runs\n\n| r |\n", sec(2))
        );
        assert_eq!(with_fidelity_section("", &sec(1)), sec(1));
    }

    #[test]
    fn empty_summary_says_no_completed_flows() {
        let mut input = run("lcmp", 1, &[]);
        input.flows.push(flow(1, 100, None, None));
        let s = build_summary(serde_json::Value::Null, &[input], &ideal());
        let md = render_report(&s, &[]);
        assert!(md.contains("No completed flows."), "{md}");
        assert!(md.contains("no completed flows"), "{md}");
        let md = render_report(&build_summary(serde_json::json!({}), &[], &ideal()), &[]);
        assert!(md.contains("no completed flows"), "{md}");
        assert!(md.contains("All 0 runs passed calibration."), "{md}");
    }
}

//! Slowdowns per DC pair, for a trace between any two DCs (no from/to):
//! each run's `flows.csv` then names every flow's pair and its own ideal
//! (`src_dc`, `dst_dc`, `ideal_ns`), and `summary.json` echoes each pair
//! of switches' ideal and calibrated paths (`experiment.ideal.pairs`,
//! `experiment.calibration.pairs`).
//!
//! Per (workload, load): per DC pair and policy the median, p90, p99 and
//! mean of FCT / `ideal_ns` over the completed non-warm-up flows pooled
//! over seeds ([`PairTable`]), the pair's base RTT and how many of its
//! paths differ (in RTT or bottleneck rate), and the same pooled over
//! the pairs with as many such paths ([`PairGroup`]): the pairs where a
//! policy has a choice to make against those where it has none.

use std::collections::BTreeMap;
use std::path::Path;

use lcmp_traffic::record::FlowStatus;
use serde::{Deserialize, Serialize};

use crate::analysis::{groups, order_policies, quantile_sorted, sorted_finite, Summary};
use crate::run_dir::{csv_headers, flows_csv, read_rows};
use crate::{Error, Result};

/// A DC pair: (source DC, destination DC).
pub type DcPair = (String, String);

/// One non-warm-up flow of a policy's run.
#[derive(Debug, Clone, PartialEq)]
pub struct PairFlow {
    pub policy: String,
    pub src_dc: String,
    pub dst_dc: String,
    /// FCT / the pair's ideal; `None` where the flow did not complete (or
    /// has no ideal).
    pub slowdown: Option<f64>,
}

/// What the experiment's echo says of a DC pair.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PairPaths {
    /// The smallest base RTT among its pairs of switches, ns.
    pub base_rtt_ns: Option<u64>,
    /// Its calibrated paths that differ in RTT or bottleneck rate (alike
    /// ones, e.g. the spine choices inside a DC, are one choice), the most
    /// of any of its pairs of switches.
    pub paths: Option<usize>,
}

/// Slowdowns of one policy's flows of a pair or group.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    /// Completed flows (those with a slowdown).
    pub flows: u64,
    /// Non-warm-up flows without a slowdown (unfinished or failed).
    pub not_completed: u64,
    pub median: Option<f64>,
    pub p90: Option<f64>,
    pub p99: Option<f64>,
    pub mean: Option<f64>,
}

impl Stats {
    /// Of `slowdowns` (`None`: not completed); quantiles as in
    /// `summary.json` (type 7).
    pub fn of<'a>(slowdowns: impl IntoIterator<Item = &'a Option<f64>>) -> Stats {
        let mut done = Vec::new();
        let mut not_completed = 0;
        for s in slowdowns {
            match s {
                Some(s) => done.push(*s),
                None => not_completed += 1,
            }
        }
        let sorted = sorted_finite(&done);
        Stats {
            flows: sorted.len() as u64,
            not_completed,
            median: quantile_sorted(&sorted, 0.5),
            p90: quantile_sorted(&sorted, 0.9),
            p99: quantile_sorted(&sorted, 0.99),
            mean: (!sorted.is_empty()).then(|| sorted.iter().sum::<f64>() / sorted.len() as f64),
        }
    }
}

/// One DC pair: per policy ([`PairTable::policies`] order) its figures.
#[derive(Debug, Clone, PartialEq)]
pub struct PairRow {
    pub pair: DcPair,
    pub paths: PairPaths,
    pub per_policy: Vec<Stats>,
}

/// The DC pairs with as many differing paths, pooled.
#[derive(Debug, Clone, PartialEq)]
pub struct PairGroup {
    /// `None`: pairs the echo says nothing of.
    pub paths: Option<usize>,
    pub pairs: Vec<DcPair>,
    pub per_policy: Vec<Stats>,
}

/// Per DC pair of one (workload, load).
#[derive(Debug, Clone, PartialEq)]
pub struct PairTable {
    pub workload: String,
    pub load: f64,
    /// In display order (LCMP first).
    pub policies: Vec<String>,
    /// In the echo's order (the topology's), then any others by name.
    pub pairs: Vec<PairRow>,
    /// By number of differing paths, fewest first.
    pub groups: Vec<PairGroup>,
}

/// Each DC pair's base RTT and differing paths, in the order of
/// `experiment.ideal.pairs`, from that and `experiment.calibration.pairs`
/// (each pair of switches: `from`, `to`, and its `paths` with
/// `configured_rtt_us` and `bottleneck_bps`).
pub fn pair_paths(experiment: &serde_json::Value) -> Vec<(DcPair, PairPaths)> {
    fn list(v: &serde_json::Value) -> impl Iterator<Item = &serde_json::Value> {
        v.as_array().into_iter().flatten()
    }
    let s = |v: &serde_json::Value| v.as_str().map(str::to_string);
    let mut dc_of: BTreeMap<(String, String), DcPair> = BTreeMap::new();
    let mut out: Vec<(DcPair, PairPaths)> = Vec::new();
    for p in list(&experiment["ideal"]["pairs"]) {
        let (Some(src), Some(dst)) = (s(&p["src_dc"]), s(&p["dst_dc"])) else {
            continue;
        };
        let dc = (src, dst);
        if let (Some(from), Some(to)) = (s(&p["from"]), s(&p["to"])) {
            dc_of.insert((from, to), dc.clone());
        }
        let rtt = p["base_rtt_ns"].as_u64();
        match out.iter_mut().find(|(k, _)| *k == dc) {
            Some((_, e)) => {
                e.base_rtt_ns = match (e.base_rtt_ns, rtt) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                }
            }
            None => out.push((
                dc,
                PairPaths {
                    base_rtt_ns: rtt,
                    paths: None,
                },
            )),
        }
    }
    for c in list(&experiment["calibration"]["pairs"]) {
        let (Some(from), Some(to)) = (s(&c["from"]), s(&c["to"])) else {
            continue;
        };
        let Some(dc) = dc_of.get(&(from, to)) else {
            continue;
        };
        let mut kinds: Vec<(Option<u64>, Option<u64>)> = list(&c["paths"])
            .map(|p| {
                (
                    p["configured_rtt_us"].as_u64(),
                    p["bottleneck_bps"].as_u64(),
                )
            })
            .collect();
        kinds.sort_unstable();
        kinds.dedup();
        if let Some((_, e)) = out.iter_mut().find(|(k, _)| k == dc) {
            e.paths = e.paths.max(Some(kinds.len()));
        }
    }
    out
}

impl PairTable {
    /// The table of `flows` (one (workload, load)), with `paths` from
    /// [`pair_paths`].
    pub fn compute(
        workload: &str,
        load: f64,
        flows: &[PairFlow],
        paths: &[(DcPair, PairPaths)],
    ) -> PairTable {
        let policies = order_policies(flows.iter().map(|f| f.policy.as_str()));
        let mut by_pair: BTreeMap<DcPair, Vec<&PairFlow>> = BTreeMap::new();
        for f in flows {
            by_pair
                .entry((f.src_dc.clone(), f.dst_dc.clone()))
                .or_default()
                .push(f);
        }
        let mut order: Vec<DcPair> = paths
            .iter()
            .map(|(k, _)| k.clone())
            .filter(|k| by_pair.contains_key(k))
            .collect();
        order.extend(
            by_pair
                .keys()
                .filter(|k| !order.contains(k))
                .cloned()
                .collect::<Vec<_>>(),
        );
        let stats = |fs: &[&PairFlow]| -> Vec<Stats> {
            policies
                .iter()
                .map(|p| Stats::of(fs.iter().filter(|f| &f.policy == p).map(|f| &f.slowdown)))
                .collect()
        };
        let info = |k: &DcPair| {
            paths
                .iter()
                .find(|(p, _)| p == k)
                .map_or_else(PairPaths::default, |(_, v)| *v)
        };
        let pairs: Vec<PairRow> = order
            .iter()
            .map(|k| PairRow {
                pair: k.clone(),
                paths: info(k),
                per_policy: stats(&by_pair[k]),
            })
            .collect();
        let mut counts: Vec<Option<usize>> = pairs.iter().map(|r| r.paths.paths).collect();
        // Fewest paths first, pairs the echo does not know last.
        counts.sort_unstable_by_key(|c| (c.is_none(), *c));
        counts.dedup();
        let groups = counts
            .into_iter()
            .map(|n| {
                let members: Vec<&PairRow> = pairs.iter().filter(|r| r.paths.paths == n).collect();
                let fs: Vec<&PairFlow> = members
                    .iter()
                    .flat_map(|r| by_pair[&r.pair].iter().copied())
                    .collect();
                PairGroup {
                    paths: n,
                    pairs: members.iter().map(|r| r.pair.clone()).collect(),
                    per_policy: stats(&fs),
                }
            })
            .collect();
        PairTable {
            workload: workload.to_string(),
            load,
            policies,
            pairs,
            groups,
        }
    }
}

/// The columns of flows.csv the table reads (the record's and the pair's).
#[derive(Deserialize)]
struct Row {
    id: u64,
    fct_ns: Option<u64>,
    status: FlowStatus,
    warmup: bool,
    src_dc: String,
    dst_dc: String,
    ideal_ns: Option<u64>,
}

/// The pair tables of the run directory `run_dir` whose `summary.json` is
/// `summary`, one per (workload, load); none where its flows.csv files
/// have no DC pairs (a run between one pair) or are missing.
pub fn load(run_dir: &Path, summary: &Summary) -> Result<Vec<PairTable>> {
    let paths = pair_paths(&summary.experiment);
    let mut out = Vec::new();
    for (workload, load) in groups(summary.runs.iter().map(|r| (r.workload.as_str(), r.load))) {
        let mut flows = Vec::new();
        for r in summary
            .runs
            .iter()
            .filter(|r| r.workload == workload && r.load.to_bits() == load.to_bits())
        {
            let file = flows_csv(run_dir, r);
            if !file.is_file() || !csv_headers(&file)?.iter().any(|h| h == "src_dc") {
                continue;
            }
            for row in read_rows(&file, |r: &Row| r.id)? {
                if row.warmup {
                    continue;
                }
                let slowdown = match (row.status, row.fct_ns, row.ideal_ns) {
                    (FlowStatus::Ok, Some(fct), Some(ideal)) if ideal > 0 => {
                        Some(fct as f64 / ideal as f64)
                    }
                    _ => None,
                };
                flows.push(PairFlow {
                    policy: r.policy.clone(),
                    src_dc: row.src_dc,
                    dst_dc: row.dst_dc,
                    slowdown,
                });
            }
        }
        if !flows.is_empty() {
            out.push(PairTable::compute(&workload, load, &flows, &paths));
        }
    }
    Ok(out)
}

/// One line of `pairs.csv`: a DC pair and policy of a (workload, load).
#[derive(Debug, Serialize)]
struct CsvRow<'a> {
    workload: &'a str,
    load: f64,
    policy: &'a str,
    src_dc: &'a str,
    dst_dc: &'a str,
    base_rtt_ns: Option<u64>,
    paths: Option<usize>,
    flows: u64,
    not_completed: u64,
    median: Option<f64>,
    p90: Option<f64>,
    p99: Option<f64>,
    mean: Option<f64>,
}

/// Writes `tables` as `path` (`pairs.csv`): one line per (workload, load,
/// DC pair, policy).
pub fn write_csv(path: &Path, tables: &[PairTable]) -> Result<()> {
    let err = |e: csv::Error| Error::new(format!("{}: {e}", path.display()));
    let mut w = csv::Writer::from_path(path).map_err(err)?;
    for t in tables {
        for r in &t.pairs {
            for (policy, s) in t.policies.iter().zip(&r.per_policy) {
                w.serialize(CsvRow {
                    workload: &t.workload,
                    load: t.load,
                    policy,
                    src_dc: &r.pair.0,
                    dst_dc: &r.pair.1,
                    base_rtt_ns: r.paths.base_rtt_ns,
                    paths: r.paths.paths,
                    flows: s.flows,
                    not_completed: s.not_completed,
                    median: s.median,
                    p90: s.p90,
                    p99: s.p99,
                    mean: s.mean,
                })
                .map_err(err)?;
            }
        }
    }
    w.flush()
        .map_err(|e| Error::new(format!("{}: {e}", path.display())))
}

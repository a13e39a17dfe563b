//! `report.md`'s section of a trace between any two DCs: the DC pairs
//! grouped by how many differing paths they have, then one row per pair;
//! every figure per pair is in `pairs.csv`.

use std::fmt::Write as _;

use crate::format::{cell, num, opt_num, DASH};
use crate::pairs::{PairTable, Stats};
use crate::table::Table;

/// Groups of at most this many pairs name them.
const NAMED: usize = 4;

/// `median / p99 (flows)`, as the size-bucket table writes a bucket.
fn stats_cell(s: &Stats) -> String {
    if s.flows == 0 {
        return DASH.to_string();
    }
    format!("{} / {} ({})", opt_num(s.median), opt_num(s.p99), s.flows)
}

fn paths_cell(n: Option<usize>) -> String {
    n.map_or_else(|| DASH.to_string(), |n| n.to_string())
}

fn pair_name((src, dst): &(String, String)) -> String {
    cell(&format!("{src} → {dst}"))
}

/// `### By DC pair`.
pub(super) fn pair_section(out: &mut String, t: &PairTable) {
    let _ = writeln!(
        out,
        "### By DC pair\n\n{} DC pairs. Slowdown = FCT / the pair's own ideal (flows.csv's \
         `ideal_ns`) of the completed non-warm-up flows, pooled over seeds: median / p99 \
         (flows). Paths: the pair's calibrated paths that differ in RTT or bottleneck rate \
         (alike ones, such as the spine choices inside a DC, count once). Every pair and \
         policy with p90 and mean: `pairs.csv`.\n",
        t.pairs.len()
    );
    let policy_cols = t
        .policies
        .iter()
        .map(|p| format!("{}: median / p99 (flows)", cell(p)));
    if t.groups.len() > 1 {
        let mut g = Table::new(
            ["paths".to_string(), "DC pairs".to_string()]
                .into_iter()
                .chain(policy_cols.clone()),
        );
        for grp in &t.groups {
            let pairs = if grp.pairs.len() <= NAMED {
                let names: Vec<String> = grp.pairs.iter().map(pair_name).collect();
                format!("{}: {}", grp.pairs.len(), names.join(", "))
            } else {
                grp.pairs.len().to_string()
            };
            g.row(
                [paths_cell(grp.paths), pairs]
                    .into_iter()
                    .chain(grp.per_policy.iter().map(stats_cell)),
            );
        }
        out.push_str(&g.markdown());
        out.push('\n');
    }
    let mut p = Table::new(
        [
            "DC pair".to_string(),
            "base RTT".to_string(),
            "paths".to_string(),
        ]
        .into_iter()
        .chain(policy_cols),
    );
    for r in &t.pairs {
        let rtt = r.paths.base_rtt_ns.map_or_else(
            || DASH.to_string(),
            |ns| format!("{} ms", num(ns as f64 / 1e6)),
        );
        p.row(
            [pair_name(&r.pair), rtt, paths_cell(r.paths.paths)]
                .into_iter()
                .chain(r.per_policy.iter().map(stats_cell)),
        );
    }
    out.push_str(&p.markdown());
    out.push('\n');
    let missing: Vec<String> = t
        .policies
        .iter()
        .enumerate()
        .filter_map(|(i, policy)| {
            let n: u64 = t.pairs.iter().map(|r| r.per_policy[i].not_completed).sum();
            (n > 0).then(|| format!("{} {n}", cell(policy)))
        })
        .collect();
    if !missing.is_empty() {
        let _ = writeln!(
            out,
            "Not in these figures, flows that did not complete: {} (the tables above count \
             the unfinished ones at their lower bound).\n",
            missing.join(", ")
        );
    }
}

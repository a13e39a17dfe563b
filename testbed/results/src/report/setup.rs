//! `report.md`'s setup: the experiment's echo as settings and tables, the
//! runs, and how slowdowns are defined.

use std::fmt::Write as _;

use crate::analysis::Summary;
use crate::format::{cell, distinct, num, DASH};
use crate::table::Table;

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

/// Whether `key` is an echo with one entry per pair of switches (a trace
/// between any two DCs: hundreds, each with its paths), which
/// `summary.json` keeps and the report only counts.
fn per_pair(key: &str) -> bool {
    key.rsplit('.').next() == Some("pairs")
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
            if !items.is_empty() && items.iter().all(|i| i.is_object()) && per_pair(key) =>
        {
            scalars.push((
                key.to_string(),
                format!(
                    "{} pairs of switches: in summary.json (`experiment.{key}`), not repeated here",
                    items.len()
                ),
            ));
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
    let cols: Vec<&str> = distinct(
        items
            .iter()
            .filter_map(|i| i.as_object())
            .flat_map(|m| m.keys().map(String::as_str)),
    );
    let _ = writeln!(out, "{}:\n", cell(name));
    let mut t = Table::new(cols.iter().map(|c| cell(c)));
    for i in items {
        t.row(
            cols.iter()
                .map(|c| i.get(*c).map_or_else(|| DASH.to_string(), json_cell)),
        );
    }
    out.push_str(&t.markdown());
    out.push('\n');
}

/// `## Setup`: the experiment's settings, its tables (calibration and
/// failures last), the runs, and the definitions of the figures.
pub(super) fn setup(out: &mut String, s: &Summary) {
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
            let mut t = Table::new(["setting", "value"]);
            for (k, v) in &scalars {
                t.row([cell(k), v.clone()]);
            }
            out.push_str(&t.markdown());
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

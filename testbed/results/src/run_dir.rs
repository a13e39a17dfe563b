//! Reading an experiment's output directory: its `summary.json` and each
//! run's `runs/<run>/flows.csv`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use lcmp_traffic::record::FlowRecord;
use serde::de::DeserializeOwned;

use crate::analysis::{RunSummary, Summary};
use crate::{Error, Result};

/// `DIR/summary.json`.
pub fn load_summary(run_dir: &Path) -> Result<Summary> {
    let path = run_dir.join("summary.json");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        Error::new(format!(
            "{}: not a run directory: cannot read summary.json ({e})",
            run_dir.display()
        ))
    })?;
    serde_json::from_str(&text).map_err(|e| Error::new(format!("{}: {e}", path.display())))
}

/// The names the experiment runner (`experiment::run`) gives a run's
/// directory under `DIR/runs/`: Poisson runs, then trace replays (whose
/// load is computed, not configured).
fn run_dir_names(r: &RunSummary) -> [String; 2] {
    [
        format!("{}-load{}-{}-seed{}", r.workload, r.load, r.policy, r.seed),
        format!("{}-{}-seed{}", r.workload, r.policy, r.seed),
    ]
}

/// Whether `DIR/runs/*/flows.csv` exist at all.
pub fn has_any_flows_csv(run_dir: &Path) -> bool {
    std::fs::read_dir(run_dir.join("runs"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| e.path().join("flows.csv").is_file())
}

/// The flows.csv of run `r` of `run_dir` (the first of the runner's names
/// for it where none exists, for the error that names it).
pub fn flows_csv(run_dir: &Path, r: &RunSummary) -> PathBuf {
    let c = run_dir_names(r).map(|n| run_dir.join("runs").join(n).join("flows.csv"));
    c.iter().find(|p| p.is_file()).unwrap_or(&c[0]).clone()
}

/// An error naming the first of `runs` without its flows.csv.
pub fn require_flows(run_dir: &Path, runs: &[&RunSummary]) -> Result<()> {
    match runs.iter().find(|r| !flows_csv(run_dir, r).is_file()) {
        Some(missing) => Err(Error::new(format!(
            "{}: missing (runs/ has other runs' flows.csv; {} {} seed {} has none)",
            flows_csv(run_dir, missing).display(),
            missing.policy,
            missing.workload,
            missing.seed
        ))),
        None => Ok(()),
    }
}

/// The rows of a flows.csv as `T` (the columns it names; others are
/// ignored); a flow id twice is refused (ids are unique within a run: a
/// second row would count the flow twice).
pub fn read_rows<T: DeserializeOwned>(path: &Path, id: impl Fn(&T) -> u64) -> Result<Vec<T>> {
    let name = path.display();
    let err = |e: csv::Error| Error::new(format!("{name}: {e}"));
    let mut rd = csv::Reader::from_path(path).map_err(err)?;
    // What `deserialize()` does, keeping each record's line for the message.
    let headers = rd.headers().ok().cloned();
    let mut rec = csv::StringRecord::new();
    let mut rows = Vec::new();
    let mut line_of: HashMap<u64, u64> = HashMap::new();
    while rd.read_record(&mut rec).map_err(err)? {
        let row: T = rec.deserialize(headers.as_ref()).map_err(err)?;
        let line = rec.position().map_or(0, |p| p.line());
        if let Some(first) = line_of.insert(id(&row), line) {
            return Err(Error::new(format!(
                "{name}: flow id {} on lines {first} and {line} (ids are unique within a run)",
                id(&row)
            )));
        }
        rows.push(row);
    }
    Ok(rows)
}

/// The flows of a flows.csv ([`read_rows`]).
pub fn read_flows(path: &Path) -> Result<Vec<FlowRecord>> {
    read_rows(path, |f: &FlowRecord| f.id)
}

/// The column names of a CSV file (empty where it has none).
pub fn csv_headers(path: &Path) -> Result<Vec<String>> {
    let mut rd =
        csv::Reader::from_path(path).map_err(|e| Error::new(format!("{}: {e}", path.display())))?;
    Ok(rd
        .headers()
        .map(|h| h.iter().map(String::from).collect())
        .unwrap_or_default())
}

//! What a running testbed is made of, kept in `/run/lcmp-testbed/<name>/`
//! so that `status`, `exec`, `experiment` and `down` work from any later
//! process, also after the tool or a switch was killed with `kill -9`.
//!
//! The directory holds `state.json` ([`State`]), the effective topology the
//! switches read (`topology.toml`: generated hosts, scaled rates), and per
//! switch a log and a stats file. The state file is written *before* any
//! namespace is created (`complete: false`), so a crash half-way through
//! `up` still leaves enough for `down` to find; `down` also sweeps every
//! namespace whose name starts with the testbed's prefix.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// Where testbeds keep their state.
pub const RUN_DIR: &str = lcmp_control::paths::TESTBED_RUN_DIR;

/// Prefix of every namespace a testbed creates: `lcmptb-<name>-<node>`.
/// (Distinct from the `lcmpt-<pid>-` namespaces of the test harness.)
pub const NETNS_PREFIX: &str = lcmp_control::paths::TESTBED_NETNS_PREFIX;

/// Longest testbed name: namespace names stay short and readable.
pub const MAX_NAME_LEN: usize = 16;

/// Checks a testbed name: 1..=16 of `[a-z0-9_]`. No `-`, so that the
/// namespace prefix `lcmptb-<name>-` of one testbed is never a prefix of
/// another's.
pub fn validate_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(Error::new(format!(
            "bad testbed name {name:?}: use 1 to {MAX_NAME_LEN} of a-z, 0-9 and _"
        )))
    }
}

/// The namespace of node `node` (switch or host) of testbed `name`.
pub fn netns_name(name: &str, node: &str) -> String {
    format!("{}{node}", netns_prefix(name))
}

/// The prefix shared by all namespaces of testbed `name` (the agent finds
/// hosts' namespaces by it: one definition, in lcmp-control).
pub fn netns_prefix(name: &str) -> String {
    lcmp_control::paths::testbed_netns_prefix(name)
}

/// The state directory of testbed `name`.
pub fn dir(name: &str) -> PathBuf {
    Path::new(RUN_DIR).join(name)
}

/// How the switches of a testbed run (what `up` was given; an experiment
/// restarts them with other values).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SwitchSettings {
    /// Path-selection policy name (`lcmp`, `ecmp`, `wcmp`, `ucmp`).
    pub policy: String,
    /// LCMP weight of C_path.
    pub alpha: u32,
    /// LCMP weight of C_cong.
    pub beta: u32,
    /// Extra arguments given to every `lcmp-switch`.
    #[serde(default)]
    pub extra_args: Vec<String>,
}

impl Default for SwitchSettings {
    fn default() -> Self {
        SwitchSettings {
            policy: "lcmp".into(),
            alpha: 3,
            beta: 1,
            extra_args: Vec::new(),
        }
    }
}

/// A running switch daemon.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SwitchProc {
    /// Switch name in the topology.
    pub name: String,
    /// Its process id (0 when not running).
    pub pid: u32,
    /// Its log file.
    pub log: PathBuf,
    /// Its stats file.
    pub stats: PathBuf,
    /// Runs in one `lcmp-switch` process with every other switch of the
    /// testbed (then `pid` and `log` are that process's).
    #[serde(default)]
    pub shared: bool,
}

/// The testbed's agent (`lcmp-agent run --testbed NAME`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentProc {
    /// Its process id (0 when not running).
    pub pid: u32,
    /// Its log file.
    pub log: PathBuf,
    /// Where its metrics endpoint listens (`None`: no metrics).
    pub metrics: Option<String>,
}

/// The state file of one testbed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// Testbed name.
    pub name: String,
    /// Creation time, seconds since the Unix epoch.
    pub created_unix_s: u64,
    /// The topology file the user gave (or the built-in one's name).
    pub topology_source: String,
    /// The effective topology the switches read (in the state directory).
    pub topology_file: PathBuf,
    /// Hosts generated per DC switch (0: the file's own hosts only).
    pub hosts_per_dc: usize,
    /// Rates (and buffers) were divided by this.
    pub scale: f64,
    /// How the switches run.
    pub switches: SwitchSettings,
    /// Every namespace of the testbed, switches first.
    pub namespaces: Vec<String>,
    /// The switch daemons.
    pub procs: Vec<SwitchProc>,
    /// The agent, if one was started.
    #[serde(default)]
    pub agent: Option<AgentProc>,
    /// How its switch-to-switch links are made (`veth` in state files
    /// older than memory links).
    #[serde(default)]
    pub links: lcmp_netlab::SwitchLinks,
    /// False until `up` has finished (reachability checked).
    pub complete: bool,
}

impl State {
    /// The state file's path.
    pub fn path(name: &str) -> PathBuf {
        dir(name).join("state.json")
    }

    /// Writes the state file (atomically: a crash leaves the old one).
    pub fn save(&self) -> Result<()> {
        let d = dir(&self.name);
        std::fs::create_dir_all(&d).map_err(|e| Error::new(format!("{}: {e}", d.display())))?;
        let path = Self::path(&self.name);
        let tmp = path.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(self).expect("state serializes");
        std::fs::write(&tmp, text).map_err(|e| Error::new(format!("{}: {e}", tmp.display())))?;
        std::fs::rename(&tmp, &path).map_err(|e| Error::new(format!("{}: {e}", path.display())))
    }

    /// Reads testbed `name`'s state; a clear error if it is not up.
    pub fn load(name: &str) -> Result<State> {
        validate_name(name)?;
        let path = Self::path(name);
        let text = std::fs::read_to_string(&path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Error::new(format!(
                    "no testbed {name:?} is up (no {}); `lcmp-testbed list` shows those that are",
                    path.display()
                ))
            } else {
                Error::new(format!("{}: {e}", path.display()))
            }
        })?;
        serde_json::from_str(&text)
            .map_err(|e| Error::new(format!("{}: corrupt state file: {e}", path.display())))
    }
}

/// Names of the testbeds that have a state directory or namespaces.
pub fn list() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(RUN_DIR)
        .map(|d| {
            d.flatten()
                .filter(|e| e.path().is_dir())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    for ns in lcmp_netlab::netns::list_with_prefix(NETNS_PREFIX) {
        if let Some(name) = ns[NETNS_PREFIX.len()..].split('-').next() {
            names.push(name.to_string());
        }
    }
    names.sort();
    names.dedup();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in ["a", "tb1", "my_bed", "abcdefghijklmnop"] {
            validate_name(ok).unwrap();
        }
        for bad in ["", "a-b", "A", "x y", "../x", "abcdefghijklmnopq"] {
            let e = validate_name(bad).unwrap_err().to_string();
            assert!(e.contains("bad testbed name"), "{e}");
        }
        assert_eq!(netns_name("tb", "dc1h2"), "lcmptb-tb-dc1h2");
        assert!(netns_name("a", "x").starts_with(&netns_prefix("a")));
        assert!(!netns_name("ab", "x").starts_with(&netns_prefix("a")));
    }
}

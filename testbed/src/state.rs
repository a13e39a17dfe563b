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
    /// Path-selection policy name (`lcmp`, `ecmp`, `wcmp`, `ucmp`, ...;
    /// a spec's weights are the fields below, [`SwitchSettings::with_spec`]).
    pub policy: String,
    /// LCMP weight of C_path.
    pub alpha: u32,
    /// LCMP weight of C_cong.
    pub beta: u32,
    /// Weight of the delay score in C_path (w_dl; `None`: the switch's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub w_delay: Option<u32>,
    /// Weight of the capacity score in C_path (w_lc; `None`: the switch's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub w_capacity: Option<u32>,
    /// Weight of the queue level in C_cong (w_ql; `None`: the switch's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub w_queue: Option<u32>,
    /// Weight of the queue trend in C_cong (w_tl; `None`: the switch's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub w_trend: Option<u32>,
    /// Weight of the persistence in C_cong (w_dp; `None`: the switch's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub w_persist: Option<u32>,
    /// ECN thresholds as queueing time at each port's link rate, in the
    /// network's time (`KMIN_US,KMAX_US,PMAX,FLOOR`; `None`: the switch's
    /// default marking).
    #[serde(default)]
    pub ecn_link_time: Option<String>,
    /// When ECN marks are decided (`enqueue`, `dequeue`; `None`: the
    /// switch's default).
    #[serde(default)]
    pub ecn_mark_at: Option<String>,
    /// Drop only beyond this many times a port's buffer (`None`: at it).
    #[serde(default)]
    pub drop_headroom: Option<u64>,
    /// What C_path describes: `path` (the whole path; the switch's
    /// default) or `local` (the egress link, as the LCMP artifact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
    /// In-band network telemetry for HPCC (`--int`): every RoCEv2 frame
    /// with an INT collect block gets a hop record at each port it leaves.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub int: bool,
    /// The user's extra arguments to every `lcmp-switch`, passed last and
    /// never read here: an option the testbed sets too takes the user's
    /// value (the switch takes an option's last value).
    #[serde(default)]
    pub extra_args: Vec<String>,
}

impl Default for SwitchSettings {
    fn default() -> Self {
        SwitchSettings {
            policy: "lcmp".into(),
            alpha: 3,
            beta: 1,
            w_delay: None,
            w_capacity: None,
            w_queue: None,
            w_trend: None,
            w_persist: None,
            ecn_link_time: None,
            ecn_mark_at: None,
            drop_headroom: None,
            metric: None,
            int: false,
            extra_args: Vec::new(),
        }
    }
}

impl SwitchSettings {
    /// These settings running `policy`, a policy spec
    /// (`lcmp:alpha=1:beta=3`, checked before: `check_policy`); one that
    /// does not parse is passed on as the name, for the switch to refuse.
    pub fn for_policy(self, policy: &str) -> SwitchSettings {
        match policy.parse::<lcmp_policy::PolicySpec>() {
            Ok(spec) => self.with_spec(&spec),
            Err(_) => SwitchSettings {
                policy: policy.to_string(),
                ..self
            },
        }
    }

    /// These settings running `spec`: its policy's name, and the weights
    /// it gives in place of these.
    pub fn with_spec(self, spec: &lcmp_policy::PolicySpec) -> SwitchSettings {
        let w = spec.weights();
        SwitchSettings {
            policy: spec.name().name().to_string(),
            alpha: w.alpha.unwrap_or(self.alpha),
            beta: w.beta.unwrap_or(self.beta),
            w_delay: w.w_dl.or(self.w_delay),
            w_capacity: w.w_lc.or(self.w_capacity),
            w_queue: w.w_ql.or(self.w_queue),
            w_trend: w.w_tl.or(self.w_trend),
            w_persist: w.w_dp.or(self.w_persist),
            ..self
        }
    }

    /// The `lcmp-switch lcmp` options of these settings, the one place
    /// they are rendered: the testbed's settings, the network's `scaling`,
    /// then `process` (the options of how the testbed runs its switches),
    /// then the user's [`SwitchSettings::extra_args`].
    pub fn argv(&self, scaling: &lcmp_topology::Scaling, process: &[String]) -> Vec<String> {
        let mut v: Vec<String> = vec![
            "--policy".into(),
            self.policy.clone(),
            "--alpha".into(),
            self.alpha.to_string(),
            "--beta".into(),
            self.beta.to_string(),
            "--scaling".into(),
            scaling.to_string(),
        ];
        for (flag, w) in [
            ("--w-delay", self.w_delay),
            ("--w-capacity", self.w_capacity),
            ("--w-queue", self.w_queue),
            ("--w-trend", self.w_trend),
            ("--w-persist", self.w_persist),
        ] {
            if let Some(w) = w {
                v.push(format!("{flag}={w}"));
            }
        }
        if let Some(t) = &self.ecn_link_time {
            v.push(format!("--ecn-link-time={t}"));
        }
        if let Some(at) = &self.ecn_mark_at {
            v.push(format!("--ecn-mark-at={at}"));
        }
        if let Some(n) = self.drop_headroom {
            v.push(format!("--drop-headroom={n}"));
        }
        if let Some(m) = &self.metric {
            v.push(format!("--metric={m}"));
        }
        if self.int {
            v.push("--int".into());
        }
        v.extend(process.iter().cloned());
        v.extend(self.extra_args.iter().cloned());
        v
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
    /// The network the switches and the agent read (in the state
    /// directory): the file with its generated hosts, unscaled.
    pub topology_file: PathBuf,
    /// Hosts generated per DC switch (0: the file's own hosts only).
    pub hosts_per_dc: usize,
    /// How the network is scaled for emulation (given to the switches and
    /// the agent as `--scaling`).
    #[serde(default)]
    pub scaling: lcmp_topology::Scaling,
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

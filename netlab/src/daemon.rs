//! The `lcmp-switch` daemon in a testbed: finding (building) the binary,
//! starting it in a switch namespace on that switch's ports, reading its
//! stats file.
//!
//! # Which binary
//!
//! [`switch_binary`] returns, in this order:
//! 1. `$LCMP_SWITCH_BIN` if set (a prebuilt daemon, used as is);
//! 2. otherwise the `lcmp-switch` binary that
//!    `cargo build --release -p lcmp-switch` produces, running that command
//!    once per test process (the first caller builds, the others wait). The
//!    cargo is `$CARGO` (cargo sets it for the tests it runs) or the cargo
//!    that compiled this crate; it runs in the repository root with the
//!    caller's environment, so `CARGO_TARGET_DIR` and cargo configuration
//!    apply as they do for `cargo test`, and the binary's path is read from
//!    cargo's JSON messages rather than guessed. A release build, because
//!    link emulation (shaping, delay lines) and the traffic tests need an
//!    optimised switch; from a fresh clone the first run pays for one release
//!    build of the daemon (about a minute on the 2-core build VM), later
//!    runs are incremental.
//!
//! # Starting
//!
//! [`SwitchDaemon::start`] runs, inside the switch's namespace,
//! `lcmp-switch lcmp --topology FILE --switch NAME --port <ifnames in port order>
//! --peer-mac IF=MAC (every port) --poll event --stats-file F
//! --stats-interval-ms 20` plus the caller's extra arguments, and returns
//! once the daemon has written its first stats file (its XDP programs are
//! attached and its AF_XDP sockets bound by then). The process is stopped
//! (SIGTERM, which detaches the XDP programs) when the handle drops.
//!
//! # Reading the stats file
//!
//! [`SwitchDaemon::stats`] returns the file as the switch's one snapshot
//! type, [`lcmp_control::Snapshot`] (the control socket's `status` and the
//! metrics read the same): tests use its typed fields and accessors.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use serde::Deserialize;

use crate::lab::SwitchNode;
use crate::netns::Bg;
use crate::{repo_root, Error, Result};

/// Environment variable naming a prebuilt `lcmp-switch` to use instead of
/// building one.
pub const SWITCH_BIN_ENV: &str = "LCMP_SWITCH_BIN";

static BUILDS: Mutex<Vec<(&'static str, std::result::Result<PathBuf, String>)>> =
    Mutex::new(Vec::new());
static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// The `lcmp-switch` binary to run (see the module docs): `$LCMP_SWITCH_BIN`,
/// else a release build made once per process with cargo.
pub fn switch_binary() -> Result<PathBuf> {
    release_binary("lcmp-switch", "lcmp-switch", SWITCH_BIN_ENV)
}

/// The release binary `bin` of package `package`: `$<env>` if set (used as
/// is), else `cargo build --release -p <package> --bin <bin>`, run once per
/// process and binary (the first caller builds, later ones wait and reuse).
pub fn release_binary(package: &str, bin: &'static str, env: &str) -> Result<PathBuf> {
    if let Some(p) = program_from_env(env) {
        return p;
    }
    // Holding the lock while cargo runs makes concurrent callers wait for
    // one build instead of racing on cargo's own lock.
    let mut builds = BUILDS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, r)) = builds.iter().find(|(b, _)| *b == bin) {
        return r.clone().map_err(Error::new);
    }
    let r = cargo_build_release(package, bin);
    builds.push((bin, r.clone()));
    r.map_err(Error::new)
}

/// The program named by environment variable `env`, if it is set: its
/// path, or an error if that is not a file.
pub fn program_from_env(env: &str) -> Option<Result<PathBuf>> {
    let p = PathBuf::from(std::env::var_os(env)?);
    Some(if p.is_file() {
        Ok(p)
    } else {
        Err(Error::new(format!(
            "${env} = {} is not a file",
            p.display()
        )))
    })
}

/// What [`cargo_build_release`] reads of a cargo `compiler-artifact`
/// message (the rest is ignored).
#[derive(Deserialize)]
struct Artifact {
    target: ArtifactTarget,
    /// `null` for artifacts that are not executables.
    executable: Option<PathBuf>,
}

#[derive(Deserialize)]
struct ArtifactTarget {
    name: String,
}

/// `cargo build --release -p <package> --bin <bin>`, returning the
/// executable's path from cargo's `compiler-artifact` message.
fn cargo_build_release(package: &str, bin: &str) -> std::result::Result<PathBuf, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into());
    let out = Command::new(&cargo)
        .args([
            "build",
            "--release",
            "-p",
            package,
            "--bin",
            bin,
            "--message-format=json-render-diagnostics",
        ])
        .current_dir(repo_root())
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", Path::new(&cargo).display()))?;
    if !out.status.success() {
        return Err(format!(
            "`cargo build --release -p {package} --bin {bin}` failed ({})",
            out.status
        ));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    for line in stdout.lines() {
        if !line.contains("\"compiler-artifact\"") || !line.contains(bin) {
            continue;
        }
        let Ok(a) = serde_json::from_str::<Artifact>(line) else {
            continue;
        };
        if a.target.name != bin {
            continue;
        }
        if let Some(exe) = a.executable {
            return Ok(exe);
        }
    }
    Err(format!("cargo built {bin} but reported no executable"))
}

/// The `lcmp-switch` subcommand that runs a network file's switches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SwitchKind {
    /// `lcmp-switch lcmp`: a DCI topology's LCMP switches.
    Lcmp,
    /// `lcmp-switch rotor`: a rotor network's rotor or ToR.
    Rotor,
}

impl SwitchKind {
    /// The subcommand's name.
    pub fn subcommand(self) -> &'static str {
        match self {
            SwitchKind::Lcmp => "lcmp",
            SwitchKind::Rotor => "rotor",
        }
    }
}

/// The command line that runs switch `node` inside its namespace:
/// `ip netns exec <ns> <bin> KIND --topology FILE --switch NAME --poll event
/// --stats-file F --stats-interval-ms N --port ... --peer-mac IF=MAC ...`
/// followed by `extra`.
pub fn switch_argv(
    bin: &Path,
    kind: SwitchKind,
    topology: &Path,
    node: &SwitchNode,
    stats_path: &Path,
    stats_interval_ms: u64,
    extra: &[&str],
) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "ip".into(),
        "netns".into(),
        "exec".into(),
        node.netns.name().into(),
        bin.display().to_string(),
        kind.subcommand().into(),
        "--topology".into(),
        topology.display().to_string(),
        "--switch".into(),
        node.name.clone(),
        "--poll".into(),
        "event".into(),
        "--stats-file".into(),
        stats_path.display().to_string(),
        "--stats-interval-ms".into(),
        stats_interval_ms.to_string(),
        // Beside the stats file: unique per testbed and test, and where
        // `lcmp-ctl --testbed` and the agent look (DIR/SWITCH.sock).
        "--control-socket".into(),
        stats_path
            .with_file_name(format!("{}.sock", node.name))
            .display()
            .to_string(),
    ];
    args.extend(node.port_args());
    for p in &node.ports {
        args.push("--peer-mac".into());
        args.push(format!("{}={}", p.ifname, p.peer_mac));
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// The command line that runs every switch of `nodes` in one process, on
/// one event loop, from the calling namespace: `<bin> lcmp --topology FILE
/// --switch A --switch B ... --netns A=<ns of A> ... --poll event
/// --stats-file DIR/{switch}.stats.json --stats-interval-ms N
/// --control-socket DIR/{switch}.sock --port A/IF ... --peer-mac A/IF=MAC
/// ...` followed by `extra`. The switch opens each switch's ports inside
/// that switch's namespace. `stats_dir` holds every switch's stats file and
/// control socket, named as [`switch_argv`] names them.
pub fn switches_argv(
    bin: &Path,
    kind: SwitchKind,
    topology: &Path,
    nodes: &[SwitchNode],
    stats_dir: &Path,
    stats_interval_ms: u64,
    extra: &[&str],
) -> Vec<String> {
    let mut args: Vec<String> = vec![
        bin.display().to_string(),
        kind.subcommand().into(),
        "--topology".into(),
        topology.display().to_string(),
    ];
    for node in nodes {
        args.extend([
            "--switch".into(),
            node.name.clone(),
            "--netns".into(),
            format!("{}={}", node.name, node.netns.name()),
        ]);
    }
    args.extend([
        "--poll".into(),
        "event".into(),
        "--stats-file".into(),
        stats_dir.join("{switch}.stats.json").display().to_string(),
        "--stats-interval-ms".into(),
        stats_interval_ms.to_string(),
        "--control-socket".into(),
        stats_dir.join("{switch}.sock").display().to_string(),
    ]);
    for node in nodes {
        for p in &node.ports {
            args.push("--port".into());
            args.push(format!("{}/{}", node.name, p.ifname));
        }
        for p in &node.ports {
            args.push("--peer-mac".into());
            args.push(format!("{}/{}={}", node.name, p.ifname, p.peer_mac));
        }
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// Waits until a switch has written its first stats file at `stats_path`
/// (its XDP programs are attached and its sockets bound by then).
/// `exited()` says whether the daemon has died, with a description (its
/// log); fails then, or after `timeout`.
pub fn wait_ready(
    name: &str,
    stats_path: &Path,
    timeout: Duration,
    mut exited: impl FnMut() -> Option<String>,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        if stats_path.is_file() {
            return Ok(());
        }
        if let Some(why) = exited() {
            return Err(Error::new(format!(
                "lcmp-switch for {name} exited at start: {why}"
            )));
        }
        if Instant::now() >= deadline {
            return Err(Error::new(format!(
                "lcmp-switch for {name} wrote no stats within {timeout:?}"
            )));
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// A running `lcmp-switch` in a switch namespace (see the module docs).
/// Dropping it stops the daemon and removes its stats file.
#[derive(Debug)]
pub struct SwitchDaemon {
    name: String,
    /// Always `Some` until [`SwitchDaemon::stop`] takes it.
    bg: Option<Bg>,
    stats_path: PathBuf,
}

/// How often the daemon rewrites its stats file in tests.
pub const STATS_INTERVAL_MS: u64 = 20;

impl SwitchDaemon {
    /// Starts `bin lcmp` for switch `node` of topology file `topology` inside the
    /// switch's namespace, on all its ports with their peers' MACs, in event
    /// mode, writing stats every [`STATS_INTERVAL_MS`]; `extra` is appended
    /// (e.g. `["--policy", "ecmp"]`). Returns once the first stats file is
    /// there, or fails (with the daemon's log) if the daemon exits or
    /// writes none within 30 s.
    pub fn start(bin: &Path, topology: &Path, node: &SwitchNode, extra: &[&str]) -> Result<Self> {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let stats_path = std::env::temp_dir().join(format!(
            "{}{}-{n}-{}-stats.json",
            crate::netns::NETNS_PREFIX,
            std::process::id(),
            node.name
        ));
        let _ = std::fs::remove_file(&stats_path);
        let args = switch_argv(
            bin,
            SwitchKind::Lcmp,
            topology,
            node,
            &stats_path,
            STATS_INTERVAL_MS,
            extra,
        );
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut bg = Bg::start(&argv, &node.name)?;
        let ready = wait_ready(&node.name, &stats_path, Duration::from_secs(30), || {
            bg.exited().map(|status| format!("{status}: {}", bg.log()))
        });
        if let Err(e) = ready {
            return Err(Error::new(format!("{e}\n{}", bg.log())));
        }
        Ok(SwitchDaemon {
            name: node.name.clone(),
            bg: Some(bg),
            stats_path,
        })
    }

    /// The switch's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.bg.as_ref().map_or(0, Bg::pid)
    }

    /// Whether the daemon is still running.
    pub fn running(&mut self) -> bool {
        self.bg.as_mut().is_some_and(|b| b.exited().is_none())
    }

    /// Everything the daemon logged so far.
    pub fn log(&self) -> String {
        self.bg.as_ref().map(Bg::log).unwrap_or_default()
    }

    /// The stats file's path.
    pub fn stats_path(&self) -> &Path {
        &self.stats_path
    }

    /// The stats file as it is now.
    pub fn stats(&self) -> Result<Stats> {
        let text = std::fs::read_to_string(&self.stats_path)
            .map_err(|e| Error::new(format!("{}: {e}", self.stats_path.display())))?;
        serde_json::from_str(&text)
            .map_err(|e| Error::new(format!("{}: {e}", self.stats_path.display())))
    }

    fn stats_mtime(&self) -> Option<(SystemTime, u64)> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(&self.stats_path).ok()?;
        // The file is replaced by a rename: a new inode on every write.
        Some((m.modified().ok()?, m.ino()))
    }

    /// Stats taken after this call: waits for the file to be rewritten
    /// twice (the first rewrite may hold a snapshot taken just before the
    /// call), at most 5 s.
    pub fn fresh_stats(&self) -> Result<Stats> {
        Ok(fresh_stats_all(&[self])?.remove(0))
    }

    /// Polls the stats until `pred` holds (returns those stats) or
    /// `timeout` passes (returns an error with the last stats).
    pub fn wait_stats(&self, timeout: Duration, pred: impl Fn(&Stats) -> bool) -> Result<Stats> {
        let deadline = Instant::now() + timeout;
        loop {
            let s = self.stats();
            if let Ok(s) = &s {
                if pred(s) {
                    return Ok(s.clone());
                }
            }
            if Instant::now() >= deadline {
                return Err(Error::new(format!(
                    "stats of {} did not reach the condition within {timeout:?}: {s:?}",
                    self.name
                )));
            }
            thread::sleep(Duration::from_millis(2));
        }
    }

    /// Stops the daemon (SIGTERM: it detaches its XDP programs and writes
    /// final stats) and returns its log.
    pub fn stop(mut self) -> String {
        self.bg.take().map(Bg::stop).unwrap_or_default()
    }
}

impl Drop for SwitchDaemon {
    fn drop(&mut self) {
        // Stop the daemon first: on SIGTERM it writes its stats file once
        // more.
        drop(self.bg.take());
        let _ = std::fs::remove_file(&self.stats_path);
        let _ = std::fs::remove_file(self.stats_path.with_extension("tmp"));
    }
}

/// A stats file as the switch wrote it.
pub type Stats = lcmp_control::Snapshot;

/// Starts a daemon on every switch of `tb` (topology file `topology`), in
/// topology order; `extra(name)` gives each switch's extra arguments.
pub fn start_all(
    bin: &Path,
    tb: &crate::Lab,
    topology: &Path,
    extra: impl Fn(&str) -> Vec<String>,
) -> Result<Vec<SwitchDaemon>> {
    tb.switches
        .iter()
        .map(|node| {
            let args = extra(&node.name);
            let argv: Vec<&str> = args.iter().map(String::as_str).collect();
            SwitchDaemon::start(bin, topology, node, &argv)
        })
        .collect()
}

/// [`SwitchDaemon::fresh_stats`] of several daemons, waiting for all of them
/// at once.
pub fn fresh_stats_all(daemons: &[&SwitchDaemon]) -> Result<Vec<Stats>> {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut last: Vec<_> = daemons.iter().map(|d| d.stats_mtime()).collect();
    let mut changes = vec![0u32; daemons.len()];
    while changes.iter().any(|&c| c < 2) {
        if Instant::now() >= deadline {
            let late: Vec<&str> = daemons
                .iter()
                .zip(&changes)
                .filter(|(_, &c)| c < 2)
                .map(|(d, _)| d.name())
                .collect();
            return Err(Error::new(format!(
                "stats of {late:?} not rewritten twice within 5 s"
            )));
        }
        thread::sleep(Duration::from_millis(5));
        for (i, d) in daemons.iter().enumerate() {
            let now = d.stats_mtime();
            if now != last[i] {
                changes[i] += 1;
                last[i] = now;
            }
        }
    }
    daemons.iter().map(|d| d.stats()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn artifact_message() {
        let line = r#"{"reason":"compiler-artifact","package_id":"x","target":{"kind":["bin"],
            "name":"lcmp-switch","src_path":"/r/main.rs"},"profile":{},"features":[],
            "filenames":["/t/release/lcmp-switch"],"executable":"/t/release/lcmp-switch",
            "fresh":true}"#;
        let a: Artifact = serde_json::from_str(line).unwrap();
        assert_eq!(a.target.name, "lcmp-switch");
        assert_eq!(a.executable, Some(PathBuf::from("/t/release/lcmp-switch")));
        let lib =
            r#"{"reason":"compiler-artifact","target":{"name":"lcmp_wire"},"executable":null}"#;
        let a: Artifact = serde_json::from_str(lib).unwrap();
        assert_eq!(a.executable, None);
    }
}

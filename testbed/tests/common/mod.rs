//! What the testbed tests share: the release binaries, running
//! `lcmp-testbed`, unique names, and a guard that takes a testbed down.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use lcmp_netlab::{release_binary, repo_root};
use serde_json::Value;

pub static SERIAL: Mutex<()> = Mutex::new(());
pub static COUNTER: AtomicUsize = AtomicUsize::new(0);

pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The release binaries the tool runs (built once per test process).
pub struct Bins {
    pub testbed: PathBuf,
    pub switch: PathBuf,
    pub traffic: PathBuf,
    pub agent: PathBuf,
    pub ctl: PathBuf,
}

pub fn bins() -> &'static Bins {
    static BINS: OnceLock<Bins> = OnceLock::new();
    BINS.get_or_init(|| Bins {
        switch: release_binary("lcmp-switch", "lcmp-switch", "LCMP_SWITCH_BIN").unwrap(),
        traffic: release_binary("lcmp-traffic", "lcmp-traffic", "LCMP_TRAFFIC_BIN").unwrap(),
        testbed: release_binary("lcmp-testbed", "lcmp-testbed", "LCMP_TESTBED_BIN").unwrap(),
        agent: release_binary("lcmp-agent", "lcmp-agent", "LCMP_AGENT_BIN").unwrap(),
        ctl: release_binary("lcmp-agent", "lcmp-ctl", "LCMP_CTL_BIN").unwrap(),
    })
}

pub fn command(args: &[&str]) -> Command {
    let b = bins();
    let mut c = Command::new(&b.testbed);
    c.args(args)
        .env("LCMP_SWITCH_BIN", &b.switch)
        .env("LCMP_TRAFFIC_BIN", &b.traffic)
        .env("LCMP_AGENT_BIN", &b.agent)
        .stdin(Stdio::null());
    c
}

pub fn tool(args: &[&str]) -> Output {
    command(args).output().expect("lcmp-testbed runs")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn ok(args: &[&str]) -> String {
    let o = tool(args);
    assert!(
        o.status.success(),
        "lcmp-testbed {args:?} failed ({}): {}{}",
        o.status,
        stdout(&o),
        stderr(&o)
    );
    stdout(&o)
}

/// A testbed name unique to this test process and call.
pub fn unique_name(tag: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    format!("{tag}{}{n}", std::process::id() % 100_000)
}

pub fn topology(file: &str) -> String {
    repo_root()
        .join("topologies")
        .join(file)
        .display()
        .to_string()
}

/// Brings the testbed down (if still up) when the test ends, also on panic.
pub struct Down(pub String);

impl Drop for Down {
    fn drop(&mut self) {
        let _ = tool(&["down", "--name", &self.0]);
    }
}

/// `lcmp-testbed up --name NAME --topology 2dc-3path.toml EXTRA...`,
/// which must succeed; returns its output.
pub fn up_2dc(name: &str, extra: &[&str]) -> String {
    let t = topology("2dc-3path.toml");
    let mut args = vec!["up", "--name", name, "--topology", &t];
    args.extend_from_slice(extra);
    ok(&args)
}

pub fn status_json(name: &str) -> Value {
    let o = tool(&["status", "--name", name, "--json"]);
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("status JSON: {e}: {}{}", stdout(&o), stderr(&o)))
}

/// XDP programs of ours loaded in the kernel.
pub fn our_xdp_programs() -> usize {
    let out = std::process::Command::new("bpftool")
        .args(["prog", "show"])
        .output()
        .expect("bpftool runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("name lcmp_xdp"))
        .count()
}

/// Polls `f` every 20 ms until it gives `Some`, at most `timeout`.
pub fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A fresh directory of this test process for `test`'s `tag`, absent.
pub fn scratch_dir(test: &str, tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lcmp-{test}-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// `text` as the file `name` in `dir` (created).
pub fn write_file(dir: &std::path::Path, name: &str, text: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let f = dir.join(name);
    std::fs::write(&f, text).unwrap();
    f
}

/// `bin` (this crate's `lcmp-testbed`, a debug build is fine) with `args`,
/// for the one-process engines: no lcmp-switch may run, so its path
/// points at nothing.
pub fn run_without_switches(bin: &str, args: &[&str]) -> Output {
    Command::new(bin)
        .args(args)
        .env("LCMP_SWITCH_BIN", "/nonexistent/lcmp-switch")
        .output()
        .expect("lcmp-testbed runs")
}

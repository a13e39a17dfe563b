//! Process helpers of a testbed: finding the project's programs, reading
//! a log's end, and stopping or running things without leaving a process
//! or a thread behind.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use lcmp_netlab::netns::process_running;

use crate::{Error, Result};

/// Finds a program of the project: `$<env>` if set, else next to this
/// executable (cargo puts all of a workspace's binaries in one directory),
/// else on `PATH`.
pub fn find_program(name: &str, env: &str) -> Result<PathBuf> {
    if let Some(p) = lcmp_netlab::daemon::program_from_env(env) {
        return p;
    }
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        let p = dir.join(name);
        if p.is_file() {
            return Ok(p);
        }
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for d in std::env::split_paths(&path) {
        let p = d.join(name);
        if p.is_file() {
            return Ok(p);
        }
    }
    Err(Error::new(format!(
        "cannot find {name}: build it with `cargo build --release -p {name}` (it is looked for \
         next to lcmp-testbed and on PATH), or set {env}"
    )))
}

/// The last `n` lines of a log file.
pub fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Whether `pid` runs the program `name` (guards against a reused pid).
pub fn is_program(pid: u32, name: &str) -> bool {
    process_running(pid)
        && std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|c| {
                c.split(|&b| b == 0)
                    .next()
                    .is_some_and(|argv0| argv0.ends_with(name.as_bytes()))
            })
            .unwrap_or(false)
}

/// SIGTERM to every pid, then SIGKILL to those still running after
/// `grace`; returns once all are gone (or a further 2 s have passed).
pub(super) fn signal_and_wait(pids: &[u32], grace: Duration) {
    for &pid in pids {
        // SAFETY: kill(2) on a pid checked to run one of our programs just
        // before; at worst it has exited since (ESRCH).
        unsafe {
            libc::kill(pid as i32, libc::SIGTERM);
        }
    }
    let deadline = Instant::now() + grace;
    while pids.iter().any(|&p| process_running(p)) && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    for &pid in pids.iter().filter(|&&p| process_running(p)) {
        // SAFETY: as above.
        unsafe {
            libc::kill(pid as i32, libc::SIGKILL);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    while pids.iter().any(|&p| process_running(p)) && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
}

/// Runs `f` over `items` on at most `width` threads; the first error wins.
pub fn parallel<T: Sync>(
    items: &[T],
    width: usize,
    f: impl Fn(&T) -> Result<()> + Sync,
) -> Result<()> {
    let next = AtomicUsize::new(0);
    let first_err: Mutex<Option<Error>> = Mutex::new(None);
    thread::scope(|s| {
        for _ in 0..width.clamp(1, items.len().max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                if let Err(e) = f(item) {
                    first_err
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get_or_insert(e);
                }
            });
        }
    });
    match first_err.into_inner().unwrap_or_else(|e| e.into_inner()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

//! Network namespace guards, commands run inside them, and background
//! processes that are killed when their handle drops.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Once;
use std::thread;
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::{Error, Result};

/// Prefix of every namespace this crate creates:
/// `lcmpt-<pid>-<counter>-<label>`.
pub const NETNS_PREFIX: &str = "lcmpt-";

/// Where `ip netns` keeps its namespace handles.
pub const NETNS_DIR: &str = "/var/run/netns";

/// Default time limit for [`Netns::exec`] and [`run`].
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

static COUNTER: AtomicUsize = AtomicUsize::new(0);
static SWEEP: Once = Once::new();

/// The captured result of a finished command.
#[derive(Debug, Clone)]
pub struct CmdOutput {
    /// The command line, for messages.
    pub cmd: String,
    /// Exit status.
    pub status: ExitStatus,
    /// Standard output, lossily decoded.
    pub stdout: String,
    /// Standard error, lossily decoded.
    pub stderr: String,
}

impl CmdOutput {
    /// Stdout if the command exited 0, otherwise an error with stderr.
    pub fn ok(self) -> Result<String> {
        if self.status.success() {
            Ok(self.stdout)
        } else {
            Err(Error::new(format!(
                "`{}` failed ({}): {}{}",
                self.cmd,
                self.status,
                self.stderr.trim(),
                if self.stderr.trim().is_empty() {
                    self.stdout.trim()
                } else {
                    ""
                }
            )))
        }
    }
}

fn cmdline(args: &[&str]) -> String {
    args.join(" ")
}

/// Runs `args` (program and arguments) in the current namespace, waits at
/// most `timeout` (then kills it and fails) and captures its output.
pub fn run_output(args: &[&str], timeout: Duration) -> Result<CmdOutput> {
    let (prog, rest) = args
        .split_first()
        .ok_or_else(|| Error::new("empty command"))?;
    let mut child = Command::new(prog)
        .args(rest)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::new(format!("cannot start `{}`: {e}", cmdline(args))))?;
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    // Read both pipes on their own threads so a chatty command cannot block.
    let out_t = thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let err_t = thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Error::new(format!(
                "`{}` did not finish within {timeout:?}",
                cmdline(args)
            )));
        }
        thread::sleep(Duration::from_millis(2));
    };
    let stdout = String::from_utf8_lossy(&out_t.join().unwrap_or_default()).into_owned();
    let stderr = String::from_utf8_lossy(&err_t.join().unwrap_or_default()).into_owned();
    Ok(CmdOutput {
        cmd: cmdline(args),
        status,
        stdout,
        stderr,
    })
}

/// Runs `args` in the current namespace (default timeout) and returns its
/// stdout; a non-zero exit is an error carrying stderr.
pub fn run(args: &[&str]) -> Result<String> {
    run_output(args, DEFAULT_TIMEOUT)?.ok()
}

/// Whether a process with this pid exists.
fn pid_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Deletes namespaces `lcmpt-<pid>-...` whose creating process is gone
/// (left by a crashed or killed earlier run), after killing anything still
/// running inside them. Runs once per process, before the first namespace
/// is created.
pub fn sweep_leftovers() {
    let Ok(dir) = std::fs::read_dir(NETNS_DIR) else {
        return;
    };
    for entry in dir.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(NETNS_PREFIX) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if pid == std::process::id() || pid_alive(pid) {
            continue;
        }
        delete_netns(&name);
    }
}

/// Kills every process inside namespace `name` and deletes it (its
/// devices go with it once the last process has left).
pub fn delete(name: &str) {
    delete_netns(name)
}

/// Namespaces (`ip netns` names) whose name starts with `prefix`.
pub fn list_with_prefix(prefix: &str) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(NETNS_DIR) else {
        return Vec::new();
    };
    let mut v: Vec<String> = dir
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix))
        .collect();
    v.sort();
    v
}

/// Whether process `pid` is running (exists and is not a zombie).
pub fn process_running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// Starts `args` as a daemon that outlives this process: its own session
/// (so a terminal's Ctrl-C to the caller does not reach it), stdin from
/// /dev/null, stdout and stderr appended to `log`. A thread reaps it if it
/// exits while the caller still runs. Returns its pid.
pub fn spawn_detached(args: &[&str], log: &Path) -> Result<u32> {
    use std::os::unix::process::CommandExt;
    let (prog, rest) = args
        .split_first()
        .ok_or_else(|| Error::new("empty command"))?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| Error::new(format!("{}: {e}", log.display())))?;
    let mut cmd = Command::new(prog);
    cmd.args(rest)
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file);
    // SAFETY: setsid(2) is async-signal-safe, and the closure touches no
    // memory of the parent: it is all that runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| Error::new(format!("cannot start `{}`: {e}", cmdline(args))))?;
    let pid = child.id();
    thread::spawn(move || {
        let _ = child.wait();
    });
    Ok(pid)
}

/// Kills every process inside namespace `name` and deletes it.
fn delete_netns(name: &str) {
    if let Ok(out) = run_output(&["ip", "netns", "pids", name], Duration::from_secs(10)) {
        for pid in out.stdout.split_whitespace() {
            if let Ok(pid) = pid.parse::<i32>() {
                // SAFETY: kill(2) with a pid read from `ip netns pids`; at
                // worst the process is already gone (ESRCH).
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
        }
    }
    let _ = run_output(&["ip", "netns", "del", name], Duration::from_secs(30));
}

/// A network namespace that is deleted (with its devices and any process
/// still inside) when the guard drops, on every exit path including a
/// panic unwinding through a test.
#[derive(Debug)]
pub struct Netns {
    name: String,
    /// Created by this guard (deleted on drop) or only opened.
    owned: bool,
}

impl Netns {
    /// Creates `lcmpt-<pid>-<counter>-<label>` and brings its loopback up.
    /// `label` is shortened to 24 characters of `[A-Za-z0-9_.-]`.
    pub fn new(label: &str) -> Result<Netns> {
        SWEEP.call_once(sweep_leftovers);
        let label: String = label
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                    c
                } else {
                    '_'
                }
            })
            .take(24)
            .collect();
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let name = format!("{NETNS_PREFIX}{}-{n}-{label}", std::process::id());
        run(&["ip", "netns", "add", &name])?;
        let ns = Netns { name, owned: true };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Creates namespace `name` exactly as given (for testbeds that outlive
    /// the process, see [`Netns::persist`]) and brings its loopback up. It
    /// is deleted when the guard drops unless persisted first; an existing
    /// namespace of that name is an error.
    pub fn create(name: &str) -> Result<Netns> {
        if Path::new(NETNS_DIR).join(name).exists() {
            return Err(Error::new(format!("namespace {name:?} already exists")));
        }
        run(&["ip", "netns", "add", name])?;
        let ns = Netns {
            name: name.to_string(),
            owned: true,
        };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Keeps the namespace when the guard drops (a testbed that stays up
    /// after the tool exits); [`delete`] removes it later.
    pub fn persist(&mut self) {
        self.owned = false;
    }

    /// A handle to an existing namespace `name` (as listed by `ip netns`)
    /// that is *not* deleted on drop.
    pub fn open(name: &str) -> Result<Netns> {
        let ns = Netns {
            name: name.to_string(),
            owned: false,
        };
        if !ns.path().exists() {
            return Err(Error::new(format!("no namespace {name:?}")));
        }
        Ok(ns)
    }

    /// The namespace's name (for `ip netns exec`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The bind-mounted handle, `/var/run/netns/<name>`.
    pub fn path(&self) -> PathBuf {
        Path::new(NETNS_DIR).join(&self.name)
    }

    fn wrap<'a>(&'a self, args: &[&'a str]) -> Vec<&'a str> {
        let mut v = vec!["ip", "netns", "exec", self.name.as_str()];
        v.extend_from_slice(args);
        v
    }

    /// Runs a command inside (`ip netns exec`), default timeout; returns
    /// stdout, or an error with stderr if it exits non-zero.
    pub fn exec(&self, args: &[&str]) -> Result<String> {
        run(&self.wrap(args))
    }

    /// Runs a command inside with a time limit and returns its captured
    /// output whatever the exit status.
    pub fn exec_output(&self, args: &[&str], timeout: Duration) -> Result<CmdOutput> {
        run_output(&self.wrap(args), timeout)
    }

    /// Runs `ip -n <ns> <args>` (cheaper than `exec(["ip", ...])`).
    pub fn ip(&self, args: &[&str]) -> Result<String> {
        let mut v = vec!["ip", "-n", self.name.as_str()];
        v.extend_from_slice(args);
        run(&v)
    }

    /// Sets sysctls (`key=value`) inside the namespace.
    pub fn sysctl(&self, settings: &[&str]) -> Result<()> {
        let mut v = vec!["sysctl", "-q", "-w"];
        v.extend_from_slice(settings);
        self.exec(&v).map(drop)
    }

    /// Starts a background process inside. Its stdout and stderr go to a
    /// log file ([`Bg::log`]); it is killed when the handle drops.
    pub fn spawn(&self, args: &[&str]) -> Result<Bg> {
        Bg::start(&self.wrap(args), &self.name)
    }

    /// Runs `f` on a new thread that has joined this namespace (`setns`)
    /// and returns its result. Sockets the closure creates live in the
    /// namespace; the calling thread is not affected. Panics in `f`
    /// propagate.
    pub fn run_in<T, F>(&self, f: F) -> Result<T>
    where
        F: FnOnce() -> T + Send,
        T: Send,
    {
        thread::scope(|s| {
            let h = s.spawn(|| -> Result<T> {
                self.enter_current_thread()?;
                Ok(f())
            });
            match h.join() {
                Ok(r) => r,
                Err(p) => std::panic::resume_unwind(p),
            }
        })
    }

    /// Moves the calling thread into this namespace for good. Meant for a
    /// thread spawned for that purpose (see [`Netns::run_in`] and
    /// [`Netns::spawn_thread`]).
    pub fn enter_current_thread(&self) -> Result<()> {
        let f = File::open(self.path())
            .map_err(|e| Error::new(format!("open {}: {e}", self.path().display())))?;
        lcmp_ebpf::sys::enter_netns(&f)
            .map_err(|e| Error::new(format!("setns({}): {e}", self.name)))
    }

    /// Spawns a thread that joins this namespace and then runs `f`; join
    /// the handle for the result. Fails inside the thread (as an `Err`) if
    /// the namespace cannot be entered.
    pub fn spawn_thread<T, F>(&self, f: F) -> thread::JoinHandle<Result<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let path = self.path();
        let name = self.name.clone();
        thread::spawn(move || {
            let file = File::open(&path)
                .map_err(|e| Error::new(format!("open {}: {e}", path.display())))?;
            lcmp_ebpf::sys::enter_netns(&file)
                .map_err(|e| Error::new(format!("setns({name}): {e}")))?;
            Ok(f())
        })
    }

    /// Interface names in the namespace, loopback excluded.
    pub fn links(&self) -> Result<Vec<String>> {
        let out = self.ip(&["-o", "link", "show"])?;
        Ok(out
            .lines()
            .filter_map(|l| l.split(": ").nth(1))
            .map(|n| n.split('@').next().unwrap_or(n).to_string())
            .filter(|n| n != "lo")
            .collect())
    }

    /// Packet, byte and drop counters of `ifname` (`ip -s -j link`).
    pub fn link_counters(&self, ifname: &str) -> Result<LinkCounters> {
        let out = self.ip(&["-s", "-j", "link", "show", "dev", ifname])?;
        LinkCounters::from_ip_json(&out)
            .map_err(|e| Error::new(format!("ip -s -j link show dev {ifname}: {e}")))
    }

    /// `ethtool -S ifname` as (name, value) pairs (veth: per-queue XDP
    /// counters such as `rx_queue_0_xdp_drops`).
    pub fn ethtool_stats(&self, ifname: &str) -> Result<Vec<(String, u64)>> {
        let out = self.exec(&["ethtool", "-S", ifname])?;
        Ok(out
            .lines()
            .filter_map(|l| {
                let (k, v) = l.split_once(':')?;
                Some((k.trim().to_string(), v.trim().parse().ok()?))
            })
            .collect())
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        if self.owned {
            delete_netns(&self.name);
        }
    }
}

/// Interface counters (see [`Netns::link_counters`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkCounters {
    /// Received packets.
    pub rx_packets: u64,
    /// Received bytes.
    pub rx_bytes: u64,
    /// Receive drops.
    pub rx_dropped: u64,
    /// Sent packets.
    pub tx_packets: u64,
    /// Sent bytes.
    pub tx_bytes: u64,
    /// Transmit drops.
    pub tx_dropped: u64,
}

/// What [`Netns::link_counters`] reads of one interface in `ip -s -j link`
/// output (the rest is ignored); a missing counter reads 0.
#[derive(Deserialize, Default)]
#[serde(default)]
struct IpLinkStats {
    stats64: IpStats64,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct IpStats64 {
    rx: IpDirStats,
    tx: IpDirStats,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct IpDirStats {
    packets: u64,
    bytes: u64,
    dropped: u64,
}

impl LinkCounters {
    /// The counters of the first interface in `ip -s -j link` output.
    fn from_ip_json(text: &str) -> serde_json::Result<LinkCounters> {
        let links: Vec<IpLinkStats> = serde_json::from_str(text)?;
        let s = links.into_iter().next().unwrap_or_default().stats64;
        Ok(LinkCounters {
            rx_packets: s.rx.packets,
            rx_bytes: s.rx.bytes,
            rx_dropped: s.rx.dropped,
            tx_packets: s.tx.packets,
            tx_bytes: s.tx.bytes,
            tx_dropped: s.tx.dropped,
        })
    }
}

/// A background process (started with [`Netns::spawn`] or [`Bg::start`]).
/// Dropping the handle sends SIGTERM, waits up to 2 s, then SIGKILLs. If
/// the thread is panicking, the tail of the log is printed to stderr first.
#[derive(Debug)]
pub struct Bg {
    child: Option<Child>,
    cmd: String,
    log: PathBuf,
}

impl Bg {
    /// Starts `args` in the current namespace with output to a log file.
    /// `tag` goes into the log file's name.
    pub fn start(args: &[&str], tag: &str) -> Result<Bg> {
        let (prog, rest) = args
            .split_first()
            .ok_or_else(|| Error::new("empty command"))?;
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let base = Path::new(prog)
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let log = std::env::temp_dir().join(format!(
            "{NETNS_PREFIX}{}-{n}-{tag}-{base}.log",
            std::process::id()
        ));
        let file = File::create(&log)?;
        let child = Command::new(prog)
            .args(rest)
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .spawn()
            .map_err(|e| Error::new(format!("cannot start `{}`: {e}", cmdline(args))))?;
        Ok(Bg {
            child: Some(child),
            cmd: cmdline(args),
            log,
        })
    }

    /// The process id (of the command itself: `ip netns exec` execs it).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).unwrap_or(0)
    }

    /// Everything the process has written so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The log file's path.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Whether it has exited (without reaping the status for good).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// Waits up to `timeout` for the process to exit on its own.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.exited() {
                return Some(s);
            }
            if Instant::now() >= deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// Sends `sig` (e.g. `libc::SIGINT`) to the process.
    pub fn signal(&self, sig: i32) {
        if let Some(c) = &self.child {
            // SAFETY: kill(2) on our own child's pid, which is not reaped
            // before `self.child` is taken, so it cannot have been reused.
            unsafe {
                libc::kill(c.id() as i32, sig);
            }
        }
    }

    /// Stops the process (SIGTERM, then SIGKILL after 2 s) and returns its
    /// log.
    pub fn stop(mut self) -> String {
        self.terminate();
        self.log()
    }

    fn terminate(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if child.try_wait().ok().flatten().is_none() {
            // SAFETY: see `signal`; the child is not reaped yet.
            unsafe {
                libc::kill(child.id() as i32, libc::SIGTERM);
            }
            let deadline = Instant::now() + Duration::from_secs(2);
            while child.try_wait().ok().flatten().is_none() {
                if Instant::now() >= deadline {
                    let _ = child.kill();
                    break;
                }
                thread::sleep(Duration::from_millis(5));
            }
        }
        let _ = child.wait();
    }
}

impl Drop for Bg {
    fn drop(&mut self) {
        if thread::panicking() {
            let log = self.log();
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            eprintln!("--- log of `{}` (last {} lines) ---", self.cmd, tail.len());
            for l in tail.iter().rev() {
                eprintln!("{l}");
            }
        }
        self.terminate();
        let _ = std::fs::remove_file(&self.log);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_counters_from_ip_json() {
        // `ip -s -j link show dev lo`, iproute2 6.1.
        let text = r#"[{"ifindex":1,"ifname":"lo","flags":["LOOPBACK","UP","LOWER_UP"],
            "mtu":65536,"stats64":{
            "rx":{"bytes":546216512,"packets":177882,"errors":0,"dropped":3,"multicast":0},
            "tx":{"bytes":546216500,"packets":177881,"errors":0,"dropped":4,"collisions":0}}}]"#;
        assert_eq!(
            LinkCounters::from_ip_json(text).unwrap(),
            LinkCounters {
                rx_packets: 177882,
                rx_bytes: 546216512,
                rx_dropped: 3,
                tx_packets: 177881,
                tx_bytes: 546216500,
                tx_dropped: 4,
            }
        );
        let no_stats = r#"[{"ifindex":1,"ifname":"lo"}]"#;
        assert_eq!(
            LinkCounters::from_ip_json(no_stats).unwrap(),
            LinkCounters::default()
        );
        assert!(LinkCounters::from_ip_json("Device \"x\" does not exist.").is_err());
    }
}

//! The switch daemon's loop: poll the switch, answer control requests
//! between polls, write the stats file and the flow log, run side work
//! (neighbour resolution) on deadlines of the loop's own clock, and in
//! event mode sleep until the next deadline, frame or request.
//!
//! Generic over the packet I/O and the clock, so `cargo test` runs the
//! whole loop over in-memory ports with a fake clock.
//!
//! Several switches can share one thread ([`run_many`]): each keeps its own
//! daemon (ports, tables, flow cache, counters, control inbox, stats file),
//! the thread steps them in turn and, when none had work, sleeps in one
//! `ppoll` over all their descriptors until the earliest of their
//! deadlines. That is what lets many switches of a testbed share a core
//! without a context switch between processes for every batch.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use lcmp_control::proto::Body;
use lcmp_control::server::Inbox;
use lcmp_control::snapshot::Snapshot;
use tracing::warn;

use crate::control::{self, DaemonInfo};
use crate::flow_log::FlowLog;
use crate::io::PacketIo;
use crate::switch::Switch;

/// A source of monotonic time, ns.
pub trait Clock {
    /// Now.
    fn now_ns(&mut self) -> u64;
}

/// `CLOCK_MONOTONIC`.
#[derive(Clone, Copy, Debug, Default)]
pub struct MonotonicClock;

impl Clock for MonotonicClock {
    #[inline]
    fn now_ns(&mut self) -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes one timespec to a valid pointer.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }
}

/// Any closure returning ns is a clock (tests pass a shared cell).
impl<F: FnMut() -> u64> Clock for F {
    fn now_ns(&mut self) -> u64 {
        self()
    }
}

/// How the loop waits for work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PollMode {
    /// Spin on one core (lowest latency).
    Busy,
    /// Sleep in `poll()` until a frame, a request or a deadline.
    Event,
}

/// I/O whose sleep can be merged with other switches' into one `ppoll`
/// ([`run_many`]).
pub trait PollSet {
    /// The descriptors [`PacketIo::wait`] sleeps on; the caller polls them
    /// (with others), leaves their `revents`, then calls
    /// [`PollSet::after_poll`].
    fn poll_fds(&mut self) -> &mut [libc::pollfd];

    /// Handles what the poll left in the `revents` of
    /// [`PollSet::poll_fds`] (for example drains a link event).
    fn after_poll(&mut self);
}

/// Side work run on the loop's deadlines: called with the switch and the
/// time, returns when it wants to run next (`u64::MAX`: never).
pub type SideTask<IO> = Box<dyn FnMut(&mut Switch<IO>, u64) -> u64>;

/// The daemon's settings.
#[derive(Clone, Debug)]
pub struct DaemonConfig {
    /// The switch's name (reports).
    pub name: String,
    /// Busy or event polling.
    pub poll: PollMode,
    /// Where the stats snapshot is written (atomically replaced).
    pub stats_file: Option<PathBuf>,
    /// How often the stats file and the flow log are written, ns.
    pub stats_interval_ns: u64,
    /// The flow log's file; created (truncated) with its header by
    /// [`Daemon::new`]. Needs [`Switch::enable_flow_log`].
    pub flow_log: Option<PathBuf>,
}

/// The flow log's file.
struct FlowLogFile {
    path: PathBuf,
    file: File,
    /// A write error was reported already (one warning; the counters say
    /// how many records were lost).
    warned: bool,
}

impl FlowLogFile {
    fn create(path: &Path) -> Result<Self, String> {
        let fail = |e: io::Error| format!("cannot create flow log {}: {e}", path.display());
        let mut file = File::create(path).map_err(fail)?;
        FlowLog::write_header(&mut file).map_err(fail)?;
        Ok(FlowLogFile {
            path: path.to_path_buf(),
            file,
            warned: false,
        })
    }

    fn write<IO: PacketIo>(&mut self, sw: &mut Switch<IO>) {
        if let Err(e) = sw.write_flow_log(&mut self.file) {
            if !self.warned {
                warn!(
                    "cannot write flow log {}: {e} (lost records are counted: flow_log.write_failed)",
                    self.path.display()
                );
                self.warned = true;
            }
        }
    }
}

/// The loop around one switch.
pub struct Daemon<IO: PacketIo, C: Clock> {
    sw: Switch<IO>,
    clock: C,
    cfg: DaemonConfig,
    info: DaemonInfo,
    started_ns: u64,
    inbox: Option<Inbox>,
    flow_log: Option<FlowLogFile>,
    side: Vec<(SideTask<IO>, u64)>,
    next_stats_ns: u64,
    next_log_ns: u64,
    stats_warned: bool,
}

fn unix_time_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl<IO: PacketIo, C: Clock> Daemon<IO, C> {
    /// A daemon around `sw`. Creates the flow log's file (an error names
    /// the file).
    pub fn new(sw: Switch<IO>, mut clock: C, cfg: DaemonConfig) -> Result<Self, String> {
        let flow_log = cfg
            .flow_log
            .as_deref()
            .map(FlowLogFile::create)
            .transpose()?;
        let started_ns = clock.now_ns();
        let ports = sw.port_reports().len();
        Ok(Daemon {
            info: DaemonInfo {
                name: cfg.name.clone(),
                pid: std::process::id(),
                declared: vec![None; ports],
                lcmp: DaemonInfo::lcmp_of(sw.policy()),
                ..Default::default()
            },
            sw,
            clock,
            cfg,
            started_ns,
            inbox: None,
            flow_log,
            side: Vec::new(),
            next_stats_ns: 0,
            next_log_ns: 0,
            stats_warned: false,
        })
    }

    /// Serves control requests from `inbox` between polls; in event mode
    /// a request also ends the sleep.
    pub fn attach_inbox(&mut self, inbox: Inbox) {
        self.sw.io().add_wake_fd(inbox.wake_fd());
        self.inbox = Some(inbox);
    }

    /// Adds side work, first run at once.
    pub fn add_side_task(&mut self, task: SideTask<IO>) {
        self.side.push((task, 0));
    }

    /// The switch.
    pub fn switch(&mut self) -> &mut Switch<IO> {
        &mut self.sw
    }

    /// The switch, read only.
    pub fn switch_ref(&self) -> &Switch<IO> {
        &self.sw
    }

    fn refresh_info(&mut self, now_ns: u64) {
        self.info.uptime_ns = now_ns.saturating_sub(self.started_ns);
        self.info.unix_time_ms = unix_time_ms();
        if let Some(i) = &self.inbox {
            self.info.control = i.stats();
        }
    }

    /// The switch's state now.
    pub fn snapshot(&mut self) -> Snapshot {
        let now = self.sw.last_poll_ns().max(self.started_ns);
        self.refresh_info(now);
        control::snapshot(&self.sw, &self.info)
    }

    /// Answers one request at once (the loop calls this for the inbox;
    /// tests may call it directly).
    pub fn handle(&mut self, request: lcmp_control::Request) -> Body {
        let now = self.sw.last_poll_ns();
        self.refresh_info(now);
        control::handle(&mut self.sw, &mut self.info, request, now)
    }

    /// One iteration: poll, then control requests and side work that are
    /// due. Returns the frames received and transmitted.
    pub fn step(&mut self) -> usize {
        let clock = &mut self.clock;
        let work = self.sw.poll_clock(|| clock.now_ns());
        let now = self.sw.last_poll_ns();
        if self.inbox.as_ref().is_some_and(Inbox::has_pending) {
            self.serve_requests();
        }
        for (task, next) in &mut self.side {
            if now >= *next {
                *next = task(&mut self.sw, now);
            }
        }
        // The flow log before the stats, so "written" counts this write.
        if let Some(log) = self.flow_log.as_mut() {
            if now >= self.next_log_ns || self.sw.flow_log().is_some_and(FlowLog::half_full) {
                log.write(&mut self.sw);
                self.next_log_ns = now + self.cfg.stats_interval_ns;
            }
        }
        if self.cfg.stats_file.is_some() && now >= self.next_stats_ns {
            self.write_stats();
            self.next_stats_ns = now + self.cfg.stats_interval_ns;
        }
        work
    }

    fn serve_requests(&mut self) {
        while let Some(pending) = self.inbox.as_ref().and_then(Inbox::take) {
            let request = pending.request.clone();
            let body = self.handle(request);
            if let Some(i) = &self.inbox {
                i.count(matches!(body, Body::Error(_)));
            }
            pending.answer(body);
        }
    }

    fn write_stats(&mut self) {
        let Some(path) = self.cfg.stats_file.clone() else {
            return;
        };
        let snap = self.snapshot();
        let tmp = path.with_extension("tmp");
        let json = serde_json::to_vec(&snap).expect("snapshots serialize");
        let r = std::fs::write(&tmp, json).and_then(|_| std::fs::rename(&tmp, &path));
        match r {
            Err(e) if !self.stats_warned => {
                warn!("cannot write stats file {}: {e}", path.display());
                self.stats_warned = true;
            }
            Err(_) => {}
            Ok(()) => self.stats_warned = false,
        }
    }

    /// The earliest deadline of the loop's own work.
    fn next_deadline(&self) -> u64 {
        let mut t = self.sw.next_deadline();
        for (_, next) in &self.side {
            t = t.min(*next);
        }
        if self.cfg.stats_file.is_some() {
            t = t.min(self.next_stats_ns);
        }
        if self.sw.flow_log().is_some_and(|l| !l.records().is_empty()) {
            t = t.min(self.next_log_ns);
        }
        t
    }

    /// The daemon's settings.
    pub fn config(&self) -> &DaemonConfig {
        &self.cfg
    }

    /// Runs until `stop` is set. In event mode an idle loop sleeps until
    /// its next deadline, a frame or a request.
    pub fn run(&mut self, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            let work = self.step();
            if self.cfg.poll == PollMode::Event && work == 0 {
                let deadline = self.next_deadline();
                let now = self.clock.now_ns();
                if deadline > now {
                    self.sw.io().wait(Some(deadline - now));
                }
            }
        }
    }

    /// Shutdown: hands every held frame back, writes the flow log and the
    /// stats file a last time, and returns the final snapshot.
    pub fn finish(&mut self) -> Snapshot {
        self.sw.drain();
        if let Some(log) = self.flow_log.as_mut() {
            log.write(&mut self.sw);
        }
        if self.cfg.stats_file.is_some() {
            self.write_stats();
        }
        self.snapshot()
    }
}

/// Runs several daemons on the calling thread until `stop` is set: each
/// iteration steps every daemon once (a batch per port, its due control
/// requests and side work); when none had work and all are in event mode,
/// sleeps in one `ppoll` over every daemon's descriptors until a frame, a
/// request, a link event or the earliest deadline of any daemon. With one
/// daemon this is [`Daemon::run`]. A daemon in busy mode makes the whole
/// loop spin.
pub fn run_many<IO: PacketIo + PollSet, C: Clock>(
    daemons: &mut [Daemon<IO, C>],
    stop: &AtomicBool,
) {
    let event = daemons.iter().all(|d| d.cfg.poll == PollMode::Event);
    let mut fds: Vec<libc::pollfd> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let mut work = 0;
        for d in daemons.iter_mut() {
            work += d.step();
        }
        if !event || work > 0 {
            continue;
        }
        // Each daemon's deadline on its own clock.
        let timeout = daemons
            .iter_mut()
            .map(|d| {
                let deadline = d.next_deadline();
                deadline.saturating_sub(d.clock.now_ns())
            })
            .min()
            .unwrap_or(u64::MAX);
        if timeout == 0 {
            continue;
        }
        fds.clear();
        for d in daemons.iter_mut() {
            fds.extend_from_slice(d.sw.io().poll_fds());
        }
        wait_fds(&mut fds, timeout);
        let mut at = 0;
        for d in daemons.iter_mut() {
            let own = d.sw.io().poll_fds();
            let n = own.len();
            own.copy_from_slice(&fds[at..at + n]);
            at += n;
            d.sw.io().after_poll();
        }
    }
}

/// `ppoll` on `fds` for at most `timeout_ns` (`u64::MAX`: no timeout);
/// returns early on a signal.
fn wait_fds(fds: &mut [libc::pollfd], timeout_ns: u64) {
    let ts = (timeout_ns != u64::MAX).then_some(libc::timespec {
        tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `fds` is a live, correctly sized array of pollfd, `tsp` is
    // null or points at a live timespec, and no signal mask is passed.
    unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            tsp,
            std::ptr::null(),
        );
    }
}

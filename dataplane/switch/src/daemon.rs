//! The daemon's loop, one for every kind of switch ([`Node`]): poll the
//! node, answer control requests between polls, write the stats file, run
//! side work on deadlines of the loop's own clock, and in event mode sleep
//! until the next deadline, frame or request.
//!
//! Generic over the node, its packet I/O and the clock, so `cargo test`
//! runs the whole loop of every kind over in-memory ports with a fake
//! clock.
//!
//! Housekeeping (control requests, the stats file: a few netlink queries
//! and a file write, hundreds of microseconds on a busy machine) runs when
//! the node says it delays nothing ([`Node::housekeeping_at`]): at once for
//! an LCMP switch; for a rotor network's switch at an instant at least
//! twice its recent cost before the next slot opening, at most a few slots
//! late. Run regardless, it put one window in 200 hundreds of microseconds
//! late.
//!
//! Several switches, of any kinds, can share one thread ([`run_many`]):
//! each keeps its own daemon (ports, tables, counters, control inbox,
//! stats file), the thread steps them in turn and, when none had work,
//! sleeps in one `ppoll` over all their descriptors until the earliest of
//! their deadlines. That is what lets many switches of a testbed share a
//! core without a context switch between processes for every batch.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use lcmp_control::proto::Body;
use lcmp_control::server::Inbox;
use lcmp_control::Request;
use tracing::warn;

use crate::io::PacketIo;
pub use crate::node::{Clock, Context, MonotonicClock, Node, RealtimeClock};

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

/// Side work run on the loop's deadlines: called with the node and the
/// time, returns when it wants to run next (`u64::MAX`: never).
pub type SideTask<N> = Box<dyn FnMut(&mut N, u64) -> u64>;

/// The daemon's settings, the same for every kind of switch.
#[derive(Clone, Debug)]
pub struct DaemonConfig {
    /// The switch's name (reports).
    pub name: String,
    /// Busy or event polling.
    pub poll: PollMode,
    /// Where the node's status is written as JSON (atomically replaced).
    pub stats_file: Option<PathBuf>,
    /// How often the stats file is written, ns.
    pub stats_interval_ns: u64,
}

impl DaemonConfig {
    /// A node of a network in one process: event polling, no stats file.
    pub fn quiet(name: &str) -> Self {
        DaemonConfig {
            name: name.to_string(),
            poll: PollMode::Event,
            stats_file: None,
            stats_interval_ns: u64::MAX,
        }
    }
}

/// The loop around one switch.
pub struct Daemon<N: Node, C: Clock> {
    node: N,
    clock: C,
    cfg: DaemonConfig,
    started_ns: u64,
    inbox: Option<Inbox>,
    side: Vec<(SideTask<N>, u64)>,
    next_stats_ns: u64,
    stats_warned: bool,
    /// What housekeeping recently took, ns (the largest recent cost,
    /// decaying by 1/8 per round).
    housekeeping_ns: u64,
    /// Since when housekeeping waits for a quiet instant.
    deferred_since: Option<u64>,
}

impl<N: Node, C: Clock> Daemon<N, C> {
    /// A daemon around `node`.
    pub fn new(node: N, mut clock: C, cfg: DaemonConfig) -> Self {
        let started_ns = clock.now_ns();
        Daemon {
            node,
            clock,
            cfg,
            started_ns,
            inbox: None,
            side: Vec::new(),
            next_stats_ns: 0,
            stats_warned: false,
            housekeeping_ns: 0,
            deferred_since: None,
        }
    }

    /// Serves control requests from `inbox` between polls; in event mode
    /// a request also ends the sleep.
    pub fn attach_inbox(&mut self, inbox: Inbox) {
        self.node.io().add_wake_fd(inbox.wake_fd());
        self.inbox = Some(inbox);
    }

    /// Adds side work, first run at once.
    pub fn add_side_task(&mut self, task: SideTask<N>) {
        self.side.push((task, 0));
    }

    /// The node.
    pub fn node(&mut self) -> &mut N {
        &mut self.node
    }

    /// The node, read only.
    pub fn node_ref(&self) -> &N {
        &self.node
    }

    /// The daemon's settings.
    pub fn config(&self) -> &DaemonConfig {
        &self.cfg
    }

    /// The node's state now.
    pub fn status(&mut self) -> N::Status {
        let ctx = Context {
            name: &self.cfg.name,
            now_ns: self.clock.now_ns(),
            started_ns: self.started_ns,
            control: self.inbox.as_ref().map(Inbox::stats).unwrap_or_default(),
        };
        self.node.status(&ctx)
    }

    /// Answers one request at once (the loop calls this for the inbox;
    /// tests may call it directly).
    pub fn handle(&mut self, request: Request) -> Body {
        let ctx = Context {
            name: &self.cfg.name,
            now_ns: self.clock.now_ns(),
            started_ns: self.started_ns,
            control: self.inbox.as_ref().map(Inbox::stats).unwrap_or_default(),
        };
        self.node.handle(request, &ctx)
    }

    /// One iteration: poll; then side work, the node's own periodic work,
    /// and, when the node allows, control requests and the stats file.
    /// Returns the frames received and transmitted.
    pub fn step(&mut self) -> usize {
        let work = self.node.poll(&mut self.clock);
        let now = self.node.last_poll_ns();
        let requests = self.inbox.as_ref().is_some_and(Inbox::has_pending);
        let stats = self.cfg.stats_file.is_some() && now >= self.next_stats_ns;
        let housekeeping = (requests || stats) && self.housekeeping_now(now);
        let started = if housekeeping { self.clock.now_ns() } else { 0 };
        if housekeeping && requests {
            self.serve_requests();
        }
        for (task, next) in &mut self.side {
            if now >= *next {
                *next = task(&mut self.node, now);
            }
        }
        // The node's own writes (the flow log) before the stats, so the
        // stats count them.
        self.node.after_poll(now);
        if housekeeping {
            if stats {
                self.write_stats();
                self.next_stats_ns = now + self.cfg.stats_interval_ns;
            }
            let took = self.clock.now_ns().saturating_sub(started);
            self.housekeeping_ns = took.max(self.housekeeping_ns - self.housekeeping_ns / 8);
        }
        work
    }

    /// Whether waiting housekeeping may run at `now`; if not, it waits
    /// for a quiet instant (at most the node's limit), and a waiting
    /// request must not keep waking the loop meanwhile.
    fn housekeeping_now(&mut self, now: u64) -> bool {
        let since = *self.deferred_since.get_or_insert(now);
        let overdue = now.saturating_sub(since) >= self.node.max_housekeeping_delay_ns();
        if overdue || self.node.housekeeping_at(now, self.housekeeping_ns) == now {
            self.deferred_since = None;
            return true;
        }
        if let Some(i) = &self.inbox {
            i.clear_wake();
        }
        false
    }

    fn serve_requests(&mut self) {
        while let Some(pending) = self.inbox.as_ref().and_then(Inbox::take) {
            let body = self.handle(pending.request.clone());
            if let Some(i) = &self.inbox {
                i.count(matches!(body, Body::Error(_)));
            }
            pending.answer(body);
        }
    }

    /// Writes the node's status to the stats file (one warning per run of
    /// failures).
    fn write_stats(&mut self) {
        let Some(path) = self.cfg.stats_file.clone() else {
            return;
        };
        let status = self.status();
        let tmp = path.with_extension("tmp");
        let r = serde_json::to_vec(&status)
            .map_err(std::io::Error::other)
            .and_then(|json| std::fs::write(&tmp, json))
            .and_then(|_| std::fs::rename(&tmp, &path));
        match r {
            Err(e) if !self.stats_warned => {
                warn!("cannot write stats file {}: {e}", path.display());
                self.stats_warned = true;
            }
            Err(_) => {}
            Ok(()) => self.stats_warned = false,
        }
    }

    /// When waiting housekeeping may run, if any waits.
    fn housekeeping_due(&self, now: u64) -> Option<u64> {
        let due = if self.inbox.as_ref().is_some_and(Inbox::has_pending) {
            now
        } else if self.cfg.stats_file.is_some() {
            self.next_stats_ns.max(now)
        } else {
            return None;
        };
        let quiet = self.node.housekeeping_at(due, self.housekeeping_ns);
        let overdue = self.deferred_since.map_or(u64::MAX, |t| {
            t.saturating_add(self.node.max_housekeeping_delay_ns())
        });
        Some(quiet.min(overdue))
    }

    /// When the loop has work next, given `now`: the node's, side work,
    /// housekeeping (`u64::MAX`: none). `None`: poll on without sleeping.
    /// With [`Daemon::step`], what any driver of the loop needs: the
    /// wall-clock [`run_many`], or [`crate::virtual_clock::VirtualNet`].
    pub fn next_wake(&self, now: u64) -> Option<u64> {
        let mut t = self.node.next_wake(now)?;
        for (_, next) in &self.side {
            t = t.min(*next);
        }
        if let Some(h) = self.housekeeping_due(now) {
            t = t.min(h);
        }
        Some(t)
    }

    /// Runs until `stop` is set: [`run_many`] with this one daemon.
    pub fn run(&mut self, stop: &AtomicBool)
    where
        N::Io: PollSet,
    {
        run_many(std::slice::from_mut(self), stop);
    }

    /// Shutdown: hands every held frame back, writes what the node writes
    /// and the stats file a last time, and returns the final status.
    pub fn finish(&mut self) -> N::Status {
        self.node.finish();
        self.write_stats();
        self.status()
    }
}

/// One daemon as [`run_many`] sees it, whatever its node and clock: a
/// thread can run switches of different kinds.
pub trait Loop {
    /// One iteration ([`Daemon::step`]).
    fn step(&mut self) -> usize;
    /// Whether it sleeps when idle (event mode).
    fn event_mode(&self) -> bool;
    /// How long it may sleep from now, ns (`u64::MAX`: no deadline; 0: not
    /// at all).
    fn timeout_ns(&mut self) -> u64;
    /// The descriptors its sleep waits on ([`PollSet::poll_fds`]).
    fn poll_fds(&mut self) -> &mut [libc::pollfd];
    /// After the sleep ([`PollSet::after_poll`]).
    fn after_poll(&mut self);
}

impl<N: Node, C: Clock> Loop for Daemon<N, C>
where
    N::Io: PollSet,
{
    fn step(&mut self) -> usize {
        Daemon::step(self)
    }

    fn event_mode(&self) -> bool {
        self.cfg.poll == PollMode::Event
    }

    fn timeout_ns(&mut self) -> u64 {
        // On the daemon's own clock.
        let now = self.clock.now_ns();
        match self.next_wake(now) {
            None => 0,
            Some(u64::MAX) => u64::MAX,
            Some(t) => t.saturating_sub(now),
        }
    }

    fn poll_fds(&mut self) -> &mut [libc::pollfd] {
        self.node.io().poll_fds()
    }

    fn after_poll(&mut self) {
        self.node.io().after_poll();
    }
}

impl<L: Loop + ?Sized> Loop for Box<L> {
    fn step(&mut self) -> usize {
        (**self).step()
    }
    fn event_mode(&self) -> bool {
        (**self).event_mode()
    }
    fn timeout_ns(&mut self) -> u64 {
        (**self).timeout_ns()
    }
    fn poll_fds(&mut self) -> &mut [libc::pollfd] {
        (**self).poll_fds()
    }
    fn after_poll(&mut self) {
        (**self).after_poll()
    }
}

/// Runs several daemons on the calling thread until `stop` is set: each
/// iteration steps every daemon once (a batch per port, its due control
/// requests and side work); when none had work and all are in event mode,
/// sleeps in one `ppoll` over every daemon's descriptors until a frame, a
/// request, a link event or the earliest deadline of any daemon. A daemon
/// in busy mode makes the whole loop spin. The daemons may be of different
/// kinds (`Box<dyn Loop>`).
pub fn run_many<L: Loop>(daemons: &mut [L], stop: &AtomicBool) {
    let event = daemons.iter().all(|d| d.event_mode());
    let mut fds: Vec<libc::pollfd> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let mut work = 0;
        for d in daemons.iter_mut() {
            work += d.step();
        }
        if !event || work > 0 {
            continue;
        }
        let timeout = daemons
            .iter_mut()
            .map(|d| d.timeout_ns())
            .min()
            .unwrap_or(u64::MAX);
        if timeout == 0 {
            continue;
        }
        fds.clear();
        for d in daemons.iter_mut() {
            fds.extend_from_slice(d.poll_fds());
        }
        wait_fds(&mut fds, timeout);
        let mut at = 0;
        for d in daemons.iter_mut() {
            let own = d.poll_fds();
            let n = own.len();
            own.copy_from_slice(&fds[at..at + n]);
            at += n;
            d.after_poll();
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

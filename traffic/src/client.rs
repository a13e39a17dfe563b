//! The flow source: Poisson arrivals (or a schedule), one TCP connection
//! per flow, one CSV row per flow; [`prepare`] also validates the runs of
//! the RoCEv2 transport ([`crate::rocev2::client`]).
//!
//! An arrival thread sleeps until each arrival's absolute time (a plain
//! thread sleeps with microsecond precision; tokio's timer has a 1 ms
//! tick), draws the flow's size and destination, and hands the flow to the
//! tokio runtime. At most `max_concurrent` flows hold a socket; an arrival
//! that finds no free slot waits for one, counted as `deferred`, and its
//! FCT then runs from its arrival time. At most [`MAX_WAITING`] flows wait;
//! an arrival that finds that many is `skipped`. Arrivals stop at
//! `duration`; active flows get up to `drain` more, and whatever is still
//! open then is recorded as `unfinished`. Every flow is written to the CSV,
//! as it ends ([`FlowLog`]).
//!
//! Memory is bounded by the flows open (in a slot or waiting), never by
//! the length of the run: arrivals are drawn one at a time
//! ([`FlowSource`]), and a flow's row goes to disk when it ends.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use tokio::net::TcpSocket;
use tokio::runtime::Handle;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::{oneshot, Notify};

use crate::cdf::Cdf;
use crate::flows::{self, Arrivals, FlowSource};
use crate::protocol::{read_ack, send_flow, Header};
use crate::record::{FlowRecord, FlowStatus};
use crate::rocev2::cc::CcConfig;
use crate::rocev2::client::{Endpoint, RoceOptions};
use crate::rocev2::sender::SenderConfig;
use crate::sockopt;

/// Descriptors kept free for stdio, the runtime, the output file, ...
const RESERVED_FDS: u64 = 64;
/// Longest --duration and --drain (~31 years): keeps instants representable.
const MAX_SECS: f64 = 1e9;
/// Longest progress interval: one day.
const MAX_PROGRESS_MS: u64 = 86_400_000;
/// The highest mean arrival rate of a run, flows/s. The arrival thread
/// times arrivals to the microsecond, and starting a flow (drawing it,
/// building its record, handing it over) takes about as long, so a client
/// cannot start more; a rate above it is refused up front, naming the flag,
/// rather than run as a backlog that only grows.
pub const MAX_FLOWS_PER_S: f64 = 1e6;
/// Flows a TCP client holds waiting for a free slot. An arrival that finds
/// this many waiting is skipped: written at once as failed (error
/// "skipped: ..."), counted as `skipped`. Shedding keeps the run to
/// --duration + --drain and every FCT a measure of the network; a longer
/// queue would only time the client's own backlog, and an unbounded one
/// ran out of memory. Bursts of a schedule up to this size still wait
/// (64 bytes each: 16 MiB when full).
pub const MAX_WAITING: usize = 1 << 18;

/// A receiver: `NAME=ADDR:PORT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    pub name: String,
    pub addr: SocketAddr,
}

impl FromStr for Destination {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (name, addr) = s
            .split_once('=')
            .ok_or_else(|| format!("expected NAME=ADDR:PORT, got {s:?}"))?;
        if name.is_empty() {
            return Err(format!("empty host name in {s:?}"));
        }
        let addr = addr
            .parse()
            .map_err(|_| format!("{addr:?} is not ADDR:PORT (IPv6: [ADDR]:PORT)"))?;
        Ok(Destination {
            name: name.to_string(),
            addr,
        })
    }
}

/// The offered load.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Load {
    FlowsPerSecond(f64),
    /// Payload bits per second; flows/s = rate / (8 * mean size).
    BitsPerSecond(f64),
}

/// The client's options as given (see `lcmp-traffic client --help`).
#[derive(Debug, Clone)]
pub struct ClientConfig {
    pub name: String,
    pub dsts: Vec<Destination>,
    /// With `load` and `duration_s`, unless `schedule` is given.
    pub workload: Option<String>,
    pub load: Option<Load>,
    pub duration_s: Option<f64>,
    /// A schedule file instead of Poisson arrivals ([`crate::flows`]).
    pub schedule: Option<PathBuf>,
    /// Every size is divided by this (at least one byte remains).
    pub size_scale: f64,
    pub warmup_s: f64,
    pub drain_s: f64,
    pub seed: u64,
    pub id_base: u64,
    pub out: PathBuf,
    pub cc: Option<String>,
    pub max_concurrent: usize,
    pub progress_ms: u64,
    /// `Some`: the RoCEv2 transport with these options; `None`: TCP.
    pub rocev2: Option<RoceOptions>,
}

/// A validated run, ready to start.
#[derive(Debug)]
pub struct Plan {
    pub config: ClientConfig,
    pub arrivals: Arrivals,
    /// Mean arrival rate, flows/s (a schedule's: flows / last start).
    pub lambda: f64,
    /// `config.max_concurrent`, lowered to what the descriptor limit holds.
    pub max_concurrent: usize,
    out: File,
    rocev2: Option<(
        Endpoint,
        SenderConfig,
        CcConfig,
        crate::rocev2::net::Signals,
    )>,
}

/// The largest flow of the RoCEv2 transport: the RETH's 32-bit length.
const MAX_ROCE_FLOW: u64 = u32::MAX as u64;

/// Checks every input before anything starts; the output file is created
/// last, so a rejected run leaves no file behind. Errors are one line.
pub fn prepare(config: ClientConfig) -> Result<Plan, String> {
    if config.name.is_empty() {
        return Err("--name must not be empty".into());
    }
    if config.dsts.is_empty() {
        return Err("no --dst given: at least one NAME=ADDR:PORT is required".into());
    }
    let positive = |v: f64, flag: &str| -> Result<(), String> {
        if v.is_finite() && v > 0.0 {
            Ok(())
        } else {
            Err(format!("{flag} must be a number > 0, got {v}"))
        }
    };
    if !(config.size_scale.is_finite() && config.size_scale > 0.0) {
        return Err(format!(
            "--size-scale must be a number > 0, got {}",
            config.size_scale
        ));
    }
    let (arrivals, lambda, max_size) = match &config.schedule {
        Some(path) => {
            if config.workload.is_some() || config.load.is_some() || config.duration_s.is_some() {
                return Err(
                    "--schedule replaces --workload, --rate-bps/--flows-per-s and --duration; give one or the other"
                        .into(),
                );
            }
            if !(config.warmup_s.is_finite() && config.warmup_s >= 0.0) {
                return Err(format!("--warmup must be >= 0, got {}", config.warmup_s));
            }
            let text = lcmp_topology::read_data_file(path)
                .map_err(|e| format!("cannot read --schedule {}: {e}", path.display()))?;
            let list = flows::parse_schedule(
                &text,
                &path.display().to_string(),
                &config.dsts,
                config.size_scale,
            )?;
            let last_s = list.last().map_or(0.0, |f| f.start_ns as f64 / 1e9);
            let max_size = list.iter().map(|f| f.size).max().unwrap_or(0);
            let lambda = if last_s > 0.0 {
                list.len() as f64 / last_s
            } else {
                list.len() as f64
            };
            (Arrivals::Schedule(list), lambda, max_size)
        }
        None => {
            let (Some(workload), Some(load), Some(duration_s)) =
                (&config.workload, config.load, config.duration_s)
            else {
                return Err(
                    "give --workload, --rate-bps or --flows-per-s, and --duration (or --schedule)"
                        .into(),
                );
            };
            match load {
                Load::FlowsPerSecond(r) => positive(r, "--flows-per-s")?,
                Load::BitsPerSecond(r) => positive(r, "--rate-bps")?,
            }
            positive(duration_s, "--duration")?;
            if !(config.warmup_s >= 0.0 && config.warmup_s < duration_s) {
                return Err(format!(
                    "--warmup must be >= 0 and shorter than --duration ({} s), got {}",
                    duration_s, config.warmup_s
                ));
            }
            if duration_s > MAX_SECS {
                return Err(format!(
                    "--duration must be at most {MAX_SECS} s, got {duration_s}"
                ));
            }
            let cdf = Cdf::load(workload).map_err(|e| format!("bad --workload: {e}"))?;
            let (lambda, asked) = match load {
                Load::FlowsPerSecond(r) => (r, format!("--flows-per-s {r} is")),
                Load::BitsPerSecond(bps) => {
                    let mean = flows::mean_scaled_size(&cdf, config.size_scale);
                    let lambda = bps / (8.0 * mean);
                    let asked = format!(
                        "--rate-bps {bps} means ~{lambda:.3e} flows/s of {mean:.0} bytes on average,"
                    );
                    (lambda, asked)
                }
            };
            // The length of a run is not limited: memory holds only the
            // flows open, and rows are written as flows end.
            if lambda > MAX_FLOWS_PER_S {
                return Err(format!(
                    "{asked} more than a client can start: at most {MAX_FLOWS_PER_S} flows/s (one per microsecond, the arrival timer's resolution); lower it or split the load over several clients (each its own --seed and --id-base)"
                ));
            }
            let max_size = flows::scale_size(cdf.max_size(), config.size_scale);
            (
                Arrivals::Poisson {
                    cdf,
                    lambda,
                    duration_s,
                },
                lambda,
                max_size,
            )
        }
    };
    if !(config.drain_s.is_finite() && config.drain_s >= 0.0) {
        return Err(format!("--drain must be >= 0, got {}", config.drain_s));
    }
    if config.drain_s > MAX_SECS {
        return Err(format!(
            "--drain must be at most {MAX_SECS} s, got {}",
            config.drain_s
        ));
    }
    if config.max_concurrent == 0 {
        return Err("--max-concurrent must be >= 1".into());
    }
    if config.progress_ms > MAX_PROGRESS_MS {
        return Err(format!(
            "--progress-ms must be at most {MAX_PROGRESS_MS}, got {}",
            config.progress_ms
        ));
    }
    let rocev2 = match &config.rocev2 {
        Some(opts) => {
            let sender = opts.sender_config()?;
            let cc = opts.cc_config()?;
            if max_size > MAX_ROCE_FLOW {
                return Err(format!(
                    "flows of up to {max_size} bytes exceed the RETH's 32-bit length ({MAX_ROCE_FLOW}); raise --size-scale"
                ));
            }
            crate::rocev2::gbn::GbnSender::new(max_size.max(1), opts.payload).map_err(|e| {
                format!("the largest flow does not fit: {e}; raise --payload or --size-scale")
            })?;
            // Blocked before anything else (the run is single-threaded).
            let signals = crate::rocev2::net::Signals::new()
                .map_err(|e| format!("cannot set up signal handling: {e}"))?;
            let endpoint = Endpoint::open(&config.dsts)?;
            Some((endpoint, sender, cc, signals))
        }
        None => {
            if let Some(cc) = &config.cc {
                check_congestion_control(cc)?;
            }
            None
        }
    };
    let out = File::create(&config.out)
        .map_err(|e| format!("cannot write --out {}: {e}", config.out.display()))?;
    // Notes from here on: the run is accepted.
    let max_concurrent = if rocev2.is_some() {
        config.max_concurrent
    } else {
        let m = fit_concurrency(config.max_concurrent);
        if let Some(warning) = port_warning(&config.dsts, lambda) {
            eprintln!("lcmp-traffic client: warning: {warning}");
        }
        m
    };
    Ok(Plan {
        config,
        arrivals,
        lambda,
        max_concurrent,
        out,
        rocev2,
    })
}

/// The name must be loaded (available) and settable by this process
/// (unprivileged users are limited to tcp_allowed_congestion_control).
fn check_congestion_control(cc: &str) -> Result<(), String> {
    let available = sockopt::available_congestion_controls()
        .map_err(|e| format!("--cc: cannot read {}: {e}", sockopt::AVAILABLE_CC_PATH))?;
    if !available.iter().any(|a| a == cc) {
        return Err(format!(
            "--cc {cc}: congestion control not available here; available: {} ({})",
            available.join(" "),
            sockopt::AVAILABLE_CC_PATH
        ));
    }
    let probe = TcpSocket::new_v4().map_err(|e| format!("--cc {cc}: probe socket: {e}"))?;
    sockopt::set_congestion(&probe, cc).map_err(|e| {
        format!(
            "--cc {cc}: cannot be set ({e}); unprivileged processes may use only net.ipv4.tcp_allowed_congestion_control"
        )
    })
}

/// The client closes first, so each flow's local port stays in TIME_WAIT
/// for 60 s; without tcp_tw_reuse a destination address can then take at
/// most (port range) / 60 s new flows per second before connect() fails
/// with EADDRNOTAVAIL.
fn port_warning(dsts: &[Destination], lambda: f64) -> Option<String> {
    let read = |name: &str| std::fs::read_to_string(format!("/proc/sys/net/ipv4/{name}")).ok();
    let reuse: u32 = read("tcp_tw_reuse")?.trim().parse().ok()?;
    let range: Vec<u64> = read("ip_local_port_range")?
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    let [low, high] = range[..] else {
        return None;
    };
    let ports = high.saturating_sub(low) + 1;
    // Flows per second to the busiest destination address.
    let busiest = dsts
        .iter()
        .filter(|d| match reuse {
            1 => false,
            2 => !d.addr.ip().is_loopback(),
            _ => true,
        })
        .map(|d| {
            let n = dsts.iter().filter(|e| e.addr == d.addr).count();
            lambda * n as f64 / dsts.len() as f64
        })
        .fold(0.0, f64::max);
    let sustainable = ports as f64 / 60.0;
    (busiest > 0.8 * sustainable).then(|| {
        format!(
            "~{busiest:.0} flows/s to one destination may exhaust the {ports} local ports \
             (each stays in TIME_WAIT for 60 s; about {sustainable:.0}/s are sustainable); \
             consider sysctl net.ipv4.tcp_tw_reuse=1 or a wider net.ipv4.ip_local_port_range"
        )
    })
}

/// Raises the soft descriptor limit and lowers the concurrency to fit it.
fn fit_concurrency(wanted: usize) -> usize {
    let limit = match sockopt::raise_nofile_limit() {
        Ok(limit) => limit,
        Err(e) => {
            eprintln!("lcmp-traffic client: cannot read RLIMIT_NOFILE ({e}); keeping --max-concurrent {wanted}");
            return wanted;
        }
    };
    let room = usize::try_from(limit.saturating_sub(RESERVED_FDS))
        .unwrap_or(usize::MAX)
        .max(1);
    if room < wanted {
        eprintln!(
            "lcmp-traffic client: --max-concurrent lowered from {wanted} to {room}: the open-file limit is {limit}"
        );
        room
    } else {
        wanted
    }
}

/// How a run ended; counts are over the written records.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    pub flows: u64,
    pub completed: u64,
    pub failed: u64,
    pub unfinished: u64,
    pub deferred: u64,
    /// Arrivals the client could not hold (see [`MAX_WAITING`]); also
    /// counted in `failed`.
    pub skipped: u64,
    pub warmup: u64,
    pub bytes_completed: u64,
    /// Latest start of an arrival behind its scheduled time.
    pub max_arrival_lag: Duration,
    pub elapsed: Duration,
    /// The signal (SIGINT/SIGTERM) that cut the run short.
    pub interrupted: Option<i32>,
    /// The RoCEv2 sender's totals, a JSON object (`None` under TCP).
    pub rocev2: Option<String>,
}

impl Summary {
    /// Counts `records` by outcome (both transports' runs end here).
    pub fn tally(&mut self, records: &[FlowRecord]) {
        for r in records {
            self.count(r);
        }
    }

    /// Counts one record by outcome (not in `flows`).
    pub fn count(&mut self, r: &FlowRecord) {
        match r.status {
            FlowStatus::Ok => {
                self.completed += 1;
                self.bytes_completed += r.size_bytes;
            }
            FlowStatus::Failed => self.failed += 1,
            FlowStatus::Unfinished => self.unfinished += 1,
        }
        self.warmup += u64::from(r.warmup);
    }
}

/// Rows a [`FlowLog`] holds back to keep arrival order (~400 bytes each,
/// ~26 MB when full).
pub const MAX_REORDER: usize = 1 << 16;

/// `flows.csv` written as flows end, for both transports, so that memory
/// holds only the flows still open, however long the run. Rows stay in
/// arrival order: a row that ends before an earlier flow waits for it,
/// up to [`MAX_REORDER`] rows; past that (an early flow hung while that
/// many later ones ended) the held rows are written and from then on
/// every row as its flow ends. The first write error is kept and reported
/// by [`FlowLog::finish`]; nothing is written after it.
pub struct FlowLog {
    csv: csv::Writer<BufWriter<File>>,
    /// Rows written or held, and their outcomes.
    tally: Summary,
    error: Option<io::Error>,
    /// Rows waiting for an earlier flow, by arrival sequence number.
    held: BTreeMap<u64, FlowRecord>,
    /// The sequence number of the next row in arrival order; `None` once
    /// rows go out as their flows end.
    next: Option<u64>,
}

impl FlowLog {
    /// Starts the file with the header, so that a run without flows still
    /// has one. Rows are numbered from 0 in arrival order.
    pub fn new(out: File) -> FlowLog {
        let mut w = BufWriter::new(out);
        let error = csv_header().and_then(|h| w.write_all(&h)).err();
        FlowLog {
            csv: csv::WriterBuilder::new().has_headers(false).from_writer(w),
            tally: Summary::default(),
            error,
            held: BTreeMap::new(),
            next: Some(0),
        }
    }

    /// The row of the `seq`-th arrival (each written once), counted now and
    /// written once the rows before it are.
    pub fn write(&mut self, seq: u64, r: FlowRecord) {
        self.tally.flows += 1;
        self.tally.count(&r);
        let Some(next) = self.next else {
            self.emit(&r);
            return;
        };
        if seq != next {
            self.held.insert(seq, r);
            if self.held.len() > MAX_REORDER {
                self.next = None;
                for r in std::mem::take(&mut self.held).into_values() {
                    self.emit(&r);
                }
            }
            return;
        }
        self.emit(&r);
        let mut next = next + 1;
        while let Some(r) = self.held.remove(&next) {
            self.emit(&r);
            next += 1;
        }
        self.next = Some(next);
    }

    fn emit(&mut self, r: &FlowRecord) {
        if self.error.is_none() {
            self.error = self.csv.serialize(r).err().map(io::Error::other);
        }
    }

    /// Whether a write has failed (the run's output is lost).
    pub fn failed(&self) -> bool {
        self.error.is_some()
    }

    /// Writes the rows still held, flushes and syncs the file; the counts
    /// of the rows written.
    pub fn finish(mut self) -> io::Result<Summary> {
        for r in std::mem::take(&mut self.held).into_values() {
            self.emit(&r);
        }
        if let Some(e) = self.error {
            return Err(e);
        }
        self.csv
            .into_inner()
            .map_err(|e| io::Error::other(e.to_string()))?
            .into_inner()
            .map_err(|e| io::Error::other(e.to_string()))?
            .sync_all()?;
        Ok(self.tally)
    }
}

/// A flow not yet written: what its row needs beyond the client's names
/// (the [`FlowRecord`], several times larger, is built only to write the
/// row), since up to [`MAX_WAITING`] of them wait for a slot.
#[derive(Debug, Clone, Copy)]
struct Open {
    id: u64,
    dst: usize,
    size: u64,
    start_ns: u64,
    warmup: bool,
}

/// A flow waiting for a slot: 64 bytes, 16 MiB for [`MAX_WAITING`].
struct Waiting {
    seq: u64,
    open: Open,
    /// The flow's arrival: its FCT runs from here.
    since: Instant,
}

/// The flows not yet written, the connection slots and the file, under one
/// lock so that a flow is always in exactly one place: waiting, running,
/// or written.
struct Book {
    /// The flows holding a slot, by arrival sequence number, with their
    /// connection's local address once connected.
    running: HashMap<u64, (Open, Option<SocketAddr>)>,
    /// In arrival order.
    waiting: VecDeque<Waiting>,
    /// Free slots (`--max-concurrent` minus the running flows).
    free: usize,
    /// `None` once the final snapshot was taken: flows that end later are
    /// not written (they were written as unfinished).
    log: Option<FlowLog>,
}

/// What the arrival thread did with an arrival.
enum Admit {
    Run(Flow),
    Wait,
    Skip,
    /// The CSV cannot be written: the run's output is lost.
    Stop,
}

/// State shared by the arrival thread, the flow tasks and the coordinator.
struct Shared {
    name: String,
    dsts: Vec<Destination>,
    book: Mutex<Book>,
    started: AtomicU64,
    completed: AtomicU64,
    failed: AtomicU64,
    deferred: AtomicU64,
    skipped: AtomicU64,
    /// Signalled whenever a flow ends.
    flow_ended: Notify,
    cc: Option<String>,
}

impl Shared {
    fn book(&self) -> MutexGuard<'_, Book> {
        // Every update under the lock is one step, so a panicking holder
        // leaves it consistent; losing the CSV would be worse.
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn active(&self) -> u64 {
        let ended = self.completed.load(Relaxed) + self.failed.load(Relaxed);
        self.started.load(Relaxed).saturating_sub(ended)
    }

    /// The row of an open flow, unfinished.
    fn record(&self, o: &Open, src: Option<SocketAddr>) -> FlowRecord {
        let dst = &self.dsts[o.dst];
        FlowRecord::arrived(
            o.id,
            &self.name,
            &dst.name,
            src.map_or_else(String::new, |a| a.to_string()),
            dst.addr.to_string(),
            o.size,
            o.start_ns,
            o.warmup,
        )
    }

    fn flow(&self, seq: u64, o: &Open) -> Flow {
        Flow {
            seq,
            dst: self.dsts[o.dst].addr,
            header: Header {
                flow_id: o.id,
                size: o.size,
            },
        }
    }

    /// A slot for the arrival `seq`, else a place in the queue, else its
    /// row as skipped.
    fn admit(&self, seq: u64, open: Open, since: Instant) -> Admit {
        let mut book = self.book();
        let book = &mut *book;
        let Some(log) = book.log.as_mut().filter(|l| !l.failed()) else {
            return Admit::Stop;
        };
        if book.free > 0 {
            book.free -= 1;
            book.running.insert(seq, (open, None));
            Admit::Run(self.flow(seq, &open))
        } else if book.waiting.len() < MAX_WAITING {
            book.waiting.push_back(Waiting { seq, open, since });
            Admit::Wait
        } else {
            let mut r = self.record(&open, None);
            r.status = FlowStatus::Failed;
            r.error = format!(
                "skipped: {MAX_WAITING} flows were already waiting for a free --max-concurrent slot; the client cannot keep up with this arrival rate"
            );
            log.write(seq, r);
            Admit::Skip
        }
    }

    /// Writes the row of the flow `seq` with its outcome and hands its slot
    /// to the longest-waiting flow, returned with its arrival time; `None`
    /// when none waits, or once the final snapshot was taken.
    fn end(
        &self,
        seq: u64,
        result: &Result<(Duration, Option<u64>), String>,
    ) -> Option<(Flow, Instant)> {
        let mut book = self.book();
        let book = &mut *book;
        let log = book.log.as_mut()?;
        if let Some((o, src)) = book.running.remove(&seq) {
            let mut r = self.record(&o, src);
            match result {
                Ok((fct, min_rtt)) => {
                    r.status = FlowStatus::Ok;
                    r.fct_ns = Some(u64::try_from(fct.as_nanos()).unwrap_or(u64::MAX));
                    r.min_rtt_us = *min_rtt;
                }
                Err(e) => {
                    r.status = FlowStatus::Failed;
                    r.error.clone_from(e);
                }
            }
            log.write(seq, r);
        }
        match book.waiting.pop_front() {
            Some(w) => {
                book.running.insert(w.seq, (w.open, None));
                Some((self.flow(w.seq, &w.open), w.since))
            }
            None => {
                book.free += 1;
                None
            }
        }
    }
}

/// Runs the plan: arrivals, drain, CSV. Progress goes to stdout.
pub fn run(mut plan: Plan) -> Result<Summary, String> {
    if let Some((endpoint, sender, cc, signals)) = plan.rocev2.take() {
        let source = FlowSource::new(
            plan.arrivals,
            plan.config.seed,
            plan.config.id_base,
            plan.config.warmup_s,
            plan.config.size_scale,
            plan.config.dsts.len(),
        );
        let run = crate::rocev2::client::Run {
            name: plan.config.name,
            dsts: plan.config.dsts,
            out: plan.out,
            out_path: plan.config.out.display().to_string(),
            progress_ms: plan.config.progress_ms,
            drain_s: plan.config.drain_s,
            source,
            config: sender,
            cc,
        };
        return crate::rocev2::client::run(run, endpoint, signals);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("lcmp-traffic")
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    let result = runtime.block_on(drive(plan));
    // Flows still open after the drain are dropped, not awaited.
    runtime.shutdown_background();
    result
}

async fn drive(plan: Plan) -> Result<Summary, String> {
    let Plan {
        config,
        arrivals,
        max_concurrent,
        out,
        ..
    } = plan;
    let source = FlowSource::new(
        arrivals,
        config.seed,
        config.id_base,
        config.warmup_s,
        config.size_scale,
        config.dsts.len(),
    );
    let mut term = signal(SignalKind::terminate()).map_err(|e| format!("SIGTERM handler: {e}"))?;
    let mut int = signal(SignalKind::interrupt()).map_err(|e| format!("SIGINT handler: {e}"))?;
    let shared = Arc::new(Shared {
        name: config.name.clone(),
        dsts: config.dsts.clone(),
        book: Mutex::new(Book {
            running: HashMap::new(),
            waiting: VecDeque::new(),
            free: max_concurrent,
            log: Some(FlowLog::new(out)),
        }),
        started: AtomicU64::new(0),
        completed: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        deferred: AtomicU64::new(0),
        skipped: AtomicU64::new(0),
        flow_ended: Notify::new(),
        cc: config.cc.clone(),
    });
    let stop = Arc::new(AtomicBool::new(false));
    let (done_tx, mut done_rx) = oneshot::channel();
    let t0 = Instant::now();
    let arrival_thread = {
        let (shared, stop) = (shared.clone(), stop.clone());
        let handle = Handle::current();
        thread::Builder::new()
            .name("arrivals".into())
            .spawn(move || {
                let lag = arrival_loop(&shared, source, &handle, t0, &stop);
                let _ = done_tx.send(());
                lag
            })
            .map_err(|e| format!("cannot start the arrival thread: {e}"))?
    };

    let period = Duration::from_millis(config.progress_ms.max(1));
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let progress = config.progress_ms > 0;
    let mut interrupted = None;

    // Arrivals.
    loop {
        tokio::select! {
            _ = &mut done_rx => break,
            _ = ticker.tick(), if progress => print_progress(&shared, t0),
            _ = term.recv() => { interrupted = Some(libc::SIGTERM); break }
            _ = int.recv() => { interrupted = Some(libc::SIGINT); break }
        }
    }
    stop.store(true, Relaxed);
    arrival_thread.thread().unpark();
    // The thread leaves its sleep at once when stopped, so joining it from
    // here (the runtime's entry thread, not a worker) blocks only briefly.
    let max_arrival_lag = arrival_thread.join().unwrap_or_default();

    // Drain; pointless once the CSV cannot be written.
    let log_failed = || shared.book().log.as_ref().is_none_or(FlowLog::failed);
    if interrupted.is_none() && !log_failed() {
        let deadline = tokio::time::Instant::now() + Duration::from_secs_f64(config.drain_s);
        while shared.active() > 0 {
            tokio::select! {
                _ = shared.flow_ended.notified() => {}
                _ = tokio::time::sleep_until(deadline) => break,
                _ = ticker.tick(), if progress => print_progress(&shared, t0),
                _ = term.recv() => { interrupted = Some(libc::SIGTERM); break }
                _ = int.recv() => { interrupted = Some(libc::SIGINT); break }
            }
        }
    }
    let elapsed = t0.elapsed();

    // Flows that end from here on are not counted: the CSV is this snapshot.
    let (running, waiting, log) = {
        let mut book = shared.book();
        let running = std::mem::take(&mut book.running);
        (running, std::mem::take(&mut book.waiting), book.log.take())
    };
    let mut log = log.expect("the snapshot is taken once");
    let mut open: Vec<(u64, Open, Option<SocketAddr>)> = running
        .into_iter()
        .map(|(seq, (o, src))| (seq, o, src))
        .chain(waiting.into_iter().map(|w| (w.seq, w.open, None)))
        .collect();
    open.sort_unstable_by_key(|&(seq, _, _)| seq);
    for (seq, o, src) in &open {
        log.write(*seq, shared.record(o, *src));
    }
    let tally = log
        .finish()
        .map_err(|e| format!("cannot write --out {}: {e}", config.out.display()))?;
    let summary = Summary {
        deferred: shared.deferred.load(Relaxed),
        skipped: shared.skipped.load(Relaxed),
        max_arrival_lag,
        elapsed,
        interrupted,
        ..tally
    };
    print_line(&done_line(&summary));
    Ok(summary)
}

/// Starts the flows at their arrival times; returns the largest lag.
fn arrival_loop(
    shared: &Arc<Shared>,
    mut source: FlowSource,
    handle: &Handle,
    t0: Instant,
    stop: &AtomicBool,
) -> Duration {
    let mut max_lag = Duration::ZERO;
    let mut seq = 0u64;
    while let Some(f) = source.next_flow() {
        let at = t0 + f.offset;
        if !sleep_until(at, stop) {
            break;
        }
        max_lag = max_lag.max(at.elapsed());
        let this = seq;
        seq += 1;
        let open = Open {
            id: f.id,
            dst: f.dst,
            size: f.size,
            start_ns: u64::try_from(f.offset.as_nanos()).unwrap_or(u64::MAX),
            warmup: f.warmup,
        };
        match shared.admit(this, open, at) {
            Admit::Run(flow) => {
                shared.started.fetch_add(1, Relaxed);
                handle.spawn(run_slot(shared.clone(), flow, None));
            }
            Admit::Wait => {
                shared.started.fetch_add(1, Relaxed);
                shared.deferred.fetch_add(1, Relaxed);
            }
            Admit::Skip => {
                // Failed as well, so that `active` stays started minus
                // ended.
                shared.started.fetch_add(1, Relaxed);
                shared.failed.fetch_add(1, Relaxed);
                shared.skipped.fetch_add(1, Relaxed);
            }
            Admit::Stop => break,
        }
    }
    max_lag
}

/// Sleeps until `deadline`; false if `stop` was raised first. The stopper
/// unparks the thread.
fn sleep_until(deadline: Instant, stop: &AtomicBool) -> bool {
    loop {
        if stop.load(Relaxed) {
            return false;
        }
        let now = Instant::now();
        if now >= deadline {
            return true;
        }
        thread::park_timeout(deadline - now);
    }
}

struct Flow {
    /// Arrival sequence number: the flow's key in the book.
    seq: u64,
    dst: SocketAddr,
    header: Header,
}

/// One connection slot: runs `flow`, then the longest-waiting flow, until
/// none waits. One task per busy slot, not per flow, so a waiting flow
/// costs only its [`Waiting`] entry.
async fn run_slot(shared: Arc<Shared>, mut flow: Flow, mut waiting_since: Option<Instant>) {
    loop {
        let result = attempt(&shared, &flow, waiting_since).await;
        // The socket is closed by now: the slot can go to the next flow.
        let next = shared.end(flow.seq, &result);
        match result {
            Ok(_) => shared.completed.fetch_add(1, Relaxed),
            Err(_) => shared.failed.fetch_add(1, Relaxed),
        };
        shared.flow_ended.notify_one();
        let Some((f, since)) = next else {
            return;
        };
        flow = f;
        waiting_since = Some(since);
    }
}

/// One flow; `Ok((fct, min_rtt_us))` or a readable error.
async fn attempt(
    shared: &Shared,
    flow: &Flow,
    waiting_since: Option<Instant>,
) -> Result<(Duration, Option<u64>), String> {
    let socket = match flow.dst {
        SocketAddr::V4(_) => TcpSocket::new_v4(),
        SocketAddr::V6(_) => TcpSocket::new_v6(),
    }
    .map_err(|e| format!("socket: {e}"))?;
    socket
        .set_nodelay(true)
        .map_err(|e| format!("TCP_NODELAY: {e}"))?;
    if let Some(cc) = &shared.cc {
        sockopt::set_congestion(&socket, cc).map_err(|e| format!("TCP_CONGESTION {cc}: {e}"))?;
    }
    let origin = waiting_since.unwrap_or_else(Instant::now);
    let mut stream = socket.connect(flow.dst).await.map_err(connect_error)?;
    if let Ok(local) = stream.local_addr() {
        if let Some((_, src)) = shared.book().running.get_mut(&flow.seq) {
            *src = Some(local);
        }
    }
    send_flow(&mut stream, flow.header)
        .await
        .map_err(|e| format!("send: {e}"))?;
    read_ack(&mut stream)
        .await
        .map_err(|e| format!("acknowledgement: {e}"))?;
    let fct = origin.elapsed();
    let min_rtt = sockopt::tcp_min_rtt_us(&stream).ok().flatten();
    Ok((fct, min_rtt.map(u64::from)))
}

fn connect_error(e: io::Error) -> String {
    if e.raw_os_error() == Some(libc::EADDRNOTAVAIL) {
        "connect: no free local port (EADDRNOTAVAIL): the local port range is exhausted, \
         e.g. by connections in TIME_WAIT (net.ipv4.ip_local_port_range)"
            .to_string()
    } else {
        format!("connect: {e}")
    }
}

/// Writes `records` as `flows.csv` (the header even when there are none),
/// to any writer: the generator's file, or an engine's host in memory.
pub fn write_records(w: &mut impl Write, records: &[FlowRecord]) -> io::Result<()> {
    if records.is_empty() {
        // csv writes the header with the first record; readers still need it.
        w.write_all(&csv_header()?)?;
    } else {
        let mut c = csv::Writer::from_writer(&mut *w);
        for r in records {
            c.serialize(r).map_err(io::Error::other)?;
        }
        c.flush()?;
    }
    Ok(())
}

/// The header line serde derives from [`FlowRecord`], newline included.
fn csv_header() -> io::Result<Vec<u8>> {
    let probe = FlowRecord {
        id: 0,
        sender: String::new(),
        receiver: String::new(),
        src: String::new(),
        dst: String::new(),
        size_bytes: 0,
        start_ns: 0,
        fct_ns: None,
        min_rtt_us: None,
        status: FlowStatus::Unfinished,
        error: String::new(),
        warmup: false,
        path: None,
        switch_path: None,
        reverse_switch_path: None,
    };
    let mut c = csv::Writer::from_writer(Vec::new());
    c.serialize(&probe).map_err(io::Error::other)?;
    let bytes = c
        .into_inner()
        .map_err(|e| io::Error::other(e.to_string()))?;
    let end = bytes
        .iter()
        .position(|&b| b == b'\n')
        .map_or(bytes.len(), |i| i + 1);
    Ok(bytes[..end].to_vec())
}

fn print_progress(shared: &Shared, t0: Instant) {
    let completed = shared.completed.load(Relaxed);
    let failed = shared.failed.load(Relaxed);
    let started = shared.started.load(Relaxed);
    print_line(&format!(
        "{{\"t_s\":{:.3},\"started\":{started},\"completed\":{completed},\"failed\":{failed},\"active\":{},\"deferred\":{},\"skipped\":{}}}",
        t0.elapsed().as_secs_f64(),
        started.saturating_sub(completed + failed),
        shared.deferred.load(Relaxed),
        shared.skipped.load(Relaxed),
    ));
}

/// The final JSON line.
pub fn done_line(s: &Summary) -> String {
    let rocev2 = s
        .rocev2
        .as_ref()
        .map_or(String::new(), |r| format!(",\"rocev2\":{r}"));
    format!(
        "{{\"done\":true,\"t_s\":{:.3},\"started\":{},\"completed\":{},\"failed\":{},\"unfinished\":{},\"deferred\":{},\"skipped\":{},\"warmup\":{},\"bytes_completed\":{},\"max_arrival_lag_ms\":{:.3},\"interrupted\":{}{rocev2}}}",
        s.elapsed.as_secs_f64(),
        s.flows,
        s.completed,
        s.failed,
        s.unfinished,
        s.deferred,
        s.skipped,
        s.warmup,
        s.bytes_completed,
        s.max_arrival_lag.as_secs_f64() * 1e3,
        s.interrupted.is_some(),
    )
}

/// Writes one stdout line; a reader that went away must not kill the run.
pub(crate) fn print_line(line: &str) {
    let mut out = io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_destinations() {
        let d: Destination = "h8=10.8.0.2:5001".parse().unwrap();
        assert_eq!(d.name, "h8");
        assert_eq!(d.addr, "10.8.0.2:5001".parse().unwrap());
        let d: Destination = "v6=[fd00::2]:5001".parse().unwrap();
        assert!(d.addr.is_ipv6());
        assert!("10.8.0.2:5001".parse::<Destination>().is_err());
        assert!("=10.8.0.2:5001".parse::<Destination>().is_err());
        assert!("h8=10.8.0.2".parse::<Destination>().is_err());
    }

    fn config(out: PathBuf) -> ClientConfig {
        ClientConfig {
            name: "h1".into(),
            dsts: vec!["h2=127.0.0.1:9".parse().unwrap()],
            workload: Some("websearch".into()),
            load: Some(Load::BitsPerSecond(1e9)),
            duration_s: Some(1.0),
            schedule: None,
            size_scale: 1.0,
            warmup_s: 0.0,
            drain_s: 1.0,
            seed: 1,
            id_base: 0,
            out,
            cc: None,
            max_concurrent: 16,
            progress_ms: 0,
            rocev2: None,
        }
    }

    #[test]
    fn rate_sets_lambda_from_mean_size() {
        let out =
            std::env::temp_dir().join(format!("lcmp-traffic-unit-{}.csv", std::process::id()));
        let plan = prepare(config(out.clone())).unwrap();
        // 1 Gb/s of 1_711_250-byte flows on average.
        assert!((plan.lambda - 1e9 / (8.0 * 1_711_250.0)).abs() < 1e-9);
        drop(plan);
        // At --size-scale 1000 the mean scaled size is about 1711 bytes
        // (a bit more: flows below 500 bytes round up to one byte... and
        // the truncation to whole bytes before scaling is negligible).
        let mut c = config(out.clone());
        c.size_scale = 1000.0;
        let plan = prepare(c).unwrap();
        let mean = 1e9 / (8.0 * plan.lambda);
        assert!((mean - 1711.25).abs() < 2.0, "{mean}");
        drop(plan);
        let _ = std::fs::remove_file(out);
    }

    #[test]
    fn rejects_bad_input_without_creating_the_output() {
        let out =
            std::env::temp_dir().join(format!("lcmp-traffic-unit-bad-{}.csv", std::process::id()));
        type Edit = fn(&mut ClientConfig);
        let cases: Vec<(Edit, &str)> = vec![
            (|c| c.load = Some(Load::BitsPerSecond(0.0)), "--rate-bps"),
            (
                |c| c.load = Some(Load::FlowsPerSecond(-1.0)),
                "--flows-per-s",
            ),
            (
                |c| c.load = Some(Load::FlowsPerSecond(f64::NAN)),
                "--flows-per-s",
            ),
            (|c| c.duration_s = Some(0.0), "--duration"),
            (|c| c.warmup_s = 1.0, "--warmup"),
            (|c| c.drain_s = -1.0, "--drain"),
            (|c| c.dsts.clear(), "--dst"),
            (
                |c| c.workload = Some("/nonexistent.txt".into()),
                "--workload",
            ),
            (|c| c.cc = Some("no-such-cc".into()), "available"),
            (|c| c.max_concurrent = 0, "--max-concurrent"),
            (|c| c.name.clear(), "--name"),
            (|c| c.drain_s = 1e30, "--drain"),
            (|c| c.duration_s = Some(f64::INFINITY), "--duration"),
            (|c| c.progress_ms = u64::MAX, "--progress-ms"),
            (|c| c.load = Some(Load::FlowsPerSecond(1e300)), "flows"),
            (|c| c.size_scale = 0.0, "--size-scale"),
            (|c| c.size_scale = -2.0, "--size-scale"),
            (|c| c.duration_s = None, "--duration"),
            (
                |c| c.schedule = Some("/nonexistent.csv".into()),
                "--schedule",
            ),
        ];
        for (edit, needle) in cases {
            let mut c = config(out.clone());
            edit(&mut c);
            let e = prepare(c).unwrap_err();
            assert!(e.contains(needle), "{e}");
            assert!(!e.contains('\n'), "{e}");
            assert!(!out.exists(), "{e}: output created");
        }
        let mut c = config(PathBuf::from("/nonexistent-dir/flows.csv"));
        c.out = "/nonexistent-dir/flows.csv".into();
        assert!(prepare(c).unwrap_err().contains("--out"));
    }

    #[test]
    fn empty_run_still_has_a_header() {
        let path = std::env::temp_dir().join(format!(
            "lcmp-traffic-unit-empty-{}.csv",
            std::process::id()
        ));
        let counts = FlowLog::new(File::create(&path).unwrap()).finish().unwrap();
        assert_eq!(counts, Summary::default());
        let text = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!(
            text,
            "id,sender,receiver,src,dst,size_bytes,start_ns,fct_ns,min_rtt_us,status,error,warmup,path,switch_path,reverse_switch_path\n"
        );
    }

    /// A row that ends before an earlier flow waits for it, so rows come in
    /// arrival order; once MAX_REORDER rows wait behind one open flow they
    /// are written, and from then on rows go out as flows end.
    #[test]
    fn flow_log_keeps_arrival_order_within_its_bound() {
        let path = std::env::temp_dir().join(format!(
            "lcmp-traffic-unit-order-{}.csv",
            std::process::id()
        ));
        let row = |id: u64, status| {
            let mut r =
                FlowRecord::arrived(id, "h1", "h2", String::new(), "d".into(), 10, 0, false);
            r.status = status;
            r
        };
        let ids = |path: &PathBuf| -> Vec<u64> {
            csv::Reader::from_path(path)
                .unwrap()
                .deserialize::<FlowRecord>()
                .map(|r| r.unwrap().id)
                .collect()
        };
        // Ends 2, 0, 3, 1.
        let mut log = FlowLog::new(File::create(&path).unwrap());
        log.write(2, row(12, FlowStatus::Ok));
        log.write(0, row(10, FlowStatus::Failed));
        log.write(3, row(13, FlowStatus::Ok));
        log.write(1, row(11, FlowStatus::Unfinished));
        let counts = log.finish().unwrap();
        assert_eq!(ids(&path), vec![10, 11, 12, 13]);
        assert_eq!(
            (
                counts.flows,
                counts.completed,
                counts.failed,
                counts.unfinished
            ),
            (4, 2, 1, 1)
        );
        assert_eq!(counts.bytes_completed, 20);

        // Flow 0 stays open while 1..=MAX_REORDER + 1 end: the held rows
        // go out at the overflow, then 0 when it ends, then 70_000 at once.
        let mut log = FlowLog::new(File::create(&path).unwrap());
        let last = MAX_REORDER as u64 + 1;
        for seq in 1..=last {
            log.write(seq, row(seq, FlowStatus::Ok));
        }
        log.write(0, row(0, FlowStatus::Ok));
        log.write(70_000, row(70_000, FlowStatus::Ok));
        log.write(last + 1, row(last + 1, FlowStatus::Ok));
        assert_eq!(log.finish().unwrap().flows, last + 3);
        let mut want: Vec<u64> = (1..=last).collect();
        want.extend([0, 70_000, last + 1]);
        assert_eq!(ids(&path), want);
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn done_line_is_json() {
        let s = Summary {
            flows: 3,
            completed: 2,
            failed: 1,
            elapsed: Duration::from_millis(1500),
            ..Summary::default()
        };
        assert_eq!(
            done_line(&s),
            "{\"done\":true,\"t_s\":1.500,\"started\":3,\"completed\":2,\"failed\":1,\"unfinished\":0,\"deferred\":0,\"skipped\":0,\"warmup\":0,\"bytes_completed\":0,\"max_arrival_lag_ms\":0.000,\"interrupted\":false}"
        );
    }
}

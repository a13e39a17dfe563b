//! The LCMP DCI switch as a [`Node`]: the forwarding pipeline
//! ([`Switch`]), its answers to the control protocol ([`crate::control`]),
//! its [`Snapshot`] as status, and the flow log's file.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use lcmp_control::proto::Body;
use lcmp_control::snapshot::Snapshot;
use lcmp_control::Request;
use tracing::warn;

use crate::control::{self, DaemonInfo};
use crate::daemon::Daemon;
use crate::flow_log::FlowLog;
use crate::io::PacketIo;
use crate::node::{Clock, Context, Node};
use crate::switch::Switch;

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

/// An LCMP switch, its control state and its flow log.
pub struct LcmpNode<IO: PacketIo> {
    sw: Switch<IO>,
    info: DaemonInfo,
    flow_log: Option<FlowLogFile>,
    /// How often the flow log is written, ns.
    log_interval_ns: u64,
    next_log_ns: u64,
}

fn unix_time_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl<IO: PacketIo> LcmpNode<IO> {
    /// The node of switch `name`. With `flow_log`, creates (truncates) the
    /// file with its header (an error names the file) and writes the
    /// switch's decisions to it every `log_interval_ns` (needs
    /// [`Switch::enable_flow_log`]).
    pub fn new(
        sw: Switch<IO>,
        name: &str,
        flow_log: Option<&Path>,
        log_interval_ns: u64,
    ) -> Result<Self, String> {
        let flow_log = flow_log.map(FlowLogFile::create).transpose()?;
        let ports = sw.port_reports().len();
        Ok(LcmpNode {
            info: DaemonInfo {
                name: name.to_string(),
                pid: std::process::id(),
                declared: vec![None; ports],
                lcmp: DaemonInfo::lcmp_of(sw.policy()),
                ..Default::default()
            },
            sw,
            flow_log,
            log_interval_ns,
            next_log_ns: 0,
        })
    }

    /// The switch.
    pub fn switch(&mut self) -> &mut Switch<IO> {
        &mut self.sw
    }

    /// The switch, read only.
    pub fn switch_ref(&self) -> &Switch<IO> {
        &self.sw
    }

    fn refresh_info(&mut self, now_ns: u64, ctx: &Context<'_>) {
        self.info.uptime_ns = now_ns.saturating_sub(ctx.started_ns);
        self.info.unix_time_ms = unix_time_ms();
        self.info.control = ctx.control;
    }
}

impl<IO: PacketIo> Node for LcmpNode<IO> {
    type Io = IO;
    type Status = Snapshot;

    fn poll(&mut self, clock: &mut impl Clock) -> usize {
        self.sw.poll_clock(|| clock.now_ns())
    }

    fn last_poll_ns(&self) -> u64 {
        self.sw.last_poll_ns()
    }

    fn next_wake(&self, _now_ns: u64) -> Option<u64> {
        let mut t = self.sw.next_deadline();
        // Only a log with a file is written on a deadline (`after_poll`).
        if self.flow_log.is_some() && self.sw.flow_log().is_some_and(|l| !l.records().is_empty()) {
            t = t.min(self.next_log_ns);
        }
        Some(t)
    }

    fn after_poll(&mut self, now_ns: u64) {
        if let Some(log) = self.flow_log.as_mut() {
            if now_ns >= self.next_log_ns || self.sw.flow_log().is_some_and(FlowLog::half_full) {
                log.write(&mut self.sw);
                self.next_log_ns = now_ns + self.log_interval_ns;
            }
        }
    }

    fn handle(&mut self, request: Request, ctx: &Context<'_>) -> Body {
        // The switch's own time: changes apply as of its last poll.
        let now = self.sw.last_poll_ns();
        self.refresh_info(now, ctx);
        control::handle(&mut self.sw, &mut self.info, request, now)
    }

    fn status(&mut self, ctx: &Context<'_>) -> Snapshot {
        let now = self.sw.last_poll_ns().max(ctx.started_ns);
        self.refresh_info(now, ctx);
        control::snapshot(&self.sw, &self.info)
    }

    fn io(&mut self) -> &mut IO {
        self.sw.io()
    }

    fn finish(&mut self) {
        self.sw.drain();
        if let Some(log) = self.flow_log.as_mut() {
            log.write(&mut self.sw);
        }
    }
}

/// The LCMP switch's daemon.
pub type LcmpDaemon<IO, C> = Daemon<LcmpNode<IO>, C>;

impl<IO: PacketIo, C: Clock> Daemon<LcmpNode<IO>, C> {
    /// The switch.
    pub fn switch(&mut self) -> &mut Switch<IO> {
        self.node().switch()
    }

    /// The switch, read only.
    pub fn switch_ref(&self) -> &Switch<IO> {
        self.node_ref().switch_ref()
    }
}

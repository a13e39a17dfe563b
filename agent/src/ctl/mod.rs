//! `lcmp-ctl`: the operator's view of running switches, in the style of
//! `ovs-appctl`. This module holds everything but the argument parsing:
//!
//! - [`select`]: which sockets a command line selects;
//! - [`command`]: what the operator asked for and the request it sends;
//! - [`call`]: the calls (in parallel, one thread per switch);
//! - [`capture`]: a port's frames into a pcapng file;
//! - [`render`]: the replies as aligned human tables (one module per
//!   output) or as one JSON document, on [`table`] layout and [`units`].
//!
//! Exit statuses: 0 when every selected switch answered, 1 when any failed
//! (not running, refused the request, or a selection naming a testbed or
//! switch that does not exist), 2 for a malformed command line (caught
//! before anything is sent).
//!
//! `costs` runs on every selected switch like the other read verbs, one
//! switch's candidates after the other: asking a whole testbed how it would
//! route one prefix is the common question.

mod call;
mod capture;
mod command;
mod render;
mod select;
mod table;
mod units;

pub(crate) use call::reply_kind;
pub use call::{query, Outcome, DEFAULT_TIMEOUT_MS};
pub use capture::{capture, CaptureOptions, CaptureSummary};
pub use command::Command;
pub use render::applied::render_applied;
pub use render::costs::render_costs;
pub use render::flows::render_flows;
pub use render::json::render_json;
pub use render::plan::{render_agent_plan, render_plan_entries, AgentPlan};
pub use render::ports::{render_links, render_ports};
pub use render::rotor::render_rotor;
pub use render::status::{render_policy, render_status};
pub use render::tables::render_tables;
pub use render::{render, report};
pub use select::{resolve, Resolved, RunDirs, Selection, Target};
pub use units::{bytes, delay, duration, rate, size};

/// Why `lcmp-ctl` stops before (or instead of) talking to a switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CtlError {
    /// The command line is malformed: exit status 2.
    Usage(String),
    /// The command line is fine but the world does not match it (an unknown
    /// testbed or switch): exit status 1.
    Failed(String),
}

impl CtlError {
    /// The process exit status for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            CtlError::Usage(_) => 2,
            CtlError::Failed(_) => 1,
        }
    }
}

impl std::fmt::Display for CtlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CtlError::Usage(m) | CtlError::Failed(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for CtlError {}

//! The LCMP DCI switch data plane.
//!
//! - [`io`]: the packet I/O trait; [`mem_io`] its in-memory side.
//! - [`switch`]: the forwarding pipeline.
//! - [`egress`]: per-port buffer, ECN, shaper and delay line.
//! - [`routing`]: longest-prefix match to candidate sets.
//! - [`counters`]: drops by reason.
//! - [`flow_log`]: the log of path decisions (`--flow-log`).

pub mod config;
pub mod counters;
pub mod egress;
pub mod flow_log;
pub mod io;
pub mod mem_io;
pub mod routing;
pub mod stats;
pub mod switch;
pub mod xsk;

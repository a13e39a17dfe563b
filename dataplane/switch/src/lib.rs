//! The LCMP DCI switch data plane.
//!
//! - [`io`]: the packet I/O trait; [`mem_io`] its in-memory side.
//! - [`switch`]: the forwarding pipeline.
//! - [`egress`]: per-port buffer, ECN, shaper and delay line.
//! - [`routing`]: longest-prefix match to candidate sets.
//! - [`counters`]: drops by reason.
//! - [`icmp`]: the ICMP errors a router sends (time exceeded, unreachable).
//! - [`rotor`]: a rotor (circuit) switch on slots of a shared clock.
//! - [`rotor_daemon`]: the loop of a rotor or ToR (slot clock, control, stats).
//! - [`rotor_tor`]: a rotor-aware ToR's per-next-hop queues.
//! - [`tor_path`]: a rotor-aware ToR's packet path (routing, Valiant marks).
//! - [`flow_log`]: the log of path decisions (`--flow-log`).
//! - [`control`]: the state snapshot and the answers to control requests.
//! - [`daemon`]: the poll loop with its side work (stats, control, logs).
//! - [`config`]: a switch from the topology file; every default.
//! - [`netns`]: entering a switch's network namespace to open its ports.

pub mod config;
pub mod control;
pub mod counters;
pub mod daemon;
pub mod egress;
pub mod flow_log;
pub mod icmp;
pub mod io;
pub mod mem_io;
pub mod netns;
pub mod rotor;
pub mod rotor_daemon;
pub mod rotor_tor;
pub mod routing;
pub mod switch;
pub mod tor_path;
pub mod xsk;

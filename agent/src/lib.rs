//! The LCMP control plane.
//!
//! - [`report`]: each switch's route tables (candidates with C_path, from
//!   `lcmp_topology::tables`, the tables the data plane runs on) and the
//!   LCMP kept sets (`lcmp-agent paths`).
//! - [`run`]: the agent managing running switches (`lcmp-agent run`);
//!   [`rotor_run`]: the same for a rotor network; what both share is in
//!   `managed`.
//! - [`failover`]: the tables it pushes, failed links avoided;
//!   [`emulation`]: who emulates links.
//! - [`ctl`]: the operator CLI (`lcmp-ctl`).

pub mod ctl;
pub mod emulation;
pub mod failover;
mod managed;
pub mod report;
pub mod rotor_run;
pub mod run;

/// The paper's 8-DC topology, built in so the demo runs without files.
pub const DEFAULT_TOPOLOGY: &str = include_str!("../../topologies/8dc.toml");

/// The name the built-in topology reports as its source.
pub const DEFAULT_TOPOLOGY_NAME: &str = "topologies/8dc.toml (built in)";

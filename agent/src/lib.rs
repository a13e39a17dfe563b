//! The LCMP control plane's reports: each switch's route tables (candidate
//! ports with their path cost C_path, computed by `lcmp_topology::tables`,
//! the same tables the switch data plane runs on) and the LCMP kept sets.

pub mod report;

/// The paper's 8-DC topology, built in so the demo runs without files.
pub const DEFAULT_TOPOLOGY: &str = include_str!("../../topologies/8dc.toml");

/// The name the built-in topology reports as its source.
pub const DEFAULT_TOPOLOGY_NAME: &str = "topologies/8dc.toml (built in)";

//! The LCMP control plane: turns a topology into each switch's route
//! tables (candidate ports with their path cost C_path), the input of the
//! switch's data plane, and reports them.

pub mod report;
pub mod tables;

/// The paper's 8-DC topology, built in so the demo runs without files.
pub const DEFAULT_TOPOLOGY: &str = include_str!("../../topologies/8dc.toml");

/// The name the built-in topology reports as its source.
pub const DEFAULT_TOPOLOGY_NAME: &str = "topologies/8dc.toml (built in)";

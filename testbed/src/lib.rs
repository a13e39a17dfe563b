//! `lcmp-testbed`: multi-DC testbeds in network namespaces and the FCT
//! experiments run on them.
//!
//! - [`bed`]: `up`/`down`, switch daemons, reachability; [`state`]: the
//!   state file under `/run/lcmp-testbed/<name>/`; [`status`]: health.
//! - [`experiment`]: runs (calibration, traffic, switch counters); what
//!   they write (analysis, `report.md`, plots, simulator traces to replay,
//!   fidelity against the simulator) is `lcmp_results`, pure and tested
//!   without root.
//! - [`rdma`]: SoftRoCE devices where the kernel has them.
//! - [`rotor`]: rotor networks (Mars): bring-up, the throughput experiment
//!   and the slot-boundary measurement.

pub mod bed;
pub mod experiment;
pub mod flow_paths;
pub mod rdma;
pub mod rotor;
pub mod state;
pub mod status;

pub use lcmp_netlab::{Error, Result};

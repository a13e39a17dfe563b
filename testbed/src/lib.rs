//! `lcmp-testbed`: multi-DC testbeds in network namespaces and the FCT
//! experiments run on them.
//!
//! - [`bed`]: `up`/`down`, switch daemons, reachability; [`state`]: the
//!   state file under `/run/lcmp-testbed/<name>/`; [`status`]: health.
//! - [`experiment`]: runs (calibration, traffic, switch counters);
//!   [`analysis`], [`report`], [`plots`]: results; [`trace`]: simulator
//!   traces to replay; [`fidelity`]: results against the simulator's.
//! - [`rdma`]: SoftRoCE devices where the kernel has them.
//! - [`rotor`]: rotor networks (Mars): bring-up, the throughput experiment
//!   and the slot-boundary measurement.

pub mod analysis;
pub mod bed;
pub mod experiment;
pub mod fidelity;
pub mod plots;
pub mod rdma;
pub mod report;
pub mod rotor;
pub mod state;
pub mod status;
pub mod trace;

pub use lcmp_netns_tests::{Error, Result};

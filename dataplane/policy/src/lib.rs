//! The LCMP policy engine: everything a DCI switch computes to pick the path
//! of a new flow, and to keep the flow on it.
//!
//! The engine is pure: no I/O, no clock reads (every call takes `now` in
//! nanoseconds of a monotonic clock chosen by the caller) and no allocation
//! after construction. The data plane, the agent and offline experiments all
//! call it, so the same inputs give the same decisions everywhere.
//!
//! - [`levels`]: the N-class score table shared by every component.
//! - [`path_cost`]: C_path from path delay and bottleneck capacity (slow path).
//! - [`congestion`]: the per-port queue monitor giving C_cong (fast path).
//! - [`decision`]: a route's candidates and the decision's outcome.
//! - [`policies`]: the [`PathPolicy`] trait, LCMP and the baselines (a
//!   module each), and the registry that names them (a new policy is a
//!   module and a line there).
//! - [`select`]: the [`Selector`] deciding under the switch's policy.
//! - [`flow`]: the 5-tuple flow key and its per-switch seeded hash.
//! - [`flow_cache`]: the fixed-size flow -> port cache with idle eviction.
//! - [`router`]: cache + decision + failover, with counters.
//! - [`spec`]: policy specs, a name with LCMP's weights
//!   (`lcmp:alpha=1:beta=3`), as experiments list policies.

pub mod congestion;
pub mod decision;
pub mod flow;
pub mod flow_cache;
pub mod levels;
pub mod path_cost;
pub mod policies;
pub mod router;
pub mod select;
pub mod spec;

/// Index of a switch port (egress interface). A switch has at most 256 ports.
pub type PortId = u8;

/// Read access to the live state of the switch's ports, as the decision needs
/// it. Implemented by [`congestion::PortStates`]; a data plane may implement
/// it over its own port table.
pub trait PortView {
    /// Whether the port's link is up. Dead ports are never chosen.
    fn is_up(&self, port: PortId) -> bool;
    /// The port's current congestion cost, 0..=255.
    fn c_cong(&self, port: PortId) -> u8;
}

pub use congestion::{CongestionEstimator, CongestionParams, PortStates};
pub use decision::DecisionKind;
pub use flow::{FlowHash, FlowHasher, FlowKey};
pub use flow_cache::FlowCache;
pub use path_cost::{PathCostModel, PathCostParams};
pub use policies::PathPolicy;
pub use router::{FlowRouter, PortSet, RouteOutcome, RouterStats};
pub use select::{
    AllCongested, Candidate, CandidateSet, Decision, LcmpParams, Policy, PolicyName, Ranking,
    Selector,
};
pub use spec::{PolicySpec, Weights};

/// `clap` for the `ValueEnum` the registry generates (`clap` feature).
#[cfg(feature = "clap")]
#[doc(hidden)]
pub use clap as __clap;

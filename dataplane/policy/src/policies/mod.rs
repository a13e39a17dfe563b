//! The path-selection policies, and the extension point that adds one.
//!
//! A policy is a type implementing [`PathPolicy`] (its module, e.g.
//! [`ecmp`]) and one line in the registry, [`registry!`](crate::registry).
//! The registry generates [`Policy`] (the policy with its parameters, a
//! variant per policy) and [`PolicyName`] (a variant per name), and from
//! them everything that reads a name: [`Policy::NAMES`],
//! [`Policy::from_name`], `PolicyName`'s `FromStr` and, with the `clap`
//! feature, its `clap::ValueEnum`. So `lcmp-switch lcmp --policy`,
//! `lcmp-ctl policy`, the control protocol's `set_policy`, a topology's
//! per-switch `policy` and an experiment's `policies` all accept a name as
//! soon as its line is in the registry. Adding a policy:
//!
//! ```text
//! // dataplane/policy/src/policies/least_congested.rs
//! use crate::{CandidateSet, Decision, FlowHash, PathPolicy, PortView};
//!
//! /// The live candidates of lowest C_cong, hashed over.
//! #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
//! pub struct LeastCongested;
//!
//! impl PathPolicy for LeastCongested {
//!     fn decide<P: PortView>(&self, set: &CandidateSet, ports: &P, hash: FlowHash)
//!         -> Option<Decision> { ... }
//! }
//!
//! // here: `pub mod least_congested;` and, in `registry!`,
//! LeastCongested: $crate::policies::least_congested::LeastCongested = "least-congested",
//! ```
//!
//! `dataplane/policy/tests/extension.rs` does exactly this, with decisions
//! worked out by hand.
//!
//! # Why an enum, not `dyn PathPolicy`
//!
//! The decision runs for the first packet of every flow, on the poll
//! thread. `decide` is generic over [`PortView`], the seam that lets the
//! switch, the agent and tests give their own port state; a generic method
//! cannot be called through `dyn`, so a `dyn` policy would also need a
//! `dyn PortView`: an indirect call per candidate for `is_up` and another
//! for `c_cong`, none of them inlined, where the enum's `match` calls each
//! policy's `decide` directly and the compiler inlines it with the port
//! view (the `decide/N` bench measures the same per decision before and
//! after this module existed). A `Box<dyn>` would also allocate, and lose
//! `Copy` and `Eq`, which the control plane uses to report whether a
//! `set_policy` changed anything. The price is that the set of policies is
//! fixed at build time, which every tool of the workspace is anyway.

mod registry;

pub mod ecmp;
pub mod lcmp;
pub mod ucmp;
pub mod wcmp;

use crate::decision::{CandidateSet, Decision};
use crate::flow::FlowHash;
use crate::PortView;

/// A path-selection policy: how the egress port of a new flow is chosen
/// among the candidates of its route. The implementing type holds the
/// policy's parameters (a unit struct if it has none); its `Default` is
/// what the policy's name stands for.
///
/// A decision must be pure and cheap: no I/O, no clock, no allocation,
/// integer arithmetic on the stack, never a panic on any input. Dead ports
/// (`!ports.is_up(port)`) are never chosen; `None` when no candidate is
/// live. Hash with [`FlowHash::pick`] so a burst of new flows spreads.
pub trait PathPolicy: Copy + Default + PartialEq + Eq + std::fmt::Debug {
    /// Decides the egress port of a new flow with hash `hash` among the
    /// candidates of its route: each candidate's `port`, `c_path` and
    /// `capacity_bps`, and per port `is_up` and `c_cong` from `ports`.
    fn decide<P: PortView>(
        &self,
        set: &CandidateSet,
        ports: &P,
        hash: FlowHash,
    ) -> Option<Decision>;

    /// Whether these parameters are an instance of `preset`, the value of
    /// one of the policy's extra names in the registry: they are then
    /// labelled with that name. Equality unless the policy says otherwise
    /// (LCMP names its ablations by the weight they remove).
    fn is_preset(&self, preset: &Self) -> bool {
        self == preset
    }
}

/// The registry of policies: one line per name, generating [`Policy`] and
/// [`PolicyName`] (see the line forms in the generator's docs,
/// `dataplane/policy/src/policies/registry.rs`). A new policy is one line
/// here, before the extra names of LCMP so the help texts list the
/// policies first:
///
/// ```text
/// MyPolicy: $crate::policies::my_policy::MyPolicy = "my-policy",
/// ```
///
/// Called with lines of its own (a test, or a crate experimenting outside
/// this one), it generates the built-in policies followed by those, in
/// the calling module.
#[macro_export]
macro_rules! registry {
    ($($more:tt)*) => {
        $crate::define_policies! {
            /// LCMP (with its ablations as parameter choices).
            Lcmp($crate::LcmpParams) = "lcmp",
            /// Hash over all live candidates.
            Ecmp: $crate::policies::ecmp::Ecmp = "ecmp",
            /// Hash weighted by candidate bottleneck capacity.
            Wcmp: $crate::policies::wcmp::Wcmp = "wcmp",
            /// UCMP as the LCMP paper re-implemented it: hash over the live
            /// candidates of maximum capacity only.
            Ucmp: $crate::policies::ucmp::Ucmp = "ucmp",
            /// `lcmp-rm-alpha`: LCMP without the path cost (alpha 0).
            LcmpRmAlpha = "lcmp-rm-alpha" => Lcmp($crate::LcmpParams::RM_ALPHA),
            /// `lcmp-rm-beta`: LCMP without the congestion cost (beta 0).
            LcmpRmBeta = "lcmp-rm-beta" => Lcmp($crate::LcmpParams::RM_BETA),
            $($more)*
        }
    };
}

crate::registry!();

/// Whether no two of `names` are equal (the registry's compile-time check).
#[doc(hidden)]
pub const fn all_distinct(names: &[&str]) -> bool {
    let mut i = 0;
    while i < names.len() {
        let mut j = i + 1;
        while j < names.len() {
            if str_eq(names[i], names[j]) {
                return false;
            }
            j += 1;
        }
        i += 1;
    }
    true
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

//! What a path decision is made from and what it gives: the candidate next
//! hops of a route, and the chosen port. Every policy
//! ([`crate::policies`]) decides from these types only.

use crate::{PortId, PortView};

/// Most candidate next hops a route may have.
pub const MAX_CANDIDATES: usize = 16;

/// One candidate next hop of a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Candidate {
    /// Egress port.
    pub port: PortId,
    /// Path cost C_path of the path through this port (control plane).
    pub c_path: u8,
    /// Bottleneck capacity of the path, bit/s (WCMP weights, UCMP filter).
    pub capacity_bps: u64,
}

/// The candidates of one route, fixed-size so a decision never allocates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CandidateSet {
    items: [Candidate; MAX_CANDIDATES],
    len: u8,
}

/// A route had more candidates than [`MAX_CANDIDATES`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooManyCandidates(pub usize);

impl std::fmt::Display for TooManyCandidates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} candidate next hops, at most {MAX_CANDIDATES} are supported",
            self.0
        )
    }
}

impl std::error::Error for TooManyCandidates {}

impl CandidateSet {
    /// A set of the given candidates.
    pub fn new(candidates: &[Candidate]) -> Result<Self, TooManyCandidates> {
        if candidates.len() > MAX_CANDIDATES {
            return Err(TooManyCandidates(candidates.len()));
        }
        let mut items = [Candidate::default(); MAX_CANDIDATES];
        items[..candidates.len()].copy_from_slice(candidates);
        Ok(CandidateSet {
            items,
            len: candidates.len() as u8,
        })
    }

    /// The candidates.
    #[inline]
    pub fn as_slice(&self) -> &[Candidate] {
        &self.items[..self.len as usize]
    }

    /// Number of candidates.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// True for a route without candidates.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The ports of the live candidates passing `keep`, in candidate order,
    /// and how many there are (the first `n` entries), on the stack.
    #[inline]
    pub fn live_ports<P: PortView>(
        &self,
        ports: &P,
        keep: impl Fn(&Candidate) -> bool,
    ) -> ([PortId; MAX_CANDIDATES], usize) {
        let mut out = [0; MAX_CANDIDATES];
        let mut n = 0;
        for c in self.as_slice() {
            if ports.is_up(c.port) && keep(c) {
                out[n] = c.port;
                n += 1;
            }
        }
        (out, n)
    }
}

/// How a decision was reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecisionKind {
    /// Hashed within the policy's eligible set (LCMP: the kept set).
    Hashed,
    /// LCMP: every kept candidate was congested; the cheapest was taken.
    MinCostFallback,
    /// LCMP: every kept candidate was congested; hashed over all live ones.
    HashAllFallback,
}

/// The outcome of a decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The chosen egress port.
    pub port: PortId,
    /// How it was chosen.
    pub kind: DecisionKind,
}

impl Decision {
    /// `port`, chosen the policy's ordinary way (not a fallback: the
    /// switch counts every other kind as an all-congested decision).
    #[inline]
    pub fn hashed(port: PortId) -> Decision {
        Decision {
            port,
            kind: DecisionKind::Hashed,
        }
    }
}

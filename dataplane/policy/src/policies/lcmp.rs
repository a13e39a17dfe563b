//! LCMP: for each live candidate `C = alpha * C_path + beta * C_cong`; order
//! by `(C, port)`; keep the cheaper part (with 3 or fewer candidates, all of
//! them); hash the flow onto the kept set. Hashing rather than taking the
//! single cheapest path spreads a burst of new flows that see the same
//! congestion snapshot (the herd effect). If every kept candidate is
//! congested (C_cong at or above the mark) the cheapest is taken instead
//! (the paper); the artifact hashes over all candidates, available as
//! [`AllCongested::HashAll`].
//!
//! Integer arithmetic only, on the stack: a decision over 16 candidates
//! sorts 16 words. The ablations `lcmp-rm-alpha` and `lcmp-rm-beta` are
//! presets of [`LcmpParams`] ([`LcmpParams::RM_ALPHA`],
//! [`LcmpParams::RM_BETA`]), registered beside `lcmp`.

use crate::decision::{CandidateSet, Decision, DecisionKind, MAX_CANDIDATES};
use crate::flow::FlowHash;
use crate::policies::PathPolicy;
use crate::{PortId, PortView};

/// What LCMP does when every kept candidate is congested.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllCongested {
    /// Take the minimum-cost candidate (the paper).
    MinCost,
    /// Hash over all live candidates (the artifact).
    HashAll,
}

/// LCMP parameters. Defaults are the paper's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LcmpParams {
    /// Weight of C_path. 0 is the "rm-alpha" ablation.
    pub alpha: u32,
    /// Weight of C_cong. 0 is the "rm-beta" ablation (which also disables
    /// the all-congested fallback: it is a congestion reaction).
    pub beta: u32,
    /// The kept fraction is `keep_num / keep_den` of the live candidates,
    /// rounded down, at least 1.
    pub keep_num: u8,
    /// See `keep_num`.
    pub keep_den: u8,
    /// Routes with at most this many live candidates keep all of them.
    pub keep_all_up_to: u8,
    /// C_cong at or above this is congested (204 = 80% of 255).
    pub congested_mark: u8,
    /// Behaviour when every kept candidate is congested.
    pub all_congested: AllCongested,
}

impl Default for LcmpParams {
    fn default() -> Self {
        LcmpParams::PAPER
    }
}

impl LcmpParams {
    /// The paper's parameters (`lcmp`).
    pub const PAPER: LcmpParams = LcmpParams {
        alpha: 3,
        beta: 1,
        keep_num: 1,
        keep_den: 2,
        keep_all_up_to: 3,
        congested_mark: 204,
        all_congested: AllCongested::MinCost,
    };

    /// LCMP without the path cost (`lcmp-rm-alpha`).
    pub const RM_ALPHA: LcmpParams = LcmpParams {
        alpha: 0,
        ..LcmpParams::PAPER
    };

    /// LCMP without the congestion cost (`lcmp-rm-beta`).
    pub const RM_BETA: LcmpParams = LcmpParams {
        beta: 0,
        ..LcmpParams::PAPER
    };

    /// How many of `n` live candidates are kept: n for n <= 3, then the
    /// lower half (4-5 keep 2, 6-7 keep 3) with the default fraction.
    #[inline]
    pub fn keep_count(&self, n: usize) -> usize {
        if n <= self.keep_all_up_to as usize {
            return n;
        }
        (n * self.keep_num as usize / self.keep_den.max(1) as usize).clamp(1, n)
    }

    /// The fused cost `alpha * C_path + beta * C_cong` of a candidate,
    /// exact: each term is below 2^40 (a u32 weight times a u8 score), so
    /// the sum fits in 41 bits for every weight. In u32 it could wrap once
    /// alpha + beta passed 16,843,009 (u32::MAX / 255), and a wrapped cost
    /// could rank the worst path first. The one cost function: the ranking,
    /// the switch's `costs` reply and `lcmp-agent paths` all use it.
    #[inline]
    pub fn cost_exact(&self, c_path: u8, c_cong: u8) -> u64 {
        self.alpha as u64 * c_path as u64 + self.beta as u64 * c_cong as u64
    }
}

impl PathPolicy for LcmpParams {
    #[inline]
    fn decide<P: PortView>(
        &self,
        set: &CandidateSet,
        ports: &P,
        hash: FlowHash,
    ) -> Option<Decision> {
        decide_lcmp(self, set, ports, hash)
    }

    /// The ablations are named by the weight they remove, whatever the
    /// other parameters: alpha 0 is `lcmp-rm-alpha` (first in the registry,
    /// so also when beta is 0 too), beta 0 is `lcmp-rm-beta`.
    fn is_preset(&self, preset: &Self) -> bool {
        match (preset.alpha, preset.beta) {
            (0, _) => self.alpha == 0,
            (_, 0) => self.beta == 0,
            _ => self == preset,
        }
    }
}

// A ranking key is `cost << 8 | port`: the largest exact cost, both weights
// u32::MAX and both scores 255, must leave the top 8 bits free.
const _: () = assert!(u32::MAX as u64 * 255 * 2 < 1 << 56);

/// Live candidates ordered by `(cost, port)`, with the kept prefix marked:
/// the LCMP filter, for decisions and for reports of the kept set.
#[derive(Clone, Copy, Debug)]
pub struct Ranking {
    keys: [u64; MAX_CANDIDATES],
    live: u8,
    kept: u8,
}

impl Ranking {
    /// Ranks the live candidates of `set` under `p`.
    #[inline]
    pub fn new<P: PortView>(p: &LcmpParams, set: &CandidateSet, ports: &P) -> Self {
        // Sort keys: cost above the port index, so ties break by port.
        let mut keys = [0u64; MAX_CANDIDATES];
        let mut live = 0;
        for c in set.as_slice() {
            if ports.is_up(c.port) {
                keys[live] = p.cost_exact(c.c_path, ports.c_cong(c.port)) << 8 | c.port as u64;
                live += 1;
            }
        }
        insertion_sort(&mut keys[..live]);
        Ranking {
            keys,
            live: live as u8,
            kept: p.keep_count(live) as u8,
        }
    }

    /// Number of live candidates.
    pub fn live(&self) -> usize {
        self.live as usize
    }

    /// Number of kept candidates.
    pub fn kept(&self) -> usize {
        self.kept as usize
    }

    /// The `i`-th cheapest live candidate: `(port, exact cost)`.
    #[inline]
    pub fn get(&self, i: usize) -> (PortId, u64) {
        let k = self.keys[i];
        (k as u8, k >> 8)
    }

    /// Ports of the kept set, cheapest first.
    pub fn kept_ports(&self) -> impl Iterator<Item = PortId> + '_ {
        (0..self.kept()).map(|i| self.get(i).0)
    }
}

#[inline]
fn decide_lcmp<P: PortView>(
    p: &LcmpParams,
    set: &CandidateSet,
    ports: &P,
    hash: FlowHash,
) -> Option<Decision> {
    let ranking = Ranking::new(p, set, ports);
    let (live, kept) = (ranking.live(), ranking.kept());
    if live == 0 {
        return None;
    }
    let all_congested = p.beta != 0
        && ranking
            .kept_ports()
            .all(|port| ports.c_cong(port) >= p.congested_mark);
    let (i, kind) = if !all_congested {
        (hash.pick(kept as u32) as usize, DecisionKind::Hashed)
    } else {
        match p.all_congested {
            AllCongested::MinCost => (0, DecisionKind::MinCostFallback),
            AllCongested::HashAll => (
                hash.pick(live as u32) as usize,
                DecisionKind::HashAllFallback,
            ),
        }
    };
    Some(Decision {
        port: ranking.get(i).0,
        kind,
    })
}

/// Sorts a few words; for at most 16 elements this beats the library sorts,
/// which pay for generality first.
#[inline]
fn insertion_sort(keys: &mut [u64]) {
    for i in 1..keys.len() {
        let k = keys[i];
        let mut j = i;
        while j > 0 && keys[j - 1] > k {
            keys[j] = keys[j - 1];
            j -= 1;
        }
        keys[j] = k;
    }
}

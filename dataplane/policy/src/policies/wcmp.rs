//! WCMP: the flow is hashed over the live candidates weighted by their
//! bottleneck capacity.

use crate::decision::{Candidate, CandidateSet, Decision};
use crate::flow::FlowHash;
use crate::policies::PathPolicy;
use crate::PortView;

/// Hash weighted by candidate bottleneck capacity.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wcmp;

impl PathPolicy for Wcmp {
    #[inline]
    fn decide<P: PortView>(
        &self,
        set: &CandidateSet,
        ports: &P,
        hash: FlowHash,
    ) -> Option<Decision> {
        // Weights in Mbit/s: 16 candidates of up to 4 Tbit/s sum within u32.
        let weight =
            |c: &Candidate| (c.capacity_bps / 1_000_000).clamp(1, u32::MAX as u64 / 16) as u32;
        let total: u32 = set
            .as_slice()
            .iter()
            .filter(|c| ports.is_up(c.port))
            .map(weight)
            .sum();
        if total == 0 {
            return None;
        }
        let mut point = hash.pick(total);
        for c in set.as_slice().iter().filter(|c| ports.is_up(c.port)) {
            let w = weight(c);
            if point < w {
                return Some(Decision::hashed(c.port));
            }
            point -= w;
        }
        None
    }
}

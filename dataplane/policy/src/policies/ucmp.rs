//! UCMP as the LCMP paper re-implemented it: the flow is hashed over the
//! live candidates of maximum bottleneck capacity only; when they are all
//! down, the next capacity class takes over.

use crate::decision::{CandidateSet, Decision};
use crate::flow::FlowHash;
use crate::policies::PathPolicy;
use crate::PortView;

/// Hash over the live candidates of maximum capacity.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ucmp;

impl PathPolicy for Ucmp {
    #[inline]
    fn decide<P: PortView>(
        &self,
        set: &CandidateSet,
        ports: &P,
        hash: FlowHash,
    ) -> Option<Decision> {
        let max = set
            .as_slice()
            .iter()
            .filter(|c| ports.is_up(c.port))
            .map(|c| c.capacity_bps)
            .max()?;
        let (best, n) = set.live_ports(ports, |c| c.capacity_bps == max);
        Some(Decision::hashed(best[hash.pick(n as u32) as usize]))
    }
}

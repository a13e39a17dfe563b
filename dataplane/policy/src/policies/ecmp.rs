//! ECMP: the flow is hashed over all live candidates, equally.

use crate::decision::{CandidateSet, Decision};
use crate::flow::FlowHash;
use crate::policies::PathPolicy;
use crate::PortView;

/// Hash over all live candidates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ecmp;

impl PathPolicy for Ecmp {
    #[inline]
    fn decide<P: PortView>(
        &self,
        set: &CandidateSet,
        ports: &P,
        hash: FlowHash,
    ) -> Option<Decision> {
        let (live, n) = set.live_ports(ports, |_| true);
        (n > 0).then(|| Decision::hashed(live[hash.pick(n as u32) as usize]))
    }
}

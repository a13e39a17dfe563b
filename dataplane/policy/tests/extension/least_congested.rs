//! `least-congested`: the flow is hashed over the live candidates of lowest
//! C_cong. The worked example of a policy added through the registry.

use lcmp_policy::{CandidateSet, Decision, FlowHash, PathPolicy, PortView};

/// The live candidates of lowest C_cong, hashed over (not the single
/// lowest: a burst of new flows against one snapshot would all land on it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LeastCongested;

impl PathPolicy for LeastCongested {
    fn decide<P: PortView>(
        &self,
        set: &CandidateSet,
        ports: &P,
        hash: FlowHash,
    ) -> Option<Decision> {
        let least = set
            .as_slice()
            .iter()
            .filter(|c| ports.is_up(c.port))
            .map(|c| ports.c_cong(c.port))
            .min()?;
        let (tied, n) = set.live_ports(ports, |c| ports.c_cong(c.port) == least);
        Some(Decision::hashed(tied[hash.pick(n as u32) as usize]))
    }
}

//! The path decision for the first packet of a flow: a [`Selector`] holds
//! the switch's [`Policy`] and decides with it.
//!
//! The policies themselves (LCMP and the baselines) are in
//! [`crate::policies`], one module each, named by the registry there; the
//! decision's inputs and outputs are in [`crate::decision`]. Their types are
//! re-exported here, where callers have always found them.

pub use crate::decision::{
    Candidate, CandidateSet, Decision, DecisionKind, TooManyCandidates, MAX_CANDIDATES,
};
pub use crate::policies::lcmp::{AllCongested, LcmpParams, Ranking};
pub use crate::policies::{Policy, PolicyName};

use crate::flow::FlowHash;
use crate::PortView;
// The tests below name ports through `super::*`.
#[cfg(test)]
use crate::PortId;

/// Makes path decisions under one policy.
#[derive(Clone, Copy, Debug)]
pub struct Selector {
    policy: Policy,
}

impl Selector {
    /// A selector for `policy`.
    pub fn new(policy: Policy) -> Self {
        Selector { policy }
    }

    /// The policy in use.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Decides the egress port of a new flow with hash `hash` among the
    /// candidates of its route. Dead ports are never chosen; `None` when no
    /// candidate is live.
    #[inline]
    pub fn decide<P: PortView>(
        &self,
        set: &CandidateSet,
        ports: &P,
        hash: FlowHash,
    ) -> Option<Decision> {
        self.policy.decide(set, ports, hash)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::congestion::{CongestionParams, PortStates};
    use crate::flow::{FlowHasher, FlowKey};
    use std::net::Ipv4Addr;

    const G: u64 = 1_000_000_000;

    /// Ports whose C_cong is set directly.
    struct Fixed {
        c_cong: [u8; 16],
        up: [bool; 16],
    }

    impl Fixed {
        fn idle() -> Self {
            Fixed {
                c_cong: [0; 16],
                up: [true; 16],
            }
        }
    }

    impl PortView for Fixed {
        fn is_up(&self, port: PortId) -> bool {
            self.up[port as usize]
        }
        fn c_cong(&self, port: PortId) -> u8 {
            self.c_cong[port as usize]
        }
    }

    fn set(c_paths: &[u8]) -> CandidateSet {
        let v: Vec<Candidate> = c_paths
            .iter()
            .enumerate()
            .map(|(i, &c)| Candidate {
                port: i as u8,
                c_path: c,
                capacity_bps: 100 * G,
            })
            .collect();
        CandidateSet::new(&v).unwrap()
    }

    fn hashes(n: u32) -> impl Iterator<Item = FlowHash> {
        let h = FlowHasher::new(42);
        (0..n).map(move |i| {
            h.hash(&FlowKey::V4 {
                src: Ipv4Addr::from(0x0a00_0000 + i),
                dst: Ipv4Addr::new(10, 8, 0, 1),
                proto: 17,
                sport: (i % 65_000) as u16,
                dport: 4791,
            })
        })
    }

    fn chosen(sel: &Selector, s: &CandidateSet, p: &impl PortView, n: u32) -> [u32; 16] {
        let mut counts = [0; 16];
        for h in hashes(n) {
            counts[sel.decide(s, p, h).unwrap().port as usize] += 1;
        }
        counts
    }

    #[test]
    fn keep_counts_follow_the_spec() {
        let p = LcmpParams::default();
        let got: Vec<usize> = (1..=8).map(|n| p.keep_count(n)).collect();
        assert_eq!(got, [1, 2, 3, 2, 2, 3, 3, 4]);
        let third = LcmpParams {
            keep_num: 1,
            keep_den: 3,
            keep_all_up_to: 0,
            ..p
        };
        assert_eq!(third.keep_count(2), 1);
        assert_eq!(third.keep_count(9), 3);
    }

    #[test]
    fn lcmp_hashes_over_the_cheaper_half() {
        let sel = Selector::new(Policy::from_name("lcmp").unwrap());
        // Costs 3*c_path: ports 1, 3, 5 cheapest.
        let s = set(&[90, 10, 80, 20, 70, 30]);
        let counts = chosen(&sel, &s, &Fixed::idle(), 3000);
        assert_eq!(counts[0] + counts[2] + counts[4], 0, "{counts:?}");
        assert!(counts[1] > 800 && counts[3] > 800 && counts[5] > 800);
    }

    #[test]
    fn ties_break_by_port_index() {
        let sel = Selector::new(Policy::from_name("lcmp").unwrap());
        // All equal: the kept two are the two lowest port indices.
        let s = set(&[50, 50, 50, 50]);
        let counts = chosen(&sel, &s, &Fixed::idle(), 1000);
        assert_eq!(counts[2] + counts[3], 0);
    }

    #[test]
    fn congestion_moves_the_kept_set() {
        let sel = Selector::new(Policy::from_name("lcmp").unwrap());
        let s = set(&[10, 10, 40, 40]);
        let mut ports = Fixed::idle();
        // Port 0 congested: 30 + 200 = 230 > 120 of ports 2, 3.
        ports.c_cong[0] = 200;
        let counts = chosen(&sel, &s, &ports, 1000);
        assert_eq!(counts[0], 0);
        assert!(counts[1] > 0);
    }

    /// The probe `lcmp-agent paths --switch dc1 --alpha 23598722`, route
    /// DC1 -> DC8: the paths via DC2..DC7 are ports 0..5 with C_path 18,
    /// 182, 38, 104, 60, 93 (worked out in agent/tests/eight_dc.rs). At
    /// empty queues the cost is alpha * C_path:
    ///
    /// | port | C_path | exact cost    | in u32 |
    /// |------|--------|---------------|--------|
    /// | 0    |  18    |   424,776,996 | same   |
    /// | 1    | 182    | 4,294,967,404 | 108    |
    /// | 2    |  38    |   896,751,436 | same   |
    /// | 3    | 104    | 2,454,267,088 | same   |
    /// | 4    |  60    | 1,415,923,320 | same   |
    /// | 5    |  93    | 2,194,681,146 | same   |
    ///
    /// 182 * 23,598,722 = 2^32 + 108, so in u32 the 500 ms path ranked
    /// first and was kept. Six candidates keep three: ports 0, 2, 4.
    #[test]
    fn huge_alpha_ranks_by_exact_cost() {
        let p = LcmpParams {
            alpha: 23_598_722,
            ..Default::default()
        };
        assert!(p.cost_exact(255, 0) > p.cost_exact(0, 0));
        assert_eq!(p.cost_exact(182, 0), 4_294_967_404);
        let s = set(&[18, 182, 38, 104, 60, 93]);
        let r = Ranking::new(&p, &s, &Fixed::idle());
        assert_eq!(r.kept_ports().collect::<Vec<_>>(), [0, 2, 4]);
        assert_eq!(r.get(0), (0, 424_776_996));
        assert_eq!(r.get(5), (1, 4_294_967_404));
        // Either side of 2^32: 181 * 23,598,722 = 4,271,368,682.
        assert_eq!(p.cost_exact(181, 0), 4_271_368_682);
        let sel = Selector::new(Policy::Lcmp(p));
        let counts = chosen(&sel, &s, &Fixed::idle(), 600);
        assert_eq!(counts[1] + counts[3] + counts[5], 0, "{counts:?}");
    }

    /// The same with congestion: beta = u32::MAX, alpha 0. Exact costs
    /// beta * C_cong: C_cong 255 costs 255 * (2^32 - 1) = 1,095,216,660,225
    /// and C_cong 1 costs 4,294,967,295, so ports 1 and 2 (C_cong 1) are
    /// kept. In u32, 255 * (2^32 - 1) wraps to 2^32 - 255 = 4,294,967,041,
    /// below 4,294,967,295: the congested ports 0 and 3 were kept.
    #[test]
    fn huge_beta_ranks_by_exact_cost() {
        let p = LcmpParams {
            alpha: 0,
            beta: u32::MAX,
            ..Default::default()
        };
        let s = set(&[0, 0, 0, 0]);
        let mut ports = Fixed::idle();
        ports.c_cong[..4].copy_from_slice(&[255, 1, 1, 255]);
        let r = Ranking::new(&p, &s, &ports);
        assert_eq!(r.kept_ports().collect::<Vec<_>>(), [1, 2]);
        assert_eq!(r.get(3), (3, 1_095_216_660_225));
    }

    #[test]
    fn all_congested_takes_minimum_cost() {
        let sel = Selector::new(Policy::from_name("lcmp").unwrap());
        let s = set(&[10, 20, 30, 40]);
        let mut ports = Fixed::idle();
        ports.c_cong = [210; 16];
        ports.c_cong[1] = 204;
        // Costs 240, 264, 300, 330: kept {0, 1} both >= 204 -> port 0 always.
        for h in hashes(500) {
            let d = sel.decide(&s, &ports, h).unwrap();
            assert_eq!(
                d,
                Decision {
                    port: 0,
                    kind: DecisionKind::MinCostFallback
                }
            );
        }
        // One kept candidate just below the mark: back to hashing.
        ports.c_cong[1] = 203;
        let counts = chosen(&sel, &s, &ports, 1000);
        assert!(counts[0] > 0 && counts[1] > 0);
    }

    #[test]
    fn all_congested_artifact_mode_hashes_over_all() {
        let p = LcmpParams {
            all_congested: AllCongested::HashAll,
            ..Default::default()
        };
        let sel = Selector::new(Policy::Lcmp(p));
        let s = set(&[10, 20, 30, 40]);
        let mut ports = Fixed::idle();
        ports.c_cong = [250; 16];
        let counts = chosen(&sel, &s, &ports, 2000);
        assert!(counts[..4].iter().all(|&c| c > 300), "{counts:?}");
    }

    #[test]
    fn rm_beta_ignores_congestion() {
        let sel = Selector::new(Policy::from_name("lcmp-rm-beta").unwrap());
        let s = set(&[10, 20, 30, 40]);
        let mut ports = Fixed::idle();
        ports.c_cong = [255; 16];
        let counts = chosen(&sel, &s, &ports, 1000);
        assert!(counts[0] > 0 && counts[1] > 0);
        assert_eq!(counts[2] + counts[3], 0);
    }

    #[test]
    fn rm_alpha_ignores_path_cost() {
        let sel = Selector::new(Policy::from_name("lcmp-rm-alpha").unwrap());
        let s = set(&[200, 200, 0, 0]);
        let mut ports = Fixed::idle();
        ports.c_cong[2] = 100;
        ports.c_cong[3] = 100;
        let counts = chosen(&sel, &s, &ports, 1000);
        assert_eq!(counts[2] + counts[3], 0);
    }

    #[test]
    fn dead_ports_are_never_chosen_and_shrink_the_set() {
        let mut ports = Fixed::idle();
        ports.up[1] = false;
        let s = set(&[10, 10, 10, 10, 10, 10]);
        for name in Policy::NAMES {
            let sel = Selector::new(Policy::from_name(name).unwrap());
            let counts = chosen(&sel, &s, &ports, 2000);
            assert_eq!(counts[1], 0, "{name}");
        }
        ports.up = [false; 16];
        for name in Policy::NAMES {
            let sel = Selector::new(Policy::from_name(name).unwrap());
            assert_eq!(sel.decide(&s, &ports, FlowHash(1)), None, "{name}");
        }
    }

    #[test]
    fn ecmp_uses_all_candidates_evenly() {
        let sel = Selector::new(Policy::Ecmp);
        let s = set(&[0, 100, 200, 255]);
        let counts = chosen(&sel, &s, &Fixed::idle(), 8000);
        assert!(counts[..4].iter().all(|&c| (1800..2200).contains(&c)));
    }

    #[test]
    fn wcmp_weighs_by_capacity() {
        let sel = Selector::new(Policy::Wcmp);
        let v = [
            Candidate {
                port: 0,
                c_path: 0,
                capacity_bps: 300 * G,
            },
            Candidate {
                port: 1,
                c_path: 0,
                capacity_bps: 100 * G,
            },
        ];
        let s = CandidateSet::new(&v).unwrap();
        let counts = chosen(&sel, &s, &Fixed::idle(), 8000);
        assert!((5700..6300).contains(&counts[0]), "{counts:?}");
        let mut ports = Fixed::idle();
        ports.up[0] = false;
        let counts = chosen(&sel, &s, &ports, 100);
        assert_eq!(counts[1], 100);
    }

    #[test]
    fn ucmp_uses_only_maximum_capacity() {
        let sel = Selector::new(Policy::Ucmp);
        let caps = [200, 200, 100, 100, 25, 25];
        let v: Vec<Candidate> = caps
            .iter()
            .enumerate()
            .map(|(i, &c)| Candidate {
                port: i as u8,
                c_path: 0,
                capacity_bps: c * G,
            })
            .collect();
        let s = CandidateSet::new(&v).unwrap();
        let counts = chosen(&sel, &s, &Fixed::idle(), 2000);
        assert_eq!(counts[2..6].iter().sum::<u32>(), 0);
        assert!(counts[0] > 800 && counts[1] > 800);
        // Both big paths dead: the next capacity class takes over.
        let mut ports = Fixed::idle();
        ports.up[0] = false;
        ports.up[1] = false;
        let counts = chosen(&sel, &s, &ports, 2000);
        assert!(counts[2] > 800 && counts[3] > 800);
    }

    #[test]
    fn too_many_candidates_is_an_error() {
        let v = vec![Candidate::default(); MAX_CANDIDATES + 1];
        assert_eq!(
            CandidateSet::new(&v),
            Err(TooManyCandidates(MAX_CANDIDATES + 1))
        );
    }

    #[test]
    fn policy_names_round_trip() {
        for name in Policy::NAMES {
            assert_eq!(Policy::from_name(name).unwrap().name(), name);
        }
        assert_eq!(Policy::from_name("ospf"), None);
    }

    #[test]
    fn estimator_ports_feed_decisions() {
        let mut ports = PortStates::new(&CongestionParams::default(), &[(G, 1_000_000); 4]);
        let sel = Selector::new(Policy::from_name("lcmp").unwrap());
        let s = set(&[10, 10, 40, 40]);
        ports.sample(0, 0, 950_000);
        let counts = chosen(&sel, &s, &ports, 1000);
        // Port 0: 30 + 127 = 157 > 120: ports 1 and 2 are kept.
        assert_eq!(counts[0] + counts[3], 0, "{counts:?}");
    }
}

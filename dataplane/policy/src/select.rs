//! The path decision for the first packet of a flow: LCMP and the baselines.
//!
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
//! sorts 16 words.

use crate::flow::FlowHash;
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
}

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
        LcmpParams {
            alpha: 3,
            beta: 1,
            keep_num: 1,
            keep_den: 2,
            keep_all_up_to: 3,
            congested_mark: 204,
            all_congested: AllCongested::MinCost,
        }
    }
}

impl LcmpParams {
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

// A ranking key is `cost << 8 | port`: the largest exact cost, both weights
// u32::MAX and both scores 255, must leave the top 8 bits free.
const _: () = assert!(u32::MAX as u64 * 255 * 2 < 1 << 56);

/// A path-selection policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// LCMP (with its ablations as parameter choices).
    Lcmp(LcmpParams),
    /// Hash over all live candidates.
    Ecmp,
    /// Hash weighted by candidate bottleneck capacity.
    Wcmp,
    /// UCMP as the LCMP paper re-implemented it: hash over the live
    /// candidates of maximum capacity only.
    Ucmp,
}

/// A policy as command lines, control requests and experiment files name
/// it: the one list of names and their spelling ([`PolicyName::name`]).
/// With the `clap` feature it is a `clap::ValueEnum` of the same names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PolicyName {
    /// `lcmp`
    Lcmp,
    /// `ecmp`
    Ecmp,
    /// `wcmp`
    Wcmp,
    /// `ucmp`
    Ucmp,
    /// `lcmp-rm-alpha`: LCMP without the path cost (alpha 0).
    LcmpRmAlpha,
    /// `lcmp-rm-beta`: LCMP without the congestion cost (beta 0).
    LcmpRmBeta,
}

impl PolicyName {
    /// Every policy, in [`Policy::NAMES`] order.
    pub const ALL: [PolicyName; 6] = [
        PolicyName::Lcmp,
        PolicyName::Ecmp,
        PolicyName::Wcmp,
        PolicyName::Ucmp,
        PolicyName::LcmpRmAlpha,
        PolicyName::LcmpRmBeta,
    ];

    /// The name as written.
    pub const fn name(self) -> &'static str {
        match self {
            PolicyName::Lcmp => "lcmp",
            PolicyName::Ecmp => "ecmp",
            PolicyName::Wcmp => "wcmp",
            PolicyName::Ucmp => "ucmp",
            PolicyName::LcmpRmAlpha => "lcmp-rm-alpha",
            PolicyName::LcmpRmBeta => "lcmp-rm-beta",
        }
    }

    /// The policy, LCMP variants with default parameters.
    pub fn policy(self) -> Policy {
        let lcmp = LcmpParams::default();
        match self {
            PolicyName::Lcmp => Policy::Lcmp(lcmp),
            PolicyName::Ecmp => Policy::Ecmp,
            PolicyName::Wcmp => Policy::Wcmp,
            PolicyName::Ucmp => Policy::Ucmp,
            PolicyName::LcmpRmAlpha => Policy::Lcmp(LcmpParams { alpha: 0, ..lcmp }),
            PolicyName::LcmpRmBeta => Policy::Lcmp(LcmpParams { beta: 0, ..lcmp }),
        }
    }
}

impl std::fmt::Display for PolicyName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for PolicyName {
    type Err = String;

    /// A policy by its exact name; the error lists the names.
    fn from_str(s: &str) -> Result<Self, String> {
        PolicyName::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("unknown policy {s:?}; one of {}", Policy::NAMES.join(", ")))
    }
}

#[cfg(feature = "clap")]
impl clap::ValueEnum for PolicyName {
    fn value_variants<'a>() -> &'a [Self] {
        &PolicyName::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.name()))
    }
}

impl Policy {
    /// Names accepted by [`Policy::from_name`].
    pub const NAMES: [&'static str; 6] = [
        PolicyName::ALL[0].name(),
        PolicyName::ALL[1].name(),
        PolicyName::ALL[2].name(),
        PolicyName::ALL[3].name(),
        PolicyName::ALL[4].name(),
        PolicyName::ALL[5].name(),
    ];

    /// A policy by name, LCMP variants with default parameters.
    pub fn from_name(name: &str) -> Option<Policy> {
        name.parse::<PolicyName>().ok().map(PolicyName::policy)
    }

    /// A short name (for metrics labels and logs).
    pub fn name(&self) -> &'static str {
        match self {
            Policy::Lcmp(p) if p.alpha == 0 => "lcmp-rm-alpha",
            Policy::Lcmp(p) if p.beta == 0 => "lcmp-rm-beta",
            Policy::Lcmp(_) => "lcmp",
            Policy::Ecmp => "ecmp",
            Policy::Wcmp => "wcmp",
            Policy::Ucmp => "ucmp",
        }
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
        let hashed = |port| Decision {
            port,
            kind: DecisionKind::Hashed,
        };
        match &self.policy {
            Policy::Lcmp(p) => decide_lcmp(p, set, ports, hash),
            Policy::Ecmp => {
                let (live, n) = live_ports(set, ports, |_| true);
                (n > 0).then(|| hashed(live[hash.pick(n as u32) as usize]))
            }
            Policy::Ucmp => {
                let max = set
                    .as_slice()
                    .iter()
                    .filter(|c| ports.is_up(c.port))
                    .map(|c| c.capacity_bps)
                    .max()?;
                let (best, n) = live_ports(set, ports, |c| c.capacity_bps == max);
                Some(hashed(best[hash.pick(n as u32) as usize]))
            }
            Policy::Wcmp => decide_wcmp(set, ports, hash).map(hashed),
        }
    }
}

/// Live candidate ports passing `keep`, in candidate order.
#[inline]
fn live_ports<P: PortView>(
    set: &CandidateSet,
    ports: &P,
    keep: impl Fn(&Candidate) -> bool,
) -> ([PortId; MAX_CANDIDATES], usize) {
    let mut out = [0; MAX_CANDIDATES];
    let mut n = 0;
    for c in set.as_slice() {
        if ports.is_up(c.port) && keep(c) {
            out[n] = c.port;
            n += 1;
        }
    }
    (out, n)
}

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

#[inline]
fn decide_wcmp<P: PortView>(set: &CandidateSet, ports: &P, hash: FlowHash) -> Option<PortId> {
    // Weights in Mbit/s: 16 candidates of up to 4 Tbit/s sum within u32.
    let weight = |c: &Candidate| (c.capacity_bps / 1_000_000).clamp(1, u32::MAX as u64 / 16) as u32;
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
            return Some(c.port);
        }
        point -= w;
    }
    None
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

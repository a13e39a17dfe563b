//! Rotor (periodic circuit) networks, after Mars (SIGMETRICS 2023): the
//! planner that picks the emulated graph's degree from the buffer and delay
//! budget, and the schedules (which matching each rotor applies in each
//! slot).
//!
//! The bounds below are a **reconstruction** (no public Mars code exists):
//! they reproduce every worked number of the paper, but are not quoted from
//! it. With n ToRs, degree d and D = ceil(log_d n):
//!
//! - throughput theta(d) = (1 - Delta_r / Delta) / (2 D) (Valiant load
//!   balancing, D hops per phase);
//! - worst-case delay = 2 D (d / U) Delta (a hop waits up to d / U slots
//!   for its circuit);
//! - buffer per ToR = d c Delta (linear in d; the paper's 5 MB per unit of d
//!   at Delta = 100 us is c Delta at c = 400 Gbit/s).
//!
//! A schedule is d perfect matchings (the emulated graph split into
//! permutations), d / U per rotor: rotor r applies matching
//! `r * d / U + slot mod (d / U)` in a slot. A matching maps each ToR to
//! the ToR its uplink reaches; a ToR mapped to itself has no circuit in that
//! slot (the de Bruijn self-loops).

use std::collections::VecDeque;

/// Why no plan or schedule exists for the inputs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RotorError(pub String);

impl std::fmt::Display for RotorError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RotorError {}

/// What the planner is given.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RotorInputs {
    /// ToR switches (n_t).
    pub tors: u32,
    /// Uplinks per ToR = rotor switches (n_u).
    pub uplinks: u32,
    /// Slot length Delta, ns.
    pub slot_ns: u64,
    /// Reconfiguration time Delta_r within each slot, ns.
    pub reconfig_ns: u64,
    /// Link rate c, bit/s.
    pub rate_bps: u64,
    /// Buffer per ToR B, bytes.
    pub buffer_bytes: u64,
    /// Largest acceptable worst-case delay L, ns.
    pub max_delay_ns: u64,
}

/// One degree's figures.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Candidate {
    /// Degree d of the emulated graph.
    pub degree: u32,
    /// D = ceil(log_d n).
    pub diameter: u32,
    /// theta(d), a fraction of line rate.
    pub throughput_bound: f64,
    /// Worst-case delay, ns.
    pub delay_ns: u64,
    /// Buffer needed per ToR, bytes.
    pub buffer_bytes: u64,
    /// Within both budgets.
    pub feasible: bool,
}

/// The planner's answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// Every degree the uplinks allow (multiples of U, 2..=n).
    pub candidates: Vec<Candidate>,
    /// Mars's choice: the highest throughput within budget (the smaller
    /// degree on a tie: less buffer).
    pub chosen: Candidate,
}

/// Smallest D with d^D >= n.
pub fn diameter(n: u32, d: u32) -> u32 {
    let (mut reach, mut hops) = (1u64, 0u32);
    while reach < n as u64 {
        reach = reach.saturating_mul(d.max(2) as u64);
        hops += 1;
    }
    hops
}

/// The figures of degree `d` (see the module documentation).
pub fn candidate(i: &RotorInputs, d: u32) -> Candidate {
    let dia = diameter(i.tors, d).max(1);
    let tax = i.reconfig_ns as f64 / i.slot_ns.max(1) as f64;
    let delay_ns = 2 * dia as u64 * (d / i.uplinks.max(1)) as u64 * i.slot_ns;
    let buffer_bytes = (d as u128 * i.rate_bps as u128 * i.slot_ns as u128 / 8_000_000_000) as u64;
    Candidate {
        degree: d,
        diameter: dia,
        throughput_bound: (1.0 - tax) / (2.0 * dia as f64),
        delay_ns,
        buffer_bytes,
        feasible: delay_ns <= i.max_delay_ns && buffer_bytes <= i.buffer_bytes,
    }
}

/// Mars's degree for `i`, with every candidate's figures.
pub fn plan(i: &RotorInputs) -> Result<Plan, RotorError> {
    if i.tors < 2 {
        return Err(RotorError(format!(
            "{} ToRs: a rotor network needs at least 2",
            i.tors
        )));
    }
    if i.uplinks == 0 || i.uplinks > i.tors {
        return Err(RotorError(format!(
            "{} uplinks per ToR: need 1 to {} (the number of ToRs)",
            i.uplinks, i.tors
        )));
    }
    if i.reconfig_ns >= i.slot_ns {
        return Err(RotorError(format!(
            "reconfiguration {} ns does not fit a slot of {} ns",
            i.reconfig_ns, i.slot_ns
        )));
    }
    let candidates: Vec<Candidate> = (2..=i.tors)
        .filter(|d| d % i.uplinks == 0)
        .map(|d| candidate(i, d))
        .collect();
    if candidates.is_empty() {
        return Err(RotorError(format!(
            "no degree from 2 to {} is a multiple of {} uplinks",
            i.tors, i.uplinks
        )));
    }
    let chosen = candidates
        .iter()
        .filter(|c| c.feasible)
        .fold(None::<Candidate>, |best, c| match best {
            Some(b) if b.throughput_bound >= c.throughput_bound => Some(b),
            _ => Some(*c),
        })
        .ok_or_else(|| {
            RotorError(format!(
                "no degree fits the budget (buffer {} B, delay {} ns); the smallest, d = {}, needs {} B and {} ns",
                i.buffer_bytes, i.max_delay_ns, candidates[0].degree, candidates[0].buffer_bytes, candidates[0].delay_ns
            ))
        })?;
    Ok(Plan { candidates, chosen })
}

/// Which graph a schedule emulates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScheduleKind {
    /// Mars: (generalized) de Bruijn of the chosen degree.
    DeBruijn,
    /// RotorNet / Sirius: every ToR pair directly, n - 1 matchings.
    Complete,
    /// A static expander: U fixed matchings, never reconfigured.
    Static,
}

/// Matchings in slot order: `matchings[m][i]` is where ToR i's uplink
/// leads under matching m.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// The emulated graph.
    pub kind: ScheduleKind,
    /// ToRs.
    pub tors: u32,
    /// Rotors (uplinks per ToR).
    pub rotors: u32,
    /// The matchings, `rotors * per_rotor` of them.
    pub matchings: Vec<Vec<u32>>,
}

impl Schedule {
    /// Matchings each rotor cycles through.
    pub fn per_rotor(&self) -> usize {
        self.matchings.len() / self.rotors.max(1) as usize
    }

    /// The matching rotor `r` applies in slot `slot`.
    pub fn matching(&self, rotor: u32, slot: u64) -> &[u32] {
        let per = self.per_rotor().max(1);
        &self.matchings[rotor as usize * per + (slot % per as u64) as usize]
    }

    /// The schedule as a rotor network file (defaults for everything
    /// else), for the switches and the testbed.
    pub fn to_toml(&self, slot_ns: u64, reconfig_ns: u64) -> String {
        crate::rotor_net::RotorNetwork::from_schedule(self, slot_ns, reconfig_ns).to_toml()
    }
}

/// The arcs of the (generalized) de Bruijn digraph: i -> d i + a mod n.
fn de_bruijn_arcs(n: u32, d: u32) -> Vec<(u32, u32)> {
    (0..n)
        .flat_map(|i| {
            (0..d).map(move |a| (i, ((d as u64 * i as u64 + a as u64) % n as u64) as u32))
        })
        .collect()
}

/// Splits a d-regular bipartite multigraph (arcs `from -> to` on n nodes,
/// every node d out and d in) into d perfect matchings: find one
/// (augmenting paths), remove it, repeat (Hall and Konig guarantee each
/// exists).
fn decompose(n: u32, d: u32, arcs: &[(u32, u32)]) -> Result<Vec<Vec<u32>>, RotorError> {
    let n = n as usize;
    // Remaining multiplicity of each arc.
    let mut left = vec![vec![0u32; n]; n];
    for &(a, b) in arcs {
        left[a as usize][b as usize] += 1;
    }
    let mut out = Vec::new();
    for _ in 0..d {
        let mut match_of_right: Vec<Option<usize>> = vec![None; n];
        for u in 0..n {
            let mut seen = vec![false; n];
            if !augment(u, &left, &mut seen, &mut match_of_right) {
                return Err(RotorError(format!(
                    "the graph is not {d}-regular: no perfect matching left"
                )));
            }
        }
        let mut m = vec![0u32; n];
        for (v, u) in match_of_right.iter().enumerate() {
            let u = u.expect("perfect");
            m[u] = v as u32;
            left[u][v] -= 1;
        }
        out.push(m);
    }
    Ok(out)
}

/// Kuhn's augmenting path from left node `u`.
fn augment(u: usize, left: &[Vec<u32>], seen: &mut [bool], right: &mut [Option<usize>]) -> bool {
    for v in 0..left.len() {
        if left[u][v] == 0 || seen[v] {
            continue;
        }
        seen[v] = true;
        if right[v].is_none_or(|w| augment(w, left, seen, right)) {
            right[v] = Some(u);
            return true;
        }
    }
    false
}

/// The de Bruijn schedule of degree `d` on n ToRs, `rotors` rotors: the
/// sigma_k permutations when n = d^D, with
/// `sigma_k(x) = (d x + ((floor(d x / n) + k) mod d)) mod n`, else a
/// perfect-matching decomposition of the generalized de Bruijn multigraph.
pub fn de_bruijn(n: u32, d: u32, rotors: u32) -> Result<Schedule, RotorError> {
    check(n, d, rotors)?;
    let power = (d as u64).checked_pow(diameter(n, d)) == Some(n as u64);
    let matchings = if power {
        (0..d)
            .map(|k| {
                (0..n)
                    .map(|x| {
                        let dx = d as u64 * x as u64;
                        ((dx + ((dx / n as u64 + k as u64) % d as u64)) % n as u64) as u32
                    })
                    .collect()
            })
            .collect()
    } else {
        decompose(n, d, &de_bruijn_arcs(n, d))?
    };
    Ok(Schedule {
        kind: ScheduleKind::DeBruijn,
        tors: n,
        rotors,
        matchings,
    })
}

/// RotorNet/Sirius: shifts x -> x + k mod n for k = 1..n-1, spread over
/// the rotors. When the rotors do not divide n - 1, idle matchings (every
/// ToR to itself: no circuit) pad the schedule so each rotor cycles through
/// as many slots, as a real rotor with fewer matchings than slots would.
pub fn complete(n: u32, rotors: u32) -> Result<Schedule, RotorError> {
    let d = (n.max(2) - 1).div_ceil(rotors.max(1)) * rotors.max(1);
    check(n, d, rotors)?;
    let mut matchings: Vec<Vec<u32>> = (1..n)
        .map(|k| (0..n).map(|x| (x + k) % n).collect())
        .collect();
    matchings.resize(d as usize, (0..n).collect());
    Ok(Schedule {
        kind: ScheduleKind::Complete,
        tors: n,
        rotors,
        matchings,
    })
}

/// A static expander baseline: one fixed matching per rotor, never
/// reconfigured: circulant shifts x -> x + s_r mod n with distinct strides
/// s_r (no self-loops).
pub fn static_expander(n: u32, rotors: u32) -> Result<Schedule, RotorError> {
    if n < 2 || rotors == 0 || rotors >= n {
        return Err(RotorError(format!(
            "{rotors} rotors on {n} ToRs: need 1 to {}",
            n.saturating_sub(1)
        )));
    }
    // Shifts by distinct strides: a circulant expander, no self-loops.
    let strides: Vec<u32> = (0..rotors)
        .map(|r| 1 + r * (n / (rotors + 1)).max(1))
        .collect();
    let matchings = strides
        .iter()
        .map(|s| (0..n).map(|x| (x + s % n) % n).collect())
        .collect();
    Ok(Schedule {
        kind: ScheduleKind::Static,
        tors: n,
        rotors,
        matchings,
    })
}

fn check(n: u32, d: u32, rotors: u32) -> Result<(), RotorError> {
    if n < 2 {
        return Err(RotorError(format!("{n} ToRs: need at least 2")));
    }
    if d < 1 || rotors == 0 || d % rotors != 0 {
        return Err(RotorError(format!(
            "degree {d} is not a multiple of {rotors} rotors (uplinks)"
        )));
    }
    Ok(())
}

/// Next hops on the emulated graph of `s` (the union of its matchings),
/// by breadth-first search towards each destination: `next[src][dst]`,
/// and the hop count of each route. For de Bruijn this is shift routing's
/// length (at most D hops).
pub fn routes(s: &Schedule) -> (Vec<Vec<u32>>, Vec<Vec<u32>>) {
    let n = s.tors as usize;
    let mut into: Vec<Vec<usize>> = vec![Vec::new(); n];
    for m in &s.matchings {
        for (i, &j) in m.iter().enumerate() {
            if i != j as usize {
                into[j as usize].push(i);
            }
        }
    }
    let mut next = vec![vec![u32::MAX; n]; n];
    let mut hops = vec![vec![u32::MAX; n]; n];
    for dst in 0..n {
        hops[dst][dst] = 0;
        next[dst][dst] = dst as u32;
        let mut q = VecDeque::from([dst]);
        while let Some(v) = q.pop_front() {
            for &u in &into[v] {
                if hops[u][dst] == u32::MAX {
                    hops[u][dst] = hops[v][dst] + 1;
                    next[u][dst] = v as u32;
                    q.push_back(u);
                }
            }
        }
    }
    (next, hops)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paper() -> RotorInputs {
        RotorInputs {
            tors: 16,
            uplinks: 2,
            slot_ns: 100_000,
            reconfig_ns: 0,
            rate_bps: 400_000_000_000,
            buffer_bytes: 20_000_000,
            max_delay_ns: 850_000,
        }
    }

    #[test]
    fn the_papers_worked_example() {
        let p = plan(&paper()).unwrap();
        assert_eq!(p.chosen.degree, 4);
        assert_eq!(p.chosen.diameter, 2);
        assert_eq!(p.chosen.throughput_bound, 0.25);
        let d16 = p.candidates.iter().find(|c| c.degree == 16).unwrap();
        assert_eq!(d16.delay_ns, 1_600_000);
        assert_eq!(d16.buffer_bytes, 80_000_000);
        assert_eq!(d16.throughput_bound, 0.5);
        assert!(!d16.feasible);
        let d2 = p.candidates.iter().find(|c| c.degree == 2).unwrap();
        assert_eq!(d2.throughput_bound, 0.125);
    }

    #[test]
    fn infeasible_inputs_are_named() {
        let e = plan(&RotorInputs { tors: 1, ..paper() }).unwrap_err();
        assert!(e.0.contains("at least 2"), "{e}");
        let e = plan(&RotorInputs {
            buffer_bytes: 1,
            ..paper()
        })
        .unwrap_err();
        assert!(e.0.contains("no degree fits"), "{e}");
        let e = plan(&RotorInputs {
            reconfig_ns: 100_000,
            ..paper()
        })
        .unwrap_err();
        assert!(e.0.contains("does not fit a slot"), "{e}");
        assert!(de_bruijn(16, 3, 2)
            .unwrap_err()
            .0
            .contains("not a multiple"));
    }

    /// Every matching is a permutation and their union is exactly the
    /// emulated graph.
    fn check_schedule(s: &Schedule, arcs: Option<Vec<(u32, u32)>>) {
        let n = s.tors;
        for m in &s.matchings {
            let mut seen = vec![false; n as usize];
            for &j in m {
                assert!(!seen[j as usize], "not a permutation: {m:?}");
                seen[j as usize] = true;
            }
        }
        if let Some(mut want) = arcs {
            let mut got: Vec<(u32, u32)> = s
                .matchings
                .iter()
                .flat_map(|m| m.iter().enumerate().map(|(i, &j)| (i as u32, j)))
                .collect();
            got.sort();
            want.sort();
            assert_eq!(got, want, "union is not the emulated graph (n {n})");
        }
    }

    #[test]
    fn de_bruijn_schedules_are_conflict_free_and_cover_the_graph() {
        for n in 4..=64u32 {
            for d in 2..=8u32 {
                if d > n {
                    continue;
                }
                for rotors in [1u32, 2] {
                    if d % rotors != 0 {
                        continue;
                    }
                    let s = de_bruijn(n, d, rotors).unwrap();
                    assert_eq!(s.matchings.len(), d as usize);
                    check_schedule(&s, Some(de_bruijn_arcs(n, d)));
                    let (_, hops) = routes(&s);
                    let dia = diameter(n, d);
                    for (src, row) in hops.iter().enumerate() {
                        for (dst, h) in row.iter().enumerate() {
                            assert!(*h <= dia, "n {n} d {d}: {src} -> {dst} takes {h} > {dia}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn the_sigma_decomposition_has_self_loops_only_in_sigma_0() {
        let s = de_bruijn(16, 4, 2).unwrap();
        let fixed: Vec<usize> = s
            .matchings
            .iter()
            .map(|m| {
                m.iter()
                    .enumerate()
                    .filter(|(i, j)| *i as u32 == **j)
                    .count()
            })
            .collect();
        assert_eq!(fixed, vec![4, 0, 0, 0]);
        // Rotor 1 cycles through matchings 2 and 3.
        assert_eq!(s.matching(1, 0), &s.matchings[2][..]);
        assert_eq!(s.matching(1, 3), &s.matchings[3][..]);
    }

    #[test]
    fn baselines_are_permutations() {
        let c = complete(8, 7).unwrap();
        check_schedule(&c, None);
        // 7 shifts on 2 rotors: one idle matching pads rotor 1.
        let c2 = complete(8, 2).unwrap();
        check_schedule(&c2, None);
        assert_eq!(c2.matchings.len(), 8);
        assert_eq!(c2.matchings[7], (0..8).collect::<Vec<u32>>());
        assert_eq!(c2.matchings[0], vec![1, 2, 3, 4, 5, 6, 7, 0]);
        let (_, hops) = routes(&c);
        assert!(hops.iter().flatten().all(|h| *h <= 1));
        let s = static_expander(16, 2).unwrap();
        check_schedule(&s, None);
        assert_eq!(s.per_rotor(), 1);
        assert!(s.to_toml(1_000_000, 100_000).contains("kind = \"static\""));
    }
}

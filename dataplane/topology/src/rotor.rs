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

/// One candidate degree of the emulated graph and its figures.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DegreeChoice {
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
    pub candidates: Vec<DegreeChoice>,
    /// Mars's choice: the highest throughput within budget (the smaller
    /// degree on a tie: less buffer).
    pub chosen: DegreeChoice,
}

/// The most ToRs a plan covers: 2^16, beyond any datacenter fabric (its
/// table has a row per degree, up to n / U of them).
pub const MAX_PLAN_TORS: u32 = 65_536;

/// The most ToRs a schedule covers: the rotor network file's limit (ToR t's
/// hosts are 10.t.h.2). A schedule holds fewer than 2 n matchings (de
/// Bruijn at most n, complete n - 1 padded to a multiple of U), so a rotor
/// cycles through fewer than 2 n slots, each matching n entries; building
/// one takes an n x n table.
pub const MAX_SCHEDULE_TORS: u32 = 250;

/// The longest slot: 1 s (rotor slots are microseconds to milliseconds);
/// with [`MAX_PLAN_TORS`] it keeps a worst-case delay within u64 ns.
pub const MAX_SLOT_NS: u64 = 1_000_000_000;

/// The fastest uplink: 10 Tbit/s, beyond any transceiver.
pub const MAX_RATE_BPS: u64 = 10_000_000_000_000;

/// The largest buffer per ToR: 1 TB, beyond any switch's memory.
pub const MAX_BUFFER_BYTES: u64 = 1_000_000_000_000;

/// The longest delay budget: 10 s; a worst-case delay beyond that is no
/// datacenter budget.
pub const MAX_DELAY_NS: u64 = 10_000_000_000;

/// Refuses a schedule of more than [`MAX_SCHEDULE_TORS`] ToRs before
/// anything is allocated for it.
pub fn schedule_size(n: u32) -> Result<(), RotorError> {
    if n > MAX_SCHEDULE_TORS {
        return Err(RotorError(format!(
            "{n} ToRs: a schedule covers at most {MAX_SCHEDULE_TORS} (the rotor network file \
             numbers ToR t's hosts 10.t.h.2)"
        )));
    }
    Ok(())
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
pub fn candidate(i: &RotorInputs, d: u32) -> DegreeChoice {
    let dia = diameter(i.tors, d).max(1);
    let tax = i.reconfig_ns as f64 / i.slot_ns.max(1) as f64;
    // Saturating: within plan()'s bounds nothing overflows, but this is
    // public and a saturated figure is still "does not fit".
    let delay_ns = (2 * dia as u64)
        .saturating_mul((d / i.uplinks.max(1)) as u64)
        .saturating_mul(i.slot_ns);
    let buffer_bytes = (d as u128 * i.rate_bps as u128 * i.slot_ns as u128 / 8_000_000_000)
        .min(u64::MAX as u128) as u64;
    DegreeChoice {
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
    if i.tors > MAX_PLAN_TORS {
        return Err(RotorError(format!(
            "{} ToRs: a plan covers at most {MAX_PLAN_TORS} (beyond any datacenter fabric)",
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
    if i.slot_ns > MAX_SLOT_NS {
        return Err(RotorError(format!(
            "slot {} ns: at most {MAX_SLOT_NS} ns (1 s; rotor slots are microseconds to milliseconds)",
            i.slot_ns
        )));
    }
    if i.rate_bps == 0 || i.rate_bps > MAX_RATE_BPS {
        return Err(RotorError(format!(
            "rate {} bit/s: need 1 to {MAX_RATE_BPS} (10 Tbit/s, beyond any transceiver)",
            i.rate_bps
        )));
    }
    if i.buffer_bytes > MAX_BUFFER_BYTES {
        return Err(RotorError(format!(
            "buffer {} B per ToR: at most {MAX_BUFFER_BYTES} B (1 TB, beyond any switch's memory)",
            i.buffer_bytes
        )));
    }
    if i.max_delay_ns > MAX_DELAY_NS {
        return Err(RotorError(format!(
            "delay budget {} ns: at most {MAX_DELAY_NS} ns (10 s, no datacenter budget is longer)",
            i.max_delay_ns
        )));
    }
    let candidates: Vec<DegreeChoice> = (2..=i.tors)
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
        .fold(None::<DegreeChoice>, |best, c| match best {
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
    if d > n {
        // The planner's degrees stop at n; more would be n x d entries of
        // parallel arcs.
        return Err(RotorError(format!("degree {d} on {n} ToRs: at most {n}")));
    }
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

/// The seed of [`static_expander`]: fixed, so every run of an experiment
/// compares Mars against the same expander.
pub const EXPANDER_SEED: u64 = 1;

/// The most draws [`static_expander_seeded`] makes before giving up.
pub const EXPANDER_DRAWS: u32 = 1000;

/// The largest second eigenvalue magnitude a static expander of degree `d`
/// may have (normalised adjacency, eigenvalue 1 excluded): 1.25 / sqrt(d).
/// The non-trivial eigenvalues of a random d-regular digraph lie within
/// about 1 / sqrt(d) (Coste, "The spectral gap of sparse random digraphs",
/// 2021: the digraph analogue of the Ramanujan / Alon bound); the 25 %
/// margin covers the fluctuation of graphs of tens of ToRs. A 1-regular
/// digraph is a single cycle (eigenvalues: the n-th roots of unity), so
/// there the check is vacuous.
pub fn expander_bound(d: u32) -> f64 {
    if d <= 1 {
        1.0
    } else {
        (1.25 / f64::from(d).sqrt()).min(1.0)
    }
}

/// A static expander baseline with seed [`EXPANDER_SEED`]: see
/// [`static_expander_seeded`].
pub fn static_expander(n: u32, rotors: u32) -> Result<Schedule, RotorError> {
    static_expander_seeded(n, rotors, EXPANDER_SEED)
}

/// A static expander baseline, as in the Mars paper: a random
/// `rotors`-regular digraph (one fixed matching per rotor, never
/// reconfigured), no self-loops and no parallel arcs, redrawn until it is
/// strongly connected and its second eigenvalue magnitude is within
/// [`expander_bound`]. Deterministic per `seed`.
pub fn static_expander_seeded(n: u32, rotors: u32, seed: u64) -> Result<Schedule, RotorError> {
    if n < 2 || rotors == 0 || rotors >= n {
        return Err(RotorError(format!(
            "{rotors} rotors on {n} ToRs: need 1 to {}",
            n.saturating_sub(1)
        )));
    }
    schedule_size(n)?;
    let bound = expander_bound(rotors);
    let mut rng = SplitMix64(seed);
    let mut best = f64::INFINITY;
    for _ in 0..EXPANDER_DRAWS {
        let s = Schedule {
            kind: ScheduleKind::Static,
            tors: n,
            rotors,
            matchings: random_simple_matchings(n as usize, rotors as usize, &mut rng),
        };
        if !strongly_connected(&s) {
            continue;
        }
        let l2 = second_eigenvalue(&s);
        if l2 <= bound {
            return Ok(s);
        }
        best = best.min(l2);
    }
    Err(RotorError(format!(
        "no strongly connected {rotors}-regular digraph on {n} ToRs with second eigenvalue \
         <= {bound:.3} in {EXPANDER_DRAWS} draws (best {best:.3}; seed {seed})"
    )))
}

/// SplitMix64 (Steele, Lea and Flood 2014): deterministic per seed and a
/// few lines, where the graphs need no more (no new dependency).
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in 0..n (multiply-shift; the bias, n / 2^64, is nil here).
    fn below(&mut self, n: usize) -> usize {
        ((self.next() as u128 * n as u128) >> 64) as usize
    }

    /// Uniform in [-1, 1).
    fn signed_unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }

    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            v.swap(i, self.below(i + 1));
        }
    }
}

/// `d` permutations of 0..n that together have no fixed point and no arc
/// twice: each a perfect matching of the arcs still allowed, found by
/// augmenting paths in random order. The allowed arcs form an
/// (n - 1 - r)-regular bipartite graph before rotor r, so one exists
/// (Hall) while d < n.
fn random_simple_matchings(n: usize, d: usize, rng: &mut SplitMix64) -> Vec<Vec<u32>> {
    let mut used = vec![vec![false; n]; n];
    for (i, row) in used.iter_mut().enumerate() {
        row[i] = true;
    }
    let mut out = Vec::with_capacity(d);
    for _ in 0..d {
        let adj: Vec<Vec<usize>> = used
            .iter()
            .map(|row| {
                let mut a: Vec<usize> = (0..n).filter(|&j| !row[j]).collect();
                rng.shuffle(&mut a);
                a
            })
            .collect();
        let mut order: Vec<usize> = (0..n).collect();
        rng.shuffle(&mut order);
        let mut right: Vec<Option<usize>> = vec![None; n];
        for &u in &order {
            let mut seen = vec![false; n];
            // Cannot fail: the allowed arcs are regular (see above).
            augment_list(u, &adj, &mut seen, &mut right);
        }
        let mut m = vec![0u32; n];
        for (v, u) in right.iter().enumerate() {
            if let Some(u) = *u {
                m[u] = v as u32;
                used[u][v] = true;
            }
        }
        out.push(m);
    }
    out
}

/// Kuhn's augmenting path from `u` over adjacency lists.
fn augment_list(
    u: usize,
    adj: &[Vec<usize>],
    seen: &mut [bool],
    right: &mut [Option<usize>],
) -> bool {
    for &v in &adj[u] {
        if seen[v] {
            continue;
        }
        seen[v] = true;
        if right[v].is_none_or(|w| augment_list(w, adj, seen, right)) {
            right[v] = Some(u);
            return true;
        }
    }
    false
}

/// Whether every ToR reaches every other on the union of the matchings.
pub fn strongly_connected(s: &Schedule) -> bool {
    let (_, hops) = routes(s);
    hops.iter().flatten().all(|h| *h != u32::MAX)
}

/// The largest eigenvalue magnitude of the normalised adjacency
/// `A = (1/d) sum of the matchings' permutation matrices` other than its
/// eigenvalue 1, by power iteration on the vectors summing to zero: A is
/// doubly stochastic, so that space is invariant and holds every other
/// eigenvector. A is not symmetric (a digraph), so the estimate is the
/// growth rate of ||A^k x|| over a window after a burn-in (Gelfand's
/// formula), not a Rayleigh quotient: that averages out complex pairs of
/// equal modulus. For a strongly connected graph it is below 1 unless the
/// graph is periodic.
pub fn second_eigenvalue(s: &Schedule) -> f64 {
    const BURN_IN: usize = 1000;
    const WINDOW: usize = 1000;
    let n = s.tors as usize;
    let d = s.matchings.len();
    if n < 2 || d == 0 {
        return 0.0;
    }
    let mut rng = SplitMix64(0x5eed);
    let mut x: Vec<f64> = (0..n).map(|_| rng.signed_unit()).collect();
    let mut y = vec![0.0; n];
    let mut log_growth = 0.0;
    for k in 0..BURN_IN + WINDOW {
        // Back onto the zero-sum space (rounding drifts off it) and to
        // unit length, then one step.
        let mean = x.iter().sum::<f64>() / n as f64;
        x.iter_mut().for_each(|v| *v -= mean);
        let norm = x.iter().map(|v| v * v).sum::<f64>().sqrt();
        if norm < 1e-300 {
            // A^k x = 0: nilpotent on that space (de Bruijn: A^D = J / n).
            return 0.0;
        }
        x.iter_mut().for_each(|v| *v /= norm);
        for (i, yi) in y.iter_mut().enumerate() {
            *yi = s.matchings.iter().map(|m| x[m[i] as usize]).sum::<f64>() / d as f64;
        }
        std::mem::swap(&mut x, &mut y);
        if k >= BURN_IN {
            let mean = x.iter().sum::<f64>() / n as f64;
            let grown = x
                .iter()
                .map(|v| (v - mean) * (v - mean))
                .sum::<f64>()
                .sqrt();
            if grown < 1e-300 {
                return 0.0;
            }
            log_growth += grown.ln();
        }
    }
    (log_growth / WINDOW as f64).exp()
}

fn check(n: u32, d: u32, rotors: u32) -> Result<(), RotorError> {
    if n < 2 {
        return Err(RotorError(format!("{n} ToRs: need at least 2")));
    }
    schedule_size(n)?;
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
/// length (at most D hops). One next hop per pair; every one on a shortest
/// path: [`equal_cost_next_hops`].
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

/// The emulated graph's arcs out of each ToR: the union of the matchings,
/// each distinct arc once (parallel arcs of a generalized de Bruijn
/// multigraph are one next hop), self-loops (idle uplinks) left out;
/// sorted.
fn out_arcs(s: &Schedule) -> Vec<Vec<usize>> {
    let n = s.tors as usize;
    let mut out: Vec<Vec<usize>> = vec![Vec::new(); n];
    for m in &s.matchings {
        for (i, &j) in m.iter().enumerate() {
            if i != j as usize && (j as usize) < n {
                out[i].push(j as usize);
            }
        }
    }
    for a in &mut out {
        a.sort_unstable();
        a.dedup();
    }
    out
}

/// Hops from `from` to every ToR along `out` (`u32::MAX`: unreachable).
fn hops_from(out: &[Vec<usize>], from: usize) -> Vec<u32> {
    let mut hops = vec![u32::MAX; out.len()];
    hops[from] = 0;
    let mut q = VecDeque::from([from]);
    while let Some(u) = q.pop_front() {
        for &v in &out[u] {
            if hops[v] == u32::MAX {
                hops[v] = hops[u] + 1;
                q.push_back(v);
            }
        }
    }
    hops
}

/// ToR `src`'s equal-cost next hops on the emulated graph of `s`:
/// `sets[dst]` lists, sorted, every v with an arc src -> v (self-loops
/// excluded) and hops(v, dst) = hops(src, dst) - 1, i.e. every first hop
/// of a shortest path; empty for dst = src and for a dst src cannot
/// reach. What a ToR sprays its packets over. One breadth-first search
/// from each of src's out-neighbours (hops(src, dst) = 1 + their least
/// hops to dst), so a ToR's sets cost U to d searches, not n.
pub fn equal_cost_next_hops_from(s: &Schedule, src: u32) -> Vec<Vec<u32>> {
    next_hop_sets(&out_arcs(s), src)
}

/// [`equal_cost_next_hops_from`] for every ToR: `sets[src][dst]`.
pub fn equal_cost_next_hops(s: &Schedule) -> Vec<Vec<Vec<u32>>> {
    let out = out_arcs(s);
    (0..s.tors).map(|src| next_hop_sets(&out, src)).collect()
}

fn next_hop_sets(out: &[Vec<usize>], src: u32) -> Vec<Vec<u32>> {
    let n = out.len();
    let Some(first) = out.get(src as usize) else {
        return Vec::new();
    };
    let from: Vec<(u32, Vec<u32>)> = first
        .iter()
        .map(|&v| (v as u32, hops_from(out, v)))
        .collect();
    (0..n)
        .map(|dst| {
            if dst == src as usize {
                return Vec::new();
            }
            let best = from.iter().map(|(_, h)| h[dst]).min().unwrap_or(u32::MAX);
            if best == u32::MAX {
                return Vec::new();
            }
            from.iter()
                .filter(|(_, h)| h[dst] == best)
                .map(|(v, _)| *v)
                .collect()
        })
        .collect()
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

    fn diameter_of(s: &Schedule) -> u32 {
        let (_, hops) = routes(s);
        *hops.iter().flatten().max().unwrap()
    }

    /// Shifts x -> x + k mod n, one matching per stride.
    fn circulant(n: u32, strides: &[u32]) -> Schedule {
        Schedule {
            kind: ScheduleKind::Static,
            tors: n,
            rotors: strides.len() as u32,
            matchings: strides
                .iter()
                .map(|k| (0..n).map(|x| (x + k) % n).collect())
                .collect(),
        }
    }

    #[test]
    fn second_eigenvalues_of_graphs_known_by_hand() {
        let close = |got: f64, want: f64| assert!((got - want).abs() < 1e-3, "{got} != {want}");
        // The old baseline, strides +1 and +22 on 64: eigenvalues
        // (w^k + w^22k) / 2, w = e^(2 pi i / 64), of modulus
        // |cos(21 pi k / 64)|; k = 3 (21 x 3 = 63) gives cos(pi / 64).
        close(second_eigenvalue(&circulant(64, &[1, 22])), 0.998_795);
        // +1 and +2 on 4: (i^k + (-1)^k) / 2, modulus 1/sqrt(2) at k = 1, 3.
        close(
            second_eigenvalue(&circulant(4, &[1, 2])),
            std::f64::consts::FRAC_1_SQRT_2,
        );
        // Complete digraph on 5: (J - I) / 4 is -1/4 off the all-ones vector.
        close(second_eigenvalue(&circulant(5, &[1, 2, 3, 4])), 0.25);
        // A ring: eigenvalues are the 8th roots of unity.
        close(second_eigenvalue(&circulant(8, &[1])), 1.0);
        // De Bruijn 2^6: A^6 = J / 64, nilpotent off the all-ones vector.
        assert_eq!(second_eigenvalue(&de_bruijn(64, 2, 2).unwrap()), 0.0);
    }

    #[test]
    fn static_expanders_are_simple_regular_digraphs() {
        for (n, u) in [
            (3u32, 2u32),
            (4, 2),
            (8, 2),
            (16, 2),
            (64, 2),
            (64, 3),
            (30, 4),
            (9, 8),
        ] {
            let s = static_expander(n, u).unwrap();
            check_schedule(&s, None);
            assert_eq!((s.matchings.len(), s.per_rotor()), (u as usize, 1));
            let mut arcs: Vec<(usize, u32)> = s
                .matchings
                .iter()
                .flat_map(|m| m.iter().copied().enumerate())
                .collect();
            // Permutations: every ToR u arcs out and u in; no self-loop
            // (an idle uplink) and no arc twice (a wasted one).
            assert!(
                arcs.iter().all(|&(i, j)| i as u32 != j),
                "n {n} u {u}: self-loop"
            );
            arcs.sort();
            arcs.dedup();
            assert_eq!(arcs.len(), (n * u) as usize, "n {n} u {u}: parallel arcs");
            assert!(strongly_connected(&s), "n {n} u {u}");
            assert!(second_eigenvalue(&s) <= expander_bound(u), "n {n} u {u}");
        }
        // n - 1 rotors: the only simple one is the complete digraph.
        let (_, hops) = routes(&static_expander(9, 8).unwrap());
        assert!(hops.iter().flatten().all(|h| *h <= 1));
    }

    #[test]
    fn the_static_expander_is_fixed_per_seed() {
        let a = static_expander_seeded(64, 2, 5).unwrap();
        assert_eq!(a, static_expander_seeded(64, 2, 5).unwrap());
        assert_ne!(a, static_expander_seeded(64, 2, 6).unwrap());
        assert_eq!(
            static_expander(64, 2).unwrap(),
            static_expander_seeded(64, 2, EXPANDER_SEED).unwrap()
        );
    }

    #[test]
    fn the_expander_at_64_tors_and_2_uplinks_is_short_and_spectral() {
        // A 2-regular digraph reaches at most 2 + 4 + ... + 2^k ToRs in k
        // hops; 63 others need k = 6 (2 + ... + 32 = 62 falls short). A
        // random one needs about log2 64 + log2 ln 64 = 8.1 (the random
        // regular graph diameter, Bollobas and de la Vega); 10 leaves room
        // for a seed's fluctuation. The circulant it replaces had 22.
        assert_eq!(diameter_of(&circulant(64, &[1, 22])), 22);
        for seed in 1..=10 {
            let s = static_expander_seeded(64, 2, seed).unwrap();
            let dia = diameter_of(&s);
            assert!((6..=10).contains(&dia), "seed {seed}: diameter {dia}");
            // Within 1.25 / sqrt(2) = 0.884 (random 2-regular digraphs sit
            // near 1 / sqrt(2) = 0.707); the circulant had 0.999.
            let l2 = second_eigenvalue(&s);
            assert!(l2 <= 0.884, "seed {seed}: {l2}");
        }
        assert!((expander_bound(2) - 0.883_883).abs() < 1e-6);
        assert!((expander_bound(4) - 0.625).abs() < 1e-12);
        assert_eq!(expander_bound(1), 1.0);
    }

    #[test]
    fn oversized_inputs_are_refused_before_allocating() {
        let e = plan(&RotorInputs {
            tors: 100_000,
            ..paper()
        })
        .unwrap_err();
        assert_eq!(
            e.0,
            "100000 ToRs: a plan covers at most 65536 (beyond any datacenter fabric)"
        );
        let e = plan(&RotorInputs {
            slot_ns: 2_000_000_000,
            ..paper()
        })
        .unwrap_err();
        assert!(
            e.0.starts_with("slot 2000000000 ns: at most 1000000000 ns"),
            "{e}"
        );
        let e = plan(&RotorInputs {
            rate_bps: 0,
            ..paper()
        })
        .unwrap_err();
        assert!(e.0.starts_with("rate 0 bit/s: need 1 to"), "{e}");
        let e = plan(&RotorInputs {
            buffer_bytes: 2_000_000_000_000,
            ..paper()
        })
        .unwrap_err();
        assert!(
            e.0.starts_with("buffer 2000000000000 B per ToR: at most"),
            "{e}"
        );
        let e = plan(&RotorInputs {
            max_delay_ns: 100_000_000_000,
            ..paper()
        })
        .unwrap_err();
        assert!(
            e.0.starts_with("delay budget 100000000000 ns: at most"),
            "{e}"
        );
        let want = "100000 ToRs: a schedule covers at most 250 (the rotor network file \
                    numbers ToR t's hosts 10.t.h.2)";
        assert_eq!(de_bruijn(100_000, 100_000, 2).unwrap_err().0, want);
        assert_eq!(complete(100_000, 2).unwrap_err().0, want);
        assert_eq!(static_expander(100_000, 2).unwrap_err().0, want);
        assert!(de_bruijn(16, 32, 2).unwrap_err().0.contains("at most 16"));
        // The largest plan is fine: d = 65536 has D = 1, theta 0.5.
        let p = plan(&RotorInputs {
            tors: MAX_PLAN_TORS,
            buffer_bytes: MAX_BUFFER_BYTES,
            max_delay_ns: MAX_DELAY_NS,
            ..paper()
        })
        .unwrap();
        assert_eq!(p.candidates.len(), 32_768);
        assert_eq!(p.chosen.degree, 65_536);
    }

    #[test]
    fn equal_cost_next_hops_of_a_graph_worked_by_hand() {
        // Strides +1 and +3 on 6 ToRs: from x, k = a + 3b (mod 6) takes
        // a + b hops at the least. From 0: 1 and 3 in one hop; 2 = 1 + 1
        // (via 1; via 3 it is 5 more or 3 + 2 hops); 4 = 1 + 3 = 3 + 1, two
        // hops either way; 5 = 1 + 1 + 3: via 1 (then 4 left: 2 hops) or
        // via 3 (then 2 left: 2 hops), 3 hops either way.
        let mut s = circulant(6, &[1, 3]);
        let want0: Vec<Vec<u32>> = vec![vec![], vec![1], vec![1], vec![3], vec![1, 3], vec![1, 3]];
        let sets = equal_cost_next_hops(&s);
        assert_eq!(sets[0], want0);
        // The graph is a circulant: ToR 2's sets are ToR 0's shifted by 2
        // (to 0 = 2 + 4: via 3 or 5, sorted).
        assert_eq!(
            sets[2],
            vec![vec![3, 5], vec![3, 5], vec![], vec![3], vec![3], vec![5]]
        );
        assert_eq!(equal_cost_next_hops_from(&s, 0), want0);
        // An idle matching (self-loops) and a repeated one (parallel arcs)
        // add no next hop.
        s.matchings.push((0..6).collect());
        s.matchings.push(s.matchings[0].clone());
        assert_eq!(equal_cost_next_hops(&s), sets);
        // BFS's single next hop is one of them.
        let (next, _) = routes(&s);
        for (src, row) in sets.iter().enumerate() {
            for (dst, set) in row.iter().enumerate() {
                if src != dst {
                    assert!(set.contains(&next[src][dst]), "{src} -> {dst}");
                }
            }
        }
    }

    #[test]
    fn unreachable_targets_have_no_next_hop() {
        // Two 2-cycles, 0 <-> 1 and 2 <-> 3: nothing crosses.
        let s = Schedule {
            kind: ScheduleKind::Static,
            tors: 4,
            rotors: 1,
            matchings: vec![vec![1, 0, 3, 2]],
        };
        assert_eq!(
            equal_cost_next_hops_from(&s, 0),
            vec![vec![], vec![1], vec![], vec![]]
        );
        assert!(equal_cost_next_hops_from(&s, 4).is_empty());
    }

    #[test]
    fn de_bruijn_shortest_paths_are_unique_when_n_is_a_power_of_d() {
        // On d^D ToRs a path of k hops from x ends at x's last D - k
        // digits followed by the k digits shifted in: reaching y fixes
        // them, so the shortest path (the least such k) is unique.
        for (n, d) in [(8u32, 2u32), (16, 4), (64, 8), (64, 4)] {
            let sets = equal_cost_next_hops(&de_bruijn(n, d, 2).unwrap());
            for (src, row) in sets.iter().enumerate() {
                for (dst, set) in row.iter().enumerate() {
                    assert_eq!(
                        set.len(),
                        usize::from(src != dst),
                        "n {n} d {d}: {src} -> {dst}"
                    );
                }
            }
        }
    }
}

//! The statistics the project's measurements share, in one place: the
//! testbed's FCT analysis and fidelity report, the rotor timing, the
//! namespace tests' ping and delay percentiles and the forwarding harness
//! all use this quantile, so a p99 means the same number everywhere.
//!
//! The distances between two samples (the fidelity report's W1 and KS)
//! are here too, on the same empirical distributions.
//!
//! Pure: no I/O, no clock.

#![warn(missing_docs)]

/// Quantile `p` (0..=1) of ascending-sorted, finite `sorted` by linear
/// interpolation between closest ranks (Hyndman & Fan type 7, the default
/// of R and NumPy): `h = (n - 1) p`,
/// `x[floor h] + (h - floor h)(x[floor h + 1] - x[floor h])`. `None` for an
/// empty slice or a NaN `p`; `p` outside 0..=1 is clamped.
pub fn quantile_sorted(sorted: &[f64], p: f64) -> Option<f64> {
    let n = sorted.len();
    if n == 0 || p.is_nan() {
        return None;
    }
    let h = (n - 1) as f64 * p.clamp(0.0, 1.0);
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(n - 1);
    Some(sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo]))
}

/// [`quantile_sorted`] of unsorted values; non-finite values are dropped.
pub fn quantile(values: &[f64], p: f64) -> Option<f64> {
    quantile_sorted(&sorted_finite(values), p)
}

/// The finite values, ascending.
pub fn sorted_finite(values: &[f64]) -> Vec<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    v
}

/// Walks the merged distinct values of ascending-sorted, finite `a` and
/// `b`, calling `step(x, next, fa, fb)` with the two empirical CDFs
/// `F_a(x)`, `F_b(x)` at each distinct value `x` and the next distinct
/// value (`None` after the last). `false` if a side is empty.
fn walk_cdfs(a: &[f64], b: &[f64], mut step: impl FnMut(f64, Option<f64>, f64, f64)) -> bool {
    if a.is_empty() || b.is_empty() {
        return false;
    }
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let (mut i, mut j) = (0, 0);
    loop {
        let x = match (a.get(i), b.get(j)) {
            (Some(&u), Some(&v)) => u.min(v),
            (Some(&u), None) => u,
            (None, Some(&v)) => v,
            (None, None) => break,
        };
        while a.get(i).is_some_and(|&u| u <= x) {
            i += 1;
        }
        while b.get(j).is_some_and(|&v| v <= x) {
            j += 1;
        }
        let next = match (a.get(i), b.get(j)) {
            (Some(&u), Some(&v)) => Some(u.min(v)),
            (u, v) => u.or(v).copied(),
        };
        step(x, next, i as f64 / na, j as f64 / nb);
    }
    true
}

/// The 1-Wasserstein (earth mover's) distance between the empirical
/// distributions of ascending-sorted, finite `a` and `b`: the integral of
/// `|F_a - G_b|` over the line, exact (for equal sizes it is the mean
/// absolute difference of the sorted values, i.e. of the quantiles). In
/// the unit of the values. `None` if a side is empty.
pub fn wasserstein1_sorted(a: &[f64], b: &[f64]) -> Option<f64> {
    let mut w = 0.0;
    walk_cdfs(a, b, |x, next, fa, fb| {
        if let Some(next) = next {
            w += (fa - fb).abs() * (next - x);
        }
    })
    .then_some(w)
}

/// The Kolmogorov-Smirnov distance `sup |F_a - G_b|` between the empirical
/// distributions of ascending-sorted, finite `a` and `b`, in 0..=1. `None`
/// if a side is empty.
pub fn ks_distance_sorted(a: &[f64], b: &[f64]) -> Option<f64> {
    let mut d: f64 = 0.0;
    walk_cdfs(a, b, |_, _, fa, fb| d = d.max((fa - fb).abs())).then_some(d)
}

/// [`wasserstein1_sorted`] of unsorted values; non-finite values are dropped.
pub fn wasserstein1(a: &[f64], b: &[f64]) -> Option<f64> {
    wasserstein1_sorted(&sorted_finite(a), &sorted_finite(b))
}

/// [`ks_distance_sorted`] of unsorted values; non-finite values are dropped.
pub fn ks_distance(a: &[f64], b: &[f64]) -> Option<f64> {
    ks_distance_sorted(&sorted_finite(a), &sorted_finite(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_7_by_hand() {
        // 1..=10: h = 9p. p = 0.5: h = 4.5, 5 + 0.5 = 5.5; p = 0.99:
        // h = 8.91, 9 + 0.91 = 9.91; p = 0.1: h = 0.9, 1 + 0.9 = 1.9.
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        let q = |p| quantile_sorted(&v, p).unwrap();
        assert_eq!(q(0.0), 1.0);
        assert_eq!(q(0.5), 5.5);
        assert!((q(0.99) - 9.91).abs() < 1e-12);
        assert!((q(0.1) - 1.9).abs() < 1e-12);
        assert_eq!(q(1.0), 10.0);
        assert_eq!(q(7.0), 10.0, "clamped");
        assert_eq!(quantile_sorted(&[], 0.5), None);
        assert_eq!(quantile_sorted(&v, f64::NAN), None);
        assert_eq!(quantile_sorted(&[4.0], 0.99), Some(4.0));
    }

    #[test]
    fn unsorted_and_non_finite_values() {
        assert_eq!(
            quantile(&[3.0, f64::NAN, 1.0, f64::INFINITY, 2.0], 0.5),
            Some(2.0)
        );
        assert_eq!(sorted_finite(&[2.0, -1.0, f64::NAN]), vec![-1.0, 2.0]);
        assert_eq!(quantile(&[f64::NAN], 0.5), None);
    }

    #[test]
    fn wasserstein1_by_hand() {
        // {0, 1} vs {1, 2}: |F - G| is 1/2 on [0, 1) and 1/2 on [1, 2):
        // 0.5 + 0.5 = 1; equally, the sorted pairs differ by 1 and 1.
        assert_eq!(wasserstein1(&[0.0, 1.0], &[1.0, 2.0]), Some(1.0));
        assert_eq!(wasserstein1(&[1.0, 2.0], &[0.0, 1.0]), Some(1.0));
        // Unequal sizes, unsorted: {0} vs {0, 4}: F = 1 from 0, G = 1/2 on
        // [0, 4): 1/2 x 4 = 2.
        assert_eq!(wasserstein1(&[0.0], &[4.0, 0.0]), Some(2.0));
        // {1, 2, 3} vs {2, 3, 4}: |F - G| = 1/3 on [1, 4): 1.
        assert!((wasserstein1(&[1.0, 2.0, 3.0], &[2.0, 3.0, 4.0]).unwrap() - 1.0).abs() < 1e-12);
        // {0, 0, 3} vs {1}: F = 2/3 on [0, 1) (G = 0): 2/3; F = 2/3, G = 1
        // on [1, 3): 1/3 x 2 = 2/3; total 4/3.
        assert!((wasserstein1(&[0.0, 0.0, 3.0], &[1.0]).unwrap() - 4.0 / 3.0).abs() < 1e-12);
        // Identical samples, non-finite values dropped, empty side.
        assert_eq!(wasserstein1(&[5.0, 1.0], &[1.0, 5.0, f64::NAN]), Some(0.0));
        assert_eq!(wasserstein1(&[], &[1.0]), None);
        assert_eq!(wasserstein1(&[1.0], &[f64::INFINITY]), None);
    }

    #[test]
    fn ks_distance_by_hand() {
        // {1, 2, 3} vs {2, 3, 4}: after 1, 2, 3, 4: F - G = 1/3, 1/3, 1/3, 0.
        assert!(
            (ks_distance(&[1.0, 2.0, 3.0], &[2.0, 3.0, 4.0]).unwrap() - 1.0 / 3.0).abs() < 1e-12
        );
        // Disjoint supports: 1.
        assert_eq!(ks_distance(&[0.0, 1.0], &[5.0, 6.0]), Some(1.0));
        // {0, 0, 3} vs {1}: after 0: 2/3 - 0; after 1: 2/3 - 1; after 3: 0:
        // 2/3. Ties on both sides count at once: {1, 1} vs {1}: 0.
        assert!((ks_distance(&[3.0, 0.0, 0.0], &[1.0]).unwrap() - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(ks_distance(&[1.0, 1.0], &[1.0]), Some(0.0));
        assert_eq!(ks_distance(&[1.0], &[]), None);
    }
}

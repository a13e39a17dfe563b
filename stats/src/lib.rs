//! The statistics the project's measurements share, in one place: the
//! testbed's FCT analysis and fidelity report, the rotor timing, the
//! namespace tests' ping and delay percentiles and the forwarding harness
//! all use this quantile, so a p99 means the same number everywhere.
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
}

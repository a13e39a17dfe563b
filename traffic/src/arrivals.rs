//! Poisson flow arrivals.
//!
//! Gaps between arrivals are exponential with rate `lambda` flows/s. The
//! generator yields absolute offsets from the start of the run, so the
//! client sleeps until `t0 + offset`: a late wake-up delays one flow but
//! never shifts the ones after it.

use std::time::Duration;

use rand::RngExt;
use rand_pcg::Pcg64;

use crate::{seeded_rng, stream};

/// Arrival offsets (from the start of the run) of a Poisson process.
#[derive(Debug, Clone)]
pub struct PoissonArrivals {
    rng: Pcg64,
    rate_per_s: f64,
    /// Offset of the last arrival, seconds.
    now_s: f64,
}

impl PoissonArrivals {
    /// `rate_per_s` must be finite and > 0 (the client validates it).
    pub fn new(rate_per_s: f64, seed: u64) -> PoissonArrivals {
        PoissonArrivals {
            rng: seeded_rng(seed, stream::ARRIVALS),
            rate_per_s,
            now_s: 0.0,
        }
    }

    /// The mean arrival rate, flows/s.
    pub fn rate_per_s(&self) -> f64 {
        self.rate_per_s
    }

    /// Offset of the last arrival drawn, seconds (0 before the first).
    pub fn now_s(&self) -> f64 {
        self.now_s
    }

    /// Offset of the next arrival, seconds.
    pub fn next_offset_s(&mut self) -> f64 {
        // 1 - u lies in (0, 1], so the logarithm is finite.
        let u: f64 = self.rng.random();
        self.now_s += -(1.0 - u).ln() / self.rate_per_s;
        self.now_s
    }
}

impl Iterator for PoissonArrivals {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        Some(Duration::from_secs_f64(self.next_offset_s()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count_within(rate: f64, seed: u64, horizon: Duration) -> usize {
        PoissonArrivals::new(rate, seed)
            .take_while(|t| *t < horizon)
            .count()
    }

    #[test]
    fn count_matches_rate() {
        // N(T) is Poisson(lambda*T): mean and variance lambda*T.
        for (rate, secs) in [(1000.0, 100.0), (7.5, 4000.0), (250_000.0, 2.0)] {
            let expected: f64 = rate * secs;
            let n = count_within(rate, 11, Duration::from_secs_f64(secs)) as f64;
            let sd = expected.sqrt();
            assert!(
                (n - expected).abs() < 5.0 * sd,
                "rate {rate}: {n} arrivals, expected {expected} +- {sd}"
            );
        }
    }

    #[test]
    fn offsets_increase() {
        let offsets: Vec<Duration> = PoissonArrivals::new(100.0, 3).take(10_000).collect();
        assert!(offsets.windows(2).all(|w| w[0] <= w[1]));
        assert!(offsets[0] > Duration::ZERO);
    }

    #[test]
    fn seeded() {
        let a: Vec<Duration> = PoissonArrivals::new(100.0, 5).take(1000).collect();
        let b: Vec<Duration> = PoissonArrivals::new(100.0, 5).take(1000).collect();
        let c: Vec<Duration> = PoissonArrivals::new(100.0, 6).take(1000).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn gaps_are_exponential() {
        // Mean gap 1/lambda and P(gap > 1/lambda) = 1/e.
        let rate = 50.0;
        let n = 100_000;
        let mut arrivals = PoissonArrivals::new(rate, 9);
        let mut prev = 0.0;
        let (mut sum, mut long) = (0.0, 0usize);
        for _ in 0..n {
            let t = arrivals.next_offset_s();
            let gap = t - prev;
            prev = t;
            sum += gap;
            long += usize::from(gap > 1.0 / rate);
        }
        let mean = sum / n as f64;
        assert!((mean * rate - 1.0).abs() < 0.02, "mean gap {mean}");
        let frac = long as f64 / n as f64;
        assert!((frac - (-1.0f64).exp()).abs() < 0.01, "{frac}");
    }
}

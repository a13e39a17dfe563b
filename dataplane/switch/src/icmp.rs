//! ICMP errors a router sends (time exceeded, no route), built by
//! [`lcmp_wire::icmp`] under its no-panic lints, and the token bucket that
//! rate-limits them, as routers do, so a flood of expiring packets cannot
//! turn the switch into an amplifier.

pub use lcmp_wire::icmp::{build_error, IcmpError};

/// A token bucket: `rate` errors per second, bursts of `burst`.
#[derive(Clone, Debug)]
pub struct IcmpLimiter {
    rate_per_s: u64,
    burst: u64,
    /// Tokens in thousandths.
    tokens_milli: u64,
    last_ns: u64,
}

impl IcmpLimiter {
    /// A full bucket.
    pub fn new(rate_per_s: u32, burst: u32) -> Self {
        IcmpLimiter {
            rate_per_s: rate_per_s as u64,
            burst: burst as u64,
            tokens_milli: burst as u64 * 1000,
            last_ns: 0,
        }
    }

    /// Whether an error may be sent at `now_ns` (takes a token if so).
    pub fn allow(&mut self, now_ns: u64) -> bool {
        let elapsed = now_ns.saturating_sub(self.last_ns);
        self.last_ns = self.last_ns.max(now_ns);
        let refill = (elapsed as u128 * self.rate_per_s as u128 / 1_000_000) as u64;
        self.tokens_milli = self
            .tokens_milli
            .saturating_add(refill)
            .min(self.burst * 1000);
        if self.tokens_milli >= 1000 {
            self.tokens_milli -= 1000;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_allows_a_burst_then_the_rate() {
        let mut l = IcmpLimiter::new(100, 5);
        assert_eq!((0..10).filter(|_| l.allow(0)).count(), 5);
        // 10 ms at 100/s: one more token.
        assert!(l.allow(10_000_000));
        assert!(!l.allow(10_000_000));
    }
}

//! C_cong: the on-switch congestion score of an egress port, from samples of
//! its queue length.
//!
//! Three signals, each mapped onto the class scores (0 or 25..=255):
//!
//! - Q, queue level: queue bytes against `buffer * i / N`; an empty queue is 0.
//! - T, trend: a shift-EWMA of the queue growth per sampling interval,
//!   `T = T - (T >> K) + (delta >> K)`, classed against the bytes the link
//!   drains in one interval (`drain * (i + 1) / N`); T <= 0 is 0.
//! - D, persistence: a counter that rises once per sampling interval while Q
//!   is at or above the high mark and falls while Q is at or below the low
//!   mark; `D = min(counter >> 2, 255)`. It counts time, not decisions (the
//!   artifact steps it once per candidate evaluation, so its meaning depends
//!   on the flow arrival rate).
//!
//! `C_cong = min((w_ql*Q + w_tl*T + w_dp*D) >> S_cong, 255)`.
//!
//! The estimator may be sampled more often than its interval (for example on
//! every new-flow decision): such samples refresh Q only, so T and D keep
//! their time base.

use crate::levels::{ClassScores, Thresholds, DEFAULT_CLASSES};
use crate::{PortId, PortView};

/// Weights, marks and cadence of the congestion estimator. Defaults are the
/// paper's (queue-first 2/1/1, shift 2, K = 3, marks 204/102).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CongestionParams {
    /// Weight of the queue level Q (w_ql).
    pub w_queue: u32,
    /// Weight of the trend T (w_tl).
    pub w_trend: u32,
    /// Weight of the persistence D (w_dp).
    pub w_persist: u32,
    /// Right shift normalizing the weighted sum (S_cong).
    pub shift: u32,
    /// EWMA shift K of the trend (gain 1/2^K).
    pub trend_k: u32,
    /// Q at or above this raises the persistence counter.
    pub high_mark: u8,
    /// Q at or below this lowers the persistence counter.
    pub low_mark: u8,
    /// Number of classes (N).
    pub classes: u8,
    /// Time between trend/persistence updates, nanoseconds.
    pub sample_interval_ns: u64,
}

impl Default for CongestionParams {
    fn default() -> Self {
        CongestionParams {
            w_queue: 2,
            w_trend: 1,
            w_persist: 1,
            shift: 2,
            trend_k: 3,
            high_mark: 204,
            low_mark: 102,
            classes: DEFAULT_CLASSES,
            sample_interval_ns: 100_000,
        }
    }
}

impl CongestionParams {
    /// The fused congestion cost of given Q, T and D scores.
    #[inline]
    pub fn cost(&self, q: u8, t: u8, d: u8) -> u8 {
        // In u64 the sum of three u32 weights times u8 scores is below 2^42,
        // so it never wraps; a shift of 64 or more gives 0 (the sum divided
        // by 2^shift) instead of panicking or shifting by `shift % 64`.
        let s = self.w_queue as u64 * q as u64
            + self.w_trend as u64 * t as u64
            + self.w_persist as u64 * d as u64;
        s.checked_shr(self.shift).unwrap_or(0).min(255) as u8
    }
}

/// The persistence counter saturates where D does (255 << 2 | 3), so a long
/// congestion episode does not take longer than that to be forgotten.
const PERSIST_MAX: u32 = (255 << 2) | 3;

/// Congestion state of one egress port.
#[derive(Clone, Debug)]
pub struct CongestionEstimator {
    params: CongestionParams,
    scores: ClassScores,
    queue_classes: Thresholds,
    trend_classes: Thresholds,
    /// Time and queue length of the last interval sample; `None` until the
    /// first sample.
    last_tick: Option<(u64, u64)>,
    trend: i64,
    persist: u32,
    q: u8,
    t: u8,
    c_cong: u8,
}

impl CongestionEstimator {
    /// An estimator for a port draining `rate_bps` with a buffer of
    /// `buffer_bytes`. Zero rate or buffer are treated as 1 (everything is
    /// then maximally congested) rather than dividing by zero.
    pub fn new(params: &CongestionParams, rate_bps: u64, buffer_bytes: u64) -> Self {
        let scores = ClassScores::new(params.classes);
        let n = params.classes as u128;
        let buffer = buffer_bytes.max(1) as u128;
        let queue_classes = Thresholds::from_fn(&scores, |i| (buffer * i as u128 / n) as u64);
        let drain = (rate_bps as u128 * params.sample_interval_ns as u128 / 8_000_000_000).max(1);
        let trend_classes =
            Thresholds::from_fn(&scores, |i| (drain * (i as u128 + 1) / n).max(1) as u64);
        CongestionEstimator {
            params: *params,
            scores,
            queue_classes,
            trend_classes,
            last_tick: None,
            trend: 0,
            persist: 0,
            q: 0,
            t: 0,
            c_cong: 0,
        }
    }

    /// Feeds one sample: the port's queue holds `queue_bytes` at `now_ns`.
    pub fn sample(&mut self, now_ns: u64, queue_bytes: u64) {
        self.q = self.queue_level(queue_bytes);
        let interval = self.params.sample_interval_ns.max(1);
        match self.last_tick {
            None => self.last_tick = Some((now_ns, queue_bytes)),
            Some((then, before)) if now_ns >= then.saturating_add(interval) => {
                let elapsed = (now_ns - then) as i128;
                let delta = queue_bytes as i128 - before as i128;
                // Growth per nominal interval, whatever the actual spacing.
                let delta = (delta * interval as i128 / elapsed) as i64;
                // An i64 shifted by 63 is already 0 or -1, the floor of
                // x / 2^k for any larger k; 64 and up would panic.
                let k = self.params.trend_k.min(63);
                self.trend = self.trend - (self.trend >> k) + (delta >> k);
                self.t = self.trend_level();
                if self.q >= self.params.high_mark {
                    self.persist = (self.persist + 1).min(PERSIST_MAX);
                } else if self.q <= self.params.low_mark {
                    self.persist = self.persist.saturating_sub(1);
                }
                self.last_tick = Some((now_ns, queue_bytes));
            }
            Some(_) => {}
        }
        self.c_cong = self.params.cost(self.q, self.t, self.d());
    }

    fn queue_level(&self, bytes: u64) -> u8 {
        if bytes == 0 {
            return 0;
        }
        self.queue_classes
            .class_of(bytes)
            .map_or(0, |i| self.scores.score(i))
    }

    fn trend_level(&self) -> u8 {
        if self.trend <= 0 {
            return 0;
        }
        self.trend_classes
            .class_of(self.trend as u64)
            .map_or(0, |i| self.scores.score(i))
    }

    /// The congestion cost C_cong, 0..=255, as of the last sample.
    #[inline]
    pub fn c_cong(&self) -> u8 {
        self.c_cong
    }

    /// Queue level Q of the last sample.
    pub fn q(&self) -> u8 {
        self.q
    }

    /// Trend level T.
    pub fn t(&self) -> u8 {
        self.t
    }

    /// Persistence D.
    pub fn d(&self) -> u8 {
        (self.persist >> 2).min(255) as u8
    }

    /// The raw EWMA trend, bytes of growth per interval.
    pub fn trend_bytes(&self) -> i64 {
        self.trend
    }
}

/// Link state and congestion of every port of a switch: the [`PortView`]
/// the decision reads. The costs are kept in a dense array so a decision
/// touches one cache line however many estimators there are.
#[derive(Clone, Debug)]
pub struct PortStates {
    estimators: Vec<CongestionEstimator>,
    c_cong: Vec<u8>,
    up: Vec<bool>,
}

impl PortStates {
    /// Ports `0..links.len()`, each `(rate_bps, buffer_bytes)`, all up.
    pub fn new(params: &CongestionParams, links: &[(u64, u64)]) -> Self {
        assert!(links.len() <= 256, "a switch has at most 256 ports");
        PortStates {
            estimators: links
                .iter()
                .map(|&(rate, buffer)| CongestionEstimator::new(params, rate, buffer))
                .collect(),
            c_cong: vec![0; links.len()],
            up: vec![true; links.len()],
        }
    }

    /// Number of ports.
    pub fn len(&self) -> usize {
        self.up.len()
    }

    /// True when there are no ports.
    pub fn is_empty(&self) -> bool {
        self.up.is_empty()
    }

    /// Restarts a port's estimator for a link of `rate_bps` with a buffer of
    /// `buffer_bytes` (the link's emulation changed).
    pub fn set_link(
        &mut self,
        params: &CongestionParams,
        port: PortId,
        rate_bps: u64,
        buffer_bytes: u64,
    ) {
        self.estimators[port as usize] = CongestionEstimator::new(params, rate_bps, buffer_bytes);
        self.c_cong[port as usize] = 0;
    }

    /// Marks a port's link up or down.
    pub fn set_up(&mut self, port: PortId, up: bool) {
        self.up[port as usize] = up;
    }

    /// Feeds a queue sample of one port.
    pub fn sample(&mut self, port: PortId, now_ns: u64, queue_bytes: u64) {
        let e = &mut self.estimators[port as usize];
        e.sample(now_ns, queue_bytes);
        self.c_cong[port as usize] = e.c_cong();
    }

    /// The estimator of one port.
    pub fn estimator(&self, port: PortId) -> &CongestionEstimator {
        &self.estimators[port as usize]
    }
}

impl PortView for PortStates {
    #[inline]
    fn is_up(&self, port: PortId) -> bool {
        self.up.get(port as usize).copied().unwrap_or(false)
    }

    #[inline]
    fn c_cong(&self, port: PortId) -> u8 {
        self.c_cong.get(port as usize).copied().unwrap_or(255)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1_000;

    /// 1 Gbit/s drains 12,500 bytes per 100 us; buffer 100,000 bytes.
    fn estimator() -> CongestionEstimator {
        CongestionEstimator::new(&CongestionParams::default(), 1_000_000_000, 100_000)
    }

    #[test]
    fn queue_levels_hand_computed() {
        let mut e = estimator();
        let cases = [
            (0, 0),
            (1, 25),
            (9_999, 25),
            (10_000, 51),
            (35_000, 102),
            (45_000, 127),
            (89_999, 229),
            (90_000, 255),
            (10_000_000, 255),
        ];
        for (bytes, q) in cases {
            e.sample(0, bytes);
            assert_eq!(e.q(), q, "{bytes} bytes");
        }
    }

    #[test]
    fn trend_is_shift_ewma_normalized_by_interval_and_rate() {
        let mut e = estimator();
        e.sample(0, 0);
        // Queue grows 12,500 bytes per 100 us (the full drain rate): delta =
        // 12500, T = 0 - 0 + (12500 >> 3) = 1562 after one interval.
        e.sample(100 * US, 12_500);
        assert_eq!(e.trend_bytes(), 1562);
        // 1562 of 12500 per interval: class 0 (>= 1250) -> 25.
        assert_eq!(e.t(), 25);
        // Next: T = 1562 - 195 + 1562 = 2929 -> class 1 (>= 2500) -> 51.
        e.sample(200 * US, 25_000);
        assert_eq!(e.trend_bytes(), 2929);
        assert_eq!(e.t(), 51);
        // A sample 200 us later growing 25,000 bytes counts as 12,500 per
        // interval: T = 2929 - 366 + 1562 = 4125.
        e.sample(400 * US, 50_000);
        assert_eq!(e.trend_bytes(), 4125);
    }

    #[test]
    fn samples_inside_an_interval_refresh_only_the_queue_level() {
        let mut e = estimator();
        e.sample(0, 0);
        e.sample(50 * US, 95_000);
        assert_eq!(e.q(), 255);
        assert_eq!(e.trend_bytes(), 0);
        assert_eq!(e.d(), 0);
        // Q 255 (w 2) alone: 510 >> 2 = 127.
        assert_eq!(e.c_cong(), 127);
    }

    #[test]
    fn shrinking_queue_has_zero_trend_level() {
        let mut e = estimator();
        e.sample(0, 90_000);
        e.sample(100 * US, 10_000);
        assert!(e.trend_bytes() < 0);
        assert_eq!(e.t(), 0);
    }

    #[test]
    fn persistence_counts_intervals_above_the_high_mark() {
        let mut e = estimator();
        e.sample(0, 95_000);
        for i in 1..=8 {
            e.sample(i * 100 * US, 95_000);
        }
        // 8 intervals at Q=255 -> counter 8 -> D = 2.
        assert_eq!(e.d(), 2);
        // Between the marks (Q = 153): held.
        e.sample(900 * US, 55_000);
        assert_eq!(e.d(), 2);
        // At or below the low mark: falls one per interval.
        for i in 10..=13 {
            e.sample(i * 100 * US, 0);
        }
        assert_eq!(e.d(), 1);
        for i in 14..=40 {
            e.sample(i * 100 * US, 0);
        }
        assert_eq!(e.d(), 0);
    }

    #[test]
    fn persistence_saturates() {
        let mut e = estimator();
        for i in 0..3000 {
            e.sample(i * 100 * US, 99_000);
        }
        assert_eq!(e.d(), 255);
        // Q 255, T 0 (flat), D 255: (510 + 0 + 255) >> 2 = 191.
        assert_eq!(e.c_cong(), 191);
    }

    #[test]
    fn cost_formula_hand_computed() {
        let p = CongestionParams::default();
        assert_eq!(p.cost(0, 0, 0), 0);
        assert_eq!(p.cost(255, 255, 255), 255);
        assert_eq!(p.cost(102, 51, 25), ((204 + 51 + 25) >> 2) as u8);
    }

    /// Weights and shifts far beyond the defaults neither wrap nor panic.
    #[test]
    fn cost_never_wraps() {
        // 102 * 2^31 = 51 * 2^32: 0 in u32, and >> 31 it is 102.
        let p = CongestionParams {
            w_queue: 1 << 31,
            shift: 31,
            ..Default::default()
        };
        assert_eq!(p.cost(102, 0, 0), 102);
        // Every weight u32::MAX, every score 255: 3 * 255 * (2^32 - 1) =
        // 3,285,649,980,675, between 2^41 and 2^42.
        let max = CongestionParams {
            w_queue: u32::MAX,
            w_trend: u32::MAX,
            w_persist: u32::MAX,
            shift: 0,
            ..Default::default()
        };
        assert_eq!(max.cost(255, 255, 255), 255);
        let shifted = |shift| CongestionParams { shift, ..max }.cost(255, 255, 255);
        assert_eq!(shifted(41), 1);
        assert_eq!(shifted(42), 0);
        // Not the unshifted sum (64 % 64 = 0), which would be 255.
        assert_eq!(shifted(64), 0);
        assert_eq!(shifted(u32::MAX), 0);
    }

    /// A trend gain of 1/2^64 or less: each step adds the growth divided by
    /// 2^k, rounded down: 0 for growth 50,000, -1 for growth -50,000.
    #[test]
    fn huge_trend_k_keeps_the_trend_still() {
        let params = CongestionParams {
            trend_k: 64,
            ..Default::default()
        };
        let mut e = CongestionEstimator::new(&params, 1_000_000_000, 100_000);
        e.sample(0, 0);
        e.sample(100 * US, 50_000);
        assert_eq!(e.trend_bytes(), 0);
        e.sample(200 * US, 0);
        assert_eq!(e.trend_bytes(), -1);
        assert_eq!(e.t(), 0);
    }

    #[test]
    fn clock_going_backwards_is_harmless() {
        let mut e = estimator();
        e.sample(1_000_000, 10);
        e.sample(0, 20_000);
        assert_eq!(e.q(), 76);
        assert_eq!(e.trend_bytes(), 0);
    }

    #[test]
    fn port_states_track_liveness_and_cost() {
        let p = CongestionParams::default();
        let mut ports = PortStates::new(&p, &[(1_000_000_000, 100_000); 3]);
        ports.sample(1, 0, 95_000);
        assert_eq!(ports.c_cong(1), 127);
        assert_eq!(ports.c_cong(0), 0);
        ports.set_up(2, false);
        assert!(!ports.is_up(2));
        assert!(ports.is_up(0));
        // Ports that do not exist are down and fully congested.
        assert!(!ports.is_up(7));
        assert_eq!(ports.c_cong(7), 255);
    }
}

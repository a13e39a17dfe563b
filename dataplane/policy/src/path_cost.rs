//! C_path: the precomputed quality of a path (delay and capacity), computed by
//! the control plane once per route, never per packet.
//!
//! ```text
//! pathScore = w_dl * delayScore + w_lc * capScore
//! C_path    = min(pathScore >> S_path, 255)
//! ```
//!
//! `delayScore` maps the path's one-way delay linearly onto 0..=255, saturating
//! at a power-of-two cap so the mapping is a multiply and a shift. The LCMP
//! artifact works in whole milliseconds with a fixed 32 ms cap, which makes
//! every sub-millisecond path 0 and every path above 32 ms equal; here delays
//! are in microseconds and the cap defaults to the next power of two at or
//! above the largest candidate delay of the topology.
//!
//! `capScore` puts the bottleneck capacity into N classes of the maximum
//! capacity: class i is reached at `maxCap * (i + 1) / N` and scores
//! `255 - 255 * (i + 1) / N`; a capacity below class 0 scores 255.

use crate::levels::{ClassScores, Thresholds, DEFAULT_CLASSES};

/// Largest S_path. The weighted sum is at most 2 * (2^32 - 1) * 255 < 2^41
/// (u32 weights times u8 scores), so any larger shift makes every C_path 0
/// whatever the weights, and a shift of 64 or more is not defined on the
/// u64 sum (it panicked in debug builds and wrapped to the unshifted sum in
/// release ones).
pub const MAX_PATH_SHIFT: u32 = 40;

/// Weights and scales of C_path. Defaults are the paper's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathCostParams {
    /// Weight of the delay score (w_dl).
    pub w_delay: u32,
    /// Weight of the capacity score (w_lc).
    pub w_capacity: u32,
    /// Right shift normalizing the weighted sum (S_path), at most
    /// [`MAX_PATH_SHIFT`].
    pub shift: u32,
    /// Number of capacity classes (N).
    pub classes: u8,
    /// Delay at which the delay score saturates, in microseconds. Rounded up
    /// to a power of two. `None`: derived from the topology (see
    /// [`PathCostModel::for_paths`]).
    pub max_delay_us: Option<u64>,
    /// Capacity of the top class, in bit/s. `None`: the largest capacity of
    /// the topology.
    pub max_capacity_bps: Option<u64>,
}

impl Default for PathCostParams {
    fn default() -> Self {
        PathCostParams {
            w_delay: 3,
            w_capacity: 1,
            shift: 2,
            classes: DEFAULT_CLASSES,
            max_delay_us: None,
            max_capacity_bps: None,
        }
    }
}

/// Errors in C_path parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathCostError {
    /// The class count is outside 1..=32.
    BadClassCount(u8),
    /// A zero maximum capacity or delay cap was given or derived.
    ZeroScale(&'static str),
    /// The shift is above [`MAX_PATH_SHIFT`].
    BadShift(u32),
}

impl std::fmt::Display for PathCostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PathCostError::BadClassCount(n) => {
                write!(f, "path cost classes must be 1..=32, got {n}")
            }
            PathCostError::ZeroScale(what) => write!(f, "path cost {what} must be above zero"),
            PathCostError::BadShift(s) => {
                write!(f, "path cost shift must be 0..={MAX_PATH_SHIFT}, got {s}")
            }
        }
    }
}

impl std::error::Error for PathCostError {}

/// A C_path calculator with its scales fixed.
#[derive(Clone, Copy, Debug)]
pub struct PathCostModel {
    params: PathCostParams,
    delay_cap_shift: u32,
    max_capacity_bps: u64,
    capacity_classes: Thresholds,
    scores: ClassScores,
}

impl PathCostModel {
    /// A model with explicit scales: the delay cap `max_delay_us` (rounded
    /// up to a power of two) and the top capacity class `max_capacity_bps`.
    pub fn new(
        params: PathCostParams,
        max_delay_us: u64,
        max_capacity_bps: u64,
    ) -> Result<Self, PathCostError> {
        if params.classes == 0 || params.classes as usize > crate::levels::MAX_CLASSES {
            return Err(PathCostError::BadClassCount(params.classes));
        }
        if params.shift > MAX_PATH_SHIFT {
            return Err(PathCostError::BadShift(params.shift));
        }
        if max_delay_us == 0 {
            return Err(PathCostError::ZeroScale("delay cap"));
        }
        if max_capacity_bps == 0 {
            return Err(PathCostError::ZeroScale("maximum capacity"));
        }
        let delay_cap = max_delay_us.checked_next_power_of_two().unwrap_or(1 << 63);
        let scores = ClassScores::new(params.classes);
        let n = params.classes as u64;
        let capacity_classes = Thresholds::from_fn(&scores, |i| {
            (max_capacity_bps as u128 * (i as u128 + 1) / n as u128) as u64
        });
        Ok(PathCostModel {
            params,
            delay_cap_shift: delay_cap.trailing_zeros(),
            max_capacity_bps,
            capacity_classes,
            scores,
        })
    }

    /// A model whose scales come from `params` where set, else from the
    /// candidate paths `(delay_us, bottleneck_bps)` of the topology: the delay
    /// cap is the next power of two at or above the largest delay, the top
    /// capacity class the largest bottleneck.
    pub fn for_paths(
        params: PathCostParams,
        paths: impl IntoIterator<Item = (u64, u64)>,
    ) -> Result<Self, PathCostError> {
        let (mut max_delay, mut max_cap) = (0u64, 0u64);
        for (d, c) in paths {
            max_delay = max_delay.max(d);
            max_cap = max_cap.max(c);
        }
        let max_delay = params.max_delay_us.unwrap_or(max_delay.max(1));
        let max_cap = params.max_capacity_bps.unwrap_or(max_cap);
        Self::new(params, max_delay, max_cap)
    }

    /// The parameters in use.
    pub fn params(&self) -> &PathCostParams {
        &self.params
    }

    /// The delay cap in microseconds (a power of two).
    pub fn delay_cap_us(&self) -> u64 {
        1 << self.delay_cap_shift
    }

    /// The capacity of the top class, bit/s.
    pub fn max_capacity_bps(&self) -> u64 {
        self.max_capacity_bps
    }

    /// Delay score 0..=255 of a one-way delay in microseconds.
    pub fn delay_score(&self, delay_us: u64) -> u8 {
        if delay_us >= self.delay_cap_us() {
            return 255;
        }
        // In u128: delay_us is below the cap, which may be 2^63.
        ((delay_us as u128 * 255) >> self.delay_cap_shift) as u8
    }

    /// Capacity score 0..=255 of a bottleneck capacity in bit/s (0 is best).
    pub fn capacity_score(&self, capacity_bps: u64) -> u8 {
        match self.capacity_classes.class_of(capacity_bps) {
            Some(i) => 255 - self.scores.score(i),
            None => 255,
        }
    }

    /// C_path of a path with the given one-way delay and bottleneck capacity.
    pub fn c_path(&self, delay_us: u64, capacity_bps: u64) -> u8 {
        let p = &self.params;
        // Below 2^41 for any u32 weights; `new` bounds the shift.
        let score = p.w_delay as u64 * self.delay_score(delay_us) as u64
            + p.w_capacity as u64 * self.capacity_score(capacity_bps) as u64;
        (score >> p.shift).min(255) as u8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: u64 = 1_000_000_000;

    fn model(max_delay_us: u64, max_cap: u64) -> PathCostModel {
        PathCostModel::new(PathCostParams::default(), max_delay_us, max_cap).unwrap()
    }

    #[test]
    fn capacity_table_with_400g_cap() {
        let m = model(1 << 15, 400 * G);
        let table: Vec<(u64, u8)> = [400, 200, 100, 40, 25]
            .iter()
            .map(|&g| (g, m.capacity_score(g * G)))
            .collect();
        assert_eq!(
            table,
            [(400, 0), (200, 128), (100, 204), (40, 230), (25, 255)]
        );
    }

    #[test]
    fn delay_cap_rounds_up_to_power_of_two() {
        assert_eq!(model(500_000, G).delay_cap_us(), 524_288);
        assert_eq!(model(32_768, G).delay_cap_us(), 32_768);
        assert_eq!(model(1, G).delay_cap_us(), 1);
    }

    #[test]
    fn delay_score_is_linear_and_saturates() {
        let m = model(524_288, G);
        // 50 ms of a 524.288 ms cap: 50000 * 255 / 2^19 = 24.3 -> 24.
        assert_eq!(m.delay_score(50_000), 24);
        assert_eq!(m.delay_score(500_000), 243);
        assert_eq!(m.delay_score(0), 0);
        assert_eq!(m.delay_score(524_287), 254);
        assert_eq!(m.delay_score(524_288), 255);
        assert_eq!(m.delay_score(u64::MAX), 255);
    }

    #[test]
    fn sub_millisecond_delays_are_told_apart() {
        // The artifact's millisecond integers make these both 0.
        let m = model(1024, G);
        assert!(m.delay_score(100) < m.delay_score(900));
    }

    #[test]
    fn c_path_hand_computed() {
        // 8-DC, DC1->DC8 via DC2: 50 ms, 200G; cap 2^19 us, max 200G.
        // delay 24, cap class 9 -> 0: (3*24 + 0) >> 2 = 18.
        let m = model(500_000, 200 * G);
        assert_eq!(m.c_path(50_000, 200 * G), 18);
        // via DC6: 10 ms, 25G: delay 4; 25G reaches class 0 (20G) -> 230:
        // (12 + 230) >> 2 = 60.
        assert_eq!(m.c_path(10_000, 25 * G), 60);
        // via DC3: 500 ms, 200G: (3*243 + 0) >> 2 = 182.
        assert_eq!(m.c_path(500_000, 200 * G), 182);
    }

    #[test]
    fn c_path_saturates_at_255() {
        let p = PathCostParams {
            w_delay: 8,
            w_capacity: 8,
            shift: 0,
            ..Default::default()
        };
        let m = PathCostModel::new(p, 1000, G).unwrap();
        assert_eq!(m.c_path(10_000, 1), 255);
    }

    /// `--path-shift 64` once gave the unshifted sum (`>> 64` is `>> 0` in
    /// release builds): the 500 ms path's 3*243 + 0 = 729 came out as
    /// C_path 255, where any shift above 9 gives 0. Shifts above 40 are
    /// refused: the sum is below 2^41.
    #[test]
    fn shifts_beyond_the_sum_are_refused() {
        let with = |w: u32, shift| PathCostParams {
            w_delay: w,
            w_capacity: w,
            shift,
            ..Default::default()
        };
        for shift in [41, 63, 64, 65, u32::MAX] {
            assert_eq!(
                PathCostModel::new(with(3, shift), 500_000, 200 * G).unwrap_err(),
                PathCostError::BadShift(shift)
            );
        }
        assert_eq!(
            PathCostError::BadShift(64).to_string(),
            "path cost shift must be 0..=40, got 64"
        );
        // At 40 the shift still tells paths apart with the largest weights:
        // delay and capacity scores 255 (delay at the cap, capacity below
        // class 0): 2 * 255 * (2^32 - 1) = 2,190,433,320,450 >> 40 = 1;
        // 500 ms at a 2^19 us cap, 200G at the top: 243 * (2^32 - 1) >> 40 = 0.
        let m = PathCostModel::new(with(u32::MAX, 40), 500_000, 200 * G).unwrap();
        assert_eq!(m.c_path(1 << 19, G), 1);
        assert_eq!(m.c_path(500_000, 200 * G), 0);
        // And at 32: 243 * (2^32 - 1) >> 32 = 242.
        let m = PathCostModel::new(with(u32::MAX, 32), 500_000, 200 * G).unwrap();
        assert_eq!(m.c_path(500_000, 200 * G), 242);
    }

    /// The largest delay cap, 2^63 us: 2^62 us is half of it, score
    /// 255 * 2^62 >> 63 = 127 (in u64, 255 * 2^62 wrapped to 3 * 2^62,
    /// score 1).
    #[test]
    fn delay_score_does_not_wrap_at_the_largest_cap() {
        let m = model(u64::MAX, G);
        assert_eq!(m.delay_cap_us(), 1 << 63);
        assert_eq!(m.delay_score(1 << 62), 127);
        assert_eq!(m.delay_score((1 << 63) - 1), 254);
    }

    #[test]
    fn scales_come_from_the_topology_unless_configured() {
        let paths = [(50_000, 200 * G), (500_000, 25 * G)];
        let m = PathCostModel::for_paths(PathCostParams::default(), paths).unwrap();
        assert_eq!(m.delay_cap_us(), 524_288);
        assert_eq!(m.max_capacity_bps(), 200 * G);
        let p = PathCostParams {
            max_delay_us: Some(32_000),
            max_capacity_bps: Some(400 * G),
            ..Default::default()
        };
        let m = PathCostModel::for_paths(p, paths).unwrap();
        assert_eq!(m.delay_cap_us(), 32_768);
        assert_eq!(m.max_capacity_bps(), 400 * G);
    }

    #[test]
    fn bad_parameters_are_errors() {
        let p = PathCostParams {
            classes: 0,
            ..Default::default()
        };
        assert!(PathCostModel::new(p, 1, 1).is_err());
        assert!(PathCostModel::new(PathCostParams::default(), 0, 1).is_err());
        assert!(PathCostModel::for_paths(PathCostParams::default(), []).is_err());
    }
}

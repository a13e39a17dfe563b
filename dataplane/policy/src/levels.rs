//! The class table every LCMP score uses: N classes, class i scoring
//! `255 * (i + 1) / N` (N = 10: 25, 51, 76, ..., 255).
//!
//! Values are classified against per-use thresholds precomputed once, so the
//! fast path only compares integers.

/// Most classes a table may have. Tables are fixed arrays of this size so no
/// score computation allocates.
pub const MAX_CLASSES: usize = 32;

/// Default number of classes (the paper's N).
pub const DEFAULT_CLASSES: u8 = 10;

/// Class scores `255 * (i + 1) / n` for `i` in `0..n`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClassScores {
    n: u8,
    scores: [u8; MAX_CLASSES],
}

impl ClassScores {
    /// A table with `n` classes. Panics if `n` is 0 or above [`MAX_CLASSES`]:
    /// that is a configuration error caught when the engine is built.
    pub fn new(n: u8) -> Self {
        assert!(
            (1..=MAX_CLASSES).contains(&(n as usize)),
            "class count must be 1..={MAX_CLASSES}, got {n}"
        );
        let mut scores = [0u8; MAX_CLASSES];
        for (i, s) in scores.iter_mut().enumerate().take(n as usize) {
            *s = (255 * (i + 1) / n as usize) as u8;
        }
        ClassScores { n, scores }
    }

    /// Number of classes.
    pub fn len(&self) -> usize {
        self.n as usize
    }

    /// Always false: a table has at least one class.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Score of class `i` (`i < len()`).
    pub fn score(&self, i: usize) -> u8 {
        self.scores[i]
    }
}

impl Default for ClassScores {
    fn default() -> Self {
        ClassScores::new(DEFAULT_CLASSES)
    }
}

/// Thresholds of a classifier: class `i` is reached when the value is at or
/// above `thresholds[i]`; the value's class is the highest one reached.
#[derive(Clone, Copy, Debug)]
pub struct Thresholds {
    n: u8,
    at: [u64; MAX_CLASSES],
}

impl Thresholds {
    /// Thresholds `f(i)` for `i` in `0..classes.len()`. `f` must be
    /// non-decreasing in `i`.
    pub fn from_fn(classes: &ClassScores, f: impl Fn(u64) -> u64) -> Self {
        let mut at = [u64::MAX; MAX_CLASSES];
        for (i, t) in at.iter_mut().enumerate().take(classes.len()) {
            *t = f(i as u64);
        }
        Thresholds {
            n: classes.len() as u8,
            at,
        }
    }

    /// The highest class whose threshold `value` reaches, if any.
    #[inline]
    pub fn class_of(&self, value: u64) -> Option<usize> {
        // Count thresholds reached; they are sorted, so that count minus one
        // is the highest class reached. A branch-free count over at most 32
        // entries beats a search for tables this small.
        let reached = self.at[..self.n as usize]
            .iter()
            .filter(|&&t| value >= t)
            .count();
        reached.checked_sub(1)
    }

    /// Threshold of class `i`.
    pub fn threshold(&self, i: usize) -> u64 {
        self.at[i]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ten_class_scores_match_the_paper() {
        let c = ClassScores::default();
        let got: Vec<u8> = (0..c.len()).map(|i| c.score(i)).collect();
        assert_eq!(got, [25, 51, 76, 102, 127, 153, 178, 204, 229, 255]);
    }

    #[test]
    fn class_of_picks_highest_reached() {
        let c = ClassScores::default();
        let t = Thresholds::from_fn(&c, |i| (i + 1) * 10);
        assert_eq!(t.class_of(0), None);
        assert_eq!(t.class_of(9), None);
        assert_eq!(t.class_of(10), Some(0));
        assert_eq!(t.class_of(55), Some(4));
        assert_eq!(t.class_of(100), Some(9));
        assert_eq!(t.class_of(u64::MAX), Some(9));
    }
}

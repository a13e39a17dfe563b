//! How late this machine lets a running thread see the clock: the floor
//! under any slot-boundary error a userspace switch can reach here.
//!
//! A thread reads the clock in a tight loop on each CPU in turn; every gap between
//! two reads is time the thread did not run (interrupts, the hypervisor,
//! other tasks). An event due at a uniformly random instant that falls in
//! a gap of length g is late by up to g, so the share of instants later
//! than X is the sum over gaps of max(0, g - X) divided by the time
//! spanned. Where that share is 1 % or more, no thread on the machine can
//! meet X at the p99, however it polls or spins: on the two-core VM this
//! project is developed on it is about 1.7 % for X = 10 us with nothing
//! else running.

use std::time::{Duration, Instant};

use serde::Serialize;

/// What [`measure`] found.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ClockFloor {
    /// How long the thread read the clock on each CPU, seconds.
    pub seconds: f64,
    /// CPUs measured (one after the other, pinned where allowed).
    pub threads: usize,
    /// The threshold, ns.
    pub threshold_ns: u64,
    /// Share of instants later than the threshold, on the worst CPU (0 to 1).
    pub late_share: f64,
    /// The longest gap any thread saw, ns.
    pub max_gap_ns: u64,
}

/// Accumulates the gaps one thread sees.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Gaps {
    /// Time spanned, ns.
    pub spanned_ns: u64,
    /// Sum over gaps of max(0, gap - threshold), ns.
    pub late_ns: u64,
    /// Longest gap, ns.
    pub max_gap_ns: u64,
}

impl Gaps {
    /// Adds one gap between two clock reads.
    pub fn add(&mut self, gap_ns: u64, threshold_ns: u64) {
        self.spanned_ns += gap_ns;
        self.late_ns += gap_ns.saturating_sub(threshold_ns);
        self.max_gap_ns = self.max_gap_ns.max(gap_ns);
    }

    /// Share of instants later than the threshold.
    pub fn late_share(&self) -> f64 {
        if self.spanned_ns == 0 {
            return 0.0;
        }
        self.late_ns as f64 / self.spanned_ns as f64
    }
}

/// Pins the calling thread to `cpu`; false where not allowed.
fn pin(cpu: usize) -> bool {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes a
    // bit inside it (cpu is checked against its size), and
    // sched_setaffinity reads it through a pointer valid for its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
            return false;
        }
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// A thread on each CPU in turn reads the clock for `duration` (one CPU
/// at a time, so that the machine's other tasks have the rest and the
/// measurement sees what it imposes on one busy thread, not on a full
/// machine); the share of instants later than `threshold_ns` on the worst
/// CPU.
pub fn measure(duration: Duration, threshold_ns: u64) -> ClockFloor {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let gaps: Vec<Gaps> = (0..threads)
        .map(|cpu| {
            std::thread::spawn(move || {
                pin(cpu);
                let mut g = Gaps::default();
                let start = Instant::now();
                let mut last = start;
                while last - start < duration {
                    let now = Instant::now();
                    g.add((now - last).as_nanos() as u64, threshold_ns);
                    last = now;
                }
                g
            })
            .join()
            .unwrap_or_default()
        })
        .collect();
    ClockFloor {
        seconds: duration.as_secs_f64(),
        threads,
        threshold_ns,
        late_share: gaps.iter().map(Gaps::late_share).fold(0.0, f64::max),
        max_gap_ns: gaps.iter().map(|g| g.max_gap_ns).max().unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn late_share_is_the_time_past_the_threshold_inside_gaps() {
        let mut g = Gaps::default();
        // 1 ms spanned: 750 reads 1 us apart, then gaps of 50 us and 200 us.
        for _ in 0..750 {
            g.add(1_000, 10_000);
        }
        g.add(50_000, 10_000);
        g.add(200_000, 10_000);
        assert_eq!(g.spanned_ns, 1_000_000);
        // (50 - 10) + (200 - 10) = 230 us of 1000 us.
        assert_eq!(g.late_ns, 230_000);
        assert!((g.late_share() - 0.23).abs() < 1e-12);
        assert_eq!(g.max_gap_ns, 200_000);
        assert_eq!(Gaps::default().late_share(), 0.0);
    }

    #[test]
    fn a_short_measurement_reports_every_cpu() {
        let f = measure(Duration::from_millis(20), 10_000);
        assert!(f.threads >= 1);
        assert!((0.0..=1.0).contains(&f.late_share), "{f:?}");
        assert_eq!(f.threshold_ns, 10_000);
    }
}

//! DCQCN's reaction point (the sender's rate control) as the LCMP paper's
//! simulator runs it: the "Mellanox" DCQCN of HPCC's ns-3 `rdma-hw.cc`
//! (`/work/shared/docs/dcqcn.md`, "Sender").
//!
//! Per queue pair: current rate Rc, target rate Rt, alpha, two "CNP seen"
//! flags (alpha timer, decrease timer), a first-CNP flag and the increase
//! stage. A congestion notification (an ACK's ECN echo or a CNP) sets both
//! flags; the first one also sets alpha = 1, clears the alpha flag again,
//! Rc = Rt = rate_on_first_cnp * Rc, and starts the alpha timer (every
//! 55 us) and the decrease timer (every 4 us, first after 4 us + 1 ns, so
//! that it follows an alpha update at the same microsecond). The rate never
//! changes at the notification itself.
//!
//! - alpha timer: alpha = (1 - g) alpha (+ g if the flag was set); clear it.
//! - decrease timer: if its flag is set: Rt = Rc unless the stage is 0
//!   (target clamping off), Rc = max(min rate, Rc (1 - alpha / 2)),
//!   stage = 0, clear the flag, restart the increase timer (900 us).
//! - increase timer: stage < fast_recovery_times: Rc = (Rc + Rt) / 2; stage
//!   == fast_recovery_times: Rt += RATE_AI; above: Rt += RATE_HAI; Rt capped
//!   at the line rate, then Rc = (Rc + Rt) / 2; stage += 1.
//!
//! Timers are evaluated lazily: [`Dcqcn::advance`] runs every expiry in
//! (last, now] in time order, so a queue pair costs nothing between its
//! events. Expiries at the same nanosecond run in the simulator's order:
//! the one scheduled earlier first, i.e. the timer with the longer period
//! (an increase before a decrease at the same instant). A run of expiries
//! that cannot change anything (decrease with its flag clear; increase at
//! the line rate in the hyper stage) is skipped in O(1); alpha decays are
//! applied one multiplication per period, as the simulator rounds.

use lcmp_topology::Scaling;

/// DCQCN's parameters; rates in bit/s, intervals in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DcqcnParams {
    /// The host NIC's rate: the start rate and the cap of Rt.
    pub line_rate: f64,
    pub rate_ai: f64,
    pub rate_hai: f64,
    pub min_rate: f64,
    pub g: f64,
    pub alpha_interval_ns: u64,
    pub decrease_interval_ns: u64,
    pub increase_interval_ns: u64,
    pub fast_recovery_times: u32,
    pub rate_on_first_cnp: f64,
    pub clamp_target: bool,
}

impl Default for DcqcnParams {
    /// The simulator's values (dcqcn.md "Parameters").
    fn default() -> Self {
        DcqcnParams {
            line_rate: 100e9,
            rate_ai: 50e6,
            rate_hai: 100e6,
            min_rate: 100e6,
            g: 1.0 / 256.0,
            alpha_interval_ns: 55_000,
            decrease_interval_ns: 4_000,
            increase_interval_ns: 900_000,
            fast_recovery_times: 1,
            rate_on_first_cnp: 1.0,
            clamp_target: false,
        }
    }
}

impl DcqcnParams {
    /// The parameters as an emulation scaled by `s` runs them: every rate
    /// as the emulated links' ([`Scaling::rate_bps`]), every interval
    /// stretched by its time dilation (never below 1 ns: a zero interval
    /// would be invalid).
    pub fn emulated(mut self, s: &Scaling) -> DcqcnParams {
        self.line_rate = s.rate_bps(self.line_rate);
        self.rate_ai = s.rate_bps(self.rate_ai);
        self.rate_hai = s.rate_bps(self.rate_hai);
        self.min_rate = s.rate_bps(self.min_rate);
        let stretch = |ns: u64| s.duration_ns(ns).max(1);
        self.alpha_interval_ns = stretch(self.alpha_interval_ns);
        self.decrease_interval_ns = stretch(self.decrease_interval_ns);
        self.increase_interval_ns = stretch(self.increase_interval_ns);
        self
    }

    /// One line naming the first unusable parameter.
    pub fn validate(&self) -> Result<(), String> {
        let rate = |v: f64, what: &str| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(format!("{what} must be a rate > 0, got {v}"))
            }
        };
        rate(self.line_rate, "the line rate")?;
        rate(self.rate_ai, "--dcqcn-rate-ai")?;
        rate(self.rate_hai, "--dcqcn-rate-hai")?;
        rate(self.min_rate, "--dcqcn-min-rate")?;
        if self.min_rate > self.line_rate {
            return Err(format!(
                "--dcqcn-min-rate ({}) exceeds the line rate ({})",
                self.min_rate, self.line_rate
            ));
        }
        if !(self.g > 0.0 && self.g <= 1.0) {
            return Err(format!("--dcqcn-g must be in (0, 1], got {}", self.g));
        }
        for (v, what) in [
            (self.alpha_interval_ns, "--dcqcn-alpha-interval-us"),
            (self.decrease_interval_ns, "--dcqcn-decrease-interval-us"),
            (self.increase_interval_ns, "--dcqcn-increase-interval-us"),
        ] {
            if v == 0 {
                return Err(format!("{what} must be > 0"));
            }
        }
        if !(self.rate_on_first_cnp > 0.0 && self.rate_on_first_cnp <= 1.0) {
            return Err(format!(
                "the rate on the first CNP must be in (0, 1], got {}",
                self.rate_on_first_cnp
            ));
        }
        Ok(())
    }
}

/// The three timers, in the order they run at the same nanosecond when
/// their periods are equal (the order the first CNP schedules them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Timer {
    Alpha,
    Decrease,
    Increase,
}

/// One queue pair's reaction point.
#[derive(Debug, Clone, PartialEq)]
pub struct Dcqcn {
    rc: f64,
    rt: f64,
    alpha: f64,
    alpha_flag: bool,
    decrease_flag: bool,
    first_cnp: bool,
    stage: u32,
    next_alpha: Option<u64>,
    next_decrease: Option<u64>,
    next_increase: Option<u64>,
    rate_cuts: u64,
}

impl Dcqcn {
    pub fn new(p: &DcqcnParams) -> Dcqcn {
        Dcqcn {
            rc: p.line_rate,
            rt: p.line_rate,
            alpha: 1.0,
            alpha_flag: false,
            decrease_flag: false,
            first_cnp: true,
            stage: 0,
            next_alpha: None,
            next_decrease: None,
            next_increase: None,
            rate_cuts: 0,
        }
    }

    /// Current rate Rc, bit/s.
    pub fn rate(&self) -> f64 {
        self.rc
    }

    /// Target rate Rt, bit/s.
    pub fn target(&self) -> f64 {
        self.rt
    }

    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    pub fn stage(&self) -> u32 {
        self.stage
    }

    /// Decreases applied so far.
    pub fn rate_cuts(&self) -> u64 {
        self.rate_cuts
    }

    /// A congestion notification at `now_ns` (after [`advance`](Self::advance)
    /// to `now_ns`, which this calls).
    pub fn on_congestion(&mut self, p: &DcqcnParams, now_ns: u64) {
        self.advance(p, now_ns);
        self.alpha_flag = true;
        self.decrease_flag = true;
        if self.first_cnp {
            self.alpha = 1.0;
            self.alpha_flag = false;
            self.next_alpha = Some(now_ns.saturating_add(p.alpha_interval_ns));
            self.next_decrease = Some(now_ns.saturating_add(p.decrease_interval_ns + 1));
            self.rc *= p.rate_on_first_cnp;
            self.rt = self.rc;
            self.first_cnp = false;
        }
    }

    /// Runs every timer expiry up to and including `now_ns`.
    pub fn advance(&mut self, p: &DcqcnParams, now_ns: u64) {
        loop {
            self.skip_idle(p, now_ns);
            let Some(timer) = self.earliest(p, now_ns) else {
                return;
            };
            match timer {
                Timer::Alpha => {
                    self.alpha = if self.alpha_flag {
                        (1.0 - p.g) * self.alpha + p.g
                    } else {
                        (1.0 - p.g) * self.alpha
                    };
                    self.alpha_flag = false;
                    bump(&mut self.next_alpha, p.alpha_interval_ns);
                }
                Timer::Decrease => {
                    let at = self.next_decrease.unwrap_or(now_ns);
                    bump(&mut self.next_decrease, p.decrease_interval_ns);
                    if self.decrease_flag {
                        if p.clamp_target || self.stage != 0 {
                            self.rt = self.rc;
                        }
                        self.rc = p.min_rate.max(self.rc * (1.0 - self.alpha / 2.0));
                        self.stage = 0;
                        self.decrease_flag = false;
                        self.next_increase = Some(at.saturating_add(p.increase_interval_ns));
                        self.rate_cuts += 1;
                    }
                }
                Timer::Increase => {
                    bump(&mut self.next_increase, p.increase_interval_ns);
                    if self.stage < p.fast_recovery_times {
                        self.rc = self.rc / 2.0 + self.rt / 2.0;
                    } else {
                        let step = if self.stage == p.fast_recovery_times {
                            p.rate_ai
                        } else {
                            p.rate_hai
                        };
                        self.rt = (self.rt + step).min(p.line_rate);
                        self.rc = self.rc / 2.0 + self.rt / 2.0;
                    }
                    self.stage = self.stage.saturating_add(1);
                }
            }
        }
    }

    /// Jumps over expiries in (.., now] that change nothing.
    fn skip_idle(&mut self, p: &DcqcnParams, now: u64) {
        // Nothing sets the decrease flag during advance.
        if !self.decrease_flag {
            skip_to_after(&mut self.next_decrease, p.decrease_interval_ns, now);
            // Then nothing reads alpha before `now` either: decay it here,
            // one rounding per period as the simulator, until it stops
            // changing (0, or a subnormal that rounds to itself).
            if !self.alpha_flag {
                while let Some(t) = self.next_alpha.filter(|&t| t <= now) {
                    let decayed = self.alpha * (1.0 - p.g);
                    if decayed == self.alpha {
                        skip_to_after(&mut self.next_alpha, p.alpha_interval_ns, now);
                        break;
                    }
                    self.alpha = decayed;
                    self.next_alpha = Some(t.saturating_add(p.alpha_interval_ns));
                }
            }
        }
        // At the line rate in the hyper stage an increase is a no-op but
        // for the stage count.
        if self.rt == p.line_rate && self.rc == p.line_rate && self.stage > p.fast_recovery_times {
            let n = skip_to_after(&mut self.next_increase, p.increase_interval_ns, now);
            self.stage = self
                .stage
                .saturating_add(u32::try_from(n).unwrap_or(u32::MAX));
        }
    }

    /// The next timer due at or before `now`, ties broken as the simulator.
    fn earliest(&self, p: &DcqcnParams, now: u64) -> Option<Timer> {
        let candidates = [
            (self.next_alpha, p.alpha_interval_ns, Timer::Alpha),
            (self.next_decrease, p.decrease_interval_ns, Timer::Decrease),
            (self.next_increase, p.increase_interval_ns, Timer::Increase),
        ];
        candidates
            .into_iter()
            // A timer saturated at u64::MAX never fires (else advancing
            // to u64::MAX would fire it for ever).
            .filter_map(|(t, period, timer)| {
                t.filter(|&t| t <= now && t != u64::MAX)
                    .map(|t| (t, period, timer))
            })
            // Earliest time; then the longest period (scheduled earliest);
            // then the listed order (min_by_key keeps the first minimum).
            .min_by_key(|&(t, period, _)| (t, std::cmp::Reverse(period)))
            .map(|(_, _, timer)| timer)
    }
}

fn bump(t: &mut Option<u64>, period: u64) {
    if let Some(v) = t {
        *v = v.saturating_add(period);
    }
}

/// Moves a periodic timer due at or before `now` to its first expiry after
/// `now`; returns the number of expiries skipped.
fn skip_to_after(t: &mut Option<u64>, period: u64, now: u64) -> u64 {
    match t {
        Some(v) if *v <= now => {
            let n = (now - *v) / period + 1;
            *v = v.saturating_add(n.saturating_mul(period));
            n
        }
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: f64 = 100e9;
    const M: f64 = 1e6;

    fn assert_close(got: f64, want: f64, what: &str) {
        assert!(
            (got - want).abs() <= want.abs() * 1e-12,
            "{what}: got {got}, want {want}"
        );
    }

    #[test]
    fn defaults_are_the_simulators() {
        let p = DcqcnParams::default();
        assert_eq!(p.line_rate, 100e9);
        assert_eq!((p.rate_ai, p.rate_hai, p.min_rate), (50e6, 100e6, 100e6));
        assert_eq!(
            (
                p.alpha_interval_ns,
                p.decrease_interval_ns,
                p.increase_interval_ns
            ),
            (55_000, 4_000, 900_000)
        );
        assert_eq!(p.g, 1.0 / 256.0);
        assert_eq!(p.fast_recovery_times, 1);
        assert!(!p.clamp_target);
        let s = p.emulated(&Scaling::rates(1000.0));
        assert_eq!(
            (s.line_rate, s.rate_ai, s.rate_hai, s.min_rate),
            (1e8, 5e4, 1e5, 1e5)
        );
        assert!(p.validate().is_ok());
    }

    #[test]
    fn dilation_stretches_every_interval_and_no_rate() {
        let dilation = |time| Scaling {
            time,
            ..Scaling::NONE
        };
        let d = DcqcnParams::default().emulated(&dilation(10.0));
        assert_eq!(
            (
                d.alpha_interval_ns,
                d.decrease_interval_ns,
                d.increase_interval_ns
            ),
            (550_000, 40_000, 9_000_000)
        );
        // Rates divided by the dilation as well: 100G / 10.
        assert_eq!((d.line_rate, d.rate_ai, d.min_rate), (10e9, 5e6, 10e6));
        // Never below 1 ns (a zero interval would be invalid).
        assert_eq!(
            DcqcnParams::default()
                .emulated(&dilation(1e-9))
                .decrease_interval_ns,
            1
        );
    }

    /// A hand-worked sequence with the default parameters (line rate 100G,
    /// Advancing to the end of time returns: every timer saturates at
    /// u64::MAX, which never fires (it used to fire for ever). The rate
    /// recovered to the line rate long before.
    #[test]
    fn advancing_to_the_end_of_time_returns() {
        let p = DcqcnParams::default();
        let mut d = Dcqcn::new(&p);
        d.on_congestion(&p, 1_000);
        d.advance(&p, u64::MAX);
        assert_eq!(d.rate(), G);
        d.advance(&p, u64::MAX);
        assert_eq!(d.rate(), G);
    }

    /// g = 1/256); t0 is the first ECN echo.
    #[test]
    fn hand_worked_sequence() {
        let p = DcqcnParams::default();
        let t0 = 1_000_000;
        let mut d = Dcqcn::new(&p);
        assert_eq!((d.rate(), d.target(), d.alpha()), (G, G, 1.0));

        // First echo: alpha = 1 with its flag cleared; Rc = Rt = 1.0 * 100G;
        // timers: alpha at t0 + 55 us, decrease at t0 + 4 us + 1 ns.
        d.on_congestion(&p, t0);
        assert_eq!((d.rate(), d.target(), d.alpha()), (G, G, 1.0));
        d.advance(&p, t0 + 4_000);
        assert_eq!(d.rate(), G, "the decrease is 1 ns later");

        // t0 + 4001: decrease, stage 0 so Rt stays (no clamp); Rc = 100G *
        // (1 - 1/2) = 50G; increase timer at t0 + 904_001.
        d.advance(&p, t0 + 4_001);
        assert_eq!((d.rate(), d.target(), d.rate_cuts()), (50e9, G, 1));

        // t0 + 55 us: alpha with the flag clear: 255/256 = 0.99609375.
        d.advance(&p, t0 + 55_000);
        assert_eq!(d.alpha(), 255.0 / 256.0);

        // Second echo at t0 + 60 us; the decrease at t0 + 60_001: Rc = 50G *
        // (1 - 0.99609375 / 2) = 50G * 0.501953125 = 25.09765625G; Rt stays
        // (stage 0); the increase timer restarts: t0 + 960_001.
        d.on_congestion(&p, t0 + 60_000);
        d.advance(&p, t0 + 60_001);
        assert_eq!((d.rate(), d.target(), d.rate_cuts()), (25.09765625e9, G, 2));

        // t0 + 110 us: alpha with the flag set: (255/256)^2 + 1/256 =
        // (65025 + 256) / 65536 = 65281/65536.
        d.advance(&p, t0 + 110_000);
        let a1 = 65281.0 / 65536.0;
        assert_eq!(d.alpha(), a1);

        // t0 + 960_001: 15 alpha decays (t0 + 165 us .. t0 + 935 us) and the
        // first increase, stage 0 < 1: fast recovery, Rc = (25.09765625G +
        // 100G) / 2 = 62.548828125G; stage 1.
        d.advance(&p, t0 + 960_001);
        let mut a = a1;
        for _ in 0..15 {
            a *= 255.0 / 256.0;
        }
        assert_eq!(d.alpha(), a);
        assert_eq!((d.rate(), d.target(), d.stage()), (62.548828125e9, G, 1));

        // t0 + 1_860_001: stage 1 = fast_recovery_times: additive, Rt =
        // min(100G + 50M, 100G) = 100G, Rc = (62.548828125G + 100G) / 2 =
        // 81.2744140625G; stage 2.
        d.advance(&p, t0 + 1_860_001);
        assert_eq!((d.rate(), d.target(), d.stage()), (81.2744140625e9, G, 2));

        // Third echo at t0 + 1_871_000 (after the alpha decay at t0 +
        // 1_870_000: 32 decays since t0 + 110 us). The decrease at t0 +
        // 1_872_001 (= t0 + 1 + 4000 * 468): stage 2 != 0 so Rt = Rc =
        // 81.2744140625G; Rc = 81.2744140625G * (1 - alpha / 2).
        d.on_congestion(&p, t0 + 1_871_000);
        d.advance(&p, t0 + 1_872_001);
        let mut a = a1;
        for _ in 0..32 {
            a *= 255.0 / 256.0;
        }
        let rt = 81.2744140625e9;
        let rc = rt * (1.0 - a / 2.0);
        assert_eq!((d.rate(), d.target(), d.stage()), (rc, rt, 0));
        // The alpha flag was set by the echo and is consumed at t0 + 1_925_000.
        d.advance(&p, t0 + 1_925_000);
        let a = (1.0 - 1.0 / 256.0) * a + 1.0 / 256.0;
        assert_eq!(d.alpha(), a);

        // t0 + 2_772_001: fast recovery, Rc = (rc + rt) / 2; t0 + 3_672_001:
        // additive, Rt = rt + 50M; t0 + 4_572_001: hyper, Rt += 100M.
        d.advance(&p, t0 + 2_772_001);
        let rc = rc / 2.0 + rt / 2.0;
        assert_eq!((d.rate(), d.target(), d.stage()), (rc, rt, 1));
        d.advance(&p, t0 + 3_672_001);
        let rt = rt + 50.0 * M;
        let rc = rc / 2.0 + rt / 2.0;
        assert_close(d.target(), 81.3244140625e9, "Rt after additive");
        assert_eq!((d.rate(), d.target(), d.stage()), (rc, rt, 2));
        d.advance(&p, t0 + 4_572_001);
        let rt = rt + 100.0 * M;
        let rc = rc / 2.0 + rt / 2.0;
        assert_eq!((d.rate(), d.target(), d.stage()), (rc, rt, 3));
        assert_eq!(d.rate_cuts(), 3);
    }

    #[test]
    fn echo_before_every_decrease_floors_at_min_rate() {
        // Echo k at 1000 + 4000 k, its decrease at 1000 + 4000 (k + 1) + 1.
        // No alpha update within the first 55 us, so alpha = 1 and each cut
        // halves Rc: 100G / 2^9 = 195.3M, / 2^10 = 97.7M -> floored to
        // 100M, and it stays there.
        let p = DcqcnParams::default();
        let mut d = Dcqcn::new(&p);
        for k in 0..12u64 {
            d.on_congestion(&p, 1_000 + k * 4_000);
            d.advance(&p, 1_000 + k * 4_000 + 4_001);
            if k == 8 {
                assert_eq!(d.rate(), G / 512.0);
            }
        }
        assert_eq!(d.rate(), 100e6);
        assert_eq!(d.rate_cuts(), 12);
        assert_eq!(d.target(), G, "stage stayed 0: no clamp");
    }

    #[test]
    fn recovers_to_line_rate_and_then_idles_cheaply() {
        let p = DcqcnParams::default();
        let mut d = Dcqcn::new(&p);
        d.on_congestion(&p, 0);
        d.advance(&p, 4_001);
        assert_eq!(d.rate(), 50e9);
        // Rt stayed 100G; each increase halves the gap to it, so after 100
        // increases (90 ms) Rc is 100G to the last bit; a day later nothing
        // else changed but alpha (decayed to where (1 - g) alpha rounds to
        // alpha, a subnormal) and the stage count.
        d.advance(&p, 4_001 + 100 * 900_000);
        assert_eq!((d.rate(), d.target()), (G, G));
        d.advance(&p, 86_400 * 1_000_000_000);
        assert_eq!((d.rate(), d.target()), (G, G));
        assert!(d.alpha() < 1e-320);
        assert_eq!(d.alpha() * (1.0 - p.g), d.alpha());
        assert_eq!(
            d.stage(),
            ((86_400 * 1_000_000_000u64 - 4_001) / 900_000) as u32
        );
    }

    #[test]
    fn lazy_steps_equal_one_big_step() {
        // The same echoes; advance called every microsecond in one copy and
        // only at the echoes and the end in the other.
        let p = DcqcnParams::default();
        let echoes = [
            10_000u64, 10_500, 80_000, 1_500_000, 1_500_003, 2_400_001, 5_000_000,
        ];
        let end = 8_000_000;
        let mut fine = Dcqcn::new(&p);
        let mut coarse = Dcqcn::new(&p);
        let mut e = 0;
        for t in (0..=end).step_by(1000) {
            while e < echoes.len() && echoes[e] <= t {
                fine.on_congestion(&p, echoes[e]);
                e += 1;
            }
            fine.advance(&p, t);
        }
        for &t in &echoes {
            coarse.on_congestion(&p, t);
        }
        coarse.advance(&p, end);
        assert_eq!(fine, coarse);
        assert!(coarse.rate_cuts() >= 5);
    }
}

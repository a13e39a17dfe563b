//! TIMELY's sender as the LCMP paper's simulator runs it: `CC_MODE 7` of
//! HPCC's ns-3 (`rdma-hw.cc` `HandleAckTimely`, `UpdateRateTimely`; state
//! in `rdma-queue-pair.h` `tmly`), unchanged by the LCMP artifact.
//!
//! Every data packet carries its send time (`IntHeader` in TS mode, set by
//! `SeqTsHeader`); the receiver echoes it, so each ACK gives an RTT sample.
//! Per queue pair: the rate Rc (`tmly.m_curRate`, also the pacing rate),
//! an increase stage, the last RTT, the smoothed RTT difference, and
//! `lastUpdateSeq` (0 until the first ACK).
//!
//! Only an ACK past `lastUpdateSeq` (one per RTT) acts; the others do
//! nothing (`FastReactTimely` is empty). The first records the RTT; each
//! later one, with sample `rtt`:
//!
//! - diff = (1 - alpha) diff + alpha (rtt - last rtt); gradient = diff /
//!   minRTT.
//! - rtt < T_low: increase. rtt > T_high: Rc = Rc (1 - beta (1 - T_high /
//!   rtt)). Else gradient <= 0: increase; gradient > 0: Rc = Rc max(0, 1 -
//!   beta gradient). A decrease is bounded below by the minimum rate and
//!   resets the stage.
//! - increase: Rc += `RATE_AI` while the stage is below N = 5 (the
//!   simulator's literal), `RATE_HAI` from then on (hyper-active); capped
//!   at the line rate; stage + 1.
//! - then `lastUpdateSeq = snd_nxt` and last rtt = rtt.
//!
//! The thresholds are the simulator's `RdmaHw` attribute defaults (the
//! artifact's config sets no TIMELY parameter): T_low 50 us and T_high
//! 500 us, datacenter RTTs; inter-DC RTTs lie above T_high, so on the
//! paper's networks TIMELY cuts on every RTT above it, as it did in the
//! simulator. Rates are f64 where the simulator's `DataRate` truncates to
//! whole bit/s.

use lcmp_topology::Scaling;

use super::cc::{bound_rate, check_min_rate, check_rate};

/// TIMELY's parameters; rates in bit/s, times in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimelyParams {
    /// The host NIC's rate (`m_max_rate`): the start rate and the cap.
    pub line_rate: f64,
    /// The additive step (`RATE_AI`).
    pub rate_ai: f64,
    /// The hyper-active step (`RATE_HAI`).
    pub rate_hai: f64,
    pub min_rate: f64,
    /// The EWMA weight of a new RTT difference (`TimelyAlpha`).
    pub alpha: f64,
    /// The multiplicative decrease factor (`TimelyBeta`).
    pub beta: f64,
    pub t_low_ns: u64,
    pub t_high_ns: u64,
    /// The gradient's normalizer (`TimelyMinRtt`).
    pub min_rtt_ns: u64,
    /// Increases at `rate_ai` before `rate_hai` ones (the literal 5 in
    /// `UpdateRateTimely`).
    pub hai_after: u32,
}

impl Default for TimelyParams {
    /// Rates from the LCMP artifact's `mix/config/8DC-hetero/
    /// config_batch.txt`: `RATE_AI 50Mb/s` (line 47), `RATE_HAI 100Mb/s`
    /// (48), `MIN_RATE 100Mb/s` (49); the rest are `rdma-hw.cc`'s
    /// `RdmaHw::GetTypeId` defaults, which `third.cc` never overrides:
    /// `TimelyAlpha` 0.875, `TimelyBeta` 0.8, `TimelyTLow` 50000 ns,
    /// `TimelyTHigh` 500000 ns, `TimelyMinRtt` 20000 ns; N = 5 from
    /// `UpdateRateTimely`. The line rate is the host NIC's, 100G.
    fn default() -> Self {
        TimelyParams {
            line_rate: 100e9,
            rate_ai: 50e6,
            rate_hai: 100e6,
            min_rate: 100e6,
            alpha: 0.875,
            beta: 0.8,
            t_low_ns: 50_000,
            t_high_ns: 500_000,
            min_rtt_ns: 20_000,
            hai_after: 5,
        }
    }
}

impl TimelyParams {
    /// The parameters as an emulation scaled by `s` runs them: every rate
    /// as the emulated links' ([`Scaling::rate_bps`]), every time
    /// stretched by its time dilation (never below 1 ns), so the RTTs it
    /// compares against stretch with them.
    pub fn emulated(mut self, s: &Scaling) -> TimelyParams {
        self.line_rate = s.rate_bps(self.line_rate);
        self.rate_ai = s.rate_bps(self.rate_ai);
        self.rate_hai = s.rate_bps(self.rate_hai);
        self.min_rate = s.rate_bps(self.min_rate);
        let stretch = |ns: u64| s.duration_ns(ns).max(1);
        self.t_low_ns = stretch(self.t_low_ns);
        self.t_high_ns = stretch(self.t_high_ns);
        self.min_rtt_ns = stretch(self.min_rtt_ns);
        self
    }

    /// One line naming the first unusable parameter.
    pub fn validate(&self) -> Result<(), String> {
        check_rate(self.line_rate, "the line rate")?;
        check_rate(self.rate_ai, "--timely-rate-ai")?;
        check_rate(self.rate_hai, "--timely-rate-hai")?;
        check_rate(self.min_rate, "--timely-min-rate")?;
        check_min_rate(self.min_rate, self.line_rate, "--timely-min-rate")?;
        if !(self.alpha > 0.0 && self.alpha <= 1.0) {
            return Err(format!(
                "--timely-alpha must be in (0, 1], got {}",
                self.alpha
            ));
        }
        if !(self.beta > 0.0 && self.beta <= 1.0) {
            return Err(format!(
                "--timely-beta must be in (0, 1], got {}",
                self.beta
            ));
        }
        if self.min_rtt_ns == 0 {
            return Err("--timely-min-rtt-us must be > 0".into());
        }
        if self.t_high_ns == 0 {
            return Err("--timely-t-high-us must be > 0".into());
        }
        if self.t_low_ns > self.t_high_ns {
            return Err(format!(
                "--timely-t-low-us ({} ns) exceeds --timely-t-high-us ({} ns)",
                self.t_low_ns, self.t_high_ns
            ));
        }
        Ok(())
    }
}

/// One queue pair's TIMELY sender.
#[derive(Debug, Clone, PartialEq)]
pub struct Timely {
    rate: f64,
    inc_stage: u32,
    last_rtt_ns: u64,
    rtt_diff: f64,
    last_update_seq: u64,
    updates: u64,
}

impl Timely {
    pub fn new(p: &TimelyParams) -> Timely {
        Timely {
            rate: p.line_rate,
            inc_stage: 0,
            last_rtt_ns: 0,
            rtt_diff: 0.0,
            last_update_seq: 0,
            updates: 0,
        }
    }

    /// The rate Rc (also the pacing rate), bit/s.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    pub fn inc_stage(&self) -> u32 {
        self.inc_stage
    }

    /// The smoothed RTT difference, ns.
    pub fn rtt_diff(&self) -> f64 {
        self.rtt_diff
    }

    /// Rate updates applied so far (the first ACK only records its RTT).
    pub fn updates(&self) -> u64 {
        self.updates
    }

    /// An ACK for the next expected byte `ack_seq` with RTT sample
    /// `rtt_ns`, the sender's next byte being `snd_nxt` (`HandleAckTimely`).
    pub fn on_ack(&mut self, p: &TimelyParams, ack_seq: u64, snd_nxt: u64, rtt_ns: u64) {
        if ack_seq <= self.last_update_seq {
            return;
        }
        if self.last_update_seq != 0 {
            self.react(p, rtt_ns);
        }
        if snd_nxt > self.last_update_seq {
            self.last_update_seq = snd_nxt;
            self.last_rtt_ns = rtt_ns;
        }
    }

    fn react(&mut self, p: &TimelyParams, rtt: u64) {
        // i128: both are u64.
        let new_diff = (i128::from(rtt) - i128::from(self.last_rtt_ns)) as f64;
        let diff = (1.0 - p.alpha) * self.rtt_diff + p.alpha * new_diff;
        let gradient = diff / p.min_rtt_ns as f64;
        let cut = if rtt < p.t_low_ns {
            None
        } else if rtt > p.t_high_ns {
            Some(1.0 - p.beta * (1.0 - p.t_high_ns as f64 / rtt as f64))
        } else if gradient <= 0.0 {
            None
        } else {
            Some((1.0 - p.beta * gradient).max(0.0))
        };
        match cut {
            None => {
                let step = if self.inc_stage < p.hai_after {
                    p.rate_ai
                } else {
                    p.rate_hai
                };
                self.rate = (self.rate + step).min(p.line_rate);
                self.inc_stage = self.inc_stage.saturating_add(1);
            }
            Some(c) => {
                self.rate = bound_rate(self.rate * c, p.min_rate, p.line_rate);
                self.inc_stage = 0;
            }
        }
        self.rtt_diff = diff;
        self.updates += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_dilation() {
        let p = TimelyParams::default();
        assert_eq!((p.alpha, p.beta, p.hai_after), (0.875, 0.8, 5));
        assert_eq!(
            (p.t_low_ns, p.t_high_ns, p.min_rtt_ns),
            (50_000, 500_000, 20_000)
        );
        assert_eq!((p.rate_ai, p.rate_hai, p.min_rate), (50e6, 100e6, 100e6));
        assert!(p.validate().is_ok());
        let d = p.emulated(&Scaling {
            time: 10.0,
            ..Scaling::NONE
        });
        assert_eq!(
            (d.t_low_ns, d.t_high_ns, d.min_rtt_ns),
            (500_000, 5_000_000, 200_000)
        );
        // 100G / 10, 50M / 10.
        assert_eq!((d.line_rate, d.rate_ai), (10e9, 5e6));
    }

    #[test]
    fn validation_names_the_parameter() {
        let bad = |f: fn(&mut TimelyParams)| {
            let mut p = TimelyParams::default();
            f(&mut p);
            p.validate().unwrap_err()
        };
        assert_eq!(
            bad(|p| p.rate_hai = -1.0),
            "--timely-rate-hai must be a rate > 0, got -1"
        );
        assert_eq!(
            bad(|p| p.beta = 0.0),
            "--timely-beta must be in (0, 1], got 0"
        );
        assert_eq!(bad(|p| p.min_rtt_ns = 0), "--timely-min-rtt-us must be > 0");
        assert_eq!(
            bad(|p| p.t_low_ns = 600_000),
            "--timely-t-low-us (600000 ns) exceeds --timely-t-high-us (500000 ns)"
        );
    }
}

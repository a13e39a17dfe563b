//! DCTCP on RoCEv2 as the LCMP paper's simulator runs it: `CC_MODE 8` of
//! HPCC's ns-3 (`rdma-hw.cc` `HandleAckDctcp`; state in
//! `rdma-queue-pair.h` `dctcp`), unchanged by the LCMP artifact, and the
//! CC of its shipped 8-DC config (`config_batch.txt` line 2).
//!
//! Rate-based, as the simulator does it: the "window" is the rate (the
//! in-flight bound follows it with `VAR_WIN`,
//! [`super::cc::QpSetup::window`]), cut by alpha / 2 at most once per
//! window of data and raised by `DCTCP_RATE_AI` once per window without
//! marks. Per queue pair: the rate, alpha (starting at 1), the ECN-echo
//! count of the current window, the window's size in packets, a CWR flag
//! with its end sequence, and `lastUpdateSeq` (0 until the first ACK).
//!
//! On every ACK, in the simulator's order:
//!
//! 1. Count its ECN echo.
//! 2. If its sequence is past `lastUpdateSeq` a new window begins: the
//!    first time, `lastUpdateSeq = snd_nxt` and the window is snd_nxt /
//!    MTU + 1 packets (the echoes counted so far carry over); later, F =
//!    min(1, echoes / window packets), alpha = (1 - g) alpha + g F,
//!    `lastUpdateSeq = snd_nxt`, the count reset, the window (snd_nxt -
//!    ack) / MTU + 1 packets.
//! 3. In CWR and the ACK past its end sequence: leave CWR.
//! 4. An echo outside CWR: rate = max(min rate, rate (1 - alpha / 2)),
//!    enter CWR until snd_nxt is acknowledged.
//! 5. Outside CWR at a new window: rate = min(line rate, rate + AI).
//!
//! Rates are f64 where the simulator's `DataRate` truncates to whole
//! bit/s; an ACK beyond snd_nxt (which the simulator's unsigned
//! subtraction would wrap) counts a one-packet window.

use lcmp_topology::Scaling;

use super::cc::{bound_rate, check_min_rate, check_rate, QpSetup};

/// DCTCP's parameters; rates in bit/s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DctcpParams {
    /// The host NIC's rate (`m_max_rate`): the start rate and the cap.
    pub line_rate: f64,
    /// The increase per window without marks (`DCTCP_RATE_AI`).
    pub rate_ai: f64,
    pub min_rate: f64,
    /// alpha's gain (`EWMA_GAIN`, shared with DCQCN in the simulator).
    pub g: f64,
}

impl Default for DctcpParams {
    /// The LCMP artifact's `mix/config/8DC-hetero/config_batch.txt`:
    /// `EWMA_GAIN 0.00390625` (line 45), `MIN_RATE 100Mb/s` (49),
    /// `DCTCP_RATE_AI 1000Mb/s` (50); the line rate is the host NIC's,
    /// 100G.
    fn default() -> Self {
        DctcpParams {
            line_rate: 100e9,
            rate_ai: 1e9,
            min_rate: 100e6,
            g: 1.0 / 256.0,
        }
    }
}

impl DctcpParams {
    /// The parameters as an emulation scaled by `s` runs them: every rate
    /// as the emulated links' ([`Scaling::rate_bps`]). DCTCP has no timer:
    /// it is clocked by windows of data.
    pub fn emulated(mut self, s: &Scaling) -> DctcpParams {
        self.line_rate = s.rate_bps(self.line_rate);
        self.rate_ai = s.rate_bps(self.rate_ai);
        self.min_rate = s.rate_bps(self.min_rate);
        self
    }

    /// One line naming the first unusable parameter.
    pub fn validate(&self) -> Result<(), String> {
        check_rate(self.line_rate, "the line rate")?;
        check_rate(self.rate_ai, "--dctcp-rate-ai")?;
        check_rate(self.min_rate, "--dctcp-min-rate")?;
        check_min_rate(self.min_rate, self.line_rate, "--dctcp-min-rate")?;
        if !(self.g > 0.0 && self.g <= 1.0) {
            return Err(format!("--dctcp-g must be in (0, 1], got {}", self.g));
        }
        Ok(())
    }
}

/// One queue pair's DCTCP sender.
#[derive(Debug, Clone, PartialEq)]
pub struct Dctcp {
    rate: f64,
    alpha: f64,
    ecn_count: u64,
    window_packets: u64,
    last_update_seq: u64,
    cwr: bool,
    high_seq: u64,
    mtu: u64,
    rate_cuts: u64,
}

impl Dctcp {
    pub fn new(p: &DctcpParams, qp: &QpSetup) -> Dctcp {
        Dctcp {
            rate: p.line_rate,
            alpha: 1.0,
            ecn_count: 0,
            window_packets: 0,
            last_update_seq: 0,
            cwr: false,
            high_seq: 0,
            // A zero MTU would divide by zero; one byte counts bytes.
            mtu: u64::from(qp.mtu.max(1)),
            rate_cuts: 0,
        }
    }

    /// The rate (also the pacing rate), bit/s.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// In congestion window reduction (no further cut, no increase).
    pub fn in_cwr(&self) -> bool {
        self.cwr
    }

    /// The current window's size in packets (alpha's denominator).
    pub fn window_packets(&self) -> u64 {
        self.window_packets
    }

    pub fn rate_cuts(&self) -> u64 {
        self.rate_cuts
    }

    /// An ACK for the next expected byte `ack_seq`, `ecn_echo` if its
    /// packet was CE-marked, the sender's next byte being `snd_nxt`
    /// (`HandleAckDctcp`).
    pub fn on_ack(&mut self, p: &DctcpParams, ack_seq: u64, snd_nxt: u64, ecn_echo: bool) {
        self.ecn_count = self.ecn_count.saturating_add(u64::from(ecn_echo));
        let new_window = ack_seq > self.last_update_seq;
        if new_window {
            if self.last_update_seq == 0 {
                self.window_packets = (snd_nxt / self.mtu).saturating_add(1);
            } else {
                let frac = (self.ecn_count as f64 / self.window_packets as f64).min(1.0);
                self.alpha = (1.0 - p.g) * self.alpha + p.g * frac;
                self.ecn_count = 0;
                self.window_packets =
                    (snd_nxt.saturating_sub(ack_seq) / self.mtu).saturating_add(1);
            }
            self.last_update_seq = snd_nxt;
        }
        if self.cwr && ack_seq > self.high_seq {
            self.cwr = false;
        }
        if ecn_echo && !self.cwr {
            self.rate = bound_rate(
                self.rate * (1.0 - self.alpha / 2.0),
                p.min_rate,
                p.line_rate,
            );
            self.cwr = true;
            self.high_seq = snd_nxt;
            self.rate_cuts += 1;
        }
        if !self.cwr && new_window {
            self.rate = (self.rate + p.rate_ai).min(p.line_rate);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_validation() {
        let p = DctcpParams::default();
        assert_eq!(
            (p.line_rate, p.rate_ai, p.min_rate, p.g),
            (100e9, 1e9, 100e6, 1.0 / 256.0)
        );
        assert!(p.validate().is_ok());
        let s = p.emulated(&Scaling::rates(1000.0));
        assert_eq!(
            (s.line_rate, s.rate_ai, s.min_rate, s.g),
            (1e8, 1e6, 1e5, p.g)
        );
        let bad = DctcpParams { g: 0.0, ..p };
        assert_eq!(
            bad.validate().unwrap_err(),
            "--dctcp-g must be in (0, 1], got 0"
        );
        let bad = DctcpParams {
            rate_ai: f64::INFINITY,
            ..p
        };
        assert_eq!(
            bad.validate().unwrap_err(),
            "--dctcp-rate-ai must be a rate > 0, got inf"
        );
    }
}

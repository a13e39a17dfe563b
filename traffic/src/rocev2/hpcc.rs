//! HPCC's sender as the LCMP paper's simulator runs it: `CC_MODE 3` of
//! HPCC's ns-3 (`rdma-hw.cc` `HandleAckHp`, `UpdateRateHp`, `FastReactHp`;
//! state in `rdma-queue-pair.h` `hp`; the INT hop in `int-header.h`
//! `IntHop`), unchanged by the LCMP artifact.
//!
//! Every switch egress appends one INT hop to a data packet (`SwitchNode`
//! `PushHop`: now, the port's transmitted bytes, its queue bytes, its link
//! rate); the receiver copies the hops into the ACK ([`IntHop`], at most
//! [`MAX_HOPS`]). Per queue pair the sender keeps the current rate Rc
//! (`hp.m_curRate`), the pacing rate (`m_rate`), an increase stage, the
//! utilization estimate U (starting at 1), the hops of the last echo, and
//! `lastUpdateSeq` (0 until the first ACK).
//!
//! On an ACK whose sequence is past `lastUpdateSeq` (one per RTT: a full
//! update) or, with `FAST_REACT`, any other ACK (a fast reaction):
//!
//! - first ACK: store the hops; `lastUpdateSeq = snd_nxt`; nothing else.
//! - per hop i: tau = time - last time (ns); txRate = (bytes - last bytes)
//!   8 / tau; u_i = txRate / B_i + min(qlen, last qlen) * line rate / B_i /
//!   win. Single rate (`MULTI_RATE 0`): U' = max u_i and dt = that hop's
//!   tau, then U = (U (T - dt) + U' dt) / T with dt capped at the base RTT
//!   T. Multiple rates: the same EWMA per hop.
//! - c = U / eta; if c >= 1 or stage >= `MI_THRESH`: R = Rc / c + W_AI,
//!   stage 0 (multiplicative); else R = Rc + W_AI, stage + 1 (additive).
//!   R is bounded to [min rate, line rate]; multiple rates: one Rc and
//!   stage per hop, R the least of them.
//! - the pacing rate becomes R; a full update also commits Rc = R and the
//!   stage and sets `lastUpdateSeq = snd_nxt`; a fast reaction does not,
//!   so the next one again starts from the last committed Rc. U and the
//!   stored hops move on either.
//!
//! W_AI is `RATE_AI` as a rate (the window's increase is W_AI x T, the
//! window following the rate with `VAR_WIN`, [`super::cc::QpSetup::window`]).
//!
//! Where the simulator's arithmetic is undefined a hop gives no sample (it
//! is still stored as the next baseline): a timestamp not after the last
//! one (tau = 0 divides by zero) and a link rate of 0 (the simulator's
//! 3-bit rate code cannot express it). Counters are full width here (the
//! wire's 32-bit wrapping ones are widened per queue pair by
//! [`HopWidener`]), so deltas need no wrap (the simulator's 24-bit time
//! and 20-bit byte fields wrap); a byte counter that went back gives 0 bytes. A window of 0 is
//! taken as 1 byte and a base RTT of 0 as 1 ns. Rates are f64 where the
//! simulator's `DataRate` truncates to whole bit/s.

use lcmp_topology::Scaling;

use super::cc::{bound_rate, check_min_rate, check_rate, QpSetup};

/// The most hops an echo carries (`IntHeader::maxHop`, 64 in the LCMP
/// artifact's `int-header.h`; HPCC's own is 5). An echo with more is
/// ignored, as the simulator's `ih.nhop <= maxHop` check does.
pub const MAX_HOPS: usize = 64;

/// One switch egress's report, as the sender reads it from an ACK.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IntHop {
    /// The egress queue's bytes when the packet left.
    pub qlen_bytes: u64,
    /// Bytes the port has transmitted (a running counter).
    pub tx_bytes: u64,
    /// When the packet left, ns (the switch's clock).
    pub ts_ns: u64,
    /// The port's link rate, bit/s.
    pub link_rate_bps: u64,
}

/// Widens one queue pair's hops as the wire carries them
/// ([`lcmp_wire::IntHop`]: 32-bit wrapping byte and time counters, the
/// rate in kbit/s) to the full-width counters HPCC reads: each slot's
/// counters advance by their difference to that slot's last echo, taken
/// as a signed 32-bit step, so an echo that went backwards (reordered)
/// steps back and gives no sample instead of a jump of 2^32. Right while
/// a queue pair's consecutive echoes are less than 2.1 s and 2 GiB of the
/// port's traffic apart.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HopWidener {
    /// Per slot: the last raw (time, bytes) and their widened values.
    last: Vec<(u32, u32, u64, u64)>,
}

impl HopWidener {
    /// The widened hops of one echo into `out` (cleared first; at most
    /// [`MAX_HOPS`]). The first echo of a slot starts its counters at the
    /// raw values.
    pub fn widen(&mut self, hops: impl Iterator<Item = lcmp_wire::IntHop>, out: &mut Vec<IntHop>) {
        out.clear();
        for (i, h) in hops.take(MAX_HOPS).enumerate() {
            let step = |raw: u32, last_raw: u32, wide: u64| {
                // The difference modulo 2^32 as a signed step.
                let d = raw.wrapping_sub(last_raw) as i32;
                wide.saturating_add_signed(i64::from(d))
            };
            let (ts, tx) = match self.last.get(i) {
                Some(&(lts, ltx, wts, wtx)) => {
                    (step(h.ts_ns, lts, wts), step(h.tx_bytes, ltx, wtx))
                }
                None => (u64::from(h.ts_ns), u64::from(h.tx_bytes)),
            };
            let entry = (h.ts_ns, h.tx_bytes, ts, tx);
            match self.last.get_mut(i) {
                Some(e) => *e = entry,
                None => self.last.push(entry),
            }
            out.push(IntHop {
                qlen_bytes: u64::from(h.qlen_bytes),
                tx_bytes: tx,
                ts_ns: ts,
                link_rate_bps: u64::from(h.link_rate_kbps) * 1000,
            });
        }
    }
}

/// HPCC's parameters; rates in bit/s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HpccParams {
    /// The host NIC's rate (`m_max_rate`): the start rate and the cap.
    pub line_rate: f64,
    /// W_AI as a rate (`RATE_AI`).
    pub rate_ai: f64,
    pub min_rate: f64,
    /// eta (`U_TARGET`; `--hpcc-eta`).
    pub u_target: f64,
    /// Additive increases before a multiplicative one (`MI_THRESH`, the
    /// paper's maxStage; `--hpcc-max-stage`).
    pub mi_thresh: u32,
    /// React to every ACK between full updates (`FAST_REACT`).
    pub fast_react: bool,
    /// One rate per hop (`MULTI_RATE`).
    pub multi_rate: bool,
    /// Fast reactions skip hops with an empty queue (`SAMPLE_FEEDBACK`).
    pub sample_feedback: bool,
}

impl Default for HpccParams {
    /// The LCMP artifact's `mix/config/8DC-hetero/config_batch.txt` (the
    /// same in 13DC-hetero and HPCC's `mix/config.txt`): `RATE_AI 50Mb/s`
    /// (line 47), `MIN_RATE 100Mb/s` (49), `FAST_REACT 1` (60), `U_TARGET
    /// 0.95` (61), `MI_THRESH 0` (62), `MULTI_RATE 0` (64),
    /// `SAMPLE_FEEDBACK 0` (65); the line rate is the host NIC's, 100G.
    fn default() -> Self {
        HpccParams {
            line_rate: 100e9,
            rate_ai: 50e6,
            min_rate: 100e6,
            u_target: 0.95,
            mi_thresh: 0,
            fast_react: true,
            multi_rate: false,
            sample_feedback: false,
        }
    }
}

impl HpccParams {
    /// The parameters as an emulation scaled by `s` runs them: every rate
    /// as the emulated links' ([`Scaling::rate_bps`]). HPCC has no timer;
    /// its one time constant, the base RTT, is the queue pair's
    /// ([`QpSetup`]), and U is a ratio of emulated rates, so it is kept.
    pub fn emulated(mut self, s: &Scaling) -> HpccParams {
        self.line_rate = s.rate_bps(self.line_rate);
        self.rate_ai = s.rate_bps(self.rate_ai);
        self.min_rate = s.rate_bps(self.min_rate);
        self
    }

    /// One line naming the first unusable parameter.
    pub fn validate(&self) -> Result<(), String> {
        check_rate(self.line_rate, "the line rate")?;
        check_rate(self.rate_ai, "--hpcc-rate-ai")?;
        check_rate(self.min_rate, "--hpcc-min-rate")?;
        check_min_rate(self.min_rate, self.line_rate, "--hpcc-min-rate")?;
        if !(self.u_target > 0.0 && self.u_target <= 1.0) {
            return Err(format!(
                "--hpcc-eta must be in (0, 1], got {}",
                self.u_target
            ));
        }
        Ok(())
    }
}

/// One hop's rate state (`hp.hopState`, multiple rates only).
#[derive(Debug, Clone, Copy, PartialEq)]
struct HopState {
    u: f64,
    rc: f64,
    inc_stage: u32,
}

/// One queue pair's HPCC sender.
#[derive(Debug, Clone, PartialEq)]
pub struct Hpcc {
    rate: f64,
    cur_rate: f64,
    inc_stage: u32,
    u: f64,
    last_update_seq: u64,
    /// The last echo's hops; hops never echoed are zero (`IntHeader()`).
    hops: Vec<IntHop>,
    per_hop: Vec<HopState>,
    win_bytes: u64,
    base_rtt_ns: u64,
    updates: u64,
    fast_reactions: u64,
}

impl Hpcc {
    pub fn new(p: &HpccParams, qp: &QpSetup) -> Hpcc {
        Hpcc {
            rate: p.line_rate,
            cur_rate: p.line_rate,
            inc_stage: 0,
            u: 1.0,
            last_update_seq: 0,
            hops: Vec::new(),
            per_hop: Vec::new(),
            win_bytes: qp.win_bytes.max(1),
            base_rtt_ns: qp.base_rtt_ns.max(1),
            updates: 0,
            fast_reactions: 0,
        }
    }

    /// The pacing rate, bit/s.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Rc, the rate the last full update committed, bit/s.
    pub fn committed_rate(&self) -> f64 {
        self.cur_rate
    }

    pub fn inc_stage(&self) -> u32 {
        self.inc_stage
    }

    /// The utilization estimate U (single rate).
    pub fn utilization(&self) -> f64 {
        self.u
    }

    /// Hop `i`'s (U, Rc, stage) with multiple rates.
    pub fn hop_state(&self, i: usize) -> Option<(f64, f64, u32)> {
        self.per_hop.get(i).map(|h| (h.u, h.rc, h.inc_stage))
    }

    /// Full updates and fast reactions applied so far (the first ACK,
    /// which only stores the hops, is neither).
    pub fn updates(&self) -> (u64, u64) {
        (self.updates, self.fast_reactions)
    }

    /// An ACK for the next expected byte `ack_seq` echoing `hops`, the
    /// sender's next byte being `snd_nxt` (`HandleAckHp`).
    pub fn on_ack(&mut self, p: &HpccParams, ack_seq: u64, snd_nxt: u64, hops: &[IntHop]) {
        if ack_seq > self.last_update_seq {
            self.update(p, snd_nxt, hops, false);
        } else if p.fast_react {
            self.update(p, snd_nxt, hops, true);
        }
    }

    /// `UpdateRateHp`.
    fn update(&mut self, p: &HpccParams, snd_nxt: u64, hops: &[IntHop], fast: bool) {
        if self.last_update_seq == 0 {
            self.last_update_seq = snd_nxt;
            if hops.len() <= MAX_HOPS {
                self.store(hops);
            }
            return;
        }
        if hops.len() <= MAX_HOPS {
            self.react(p, hops, fast);
        }
        if !fast && snd_nxt > self.last_update_seq {
            self.last_update_seq = snd_nxt;
        }
    }

    fn store(&mut self, hops: &[IntHop]) {
        if self.hops.len() < hops.len() {
            self.hops.resize(hops.len(), IntHop::default());
        }
        self.hops[..hops.len()].copy_from_slice(hops);
    }

    fn react(&mut self, p: &HpccParams, hops: &[IntHop], fast: bool) {
        let n = hops.len();
        if self.hops.len() < n {
            self.hops.resize(n, IntHop::default());
        }
        if p.multi_rate && self.per_hop.len() < n {
            let fresh = HopState {
                u: 1.0,
                rc: p.line_rate,
                inc_stage: 0,
            };
            self.per_hop.resize(n, fresh);
        }
        let base = self.base_rtt_ns;
        let mut updated = [false; MAX_HOPS];
        let mut updated_any = false;
        // The largest u and its tau (single rate).
        let (mut max_u, mut dt) = (0.0f64, 0u64);
        for (i, hop) in hops.iter().enumerate() {
            if p.sample_feedback && fast && hop.qlen_bytes == 0 {
                continue;
            }
            let sample = hop_sample(hop, &self.hops[i], p.line_rate, self.win_bytes);
            self.hops[i] = *hop;
            let Some((u, tau)) = sample else {
                continue;
            };
            updated[i] = true;
            updated_any = true;
            if p.multi_rate {
                let tau = tau.min(base);
                let h = &mut self.per_hop[i];
                h.u = (h.u * (base - tau) as f64 + u * tau as f64) / base as f64;
            } else if u > max_u {
                max_u = u;
                dt = tau;
            }
        }
        if !updated_any {
            return;
        }
        let (new_rate, new_stage) = if p.multi_rate {
            let mut rate = p.line_rate;
            for (i, h) in self.per_hop.iter_mut().take(n).enumerate() {
                if updated[i] {
                    let (r, stage) = next_rate(p, h.rc, h.u, h.inc_stage);
                    rate = rate.min(r);
                    if !fast {
                        h.rc = r;
                        h.inc_stage = stage;
                    }
                } else {
                    rate = rate.min(h.rc);
                }
            }
            // The aggregate stage is unused with multiple rates (the
            // simulator commits an unset value); keep it.
            (rate, self.inc_stage)
        } else {
            let dt = dt.min(base);
            self.u = (self.u * (base - dt) as f64 + max_u * dt as f64) / base as f64;
            next_rate(p, self.cur_rate, self.u, self.inc_stage)
        };
        self.rate = new_rate;
        if fast {
            self.fast_reactions += 1;
        } else {
            self.cur_rate = new_rate;
            self.inc_stage = new_stage;
            self.updates += 1;
        }
    }
}

/// One hop's u and tau against its last report, or None without a sample.
fn hop_sample(hop: &IntHop, last: &IntHop, line_rate: f64, win: u64) -> Option<(f64, u64)> {
    if hop.link_rate_bps == 0 {
        return None;
    }
    let tau = hop.ts_ns.checked_sub(last.ts_ns).filter(|&t| t > 0)?;
    let bytes = hop.tx_bytes.saturating_sub(last.tx_bytes);
    let tx_rate = bytes as f64 * 8.0 / (tau as f64 * 1e-9);
    let b = hop.link_rate_bps as f64;
    let qlen = hop.qlen_bytes.min(last.qlen_bytes) as f64;
    Some((tx_rate / b + qlen * line_rate / b / win as f64, tau))
}

/// The rate and stage after one update from Rc `rc` at utilization `u`.
fn next_rate(p: &HpccParams, rc: f64, u: f64, stage: u32) -> (f64, u32) {
    let c = u / p.u_target;
    let (r, stage) = if c >= 1.0 || stage >= p.mi_thresh {
        (rc / c + p.rate_ai, 0)
    } else {
        (rc + p.rate_ai, stage.saturating_add(1))
    };
    (bound_rate(r, p.min_rate, p.line_rate), stage)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_artifacts() {
        let p = HpccParams::default();
        assert_eq!((p.line_rate, p.rate_ai, p.min_rate), (100e9, 50e6, 100e6));
        assert_eq!((p.u_target, p.mi_thresh), (0.95, 0));
        assert!(p.fast_react && !p.multi_rate && !p.sample_feedback);
        assert!(p.validate().is_ok());
        let s = p.emulated(&Scaling::rates(1000.0));
        assert_eq!((s.line_rate, s.rate_ai, s.min_rate), (1e8, 5e4, 1e5));
        assert_eq!(s.u_target, 0.95);
    }

    #[test]
    fn widened_counters_cross_the_wrap_and_step_back() {
        let raw = |ts_ns, tx_bytes| lcmp_wire::IntHop {
            link_rate_kbps: 25_000_000,
            qlen_bytes: 7,
            tx_bytes,
            ts_ns,
        };
        let mut w = HopWidener::default();
        let mut out = Vec::new();
        w.widen([raw(0xffff_ff00, 10)].into_iter(), &mut out);
        assert_eq!(
            out,
            vec![IntHop {
                qlen_bytes: 7,
                tx_bytes: 10,
                ts_ns: 0xffff_ff00,
                link_rate_bps: 25_000_000_000,
            }]
        );
        // 0x100 after the wrap: 0x100 - 0xffff_ff00 = 0x200 modulo 2^32,
        // 0xffff_ff00 + 0x200 = 0x1_0000_0100; bytes 5 - 10 = -5 as a
        // signed step: 10 - 5 = 5.
        w.widen([raw(0x0000_0100, 5)].into_iter(), &mut out);
        assert_eq!((out[0].ts_ns, out[0].tx_bytes), (0x1_0000_0100, 5));
        // A reordered echo steps back 0x10 ns (no sample for HPCC).
        w.widen([raw(0x0000_00f0, 5)].into_iter(), &mut out);
        assert_eq!(out[0].ts_ns, 0x1_0000_00f0);
    }

    #[test]
    fn validation_names_the_parameter() {
        let bad = |f: fn(&mut HpccParams)| {
            let mut p = HpccParams::default();
            f(&mut p);
            p.validate().unwrap_err()
        };
        assert_eq!(
            bad(|p| p.rate_ai = 0.0),
            "--hpcc-rate-ai must be a rate > 0, got 0"
        );
        assert_eq!(
            bad(|p| p.min_rate = 200e9),
            "--hpcc-min-rate (200000000000) exceeds the line rate (100000000000)"
        );
        assert_eq!(
            bad(|p| p.u_target = 1.5),
            "--hpcc-eta must be in (0, 1], got 1.5"
        );
        assert!(bad(|p| p.line_rate = f64::NAN).starts_with("the line rate"));
    }
}

//! The four congestion controls of the RoCEv2 host transport, named as the
//! LCMP paper's simulator (HPCC's ns-3, `rdma-hw.cc`) selects them with
//! `CC_MODE`: 1 DCQCN ([`super::dcqcn`]), 3 HPCC ([`super::hpcc`]), 7
//! TIMELY ([`super::timely`]), 8 DCTCP ([`super::dctcp`]).
//!
//! Each is a pure per-queue-pair state machine clocked by the caller.
//! [`CcParams`] holds one CC's parameters and [`Cc`] one queue pair's
//! state, so a host runs any of them with one match: [`Cc::on_ack`] for
//! every ACK or NAK (after go-back-N has acknowledged and, on a NAK, moved
//! snd_nxt back, the order of `RdmaHw::ReceiveAck`), [`Cc::on_cnp`] for a
//! CNP, [`Cc::advance`] before reading [`Cc::rate`] at a departure. Only
//! DCQCN has timers; the other three change only on ACKs.
//!
//! What the receiver must echo per CC ([`CongestionControl::feedback`]):
//! DCQCN and DCTCP the ECN (CE seen) flag; HPCC the INT hops the data
//! packet collected; TIMELY the data packet's send timestamp (the
//! simulator's `IntHeader` in TS mode), giving the RTT sample.
//!
//! Sequence numbers here are bytes of the message, as the simulator's
//! (`snd_nxt`, the ACK's next expected byte), where the simulator's 32-bit
//! ones would wrap at 4 GiB.

use std::fmt;
use std::str::FromStr;

use lcmp_topology::Scaling;

use super::dcqcn::{Dcqcn, DcqcnParams};
use super::dctcp::{Dctcp, DctcpParams};
use super::hpcc::{Hpcc, HpccParams, IntHop};
use super::timely::{Timely, TimelyParams};

/// Which congestion control a host runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CongestionControl {
    Dcqcn,
    Hpcc,
    Timely,
    Dctcp,
}

/// What a receiver echoes for a CC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feedback {
    /// The ECN echo flag of every ACK (and CNPs).
    Ecn,
    /// The INT hops the data packet collected.
    Int,
    /// The data packet's send timestamp (an RTT sample).
    Timestamp,
}

impl CongestionControl {
    pub const ALL: [CongestionControl; 4] = [
        CongestionControl::Dcqcn,
        CongestionControl::Hpcc,
        CongestionControl::Timely,
        CongestionControl::Dctcp,
    ];

    /// The name on a command line (the simulator's `${CC_NAME}`, `third.cc`
    /// `replace_config_variables`).
    pub fn name(self) -> &'static str {
        match self {
            CongestionControl::Dcqcn => "dcqcn",
            CongestionControl::Hpcc => "hpcc",
            CongestionControl::Timely => "timely",
            CongestionControl::Dctcp => "dctcp",
        }
    }

    /// The simulator's `CC_MODE`.
    pub fn cc_mode(self) -> u32 {
        match self {
            CongestionControl::Dcqcn => 1,
            CongestionControl::Hpcc => 3,
            CongestionControl::Timely => 7,
            CongestionControl::Dctcp => 8,
        }
    }

    pub fn feedback(self) -> Feedback {
        match self {
            CongestionControl::Dcqcn | CongestionControl::Dctcp => Feedback::Ecn,
            CongestionControl::Hpcc => Feedback::Int,
            CongestionControl::Timely => Feedback::Timestamp,
        }
    }

    /// The CC named `name`; the error lists the valid names.
    pub fn from_name(name: &str) -> Result<CongestionControl, String> {
        CongestionControl::ALL
            .into_iter()
            .find(|cc| cc.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = CongestionControl::ALL.iter().map(|c| c.name()).collect();
                format!(
                    "unknown congestion control {name:?}: expected one of {}",
                    names.join(", ")
                )
            })
    }
}

impl fmt::Display for CongestionControl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for CongestionControl {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        CongestionControl::from_name(s)
    }
}

/// What the host hands a queue pair at its start (`RdmaHw::AddQueuePair`:
/// `SetWin`, `SetBaseRtt`, `SetVarWin`; the MTU is the host's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpSetup {
    /// The in-flight bound at the line rate, bytes; 0 = none. The
    /// simulator's `HAS_WIN 1, GLOBAL_T 1`: the largest bandwidth-delay
    /// product between any two hosts (`maxBdp`, `third.cc`).
    pub win_bytes: u64,
    /// The base RTT, ns (`GLOBAL_T 1`: the largest between any two hosts,
    /// `maxRtt`). HPCC's EWMA period.
    pub base_rtt_ns: u64,
    /// The window follows the rate (`VAR_WIN 1`).
    pub var_win: bool,
    /// Payload bytes per packet (`PACKET_PAYLOAD_SIZE 1000`): DCTCP counts
    /// a window's packets with it.
    pub mtu: u32,
}

impl QpSetup {
    /// No window, no base RTT, `mtu`-byte packets: what DCQCN runs here
    /// (the simulator's window is non-binding in its runs, dcqcn.md).
    pub fn no_window(mtu: u32) -> QpSetup {
        QpSetup {
            win_bytes: 0,
            base_rtt_ns: 0,
            var_win: false,
            mtu,
        }
    }

    /// The window and base RTT of a host with line rate `line_rate_bps`
    /// whose largest RTT to any peer is `base_rtt_ns` (the simulator's
    /// `GLOBAL_T 1`: `maxRtt`, and `maxBdp` = that RTT x the line rate),
    /// the window following the rate (`VAR_WIN 1`).
    pub fn bdp(line_rate_bps: f64, base_rtt_ns: u64, mtu: u32) -> QpSetup {
        // Saturating casts: an absurd rate gives the largest window.
        let win = (line_rate_bps * base_rtt_ns as f64 / 8e9).round() as u64;
        QpSetup {
            win_bytes: win,
            base_rtt_ns,
            var_win: true,
            mtu,
        }
    }

    /// As an emulation scaled by `s` runs it: the base RTT dilated
    /// ([`Scaling::duration_ns`]), the window a bandwidth-delay product
    /// of the emulated rate ([`Scaling::rate_bps`]) over the dilated time.
    pub fn emulated(self, s: &Scaling) -> QpSetup {
        let win = if self.win_bytes == 0 {
            0
        } else {
            // bytes x (1 / rate divisor) x time: per emulated bit/s, per
            // dilated second.
            let per_s = s.duration_ns(1_000_000_000) as f64 / 1e9;
            (s.rate_bps(self.win_bytes as f64) * per_s).round().max(1.0) as u64
        };
        QpSetup {
            win_bytes: win,
            base_rtt_ns: s.duration_ns(self.base_rtt_ns),
            ..self
        }
    }

    /// The bytes in flight allowed at `rate` (`RdmaQueuePair::GetWin`):
    /// None without a window; with `var_win` the window scaled by rate /
    /// line rate, at least 1 byte.
    pub fn window(&self, rate: f64, line_rate: f64) -> Option<u64> {
        if self.win_bytes == 0 {
            return None;
        }
        if !self.var_win {
            return Some(self.win_bytes);
        }
        // In integers as the simulator (`DataRate` holds whole bit/s):
        // win * rate_bps / max_rate_bps. Casts saturate (NaN -> 0).
        let (rate, line) = (rate as u64, line_rate as u64);
        if line == 0 {
            return Some(1);
        }
        let w = u128::from(self.win_bytes) * u128::from(rate) / u128::from(line);
        Some(
            u64::try_from(w)
                .unwrap_or(u64::MAX)
                .clamp(1, self.win_bytes),
        )
    }
}

/// One CC's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CcParams {
    Dcqcn(DcqcnParams),
    Hpcc(HpccParams),
    Timely(TimelyParams),
    Dctcp(DctcpParams),
}

impl CcParams {
    /// `cc`'s parameters at the simulator's defaults.
    pub fn default_for(cc: CongestionControl) -> CcParams {
        match cc {
            CongestionControl::Dcqcn => CcParams::Dcqcn(DcqcnParams::default()),
            CongestionControl::Hpcc => CcParams::Hpcc(HpccParams::default()),
            CongestionControl::Timely => CcParams::Timely(TimelyParams::default()),
            CongestionControl::Dctcp => CcParams::Dctcp(DctcpParams::default()),
        }
    }

    pub fn kind(&self) -> CongestionControl {
        match self {
            CcParams::Dcqcn(_) => CongestionControl::Dcqcn,
            CcParams::Hpcc(_) => CongestionControl::Hpcc,
            CcParams::Timely(_) => CongestionControl::Timely,
            CcParams::Dctcp(_) => CongestionControl::Dctcp,
        }
    }

    /// The host NIC's rate, bit/s.
    pub fn line_rate(&self) -> f64 {
        match self {
            CcParams::Dcqcn(p) => p.line_rate,
            CcParams::Hpcc(p) => p.line_rate,
            CcParams::Timely(p) => p.line_rate,
            CcParams::Dctcp(p) => p.line_rate,
        }
    }

    /// The lowest rate the CC sets, bit/s.
    pub fn min_rate(&self) -> f64 {
        match self {
            CcParams::Dcqcn(p) => p.min_rate,
            CcParams::Hpcc(p) => p.min_rate,
            CcParams::Timely(p) => p.min_rate,
            CcParams::Dctcp(p) => p.min_rate,
        }
    }

    /// The same parameters with the host NIC's rate `bps` (the rate
    /// every CC starts at and is capped by).
    pub fn with_line_rate(self, bps: f64) -> CcParams {
        match self {
            CcParams::Dcqcn(p) => CcParams::Dcqcn(DcqcnParams {
                line_rate: bps,
                ..p
            }),
            CcParams::Hpcc(p) => CcParams::Hpcc(HpccParams {
                line_rate: bps,
                ..p
            }),
            CcParams::Timely(p) => CcParams::Timely(TimelyParams {
                line_rate: bps,
                ..p
            }),
            CcParams::Dctcp(p) => CcParams::Dctcp(DctcpParams {
                line_rate: bps,
                ..p
            }),
        }
    }

    /// The parameters as an emulation scaled by `s` runs them.
    pub fn emulated(self, s: &Scaling) -> CcParams {
        match self {
            CcParams::Dcqcn(p) => CcParams::Dcqcn(p.emulated(s)),
            CcParams::Hpcc(p) => CcParams::Hpcc(p.emulated(s)),
            CcParams::Timely(p) => CcParams::Timely(p.emulated(s)),
            CcParams::Dctcp(p) => CcParams::Dctcp(p.emulated(s)),
        }
    }

    /// One line naming the first unusable parameter.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            CcParams::Dcqcn(p) => p.validate(),
            CcParams::Hpcc(p) => p.validate(),
            CcParams::Timely(p) => p.validate(),
            CcParams::Dctcp(p) => p.validate(),
        }
    }
}

/// The default hop slots of an HPCC data packet's collect block (HPCC's
/// own `IntHeader::maxHop`, 5).
pub const DEFAULT_INT_HOPS: u8 = 5;

/// What every queue pair of a sender runs: the CC with its parameters,
/// the window, and what its data packets carry for the receiver to echo
/// ([`CongestionControl::feedback`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CcConfig {
    /// The CC; its line rate is the host NIC's.
    pub params: CcParams,
    pub qp: QpSetup,
    /// Hop slots of the collect block on HPCC's data packets (1 to
    /// [`lcmp_wire::INT_MAX_SLOTS`]); unused by the other CCs.
    pub int_hops: u8,
}

impl CcConfig {
    /// DCQCN with `p`, no window: the transport as it ran before the
    /// other CCs.
    pub fn dcqcn(p: DcqcnParams, mtu: u32) -> CcConfig {
        CcConfig {
            params: CcParams::Dcqcn(p),
            qp: QpSetup::no_window(mtu),
            int_hops: DEFAULT_INT_HOPS,
        }
    }

    pub fn kind(&self) -> CongestionControl {
        self.params.kind()
    }

    /// The same with the host NIC's rate `bps`.
    pub fn with_line_rate(self, bps: f64) -> CcConfig {
        CcConfig {
            params: self.params.with_line_rate(bps),
            ..self
        }
    }

    /// As an emulation scaled by `s` runs it ([`CcParams::emulated`],
    /// [`QpSetup::emulated`]).
    pub fn emulated(self, s: &Scaling) -> CcConfig {
        CcConfig {
            params: self.params.emulated(s),
            qp: self.qp.emulated(s),
            ..self
        }
    }

    /// Bytes of the block each data packet carries after its BTH: HPCC's
    /// collect block of `int_hops` slots, TIMELY's timestamp, none for
    /// DCQCN and DCTCP.
    pub fn data_block_len(&self) -> usize {
        match self.kind().feedback() {
            Feedback::Ecn => 0,
            Feedback::Int => super::wire::int_block_len(lcmp_wire::IntKind::Collect, self.int_hops),
            Feedback::Timestamp => super::wire::int_block_len(lcmp_wire::IntKind::Timestamp, 0),
        }
    }

    /// One line naming the first unusable setting.
    pub fn validate(&self) -> Result<(), String> {
        self.params.validate()?;
        if self.kind() == CongestionControl::Hpcc {
            if !(1..=lcmp_wire::INT_MAX_SLOTS).contains(&self.int_hops) {
                return Err(format!(
                    "--int-hops must be in [1, {}], got {}",
                    lcmp_wire::INT_MAX_SLOTS,
                    self.int_hops
                ));
            }
            if self.qp.base_rtt_ns == 0 || self.qp.win_bytes == 0 {
                return Err(
                    "hpcc needs a base RTT and a window (--base-rtt-us, the largest RTT between hosts)"
                        .into(),
                );
            }
        }
        Ok(())
    }
}

/// A CC's update counts (for the run's totals).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CcCounts {
    /// Rate updates from feedback: DCQCN's and DCTCP's cuts, HPCC's full
    /// (once per RTT) updates, TIMELY's (once per RTT) updates.
    pub updates: u64,
    /// HPCC's fast reactions (between full updates); 0 for the others.
    pub fast_reactions: u64,
    /// Multiplicative rate cuts: DCQCN's and DCTCP's (0 for HPCC and
    /// TIMELY, whose updates are counted as such).
    pub rate_cuts: u64,
}

impl std::ops::AddAssign for CcCounts {
    fn add_assign(&mut self, o: CcCounts) {
        self.updates += o.updates;
        self.fast_reactions += o.fast_reactions;
        self.rate_cuts += o.rate_cuts;
    }
}

/// One ACK (or NAK) as the CCs read it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ack<'a> {
    pub now_ns: u64,
    /// The receiver's next expected byte.
    pub ack_seq: u64,
    /// The sender's next byte to send, after a NAK's go-back.
    pub snd_nxt: u64,
    /// The data packet arrived CE-marked.
    pub ecn_echo: bool,
    /// now - the acknowledged packet's send time (TIMELY); None = no
    /// sample, TIMELY then ignores the ACK.
    pub rtt_ns: Option<u64>,
    /// The INT hops the data packet collected, in path order (HPCC).
    pub int: &'a [IntHop],
}

/// One queue pair's CC state.
#[derive(Debug, Clone, PartialEq)]
pub enum Cc {
    Dcqcn(Dcqcn),
    Hpcc(Hpcc),
    Timely(Timely),
    Dctcp(Dctcp),
}

impl Cc {
    pub fn new(p: &CcParams, qp: &QpSetup) -> Cc {
        match p {
            CcParams::Dcqcn(p) => Cc::Dcqcn(Dcqcn::new(p)),
            CcParams::Hpcc(p) => Cc::Hpcc(Hpcc::new(p, qp)),
            CcParams::Timely(p) => Cc::Timely(Timely::new(p)),
            CcParams::Dctcp(p) => Cc::Dctcp(Dctcp::new(p, qp)),
        }
    }

    /// The pacing rate, bit/s (the simulator's `qp->m_rate`).
    pub fn rate(&self) -> f64 {
        match self {
            Cc::Dcqcn(s) => s.rate(),
            Cc::Hpcc(s) => s.rate(),
            Cc::Timely(s) => s.rate(),
            Cc::Dctcp(s) => s.rate(),
        }
    }

    /// The update counts so far ([`CcCounts`]).
    pub fn counts(&self) -> CcCounts {
        match self {
            Cc::Dcqcn(s) => CcCounts {
                updates: s.rate_cuts(),
                fast_reactions: 0,
                rate_cuts: s.rate_cuts(),
            },
            Cc::Hpcc(s) => {
                let (updates, fast_reactions) = s.updates();
                CcCounts {
                    updates,
                    fast_reactions,
                    rate_cuts: 0,
                }
            }
            Cc::Timely(s) => CcCounts {
                updates: s.updates(),
                ..CcCounts::default()
            },
            Cc::Dctcp(s) => CcCounts {
                updates: s.rate_cuts(),
                fast_reactions: 0,
                rate_cuts: s.rate_cuts(),
            },
        }
    }

    /// Runs DCQCN's timers up to `now_ns` (the others have none). State
    /// and parameters of different CCs are a caller's bug and change
    /// nothing.
    pub fn advance(&mut self, p: &CcParams, now_ns: u64) {
        if let (Cc::Dcqcn(s), CcParams::Dcqcn(p)) = (self, p) {
            s.advance(p, now_ns);
        }
    }

    /// An ACK or NAK (`RdmaHw::ReceiveAck`: DCQCN's `cnp_received_mlx` on
    /// the echo, `HandleAckHp`, `HandleAckTimely`, `HandleAckDctcp`).
    pub fn on_ack(&mut self, p: &CcParams, ack: &Ack<'_>) {
        match (self, p) {
            (Cc::Dcqcn(s), CcParams::Dcqcn(p)) => {
                s.advance(p, ack.now_ns);
                if ack.ecn_echo {
                    s.on_congestion(p, ack.now_ns);
                }
            }
            (Cc::Hpcc(s), CcParams::Hpcc(p)) => s.on_ack(p, ack.ack_seq, ack.snd_nxt, ack.int),
            (Cc::Timely(s), CcParams::Timely(p)) => {
                if let Some(rtt) = ack.rtt_ns {
                    s.on_ack(p, ack.ack_seq, ack.snd_nxt, rtt);
                }
            }
            (Cc::Dctcp(s), CcParams::Dctcp(p)) => {
                s.on_ack(p, ack.ack_seq, ack.snd_nxt, ack.ecn_echo)
            }
            _ => {}
        }
    }

    /// A CNP: DCQCN's congestion notification. The simulator's
    /// `ReceiveCnp` changes no CC's state (its hosts signal by the ACK's
    /// echo), so the others ignore it.
    pub fn on_cnp(&mut self, p: &CcParams, now_ns: u64) {
        if let (Cc::Dcqcn(s), CcParams::Dcqcn(p)) = (self, p) {
            s.on_congestion(p, now_ns);
        }
    }
}

/// `Ok` if `v` is a finite rate > 0, else one line naming `what`.
pub(crate) fn check_rate(v: f64, what: &str) -> Result<(), String> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(format!("{what} must be a rate > 0, got {v}"))
    }
}

/// `Ok` if the minimum rate is at most the line rate.
pub(crate) fn check_min_rate(min_rate: f64, line_rate: f64, what: &str) -> Result<(), String> {
    if min_rate > line_rate {
        Err(format!(
            "{what} ({min_rate}) exceeds the line rate ({line_rate})"
        ))
    } else {
        Ok(())
    }
}

/// `v` within [lo, hi] as the simulator bounds a new rate (the lower bound
/// first, so hi wins if lo > hi); a NaN becomes lo.
pub(crate) fn bound_rate(v: f64, lo: f64, hi: f64) -> f64 {
    if v.is_nan() {
        return lo.min(hi);
    }
    v.max(lo).min(hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_lists_valid() {
        for cc in CongestionControl::ALL {
            assert_eq!(CongestionControl::from_name(cc.name()), Ok(cc));
            assert_eq!(cc.to_string().parse::<CongestionControl>(), Ok(cc));
        }
        assert_eq!(
            CongestionControl::ALL.map(CongestionControl::cc_mode),
            [1, 3, 7, 8]
        );
        let e = CongestionControl::from_name("cubic").unwrap_err();
        assert_eq!(
            e,
            "unknown congestion control \"cubic\": expected one of dcqcn, hpcc, timely, dctcp"
        );
        assert!(!e.contains('\n'));
        assert!(CongestionControl::from_name("HPCC").is_err());
    }

    #[test]
    fn window_follows_the_rate() {
        let qp = QpSetup {
            win_bytes: 100_000,
            base_rtt_ns: 8_000,
            var_win: true,
            mtu: 1000,
        };
        // 100_000 * 95.05G / 100G = 95_050.
        assert_eq!(qp.window(95.05e9, 100e9), Some(95_050));
        // 100_000 * 100M / 100G = 100.
        assert_eq!(qp.window(100e6, 100e9), Some(100));
        // 100_000 * 1 / 100G = 1e-6, floored to 0, then "must > 0": 1.
        assert_eq!(qp.window(1.0, 100e9), Some(1));
        assert_eq!(qp.window(0.0, 0.0), Some(1));
        let fixed = QpSetup {
            var_win: false,
            ..qp
        };
        assert_eq!(fixed.window(1e9, 100e9), Some(100_000));
        let none = QpSetup { win_bytes: 0, ..qp };
        assert_eq!(none.window(1e9, 100e9), None);
    }

    #[test]
    fn every_cc_runs_through_one_match() {
        let qp = QpSetup {
            win_bytes: 100_000,
            base_rtt_ns: 8_000,
            var_win: true,
            mtu: 1000,
        };
        for cc in CongestionControl::ALL {
            let p = CcParams::default_for(cc);
            assert_eq!(p.kind(), cc);
            assert!(p.validate().is_ok(), "{cc}");
            let mut s = Cc::new(&p, &qp);
            assert_eq!(s.rate(), 100e9, "{cc} starts at the line rate");
            let ack = Ack {
                now_ns: 1_000,
                ack_seq: 1_000,
                snd_nxt: 10_000,
                ecn_echo: true,
                rtt_ns: Some(10_000),
                int: &[],
            };
            s.on_ack(&p, &ack);
            s.advance(&p, 2_000_000);
            let r = s.rate();
            assert!((p.min_rate()..=p.line_rate()).contains(&r), "{cc}: {r}");
        }
        // Mismatched state and parameters change nothing.
        let mut s = Cc::new(&CcParams::default_for(CongestionControl::Dctcp), &qp);
        let before = s.clone();
        let ack = Ack {
            now_ns: 0,
            ack_seq: 1,
            snd_nxt: 2,
            ecn_echo: true,
            rtt_ns: None,
            int: &[],
        };
        s.on_ack(&CcParams::default_for(CongestionControl::Hpcc), &ack);
        assert_eq!(s, before);
    }

    #[test]
    fn emulated_scales_every_cc_rate() {
        let s = Scaling::rates(1000.0);
        for cc in CongestionControl::ALL {
            let p = CcParams::default_for(cc).emulated(&s);
            assert_eq!(p.line_rate(), 1e8, "{cc}");
            assert_eq!(p.min_rate(), 1e5, "{cc}");
        }
    }
}

//! The RoCEv2 sender's event loop (`lcmp-traffic client --transport rocev2`).
//!
//! One thread, one raw socket for every QP's data (each QP its own UDP
//! source port), one UDP socket on (local address, 4791) for ACKs, NAKs and
//! CNPs. Each turn: take pending signals, process every waiting ACK (ACKs
//! first, as the NIC gives them priority), start the flows whose arrival
//! time has come, send what [`SenderCore`] releases, print progress; then
//! wait for a datagram or the earliest deadline (a pacing time, a timeout,
//! the next arrival, the next progress line, the end of the drain) with a
//! nanosecond ppoll. Nothing sleeps a fixed time.
//!
//! FCT: from the flow's arrival (when its QP may send; the first packet
//! leaves then unless the host NIC is busy, the simulator's startTime) to
//! the ACK of its last packet. min_rtt_us: the smallest data -> ACK time of
//! the packets timed (one at a time, never a retransmitted one).
//!
//! Memory: at most [`MAX_ACTIVE_QPS`] flows in flight, and a flow's row is
//! written when it ends ([`FlowLog`]), so nothing grows with the length
//! of the run.

use std::collections::HashMap;
use std::fs::File;

use lcmp_topology::Scaling;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use super::cc::{CcConfig, CcParams, CongestionControl, QpSetup, DEFAULT_INT_HOPS};
use super::dcqcn::DcqcnParams;
use super::net::{self, RawSender, Signals};
use super::pattern;
use super::sender::{Departure, NewFlow, SenderConfig, SenderCore, SenderStats};
use super::wire::{
    self, Aeth, Endpoints, Message, Packet, ECN_ECT0, MAX_INT_BLOCK, MAX_PAYLOAD, ROCEV2_PORT,
};
use super::{qpn_of, udp_sport_of};
use crate::client::{done_line, print_line, Destination, FlowLog, Summary};
use crate::flows::FlowSource;
use crate::record::{FlowRecord, FlowStatus};

/// Datagrams handled per turn before the loop looks at the others again.
const BATCH: usize = 256;
/// Flows a client has in flight (one QP each). An arrival that finds this
/// many is skipped: written at once as failed (error "skipped: ..."),
/// counted as `skipped`, as the TCP client sheds what it cannot hold
/// ([`crate::client::MAX_WAITING`]). Far above what a host's NIC keeps busy
/// (experiments run tens), and with their records well under 100 MB.
pub const MAX_ACTIVE_QPS: usize = 1 << 16;

/// The rocev2 options as given: rates in simulator units (bit/s) and
/// intervals in the simulator's time, run as the testbed's `scaling` runs
/// its links ([`CcConfig::emulated`], the one place that scales them).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RoceOptions {
    /// The testbed's scaling (its rate and time factors apply here).
    pub scaling: Scaling,
    /// The host NIC's rate (before scaling); also the CC's line rate.
    pub line_rate: f64,
    pub payload: u32,
    /// The congestion control and its parameters (their line rate is
    /// replaced by `line_rate`).
    pub cc: CcParams,
    pub rto_ms: f64,
    /// Hop slots of HPCC's INT collect block.
    pub int_hops: u8,
    /// The largest RTT between hosts, ns of the network's time (the
    /// simulator's `maxRtt` with `GLOBAL_T 1`): HPCC's base RTT T and the
    /// delay of its default window; 0 = not given.
    pub base_rtt_ns: u64,
    /// The in-flight bound at the line rate, bytes of the network (its
    /// `maxBdp`), following the rate (`VAR_WIN`); 0 = none. `None`: the
    /// CC's default, the bandwidth-delay product of `line_rate` and
    /// `base_rtt_ns` for HPCC (its utilization needs one), none for the
    /// others.
    pub window_bytes: Option<u64>,
}

impl Default for RoceOptions {
    fn default() -> Self {
        RoceOptions {
            scaling: Scaling::NONE,
            line_rate: 100e9,
            payload: 1000,
            cc: CcParams::Dcqcn(DcqcnParams::default()),
            rto_ms: 4000.0,
            int_hops: DEFAULT_INT_HOPS,
            base_rtt_ns: 0,
            window_bytes: None,
        }
    }
}

impl RoceOptions {
    /// The CC every queue pair runs, as the emulation runs it: line rate
    /// set, rates and times scaled, validated.
    pub fn cc_config(&self) -> Result<CcConfig, String> {
        self.check_scaling()?;
        let params = self.cc.with_line_rate(self.line_rate);
        let qp = match self.window_bytes {
            Some(win) => QpSetup {
                win_bytes: win,
                base_rtt_ns: self.base_rtt_ns,
                var_win: true,
                mtu: self.payload,
            },
            None if params.kind() == CongestionControl::Hpcc => {
                QpSetup::bdp(self.line_rate, self.base_rtt_ns, self.payload)
            }
            None => QpSetup {
                base_rtt_ns: self.base_rtt_ns,
                ..QpSetup::no_window(self.payload)
            },
        };
        let cc = CcConfig {
            params,
            qp,
            int_hops: self.int_hops,
        }
        .emulated(&self.scaling);
        cc.validate()?;
        Ok(cc)
    }

    fn check_scaling(&self) -> Result<(), String> {
        if !(self.scaling.rate.is_finite() && self.scaling.rate > 0.0) {
            return Err(format!(
                "--rate-scale must be a number > 0, got {}",
                self.scaling.rate
            ));
        }
        check_time_scale(self.scaling.time)?;
        if !(self.line_rate.is_finite() && self.line_rate > 0.0) {
            return Err(format!("--line-rate must be > 0, got {}", self.line_rate));
        }
        Ok(())
    }

    /// The sender's configuration: rates divided by the scales, intervals
    /// dilated, validated. Its `dcqcn` is the DCQCN of `cc` (DCQCN's
    /// defaults under another CC); the CC to run is [`Self::cc_config`].
    pub fn sender_config(&self) -> Result<SenderConfig, String> {
        self.check_scaling()?;
        if !(1..=MAX_PAYLOAD as u32).contains(&self.payload) {
            return Err(format!(
                "--payload must be in [1, {MAX_PAYLOAD}] bytes, got {}",
                self.payload
            ));
        }
        if !(self.rto_ms.is_finite() && self.rto_ms > 0.0 && self.rto_ms <= 1e9) {
            return Err(format!(
                "--rto-ms must be a number in (0, 1e9], got {}",
                self.rto_ms
            ));
        }
        let dcqcn = match self.cc {
            CcParams::Dcqcn(p) => p,
            _ => DcqcnParams::default(),
        };
        let dcqcn = DcqcnParams {
            line_rate: self.line_rate,
            ..dcqcn
        }
        .emulated(&self.scaling);
        dcqcn.validate()?;
        Ok(SenderConfig {
            dcqcn,
            payload: self.payload,
            rto_ns: self.scaling.duration_ns((self.rto_ms * 1e6) as u64),
        })
    }
}

/// `--time-scale` must be a positive number small enough that dilated
/// intervals stay representable.
pub fn check_time_scale(t: f64) -> Result<(), String> {
    if t.is_finite() && t > 0.0 && t <= 1e6 {
        Ok(())
    } else {
        Err(format!(
            "--time-scale must be a number in (0, 1e6], got {t}"
        ))
    }
}

/// The sockets of a sender, opened before the run is accepted so that a
/// missing privilege or a taken port is a usage error.
#[derive(Debug)]
pub struct Endpoint {
    raw: RawSender,
    acks: UdpSocket,
    local: Ipv4Addr,
}

impl Endpoint {
    /// The local address is the routing table's source for the receivers
    /// (one for all of them).
    pub fn open(dsts: &[Destination]) -> Result<Endpoint, String> {
        let mut local = None;
        for d in dsts {
            let SocketAddr::V4(a) = d.addr else {
                return Err(format!("--dst {}: rocev2 runs over IPv4 only", d.name));
            };
            let src = net::source_for(*a.ip())
                .map_err(|e| format!("--dst {}: no route to {}: {e}", d.name, a.ip()))?;
            match local {
                None => local = Some(src),
                Some(l) if l != src => {
                    return Err(format!(
                        "the receivers need different source addresses ({l}, {src}); one client sends from one address"
                    ))
                }
                Some(_) => {}
            }
        }
        let local = local.ok_or("no --dst given")?;
        let raw = RawSender::new()
            .map_err(|e| format!("rocev2 needs a raw socket (CAP_NET_RAW, e.g. root): {e}"))?;
        let acks = net::udp_socket(SocketAddrV4::new(local, ROCEV2_PORT)).map_err(|e| {
            format!(
                "cannot bind {local}:{ROCEV2_PORT} for ACKs ({e}); a rocev2 server or another client on this address?"
            )
        })?;
        Ok(Endpoint { raw, acks, local })
    }

    pub fn local(&self) -> Ipv4Addr {
        self.local
    }
}

/// Everything a run needs besides the sockets.
pub struct Run {
    pub name: String,
    pub dsts: Vec<Destination>,
    pub out: File,
    pub out_path: String,
    pub progress_ms: u64,
    pub drain_s: f64,
    pub source: FlowSource,
    pub config: SenderConfig,
    /// The CC of every QP ([`RoceOptions::cc_config`]).
    pub cc: CcConfig,
}

/// Counters of the loop that the sender core does not keep.
#[derive(Debug, Default)]
struct LoopStats {
    started: u64,
    completed: u64,
    failed: u64,
    skipped: u64,
    malformed: u64,
    send_drops: u64,
}

/// The final JSON line's "rocev2" object: the sender's totals, then the
/// CC's name and counts ([`SenderStats`]).
pub fn totals_json(
    s: &SenderStats,
    cc: CongestionControl,
    malformed: u64,
    send_drops: u64,
) -> String {
    /// The sender's totals as the done line carries them.
    #[derive(serde::Serialize)]
    struct Totals {
        packets: u64,
        retransmissions: u64,
        naks: u64,
        ecn_echoes: u64,
        cnps: u64,
        rate_cuts: u64,
        timeouts: u64,
        malformed: u64,
        send_drops: u64,
        cc: &'static str,
        cc_updates: u64,
        cc_fast_reactions: u64,
        int_echoes: u64,
        int_overflows: u64,
        timestamp_echoes: u64,
        window_stalls: u64,
    }
    let totals = Totals {
        packets: s.packets,
        retransmissions: s.retransmissions,
        naks: s.naks,
        ecn_echoes: s.ecn_echoes,
        cnps: s.cnps,
        rate_cuts: s.rate_cuts,
        timeouts: s.timeouts,
        malformed,
        send_drops,
        cc: cc.name(),
        cc_updates: s.cc_updates,
        cc_fast_reactions: s.cc_fast_reactions,
        int_echoes: s.int_echoes,
        int_overflows: s.int_overflows,
        timestamp_echoes: s.timestamp_echoes,
        window_stalls: s.window_stalls,
    };
    serde_json::to_string(&totals).expect("a struct of integers serializes")
}

/// Runs the flows; progress and the final line go to stdout.
pub fn run(run: Run, ep: Endpoint, signals: Signals) -> Result<Summary, String> {
    net::precise_timers();
    let Run {
        name,
        dsts,
        out,
        out_path,
        progress_ms,
        drain_s,
        mut source,
        config,
        cc,
    } = run;
    // Tells this process's messages from an earlier run's at the receiver.
    let rkey = std::process::id()
        ^ (std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos()));
    let mut core = SenderCore::with_cc(config, cc);
    let mut log = FlowLog::new(out);
    // The flows in flight, by arrival sequence number (their tag).
    let mut open: HashMap<u64, FlowRecord> = HashMap::new();
    let mut seq = 0u64;
    let mut st = LoopStats::default();
    let mut max_lag = Duration::ZERO;
    let mut interrupted = None;
    let t0 = Instant::now();
    let clock = || u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let progress_ns = progress_ms.saturating_mul(1_000_000);
    let mut next_progress = (progress_ns > 0).then_some(progress_ns);
    let mut next = source.next_flow();
    let mut drain_deadline: Option<u64> = None;
    let mut rx = vec![0u8; 65_536];
    let mut tx = Vec::with_capacity(MAX_PAYLOAD + 128);
    let mut payload = vec![0u8; MAX_PAYLOAD];
    let fds = [ep.acks.as_raw_fd(), signals.fd()];

    loop {
        if let Some(sig) = signals.take() {
            interrupted = Some(sig);
            break;
        }
        let mut busy = false;
        // ACKs first.
        let now = clock();
        for i in 0..=BATCH {
            if i == BATCH {
                busy = true;
                break;
            }
            let r = match net::recv_tos(&ep.acks, &mut rx) {
                Ok(Some(r)) => r,
                Ok(None) => break,
                // ICMP errors queued on the socket, and the like.
                Err(_) => continue,
            };
            let from = Endpoints {
                src: *r.from.ip(),
                dst: ep.local,
                sport: r.from.port(),
                dport: ROCEV2_PORT,
            };
            match wire::parse_udp_packet(&from, &rx[..r.len]) {
                Ok(Packet {
                    message:
                        Message::Ack {
                            qp,
                            psn,
                            becn,
                            aeth,
                        },
                    int,
                }) => {
                    let nak = matches!(aeth, Aeth::Nak { .. });
                    if let Some(done) = core.on_ack_with(now, qp, psn, nak, becn, int) {
                        let tag = done.tag as u64;
                        if let Some(mut rec) = open.remove(&tag) {
                            rec.status = FlowStatus::Ok;
                            rec.fct_ns = Some(done.fct_ns);
                            rec.min_rtt_us = done.min_rtt_ns.map(|n| (n + 500) / 1000);
                            log.write(tag, rec);
                        }
                        st.completed += 1;
                    }
                }
                Ok(Packet {
                    message: Message::Cnp { qp },
                    ..
                }) => core.on_cnp(now, qp),
                Ok(Packet {
                    message: Message::Data { .. },
                    ..
                })
                | Err(_) => st.malformed += 1,
            }
        }
        // Arrivals.
        let now = clock();
        while let Some(f) = next.take() {
            let at = u64::try_from(f.offset.as_nanos()).unwrap_or(u64::MAX);
            if at > now {
                next = Some(f);
                break;
            }
            max_lag = max_lag.max(Duration::from_nanos(now - at));
            let dst = &dsts[f.dst];
            let addr = match dst.addr {
                SocketAddr::V4(a) => a,
                // Endpoint::open refused IPv6 receivers.
                SocketAddr::V6(_) => SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0),
            };
            let qpn = qpn_of(f.id);
            let sport = udp_sport_of(qpn);
            let mut rec = FlowRecord::arrived(
                f.id,
                &name,
                &dst.name,
                format!("{}:{sport}", ep.local),
                addr.to_string(),
                f.size,
                at,
                f.warmup,
            );
            st.started += 1;
            next = source.next_flow();
            let this = seq;
            seq += 1;
            if core.active() >= MAX_ACTIVE_QPS {
                rec.status = FlowStatus::Failed;
                rec.error = format!(
                    "skipped: {MAX_ACTIVE_QPS} flows were already in flight, the most a rocev2 client holds; the client cannot keep up with this arrival rate"
                );
                st.failed += 1;
                st.skipped += 1;
                log.write(this, rec);
                continue;
            }
            let added = core.add_flow(NewFlow {
                qpn,
                size: f.size,
                arrival_ns: at,
                tag: this as usize,
                dst: addr,
                sport,
                va: f.id,
            });
            match added {
                Ok(()) => {
                    open.insert(this, rec);
                }
                Err(e) => {
                    rec.status = FlowStatus::Failed;
                    rec.error = e;
                    st.failed += 1;
                    log.write(this, rec);
                }
            }
        }
        if next.is_none() && drain_deadline.is_none() {
            drain_deadline = Some(now.saturating_add((drain_s * 1e9) as u64));
        }
        // Departures.
        let now = clock();
        core.expire(now);
        for i in 0..=BATCH {
            if i == BATCH {
                busy = true;
                break;
            }
            let Some(d) = core.pop_departure(now) else {
                break;
            };
            if let Err(e) = send(&ep, &d, rkey, &mut tx, &mut payload) {
                match e.raw_os_error() {
                    // The queue below us is full: the packet is lost, and
                    // go-back-N recovers it.
                    Some(libc::ENOBUFS | libc::EAGAIN) => st.send_drops += 1,
                    _ => {
                        if let Some(tag) = core.abort(d.qpn) {
                            if let Some(mut rec) = open.remove(&(tag as u64)) {
                                rec.status = FlowStatus::Failed;
                                rec.error = format!("send: {e}");
                                log.write(tag as u64, rec);
                            }
                            st.failed += 1;
                        }
                    }
                }
            }
        }
        let now = clock();
        if let Some(p) = next_progress.filter(|&p| p <= now) {
            print_progress(&st, core.active(), now);
            next_progress = Some(p.saturating_add(progress_ns).max(now + 1));
        }
        if let Some(d) = drain_deadline {
            if core.active() == 0 || now >= d {
                break;
            }
        }
        if log.failed() {
            // The output is lost: going on is pointless.
            break;
        }
        if busy {
            continue;
        }
        let deadline = [
            core.next_deadline(),
            next.as_ref()
                .map(|f| u64::try_from(f.offset.as_nanos()).unwrap_or(u64::MAX)),
            next_progress,
            drain_deadline,
        ]
        .into_iter()
        .flatten()
        .min();
        let timeout = deadline.map(|d| d.saturating_sub(clock()));
        net::wait_readable(&fds, timeout).map_err(|e| format!("ppoll: {e}"))?;
    }
    let elapsed = t0.elapsed();
    let stats = core.stats();
    let mut open: Vec<(u64, FlowRecord)> = open.into_iter().collect();
    open.sort_unstable_by_key(|&(seq, _)| seq);
    for (seq, rec) in open {
        log.write(seq, rec);
    }
    let tally = log
        .finish()
        .map_err(|e| format!("cannot write --out {out_path}: {e}"))?;
    let summary = Summary {
        skipped: st.skipped,
        max_arrival_lag: max_lag,
        elapsed,
        interrupted,
        rocev2: Some(totals_json(
            &stats,
            core.cc_config().kind(),
            st.malformed,
            st.send_drops,
        )),
        ..tally
    };
    print_line(&done_line(&summary));
    Ok(summary)
}

/// Encodes and sends one data packet.
fn send(
    ep: &Endpoint,
    d: &Departure,
    rkey: u32,
    tx: &mut Vec<u8>,
    payload: &mut [u8],
) -> io::Result<()> {
    let seg = d.segment;
    let body = &mut payload[..seg.len as usize];
    pattern::fill(d.qpn, seg.offset, body);
    let msg = d.message(rkey, body);
    let endpoints = Endpoints {
        src: ep.local,
        dst: *d.dst.ip(),
        sport: d.sport,
        dport: d.dst.port(),
    };
    let mut block = [0u8; MAX_INT_BLOCK];
    let block = d.block.write(&mut block);
    tx.clear();
    wire::encode_datagram_with(tx, &endpoints, ECN_ECT0, &msg, block).map_err(io::Error::other)?;
    ep.raw.send(tx, *d.dst.ip())
}

fn print_progress(st: &LoopStats, active: usize, now_ns: u64) {
    print_line(&format!(
        "{{\"t_s\":{:.3},\"started\":{},\"completed\":{},\"failed\":{},\"active\":{},\"deferred\":0,\"skipped\":{}}}",
        now_ns as f64 / 1e9,
        st.started,
        st.completed,
        st.failed,
        active,
        st.skipped,
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_scale_divides_rates_and_stretches_times() {
        let o = RoceOptions {
            scaling: Scaling {
                time: 10.0,
                ..Scaling::rates(1000.0)
            },
            ..RoceOptions::default()
        };
        let c = o.sender_config().unwrap();
        // 100G / (1000 x 10) = 10 Mbit/s; 50M / 1e4 = 5 kbit/s.
        assert_eq!((c.dcqcn.line_rate, c.dcqcn.rate_ai), (1e7, 5e3));
        assert_eq!(c.dcqcn.increase_interval_ns, 9_000_000);
        // 4000 ms x 10.
        assert_eq!(c.rto_ns, 40_000_000_000);
        for bad in [0.0, -1.0, f64::NAN, 2e6] {
            let o = RoceOptions {
                scaling: Scaling {
                    time: bad,
                    ..Scaling::NONE
                },
                ..RoceOptions::default()
            };
            assert!(o.sender_config().unwrap_err().contains("--time-scale"));
        }
    }
}

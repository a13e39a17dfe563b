//! The NDP sender's event loop over UDP sockets (`lcmp-traffic client
//! --transport ndp`), as the engine's host drives [`NdpSender`]
//! (`lcmp_engine::ndp_host`).
//!
//! One thread. Each turn: take a pending interrupt; handle every waiting
//! ACK, NACK and pull (control first, as the engine's NIC gives them
//! priority); start the flows whose arrival has come (one
//! [`FlowRecord`] each, in the client's `flows.csv` form); fire the
//! retransmission timers; send data packets while the emulated NIC is free
//! (one packet per its frame's time at the line rate: the initial window
//! leaves at line rate, as from the engine's NIC); print progress. Then
//! wait on the socket until the earliest of: the NIC free with data in
//! line, a retransmission timer, the next arrival, the next progress line,
//! the end of the drain. Nothing sleeps a fixed time.
//!
//! With [`Serve`] (`--serve`) the endpoint also receives: a data packet
//! goes to a [`Receiving`], answered as `server --transport ndp` answers
//! it, its pulls released and its idle flows swept in the same turns (the
//! wait includes its next pull or sweep). Once the flows are done and the
//! done line printed, the loop hands over to [`Receiving::serve`] until
//! the interrupt, which is then the normal end.
//!
//! FCT: from the flow's arrival to the ACK of its last unacked packet;
//! `src` is the sender's `IP:sport` (the flow's entropy port), `dst` the
//! receiver's `IP:7247`, `min_rtt_us` the smallest departure-to-ACK time
//! of its packets sent once. Data payloads are [`pattern`]'s bytes of the
//! flow id at the packet's offset, as the engine's hosts send them.

use std::collections::HashMap;
use std::fs::File;
use std::net::{IpAddr, Ipv4Addr, SocketAddrV4};
use std::ops::Range;
use std::time::{Duration, Instant};

use lcmp_wire::ndp::{Header, Kind, FLAG_LAST, FLAG_RETRANSMISSION};
use serde::Serialize;

use super::sender::{Departure, NdpSender, NewFlow, SenderStats};
use super::server::{Receiving, ServeStats, ServerConfig};
use super::socket::{self, decode, encode, Endpoint, Interrupt, BATCH, UDP_PORT};
use super::{flow_id_of, udp_sport_of, NdpParams, FRAME_OVERHEAD};
use crate::client::{done_line, print_line, Destination, FlowLog, Summary};
use crate::flows::FlowSource;
use crate::record::{FlowRecord, FlowStatus};
use crate::rocev2::{net, pattern};

/// Flows a client has in flight. An arrival that finds this many is
/// skipped (written at once as failed, error "skipped: ..."), as the other
/// transports shed what they cannot hold.
pub const MAX_ACTIVE_FLOWS: usize = 1 << 16;

/// Everything a run needs besides the endpoint.
pub struct Run {
    pub name: String,
    pub dsts: Vec<Destination>,
    pub out: File,
    pub out_path: String,
    pub progress_ms: u64,
    pub drain_s: f64,
    pub source: FlowSource,
    /// As emulated ([`super::socket::NdpOptions::resolve`]).
    pub params: NdpParams,
    /// The NIC's emulated rate, bit/s.
    pub line_bps: u64,
}

/// The receiving side of a client that also serves (`--serve`).
#[derive(Debug, Clone)]
pub struct Serve {
    /// As `server --transport ndp` runs (the client's payload and line
    /// rate).
    pub config: ServerConfig,
    /// Data arriving in this span of the run's clock (ns since its start)
    /// is counted in [`ServeStats::window_bytes`].
    pub window_ns: Range<u64>,
}

/// The loop's counters beyond the sender's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ClientCounters {
    /// Datagrams on port 7247 that are no NDP control packet (data
    /// packets too, unless serving).
    pub malformed: u64,
    /// Data packets the socket's queue refused (lost; the timeout resends).
    pub send_drops: u64,
    /// Other send errors (no route, ...); the timeout resends.
    pub send_errors: u64,
}

/// How a run ended.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub summary: Summary,
    pub sender: SenderStats,
    pub counters: ClientCounters,
    /// The receiving side's totals, when serving.
    pub receiver: Option<ServeStats>,
}

/// The done line's "ndp" object: the sender's and the loop's totals.
pub fn totals_json(s: &SenderStats, c: &ClientCounters) -> String {
    #[derive(Serialize)]
    struct Totals<'a> {
        #[serde(flatten)]
        sender: &'a SenderStats,
        #[serde(flatten)]
        counters: &'a ClientCounters,
    }
    serde_json::to_string(&Totals {
        sender: s,
        counters: c,
    })
    .expect("a struct of integers serializes")
}

/// The picoseconds a frame of `bytes` takes at `bps`.
fn frame_ps(bytes: u64, bps: u64) -> u64 {
    let ps = u128::from(bytes) * 8 * 1_000_000_000_000 / u128::from(bps.max(1));
    u64::try_from(ps).unwrap_or(u64::MAX)
}

/// Runs the flows; progress and the final line (its transport totals
/// under "ndp") go to stdout.
pub fn run(run: Run, ep: &mut Endpoint, stop: &impl Interrupt) -> Result<Outcome, String> {
    run_and_serve(run, None, ep, stop)
}

/// [`run`], and with `serve` the endpoint's data answered too, during the
/// flows and after them until `stop` fires (then not an interruption).
pub fn run_and_serve(
    run: Run,
    serve: Option<Serve>,
    ep: &mut Endpoint,
    stop: &impl Interrupt,
) -> Result<Outcome, String> {
    net::precise_timers();
    let Run {
        name,
        dsts,
        out,
        out_path,
        progress_ms,
        drain_s,
        mut source,
        params,
        line_bps,
    } = run;
    let mut sender = NdpSender::new(params);
    let mut log = FlowLog::new(out);
    // The flows in flight, by arrival sequence number (their tag).
    let mut open: HashMap<u64, FlowRecord> = HashMap::new();
    let mut seq = 0u64;
    let mut c = ClientCounters::default();
    let (mut started, mut completed, mut failed, mut skipped) = (0u64, 0u64, 0u64, 0u64);
    let mut max_lag = Duration::ZERO;
    let mut interrupted = None;
    let t0 = Instant::now();
    let clock = || u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let progress_ns = progress_ms.saturating_mul(1_000_000);
    let mut next_progress = (progress_ns > 0).then_some(progress_ns);
    let mut next = source.next_flow();
    let mut drain_deadline: Option<u64> = None;
    // When the emulated NIC has finished the last data frame, ps.
    let mut nic_free_ps = 0u64;
    let mut rx = vec![0u8; 65_536];
    let mut tx = Vec::with_capacity(socket::MAX_PAYLOAD as usize + 64);
    let local = ep.local();
    let mut receiving = serve.map(|s| Receiving::new(&s.config).with_window(s.window_ns));

    loop {
        if let Some(sig) = stop.take() {
            interrupted = Some(sig);
            break;
        }
        let mut busy = false;
        // Control packets first.
        for i in 0..=BATCH {
            if i == BATCH {
                busy = true;
                break;
            }
            let (len, from) = match ep.recv(&mut rx) {
                Ok(Some(r)) => r,
                Ok(None) => break,
                // ICMP errors queued on the socket, and the like.
                Err(_) => continue,
            };
            let now = clock();
            let Some((h, body)) = decode(&rx[..len]) else {
                c.malformed += 1;
                if let Some(r) = receiving.as_mut() {
                    r.not_data();
                }
                continue;
            };
            match h.kind {
                Kind::Ack => {
                    if let Some(done) = sender.on_ack(now, h.flow, h.seq, h.value) {
                        let tag = done.tag as u64;
                        if let Some(mut rec) = open.remove(&tag) {
                            rec.status = FlowStatus::Ok;
                            rec.fct_ns = Some(done.fct_ns);
                            rec.min_rtt_us = done.min_rtt_ns.map(|n| (n + 500) / 1000);
                            log.write(tag, rec);
                        }
                        completed += 1;
                    }
                }
                Kind::Nack => sender.on_nack(now, h.flow, h.seq, h.value),
                Kind::Pull => sender.on_pull(h.flow, h.value),
                Kind::Data => match receiving.as_mut() {
                    Some(r) => r.on_data(ep, now, from, &h, body),
                    // A sender alone receives no data: another sender's
                    // receiver answers elsewhere.
                    None => c.malformed += 1,
                },
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
            let dst_ip = match dst.addr.ip() {
                IpAddr::V4(ip) => ip,
                // Endpoint::for_receivers refused IPv6 receivers.
                IpAddr::V6(_) => Ipv4Addr::UNSPECIFIED,
            };
            let id = flow_id_of(f.id);
            let sport = udp_sport_of(id);
            let mut rec = FlowRecord::arrived(
                f.id,
                &name,
                &dst.name,
                format!("{local}:{sport}"),
                SocketAddrV4::new(dst_ip, UDP_PORT).to_string(),
                f.size,
                at,
                f.warmup,
            );
            started += 1;
            next = source.next_flow();
            let this = seq;
            seq += 1;
            let added = if sender.active() >= MAX_ACTIVE_FLOWS {
                skipped += 1;
                Err(format!(
                    "skipped: {MAX_ACTIVE_FLOWS} flows were already in flight, the most an ndp client holds; the client cannot keep up with this arrival rate"
                ))
            } else {
                ep.open_port(sport)
                    .map_err(|e| format!("cannot bind source port {local}:{sport}: {e}"))
                    .and_then(|()| {
                        sender.add_flow(NewFlow {
                            id,
                            size: f.size,
                            arrival_ns: at,
                            tag: this as usize,
                            dst: dst_ip,
                            sport,
                        })
                    })
            };
            match added {
                Ok(()) => {
                    open.insert(this, rec);
                }
                Err(e) => {
                    rec.status = FlowStatus::Failed;
                    rec.error = e;
                    failed += 1;
                    log.write(this, rec);
                }
            }
        }
        if next.is_none() && drain_deadline.is_none() {
            drain_deadline = Some(now.saturating_add((drain_s * 1e9) as u64));
        }
        // Timers, then data while the NIC is free.
        let now = clock();
        sender.expire(now);
        let now_ps = now.saturating_mul(1000);
        for i in 0..=BATCH {
            if i == BATCH {
                busy = true;
                break;
            }
            if nic_free_ps > now_ps {
                break;
            }
            let Some(d) = sender.pop_departure(now) else {
                break;
            };
            let wire = FRAME_OVERHEAD as u64 + u64::from(d.len);
            nic_free_ps = nic_free_ps
                .max(now_ps)
                .saturating_add(frame_ps(wire, line_bps));
            if let Err(e) = send_data(ep, &d, &mut tx) {
                if socket::transient(&e) {
                    c.send_drops += 1;
                } else {
                    c.send_errors += 1;
                }
            }
        }
        let now = clock();
        if let Some(r) = receiving.as_mut() {
            r.release_pulls(ep, now);
            r.sweep(now);
        }
        if let Some(p) = next_progress.filter(|&p| p <= now) {
            print_line(&format!(
                "{{\"t_s\":{:.3},\"started\":{started},\"completed\":{completed},\"failed\":{failed},\"active\":{},\"deferred\":0,\"skipped\":{skipped}}}",
                now as f64 / 1e9,
                sender.active(),
            ));
            next_progress = Some(p.saturating_add(progress_ns).max(now + 1));
        }
        if let Some(d) = drain_deadline {
            if sender.active() == 0 || now >= d {
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
        let data = sender.has_departures().then(|| nic_free_ps.div_ceil(1000));
        let deadline = [
            data,
            sender.next_timer_ns(),
            next.as_ref()
                .map(|f| u64::try_from(f.offset.as_nanos()).unwrap_or(u64::MAX)),
            next_progress,
            drain_deadline,
            receiving.as_ref().map(Receiving::next_deadline),
        ]
        .into_iter()
        .flatten()
        .min();
        let timeout = deadline.map(|d| d.saturating_sub(clock()));
        net::wait_readable(&[ep.fd(), stop.fd()], timeout).map_err(|e| format!("ppoll: {e}"))?;
    }
    let elapsed = t0.elapsed();
    let mut open: Vec<(u64, FlowRecord)> = open.into_iter().collect();
    open.sort_unstable_by_key(|&(seq, _)| seq);
    for (seq, rec) in open {
        log.write(seq, rec);
    }
    let tally = log
        .finish()
        .map_err(|e| format!("cannot write --out {out_path}: {e}"))?;
    let summary = Summary {
        skipped,
        max_arrival_lag: max_lag,
        elapsed,
        interrupted,
        ..tally
    };
    let stats = sender.stats();
    // The done line with the transport's totals under its own name.
    let mut line = done_line(&summary);
    line.pop();
    line.push_str(&format!(",\"ndp\":{}}}", totals_json(&stats, &c)));
    print_line(&line);
    if let Some(r) = receiving.as_mut().filter(|_| interrupted.is_none()) {
        // The flows are done; the signal that ends serving is the
        // normal end.
        r.serve(ep, stop, t0)?;
    }
    Ok(Outcome {
        summary,
        sender: stats,
        counters: c,
        receiver: receiving.map(|r| r.serve_stats()),
    })
}

/// Encodes and sends one data packet.
fn send_data(ep: &mut Endpoint, d: &Departure, tx: &mut Vec<u8>) -> std::io::Result<()> {
    let mut flags = 0;
    if d.last {
        flags |= FLAG_LAST;
    }
    if d.retransmission {
        flags |= FLAG_RETRANSMISSION;
    }
    let header = Header {
        kind: Kind::Data,
        flags,
        flow: d.id,
        seq: d.seq,
        value: d.packets,
    };
    pattern::fill(d.id, d.offset, encode(tx, &header, d.len as usize));
    ep.send(d.sport, d.dst, tx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_take_their_bits_at_the_line_rate() {
        // 1500 bytes = 12_000 bits: 120 us at 100 Mbit/s, 1.2 us at 10G;
        // 58 bytes at 10G: 46.4 ns.
        assert_eq!(frame_ps(1500, 100_000_000), 120_000_000);
        assert_eq!(frame_ps(1500, 10_000_000_000), 1_200_000);
        assert_eq!(frame_ps(58, 10_000_000_000), 46_400);
    }

    #[test]
    fn the_done_line_object_names_the_totals() {
        let s = SenderStats {
            packets: 7,
            nacks: 2,
            retransmissions: 2,
            ..SenderStats::default()
        };
        let c = ClientCounters {
            send_drops: 1,
            ..ClientCounters::default()
        };
        let v: serde_json::Value = serde_json::from_str(&totals_json(&s, &c)).unwrap();
        assert_eq!(
            (
                &v["packets"],
                &v["nacks"],
                &v["retransmissions"],
                &v["send_drops"]
            ),
            (&7.into(), &2.into(), &2.into(), &1.into())
        );
    }
}

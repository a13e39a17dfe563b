//! The NDP receiver's event loop over UDP sockets (`lcmp-traffic server
//! --transport ndp`), as the engine's host drives [`NdpReceiver`]
//! (`lcmp_engine::ndp_host`).
//!
//! One thread, one address. Each turn: take a pending interrupt; answer
//! every waiting data packet at once (ACK if whole, NACK if a switch
//! trimmed it to its headers), from the flow's source port to the
//! sender's port 7247; release the pulls the pacer has due (one per full
//! data frame's time at the link rate, round-robin over the flows); drop
//! the state of flows idle for the idle timeout. Then wait on the socket
//! until the next pull is due or the next sweep. Nothing sleeps a fixed
//! time.
//!
//! Payload bytes are counted once per packet ([`RxStats::bytes`]) and
//! checked against [`pattern`] at the packet's offset (its number times
//! the payload size the receiver is given, which must be the sender's).

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use lcmp_wire::ndp::{Header, Kind};
use serde::Serialize;

use super::receiver::{NdpReceiver, ReceiverConfig, Reply, RxStats};
use super::socket::{self, decode, encode, Endpoint, Interrupt, BATCH};
use super::NdpParams;
use crate::rocev2::{net, pattern};

/// What a receiver is run with.
#[derive(Debug, Clone, Copy)]
pub struct ServerConfig {
    /// As emulated: the payload size (the pull gap's frame, and where a
    /// packet's bytes start).
    pub params: NdpParams,
    /// The host link's emulated rate, bit/s: one pull per full data
    /// frame's time at it.
    pub line_bps: u64,
    /// A flow's state is dropped after this long without a packet.
    pub idle_timeout: Duration,
}

/// The receiver's totals: the state machine's and the loop's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ServerStats {
    #[serde(flatten)]
    pub rx: RxStats,
    /// Whole data packets whose payload is not the flow's bytes at their
    /// offset.
    pub corrupt: u64,
    /// Datagrams on port 7247 that are no NDP data packet (control
    /// packets for a sender on this address included).
    pub not_data: u64,
    /// Answers and pulls the socket's queue refused (lost).
    pub send_drops: u64,
    /// Other send errors.
    pub send_errors: u64,
}

impl ServerStats {
    /// One line for stderr.
    pub fn summary(&self) -> String {
        format!(
            "{} flows completed, {} bytes, {} data packets ({} trimmed, {} duplicates, {} malformed, {} corrupt), {} acks, {} nacks, {} pulls, {} not data, {} send drops, {} send errors",
            self.rx.flows_completed,
            self.rx.bytes,
            self.rx.data_packets,
            self.rx.trimmed,
            self.rx.duplicates,
            self.rx.malformed,
            self.corrupt,
            self.rx.acks_sent,
            self.rx.nacks_sent,
            self.rx.pulls_sent,
            self.not_data,
            self.send_drops,
            self.send_errors,
        )
    }

    /// The counters as one JSON object.
    pub fn json(&self) -> String {
        serde_json::to_string(self).expect("a struct of integers serializes")
    }
}

/// Sends a header-only packet, counting a failure.
fn send_control(
    ep: &mut Endpoint,
    st: &mut ServerStats,
    tx: &mut Vec<u8>,
    sport: u16,
    to: Ipv4Addr,
    h: &Header,
) {
    encode(tx, h, 0);
    if let Err(e) = ep.send(sport, to, tx) {
        if socket::transient(&e) {
            st.send_drops += 1;
        } else {
            st.send_errors += 1;
        }
    }
}

/// Answers data on `ep` until `stop` fires; the totals.
pub fn serve(
    cfg: &ServerConfig,
    ep: &mut Endpoint,
    stop: &impl Interrupt,
) -> Result<ServerStats, String> {
    net::precise_timers();
    let mut rx_state = NdpReceiver::new(ReceiverConfig::for_link(&cfg.params, cfg.line_bps));
    let mut st = ServerStats::default();
    let payload = u64::from(cfg.params.payload);
    let idle_ns = u64::try_from(cfg.idle_timeout.as_nanos()).unwrap_or(u64::MAX);
    let sweep_ns = (idle_ns / 4).max(1_000_000);
    let t0 = Instant::now();
    let clock = || u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let mut next_sweep = sweep_ns;
    let mut rx = vec![0u8; 65_536];
    let mut tx = Vec::with_capacity(64);
    loop {
        if stop.take().is_some() {
            break;
        }
        let mut busy = false;
        for i in 0..=BATCH {
            if i == BATCH {
                busy = true;
                break;
            }
            let (len, from) = match ep.recv(&mut rx) {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(_) => continue,
            };
            let now = clock();
            let Some((h, body)) = decode(&rx[..len]).filter(|(h, _)| h.kind == Kind::Data) else {
                st.not_data += 1;
                continue;
            };
            let trimmed = h.trimmed();
            // A trimmed packet carries nothing to check; one out of range
            // is refused by the receiver below.
            if !trimmed && h.seq < h.value {
                let offset = u64::from(h.seq) * payload;
                if !pattern::matches(h.flow, offset, body) {
                    st.corrupt += 1;
                }
            }
            let len = u32::try_from(body.len()).unwrap_or(u32::MAX);
            let (src, sport) = (*from.ip(), from.port());
            let answer = rx_state.on_data(
                now,
                src,
                sport,
                h.flow,
                h.seq,
                h.value,
                trimmed,
                if trimmed { 0 } else { len },
            );
            if let Some(a) = answer {
                let reply = Header {
                    kind: match a.reply {
                        Reply::Ack => Kind::Ack,
                        Reply::Nack => Kind::Nack,
                    },
                    flags: 0,
                    flow: a.flow,
                    seq: a.seq,
                    value: a.pulls,
                };
                send_control(ep, &mut st, &mut tx, sport, src, &reply);
            }
        }
        let now = clock();
        while let Some(p) = rx_state.pop_pull(now) {
            let pull = Header {
                kind: Kind::Pull,
                flags: 0,
                flow: p.flow,
                seq: 0,
                value: p.pulls,
            };
            send_control(ep, &mut st, &mut tx, p.sport, p.to, &pull);
        }
        if now >= next_sweep {
            rx_state.expire(now.saturating_sub(idle_ns));
            next_sweep = now.saturating_add(sweep_ns);
        }
        if busy {
            continue;
        }
        let deadline = rx_state
            .next_pull_ns()
            .map_or(next_sweep, |p| p.min(next_sweep));
        let timeout = deadline.saturating_sub(clock());
        net::wait_readable(&[ep.fd(), stop.fd()], Some(timeout))
            .map_err(|e| format!("ppoll: {e}"))?;
    }
    Ok(ServerStats {
        rx: rx_state.stats,
        ..st
    })
}

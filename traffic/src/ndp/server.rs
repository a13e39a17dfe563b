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
//! The per-datagram work is [`Receiving`]'s, so that a sender's loop that
//! also receives (`client --transport ndp --serve`, [`super::client`])
//! answers data as this loop does, and hands over to [`Receiving::serve`]
//! once its own flows are done.
//!
//! Payload bytes are counted once per packet ([`RxStats::bytes`]) and
//! checked against [`pattern`] at the packet's offset (its number times
//! the payload size the receiver is given, which must be the sender's).

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::ops::Range;
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

/// The counters of a client that also receives (`client --serve
/// --stats`): the server's object and one more field.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ServeStats {
    #[serde(flatten)]
    pub server: ServerStats,
    /// Payload bytes delivered (as [`RxStats::bytes`]: new data, not
    /// duplicates) whose packet arrived within the measurement window.
    pub window_bytes: u64,
}

impl ServeStats {
    /// The counters as one JSON object.
    pub fn json(&self) -> String {
        serde_json::to_string(self).expect("a struct of integers serializes")
    }
}

/// Where answers and pulls go: an [`Endpoint`], or a test's recorder.
pub trait Transmit {
    /// Sends `datagram` from source port `sport` to (`to`, 7247).
    fn send(&mut self, sport: u16, to: Ipv4Addr, datagram: &[u8]) -> io::Result<()>;
}

impl Transmit for Endpoint {
    fn send(&mut self, sport: u16, to: Ipv4Addr, datagram: &[u8]) -> io::Result<()> {
        Endpoint::send(self, sport, to, datagram)
    }
}

/// A host's receiving side: the state machine, the loop's counters, the
/// idle sweep, and the bytes of the measurement window. Times are
/// nanoseconds of the caller's clock, which starts at 0.
#[derive(Debug)]
pub struct Receiving {
    rx: NdpReceiver,
    st: ServerStats,
    tx: Vec<u8>,
    payload: u64,
    idle_ns: u64,
    sweep_ns: u64,
    next_sweep: u64,
    window: Range<u64>,
    window_bytes: u64,
}

impl Receiving {
    /// A receiver without flows; the first sweep a quarter of the idle
    /// timeout (at least 1 ms) after time 0. No window.
    pub fn new(cfg: &ServerConfig) -> Receiving {
        let idle_ns = u64::try_from(cfg.idle_timeout.as_nanos()).unwrap_or(u64::MAX);
        let sweep_ns = (idle_ns / 4).max(1_000_000);
        Receiving {
            rx: NdpReceiver::new(ReceiverConfig::for_link(&cfg.params, cfg.line_bps)),
            st: ServerStats::default(),
            tx: Vec::with_capacity(64),
            payload: u64::from(cfg.params.payload),
            idle_ns,
            sweep_ns,
            next_sweep: sweep_ns,
            window: 0..0,
            window_bytes: 0,
        }
    }

    /// Counts the new payload bytes of packets arriving in `window_ns`
    /// (from its start, inclusive, to its end, exclusive).
    pub fn with_window(mut self, window_ns: Range<u64>) -> Receiving {
        self.window = window_ns;
        self
    }

    /// A datagram on port 7247 that is no NDP data packet.
    pub fn not_data(&mut self) {
        self.st.not_data += 1;
    }

    /// Data packet `h` with payload `body` from `from`, at `now`: checked
    /// against its flow's pattern, counted, and answered at once.
    pub fn on_data(
        &mut self,
        out: &mut impl Transmit,
        now: u64,
        from: SocketAddrV4,
        h: &Header,
        body: &[u8],
    ) {
        let trimmed = h.trimmed();
        // A trimmed packet carries nothing to check; one out of range is
        // refused by the receiver below.
        if !trimmed && h.seq < h.value {
            let offset = u64::from(h.seq) * self.payload;
            if !pattern::matches(h.flow, offset, body) {
                self.st.corrupt += 1;
            }
        }
        let len = u32::try_from(body.len()).unwrap_or(u32::MAX);
        let (src, sport) = (*from.ip(), from.port());
        let before = self.rx.stats.bytes;
        let answer = self.rx.on_data(
            now,
            src,
            sport,
            h.flow,
            h.seq,
            h.value,
            trimmed,
            if trimmed { 0 } else { len },
        );
        if self.window.contains(&now) {
            self.window_bytes += self.rx.stats.bytes - before;
        }
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
            self.send_control(out, sport, src, &reply);
        }
    }

    /// Sends the pulls due at `now`.
    pub fn release_pulls(&mut self, out: &mut impl Transmit, now: u64) {
        while let Some(p) = self.rx.pop_pull(now) {
            let pull = Header {
                kind: Kind::Pull,
                flags: 0,
                flow: p.flow,
                seq: 0,
                value: p.pulls,
            };
            self.send_control(out, p.sport, p.to, &pull);
        }
    }

    /// Drops the flows idle for the idle timeout, if a sweep is due.
    pub fn sweep(&mut self, now: u64) {
        if now >= self.next_sweep {
            self.rx.expire(now.saturating_sub(self.idle_ns));
            self.next_sweep = now.saturating_add(self.sweep_ns);
        }
    }

    /// When there is work again without a packet: the next pull or sweep.
    pub fn next_deadline(&self) -> u64 {
        self.rx
            .next_pull_ns()
            .map_or(self.next_sweep, |p| p.min(self.next_sweep))
    }

    /// The totals so far.
    pub fn stats(&self) -> ServerStats {
        ServerStats {
            rx: self.rx.stats,
            ..self.st
        }
    }

    /// The totals with the window's bytes.
    pub fn serve_stats(&self) -> ServeStats {
        ServeStats {
            server: self.stats(),
            window_bytes: self.window_bytes,
        }
    }

    /// Sends a header-only packet, counting a failure.
    fn send_control(&mut self, out: &mut impl Transmit, sport: u16, to: Ipv4Addr, h: &Header) {
        encode(&mut self.tx, h, 0);
        if let Err(e) = out.send(sport, to, &self.tx) {
            if socket::transient(&e) {
                self.st.send_drops += 1;
            } else {
                self.st.send_errors += 1;
            }
        }
    }

    /// Answers data on `ep` until `stop` fires, on the clock started at
    /// `t0`; the signal that ended it.
    pub fn serve(
        &mut self,
        ep: &mut Endpoint,
        stop: &impl Interrupt,
        t0: Instant,
    ) -> Result<i32, String> {
        let clock = || u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let mut rx = vec![0u8; 65_536];
        loop {
            if let Some(sig) = stop.take() {
                return Ok(sig);
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
                match decode(&rx[..len]).filter(|(h, _)| h.kind == Kind::Data) {
                    Some((h, body)) => self.on_data(ep, now, from, &h, body),
                    None => self.not_data(),
                }
            }
            let now = clock();
            self.release_pulls(ep, now);
            self.sweep(now);
            if busy {
                continue;
            }
            let timeout = self.next_deadline().saturating_sub(clock());
            net::wait_readable(&[ep.fd(), stop.fd()], Some(timeout))
                .map_err(|e| format!("ppoll: {e}"))?;
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
    let t0 = Instant::now();
    let mut receiving = Receiving::new(cfg);
    receiving.serve(ep, stop, t0)?;
    Ok(receiving.stats())
}

#[cfg(test)]
mod tests {
    use super::*;
    use lcmp_wire::ndp::FLAG_TRIMMED;

    /// Records what would be sent: (source port, to, header).
    #[derive(Default)]
    struct Sent(Vec<(u16, Ipv4Addr, Header)>);

    impl Transmit for Sent {
        fn send(&mut self, sport: u16, to: Ipv4Addr, datagram: &[u8]) -> io::Result<()> {
            let (h, body) = decode(datagram).expect("an NDP header");
            assert!(body.is_empty(), "answers and pulls carry no payload");
            self.0.push((sport, to, h));
            Ok(())
        }
    }

    const SRC: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    /// 1000-byte payloads; the link unshaped (every pull due at once);
    /// counting the window [1000, 2000) ns.
    fn receiving() -> Receiving {
        Receiving::new(&ServerConfig {
            params: NdpParams {
                payload: 1000,
                ..NdpParams::default()
            },
            line_bps: 0,
            idle_timeout: Duration::from_secs(60),
        })
        .with_window(1000..2000)
    }

    /// Packet `seq` of 3 of flow `flow`, whole with the flow's bytes at
    /// its offset (the last one 500 bytes: a 2500-byte flow), at `now`.
    fn data(r: &mut Receiving, out: &mut Sent, now: u64, flow: u32, seq: u32, flags: u8) {
        let h = Header {
            kind: Kind::Data,
            flags,
            flow,
            seq,
            value: 3,
        };
        let mut body = vec![
            0u8;
            if flags & FLAG_TRIMMED != 0 {
                0
            } else if seq == 2 {
                500
            } else {
                1000
            }
        ];
        pattern::fill(flow, u64::from(seq) * 1000, &mut body);
        r.on_data(out, now, SocketAddrV4::new(SRC, 50_000), &h, &body);
    }

    #[test]
    fn the_window_counts_new_bytes_arriving_from_its_start_to_before_its_end() {
        let mut r = receiving();
        let mut out = Sent::default();
        // Before the window: 1000 bytes, none of them in it.
        data(&mut r, &mut out, 999, 1, 0, 0);
        assert_eq!(
            (r.stats().rx.bytes, r.serve_stats().window_bytes),
            (1000, 0)
        );
        // At its start: in.
        data(&mut r, &mut out, 1000, 1, 1, 0);
        // The same packet again: a duplicate, no new bytes.
        data(&mut r, &mut out, 1500, 1, 1, 0);
        // Trimmed: nothing delivered.
        data(&mut r, &mut out, 1600, 1, 2, FLAG_TRIMMED);
        // The last nanosecond in it: the 500 bytes of the last packet.
        data(&mut r, &mut out, 1999, 1, 2, 0);
        // At its end: out.
        data(&mut r, &mut out, 2000, 2, 0, 0);
        let s = r.serve_stats();
        // 1000 + 1000 + 500 + 1000 delivered; 1000 + 500 in the window.
        assert_eq!((s.server.rx.bytes, s.window_bytes), (3500, 1500));
        assert_eq!((s.server.rx.duplicates, s.server.rx.trimmed), (1, 1));
        assert_eq!((s.server.rx.flows_completed, s.server.corrupt), (1, 0));
        // The JSON is the server's object and window_bytes.
        let v: serde_json::Value = serde_json::from_str(&s.json()).unwrap();
        let server: serde_json::Value = serde_json::from_str(&s.server.json()).unwrap();
        let mut keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        keys.retain(|k| *k != "window_bytes");
        assert_eq!(keys, server.as_object().unwrap().keys().collect::<Vec<_>>());
        assert_eq!(
            (&v["bytes"], &v["window_bytes"]),
            (&3500.into(), &1500.into())
        );
    }

    #[test]
    fn data_is_answered_at_once_and_wrong_bytes_counted_corrupt() {
        let mut r = receiving();
        let mut out = Sent::default();
        data(&mut r, &mut out, 10, 7, 0, 0);
        data(&mut r, &mut out, 20, 7, 1, FLAG_TRIMMED);
        // Flow 8's bytes under flow 7's id: answered, and corrupt.
        let h = Header {
            kind: Kind::Data,
            flags: 0,
            flow: 7,
            seq: 2,
            value: 3,
        };
        let mut body = vec![0u8; 500];
        pattern::fill(8, 2000, &mut body);
        r.on_data(&mut out, 30, SocketAddrV4::new(SRC, 50_000), &h, &body);
        let kinds: Vec<(u16, Ipv4Addr, Kind, u32)> = out
            .0
            .iter()
            .map(|(p, to, h)| (*p, *to, h.kind, h.seq))
            .collect();
        // To the flow's sender at its source port: ACK 0, NACK 1, ACK 2.
        assert_eq!(
            kinds,
            [
                (50_000, SRC, Kind::Ack, 0),
                (50_000, SRC, Kind::Nack, 1),
                (50_000, SRC, Kind::Ack, 2)
            ]
        );
        assert_eq!(r.stats().corrupt, 1);
        // Packet 1 never came whole: the flow runs, and each of its three
        // packets queued a pull; the first due when it was queued (10 ns),
        // the others right after it on an unshaped link.
        assert_eq!(r.next_deadline(), 10);
        r.release_pulls(&mut out, 30);
        let pulls: Vec<(Kind, u32)> = out.0[3..]
            .iter()
            .map(|(_, _, h)| (h.kind, h.value))
            .collect();
        assert_eq!(pulls, [(Kind::Pull, 1), (Kind::Pull, 2), (Kind::Pull, 3)]);
        // Nothing waits: the next deadline is the first sweep, 60 s / 4.
        assert_eq!(r.next_deadline(), 15_000_000_000);
    }
}

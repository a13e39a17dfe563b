//! The RoCEv2 receiver (`lcmp-traffic server --transport rocev2`): one UDP
//! socket per listen address, one thread.
//!
//! Each data packet is matched to its message by (source address,
//! destination QP); the first packet (RETH) gives the size, and a First or
//! Only at PSN 0 with a different (VA, R_Key) starts a new message on that
//! QP. Go-back-N decides ([`GbnReceiver`]); every accepted, duplicate or
//! NAKed packet is answered to the sender's address, port 4791: an ACK
//! with the next expected PSN, or a NAK for it. A CE-marked packet sets the
//! BECN bit (the ECN echo) of that answer, or, with `notify cnp`, makes the
//! receiver send a CNP as well (the answer then has no echo). A data
//! packet's INT / timestamp block is echoed in its answer, whatever the
//! sender's CC ([`super::cc::CongestionControl::feedback`]): the hops the
//! switches wrote with the overflow flag (an echo block), or the send time
//! (a timestamp echo), so one server serves every CC. A duplicate's
//! re-ACK echoes nothing (no congestion signal, as for the ECN echo).
//! Accepted payload bytes are checked against [`pattern`]. Message state lives until
//! nothing arrived for it for the idle timeout, so a sender that lost the
//! last ACK gets it again when it retransmits.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use super::gbn::{GbnReceiver, RxVerdict};
use super::net::{self, Signals};
use super::pattern;
use super::wire::{
    self, Aeth, DataOpcode, Endpoints, IntBlock, IntKind, Message, Packet, Reth, CREDIT_INVALID,
    ECN_CE, ECN_MASK, MAX_INT_BLOCK, NAK_PSN_SEQUENCE, ROCEV2_PORT,
};

/// Errors printed on stderr before they are only counted.
const ERRORS_PRINTED: u64 = 10;
const BATCH: usize = 256;

/// How congestion is signalled back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Notify {
    /// The BECN bit of the ACK/NAK (the simulator's model).
    Echo,
    /// A separate CNP per CE-marked packet.
    Cnp,
}

#[derive(Debug, Clone)]
pub struct RoceServerConfig {
    pub listen: Vec<SocketAddrV4>,
    pub notify: Notify,
    pub nak_interval_ns: u64,
    /// Message state with no packet for this long is dropped.
    pub idle_timeout: Duration,
}

/// The receiver's counters; [`RxStats::json`] writes them with these field
/// names, in this order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct RxStats {
    pub flows_completed: u64,
    pub bytes: u64,
    pub data_packets: u64,
    pub ce_marked: u64,
    pub acks_sent: u64,
    pub ecn_echoes_sent: u64,
    pub cnps_sent: u64,
    pub naks_sent: u64,
    pub out_of_order: u64,
    pub duplicates: u64,
    pub payload_errors: u64,
    /// Not RoCEv2, a bad ICRC, or a packet that contradicts its message.
    pub malformed: u64,
    pub send_errors: u64,
    /// Answers that echoed INT hops (HPCC senders).
    pub int_echoes_sent: u64,
    /// Answers that echoed a send time (TIMELY senders).
    pub timestamp_echoes_sent: u64,
}

impl RxStats {
    pub fn summary(&self) -> String {
        format!(
            "rocev2: served {} flows ({} payload bytes); {} data packets, {} CE-marked, {} ACKs, {} ECN echoes, {} CNPs, {} NAKs sent, {} out-of-order discards, {} duplicates, {} payload errors, {} malformed, {} send errors, {} INT echoes, {} timestamp echoes",
            self.flows_completed,
            self.bytes,
            self.data_packets,
            self.ce_marked,
            self.acks_sent,
            self.ecn_echoes_sent,
            self.cnps_sent,
            self.naks_sent,
            self.out_of_order,
            self.duplicates,
            self.payload_errors,
            self.malformed,
            self.send_errors,
            self.int_echoes_sent,
            self.timestamp_echoes_sent
        )
    }

    pub fn json(&self) -> String {
        serde_json::to_string(self).expect("a struct of integers serializes")
    }
}

/// One message being received (or recently completed).
#[derive(Debug)]
struct RxFlow {
    gbn: GbnReceiver,
    /// From the RETH: (VA, R_Key, size).
    reth: Option<Reth>,
    /// Payload bytes per packet, from the First packet.
    mtu: Option<u32>,
    packets: Option<u32>,
    completed: bool,
    last_ns: u64,
}

/// An answer to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    pub psn: u32,
    pub nak: bool,
    pub echo: bool,
    pub cnp: bool,
    pub msn: u32,
    /// The echo of the data packet's INT / timestamp block (goes after
    /// the ACK's BTH); `block_len` 0 = none.
    pub block: [u8; MAX_INT_BLOCK],
    pub block_len: usize,
}

impl Reply {
    /// The echo block of the ACK or NAK, if any.
    pub fn block(&self) -> Option<&[u8]> {
        (self.block_len > 0).then(|| &self.block[..self.block_len.min(MAX_INT_BLOCK)])
    }

    /// The answer on the wire to QP `qp`: the ACK (or NAK) with its ECN
    /// echo, and the CNP when one is asked for.
    pub fn messages(&self, qp: u32) -> (Message<'static>, Option<Message<'static>>) {
        let aeth = if self.nak {
            Aeth::Nak {
                code: NAK_PSN_SEQUENCE,
                msn: self.msn,
            }
        } else {
            Aeth::Ack {
                credit: CREDIT_INVALID,
                msn: self.msn,
            }
        };
        let ack = Message::Ack {
            qp,
            psn: self.psn,
            becn: self.echo,
            aeth,
        };
        (ack, self.cnp.then_some(Message::Cnp { qp }))
    }
}

/// The receiver's state, without sockets.
#[derive(Debug)]
pub struct Receiver {
    notify: Notify,
    nak_interval_ns: u64,
    flows: HashMap<(Ipv4Addr, u32), RxFlow>,
    pub stats: RxStats,
}

impl Receiver {
    pub fn new(notify: Notify, nak_interval_ns: u64) -> Receiver {
        Receiver {
            notify,
            nak_interval_ns,
            flows: HashMap::new(),
            stats: RxStats::default(),
        }
    }

    /// Messages held.
    pub fn held(&self) -> usize {
        self.flows.len()
    }

    /// Drops messages idle since before `cutoff_ns`.
    pub fn expire(&mut self, cutoff_ns: u64) {
        self.flows.retain(|_, f| f.last_ns >= cutoff_ns);
    }

    /// A data packet from `src` with the INT / timestamp block `int`;
    /// returns the answer to send, if any.
    #[allow(clippy::too_many_arguments)]
    pub fn on_data(
        &mut self,
        now_ns: u64,
        src: Ipv4Addr,
        qp: u32,
        psn: u32,
        opcode: DataOpcode,
        reth: Option<Reth>,
        payload: &[u8],
        ce: bool,
        int: Option<IntBlock<'_>>,
    ) -> Option<Reply> {
        self.stats.data_packets += 1;
        self.stats.ce_marked += u64::from(ce);
        let key = (src, qp);
        let new_message = psn == 0
            && reth.is_some()
            && self
                .flows
                .get(&key)
                .is_some_and(|f| f.reth.is_some_and(|r| Some(r) != reth));
        if new_message {
            self.flows.remove(&key);
        }
        let nak_interval = self.nak_interval_ns;
        let f = self.flows.entry(key).or_insert_with(|| RxFlow {
            gbn: GbnReceiver::new(nak_interval),
            reth: None,
            mtu: None,
            packets: None,
            completed: false,
            last_ns: now_ns,
        });
        f.last_ns = now_ns;
        if psn == f.gbn.expected() && !fits(f, psn, opcode, reth, payload.len()) {
            self.stats.malformed += 1;
            return None;
        }
        let verdict = f.gbn.on_data(psn, now_ns);
        let (echo, cnp) = match self.notify {
            Notify::Echo => (ce, false),
            Notify::Cnp => (false, ce),
        };
        let mut reply = Reply {
            psn: f.gbn.expected(),
            nak: false,
            echo,
            cnp,
            msn: u32::from(f.completed),
            block: [0; MAX_INT_BLOCK],
            block_len: 0,
        };
        if let Some(b) = int {
            // A valid block always fits: at most MAX_INT_BLOCK bytes.
            reply.block_len = b.echo_into(&mut reply.block).unwrap_or(0);
        }
        match verdict {
            RxVerdict::Accept => {
                if psn == 0 {
                    f.reth = reth;
                    let size = reth.map_or(0, |r| r.dma_len);
                    let mtu = payload.len().max(1) as u32;
                    f.mtu = Some(mtu);
                    f.packets = Some(size.div_ceil(mtu).max(1));
                }
                let offset = u64::from(psn) * u64::from(f.mtu.unwrap_or(0));
                if !pattern::matches(qp, offset, payload) {
                    self.stats.payload_errors += 1;
                }
                if Some(f.gbn.expected()) == f.packets {
                    f.completed = true;
                    self.stats.flows_completed += 1;
                    self.stats.bytes += u64::from(f.reth.map_or(0, |r| r.dma_len));
                }
                reply.msn = u32::from(f.completed);
            }
            RxVerdict::Nak => {
                self.stats.out_of_order += 1;
                reply.nak = true;
            }
            RxVerdict::Discard => {
                self.stats.out_of_order += 1;
                return None;
            }
            RxVerdict::Duplicate => {
                self.stats.duplicates += 1;
                // The simulator ignores duplicates; the re-ACK carries no
                // congestion signal so that the reaction stays its own.
                reply.echo = false;
                reply.cnp = false;
                reply.block_len = 0;
            }
        }
        match reply.block().and_then(|b| IntBlock::parse(b).ok()) {
            Some(b) if b.kind() == IntKind::Echo => self.stats.int_echoes_sent += 1,
            Some(_) => self.stats.timestamp_echoes_sent += 1,
            None => {}
        }
        self.stats.acks_sent += u64::from(!reply.nak);
        self.stats.naks_sent += u64::from(reply.nak);
        self.stats.ecn_echoes_sent += u64::from(reply.echo);
        self.stats.cnps_sent += u64::from(reply.cnp);
        Some(reply)
    }
}

/// Whether the in-order packet `psn` is consistent with its message: the
/// first carries the RETH, the opcodes follow First/Middle/Last (or Only),
/// and every packet but the last is full.
fn fits(f: &RxFlow, psn: u32, opcode: DataOpcode, reth: Option<Reth>, len: usize) -> bool {
    if psn == 0 {
        let Some(r) = reth else {
            return false;
        };
        let size = r.dma_len as usize;
        return match opcode {
            DataOpcode::Only => len == size,
            DataOpcode::First => len > 0 && len < size,
            _ => false,
        };
    }
    let (Some(mtu), Some(packets), Some(r)) = (f.mtu, f.packets, f.reth) else {
        return false;
    };
    if psn >= packets || opcode != DataOpcode::for_packet(psn, packets) {
        return false;
    }
    let offset = u64::from(psn) * u64::from(mtu);
    let want = (u64::from(r.dma_len) - offset).min(u64::from(mtu));
    len as u64 == want
}

/// Binds every address; errors are one line.
pub fn bind(listen: &[SocketAddrV4]) -> Result<Vec<UdpSocket>, String> {
    listen
        .iter()
        .map(|a| net::udp_socket(*a).map_err(|e| format!("cannot bind {a}: {e}")))
        .collect()
}

/// Serves until SIGTERM/SIGINT; prints one `listening` line per socket.
pub fn run(
    config: &RoceServerConfig,
    sockets: Vec<UdpSocket>,
    signals: Signals,
) -> Result<RxStats, String> {
    use std::io::Write;
    let locals: Vec<SocketAddrV4> = sockets
        .iter()
        .map(|s| match s.local_addr() {
            Ok(std::net::SocketAddr::V4(a)) => Ok(a),
            Ok(other) => Err(format!("unexpected local address {other}")),
            Err(e) => Err(format!("local address: {e}")),
        })
        .collect::<Result<_, _>>()?;
    {
        let mut out = std::io::stdout().lock();
        for a in &locals {
            let _ = writeln!(out, "listening {a}");
        }
        let _ = out.flush();
    }
    let mut rx = Receiver::new(config.notify, config.nak_interval_ns);
    let t0 = Instant::now();
    let clock = || u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let idle_ns = u64::try_from(config.idle_timeout.as_nanos()).unwrap_or(u64::MAX);
    let sweep_every = (idle_ns / 4).max(1_000_000);
    let mut next_sweep = sweep_every;
    let mut fds: Vec<RawFd> = sockets.iter().map(AsRawFd::as_raw_fd).collect();
    fds.push(signals.fd());
    let mut buf = vec![0u8; 65_536];
    let mut out = Vec::with_capacity(64);
    let mut errors = 0u64;
    loop {
        if signals.take().is_some() {
            break;
        }
        let mut busy = false;
        for (sock, local) in sockets.iter().zip(&locals) {
            for i in 0..=BATCH {
                if i == BATCH {
                    busy = true;
                    break;
                }
                let r = match net::recv_tos(sock, &mut buf) {
                    Ok(Some(r)) => r,
                    Ok(None) => break,
                    Err(_) => continue,
                };
                let now = clock();
                let ep = Endpoints {
                    src: *r.from.ip(),
                    dst: *local.ip(),
                    sport: r.from.port(),
                    dport: local.port(),
                };
                let reply = match wire::parse_udp_packet(&ep, &buf[..r.len]) {
                    Ok(Packet {
                        message:
                            Message::Data {
                                opcode,
                                qp,
                                psn,
                                reth,
                                payload,
                                ..
                            },
                        int,
                    }) => {
                        let ce = r.tos & ECN_MASK == ECN_CE;
                        let from = *r.from.ip();
                        rx.on_data(now, from, qp, psn, opcode, reth, payload, ce, int)
                            .map(|reply| (qp, reply))
                    }
                    Ok(_) => {
                        rx.stats.malformed += 1;
                        None
                    }
                    Err(e) => {
                        rx.stats.malformed += 1;
                        if errors < ERRORS_PRINTED {
                            errors += 1;
                            eprintln!("lcmp-traffic server: {}: {e}", r.from);
                        }
                        None
                    }
                };
                if let Some((qp, reply)) = reply {
                    let to = SocketAddrV4::new(*r.from.ip(), ROCEV2_PORT);
                    let back = Endpoints {
                        src: *local.ip(),
                        dst: *r.from.ip(),
                        sport: local.port(),
                        dport: ROCEV2_PORT,
                    };
                    let (ack, cnp) = reply.messages(qp);
                    let blocks = [reply.block(), None];
                    for (m, block) in std::iter::once(ack).chain(cnp).zip(blocks) {
                        out.clear();
                        let sent = wire::encode_udp_payload_with(&mut out, &back, &m, block)
                            .map_err(std::io::Error::other)
                            .and_then(|()| sock.send_to(&out, to));
                        if sent.is_err() {
                            rx.stats.send_errors += 1;
                        }
                    }
                }
            }
        }
        let now = clock();
        if now >= next_sweep {
            rx.expire(now.saturating_sub(idle_ns));
            next_sweep = now + sweep_every;
        }
        if busy {
            continue;
        }
        net::wait_readable(&fds, Some(next_sweep.saturating_sub(clock())))
            .map_err(|e| format!("ppoll: {e}"))?;
    }
    Ok(rx.stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 2);

    fn reth(size: u32) -> Option<Reth> {
        Some(Reth {
            va: 1,
            rkey: 2,
            dma_len: size,
        })
    }

    fn data(qp: u32, offset: u64, len: usize) -> Vec<u8> {
        let mut v = vec![0; len];
        pattern::fill(qp, offset, &mut v);
        v
    }

    #[test]
    fn a_message_with_loss_ce_and_duplicates() {
        let mut r = Receiver::new(Notify::Echo, 500_000);
        // 2500 bytes: First 1000, Middle 1000, Last 500.
        let p0 = data(9, 0, 1000);
        let a = r
            .on_data(
                0,
                SRC,
                9,
                0,
                DataOpcode::First,
                reth(2500),
                &p0,
                false,
                None,
            )
            .unwrap();
        assert_eq!((a.psn, a.nak, a.echo, a.msn), (1, false, false, 0));
        // PSN 2 before 1 (1 was lost): NAK 1, echo since CE.
        let p2 = data(9, 2000, 500);
        let n = r
            .on_data(10, SRC, 9, 2, DataOpcode::Last, None, &p2, true, None)
            .unwrap();
        assert_eq!((n.psn, n.nak, n.echo), (1, true, true));
        let p1 = data(9, 1000, 1000);
        r.on_data(20, SRC, 9, 1, DataOpcode::Middle, None, &p1, false, None)
            .unwrap();
        let done = r
            .on_data(30, SRC, 9, 2, DataOpcode::Last, None, &p2, false, None)
            .unwrap();
        assert_eq!((done.psn, done.msn), (3, 1));
        // The last ACK was lost: the retransmitted packet is re-ACKed.
        let again = r
            .on_data(40, SRC, 9, 2, DataOpcode::Last, None, &p2, true, None)
            .unwrap();
        assert_eq!(
            (again.psn, again.nak, again.echo, again.msn),
            (3, false, false, 1)
        );
        let s = r.stats;
        assert_eq!(
            (s.flows_completed, s.bytes, s.data_packets, s.ce_marked),
            (1, 2500, 5, 2)
        );
        assert_eq!(
            (s.naks_sent, s.acks_sent, s.out_of_order, s.duplicates),
            (1, 4, 1, 1)
        );
        assert_eq!(
            (s.ecn_echoes_sent, s.payload_errors, s.malformed),
            (1, 0, 0)
        );
    }

    #[test]
    fn the_answer_echoes_the_packets_block_byte_exact() {
        let mut r = Receiver::new(Notify::Echo, 500_000);
        // A collect block of 3 slots, 2 filled by switches, by hand:
        // kind 1, capacity 3, nhop 2, flags 0; hops (rate kbit/s, qlen,
        // tx bytes, time).
        let hops = "000186a0 00000bb8 0001e240 000003e7
                    05f5e100 00000000 ffffffff 80000001";
        let mut block = hex(&format!("01030200 {hops}"));
        block.extend_from_slice(&[0xee; 16]); // the free slot (not echoed)
        let p = data(9, 0, 10);
        let int = IntBlock::parse(&block).ok();
        let a = r
            .on_data(0, SRC, 9, 0, DataOpcode::Only, reth(10), &p, false, int)
            .unwrap();
        // The echo: kind 3, capacity = nhop = 2, flags 0, the two hops.
        assert_eq!(a.block(), Some(&hex(&format!("03020200 {hops}"))[..]));
        // A full block a switch flagged: the flag is echoed.
        let full = hex("01010101 00000001 00000002 00000003 00000004");
        let a = r
            .on_data(
                1,
                SRC,
                8,
                0,
                DataOpcode::Only,
                reth(10),
                &data(8, 0, 10),
                false,
                IntBlock::parse(&full).ok(),
            )
            .unwrap();
        assert_eq!(
            a.block(),
            Some(&hex("03010101 00000001 00000002 00000003 00000004")[..])
        );
        // A timestamp: echoed as a timestamp echo (kind 4).
        let ts = hex("02000000 0000000102030405");
        let a = r
            .on_data(
                2,
                SRC,
                7,
                0,
                DataOpcode::Only,
                reth(10),
                &data(7, 0, 10),
                false,
                IntBlock::parse(&ts).ok(),
            )
            .unwrap();
        assert_eq!(a.block(), Some(&hex("04000000 0000000102030405")[..]));
        // A duplicate's re-ACK echoes nothing; no block, no echo.
        let a = r
            .on_data(
                3,
                SRC,
                7,
                0,
                DataOpcode::Only,
                reth(10),
                &data(7, 0, 10),
                false,
                IntBlock::parse(&ts).ok(),
            )
            .unwrap();
        assert_eq!(a.block(), None);
        let a = r
            .on_data(
                4,
                SRC,
                6,
                0,
                DataOpcode::Only,
                reth(10),
                &data(6, 0, 10),
                false,
                None,
            )
            .unwrap();
        assert_eq!(a.block(), None);
        assert_eq!(
            (r.stats.int_echoes_sent, r.stats.timestamp_echoes_sent),
            (2, 1)
        );
    }

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn cnp_mode_bad_payload_and_new_messages() {
        let mut r = Receiver::new(Notify::Cnp, 500_000);
        let mut p = data(4, 0, 10);
        p[3] ^= 1;
        let a = r
            .on_data(0, SRC, 4, 0, DataOpcode::Only, reth(10), &p, true, None)
            .unwrap();
        assert_eq!((a.psn, a.echo, a.cnp, a.msn), (1, false, true, 1));
        assert_eq!((r.stats.payload_errors, r.stats.cnps_sent), (1, 1));
        // The same QP from another run: a new message (another R_Key).
        let other = Some(Reth {
            va: 1,
            rkey: 3,
            dma_len: 5,
        });
        let b = r
            .on_data(
                1,
                SRC,
                4,
                0,
                DataOpcode::Only,
                other,
                &data(4, 0, 5),
                false,
                None,
            )
            .unwrap();
        assert_eq!((b.psn, b.msn), (1, 1));
        assert_eq!(r.stats.flows_completed, 2);
        // Inconsistent packets are dropped unanswered: a Middle at PSN 0, an
        // Only whose length is not the RETH's.
        assert!(r
            .on_data(2, SRC, 5, 0, DataOpcode::Middle, None, &[0; 4], false, None)
            .is_none());
        assert!(r
            .on_data(
                3,
                SRC,
                6,
                0,
                DataOpcode::Only,
                reth(7),
                &[0; 4],
                false,
                None
            )
            .is_none());
        assert_eq!(r.stats.malformed, 2);
        r.expire(2);
        assert_eq!(r.held(), 2, "QPs 5 and 6 were touched at 2 and 3");
    }
}

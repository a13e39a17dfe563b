//! Go-back-N reliability of one message (one flow = one RDMA WRITE), as the
//! simulator's RC queue pairs do it (`rdma-hw.cc` `ReceiverCheckSeq`,
//! `ReceiveAck`, `RecoverQueue`), in packets (PSNs) instead of its bytes.
//!
//! Receiver: a packet at the expected PSN is accepted and acknowledged with
//! the next expected PSN; one ahead of it is discarded and answered with a
//! NAK for the expected PSN, at most once per NAK interval for the same
//! expected PSN (a new expected PSN may be NAKed at once); one behind it is
//! a duplicate. The simulator sends nothing for a duplicate (its fabric
//! loses nothing); here a duplicate is re-acknowledged with the next
//! expected PSN, because an emulated network can lose the last ACK of a
//! flow, and only a re-ACK lets the sender's retransmission timeout end.
//!
//! Sender: an ACK moves snd_una forward; a NAK first acknowledges its PSN,
//! then sets snd_nxt = snd_una (go back). The retransmission timeout (not
//! in the simulator, whose fabric is lossless) does the same when nothing
//! was acknowledged for the timeout; the caller keeps its deadline.

use super::wire::{DataOpcode, PSN_MASK};

/// One packet of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub psn: u32,
    /// Byte offset in the message.
    pub offset: u64,
    pub len: u32,
    pub opcode: DataOpcode,
    /// Sent before (go-back-N resent it).
    pub retransmission: bool,
}

/// The sender side of one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GbnSender {
    size: u64,
    payload: u32,
    packets: u32,
    snd_una: u32,
    snd_nxt: u32,
    /// The highest snd_nxt so far: packets below it were sent before.
    high: u32,
    retransmitted: u64,
}

impl GbnSender {
    /// A message of `size` bytes (>= 1) in packets of `payload` bytes; at
    /// most 2^24 - 1 packets, so that PSNs never wrap.
    pub fn new(size: u64, payload: u32) -> Result<GbnSender, String> {
        if size == 0 || payload == 0 {
            return Err(format!(
                "a message needs size >= 1 and payload >= 1 (got {size}, {payload})"
            ));
        }
        let packets = size.div_ceil(u64::from(payload));
        let packets = u32::try_from(packets)
            .ok()
            .filter(|&n| n <= PSN_MASK)
            .ok_or_else(|| {
                format!("{size} bytes in {payload}-byte packets exceed 2^24 - 1 packets")
            })?;
        Ok(GbnSender {
            size,
            payload,
            packets,
            snd_una: 0,
            snd_nxt: 0,
            high: 0,
            retransmitted: 0,
        })
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    pub fn packets(&self) -> u32 {
        self.packets
    }

    pub fn snd_una(&self) -> u32 {
        self.snd_una
    }

    pub fn snd_nxt(&self) -> u32 {
        self.snd_nxt
    }

    /// The message byte that packet `psn` starts at (the simulator's
    /// sequence numbers): psn x payload, at most the size.
    pub fn byte_of(&self, psn: u32) -> u64 {
        (u64::from(psn) * u64::from(self.payload)).min(self.size)
    }

    /// Packets sent again so far.
    pub fn retransmitted(&self) -> u64 {
        self.retransmitted
    }

    /// Packet `psn` (< packets): the last one carries the remainder.
    pub fn segment(&self, psn: u32) -> Segment {
        let offset = u64::from(psn) * u64::from(self.payload);
        let len = (self.size - offset).min(u64::from(self.payload)) as u32;
        Segment {
            psn,
            offset,
            len,
            opcode: DataOpcode::for_packet(psn, self.packets),
            retransmission: psn < self.high,
        }
    }

    /// Whether a packet is waiting to be sent.
    pub fn has_data(&self) -> bool {
        self.snd_nxt < self.packets
    }

    /// Every packet acknowledged.
    pub fn done(&self) -> bool {
        self.snd_una >= self.packets
    }

    /// Takes the next packet to send.
    pub fn next_segment(&mut self) -> Option<Segment> {
        if !self.has_data() {
            return None;
        }
        let s = self.segment(self.snd_nxt);
        self.retransmitted += u64::from(s.retransmission);
        self.snd_nxt += 1;
        self.high = self.high.max(self.snd_nxt);
        Some(s)
    }

    /// A cumulative ACK: every PSN below `next_expected` arrived. Returns
    /// whether snd_una moved. An ACK beyond what was ever sent is ignored.
    pub fn on_ack(&mut self, next_expected: u32) -> bool {
        if next_expected > self.high || next_expected <= self.snd_una {
            return false;
        }
        self.snd_una = next_expected;
        // Never resend what is acknowledged (the simulator would, after a
        // late ACK overtakes a go-back; that only adds duplicates).
        self.snd_nxt = self.snd_nxt.max(self.snd_una);
        true
    }

    /// A NAK for `psn`: acknowledges what is below it, then goes back.
    /// Returns whether snd_una moved.
    pub fn on_nak(&mut self, psn: u32) -> bool {
        let progress = self.on_ack(psn);
        self.go_back();
        progress
    }

    /// snd_nxt = snd_una (NAK or retransmission timeout).
    pub fn go_back(&mut self) {
        self.snd_nxt = self.snd_una;
    }
}

/// What the receiver does with a data packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxVerdict {
    /// In order: deliver it, ACK with [`GbnReceiver::expected`].
    Accept,
    /// Ahead: discard it, NAK [`GbnReceiver::expected`].
    Nak,
    /// Ahead, but that PSN was NAKed less than a NAK interval ago: discard.
    Discard,
    /// Behind: already delivered; re-ACK with [`GbnReceiver::expected`].
    Duplicate,
}

/// The receiver side of one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GbnReceiver {
    expected: u32,
    last_nak: Option<u32>,
    /// No NAK for `last_nak` again before this time.
    nak_timer_ns: u64,
    nak_interval_ns: u64,
}

impl GbnReceiver {
    pub fn new(nak_interval_ns: u64) -> GbnReceiver {
        GbnReceiver {
            expected: 0,
            last_nak: None,
            nak_timer_ns: 0,
            nak_interval_ns,
        }
    }

    /// The next expected PSN.
    pub fn expected(&self) -> u32 {
        self.expected
    }

    pub fn on_data(&mut self, psn: u32, now_ns: u64) -> RxVerdict {
        use std::cmp::Ordering::*;
        match psn.cmp(&self.expected) {
            Equal => {
                self.expected += 1;
                RxVerdict::Accept
            }
            Greater => {
                if now_ns >= self.nak_timer_ns || self.last_nak != Some(self.expected) {
                    self.nak_timer_ns = now_ns.saturating_add(self.nak_interval_ns);
                    self.last_nak = Some(self.expected);
                    RxVerdict::Nak
                } else {
                    RxVerdict::Discard
                }
            }
            Less => RxVerdict::Duplicate,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    #[test]
    fn segments_of_a_message() {
        let mut s = GbnSender::new(2_500, 1_000).unwrap();
        assert_eq!(s.packets(), 3);
        let a = s.next_segment().unwrap();
        let b = s.next_segment().unwrap();
        let c = s.next_segment().unwrap();
        assert_eq!((a.offset, a.len, a.opcode), (0, 1000, DataOpcode::First));
        assert_eq!(
            (b.offset, b.len, b.opcode),
            (1000, 1000, DataOpcode::Middle)
        );
        assert_eq!((c.offset, c.len, c.opcode), (2000, 500, DataOpcode::Last));
        assert_eq!(s.next_segment(), None);
        let one = GbnSender::new(1, 1_000).unwrap().segment(0);
        assert_eq!((one.len, one.opcode), (1, DataOpcode::Only));
        assert_eq!(GbnSender::new(1000, 1000).unwrap().packets(), 1);
        assert_eq!(GbnSender::new(1001, 1000).unwrap().packets(), 2);
        assert!(GbnSender::new(0, 1000).is_err());
        assert!(GbnSender::new(1 << 24, 1).is_err());
    }

    #[test]
    fn nak_goes_back_and_counts_retransmissions() {
        let mut s = GbnSender::new(5_000, 1_000).unwrap();
        for _ in 0..5 {
            s.next_segment();
        }
        assert!(s.on_ack(2));
        // NAK 3: acknowledges 0..3 (snd_una 3), snd_nxt back to 3.
        assert!(s.on_nak(3));
        assert_eq!((s.snd_una(), s.snd_nxt()), (3, 3));
        let r = s.next_segment().unwrap();
        assert!(r.retransmission);
        assert_eq!(r.psn, 3);
        s.next_segment();
        assert_eq!(s.retransmitted(), 2);
        assert!(!s.on_ack(9), "beyond anything sent");
        assert!(s.on_ack(5));
        assert!(s.done());
    }

    #[test]
    fn nak_rate_limit_by_hand() {
        let us = 1_000;
        let mut r = GbnReceiver::new(500 * us);
        // t = 0: PSN 1 while 0 is expected: NAK 0, no NAK for 0 before 500 us.
        assert_eq!(r.on_data(1, 0), RxVerdict::Nak);
        // t = 100 us and 499.999 us: still within the interval.
        assert_eq!(r.on_data(2, 100 * us), RxVerdict::Discard);
        assert_eq!(r.on_data(3, 500 * us - 1), RxVerdict::Discard);
        // t = 500 us: the interval has passed: a second NAK 0, next at 1000 us.
        assert_eq!(r.on_data(4, 500 * us), RxVerdict::Nak);
        assert_eq!(r.expected(), 0);
        // t = 600 us: PSN 0 arrives (accept, expect 1); PSN 2 at 601 us is
        // NAKed at once: a different expected PSN than the last NAK.
        assert_eq!(r.on_data(0, 600 * us), RxVerdict::Accept);
        assert_eq!(r.on_data(2, 601 * us), RxVerdict::Nak);
        assert_eq!(r.on_data(2, 602 * us), RxVerdict::Discard);
        assert_eq!(r.on_data(0, 603 * us), RxVerdict::Duplicate);
        assert_eq!(r.expected(), 1);
    }

    /// Events of the in-memory network.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    enum Ev {
        /// Time for the sender to try its next packet.
        Send,
        /// A data packet reaches the receiver.
        Data(u32),
        /// An ACK (next expected) or NAK reaches the sender.
        Ack(u32, bool),
        Rto(u64),
    }

    /// Go-back-N over a channel that drops `loss` of the data and of the
    /// ACKs; returns (delivered bytes in order, sender).
    fn run_lossy(size: u64, loss: f64, seed: u64) -> (Vec<(u64, u32)>, GbnSender) {
        let mut rng = rand_pcg::Pcg64::seed_from_u64(seed);
        let (gap, delay, rto) = (10u64, 1_000u64, 50_000u64);
        let mut s = GbnSender::new(size, 1000).unwrap();
        let mut r = GbnReceiver::new(500);
        let mut delivered = Vec::new();
        let mut q = BinaryHeap::new();
        let mut rto_gen = 0u64;
        q.push(Reverse((0u64, Ev::Send)));
        q.push(Reverse((rto, Ev::Rto(0))));
        let mut sending = true;
        while let Some(Reverse((now, ev))) = q.pop() {
            assert!(now < 1_000_000_000, "no progress");
            match ev {
                Ev::Send => {
                    sending = false;
                    if let Some(seg) = s.next_segment() {
                        if !rng.random_bool(loss) {
                            q.push(Reverse((now + delay, Ev::Data(seg.psn))));
                        }
                        q.push(Reverse((now + gap, Ev::Send)));
                        sending = true;
                    }
                }
                Ev::Data(psn) => {
                    let v = r.on_data(psn, now);
                    if v == RxVerdict::Accept {
                        let seg = s.segment(psn);
                        delivered.push((seg.offset, seg.len));
                    }
                    if v != RxVerdict::Discard && !rng.random_bool(loss) {
                        let nak = v == RxVerdict::Nak;
                        q.push(Reverse((now + delay, Ev::Ack(r.expected(), nak))));
                    }
                }
                Ev::Ack(psn, nak) => {
                    let progress = if nak { s.on_nak(psn) } else { s.on_ack(psn) };
                    if s.done() {
                        break;
                    }
                    if progress {
                        rto_gen += 1;
                        q.push(Reverse((now + rto, Ev::Rto(rto_gen))));
                    }
                }
                Ev::Rto(gen) => {
                    if gen == rto_gen {
                        s.go_back();
                        rto_gen += 1;
                        q.push(Reverse((now + rto, Ev::Rto(rto_gen))));
                    }
                }
            }
            if !sending && s.has_data() {
                q.push(Reverse((now + gap, Ev::Send)));
                sending = true;
            }
        }
        (delivered, s)
    }

    #[test]
    fn lossy_channel_delivers_every_byte_once_in_order() {
        for (size, loss, seed) in [
            (1u64, 0.3, 1u64),
            (999, 0.3, 2),
            (1000, 0.3, 3),
            (1001, 0.3, 4),
            (50_000, 0.1, 5),
            (200_000, 0.2, 6),
            (200_000, 0.0, 7),
        ] {
            let (delivered, s) = run_lossy(size, loss, seed);
            assert!(s.done(), "size {size}");
            let mut next = 0;
            for (offset, len) in delivered {
                assert_eq!(offset, next, "size {size}: out of order or repeated");
                next += u64::from(len);
            }
            assert_eq!(next, size);
            if loss > 0.0 && size >= 50_000 {
                assert!(s.retransmitted() > 0);
            }
            if loss == 0.0 {
                assert_eq!(s.retransmitted(), 0);
            }
        }
    }
}

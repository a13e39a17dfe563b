//! The NIC of the one-process engines' hosts ([`crate::host::RoceHost`],
//! [`crate::ndp_host::NdpHost`], [`crate::udp_host::UdpHost`]): one port,
//! the end facing the host of a memory link to its switch, and an egress
//! ([`Egress`]) that emulates the host link towards the switch (rate,
//! delay, buffer; the switch's port towards the host emulates the other
//! direction, as for any link).
//!
//! A host writes each frame into a buffer of its pool in place
//! ([`HostNic::take_buffer`], [`HostNic::room`]) and hands it to the
//! egress ([`HostNic::queue`]), takes batches off the link
//! ([`HostNic::recv`]) and passes what the egress releases to the link
//! ([`HostNic::transmit`]); what the frames say and when they are written
//! is its protocol's, in its own module. The buffers and vectors are kept
//! between polls: nothing is allocated per frame.

use std::net::Ipv4Addr;

use lcmp_switch::config::delay_line_frames;
use lcmp_switch::egress::{Admit, Egress, EgressConfig, Handoff};
use lcmp_switch::io::{Frame, PacketIo};
use lcmp_switch::mem_link::port_mac;
use lcmp_topology::Topology;
use lcmp_wire::MacAddr;

/// Frames received per poll at most (and the hosts' packets sent).
pub const BATCH: usize = 64;
/// Buffers taken from the pool at a time for frames the host writes.
const SPARE: usize = 32;

/// A topology host as its NIC sees it: its addresses and its link.
#[derive(Debug, Clone, Copy)]
pub struct HostLink {
    /// The host's first IPv4 address.
    pub ip: Ipv4Addr,
    /// Its NIC's MAC: the host's port 0 as memory links name ports
    /// ([`port_mac`]).
    pub mac: MacAddr,
    /// The MAC of its switch's port towards it.
    pub gateway_mac: MacAddr,
    /// The host link towards the switch: its rate, delay and the buffer of
    /// the host's interface, no ECN.
    pub egress: EgressConfig,
}

impl HostLink {
    /// Host `name` of `topo`; `ipv4_only` says, in the error of a host
    /// without an IPv4 address, why another will not do.
    pub fn of(topo: &Topology, name: &str, ipv4_only: &str) -> Result<HostLink, String> {
        let host = topo
            .host_by_name(name)
            .ok_or_else(|| format!("{}: no host named {name:?}", topo.source()))?;
        let ip = host
            .addresses
            .iter()
            .find_map(|a| match a.addr() {
                std::net::IpAddr::V4(v4) => Some(v4),
                std::net::IpAddr::V6(_) => None,
            })
            .ok_or_else(|| format!("host {name}: no IPv4 address ({ipv4_only})"))?;
        let switch = &topo.switch(host.switch).name;
        Ok(HostLink {
            ip,
            mac: port_mac(name, 0),
            gateway_mac: port_mac(switch, host.port),
            egress: EgressConfig {
                rate_bps: host.rate_bps,
                delay_ns: host.delay_ns,
                buffer_bytes: host.buffer_bytes,
                ecn: None,
                max_in_flight: delay_line_frames(host.rate_bps, host.delay_ns),
            },
        })
    }
}

/// What the NIC counts (the hosts report these in their own counters).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NicCounters {
    /// Frames taken off the link.
    pub received: u64,
    /// Frames handed to the link.
    pub sent: u64,
    /// Frames not written for want of a free buffer.
    pub no_buffer: u64,
    /// Frames that did not fit their buffer, dropped.
    pub unwritten: u64,
    /// Frames the egress's buffer refused, dropped.
    pub queue_full: u64,
    /// Frames dropped after the egress took them: its delay line was full,
    /// or the link refused them.
    pub overflow: u64,
}

/// See the module docs. `IO` has one port, the link.
pub struct HostNic<IO: PacketIo> {
    io: IO,
    egress: Egress<Frame>,
    counters: NicCounters,
    // Kept between polls so the packet path allocates nothing.
    received: Vec<Frame>,
    handoff: Vec<Frame>,
    release: Vec<Frame>,
    spare: Vec<u64>,
}

impl<IO: PacketIo> HostNic<IO> {
    /// The NIC of host `name` over `io` (one port), its egress `link`.
    pub fn new(name: &str, io: IO, link: EgressConfig) -> Result<Self, String> {
        if io.ports() != 1 {
            return Err(format!(
                "host {name}: the NIC is one port, the I/O has {}",
                io.ports()
            ));
        }
        Ok(HostNic {
            io,
            egress: Egress::new(link),
            counters: NicCounters::default(),
            received: Vec::with_capacity(BATCH),
            handoff: Vec::with_capacity(BATCH),
            release: Vec::with_capacity(BATCH),
            spare: Vec::with_capacity(SPARE),
        })
    }

    /// The NIC's packet I/O.
    pub fn io_mut(&mut self) -> &mut IO {
        &mut self.io
    }

    /// The bytes of a frame the NIC holds.
    pub fn frame(&self, frame: Frame) -> &[u8] {
        self.io.frame(frame)
    }

    /// The egress emulating the host link.
    pub fn egress(&self) -> &Egress<Frame> {
        &self.egress
    }

    /// The egress, to pause and resume it.
    pub fn egress_mut(&mut self) -> &mut Egress<Frame> {
        &mut self.egress
    }

    /// The NIC's counters.
    pub fn counters(&self) -> NicCounters {
        self.counters
    }

    /// Takes a batch off the link (the previous one must have been
    /// released, [`HostNic::release_received`]); returns its size.
    pub fn recv(&mut self) -> usize {
        self.received.clear();
        self.io.recv(0, &mut self.received, BATCH);
        self.counters.received += self.received.len() as u64;
        self.received.len()
    }

    /// The batch [`HostNic::recv`] took.
    pub fn received(&self) -> &[Frame] {
        &self.received
    }

    /// Returns the batch [`HostNic::recv`] took to the pool.
    pub fn release_received(&mut self) {
        self.io.release(&self.received);
        self.received.clear();
    }

    /// A buffer of the pool for a frame the host writes, or `None`
    /// (counted) if none is free.
    pub fn take_buffer(&mut self) -> Option<u64> {
        if self.spare.is_empty() {
            self.io.take_free(SPARE, &mut self.spare);
        }
        let addr = self.spare.pop();
        if addr.is_none() {
            self.counters.no_buffer += 1;
        }
        addr
    }

    /// Gives back a buffer [`HostNic::take_buffer`] gave and nothing was
    /// written into.
    pub fn put_back(&mut self, addr: u64) {
        self.spare.push(addr);
    }

    /// The room of buffer `addr`, from its first byte to its end, to write
    /// a frame into.
    pub fn room(&mut self, addr: u64) -> &mut [u8] {
        self.io.frame_room_mut(Frame { addr, len: 0 })
    }

    /// Hands the frame written into buffer `addr` to the egress at
    /// `now_ns`: `written` is its length, `None` if it did not fit (the
    /// buffer is kept for the next frame). Whether the egress took it; a
    /// frame it refused goes back to the pool. Both refusals are counted.
    pub fn queue(&mut self, addr: u64, written: Option<usize>, now_ns: u64) -> bool {
        let Some(len) = written.and_then(|n| u32::try_from(n).ok()) else {
            self.counters.unwritten += 1;
            self.spare.push(addr);
            return false;
        };
        let frame = Frame { addr, len };
        if self.egress.offer(frame, len, false, 0, now_ns) == Admit::DropQueueFull {
            self.counters.queue_full += 1;
            self.io.release(&[frame]);
            return false;
        }
        true
    }

    /// Passes what the egress releases at `now_ns` to the link; returns
    /// how many frames.
    pub fn transmit(&mut self, now_ns: u64) -> usize {
        self.handoff.clear();
        self.release.clear();
        let (handoff, release) = (&mut self.handoff, &mut self.release);
        let room = self.io.tx_room(0);
        self.egress.poll_budget(now_ns, room, &mut |h| match h {
            Handoff::Transmit { frame, .. } => handoff.push(frame),
            Handoff::Overflow { frame, .. } => release.push(frame),
        });
        let sent = self.io.send(0, &self.handoff);
        // The budget was the link's room: a refusal is the link's fault,
        // and the frames are dropped rather than held out of order.
        self.release.extend_from_slice(&self.handoff[sent..]);
        self.counters.overflow += self.release.len() as u64;
        self.counters.sent += sent as u64;
        if !self.release.is_empty() {
            self.io.release(&self.release);
        }
        sent
    }

    /// Pushes the poll's transmissions out ([`PacketIo::flush`]).
    pub fn flush(&mut self) {
        self.io.flush();
    }

    /// Returns every buffer the NIC holds (its egress's frames, the spare
    /// buffers) to the pool and shuts the I/O down, at the end of a run.
    pub fn finish(&mut self) {
        self.release.clear();
        let release = &mut self.release;
        self.egress.flush(&mut |f| release.push(f));
        self.release
            .extend(self.spare.drain(..).map(|addr| Frame { addr, len: 0 }));
        self.io.release(&self.release);
        self.release.clear();
        self.io.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lcmp_switch::frames::FRAME_SIZE;
    use lcmp_switch::mem_io::MemIo;

    /// 1 Gbit/s (1000 bytes in 8000 ns), no delay, room for three frames
    /// of 1000 bytes, over a pool of 5 buffers.
    fn nic() -> HostNic<MemIo> {
        let link = EgressConfig {
            rate_bps: 1_000_000_000,
            delay_ns: 0,
            buffer_bytes: 3000,
            ecn: None,
            max_in_flight: 16,
        };
        HostNic::new("h", MemIo::new(1, 5), link).unwrap()
    }

    /// Writes a frame of 1000 bytes `mark` into a new buffer and queues it.
    fn send(nic: &mut HostNic<MemIo>, mark: u8, now_ns: u64) -> bool {
        let addr = nic.take_buffer().unwrap();
        nic.room(addr)[..1000].fill(mark);
        nic.queue(addr, Some(1000), now_ns)
    }

    #[test]
    fn frames_leave_in_order_and_every_refusal_is_counted() {
        let mut nic = nic();
        // Three frames fill the 3000-byte buffer; the fourth is refused
        // and its buffer goes back to the pool (the NIC took all 5 at the
        // first frame: up to 32 at a time).
        assert!(send(&mut nic, 1, 0));
        assert!(send(&mut nic, 2, 0));
        assert!(send(&mut nic, 3, 0));
        assert!(!send(&mut nic, 4, 0));
        assert_eq!(nic.io_mut().free_frames(), 1);
        // A frame that did not fit keeps its buffer for the next one.
        let addr = nic.take_buffer().unwrap();
        assert!(!nic.queue(addr, None, 0));
        assert_eq!(nic.take_buffer(), Some(addr));
        // The refused frame's buffer, taken from the pool again, then none.
        let last = nic.take_buffer().unwrap();
        assert_eq!(nic.io_mut().free_frames(), 0);
        assert_eq!(nic.take_buffer(), None);
        nic.put_back(last);
        // Serialization ends at 8000, 16000 and 24000 ns.
        assert_eq!(nic.transmit(7_999), 0);
        assert_eq!(nic.transmit(8_000), 1);
        assert_eq!(nic.transmit(24_000), 2);
        let sent = nic.io_mut().take_sent(0);
        let marks: Vec<(usize, u8)> = sent.iter().map(|f| (f.len(), f[999])).collect();
        assert_eq!(marks, vec![(1000, 1), (1000, 2), (1000, 3)]);
        assert_eq!(
            nic.counters(),
            NicCounters {
                received: 0,
                sent: 3,
                no_buffer: 1,
                unwritten: 1,
                queue_full: 1,
                overflow: 0,
            }
        );
    }

    #[test]
    fn a_batch_is_counted_and_every_buffer_goes_back_at_the_end() {
        let mut nic = nic();
        assert!(nic.io_mut().inject(0, &[7; 60]));
        assert!(nic.io_mut().inject(0, &[8; 70]));
        assert_eq!(nic.recv(), 2);
        let lens: Vec<usize> = nic.received().iter().map(|&f| nic.frame(f).len()).collect();
        assert_eq!(lens, vec![60, 70]);
        nic.release_received();
        assert!(nic.received().is_empty());
        assert_eq!(nic.counters().received, 2);
        // A frame in the NIC's buffer and the spare buffers taken with it.
        assert!(send(&mut nic, 1, 0));
        assert!(nic.io_mut().free_frames() < 5);
        nic.finish();
        assert_eq!(nic.io_mut().free_frames(), 5);
    }

    #[test]
    fn the_nic_is_one_port() {
        let link = *nic().egress().config();
        let err = HostNic::new("h", MemIo::new(2, 5), link).err().unwrap();
        assert_eq!(err, "host h: the NIC is one port, the I/O has 2");
        // A frame is written into a whole buffer.
        let mut nic = nic();
        let addr = nic.take_buffer().unwrap();
        assert_eq!(nic.room(addr).len(), FRAME_SIZE);
    }
}

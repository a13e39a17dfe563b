//! Memory links: two ports of switches in one process joined in memory
//! instead of by a veth pair, so a frame crosses from one switch to the
//! next without the kernel (copy-mode AF_XDP transmit, veth, the peer's
//! XDP program and its copy into the peer's UMEM cost most of a frame's
//! time on a veth link).
//!
//! The link itself is a wire: everything a link emulates (rate, delay,
//! buffer, ECN, drops) stays in the sending port's egress, which hands a
//! frame to the link when it arrives at the far end, as it hands it to a
//! veth. Each direction is the AF_XDP model in user space, over the
//! frame area both switches share ([`crate::frames`]):
//!
//! - the receiver lends free buffers of its pool to the sender (a *lend*
//!   ring, like AF_XDP's fill ring), as many as its receive ring has room
//!   for;
//! - the sender hands a frame over by pushing its descriptor on the
//!   receiver's *rx* ring and takes one lent buffer back into its own pool
//!   in exchange ([`Transfer::Descriptor`]: no copy), or copies the frame
//!   into the lent buffer and pushes that ([`Transfer::Copy`], for
//!   measuring what the copy costs). Either way both pools keep their
//!   size, and a frame is never lost in the link: when the receiver has
//!   lent nothing (its pool ran dry), the sender's frames wait in its
//!   delay line as behind a full transmit ring ([`LinkEnd::room`]);
//! - frames come out of the rx ring in the order they went in.
//!
//! The rings are single-producer single-consumer (`rtrb`), so the two
//! switches may run on different threads. A receiver about to sleep says
//! so ([`LinkEnd::prepare_sleep`]); a sender that pushed frames wakes it
//! through its eventfd ([`LinkEnd::notify`]), and only then: a busy
//! receiver costs the sender no system call.
//!
//! Carrier is one flag per link that either end (the control socket) can
//! drop, as pulling a cable would: both ends see the link down at their
//! next link check, which [`LinkEnd::carrier_changed`] brings forward.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use std::collections::HashMap;

use lcmp_topology::{Peer, Topology};
use lcmp_wire::MacAddr;
use rtrb::{Consumer, Producer, RingBuffer};

use crate::config::seed_of;
use crate::io::Frame;

/// How a frame crosses a memory link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Transfer {
    /// Its descriptor moves; the sender takes a lent buffer in exchange.
    #[default]
    Descriptor,
    /// Its bytes are copied into a buffer the receiver lent.
    Copy,
}

impl Transfer {
    /// The name in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Transfer::Descriptor => "descriptor",
            Transfer::Copy => "copy",
        }
    }
}

/// An eventfd that ends a sleeping receiver's `ppoll`, and whether the
/// receiver sleeps.
#[derive(Debug)]
struct Waker {
    fd: OwnedFd,
    asleep: AtomicBool,
}

impl Waker {
    fn new() -> std::io::Result<Arc<Waker>> {
        // SAFETY: eventfd(2) with constant flags; the result is checked.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Arc::new(Waker {
            // SAFETY: a fresh descriptor that nothing else owns.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            asleep: AtomicBool::new(false),
        }))
    }

    fn wake(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a live buffer to an eventfd we own.
        // A full counter (EAGAIN) still leaves the fd readable: ignored.
        unsafe {
            libc::write(self.fd.as_raw_fd(), one.as_ptr().cast(), one.len());
        }
    }

    fn drain(&self) {
        let mut buf = [0u8; 8];
        // SAFETY: reads at most 8 bytes into a live buffer; EAGAIN when
        // there was nothing to read is ignored.
        unsafe {
            libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len());
        }
    }
}

/// What both ends of a link share.
#[derive(Debug)]
struct Shared {
    carrier: AtomicBool,
    /// Bumped at each carrier change, so an end notices one it has not
    /// looked at yet.
    generation: AtomicU64,
}

/// Counters of one end.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkEndStats {
    /// Frames handed to the peer.
    pub frames_sent: u64,
    /// Their bytes.
    pub bytes_sent: u64,
    /// Frames taken from the peer.
    pub frames_received: u64,
    /// Their bytes.
    pub bytes_received: u64,
    /// Sends cut short because the peer had lent no free buffer: the rest
    /// waited in this port's delay line.
    pub peer_buffers_empty: u64,
}

/// One end of a memory link: a port of one switch.
pub struct LinkEnd {
    /// Frames from the peer.
    rx: Consumer<Frame>,
    /// Frames to the peer.
    tx: Producer<Frame>,
    /// Buffers of our pool lent to the peer.
    lend: Producer<u64>,
    /// Buffers the peer lent us.
    borrowed: Consumer<u64>,
    own: Arc<Waker>,
    peer: Arc<Waker>,
    shared: Arc<Shared>,
    seen_generation: u64,
    /// Frames pushed since the last [`LinkEnd::notify`].
    pushed: bool,
    peer_name: String,
    /// The far end's MAC, when the link was made for a topology.
    peer_mac: Option<MacAddr>,
    stats: LinkEndStats,
}

impl std::fmt::Debug for LinkEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinkEnd")
            .field("peer", &self.peer_name)
            .field("stats", &self.stats)
            .finish()
    }
}

/// A memory link of `depth` frames per direction (ring entries: frames in
/// transit plus buffers lent); `names` are the two ends' names
/// (`switch/port`), each end told the other's.
pub fn mem_link(depth: usize, names: (&str, &str)) -> std::io::Result<(LinkEnd, LinkEnd)> {
    let (a_tx, b_rx) = RingBuffer::new(depth);
    let (b_tx, a_rx) = RingBuffer::new(depth);
    let (a_lend, b_borrowed) = RingBuffer::new(depth);
    let (b_lend, a_borrowed) = RingBuffer::new(depth);
    let (a_wake, b_wake) = (Waker::new()?, Waker::new()?);
    let shared = Arc::new(Shared {
        carrier: AtomicBool::new(true),
        generation: AtomicU64::new(0),
    });
    let a = LinkEnd {
        rx: a_rx,
        tx: a_tx,
        lend: a_lend,
        borrowed: a_borrowed,
        own: a_wake.clone(),
        peer: b_wake.clone(),
        shared: shared.clone(),
        seen_generation: 0,
        pushed: false,
        peer_name: names.1.to_string(),
        peer_mac: None,
        stats: LinkEndStats::default(),
    };
    let b = LinkEnd {
        rx: b_rx,
        tx: b_tx,
        lend: b_lend,
        borrowed: b_borrowed,
        own: b_wake,
        peer: a_wake,
        shared,
        seen_generation: 0,
        pushed: false,
        peer_name: names.0.to_string(),
        peer_mac: None,
        stats: LinkEndStats::default(),
    };
    Ok((a, b))
}

impl LinkEnd {
    /// The far end's name (`switch/port`).
    pub fn peer_name(&self) -> &str {
        &self.peer_name
    }

    /// The far end's MAC ([`port_mac`] of its switch and port), for a
    /// link of [`MemoryLinks`].
    pub fn peer_mac(&self) -> Option<MacAddr> {
        self.peer_mac
    }

    /// Counters so far.
    pub fn stats(&self) -> LinkEndStats {
        self.stats
    }

    /// Appends up to `max` frames from the peer to `out`, in the order
    /// it sent them.
    pub fn recv(&mut self, out: &mut Vec<Frame>, max: usize) {
        let n = self.rx.slots().min(max);
        if n == 0 {
            return;
        }
        let Ok(chunk) = self.rx.read_chunk(n) else {
            return;
        };
        let start = out.len();
        out.extend(chunk);
        let got = &out[start..];
        self.stats.frames_received += got.len() as u64;
        self.stats.bytes_received += got.iter().map(|f| u64::from(f.len)).sum::<u64>();
    }

    /// Whether frames from the peer wait to be received (a virtual-time
    /// driver polls this end's switch when they do).
    pub fn rx_pending(&self) -> bool {
        self.rx.slots() > 0
    }

    /// Frames [`LinkEnd::send`] would take now: as many as the peer has
    /// lent buffers for (and its ring has room).
    pub fn room(&self) -> usize {
        self.borrowed.slots().min(self.tx.slots())
    }

    /// Hands `frames` (a prefix, up to [`LinkEnd::room`]) to the peer and
    /// returns how many. For each, a buffer the peer lent comes back to
    /// be released into this end's pool: with [`Transfer::Descriptor`]
    /// the lent buffer itself (the frame moved), with [`Transfer::Copy`]
    /// the frame's own buffer after `copy(frame, lent)` copied it (and
    /// returned the copy's descriptor). Those buffers are appended to
    /// `release`.
    pub fn send(
        &mut self,
        frames: &[Frame],
        transfer: Transfer,
        copy: &mut dyn FnMut(Frame, u64) -> Frame,
        release: &mut Vec<u64>,
    ) -> usize {
        let room = self.room();
        if frames.len() > room {
            self.stats.peer_buffers_empty += 1;
        }
        let n = frames.len().min(room);
        if n == 0 {
            return 0;
        }
        let (Ok(lent), Ok(out)) = (self.borrowed.read_chunk(n), self.tx.write_chunk_uninit(n))
        else {
            return 0;
        };
        let handed = match transfer {
            Transfer::Descriptor => {
                release.extend(lent);
                out.fill_from_iter(frames[..n].iter().copied())
            }
            Transfer::Copy => {
                let copies = frames[..n].iter().zip(lent).map(|(f, g)| {
                    release.push(f.addr);
                    copy(*f, g)
                });
                out.fill_from_iter(copies)
            }
        };
        self.pushed = true;
        self.stats.frames_sent += handed as u64;
        self.stats.bytes_sent += frames[..handed]
            .iter()
            .map(|f| u64::from(f.len))
            .sum::<u64>();
        handed
    }

    /// How many buffers the peer may be lent now: the lend ring's room,
    /// less the frames waiting in our rx ring (each came in exchange for a
    /// lent buffer, so the two together never exceed the ring).
    pub fn lend_room(&self) -> usize {
        self.lend.slots().saturating_sub(self.rx.slots())
    }

    /// Lends the peer `buffers` (at most [`LinkEnd::lend_room`] are
    /// taken; returns how many).
    pub fn lend(&mut self, buffers: &[u64]) -> usize {
        let n = buffers.len().min(self.lend.slots());
        match self.lend.write_chunk_uninit(n) {
            Ok(chunk) => chunk.fill_from_iter(buffers[..n].iter().copied()),
            Err(_) => 0,
        }
    }

    /// Wakes the peer if it sleeps and this end pushed frames since the
    /// last call (once per poll iteration).
    pub fn notify(&mut self) {
        if !std::mem::take(&mut self.pushed) {
            return;
        }
        // Pairs with the fence in `prepare_sleep`: either the peer sees
        // the frames before it sleeps, or this sees it asleep.
        fence(Ordering::SeqCst);
        if self.peer.asleep.load(Ordering::Relaxed)
            && self.peer.asleep.swap(false, Ordering::AcqRel)
        {
            self.peer.wake();
        }
    }

    /// The descriptor the daemon's sleep waits on for this end.
    pub fn wake_fd(&self) -> RawFd {
        self.own.fd.as_raw_fd()
    }

    /// Before the daemon sleeps: marks this end asleep, and if frames are
    /// already waiting makes the sleep end at once.
    pub fn prepare_sleep(&mut self) {
        self.own.asleep.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        if self.rx.slots() > 0 {
            self.own.wake();
        }
    }

    /// After the sleep: awake again; drains the eventfd if it woke us.
    pub fn after_sleep(&mut self, woken: bool) {
        self.own.asleep.store(false, Ordering::Relaxed);
        if woken {
            self.own.drain();
        }
    }

    /// The link's carrier.
    pub fn carrier(&self) -> bool {
        self.shared.carrier.load(Ordering::Acquire)
    }

    /// Sets the link's carrier, for both ends.
    pub fn set_carrier(&self, up: bool) {
        if self.shared.carrier.swap(up, Ordering::AcqRel) != up {
            self.shared.generation.fetch_add(1, Ordering::AcqRel);
            self.peer.wake();
        }
    }

    /// Whether the carrier changed since the last call.
    pub fn carrier_changed(&mut self) -> bool {
        let g = self.shared.generation.load(Ordering::Acquire);
        std::mem::replace(&mut self.seen_generation, g) != g
    }

    /// Shutdown: every frame waiting from the peer and every buffer it
    /// lent, appended to `release` (for this end's pool).
    pub fn drain(&mut self, release: &mut Vec<u64>) {
        while let Ok(f) = self.rx.pop() {
            release.push(f.addr);
        }
        while let Ok(b) = self.borrowed.pop() {
            release.push(b);
        }
    }
}

/// The address of a memory-link port, which has no interface to take
/// one from: locally administered, unicast, and stable per switch and port
/// (its far end writes it as the destination of every frame).
pub fn port_mac(switch: &str, port: u8) -> MacAddr {
    let h = seed_of(&format!("{switch}/{port}")).to_be_bytes();
    [0x02, h[0], h[1], h[2], h[3], h[4] ^ port]
}

/// The memory links between the switches one process runs: every
/// switch-to-switch link of the topology whose both ends are among them.
#[derive(Debug, Default)]
pub struct MemoryLinks {
    /// Each end by (switch name, port index), until taken by
    /// [`MemoryLinks::layout`].
    ends: HashMap<(String, u8), LinkEnd>,
    /// The far end of each memory-link port: (switch, port).
    peers: HashMap<(String, u8), (String, u8)>,
}

impl MemoryLinks {
    /// The links of `topo` between the switches named in `switches`,
    /// `depth` frames per direction; a port's name for reports is
    /// `switch/ifname` (`port_name(switch, index)` gives the ifname).
    pub fn build(
        topo: &Topology,
        switches: &[&str],
        depth: usize,
        port_name: &dyn Fn(&str, u8) -> String,
    ) -> std::io::Result<MemoryLinks> {
        let mut links = MemoryLinks::default();
        for name in switches {
            let Some(sw) = topo.switch_by_name(name) else {
                continue;
            };
            for p in topo.ports(sw.id) {
                let Peer::Switch { switch, port, .. } = p.peer else {
                    continue;
                };
                let peer = topo.switch(switch).name.as_str();
                // Each link once, from its end with the smaller (switch,
                // port); a link to a switch of another process is a veth.
                if !switches.contains(&peer) || (peer, port) < (name, p.index) {
                    continue;
                }
                let here = format!("{name}/{}", port_name(name, p.index));
                let there = format!("{peer}/{}", port_name(peer, port));
                let (mut a, mut b) = mem_link(depth, (&here, &there))?;
                a.peer_mac = Some(port_mac(peer, port));
                b.peer_mac = Some(port_mac(name, p.index));
                links.ends.insert((name.to_string(), p.index), a);
                links.ends.insert((peer.to_string(), port), b);
                links
                    .peers
                    .insert((name.to_string(), p.index), (peer.to_string(), port));
                links
                    .peers
                    .insert((peer.to_string(), port), (name.to_string(), p.index));
            }
        }
        Ok(links)
    }

    /// Memory links in all (each counted once).
    pub fn len(&self) -> usize {
        self.peers.len() / 2
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.peers.is_empty()
    }

    /// Every link as its two ends (switch, port), each link once with its
    /// smaller end first, sorted (what a virtual-time driver joins).
    pub fn joins(&self) -> Vec<((String, u8), (String, u8))> {
        let mut v: Vec<_> = self
            .peers
            .iter()
            .filter(|(a, b)| a < b)
            .map(|(a, b)| (a.clone(), b.clone()))
            .collect();
        v.sort();
        v
    }

    /// Whether port `port` of `switch` is a memory link.
    pub fn is_memory(&self, switch: &str, port: u8) -> bool {
        self.peers.contains_key(&(switch.to_string(), port))
    }

    /// How many of `switch`'s `ports` ports are memory links.
    pub fn count(&self, switch: &str, ports: usize) -> usize {
        (0..ports)
            .filter(|&p| u8::try_from(p).is_ok_and(|p| self.is_memory(switch, p)))
            .count()
    }

    /// The far end's MAC of a memory-link port (what frames leaving by it
    /// are addressed to).
    pub fn peer_mac(&self, switch: &str, port: u8) -> Option<MacAddr> {
        self.peers
            .get(&(switch.to_string(), port))
            .map(|(s, p)| port_mac(s, *p))
    }

    /// Switch `switch`'s `ports` ports in order, for
    /// [`crate::linked_io::LinkedIo::new`]: `None` for a port on an
    /// interface, the link's end for a memory link (taken out: each end
    /// goes to one switch).
    pub fn layout(&mut self, switch: &str, ports: usize) -> Vec<Option<LinkEnd>> {
        (0..ports)
            .map(|p| {
                u8::try_from(p)
                    .ok()
                    .and_then(|p| self.ends.remove(&(switch.to_string(), p)))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(addr: u64, len: u32) -> Frame {
        Frame { addr, len }
    }

    #[test]
    fn the_links_between_the_switches_of_one_process() {
        let topo = Topology::load(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../topologies/2dc-3path.toml"
        )))
        .unwrap();
        let name = |_: &str, i: u8| format!("p{i}");
        // s1, p1 and s2 in this process; p2 and p3 elsewhere.
        let mut links = MemoryLinks::build(&topo, &["s1", "p1", "s2"], 16, &name).unwrap();
        // s1 port 0 - p1 port 0 and p1 port 1 - s2 port 0 (2dc-3path.toml).
        assert_eq!(links.len(), 2);
        assert!(links.is_memory("s1", 0) && links.is_memory("p1", 1));
        assert!(!links.is_memory("s1", 1), "s1-p2: p2 is in another process");
        assert!(!links.is_memory("s1", 3), "s1's host port");
        assert_eq!(links.count("s1", 4), 1);
        assert_eq!(links.peer_mac("s1", 0), Some(port_mac("p1", 0)));
        assert_eq!(links.peer_mac("p1", 0), Some(port_mac("s1", 0)));
        let s1 = links.layout("s1", 4);
        assert_eq!(
            s1.iter().map(Option::is_some).collect::<Vec<_>>(),
            [true, false, false, false]
        );
        assert_eq!(s1[0].as_ref().unwrap().peer_name(), "p1/p0");
        assert_eq!(s1[0].as_ref().unwrap().peer_mac(), Some(port_mac("p1", 0)));
        let p1 = links.layout("p1", 2);
        assert_eq!(p1[1].as_ref().unwrap().peer_name(), "s2/p0");
        // Taken once.
        assert!(links.layout("s1", 4).iter().all(Option::is_none));
        // Addresses: locally administered unicast, distinct per port.
        let m = port_mac("s1", 0);
        assert_eq!(m[0] & 0x03, 0x02);
        assert_ne!(m, port_mac("s1", 1));
        assert_ne!(m, port_mac("s2", 0));
    }

    fn no_copy() -> impl FnMut(Frame, u64) -> Frame {
        |_, _| unreachable!("descriptor transfer copies nothing")
    }

    #[test]
    fn a_frame_moves_by_descriptor_in_exchange_for_a_lent_buffer() {
        let (mut a, mut b) = mem_link(4, ("a/p0", "b/p0")).unwrap();
        assert_eq!((a.peer_name(), b.peer_name()), ("b/p0", "a/p0"));
        // Nothing lent yet: nothing can be sent, and the send says so.
        let mut release = Vec::new();
        assert_eq!(a.room(), 0);
        assert_eq!(
            a.send(
                &[f(0, 60)],
                Transfer::Descriptor,
                &mut no_copy(),
                &mut release
            ),
            0
        );
        assert_eq!(a.stats().peer_buffers_empty, 1);
        // b lends two of its buffers (addresses 100, 200).
        assert_eq!(b.lend_room(), 4);
        assert_eq!(b.lend(&[100, 200]), 2);
        assert_eq!(a.room(), 2);
        let sent = a.send(
            &[f(0, 60), f(2048, 1500), f(4096, 64)],
            Transfer::Descriptor,
            &mut no_copy(),
            &mut release,
        );
        assert_eq!(sent, 2);
        // a got b's buffers for its pool; b gets a's frames, in order.
        assert_eq!(release, vec![100, 200]);
        let mut got = Vec::new();
        b.recv(&mut got, 8);
        assert_eq!(got, vec![f(0, 60), f(2048, 1500)]);
        assert_eq!(a.stats().frames_sent, 2);
        assert_eq!(a.stats().bytes_sent, 1560);
        assert_eq!(b.stats().frames_received, 2);
        assert_eq!(b.stats().bytes_received, 1560);
    }

    #[test]
    fn a_copied_frame_goes_into_the_lent_buffer_and_its_own_comes_back() {
        let (mut a, mut b) = mem_link(4, ("a/p0", "b/p0")).unwrap();
        b.lend(&[100]);
        let mut copies = Vec::new();
        let mut copy = |fr: Frame, into: u64| {
            copies.push((fr.addr, into));
            Frame {
                addr: into,
                len: fr.len,
            }
        };
        let mut release = Vec::new();
        assert_eq!(
            a.send(&[f(0, 60)], Transfer::Copy, &mut copy, &mut release),
            1
        );
        assert_eq!(copies, vec![(0, 100)]);
        assert_eq!(release, vec![0]);
        let mut got = Vec::new();
        b.recv(&mut got, 8);
        assert_eq!(got, vec![f(100, 60)]);
    }

    #[test]
    fn lent_buffers_and_waiting_frames_never_exceed_the_ring() {
        let (mut a, mut b) = mem_link(4, ("a/p0", "b/p0")).unwrap();
        assert_eq!(b.lend(&[1, 2, 3, 4]), 4);
        let mut release = Vec::new();
        a.send(
            &[f(10, 60), f(20, 60), f(30, 60)],
            Transfer::Descriptor,
            &mut no_copy(),
            &mut release,
        );
        // 1 still lent, 3 waiting at b: b may lend none more.
        assert_eq!(b.lend_room(), 0);
        let mut got = Vec::new();
        b.recv(&mut got, 2);
        assert_eq!(b.lend_room(), 2);
        // At shutdown a hands back what b lent and did not use, b what
        // waits for it.
        let mut back = Vec::new();
        a.drain(&mut back);
        assert_eq!(back, vec![4]);
        back.clear();
        b.drain(&mut back);
        assert_eq!(back, vec![30]);
    }

    #[test]
    fn a_sleeping_receiver_is_woken_only_by_frames_and_carrier() {
        let (mut a, mut b) = mem_link(4, ("a/p0", "b/p0")).unwrap();
        let readable = |fd: RawFd| {
            let mut p = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one live pollfd, no timeout.
            unsafe { libc::poll(&mut p, 1, 0) == 1 }
        };
        b.lend(&[100]);
        // Awake receiver: a push costs no wake-up.
        let mut release = Vec::new();
        a.send(
            &[f(0, 60)],
            Transfer::Descriptor,
            &mut no_copy(),
            &mut release,
        );
        a.notify();
        assert!(!readable(b.wake_fd()));
        // Asleep with a frame already waiting: woken at once.
        b.prepare_sleep();
        assert!(readable(b.wake_fd()));
        b.after_sleep(true);
        assert!(!readable(b.wake_fd()));
        let mut got = Vec::new();
        b.recv(&mut got, 8);
        // Asleep and empty: a push wakes it, once.
        b.prepare_sleep();
        assert!(!readable(b.wake_fd()));
        b.lend(&[200]);
        a.send(
            &[f(2048, 60)],
            Transfer::Descriptor,
            &mut no_copy(),
            &mut release,
        );
        a.notify();
        assert!(readable(b.wake_fd()));
        b.after_sleep(true);
        // A carrier change wakes the other end and is seen by both.
        a.set_carrier(false);
        assert!(!a.carrier() && !b.carrier());
        assert!(readable(b.wake_fd()));
        assert!(a.carrier_changed() && b.carrier_changed());
        assert!(!a.carrier_changed() && !b.carrier_changed());
        // Setting it to what it is changes nothing.
        a.set_carrier(false);
        assert!(!b.carrier_changed());
    }
}

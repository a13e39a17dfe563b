//! A switch's ports over two kinds of link: the ports of its own packet
//! I/O (AF_XDP sockets, or in-memory test ports) and the ends of memory
//! links to switches of the same process ([`crate::mem_link`]). The switch
//! sees one [`PacketIo`] and port indices in its topology order either
//! way; only the port kind differs (in its stats and snapshot).
//!
//! The frames of both kinds live in the packet I/O's frame area, which
//! every switch of the process shares, and its pool is the switch's pool:
//! buffers lent to memory-link peers come from it and buffers received in
//! exchange go back to it.

use std::os::fd::RawFd;

use lcmp_control::snapshot::{MemoryLinkStats, XskStats};

use crate::daemon::PollSet;
use crate::io::{Frame, PacketIo};
use crate::mem_link::{LinkEnd, Transfer};

/// What a switch port is.
#[derive(Debug)]
enum PortRef {
    /// Port `.0` of the packet I/O.
    Io(usize),
    /// Memory link `.0`.
    Link(usize),
}

/// The ports of one switch: the packet I/O's and memory-link ends, in the
/// switch's port order.
pub struct LinkedIo<I: PacketIo> {
    inner: I,
    ports: Vec<PortRef>,
    links: Vec<LinkEnd>,
    transfer: Transfer,
    /// Buffers coming back to the pool from a send.
    release: Vec<u64>,
    /// Buffers taken from the pool to lend.
    lendable: Vec<u64>,
    /// `release` or unlent buffers as frames for the pool (kept, so the
    /// packet path allocates nothing).
    scratch: Vec<Frame>,
    /// The packet I/O's descriptors, then each link's wake-up eventfd.
    fds: Vec<libc::pollfd>,
}

impl<I: PacketIo> LinkedIo<I> {
    /// The switch's ports in order: `None` is the packet I/O's next port,
    /// `Some(end)` a memory link. `inner` must have exactly as many ports
    /// as there are `None`s, and share its frame area with the links'
    /// peers.
    pub fn new(inner: I, layout: Vec<Option<LinkEnd>>, transfer: Transfer) -> Result<Self, String> {
        let io_ports = layout.iter().filter(|p| p.is_none()).count();
        if io_ports != inner.ports() {
            return Err(format!(
                "{io_ports} ports without a memory link, but the packet I/O has {}",
                inner.ports()
            ));
        }
        let (mut ports, mut links) = (Vec::new(), Vec::new());
        let mut next_io = 0;
        for p in layout {
            match p {
                None => {
                    ports.push(PortRef::Io(next_io));
                    next_io += 1;
                }
                Some(end) => {
                    ports.push(PortRef::Link(links.len()));
                    links.push(end);
                }
            }
        }
        Ok(LinkedIo {
            inner,
            ports,
            links,
            transfer,
            release: Vec::new(),
            lendable: Vec::new(),
            scratch: Vec::new(),
            fds: Vec::new(),
        })
    }

    /// Only the packet I/O's ports, in order (no memory link).
    pub fn plain(inner: I) -> Self {
        let layout = (0..inner.ports()).map(|_| None).collect();
        Self::new(inner, layout, Transfer::default()).expect("one port of the I/O per port")
    }

    /// The packet I/O.
    pub fn inner(&self) -> &I {
        &self.inner
    }

    /// The packet I/O, for changes.
    pub fn inner_mut(&mut self) -> &mut I {
        &mut self.inner
    }

    /// Whether `port` is a memory link.
    pub fn is_memory_link(&self, port: usize) -> bool {
        matches!(self.ports.get(port), Some(PortRef::Link(_)))
    }

    /// The packet I/O's port behind switch port `port` (`None`: a memory
    /// link).
    pub fn io_port(&self, port: usize) -> Option<usize> {
        match self.ports.get(port) {
            Some(PortRef::Io(p)) => Some(*p),
            _ => None,
        }
    }

    /// The memory link behind switch port `port`, if it is one.
    pub fn link(&self, port: usize) -> Option<&LinkEnd> {
        match self.ports.get(port) {
            Some(PortRef::Link(l)) => self.links.get(*l),
            _ => None,
        }
    }

    /// Lends each link's peer as many free buffers as it has room for.
    fn lend(&mut self) {
        for l in &mut self.links {
            let want = l.lend_room();
            if want == 0 {
                continue;
            }
            self.lendable.clear();
            self.inner.take_free(want, &mut self.lendable);
            let lent = l.lend(&self.lendable);
            if lent < self.lendable.len() {
                self.scratch.clear();
                self.scratch.extend(
                    self.lendable[lent..]
                        .iter()
                        .map(|&addr| Frame { addr, len: 0 }),
                );
                self.inner.release(&self.scratch);
            }
        }
    }

    /// Hands the buffers in `release` back to the pool.
    fn release_buffers(&mut self) {
        if self.release.is_empty() {
            return;
        }
        self.scratch.clear();
        self.scratch
            .extend(self.release.drain(..).map(|addr| Frame { addr, len: 0 }));
        self.inner.release(&self.scratch);
    }
}

impl<I: PacketIo> PacketIo for LinkedIo<I> {
    fn ports(&self) -> usize {
        self.ports.len()
    }

    #[inline]
    fn recv(&mut self, port: usize, out: &mut Vec<Frame>, max: usize) {
        match self.ports[port] {
            PortRef::Io(p) => self.inner.recv(p, out, max),
            PortRef::Link(l) => self.links[l].recv(out, max),
        }
    }

    #[inline]
    fn frame(&self, frame: Frame) -> &[u8] {
        self.inner.frame(frame)
    }

    #[inline]
    fn frame_mut(&mut self, frame: Frame) -> &mut [u8] {
        self.inner.frame_mut(frame)
    }

    fn frame_room_mut(&mut self, frame: Frame) -> &mut [u8] {
        self.inner.frame_room_mut(frame)
    }

    #[inline]
    fn send(&mut self, port: usize, frames: &[Frame]) -> usize {
        match self.ports[port] {
            PortRef::Io(p) => self.inner.send(p, frames),
            PortRef::Link(l) => {
                let inner = &mut self.inner;
                let n = self.links[l].send(
                    frames,
                    self.transfer,
                    &mut |f, into| inner.copy_frame(f, into),
                    &mut self.release,
                );
                self.release_buffers();
                n
            }
        }
    }

    fn tx_room(&self, port: usize) -> usize {
        match self.ports[port] {
            PortRef::Io(p) => self.inner.tx_room(p),
            PortRef::Link(l) => self.links[l].room(),
        }
    }

    fn release(&mut self, frames: &[Frame]) {
        self.inner.release(frames);
    }

    fn flush(&mut self) {
        self.inner.flush();
        self.lend();
        for l in &mut self.links {
            l.notify();
        }
    }

    fn link_up(&mut self, port: usize) -> bool {
        match self.ports[port] {
            PortRef::Io(p) => self.inner.link_up(p),
            PortRef::Link(l) => self.links[l].carrier(),
        }
    }

    fn links_changed(&mut self) -> bool {
        let mut changed = self.inner.links_changed();
        for l in &mut self.links {
            changed |= l.carrier_changed();
        }
        changed
    }

    fn add_wake_fd(&mut self, fd: RawFd) {
        self.inner.add_wake_fd(fd);
    }

    fn port_stats(&self, port: usize) -> Option<XskStats> {
        match self.ports[port] {
            PortRef::Io(p) => self.inner.port_stats(p),
            PortRef::Link(_) => None,
        }
    }

    fn memory_link_stats(&self, port: usize) -> Option<MemoryLinkStats> {
        let PortRef::Link(l) = *self.ports.get(port)? else {
            return None;
        };
        let end = &self.links[l];
        let s = end.stats();
        Some(MemoryLinkStats {
            peer: end.peer_name().to_string(),
            transfer: self.transfer.name().to_string(),
            carrier: end.carrier(),
            frames_sent: s.frames_sent,
            bytes_sent: s.bytes_sent,
            frames_received: s.frames_received,
            bytes_received: s.bytes_received,
            peer_buffers_empty: s.peer_buffers_empty,
        })
    }

    fn set_carrier(&mut self, port: usize, up: bool) -> Result<(), String> {
        match self.ports.get(port) {
            Some(PortRef::Link(l)) => {
                self.links[*l].set_carrier(up);
                Ok(())
            }
            Some(PortRef::Io(p)) => self.inner.set_carrier(*p, up),
            None => Err(format!("no port {port}")),
        }
    }

    fn take_free(&mut self, max: usize, out: &mut Vec<u64>) {
        self.inner.take_free(max, out);
    }

    fn copy_frame(&mut self, from: Frame, to: u64) -> Frame {
        self.inner.copy_frame(from, to)
    }

    fn shutdown(&mut self) {
        for l in &mut self.links {
            l.drain(&mut self.release);
        }
        self.release_buffers();
        self.inner.shutdown();
    }
}

impl<I: PacketIo + PollSet> PollSet for LinkedIo<I> {
    fn poll_fds(&mut self) -> &mut [libc::pollfd] {
        self.fds.clear();
        self.fds.extend_from_slice(self.inner.poll_fds());
        for l in &mut self.links {
            l.prepare_sleep();
            self.fds.push(libc::pollfd {
                fd: l.wake_fd(),
                events: libc::POLLIN,
                revents: 0,
            });
        }
        &mut self.fds
    }

    fn after_poll(&mut self) {
        let own = self.inner.poll_fds();
        let n = own.len();
        own.copy_from_slice(&self.fds[..n]);
        self.inner.after_poll();
        for (l, fd) in self.links.iter_mut().zip(&self.fds[n..]) {
            l.after_sleep(fd.revents & libc::POLLIN != 0);
        }
    }
}

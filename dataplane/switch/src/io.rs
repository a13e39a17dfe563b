//! Packet I/O behind one narrow trait, so the whole forwarding pipeline
//! runs over AF_XDP sockets in production and over memory in tests.
//!
//! Frames live in one shared frame memory (the AF_XDP UMEM): a [`Frame`]
//! names a buffer in it. A frame received on one port is transmitted on
//! another without a copy, and every frame the switch drops is handed back
//! with [`PacketIo::release`] so the pool never leaks.

/// A frame buffer: its offset in the frame memory and the frame's length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Offset of the first byte of the frame in the frame memory.
    pub addr: u64,
    /// Frame length in bytes.
    pub len: u32,
}

/// What the switch needs from its ports.
pub trait PacketIo {
    /// Number of ports (indices `0..ports()`).
    fn ports(&self) -> usize;

    /// Appends up to `max` received frames of `port` to `out`.
    fn recv(&mut self, port: usize, out: &mut Vec<Frame>, max: usize);

    /// The bytes of a frame the switch holds.
    fn frame(&self, frame: Frame) -> &[u8];

    /// The bytes of a frame the switch holds, for rewriting in place.
    fn frame_mut(&mut self, frame: Frame) -> &mut [u8];

    /// The buffer of a frame from its first byte to the end of its chunk:
    /// room to grow the frame in place (an ICMP error quoting it). Without
    /// room, just the frame.
    fn frame_room_mut(&mut self, frame: Frame) -> &mut [u8] {
        self.frame_mut(frame)
    }

    /// Queues frames for transmission on `port`; returns how many (a
    /// prefix of `frames`) were taken. The caller still owns the rest.
    fn send(&mut self, port: usize, frames: &[Frame]) -> usize;

    /// How many frames `send` on `port` would take now. The switch hands
    /// the ring no more than this, so due frames wait in the egress instead
    /// of being dropped when the ring is full.
    fn tx_room(&self, _port: usize) -> usize {
        usize::MAX
    }

    /// Returns frames the switch no longer needs to the free pool.
    fn release(&mut self, frames: &[Frame]);

    /// Pushes queued transmissions out and recycles completed ones. Called
    /// once per poll-loop iteration.
    fn flush(&mut self);

    /// Whether the port's link is up (carrier).
    fn link_up(&mut self, port: usize) -> bool;

    /// Whether link state may have changed since the last call (a link
    /// event arrived), so the switch re-reads it at once instead of waiting
    /// for its periodic check.
    fn links_changed(&mut self) -> bool {
        false
    }

    /// Adds a descriptor whose readability also ends the daemon's sleep
    /// (the control socket's wake-up): one of its
    /// [`crate::daemon::PollSet::poll_fds`]. In-memory I/O never sleeps.
    fn add_wake_fd(&mut self, _fd: std::os::fd::RawFd) {}

    /// AF_XDP socket and XDP program counters of a port, where the I/O
    /// has them.
    fn port_stats(&self, _port: usize) -> Option<lcmp_control::snapshot::XskStats> {
        None
    }

    /// The counters of a port that is a memory link
    /// ([`crate::linked_io::LinkedIo`]).
    fn memory_link_stats(&self, _port: usize) -> Option<lcmp_control::snapshot::MemoryLinkStats> {
        None
    }

    /// Drops or restores the carrier of a port's link, both ends, as
    /// pulling or plugging a cable would: memory links only (a veth's
    /// carrier is the kernel's: `ip link set DEV down`).
    fn set_carrier(&mut self, _port: usize, _up: bool) -> Result<(), String> {
        Err("its carrier is the kernel's (ip link set DEV down|up): only a memory link's carrier is the switch's to set".into())
    }

    /// Takes up to `max` buffers from the free pool (to lend to a memory
    /// link's peer), appending their addresses to `out`. I/O without a
    /// pool of its own takes none.
    fn take_free(&mut self, _max: usize, _out: &mut Vec<u64>) {}

    /// Copies frame `from` into the buffer at `to` (one the switch holds)
    /// and returns the copy.
    fn copy_frame(&mut self, from: Frame, to: u64) -> Frame {
        let bytes = self.frame(from).to_vec();
        let copy = Frame {
            addr: to,
            len: bytes.len() as u32,
        };
        self.frame_mut(copy).copy_from_slice(&bytes);
        copy
    }

    /// Shutdown: takes back into the pool every buffer the I/O itself
    /// holds (memory links' rings), so the pool can be accounted for.
    fn shutdown(&mut self) {}
}

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

    /// Blocks until a port has frames or `timeout_ns` passes (`None`: no
    /// timeout). Event mode only; busy polling never calls it.
    fn wait(&mut self, timeout_ns: Option<u64>);

    /// Adds a descriptor whose readability also ends [`PacketIo::wait`]
    /// (the control socket's wake-up). In-memory I/O never waits.
    fn add_wake_fd(&mut self, _fd: std::os::fd::RawFd) {}

    /// AF_XDP socket and XDP program counters of a port, where the I/O
    /// has them.
    fn port_stats(&self, _port: usize) -> Option<lcmp_control::snapshot::XskStats> {
        None
    }
}

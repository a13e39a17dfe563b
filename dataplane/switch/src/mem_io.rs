//! An in-memory [`PacketIo`]: frames are injected into a port's receive
//! queue and collected from its transmit queue. Lets `cargo test` run the
//! whole switch, with no root and no network.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::frames::{FrameArea, FrameShare};
use crate::io::{Frame, PacketIo};

pub use crate::frames::FRAME_SIZE;

/// In-memory ports over a fixed pool of frame buffers.
pub struct MemIo {
    area: Arc<FrameArea>,
    /// Buffers released to the pool, the last released handed out first.
    free: Vec<u64>,
    /// Buffers of the share never handed out yet, as chunk addresses
    /// (step [`FRAME_SIZE`]): the free list grows with the most frames
    /// ever held, not with the share, so a pool sized for a worst case it
    /// rarely reaches (a network on a virtual clock) costs nothing until
    /// it does.
    fresh: std::ops::Range<u64>,
    rx: Vec<VecDeque<Frame>>,
    tx: Vec<VecDeque<Frame>>,
    up: Vec<bool>,
    /// Frames a port's transmit ring accepts per `send` (emulates a full
    /// ring when small).
    tx_room: usize,
}

impl MemIo {
    /// `ports` ports sharing a pool of `frames` buffers.
    pub fn new(ports: usize, frames: usize) -> Self {
        Self::in_share(
            ports,
            FrameShare::new_area(frames).expect("map the frame memory of a test switch"),
        )
    }

    /// `ports` ports whose pool starts with `share` of an area other
    /// switches share (memory links between them move frames as they
    /// are).
    pub fn in_share(ports: usize, share: FrameShare) -> Self {
        MemIo {
            area: share.area.clone(),
            free: Vec::new(),
            fresh: share.first..share.first + (share.frames * FRAME_SIZE) as u64,
            rx: vec![VecDeque::new(); ports],
            tx: vec![VecDeque::new(); ports],
            up: vec![true; ports],
            tx_room: usize::MAX,
        }
    }

    /// Puts a frame in `port`'s receive queue. False if the pool is empty
    /// (the frame is dropped, as a NIC with an empty fill ring would).
    pub fn inject(&mut self, port: usize, bytes: &[u8]) -> bool {
        let Some(addr) = self.pop_free() else {
            return false;
        };
        let len = bytes.len().min(FRAME_SIZE);
        // SAFETY: the chunk was in this pool: no one else holds it.
        unsafe { self.area.bytes_mut(addr, len) }.copy_from_slice(&bytes[..len]);
        self.rx[port].push_back(Frame {
            addr,
            len: len as u32,
        });
        true
    }

    /// Takes every frame transmitted on `port` so far, recycling its buffer.
    pub fn take_sent(&mut self, port: usize) -> Vec<Vec<u8>> {
        let frames: Vec<Frame> = self.tx[port].drain(..).collect();
        frames
            .into_iter()
            .map(|f| {
                let bytes = self.frame(f).to_vec();
                self.free.push(f.addr);
                bytes
            })
            .collect()
    }

    /// Frames waiting in `port`'s receive queue.
    pub fn rx_queued(&self, port: usize) -> usize {
        self.rx.get(port).map_or(0, VecDeque::len)
    }

    /// Recycles every frame transmitted on `port` so far without copying
    /// it out; returns how many.
    pub fn discard_sent(&mut self, port: usize) -> usize {
        let n = self.tx[port].len();
        self.free.extend(self.tx[port].drain(..).map(|f| f.addr));
        n
    }

    /// Sets a port's link state.
    pub fn set_link(&mut self, port: usize, up: bool) {
        self.up[port] = up;
    }

    /// Limits how many frames one `send` takes (and what `tx_room`
    /// reports).
    pub fn set_tx_room(&mut self, frames: usize) {
        self.tx_room = frames;
    }

    /// Free buffers in the pool.
    pub fn free_frames(&self) -> usize {
        self.free.len() + self.fresh_frames()
    }

    fn fresh_frames(&self) -> usize {
        ((self.fresh.end - self.fresh.start) / FRAME_SIZE as u64) as usize
    }

    /// A free buffer: the last released, else one never used.
    fn pop_free(&mut self) -> Option<u64> {
        self.free.pop().or_else(|| {
            let addr = self.fresh.start;
            (addr < self.fresh.end).then(|| {
                self.fresh.start += FRAME_SIZE as u64;
                addr
            })
        })
    }
}

impl PacketIo for MemIo {
    fn ports(&self) -> usize {
        self.rx.len()
    }

    fn recv(&mut self, port: usize, out: &mut Vec<Frame>, max: usize) {
        for _ in 0..max {
            match self.rx[port].pop_front() {
                Some(f) => out.push(f),
                None => break,
            }
        }
    }

    fn frame(&self, f: Frame) -> &[u8] {
        // SAFETY: the switch holds the frame (crate::frames).
        unsafe { self.area.bytes(f.addr, f.len as usize) }
    }

    fn frame_mut(&mut self, f: Frame) -> &mut [u8] {
        // SAFETY: as in `frame`; `&mut self` makes this the only borrow.
        unsafe { self.area.bytes_mut(f.addr, f.len as usize) }
    }

    fn tx_room(&self, _port: usize) -> usize {
        self.tx_room
    }

    fn frame_room_mut(&mut self, f: Frame) -> &mut [u8] {
        // Buffers are FRAME_SIZE-aligned in the area.
        let start = f.addr as usize;
        let end = (start - start % FRAME_SIZE) + FRAME_SIZE;
        // SAFETY: as in `frame_mut`: the switch holds the whole chunk.
        unsafe { self.area.bytes_mut(f.addr, end - start) }
    }

    fn send(&mut self, port: usize, frames: &[Frame]) -> usize {
        let n = frames.len().min(self.tx_room);
        self.tx[port].extend(&frames[..n]);
        n
    }

    fn take_free(&mut self, max: usize, out: &mut Vec<u64>) {
        let n = max.min(self.free.len());
        out.extend(self.free.drain(self.free.len() - n..));
        let fresh = (max - n).min(self.fresh_frames()) as u64;
        let end = self.fresh.start + fresh * FRAME_SIZE as u64;
        out.extend((self.fresh.start..end).step_by(FRAME_SIZE));
        self.fresh.start = end;
    }

    fn copy_frame(&mut self, from: Frame, to: u64) -> Frame {
        let len = (from.len as usize).min(FRAME_SIZE);
        // SAFETY: the switch holds both chunks: the frame, and the buffer
        // a memory-link peer lent it.
        unsafe { self.area.copy(from.addr, to, len) };
        Frame {
            addr: to,
            len: len as u32,
        }
    }

    fn release(&mut self, frames: &[Frame]) {
        self.free.extend(frames.iter().map(|f| f.addr));
    }

    fn flush(&mut self) {}

    fn link_up(&mut self, port: usize) -> bool {
        self.up[port]
    }
}

/// In-memory ports have nothing to poll: [`crate::daemon::run_many`] over
/// them only sleeps until the next deadline (tests use busy mode).
impl crate::daemon::PollSet for MemIo {
    fn poll_fds(&mut self) -> &mut [libc::pollfd] {
        &mut []
    }

    fn after_poll(&mut self) {}
}

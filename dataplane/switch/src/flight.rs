//! Frames an emulated link holds, kept as their bytes alone.
//!
//! A frame in an egress's port buffer or delay line waits: nothing reads or
//! rewrites it until it leaves (an ECN mark at departure is applied as it
//! is sent). On long-haul links at full rate that is most of what a network
//! holds (200 Gbit/s for 250 ms is 6.25 GB on the wire alone), and a pool
//! buffer per frame costs a whole chunk ([`crate::frames::FRAME_SIZE`], 2
//! KiB) for a 1,074-byte RoCEv2 data frame or a 62-byte ACK. A switch that
//! parks what its ports hold ([`crate::switch::Switch::park_in_flight`]:
//! the one-process engines do) copies each frame's bytes here as it is
//! queued and gives the buffer back, moves them from the port buffer's
//! store to the delay line's as the frame departs, and copies them into a
//! buffer again when the line releases the frame: memory that follows the
//! bytes held, not the frames, for three copies per hop.
//!
//! Both stores are FIFOs, as the port buffer and the delay line are: a
//! parked frame's handle carries only its length and where it is
//! ([`PARKED`], [`IN_LINE`] in its address), and frames leave each store
//! in the order they came. The one exception, a frame that finds the delay
//! line full (an emulation overflow), is the last one moved into the
//! line's store, and is taken off its end.

use std::collections::VecDeque;

use crate::io::Frame;

/// The address bit of a parked handle: no pool buffer (a frame area is far
/// smaller than 2^62 bytes).
pub const PARKED: u64 = 1 << 63;
/// With [`PARKED`]: in the delay line's store (else the port buffer's).
pub const IN_LINE: u64 = 1 << 62;

/// The bytes of the frames one port holds: its port buffer's and its delay
/// line's, each oldest first.
#[derive(Debug, Default)]
pub struct Flight {
    queue: VecDeque<u8>,
    line: VecDeque<u8>,
    frames: usize,
}

impl Flight {
    /// Whether `frame` is a parked handle rather than a pool buffer.
    #[inline]
    pub fn is_parked(frame: Frame) -> bool {
        frame.addr & PARKED != 0
    }

    /// Keeps `data` (a frame being queued) and returns its parked handle;
    /// the caller gives the frame's buffer back.
    #[inline]
    pub fn park(&mut self, data: &[u8]) -> Frame {
        self.queue.extend(data);
        self.frames += 1;
        Frame {
            addr: PARKED,
            len: data.len() as u32,
        }
    }

    /// The frame `frame` leaves the port buffer: a parked one's bytes move
    /// to the delay line's store (its new handle returned); a buffer stays
    /// as it is.
    #[inline]
    pub fn depart(&mut self, frame: Frame) -> Frame {
        if frame.addr & (PARKED | IN_LINE) != PARKED {
            return frame;
        }
        let len = (frame.len as usize).min(self.queue.len());
        // Slice by slice: a drain's bytes one at a time cost more than the
        // rest of a hop.
        let (a, b) = self.queue.as_slices();
        let from_a = len.min(a.len());
        self.line.extend(&a[..from_a]);
        self.line.extend(&b[..len - from_a]);
        self.queue.drain(..len);
        Frame {
            addr: PARKED | IN_LINE,
            len: frame.len,
        }
    }

    /// Copies the oldest frame of the delay line's store (released for
    /// transmission) into `out`, its length long, and forgets it.
    #[inline]
    pub fn unpark(&mut self, out: &mut [u8]) {
        let len = out.len().min(self.line.len());
        let (a, b) = self.line.as_slices();
        let from_a = len.min(a.len());
        out[..from_a].copy_from_slice(&a[..from_a]);
        out[from_a..len].copy_from_slice(&b[..len - from_a]);
        self.line.drain(..len);
        self.frames = self.frames.saturating_sub(1);
    }

    /// Forgets the oldest frame of the store parked handle `frame` is in
    /// (the port flushed: the delay line's first, then the buffer's).
    pub fn discard(&mut self, frame: Frame) {
        let store = if frame.addr & IN_LINE != 0 {
            &mut self.line
        } else {
            &mut self.queue
        };
        store.drain(..(frame.len as usize).min(store.len()));
        self.frames = self.frames.saturating_sub(1);
    }

    /// Forgets the frame just moved to the delay line's store, which found
    /// the line full.
    pub fn discard_overflow(&mut self, frame: Frame) {
        let keep = self.line.len().saturating_sub(frame.len as usize);
        self.line.truncate(keep);
        self.frames = self.frames.saturating_sub(1);
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.queue.len() + self.line.len()
    }

    /// Frames held.
    pub fn frames(&self) -> usize {
        self.frames
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(f: &mut Flight, len: usize) -> Vec<u8> {
        let mut v = vec![0; len];
        f.unpark(&mut v);
        v
    }

    #[test]
    fn frames_come_back_whole_and_in_order_across_the_ring_wrap() {
        let mut f = Flight::default();
        let a = f.park(&[1, 2, 3]);
        assert!(Flight::is_parked(a));
        assert_eq!((a.addr, a.len), (PARKED, 3));
        assert!(!Flight::is_parked(Frame { addr: 4096, len: 3 }));
        // A buffer departs as it is.
        let buffer = Frame { addr: 4096, len: 3 };
        assert_eq!(f.depart(buffer), buffer);
        let a = f.depart(a);
        assert_eq!((a.addr, a.len), (PARKED | IN_LINE, 3));
        assert_eq!(out(&mut f, 3), [1, 2, 3]);
        // Enough traffic that both rings' starts move past their ends.
        for round in 0u8..200 {
            let frame: Vec<u8> = (0..(round % 7 + 1)).map(|i| round ^ i).collect();
            let x = f.park(&frame);
            let y = f.park(&[round; 61]);
            f.depart(x);
            assert_eq!(out(&mut f, frame.len()), frame);
            f.depart(y);
            assert_eq!(out(&mut f, 61), [round; 61]);
        }
        assert_eq!((f.bytes(), f.frames()), (0, 0));
    }

    #[test]
    fn flushes_and_overflows_take_the_right_bytes() {
        let mut f = Flight::default();
        let a = f.park(&[1; 10]);
        let a = f.depart(a);
        let b = f.park(&[2; 5]);
        let c = f.park(&[3; 7]);
        // b departs into a full line: it is the line store's last.
        let b = f.depart(b);
        f.discard_overflow(b);
        assert_eq!((f.bytes(), f.frames()), (17, 2));
        // A port flush: the line's a, then the buffer's c.
        f.discard(a);
        assert_eq!(f.bytes(), 7);
        let c2 = f.depart(c);
        assert_eq!(out(&mut f, c2.len as usize), [3; 7]);
        assert_eq!((f.bytes(), f.frames()), (0, 0));
        let d = f.park(&[4; 4]);
        f.discard(d);
        assert_eq!((f.bytes(), f.frames()), (0, 0));
    }
}

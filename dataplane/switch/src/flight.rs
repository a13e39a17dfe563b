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
//!
//! A store is a queue of fixed-size chunks ([`CHUNK`]), not one growable
//! ring: a ring that doubles copies what it holds into a buffer twice its
//! size, so a port holding 6 GB peaks at 18 GB while it grows (the
//! full-size 8-DC replay under UCMP passed the 23 GB of this machine that
//! way). Chunks cost at most one partly filled chunk at each end, and
//! one emptied chunk is kept for reuse so a store that fills and drains
//! at a chunk's edge does not allocate per frame.
//!
//! Emptied chunks beyond that one go to a pool of this thread's, not back
//! to the allocator: stores fill and drain as congestion moves between
//! ports, and the allocator handed the freed memory back to the kernel, so
//! every refill faulted in fresh zeroed pages (a quarter of the full-size
//! 8-DC replay's time was the kernel clearing pages). The pool holds at
//! most what the stores held at their peak.

use std::cell::RefCell;
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
    queue: ByteFifo,
    line: ByteFifo,
    frames: usize,
}

/// Bytes per chunk of a store: large against a frame (a chunk boundary
/// splits one frame in 60) and small against what a port holds (a chunk
/// is allocated on a store's first use: a few hundred ports' stores take
/// tens of MB; 256 KiB cost a chain of 8 switches 2 MB more RSS than 64
/// KiB, and it ran no faster).
pub const CHUNK: usize = 64 * 1024;

/// Prefetches every cache line of `bytes` for reading.
#[inline]
fn prefetch_read(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    for line in bytes.chunks(64) {
        // SAFETY: SSE is part of the x86_64 baseline; a prefetch never
        // faults, reads into registers or changes memory.
        unsafe {
            core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
                line.as_ptr().cast(),
            );
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

thread_local! {
    /// Emptied [`CHUNK`]-sized chunks for any store of this thread (see
    /// the module docs).
    static POOL: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// A FIFO of bytes in chunks ([`CHUNK`] bytes but in tests): written at
/// the back, read and dropped at the front, and cut at the back.
#[derive(Debug)]
struct ByteFifo {
    /// Bytes per chunk.
    chunk: usize,
    /// Oldest first; each holds up to `chunk` bytes (`Vec::len`), all but
    /// the last full.
    chunks: VecDeque<Vec<u8>>,
    /// Bytes of the first chunk already read.
    head: usize,
    /// Bytes held.
    len: usize,
    /// An emptied chunk kept for the next write.
    spare: Option<Vec<u8>>,
}

impl Default for ByteFifo {
    fn default() -> Self {
        ByteFifo::with_chunk(CHUNK)
    }
}

impl ByteFifo {
    fn with_chunk(chunk: usize) -> Self {
        ByteFifo {
            chunk: chunk.max(1),
            chunks: VecDeque::new(),
            head: 0,
            len: 0,
            spare: None,
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn new_chunk(&mut self) -> Vec<u8> {
        if let Some(chunk) = self.spare.take() {
            return chunk;
        }
        if self.chunk == CHUNK {
            if let Some(chunk) = POOL.with(|pool| pool.borrow_mut().pop()) {
                return chunk;
            }
        }
        Vec::with_capacity(self.chunk)
    }

    /// Appends `data`.
    fn push(&mut self, mut data: &[u8]) {
        self.len += data.len();
        while !data.is_empty() {
            let room = self.chunks.back().map_or(0, |c| self.chunk - c.len());
            if room == 0 {
                let chunk = self.new_chunk();
                self.chunks.push_back(chunk);
                continue;
            }
            let n = room.min(data.len());
            let (now, rest) = data.split_at(n);
            if let Some(back) = self.chunks.back_mut() {
                back.extend_from_slice(now);
            }
            data = rest;
        }
    }

    /// Takes the oldest `n` bytes (fewer if fewer are held), handing each
    /// contiguous piece to `out` in order.
    fn pop(&mut self, n: usize, mut out: impl FnMut(&[u8])) {
        let mut left = n.min(self.len);
        self.len -= left;
        while left > 0 {
            let head = self.head;
            let Some(front) = self.chunks.front() else {
                break;
            };
            let filled = front.len();
            let n = (filled - head).min(left);
            if n == 0 {
                break;
            }
            out(&front[head..head + n]);
            self.head = head + n;
            left -= n;
            // A read-out chunk goes (the last one only once full: writes
            // continue into it).
            if self.head == filled && (filled == self.chunk || self.chunks.len() > 1) {
                self.retire_front();
            }
        }
        if self.len == 0 {
            // Nothing held: the next write starts at a chunk's start.
            while !self.chunks.is_empty() {
                self.retire_front();
            }
        }
    }

    /// Starts loading up to `n` bytes from the front into the cache.
    fn prefetch_front(&self, n: usize) {
        if let Some(front) = self.chunks.front() {
            let end = front.len().min(self.head + n);
            if let Some(bytes) = front.get(self.head..end) {
                prefetch_read(bytes);
            }
        }
    }

    fn retire_front(&mut self) {
        if let Some(chunk) = self.chunks.pop_front() {
            self.keep_spare(chunk);
        }
        self.head = 0;
    }

    fn keep_spare(&mut self, mut chunk: Vec<u8>) {
        chunk.clear();
        match &self.spare {
            None => self.spare = Some(chunk),
            Some(_) if chunk.capacity() == CHUNK => {
                POOL.with(|pool| pool.borrow_mut().push(chunk));
            }
            Some(_) => {}
        }
    }

    /// Forgets the newest `n` bytes (fewer if fewer are held).
    fn cut_back(&mut self, n: usize) {
        let mut left = n.min(self.len);
        self.len -= left;
        while left > 0 {
            // The first chunk's bytes before `head` are already read.
            let start = if self.chunks.len() == 1 { self.head } else { 0 };
            let Some(back) = self.chunks.back_mut() else {
                break;
            };
            let n = (back.len() - start).min(left);
            back.truncate(back.len() - n);
            left -= n;
            if back.len() == start {
                if let Some(chunk) = self.chunks.pop_back() {
                    self.keep_spare(chunk);
                }
                if self.chunks.is_empty() {
                    self.head = 0;
                }
            }
        }
    }
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
        self.queue.push(data);
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
        let line = &mut self.line;
        self.queue.pop(frame.len as usize, |piece| line.push(piece));
        Frame {
            addr: PARKED | IN_LINE,
            len: frame.len,
        }
    }

    /// Copies the oldest frame of the delay line's store (released for
    /// transmission) into `out`, its length long, and forgets it.
    #[inline]
    pub fn unpark(&mut self, out: &mut [u8]) {
        let mut at = 0;
        self.line.pop(out.len(), |piece| {
            out[at..at + piece.len()].copy_from_slice(piece);
            at += piece.len();
        });
        self.frames = self.frames.saturating_sub(1);
        // The line's next frame was written a link delay ago (milliseconds,
        // gigabytes of other frames since): start loading it now so that
        // its copy does not wait on memory (the copies out of the line were
        // a tenth of a full-size run).
        self.line.prefetch_front(out.len());
    }

    /// Forgets the oldest frame of the store parked handle `frame` is in
    /// (the port flushed: the delay line's first, then the buffer's).
    pub fn discard(&mut self, frame: Frame) {
        let store = if frame.addr & IN_LINE != 0 {
            &mut self.line
        } else {
            &mut self.queue
        };
        store.pop(frame.len as usize, |_| {});
        self.frames = self.frames.saturating_sub(1);
    }

    /// Forgets the frame just moved to the delay line's store, which found
    /// the line full.
    pub fn discard_overflow(&mut self, frame: Frame) {
        self.line.cut_back(frame.len as usize);
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

    proptest::proptest! {
        /// Any sequence of writes, reads and cuts gives the bytes a plain
        /// byte queue gives, across chunk edges (7-byte chunks).
        #[test]
        fn a_chunked_store_is_a_byte_queue(
            ops in proptest::collection::vec((0u8..3, 0usize..40), 0..200)
        ) {
            let mut store = ByteFifo::with_chunk(7);
            let mut model = VecDeque::new();
            let mut next = 0u8;
            for (op, n) in ops {
                match op {
                    0 => {
                        let data: Vec<u8> = (0..n).map(|_| { next = next.wrapping_add(1); next }).collect();
                        store.push(&data);
                        model.extend(&data);
                    }
                    1 => {
                        let mut got = Vec::new();
                        store.pop(n, |p| got.extend_from_slice(p));
                        let want: Vec<u8> = model.drain(..n.min(model.len())).collect();
                        proptest::prop_assert_eq!(got, want);
                    }
                    _ => {
                        store.cut_back(n);
                        model.truncate(model.len().saturating_sub(n));
                    }
                }
                proptest::prop_assert_eq!(store.len(), model.len());
                // Every chunk but the last is full; no chunk is empty.
                let last = store.chunks.len().saturating_sub(1);
                for (i, c) in store.chunks.iter().enumerate() {
                    proptest::prop_assert!(!c.is_empty());
                    proptest::prop_assert!(i == last || c.len() == 7);
                }
            }
        }
    }

    #[test]
    fn a_store_holds_what_it_holds_plus_at_most_two_chunks() {
        // 10,000 RoCEv2 data frames of 1,074 bytes (10,740,000 bytes) take
        // 164 chunks of 64 KiB (163 hold 10,682,368 bytes; the 164th is
        // partly filled), and read back in order.
        let mut f = Flight::default();
        let frame = |i: u32| -> Vec<u8> { (0..1074).map(|j| (i * 7 + j) as u8).collect() };
        let handles: Vec<Frame> = (0..10_000).map(|i| f.park(&frame(i))).collect();
        assert_eq!(f.queue.chunks.len(), 164);
        assert_eq!(f.bytes(), 10_740_000);
        for (i, h) in handles.into_iter().enumerate() {
            let h = f.depart(h);
            assert_eq!(out(&mut f, h.len as usize), frame(i as u32), "frame {i}");
        }
        // Empty: no chunk held but the one spare of each store.
        assert_eq!((f.bytes(), f.frames()), (0, 0));
        assert!(f.queue.chunks.is_empty() && f.line.chunks.is_empty());
    }

    #[test]
    fn a_drained_store_chunks_go_to_the_next_store_that_fills() {
        // Store a fills three chunks and drains: one chunk stays its
        // spare, the other two go to the pool; store b's first two chunks
        // come from the pool (no new memory), its third is new.
        let pooled = || POOL.with(|pool| pool.borrow().len());
        let mut a = Flight::default();
        let frame = [7u8; 1024];
        let handles: Vec<Frame> = (0..3 * 64).map(|_| a.park(&frame)).collect();
        assert_eq!((a.queue.chunks.len(), pooled()), (3, 0));
        for h in handles {
            a.discard(h);
        }
        assert!(a.queue.spare.is_some());
        assert_eq!(pooled(), 2);
        let mut b = Flight::default();
        for _ in 0..3 * 64 {
            b.park(&frame);
        }
        assert_eq!((b.queue.chunks.len(), pooled()), (3, 0));
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

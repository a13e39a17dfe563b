//! The memory frames live in: one mapping of fixed-size chunks that the
//! ports of a switch share (the AF_XDP UMEM), and that the switches of one
//! process share when they exchange frames over memory links
//! ([`crate::mem_link`]): a frame then crosses from one switch to the next
//! as a descriptor, without a copy.
//!
//! Who may touch a chunk is decided by who holds its descriptor, exactly as
//! between AF_XDP and the kernel: a chunk is in one switch's free pool, or
//! held by one switch (received, queued, in its delay line), or in one ring
//! (a kernel ring, a memory link's ring). A descriptor moves between
//! threads only through a ring whose push and pop order the accesses
//! (release/acquire). The area itself only checks bounds.

use std::ptr::NonNull;
use std::sync::Arc;

/// Size of one chunk: one frame per chunk (MTU-sized frames; no
/// multi-buffer).
pub const FRAME_SIZE: usize = 2048;

/// Anonymous memory of `frames` chunks, unmapped on drop.
#[derive(Debug)]
pub struct FrameArea {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the area is plain memory; which thread may access a chunk is
// decided by who holds its descriptor (module documentation), and every
// access through `bytes`/`bytes_mut` is by such a holder.
unsafe impl Send for FrameArea {}
// SAFETY: as for Send: concurrent accesses are to different chunks.
unsafe impl Sync for FrameArea {}

impl FrameArea {
    /// `frames` chunks of [`FRAME_SIZE`] bytes, populated up front so the
    /// packet path never takes a page fault. Fails with the size and the
    /// system's reason.
    pub fn new(frames: usize) -> Result<Arc<FrameArea>, String> {
        Self::map(frames, libc::MAP_POPULATE)
    }

    /// `frames` chunks of [`FRAME_SIZE`] bytes, neither reserved nor
    /// populated: a page takes memory when first touched. For networks on
    /// a virtual clock, where a page fault costs no deadline and pools are
    /// sized for the worst case they will rarely reach (pools hand chunks
    /// out last-released first, so the pages touched follow the most
    /// frames ever held).
    pub fn new_unpopulated(frames: usize) -> Result<Arc<FrameArea>, String> {
        Self::map(frames, libc::MAP_NORESERVE)
    }

    fn map(frames: usize, flags: libc::c_int) -> Result<Arc<FrameArea>, String> {
        let len = frames
            .checked_mul(FRAME_SIZE)
            .filter(|&l| l > 0)
            .ok_or_else(|| format!("cannot map {frames} frames of {FRAME_SIZE} bytes"))?;
        // SAFETY: an anonymous private mapping with no address hint has no
        // preconditions; the result is checked against MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | flags,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(format!(
                "cannot map {len} bytes of frame memory: {}",
                std::io::Error::last_os_error()
            ));
        }
        let ptr = NonNull::new(p.cast()).ok_or("mmap returned null")?;
        Ok(Arc::new(FrameArea { ptr, len }))
    }

    /// Bytes in the area.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the area is empty (never: [`FrameArea::new`] refuses 0).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Chunks in the area.
    pub fn frames(&self) -> usize {
        self.len / FRAME_SIZE
    }

    /// The whole area, for registering it with the kernel as a UMEM.
    pub fn region(&self) -> NonNull<[u8]> {
        NonNull::slice_from_raw_parts(self.ptr, self.len)
    }

    /// Whether `start..start + len` lies inside the area.
    #[inline]
    pub fn contains(&self, start: u64, len: usize) -> bool {
        usize::try_from(start)
            .ok()
            .and_then(|s| s.checked_add(len))
            .is_some_and(|end| end <= self.len)
    }

    /// The bytes `start..start + len`, or nothing when outside the area.
    ///
    /// # Safety
    ///
    /// The caller holds the descriptor of the chunk(s) the range lies in
    /// (module documentation), so no one writes them while the borrow
    /// lives.
    #[inline]
    pub unsafe fn bytes(&self, start: u64, len: usize) -> &[u8] {
        if !self.contains(start, len) {
            return &[];
        }
        // SAFETY: inside the mapping (checked); exclusive to the holder
        // (the caller's contract).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(start as usize), len) }
    }

    /// The bytes `start..start + len` for writing, or nothing when outside
    /// the area.
    ///
    /// # Safety
    ///
    /// As for [`FrameArea::bytes`], and no other borrow of the range lives
    /// (callers take `&mut self` of whatever holds the descriptor).
    #[inline]
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn bytes_mut(&self, start: u64, len: usize) -> &mut [u8] {
        if !self.contains(start, len) {
            return &mut [];
        }
        // SAFETY: inside the mapping (checked); exclusive to the holder
        // (the caller's contract).
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().add(start as usize), len) }
    }
}

impl FrameArea {
    /// Copies `len` bytes from chunk `from` to chunk `to` (a frame into a
    /// buffer a memory-link peer lent); false, copying nothing, when
    /// either range is outside the area or they overlap.
    ///
    /// # Safety
    ///
    /// The caller holds both chunks' descriptors (module documentation).
    pub unsafe fn copy(&self, from: u64, to: u64, len: usize) -> bool {
        let disjoint =
            from.saturating_add(len as u64) <= to || to.saturating_add(len as u64) <= from;
        if !(self.contains(from, len) && self.contains(to, len) && disjoint) {
            return false;
        }
        // SAFETY: both ranges are inside the mapping and do not overlap
        // (checked); the caller holds both.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.ptr.as_ptr().add(from as usize),
                self.ptr.as_ptr().add(to as usize),
                len,
            );
        }
        true
    }
}

impl Drop for FrameArea {
    fn drop(&mut self) {
        // SAFETY: ptr/len are exactly the mapping made in `new`; every user
        // (UMEM registrations, ports) holds an `Arc` and is gone by now.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

/// A switch's share of an area: the chunks its pool starts with (any chunk
/// of the area may come and go later over memory links).
#[derive(Clone, Debug)]
pub struct FrameShare {
    /// The area.
    pub area: Arc<FrameArea>,
    /// Address of the share's first chunk.
    pub first: u64,
    /// Chunks in the share.
    pub frames: usize,
}

impl FrameShare {
    /// A new area of `frames` chunks, all of it one share.
    pub fn new_area(frames: usize) -> Result<FrameShare, String> {
        Ok(FrameShare {
            area: FrameArea::new(frames)?,
            first: 0,
            frames,
        })
    }

    /// One area split into consecutive shares of `frames[i]` chunks each
    /// (the switches of a process).
    pub fn split_area(frames: &[usize]) -> Result<Vec<FrameShare>, String> {
        let total: usize = frames.iter().sum();
        Ok(Self::split(FrameArea::new(total)?, frames))
    }

    /// [`FrameShare::split_area`] over an unpopulated area
    /// ([`FrameArea::new_unpopulated`]).
    pub fn split_area_unpopulated(frames: &[usize]) -> Result<Vec<FrameShare>, String> {
        let total: usize = frames.iter().sum();
        Ok(Self::split(FrameArea::new_unpopulated(total)?, frames))
    }

    fn split(area: Arc<FrameArea>, frames: &[usize]) -> Vec<FrameShare> {
        let mut first = 0u64;
        frames
            .iter()
            .map(|&n| {
                let s = FrameShare {
                    area: area.clone(),
                    first,
                    frames: n,
                };
                first += (n * FRAME_SIZE) as u64;
                s
            })
            .collect()
    }

    /// The chunk addresses of the share, last first (a pool pops from the
    /// end, so frames are handed out in address order).
    pub fn chunks(&self) -> Vec<u64> {
        (0..self.frames as u64)
            .rev()
            .map(|i| self.first + i * FRAME_SIZE as u64)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_disjoint_and_cover_the_area() {
        let shares = FrameShare::split_area(&[3, 2]).unwrap();
        assert_eq!(shares[0].area.frames(), 5);
        assert_eq!(shares[0].chunks(), vec![4096, 2048, 0]);
        assert_eq!(shares[1].chunks(), vec![8192, 6144]);
        assert!(Arc::ptr_eq(&shares[0].area, &shares[1].area));
        // The same layout unpopulated; a chunk is usable when touched.
        let lazy = FrameShare::split_area_unpopulated(&[3, 2]).unwrap();
        assert_eq!(lazy[1].chunks(), vec![8192, 6144]);
        // SAFETY: nothing else uses this area.
        unsafe {
            lazy[1]
                .area
                .bytes_mut(8192, 4)
                .copy_from_slice(&[1, 2, 3, 4]);
            assert_eq!(lazy[1].area.bytes(8192, 4), &[1, 2, 3, 4]);
            assert_eq!(lazy[0].area.bytes(0, 2), &[0, 0]);
        }
    }

    #[test]
    fn bounds_are_checked() {
        let a = FrameArea::new(2).unwrap();
        assert!(a.contains(0, 4096));
        assert!(!a.contains(1, 4096));
        assert!(!a.contains(u64::MAX, 1));
        // SAFETY: nothing else uses this area.
        unsafe {
            a.bytes_mut(2048, 4)[..].copy_from_slice(&[1, 2, 3, 4]);
            assert_eq!(a.bytes(2049, 2), &[2, 3]);
            assert!(a.bytes(4095, 2).is_empty());
        }
        assert!(FrameArea::new(0).is_err());
    }

    #[test]
    fn copies_between_chunks_only() {
        let a = FrameArea::new(3).unwrap();
        // SAFETY: nothing else uses this area.
        unsafe {
            a.bytes_mut(0, 3).copy_from_slice(&[7, 8, 9]);
            assert!(a.copy(0, 4096, 3));
            assert_eq!(a.bytes(4096, 3), &[7, 8, 9]);
            assert!(!a.copy(0, 2, 3), "overlapping");
            assert!(!a.copy(0, 6144, 3), "past the end");
        }
    }
}

//! Live heap bytes of this process: the system allocator with a counter,
//! so the virtual-clock benchmarks can say what each switch's structures
//! take (the bytes allocated while building it and still held), which
//! RSS cannot tell apart from the rest of the process; and the most live
//! at once since [`reset_peak`] (a `fetch_max` on every allocation), for
//! what a whole run takes at its worst.
//!
//! Bytes are what the callers asked for (a layout's size): malloc's own
//! overhead per block is not in them, and a block counts whole whether or
//! not its pages were ever touched (RSS counts those only).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The system allocator, counting the bytes it has handed out and not
/// taken back.
pub struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// Counts `size` more bytes live, and the peak.
#[inline]
fn grew(size: usize) {
    let live = LIVE.fetch_add(size, Ordering::Relaxed).wrapping_add(size);
    PEAK.fetch_max(live, Ordering::Relaxed);
}

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged, so `System`'s guarantees hold; the counter only observes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as given (the caller's contract).
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as given (the caller's contract).
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as given (the caller's contract).
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded as given (the caller's contract).
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        // Its net change: a block that moves is briefly held twice (the
        // copy), which the peak does not count.
        if !p.is_null() {
            if new_size >= layout.size() {
                grew(new_size - layout.size());
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        p
    }
}

/// Heap bytes allocated and not yet freed, by every thread.
pub fn live_bytes() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// The most heap bytes live at once, by every thread, since the last
/// [`reset_peak`] (or the start).
pub fn peak_bytes() -> usize {
    PEAK.load(Ordering::Relaxed)
}

/// Starts a new peak from the bytes live now.
pub fn reset_peak() {
    PEAK.store(live_bytes(), Ordering::Relaxed);
}

/// The heap bytes `f` leaves allocated (what it built and still holds,
/// less what it freed of what was there before), and its result.
pub fn held_by<T>(f: impl FnOnce() -> T) -> (isize, T) {
    let before = live_bytes();
    let out = f();
    (live_bytes() as isize - before as isize, out)
}

/// A line of /proc/self/status in bytes (`VmHWM`: peak RSS; `VmRSS`), if
/// the kernel reports it.
pub fn proc_status_bytes(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status
        .lines()
        .find(|l| l.strip_prefix(field).is_some_and(|r| r.starts_with(':')))?;
    let kb: u64 = line[field.len() + 1..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// Resets this process's peak RSS (`VmHWM`) to its RSS now (`echo 5 >
/// /proc/self/clear_refs`, Linux 4.0 and later); false if the kernel
/// refused.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_built_and_kept_is_counted_and_one_dropped_is_not() {
        // Other tests of this binary allocate and free on their own
        // threads meanwhile (a few MiB at most), so a 64 MiB buffer kept
        // must show as well over 32 MiB.
        let (held, kept) = held_by(|| vec![0u8; 64 << 20]);
        assert!(held > 32 << 20, "{held}");
        drop(kept);
        assert!(proc_status_bytes("VmHWM").is_some_and(|b| b > 1 << 20));
        // The peak saw it (other tests may have reset it meanwhile, but
        // not below what was live then).
        reset_peak();
        let base = peak_bytes();
        let v = vec![1u8; 32 << 20];
        assert!(
            peak_bytes() >= base + (32 << 20) - (4 << 20),
            "{}",
            peak_bytes()
        );
        drop(v);
        assert!(proc_status_bytes("NoSuchField").is_none());
    }
}

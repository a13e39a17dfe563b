//! Live heap bytes of this process: the system allocator with a counter,
//! so the virtual-clock benchmarks can say what each switch's structures
//! take (the bytes allocated while building it and still held), which
//! RSS cannot tell apart from the rest of the process.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The system allocator, counting the bytes it has handed out and not
/// taken back.
pub struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged, so `System`'s guarantees hold; the counter only observes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as given (the caller's contract).
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as given (the caller's contract).
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
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
        if !p.is_null() {
            LIVE.fetch_add(new_size, Ordering::Relaxed);
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }
}

/// Heap bytes allocated and not yet freed, by every thread.
pub fn live_bytes() -> usize {
    LIVE.load(Ordering::Relaxed)
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
        assert!(proc_status_bytes("NoSuchField").is_none());
    }
}

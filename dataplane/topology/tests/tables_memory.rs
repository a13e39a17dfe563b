//! Memory for one switch's tables in a network at the switch cap: the
//! C_path scales used to collect every candidate of every switch (16.7
//! million for a 4,096-switch chain, 268 MB and more), and one switch's
//! tables paid for them. Peak heap is measured with a counting allocator;
//! this file holds one test so that nothing else allocates meanwhile.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use lcmp_policy::PathCostParams;
use lcmp_topology::limits::MAX_SWITCHES;
use lcmp_topology::tables::{path_cost_model, switch_tables, PathMetric};
use lcmp_topology::Topology;

mod common;
use common::switches_and_links;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The most `f` holds on the heap at once beyond what was live before,
/// with its result.
fn peak_of<T>(f: impl FnOnce() -> T) -> (usize, T) {
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let out = f();
    (PEAK.load(Ordering::Relaxed) - before, out)
}

const MIB: usize = 1 << 20;

#[test]
fn one_switch_of_a_network_at_the_cap_takes_memory_in_proportion_to_the_network() {
    // s0 - s1 - ... - s4095, each delivering a /24.
    let n = MAX_SWITCHES;
    let text = switches_and_links(n, |i| i - 1);
    let topo = Topology::parse(&text, "chain.toml").unwrap();
    drop(text);

    // The scales from every switch's candidates: a search per destination,
    // two running maxima. The longest path, s0 - s4095, is 4,095 ms:
    // the cap is 2^22 us.
    let (peak, model) =
        peak_of(|| path_cost_model(&topo, PathCostParams::default(), PathMetric::Path).unwrap());
    assert_eq!(model.delay_cap_us(), 4_194_304);
    assert!(peak < 4 * MIB, "path_cost_model held {peak} bytes");

    // One switch's tables: 4,095 routes.
    let s2048 = topo.switch_by_name("s2048").unwrap().id;
    let (peak, tables) = peak_of(|| switch_tables(&topo, s2048, &model, PathMetric::Path).unwrap());
    assert_eq!(tables.routes.len(), n - 1);
    assert!(peak < 8 * MIB, "switch_tables held {peak} bytes");
}

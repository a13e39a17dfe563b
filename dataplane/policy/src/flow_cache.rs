//! The flow cache: flow -> egress port, fixed capacity, idle eviction.
//!
//! Layout: 8-way set-associative buckets of one cache line each. An entry is
//! 8 bytes: a 32-bit fingerprint of the flow hash, and a 32-bit word holding
//! the last-seen time (24 bits of ~1 ms ticks) and the port (8 bits). Each
//! flow has two candidate buckets (partial-key cuckoo hashing: the primary
//! from the hash's low bits, the alternate derived from the primary and the
//! fingerprint). It goes into the primary while that has room, else the
//! alternate; if both are full, one entry moves to its own alternate to
//! make room. That fills the table to ~95%
//! and more before refusing, where a single 8-way bucket overflows from
//! ~60%. Lookups try the primary first. The fingerprint is the hash's high 32 bits, so a flow
//! is told apart by 32 + log2(buckets) hash bits: two flows collide only if
//! they share a bucket and a fingerprint (probability about 16 / 2^32 per
//! new flow), and the second then follows the first's path.
//!
//! 8 bytes per flow against the paper's budget of 20-24.
//!
//! Time: ticks of 2^20 ns (1.049 ms) wrap after 2^24 ticks (4.9 hours).
//! Ages are computed modulo the wrap, which is exact as long as every entry
//! is visited by the eviction sweep at least once per 2.4 hours; the sweep
//! visits all buckets far more often than that in any running switch.
//!
//! Eviction is incremental: [`FlowCache::evict_step`] visits a bounded number
//! of buckets per call and the caller spreads calls over its poll loop.
//! Insertion also reclaims an expired entry of the bucket it lands in. A
//! full bucket of live entries refuses the insert ([`CacheFull`]) rather than
//! evicting a live flow: nothing cached is ever lost silently.

use crate::PortId;

const WAYS: usize = 8;
const TICK_SHIFT: u32 = 20;
const TICK_BITS: u32 = 24;
const TICK_MASK: u32 = (1 << TICK_BITS) - 1;

/// Nanoseconds per cache time tick.
pub const TICK_NS: u64 = 1 << TICK_SHIFT;

/// One bucket: fingerprints first so a lookup compares one contiguous run.
#[derive(Clone, Copy, Default)]
#[repr(C, align(64))]
struct Bucket {
    /// 0 marks an empty way.
    fingerprint: [u32; WAYS],
    /// `tick << 8 | port`.
    stamp_port: [u32; WAYS],
}

/// Where a cached flow lives, to re-point it without a second lookup. Valid
/// until the next insert (which may move entries between buckets).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot(u32);

/// The bucket of a new flow holds only live flows; the flow is not cached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheFull;

/// Flow -> port cache. See the module documentation.
pub struct FlowCache {
    buckets: Box<[Bucket]>,
    mask: u64,
    /// Entries idle for more than this many ticks are evictable; includes one
    /// tick of margin for tick quantization (see [`FlowCache::new`]).
    evict_after_ticks: u32,
    sweep_cursor: usize,
    len: usize,
    evictions: u64,
}

impl FlowCache {
    /// The longest idle timeout a cache can keep (half the tick wrap, about
    /// 2.4 hours): ages are computed modulo the wrap.
    pub const MAX_IDLE_TIMEOUT_NS: u64 = ((1u64 << (TICK_BITS - 1)) - 2) * TICK_NS;

    /// A cache for at least `capacity` flows (rounded up to a power-of-two
    /// number of 8-way buckets) whose entries expire after `idle_timeout_ns`
    /// without a packet. The timeout must exceed the largest path RTT so an
    /// idle flow is re-routed only when nothing of it is in flight.
    ///
    /// Panics if the timeout exceeds half the tick wrap (2.4 hours).
    pub fn new(capacity: usize, idle_timeout_ns: u64) -> Self {
        let buckets = capacity.div_ceil(WAYS).max(1).next_power_of_two();
        let timeout_ticks = idle_timeout_ns.div_ceil(TICK_NS);
        assert!(
            timeout_ticks < (1 << (TICK_BITS - 1)),
            "flow idle timeout must be below {} s",
            ((1u64 << (TICK_BITS - 1)) * TICK_NS) / 1_000_000_000
        );
        FlowCache {
            buckets: vec![Bucket::default(); buckets].into_boxed_slice(),
            mask: buckets as u64 - 1,
            // A flow seen at t has tick floor(t / TICK); at now its age in
            // ticks is at most floor((now - t) / TICK) + 1. Evicting only
            // above timeout_ticks + 1 never evicts a flow seen within the
            // timeout.
            evict_after_ticks: timeout_ticks as u32 + 1,
            sweep_cursor: 0,
            len: 0,
            evictions: 0,
        }
    }

    /// Number of flows the cache can hold.
    pub fn capacity(&self) -> usize {
        self.buckets.len() * WAYS
    }

    /// Bytes of memory the entries take.
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.buckets)
    }

    /// Flows cached now (including expired ones not yet evicted).
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no flow is cached.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Entries evicted for idleness so far (sweep and reclaim on insert).
    pub fn evictions(&self) -> u64 {
        self.evictions
    }

    /// Cached flows per port (`out[p]` for port `p`), expired entries not
    /// yet evicted included. Walks the whole table: for reports, off the
    /// packet path.
    pub fn flows_per_port(&self, out: &mut [u64; 256]) {
        for b in self.buckets.iter() {
            for way in 0..WAYS {
                if b.fingerprint[way] != 0 {
                    out[(b.stamp_port[way] & 0xff) as usize] += 1;
                }
            }
        }
    }

    /// Primary bucket, alternate bucket and fingerprint of a hash.
    #[inline]
    fn split(&self, hash: u64) -> (usize, usize, u32) {
        let fp = (hash >> 32) as u32;
        let fp = if fp == 0 { 1 } else { fp };
        let primary = (hash & self.mask) as usize;
        (primary, self.other_bucket(primary, fp), fp)
    }

    /// The other bucket of an entry, from its bucket and fingerprint alone
    /// (partial-key cuckoo hashing): `b -> other -> b`, so a cached entry can
    /// be moved without knowing its full hash.
    #[inline]
    fn other_bucket(&self, bucket: usize, fp: u32) -> usize {
        let mix = (fp as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
        bucket ^ (mix & self.mask) as usize
    }

    /// The way of `bucket` holding `fp`. Compares all ways and takes the
    /// first match from a bit mask: no branch on which way matches (a
    /// random match position would mispredict a compare chain), and the
    /// compiler turns the loop into two vector compares.
    #[inline]
    fn find(&self, bucket: usize, fp: u32) -> Option<usize> {
        let fps = &self.buckets[bucket].fingerprint;
        let mut mask = 0u32;
        for (i, &f) in fps.iter().enumerate() {
            mask |= ((f == fp) as u32) << i;
        }
        (mask != 0).then(|| mask.trailing_zeros() as usize)
    }

    #[inline]
    fn tick(now_ns: u64) -> u32 {
        (now_ns >> TICK_SHIFT) as u32 & TICK_MASK
    }

    #[inline]
    fn expired(&self, stamp_port: u32, now_tick: u32) -> bool {
        let age = now_tick.wrapping_sub(stamp_port >> 8) & TICK_MASK;
        age > self.evict_after_ticks
    }

    /// The port of a cached flow, refreshing its last-seen time.
    #[inline]
    pub fn lookup(&mut self, hash: u64, now_ns: u64) -> Option<(PortId, Slot)> {
        let (primary, alternate, fp) = self.split(hash);
        let (b, way) = match self.find(primary, fp) {
            Some(w) => (primary, w),
            None => (alternate, self.find(alternate, fp)?),
        };
        let bucket = &mut self.buckets[b];
        let port = bucket.stamp_port[way] as u8;
        bucket.stamp_port[way] = Self::tick(now_ns) << 8 | port as u32;
        Some((port, Slot((b * WAYS + way) as u32)))
    }

    /// Re-points a cached flow (failover), refreshing its last-seen time.
    #[inline]
    pub fn set_port(&mut self, slot: Slot, port: PortId, now_ns: u64) {
        let (b, way) = (slot.0 as usize / WAYS, slot.0 as usize % WAYS);
        if let Some(bucket) = self.buckets.get_mut(b) {
            bucket.stamp_port[way] = Self::tick(now_ns) << 8 | port as u32;
        }
    }

    /// Caches a flow that [`lookup`](Self::lookup) did not find. Takes an
    /// empty way of its primary bucket, else of its alternate, else makes
    /// room by a cuckoo move, else reclaims an expired entry of either; two
    /// buckets of live flows that cannot move refuse.
    #[inline]
    pub fn insert(&mut self, hash: u64, port: PortId, now_ns: u64) -> Result<Slot, CacheFull> {
        let (primary, alternate, fp) = self.split(hash);
        let now_tick = Self::tick(now_ns);
        // Primary first: most flows then need one bucket read per lookup;
        // the alternate and cuckoo moves absorb the overflow.
        let (b, way) = if let Some(w) = self.find(primary, 0) {
            self.len += 1;
            (primary, w)
        } else if let Some(w) = self.find(alternate, 0) {
            self.len += 1;
            (alternate, w)
        } else if let Some(found) = self
            .make_room(primary)
            .or_else(|| self.make_room(alternate))
        {
            self.len += 1;
            found
        } else {
            let expired_way = |b: usize| {
                (0..WAYS)
                    .find(|&w| self.expired(self.buckets[b].stamp_port[w], now_tick))
                    .map(|w| (b, w))
            };
            let found = expired_way(primary)
                .or_else(|| expired_way(alternate))
                .ok_or(CacheFull)?;
            self.evictions += 1;
            found
        };
        let bucket = &mut self.buckets[b];
        bucket.fingerprint[way] = fp;
        bucket.stamp_port[way] = now_tick << 8 | port as u32;
        Ok(Slot((b * WAYS + way) as u32))
    }

    /// Frees a way of a full bucket by moving one of its entries to that
    /// entry's other bucket, if need be first moving an entry of that one
    /// on (a cuckoo path of at most two moves: bounded work, 72 probes at
    /// most, enough to fill the table past 95%).
    fn make_room(&mut self, bucket: usize) -> Option<(usize, usize)> {
        for depth in 0..2 {
            for way in 0..WAYS {
                let fp = self.buckets[bucket].fingerprint[way];
                let other = self.other_bucket(bucket, fp);
                if other == bucket {
                    continue;
                }
                let free = if depth == 0 {
                    self.find(other, 0)
                } else {
                    self.make_room_direct(other)
                };
                if let Some(free) = free {
                    self.move_entry((bucket, way), (other, free));
                    return Some((bucket, way));
                }
            }
        }
        None
    }

    /// One cuckoo move out of `bucket` into a free way elsewhere.
    fn make_room_direct(&mut self, bucket: usize) -> Option<usize> {
        for way in 0..WAYS {
            let other = self.other_bucket(bucket, self.buckets[bucket].fingerprint[way]);
            if other == bucket {
                continue;
            }
            if let Some(free) = self.find(other, 0) {
                self.move_entry((bucket, way), (other, free));
                return Some(way);
            }
        }
        None
    }

    fn move_entry(&mut self, from: (usize, usize), to: (usize, usize)) {
        let (fp, stamp_port) = {
            let b = &self.buckets[from.0];
            (b.fingerprint[from.1], b.stamp_port[from.1])
        };
        self.buckets[to.0].fingerprint[to.1] = fp;
        self.buckets[to.0].stamp_port[to.1] = stamp_port;
        self.buckets[from.0].fingerprint[from.1] = 0;
    }

    /// Forgets a flow; true if it was cached.
    pub fn remove(&mut self, hash: u64) -> bool {
        let (primary, alternate, fp) = self.split(hash);
        for b in [primary, alternate] {
            if let Some(w) = self.find(b, fp) {
                self.buckets[b].fingerprint[w] = 0;
                self.len -= 1;
                return true;
            }
        }
        false
    }

    /// Evicts the expired entries of the next `max_buckets` buckets of the
    /// sweep; returns how many it evicted. Bounded work, for the poll loop.
    pub fn evict_step(&mut self, now_ns: u64, max_buckets: usize) -> usize {
        let now_tick = Self::tick(now_ns);
        let mut evicted = 0;
        for _ in 0..max_buckets.min(self.buckets.len()) {
            let c = self.sweep_cursor;
            self.sweep_cursor = (c + 1) & self.mask as usize;
            for w in 0..WAYS {
                let b = &self.buckets[c];
                if b.fingerprint[w] != 0 && self.expired(b.stamp_port[w], now_tick) {
                    self.buckets[c].fingerprint[w] = 0;
                    evicted += 1;
                }
            }
        }
        self.len -= evicted;
        self.evictions += evicted as u64;
        evicted
    }

    /// Removes every entry.
    pub fn clear(&mut self) {
        self.buckets.fill(Bucket::default());
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn h(i: u64) -> u64 {
        // Spread like a real hash: distinct fingerprints and buckets.
        i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (i << 40)
    }

    #[test]
    fn entries_take_eight_bytes() {
        let c = FlowCache::new(1 << 16, S);
        assert_eq!(c.capacity(), 1 << 16);
        assert_eq!(c.memory_bytes(), 8 << 16);
        assert_eq!(std::mem::size_of::<Bucket>(), 64);
    }

    #[test]
    fn insert_then_lookup() {
        let mut c = FlowCache::new(1024, S);
        assert_eq!(c.lookup(h(1), 0), None);
        c.insert(h(1), 3, 0).unwrap();
        assert_eq!(c.lookup(h(1), 10).map(|x| x.0), Some(3));
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn remove_forgets() {
        let mut c = FlowCache::new(1024, S);
        c.insert(h(1), 3, 0).unwrap();
        assert!(c.remove(h(1)));
        assert!(!c.remove(h(1)));
        assert_eq!(c.lookup(h(1), 0), None);
        assert!(c.is_empty());
    }

    #[test]
    fn two_choice_fills_past_ninety_percent() {
        let mut c = FlowCache::new(1 << 14, S);
        let hasher = crate::FlowHasher::new(9);
        let n = (c.capacity() * 95 / 100) as u32;
        let refused = (0..n)
            .filter(|&i| {
                let k = crate::FlowKey::V4 {
                    src: std::net::Ipv4Addr::from(i),
                    dst: std::net::Ipv4Addr::new(10, 0, 0, 1),
                    proto: 6,
                    sport: 1,
                    dport: 2,
                };
                c.insert(hasher.hash(&k).0, 0, 0).is_err()
            })
            .count();
        assert!(refused < n as usize / 1000, "{refused} of {n} refused");
    }

    #[test]
    fn set_port_repoints() {
        let mut c = FlowCache::new(1024, S);
        let slot = c.insert(h(1), 3, 0).unwrap();
        c.set_port(slot, 5, 1);
        assert_eq!(c.lookup(h(1), 2).map(|x| x.0), Some(5));
    }

    #[test]
    fn full_bucket_refuses_until_entries_expire() {
        let mut c = FlowCache::new(8, S);
        for i in 0..8 {
            c.insert(i << 32 | 1 << 40, 1, 0).unwrap();
        }
        assert_eq!(c.insert(99 << 32, 2, S / 2), Err(CacheFull));
        // Still all there.
        for i in 0..8 {
            assert!(c.lookup(i << 32 | 1 << 40, S / 2).is_some());
        }
        // Two seconds later, all idle: the insert reclaims one.
        assert!(c.insert(99 << 32, 2, 3 * S).is_ok());
        assert_eq!(c.evictions(), 1);
        assert_eq!(c.len(), 8);
    }

    #[test]
    fn sweep_evicts_only_idle_entries() {
        let mut c = FlowCache::new(1 << 14, S);
        for i in 0..1000 {
            c.insert(h(i), 1, 0).unwrap();
        }
        // Half of them see a packet at 0.9 s.
        for i in 0..500 {
            c.lookup(h(i), 9 * S / 10).unwrap();
        }
        let evicted = c.evict_step(1_800_000_000, usize::MAX);
        assert_eq!(evicted, 500);
        assert_eq!(c.len(), 500);
        for i in 0..500 {
            assert!(c.lookup(h(i), 1_800_000_000).is_some());
        }
    }

    #[test]
    fn sweep_work_is_bounded() {
        let mut c = FlowCache::new(1 << 14, S);
        for i in 0..2000 {
            c.insert(h(i), 1, 0).unwrap();
        }
        let buckets = c.capacity() / WAYS;
        let mut total = 0;
        let mut calls = 0;
        while total < 2000 {
            total += c.evict_step(10 * S, 16);
            calls += 1;
            assert!(calls <= buckets / 16, "sweep did not finish in one pass");
        }
        assert!(c.is_empty());
    }

    #[test]
    fn ages_survive_tick_wrap() {
        let mut c = FlowCache::new(64, S);
        let wrap = TICK_NS << TICK_BITS;
        c.insert(h(1), 2, wrap - S / 2).unwrap();
        assert_eq!(c.evict_step(wrap + S / 4, usize::MAX), 0);
        assert_eq!(c.evict_step(wrap + 2 * S, usize::MAX), 1);
    }
}

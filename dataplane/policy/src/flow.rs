//! Flow identity: the IPv4/IPv6 5-tuple and its per-switch seeded hash.
//!
//! RoCEv2 is UDP to port 4791 with the queue pair's entropy in the UDP source
//! port, so the 5-tuple tells QPs apart. Every switch hashes with its own
//! seed: switches in series then make independent choices instead of
//! splitting the same flows the same way.

use core::hash::{BuildHasher, Hasher};
use std::net::{Ipv4Addr, Ipv6Addr};

/// The 5-tuple of a flow. Protocols without ports use 0 for both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FlowKey {
    /// An IPv4 flow.
    V4 {
        /// Source address.
        src: Ipv4Addr,
        /// Destination address.
        dst: Ipv4Addr,
        /// IP protocol number.
        proto: u8,
        /// Source port.
        sport: u16,
        /// Destination port.
        dport: u16,
    },
    /// An IPv6 flow.
    V6 {
        /// Source address.
        src: Ipv6Addr,
        /// Destination address.
        dst: Ipv6Addr,
        /// Next header (transport protocol).
        proto: u8,
        /// Source port.
        sport: u16,
        /// Destination port.
        dport: u16,
    },
}

/// The 64-bit hash of a flow key under one switch's seed. The flow cache
/// takes its bucket from the low bits and its fingerprint from the high 32;
/// the path choice uses the high 32 as well (see [`FlowHash::pick`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlowHash(pub u64);

impl FlowHash {
    /// A uniform choice in `0..n` (n >= 1) from the hash, by multiply-shift
    /// (no division).
    #[inline]
    pub fn pick(self, n: u32) -> u32 {
        (((self.0 >> 32) * n as u64) >> 32) as u32
    }

    /// A second, independent hash of the same flow (a bijective mix of
    /// this one). A re-decision after a failure picks with it: picking with
    /// the first hash again would send every flow that was on the same rank
    /// of the old ranking to the same rank of the new one, herding all the
    /// flows of a dead path onto one neighbour.
    #[inline]
    pub fn remix(self) -> FlowHash {
        // The murmur3 64-bit finalizer: every input bit moves every output
        // bit, so picks made with it are independent of picks made without.
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^= h >> 33;
        FlowHash(h)
    }
}

/// Hashes flow keys with a per-switch seed.
#[derive(Clone, Debug)]
pub struct FlowHasher {
    state: foldhash::quality::FixedState,
}

impl FlowHasher {
    /// A hasher for the switch seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        FlowHasher {
            state: foldhash::quality::FixedState::with_seed(seed),
        }
    }

    /// The hash of `key`. Words are fed whole so an IPv4 key costs two
    /// 64-bit mixing steps and an IPv6 key five.
    #[inline]
    pub fn hash(&self, key: &FlowKey) -> FlowHash {
        let mut h = self.state.build_hasher();
        match *key {
            FlowKey::V4 {
                src,
                dst,
                proto,
                sport,
                dport,
            } => {
                h.write_u64((u32::from(src) as u64) << 32 | u32::from(dst) as u64);
                h.write_u64(ports_word(4, proto, sport, dport));
            }
            FlowKey::V6 {
                src,
                dst,
                proto,
                sport,
                dport,
            } => {
                h.write_u128(u128::from(src));
                h.write_u128(u128::from(dst));
                h.write_u64(ports_word(6, proto, sport, dport));
            }
        }
        FlowHash(h.finish())
    }
}

/// Protocol, ports and IP version in one word; the version keeps an IPv4 key
/// from colliding by construction with an IPv6 key of the same bits.
#[inline]
fn ports_word(version: u8, proto: u8, sport: u16, dport: u16) -> u64 {
    (version as u64) << 48 | (proto as u64) << 32 | (sport as u64) << 16 | dport as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(sport: u16) -> FlowKey {
        FlowKey::V4 {
            src: Ipv4Addr::new(10, 0, 1, 2),
            dst: Ipv4Addr::new(10, 0, 2, 2),
            proto: 17,
            sport,
            dport: 4791,
        }
    }

    #[test]
    fn same_key_same_hash_per_seed() {
        let a = FlowHasher::new(1);
        assert_eq!(a.hash(&v4(1000)), a.hash(&v4(1000)));
        assert_ne!(a.hash(&v4(1000)), a.hash(&v4(1001)));
    }

    #[test]
    fn seeds_decorrelate_choices() {
        // Two switches in series must not split flows the same way: with
        // different seeds the 2-way choices agree about half the time.
        let (a, b) = (FlowHasher::new(1), FlowHasher::new(2));
        let agree = (0..10_000u16)
            .filter(|&p| a.hash(&v4(p)).pick(2) == b.hash(&v4(p)).pick(2))
            .count();
        assert!((4_500..5_500).contains(&agree), "agree {agree}");
    }

    #[test]
    fn v6_keys_hash_every_field() {
        let h = FlowHasher::new(7);
        let base = FlowKey::V6 {
            src: "fd00:1::2".parse().unwrap(),
            dst: "fd00:2::2".parse().unwrap(),
            proto: 6,
            sport: 1,
            dport: 2,
        };
        let FlowKey::V6 {
            src,
            dst,
            proto,
            sport,
            dport,
        } = base
        else {
            unreachable!()
        };
        let variants = [
            FlowKey::V6 {
                src: "fd00:1::3".parse().unwrap(),
                dst,
                proto,
                sport,
                dport,
            },
            FlowKey::V6 {
                src,
                dst: "fd00:2::3".parse().unwrap(),
                proto,
                sport,
                dport,
            },
            FlowKey::V6 {
                src,
                dst,
                proto: 17,
                sport,
                dport,
            },
            FlowKey::V6 {
                src,
                dst,
                proto,
                sport: 9,
                dport,
            },
            FlowKey::V6 {
                src,
                dst,
                proto,
                sport,
                dport: 9,
            },
        ];
        for v in variants {
            assert_ne!(h.hash(&base), h.hash(&v), "{v:?}");
        }
    }

    #[test]
    fn remix_is_independent_of_the_first_pick() {
        // Flows that picked the same one of 3 spread over 2 after a remix.
        let h = FlowHasher::new(5);
        let mut counts = [[0u32; 2]; 3];
        for p in 0..30_000u16 {
            let f = h.hash(&v4(p));
            counts[f.pick(3) as usize][f.remix().pick(2) as usize] += 1;
        }
        for row in counts {
            let share = row[0] as f64 / (row[0] + row[1]) as f64;
            assert!((0.45..0.55).contains(&share), "{counts:?}");
        }
    }

    #[test]
    fn pick_is_in_range_and_even() {
        let h = FlowHasher::new(3);
        let mut counts = [0u32; 3];
        for p in 0..30_000u16 {
            let i = h.hash(&v4(p)).pick(3);
            counts[i as usize] += 1;
        }
        for c in counts {
            assert!((9_500..10_500).contains(&c), "{counts:?}");
        }
        assert_eq!(FlowHash(u64::MAX).pick(5), 4);
        assert_eq!(FlowHash(0).pick(5), 0);
    }
}

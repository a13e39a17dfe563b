//! The two MAC addresses of a frame on a rotor network's circuit, which
//! nothing else reads there (a rotor is a circuit; the next ToR takes every
//! frame): the destination MAC names the ToR the frame heads for
//! (`02:52:4f:54:00:TT`), the source MAC carries the instant the sending
//! ToR handed it to its uplink (`02` and the low 40 bits of
//! `CLOCK_REALTIME` ns, about 18 minutes before it wraps), which a rotor
//! without arrival timestamps judges the frame by.

use crate::ethernet::MacAddr;

/// The destination MAC prefix of a frame on a circuit; the last byte is
/// its target ToR.
pub const TARGET_MAC_PREFIX: [u8; 5] = [0x02, 0x52, 0x4f, 0x54, 0x00];

/// Bits of the send time a stamp carries.
const STAMP_BITS: u32 = 40;

/// The destination MAC of a circuit frame heading for ToR `target`.
pub const fn target_mac(target: u8) -> MacAddr {
    let p = TARGET_MAC_PREFIX;
    [p[0], p[1], p[2], p[3], p[4], target]
}

/// The target ToR a destination MAC names, if it is a circuit frame's.
pub fn target_of(dst_mac: &[u8]) -> Option<u8> {
    let (prefix, rest) = dst_mac.split_first_chunk::<5>()?;
    (*prefix == TARGET_MAC_PREFIX).then_some(*rest.first()?)
}

/// The source MAC of a circuit frame handed to an uplink at `now_ns`: a
/// locally administered unicast address (0x02) and the low 40 bits of the
/// time.
pub const fn send_stamp(now_ns: u64) -> MacAddr {
    let t = now_ns.to_be_bytes();
    [0x02, t[3], t[4], t[5], t[6], t[7]]
}

/// The send time a source MAC carries, as seen at `now_ns`: `None` unless
/// it is a stamp no older than `max_age_ns`.
pub fn stamp_time(src_mac: &[u8], now_ns: u64, max_age_ns: u64) -> Option<u64> {
    let (first, low) = src_mac.split_first()?;
    let low: &[u8; 5] = low.first_chunk()?;
    if *first != 0x02 {
        return None;
    }
    let [a, b, c, d, e] = *low;
    let stamp = u64::from_be_bytes([0, 0, 0, a, b, c, d, e]);
    let age = now_ns.wrapping_sub(stamp) & ((1u64 << STAMP_BITS) - 1);
    if age > max_age_ns {
        return None;
    }
    now_ns.checked_sub(age)
}

/// When a circuit frame (target MAC and stamp) was sent, as seen at
/// `now_ns`: `None` for any other frame or a stamp older than
/// `max_age_ns`.
pub fn sent_at(frame: &[u8], now_ns: u64, max_age_ns: u64) -> Option<u64> {
    target_of(frame.get(..6)?)?;
    stamp_time(frame.get(6..12)?, now_ns, max_age_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn circuit_frame(sent: u64) -> [u8; 12] {
        let mut f = [0u8; 12];
        f[..6].copy_from_slice(&target_mac(3));
        f[6..].copy_from_slice(&send_stamp(sent));
        f
    }

    #[test]
    fn stamps_survive_the_40_bit_wrap_and_age_out() {
        let wrap = 1u64 << 40;
        let now = 7 * wrap + 5;
        assert_eq!(
            sent_at(&circuit_frame(now - 10), now, 1_000),
            Some(now - 10)
        );
        assert_eq!(sent_at(&circuit_frame(now), now, 1_000), Some(now));
        assert_eq!(
            sent_at(&circuit_frame(now - 2_000), now, 1_000),
            None,
            "too old"
        );
        assert_eq!(
            sent_at(&circuit_frame(now + 10), now, 1_000),
            None,
            "the future"
        );
        let mut other = circuit_frame(now);
        other[1] = 0;
        assert_eq!(sent_at(&other, now, 1_000), None, "not a circuit frame");
        assert_eq!(sent_at(&[0u8; 8], now, 1_000), None, "truncated");
        assert_eq!(
            stamp_time(&send_stamp(5), 3, 10),
            None,
            "before the clock's start"
        );
    }

    #[test]
    fn the_macs_on_the_wire() {
        // The low 40 bits, big-endian, after 0x02.
        assert_eq!(
            send_stamp(0x18ec_4f5c_8a2b_e07b),
            [0x02, 0x5c, 0x8a, 0x2b, 0xe0, 0x7b]
        );
        assert_eq!(target_mac(7), [0x02, 0x52, 0x4f, 0x54, 0x00, 0x07]);
        assert_eq!(target_of(&[0x02, 0x52, 0x4f, 0x54, 0x00, 0x07]), Some(7));
        assert_eq!(target_of(&[0x02, 0x52, 0x4f, 0x54, 0x01, 0x07]), None);
    }
}

//! The payload bytes: a deterministic function of (QP number, offset) so
//! that the receiver can check every byte without any state from the
//! sender, and a byte delivered at the wrong offset or to the wrong QP is
//! caught.

/// SplitMix64's finalizer: 8 well-mixed bytes per (qpn, offset / 8).
fn word(qpn: u32, index: u64) -> u64 {
    let mut z = (u64::from(qpn) << 40 ^ index).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The byte at `offset` of QP `qpn`'s message.
pub fn byte(qpn: u32, offset: u64) -> u8 {
    word(qpn, offset / 8).to_le_bytes()[(offset % 8) as usize]
}

/// Fills `buf` with the bytes from `offset` on.
pub fn fill(qpn: u32, offset: u64, buf: &mut [u8]) {
    let mut o = offset;
    let mut rest = buf;
    while !rest.is_empty() {
        // One word per 8 offsets: the first chunk may start mid-word.
        let w = word(qpn, o / 8).to_le_bytes();
        let start = (o % 8) as usize;
        let n = (8 - start).min(rest.len());
        let (head, tail) = rest.split_at_mut(n);
        head.copy_from_slice(&w[start..start + n]);
        o += n as u64;
        rest = tail;
    }
}

/// Whether `buf` holds the bytes from `offset` on.
pub fn matches(qpn: u32, offset: u64, buf: &[u8]) -> bool {
    let mut o = offset;
    let mut rest = buf;
    while !rest.is_empty() {
        let w = word(qpn, o / 8).to_le_bytes();
        let start = (o % 8) as usize;
        let n = (8 - start).min(rest.len());
        if rest[..n] != w[start..start + n] {
            return false;
        }
        o += n as u64;
        rest = &rest[n..];
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_detects_shifts_and_other_qps() {
        let mut a = vec![0u8; 1000];
        fill(5, 3000, &mut a);
        assert!(matches(5, 3000, &a));
        assert!(!matches(5, 3001, &a));
        assert!(!matches(6, 3000, &a));
        let mut b = a.clone();
        b[999] ^= 0x10;
        assert!(!matches(5, 3000, &b));
        // Bytes 8..16 come from the second word of the same QP.
        assert_eq!(a[8..16], word(5, 376).to_le_bytes()[..]);
        for (i, &v) in a.iter().enumerate().step_by(7) {
            assert_eq!(v, byte(5, 3000 + i as u64));
        }
        let mut odd = vec![0u8; 13];
        fill(5, 3003, &mut odd);
        assert_eq!(odd[..], a[3..16]);
    }
}

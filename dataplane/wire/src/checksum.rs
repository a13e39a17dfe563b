//! The Internet checksum (RFC 1071) and its incremental update (RFC 1624).
//!
//! Sums are ones' complement sums of big-endian 16-bit words; a trailing odd
//! byte is padded with a zero low byte.

/// Folds a 32-bit accumulator of 16-bit words into a 16-bit ones' complement
/// sum (end-around carry).
#[inline]
pub const fn fold(mut acc: u32) -> u16 {
    // Two rounds always suffice for a u32: after the first the value is at
    // most 0xFFFF + 0xFFFF = 0x1FFFE, after the second at most 0xFFFF.
    acc = (acc & 0xFFFF).wrapping_add(acc >> 16);
    acc = (acc & 0xFFFF).wrapping_add(acc >> 16);
    acc as u16
}

/// Ones' complement sum of `data` as big-endian 16-bit words, folded to 16
/// bits. Not complemented: see [`ipv4_checksum`] for the checksum itself.
///
/// `initial` is added in, so sums of several pieces (pseudo-header, header,
/// payload) can be chained; pass 0 to start.
#[inline]
pub fn ones_complement_sum(data: &[u8], initial: u16) -> u16 {
    // u64 accumulator: it cannot wrap before 2^48 words, far beyond any slice.
    let mut acc = u64::from(initial);
    let mut words = data.chunks_exact(2);
    for w in &mut words {
        if let [hi, lo] = *w {
            acc = acc.wrapping_add(u64::from(u16::from_be_bytes([hi, lo])));
        }
    }
    if let [last] = *words.remainder() {
        acc = acc.wrapping_add(u64::from(u16::from_be_bytes([last, 0])));
    }
    // Each end-around-carry round strictly shrinks a value above 0xFFFF.
    while acc > 0xFFFF {
        acc = (acc & 0xFFFF).wrapping_add(acc >> 16);
    }
    (acc & 0xFFFF) as u16
}

/// Adds two 16-bit ones' complement values.
#[inline]
pub const fn add(a: u16, b: u16) -> u16 {
    fold((a as u32).wrapping_add(b as u32))
}

/// The Internet checksum of `header`: the complement of its ones' complement
/// sum.
///
/// * To fill in a header's checksum, zero the checksum field, call this and
///   store the result big-endian.
/// * To verify a header, call this over the header *with* its checksum
///   field: a valid header gives 0.
#[inline]
pub fn ipv4_checksum(header: &[u8]) -> u16 {
    !ones_complement_sum(header, 0)
}

/// Updates checksum `hc` for one 16-bit word of the covered data changing
/// from `old` to `new`, per RFC 1624 equation 3: `HC' = ~(~HC + ~m + m')`.
///
/// Unlike the older `HC + m + ~m'` (RFC 1141) this never turns a correct
/// 0x0000 into 0xFFFF: the ones' complement sum inside is 0x0000 only if all
/// three terms are zero, which needs `old == 0xFFFF`, `new == 0`, `hc ==
/// 0xFFFF`. For every header the IPv4 rewrites touch, the result equals a
/// full recompute (checked by property tests).
#[inline]
pub const fn update16(hc: u16, old: u16, new: u16) -> u16 {
    // Each term is at most 0xFFFF, so the u32 sum cannot wrap.
    let sum = ((!hc) as u32)
        .wrapping_add((!old) as u32)
        .wrapping_add(new as u32);
    !fold(sum)
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
mod tests {
    use super::*;

    /// A textbook IPv4 header (UDP, 192.168.0.1 -> 192.168.0.199) whose
    /// checksum is worked out by hand to 0xB861.
    const HEADER: [u8; 20] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0xc7,
    ];

    #[test]
    fn known_vector() {
        assert_eq!(ipv4_checksum(&HEADER), 0xB861);
        let mut h = HEADER;
        h[10..12].copy_from_slice(&0xB861u16.to_be_bytes());
        assert_eq!(ipv4_checksum(&h), 0);
    }

    #[test]
    fn odd_length_pads_low_byte() {
        assert_eq!(ones_complement_sum(&[0x12, 0x34, 0x56], 0), 0x1234 + 0x5600);
        assert_eq!(ones_complement_sum(&[], 0), 0);
        assert_eq!(ones_complement_sum(&[], 7), 7);
    }

    #[test]
    fn end_around_carry() {
        assert_eq!(ones_complement_sum(&[0xFF, 0xFF, 0x00, 0x01], 0), 0x0001);
        assert_eq!(add(0xFFFF, 0x0001), 0x0001);
        assert_eq!(add(0x8000, 0x8000), 0x0001);
        assert_eq!(fold(0xFFFF_FFFF), 0xFFFF);
    }

    #[test]
    fn large_input_does_not_overflow() {
        let data = std::vec![0xFFu8; 1 << 20];
        assert_eq!(ones_complement_sum(&data, 0), 0xFFFF);
    }

    #[test]
    fn update_matches_recompute_on_known_vector() {
        let mut h = HEADER;
        let c = ipv4_checksum(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        let old = u16::from_be_bytes([h[8], h[9]]);
        h[8] -= 1;
        let new = u16::from_be_bytes([h[8], h[9]]);
        let inc = update16(u16::from_be_bytes([h[10], h[11]]), old, new);
        h[10..12].copy_from_slice(&[0, 0]);
        assert_eq!(inc, ipv4_checksum(&h));
    }
}

//! In-place rewrites of accepted frames: L3 forwarding and ECN marking.
//!
//! Both functions read the bytes they change from the frame itself (not from
//! the [`ParsedFrame`]) and check everything before writing, so a stale or
//! foreign `ParsedFrame` yields [`RewriteError::FrameMismatch`] with the
//! frame untouched, never a panic. Neither touches the TCP/UDP checksum: the
//! pseudo-header covers neither TTL/hop limit nor TOS/traffic class.

use core::fmt;

use crate::checksum::update16;
use crate::ethernet::MacAddr;
use crate::ip::{Ecn, L3};
use crate::parse::ParsedFrame;

/// Why a rewrite was not done. The frame is unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RewriteError {
    /// The frame is too short for, or has another IP version than, the
    /// `ParsedFrame` describes: the `ParsedFrame` is not this frame's.
    FrameMismatch,
    /// TTL / hop limit in the frame is 0 or 1: it must not be forwarded.
    /// (Cannot happen for a frame just accepted by [`parse`](crate::parse).)
    TtlExpired,
}

impl fmt::Display for RewriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RewriteError::FrameMismatch => "parsed frame does not match frame bytes",
            RewriteError::TtlExpired => "ttl expired",
        })
    }
}

impl core::error::Error for RewriteError {}

/// Outcome of [`mark_ce`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CeMark {
    /// The packet was ECT(0) or ECT(1) and now carries CE.
    Marked,
    /// The packet already carried CE; nothing changed.
    AlreadyCe,
    /// The packet is Not-ECT and cannot be marked; nothing changed. A queue
    /// that wanted to signal congestion drops it instead (RFC 3168).
    NotEct,
}

/// Destination MAC field, source MAC field, bytes from the IP header on.
type FrameParts<'a> = (&'a mut MacAddr, &'a mut MacAddr, &'a mut [u8]);

/// Splits `frame` into its MAC fields and the bytes from the IP header on.
#[inline]
fn split_frame(frame: &mut [u8], l3_offset: usize) -> Result<FrameParts<'_>, RewriteError> {
    let (head, ip) = frame
        .split_at_mut_checked(l3_offset)
        .ok_or(RewriteError::FrameMismatch)?;
    let (dst, rest) = head
        .split_first_chunk_mut::<6>()
        .ok_or(RewriteError::FrameMismatch)?;
    let (src, _) = rest
        .split_first_chunk_mut::<6>()
        .ok_or(RewriteError::FrameMismatch)?;
    Ok((dst, src, ip))
}

/// Rewrites an accepted frame for L3 forwarding, in place: destination and
/// source MAC, TTL decremented with an RFC 1624 incremental IPv4 header
/// checksum update, or IPv6 hop limit decremented.
///
/// A header with a valid checksum keeps a valid checksum, equal to what a
/// full recompute gives (0x0000, never 0xFFFF, when the sum says zero).
#[inline]
pub fn forward_rewrite(
    frame: &mut [u8],
    parsed: &ParsedFrame,
    src_mac: MacAddr,
    dst_mac: MacAddr,
) -> Result<(), RewriteError> {
    let (dst_field, src_field, ip) = split_frame(frame, parsed.l3_offset)?;
    match parsed.l3 {
        L3::V4 => {
            let (hdr, _) = ip
                .split_first_chunk_mut::<20>()
                .ok_or(RewriteError::FrameMismatch)?;
            if hdr[0] >> 4 != 4 {
                return Err(RewriteError::FrameMismatch);
            }
            let ttl = hdr[8];
            if ttl <= 1 {
                return Err(RewriteError::TtlExpired);
            }
            let new_ttl = ttl.wrapping_sub(1);
            // TTL shares its 16-bit checksum word with the protocol byte.
            let old_word = u16::from_be_bytes([ttl, hdr[9]]);
            let new_word = u16::from_be_bytes([new_ttl, hdr[9]]);
            let csum = update16(u16::from_be_bytes([hdr[10], hdr[11]]), old_word, new_word);
            hdr[8] = new_ttl;
            [hdr[10], hdr[11]] = csum.to_be_bytes();
        }
        L3::V6 => {
            let (hdr, _) = ip
                .split_first_chunk_mut::<8>()
                .ok_or(RewriteError::FrameMismatch)?;
            if hdr[0] >> 4 != 6 {
                return Err(RewriteError::FrameMismatch);
            }
            let hop_limit = hdr[7];
            if hop_limit <= 1 {
                return Err(RewriteError::TtlExpired);
            }
            hdr[7] = hop_limit.wrapping_sub(1);
        }
    }
    *dst_field = dst_mac;
    *src_field = src_mac;
    Ok(())
}

/// Sets ECN to Congestion Experienced in place if the packet is ECT(0) or
/// ECT(1), updating the IPv4 header checksum incrementally (RFC 1624); IPv6
/// has no header checksum. Not-ECT and already-CE packets are left alone.
#[inline]
pub fn mark_ce(frame: &mut [u8], parsed: &ParsedFrame) -> Result<CeMark, RewriteError> {
    mark_ce_at(frame, parsed.l3, parsed.l3_offset)
}

/// [`mark_ce`] on the IP header of version `l3` at `l3_offset`, for a frame
/// whose parse is gone (a mark decided when it leaves a queue); the version
/// nibble is checked, so a wrong offset is a mismatch, not a corruption.
#[inline]
pub fn mark_ce_at(frame: &mut [u8], l3: L3, l3_offset: usize) -> Result<CeMark, RewriteError> {
    let ip = frame
        .get_mut(l3_offset..)
        .ok_or(RewriteError::FrameMismatch)?;
    match l3 {
        L3::V4 => {
            let (hdr, _) = ip
                .split_first_chunk_mut::<20>()
                .ok_or(RewriteError::FrameMismatch)?;
            if hdr[0] >> 4 != 4 {
                return Err(RewriteError::FrameMismatch);
            }
            let tos = hdr[1];
            match Ecn::from_bits(tos) {
                Ecn::NotEct => Ok(CeMark::NotEct),
                Ecn::Ce => Ok(CeMark::AlreadyCe),
                Ecn::Ect0 | Ecn::Ect1 => {
                    let new_tos = tos | Ecn::Ce.bits();
                    let csum = update16(
                        u16::from_be_bytes([hdr[10], hdr[11]]),
                        u16::from_be_bytes([hdr[0], tos]),
                        u16::from_be_bytes([hdr[0], new_tos]),
                    );
                    hdr[1] = new_tos;
                    [hdr[10], hdr[11]] = csum.to_be_bytes();
                    Ok(CeMark::Marked)
                }
            }
        }
        L3::V6 => {
            let (hdr, _) = ip
                .split_first_chunk_mut::<8>()
                .ok_or(RewriteError::FrameMismatch)?;
            if hdr[0] >> 4 != 6 {
                return Err(RewriteError::FrameMismatch);
            }
            // Traffic class spans the low nibble of byte 0 and the high
            // nibble of byte 1; ECN is its low two bits: bits 5..4 of byte 1.
            match Ecn::from_bits(hdr[1] >> 4) {
                Ecn::NotEct => Ok(CeMark::NotEct),
                Ecn::Ce => Ok(CeMark::AlreadyCe),
                Ecn::Ect0 | Ecn::Ect1 => {
                    hdr[1] |= Ecn::Ce.bits() << 4;
                    Ok(CeMark::Marked)
                }
            }
        }
    }
}

//! ICMP errors a router sends: time exceeded (TTL or hop limit expired)
//! and destination unreachable (no route), for IPv4 and IPv6, built in
//! place in the buffer of the frame they are about, addressed back to the
//! peer it came from.
//!
//! No error is sent about an ICMP error, or to a multicast, broadcast,
//! unspecified or loopback source (RFC 1812 4.3.2.7, RFC 4443 2.4). The
//! offending packet is quoted as far as the error stays within 576 bytes
//! (IPv4, RFC 1812 4.3.2.3) or 1280 bytes (IPv6, RFC 4443 2.4). Rate
//! limiting is the caller's (the switch's token bucket).
//!
//! Like the rest of the crate: no panics on any bytes, no allocation; every
//! read and write is checked.

use core::net::{Ipv4Addr, Ipv6Addr};

use crate::checksum::{ipv4_checksum, ones_complement_sum};
use crate::ethernet::{self, MacAddr, ETHERTYPE_IPV4, ETHERTYPE_IPV6};

/// Which error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IcmpError {
    /// TTL / hop limit exceeded in transit (traceroute's answer).
    TimeExceeded,
    /// No route to the destination.
    NoRoute,
}

/// Untagged Ethernet: tagged frames never reach the switch's fast path.
const ETH: usize = ethernet::HEADER_LEN;
const IPV4_HEADER: usize = 20;
const IPV6_HEADER: usize = 40;
const ICMP_HEADER: usize = 8;
/// Where the quoted packet starts in an IPv4 / IPv6 error frame.
const V4_QUOTE_AT: usize = ETH + IPV4_HEADER + ICMP_HEADER;
const V6_QUOTE_AT: usize = ETH + IPV6_HEADER + ICMP_HEADER;
const V4_QUOTE_MAX: usize = 576 - IPV4_HEADER - ICMP_HEADER;
const V6_QUOTE_MAX: usize = 1280 - IPV6_HEADER - ICMP_HEADER;

const IPPROTO_ICMP: u8 = 1;
const IPPROTO_ICMPV6: u8 = 58;
const ICMPV4_DEST_UNREACHABLE: u8 = 3;
const ICMPV4_TIME_EXCEEDED: u8 = 11;
/// ICMPv4 error types (destination unreachable, source quench, redirect,
/// time exceeded, parameter problem): never answered with an error.
const ICMPV4_ERRORS: [u8; 5] = [3, 4, 5, 11, 12];
const ICMPV6_DEST_UNREACHABLE: u8 = 1;
const ICMPV6_TIME_EXCEEDED: u8 = 3;
/// ICMPv6 types below this are errors (RFC 4443 2.1).
const ICMPV6_FIRST_INFO: u8 = 128;
/// Code 0 of both errors: "no route" and "TTL / hop limit exceeded in
/// transit".
const CODE_0: u8 = 0;
/// The TTL / hop limit of the router's own packets.
const ROUTER_TTL: u8 = 64;
/// IPv4 TOS of the router's own ICMP: internetwork control precedence.
const TOS_INTERNETWORK_CONTROL: u8 = 0xc0;

/// Rewrites the Ethernet frame in `buf[..len]` (received from a peer whose
/// MAC is its source) into the ICMP error `kind` about it, from `mac` and
/// the router address of its family (`v4`/`v6`), in place: the original
/// packet moves back to make room for the new headers and is quoted. `buf`
/// is the whole buffer the frame lives in (room to grow). Returns the new
/// frame length, or `None` when no error may be sent (not IP, an ICMP error
/// itself, a source that gets none, a malformed header, no room).
pub fn build_error(
    buf: &mut [u8],
    len: usize,
    kind: IcmpError,
    mac: MacAddr,
    v4: Ipv4Addr,
    v6: Ipv6Addr,
) -> Option<usize> {
    let frame = buf.get(..len)?;
    let peer: MacAddr = read(frame, ethernet::SRC_OFFSET)?;
    let ethertype = u16::from_be_bytes(read(frame, ethernet::ETHERTYPE_OFFSET)?);
    let new_len = match ethertype {
        ETHERTYPE_IPV4 => build_v4(buf, len, kind, v4)?,
        ETHERTYPE_IPV6 => build_v6(buf, len, kind, v6)?,
        _ => return None,
    };
    write(buf, ethernet::DST_OFFSET, &peer)?;
    write(buf, ethernet::SRC_OFFSET, &mac)?;
    Some(new_len)
}

/// `N` bytes of `b` from `at`, if there are that many.
fn read<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
    b.get(at..)?.first_chunk::<N>().copied()
}

/// Writes `v` into `b` at `at`, if it fits.
fn write(b: &mut [u8], at: usize, v: &[u8]) -> Option<()> {
    b.get_mut(at..at.checked_add(v.len())?)?.copy_from_slice(v);
    Some(())
}

/// Moves `buf[ETH..ETH + quote]` to `buf[to..to + quote]` (`to > ETH`).
fn move_quote(buf: &mut [u8], quote: usize, to: usize) -> Option<()> {
    let end = to.checked_add(quote)?;
    // Both ranges lie inside `buf[..end]`, which `get_mut` has checked, so
    // `copy_within` cannot go out of bounds.
    let room = buf.get_mut(..end)?;
    room.copy_within(ETH..ETH.checked_add(quote)?, to);
    Some(())
}

/// Whether an IPv4 source may get an error: unicast, not 0/8, 127/8,
/// multicast or broadcast.
fn v4_source_ok(src: Ipv4Addr) -> bool {
    !(src.is_unspecified()
        || src.is_loopback()
        || src.is_multicast()
        || src.is_broadcast()
        || src.octets().first() == Some(&0))
}

fn v6_source_ok(src: Ipv6Addr) -> bool {
    !(src.is_unspecified() || src.is_loopback() || src.is_multicast())
}

/// An IPv4 header of a packet `total` bytes long carrying ICMP from `from`
/// to `to`, its checksum filled in.
fn ipv4_header(total: u16, from: Ipv4Addr, to: Ipv4Addr) -> [u8; IPV4_HEADER] {
    let [l0, l1] = total.to_be_bytes();
    let [f0, f1, f2, f3] = from.octets();
    let [t0, t1, t2, t3] = to.octets();
    let header = |c0, c1| {
        [
            0x45, // version 4, 5 words
            TOS_INTERNETWORK_CONTROL,
            l0,
            l1,
            0, // identification
            0,
            0, // flags, fragment offset
            0,
            ROUTER_TTL,
            IPPROTO_ICMP,
            c0,
            c1,
            f0,
            f1,
            f2,
            f3,
            t0,
            t1,
            t2,
            t3,
        ]
    };
    let [c0, c1] = ipv4_checksum(&header(0, 0)).to_be_bytes();
    header(c0, c1)
}

fn build_v4(buf: &mut [u8], len: usize, kind: IcmpError, from: Ipv4Addr) -> Option<usize> {
    let ip = buf.get(ETH..len)?;
    let ihl = usize::from(*ip.first()? & 0x0f).checked_mul(4)?;
    let total = usize::from(u16::from_be_bytes(read(ip, 2)?));
    let proto = *ip.get(9)?;
    let src = Ipv4Addr::from(read::<4>(ip, 12)?);
    if ihl < IPV4_HEADER || !v4_source_ok(src) {
        return None;
    }
    if proto == IPPROTO_ICMP && ICMPV4_ERRORS.contains(ip.get(ihl)?) {
        return None;
    }
    // The original packet as far as it is in the frame, then the cap; at
    // least its IP header.
    let quote = total.min(ip.len()).min(V4_QUOTE_MAX).max(ihl.min(ip.len()));
    let new_len = V4_QUOTE_AT.checked_add(quote)?;
    if new_len > buf.len() {
        return None;
    }
    move_quote(buf, quote, V4_QUOTE_AT)?;
    let icmp_len = ICMP_HEADER.checked_add(quote)?;
    let total = u16::try_from(IPV4_HEADER.checked_add(icmp_len)?).ok()?;
    write(buf, ETH, &ipv4_header(total, from, src))?;
    let icmp_type = match kind {
        IcmpError::TimeExceeded => ICMPV4_TIME_EXCEEDED,
        IcmpError::NoRoute => ICMPV4_DEST_UNREACHABLE,
    };
    let icmp_at = ETH + IPV4_HEADER;
    write(buf, icmp_at, &[icmp_type, CODE_0, 0, 0, 0, 0, 0, 0])?;
    let sum = ones_complement_sum(buf.get(icmp_at..new_len)?, 0);
    write(buf, icmp_at.checked_add(2)?, &(!sum).to_be_bytes())?;
    Some(new_len)
}

fn build_v6(buf: &mut [u8], len: usize, kind: IcmpError, from: Ipv6Addr) -> Option<usize> {
    let ip = buf.get(ETH..len)?;
    let payload = usize::from(u16::from_be_bytes(read(ip, 4)?));
    let next = *ip.get(6)?;
    let src_bytes: [u8; 16] = read(ip, 8)?;
    let src = Ipv6Addr::from(src_bytes);
    if !v6_source_ok(src) {
        return None;
    }
    if next == IPPROTO_ICMPV6 && *ip.get(IPV6_HEADER)? < ICMPV6_FIRST_INFO {
        return None;
    }
    let quote = IPV6_HEADER
        .checked_add(payload)?
        .min(ip.len())
        .min(V6_QUOTE_MAX);
    let new_len = V6_QUOTE_AT.checked_add(quote)?;
    if new_len > buf.len() || quote < IPV6_HEADER {
        return None;
    }
    move_quote(buf, quote, V6_QUOTE_AT)?;
    let icmp_len = ICMP_HEADER.checked_add(quote)?;
    let [p0, p1] = u16::try_from(icmp_len).ok()?.to_be_bytes();
    // Version 6, traffic class and flow label 0, payload length, next
    // header, hop limit; then the addresses.
    write(
        buf,
        ETH,
        &[0x60, 0, 0, 0, p0, p1, IPPROTO_ICMPV6, ROUTER_TTL],
    )?;
    write(buf, ETH + 8, &from.octets())?;
    write(buf, ETH + 24, &src_bytes)?;
    let icmp_type = match kind {
        IcmpError::TimeExceeded => ICMPV6_TIME_EXCEEDED,
        IcmpError::NoRoute => ICMPV6_DEST_UNREACHABLE,
    };
    let icmp_at = ETH + IPV6_HEADER;
    write(buf, icmp_at, &[icmp_type, CODE_0, 0, 0, 0, 0, 0, 0])?;
    // Pseudo-header (RFC 8200 8.1): addresses, upper-layer length, next
    // header.
    let [u0, u1, u2, u3] = u32::try_from(icmp_len).ok()?.to_be_bytes();
    let addresses = ones_complement_sum(buf.get(ETH + 8..icmp_at)?, 0);
    let pseudo = ones_complement_sum(&[u0, u1, u2, u3, 0, 0, 0, IPPROTO_ICMPV6], addresses);
    let sum = ones_complement_sum(buf.get(icmp_at..new_len)?, pseudo);
    write(buf, icmp_at.checked_add(2)?, &(!sum).to_be_bytes())?;
    Some(new_len)
}

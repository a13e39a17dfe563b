//! ICMP errors a router sends: time exceeded (TTL or hop limit expired)
//! and destination unreachable (no route), for IPv4 and IPv6, built in
//! place in the buffer of the frame they are about and sent back out of the
//! port it came in on. Rate-limited by a token bucket, as routers do, so a
//! flood of expiring packets cannot turn the switch into an amplifier.
//!
//! No error is sent about an ICMP error, or to a multicast, broadcast,
//! unspecified or loopback source (RFC 1812 4.3.2.7, RFC 4443 2.4).

use std::net::{Ipv4Addr, Ipv6Addr};

use lcmp_wire::checksum::{ipv4_checksum, ones_complement_sum};
use lcmp_wire::MacAddr;

/// Which error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IcmpError {
    /// TTL / hop limit exceeded in transit (traceroute's answer).
    TimeExceeded,
    /// No route to the destination.
    NoRoute,
}

/// Ethernet header length (untagged: tagged frames go to the kernel).
const ETH: usize = 14;
/// Most of the offending packet quoted: an IPv4 error stays within 576
/// bytes (RFC 1812 4.3.2.3), an IPv6 one within 1280 (RFC 4443 2.4).
const QUOTE_V4: usize = 576 - 20 - 8;
const QUOTE_V6: usize = 1280 - 40 - 8;

/// A token bucket: `rate` errors per second, bursts of `burst`.
#[derive(Clone, Debug)]
pub struct IcmpLimiter {
    rate_per_s: u64,
    burst: u64,
    /// Tokens in thousandths.
    tokens_milli: u64,
    last_ns: u64,
}

impl IcmpLimiter {
    /// A full bucket.
    pub fn new(rate_per_s: u32, burst: u32) -> Self {
        IcmpLimiter {
            rate_per_s: rate_per_s as u64,
            burst: burst as u64,
            tokens_milli: burst as u64 * 1000,
            last_ns: 0,
        }
    }

    /// Whether an error may be sent at `now_ns` (takes a token if so).
    pub fn allow(&mut self, now_ns: u64) -> bool {
        let elapsed = now_ns.saturating_sub(self.last_ns);
        self.last_ns = self.last_ns.max(now_ns);
        let refill = (elapsed as u128 * self.rate_per_s as u128 / 1_000_000) as u64;
        self.tokens_milli = self
            .tokens_milli
            .saturating_add(refill)
            .min(self.burst * 1000);
        if self.tokens_milli >= 1000 {
            self.tokens_milli -= 1000;
            true
        } else {
            false
        }
    }
}

/// Whether an IPv4 source may get an error: unicast, not 0/8, 127/8,
/// multicast or broadcast.
fn v4_source_ok(src: Ipv4Addr) -> bool {
    !(src.is_unspecified()
        || src.is_loopback()
        || src.is_multicast()
        || src.is_broadcast()
        || src.octets()[0] == 0)
}

fn v6_source_ok(src: Ipv6Addr) -> bool {
    !(src.is_unspecified() || src.is_loopback() || src.is_multicast())
}

/// Whether an ICMP message of `icmp_type` is an error (no error about it).
fn v4_is_error(icmp_type: u8) -> bool {
    matches!(icmp_type, 3 | 4 | 5 | 11 | 12)
}

/// Rewrites the Ethernet frame in `buf[..len]` (received from a peer
/// whose MAC is its source) into the ICMP error `kind` about it, from
/// `mac` and the router address of its family (`v4`/`v6`), in place: the
/// original packet moves back to make room for the new headers and is
/// quoted. `buf` is the whole buffer the frame lives in (room to grow).
/// Returns the new frame length, or `None` when no error may be sent
/// (not IP, an ICMP error itself, a source that gets none, no room).
pub fn build_error(
    buf: &mut [u8],
    len: usize,
    kind: IcmpError,
    mac: MacAddr,
    v4: Ipv4Addr,
    v6: Ipv6Addr,
) -> Option<usize> {
    let frame = buf.get(..len)?;
    let ethertype = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    let peer: [u8; 6] = frame.get(6..12)?.try_into().ok()?;
    let new_len = match ethertype {
        0x0800 => build_v4(buf, len, kind, v4)?,
        0x86dd => build_v6(buf, len, kind, v6)?,
        _ => return None,
    };
    let eth = buf.get_mut(..12)?;
    eth[..6].copy_from_slice(&peer);
    eth[6..12].copy_from_slice(&mac);
    Some(new_len)
}

fn build_v4(buf: &mut [u8], len: usize, kind: IcmpError, from: Ipv4Addr) -> Option<usize> {
    let ip = buf.get(ETH..len)?;
    let ihl = usize::from(*ip.first()? & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([*ip.get(2)?, *ip.get(3)?]));
    let src: [u8; 4] = ip.get(12..16)?.try_into().ok()?;
    let proto = *ip.get(9)?;
    if ihl < 20 || !v4_source_ok(Ipv4Addr::from(src)) {
        return None;
    }
    if proto == 1 && v4_is_error(*ip.get(ihl)?) {
        return None;
    }
    // The original packet as far as it is in the frame, then the cap.
    let quote = total.min(ip.len()).min(QUOTE_V4).max(ihl.min(ip.len()));
    let at = ETH + 20 + 8;
    let new_len = at + quote;
    if new_len > buf.len() {
        return None;
    }
    buf.copy_within(ETH..ETH + quote, at);
    let (icmp_type, code) = match kind {
        IcmpError::TimeExceeded => (11u8, 0u8),
        IcmpError::NoRoute => (3, 0),
    };
    let hdr = buf.get_mut(ETH..at)?;
    hdr.fill(0);
    hdr[0] = 0x45;
    // Internetwork control precedence, as routers mark their own ICMP.
    hdr[1] = 0xc0;
    hdr[2..4].copy_from_slice(&((20 + 8 + quote) as u16).to_be_bytes());
    hdr[8] = 64;
    hdr[9] = 1;
    hdr[12..16].copy_from_slice(&from.octets());
    hdr[16..20].copy_from_slice(&src);
    let csum = ipv4_checksum(&hdr[..20]);
    hdr[10..12].copy_from_slice(&csum.to_be_bytes());
    hdr[20] = icmp_type;
    hdr[21] = code;
    let icmp_csum = !ones_complement_sum(buf.get(ETH + 20..new_len)?, 0);
    buf.get_mut(ETH + 22..ETH + 24)?
        .copy_from_slice(&icmp_csum.to_be_bytes());
    Some(new_len)
}

fn build_v6(buf: &mut [u8], len: usize, kind: IcmpError, from: Ipv6Addr) -> Option<usize> {
    let ip = buf.get(ETH..len)?;
    let payload = usize::from(u16::from_be_bytes([*ip.get(4)?, *ip.get(5)?]));
    let next = *ip.get(6)?;
    let src: [u8; 16] = ip.get(8..24)?.try_into().ok()?;
    if !v6_source_ok(Ipv6Addr::from(src)) {
        return None;
    }
    // ICMPv6 errors have types below 128.
    if next == 58 && *ip.get(40)? < 128 {
        return None;
    }
    let quote = (40 + payload).min(ip.len()).min(QUOTE_V6);
    let at = ETH + 40 + 8;
    let new_len = at + quote;
    if new_len > buf.len() || quote < 40 {
        return None;
    }
    buf.copy_within(ETH..ETH + quote, at);
    let (icmp_type, code) = match kind {
        IcmpError::TimeExceeded => (3u8, 0u8),
        IcmpError::NoRoute => (1, 0),
    };
    let hdr = buf.get_mut(ETH..at)?;
    hdr.fill(0);
    hdr[0] = 0x60;
    hdr[4..6].copy_from_slice(&((8 + quote) as u16).to_be_bytes());
    hdr[6] = 58;
    hdr[7] = 64;
    hdr[8..24].copy_from_slice(&from.octets());
    hdr[24..40].copy_from_slice(&src);
    hdr[40] = icmp_type;
    hdr[41] = code;
    // Pseudo-header: addresses, upper-layer length, next header.
    let mut pseudo = [0u8; 40];
    pseudo[..32].copy_from_slice(&hdr[8..40]);
    pseudo[32..36].copy_from_slice(&((8 + quote) as u32).to_be_bytes());
    pseudo[39] = 58;
    let sum = ones_complement_sum(&pseudo, 0);
    let icmp_csum = !ones_complement_sum(buf.get(ETH + 40..new_len)?, sum);
    buf.get_mut(ETH + 42..ETH + 44)?
        .copy_from_slice(&icmp_csum.to_be_bytes());
    Some(new_len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_allows_a_burst_then_the_rate() {
        let mut l = IcmpLimiter::new(100, 5);
        assert_eq!((0..10).filter(|_| l.allow(0)).count(), 5);
        // 10 ms at 100/s: one more token.
        assert!(l.allow(10_000_000));
        assert!(!l.allow(10_000_000));
    }
}

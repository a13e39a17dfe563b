//! The INT / timestamp block of RoCEv2 packets (issue 28): in-band network
//! telemetry for HPCC and the send timestamp TIMELY echoes.
//!
//! # Where
//!
//! RoCEv2 is IPv4 UDP(4791) BTH [RETH/AETH] payload pad ICRC. The block sits
//! immediately after the 12-byte BTH (before RETH, AETH or payload) and is
//! present iff bit [`BTH_INT`] (0x20) of BTH byte 4 is set (byte 4 is
//! FECN 0x80 | BECN 0x40 | reserved(6)). BTH byte 4 is already masked to
//! all ones in the ICRC; the block's bytes are masked to 0xff in the ICRC
//! too (as TTL, TOS and the checksums: fields switches rewrite), so a switch
//! that writes a hop never breaks the ICRC. A switch that writes into a
//! packet sets the UDP checksum to 0 (legal for IPv4 UDP) and leaves the
//! IPv4 header untouched. IPv6 is not handled (its UDP checksum is
//! mandatory): [`push_hop`] leaves IPv6 frames alone.
//!
//! # Layout (big endian)
//!
//! ```text
//! byte 0   kind: 1 collect (switches append), 2 timestamp (TIMELY; switches
//!          leave it), 3 echo (in an ACK: the hops copied), 4 timestamp echo
//! byte 1   capacity: hop slots reserved (kinds 1, 3; at most INT_MAX_SLOTS);
//!          0 for kinds 2, 4
//! byte 2   nhop: slots filled (<= capacity; 0 for kinds 2, 4)
//! byte 3   flags: bit 0 OVERFLOW (a switch found no free slot and wrote
//!          nothing but this bit and the UDP checksum)
//! then     kinds 1, 3: capacity x 16-byte hops; kinds 2, 4: the sender's
//!          send time, ns (u64)
//! hop      link_rate_kbps u32 | qlen_bytes u32 (saturating)
//!          | tx_bytes u32 (wrapping) | ts_ns u32 (wrapping)
//! ```
//!
//! Block length: 4 + 16 x capacity (kinds 1, 3), 12 (kinds 2, 4).
//!
//! `tx_bytes` and `ts_ns` wrap: consumers take deltas of consecutive echoes
//! of one queue pair modulo 2^32 (`wrapping_sub`), which is right while the
//! two echoes are less than 4.29 s and less than 4 GiB of the port's
//! traffic apart. `link_rate_kbps` and `ts_ns` are the switch's emulated
//! (scaled) rate and its own clock: the units the scaled sender runs in.
//!
//! The HPCC simulator's `IntHop` packs a hop into 8 bytes (3-bit rate code,
//! 24-bit time, 20-bit bytes/128, 17-bit qlen/80). A 3-bit code names one
//! of a few fixed rates and cannot express a scaled one (100 Gbit/s / 2000
//! = 50 Mbit/s), so hops here are 16 bytes of plain counters: 5 hops cost
//! 84 bytes per data packet here against 44 in the simulator.
//!
//! # API
//!
//! * Senders: [`write_collect`] (empty block of `capacity` slots) or
//!   [`write_timestamp`] into the bytes after the BTH, and set [`BTH_INT`].
//! * Switches: [`push_hop`] on the whole Ethernet frame at egress.
//! * Receivers: [`IntBlock::in_udp_payload`] (or [`IntBlock::parse`] on the
//!   bytes after the BTH), then [`IntBlock::echo_into`] (or
//!   [`write_echo`] / [`write_timestamp`] with
//!   [`IntKind::TimestampEcho`]) into the ACK.
//! * Everyone: [`block_len`] for the bytes to skip or to mask in the ICRC.
//!
//! Like the rest of the crate: no panics on any bytes, no allocation.

use core::fmt;

use crate::ethernet::{self, ETHERTYPE_IPV4};
use crate::ip::{IPV4_HEADER_LEN, PROTO_UDP};
use crate::transport::{BTH_LEN, ROCEV2_UDP_PORT, UDP_HEADER_LEN};

/// Bit of BTH byte 4 (FECN | BECN | reserved) saying an INT block follows
/// the BTH.
pub const BTH_INT: u8 = 0x20;
/// Index of the byte [`BTH_INT`] lives in, within the BTH.
pub const BTH_INT_BYTE: usize = 4;
/// Bytes of the block header: kind, capacity, nhop, flags.
pub const INT_HEADER_LEN: usize = 4;
/// Bytes of one hop record.
pub const INT_HOP_LEN: usize = 16;
/// The most hop slots a block may reserve.
pub const INT_MAX_SLOTS: u8 = 16;
/// Bytes of a timestamp or timestamp-echo block.
pub const TIMESTAMP_BLOCK_LEN: usize = 12;
/// Flag: a switch found every slot full.
pub const INT_FLAG_OVERFLOW: u8 = 0x01;
/// Bytes of the RoCEv2 ICRC that ends every packet.
const ICRC_LEN: usize = 4;

/// What a block carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IntKind {
    /// Hop slots switches fill (a data packet).
    Collect,
    /// The sender's send time (TIMELY's data packet); switches leave it.
    Timestamp,
    /// The hops of a collect block, copied into an ACK.
    Echo,
    /// The send time of a timestamp block, copied into an ACK.
    TimestampEcho,
}

impl IntKind {
    /// The wire code (byte 0).
    pub const fn code(self) -> u8 {
        match self {
            IntKind::Collect => 1,
            IntKind::Timestamp => 2,
            IntKind::Echo => 3,
            IntKind::TimestampEcho => 4,
        }
    }

    /// The kind a wire code names, if any.
    pub const fn from_code(code: u8) -> Option<IntKind> {
        Some(match code {
            1 => IntKind::Collect,
            2 => IntKind::Timestamp,
            3 => IntKind::Echo,
            4 => IntKind::TimestampEcho,
            _ => return None,
        })
    }

    /// Whether the block holds hop slots (collect, echo) rather than a time.
    pub const fn has_hops(self) -> bool {
        matches!(self, IntKind::Collect | IntKind::Echo)
    }
}

/// One switch egress's record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct IntHop {
    /// The egress link's (emulated) rate, kbit/s.
    pub link_rate_kbps: u32,
    /// Bytes queued at the egress when the packet left (saturating).
    pub qlen_bytes: u32,
    /// The egress's transmitted-bytes counter (wrapping).
    pub tx_bytes: u32,
    /// The switch clock, ns (wrapping).
    pub ts_ns: u32,
}

impl IntHop {
    /// The hop as it goes on the wire.
    pub fn to_bytes(&self) -> [u8; INT_HOP_LEN] {
        let [r0, r1, r2, r3] = self.link_rate_kbps.to_be_bytes();
        let [q0, q1, q2, q3] = self.qlen_bytes.to_be_bytes();
        let [b0, b1, b2, b3] = self.tx_bytes.to_be_bytes();
        let [t0, t1, t2, t3] = self.ts_ns.to_be_bytes();
        [
            r0, r1, r2, r3, q0, q1, q2, q3, b0, b1, b2, b3, t0, t1, t2, t3,
        ]
    }

    /// The hop of 16 wire bytes.
    pub const fn from_bytes(b: &[u8; INT_HOP_LEN]) -> IntHop {
        IntHop {
            link_rate_kbps: u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
            qlen_bytes: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
            tx_bytes: u32::from_be_bytes([b[8], b[9], b[10], b[11]]),
            ts_ns: u32::from_be_bytes([b[12], b[13], b[14], b[15]]),
        }
    }

    /// The hop at the start of `bytes`.
    pub fn parse(bytes: &[u8]) -> Result<IntHop, IntError> {
        bytes
            .first_chunk::<INT_HOP_LEN>()
            .map(IntHop::from_bytes)
            .ok_or(IntError::Truncated)
    }
}

/// Why bytes are not a usable block, or a block could not be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IntError {
    /// The block (or the UDP datagram holding it) ends past the bytes
    /// given, or a buffer is too short for the block to write.
    Truncated,
    /// An unknown kind code.
    BadKind(u8),
    /// A capacity above [`INT_MAX_SLOTS`] for a hop block, or nonzero for
    /// a timestamp block.
    BadCapacity(u8),
    /// More hops filled than slots (or any for a timestamp block).
    BadNhop {
        /// Slots filled, as carried.
        nhop: u8,
        /// Slots reserved, as carried.
        capacity: u8,
    },
    /// The kind given to a writer is not one it writes.
    WrongKind(IntKind),
}

impl fmt::Display for IntError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IntError::Truncated => f.write_str("INT block truncated"),
            IntError::BadKind(k) => write!(f, "unknown INT block kind {k}"),
            IntError::BadCapacity(c) => write!(f, "INT block capacity {c} not allowed"),
            IntError::BadNhop { nhop, capacity } => {
                write!(f, "INT block has {nhop} hops in {capacity} slots")
            }
            IntError::WrongKind(k) => write!(f, "INT block kind {k:?} not allowed here"),
        }
    }
}

impl core::error::Error for IntError {}

/// Bytes of a block of `kind` with `capacity` slots (ignored for the
/// timestamp kinds), or `None` for a hop block above [`INT_MAX_SLOTS`].
pub const fn block_len(kind: IntKind, capacity: u8) -> Option<usize> {
    if !kind.has_hops() {
        return Some(TIMESTAMP_BLOCK_LEN);
    }
    if capacity > INT_MAX_SLOTS {
        return None;
    }
    // At most 4 + 16 * 16 = 260: cannot overflow.
    Some(INT_HEADER_LEN.wrapping_add(INT_HOP_LEN.wrapping_mul(capacity as usize)))
}

/// Writes an empty collect block of `capacity` slots (zeroed) at the start
/// of `buf`; returns its length.
pub fn write_collect(buf: &mut [u8], capacity: u8) -> Result<usize, IntError> {
    let len = block_len(IntKind::Collect, capacity).ok_or(IntError::BadCapacity(capacity))?;
    let block = buf.get_mut(..len).ok_or(IntError::Truncated)?;
    block.fill(0);
    if let Some(h) = block.first_chunk_mut::<INT_HEADER_LEN>() {
        *h = [IntKind::Collect.code(), capacity, 0, 0];
    }
    Ok(len)
}

/// Writes a timestamp block ([`IntKind::Timestamp`] or
/// [`IntKind::TimestampEcho`]) carrying `ts_ns` at the start of `buf`;
/// returns its length ([`TIMESTAMP_BLOCK_LEN`]).
pub fn write_timestamp(buf: &mut [u8], kind: IntKind, ts_ns: u64) -> Result<usize, IntError> {
    if kind.has_hops() {
        return Err(IntError::WrongKind(kind));
    }
    let b = buf
        .first_chunk_mut::<TIMESTAMP_BLOCK_LEN>()
        .ok_or(IntError::Truncated)?;
    let [t0, t1, t2, t3, t4, t5, t6, t7] = ts_ns.to_be_bytes();
    *b = [kind.code(), 0, 0, 0, t0, t1, t2, t3, t4, t5, t6, t7];
    Ok(TIMESTAMP_BLOCK_LEN)
}

/// Writes an echo block holding `hops` (capacity = nhop = `hops.len()`,
/// at most [`INT_MAX_SLOTS`]) and the OVERFLOW flag at the start of `buf`;
/// returns its length.
pub fn write_echo(buf: &mut [u8], hops: &[IntHop], overflow: bool) -> Result<usize, IntError> {
    let n = u8::try_from(hops.len()).map_err(|_| IntError::BadCapacity(u8::MAX))?;
    let len = block_len(IntKind::Echo, n).ok_or(IntError::BadCapacity(n))?;
    let block = buf.get_mut(..len).ok_or(IntError::Truncated)?;
    let (header, slots) = block
        .split_first_chunk_mut::<INT_HEADER_LEN>()
        .ok_or(IntError::Truncated)?;
    let flags = if overflow { INT_FLAG_OVERFLOW } else { 0 };
    *header = [IntKind::Echo.code(), n, n, flags];
    for (slot, hop) in slots.chunks_exact_mut(INT_HOP_LEN).zip(hops) {
        slot.copy_from_slice(&hop.to_bytes());
    }
    Ok(len)
}

/// A checked view of a block: every field is within the bytes and
/// consistent (kind known, capacity and nhop allowed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntBlock<'a> {
    kind: IntKind,
    capacity: u8,
    nhop: u8,
    flags: u8,
    /// Exactly the block's bytes.
    bytes: &'a [u8],
}

impl<'a> IntBlock<'a> {
    /// The block at the start of `bytes` (the bytes after the BTH).
    pub fn parse(bytes: &'a [u8]) -> Result<IntBlock<'a>, IntError> {
        let &[code, capacity, nhop, flags] = bytes
            .first_chunk::<INT_HEADER_LEN>()
            .ok_or(IntError::Truncated)?;
        let kind = IntKind::from_code(code).ok_or(IntError::BadKind(code))?;
        let len = check_header(kind, capacity, nhop)?;
        let bytes = bytes.get(..len).ok_or(IntError::Truncated)?;
        Ok(IntBlock {
            kind,
            capacity,
            nhop,
            flags,
            bytes,
        })
    }

    /// The block of a RoCEv2 UDP payload (BTH first), `None` when the BTH
    /// is shorter than 12 bytes or its [`BTH_INT`] bit is clear.
    pub fn in_udp_payload(udp_payload: &'a [u8]) -> Result<Option<IntBlock<'a>>, IntError> {
        match udp_payload.split_first_chunk::<BTH_LEN>() {
            Some((bth, rest)) if bth[BTH_INT_BYTE] & BTH_INT != 0 => {
                IntBlock::parse(rest).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// What the block carries.
    pub const fn kind(&self) -> IntKind {
        self.kind
    }

    /// Hop slots reserved (0 for the timestamp kinds).
    pub const fn capacity(&self) -> u8 {
        self.capacity
    }

    /// Hop slots filled.
    pub const fn nhop(&self) -> u8 {
        self.nhop
    }

    /// The flags byte as carried (unknown bits included).
    pub const fn flags(&self) -> u8 {
        self.flags
    }

    /// Whether a switch found every slot full (hop kinds only: a
    /// timestamp block has no slots, whatever its flags byte says).
    pub const fn overflow(&self) -> bool {
        self.kind.has_hops() && self.flags & INT_FLAG_OVERFLOW != 0
    }

    /// The block's length in bytes (what follows the BTH before RETH, AETH
    /// or payload; what the ICRC masks).
    pub const fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Never true: a block has at least its 4-byte header.
    pub const fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The block's bytes.
    pub const fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The filled hops, first switch first (none for the timestamp kinds).
    pub fn hops(&self) -> impl ExactSizeIterator<Item = IntHop> + Clone + 'a {
        let filled = if self.kind.has_hops() {
            let end = INT_HEADER_LEN.wrapping_add(INT_HOP_LEN.wrapping_mul(usize::from(self.nhop)));
            self.bytes.get(INT_HEADER_LEN..end).unwrap_or(&[])
        } else {
            &[]
        };
        filled.chunks_exact(INT_HOP_LEN).map(|c| {
            // chunks_exact yields exactly INT_HOP_LEN bytes.
            c.first_chunk::<INT_HOP_LEN>()
                .map_or_else(IntHop::default, IntHop::from_bytes)
        })
    }

    /// Filled hop `i`, if any.
    pub fn hop(&self, i: usize) -> Option<IntHop> {
        if i >= usize::from(self.nhop) || !self.kind.has_hops() {
            return None;
        }
        let at = INT_HEADER_LEN.wrapping_add(INT_HOP_LEN.wrapping_mul(i));
        IntHop::parse(self.bytes.get(at..)?).ok()
    }

    /// The send time of a timestamp or timestamp-echo block.
    pub fn timestamp(&self) -> Option<u64> {
        if self.kind.has_hops() {
            return None;
        }
        let (_, rest) = self.bytes.split_first_chunk::<INT_HEADER_LEN>()?;
        rest.first_chunk::<8>().map(|t| u64::from_be_bytes(*t))
    }

    /// Writes what an ACK echoes of this block at the start of `buf`:
    /// collect or echo -> an echo block of the filled hops (capacity =
    /// nhop) with the OVERFLOW flag; timestamp or timestamp echo -> a
    /// timestamp-echo block of the same time. Returns its length.
    pub fn echo_into(&self, buf: &mut [u8]) -> Result<usize, IntError> {
        if let Some(ts) = self.timestamp() {
            return write_timestamp(buf, IntKind::TimestampEcho, ts);
        }
        let len = block_len(IntKind::Echo, self.nhop).ok_or(IntError::BadCapacity(self.nhop))?;
        let src = self.bytes.get(..len).ok_or(IntError::Truncated)?;
        let dst = buf.get_mut(..len).ok_or(IntError::Truncated)?;
        dst.copy_from_slice(src);
        if let Some(h) = dst.first_chunk_mut::<INT_HEADER_LEN>() {
            *h = [
                IntKind::Echo.code(),
                self.nhop,
                self.nhop,
                self.flags & INT_FLAG_OVERFLOW,
            ];
        }
        Ok(len)
    }
}

/// The block length a header describes, if consistent.
const fn check_header(kind: IntKind, capacity: u8, nhop: u8) -> Result<usize, IntError> {
    if kind.has_hops() {
        if capacity > INT_MAX_SLOTS {
            return Err(IntError::BadCapacity(capacity));
        }
    } else if capacity != 0 {
        return Err(IntError::BadCapacity(capacity));
    }
    if nhop > capacity {
        return Err(IntError::BadNhop { nhop, capacity });
    }
    match block_len(kind, capacity) {
        Some(len) => Ok(len),
        None => Err(IntError::BadCapacity(capacity)),
    }
}

/// What [`push_hop`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PushOutcome {
    /// No collect block: not IPv4 UDP to 4791 with a BTH, [`BTH_INT`]
    /// clear, or a kind switches leave alone (timestamp, echo). Nothing
    /// changed.
    NotInt,
    /// The hop went into slot nhop, nhop grew by one, the UDP checksum is 0.
    Pushed,
    /// Every slot was full: OVERFLOW is set (and, if it was not set
    /// before, the UDP checksum is 0); nothing else changed.
    Overflow,
}

/// The switch's write: appends `hop` to the collect block of the Ethernet
/// frame `frame` (untagged IPv4, UDP to 4791, BTH with [`BTH_INT`], block
/// of kind collect), or sets its OVERFLOW flag when every slot is full,
/// and zeroes the UDP checksum the write would otherwise break.
///
/// Reads the few header bytes it needs itself (IPv4 with any IHL, not a
/// fragment), so it takes any frame; what is not a collect block is
/// `Ok(NotInt)`, unchanged. A block that does not fit the UDP datagram
/// (before its 4-byte ICRC) or whose header is inconsistent is an error,
/// unchanged. Never panics.
#[inline]
pub fn push_hop(frame: &mut [u8], hop: IntHop) -> Result<PushOutcome, IntError> {
    let Some(at) = locate_collect(frame)? else {
        return Ok(PushOutcome::NotInt);
    };
    let header = frame
        .get_mut(at.block..)
        .and_then(|b| b.first_chunk_mut::<INT_HEADER_LEN>())
        .ok_or(IntError::Truncated)?;
    let [_, capacity, nhop, flags] = *header;
    if nhop >= capacity {
        if flags & INT_FLAG_OVERFLOW != 0 {
            return Ok(PushOutcome::Overflow);
        }
        header[3] = flags | INT_FLAG_OVERFLOW;
    } else {
        // nhop < capacity <= 16 (checked by locate_collect): no overflow.
        header[2] = nhop.wrapping_add(1);
        let slot_at = at
            .block
            .wrapping_add(INT_HEADER_LEN)
            .wrapping_add(INT_HOP_LEN.wrapping_mul(usize::from(nhop)));
        let slot = frame
            .get_mut(slot_at..)
            .and_then(|s| s.first_chunk_mut::<INT_HOP_LEN>())
            .ok_or(IntError::Truncated)?;
        *slot = hop.to_bytes();
    }
    if let Some(csum) = frame
        .get_mut(at.udp_checksum..)
        .and_then(|c| c.first_chunk_mut::<2>())
    {
        *csum = [0, 0];
    }
    Ok(if nhop >= capacity {
        PushOutcome::Overflow
    } else {
        PushOutcome::Pushed
    })
}

/// Offsets in a frame of a collect block found by [`locate_collect`].
struct CollectAt {
    udp_checksum: usize,
    block: usize,
}

/// Finds the collect block of a frame, checking that it fits its UDP
/// datagram with room for the ICRC; `Ok(None)` if the frame has none.
#[inline]
fn locate_collect(frame: &[u8]) -> Result<Option<CollectAt>, IntError> {
    let Some((eth, ip)) = frame.split_first_chunk::<{ ethernet::HEADER_LEN }>() else {
        return Ok(None);
    };
    if u16::from_be_bytes([eth[12], eth[13]]) != ETHERTYPE_IPV4 {
        return Ok(None);
    }
    let Some(iph) = ip.first_chunk::<IPV4_HEADER_LEN>() else {
        return Ok(None);
    };
    // A fragment other than the first has no UDP header; the first holds
    // only part of the datagram the UDP length describes.
    let fragment = u16::from_be_bytes([iph[6], iph[7]]) & 0x3FFF != 0;
    if iph[0] >> 4 != 4 || iph[9] != PROTO_UDP || fragment {
        return Ok(None);
    }
    // IHL is at most 15 words: cannot overflow.
    let ihl = usize::from(iph[0] & 0x0F).wrapping_mul(4);
    let ip_total = usize::from(u16::from_be_bytes([iph[2], iph[3]]));
    let Some(udp) = ip.get(ihl..).filter(|_| ihl >= IPV4_HEADER_LEN) else {
        return Ok(None);
    };
    let Some((udph, udp_payload)) = udp.split_first_chunk::<UDP_HEADER_LEN>() else {
        return Ok(None);
    };
    if u16::from_be_bytes([udph[2], udph[3]]) != ROCEV2_UDP_PORT {
        return Ok(None);
    }
    let Some((bth, after_bth)) = udp_payload.split_first_chunk::<BTH_LEN>() else {
        return Ok(None);
    };
    // Transport header version 0 only (as `Bth::parse`), BTH_INT set.
    if bth[1] & 0x0F != 0 || bth[BTH_INT_BYTE] & BTH_INT == 0 {
        return Ok(None);
    }
    let &[code, capacity, nhop, _] = after_bth
        .first_chunk::<INT_HEADER_LEN>()
        .ok_or(IntError::Truncated)?;
    let kind = IntKind::from_code(code).ok_or(IntError::BadKind(code))?;
    if kind != IntKind::Collect {
        return Ok(None);
    }
    let block_len = check_header(kind, capacity, nhop)?;
    // The datagram the headers describe must hold the block and the ICRC.
    let udp_len = usize::from(u16::from_be_bytes([udph[4], udph[5]]));
    let need = UDP_HEADER_LEN
        .wrapping_add(BTH_LEN)
        .wrapping_add(block_len)
        .wrapping_add(ICRC_LEN);
    let ip_room = ip_total.checked_sub(ihl).ok_or(IntError::Truncated)?;
    if udp_len < need || udp_len > ip_room || udp_len > udp.len() {
        return Err(IntError::Truncated);
    }
    let udp_at = ethernet::HEADER_LEN.wrapping_add(ihl);
    Ok(Some(CollectAt {
        udp_checksum: udp_at.wrapping_add(6),
        block: udp_at.wrapping_add(UDP_HEADER_LEN).wrapping_add(BTH_LEN),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_and_unknown_codes_are_refused() {
        for k in [
            IntKind::Collect,
            IntKind::Timestamp,
            IntKind::Echo,
            IntKind::TimestampEcho,
        ] {
            assert_eq!(IntKind::from_code(k.code()), Some(k));
        }
        assert_eq!(IntKind::from_code(0), None);
        assert_eq!(IntKind::from_code(5), None);
    }

    #[test]
    fn block_lengths() {
        // 4 + 16 * 5 = 84: the five-hop block of the module docs.
        assert_eq!(block_len(IntKind::Collect, 5), Some(84));
        // 4 + 16 * 16 = 260.
        assert_eq!(block_len(IntKind::Echo, 16), Some(260));
        assert_eq!(block_len(IntKind::Collect, 17), None);
        assert_eq!(block_len(IntKind::Timestamp, 0), Some(12));
        assert_eq!(block_len(IntKind::TimestampEcho, 9), Some(12));
    }
}

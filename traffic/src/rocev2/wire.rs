//! RoCEv2 framing: IPv4 + UDP (destination port 4791) + InfiniBand BTH,
//! RETH or AETH, payload, pad and the 4-byte ICRC.
//!
//! ```text
//! data   IPv4(20) UDP(8) BTH(12) [RETH(16) on First/Only] payload pad ICRC(4)
//! ACK    IPv4(20) UDP(8) BTH(12, opcode 0x11) AETH(4)                ICRC(4)
//! CNP    IPv4(20) UDP(8) BTH(12, opcode 0x81) reserved(16)           ICRC(4)
//! ```
//!
//! BTH: opcode; SE | M | PadCnt(2) | TVer(4); P_Key (0xffff); FECN | BECN |
//! reserved(6); destination QP (24 bit); A | reserved(7); PSN (24 bit).
//! The ECN echo of an ACK is its BECN bit. An ACK's PSN is the receiver's
//! next expected PSN (the simulator's cumulative sequence, not IB's "last
//! PSN acknowledged"); a NAK's PSN is the PSN the receiver expects.
//!
//! The INT / timestamp block of HPCC and TIMELY ([`lcmp_wire::int`], one
//! definition for senders, switches and receivers) sits right after the
//! BTH, before RETH, AETH or payload, when bit [`BTH_INT`] of BTH byte 4
//! is set: a data packet carries a collect block (HPCC: switches append
//! hops) or a timestamp (TIMELY), its ACK the echo of either. [`Datagram`]
//! and [`parse_udp_packet`] give the block as a checked view;
//! [`encode_datagram_with`] and [`encode_udp_payload_with`] insert one.
//!
//! ICRC (IBTA RoCEv2 annex A17.4): CRC-32 (the Ethernet polynomial, as
//! zlib) over 8 bytes of 0xff standing for the masked LRH, then the IPv4
//! header with TOS, TTL and header checksum set to all ones, the UDP header
//! with its checksum set to all ones, the BTH with its FECN/BECN byte set to
//! all ones, the INT block (if any) set to all ones (switches write hops
//! into it, as they rewrite TTL), and everything after up to the ICRC;
//! stored least significant byte first (as Linux rxe and RoCE NICs put it
//! on the wire).
//!
//! The socket paths see only the UDP payload, so [`parse_udp_payload`] and
//! [`encode_udp_payload`] reconstruct the IPv4 header the kernel writes for
//! a UDP socket with `IP_PMTUDISC_DO`: no options, DF set, identification 0
//! (Linux uses 0 for unconnected DF datagrams); the variant fields are masked
//! anyway. Data packets built by the sender carry the same (DF, id 0).

use std::fmt;
use std::net::Ipv4Addr;

pub use lcmp_wire::int::{IntBlock, IntError, IntKind, BTH_INT, INT_HEADER_LEN, INT_HOP_LEN};
use lcmp_wire::int::{INT_MAX_SLOTS, TIMESTAMP_BLOCK_LEN};

/// The IANA port of RoCEv2.
pub const ROCEV2_PORT: u16 = 4791;
pub const IPV4_LEN: usize = 20;
pub const UDP_LEN: usize = 8;
pub const BTH_LEN: usize = 12;
pub const RETH_LEN: usize = 16;
pub const AETH_LEN: usize = 4;
pub const CNP_RESERVED_LEN: usize = 16;
pub const ICRC_LEN: usize = 4;
/// The default partition key.
pub const PKEY_DEFAULT: u16 = 0xffff;
/// PSNs and QP numbers are 24 bits.
pub const PSN_MASK: u32 = 0x00ff_ffff;
/// The largest payload of one packet (the largest IB MTU).
pub const MAX_PAYLOAD: usize = 4096;
/// The longest INT block: a hop block of [`INT_MAX_SLOTS`] slots.
pub const MAX_INT_BLOCK: usize = INT_HEADER_LEN + INT_HOP_LEN * INT_MAX_SLOTS as usize;
/// The ECN field of the IPv4 TOS byte.
pub const ECN_MASK: u8 = 0b11;
pub const ECN_ECT0: u8 = 0b10;
pub const ECN_CE: u8 = 0b11;
/// AETH credit field meaning "no credit count" (end-to-end credits off).
pub const CREDIT_INVALID: u8 = 0x1f;
/// AETH NAK code: PSN sequence error.
pub const NAK_PSN_SEQUENCE: u8 = 0;

const OP_WRITE_FIRST: u8 = 0x06;
const OP_WRITE_MIDDLE: u8 = 0x07;
const OP_WRITE_LAST: u8 = 0x08;
const OP_WRITE_ONLY: u8 = 0x0a;
const OP_ACK: u8 = 0x11;
const OP_CNP: u8 = 0x81;
const IP_DF: u16 = 0x4000;
const IP_PROTO_UDP: u8 = 17;
const TTL: u8 = 64;
/// BTH byte 1 as sent: SE 0, M 1 (migrated, as an RC QP at rest), TVer 0.
const BTH_MIGRATED: u8 = 0x40;

/// RC RDMA WRITE opcodes of a message's packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataOpcode {
    First,
    Middle,
    Last,
    Only,
}

impl DataOpcode {
    pub fn code(self) -> u8 {
        match self {
            DataOpcode::First => OP_WRITE_FIRST,
            DataOpcode::Middle => OP_WRITE_MIDDLE,
            DataOpcode::Last => OP_WRITE_LAST,
            DataOpcode::Only => OP_WRITE_ONLY,
        }
    }

    /// The opcode of packet `psn` of a message of `packets` packets.
    pub fn for_packet(psn: u32, packets: u32) -> DataOpcode {
        match (psn == 0, psn + 1 >= packets) {
            (true, true) => DataOpcode::Only,
            (true, false) => DataOpcode::First,
            (false, true) => DataOpcode::Last,
            (false, false) => DataOpcode::Middle,
        }
    }

    /// First and Only carry the RETH.
    pub fn has_reth(self) -> bool {
        matches!(self, DataOpcode::First | DataOpcode::Only)
    }
}

/// RDMA Extended Transport Header: where the message goes and its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Reth {
    pub va: u64,
    pub rkey: u32,
    /// The message's length in bytes (the flow's size).
    pub dma_len: u32,
}

/// ACK Extended Transport Header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Aeth {
    /// Syndrome 0b000 + credit count.
    Ack { credit: u8, msn: u32 },
    /// Syndrome 0b011 + NAK code.
    Nak { code: u8, msn: u32 },
}

impl Aeth {
    fn syndrome(self) -> u8 {
        match self {
            Aeth::Ack { credit, .. } => credit & 0x1f,
            Aeth::Nak { code, .. } => 0x60 | (code & 0x1f),
        }
    }

    fn msn(self) -> u32 {
        match self {
            Aeth::Ack { msn, .. } | Aeth::Nak { msn, .. } => msn & PSN_MASK,
        }
    }
}

/// One RoCEv2 packet's transport content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Message<'a> {
    Data {
        opcode: DataOpcode,
        qp: u32,
        psn: u32,
        /// Set by the fabric in IB; RoCEv2 marks in the IP header instead.
        fecn: bool,
        ack_req: bool,
        reth: Option<Reth>,
        payload: &'a [u8],
    },
    Ack {
        qp: u32,
        psn: u32,
        /// The ECN echo: the acknowledged packet arrived CE-marked.
        becn: bool,
        aeth: Aeth,
    },
    Cnp {
        qp: u32,
    },
}

/// The IPv4 and UDP addressing of a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Endpoints {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub sport: u16,
    pub dport: u16,
}

/// A parsed IPv4 datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Datagram<'a> {
    pub endpoints: Endpoints,
    pub tos: u8,
    pub message: Message<'a>,
    /// The INT / timestamp block after the BTH, if [`BTH_INT`] is set.
    pub int: Option<IntBlock<'a>>,
}

/// A parsed UDP payload: the message and its INT / timestamp block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<'a> {
    pub message: Message<'a>,
    pub int: Option<IntBlock<'a>>,
}

/// Why bytes are not a RoCEv2 packet we understand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireError {
    Truncated {
        what: &'static str,
        need: usize,
        got: usize,
    },
    NotIpv4(u8),
    IpOptions(u8),
    IpLength {
        header: usize,
        actual: usize,
    },
    Fragment,
    NotUdp(u8),
    UdpLength {
        header: usize,
        actual: usize,
    },
    Opcode(u8),
    TransportVersion(u8),
    /// The pad count is not allowed here (an ACK or CNP, or more pad than payload).
    Pad(u8),
    Syndrome(u8),
    Icrc {
        computed: u32,
        carried: u32,
    },
    PayloadTooLong(usize),
    /// [`BTH_INT`] is set and the block is not a valid one (or a block to
    /// encode is not).
    Int(IntError),
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Truncated { what, need, got } => {
                write!(f, "truncated {what}: need {need} bytes, got {got}")
            }
            WireError::NotIpv4(v) => write!(f, "IP version {v}, not 4"),
            WireError::IpOptions(ihl) => write!(f, "IPv4 header length {ihl} words (options)"),
            WireError::IpLength { header, actual } => {
                write!(f, "IPv4 total length {header}, datagram has {actual}")
            }
            WireError::Fragment => write!(f, "IPv4 fragment"),
            WireError::NotUdp(p) => write!(f, "IP protocol {p}, not UDP"),
            WireError::UdpLength { header, actual } => {
                write!(f, "UDP length {header}, datagram has {actual}")
            }
            WireError::Opcode(o) => write!(f, "unsupported BTH opcode {o:#04x}"),
            WireError::TransportVersion(v) => write!(f, "BTH transport version {v}"),
            WireError::Pad(p) => write!(f, "pad count {p} not allowed"),
            WireError::Syndrome(s) => write!(f, "unsupported AETH syndrome {s:#04x}"),
            WireError::Icrc { computed, carried } => {
                write!(f, "ICRC {carried:#010x}, computed {computed:#010x}")
            }
            WireError::PayloadTooLong(n) => write!(f, "payload of {n} bytes exceeds {MAX_PAYLOAD}"),
            WireError::Int(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for WireError {}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be24(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([0, b[at], b[at + 1], b[at + 2]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn put24(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&(v & PSN_MASK).to_be_bytes()[1..]);
}

fn need(what: &'static str, need: usize, got: usize) -> Result<(), WireError> {
    if got < need {
        Err(WireError::Truncated { what, need, got })
    } else {
        Ok(())
    }
}

/// Bytes from the BTH to the ICRC (exclusive) of `m`, without a block.
fn ib_len(m: &Message<'_>) -> usize {
    match m {
        Message::Data { reth, payload, .. } => {
            BTH_LEN
                + if reth.is_some() { RETH_LEN } else { 0 }
                + payload.len()
                + pad_of(payload.len())
        }
        Message::Ack { .. } => BTH_LEN + AETH_LEN,
        Message::Cnp { .. } => BTH_LEN + CNP_RESERVED_LEN,
    }
}

/// IB payloads are padded to a multiple of 4 bytes.
fn pad_of(len: usize) -> usize {
    (4 - len % 4) % 4
}

/// Bytes of the whole IPv4 datagram carrying `m` (without a block).
pub fn datagram_len(m: &Message<'_>) -> usize {
    IPV4_LEN + UDP_LEN + ib_len(m) + ICRC_LEN
}

/// The length of the block of `kind` with `capacity` hop slots (ignored
/// for the timestamp kinds; at most [`INT_MAX_SLOTS`]).
pub fn int_block_len(kind: IntKind, capacity: u8) -> usize {
    lcmp_wire::int::block_len(kind, capacity).unwrap_or(TIMESTAMP_BLOCK_LEN)
}

/// The length of the INT block the BTH..ICRC bytes `ib` carry: 0 without
/// [`BTH_INT`] (or a BTH); an error if the bit is set and the block is
/// not a valid one.
fn block_len_in(ib: &[u8]) -> Result<usize, WireError> {
    match ib.get(4) {
        Some(b) if b & BTH_INT != 0 => IntBlock::parse(ib.get(BTH_LEN..).unwrap_or(&[]))
            .map(|b| b.len())
            .map_err(WireError::Int),
        _ => Ok(0),
    }
}

/// The IPv4 header of a datagram of `total` bytes (DF, id 0, no options).
fn ipv4_header(ep: &Endpoints, tos: u8, total: usize) -> [u8; IPV4_LEN] {
    let mut h = [0u8; IPV4_LEN];
    h[0] = 0x45;
    h[1] = tos;
    h[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    h[6..8].copy_from_slice(&IP_DF.to_be_bytes());
    h[8] = TTL;
    h[9] = IP_PROTO_UDP;
    h[12..16].copy_from_slice(&ep.src.octets());
    h[16..20].copy_from_slice(&ep.dst.octets());
    let sum = ipv4_checksum(&h);
    h[10..12].copy_from_slice(&sum.to_be_bytes());
    h
}

/// The Internet checksum of a header whose checksum field is zero.
fn ipv4_checksum(h: &[u8; IPV4_LEN]) -> u16 {
    let mut sum: u32 = h.chunks_exact(2).map(|w| u32::from(be16(w, 0))).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn udp_header(ep: &Endpoints, udp_len: usize) -> [u8; UDP_LEN] {
    let mut h = [0u8; UDP_LEN];
    h[0..2].copy_from_slice(&ep.sport.to_be_bytes());
    h[2..4].copy_from_slice(&ep.dport.to_be_bytes());
    h[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
    // Checksum 0: RoCEv2 over IPv4 may omit it; the ICRC covers the data.
    h
}

/// The ICRC of a packet: `ip` and `udp` as on the wire (masked here), `ib`
/// from the BTH up to the ICRC (its INT block, if valid, masked here; an
/// invalid one is not masked, and such a packet is refused anyway).
pub fn icrc(ip: &[u8; IPV4_LEN], udp: &[u8; UDP_LEN], ib: &[u8]) -> u32 {
    icrc_masking(ip, udp, ib, block_len_in(ib).unwrap_or(0))
}

/// [`icrc`] with the `block` bytes after the BTH masked.
fn icrc_masking(ip: &[u8; IPV4_LEN], udp: &[u8; UDP_LEN], ib: &[u8], block: usize) -> u32 {
    let mut ip = *ip;
    ip[1] = 0xff;
    ip[8] = 0xff;
    ip[10] = 0xff;
    ip[11] = 0xff;
    let mut udp = *udp;
    udp[6] = 0xff;
    udp[7] = 0xff;
    let mut h = crc32fast::Hasher::new();
    h.update(&[0xff; 8]);
    h.update(&ip);
    h.update(&udp);
    if ib.len() > 4 {
        h.update(&ib[..4]);
        h.update(&[0xff]);
        let masked_end = (BTH_LEN + block).min(ib.len());
        let bth_end = BTH_LEN.min(masked_end);
        h.update(&ib[5..bth_end]);
        h.update(&[0xff; MAX_INT_BLOCK][..(masked_end - bth_end).min(MAX_INT_BLOCK)]);
        h.update(&ib[masked_end..]);
    } else {
        h.update(ib);
    }
    h.finalize()
}

/// `Ok` with the block's length if `block` is exactly one valid block.
fn check_block(block: Option<&[u8]>) -> Result<usize, WireError> {
    let Some(b) = block else {
        return Ok(0);
    };
    let parsed = IntBlock::parse(b).map_err(WireError::Int)?;
    if parsed.len() != b.len() {
        return Err(WireError::Int(IntError::Truncated));
    }
    Ok(b.len())
}

/// Appends BTH..pad of `m` to `out`, `block` (checked) after the BTH.
fn encode_ib(out: &mut Vec<u8>, m: &Message<'_>, block: Option<&[u8]>) -> Result<(), WireError> {
    let (opcode, qp, psn, fecn, becn, ack_req, pad) = match m {
        Message::Data {
            opcode,
            qp,
            psn,
            fecn,
            ack_req,
            payload,
            ..
        } => {
            if payload.len() > MAX_PAYLOAD {
                return Err(WireError::PayloadTooLong(payload.len()));
            }
            let pad = pad_of(payload.len()) as u8;
            (opcode.code(), *qp, *psn, *fecn, false, *ack_req, pad)
        }
        Message::Ack { qp, psn, becn, .. } => (OP_ACK, *qp, *psn, false, *becn, false, 0),
        // A CNP carries BECN set (RoCEv2 annex A17.9.2).
        Message::Cnp { qp } => (OP_CNP, *qp, 0, false, true, false, 0),
    };
    out.push(opcode);
    out.push(BTH_MIGRATED | (pad << 4));
    out.extend_from_slice(&PKEY_DEFAULT.to_be_bytes());
    let int = if block.is_some() { BTH_INT } else { 0 };
    out.push(u8::from(fecn) << 7 | u8::from(becn) << 6 | int);
    put24(out, qp);
    out.push(u8::from(ack_req) << 7);
    put24(out, psn);
    if let Some(b) = block {
        out.extend_from_slice(b);
    }
    match m {
        Message::Data { reth, payload, .. } => {
            if let Some(r) = reth {
                out.extend_from_slice(&r.va.to_be_bytes());
                out.extend_from_slice(&r.rkey.to_be_bytes());
                out.extend_from_slice(&r.dma_len.to_be_bytes());
            }
            out.extend_from_slice(payload);
            out.extend_from_slice(&[0; 3][..usize::from(pad)]);
        }
        Message::Ack { aeth, .. } => {
            out.push(aeth.syndrome());
            put24(out, aeth.msn());
        }
        Message::Cnp { .. } => out.extend_from_slice(&[0; CNP_RESERVED_LEN]),
    }
    Ok(())
}

/// Appends the whole IPv4 datagram of `m` (for a raw socket) to `out`.
pub fn encode_datagram(
    out: &mut Vec<u8>,
    ep: &Endpoints,
    tos: u8,
    m: &Message<'_>,
) -> Result<(), WireError> {
    encode_datagram_with(out, ep, tos, m, None)
}

/// [`encode_datagram`] with the INT / timestamp block `block` (one whole
/// valid block, e.g. from [`lcmp_wire::int::write_collect`]) after the
/// BTH and [`BTH_INT`] set.
pub fn encode_datagram_with(
    out: &mut Vec<u8>,
    ep: &Endpoints,
    tos: u8,
    m: &Message<'_>,
    block: Option<&[u8]>,
) -> Result<(), WireError> {
    let block_len = check_block(block)?;
    let total = datagram_len(m) + block_len;
    let ip = ipv4_header(ep, tos, total);
    let udp = udp_header(ep, total - IPV4_LEN);
    let start = out.len();
    out.extend_from_slice(&ip);
    out.extend_from_slice(&udp);
    if let Err(e) = encode_ib(out, m, block) {
        out.truncate(start);
        return Err(e);
    }
    let crc = icrc_masking(&ip, &udp, &out[start + IPV4_LEN + UDP_LEN..], block_len);
    out.extend_from_slice(&crc.to_le_bytes());
    Ok(())
}

/// Appends the UDP payload of `m` (BTH..ICRC, for a UDP socket) to `out`,
/// the ICRC computed over the headers the kernel will write.
pub fn encode_udp_payload(
    out: &mut Vec<u8>,
    ep: &Endpoints,
    m: &Message<'_>,
) -> Result<(), WireError> {
    encode_udp_payload_with(out, ep, m, None)
}

/// [`encode_udp_payload`] with the block `block` after the BTH (as
/// [`encode_datagram_with`]).
pub fn encode_udp_payload_with(
    out: &mut Vec<u8>,
    ep: &Endpoints,
    m: &Message<'_>,
    block: Option<&[u8]>,
) -> Result<(), WireError> {
    let block_len = check_block(block)?;
    let total = datagram_len(m) + block_len;
    let start = out.len();
    encode_ib(out, m, block)?;
    let ip = ipv4_header(ep, 0, total);
    let udp = udp_header(ep, total - IPV4_LEN);
    let crc = icrc_masking(&ip, &udp, &out[start..], block_len);
    out.extend_from_slice(&crc.to_le_bytes());
    Ok(())
}

/// Parses a whole IPv4 datagram (as a raw socket or a test sees it).
pub fn parse_datagram(bytes: &[u8]) -> Result<Datagram<'_>, WireError> {
    need("IPv4 header", IPV4_LEN, bytes.len())?;
    let version = bytes[0] >> 4;
    if version != 4 {
        return Err(WireError::NotIpv4(version));
    }
    let ihl = bytes[0] & 0x0f;
    if ihl != 5 {
        return Err(WireError::IpOptions(ihl));
    }
    let total = usize::from(be16(bytes, 2));
    if total != bytes.len() {
        return Err(WireError::IpLength {
            header: total,
            actual: bytes.len(),
        });
    }
    // More-fragments or a fragment offset.
    if be16(bytes, 6) & 0x3fff != 0 {
        return Err(WireError::Fragment);
    }
    if bytes[9] != IP_PROTO_UDP {
        return Err(WireError::NotUdp(bytes[9]));
    }
    need("UDP header", IPV4_LEN + UDP_LEN, bytes.len())?;
    let udp_len = usize::from(be16(bytes, IPV4_LEN + 4));
    if udp_len != total - IPV4_LEN {
        return Err(WireError::UdpLength {
            header: udp_len,
            actual: total - IPV4_LEN,
        });
    }
    let mut ip = [0u8; IPV4_LEN];
    ip.copy_from_slice(&bytes[..IPV4_LEN]);
    let mut udp = [0u8; UDP_LEN];
    udp.copy_from_slice(&bytes[IPV4_LEN..IPV4_LEN + UDP_LEN]);
    let endpoints = Endpoints {
        src: Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]),
        dst: Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]),
        sport: be16(&udp, 0),
        dport: be16(&udp, 2),
    };
    let Packet { message, int } = parse_ib(&ip, &udp, &bytes[IPV4_LEN + UDP_LEN..])?;
    Ok(Datagram {
        endpoints,
        tos: ip[1],
        message,
        int,
    })
}

/// Parses a UDP payload received on a UDP socket from `ep.src:ep.sport`
/// to `ep.dst:ep.dport` (its INT block, if any, checked and skipped).
pub fn parse_udp_payload<'a>(ep: &Endpoints, payload: &'a [u8]) -> Result<Message<'a>, WireError> {
    parse_udp_packet(ep, payload).map(|p| p.message)
}

/// [`parse_udp_payload`] with the INT / timestamp block.
pub fn parse_udp_packet<'a>(ep: &Endpoints, payload: &'a [u8]) -> Result<Packet<'a>, WireError> {
    let total = IPV4_LEN + UDP_LEN + payload.len();
    if total > usize::from(u16::MAX) {
        return Err(WireError::IpLength {
            header: usize::from(u16::MAX),
            actual: total,
        });
    }
    let ip = ipv4_header(ep, 0, total);
    let udp = udp_header(ep, total - IPV4_LEN);
    parse_ib(&ip, &udp, payload)
}

/// Parses BTH..ICRC and checks the ICRC against the given headers.
fn parse_ib<'a>(
    ip: &[u8; IPV4_LEN],
    udp: &[u8; UDP_LEN],
    b: &'a [u8],
) -> Result<Packet<'a>, WireError> {
    need("BTH", BTH_LEN + ICRC_LEN, b.len())?;
    let body_end = b.len() - ICRC_LEN;
    let carried = u32::from_le_bytes([
        b[body_end],
        b[body_end + 1],
        b[body_end + 2],
        b[body_end + 3],
    ]);
    let body = &b[..body_end];
    let block_len = block_len_in(body)?;
    let int = if b[4] & BTH_INT != 0 {
        // block_len_in parsed it within the body.
        IntBlock::parse(&body[BTH_LEN..]).ok()
    } else {
        None
    };
    let computed = icrc_masking(ip, udp, body, block_len);
    if carried != computed {
        return Err(WireError::Icrc { computed, carried });
    }
    let opcode = b[0];
    let pad = (b[1] >> 4) & 0b11;
    let tver = b[1] & 0x0f;
    if tver != 0 {
        return Err(WireError::TransportVersion(tver));
    }
    let fecn = b[4] & 0x80 != 0;
    let becn = b[4] & 0x40 != 0;
    let qp = be24(b, 5);
    let ack_req = b[8] & 0x80 != 0;
    let psn = be24(b, 9);
    let rest = &b[BTH_LEN + block_len..body_end];
    let data = |opcode: DataOpcode| -> Result<Message<'a>, WireError> {
        let (reth, payload) = if opcode.has_reth() {
            need("RETH", RETH_LEN, rest.len())?;
            let reth = Reth {
                va: u64::from_be_bytes([
                    rest[0], rest[1], rest[2], rest[3], rest[4], rest[5], rest[6], rest[7],
                ]),
                rkey: be32(rest, 8),
                dma_len: be32(rest, 12),
            };
            (Some(reth), &rest[RETH_LEN..])
        } else {
            (None, rest)
        };
        let pad = usize::from(pad);
        if pad > payload.len() {
            return Err(WireError::Pad(pad as u8));
        }
        let payload = &payload[..payload.len() - pad];
        if payload.len() > MAX_PAYLOAD {
            return Err(WireError::PayloadTooLong(payload.len()));
        }
        Ok(Message::Data {
            opcode,
            qp,
            psn,
            fecn,
            ack_req,
            reth,
            payload,
        })
    };
    let message = match opcode {
        OP_WRITE_FIRST => data(DataOpcode::First),
        OP_WRITE_MIDDLE => data(DataOpcode::Middle),
        OP_WRITE_LAST => data(DataOpcode::Last),
        OP_WRITE_ONLY => data(DataOpcode::Only),
        OP_ACK => {
            if pad != 0 {
                return Err(WireError::Pad(pad));
            }
            need("AETH", AETH_LEN, rest.len())?;
            let syndrome = rest[0];
            let msn = be24(rest, 1);
            let aeth = match syndrome >> 5 {
                0b000 => Aeth::Ack {
                    credit: syndrome & 0x1f,
                    msn,
                },
                0b011 => Aeth::Nak {
                    code: syndrome & 0x1f,
                    msn,
                },
                _ => return Err(WireError::Syndrome(syndrome)),
            };
            Ok(Message::Ack {
                qp,
                psn,
                becn,
                aeth,
            })
        }
        OP_CNP => {
            if pad != 0 {
                return Err(WireError::Pad(pad));
            }
            need("CNP", CNP_RESERVED_LEN, rest.len())?;
            Ok(Message::Cnp { qp })
        }
        other => Err(WireError::Opcode(other)),
    }?;
    Ok(Packet { message, int })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// CRC-32 bit by bit (reflected polynomial 0xedb88320), independent of
    /// crc32fast; returns the register before the final inversion.
    fn crc_register(init: u32, data: &[u8]) -> u32 {
        let mut crc = init;
        for &byte in data {
            crc ^= u32::from(byte);
            for _ in 0..8 {
                crc = if crc & 1 != 0 {
                    (crc >> 1) ^ 0xedb8_8320
                } else {
                    crc >> 1
                };
            }
        }
        crc
    }

    /// The ICRC the annex defines, masked by hand from the datagram bytes.
    fn reference_icrc(datagram: &[u8]) -> u32 {
        let mut pseudo = vec![0xffu8; 8];
        pseudo.extend_from_slice(&datagram[..datagram.len() - ICRC_LEN]);
        let o = 8;
        pseudo[o + 1] = 0xff; // TOS
        pseudo[o + 8] = 0xff; // TTL
        pseudo[o + 10] = 0xff; // header checksum
        pseudo[o + 11] = 0xff;
        pseudo[o + 26] = 0xff; // UDP checksum
        pseudo[o + 27] = 0xff;
        pseudo[o + 32] = 0xff; // BTH FECN/BECN/reserved byte
        !crc_register(0xffff_ffff, &pseudo)
    }

    fn ep() -> Endpoints {
        Endpoints {
            src: Ipv4Addr::new(10, 1, 0, 2),
            dst: Ipv4Addr::new(10, 8, 0, 2),
            sport: 0xc123,
            dport: ROCEV2_PORT,
        }
    }

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn crc_reference_matches_published_values() {
        // The CRC-32 check value, and Linux rxe's seed: the register after
        // 8 bytes of 0xff from 0xffffffff (drivers/infiniband/sw/rxe).
        assert_eq!(!crc_register(0xffff_ffff, b"123456789"), 0xcbf4_3926);
        assert_eq!(crc_register(0xffff_ffff, &[0xff; 8]), 0xdebb_20e3);
    }

    #[test]
    fn data_packet_fixture() {
        // WRITE Only of 5 bytes "hello" to QP 0x000102, PSN 0, ECT(0).
        let payload = b"hello";
        let m = Message::Data {
            opcode: DataOpcode::Only,
            qp: 0x000102,
            psn: 0,
            fecn: false,
            ack_req: true,
            reth: Some(Reth {
                va: 0x1122_3344_5566_7788,
                rkey: 0xaabb_ccdd,
                dma_len: 5,
            }),
            payload,
        };
        let mut out = Vec::new();
        encode_datagram(&mut out, &ep(), ECN_ECT0, &m).unwrap();
        // Total 20 + 8 + 12 + 16 + 5 + 3 pad + 4 = 68 = 0x44; UDP 48 = 0x30.
        // IPv4 checksum by hand: 4502 + 0044 + 0000 + 4000 + 4011 + 0a01 +
        // 0002 + 0a08 + 0002 = 0xd964 (no carry), !0xd964 = 0x269b.
        let expected_head = hex("4502 0044 0000 4000 4011 269b 0a01 0002 0a08 0002
             c123 12b7 0030 0000
             0a 70 ffff 00 000102 80 000000
             1122334455667788 aabbccdd 00000005
             68656c6c6f 000000");
        assert_eq!(&out[..out.len() - 4], &expected_head[..]);
        let crc = u32::from_le_bytes(out[out.len() - 4..].try_into().unwrap());
        assert_eq!(crc, reference_icrc(&out));
        let d = parse_datagram(&out).unwrap();
        assert_eq!(d.message, m);
        assert_eq!(d.tos, ECN_ECT0);
        assert_eq!(d.endpoints, ep());
        // A router's CE mark, TTL decrement and new checksum keep the ICRC.
        let mut marked = out.clone();
        marked[1] = ECN_CE;
        marked[8] = 63;
        marked[10] = 0x12;
        assert_eq!(parse_datagram(&marked).unwrap().message, m);
        // Any covered byte breaks it.
        let mut bad = out.clone();
        bad[60] ^= 1;
        assert!(matches!(parse_datagram(&bad), Err(WireError::Icrc { .. })));
    }

    #[test]
    fn int_block_fixture_and_a_switch_hop_keeps_the_icrc() {
        // The data packet of `data_packet_fixture` with an empty collect
        // block of 2 slots: 4 + 2 x 16 = 36 bytes after the BTH.
        let m = Message::Data {
            opcode: DataOpcode::Only,
            qp: 0x000102,
            psn: 0,
            fecn: false,
            ack_req: true,
            reth: Some(Reth {
                va: 0x1122_3344_5566_7788,
                rkey: 0xaabb_ccdd,
                dma_len: 5,
            }),
            payload: b"hello",
        };
        let mut block = [0u8; 36];
        assert_eq!(lcmp_wire::int::write_collect(&mut block, 2), Ok(36));
        let mut out = Vec::new();
        encode_datagram_with(&mut out, &ep(), ECN_ECT0, &m, Some(&block)).unwrap();
        // Total 68 + 36 = 104 = 0x68, UDP 84 = 0x54. IPv4 checksum: the
        // fixture's sum 0xd964 with 0x0044 -> 0x0068 is 0xd988, !0xd988 =
        // 0x2677. BTH byte 4: BTH_INT = 0x20. Block: kind 1, capacity 2,
        // nhop 0, flags 0, 32 zero bytes.
        let expected_head = hex(&format!(
            "4502 0068 0000 4000 4011 2677 0a01 0002 0a08 0002
             c123 12b7 0054 0000
             0a 70 ffff 20 000102 80 000000
             01020000 {}
             1122334455667788 aabbccdd 00000005
             68656c6c6f 000000",
            "00".repeat(32)
        ));
        assert_eq!(&out[..out.len() - 4], &expected_head[..]);
        let carried = u32::from_le_bytes(out[out.len() - 4..].try_into().unwrap());
        // The ICRC masked by hand: datagram bytes 40..76 (the block, after
        // IPv4 20 + UDP 8 + BTH 12) are 0xff in the CRC's input.
        let masked = |d: &[u8]| {
            let mut m = d.to_vec();
            m[40..76].fill(0xff);
            reference_icrc(&m)
        };
        assert_eq!(carried, masked(&out));
        assert_ne!(carried, reference_icrc(&out), "the block must be masked");
        let d = parse_datagram(&out).unwrap();
        assert_eq!(d.message, m);
        let b = d.int.unwrap();
        assert_eq!(
            (b.kind(), b.capacity(), b.nhop(), b.len()),
            (IntKind::Collect, 2, 0, 36)
        );

        // A switch writes a hop (as lcmp-switch does at egress, on the
        // Ethernet frame): slot 0, nhop 1; the ICRC still holds.
        let mut frame = vec![0u8; 12];
        frame.extend_from_slice(&[0x08, 0x00]);
        frame.extend_from_slice(&out);
        let hop = lcmp_wire::IntHop {
            link_rate_kbps: 100_000,
            qlen_bytes: 3_000,
            tx_bytes: 123_456,
            ts_ns: 999,
        };
        assert_eq!(
            lcmp_wire::push_hop(&mut frame, hop),
            Ok(lcmp_wire::PushOutcome::Pushed)
        );
        let after = &frame[14..];
        assert_eq!(after[42], 1, "nhop");
        // 100_000 = 0x0001_86a0, 3_000 = 0x0bb8, 123_456 = 0x0001_e240, 999 = 0x03e7.
        assert_eq!(
            &after[44..60],
            &hex("000186a0 00000bb8 0001e240 000003e7")[..]
        );
        assert_eq!(&after[after.len() - 4..], &out[out.len() - 4..]);
        assert_eq!(masked(after), carried);
        let d = parse_datagram(after).unwrap();
        assert_eq!(d.message, m);
        let b = d.int.unwrap();
        assert_eq!(b.hops().collect::<Vec<_>>(), vec![hop]);
        // Bytes outside the block are still covered.
        let mut bad = after.to_vec();
        bad[80] ^= 1;
        assert!(matches!(parse_datagram(&bad), Err(WireError::Icrc { .. })));
    }

    #[test]
    fn echo_blocks_ride_on_acks() {
        let rev = Endpoints {
            src: Ipv4Addr::new(10, 8, 0, 2),
            dst: Ipv4Addr::new(10, 1, 0, 2),
            sport: ROCEV2_PORT,
            dport: ROCEV2_PORT,
        };
        let ack = Message::Ack {
            qp: 0x000102,
            psn: 7,
            becn: false,
            aeth: Aeth::Ack {
                credit: CREDIT_INVALID,
                msn: 1,
            },
        };
        let mut ts = [0u8; 12];
        lcmp_wire::write_timestamp(&mut ts, IntKind::TimestampEcho, 0x0102_0304_0506_0708).unwrap();
        let mut udp_payload = Vec::new();
        encode_udp_payload_with(&mut udp_payload, &rev, &ack, Some(&ts)).unwrap();
        // BTH byte 4 = BTH_INT; block kind 4, capacity 0, nhop 0, flags 0,
        // the time; then the AETH.
        assert_eq!(
            &udp_payload[..udp_payload.len() - 4],
            &hex("11 40 ffff 20 000102 00 000007 04000000 0102030405060708 1f 000001")[..]
        );
        let p = parse_udp_packet(&rev, &udp_payload).unwrap();
        assert_eq!(p.message, ack);
        assert_eq!(p.int.unwrap().timestamp(), Some(0x0102_0304_0506_0708));
        assert_eq!(parse_udp_payload(&rev, &udp_payload).unwrap(), ack);
        // Not a block: refused before encoding; a cut block when parsing.
        assert!(matches!(
            encode_udp_payload_with(&mut Vec::new(), &rev, &ack, Some(&[9, 0, 0, 0])),
            Err(WireError::Int(_))
        ));
        assert!(matches!(
            encode_udp_payload_with(&mut Vec::new(), &rev, &ack, Some(&ts[..8])),
            Err(WireError::Int(_))
        ));
        let mut bad = udp_payload.clone();
        bad[12] = 9;
        assert!(matches!(
            parse_udp_packet(&rev, &bad),
            Err(WireError::Int(IntError::BadKind(9)))
        ));
    }

    #[test]
    fn ack_nak_cnp_fixtures() {
        let rev = Endpoints {
            src: Ipv4Addr::new(10, 8, 0, 2),
            dst: Ipv4Addr::new(10, 1, 0, 2),
            sport: ROCEV2_PORT,
            dport: ROCEV2_PORT,
        };
        let ack = Message::Ack {
            qp: 0x000102,
            psn: 7,
            becn: true,
            aeth: Aeth::Ack {
                credit: CREDIT_INVALID,
                msn: 1,
            },
        };
        let nak = Message::Ack {
            qp: 0x000102,
            psn: 3,
            becn: false,
            aeth: Aeth::Nak {
                code: NAK_PSN_SEQUENCE,
                msn: 0,
            },
        };
        let cnp = Message::Cnp { qp: 0x000102 };
        let cases = [
            // BTH: opcode 0x11, M, P_Key, BECN (0x40), QP, A 0, PSN 7; AETH
            // syndrome 0b000_11111 = 0x1f, MSN 1.
            (ack, "11 40 ffff 40 000102 00 000007 1f 000001"),
            // NAK: syndrome 0b011_00000 = 0x60, PSN 3 (the expected one).
            (nak, "11 40 ffff 00 000102 00 000003 60 000000"),
            // CNP: opcode 0x81, BECN set, PSN 0, 16 reserved bytes.
            (
                cnp,
                "81 40 ffff 40 000102 00 000000 00000000000000000000000000000000",
            ),
        ];
        for (m, ib) in cases {
            let mut udp_payload = Vec::new();
            encode_udp_payload(&mut udp_payload, &rev, &m).unwrap();
            let ib = hex(ib);
            assert_eq!(&udp_payload[..udp_payload.len() - 4], &ib[..]);
            assert_eq!(parse_udp_payload(&rev, &udp_payload).unwrap(), m);
            // The same ICRC as the datagram with the kernel's header (DF,
            // id 0, TOS 0) computed independently.
            let mut datagram = Vec::new();
            encode_datagram(&mut datagram, &rev, 0, &m).unwrap();
            assert_eq!(&datagram[IPV4_LEN + UDP_LEN..], &udp_payload[..]);
            let crc = u32::from_le_bytes(datagram[datagram.len() - 4..].try_into().unwrap());
            assert_eq!(crc, reference_icrc(&datagram));
            // From another address the ICRC no longer matches.
            let other = Endpoints {
                src: Ipv4Addr::new(10, 8, 0, 3),
                ..rev
            };
            assert!(matches!(
                parse_udp_payload(&other, &udp_payload),
                Err(WireError::Icrc { .. })
            ));
        }
    }

    #[test]
    fn rejects_short_and_garbage_input() {
        assert!(matches!(
            parse_datagram(&[]),
            Err(WireError::Truncated { .. })
        ));
        assert!(matches!(
            parse_datagram(&[0x60; 40]),
            Err(WireError::NotIpv4(6))
        ));
        assert!(matches!(
            parse_udp_payload(&ep(), &[0; 15]),
            Err(WireError::Truncated { .. })
        ));
        // A valid ICRC over an unknown opcode.
        let mut b = vec![0x64u8, 0x40, 0xff, 0xff, 0, 0, 0, 1, 0, 0, 0, 0];
        let total = IPV4_LEN + UDP_LEN + b.len() + ICRC_LEN;
        let crc = icrc(
            &ipv4_header(&ep(), 0, total),
            &udp_header(&ep(), total - 20),
            &b,
        );
        b.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(parse_udp_payload(&ep(), &b), Err(WireError::Opcode(0x64)));
    }

    /// Builds one of every kind of message from raw field values.
    fn message(
        kind: u8,
        f: (u32, u32, bool, bool, u64, u32, u32, u8),
        payload: &[u8],
    ) -> Message<'_> {
        let (qp, psn, b1, b2, va, rkey, n, v) = f;
        let opcode = match kind {
            0 => DataOpcode::First,
            1 => DataOpcode::Middle,
            2 => DataOpcode::Last,
            3 => DataOpcode::Only,
            4 => {
                let aeth = if b2 {
                    Aeth::Nak {
                        code: v & 0x1f,
                        msn: n & PSN_MASK,
                    }
                } else {
                    Aeth::Ack {
                        credit: v & 0x1f,
                        msn: n & PSN_MASK,
                    }
                };
                return Message::Ack {
                    qp,
                    psn,
                    becn: b1,
                    aeth,
                };
            }
            _ => return Message::Cnp { qp },
        };
        Message::Data {
            opcode,
            qp,
            psn,
            fecn: b1,
            ack_req: b2,
            reth: opcode.has_reth().then_some(Reth {
                va,
                rkey,
                dma_len: n,
            }),
            payload,
        }
    }

    proptest! {
        #[test]
        fn parsing_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse_datagram(&bytes);
            let _ = parse_udp_payload(&ep(), &bytes);
        }

        #[test]
        fn mutated_packets_never_panic(flip in 0usize..80, bit in 0u8..8, cut in 0usize..80) {
            let m = Message::Data { opcode: DataOpcode::First, qp: 9, psn: 0, fecn: false, ack_req: true,
                reth: Some(Reth { va: 1, rkey: 2, dma_len: 3000 }), payload: &[7; 21] };
            let mut out = Vec::new();
            encode_datagram(&mut out, &ep(), ECN_ECT0, &m).unwrap();
            let i = flip % out.len();
            out[i] ^= 1 << bit;
            let _ = parse_datagram(&out);
            out.truncate(cut.min(out.len()));
            let _ = parse_datagram(&out);
            let _ = parse_udp_payload(&ep(), &out);
        }

        #[test]
        fn encode_parse_round_trip(
            payload in proptest::collection::vec(any::<u8>(), 0..64),
            tos in any::<u8>(),
            kind in 0u8..6,
            qp in 0u32..=PSN_MASK,
            psn in 0u32..=PSN_MASK,
            rest in any::<(bool, bool, u64, u32, u32, u8)>(),
        ) {
            let (b1, b2, va, rkey, n, v) = rest;
            let m = message(kind, (qp, psn, b1, b2, va, rkey, n, v), &payload);
            let mut out = Vec::new();
            encode_datagram(&mut out, &ep(), tos, &m).unwrap();
            prop_assert_eq!(out.len(), datagram_len(&m));
            let d = parse_datagram(&out).unwrap();
            prop_assert_eq!(d.message, m);
            prop_assert_eq!(d.tos, tos);
            let mut udp = Vec::new();
            encode_udp_payload(&mut udp, &ep(), &m).unwrap();
            prop_assert_eq!(parse_udp_payload(&ep(), &udp).unwrap(), m);
        }
    }
}

//! Frame builders and checks **for tests only** (this crate's, the switch's
//! and the namespace tests').
//!
//! Unlike the rest of the crate this module allocates and may panic on
//! nonsensical requests (a datagram longer than the IP length fields allow,
//! IPv4 options longer than 40 bytes). It is always compiled so that other
//! crates' tests can use it without a feature flag; nothing on the hot path
//! calls it.
//!
//! ```
//! use lcmp_wire::testing::FrameBuilder;
//! use lcmp_wire::{parse, Ecn};
//!
//! let frame = FrameBuilder::ipv4([10, 0, 0, 1], [10, 0, 0, 2])
//!     .udp(49152, 4791)
//!     .ecn(Ecn::Ect0)
//!     .payload(&[0; 32])
//!     .build();
//! let parsed = parse(&frame).unwrap();
//! assert!(parsed.is_rocev2());
//! ```
#![allow(
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use alloc::vec::Vec;

use crate::checksum::{add, ones_complement_sum};
use crate::ethernet::{self, MacAddr, ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETHERTYPE_VLAN};
use crate::ip::{Ecn, PROTO_ICMP, PROTO_ICMPV6, PROTO_TCP, PROTO_UDP};
use crate::transport::{Bth, BTH_LEN, ROCEV2_UDP_PORT};

/// TCP flag bits, for [`FrameBuilder::tcp_flags`].
pub mod tcp_flags {
    /// FIN.
    pub const FIN: u8 = 0x01;
    /// SYN.
    pub const SYN: u8 = 0x02;
    /// RST.
    pub const RST: u8 = 0x04;
    /// PSH.
    pub const PSH: u8 = 0x08;
    /// ACK.
    pub const ACK: u8 = 0x10;
    /// ECE.
    pub const ECE: u8 = 0x40;
    /// CWR.
    pub const CWR: u8 = 0x80;
}

/// Default source MAC of built frames (locally administered).
pub const DEFAULT_SRC_MAC: MacAddr = [0x02, 0, 0, 0, 0, 0x01];
/// Default destination MAC of built frames (locally administered).
pub const DEFAULT_DST_MAC: MacAddr = [0x02, 0, 0, 0, 0, 0x02];

#[derive(Clone, Copy, Debug)]
enum IpFields {
    V4 {
        src: [u8; 4],
        dst: [u8; 4],
        id: u16,
        flags_frag: u16,
    },
    V6 {
        src: [u8; 16],
        dst: [u8; 16],
        flow_label: u32,
    },
}

#[derive(Clone, Copy, Debug)]
enum L4Fields {
    Tcp {
        sport: u16,
        dport: u16,
        seq: u32,
        ack: u32,
        flags: u8,
        window: u16,
    },
    Udp {
        sport: u16,
        dport: u16,
        bth: Option<Bth>,
    },
    IcmpEcho {
        ident: u16,
        seq: u16,
    },
    Raw {
        proto: u8,
    },
}

/// Builds an Ethernet + IPv4/IPv6 + TCP/UDP/ICMP frame with correct IPv4
/// header and L4 checksums.
///
/// Defaults: MACs [`DEFAULT_SRC_MAC`] → [`DEFAULT_DST_MAC`], TTL / hop limit
/// 64, DSCP 0, Not-ECT, IPv4 DF set and ID 0, UDP 10000 → 20000, no payload,
/// no padding, no VLAN tag.
#[derive(Clone, Debug)]
pub struct FrameBuilder {
    src_mac: MacAddr,
    dst_mac: MacAddr,
    vlan_tci: Option<u16>,
    ip: IpFields,
    ttl: u8,
    dscp: u8,
    ecn: Ecn,
    ipv4_options: Vec<u8>,
    l4: L4Fields,
    payload: Vec<u8>,
    /// An INT block after the BTH (RoCEv2 only), see [`FrameBuilder::int_block`].
    int_block: Option<Vec<u8>>,
    pad_to: usize,
}

impl FrameBuilder {
    fn new(ip: IpFields) -> Self {
        FrameBuilder {
            src_mac: DEFAULT_SRC_MAC,
            dst_mac: DEFAULT_DST_MAC,
            vlan_tci: None,
            ip,
            ttl: 64,
            dscp: 0,
            ecn: Ecn::NotEct,
            ipv4_options: Vec::new(),
            l4: L4Fields::Udp {
                sport: 10000,
                dport: 20000,
                bth: None,
            },
            payload: Vec::new(),
            int_block: None,
            pad_to: 0,
        }
    }

    /// An IPv4 frame from `src` to `dst`.
    pub fn ipv4(src: [u8; 4], dst: [u8; 4]) -> Self {
        Self::new(IpFields::V4 {
            src,
            dst,
            id: 0,
            flags_frag: 0x4000,
        })
    }

    /// An IPv6 frame from `src` to `dst`.
    pub fn ipv6(src: [u8; 16], dst: [u8; 16]) -> Self {
        Self::new(IpFields::V6 {
            src,
            dst,
            flow_label: 0,
        })
    }

    /// Source and destination MAC addresses.
    pub fn macs(mut self, src: MacAddr, dst: MacAddr) -> Self {
        self.src_mac = src;
        self.dst_mac = dst;
        self
    }

    /// Inserts an 802.1Q tag with this TCI (the parser classifies such
    /// frames as `Vlan`).
    pub fn vlan(mut self, tci: u16) -> Self {
        self.vlan_tci = Some(tci);
        self
    }

    /// IPv4 TTL or IPv6 hop limit.
    pub fn ttl(mut self, ttl: u8) -> Self {
        self.ttl = ttl;
        self
    }

    /// DSCP (6 bits; higher bits ignored).
    pub fn dscp(mut self, dscp: u8) -> Self {
        self.dscp = dscp & 0x3F;
        self
    }

    /// ECN codepoint.
    pub fn ecn(mut self, ecn: Ecn) -> Self {
        self.ecn = ecn;
        self
    }

    /// IPv4 identification (ignored for IPv6).
    pub fn ipv4_id(mut self, id: u16) -> Self {
        if let IpFields::V4 { id: ref mut i, .. } = self.ip {
            *i = id;
        }
        self
    }

    /// IPv4 flags and fragment offset: MF, DF and the offset in 8-byte
    /// units (13 bits). Ignored for IPv6.
    pub fn ipv4_fragment(mut self, more_fragments: bool, dont_fragment: bool, offset: u16) -> Self {
        if let IpFields::V4 { flags_frag, .. } = &mut self.ip {
            *flags_frag = (offset & 0x1FFF)
                | if more_fragments { 0x2000 } else { 0 }
                | if dont_fragment { 0x4000 } else { 0 };
        }
        self
    }

    /// IPv4 options (padded with zeros, i.e. End of Option List, to a
    /// multiple of 4; at most 40 bytes). Ignored for IPv6.
    pub fn ipv4_options(mut self, options: &[u8]) -> Self {
        assert!(options.len() <= 40, "IPv4 options are at most 40 bytes");
        self.ipv4_options = options.to_vec();
        while self.ipv4_options.len() % 4 != 0 {
            self.ipv4_options.push(0);
        }
        self
    }

    /// IPv6 flow label (20 bits; ignored for IPv4).
    pub fn flow_label(mut self, label: u32) -> Self {
        if let IpFields::V6 { flow_label, .. } = &mut self.ip {
            *flow_label = label & 0xF_FFFF;
        }
        self
    }

    /// TCP with these ports (data offset 5, flags ACK, seq 1, ack 1, window
    /// 65535).
    pub fn tcp(mut self, sport: u16, dport: u16) -> Self {
        self.l4 = L4Fields::Tcp {
            sport,
            dport,
            seq: 1,
            ack: 1,
            flags: tcp_flags::ACK,
            window: 65535,
        };
        self
    }

    /// TCP flags (only if the frame is TCP).
    pub fn tcp_flags(mut self, new_flags: u8) -> Self {
        if let L4Fields::Tcp { flags, .. } = &mut self.l4 {
            *flags = new_flags;
        }
        self
    }

    /// TCP sequence and acknowledgement numbers (only if the frame is TCP).
    pub fn tcp_seq(mut self, new_seq: u32, new_ack: u32) -> Self {
        if let L4Fields::Tcp { seq, ack, .. } = &mut self.l4 {
            *seq = new_seq;
            *ack = new_ack;
        }
        self
    }

    /// UDP with these ports.
    pub fn udp(mut self, sport: u16, dport: u16) -> Self {
        self.l4 = L4Fields::Udp {
            sport,
            dport,
            bth: None,
        };
        self
    }

    /// RoCEv2: UDP from `sport` to 4791 whose payload is `bth`, then the
    /// payload set with [`payload`](Self::payload), then a 4-byte ICRC
    /// (zeros: not computed). Transport header version 0, no padding.
    pub fn rocev2(mut self, sport: u16, bth: Bth) -> Self {
        self.l4 = L4Fields::Udp {
            sport,
            dport: ROCEV2_UDP_PORT,
            bth: Some(bth),
        };
        self
    }

    /// RoCEv2 only: sets [`BTH_INT`](crate::int::BTH_INT) in BTH byte 4 and
    /// puts `block` (built with [`crate::int::write_collect`] and friends,
    /// or any bytes) right after the BTH, before the payload.
    pub fn int_block(mut self, block: &[u8]) -> Self {
        self.int_block = Some(block.to_vec());
        self
    }

    /// ICMP (IPv4) or ICMPv6 (IPv6) echo request.
    pub fn icmp_echo(mut self, ident: u16, seq: u16) -> Self {
        self.l4 = L4Fields::IcmpEcho { ident, seq };
        self
    }

    /// Any other protocol: the IP payload is the payload, as given.
    pub fn protocol(mut self, proto: u8) -> Self {
        self.l4 = L4Fields::Raw { proto };
        self
    }

    /// Application payload after the L4 header.
    pub fn payload(mut self, payload: &[u8]) -> Self {
        self.payload = payload.to_vec();
        self
    }

    /// Pads the frame with zeros to at least `len` bytes (Ethernet padding
    /// beyond the IP datagram, e.g. 60 for a minimum-size frame).
    pub fn pad_to(mut self, len: usize) -> Self {
        self.pad_to = len;
        self
    }

    /// The ones' complement sum of the pseudo-header for `proto` and an
    /// upper-layer length of `len`.
    fn pseudo_header_sum(&self, proto: u8, len: usize) -> u16 {
        match self.ip {
            IpFields::V4 { src, dst, .. } => {
                let mut ph = Vec::with_capacity(12);
                ph.extend_from_slice(&src);
                ph.extend_from_slice(&dst);
                ph.extend_from_slice(&[0, proto]);
                ph.extend_from_slice(&u16::try_from(len).unwrap().to_be_bytes());
                ones_complement_sum(&ph, 0)
            }
            IpFields::V6 { src, dst, .. } => {
                let mut ph = Vec::with_capacity(40);
                ph.extend_from_slice(&src);
                ph.extend_from_slice(&dst);
                ph.extend_from_slice(&u32::try_from(len).unwrap().to_be_bytes());
                ph.extend_from_slice(&[0, 0, 0, proto]);
                ones_complement_sum(&ph, 0)
            }
        }
    }

    /// The frame.
    ///
    /// # Panics
    /// If the IP datagram does not fit the IP length field.
    pub fn build(&self) -> Vec<u8> {
        let is_v6 = matches!(self.ip, IpFields::V6 { .. });
        // L4 header and payload, checksum field zero for now.
        let mut l4 = Vec::new();
        let (proto, checksum_at, pseudo) = match self.l4 {
            L4Fields::Tcp {
                sport,
                dport,
                seq,
                ack,
                flags,
                window,
            } => {
                l4.extend_from_slice(&sport.to_be_bytes());
                l4.extend_from_slice(&dport.to_be_bytes());
                l4.extend_from_slice(&seq.to_be_bytes());
                l4.extend_from_slice(&ack.to_be_bytes());
                l4.extend_from_slice(&[5 << 4, flags]);
                l4.extend_from_slice(&window.to_be_bytes());
                l4.extend_from_slice(&[0, 0, 0, 0]); // checksum, urgent pointer
                l4.extend_from_slice(&self.payload);
                (PROTO_TCP, Some(16), true)
            }
            L4Fields::Udp { sport, dport, bth } => {
                l4.extend_from_slice(&sport.to_be_bytes());
                l4.extend_from_slice(&dport.to_be_bytes());
                l4.extend_from_slice(&[0, 0, 0, 0]); // length, checksum
                if let Some(b) = bth {
                    let mut h = [0u8; BTH_LEN];
                    h[0] = b.opcode;
                    h[2..4].copy_from_slice(&b.pkey.to_be_bytes());
                    h[5..8].copy_from_slice(&(b.dest_qp & 0xFF_FFFF).to_be_bytes()[1..]);
                    h[8] = if b.ack_request { 0x80 } else { 0 };
                    h[9..12].copy_from_slice(&(b.psn & 0xFF_FFFF).to_be_bytes()[1..]);
                    if self.int_block.is_some() {
                        h[crate::int::BTH_INT_BYTE] |= crate::int::BTH_INT;
                    }
                    l4.extend_from_slice(&h);
                    if let Some(block) = &self.int_block {
                        l4.extend_from_slice(block);
                    }
                }
                l4.extend_from_slice(&self.payload);
                if bth.is_some() {
                    l4.extend_from_slice(&[0; 4]); // ICRC, not computed
                }
                let len = u16::try_from(l4.len()).expect("UDP datagram too long");
                l4[4..6].copy_from_slice(&len.to_be_bytes());
                (PROTO_UDP, Some(6), true)
            }
            L4Fields::IcmpEcho { ident, seq } => {
                let ty = if is_v6 { 128 } else { 8 };
                l4.extend_from_slice(&[ty, 0, 0, 0]);
                l4.extend_from_slice(&ident.to_be_bytes());
                l4.extend_from_slice(&seq.to_be_bytes());
                l4.extend_from_slice(&self.payload);
                let proto = if is_v6 { PROTO_ICMPV6 } else { PROTO_ICMP };
                // ICMPv6 covers a pseudo-header, ICMP for IPv4 does not.
                (proto, Some(2), is_v6)
            }
            L4Fields::Raw { proto } => {
                l4.extend_from_slice(&self.payload);
                (proto, None, false)
            }
        };
        if let Some(at) = checksum_at {
            let initial = if pseudo {
                self.pseudo_header_sum(proto, l4.len())
            } else {
                0
            };
            let mut csum = !ones_complement_sum(&l4, initial);
            if proto == PROTO_UDP && csum == 0 {
                csum = 0xFFFF; // 0 means "no checksum" for UDP
            }
            l4[at..at + 2].copy_from_slice(&csum.to_be_bytes());
        }

        let tclass = (self.dscp << 2) | self.ecn.bits();
        let mut frame = Vec::with_capacity(ethernet::HEADER_LEN + 4 + 60 + l4.len());
        frame.extend_from_slice(&self.dst_mac);
        frame.extend_from_slice(&self.src_mac);
        if let Some(tci) = self.vlan_tci {
            frame.extend_from_slice(&ETHERTYPE_VLAN.to_be_bytes());
            frame.extend_from_slice(&tci.to_be_bytes());
        }
        match self.ip {
            IpFields::V4 {
                src,
                dst,
                id,
                flags_frag,
            } => {
                frame.extend_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
                let header_len = 20 + self.ipv4_options.len();
                let total = u16::try_from(header_len + l4.len()).expect("IPv4 datagram too long");
                let mut h = Vec::with_capacity(header_len);
                h.push(0x40 | (header_len / 4) as u8);
                h.push(tclass);
                h.extend_from_slice(&total.to_be_bytes());
                h.extend_from_slice(&id.to_be_bytes());
                h.extend_from_slice(&flags_frag.to_be_bytes());
                h.extend_from_slice(&[self.ttl, proto, 0, 0]);
                h.extend_from_slice(&src);
                h.extend_from_slice(&dst);
                h.extend_from_slice(&self.ipv4_options);
                let csum = crate::checksum::ipv4_checksum(&h);
                h[10..12].copy_from_slice(&csum.to_be_bytes());
                frame.extend_from_slice(&h);
            }
            IpFields::V6 {
                src,
                dst,
                flow_label,
            } => {
                frame.extend_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
                let payload_len = u16::try_from(l4.len()).expect("IPv6 payload too long");
                let word0 = (6u32 << 28) | (u32::from(tclass) << 20) | flow_label;
                frame.extend_from_slice(&word0.to_be_bytes());
                frame.extend_from_slice(&payload_len.to_be_bytes());
                frame.extend_from_slice(&[proto, self.ttl]);
                frame.extend_from_slice(&src);
                frame.extend_from_slice(&dst);
            }
        }
        frame.extend_from_slice(&l4);
        if frame.len() < self.pad_to {
            frame.resize(self.pad_to, 0);
        }
        frame
    }
}

/// Recomputes the IPv4 header checksum of an untagged frame in place (after
/// a test changed header fields). Returns false, changing nothing, if the
/// frame does not hold an IPv4 header of the length its IHL says.
pub fn fix_ipv4_checksum(frame: &mut [u8]) -> bool {
    let Some(&first) = frame.get(ethernet::HEADER_LEN) else {
        return false;
    };
    let header_len = usize::from(first & 0x0F) * 4;
    let Some(header) = frame.get_mut(ethernet::HEADER_LEN..ethernet::HEADER_LEN + header_len)
    else {
        return false;
    };
    if header.len() < 20 {
        return false;
    }
    header[10..12].copy_from_slice(&[0, 0]);
    let csum = crate::checksum::ipv4_checksum(header);
    header[10..12].copy_from_slice(&csum.to_be_bytes());
    true
}

/// Whether the IPv4 header checksum of an untagged IPv4 frame verifies
/// (`None` if there is no such header).
pub fn ipv4_header_checksum_ok(frame: &[u8]) -> Option<bool> {
    let first = *frame.get(ethernet::HEADER_LEN)?;
    let header_len = usize::from(first & 0x0F) * 4;
    if header_len < 20 {
        return None;
    }
    let header = frame.get(ethernet::HEADER_LEN..ethernet::HEADER_LEN + header_len)?;
    Some(crate::checksum::ipv4_checksum(header) == 0)
}

/// Whether the TCP, UDP, ICMP or ICMPv6 checksum of a frame that
/// [`parse`](crate::parse) accepts verifies. `None` if the frame is not
/// accepted or the protocol has no checksum known here. A zero UDP checksum
/// over IPv4 ("none") counts as valid.
pub fn l4_checksum_ok(frame: &[u8]) -> Option<bool> {
    let parsed = crate::parse(frame).ok()?;
    let l4 = frame.get(parsed.l4_offset..parsed.frame_len_unpadded())?;
    let proto = parsed.flow.proto();
    let l3 = &frame[parsed.l3_offset..];
    let pseudo = |len: usize| -> u16 {
        match parsed.l3 {
            crate::L3::V4 => {
                let mut s = ones_complement_sum(&l3[12..20], 0);
                s = add(s, u16::from(proto));
                add(s, len as u16)
            }
            crate::L3::V6 => {
                let mut s = ones_complement_sum(&l3[8..40], 0);
                s = add(s, (len >> 16) as u16);
                s = add(s, len as u16);
                add(s, u16::from(proto))
            }
        }
    };
    match proto {
        PROTO_TCP | PROTO_UDP => {
            if proto == PROTO_UDP && parsed.l3 == crate::L3::V4 && l4.get(6..8)? == [0, 0] {
                return Some(true);
            }
            Some(ones_complement_sum(l4, pseudo(l4.len())) == 0xFFFF)
        }
        PROTO_ICMP if parsed.l3 == crate::L3::V4 => Some(ones_complement_sum(l4, 0) == 0xFFFF),
        PROTO_ICMPV6 if parsed.l3 == crate::L3::V6 => {
            Some(ones_complement_sum(l4, pseudo(l4.len())) == 0xFFFF)
        }
        _ => None,
    }
}

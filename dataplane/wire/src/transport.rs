//! TCP and UDP port extraction and the RoCEv2 Base Transport Header.

use crate::ip::{PROTO_ICMP, PROTO_ICMPV6, PROTO_TCP, PROTO_UDP};
use crate::parse::ParseError;

/// UDP destination port of RoCEv2 (IANA).
pub const ROCEV2_UDP_PORT: u16 = 4791;

/// Length of a TCP header without options.
pub const TCP_HEADER_LEN: usize = 20;
/// Length of a UDP header.
pub const UDP_HEADER_LEN: usize = 8;
/// Length of the InfiniBand Base Transport Header carried by RoCEv2.
pub const BTH_LEN: usize = 12;

/// The fields of a RoCEv2 Base Transport Header (InfiniBand BTH) that a
/// switch may want: opcode, partition, destination queue pair and PSN.
///
/// Parsed only for UDP destination port 4791 when at least 12 bytes of UDP
/// payload are present and the transport header version is 0; otherwise
/// [`ParsedFrame::bth`](crate::ParsedFrame::bth) is `None`. The ICRC is not
/// checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Bth {
    /// Opcode: transport service in the top 3 bits, operation below.
    pub opcode: u8,
    /// Partition key.
    pub pkey: u16,
    /// Destination queue pair (24 bits).
    pub dest_qp: u32,
    /// Acknowledge-request bit.
    pub ack_request: bool,
    /// Packet sequence number (24 bits).
    pub psn: u32,
}

impl Bth {
    /// Parses the first 12 bytes of `udp_payload`; `None` if too short or
    /// the transport header version is not 0.
    #[inline]
    pub fn parse(udp_payload: &[u8]) -> Option<Bth> {
        let (b, _) = udp_payload.split_first_chunk::<BTH_LEN>()?;
        // Byte 1: SE(1) M(1) PadCnt(2) TVer(4).
        if b[1] & 0x0F != 0 {
            return None;
        }
        Some(Bth {
            opcode: b[0],
            pkey: u16::from_be_bytes([b[2], b[3]]),
            dest_qp: u32::from_be_bytes([0, b[5], b[6], b[7]]),
            ack_request: b[8] & 0x80 != 0,
            psn: u32::from_be_bytes([0, b[9], b[10], b[11]]),
        })
    }
}

/// What the fast path needs from the transport header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct L4Info {
    pub sport: u16,
    pub dport: u16,
    pub bth: Option<Bth>,
}

/// Reads ports from the IP payload `payload` (exactly the bytes the IP
/// header says belong to the datagram) for protocol `proto`.
///
/// TCP and UDP headers must fit (`Truncated` otherwise) and be consistent
/// (`BadL4Header`: TCP data offset < 5 or beyond the payload, UDP length < 8
/// or beyond the payload). Other protocols get ports 0 and are not checked.
#[inline]
pub(crate) fn parse_l4(proto: u8, payload: &[u8]) -> Result<L4Info, ParseError> {
    match proto {
        PROTO_TCP => {
            let (tcp, _) = payload
                .split_first_chunk::<TCP_HEADER_LEN>()
                .ok_or(ParseError::Truncated)?;
            let data_offset_words = tcp[12] >> 4;
            // At most 15 * 4 = 60: cannot overflow.
            let header_len = usize::from(data_offset_words).wrapping_mul(4);
            if header_len < TCP_HEADER_LEN || header_len > payload.len() {
                return Err(ParseError::BadL4Header);
            }
            Ok(L4Info {
                sport: u16::from_be_bytes([tcp[0], tcp[1]]),
                dport: u16::from_be_bytes([tcp[2], tcp[3]]),
                bth: None,
            })
        }
        PROTO_UDP => {
            let (udp, rest) = payload
                .split_first_chunk::<UDP_HEADER_LEN>()
                .ok_or(ParseError::Truncated)?;
            let udp_len = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
            if udp_len < UDP_HEADER_LEN || udp_len > payload.len() {
                return Err(ParseError::BadL4Header);
            }
            let sport = u16::from_be_bytes([udp[0], udp[1]]);
            let dport = u16::from_be_bytes([udp[2], udp[3]]);
            let bth = if dport == ROCEV2_UDP_PORT {
                // udp_len >= 8 was checked, so this cannot wrap.
                rest.get(..udp_len.wrapping_sub(UDP_HEADER_LEN))
                    .and_then(Bth::parse)
            } else {
                None
            };
            Ok(L4Info { sport, dport, bth })
        }
        // Echo requests and replies: the identifier tells ping sessions
        // apart (a router keys them so, too), so it takes the source
        // port's place. Other ICMP messages, and echoes too short to hold
        // an identifier, have no ports.
        PROTO_ICMP | PROTO_ICMPV6 => {
            let echo = match (proto, payload.first()) {
                (PROTO_ICMP, Some(&t)) => t == ICMP_ECHO_REQUEST || t == ICMP_ECHO_REPLY,
                (_, Some(&t)) => t == ICMPV6_ECHO_REQUEST || t == ICMPV6_ECHO_REPLY,
                _ => false,
            };
            let ident = payload
                .get(4..6)
                .and_then(|b| <[u8; 2]>::try_from(b).ok())
                .map(u16::from_be_bytes);
            Ok(L4Info {
                sport: if echo { ident.unwrap_or(0) } else { 0 },
                dport: 0,
                bth: None,
            })
        }
        _ => Ok(L4Info {
            sport: 0,
            dport: 0,
            bth: None,
        }),
    }
}

/// ICMP echo request type.
const ICMP_ECHO_REQUEST: u8 = 8;
/// ICMP echo reply type.
const ICMP_ECHO_REPLY: u8 = 0;
/// ICMPv6 echo request type.
const ICMPV6_ECHO_REQUEST: u8 = 128;
/// ICMPv6 echo reply type.
const ICMPV6_ECHO_REPLY: u8 = 129;

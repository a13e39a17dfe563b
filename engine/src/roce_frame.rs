//! RoCEv2 datagrams ([`lcmp_traffic::rocev2::wire`]) in Ethernet frames,
//! as a host NIC puts them on its link and takes them off it: an untagged
//! Ethernet header (EtherType IPv4) before the IPv4 datagram, no FCS.

pub use lcmp_traffic::rocev2::sender::ETHERNET_HEADER;
use lcmp_traffic::rocev2::wire::{self, Datagram, Endpoints, Message, WireError};
use lcmp_wire::ethernet::ETHERTYPE_IPV4;
use lcmp_wire::MacAddr;

use crate::udp_frame::write_ethernet;

/// Why a frame is not a RoCEv2 datagram for this NIC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejected {
    /// Shorter than an Ethernet header.
    Runt(usize),
    /// Addressed to another MAC.
    NotForUs,
    /// Another EtherType (ARP, IPv6, a VLAN tag).
    NotIpv4,
    /// The datagram itself ([`wire::parse_datagram`]).
    Wire(WireError),
    /// The encoded frame does not fit the buffer.
    TooLong(usize),
}

/// Writes the frame carrying `m` from `src` to `dst` (MACs) into `buf` and
/// returns its length. `scratch` holds the datagram while it is encoded
/// (its capacity is kept, so a warm scratch allocates nothing).
pub fn encode(
    buf: &mut [u8],
    scratch: &mut Vec<u8>,
    src: MacAddr,
    dst: MacAddr,
    ep: &Endpoints,
    tos: u8,
    m: &Message<'_>,
) -> Result<usize, Rejected> {
    encode_with(buf, scratch, src, dst, ep, tos, m, None)
}

/// [`encode`] with the INT / timestamp block `block` after the BTH
/// ([`wire::encode_datagram_with`]).
#[allow(clippy::too_many_arguments)]
pub fn encode_with(
    buf: &mut [u8],
    scratch: &mut Vec<u8>,
    src: MacAddr,
    dst: MacAddr,
    ep: &Endpoints,
    tos: u8,
    m: &Message<'_>,
    block: Option<&[u8]>,
) -> Result<usize, Rejected> {
    scratch.clear();
    wire::encode_datagram_with(scratch, ep, tos, m, block).map_err(Rejected::Wire)?;
    let len = ETHERNET_HEADER + scratch.len();
    let Some((eth, datagram)) = buf
        .get_mut(..len)
        .and_then(|out| out.split_first_chunk_mut::<ETHERNET_HEADER>())
    else {
        return Err(Rejected::TooLong(len));
    };
    write_ethernet(eth, src, dst);
    datagram.copy_from_slice(scratch);
    Ok(len)
}

/// The RoCEv2 datagram in `frame`, if the frame is addressed to `mac`.
/// Bytes after the IPv4 total length (Ethernet padding of a short frame)
/// are ignored; everything else is checked by [`wire::parse_datagram`].
pub fn parse(frame: &[u8], mac: MacAddr) -> Result<Datagram<'_>, Rejected> {
    if frame.len() < ETHERNET_HEADER {
        return Err(Rejected::Runt(frame.len()));
    }
    if frame[..6] != mac {
        return Err(Rejected::NotForUs);
    }
    if frame[12..14] != ETHERTYPE_IPV4.to_be_bytes() {
        return Err(Rejected::NotIpv4);
    }
    let ip = &frame[ETHERNET_HEADER..];
    let total = match ip.get(2..4) {
        Some(&[hi, lo]) => usize::from(u16::from_be_bytes([hi, lo])),
        _ => ip.len(),
    };
    let ip = if total < ip.len() { &ip[..total] } else { ip };
    wire::parse_datagram(ip).map_err(Rejected::Wire)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lcmp_traffic::rocev2::wire::{Aeth, CREDIT_INVALID, ROCEV2_PORT};
    use std::net::Ipv4Addr;

    const A: MacAddr = [2, 0, 0, 0, 0, 0xa];
    const B: MacAddr = [2, 0, 0, 0, 0, 0xb];

    fn ack() -> Message<'static> {
        Message::Ack {
            qp: 7,
            psn: 3,
            becn: true,
            aeth: Aeth::Ack {
                credit: CREDIT_INVALID,
                msn: 1,
            },
        }
    }

    fn ep() -> Endpoints {
        Endpoints {
            src: Ipv4Addr::new(10, 0, 2, 2),
            dst: Ipv4Addr::new(10, 0, 1, 2),
            sport: ROCEV2_PORT,
            dport: ROCEV2_PORT,
        }
    }

    #[test]
    fn an_ack_round_trips_and_padding_is_ignored() {
        let mut buf = [0u8; 128];
        let mut scratch = Vec::new();
        let len = encode(&mut buf, &mut scratch, B, A, &ep(), 0, &ack()).unwrap();
        // 14 + IPv4 20 + UDP 8 + BTH 12 + AETH 4 + ICRC 4.
        assert_eq!(len, 62);
        assert_eq!(buf[..6], A);
        assert_eq!(buf[6..12], B);
        let d = parse(&buf[..len], A).unwrap();
        assert_eq!((d.message, d.endpoints), (ack(), ep()));
        // Padded to 70 bytes by some link: the same datagram.
        assert_eq!(parse(&buf[..70], A).unwrap().message, ack());
        assert_eq!(parse(&buf[..len], B), Err(Rejected::NotForUs));
        assert_eq!(parse(&buf[..10], A), Err(Rejected::Runt(10)));
        let mut arp = buf;
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(parse(&arp[..len], A), Err(Rejected::NotIpv4));
        // Cut short: the IPv4 length no longer matches.
        assert!(matches!(parse(&buf[..len - 1], A), Err(Rejected::Wire(_))));
        // A buffer too small for the frame.
        assert_eq!(
            encode(&mut buf[..61], &mut scratch, B, A, &ep(), 0, &ack()),
            Err(Rejected::TooLong(62))
        );
    }
}

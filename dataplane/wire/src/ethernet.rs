//! Ethernet II framing constants.

/// A MAC address, as it appears on the wire.
pub type MacAddr = [u8; 6];

/// Length of an untagged Ethernet II header (destination, source, EtherType).
/// Frames from AF_XDP carry no FCS.
pub const HEADER_LEN: usize = 14;

/// Byte offset of the destination MAC address.
pub const DST_OFFSET: usize = 0;
/// Byte offset of the source MAC address.
pub const SRC_OFFSET: usize = 6;
/// Byte offset of the EtherType.
pub const ETHERTYPE_OFFSET: usize = 12;

/// EtherType of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of ARP (not routed: classified `NotIp`).
pub const ETHERTYPE_ARP: u16 = 0x0806;
/// EtherType of IPv6.
pub const ETHERTYPE_IPV6: u16 = 0x86DD;
/// Tag protocol identifier of an 802.1Q VLAN tag.
pub const ETHERTYPE_VLAN: u16 = 0x8100;
/// Tag protocol identifier of an 802.1ad service tag (QinQ outer tag).
pub const ETHERTYPE_QINQ: u16 = 0x88A8;
/// Pre-standard QinQ tag protocol identifier still emitted by some gear.
pub const ETHERTYPE_QINQ_LEGACY: u16 = 0x9100;

/// Whether `ethertype` introduces a VLAN tag (802.1Q, 802.1ad or the legacy
/// 0x9100).
#[inline]
pub const fn is_vlan_tpid(ethertype: u16) -> bool {
    matches!(
        ethertype,
        ETHERTYPE_VLAN | ETHERTYPE_QINQ | ETHERTYPE_QINQ_LEGACY
    )
}

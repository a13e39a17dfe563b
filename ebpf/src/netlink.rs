//! The project's one rtnetlink client. It answers the two XDP questions the
//! loader asks the kernel: "which XDP programs are attached to interface N,
//! in which mode?" (`RTM_GETLINK`, `IFLA_XDP`) and "remove the program
//! attached in mode M" (`RTM_SETLINK` with `IFLA_XDP_FD = -1`); it
//! delivers link events ([`LinkEvents`], `RTMGRP_LINK`), which the switch
//! polls to notice carrier changes without polling link state fast; and
//! [`RouteSocket`] reads an interface's state (carrier, MTU, MAC) and the
//! neighbour table. The switch reads those here rather than from sysfs and
//! `/proc/net/arp`, which show the namespace that mounted `/sys` or the
//! process's namespace, not the namespace a switch's ports are in when one
//! process runs switches of several namespaces.
//!
//! Message building and parsing are pure functions over byte slices (unit
//! tested without root); the only syscalls are in [`NetlinkSocket`],
//! [`RouteSocket`] and [`LinkEvents`].
//!
//! Netlink sockets belong to the network namespace of the thread that creates
//! them, so every call here acts in the calling thread's namespace.

use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

// Values from <linux/netlink.h>, <linux/rtnetlink.h> and <linux/if_link.h>.
const NLMSG_HDRLEN: usize = 16;
const IFINFOMSG_LEN: usize = 16;
const NDMSG_LEN: usize = 12;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const RTM_NEWLINK: u16 = 16;
const RTM_GETLINK: u16 = 18;
const RTM_SETLINK: u16 = 19;
const RTM_NEWNEIGH: u16 = 28;
const RTM_GETNEIGH: u16 = 30;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
/// `NLM_F_ROOT | NLM_F_MATCH`: every object of the kind.
const NLM_F_DUMP: u16 = 0x300;
/// Set in an `NLMSG_ERROR` message that carries extended-ack attributes.
const NLM_F_ACK_TLVS: u16 = 0x200;
/// Set in an `NLMSG_ERROR` message whose echoed request was cut to its header.
const NLM_F_CAPPED: u16 = 0x100;
const NLMSGERR_ATTR_MSG: u16 = 1;
const SOL_NETLINK: libc::c_int = 270;
const NETLINK_CAP_ACK: libc::c_int = 10;
const NETLINK_EXT_ACK: libc::c_int = 11;
const NLA_F_NESTED: u16 = 1 << 15;
const NLA_TYPE_MASK: u16 = !(NLA_F_NESTED | (1 << 14));

const IFLA_ADDRESS: u16 = 1;
const IFLA_IFNAME: u16 = 3;
const IFLA_MTU: u16 = 4;
const IFLA_CARRIER: u16 = 33;
const IFLA_XDP: u16 = 43;
const NDA_DST: u16 = 1;
const NDA_LLADDR: u16 = 2;
/// `NUD_REACHABLE | NUD_STALE | NUD_DELAY | NUD_PROBE | NUD_NOARP |
/// NUD_PERMANENT`: an entry whose link-layer address is usable (the ones
/// `/proc/net/arp` flags complete).
const NUD_VALID: u16 = 0x02 | 0x04 | 0x08 | 0x10 | 0x40 | 0x80;
const IFLA_XDP_FD: u16 = 1;
const IFLA_XDP_ATTACHED: u16 = 2;
const IFLA_XDP_FLAGS: u16 = 3;
const IFLA_XDP_PROG_ID: u16 = 4;
const IFLA_XDP_DRV_PROG_ID: u16 = 5;
const IFLA_XDP_SKB_PROG_ID: u16 = 6;
const IFLA_XDP_HW_PROG_ID: u16 = 7;

const XDP_ATTACHED_DRV: u8 = 1;
const XDP_ATTACHED_SKB: u8 = 2;
const XDP_ATTACHED_HW: u8 = 3;

/// `XDP_FLAGS_SKB_MODE`: generic XDP.
pub(crate) const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
/// `XDP_FLAGS_DRV_MODE`: native XDP.
pub(crate) const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
/// `XDP_FLAGS_HW_MODE`: offloaded XDP.
pub(crate) const XDP_FLAGS_HW_MODE: u32 = 1 << 3;

/// XDP program ids attached to one interface, per mode, as the kernel
/// reports them. A mode with no program is `None`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct XdpAttachments {
    /// Native (driver, "drv") mode program id.
    pub native: Option<u32>,
    /// Generic ("skb") mode program id.
    pub generic: Option<u32>,
    /// Hardware offload mode program id.
    pub offload: Option<u32>,
}

impl XdpAttachments {
    /// True when no XDP program is attached in any mode.
    pub fn is_empty(&self) -> bool {
        self.native.is_none() && self.generic.is_none() && self.offload.is_none()
    }
}

/// An interface's state as `RTM_NEWLINK` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkState {
    /// Interface index.
    pub ifindex: u32,
    /// Interface name (`IFLA_IFNAME`).
    pub name: String,
    /// Administratively up (`IFF_UP`).
    pub admin_up: bool,
    /// Carrier present (`IFLA_CARRIER`, else `IFF_LOWER_UP`).
    pub carrier: bool,
    /// MTU (`IFLA_MTU`).
    pub mtu: Option<u32>,
    /// Hardware address, for Ethernet-like interfaces (`IFLA_ADDRESS`).
    pub mac: Option<[u8; 6]>,
}

impl LinkState {
    /// Up and with carrier: what `/sys/class/net/X/carrier` reads as `1`
    /// (that file fails to read while the interface is down).
    pub fn is_up(&self) -> bool {
        self.admin_up && self.carrier
    }
}

/// One entry of the kernel's neighbour table (`RTM_NEWNEIGH`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Neighbour {
    /// Interface index the entry belongs to.
    pub ifindex: u32,
    /// The neighbour's IP address (`NDA_DST`).
    pub addr: std::net::IpAddr,
    /// Its link-layer address (`NDA_LLADDR`), if resolved and Ethernet.
    pub mac: Option<[u8; 6]>,
    /// `NUD_*` state bits.
    pub state: u16,
}

impl Neighbour {
    /// Whether the link-layer address is usable (resolved, possibly stale).
    pub fn is_valid(&self) -> bool {
        self.mac.is_some() && self.state & NUD_VALID != 0
    }
}

/// A failed netlink request: the errno and, when the kernel sent one, its
/// extended-ack message (for example "Can't replace active BPF XDP link").
#[derive(Debug)]
pub struct NetlinkError {
    /// Positive errno value.
    pub errno: i32,
    /// The kernel's extended-ack text, if any.
    pub message: Option<String>,
}

impl NetlinkError {
    fn from_io(e: io::Error) -> Self {
        NetlinkError {
            errno: e.raw_os_error().unwrap_or(libc::EIO),
            message: None,
        }
    }
}

impl fmt::Display for NetlinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let err = io::Error::from_raw_os_error(self.errno);
        match &self.message {
            Some(m) => write!(f, "{err}: {m}"),
            None => write!(f, "{err}"),
        }
    }
}

impl std::error::Error for NetlinkError {}

/// Which XDP programs are attached to `ifindex` (calling thread's netns).
pub(crate) fn xdp_attachments(ifindex: u32) -> Result<XdpAttachments, NetlinkError> {
    let sock = NetlinkSocket::open()?;
    let seq = 1;
    sock.send(&getlink_request(ifindex, seq))?;
    match sock.recv_reply(seq)? {
        Reply::Link(msg) => parse_newlink(&msg).ok_or(NetlinkError {
            errno: libc::EPROTO,
            message: Some("malformed RTM_NEWLINK reply".into()),
        }),
        Reply::Ack => Err(NetlinkError {
            errno: libc::EPROTO,
            message: Some("RTM_GETLINK answered with a bare ack".into()),
        }),
    }
}

/// Remove the XDP program attached to `ifindex` in the mode given by
/// `mode_flags` (one of the `XDP_FLAGS_*_MODE` values). Fails with `EBUSY`
/// when that program is held by a bpf_link (the kernel refuses to let
/// netlink remove a link's program).
pub(crate) fn detach_xdp(ifindex: u32, mode_flags: u32) -> Result<(), NetlinkError> {
    set_link_xdp(ifindex, None, mode_flags)
}

/// Attaches the XDP program `prog_fd` to `ifindex` (calling thread's netns)
/// with `flags` (`XDP_FLAGS_*`) by an `RTM_SETLINK` request, or detaches
/// the program of that mode with `None`. Unlike a bpf_link attachment, the
/// program stays attached after the process exits: for tools and tests
/// that want exactly that (the switch itself attaches with a bpf_link).
pub fn set_link_xdp(ifindex: u32, prog_fd: Option<i32>, flags: u32) -> Result<(), NetlinkError> {
    let sock = NetlinkSocket::open()?;
    let seq = 2;
    sock.send(&setlink_xdp_request(
        ifindex,
        prog_fd.unwrap_or(-1),
        flags,
        seq,
    ))?;
    match sock.recv_reply(seq)? {
        Reply::Ack => Ok(()),
        Reply::Link(_) => Err(NetlinkError {
            errno: libc::EPROTO,
            message: Some("RTM_SETLINK answered with a link message".into()),
        }),
    }
}

// ---- message building (pure) ----

fn push_nlmsghdr(buf: &mut Vec<u8>, ty: u16, flags: u16, seq: u32) {
    buf.extend_from_slice(&0u32.to_ne_bytes()); // length, patched by finish()
    buf.extend_from_slice(&ty.to_ne_bytes());
    buf.extend_from_slice(&flags.to_ne_bytes());
    buf.extend_from_slice(&seq.to_ne_bytes());
    buf.extend_from_slice(&0u32.to_ne_bytes()); // port id: kernel fills it in
}

fn push_ifinfomsg(buf: &mut Vec<u8>, ifindex: u32) {
    buf.push(libc::AF_UNSPEC as u8); // ifi_family
    buf.push(0); // pad
    buf.extend_from_slice(&0u16.to_ne_bytes()); // ifi_type
    buf.extend_from_slice(&ifindex.to_ne_bytes()); // ifi_index
    buf.extend_from_slice(&0u32.to_ne_bytes()); // ifi_flags
    buf.extend_from_slice(&0u32.to_ne_bytes()); // ifi_change
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

fn push_attr(buf: &mut Vec<u8>, ty: u16, payload: &[u8]) {
    let len = 4 + payload.len();
    buf.extend_from_slice(&(len as u16).to_ne_bytes());
    buf.extend_from_slice(&ty.to_ne_bytes());
    buf.extend_from_slice(payload);
    buf.resize(buf.len() + align4(len) - len, 0);
}

fn finish(mut buf: Vec<u8>) -> Vec<u8> {
    let len = buf.len() as u32;
    buf[0..4].copy_from_slice(&len.to_ne_bytes());
    buf
}

pub(crate) fn getlink_request(ifindex: u32, seq: u32) -> Vec<u8> {
    let mut buf = Vec::with_capacity(NLMSG_HDRLEN + IFINFOMSG_LEN);
    push_nlmsghdr(&mut buf, RTM_GETLINK, NLM_F_REQUEST, seq);
    push_ifinfomsg(&mut buf, ifindex);
    finish(buf)
}

/// `RTM_GETLINK` for the interface named `name` (index 0 and `IFLA_IFNAME`).
pub(crate) fn getlink_by_name_request(name: &str, seq: u32) -> Vec<u8> {
    let mut buf = Vec::with_capacity(NLMSG_HDRLEN + IFINFOMSG_LEN + 24);
    push_nlmsghdr(&mut buf, RTM_GETLINK, NLM_F_REQUEST, seq);
    push_ifinfomsg(&mut buf, 0);
    let mut cname = name.as_bytes().to_vec();
    cname.push(0);
    push_attr(&mut buf, IFLA_IFNAME, &cname);
    finish(buf)
}

/// `RTM_GETNEIGH` dump of every family's neighbour table.
pub(crate) fn getneigh_dump_request(seq: u32) -> Vec<u8> {
    let mut buf = Vec::with_capacity(NLMSG_HDRLEN + NDMSG_LEN);
    push_nlmsghdr(&mut buf, RTM_GETNEIGH, NLM_F_REQUEST | NLM_F_DUMP, seq);
    buf.resize(NLMSG_HDRLEN + NDMSG_LEN, 0); // ndmsg: AF_UNSPEC, all interfaces
    finish(buf)
}

pub(crate) fn setlink_xdp_request(ifindex: u32, prog_fd: i32, flags: u32, seq: u32) -> Vec<u8> {
    let mut nested = Vec::new();
    push_attr(&mut nested, IFLA_XDP_FD, &prog_fd.to_ne_bytes());
    push_attr(&mut nested, IFLA_XDP_FLAGS, &flags.to_ne_bytes());
    let mut buf = Vec::with_capacity(64);
    push_nlmsghdr(&mut buf, RTM_SETLINK, NLM_F_REQUEST | NLM_F_ACK, seq);
    push_ifinfomsg(&mut buf, ifindex);
    push_attr(&mut buf, IFLA_XDP | NLA_F_NESTED, &nested);
    finish(buf)
}

// ---- parsing (pure, never panics on any input) ----

fn read_u16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn read_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Iterates over the `(type, payload)` attributes in `buf`, stopping at the
/// first malformed one.
fn attrs(mut buf: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        let len = usize::from(read_u16(buf, 0)?);
        let ty = read_u16(buf, 2)? & NLA_TYPE_MASK;
        if len < 4 || len > buf.len() {
            return None;
        }
        let payload = &buf[4..len];
        buf = buf.get(align4(len)..).unwrap_or(&[]);
        Some((ty, payload))
    })
}

/// A complete netlink message: header fields and payload.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Message<'a> {
    pub ty: u16,
    pub flags: u16,
    pub seq: u32,
    pub payload: &'a [u8],
}

/// Splits a datagram into netlink messages, stopping at the first malformed one.
pub(crate) fn messages(mut buf: &[u8]) -> impl Iterator<Item = Message<'_>> {
    std::iter::from_fn(move || {
        let len = read_u32(buf, 0)? as usize;
        if len < NLMSG_HDRLEN || len > buf.len() {
            return None;
        }
        let msg = Message {
            ty: read_u16(buf, 4)?,
            flags: read_u16(buf, 6)?,
            seq: read_u32(buf, 8)?,
            payload: &buf[NLMSG_HDRLEN..len],
        };
        buf = buf.get(align4(len)..).unwrap_or(&[]);
        Some(msg)
    })
}

/// Parses the `IFLA_XDP` attribute of an `RTM_NEWLINK` payload. A message
/// without `IFLA_XDP` means nothing is attached.
pub(crate) fn parse_newlink(payload: &[u8]) -> Option<XdpAttachments> {
    let attr_bytes = payload.get(IFINFOMSG_LEN..)?;
    let mut out = XdpAttachments::default();
    let Some((_, xdp)) = attrs(attr_bytes).find(|(ty, _)| *ty == IFLA_XDP) else {
        return Some(out);
    };
    let mut attached = 0u8;
    let mut single_id = None;
    let nonzero = |p: &[u8]| read_u32(p, 0).filter(|id| *id != 0);
    for (ty, p) in attrs(xdp) {
        match ty {
            IFLA_XDP_ATTACHED => attached = *p.first()?,
            IFLA_XDP_PROG_ID => single_id = nonzero(p),
            IFLA_XDP_DRV_PROG_ID => out.native = nonzero(p),
            IFLA_XDP_SKB_PROG_ID => out.generic = nonzero(p),
            IFLA_XDP_HW_PROG_ID => out.offload = nonzero(p),
            _ => {}
        }
    }
    // Kernels always send the per-mode ids; older ones only PROG_ID plus the
    // mode in ATTACHED. Fill the gap from those when needed.
    if out.is_empty() {
        match attached {
            XDP_ATTACHED_DRV => out.native = single_id,
            XDP_ATTACHED_SKB => out.generic = single_id,
            XDP_ATTACHED_HW => out.offload = single_id,
            _ => {}
        }
    }
    Some(out)
}

fn mac_of(p: &[u8]) -> Option<[u8; 6]> {
    p.try_into().ok()
}

/// Parses an `RTM_NEWLINK` payload into the interface's state.
pub(crate) fn parse_link(payload: &[u8]) -> Option<LinkState> {
    let ifindex = read_u32(payload, 4)?;
    let flags = read_u32(payload, 8)?;
    let mut out = LinkState {
        ifindex,
        name: String::new(),
        admin_up: flags & libc::IFF_UP as u32 != 0,
        carrier: flags & libc::IFF_LOWER_UP as u32 != 0,
        mtu: None,
        mac: None,
    };
    for (ty, p) in attrs(payload.get(IFINFOMSG_LEN..)?) {
        match ty {
            IFLA_IFNAME => {
                let name = p.split(|b| *b == 0).next().unwrap_or(&[]);
                out.name = String::from_utf8_lossy(name).into_owned();
            }
            IFLA_MTU => out.mtu = read_u32(p, 0),
            IFLA_ADDRESS => out.mac = mac_of(p),
            IFLA_CARRIER => out.carrier = p.first().is_some_and(|c| *c != 0),
            _ => {}
        }
    }
    Some(out)
}

/// Parses an `RTM_NEWNEIGH` payload; `None` for families other than IPv4
/// and IPv6 (bridge FDB entries) or a malformed message.
pub(crate) fn parse_neigh(payload: &[u8]) -> Option<Neighbour> {
    let family = i32::from(*payload.first()?);
    let ifindex = read_u32(payload, 4)?;
    let state = read_u16(payload, 8)?;
    let mut addr = None;
    let mut mac = None;
    for (ty, p) in attrs(payload.get(NDMSG_LEN..)?) {
        match ty {
            NDA_DST => {
                addr = match family {
                    libc::AF_INET => <[u8; 4]>::try_from(p).ok().map(std::net::IpAddr::from),
                    libc::AF_INET6 => <[u8; 16]>::try_from(p).ok().map(std::net::IpAddr::from),
                    _ => None,
                }
            }
            NDA_LLADDR => mac = mac_of(p),
            _ => {}
        }
    }
    Some(Neighbour {
        ifindex,
        addr: addr?,
        mac,
        state,
    })
}

/// Parses an `NLMSG_ERROR` payload: `Ok(())` for an ack (error 0), otherwise
/// the errno and the extended-ack message if present.
pub(crate) fn parse_error(flags: u16, payload: &[u8]) -> Result<(), NetlinkError> {
    let Some(code) = read_u32(payload, 0).map(|c| c as i32) else {
        return Err(NetlinkError {
            errno: libc::EPROTO,
            message: Some("truncated NLMSG_ERROR".into()),
        });
    };
    if code == 0 {
        return Ok(());
    }
    let mut message = None;
    if flags & NLM_F_ACK_TLVS != 0 {
        // With NETLINK_CAP_ACK the echoed request is only its header.
        let orig_len = if flags & NLM_F_CAPPED != 0 {
            NLMSG_HDRLEN
        } else {
            read_u32(payload, 4).map_or(NLMSG_HDRLEN, |l| align4(l as usize))
        };
        if let Some(tlvs) = payload.get(4 + orig_len..) {
            message = attrs(tlvs)
                .find(|(ty, _)| *ty == NLMSGERR_ATTR_MSG)
                .map(|(_, p)| {
                    let text = p.split(|b| *b == 0).next().unwrap_or(&[]);
                    String::from_utf8_lossy(text).into_owned()
                });
        }
    }
    Err(NetlinkError {
        errno: code.checked_neg().unwrap_or(libc::EIO),
        message,
    })
}

// ---- the socket (all syscalls live here) ----

enum Reply {
    Ack,
    Link(Vec<u8>),
}

/// A new `NETLINK_ROUTE` socket in the calling thread's namespace;
/// `extra_type` is or-ed into `SOCK_RAW | SOCK_CLOEXEC` (e.g.
/// `SOCK_NONBLOCK`).
fn route_socket(extra_type: libc::c_int) -> Result<OwnedFd, NetlinkError> {
    // SAFETY: plain socket(2) call; the result is checked before use.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC | extra_type,
            libc::NETLINK_ROUTE,
        )
    };
    if fd < 0 {
        return Err(NetlinkError::from_io(io::Error::last_os_error()));
    }
    // SAFETY: `fd` was just returned by socket(2), is valid and owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

struct NetlinkSocket {
    fd: OwnedFd,
}

impl NetlinkSocket {
    fn open() -> Result<Self, NetlinkError> {
        let fd = route_socket(0)?;
        for opt in [NETLINK_EXT_ACK, NETLINK_CAP_ACK] {
            let on: libc::c_int = 1;
            // SAFETY: `fd` is a valid socket; `on` outlives the call and its size is passed.
            // Failure only loses the extended error text, so the result is ignored.
            let _ = unsafe {
                libc::setsockopt(
                    fd.as_raw_fd(),
                    SOL_NETLINK,
                    opt,
                    (&on as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
        }
        Ok(NetlinkSocket { fd })
    }

    fn send(&self, msg: &[u8]) -> Result<(), NetlinkError> {
        // SAFETY: `msg` is a valid readable buffer of `msg.len()` bytes; an unbound
        // netlink socket sends to the kernel by default.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
        if n < 0 {
            return Err(NetlinkError::from_io(io::Error::last_os_error()));
        }
        Ok(())
    }

    /// One datagram into `buf`; its length.
    fn recv_into(&self, buf: &mut [u8]) -> Result<usize, NetlinkError> {
        loop {
            // SAFETY: `buf` is a valid writable buffer of `buf.len()` bytes.
            let n =
                unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n >= 0 {
                return Ok(n as usize);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(NetlinkError::from_io(e));
            }
        }
    }

    /// Receives datagrams into `buf` and hands `on` each message that
    /// answers `seq`, until `on` returns a result.
    fn exchange<R>(
        &self,
        buf: &mut [u8],
        seq: u32,
        mut on: impl FnMut(&Message<'_>) -> Result<Option<R>, NetlinkError>,
    ) -> Result<R, NetlinkError> {
        loop {
            let n = self.recv_into(buf)?;
            for msg in messages(&buf[..n]).filter(|m| m.seq == seq) {
                if let Some(r) = on(&msg)? {
                    return Ok(r);
                }
            }
        }
    }

    fn recv_reply(&self, seq: u32) -> Result<Reply, NetlinkError> {
        let mut buf = vec![0u8; 64 * 1024];
        self.exchange(&mut buf, seq, |msg| match msg.ty {
            NLMSG_ERROR => parse_error(msg.flags, msg.payload).map(|()| Some(Reply::Ack)),
            RTM_NEWLINK => Ok(Some(Reply::Link(msg.payload.to_vec()))),
            _ => Ok(None),
        })
    }
}

/// A netlink route socket for reading interface state and the neighbour
/// table of the network namespace it was opened in (the calling thread's
/// then): it keeps answering for that namespace from any thread, which is
/// how one process serves switches of several namespaces. Requests are
/// synchronous; the receive buffer is reused.
pub struct RouteSocket {
    sock: NetlinkSocket,
    seq: u32,
    buf: Vec<u8>,
}

impl fmt::Debug for RouteSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RouteSocket")
            .field("fd", &self.sock.fd.as_raw_fd())
            .finish()
    }
}

impl RouteSocket {
    /// A socket in the calling thread's network namespace.
    pub fn open() -> Result<Self, NetlinkError> {
        Ok(RouteSocket {
            sock: NetlinkSocket::open()?,
            seq: 100,
            // Large enough for one dump datagram (the kernel sizes them to
            // at most 32 KiB unless the reader asks for more).
            buf: vec![0u8; 64 * 1024],
        })
    }

    fn next_seq(&mut self) -> u32 {
        self.seq = self.seq.wrapping_add(1);
        self.seq
    }

    fn link_request(&mut self, req: &[u8], seq: u32) -> Result<LinkState, NetlinkError> {
        self.sock.send(req)?;
        let malformed = || NetlinkError {
            errno: libc::EPROTO,
            message: Some("malformed RTM_NEWLINK reply".into()),
        };
        self.sock.exchange(&mut self.buf, seq, |msg| match msg.ty {
            NLMSG_ERROR => {
                parse_error(msg.flags, msg.payload)?;
                Err(malformed())
            }
            RTM_NEWLINK => parse_link(msg.payload).map(Some).ok_or_else(malformed),
            _ => Ok(None),
        })
    }

    /// The state of interface `ifindex` (`ENODEV` once it is gone).
    pub fn link(&mut self, ifindex: u32) -> Result<LinkState, NetlinkError> {
        let seq = self.next_seq();
        self.link_request(&getlink_request(ifindex, seq), seq)
    }

    /// The state of the interface named `name` (`ENODEV` if there is none).
    pub fn link_by_name(&mut self, name: &str) -> Result<LinkState, NetlinkError> {
        let seq = self.next_seq();
        self.link_request(&getlink_by_name_request(name, seq), seq)
    }

    /// Every IPv4 and IPv6 neighbour-table entry of the namespace.
    pub fn neighbours(&mut self) -> Result<Vec<Neighbour>, NetlinkError> {
        let seq = self.next_seq();
        self.sock.send(&getneigh_dump_request(seq))?;
        let mut out = Vec::new();
        self.sock.exchange(&mut self.buf, seq, |msg| match msg.ty {
            NLMSG_DONE => Ok(Some(std::mem::take(&mut out))),
            NLMSG_ERROR => {
                parse_error(msg.flags, msg.payload)?;
                Ok(Some(std::mem::take(&mut out)))
            }
            RTM_NEWNEIGH => {
                out.extend(parse_neigh(msg.payload));
                Ok(None)
            }
            _ => Ok(None),
        })
    }
}

/// Link events of the calling thread's network namespace: a non-blocking
/// rtnetlink socket subscribed to `RTMGRP_LINK`, so any link being added,
/// removed or changed (carrier, administrative state, ...) makes its fd
/// readable. It says only *that* something changed, not what: readers
/// re-read the state they care about (the switch reads each port's carrier
/// from sysfs), which also covers events the kernel had to drop.
#[derive(Debug)]
pub struct LinkEvents {
    fd: OwnedFd,
}

impl LinkEvents {
    /// Subscribes to link events in the calling thread's namespace.
    pub fn open() -> Result<Self, NetlinkError> {
        let fd = route_socket(libc::SOCK_NONBLOCK)?;
        // SAFETY: sockaddr_nl is plain data, for which all-zero is valid.
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        addr.nl_groups = libc::RTMGRP_LINK as u32;
        // SAFETY: `fd` is a valid socket; `addr` is a live sockaddr_nl whose
        // size is passed with it.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(NetlinkError::from_io(io::Error::last_os_error()));
        }
        Ok(LinkEvents { fd })
    }

    /// Reads every pending event without blocking; true if there was any,
    /// or if the kernel dropped some because the socket's buffer was full
    /// (`ENOBUFS`): either way link state may have changed.
    pub fn drain(&self) -> bool {
        // The events' contents are not needed (see the type's docs), so
        // one small buffer is reused and anything longer is truncated.
        let mut buf = [0u8; 8192];
        let mut any = false;
        loop {
            // SAFETY: `buf` is a valid writable buffer of `buf.len()` bytes.
            let n = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n > 0 {
                any = true;
                continue;
            }
            if n < 0 {
                match io::Error::last_os_error().raw_os_error() {
                    Some(libc::EINTR) => continue,
                    // Reported once; the events still queued are read on,
                    // so the fd does not stay readable.
                    Some(libc::ENOBUFS) => {
                        any = true;
                        continue;
                    }
                    _ => {}
                }
            }
            return any;
        }
    }
}

impl AsFd for LinkEvents {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for LinkEvents {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn newlink_with_xdp(xdp_attrs: &[(u16, Vec<u8>)]) -> Vec<u8> {
        let mut nested = Vec::new();
        for (ty, p) in xdp_attrs {
            push_attr(&mut nested, *ty, p);
        }
        let mut payload = Vec::new();
        push_ifinfomsg(&mut payload, 7);
        push_attr(&mut payload, 3, b"veth0\0"); // IFLA_IFNAME, ignored
        push_attr(&mut payload, IFLA_XDP | NLA_F_NESTED, &nested);
        payload
    }

    #[test]
    fn getlink_request_layout() {
        let m = getlink_request(5, 9);
        assert_eq!(m.len(), 32);
        assert_eq!(read_u32(&m, 0), Some(32));
        assert_eq!(read_u16(&m, 4), Some(RTM_GETLINK));
        assert_eq!(read_u16(&m, 6), Some(NLM_F_REQUEST));
        assert_eq!(read_u32(&m, 8), Some(9));
        assert_eq!(read_u32(&m, 20), Some(5));
    }

    #[test]
    fn setlink_request_roundtrips_through_parser() {
        let m = setlink_xdp_request(3, -1, XDP_FLAGS_SKB_MODE, 4);
        let msgs: Vec<_> = messages(&m).collect();
        assert_eq!(msgs.len(), 1);
        assert_eq!(msgs[0].ty, RTM_SETLINK);
        assert_eq!(msgs[0].flags, NLM_F_REQUEST | NLM_F_ACK);
        let (ty, nested) = attrs(&msgs[0].payload[IFINFOMSG_LEN..]).next().unwrap();
        assert_eq!(ty, IFLA_XDP);
        let inner: Vec<_> = attrs(nested).collect();
        assert_eq!(inner[0], (IFLA_XDP_FD, &(-1i32).to_ne_bytes()[..]));
        assert_eq!(
            inner[1],
            (IFLA_XDP_FLAGS, &XDP_FLAGS_SKB_MODE.to_ne_bytes()[..])
        );
    }

    #[test]
    fn parses_per_mode_ids() {
        let p = newlink_with_xdp(&[
            (IFLA_XDP_ATTACHED, vec![XDP_ATTACHED_SKB]),
            (IFLA_XDP_SKB_PROG_ID, 42u32.to_ne_bytes().to_vec()),
            (IFLA_XDP_PROG_ID, 42u32.to_ne_bytes().to_vec()),
        ]);
        let a = parse_newlink(&p).unwrap();
        assert_eq!(
            a,
            XdpAttachments {
                native: None,
                generic: Some(42),
                offload: None
            }
        );
    }

    #[test]
    fn falls_back_to_single_prog_id() {
        let p = newlink_with_xdp(&[
            (IFLA_XDP_ATTACHED, vec![XDP_ATTACHED_DRV]),
            (IFLA_XDP_PROG_ID, 9u32.to_ne_bytes().to_vec()),
        ]);
        assert_eq!(parse_newlink(&p).unwrap().native, Some(9));
    }

    #[test]
    fn no_xdp_attribute_means_nothing_attached() {
        let mut payload = Vec::new();
        push_ifinfomsg(&mut payload, 7);
        assert!(parse_newlink(&payload).unwrap().is_empty());
        assert!(parse_newlink(&[0; 3]).is_none());
    }

    #[test]
    fn parses_error_with_ext_ack() {
        let mut payload = (-libc::EBUSY).to_ne_bytes().to_vec();
        let mut orig = Vec::new();
        push_nlmsghdr(&mut orig, RTM_SETLINK, NLM_F_REQUEST, 1);
        payload.extend_from_slice(&orig);
        push_attr(
            &mut payload,
            NLMSGERR_ATTR_MSG,
            b"Can't replace active BPF XDP link\0",
        );
        let e = parse_error(NLM_F_ACK_TLVS | NLM_F_CAPPED, &payload).unwrap_err();
        assert_eq!(e.errno, libc::EBUSY);
        assert_eq!(
            e.message.as_deref(),
            Some("Can't replace active BPF XDP link")
        );
        assert!(parse_error(0, &0i32.to_ne_bytes()).is_ok());
    }

    /// `RTM_SETLINK` setting `IFF_UP` on `ifindex`.
    fn setlink_up_request(ifindex: u32, seq: u32) -> Vec<u8> {
        let mut buf = Vec::new();
        push_nlmsghdr(&mut buf, RTM_SETLINK, NLM_F_REQUEST | NLM_F_ACK, seq);
        buf.push(libc::AF_UNSPEC as u8); // ifi_family
        buf.push(0); // pad
        buf.extend_from_slice(&0u16.to_ne_bytes()); // ifi_type
        buf.extend_from_slice(&ifindex.to_ne_bytes());
        let up = libc::IFF_UP as u32;
        buf.extend_from_slice(&up.to_ne_bytes()); // ifi_flags
        buf.extend_from_slice(&up.to_ne_bytes()); // ifi_change
        finish(buf)
    }

    /// Runs `f` on a thread in a network namespace of its own (no other
    /// test's links; nothing changes unless `f` changes it); skips without
    /// root.
    fn in_private_netns(f: impl FnOnce() + Send + 'static) {
        // SAFETY: geteuid(2) has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipping: needs root (a private network namespace)");
            return;
        }
        std::thread::spawn(|| {
            // SAFETY: unshare(CLONE_NEWNET) only moves the calling thread
            // into a new namespace; nothing of the process depends on it.
            let rc = unsafe { libc::unshare(libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "unshare: {}", io::Error::last_os_error());
            f();
        })
        .join()
        .expect("test thread");
    }

    #[test]
    fn link_events_report_a_link_change() {
        in_private_netns(|| {
            let events = LinkEvents::open().expect("subscribe to link events");
            assert!(!events.drain(), "an event in a quiet namespace");
            let sock = NetlinkSocket::open().expect("netlink socket");
            // lo is ifindex 1 in every new namespace, and down.
            sock.send(&setlink_up_request(1, 7)).expect("send");
            let reply = sock.recv_reply(7).expect("lo up");
            assert!(matches!(reply, Reply::Ack));
            // The kernel queues the notification before it acks.
            assert!(events.drain(), "bringing lo up was not reported");
        });
    }

    /// Bytes of a hex fixture: netlink messages captured from a 6.18 x86_64
    /// kernel (native byte order, as the kernel sends them), by sending the
    /// requests the builders here make from Python in a namespace with
    /// `v0`/`v1` (02:00:00:00:00:01/02, up, 10.9.0.1/24, a permanent
    /// neighbour 10.9.0.2) and `v2`/`v3` (v2 up, v3 down: no carrier).
    fn fixture(hex: &str) -> Vec<u8> {
        let hex = hex.trim();
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex fixture"))
            .collect()
    }

    fn only_link(datagram: &[u8]) -> LinkState {
        let msgs: Vec<_> = messages(datagram).collect();
        assert_eq!(msgs.len(), 1);
        assert_eq!(msgs[0].ty, RTM_NEWLINK);
        parse_link(msgs[0].payload).expect("parses")
    }

    #[test]
    fn parses_a_real_link_that_is_up() {
        let d = fixture(include_str!("../fixtures/netlink/newlink-v0-up.hex"));
        let l = only_link(&d);
        assert_eq!(l.name, "v0");
        assert_eq!(l.ifindex, 3);
        assert_eq!(l.mtu, Some(1500));
        assert_eq!(l.mac, Some([2, 0, 0, 0, 0, 1]));
        assert!(l.admin_up && l.carrier && l.is_up());
        // The same link parsed by the XDP query: nothing attached.
        assert!(parse_newlink(messages(&d).next().unwrap().payload)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn a_real_link_without_carrier_or_down_is_not_up() {
        let d = fixture(include_str!(
            "../fixtures/netlink/newlink-v2-no-carrier.hex"
        ));
        let l = only_link(&d);
        assert_eq!(l.name, "v2");
        assert!(l.admin_up && !l.carrier && !l.is_up());
        assert_eq!(l.mac, Some([0x02, 0xa2, 0xc0, 0x1b, 0xba, 0x33]));
        let d = fixture(include_str!("../fixtures/netlink/newlink-v0-down.hex"));
        let l = only_link(&d);
        assert_eq!(l.name, "v0");
        assert!(!l.admin_up && !l.is_up());
    }

    #[test]
    fn parses_a_real_enodev_reply() {
        let d = fixture(include_str!("../fixtures/netlink/getlink-enodev.hex"));
        let msg = messages(&d).next().unwrap();
        assert_eq!((msg.ty, msg.seq), (NLMSG_ERROR, 9));
        assert_eq!(
            parse_error(msg.flags, msg.payload).unwrap_err().errno,
            libc::ENODEV
        );
    }

    #[test]
    fn parses_a_real_neighbour_dump() {
        let d = fixture(include_str!("../fixtures/netlink/neigh-dump.hex"));
        let msgs: Vec<_> = messages(&d).collect();
        assert_eq!(msgs.last().map(|m| m.ty), Some(NLMSG_DONE));
        let neigh: Vec<Neighbour> = msgs
            .iter()
            .filter(|m| m.ty == RTM_NEWNEIGH)
            .filter_map(|m| parse_neigh(m.payload))
            .collect();
        // One IPv4 entry and six IPv6 multicast entries of both veths.
        assert_eq!(neigh.len(), 7);
        let v4: Vec<_> = neigh.iter().filter(|n| n.addr.is_ipv4()).collect();
        assert_eq!(v4.len(), 1);
        assert_eq!(v4[0].addr, std::net::IpAddr::from([10, 9, 0, 2]));
        assert_eq!(v4[0].ifindex, 3);
        assert_eq!(v4[0].mac, Some([2, 0, 0, 0, 0, 2]));
        assert_eq!(v4[0].state, 0x80); // NUD_PERMANENT
        assert!(v4[0].is_valid());
        // Multicast entries are NUD_NOARP with a mapped MAC.
        let mc = neigh.iter().find(|n| n.addr.is_ipv6()).unwrap();
        assert_eq!(mc.mac.map(|m| m[..2].to_vec()), Some(vec![0x33, 0x33]));
        assert!(mc.is_valid());
        // An incomplete entry has no usable address.
        let incomplete = Neighbour {
            state: 0x01,
            mac: None,
            ..v4[0].clone()
        };
        assert!(!incomplete.is_valid());
    }

    #[test]
    fn link_and_neighbour_requests_layout() {
        let m = getlink_by_name_request("p0", 3);
        let msg = messages(&m).next().unwrap();
        assert_eq!(
            (msg.ty, msg.flags, msg.seq),
            (RTM_GETLINK, NLM_F_REQUEST, 3)
        );
        assert_eq!(read_u32(msg.payload, 4), Some(0));
        let (ty, name) = attrs(&msg.payload[IFINFOMSG_LEN..]).next().unwrap();
        assert_eq!((ty, name), (IFLA_IFNAME, &b"p0\0"[..]));
        let m = getneigh_dump_request(4);
        assert_eq!(m.len(), NLMSG_HDRLEN + NDMSG_LEN);
        let msg = messages(&m).next().unwrap();
        assert_eq!(
            (msg.ty, msg.flags),
            (RTM_GETNEIGH, NLM_F_REQUEST | NLM_F_DUMP)
        );
    }

    #[test]
    fn route_socket_reads_its_own_namespace() {
        in_private_netns(|| {
            let mut sock = RouteSocket::open().expect("route socket");
            // A fresh namespace has exactly lo, index 1, down.
            let lo = sock.link_by_name("lo").expect("lo");
            assert_eq!((lo.ifindex, lo.name.as_str()), (1, "lo"));
            assert!(!lo.is_up());
            assert_eq!(sock.link(1).expect("lo by index").name, "lo");
            let e = sock.link_by_name("eth0").unwrap_err();
            assert_eq!(e.errno, libc::ENODEV);
            assert!(sock.neighbours().expect("dump").is_empty());
        });
    }

    #[test]
    fn parsers_survive_garbage() {
        for len in 0..64u8 {
            let junk: Vec<u8> = (0..len)
                .map(|i| i.wrapping_mul(37).wrapping_add(len))
                .collect();
            let _ = messages(&junk).count();
            let _ = attrs(&junk).count();
            let _ = parse_newlink(&junk);
            let _ = parse_error(0xffff, &junk);
            let _ = parse_link(&junk);
            let _ = parse_neigh(&junk);
        }
    }
}

//! The project's raw system calls, in one place: `setns(2)` into a network
//! namespace, `bpf(2)` for callers that build their own attributes (the
//! test rig's hand-assembled XDP programs), and the two bpf(2) commands aya
//! 0.14 does not offer: getting a file descriptor for a link by id and
//! detaching a link explicitly.
//!
//! Why detach explicitly: closing the link fd detaches only when it was the
//! last reference, and any process forked at that moment (every
//! `std::process::Command`) holds a copy of the fd table until it execs.
//! `BPF_LINK_DETACH` removes the program from the interface at once,
//! whatever other references to the link exist.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Moves the calling thread into the network namespace `ns` (an open
/// `/run/netns/NAME` or `/proc/PID/ns/net`). Only this thread moves:
/// namespaces are per thread.
pub fn enter_netns(ns: &File) -> io::Result<()> {
    // SAFETY: setns(2) on a namespace fd that stays open across the call;
    // it changes only the calling thread's network namespace.
    if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `bpf(cmd, attr, attr.len())`: the return value, or the error.
///
/// # Safety
///
/// `attr` must be laid out as the `union bpf_attr` member for `cmd`, with
/// unused bytes zero, and every pointer it holds must be valid for what the
/// kernel does with it during the call (read instructions, write a log).
pub unsafe fn bpf(cmd: libc::c_long, attr: &mut [u8]) -> io::Result<libc::c_long> {
    // SAFETY: forwarded from the caller's contract; the size is the
    // buffer's own length.
    unsafe { sys_bpf(cmd, attr.as_mut_ptr().cast(), attr.len()) }
}

// enum bpf_cmd in <linux/bpf.h>; a unit test compares them with aya-obj's bindings.
pub(crate) const BPF_LINK_GET_FD_BY_ID: libc::c_long = 30;
pub(crate) const BPF_LINK_DETACH: libc::c_long = 34;

/// `union bpf_attr` as used by `BPF_LINK_GET_FD_BY_ID`.
#[repr(C)]
struct GetFdByIdAttr {
    link_id: u32,
    next_id: u32,
    open_flags: u32,
}

/// `union bpf_attr` as used by `BPF_LINK_DETACH`.
#[repr(C)]
struct LinkDetachAttr {
    link_fd: u32,
}

/// # Safety
///
/// `attr` must point to a valid, initialised attribute struct of `size`
/// bytes laid out as the kernel expects for `cmd`.
unsafe fn sys_bpf(
    cmd: libc::c_long,
    attr: *mut libc::c_void,
    size: usize,
) -> io::Result<libc::c_long> {
    // SAFETY: forwarded from the caller's contract.
    let rc = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr, size as libc::c_uint) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// Detaches the bpf_link with kernel id `link_id` from whatever it is
/// attached to. `ENOENT` means the link no longer exists (already gone).
pub(crate) fn link_detach_by_id(link_id: u32) -> io::Result<()> {
    let mut get = GetFdByIdAttr {
        link_id,
        next_id: 0,
        open_flags: 0,
    };
    // SAFETY: `get` is a valid GetFdByIdAttr of the size passed.
    let fd = unsafe {
        sys_bpf(
            BPF_LINK_GET_FD_BY_ID,
            (&mut get as *mut GetFdByIdAttr).cast(),
            std::mem::size_of::<GetFdByIdAttr>(),
        )
    }?;
    // SAFETY: on success BPF_LINK_GET_FD_BY_ID returns a new fd that we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) };
    let mut detach = LinkDetachAttr {
        link_fd: fd.as_raw_fd() as u32,
    };
    // SAFETY: `detach` is a valid LinkDetachAttr of the size passed, and
    // `fd` stays open for the duration of the call.
    unsafe {
        sys_bpf(
            BPF_LINK_DETACH,
            (&mut detach as *mut LinkDetachAttr).cast(),
            std::mem::size_of::<LinkDetachAttr>(),
        )
    }?;
    Ok(())
}

/// `SIOCETHTOOL` (<linux/sockios.h>) and `ETHTOOL_GCHANNELS`
/// (<linux/ethtool.h>).
const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GCHANNELS: u32 = 0x3c;

/// `struct ethtool_channels`.
#[repr(C)]
#[derive(Default)]
struct EthtoolChannels {
    cmd: u32,
    max_rx: u32,
    max_tx: u32,
    max_other: u32,
    max_combined: u32,
    rx_count: u32,
    tx_count: u32,
    other_count: u32,
    combined_count: u32,
}

/// `struct ifreq` with its `ifr_data` member (40 bytes on 64-bit Linux).
#[repr(C)]
struct IfreqData {
    name: [u8; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 16],
}

/// The receive queues of interface `ifname` that carry traffic, as
/// `ethtool -l` counts them: combined channels plus RX-only ones, queue
/// ids `0..n`. `Ok(None)`: the driver does not report channels (one queue
/// is then all there is to bind). Looked up in the calling thread's
/// network namespace.
pub fn rx_queue_count(ifname: &str) -> io::Result<Option<u32>> {
    let name = ifname.as_bytes();
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{ifname:?} is not an interface name"),
        ));
    }
    let mut channels = EthtoolChannels {
        cmd: ETHTOOL_GCHANNELS,
        ..Default::default()
    };
    let mut req = IfreqData {
        name: [0; libc::IFNAMSIZ],
        data: (&mut channels as *mut EthtoolChannels).cast(),
        _pad: [0; 16],
    };
    req.name[..name.len()].copy_from_slice(name);
    // SAFETY: a plain socket(2) call; the fd is owned right after.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: `req` is a valid `struct ifreq` whose data pointer points to
    // a `struct ethtool_channels` that outlives the call; the kernel writes
    // only that struct.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), SIOCETHTOOL, &mut req) };
    if rc != 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::EOPNOTSUPP) => Ok(None),
            _ => Err(e),
        };
    }
    Ok(Some((channels.rx_count + channels.combined_count).max(1)))
}

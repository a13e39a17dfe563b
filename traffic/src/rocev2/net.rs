//! The system calls of the RoCEv2 endpoints that std does not wrap: a raw
//! IPv4 socket for datagrams with our own headers, the TOS byte (ECN) of a
//! received UDP datagram, a signalfd for SIGINT/SIGTERM, and one wait on
//! several descriptors with a nanosecond deadline.

use std::io;
use std::mem::{size_of, MaybeUninit};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Socket buffers asked for (the kernel caps unprivileged requests).
const SOCKET_BUFFER: libc::c_int = 16 << 20;

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn setsockopt_int(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    v: libc::c_int,
) -> io::Result<()> {
    // SAFETY: `fd` is a socket owned by the caller for the call; the value
    // pointer and length describe a live c_int the kernel only reads.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&v as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    check(rc).map(drop)
}

/// Large buffers: SO_*BUFFORCE as root (beyond net.core.*mem_max), else
/// the capped request.
fn big_buffers(fd: RawFd) {
    for (force, plain) in [
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
    ] {
        if setsockopt_int(fd, libc::SOL_SOCKET, force, SOCKET_BUFFER).is_err() {
            let _ = setsockopt_int(fd, libc::SOL_SOCKET, plain, SOCKET_BUFFER);
        }
    }
}

fn sockaddr_in(a: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*a.ip()).to_be(),
        },
        sin_zero: [0; 8],
    }
}

/// A raw IPv4 socket that sends whole datagrams (IPPROTO_RAW implies
/// IP_HDRINCL); needs CAP_NET_RAW.
#[derive(Debug)]
pub struct RawSender {
    fd: OwnedFd,
}

impl RawSender {
    pub fn new() -> io::Result<RawSender> {
        // SAFETY: plain socket(2); the result is checked before use.
        let fd = check(unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_RAW) })?;
        // SAFETY: `fd` was just returned by socket(2) and is owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        big_buffers(fd.as_raw_fd());
        Ok(RawSender { fd })
    }

    /// Sends one datagram (IPv4 header included) to `dst`.
    pub fn send(&self, datagram: &[u8], dst: Ipv4Addr) -> io::Result<()> {
        let sa = sockaddr_in(SocketAddrV4::new(dst, 0));
        // SAFETY: the buffer and the sockaddr are live for the call and
        // their lengths are theirs; the fd is owned by `self`.
        let rc = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                datagram.as_ptr().cast(),
                datagram.len(),
                0,
                (&sa as *const libc::sockaddr_in).cast(),
                size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }
}

/// A non-blocking UDP socket on `addr` that reports each datagram's TOS
/// and sends with DF set (the ICRC assumes the kernel's DF header).
pub fn udp_socket(addr: SocketAddrV4) -> io::Result<UdpSocket> {
    let s = UdpSocket::bind(addr)?;
    s.set_nonblocking(true)?;
    let fd = s.as_raw_fd();
    setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_RECVTOS, 1)?;
    setsockopt_int(
        fd,
        libc::IPPROTO_IP,
        libc::IP_MTU_DISCOVER,
        libc::IP_PMTUDISC_DO,
    )?;
    big_buffers(fd);
    Ok(s)
}

/// One received datagram: its length, sender and TOS byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    pub len: usize,
    pub from: SocketAddrV4,
    pub tos: u8,
}

/// Receives one datagram; `Ok(None)` when none is waiting. A datagram
/// larger than `buf` is reported with its truncated length, and the caller's
/// parser rejects it.
pub fn recv_tos(sock: &UdpSocket, buf: &mut [u8]) -> io::Result<Option<Received>> {
    let mut from = MaybeUninit::<libc::sockaddr_in>::zeroed();
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // Room for one IP_TOS control message (aligned as cmsghdr).
    let mut control = [0u64; 8];
    // SAFETY: a zeroed msghdr is a valid empty one; the fields are set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = from.as_mut_ptr().cast();
    msg.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = size_of::<[u64; 8]>() as _;
    // SAFETY: every pointer in `msg` refers to a live local buffer whose
    // length is given; the fd is borrowed from `sock`.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::WouldBlock => Ok(None),
            _ => Err(e),
        };
    }
    let mut tos = 0u8;
    // SAFETY: the CMSG macros walk the control buffer the kernel filled,
    // within msg_controllen; CMSG_DATA of an IP_TOS message holds one byte.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::IPPROTO_IP && (*c).cmsg_type == libc::IP_TOS {
                tos = *libc::CMSG_DATA(c);
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    // SAFETY: recvmsg succeeded on an AF_INET socket, so it wrote a sockaddr_in.
    let from = unsafe { from.assume_init() };
    let from = SocketAddrV4::new(
        Ipv4Addr::from(u32::from_be(from.sin_addr.s_addr)),
        u16::from_be(from.sin_port),
    );
    Ok(Some(Received {
        len: n as usize,
        from,
        tos,
    }))
}

/// SIGINT and SIGTERM as a readable descriptor; both are blocked for the
/// calling thread (call before starting any other thread).
#[derive(Debug)]
pub struct Signals {
    fd: OwnedFd,
}

impl Signals {
    pub fn new() -> io::Result<Signals> {
        // SAFETY: sigset operations on a local, initialised set; the
        // resulting mask applies to this thread only.
        let fd = unsafe {
            let mut set = MaybeUninit::<libc::sigset_t>::zeroed();
            libc::sigemptyset(set.as_mut_ptr());
            libc::sigaddset(set.as_mut_ptr(), libc::SIGINT);
            libc::sigaddset(set.as_mut_ptr(), libc::SIGTERM);
            let set = set.assume_init();
            let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            if rc != 0 {
                return Err(io::Error::from_raw_os_error(rc));
            }
            check(libc::signalfd(
                -1,
                &set,
                libc::SFD_NONBLOCK | libc::SFD_CLOEXEC,
            ))?
        };
        // SAFETY: signalfd returned a new descriptor owned by nothing else.
        Ok(Signals {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// A pending signal's number, if any.
    pub fn take(&self) -> Option<i32> {
        let mut info = MaybeUninit::<libc::signalfd_siginfo>::zeroed();
        let want = size_of::<libc::signalfd_siginfo>();
        // SAFETY: reads at most `want` bytes into the local siginfo.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), info.as_mut_ptr().cast(), want) };
        if n as usize != want {
            return None;
        }
        // SAFETY: the kernel wrote a whole signalfd_siginfo.
        Some(unsafe { info.assume_init() }.ssi_signo as i32)
    }
}

/// Waits until one of `fds` is readable or `timeout_ns` passed (`None`:
/// no deadline). EINTR counts as a wake-up.
pub fn wait_readable(fds: &[RawFd], timeout_ns: Option<u64>) -> io::Result<()> {
    let mut polls: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ts = timeout_ns.map(|ns| libc::timespec {
        tv_sec: (ns / 1_000_000_000).min(i64::MAX as u64) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `polls` is a live array of `len` pollfds; `tsp` is null or
    // points to a live timespec; a null sigmask keeps the current one.
    let rc = unsafe {
        libc::ppoll(
            polls.as_mut_ptr(),
            polls.len() as libc::nfds_t,
            tsp,
            std::ptr::null(),
        )
    };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(())
}

/// Timer slack 1 ns: the loop's deadlines are packet times, and the default
/// 50 us slack would delay every wake-up by up to that much.
pub fn precise_timers() {
    // SAFETY: PR_SET_TIMERSLACK takes an unsigned long and touches no memory.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
    }
}

/// The source address the routing table picks for `dst` (a connected UDP
/// socket's local address; nothing is sent).
pub fn source_for(dst: Ipv4Addr) -> io::Result<Ipv4Addr> {
    let s = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0))?;
    s.connect(SocketAddrV4::new(dst, 9))?;
    match s.local_addr()? {
        std::net::SocketAddr::V4(a) => Ok(*a.ip()),
        std::net::SocketAddr::V6(a) => Err(io::Error::other(format!("IPv6 source {a}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udp_tos_is_reported() {
        let rx = udp_socket(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        setsockopt_int(tx.as_raw_fd(), libc::IPPROTO_IP, libc::IP_TOS, 0x03).unwrap();
        tx.send_to(b"abc", rx.local_addr().unwrap()).unwrap();
        let mut buf = [0u8; 16];
        wait_readable(&[rx.as_raw_fd()], Some(10_000_000_000)).unwrap();
        let r = recv_tos(&rx, &mut buf).unwrap().unwrap();
        assert_eq!((r.len, r.tos), (3, 0x03));
        assert_eq!(std::net::SocketAddr::V4(r.from), tx.local_addr().unwrap());
        assert_eq!(recv_tos(&rx, &mut buf).unwrap(), None);
        assert_eq!(
            source_for(Ipv4Addr::LOCALHOST).unwrap(),
            Ipv4Addr::LOCALHOST
        );
    }
}

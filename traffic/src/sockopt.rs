//! Socket options and process limits that std and tokio do not expose:
//! TCP_CONGESTION, TCP_INFO's `tcpi_min_rtt`, RLIMIT_NOFILE.

use std::io;
use std::os::fd::{AsFd, AsRawFd};

/// The congestion-control algorithms the kernel has loaded.
pub const AVAILABLE_CC_PATH: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";

/// Offset of `tcpi_min_rtt` in `struct tcp_info` (linux/tcp.h; the field
/// exists since Linux 4.6). The libc crate's glibc `tcp_info` ends before
/// it, so it is read from the raw bytes.
const TCPI_MIN_RTT_OFFSET: usize = 148;

/// The names listed in [`AVAILABLE_CC_PATH`].
pub fn available_congestion_controls() -> io::Result<Vec<String>> {
    let text = std::fs::read_to_string(AVAILABLE_CC_PATH)?;
    Ok(text.split_whitespace().map(str::to_string).collect())
}

/// Sets the socket's congestion control (`setsockopt(TCP_CONGESTION)`).
pub fn set_congestion(sock: &impl AsFd, name: &str) -> io::Result<()> {
    let fd = sock.as_fd().as_raw_fd();
    let len = libc::socklen_t::try_from(name.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "name too long"))?;
    // SAFETY: `fd` is borrowed from a live socket for the duration of the
    // call; the pointer and length describe `name`'s bytes, which the kernel
    // only reads (it takes the length, no terminating NUL is needed).
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr().cast(),
            len,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The socket's congestion control (`getsockopt(TCP_CONGESTION)`).
pub fn congestion(sock: &impl AsFd) -> io::Result<String> {
    let fd = sock.as_fd().as_raw_fd();
    let mut buf = [0u8; 64];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: `fd` is borrowed from a live socket; `buf` is writable for
    // `len` bytes and `len` is a valid in/out length the kernel updates.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let bytes = &buf[..(len as usize).min(buf.len())];
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    Ok(String::from_utf8_lossy(&bytes[..end]).into_owned())
}

/// The kernel's minimum RTT of the connection (`tcpi_min_rtt`), in
/// microseconds; `None` before any RTT sample or on kernels without it.
pub fn tcp_min_rtt_us(sock: &impl AsFd) -> io::Result<Option<u32>> {
    let fd = sock.as_fd().as_raw_fd();
    // Larger than any tcp_info so far; the kernel copies at most this much
    // and reports how much it wrote.
    let mut buf = [0u8; 512];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: `fd` is borrowed from a live socket; `buf` is writable for
    // `len` bytes and `len` is a valid in/out length the kernel updates.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let end = TCPI_MIN_RTT_OFFSET + 4;
    if (len as usize) < end {
        return Ok(None);
    }
    let mut field = [0u8; 4];
    field.copy_from_slice(&buf[TCPI_MIN_RTT_OFFSET..end]);
    // The kernel initialises its windowed minimum to ~0 (no sample yet).
    Ok(match u32::from_ne_bytes(field) {
        u32::MAX => None,
        us => Some(us),
    })
}

/// Raises the soft RLIMIT_NOFILE to the hard limit; returns the soft limit
/// in effect afterwards (the old one if raising failed).
pub fn raise_nofile_limit() -> io::Result<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid, writable rlimit for the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut target = lim.rlim_max;
    if target == libc::RLIM_INFINITY {
        // An unlimited hard limit still cannot exceed fs.nr_open.
        target = std::fs::read_to_string("/proc/sys/fs/nr_open")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(1 << 20);
    }
    if lim.rlim_cur != libc::RLIM_INFINITY && lim.rlim_cur < target {
        let new = libc::rlimit {
            rlim_cur: target,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: `new` is a valid rlimit that outlives the call.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &new) } == 0 {
            return Ok(target);
        }
    }
    Ok(lim.rlim_cur)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn congestion_control_round_trip() {
        // reno is built into every kernel.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        set_congestion(&listener, "reno").unwrap();
        assert_eq!(congestion(&listener).unwrap(), "reno");
        let e = set_congestion(&listener, "no-such-cc").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT), "{e}");
        let names = available_congestion_controls().unwrap();
        assert!(names.iter().any(|n| n == "reno"), "{names:?}");
    }

    #[test]
    fn min_rtt_after_handshake() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (_server, _) = listener.accept().unwrap();
        // The SYN-ACK gives the client its first RTT sample.
        let rtt = tcp_min_rtt_us(&client).unwrap();
        assert!(rtt.is_some(), "{rtt:?}");
        assert!(rtt.unwrap() < 10_000_000);
    }

    #[test]
    fn nofile_limit_can_be_raised() {
        let soft = raise_nofile_limit().unwrap();
        assert!(soft >= 64);
    }
}

//! Root tests: real AF_XDP sockets (the `xdpilone` crate, pure Rust) bound
//! in copy mode to veth ports, fed by the steering program. They check what
//! the switch will rely on: a registered socket receives the port's IP
//! frames, a frame can be sent back out of the same port, and one UMEM
//! shared by the sockets of two ports forwards a frame from port A's RX ring
//! to port B's TX ring without copying it in user space.

mod common;

use std::ffi::CStr;
use std::num::NonZeroU32;
use std::os::fd::BorrowedFd;
use std::ptr::NonNull;
use std::time::Duration;

use common::{Lab, FAR_IP, H1_IP};
use lcmp_ebpf::{xsk_bind_mode, AttachedMode, XdpMode, XdpSteering, XskBindMode};
use xdpilone::xdp::XdpDesc;
use xdpilone::{IfInfo, Socket, SocketConfig, Umem, UmemConfig};

const FRAME_SIZE: u32 = 4096;
const FRAMES: u32 = 256;
/// Frames 0..FILL_FRAMES go to the fill ring; the rest stay free.
const FILL_FRAMES: u32 = 128;
const RING: u32 = 256;

/// Page-aligned anonymous memory for the UMEM, unmapped on drop. Declare it
/// before the UMEM and sockets so that they are dropped first.
struct Area {
    ptr: NonNull<u8>,
    len: usize,
}

impl Area {
    fn new(len: usize) -> Area {
        // SAFETY: anonymous private mapping with no address hint; checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(
            p,
            libc::MAP_FAILED,
            "mmap: {}",
            std::io::Error::last_os_error()
        );
        Area {
            ptr: NonNull::new(p.cast()).unwrap(),
            len,
        }
    }

    fn as_slice_ptr(&self) -> NonNull<[u8]> {
        NonNull::slice_from_raw_parts(self.ptr, self.len)
    }

    /// The bytes of a descriptor.
    ///
    /// # Safety
    ///
    /// The kernel must have handed the buffer to user space (read from the
    /// RX ring, not yet put on the fill or TX ring), and no other reference
    /// to it may exist.
    // UMEM memory is shared with the kernel: exclusive access follows
    // descriptor ownership (the contract above), not a Rust borrow.
    #[allow(clippy::mut_from_ref)]
    unsafe fn frame(&self, desc: &XdpDesc) -> &mut [u8] {
        let start = usize::try_from(desc.addr).unwrap();
        let len = desc.len as usize;
        assert!(start + len <= self.len);
        // SAFETY: in bounds (checked above); exclusivity per the contract.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().add(start), len) }
    }
}

impl Drop for Area {
    fn drop(&mut self) {
        // SAFETY: the mapping was created by `Area::new` with this length.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

fn umem_config() -> UmemConfig {
    UmemConfig {
        fill_size: RING,
        complete_size: RING,
        frame_size: FRAME_SIZE,
        headroom: 0,
        flags: 0,
    }
}

fn ifinfo(name: &CStr) -> IfInfo {
    let mut info = IfInfo::invalid();
    info.from_name(name).expect("interface");
    info.set_queue(0);
    info
}

/// Waits (poll(2), POLLIN) for the socket to have RX descriptors.
fn poll_in(fd: i32, timeout: Duration) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: `p` is a valid pollfd array of length 1.
    let n = unsafe { libc::poll(&mut p, 1, timeout.as_millis() as libc::c_int) };
    n > 0 && p.revents & libc::POLLIN != 0
}

/// True when the UDP checksum of an IPv4/UDP frame verifies (or is 0: none).
fn udp_checksum_ok(frame: &[u8]) -> bool {
    let ihl = usize::from(frame[14] & 0x0f) * 4;
    let udp = &frame[14 + ihl..];
    let udp_len = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
    if u16::from_be_bytes([udp[6], udp[7]]) == 0 {
        return true;
    }
    let mut sum: u32 = 0;
    let mut add = |b: &[u8]| {
        for c in b.chunks(2) {
            sum += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
        }
    };
    add(&frame[26..34]); // source and destination address
    add(&[0, 17]);
    add(&(udp_len as u16).to_be_bytes());
    add(&udp[..udp_len]);
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum == 0xffff
}

fn udp_payload(frame: &[u8]) -> &[u8] {
    assert_eq!(&frame[12..14], &[0x08, 0x00], "not IPv4");
    let ihl = usize::from(frame[14] & 0x0f) * 4;
    assert_eq!(frame[14 + 9], 17, "not UDP");
    &frame[14 + ihl + 8..]
}

/// Turns a UDP/IPv4 frame back to its sender: swaps MACs, IPs and ports.
/// Both checksums stay valid (they are sums over the same 16-bit words).
fn reflect(frame: &mut [u8]) {
    for i in 0..6 {
        frame.swap(i, 6 + i);
    }
    for i in 0..4 {
        frame.swap(26 + i, 30 + i);
    }
    for i in 0..2 {
        frame.swap(34 + i, 36 + i);
    }
}

fn copy_mode_rx_and_tx(mode: XdpMode, expect: AttachedMode) {
    let lab = Lab::new();
    let host = lab.h1_socket(40000);

    lab.sw.run(|| {
        let area = Area::new((FRAMES * FRAME_SIZE) as usize);
        let mut steering = XdpSteering::attach("sw0", mode).expect("attach");
        assert_eq!(steering.mode(), expect);

        // SAFETY: `area` is page aligned, FRAMES * FRAME_SIZE long, and
        // outlives the UMEM (dropped at the end of this closure).
        let umem = unsafe { Umem::new(umem_config(), area.as_slice_ptr()) }.expect("UMEM");
        let sock = Socket::with_shared(&ifinfo(c"sw0"), &umem).expect("socket");
        let mut device = umem.fq_cq(&sock).expect("fill/completion rings");
        let user = umem
            .rx_tx(
                &sock,
                &SocketConfig {
                    rx_size: NonZeroU32::new(RING),
                    tx_size: NonZeroU32::new(RING),
                    bind_flags: SocketConfig::XDP_BIND_COPY | SocketConfig::XDP_BIND_NEED_WAKEUP,
                },
            )
            .expect("rx/tx rings");
        let mut rx = user.map_rx().expect("map rx");
        let mut tx = user.map_tx().expect("map tx");
        umem.bind(&user).expect("bind in copy mode");
        // SAFETY: the socket stays open while `user` lives.
        let fd = unsafe { BorrowedFd::borrow_raw(user.as_raw_fd()) };
        assert_eq!(xsk_bind_mode(fd).unwrap(), XskBindMode::Copy);

        let mut fill = device.fill(FILL_FRAMES);
        let filled = fill.insert((0..FILL_FRAMES).map(|i| u64::from(i * FRAME_SIZE)));
        fill.commit();
        drop(fill);
        assert_eq!(filled, FILL_FRAMES);
        steering
            .register_socket(0, user.as_raw_fd())
            .expect("register");

        host.send_to(b"hello lcmp", (FAR_IP, 40001)).unwrap();
        assert!(
            poll_in(user.as_raw_fd(), Duration::from_secs(3)),
            "no frame reached the socket; counters {:?}, socket stats {:?}",
            steering.counters(),
            user.statistics_v2()
                .map(|s| (s.rx_dropped, s.rx_fill_ring_empty_descs)),
        );
        let desc = {
            let mut r = rx.receive(1);
            let d = r.read().expect("descriptor");
            r.release();
            d
        };
        // SAFETY: just read from the RX ring; nothing else refers to it.
        let frame = unsafe { area.frame(&desc) };
        assert_eq!(udp_payload(frame), b"hello lcmp");
        // Holds only because the sender's veth has TX checksum offload off
        // (see common::wire): with it on, the frame carries a partial
        // checksum and the reflected copy is dropped by the receiver.
        assert!(udp_checksum_ok(frame), "UDP checksum of the received frame");
        reflect(frame);

        let mut w = tx.transmit(1);
        assert!(w.insert_once(XdpDesc {
            addr: desc.addr,
            len: desc.len,
            options: 0,
        }));
        w.commit();
        drop(w);
        // Copy mode sends inside this syscall: kick every batch.
        tx.wake();
        let mut completed = None;
        let ok = common::wait_until(Duration::from_secs(3), || {
            let mut c = device.complete(1);
            completed = c.read();
            c.release();
            if completed.is_none() {
                tx.wake();
            }
            completed.is_some()
        });
        assert!(ok, "TX never completed");
        assert_eq!(completed, Some(desc.addr));

        let c = steering.counters().unwrap();
        assert!(c.redirected >= 1, "{c:?}");
        steering.unregister_socket(0).unwrap();
    });

    let mut buf = [0u8; 64];
    let (n, from) = host.recv_from(&mut buf).expect("reflected frame");
    assert_eq!(&buf[..n], b"hello lcmp");
    assert_eq!(from.to_string(), format!("{FAR_IP}:40001"));
}

#[test]
fn xdpilone_copy_mode_rx_and_tx_native_xdp() {
    require_root!();
    copy_mode_rx_and_tx(XdpMode::Native, AttachedMode::Native);
}

#[test]
fn xdpilone_copy_mode_rx_and_tx_generic_xdp() {
    require_root!();
    copy_mode_rx_and_tx(XdpMode::Generic, AttachedMode::Generic);
}

/// The switch's data path in miniature: h1 -> sw0 (RX) -> same UMEM chunk ->
/// sw1 (TX) -> h2. One UMEM, two sockets on two devices (XDP_SHARED_UMEM).
#[test]
fn xdpilone_shared_umem_forwards_between_ports() {
    require_root!();
    let lab = Lab::with_second_port();
    let h2 = lab.h2.as_ref().unwrap();
    let sender = lab.h1_socket(40000);
    let receiver = common::udp_socket(h2, &format!("{FAR_IP}:40001"));

    lab.sw.run(|| {
        let area = Area::new((FRAMES * FRAME_SIZE) as usize);
        let mut steering = XdpSteering::attach("sw0", XdpMode::Native).expect("attach sw0");

        // SAFETY: as in copy_mode_rx_and_tx.
        let umem = unsafe { Umem::new(umem_config(), area.as_slice_ptr()) }.expect("UMEM");
        // Port A (sw0): the UMEM's own fd, RX only.
        let sock_a = Socket::with_shared(&ifinfo(c"sw0"), &umem).expect("socket sw0");
        let mut dev_a = umem.fq_cq(&sock_a).expect("rings sw0");
        let user_a = umem
            .rx_tx(
                &sock_a,
                &SocketConfig {
                    rx_size: NonZeroU32::new(RING),
                    tx_size: None,
                    bind_flags: SocketConfig::XDP_BIND_COPY | SocketConfig::XDP_BIND_NEED_WAKEUP,
                },
            )
            .expect("rx ring sw0");
        let mut rx_a = user_a.map_rx().expect("map rx sw0");
        umem.bind(&user_a).expect("bind sw0");

        // Port B (sw1): a second socket sharing the UMEM, with its own
        // fill/completion rings (required for another device). The kernel
        // rejects any bind flag besides XDP_SHARED_UMEM here: copy mode and
        // need_wakeup are inherited from the UMEM owner's bind.
        let sock_b = Socket::new(&ifinfo(c"sw1")).expect("socket sw1");
        let mut dev_b = umem.fq_cq(&sock_b).expect("rings sw1");
        let user_b = umem
            .rx_tx(
                &sock_b,
                &SocketConfig {
                    rx_size: None,
                    tx_size: NonZeroU32::new(RING),
                    bind_flags: 0,
                },
            )
            .expect("tx ring sw1");
        let mut tx_b = user_b.map_tx().expect("map tx sw1");
        umem.bind(&user_b).expect("bind sw1 with XDP_SHARED_UMEM");
        // SAFETY: the socket stays open while `user_b` lives.
        let fd_b = unsafe { BorrowedFd::borrow_raw(user_b.as_raw_fd()) };
        assert_eq!(xsk_bind_mode(fd_b).unwrap(), XskBindMode::Copy);

        let mut fill = dev_a.fill(FILL_FRAMES);
        fill.insert((0..FILL_FRAMES).map(|i| u64::from(i * FRAME_SIZE)));
        fill.commit();
        drop(fill);
        steering
            .register_socket(0, user_a.as_raw_fd())
            .expect("register");

        sender
            .send_to(b"through the switch", (FAR_IP, 40001))
            .unwrap();
        assert!(
            poll_in(user_a.as_raw_fd(), Duration::from_secs(3)),
            "nothing received on sw0"
        );
        let desc = {
            let mut r = rx_a.receive(1);
            let d = r.read().expect("descriptor");
            r.release();
            d
        };
        // SAFETY: just read from sw0's RX ring; nothing else refers to it.
        let frame = unsafe { area.frame(&desc) };
        assert_eq!(udp_payload(frame), b"through the switch");
        assert!(udp_checksum_ok(frame), "UDP checksum of the received frame");
        // Next hop h2: new MACs, IP header untouched (no TTL change here).
        frame[0..6].copy_from_slice(&common::mac_bytes(common::H2_MAC));
        frame[6..12].copy_from_slice(&common::mac_bytes(common::SW1_MAC));

        // The same UMEM address goes onto sw1's TX ring: no user-space copy.
        let mut w = tx_b.transmit(1);
        assert!(w.insert_once(XdpDesc {
            addr: desc.addr,
            len: desc.len,
            options: 0,
        }));
        w.commit();
        drop(w);
        tx_b.wake();
        let mut completed = None;
        let ok = common::wait_until(Duration::from_secs(3), || {
            let mut c = dev_b.complete(1);
            completed = c.read();
            c.release();
            if completed.is_none() {
                tx_b.wake();
            }
            completed.is_some()
        });
        assert!(ok, "TX on sw1 never completed");
        assert_eq!(
            completed,
            Some(desc.addr),
            "completion comes back on sw1's ring"
        );
    });

    let mut buf = [0u8; 64];
    let (n, from) = receiver.recv_from(&mut buf).expect("forwarded frame at h2");
    assert_eq!(&buf[..n], b"through the switch");
    assert_eq!(from.to_string(), format!("{H1_IP}:40000"));
}

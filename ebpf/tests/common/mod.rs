//! Network-namespace test rig shared by the root integration tests.
//!
//! Every test builds its own namespaces, named `lcmpe-<pid>-<n>-<role>`, so
//! tests run in parallel and a re-run never meets its own leftovers:
//! namespaces of a previous, crashed run (whose pid is gone) are swept before
//! the first one is created, and a name that exists anyway is deleted first.
//! Each namespace is deleted by its guard's `Drop` on every exit path,
//! including a failing assertion; deleting it destroys its veth devices.

#![allow(dead_code)] // each test file uses a different subset

use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Once;
use std::time::{Duration, Instant};

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

#[macro_export]
macro_rules! require_root {
    () => {
        if !common::is_root() {
            eprintln!(
                "skipping: this test creates network namespaces and attaches XDP; it needs root"
            );
            return;
        }
    };
}

/// Runs a command, panicking with its stderr when it fails.
pub fn run(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd}: {e}"));
    assert!(
        out.status.success(),
        "`{cmd} {}` failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn ip(args: &[&str]) -> String {
    run("ip", args)
}

const PREFIX: &str = "lcmpe-";

/// Deletes `lcmpe-<pid>-...` namespaces whose pid no longer runs.
fn sweep_dead_runs() {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(rest) = name.strip_prefix(PREFIX) else {
            continue;
        };
        let pid = rest.split('-').next().unwrap_or("");
        if !pid.is_empty() && !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = Command::new("ip").args(["netns", "del", name]).output();
        }
    }
}

/// A network namespace, deleted on drop.
pub struct Netns {
    pub name: String,
}

impl Netns {
    pub fn new(role: &str) -> Netns {
        static SWEEP: Once = Once::new();
        static NEXT: AtomicU32 = AtomicU32::new(0);
        SWEEP.call_once(sweep_dead_runs);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = format!("{PREFIX}{}-{n}-{role}", std::process::id());
        // Same name left by an earlier run that reused our pid.
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        ip(&["netns", "add", &name]);
        let ns = Netns { name };
        ns.exec(&["ip", "link", "set", "lo", "up"]);
        // Keep the wire quiet: no IPv6 autoconfiguration, DAD or MLD frames
        // unless a test turns IPv6 on for one device.
        ns.sysctl("net.ipv6.conf.all.disable_ipv6=1");
        ns.sysctl("net.ipv6.conf.default.disable_ipv6=1");
        ns
    }

    /// Runs a command inside the namespace (`ip netns exec`).
    pub fn exec(&self, args: &[&str]) -> String {
        let mut all = vec!["netns", "exec", &self.name];
        all.extend_from_slice(args);
        ip(&all)
    }

    pub fn sysctl(&self, setting: &str) {
        self.exec(&["sysctl", "-qw", setting]);
    }

    /// Runs `f` on a thread that has entered this namespace (netns is
    /// per thread), and returns its result.
    pub fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let path = format!("/run/netns/{}", self.name);
        std::thread::scope(|s| {
            let h = s.spawn(|| {
                let file = std::fs::File::open(&path).expect("open netns");
                // Only this (fresh) thread moves.
                lcmp_ebpf::sys::enter_netns(&file).unwrap_or_else(|e| panic!("setns {path}: {e}"));
                f()
            });
            match h.join() {
                Ok(v) => v,
                Err(panic) => std::panic::resume_unwind(panic),
            }
        })
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

pub const SW0_MAC: &str = "02:00:00:00:00:a0";
pub const SW1_MAC: &str = "02:00:00:00:00:a1";
pub const H1_MAC: &str = "02:00:00:00:00:b1";
pub const H2_MAC: &str = "02:00:00:00:00:b2";
pub const H1_IP: &str = "10.99.0.1";
/// The address h1 sends "through the switch" to: a static neighbour entry
/// points it at sw0's MAC (the switch answers no ARP).
pub const FAR_IP: &str = "10.99.0.2";
/// An address with no neighbour entry: sending to it makes h1 ARP.
pub const UNRESOLVED_IP: &str = "10.99.0.3";

pub fn mac_bytes(mac: &str) -> [u8; 6] {
    let mut out = [0u8; 6];
    for (o, part) in out.iter_mut().zip(mac.split(':')) {
        *o = u8::from_str_radix(part, 16).unwrap();
    }
    out
}

/// The switch namespace `sw` with port `sw0`, wired to host namespace `h1`
/// (device `h1`, 10.99.0.1/24). With `second_port`, also port `sw1` wired to
/// host namespace `h2` (device `h2`, 10.99.0.2/24).
pub struct Lab {
    pub sw: Netns,
    pub h1: Netns,
    pub h2: Option<Netns>,
}

impl Lab {
    pub fn new() -> Lab {
        Lab::build(false)
    }

    pub fn with_second_port() -> Lab {
        Lab::build(true)
    }

    fn build(second_port: bool) -> Lab {
        let sw = Netns::new("sw");
        let h1 = Netns::new("h1");
        wire(&sw, "sw0", SW0_MAC, &h1, "h1", H1_MAC);
        h1.exec(&["ip", "addr", "add", &format!("{H1_IP}/24"), "dev", "h1"]);
        h1.exec(&[
            "ip",
            "neigh",
            "replace",
            FAR_IP,
            "lladdr",
            SW0_MAC,
            "dev",
            "h1",
            "nud",
            "permanent",
        ]);
        let h2 = second_port.then(|| {
            let h2 = Netns::new("h2");
            wire(&sw, "sw1", SW1_MAC, &h2, "h2", H2_MAC);
            h2.exec(&["ip", "addr", "add", &format!("{FAR_IP}/24"), "dev", "h2"]);
            h2
        });
        Lab { sw, h1, h2 }
    }

    /// A UDP socket of h1 bound to `10.99.0.1:port` (usable from any thread).
    pub fn h1_socket(&self, port: u16) -> UdpSocket {
        udp_socket(&self.h1, &format!("{H1_IP}:{port}"))
    }
}

pub fn udp_socket(ns: &Netns, addr: &str) -> UdpSocket {
    let s = ns.run(|| UdpSocket::bind(addr)).expect("bind UDP socket");
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    s
}

/// A veth pair `a` (in `ns_a`) <-> `b` (in `ns_b`), both up, offloads off.
fn wire(ns_a: &Netns, a: &str, mac_a: &str, ns_b: &Netns, b: &str, mac_b: &str) {
    ip(&[
        "-n", &ns_a.name, "link", "add", a, "address", mac_a, "type", "veth", "peer", "name", b,
        "address", mac_b, "netns", &ns_b.name,
    ]);
    for (ns, dev) in [(ns_a, a), (ns_b, b)] {
        ns.exec(&["ip", "link", "set", dev, "up"]);
        // Frames must fit one XDP buffer: no GSO super-frames.
        ns.exec(&[
            "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off",
        ]);
        // TX checksum offload off too: with it on, a host's frames cross the
        // veth with a partial (pseudo-header only) UDP/TCP checksum, AF_XDP
        // receives them as such, and the host at the far end drops what the
        // switch forwards (verified by the af_xdp tests).
        ns.exec(&["ethtool", "-K", dev, "tx", "off"]);
    }
}

/// Polls `cond` every 20 ms until it holds or `timeout` passes.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sends one raw Ethernet frame out of `dev` in namespace `ns` through an
/// AF_PACKET socket (for frames the kernel stack would not build itself:
/// VLAN tags without the 8021q module, unknown EtherTypes, runts).
pub fn send_raw(ns: &Netns, dev: &str, frame: &[u8]) {
    let dev = std::ffi::CString::new(dev).unwrap();
    ns.run(|| {
        // SAFETY: `dev` is a valid NUL-terminated string.
        let ifindex = unsafe { libc::if_nametoindex(dev.as_ptr()) };
        assert_ne!(ifindex, 0, "no device {dev:?}");
        // SAFETY: plain socket(2) call; checked below.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        assert!(
            fd >= 0,
            "AF_PACKET socket: {}",
            std::io::Error::last_os_error()
        );
        // SAFETY: `fd` is a fresh socket owned by nobody else.
        let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
        let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_ifindex = ifindex as i32;
        addr.sll_halen = 6;
        addr.sll_addr[..6].copy_from_slice(&frame[..6.min(frame.len())]);
        // SAFETY: `frame` and `addr` are valid for the sizes passed.
        let n = unsafe {
            libc::sendto(
                fd.as_raw_fd(),
                frame.as_ptr().cast(),
                frame.len(),
                0,
                (&addr as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        assert_eq!(
            n,
            frame.len() as isize,
            "sendto: {}",
            std::io::Error::last_os_error()
        );
    });
}

/// An Ethernet frame from h1 to sw0 with the given EtherType and payload.
pub fn frame_to_sw0(ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(14 + payload.len());
    f.extend_from_slice(&mac_bytes(SW0_MAC));
    f.extend_from_slice(&mac_bytes(H1_MAC));
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

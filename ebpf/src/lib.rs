//! XDP steering for the LCMP switch: the XDP program (`src/bpf/lcmp_xdp.c`,
//! compiled by `build.rs` with clang and embedded here) and its loader.
//!
//! One [`XdpSteering`] per switch port. It loads the program, attaches it to
//! the port (native XDP if possible, see [`XdpMode`]), and owns the two maps:
//!
//! - `xsks` (XSKMAP): RX queue id -> AF_XDP socket. IPv4/IPv6 frames received
//!   on queue q are redirected to the socket registered at q
//!   ([`XdpSteering::register_socket`]); with none registered they go to the
//!   kernel.
//! - `verdicts` (PERCPU_ARRAY): one counter per verdict, summed over CPUs by
//!   [`XdpSteering::counters`].
//!
//! ARP, IPv6 Neighbor Discovery, VLAN-tagged and non-IP frames always go to the
//! kernel. The data ports carry no IP addresses, so every other IP frame is
//! the switch's.
//!
//! # Lifetime of the attachment
//!
//! On kernels >= 5.9 aya attaches through a bpf_link, whose only reference is
//! a file descriptor of this process: when the process dies, even by
//! `kill -9`, the kernel detaches the program. A restart therefore finds the
//! interface clean. Programs attached through netlink (by aya on old kernels,
//! by `ip link set ... xdp`, `xdp-loader`, libbpf's `bpf_xdp_attach`) outlive
//! their process; [`XdpSteering::attach`] removes such leftovers and logs a
//! warning. A program held by a live bpf_link (another running switch) is
//! never touched: attach fails with [`Error::Busy`].
//!
//! Dropping an [`XdpSteering`] (or calling [`XdpSteering::detach`]) detaches
//! the program, so a daemon's SIGINT/SIGTERM handling only has to drop it.
//!
//! # Network namespaces
//!
//! Interface names, netlink and the attach call are resolved in the calling
//! thread's network namespace (`setns` is per thread). Attach from a thread
//! inside the port's namespace; after that the handle works from any thread,
//! since maps and the bpf_link are plain file descriptors.

#![warn(missing_docs)]

pub mod kernel;
mod netlink;
pub mod sys;

use std::ffi::CString;
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};

use aya::maps::{HashMap as BpfHashMap, MapData, MapError, PerCpuArray, XskMap};
use aya::programs::links::FdLink;
use aya::programs::{ProgramError, Xdp};
use aya::{Ebpf, EbpfLoader};
use tracing::{debug, info, warn};

pub use netlink::{
    set_link_xdp, LinkEvents, LinkState, Neighbour, NetlinkError, RouteSocket, XdpAttachments,
};

#[repr(C, align(32))]
struct Aligned<T: ?Sized>(T);

/// The ELF object is parsed in place, which needs an aligned buffer.
static OBJECT: &Aligned<[u8]> = &Aligned(*include_bytes!(concat!(env!("OUT_DIR"), "/lcmp_xdp.o")));

/// The compiled XDP object (ELF, with BTF), as built from `src/bpf/lcmp_xdp.c`.
pub fn object() -> &'static [u8] {
    &OBJECT.0
}

/// Name of the XDP program (its C function) in [`object`].
pub const PROGRAM_NAME: &str = "lcmp_xdp";
/// Name of the XSKMAP in [`object`].
pub const XSKMAP_NAME: &str = "xsks";
/// Name of the per-CPU verdict counter array in [`object`].
pub const COUNTERS_MAP_NAME: &str = "verdicts";
/// Name of the map of the interface's IPv4 addresses in [`object`].
pub const LOCAL_V4_MAP_NAME: &str = "local_v4";
/// Name of the map of the interface's IPv6 addresses in [`object`].
pub const LOCAL_V6_MAP_NAME: &str = "local_v6";
/// Addresses each local map holds (`LCMP_LOCAL_MAX_ENTRIES`).
pub const MAX_LOCAL_ADDRESSES: u32 = 64;
/// Number of XSKMAP entries: valid RX queue ids are `0..MAX_QUEUES`
/// (`LCMP_XSKS_MAX_ENTRIES` in `lcmp_shared.h`).
pub const MAX_QUEUES: u32 = 256;

/// Counter slots, mirroring `LCMP_CNT_*` in `src/bpf/lcmp_shared.h` (a unit
/// test checks that the two agree).
mod slot {
    pub const REDIRECTED: u32 = 0;
    pub const PASSED_NO_SOCKET: u32 = 1;
    pub const PASSED_ARP: u32 = 2;
    pub const PASSED_ND: u32 = 3;
    pub const PASSED_VLAN: u32 = 4;
    pub const PASSED_NON_IP: u32 = 5;
    pub const TRUNCATED: u32 = 6;
    pub const PASSED_MULTICAST: u32 = 7;
    pub const PASSED_LOCAL: u32 = 8;
    pub const COUNT: u32 = 9;
}

/// Requested XDP attach mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XdpMode {
    /// Native (driver) mode if the driver supports it, otherwise generic.
    #[default]
    Auto,
    /// Native (driver, "drv") mode only.
    Native,
    /// Generic ("skb") mode only: works on every device, slower.
    Generic,
}

/// The XDP mode the program actually runs in, as confirmed by the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachedMode {
    /// Native (driver) mode.
    Native,
    /// Generic (skb) mode.
    Generic,
}

impl AttachedMode {
    fn aya_mode(self) -> aya::programs::XdpMode {
        match self {
            AttachedMode::Native => aya::programs::XdpMode::Driver,
            AttachedMode::Generic => aya::programs::XdpMode::Skb,
        }
    }

    fn of(self, a: &XdpAttachments) -> Option<u32> {
        match self {
            AttachedMode::Native => a.native,
            AttachedMode::Generic => a.generic,
        }
    }
}

impl fmt::Display for AttachedMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AttachedMode::Native => "native (drv)",
            AttachedMode::Generic => "generic (skb)",
        })
    }
}

/// How an AF_XDP socket moves frames, as the kernel reports after `bind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XskBindMode {
    /// Frames are copied between kernel buffers and the UMEM (veth, generic XDP).
    Copy,
    /// The NIC DMAs straight into the UMEM.
    ZeroCopy,
}

impl fmt::Display for XskBindMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            XskBindMode::Copy => "copy",
            XskBindMode::ZeroCopy => "zero-copy",
        })
    }
}

/// Verdict counters of one port, summed over all CPUs. Every frame the
/// program sees increments exactly one of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VerdictCounters {
    /// IP frames redirected to the AF_XDP socket of their RX queue. A frame
    /// counted here can still be dropped by the socket (RX ring full, fill
    /// ring empty): see the socket's `XDP_STATISTICS`.
    pub redirected: u64,
    /// IP frames passed to the kernel because no socket is registered for
    /// their RX queue.
    pub passed_no_socket: u64,
    /// ARP frames passed to the kernel.
    pub passed_arp: u64,
    /// IPv6 Neighbor Discovery (ICMPv6 133..137) passed to the kernel.
    pub passed_nd: u64,
    /// VLAN-tagged frames (802.1Q, 802.1ad, 0x9100) passed to the kernel.
    pub passed_vlan: u64,
    /// Frames of any other EtherType passed to the kernel.
    pub passed_non_ip: u64,
    /// Frames too short for the headers inspected, passed to the kernel.
    pub truncated: u64,
    /// IPv4 multicast/broadcast and IPv6 multicast, passed to the kernel.
    pub passed_multicast: u64,
    /// IP frames to an address of the interface itself, passed to the
    /// kernel.
    pub passed_local: u64,
}

impl VerdictCounters {
    fn from_slots(s: [u64; slot::COUNT as usize]) -> Self {
        VerdictCounters {
            redirected: s[slot::REDIRECTED as usize],
            passed_no_socket: s[slot::PASSED_NO_SOCKET as usize],
            passed_arp: s[slot::PASSED_ARP as usize],
            passed_nd: s[slot::PASSED_ND as usize],
            passed_vlan: s[slot::PASSED_VLAN as usize],
            passed_non_ip: s[slot::PASSED_NON_IP as usize],
            truncated: s[slot::TRUNCATED as usize],
            passed_multicast: s[slot::PASSED_MULTICAST as usize],
            passed_local: s[slot::PASSED_LOCAL as usize],
        }
    }

    /// `(name, value)` pairs, in slot order: handy for metrics export.
    pub fn as_pairs(&self) -> [(&'static str, u64); slot::COUNT as usize] {
        [
            ("redirected", self.redirected),
            ("passed_no_socket", self.passed_no_socket),
            ("passed_arp", self.passed_arp),
            ("passed_nd", self.passed_nd),
            ("passed_vlan", self.passed_vlan),
            ("passed_non_ip", self.passed_non_ip),
            ("truncated", self.truncated),
            ("passed_multicast", self.passed_multicast),
            ("passed_local", self.passed_local),
        ]
    }

    /// All frames seen by the program.
    pub fn total(&self) -> u64 {
        self.as_pairs()
            .iter()
            .fold(0u64, |acc, (_, v)| acc.wrapping_add(*v))
    }

    /// Frames handed to the kernel (everything not redirected).
    pub fn passed(&self) -> u64 {
        self.total().wrapping_sub(self.redirected)
    }

    /// Per-field difference `self - earlier` (saturating at zero).
    pub fn delta_since(&self, earlier: &VerdictCounters) -> VerdictCounters {
        VerdictCounters {
            redirected: self.redirected.saturating_sub(earlier.redirected),
            passed_no_socket: self
                .passed_no_socket
                .saturating_sub(earlier.passed_no_socket),
            passed_arp: self.passed_arp.saturating_sub(earlier.passed_arp),
            passed_nd: self.passed_nd.saturating_sub(earlier.passed_nd),
            passed_vlan: self.passed_vlan.saturating_sub(earlier.passed_vlan),
            passed_non_ip: self.passed_non_ip.saturating_sub(earlier.passed_non_ip),
            truncated: self.truncated.saturating_sub(earlier.truncated),
            passed_multicast: self
                .passed_multicast
                .saturating_sub(earlier.passed_multicast),
            passed_local: self.passed_local.saturating_sub(earlier.passed_local),
        }
    }
}

/// Errors of the XDP loader.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No interface of that name in the calling thread's network namespace.
    #[error("interface `{0}` not found (in this thread's network namespace)")]
    UnknownInterface(String),
    /// The embedded object could not be loaded (maps created, BTF loaded).
    #[error("loading the embedded XDP object failed: {0}")]
    Load(#[source] Box<aya::EbpfError>),
    /// Something expected in the embedded object is missing.
    #[error("the embedded XDP object has no {0}")]
    MissingInObject(&'static str),
    /// A program operation failed (the verifier log is in the source).
    #[error("{what}: {source}")]
    Program {
        /// What was being done.
        what: &'static str,
        /// aya's error.
        #[source]
        source: Box<ProgramError>,
    },
    /// A map operation failed.
    #[error("{what}: {source}")]
    Map {
        /// What was being done.
        what: &'static str,
        /// aya's error.
        #[source]
        source: Box<MapError>,
    },
    /// The interface already has an XDP program held by a live bpf_link
    /// (another running switch, or a pinned link). It is left alone.
    #[error(
        "interface `{ifname}` already has XDP program {prog_id} ({prog_name}) attached in {mode} \
         mode through a bpf_link held by a live process or a pin; stop that process first"
    )]
    Busy {
        /// Interface name.
        ifname: String,
        /// Kernel id of the program found.
        prog_id: u32,
        /// Its name, or `?`.
        prog_name: String,
        /// Mode it is attached in.
        mode: &'static str,
    },
    /// Attaching in the requested mode failed.
    #[error("attaching XDP to `{ifname}` in {mode} mode failed: {source}")]
    Attach {
        /// Interface name.
        ifname: String,
        /// Mode tried.
        mode: AttachedMode,
        /// aya's error.
        #[source]
        source: Box<ProgramError>,
    },
    /// [`XdpMode::Auto`]: both native and generic attach failed.
    #[error("attaching XDP to `{ifname}` failed in native mode ({native}) and in generic mode ({generic})")]
    AttachAuto {
        /// Interface name.
        ifname: String,
        /// Native-mode error.
        native: Box<ProgramError>,
        /// Generic-mode error.
        generic: Box<ProgramError>,
    },
    /// A netlink request failed.
    #[error("netlink: {what} on `{ifname}`: {source}")]
    Netlink {
        /// What was being done.
        what: &'static str,
        /// Interface name.
        ifname: String,
        /// errno and kernel message.
        #[source]
        source: NetlinkError,
    },
    /// After attaching, the kernel does not report our program in the expected mode.
    #[error(
        "attached program {prog_id} to `{ifname}` in {mode} mode, but the kernel reports {found:?}"
    )]
    Verify {
        /// Interface name.
        ifname: String,
        /// Our program id.
        prog_id: u32,
        /// Mode requested.
        mode: AttachedMode,
        /// What the kernel reported.
        found: XdpAttachments,
    },
    /// Detaching failed.
    #[error("detaching XDP from `{ifname}` failed: {source}")]
    Detach {
        /// Interface name.
        ifname: String,
        /// The failing call's error.
        #[source]
        source: io::Error,
    },
    /// Queue id beyond the XSKMAP.
    #[error("queue id {queue_id} out of range: the XSKMAP has {MAX_QUEUES} entries")]
    QueueOutOfRange {
        /// The queue id given.
        queue_id: u32,
    },
}

fn program_err(what: &'static str) -> impl FnOnce(ProgramError) -> Error {
    move |source| Error::Program {
        what,
        source: Box::new(source),
    }
}

fn map_err(what: &'static str) -> impl FnOnce(MapError) -> Error {
    move |source| Error::Map {
        what,
        source: Box::new(source),
    }
}

/// The XDP steering program attached to one interface. Detaches on drop.
pub struct XdpSteering {
    /// Owns the loaded program; only needed for its lifetime after attach.
    _ebpf: Ebpf,
    attachment: Option<Attachment>,
    xsks: XskMap<MapData>,
    counters: PerCpuArray<MapData, u64>,
    /// The interface's addresses, passed to the kernel by the program.
    local: Vec<std::net::IpAddr>,
    ifname: String,
    ifindex: u32,
    prog_id: u32,
    mode: AttachedMode,
}

impl fmt::Debug for XdpSteering {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("XdpSteering")
            .field("ifname", &self.ifname)
            .field("ifindex", &self.ifindex)
            .field("prog_id", &self.prog_id)
            .field("mode", &self.mode)
            .field("attachment", &self.attachment)
            .finish()
    }
}

/// How the program is attached, which decides how it is detached.
#[derive(Debug)]
enum Attachment {
    /// A bpf_link (kernels >= 5.9). Detached explicitly by id (see
    /// `sys.rs`), then the fd is closed. `link_id` is `None` only if the
    /// kernel would not report it; closing the fd still detaches then.
    Link { link: FdLink, link_id: Option<u32> },
    /// aya fell back to netlink (kernels < 5.9): the program stays attached
    /// until removed through netlink, in the interface's namespace.
    Netlink { mode_flags: u32 },
}

/// Loads the embedded object into the kernel (maps created, program
/// verified) without attaching it. Returns the program's kernel id.
fn load() -> Result<(Ebpf, u32), Error> {
    let mut ebpf = EbpfLoader::new()
        .load(object())
        .map_err(|e| Error::Load(Box::new(e)))?;
    let prog: &mut Xdp = ebpf
        .program_mut(PROGRAM_NAME)
        .ok_or(Error::MissingInObject("program lcmp_xdp"))?
        .try_into()
        .map_err(program_err("lcmp_xdp is not an XDP program"))?;
    prog.load()
        .map_err(program_err("loading lcmp_xdp into the kernel"))?;
    let prog_id = prog
        .info()
        .map_err(program_err("reading lcmp_xdp's program info"))?
        .id();
    Ok((ebpf, prog_id))
}

fn xdp_program(ebpf: &mut Ebpf) -> &mut Xdp {
    ebpf.program_mut(PROGRAM_NAME)
        .and_then(|p| <&mut Xdp>::try_from(p).ok())
        .expect("checked by load()")
}

fn if_index(ifname: &str) -> Result<u32, Error> {
    let c = CString::new(ifname).map_err(|_| Error::UnknownInterface(ifname.to_owned()))?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    match unsafe { libc::if_nametoindex(c.as_ptr()) } {
        0 => Err(Error::UnknownInterface(ifname.to_owned())),
        i => Ok(i),
    }
}

/// Name of the loaded BPF program with kernel id `id`, or `?`.
fn program_name(id: u32) -> String {
    aya::programs::loaded_programs()
        .filter_map(Result::ok)
        .find(|p| p.id() == id)
        .and_then(|p| p.name_as_str().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}

/// The XDP programs currently attached to `ifname`, per mode, as the kernel
/// reports them (netlink `IFLA_XDP`), in the calling thread's namespace.
pub fn attachments(ifname: &str) -> Result<XdpAttachments, Error> {
    let ifindex = if_index(ifname)?;
    netlink::xdp_attachments(ifindex).map_err(|source| Error::Netlink {
        what: "query XDP state",
        ifname: ifname.to_owned(),
        source,
    })
}

/// Copy or zero-copy: what a bound AF_XDP socket uses (`XDP_OPTIONS`).
pub fn xsk_bind_mode(xsk: BorrowedFd<'_>) -> io::Result<XskBindMode> {
    const SOL_XDP: libc::c_int = 283;
    const XDP_OPTIONS: libc::c_int = 8;
    const XDP_OPTIONS_ZEROCOPY: u32 = 1;
    let mut flags: u32 = 0;
    let mut len = std::mem::size_of::<u32>() as libc::socklen_t;
    // SAFETY: `xsk` is a valid fd for the call; `flags` and `len` are valid
    // writable locations and `len` holds the size of `flags` (struct xdp_options).
    let rc = unsafe {
        libc::getsockopt(
            xsk.as_raw_fd(),
            SOL_XDP,
            XDP_OPTIONS,
            (&mut flags as *mut u32).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(if flags & XDP_OPTIONS_ZEROCOPY != 0 {
        XskBindMode::ZeroCopy
    } else {
        XskBindMode::Copy
    })
}

/// How often, and how long apart, a stale program held by a bpf_link is
/// re-checked before giving up with [`Error::Busy`]: a link whose owner just
/// died is normally gone before `wait()` returns, this only absorbs races.
const BUSY_RETRIES: u32 = 5;
const BUSY_RETRY_DELAY: std::time::Duration = std::time::Duration::from_millis(40);

/// Removes XDP programs attached to `ifindex` through netlink (they outlive
/// the process that attached them). Fails with [`Error::Busy`] for programs
/// held by a live bpf_link.
fn remove_stale(ifname: &str, ifindex: u32) -> Result<(), Error> {
    let nl_err = |what: &'static str| {
        move |source| Error::Netlink {
            what,
            ifname: ifname.to_owned(),
            source,
        }
    };
    for attempt in 0..=BUSY_RETRIES {
        let current = netlink::xdp_attachments(ifindex).map_err(nl_err("query XDP state"))?;
        let modes = [
            ("native", netlink::XDP_FLAGS_DRV_MODE, current.native),
            ("generic", netlink::XDP_FLAGS_SKB_MODE, current.generic),
            ("offload", netlink::XDP_FLAGS_HW_MODE, current.offload),
        ];
        let mut busy = None;
        for (mode, flags, id) in modes {
            let Some(prog_id) = id else { continue };
            let prog_name = program_name(prog_id);
            match netlink::detach_xdp(ifindex, flags) {
                Ok(()) => warn!(
                    ifname,
                    prog_id,
                    prog_name = %prog_name,
                    mode,
                    "removed a stale XDP program attached through netlink \
                     (left by a crashed process or another tool)"
                ),
                Err(e) if e.errno == libc::EBUSY => {
                    busy = Some(Error::Busy {
                        ifname: ifname.to_owned(),
                        prog_id,
                        prog_name,
                        mode,
                    })
                }
                Err(e) => return Err(nl_err("detach stale XDP program")(e)),
            }
        }
        match busy {
            None => return Ok(()),
            Some(e) if attempt == BUSY_RETRIES => return Err(e),
            Some(_) => std::thread::sleep(BUSY_RETRY_DELAY),
        }
    }
    unreachable!("the loop returns on its last attempt")
}

/// The IPv4 and IPv6 addresses of interface `ifname` (in the calling
/// thread's network namespace).
pub fn interface_addresses(ifname: &str) -> io::Result<Vec<std::net::IpAddr>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head to a valid pointer; the list
    // is freed below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, alive
        // until freeifaddrs; its name is a NUL-terminated string and its
        // address, when not null, a sockaddr of the family it names.
        unsafe {
            let ifa = &*cur;
            let name = std::ffi::CStr::from_ptr(ifa.ifa_name);
            if name.to_bytes() == ifname.as_bytes() && !ifa.ifa_addr.is_null() {
                match (*ifa.ifa_addr).sa_family as i32 {
                    libc::AF_INET => {
                        let a = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                        out.push(std::net::IpAddr::from(a.sin_addr.s_addr.to_ne_bytes()));
                    }
                    libc::AF_INET6 => {
                        let a = &*(ifa.ifa_addr as *const libc::sockaddr_in6);
                        out.push(std::net::IpAddr::from(a.sin6_addr.s6_addr));
                    }
                    _ => {}
                }
            }
            cur = ifa.ifa_next;
        }
    }
    // SAFETY: `head` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

/// Puts `addresses` in the program's local-address maps (at most
/// [`MAX_LOCAL_ADDRESSES`] of each family; the rest are logged and left to
/// the switch).
pub fn set_local_addresses(ebpf: &mut Ebpf, addresses: &[std::net::IpAddr]) -> Result<(), Error> {
    let mut v4: BpfHashMap<_, u32, u8> = BpfHashMap::try_from(
        ebpf.map_mut(LOCAL_V4_MAP_NAME)
            .ok_or(Error::MissingInObject("map local_v4"))?,
    )
    .map_err(map_err("map local_v4 is not a HASH of u32"))?;
    let (mut n4, mut n6) = (0, 0);
    for a in addresses {
        if let std::net::IpAddr::V4(a) = a {
            if n4 < MAX_LOCAL_ADDRESSES {
                // Keyed as the frame carries it: network byte order.
                v4.insert(u32::from_ne_bytes(a.octets()), 1, 0)
                    .map_err(map_err("adding a local IPv4 address"))?;
                n4 += 1;
            } else {
                warn!(address = %a, "too many local IPv4 addresses; this one goes to the switch");
            }
        }
    }
    let mut v6: BpfHashMap<_, [u8; 16], u8> = BpfHashMap::try_from(
        ebpf.map_mut(LOCAL_V6_MAP_NAME)
            .ok_or(Error::MissingInObject("map local_v6"))?,
    )
    .map_err(map_err("map local_v6 is not a HASH of 16-byte keys"))?;
    for a in addresses {
        if let std::net::IpAddr::V6(a) = a {
            if n6 < MAX_LOCAL_ADDRESSES {
                v6.insert(a.octets(), 1, 0)
                    .map_err(map_err("adding a local IPv6 address"))?;
                n6 += 1;
            } else {
                warn!(address = %a, "too many local IPv6 addresses; this one goes to the switch");
            }
        }
    }
    Ok(())
}

impl XdpSteering {
    /// Loads the program and attaches it to `ifname` (resolved in the calling
    /// thread's network namespace), replacing stale netlink-attached XDP
    /// programs. With [`XdpMode::Auto`] native mode is tried first, then
    /// generic. The mode in use is confirmed with the kernel, logged, and
    /// available from [`XdpSteering::mode`].
    pub fn attach(ifname: &str, mode: XdpMode) -> Result<XdpSteering, Error> {
        let ifindex = if_index(ifname)?;
        let (mut ebpf, prog_id) = load()?;
        // Maps first: once attached, nothing but taking the link can fail.
        let xsks = ebpf
            .take_map(XSKMAP_NAME)
            .ok_or(Error::MissingInObject("map xsks"))?;
        let xsks = XskMap::try_from(xsks).map_err(map_err("map xsks is not an XSKMAP"))?;
        let counters = ebpf
            .take_map(COUNTERS_MAP_NAME)
            .ok_or(Error::MissingInObject("map verdicts"))?;
        let counters = PerCpuArray::try_from(counters)
            .map_err(map_err("map verdicts is not a PERCPU_ARRAY of u64"))?;
        // The interface's own addresses before the program sees a frame:
        // traffic to them is the kernel's (ping to the gateway).
        let local = interface_addresses(ifname).unwrap_or_else(|e| {
            warn!(ifname, error = %e, "cannot list the interface's addresses; traffic to them goes to the switch");
            Vec::new()
        });
        set_local_addresses(&mut ebpf, &local)?;
        if !local.is_empty() {
            debug!(ifname, addresses = ?local, "addresses of the interface go to the kernel");
        }

        remove_stale(ifname, ifindex)?;

        let prog = xdp_program(&mut ebpf);
        let attach = |prog: &mut Xdp, m: AttachedMode| {
            prog.attach_to_if_index(ifindex, m.aya_mode())
                .map(|link| (link, m))
                .map_err(Box::new)
        };
        let attach_err = |m: AttachedMode| {
            move |source| Error::Attach {
                ifname: ifname.to_owned(),
                mode: m,
                source,
            }
        };
        let (link_id, attached) = match mode {
            XdpMode::Native => {
                attach(prog, AttachedMode::Native).map_err(attach_err(AttachedMode::Native))?
            }
            XdpMode::Generic => {
                attach(prog, AttachedMode::Generic).map_err(attach_err(AttachedMode::Generic))?
            }
            XdpMode::Auto => match attach(prog, AttachedMode::Native) {
                Ok(ok) => ok,
                Err(native) => {
                    info!(ifname, error = %native, "native XDP unavailable, falling back to generic");
                    attach(prog, AttachedMode::Generic).map_err(|generic| Error::AttachAuto {
                        ifname: ifname.to_owned(),
                        native,
                        generic,
                    })?
                }
            },
        };

        // Own the link directly, to be able to detach it explicitly.
        let xdp_link = prog
            .take_link(link_id)
            .map_err(program_err("taking the XDP link from aya"))?;
        let attachment = match FdLink::try_from(xdp_link) {
            Ok(link) => {
                let link_id = link.info().map(|i| i.id()).ok();
                Attachment::Link { link, link_id }
            }
            // Only a netlink attachment is not an fd link; converting it
            // did not detach it (aya's netlink link has no Drop).
            Err(_) => Attachment::Netlink {
                mode_flags: match attached {
                    AttachedMode::Native => netlink::XDP_FLAGS_DRV_MODE,
                    AttachedMode::Generic => netlink::XDP_FLAGS_SKB_MODE,
                },
            },
        };

        let steering = XdpSteering {
            _ebpf: ebpf,
            attachment: Some(attachment),
            xsks,
            counters,
            local,
            ifname: ifname.to_owned(),
            ifindex,
            prog_id,
            mode: attached,
        };

        // Report what the kernel says, not what was asked for. On a mismatch
        // `steering` is dropped here, which detaches.
        match netlink::xdp_attachments(ifindex) {
            Ok(found) if attached.of(&found) == Some(prog_id) => {}
            Ok(found) => {
                return Err(Error::Verify {
                    ifname: ifname.to_owned(),
                    prog_id,
                    mode: attached,
                    found,
                })
            }
            Err(e) => warn!(ifname, error = %e, "cannot confirm the XDP mode with the kernel"),
        }
        let how = match &steering.attachment {
            Some(Attachment::Link { link_id, .. }) => match link_id {
                Some(id) => format!("bpf_link {id}"),
                None => "bpf_link".to_owned(),
            },
            _ => "netlink (kernel without XDP bpf_link; survives a crash)".to_owned(),
        };
        info!(
            ifname,
            ifindex,
            prog_id,
            mode = %attached,
            via = %how,
            "attached XDP steering program"
        );
        Ok(steering)
    }

    /// The XDP mode the program runs in.
    pub fn mode(&self) -> AttachedMode {
        self.mode
    }

    /// The interface name given to [`XdpSteering::attach`].
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// The interface index.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Kernel id of the loaded program (as shown by `bpftool prog`).
    pub fn program_id(&self) -> u32 {
        self.prog_id
    }

    /// True until [`XdpSteering::detach`] or drop.
    pub fn is_attached(&self) -> bool {
        self.attachment.is_some()
    }

    /// Sends IP frames received on RX queue `queue_id` to the AF_XDP socket
    /// `xsk_fd` (bound to this interface and queue; the map takes its own
    /// reference, and the kernel removes the entry when the socket closes).
    /// Replaces any socket registered for that queue.
    pub fn register_socket(&mut self, queue_id: u32, xsk_fd: RawFd) -> Result<(), Error> {
        if queue_id >= MAX_QUEUES {
            return Err(Error::QueueOutOfRange { queue_id });
        }
        self.xsks
            .set(queue_id, xsk_fd, 0)
            .map_err(map_err("registering the AF_XDP socket in the XSKMAP"))?;
        // SAFETY: the map update above succeeded, so `xsk_fd` is an open
        // socket for the duration of this call (the caller owns it).
        let fd = unsafe { BorrowedFd::borrow_raw(xsk_fd) };
        match xsk_bind_mode(fd) {
            Ok(bind) => {
                info!(ifname = %self.ifname, queue_id, xsk_fd, bind = %bind, "registered AF_XDP socket")
            }
            Err(e) => {
                info!(ifname = %self.ifname, queue_id, xsk_fd, error = %e, "registered AF_XDP socket (bind mode unknown)")
            }
        }
        Ok(())
    }

    /// Removes the socket of RX queue `queue_id`: its IP frames go to the kernel again.
    pub fn unregister_socket(&mut self, queue_id: u32) -> Result<(), Error> {
        if queue_id >= MAX_QUEUES {
            return Err(Error::QueueOutOfRange { queue_id });
        }
        self.xsks
            .unset(queue_id)
            .map_err(map_err("removing the AF_XDP socket from the XSKMAP"))?;
        debug!(ifname = %self.ifname, queue_id, "unregistered AF_XDP socket");
        Ok(())
    }

    /// The interface's addresses as read at attach (traffic to them is
    /// passed to the kernel).
    pub fn local_addresses(&self) -> &[std::net::IpAddr] {
        &self.local
    }

    /// The verdict counters, summed over CPUs.
    pub fn counters(&self) -> Result<VerdictCounters, Error> {
        read_counters(&self.counters)
    }

    /// Detaches the program from the interface now (drop does the same).
    pub fn detach(mut self) -> Result<(), Error> {
        self.detach_inner()
    }

    fn detach_inner(&mut self) -> Result<(), Error> {
        let Some(attachment) = self.attachment.take() else {
            return Ok(());
        };
        let detach_err = |source| Error::Detach {
            ifname: self.ifname.clone(),
            source,
        };
        match attachment {
            Attachment::Link { link, link_id } => {
                if let Some(id) = link_id {
                    match sys::link_detach_by_id(id) {
                        Ok(()) => {}
                        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
                        Err(e) => return Err(detach_err(e)),
                    }
                }
                drop(link);
            }
            Attachment::Netlink { mode_flags } => {
                netlink::detach_xdp(self.ifindex, mode_flags)
                    .map_err(|e| detach_err(io::Error::from_raw_os_error(e.errno)))?;
            }
        }
        info!(ifname = %self.ifname, prog_id = self.prog_id, "detached XDP steering program");
        Ok(())
    }
}

impl Drop for XdpSteering {
    fn drop(&mut self) {
        if let Err(e) = self.detach_inner() {
            warn!(ifname = %self.ifname, error = %e, "detaching XDP steering program failed");
        }
    }
}

fn read_counters(map: &PerCpuArray<MapData, u64>) -> Result<VerdictCounters, Error> {
    let mut slots = [0u64; slot::COUNT as usize];
    for (i, v) in (0u32..).zip(slots.iter_mut()) {
        let per_cpu = map
            .get(&i, 0)
            .map_err(map_err("reading the verdict counters"))?;
        *v = per_cpu.iter().fold(0u64, |acc, x| acc.wrapping_add(*x));
    }
    Ok(VerdictCounters::from_slots(slots))
}

#[cfg(test)]
mod tests;

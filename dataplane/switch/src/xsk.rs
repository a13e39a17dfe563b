//! [`PacketIo`] over AF_XDP sockets: on every port one socket per RX
//! queue it is given (all of the interface's by default), all sharing one
//! UMEM, so a frame received on one port is transmitted on another without
//! a copy in user space. The XDP program of `lcmp-ebpf` steers each
//! queue's IP traffic into that queue's socket.
//!
//! Frame life cycle: free pool -> a queue's fill ring -> (kernel receives)
//! -> RX ring -> the switch -> a TX ring -> completion ring -> free pool.
//! Drops go back to the free pool directly.
//!
//! Bind mode: zero-copy where the driver has it (the NIC reads and writes
//! the UMEM), else copy; one UMEM has one mode, so the sockets are opened
//! in zero-copy first and, if any of them cannot be, all again in copy
//! mode ([`BindMode::Auto`]). On veth the kernel copies frames (no
//! zero-copy), and copy-mode transmission happens inside `sendto()`, 32
//! frames per call, so [`PacketIo::flush`] kicks each port with pending
//! transmissions until its ring drains; in zero-copy the driver sends on
//! its own and is woken only when the ring says it sleeps (need-wakeup).
//!
//! A port transmits on the socket of its first queue: the poll loop is one
//! thread, one TX queue carries a port's line rate, and one queue keeps
//! the frames of a flow in order (RDMA counts reordering as loss).
//!
//! Everything is opened in the calling thread's network namespace (the
//! ports' names are resolved there, the link-event and route sockets belong
//! to it) and keeps working from any thread after that: link state, MTU and
//! MACs are read over a netlink socket of that namespace, not from sysfs,
//! which shows the namespace that mounted `/sys`.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::num::NonZeroU32;
use std::sync::Arc;

use lcmp_control::snapshot::{XskQueueStats, XskStats};
use lcmp_ebpf::{AttachedMode, LinkEvents, RouteSocket, XdpMode, XdpSteering};
use xdpilone::xdp::XdpDesc;
use xdpilone::{DeviceQueue, IfInfo, RingRx, RingTx, Socket, SocketConfig, Umem, UmemConfig, User};

use crate::frames::{FrameArea, FrameShare};
use crate::io::{Frame, PacketIo};

/// UMEM chunk size: one frame per chunk (MTU-sized frames; no multi-buffer).
pub const FRAME_SIZE: u32 = crate::frames::FRAME_SIZE as u32;

/// Longest frame an AF_XDP socket of this UMEM receives: the kernel keeps
/// XDP_PACKET_HEADROOM (256 bytes) of every chunk (`frame_len = chunk -
/// headroom - XDP_PACKET_HEADROOM` in its buffer pool) and drops longer
/// frames at the socket (`rx_dropped`).
pub const MAX_RX_FRAME: u32 = FRAME_SIZE - 256;

/// Largest interface MTU whose frames fit [`MAX_RX_FRAME`] (untagged
/// Ethernet header of 14 bytes; VLAN-tagged frames go to the kernel).
pub const MAX_MTU: u32 = MAX_RX_FRAME - 14;

/// How the sockets move frames.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BindMode {
    /// Zero-copy where every socket can have it, else copy.
    #[default]
    Auto,
    /// Zero-copy or fail (naming the interface that cannot).
    ZeroCopy,
    /// Copy mode (what veth offers; the kernel copies each frame).
    Copy,
}

/// Sizing of the sockets.
#[derive(Clone, Debug)]
pub struct XskConfig {
    /// Frames in the shared UMEM (all ports together).
    pub frames: u32,
    /// Entries of each TX and completion ring (power of two).
    pub ring_size: u32,
    /// Entries of each RX and fill ring (power of two). Deep receive rings
    /// absorb the bursts in which veth delivers redirected frames; every
    /// fill-ring entry holds a frame, so the UMEM grows with it.
    pub rx_ring_size: u32,
    /// XDP attach mode.
    pub xdp_mode: XdpMode,
    /// Copy, zero-copy, or zero-copy where possible.
    pub bind_mode: BindMode,
    /// The RX queues to bind, by interface name; an interface not listed
    /// gets a socket on each of its queues (`ethtool -l`: combined plus
    /// RX-only channels).
    pub queues: BTreeMap<String, Vec<u32>>,
}

/// Errors setting up AF_XDP ports, each naming the interface and the step.
#[derive(Debug)]
pub struct XskError(pub String);

impl std::fmt::Display for XskError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for XskError {}

/// One AF_XDP socket: a port's RX queue.
struct Queue {
    /// The interface's RX queue id.
    id: u32,
    rx: RingRx,
    tx: RingTx,
    fill_comp: DeviceQueue,
    /// Keeps the socket's rings registered.
    _user: User,
    /// Frames committed to the TX ring and not yet completed.
    in_tx: u32,
    /// Frames received and transmitted on this socket.
    rx_frames: u64,
    tx_frames: u64,
    /// Zero-copy TX has been woken once: the kernel wants the first send
    /// kicked whatever the ring's need-wakeup flag says.
    tx_started: bool,
}

struct Port {
    name: String,
    /// Its sockets; the first also transmits.
    queues: Vec<Queue>,
    /// The queue `recv` starts at (rotated so no queue starves another).
    next_rx: usize,
    /// Detaches the XDP program when dropped.
    steering: XdpSteering,
    /// The interface's index in the namespace it was opened in: its
    /// carrier and MTU are read through the route socket at each link
    /// check (a raised MTU would make the socket drop long frames silently).
    ifindex: u32,
    /// The MTU above [`MAX_MTU`] already warned about.
    mtu_warned: Option<u32>,
}

/// AF_XDP ports over one shared UMEM.
pub struct XskIo {
    // Field order is drop order: sockets and programs before the UMEM
    // registration, the UMEM before its memory.
    ports: Vec<Port>,
    /// `None` without ports (a switch whose links are all memory links).
    _umem: Option<Umem>,
    area: Arc<FrameArea>,
    free: Vec<u64>,
    fill_size: u32,
    /// Entries of each TX (and completion) ring.
    tx_ring: u32,
    /// Whether the kernel moves frames in zero-copy (one mode per UMEM).
    zero_copy: bool,
    /// The sockets' RX fds (port by port, queue by queue), then the
    /// link-event socket's, if any, then wake-up descriptors
    /// ([`PacketIo::add_wake_fd`]).
    poll_fds: Vec<libc::pollfd>,
    /// Sockets over all ports: where the link-event fd sits in `poll_fds`.
    sockets: usize,
    link_events: Option<LinkEvents>,
    /// A link event drained by `wait` and not yet reported.
    link_event_pending: bool,
    /// Link state and neighbours of the ports' namespace.
    route: RouteSocket,
}

/// Per-port AF_XDP details for logs.
#[derive(Clone, Debug)]
pub struct XskPortInfo {
    /// Interface name.
    pub name: String,
    /// XDP mode the steering program runs in.
    pub xdp_mode: AttachedMode,
    /// `copy` or `zero-copy`, as the kernel reported after the bind.
    pub bind_mode: &'static str,
    /// The RX queues with a socket.
    pub queues: Vec<u32>,
}

fn io_err(ifname: &str, what: &str, e: impl std::fmt::Debug) -> XskError {
    XskError(format!("{ifname}: {what}: {e:?}"))
}

/// `XDP_COPY`, `XDP_ZEROCOPY` and `XDP_USE_NEED_WAKEUP` bind flags.
const XDP_COPY: u16 = SocketConfig::XDP_BIND_COPY;
const XDP_ZEROCOPY: u16 = SocketConfig::XDP_BIND_ZEROCOPY;
const XDP_USE_NEED_WAKEUP: u16 = SocketConfig::XDP_BIND_NEED_WAKEUP;

/// The RX queues each of `ifnames` binds: the configured list (each id
/// checked against the interface's queues where the driver reports them)
/// or all of them.
fn queue_plan(ifnames: &[String], config: &XskConfig) -> Result<Vec<Vec<u32>>, XskError> {
    for name in config.queues.keys() {
        if !ifnames.contains(name) {
            return Err(XskError(format!(
                "queues given for {name}, which is not an interface port of this switch ({})",
                ifnames.join(", ")
            )));
        }
    }
    ifnames
        .iter()
        .map(|name| {
            let count = lcmp_ebpf::sys::rx_queue_count(name)
                .map_err(|e| XskError(format!("{name}: RX queues (ethtool channels): {e}")))?;
            match config.queues.get(name) {
                None => Ok((0..count.unwrap_or(1)).collect()),
                Some(list) => {
                    let max = count.unwrap_or(lcmp_ebpf::MAX_QUEUES);
                    if let Some(q) = list.iter().find(|q| **q >= max) {
                        return Err(XskError(format!(
                            "{name}: queue {q} does not exist: the interface has {max} RX queues (0-{}; `ethtool -l {name}`, `ethtool -L {name} combined N` to change)",
                            max - 1
                        )));
                    }
                    Ok(list.clone())
                }
            }
        })
        .collect()
}

impl XskIo {
    /// Frames a switch with `sockets` AF_XDP sockets needs at least: every
    /// socket's fill ring full, as much again for its RX ring, and its TX
    /// ring ([`XskConfig::frames`] if that is more).
    pub fn frames_needed(sockets: usize, config: &XskConfig) -> usize {
        let ring = config.ring_size.next_power_of_two() as usize;
        let rx_ring = config.rx_ring_size.next_power_of_two() as usize;
        (config.frames as usize).max((rx_ring * 2 + ring) * sockets)
    }

    /// Opens an AF_XDP socket on each configured RX queue of every
    /// interface in `ifnames` (port i = `ifnames[i]`) and attaches the
    /// steering program, over a frame area of its own.
    pub fn open(ifnames: &[String], config: &XskConfig) -> Result<Self, XskError> {
        if ifnames.is_empty() {
            return Err(XskError("no ports given".into()));
        }
        let sockets = queue_plan(ifnames, config)?.iter().map(Vec::len).sum();
        let share = FrameShare::new_area(Self::frames_needed(sockets, config)).map_err(XskError)?;
        Self::open_in(ifnames, config, share)
    }

    /// [`XskIo::open`] over `share` of a frame area that other switches
    /// of the process share: the whole area is registered as this
    /// switch's UMEM, so a frame that arrives over a memory link from
    /// another switch's share can leave by one of these sockets as it is;
    /// the pool starts with the share's chunks. With no interfaces it is
    /// a frame pool without ports (a switch whose links are all memory
    /// links).
    pub fn open_in(
        ifnames: &[String],
        config: &XskConfig,
        share: FrameShare,
    ) -> Result<Self, XskError> {
        let mut route = RouteSocket::open()
            .map_err(|e| XskError(format!("netlink route socket (link state): {e}")))?;
        let ring = config.ring_size.next_power_of_two();
        let rx_ring = config.rx_ring_size.next_power_of_two();
        let area = share.area.clone();
        let free = share.chunks();
        let (umem, ports, zero_copy) = if ifnames.is_empty() {
            (None, Vec::new(), false)
        } else {
            let plan = queue_plan(ifnames, config)?;
            let sockets: usize = plan.iter().map(Vec::len).sum();
            if free.len() < Self::frames_needed(sockets, config) {
                tracing::warn!(
                    frames = free.len(),
                    needed = Self::frames_needed(sockets, config),
                    sockets,
                    "fewer frames than every socket's rings hold: the fill rings share what there is"
                );
            }
            let (u, p, zc) = Self::open_ports(ifnames, &plan, config, &area, &mut route)?;
            (Some(u), p, zc)
        };
        // Without link events the switch still sees carrier changes at its
        // periodic link check, only later: worth a warning, not a failure.
        let link_events = if ports.is_empty() {
            None
        } else {
            LinkEvents::open()
                .inspect_err(|e| {
                    tracing::warn!(
                        "no link events (netlink: {e}): link changes wait for the periodic check"
                    )
                })
                .ok()
        };
        let rx_fds: Vec<i32> = ports
            .iter()
            .flat_map(|p| p.queues.iter().map(|q| q.rx.as_raw_fd()))
            .collect();
        let sockets = rx_fds.len();
        let poll_fds = rx_fds
            .into_iter()
            .chain(link_events.as_ref().map(|l| {
                use std::os::fd::AsRawFd;
                l.as_raw_fd()
            }))
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let mut io = XskIo {
            ports,
            _umem: umem,
            area,
            free,
            fill_size: rx_ring,
            tx_ring: ring,
            zero_copy,
            poll_fds,
            sockets,
            link_events,
            link_event_pending: false,
            route,
        };
        io.refill();
        Ok(io)
    }

    /// Registers `area` as a UMEM, opens a socket on every queue of
    /// `plan` sharing it, in the mode the configuration asks for (falling
    /// back to copy in [`BindMode::Auto`]), and attaches the steering
    /// program to each interface. Returns whether the sockets are
    /// zero-copy.
    fn open_ports(
        ifnames: &[String],
        plan: &[Vec<u32>],
        config: &XskConfig,
        area: &Arc<FrameArea>,
        route: &mut RouteSocket,
    ) -> Result<(Umem, Vec<Port>, bool), XskError> {
        lcmp_ebpf::kernel::check_running().map_err(|e| XskError(e.to_string()))?;
        // Every port's MTU before anything is attached (an interface that
        // does not exist is reported by the socket setup below).
        for name in ifnames {
            let mtu = route.link_by_name(name).ok().and_then(|l| l.mtu);
            if let Some(m) = mtu.filter(|m| *m > MAX_MTU) {
                return Err(XskError(format!(
                    "{name}: MTU {m} is above {MAX_MTU}, the largest whose frames fit an AF_XDP frame here ({MAX_RX_FRAME} bytes of {FRAME_SIZE}): longer frames would be dropped by the socket; lower it with `ip link set dev {name} mtu {MAX_MTU}` (or less)"
                )));
            }
        }
        for (i, a) in ifnames.iter().enumerate() {
            if let Some(j) = ifnames[..i].iter().position(|b| b == a) {
                return Err(XskError(format!(
                    "interface {a} is given for port {j} and port {i}: each port needs its own interface"
                )));
            }
        }
        // Zero-copy needs the driver's own XDP: a generic-mode program
        // sees frames after the driver has handed them to the stack.
        let generic = config.xdp_mode == XdpMode::Generic;
        let ((umem, sockets), zero_copy) = match config.bind_mode {
            BindMode::ZeroCopy if generic => {
                return Err(XskError(
                    "zero-copy needs the driver's XDP (--xdp-mode native or auto), not generic"
                        .into(),
                ))
            }
            BindMode::ZeroCopy => (Self::bind_all(ifnames, plan, config, area, true)?, true),
            BindMode::Copy => (Self::bind_all(ifnames, plan, config, area, false)?, false),
            BindMode::Auto if generic => {
                (Self::bind_all(ifnames, plan, config, area, false)?, false)
            }
            BindMode::Auto => match Self::bind_all(ifnames, plan, config, area, true) {
                Ok(bound) => (bound, true),
                Err(e) => {
                    tracing::info!("zero-copy not available ({e}): every socket in copy mode");
                    (Self::bind_all(ifnames, plan, config, area, false)?, false)
                }
            },
        };
        let mut ports = Vec::new();
        for ((name, queues), ids) in ifnames.iter().zip(sockets).zip(plan) {
            let mut steering = XdpSteering::attach(name, config.xdp_mode)
                .map_err(|e| XskError(format!("{name}: XDP attach: {e}")))?;
            for q in &queues {
                steering
                    .register_socket(q.id, q.rx.as_raw_fd())
                    .map_err(|e| {
                        XskError(format!("{name}: XSKMAP insert (queue {}): {e}", q.id))
                    })?;
            }
            tracing::debug!(port = %name, queues = ?ids, zero_copy, "sockets bound");
            ports.push(Port {
                name: name.clone(),
                queues,
                next_rx: 0,
                ifindex: steering.ifindex(),
                steering,
                mtu_warned: None,
            });
        }
        Ok((umem, ports, zero_copy))
    }

    /// The UMEM over `area` and a bound socket on every queue of `plan`,
    /// port by port, all in zero-copy or all in copy mode.
    fn bind_all(
        ifnames: &[String],
        plan: &[Vec<u32>],
        config: &XskConfig,
        area: &Arc<FrameArea>,
        zero_copy: bool,
    ) -> Result<(Umem, Vec<Vec<Queue>>), XskError> {
        let mode = if zero_copy { "zero-copy" } else { "copy" };
        let ring = config.ring_size.next_power_of_two();
        let rx_ring = config.rx_ring_size.next_power_of_two();
        let umem_config = UmemConfig {
            fill_size: rx_ring,
            complete_size: ring,
            frame_size: FRAME_SIZE,
            headroom: 0,
            flags: 0,
        };
        // SAFETY: the region is a page-aligned mapping that outlives the
        // UMEM: the returned `XskIo` holds the area's `Arc` in a field
        // dropped after the UMEM and every socket. Other switches of the
        // process may register the same memory as their UMEM: the kernel
        // pins the pages once per registration, and a chunk is written
        // only by whoever holds its descriptor (`crate::frames`).
        let umem = unsafe { Umem::new(umem_config, area.region()) }
            .map_err(|e| io_err(&ifnames[0], "UMEM registration", e))?;
        let first_config = SocketConfig {
            rx_size: NonZeroU32::new(rx_ring),
            tx_size: NonZeroU32::new(ring),
            bind_flags: XDP_USE_NEED_WAKEUP | if zero_copy { XDP_ZEROCOPY } else { XDP_COPY },
        };
        // Sockets sharing the UMEM bind with the shared-UMEM flag alone
        // (anything more is EINVAL); they inherit the first one's mode and
        // need-wakeup.
        let shared_config = SocketConfig {
            bind_flags: 0,
            ..first_config.clone()
        };
        let mut ports = Vec::new();
        let mut first = true;
        for (name, ids) in ifnames.iter().zip(plan) {
            let cname = CString::new(name.as_str())
                .map_err(|_| XskError(format!("{name:?}: not an interface name")))?;
            let mut queues = Vec::new();
            for &id in ids {
                let mut info = IfInfo::invalid();
                info.from_name(&cname)
                    .map_err(|e| io_err(name, "no such interface", e))?;
                info.set_queue(id);
                let socket = if first {
                    Socket::with_shared(&info, &umem)
                } else {
                    Socket::new(&info)
                }
                .map_err(|e| io_err(name, "AF_XDP socket", e))?;
                let fill_comp = umem
                    .fq_cq(&socket)
                    .map_err(|e| io_err(name, "fill/completion rings", e))?;
                let user = umem
                    .rx_tx(&socket, if first { &first_config } else { &shared_config })
                    .map_err(|e| io_err(name, "RX/TX rings", e))?;
                // The rings are mapped before the bind: older kernels (Debian
                // 12's 6.1 among them) refuse mmap on a bound socket with
                // EBUSY (it has left its XSK_READY state); newer ones accept
                // either order.
                let rx = user.map_rx().map_err(|e| io_err(name, "map RX ring", e))?;
                let tx = user.map_tx().map_err(|e| io_err(name, "map TX ring", e))?;
                umem.bind(&user).map_err(|e| {
                    if zero_copy && e.get_raw() == libc::EOPNOTSUPP {
                        XskError(format!(
                            "{name}: the driver has no AF_XDP zero-copy (bind of queue {id}: EOPNOTSUPP); --bind-mode copy or auto uses copy mode"
                        ))
                    } else if e.get_raw() == libc::EBUSY {
                        XskError(format!(
                            "{name}: queue {id} already has an AF_XDP socket (EBUSY): another lcmp-switch (or AF_XDP program) uses this interface; `ss -a -f xdp` lists the sockets and their processes"
                        ))
                    } else {
                        io_err(name, &format!("bind ({mode} mode, queue {id})"), e)
                    }
                })?;
                first = false;
                // SAFETY: the socket's fd stays open while `user` lives,
                // which outlives this borrow.
                let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(user.as_raw_fd()) };
                let reported = lcmp_ebpf::xsk_bind_mode(fd).ok();
                if reported.is_some_and(|m| (m == lcmp_ebpf::XskBindMode::ZeroCopy) != zero_copy) {
                    return Err(XskError(format!(
                        "{name}: queue {id}: bound in {} mode, {mode} was asked for",
                        reported.map_or(String::new(), |m| m.to_string())
                    )));
                }
                queues.push(Queue {
                    id,
                    rx,
                    tx,
                    fill_comp,
                    _user: user,
                    in_tx: 0,
                    rx_frames: 0,
                    tx_frames: 0,
                    tx_started: false,
                });
            }
            ports.push(queues);
        }
        Ok((umem, ports))
    }

    /// Per-port details: XDP mode, bind mode and queues.
    pub fn port_info(&self) -> Vec<XskPortInfo> {
        self.ports
            .iter()
            .map(|p| XskPortInfo {
                name: p.name.clone(),
                xdp_mode: p.steering.mode(),
                bind_mode: self.bind_mode(),
                queues: p.queues.iter().map(|q| q.id).collect(),
            })
            .collect()
    }

    fn bind_mode(&self) -> &'static str {
        if self.zero_copy {
            "zero-copy"
        } else {
            "copy"
        }
    }

    /// The steering program's verdict counters of every port.
    pub fn steering(&self) -> impl Iterator<Item = &XdpSteering> {
        self.ports.iter().map(|p| &p.steering)
    }

    /// The route socket of the ports' namespace (neighbour lookups).
    pub fn route(&mut self) -> &mut RouteSocket {
        &mut self.route
    }

    /// Interface index of `port` in the ports' namespace.
    pub fn port_ifindex(&self, port: usize) -> Option<u32> {
        self.ports.get(port).map(|p| p.ifindex)
    }

    /// Frames in the free pool.
    pub fn free_frames(&self) -> usize {
        self.free.len()
    }

    /// Base address of the chunk holding `addr` (RX descriptors may point
    /// past the chunk start).
    #[inline]
    fn chunk(addr: u64) -> u64 {
        addr & !(FRAME_SIZE as u64 - 1)
    }

    /// Keeps every fill ring full from the free pool, and wakes a
    /// zero-copy driver that stopped receiving for want of buffers.
    fn refill(&mut self) {
        for q in self.ports.iter_mut().flat_map(|p| p.queues.iter_mut()) {
            if !self.free.is_empty() {
                let want = self.fill_size.min(self.free.len() as u32);
                let mut w = q.fill_comp.fill(want);
                let n = w.insert(self.free.iter().rev().copied()) as usize;
                w.commit();
                drop(w);
                self.free.truncate(self.free.len() - n);
            }
            // Never set in copy mode: no system call on veth.
            if q.fill_comp.needs_wakeup() {
                q.fill_comp.wake();
            }
        }
    }
}

impl PacketIo for XskIo {
    fn ports(&self) -> usize {
        self.ports.len()
    }

    #[inline]
    fn recv(&mut self, port: usize, out: &mut Vec<Frame>, max: usize) {
        let p = &mut self.ports[port];
        let n = p.queues.len();
        let start = p.next_rx;
        p.next_rx = if start + 1 == n { 0 } else { start + 1 };
        let mut room = max;
        for k in 0..n {
            if room == 0 {
                break;
            }
            let i = if start + k < n {
                start + k
            } else {
                start + k - n
            };
            let q = &mut p.queues[i];
            let mut r = q.rx.receive(room as u32);
            let mut got = 0usize;
            while let Some(d) = r.read() {
                out.push(Frame {
                    addr: d.addr,
                    len: d.len,
                });
                got += 1;
            }
            r.release();
            q.rx_frames += got as u64;
            room -= got;
        }
    }

    #[inline]
    fn frame(&self, f: Frame) -> &[u8] {
        if f.len > FRAME_SIZE {
            return &[];
        }
        // SAFETY: a frame the switch holds is in no kernel ring and no
        // memory link's ring, so no one else writes it while this borrow
        // lives (the area checks the bounds).
        unsafe { self.area.bytes(f.addr, f.len as usize) }
    }

    #[inline]
    fn frame_mut(&mut self, f: Frame) -> &mut [u8] {
        if f.len > FRAME_SIZE {
            return &mut [];
        }
        // SAFETY: as in `frame`; `&mut self` makes this the only borrow of
        // the frame's memory through this switch.
        unsafe { self.area.bytes_mut(f.addr, f.len as usize) }
    }

    fn frame_room_mut(&mut self, f: Frame) -> &mut [u8] {
        // The rest of the frame's own chunk.
        let end = Self::chunk(f.addr) + FRAME_SIZE as u64;
        // SAFETY: as in `frame_mut`: the switch holds the whole chunk.
        unsafe { self.area.bytes_mut(f.addr, (end - f.addr) as usize) }
    }

    #[inline]
    fn send(&mut self, port: usize, frames: &[Frame]) -> usize {
        let q = &mut self.ports[port].queues[0];
        let mut sent = 0usize;
        // A reservation may stop at the ring's cached free count (the
        // consumer index is re-read only when that runs out), so a short
        // one is retried once: the second sees the kernel's progress.
        for _ in 0..2 {
            let rest = &frames[sent..];
            if rest.is_empty() {
                break;
            }
            let mut w = q.tx.transmit(rest.len() as u32);
            let n = w.insert(rest.iter().map(|f| XdpDesc {
                addr: f.addr,
                len: f.len,
                options: 0,
            }));
            w.commit();
            drop(w);
            q.in_tx += n;
            q.tx_frames += u64::from(n);
            sent += n as usize;
            if n == 0 {
                break;
            }
        }
        sent
    }

    fn take_free(&mut self, max: usize, out: &mut Vec<u64>) {
        let n = max.min(self.free.len());
        out.extend(self.free.drain(self.free.len() - n..));
    }

    fn copy_frame(&mut self, from: Frame, to: u64) -> Frame {
        let len = (from.len as usize).min(FRAME_SIZE as usize);
        // SAFETY: the switch holds both chunks: the frame, and the buffer
        // a memory-link peer lent it.
        unsafe { self.area.copy(from.addr, to, len) };
        Frame {
            addr: to,
            len: len as u32,
        }
    }

    fn release(&mut self, frames: &[Frame]) {
        self.free.extend(frames.iter().map(|f| Self::chunk(f.addr)));
    }

    fn flush(&mut self) {
        for p in &mut self.ports {
            let q = &mut p.queues[0];
            if q.in_tx == 0 {
                continue;
            }
            if !self.zero_copy {
                // Copy-mode TX runs inside sendto(), 32 frames per call.
                for _ in 0..=(q.tx.pending() / 32 + 1) {
                    q.tx.wake();
                    if q.tx.pending() == 0 {
                        break;
                    }
                }
            } else if q.tx.needs_wakeup() || !q.tx_started {
                // The driver sends from its own context; it wants a kick
                // only when it went to sleep on an empty ring.
                q.tx.wake();
                q.tx_started = true;
            }
            let mut c = q.fill_comp.complete(q.in_tx);
            let mut n = 0;
            while let Some(addr) = c.read() {
                self.free.push(Self::chunk(addr));
                n += 1;
            }
            c.release();
            drop(c);
            q.in_tx -= n;
        }
        self.refill();
    }

    fn link_up(&mut self, port: usize) -> bool {
        let p = &mut self.ports[port];
        // An interface that is gone (ENODEV) or unreadable is down.
        let Ok(link) = self.route.link(p.ifindex) else {
            return false;
        };
        let mtu = link.mtu.filter(|m| *m > MAX_MTU);
        if mtu.is_some() && mtu != p.mtu_warned {
            tracing::error!(
                port = %p.name,
                "MTU raised to {} above {MAX_MTU}: frames longer than {MAX_RX_FRAME} bytes are dropped by the AF_XDP socket (counted as rx_dropped); lower it again",
                mtu.unwrap_or(0)
            );
        }
        p.mtu_warned = mtu;
        link.is_up()
    }

    fn links_changed(&mut self) -> bool {
        let drained = self.link_events.as_ref().is_some_and(|l| l.drain());
        std::mem::take(&mut self.link_event_pending) || drained
    }

    fn tx_room(&self, port: usize) -> usize {
        // Frames in the TX ring and awaiting completion both hold a slot
        // of the completion ring, which is as large as the TX ring.
        self.tx_ring
            .saturating_sub(self.ports[port].queues[0].in_tx) as usize
    }

    fn add_wake_fd(&mut self, fd: std::os::fd::RawFd) {
        self.poll_fds.push(libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        });
    }

    fn port_stats(&self, port: usize) -> Option<XskStats> {
        let p = self.ports.get(port)?;
        let queues: Vec<XskQueueStats> = p
            .queues
            .iter()
            .map(|q| {
                let s = q.fill_comp.statistics_v2().ok();
                XskQueueStats {
                    queue: q.id,
                    rx_frames: q.rx_frames,
                    tx_frames: q.tx_frames,
                    rx_dropped: s.as_ref().map_or(0, |s| s.rx_dropped),
                    rx_ring_full: s.as_ref().map_or(0, |s| s.rx_ring_full),
                    fill_ring_empty: s.as_ref().map_or(0, |s| s.rx_fill_ring_empty_descs),
                    tx_invalid: s.as_ref().map_or(0, |s| s.tx_invalid_descs),
                }
            })
            .collect();
        let sum = |f: fn(&XskQueueStats) -> u64| queues.iter().map(f).sum();
        Some(XskStats {
            xdp_mode: p.steering.mode().to_string(),
            bind_mode: self.bind_mode().to_string(),
            rx_dropped: sum(|q| q.rx_dropped),
            rx_ring_full: sum(|q| q.rx_ring_full),
            fill_ring_empty: sum(|q| q.fill_ring_empty),
            tx_invalid: sum(|q| q.tx_invalid),
            xdp: p
                .steering
                .counters()
                .map(|c| {
                    c.as_pairs()
                        .iter()
                        .map(|(k, v)| ((*k).to_string(), *v))
                        .collect()
                })
                .unwrap_or_default(),
            queues,
        })
    }
}

impl crate::daemon::PollSet for XskIo {
    fn poll_fds(&mut self) -> &mut [libc::pollfd] {
        &mut self.poll_fds
    }

    fn after_poll(&mut self) {
        // Drain a link event now: left unread, it would keep the next
        // ppoll returning at once until the switch next looks at links.
        if let (Some(l), Some(fd)) = (&self.link_events, self.poll_fds.get(self.sockets)) {
            if fd.revents & libc::POLLIN != 0 {
                self.link_event_pending |= l.drain();
            }
        }
    }
}

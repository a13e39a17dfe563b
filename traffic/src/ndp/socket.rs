//! NDP over the kernel's UDP sockets, for hosts that have no raw NIC (a
//! namespace host): the kernel writes IPv4 and UDP, and the UDP payload is
//! the NDP header and payload exactly as `lcmp_wire::ndp` lays them out, so
//! a rotor ToR recognizes, trims and prioritizes these packets as it does
//! the engine's hosts' frames.
//!
//! The packets are the engine host's (`lcmp_engine::ndp_host`): every NDP
//! packet goes to UDP port [`UDP_PORT`] (the ToR classifies by it), from
//! the flow's entropy port ([`super::udp_sport_of`]): data from the
//! sender's port of the flow, and the receiver's ACKs, NACKs and pulls of
//! the flow from the same port number on its side. So a host receives
//! everything on one socket, ([`Endpoint::local`], 7247), and sends from
//! one socket per source port in use ([`PortPool`]), bound to that port.
//! One process per host address holds port 7247: an NDP sender
//! ([`super::client`]), a receiver ([`super::server`]), or a sender that
//! also receives (`client --serve`).
//!
//! [`NdpOptions`] are the flags both sides share; [`Interrupt`] is what
//! ends a run (SIGINT/SIGTERM in the binary, anything readable in tests).

use std::collections::HashMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};

use lcmp_topology::Scaling;
use lcmp_wire::ndp::{Header, HEADER_LEN};

pub use lcmp_wire::ndp::UDP_PORT;

use super::{NdpParams, DEFAULT_INITIAL_WINDOW, DEFAULT_MIN_RTO_NS, DEFAULT_PAYLOAD};
use crate::client::Destination;
use crate::rocev2::net::{self, Signals};

/// The most payload bytes per packet: what a 1500-byte IPv4 MTU leaves
/// after the IPv4 (20), UDP (8) and NDP (16) headers; the sockets set DF,
/// so a larger datagram would be refused, not fragmented.
pub const MAX_PAYLOAD: u32 = 1500 - 20 - 8 - HEADER_LEN as u32;

/// Source-port sockets a process keeps open at most; past it the least
/// recently used is closed (and opened again when needed).
pub const MAX_PORT_SOCKETS: usize = 4096;

/// Datagrams handled per turn before a loop looks at its other work.
pub(crate) const BATCH: usize = 256;

/// What ends a run: a readable descriptor to wait on, and the signal
/// number once it fired.
pub trait Interrupt {
    fn fd(&self) -> RawFd;
    /// The signal that asks the run to end, if one came.
    fn take(&self) -> Option<i32>;
}

impl Interrupt for Signals {
    fn fd(&self) -> RawFd {
        Signals::fd(self)
    }
    fn take(&self) -> Option<i32> {
        Signals::take(self)
    }
}

/// The NDP flags as given: rates in simulator units and the timeout in the
/// simulator's time, run as the testbed's `scaling` runs its links (as
/// the rocev2 options are).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NdpOptions {
    pub scaling: Scaling,
    /// The host link's rate, bit/s (before scaling): the sender's data
    /// leave at it, and the receiver's pulls are paced by it.
    pub line_rate: f64,
    pub payload: u32,
    pub initial_window: u32,
    /// The retransmission timeout, ms (before dilation).
    pub rto_ms: f64,
}

impl Default for NdpOptions {
    fn default() -> Self {
        NdpOptions {
            scaling: Scaling::NONE,
            line_rate: 100e9,
            payload: DEFAULT_PAYLOAD,
            initial_window: DEFAULT_INITIAL_WINDOW,
            rto_ms: DEFAULT_MIN_RTO_NS as f64 / 1e6,
        }
    }
}

impl NdpOptions {
    /// The transport's parameters as emulated (the timeout dilated) and
    /// the link's emulated rate, bit/s; or one line naming the bad flag.
    pub fn resolve(&self) -> Result<(NdpParams, u64), String> {
        if !(self.scaling.rate.is_finite() && self.scaling.rate > 0.0) {
            return Err(format!(
                "--rate-scale must be a number > 0, got {}",
                self.scaling.rate
            ));
        }
        crate::rocev2::client::check_time_scale(self.scaling.time)?;
        if !(1..=MAX_PAYLOAD).contains(&self.payload) {
            return Err(format!(
                "--payload must be in [1, {MAX_PAYLOAD}] bytes (a 1500-byte MTU), got {}",
                self.payload
            ));
        }
        if self.initial_window == 0 {
            return Err("--initial-window must be at least 1 packet".into());
        }
        if !(self.rto_ms.is_finite() && self.rto_ms > 0.0 && self.rto_ms <= 1e9) {
            return Err(format!(
                "--rto-ms must be a number in (0, 1e9], got {}",
                self.rto_ms
            ));
        }
        let rate = self.scaling.rate_bps(self.line_rate);
        if !(self.line_rate.is_finite() && rate >= 1.0) {
            return Err(format!(
                "--line-rate must be at least 1 bit/s after scaling, got {}",
                self.line_rate
            ));
        }
        let params = NdpParams {
            initial_window: self.initial_window,
            payload: self.payload,
            min_rto_ns: ((self.rto_ms * 1e6).round() as u64).max(1),
        }
        .emulated(&self.scaling);
        params.validate()?;
        Ok((params, rate.round() as u64))
    }
}

/// One source port's socket and when it was last used (the pool's clock).
#[derive(Debug)]
struct PortSocket {
    socket: UdpSocket,
    used: u64,
}

/// Sockets bound to (the host's address, a source port), opened when a
/// port is first used, the least recently used closed past
/// [`MAX_PORT_SOCKETS`].
#[derive(Debug)]
pub struct PortPool {
    local: Ipv4Addr,
    sockets: HashMap<u16, PortSocket>,
    tick: u64,
}

impl PortPool {
    fn new(local: Ipv4Addr) -> PortPool {
        PortPool {
            local,
            sockets: HashMap::new(),
            tick: 0,
        }
    }

    /// The socket of source port `port`, opened if need be.
    pub fn get(&mut self, port: u16) -> io::Result<&UdpSocket> {
        self.tick += 1;
        if !self.sockets.contains_key(&port) {
            if self.sockets.len() >= MAX_PORT_SOCKETS {
                let oldest = self
                    .sockets
                    .iter()
                    .min_by_key(|(_, s)| s.used)
                    .map(|(&p, _)| p);
                if let Some(p) = oldest {
                    self.sockets.remove(&p);
                }
            }
            let socket = net::udp_socket(SocketAddrV4::new(self.local, port))?;
            self.sockets.insert(port, PortSocket { socket, used: 0 });
        }
        let s = self
            .sockets
            .get_mut(&port)
            .ok_or_else(|| io::Error::other("port socket vanished"))?;
        s.used = self.tick;
        Ok(&s.socket)
    }

    /// Sockets open.
    pub fn open(&self) -> usize {
        self.sockets.len()
    }
}

/// A host's NDP sockets: port 7247 for everything it receives, and its
/// source ports for what it sends.
#[derive(Debug)]
pub struct Endpoint {
    listen: UdpSocket,
    local: Ipv4Addr,
    ports: PortPool,
}

impl Endpoint {
    /// Binds ([`Endpoint::local`] = `local`, [`UDP_PORT`]).
    pub fn bind(local: Ipv4Addr) -> Result<Endpoint, String> {
        if local.is_unspecified() {
            return Err("NDP needs a specific IPv4 address (its answers are sent from it)".into());
        }
        let listen = net::udp_socket(SocketAddrV4::new(local, UDP_PORT)).map_err(|e| {
            format!(
                "cannot bind {local}:{UDP_PORT} ({e}); another NDP sender or receiver on this address? one process per address holds the NDP port"
            )
        })?;
        Ok(Endpoint {
            listen,
            local,
            ports: PortPool::new(local),
        })
    }

    /// The endpoint of a sender to `dsts` (IPv4, port 7247): bound to the
    /// address the routing table picks for them (one for all).
    pub fn for_receivers(dsts: &[Destination]) -> Result<Endpoint, String> {
        let mut local = None;
        for d in dsts {
            let SocketAddr::V4(a) = d.addr else {
                return Err(format!("--dst {}: ndp runs over IPv4 only", d.name));
            };
            if a.port() != UDP_PORT {
                return Err(format!(
                    "--dst {}={a}: NDP goes to port {UDP_PORT} (the port switches trim), not {}",
                    d.name,
                    a.port()
                ));
            }
            let src = net::source_for(*a.ip())
                .map_err(|e| format!("--dst {}: no route to {}: {e}", d.name, a.ip()))?;
            match local {
                None => local = Some(src),
                Some(l) if l != src => {
                    return Err(format!(
                        "the receivers need different source addresses ({l}, {src}); one client sends from one address"
                    ))
                }
                Some(_) => {}
            }
        }
        Endpoint::bind(local.ok_or("no --dst given: at least one NAME=ADDR:PORT is required")?)
    }

    /// The host's address.
    pub fn local(&self) -> Ipv4Addr {
        self.local
    }

    /// The descriptor a loop waits on.
    pub fn fd(&self) -> RawFd {
        self.listen.as_raw_fd()
    }

    /// Source-port sockets open.
    pub fn port_sockets(&self) -> usize {
        self.ports.open()
    }

    /// Opens (or keeps) the socket of source port `port`.
    pub fn open_port(&mut self, port: u16) -> io::Result<()> {
        self.ports.get(port).map(drop)
    }

    /// One datagram received on port 7247 into `buf`: its length and
    /// sender; `Ok(None)` when none waits.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<(usize, SocketAddrV4)>> {
        Ok(net::recv_tos(&self.listen, buf)?.map(|r| (r.len, r.from)))
    }

    /// Sends `datagram` from source port `sport` to (`dst`, 7247).
    pub fn send(&mut self, sport: u16, dst: Ipv4Addr, datagram: &[u8]) -> io::Result<()> {
        let s = self.ports.get(sport)?;
        s.send_to(datagram, SocketAddrV4::new(dst, UDP_PORT))
            .map(drop)
    }
}

/// Writes `header` followed by `payload_len` bytes into `buf` (cleared
/// first): a UDP payload; returns the payload's bytes for the caller to
/// fill.
pub fn encode<'a>(buf: &'a mut Vec<u8>, header: &Header, payload_len: usize) -> &'a mut [u8] {
    buf.clear();
    buf.extend_from_slice(&header.to_bytes());
    buf.resize(HEADER_LEN + payload_len, 0);
    &mut buf[HEADER_LEN..]
}

/// The NDP header and payload of a received UDP payload, or `None` if it
/// is not one.
pub fn decode(datagram: &[u8]) -> Option<(Header, &[u8])> {
    let header = Header::parse(datagram).ok()?;
    Some((header, datagram.get(HEADER_LEN..).unwrap_or(&[])))
}

/// Whether `e` means the packet was lost below us (the socket's queue was
/// full), which the transport recovers, rather than a lasting fault.
pub(crate) fn transient(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOBUFS | libc::EAGAIN))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lcmp_wire::ndp::{Kind, FLAG_LAST};

    #[test]
    fn datagrams_round_trip_and_garbage_is_refused() {
        let h = Header {
            kind: Kind::Data,
            flags: FLAG_LAST,
            flow: 9,
            seq: 2,
            value: 3,
        };
        let mut buf = Vec::new();
        encode(&mut buf, &h, 5).copy_from_slice(b"hello");
        // 16 header bytes, then the payload.
        assert_eq!(buf.len(), 21);
        assert_eq!(&buf[..4], &[0, FLAG_LAST, 0, 0]);
        let (back, payload) = decode(&buf).unwrap();
        assert_eq!((back, payload), (h, &b"hello"[..]));
        // A header alone (a trimmed packet, a control packet): no payload.
        assert_eq!(decode(&buf[..16]).unwrap().1, b"");
        assert!(decode(&buf[..15]).is_none());
        buf[0] = 9;
        assert!(decode(&buf).is_none());
    }

    #[test]
    fn options_scale_and_name_the_bad_flag() {
        let o = NdpOptions {
            scaling: Scaling {
                time: 10.0,
                ..Scaling::rates(1000.0)
            },
            line_rate: 100e9,
            ..NdpOptions::default()
        };
        let (p, rate) = o.resolve().unwrap();
        // 100G / (1000 x 10) = 10 Mbit/s; 1 ms x 10.
        assert_eq!((rate, p.min_rto_ns), (10_000_000, 10_000_000));
        assert_eq!((p.payload, p.initial_window), (1442, 20));
        for (edit, flag) in [
            (
                (|o: &mut NdpOptions| o.payload = 1457) as fn(&mut NdpOptions),
                "--payload",
            ),
            (|o| o.payload = 0, "--payload"),
            (|o| o.initial_window = 0, "--initial-window"),
            (|o| o.rto_ms = 0.0, "--rto-ms"),
            (|o| o.line_rate = f64::NAN, "--line-rate"),
            (|o| o.scaling.time = -1.0, "--time-scale"),
            (|o| o.scaling.rate = 0.0, "--rate-scale"),
        ] {
            let mut bad = NdpOptions::default();
            edit(&mut bad);
            assert!(bad.resolve().unwrap_err().contains(flag), "{flag}");
        }
    }

    #[test]
    fn a_port_is_one_socket() {
        let mut pool = PortPool::new(Ipv4Addr::LOCALHOST);
        let a = pool.get(0).unwrap().local_addr().unwrap();
        assert_eq!(a.ip(), std::net::IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert_eq!(pool.open(), 1);
        pool.get(0).unwrap();
        assert_eq!(pool.open(), 1);
    }
}

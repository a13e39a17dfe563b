//! Traffic helpers: ping, iperf3, a checked TCP transfer and a sequenced,
//! timestamped UDP sender/receiver for ordering and loss checks.
//!
//! The Rust senders and receivers run on threads that joined the host's
//! namespace with `setns` ([`Netns::run_in`], [`Netns::spawn_thread`]).
//! UDP probes carry a `CLOCK_REALTIME` send timestamp and the receiver uses
//! the kernel's receive timestamp, so one-way delays are exact to the
//! nanosecond clock and free of the receiver's wake-up latency.

use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::netns::{Bg, Netns};
use crate::{Error, Result};

/// Result of [`ping`].
#[derive(Debug, Clone, PartialEq)]
pub struct PingStats {
    /// Echo requests sent.
    pub transmitted: u32,
    /// Replies received.
    pub received: u32,
    /// Round-trip times of the replies, milliseconds, in arrival order.
    pub rtts_ms: Vec<f64>,
    /// Smallest RTT (ms), 0 if none.
    pub min_ms: f64,
    /// Mean RTT (ms), 0 if none.
    pub avg_ms: f64,
    /// Largest RTT (ms), 0 if none.
    pub max_ms: f64,
}

impl PingStats {
    /// The `q`-quantile (0..=1) of the RTTs in ms ([`quantile`], type 7).
    pub fn quantile_ms(&self, q: f64) -> Option<f64> {
        quantile(&self.rtts_ms, q)
    }
}

pub use lcmp_stats::quantile;

/// Pings `dst` from namespace `ns` `count` times, `interval` apart (root
/// may go below 200 ms), waiting up to 2 s for the last reply. Lost replies
/// are not an error: check `received`.
pub fn ping(ns: &Netns, dst: IpAddr, count: u32, interval: Duration) -> Result<PingStats> {
    ping_waiting(ns, dst, count, interval, Duration::from_secs(2))
}

/// [`ping`] waiting up to `wait` (whole seconds, at least 1) for the last
/// reply, for paths whose RTT approaches or exceeds ping's usual 2 s.
pub fn ping_waiting(
    ns: &Netns,
    dst: IpAddr,
    count: u32,
    interval: Duration,
    wait: Duration,
) -> Result<PingStats> {
    let fam = if dst.is_ipv4() { "-4" } else { "-6" };
    let c = count.to_string();
    let i = format!("{:.3}", interval.as_secs_f64());
    let d = dst.to_string();
    let w = wait.as_secs_f64().ceil().max(1.0) as u64;
    let timeout = interval * count + Duration::from_secs(15 + w);
    let out = ns.exec_output(
        &[
            "ping",
            fam,
            "-n",
            "-c",
            &c,
            "-i",
            &i,
            "-W",
            &w.to_string(),
            &d,
        ],
        timeout,
    )?;
    let stats = parse_ping(&out.stdout);
    if stats.transmitted == 0 {
        return Err(Error::new(format!(
            "ping {d} from {}: no summary ({}): {}",
            ns.name(),
            out.status,
            out.stderr.trim()
        )));
    }
    Ok(stats)
}

/// Parses iputils `ping` output.
pub fn parse_ping(text: &str) -> PingStats {
    let mut s = PingStats {
        transmitted: 0,
        received: 0,
        rtts_ms: Vec::new(),
        min_ms: 0.0,
        avg_ms: 0.0,
        max_ms: 0.0,
    };
    for line in text.lines() {
        if let Some(pos) = line.find("time=") {
            let v = line[pos + 5..].split_whitespace().next().unwrap_or("");
            if let Ok(ms) = v.parse::<f64>() {
                s.rtts_ms.push(ms);
            }
        } else if line.contains("packets transmitted") {
            let mut it = line.split(',').map(str::trim);
            let first_num = |p: Option<&str>| -> u32 {
                p.and_then(|p| p.split_whitespace().next())
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0)
            };
            s.transmitted = first_num(it.next());
            s.received = first_num(it.next());
        } else if let Some(rest) = line.split(" = ").nth(1).filter(|_| line.starts_with("rtt")) {
            let nums: Vec<f64> = rest
                .split_whitespace()
                .next()
                .unwrap_or("")
                .split('/')
                .filter_map(|n| n.parse().ok())
                .collect();
            if nums.len() >= 3 {
                (s.min_ms, s.avg_ms, s.max_ms) = (nums[0], nums[1], nums[2]);
            }
        }
    }
    s
}

/// Waits until something in `ns` listens on TCP `port`.
pub fn wait_tcp_listen(ns: &Netns, port: u16, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    let filter = format!("sport = :{port}");
    loop {
        let out = ns.exec(&["ss", "-H", "-l", "-t", "-n", &filter])?;
        if !out.trim().is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(Error::new(format!(
                "nothing listens on TCP port {port} in {} after {timeout:?}",
                ns.name()
            )));
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// Starts a one-shot `iperf3` server (`-s -1`) on `port` in `ns` and waits
/// until it listens. Drop the handle to stop it.
pub fn iperf3_server(ns: &Netns, port: u16) -> Result<Bg> {
    let p = port.to_string();
    let bg = ns.spawn(&["iperf3", "-s", "-1", "-p", &p])?;
    wait_tcp_listen(ns, port, Duration::from_secs(10))?;
    Ok(bg)
}

/// The numbers of an iperf3 TCP test.
#[derive(Debug, Clone, PartialEq)]
pub struct IperfResult {
    /// Receiver-side throughput (`end.sum_received.bits_per_second`).
    pub bits_per_second: f64,
    /// Bytes the receiver got (`end.sum_received.bytes`).
    pub bytes_received: u64,
    /// Bytes the sender sent (`end.sum_sent.bytes`).
    pub bytes_sent: u64,
    /// Sender retransmissions, where reported.
    pub retransmits: Option<u64>,
}

/// What [`iperf3_client`] reads of `iperf3 -J` output (the rest is
/// ignored). A failed run has `error`, and `end` empty or missing.
#[derive(Deserialize)]
struct IperfJson {
    error: Option<String>,
    #[serde(default)]
    end: IperfEnd,
}

#[derive(Deserialize, Default)]
struct IperfEnd {
    #[serde(default)]
    sum_received: IperfSum,
    #[serde(default)]
    sum_sent: IperfSum,
}

#[derive(Deserialize, Default)]
struct IperfSum {
    bits_per_second: Option<f64>,
    bytes: Option<u64>,
    /// Only the sender's sum has it, and only where the kernel reports it.
    retransmits: Option<u64>,
}

/// Runs an iperf3 TCP client in `ns` against `server:port` for `secs`
/// seconds (`-J` output parsed); `extra` adds arguments (e.g. `["-P",
/// "4"]`).
pub fn iperf3_client(
    ns: &Netns,
    server: IpAddr,
    port: u16,
    secs: u32,
    extra: &[&str],
) -> Result<IperfResult> {
    let s = server.to_string();
    let p = port.to_string();
    let t = secs.to_string();
    let mut args = vec!["iperf3", "-J", "-c", &s, "-p", &p, "-t", &t];
    args.extend_from_slice(extra);
    let out = ns.exec_output(&args, Duration::from_secs(u64::from(secs) + 60))?;
    parse_iperf3(&out.stdout, &out.stderr)
}

/// The result in `iperf3 -J` output `stdout` (`stderr` only goes into the
/// error when that is not iperf3's JSON). Judge a run by this, not by the
/// exit status: iperf3 3.12 with `-J` exits 0 on "Connection refused".
pub fn parse_iperf3(stdout: &str, stderr: &str) -> Result<IperfResult> {
    let v: IperfJson = serde_json::from_str(stdout).map_err(|e| {
        Error::new(format!(
            "iperf3 output: {e}: {}{stderr}",
            stdout.chars().take(400).collect::<String>(),
        ))
    })?;
    if let Some(err) = v.error {
        return Err(Error::new(format!("iperf3: {err}")));
    }
    let (recv, sent) = (v.end.sum_received, v.end.sum_sent);
    let bits_per_second = recv
        .bits_per_second
        .ok_or_else(|| Error::new("iperf3: no end.sum_received.bits_per_second"))?;
    Ok(IperfResult {
        bits_per_second,
        bytes_received: recv.bytes.unwrap_or(0),
        bytes_sent: sent.bytes.unwrap_or(0),
        retransmits: sent.retransmits,
    })
}

/// A deterministic byte stream (xorshift64*), so the receiver can check
/// every byte without keeping a copy.
#[derive(Debug, Clone)]
pub struct PatternStream {
    state: u64,
    buf: [u8; 8],
    pos: usize,
}

impl PatternStream {
    /// A stream seeded with `seed` (any value).
    pub fn new(seed: u64) -> PatternStream {
        PatternStream {
            state: seed | 1,
            buf: [0; 8],
            pos: 8,
        }
    }

    /// Fills `out` with the next bytes.
    pub fn fill(&mut self, out: &mut [u8]) {
        for b in out {
            if self.pos == 8 {
                self.state ^= self.state >> 12;
                self.state ^= self.state << 25;
                self.state ^= self.state >> 27;
                self.buf = self.state.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes();
                self.pos = 0;
            }
            *b = self.buf[self.pos];
            self.pos += 1;
        }
    }
}

/// Result of [`tcp_transfer`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferReport {
    /// Bytes the receiver got.
    pub received: u64,
    /// Whether every received byte matched the sent pattern and the count
    /// equals what was sent.
    pub intact: bool,
    /// Offset of the first mismatching byte, if any.
    pub first_mismatch: Option<u64>,
    /// Time from connect to the receiver seeing EOF.
    pub elapsed: Duration,
}

/// Sends `bytes` of a pseudo-random pattern over TCP from namespace `from`
/// to a listener on `dst:port` in namespace `to`, and checks every byte at
/// the receiver. Fails if it takes longer than `timeout`.
pub fn tcp_transfer(
    from: &Netns,
    to: &Netns,
    dst: IpAddr,
    port: u16,
    bytes: u64,
    timeout: Duration,
) -> Result<TransferReport> {
    const SEED: u64 = 0x1c3d_5e7f_9a0b_2c4d;
    let deadline = Instant::now() + timeout;
    let (ready_tx, ready_rx) = mpsc::channel();
    let receiver = to.spawn_thread(move || -> io::Result<TransferReport> {
        let listener = match TcpListener::bind(SocketAddr::new(dst, port)) {
            Ok(l) => l,
            Err(e) => {
                let _ = ready_tx.send(Err(e.to_string()));
                return Err(e);
            }
        };
        let _ = ready_tx.send(Ok(()));
        listener.set_nonblocking(true)?;
        let (mut conn, _) = loop {
            match listener.accept() {
                Ok(c) => break c,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        return Err(io::Error::new(io::ErrorKind::TimedOut, "no connection"));
                    }
                    thread::sleep(Duration::from_millis(5));
                }
                Err(e) => return Err(e),
            }
        };
        let start = Instant::now();
        conn.set_nonblocking(false)?;
        conn.set_read_timeout(Some(Duration::from_millis(200)))?;
        let mut pattern = PatternStream::new(SEED);
        let mut buf = vec![0u8; 64 * 1024];
        let mut expect = vec![0u8; 64 * 1024];
        let mut received = 0u64;
        let mut first_mismatch = None;
        loop {
            let n = match conn.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    if Instant::now() >= deadline {
                        return Err(io::Error::new(io::ErrorKind::TimedOut, "transfer stalled"));
                    }
                    continue;
                }
                Err(e) => return Err(e),
            };
            pattern.fill(&mut expect[..n]);
            if first_mismatch.is_none() && buf[..n] != expect[..n] {
                let i = buf[..n].iter().zip(&expect[..n]).position(|(a, b)| a != b);
                first_mismatch = Some(received + i.unwrap_or(0) as u64);
            }
            received += n as u64;
        }
        Ok(TransferReport {
            received,
            intact: first_mismatch.is_none() && received == bytes,
            first_mismatch,
            elapsed: start.elapsed(),
        })
    });
    match ready_rx.recv_timeout(Duration::from_secs(10)) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(Error::new(format!("receiver bind {dst}:{port}: {e}"))),
        Err(_) => {
            return Err(Error::new(
                receiver
                    .join()
                    .map(|r| format!("receiver did not start: {r:?}"))
                    .unwrap_or_else(|_| "receiver panicked".into()),
            ))
        }
    }
    let sent = from.run_in(move || -> io::Result<u64> {
        let mut conn =
            TcpStream::connect_timeout(&SocketAddr::new(dst, port), Duration::from_secs(10))?;
        conn.set_write_timeout(Some(timeout))?;
        let mut pattern = PatternStream::new(SEED);
        let mut buf = vec![0u8; 64 * 1024];
        let mut left = bytes;
        while left > 0 {
            let n = left.min(buf.len() as u64) as usize;
            pattern.fill(&mut buf[..n]);
            conn.write_all(&buf[..n])?;
            left -= n as u64;
        }
        conn.shutdown(std::net::Shutdown::Write)?;
        Ok(bytes)
    })?;
    let report = receiver
        .join()
        .map_err(|_| Error::new("TCP receiver panicked"))??;
    sent.map_err(|e| Error::new(format!("TCP sender: {e}")))?;
    report.map_err(|e| Error::new(format!("TCP receiver: {e}")))
}

/// Wall-clock time (`CLOCK_REALTIME`) in ns: the clock of the kernel's
/// receive timestamps, shared by every process and namespace of the
/// machine.
pub fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Header of a [`udp_send`] packet: sequence number (big-endian u64) and
/// send time, `CLOCK_REALTIME` ns (big-endian u64), taken just before the
/// `send` call.
pub const UDP_HEADER: usize = 16;

/// What [`udp_send`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpSendReport {
    /// Packets handed to the socket.
    pub sent: u64,
    /// Sends that failed (e.g. ENOBUFS), not counted in `sent`.
    pub errors: u64,
    /// Wall time.
    pub elapsed: Duration,
}

/// Sends `count` UDP packets with sequence numbers 0.. from namespace `ns`
/// to `dst`, each `payload` bytes (at least 16), paced `gap` apart on an
/// absolute schedule (`Duration::ZERO`: back to back; beware the 256-frame
/// veth XDP ring). `src_port` 0 lets the kernel choose.
pub fn udp_send(
    ns: &Netns,
    dst: SocketAddr,
    src_port: u16,
    count: u64,
    payload: usize,
    gap: Duration,
) -> Result<UdpSendReport> {
    // One flow of `count` rounds is exactly this.
    udp_send_flows(
        ns,
        &[dst],
        &[src_port],
        0,
        count,
        payload,
        gap,
        Duration::ZERO,
    )
}

/// Sends `rounds` rounds of UDP packets from namespace `ns`, one flow per
/// (source port in `src_ports`, destination in `dsts`): round `r` sends
/// sequence number `first_seq + r` on every flow in turn (destinations
/// innermost, so consecutive packets spread over them), each packet
/// `payload` bytes (at least 16, same header as [`udp_send`]), consecutive
/// packets `gap` apart on an absolute schedule: a sender that falls behind
/// (a busy CPU) catches up instead of drifting below its rate. Packets due
/// within `slack` of now leave at once, so a fast sender wakes once per
/// `slack` rather than once per packet (`Duration::ZERO`: every packet at
/// its time). Many light flows at once, in a fixed order.
#[allow(clippy::too_many_arguments)]
pub fn udp_send_flows(
    ns: &Netns,
    dsts: &[SocketAddr],
    src_ports: &[u16],
    first_seq: u64,
    rounds: u64,
    payload: usize,
    gap: Duration,
    slack: Duration,
) -> Result<UdpSendReport> {
    let payload = payload.max(UDP_HEADER);
    let ports = src_ports.to_vec();
    let dsts = dsts.to_vec();
    let Some(&first) = dsts.first() else {
        return Err(Error::new("UDP sender: no destination"));
    };
    let to = if dsts.len() == 1 {
        first.to_string()
    } else {
        format!("{} destinations", dsts.len())
    };
    ns.run_in(move || -> io::Result<UdpSendReport> {
        // Sleeps end within a few microseconds of the schedule, not the
        // default 50 us timer slack later.
        // SAFETY: prctl(2) PR_SET_TIMERSLACK only changes this thread's
        // timer slack; failure leaves the default.
        unsafe {
            libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
        }
        let unspecified = if first.is_ipv4() {
            IpAddr::from([0u8; 4])
        } else {
            IpAddr::from([0u16; 8])
        };
        let socks = ports
            .iter()
            .map(|&p| {
                let s = UdpSocket::bind(SocketAddr::new(unspecified, p))?;
                // One destination: connected, so the route is looked up once.
                if dsts.len() == 1 {
                    s.connect(first)?;
                }
                Ok(s)
            })
            .collect::<io::Result<Vec<UdpSocket>>>()?;
        let mut buf = vec![0u8; payload];
        for (i, b) in buf.iter_mut().enumerate().skip(UDP_HEADER) {
            *b = i as u8;
        }
        let start = Instant::now();
        let (mut sent, mut errors, mut n) = (0, 0, 0u32);
        for round in 0..rounds {
            let seq = first_seq + round;
            for sock in &socks {
                for dst in &dsts {
                    if !gap.is_zero() {
                        let due = start + gap * n;
                        let now = Instant::now();
                        if due > now + slack {
                            thread::sleep(due - now);
                        }
                    }
                    n = n.saturating_add(1);
                    buf[..8].copy_from_slice(&seq.to_be_bytes());
                    buf[8..16].copy_from_slice(&realtime_ns().to_be_bytes());
                    let r = if dsts.len() == 1 {
                        sock.send(&buf)
                    } else {
                        sock.send_to(&buf, dst)
                    };
                    match r {
                        Ok(_) => sent += 1,
                        Err(_) => errors += 1,
                    }
                }
            }
        }
        Ok(UdpSendReport {
            sent,
            errors,
            elapsed: start.elapsed(),
        })
    })?
    .map_err(|e| Error::new(format!("UDP sender to {to}: {e}")))
}

/// One received [`udp_send`] packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpArrival {
    /// Its sequence number.
    pub seq: u64,
    /// Sender's UDP source port (tells flows apart).
    pub src_port: u16,
    /// One-way delay, ns: the kernel's receive timestamp of the packet
    /// (`SO_TIMESTAMPNS`, taken when the sink's veth hands it to the
    /// stack, so the receiver's wake-up is not included; the thread's clock
    /// if the kernel gave none) minus the send timestamp.
    pub delay_ns: u64,
    /// The send timestamp the packet carries (`CLOCK_REALTIME` ns).
    pub sent_ns: u64,
}

impl UdpArrival {
    /// The receive time, `CLOCK_REALTIME` ns (kernel timestamp).
    pub fn rx_ns(&self) -> u64 {
        self.sent_ns + self.delay_ns
    }
}

/// Summary of what a [`UdpReceiver`] got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpReport {
    /// Every arrival, in arrival order.
    pub arrivals: Vec<UdpArrival>,
    /// Distinct (source port, sequence) pairs.
    pub unique: u64,
    /// Arrivals of a pair already seen.
    pub duplicates: u64,
    /// Arrivals whose sequence number is below the highest seen so far from
    /// the same source port (out of order).
    pub reordered: u64,
}

impl UdpReport {
    /// Packets of `sent` (sequence 0..sent per flow, `flows` source ports)
    /// that never arrived.
    pub fn lost(&self, sent_per_flow: u64, flows: u64) -> u64 {
        (sent_per_flow * flows).saturating_sub(self.unique)
    }

    /// The `q`-quantile of one-way delays in microseconds.
    pub fn delay_quantile_us(&self, q: f64) -> Option<f64> {
        let d: Vec<f64> = self
            .arrivals
            .iter()
            .map(|a| a.delay_ns as f64 / 1e3)
            .collect();
        quantile(&d, q)
    }
}

/// A UDP receiver on a thread inside a namespace, recording sequence
/// numbers and one-way delays of [`udp_send`] packets.
#[derive(Debug)]
pub struct UdpReceiver {
    handle: Option<JoinHandle<Result<io::Result<Vec<UdpArrival>>>>>,
    stop: Arc<AtomicBool>,
    last_rx: Arc<std::sync::Mutex<Instant>>,
}

impl UdpReceiver {
    /// Binds `bind` inside `ns` (returns once bound) and starts receiving.
    pub fn start(ns: &Netns, bind: SocketAddr) -> Result<UdpReceiver> {
        let stop = Arc::new(AtomicBool::new(false));
        let last_rx = Arc::new(std::sync::Mutex::new(Instant::now()));
        let (ready_tx, ready_rx) = mpsc::channel();
        let (stop2, last2) = (stop.clone(), last_rx.clone());
        let handle = ns.spawn_thread(move || -> io::Result<Vec<UdpArrival>> {
            let sock = match UdpSocket::bind(bind) {
                Ok(s) => s,
                Err(e) => {
                    let _ = ready_tx.send(Err(e.to_string()));
                    return Err(e);
                }
            };
            // A deep receive buffer: bursts must not overflow the socket.
            set_rcvbuf(&sock, 8 << 20);
            enable_rx_timestamps(&sock);
            sock.set_read_timeout(Some(Duration::from_millis(20)))?;
            let _ = ready_tx.send(Ok(()));
            let mut out = Vec::new();
            let mut buf = vec![0u8; 65536];
            // After the stop flag: one more pass that drains what the
            // socket already holds (a starved thread must not lose it).
            let mut draining = false;
            loop {
                if !draining && stop2.load(Ordering::Relaxed) {
                    draining = true;
                    sock.set_nonblocking(true)?;
                }
                match recv_timestamped(&sock, &mut buf) {
                    Ok((n, src_port, rx_ns)) if n >= UDP_HEADER => {
                        let seq = u64::from_be_bytes(buf[..8].try_into().expect("8 bytes"));
                        let ts = u64::from_be_bytes(buf[8..16].try_into().expect("8 bytes"));
                        out.push(UdpArrival {
                            seq,
                            src_port,
                            delay_ns: rx_ns.saturating_sub(ts),
                            sent_ns: ts,
                        });
                        if let Ok(mut l) = last2.lock() {
                            *l = Instant::now();
                        }
                    }
                    Ok(_) => {}
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                        ) =>
                    {
                        if draining {
                            break;
                        }
                    }
                    Err(e) => return Err(e),
                }
            }
            Ok(out)
        });
        match ready_rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(())) => Ok(UdpReceiver {
                handle: Some(handle),
                stop,
                last_rx,
            }),
            Ok(Err(e)) => Err(Error::new(format!("UDP receiver bind {bind}: {e}"))),
            Err(_) => Err(Error::new(format!(
                "UDP receiver in {} did not start",
                ns.name()
            ))),
        }
    }

    /// Waits until nothing has arrived for `quiet` (at most `max_wait`),
    /// stops the receiver and summarises.
    pub fn finish(mut self, quiet: Duration, max_wait: Duration) -> Result<UdpReport> {
        let deadline = Instant::now() + max_wait;
        loop {
            let last = *self.last_rx.lock().expect("not poisoned");
            if last.elapsed() >= quiet || Instant::now() >= deadline {
                break;
            }
            thread::sleep(Duration::from_millis(10));
        }
        self.stop.store(true, Ordering::Relaxed);
        let arrivals = self
            .handle
            .take()
            .expect("finished once")
            .join()
            .map_err(|_| Error::new("UDP receiver panicked"))??
            .map_err(|e| Error::new(format!("UDP receiver: {e}")))?;
        Ok(summarise(arrivals))
    }
}

impl Drop for UdpReceiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn summarise(arrivals: Vec<UdpArrival>) -> UdpReport {
    use std::collections::{HashMap, HashSet};
    let mut seen = HashSet::new();
    let mut highest: HashMap<u16, u64> = HashMap::new();
    let (mut duplicates, mut reordered) = (0, 0);
    for a in &arrivals {
        if !seen.insert((a.src_port, a.seq)) {
            duplicates += 1;
            continue;
        }
        let h = highest.entry(a.src_port).or_insert(a.seq);
        if a.seq < *h {
            reordered += 1;
        } else {
            *h = a.seq;
        }
    }
    UdpReport {
        unique: seen.len() as u64,
        arrivals,
        duplicates,
        reordered,
    }
}

fn set_rcvbuf(sock: &UdpSocket, bytes: i32) {
    use std::os::fd::AsRawFd;
    // SAFETY: setsockopt(2) on a socket we own, with a pointer to an i32
    // that lives for the call and its exact size. Failure is harmless.
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            (&bytes as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        );
    }
}

fn enable_rx_timestamps(sock: &UdpSocket) {
    use std::os::fd::AsRawFd;
    let on: i32 = 1;
    // SAFETY: setsockopt(2) on a socket we own, with a pointer to an i32
    // that lives for the call and its exact size. Failure only means no
    // kernel timestamps (the receiver then uses its own clock).
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        );
    }
}

/// `recvmsg` with the kernel's receive timestamp: (bytes, source port,
/// receive time in `CLOCK_REALTIME` ns; the current time if the kernel
/// attached no `SCM_TIMESTAMPNS`).
fn recv_timestamped(sock: &UdpSocket, buf: &mut [u8]) -> io::Result<(usize, u16, u64)> {
    use std::os::fd::AsRawFd;
    // SAFETY: all-zero bytes are a valid sockaddr_storage.
    let mut src: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let (n, rx_ns) = recvmsg_timestamped(sock.as_raw_fd(), buf, &mut src)?;
    let port = match i32::from(src.ss_family) {
        // SAFETY: the family says the storage holds a sockaddr_in.
        libc::AF_INET => u16::from_be(unsafe {
            (*(&src as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>()).sin_port
        }),
        // SAFETY: the family says the storage holds a sockaddr_in6.
        libc::AF_INET6 => u16::from_be(unsafe {
            (*(&src as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>()).sin6_port
        }),
        _ => 0,
    };
    Ok((n, port, rx_ns))
}

/// `recvmsg(2)` on `fd` into `buf`, the sender's address into `src`, with
/// the kernel's receive timestamp (`CLOCK_REALTIME` ns; the current time if
/// the kernel attached no `SCM_TIMESTAMPNS`).
fn recvmsg_timestamped(
    fd: std::os::fd::RawFd,
    buf: &mut [u8],
    src: &mut libc::sockaddr_storage,
) -> io::Result<(usize, u64)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // u64 elements keep the control buffer aligned for cmsghdr.
    let mut control = [0u64; 16];
    // SAFETY: all-zero bytes are a valid msghdr.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = (src as *mut libc::sockaddr_storage).cast();
    msg.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control);
    // SAFETY: `msg` points at `iov` (into `buf`), `src` and `control`, all
    // alive and writable for the call, with their true sizes.
    let n = unsafe { libc::recvmsg(fd, &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut rx_ns = None;
    // SAFETY: the CMSG_* macros walk the control buffer the kernel filled,
    // bounded by `msg.msg_controllen`; CMSG_DATA of an SCM_TIMESTAMPNS
    // message holds a struct timespec, read unaligned.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                rx_ns = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, rx_ns.unwrap_or_else(realtime_ns)))
}

/// A frame seen by a [`FrameCapture`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapturedFrame {
    /// Kernel receive timestamp, `CLOCK_REALTIME` ns.
    pub rx_ns: u64,
    /// Its source MAC address.
    pub src_mac: [u8; 6],
}

/// Captures the Ethernet headers of incoming IPv4/UDP frames to one port
/// on an interface inside a namespace (an `AF_PACKET` socket on a thread),
/// with kernel receive timestamps: what a UDP socket cannot see, such as
/// the source MAC.
#[derive(Debug)]
pub struct FrameCapture {
    handle: Option<JoinHandle<Result<io::Result<Vec<CapturedFrame>>>>>,
    stop: Arc<AtomicBool>,
}

/// The UDP destination port of an untagged Ethernet/IPv4/UDP frame.
fn udp_dport(frame: &[u8]) -> Option<u16> {
    let ip = frame.get(14..)?;
    if frame.get(12..14)? != [0x08, 0x00] || ip.first()? >> 4 != 4 || *ip.get(9)? != 17 {
        return None;
    }
    let l4 = ip.get(usize::from(ip[0] & 0x0f) * 4..)?;
    Some(u16::from_be_bytes([*l4.get(2)?, *l4.get(3)?]))
}

impl FrameCapture {
    /// Starts capturing on `ifname` in `ns` (returns once the socket is
    /// bound) the incoming frames of UDP to port `dport`.
    pub fn start(ns: &Netns, ifname: &str, dport: u16) -> Result<FrameCapture> {
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = mpsc::channel();
        let stop2 = stop.clone();
        let ifname = ifname.to_string();
        let handle = ns.spawn_thread(move || -> io::Result<Vec<CapturedFrame>> {
            let open = || -> io::Result<OwnedFd> {
                let proto = (libc::ETH_P_IP as u16).to_be();
                // SAFETY: socket(2) with constant arguments; the descriptor
                // is owned at once.
                let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, i32::from(proto)) };
                if fd < 0 {
                    return Err(io::Error::last_os_error());
                }
                // SAFETY: a fresh descriptor nobody else owns.
                let fd = unsafe { OwnedFd::from_raw_fd(fd) };
                let name = std::ffi::CString::new(ifname.clone())
                    .map_err(|_| io::Error::other("interface name with NUL"))?;
                // SAFETY: a NUL-terminated string alive for the call.
                let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
                if index == 0 {
                    return Err(io::Error::last_os_error());
                }
                // SAFETY: all-zero bytes are a valid sockaddr_ll.
                let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
                sll.sll_family = libc::AF_PACKET as u16;
                sll.sll_protocol = proto;
                sll.sll_ifindex = index as i32;
                // SAFETY: bind(2) with a sockaddr_ll that lives for the
                // call and its exact size.
                if unsafe {
                    libc::bind(
                        fd.as_raw_fd(),
                        (&sll as *const libc::sockaddr_ll).cast(),
                        std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
                    )
                } != 0
                {
                    return Err(io::Error::last_os_error());
                }
                let on: i32 = 1;
                let bytes: i32 = 8 << 20;
                let timeout = libc::timeval {
                    tv_sec: 0,
                    tv_usec: 20_000,
                };
                // SAFETY: setsockopt(2) on our socket with pointers to
                // values alive for each call and their exact sizes.
                unsafe {
                    for (opt, val, len) in [
                        (libc::SO_TIMESTAMPNS, (&on as *const i32).cast(), 4),
                        (libc::SO_RCVBUFFORCE, (&bytes as *const i32).cast(), 4),
                        (
                            libc::SO_RCVTIMEO,
                            (&timeout as *const libc::timeval).cast(),
                            std::mem::size_of::<libc::timeval>(),
                        ),
                    ] {
                        libc::setsockopt(
                            fd.as_raw_fd(),
                            libc::SOL_SOCKET,
                            opt,
                            val,
                            len as libc::socklen_t,
                        );
                    }
                }
                Ok(fd)
            };
            let fd = match open() {
                Ok(fd) => {
                    let _ = ready_tx.send(Ok(()));
                    fd
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e.to_string()));
                    return Err(e);
                }
            };
            let mut out = Vec::new();
            let mut buf = [0u8; 128];
            loop {
                // SAFETY: all-zero bytes are a valid sockaddr_storage.
                let mut from: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
                match recvmsg_timestamped(fd.as_raw_fd(), &mut buf, &mut from) {
                    Ok((n, rx_ns)) => {
                        // SAFETY: a packet socket fills in a sockaddr_ll.
                        let pkttype = unsafe {
                            (*(&from as *const libc::sockaddr_storage).cast::<libc::sockaddr_ll>())
                                .sll_pkttype
                        };
                        let frame = &buf[..n.min(buf.len())];
                        if pkttype != libc::PACKET_OUTGOING && udp_dport(frame) == Some(dport) {
                            let mut src_mac = [0u8; 6];
                            src_mac.copy_from_slice(&frame[6..12]);
                            out.push(CapturedFrame { rx_ns, src_mac });
                        }
                    }
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                        ) =>
                    {
                        if stop2.load(Ordering::Relaxed) {
                            break;
                        }
                    }
                    Err(e) => return Err(e),
                }
            }
            Ok(out)
        });
        match ready_rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(())) => Ok(FrameCapture {
                handle: Some(handle),
                stop,
            }),
            Ok(Err(e)) => Err(Error::new(format!("frame capture on {}: {e}", ns.name()))),
            Err(_) => Err(Error::new(format!(
                "frame capture in {} did not start",
                ns.name()
            ))),
        }
    }

    /// Stops (after what the socket already holds) and returns the frames
    /// in arrival order.
    pub fn finish(mut self) -> Result<Vec<CapturedFrame>> {
        self.stop.store(true, Ordering::Relaxed);
        let handle = self.handle.take().expect("finish runs once");
        handle
            .join()
            .map_err(|_| Error::new("frame capture thread panicked"))??
            .map_err(|e| Error::new(format!("frame capture: {e}")))
    }
}

impl Drop for FrameCapture {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udp_ports_of_captured_frames() {
        let frame = lcmp_wire::testing::FrameBuilder::ipv4([10, 0, 0, 2], [10, 1, 0, 2])
            .udp(4000, 7000)
            .build();
        assert_eq!(udp_dport(&frame), Some(7000));
        let tcp = lcmp_wire::testing::FrameBuilder::ipv4([10, 0, 0, 2], [10, 1, 0, 2])
            .tcp(4000, 7000)
            .build();
        assert_eq!(udp_dport(&tcp), None);
        assert_eq!(udp_dport(&frame[..30]), None, "truncated");
    }

    #[test]
    fn ping_output() {
        let text = "PING 10.0.2.2 (10.0.2.2) 56(84) bytes of data.
64 bytes from 10.0.2.2: icmp_seq=1 ttl=61 time=0.081 ms
64 bytes from 10.0.2.2: icmp_seq=2 ttl=61 time=0.120 ms

--- 10.0.2.2 ping statistics ---
3 packets transmitted, 2 received, 33.3333% packet loss, time 2003ms
rtt min/avg/max/mdev = 0.081/0.100/0.120/0.019 ms
";
        let s = parse_ping(text);
        assert_eq!((s.transmitted, s.received), (3, 2));
        assert_eq!(s.rtts_ms, vec![0.081, 0.120]);
        assert_eq!((s.min_ms, s.avg_ms, s.max_ms), (0.081, 0.100, 0.120));
        // Type 7 over [0.081, 0.120]: halfway.
        assert!((s.quantile_ms(0.5).unwrap() - 0.1005).abs() < 1e-12);
        assert_eq!(s.quantile_ms(1.0), Some(0.120));
    }

    #[test]
    fn iperf3_output() {
        // Abridged from iperf 3.12 on loopback.
        let ok = r#"{"start": {"version": "iperf 3.12"}, "intervals": [],
            "end": {
                "sum_sent": {"start": 0, "end": 1.000312, "bytes": 1911029760,
                    "bits_per_second": 15283469637.473106, "retransmits": 15, "sender": true},
                "sum_received": {"start": 0, "end": 1.000365, "bytes": 1911029654,
                    "bits_per_second": 15282659061.442574, "sender": true}}}"#;
        assert_eq!(
            parse_iperf3(ok, "").unwrap(),
            IperfResult {
                bits_per_second: 15282659061.442574,
                bytes_received: 1911029654,
                bytes_sent: 1911029760,
                retransmits: Some(15),
            }
        );
        let refused = r#"{"start": {"connected": []}, "intervals": [], "end": {},
            "error": "unable to connect to server: Connection refused"}"#;
        let e = parse_iperf3(refused, "").unwrap_err().to_string();
        assert_eq!(e, "iperf3: unable to connect to server: Connection refused");
        let e = parse_iperf3(r#"{"end": {"sum_sent": {"bytes": 1}}}"#, "")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no end.sum_received.bits_per_second"), "{e}");
        let e = parse_iperf3("iperf3: error", "boom")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("iperf3 output: ") && e.ends_with("boom"),
            "{e}"
        );
    }

    #[test]
    fn ordering_summary() {
        let a = |seq, src_port| UdpArrival {
            seq,
            src_port,
            delay_ns: 0,
            sent_ns: 0,
        };
        let r = summarise(vec![a(0, 1), a(2, 1), a(1, 1), a(2, 1), a(0, 2), a(3, 1)]);
        assert_eq!((r.unique, r.duplicates, r.reordered), (5, 1, 1));
        assert_eq!(r.lost(4, 1), 0);
    }

    #[test]
    fn pattern_is_deterministic() {
        let mut a = PatternStream::new(7);
        let mut b = PatternStream::new(7);
        let mut x = [0u8; 13];
        let mut y = [0u8; 5];
        let mut z = [0u8; 8];
        a.fill(&mut x);
        b.fill(&mut y);
        b.fill(&mut z);
        assert_eq!(&x[..5], &y);
        assert_eq!(&x[5..], &z);
    }
}

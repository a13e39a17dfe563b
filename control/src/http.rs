//! A tiny HTTP/1.1 server for Prometheus scrapes: `GET /metrics` answers
//! with whatever the render function returns, `/` with a short index
//! page, anything else with 404.
//!
//! It runs on plain std threads (one accepting, one per connection, at
//! most [`MAX_CONNECTIONS`] at once), so the same code serves a
//! non-async switch process and a tokio agent: the agent's runtime is
//! never blocked, and the render function runs on the connection thread.
//!
//! One request per connection (`Connection: close`): a scraper opens a
//! connection every scrape interval, so keep-alive would save nothing
//! worth its state. Requests are bounded in size ([`MAX_REQUEST_BYTES`])
//! and time ([`REQUEST_TIMEOUT`]); malformed ones get 400, and nothing a
//! client sends can panic the server.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::metrics::Format;

/// Longest request head (request line and headers) accepted, bytes.
pub const MAX_REQUEST_BYTES: usize = 8 * 1024;
/// How long a client may take to send its whole request head.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one write of the response may block.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections served at once; more get 503 at once.
pub const MAX_CONNECTIONS: usize = 16;

/// After the response, how long unread request bytes are drained before
/// closing (see [`linger`]).
const LINGER: Duration = Duration::from_millis(500);
/// At most this much is drained.
const LINGER_BYTES: usize = 64 * 1024;
/// Pause after a failed accept (out of descriptors, say), so a persistent
/// error does not spin the accepting thread.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

type Render = Arc<dyn Fn(Format) -> String + Send + Sync>;

/// Serves `/metrics` on `addr` from a thread of its own and returns the
/// address bound. The address is taken as given, never another port in
/// its place (a static scrape config names it): pass port 0 to get a free
/// port. An address in use fails naming what holds it ([`listener_on`]),
/// as `address in use by "prometheus" (pid 812)`. `render` is called once
/// per `GET /metrics`, on the connection's thread, and returns the
/// exposition in the format the client accepts (for instance
/// [`crate::metrics::render_as`] of fresh scrapes): OpenMetrics when its
/// `Accept` header names `application/openmetrics-text` (Prometheus does),
/// else the Prometheus text format 0.0.4 (curl, promtool). The server
/// lives as long as the process.
pub fn serve<F>(addr: SocketAddr, render: F) -> io::Result<SocketAddr>
where
    F: Fn(Format) -> String + Send + Sync + 'static,
{
    let listener = TcpListener::bind(addr).map_err(|e| match e.kind() {
        io::ErrorKind::AddrInUse => match listener_on(addr.port()) {
            Some(holder) => io::Error::new(e.kind(), format!("address in use by {holder}")),
            None => e,
        },
        _ => e,
    })?;
    let bound = listener.local_addr()?;
    let render: Render = Arc::new(render);
    thread::Builder::new()
        .name("lcmp-metrics-http".into())
        .spawn(move || accept_loop(listener, render))?;
    Ok(bound)
}

/// The process listening on TCP `port` (on any address of this network
/// namespace), as `"comm" (pid N)`; `None` if none is found, or its
/// descriptors cannot be read (another user's process, without root).
pub fn listener_on(port: u16) -> Option<String> {
    let inodes: Vec<u64> = ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .flat_map(|table| listening_inodes(&table, port))
        .collect();
    if inodes.is_empty() {
        return None;
    }
    for proc_dir in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = proc_dir
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(proc_dir.path().join("fd")) else {
            continue;
        };
        let holds = fds.flatten().any(|fd| {
            std::fs::read_link(fd.path()).is_ok_and(|target| {
                let target = target.to_string_lossy();
                target
                    .strip_prefix("socket:[")
                    .and_then(|t| t.strip_suffix(']'))
                    .and_then(|i| i.parse().ok())
                    .is_some_and(|i: u64| inodes.contains(&i))
            })
        });
        if holds {
            let comm = std::fs::read_to_string(proc_dir.path().join("comm")).unwrap_or_default();
            // The name is the process's to choose: echoed, not trusted.
            return Some(format!(
                "{} (pid {pid})",
                lcmp_topology::echo(comm.trim_end_matches('\n'))
            ));
        }
    }
    None
}

/// The socket inodes of a `/proc/net/tcp{,6}` table listening on `port`:
/// rows `sl local_address rem_address st ... inode`, the port in hex after
/// the address, state `0A` LISTEN.
fn listening_inodes(table: &str, port: u16) -> Vec<u64> {
    table
        .lines()
        .skip(1)
        .filter_map(|row| {
            let fields: Vec<&str> = row.split_whitespace().collect();
            let local_port = fields.get(1)?.rsplit_once(':')?.1;
            let listening = *fields.get(3)? == "0A";
            (listening && u16::from_str_radix(local_port, 16).ok()? == port)
                .then(|| fields.get(9)?.parse().ok())
                .flatten()
        })
        .collect()
}

/// Decrements the connection count when a connection's thread ends, also
/// when it panics or never starts.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

fn accept_loop(listener: TcpListener, render: Render) {
    let active = Arc::new(AtomicUsize::new(0));
    loop {
        let stream = match listener.accept() {
            Ok((stream, _)) => stream,
            Err(_) => {
                thread::sleep(ACCEPT_BACKOFF);
                continue;
            }
        };
        let slot = Slot(active.clone());
        if active.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
            drop(slot);
            busy(stream);
            continue;
        }
        let render = render.clone();
        // If the thread cannot be started the closure is dropped with the
        // stream and the slot: the client sees the connection close.
        let _ = thread::Builder::new()
            .name("lcmp-metrics-conn".into())
            .spawn(move || {
                let _slot = slot;
                handle(stream, &*render);
            });
    }
}

/// Refuses a connection over the limit without blocking the accepting
/// thread: the short response fits in a fresh socket's send buffer.
fn busy(mut stream: TcpStream) {
    let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
    let _ = stream.write_all(&Response::text(503, "too many connections\n").bytes(false));
    let _ = stream.shutdown(Shutdown::Write);
}

fn handle(mut stream: TcpStream, render: &(dyn Fn(Format) -> String + Send + Sync)) {
    if stream.set_write_timeout(Some(WRITE_TIMEOUT)).is_err() {
        return;
    }
    let (response, head_only) = match read_head(&mut stream) {
        Ok(head) => match parse(&head) {
            Ok(request) => (route(&request, render), request.method == Method::Head),
            Err(status) => (Response::text(status, reason(status)), false),
        },
        Err(HeadError::Closed) => return,
        Err(HeadError::Incomplete) => (Response::text(400, "incomplete request\n"), false),
        Err(HeadError::TooLarge) => (Response::text(431, "request head too large\n"), false),
        Err(HeadError::Timeout) => (Response::text(408, "request timeout\n"), false),
        Err(HeadError::Io) => return,
    };
    if stream.write_all(&response.bytes(head_only)).is_ok() {
        linger(stream);
    }
}

/// Closes the connection gracefully. Closing a socket with unread input
/// makes the kernel send a reset, which can destroy the response before
/// the client reads it (a 400 to a request with a body, say); so the write
/// side is shut first and what the client still sends is read and thrown
/// away, for a bounded time and amount.
fn linger(mut stream: TcpStream) {
    if stream.shutdown(Shutdown::Write).is_err() {
        return;
    }
    let deadline = Instant::now() + LINGER;
    let mut buf = [0u8; 4096];
    let mut drained = 0;
    while drained < LINGER_BYTES {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return;
        }
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => drained += n,
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum HeadError {
    /// The client closed without sending anything.
    Closed,
    /// The client closed in the middle of the head.
    Incomplete,
    TooLarge,
    Timeout,
    Io,
}

/// Reads up to the end of the request head (the empty line), within
/// [`REQUEST_TIMEOUT`] in all and [`MAX_REQUEST_BYTES`]. A body, if any,
/// is not read: no route takes one.
fn read_head(stream: &mut TcpStream) -> Result<Vec<u8>, HeadError> {
    let deadline = Instant::now() + REQUEST_TIMEOUT;
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(HeadError::Timeout);
        }
        // Per-read timeouts alone would let a client trickle one byte at a
        // time forever; the deadline bounds the whole head.
        stream
            .set_read_timeout(Some(left))
            .map_err(|_| HeadError::Io)?;
        let n = match stream.read(&mut buf) {
            Ok(0) if head.is_empty() => return Err(HeadError::Closed),
            Ok(0) => return Err(HeadError::Incomplete),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(HeadError::Timeout)
            }
            Err(_) => return Err(HeadError::Io),
        };
        // Search only where the new bytes can complete a terminator.
        let from = head.len().saturating_sub(3);
        head.extend_from_slice(&buf[..n]);
        if let Some(end) = head_end(&head[from..]) {
            let end = from + end;
            if end > MAX_REQUEST_BYTES {
                return Err(HeadError::TooLarge);
            }
            head.truncate(end);
            return Ok(head);
        }
        if head.len() > MAX_REQUEST_BYTES {
            return Err(HeadError::TooLarge);
        }
    }
}

/// Where the head ends (after its empty line): CRLF CRLF, or LF LF from
/// lenient clients (RFC 9112 allows accepting bare LF).
fn head_end(bytes: &[u8]) -> Option<usize> {
    (0..bytes.len()).find_map(|i| {
        if bytes[i..].starts_with(b"\r\n\r\n") {
            Some(i + 4)
        } else if bytes[i..].starts_with(b"\n\n") {
            Some(i + 2)
        } else if bytes[i..].starts_with(b"\n\r\n") {
            Some(i + 3)
        } else {
            None
        }
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Method {
    Get,
    Head,
}

#[derive(Debug)]
struct Request {
    method: Method,
    path: String,
    /// The client accepts OpenMetrics.
    openmetrics: bool,
}

/// The request line and headers, or the status refusing them.
fn parse(head: &[u8]) -> Result<Request, u16> {
    let text = std::str::from_utf8(head).map_err(|_| 400u16)?;
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let line = lines.next().unwrap_or("");
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(400);
    };
    let token = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_uppercase());
    if !token(method) || target.is_empty() || !target.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(400);
    }
    match version {
        "HTTP/1.1" | "HTTP/1.0" => {}
        v if v.starts_with("HTTP/") && v.len() > 5 => return Err(505),
        _ => return Err(400),
    }
    let mut openmetrics = false;
    for header in lines.take_while(|l| !l.is_empty()) {
        // A field name is a token, right before the colon (RFC 9112 5.1).
        let Some((name, value)) = header.split_once(':') else {
            return Err(400);
        };
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(400);
        }
        if name.eq_ignore_ascii_case("accept") {
            openmetrics |= value
                .to_ascii_lowercase()
                .contains("application/openmetrics-text");
        }
    }
    // Host is not required although HTTP/1.1 says so: a one-host server
    // gains nothing from refusing `printf 'GET /metrics ...' | nc`.
    let method = match method {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        _ => return Err(405),
    };
    // Origin form `/path?query`, or absolute form `http://host/path`.
    let path = match target.strip_prefix("http://") {
        Some(rest) => rest.find('/').map_or("/", |i| &rest[i..]),
        None => target,
    };
    let path = path.split(['?', '#']).next().unwrap_or("");
    Ok(Request {
        method,
        path: path.to_string(),
        openmetrics,
    })
}

fn route(request: &Request, render: &(dyn Fn(Format) -> String + Send + Sync)) -> Response {
    let format = if request.openmetrics {
        Format::OpenMetrics
    } else {
        Format::PrometheusText
    };
    match request.path.as_str() {
        "/metrics" => match panic::catch_unwind(AssertUnwindSafe(|| render(format))) {
            Ok(body) => Response {
                status: 200,
                content_type: format.content_type(),
                body: body.into_bytes(),
            },
            // The render function is the caller's code: if it panics, the
            // scrape fails and the server stays up.
            Err(_) => Response::text(500, "rendering the metrics failed\n"),
        },
        "/" => Response {
            status: 200,
            content_type: "text/html; charset=utf-8",
            body: INDEX.as_bytes().to_vec(),
        },
        _ => Response::text(404, "not found; the metrics are at /metrics\n"),
    }
}

const INDEX: &str = "<!DOCTYPE html>\n<html><head><title>lcmp metrics</title></head>\n\
<body><h1>lcmp metrics</h1><p><a href=\"/metrics\">/metrics</a>: OpenMetrics exposition.</p></body></html>\n";

struct Response {
    status: u16,
    content_type: &'static str,
    body: Vec<u8>,
}

impl Response {
    fn text(status: u16, body: &str) -> Response {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.as_bytes().to_vec(),
        }
    }

    /// The response on the wire; `head_only` for HEAD (same headers, no
    /// body).
    fn bytes(&self, head_only: bool) -> Vec<u8> {
        let mut out = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n",
            self.status,
            reason(self.status).trim_end(),
            self.content_type,
            self.body.len()
        )
        .into_bytes();
        if self.status == 405 {
            out.extend_from_slice(b"Allow: GET, HEAD\r\n");
        }
        out.extend_from_slice(b"\r\n");
        if !head_only {
            out.extend_from_slice(&self.body);
        }
        out
    }
}

/// The reason phrase of the statuses this server sends, with a newline so
/// it doubles as a plain-text body.
fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK\n",
        400 => "Bad Request\n",
        404 => "Not Found\n",
        405 => "Method Not Allowed\n",
        408 => "Request Timeout\n",
        431 => "Request Header Fields Too Large\n",
        500 => "Internal Server Error\n",
        503 => "Service Unavailable\n",
        505 => "HTTP Version Not Supported\n",
        _ => "Error\n",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(head: &str) -> Result<String, u16> {
        parse(head.as_bytes()).map(|r| r.path)
    }

    #[test]
    fn request_lines_parse_or_are_refused() {
        assert_eq!(
            path("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
            Ok("/metrics".into())
        );
        assert_eq!(path("GET /metrics?x=1 HTTP/1.0\n\n"), Ok("/metrics".into()));
        assert_eq!(
            path("GET http://h:9/metrics HTTP/1.1\r\n\r\n"),
            Ok("/metrics".into())
        );
        assert_eq!(path("GET http://h:9 HTTP/1.1\r\n\r\n"), Ok("/".into()));
        assert_eq!(path("POST /metrics HTTP/1.1\r\n\r\n"), Err(405));
        assert_eq!(path("GET /metrics HTTP/2.0\r\n\r\n"), Err(505));
        assert_eq!(path("GET /metrics HTTP/\r\n\r\n"), Err(400));
        assert_eq!(path("GET  /metrics HTTP/1.1\r\n\r\n"), Err(400));
        assert_eq!(path("GET /metrics\r\n\r\n"), Err(400));
        assert_eq!(path("get /metrics HTTP/1.1\r\n\r\n"), Err(400));
        assert_eq!(path("GET /metrics HTTP/1.1\r\nno colon\r\n\r\n"), Err(400));
        assert_eq!(path("GET /metrics HTTP/1.1\r\n: empty\r\n\r\n"), Err(400));
        assert_eq!(
            parse(b"GET /\xff HTTP/1.1\r\n\r\n").map(|r| r.path),
            Err(400)
        );
        assert_eq!(path("\r\n\r\n"), Err(400));
    }

    /// Rows as the kernel writes `/proc/net/tcp`: 127.0.0.1:9464 (0x24F8)
    /// listening (inode 31337), a connection from that port (31338) and a
    /// listener on 0.0.0.0:9465 (31339).
    #[test]
    fn listening_sockets_are_found_by_port_and_state() {
        let table = concat!(
            "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n",
            "   0: 0100007F:24F8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 31337 1 0000000000000000 100 0 0 10 0\n",
            "   1: 0100007F:24F8 0100007F:A1B2 01 00000000:00000000 00:00000000 00000000     0        0 31338 1 0000000000000000 20 4 30 10 -1\n",
            "   2: 00000000:24F9 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 31339 1 0000000000000000 100 0 0 10 0\n",
        );
        assert_eq!(listening_inodes(table, 9464), [31337]);
        assert_eq!(listening_inodes(table, 9465), [31339]);
        assert_eq!(listening_inodes(table, 9466), Vec::<u64>::new());
        assert_eq!(
            listening_inodes("garbage\nno: fields\n", 9464),
            Vec::<u64>::new()
        );
    }

    #[test]
    fn the_head_ends_at_the_first_empty_line() {
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\nbody"), Some(18));
        assert_eq!(head_end(b"GET / HTTP/1.1\n\nbody"), Some(16));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nHost: x\r\n"), None);
    }

    #[test]
    fn head_responses_keep_the_length_and_drop_the_body() {
        let r = Response::text(404, "gone\n");
        let full = String::from_utf8(r.bytes(false)).unwrap();
        let head = String::from_utf8(r.bytes(true)).unwrap();
        assert!(full.starts_with("HTTP/1.1 404 Not Found\r\n"), "{full}");
        assert!(full.contains("Content-Length: 5\r\n") && full.ends_with("\r\n\r\ngone\n"));
        assert!(head.contains("Content-Length: 5\r\n") && head.ends_with("\r\n\r\n"));
    }
}

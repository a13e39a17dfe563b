//! The flow sink: accepts connections on every `--listen` address and serves
//! one flow per connection ([`crate::protocol::serve_flow`]) until SIGTERM
//! or SIGINT.
//!
//! A misbehaving or vanished client costs only its own connection: errors
//! are counted (the first few are also printed on stderr), never fatal.

use std::io::{self, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;

use crate::protocol::serve_flow;

/// Accept backlog; the kernel caps it at net.core.somaxconn. Bursts of
/// Poisson arrivals from several clients must not overflow a short queue.
const BACKLOG: u32 = 4096;
/// Connection errors printed on stderr before they are only counted.
const ERRORS_PRINTED: u64 = 10;

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: Vec<SocketAddr>,
    /// A connection with no byte for this long is closed.
    pub idle_timeout: Duration,
}

/// Totals over the server's lifetime.
#[derive(Debug, Default)]
pub struct ServerStats {
    pub accepted: AtomicU64,
    /// Flows acknowledged and closed cleanly by the client.
    pub flows: AtomicU64,
    pub bytes: AtomicU64,
    /// Connections closed because of an error.
    pub errors: AtomicU64,
    pub accept_errors: AtomicU64,
}

impl ServerStats {
    pub fn summary(&self) -> String {
        format!(
            "accepted {} connections, served {} flows ({} payload bytes), {} connection errors, {} accept errors",
            self.accepted.load(Relaxed),
            self.flows.load(Relaxed),
            self.bytes.load(Relaxed),
            self.errors.load(Relaxed),
            self.accept_errors.load(Relaxed),
        )
    }
}

/// Binds every address (reusing addresses in TIME_WAIT after a restart).
pub fn bind(addrs: &[SocketAddr]) -> Result<Vec<TcpListener>, String> {
    addrs
        .iter()
        .map(|&addr| {
            let listen = || -> io::Result<TcpListener> {
                let socket = match addr {
                    SocketAddr::V4(_) => TcpSocket::new_v4()?,
                    SocketAddr::V6(_) => TcpSocket::new_v6()?,
                };
                socket.set_reuseaddr(true)?;
                socket.bind(addr)?;
                socket.listen(BACKLOG)
            };
            listen().map_err(|e| format!("cannot listen on {addr}: {e}"))
        })
        .collect()
}

/// Binds, prints `listening <addr>` per address, serves until SIGTERM or
/// SIGINT. Must run inside a tokio runtime.
pub async fn run(config: &ServerConfig) -> Result<Arc<ServerStats>, String> {
    // Handlers first: a caller may signal as soon as it reads the lines.
    let mut term = signal(SignalKind::terminate()).map_err(|e| format!("SIGTERM handler: {e}"))?;
    let mut int = signal(SignalKind::interrupt()).map_err(|e| format!("SIGINT handler: {e}"))?;
    let listeners = bind(&config.listen)?;
    {
        let mut out = io::stdout().lock();
        for l in &listeners {
            let addr = l.local_addr().map_err(|e| format!("local address: {e}"))?;
            // A caller that stopped reading is no reason to stop serving.
            let _ = writeln!(out, "listening {addr}");
        }
        let _ = out.flush();
    }
    let stats = Arc::new(ServerStats::default());
    let (stop_tx, stop_rx) = watch::channel(false);
    for listener in listeners {
        tokio::spawn(accept_loop(
            listener,
            stats.clone(),
            config.idle_timeout,
            stop_rx.clone(),
        ));
    }
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    let _ = stop_tx.send(true);
    Ok(stats)
}

async fn accept_loop(
    listener: TcpListener,
    stats: Arc<ServerStats>,
    idle: Duration,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = stop.changed() => return,
        };
        match accepted {
            Ok((stream, peer)) => {
                stats.accepted.fetch_add(1, Relaxed);
                tokio::spawn(connection(stream, peer, stats.clone(), idle));
            }
            Err(e) => {
                let n = stats.accept_errors.fetch_add(1, Relaxed);
                if n < ERRORS_PRINTED {
                    eprintln!("lcmp-traffic server: accept: {e}");
                }
                // Out of descriptors or memory: the listener stays readable,
                // so back off instead of spinning until connections close.
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
                ) {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    }
}

async fn connection(
    mut stream: TcpStream,
    peer: SocketAddr,
    stats: Arc<ServerStats>,
    idle: Duration,
) {
    // The ack is one small segment that must not wait behind Nagle.
    let _ = stream.set_nodelay(true);
    match serve_flow(&mut stream, idle).await {
        Ok(header) => {
            stats.flows.fetch_add(1, Relaxed);
            stats.bytes.fetch_add(header.size, Relaxed);
        }
        Err(e) => {
            let n = stats.errors.fetch_add(1, Relaxed);
            if n < ERRORS_PRINTED {
                eprintln!("lcmp-traffic server: {peer}: {e}");
                if n + 1 == ERRORS_PRINTED {
                    eprintln!("lcmp-traffic server: further connection errors are only counted");
                }
            }
        }
    }
}

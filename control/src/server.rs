//! The switch side of the control socket.
//!
//! A listener thread accepts connections on a Unix socket (mode 0600, and
//! each peer's credentials are checked: root or the switch's own user);
//! a thread per connection reads request lines with a size limit and
//! timeouts, decodes them, and hands each decoded request to the poll
//! thread through an [`Inbox`]. The poll thread looks at the inbox between
//! polls (one relaxed atomic load per iteration) and answers; an event-mode
//! poll thread sleeping in `poll()` is woken through [`Inbox::wake_fd`].
//! Forwarding never waits on a client: all socket I/O happens on the
//! connection threads, and a reply the poll thread does not produce in
//! [`REPLY_TIMEOUT`] becomes a timeout error.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::Arc;
use std::time::Duration;

use crate::proto::{
    decode_request, encode_response, Body, ErrorKind, ErrorReply, Request, MAX_REQUEST_BYTES,
};

/// How long a connection may sit idle between requests.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the rest of a started request line may take to arrive.
pub const LINE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a client waits for the poll thread's answer.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections served at once; more are refused.
pub const MAX_CLIENTS: usize = 16;

/// A decoded request waiting for the poll thread.
pub struct Pending {
    /// The request.
    pub request: Request,
    reply: SyncSender<Body>,
}

impl Pending {
    /// Sends the answer (the client may have gone: then nothing happens).
    pub fn answer(self, body: Body) {
        let _ = self.reply.try_send(body);
    }

    /// A request and the receiver of its answer, for callers in the same
    /// process (tests drive the daemon this way).
    pub fn new(request: Request) -> (Pending, Receiver<Body>) {
        let (tx, rx) = mpsc::sync_channel(1);
        (Pending { request, reply: tx }, rx)
    }
}

/// Counters shared by the server threads.
#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    errors: AtomicU64,
    refused: AtomicU64,
    clients: AtomicUsize,
}

/// The poll thread's end: decoded requests and a wake-up descriptor.
pub struct Inbox {
    rx: Receiver<Pending>,
    tx: Sender<Pending>,
    pending: Arc<AtomicBool>,
    wake: Arc<OwnedFd>,
    counters: Arc<Counters>,
}

impl Inbox {
    /// An inbox with no socket (requests come from [`Inbox::sender`]).
    pub fn new() -> io::Result<Inbox> {
        // SAFETY: eventfd takes no pointers; a negative result is an error.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a new descriptor this function alone owns.
        let wake = Arc::new(unsafe { OwnedFd::from_raw_fd(fd) });
        let (tx, rx) = mpsc::channel();
        Ok(Inbox {
            rx,
            tx,
            pending: Arc::new(AtomicBool::new(false)),
            wake,
            counters: Arc::default(),
        })
    }

    /// Whether a request may be waiting: one relaxed load, for the poll
    /// loop to test every iteration.
    #[inline]
    pub fn has_pending(&self) -> bool {
        self.pending.load(Ordering::Relaxed)
    }

    /// Takes the next waiting request, if any, and clears the wake-up.
    pub fn take(&self) -> Option<Pending> {
        self.pending.store(false, Ordering::Relaxed);
        self.clear_wake();
        let p = self.rx.try_recv().ok();
        if p.is_some() {
            // More may be queued behind it.
            self.pending.store(true, Ordering::Relaxed);
        }
        p
    }

    /// Clears the wake-up and leaves the requests waiting
    /// ([`Inbox::has_pending`] stays true): a loop that serves them later
    /// does not spin on a readable descriptor meanwhile.
    pub fn clear_wake(&self) {
        let mut buf = 0u64;
        // SAFETY: reads 8 bytes into a live u64 from our eventfd; a
        // non-blocking eventfd with nothing to read fails with EAGAIN,
        // which is fine.
        unsafe {
            libc::read(
                self.wake.as_raw_fd(),
                (&mut buf as *mut u64).cast(),
                std::mem::size_of::<u64>(),
            )
        };
    }

    /// A descriptor that becomes readable when a request arrives: event-mode
    /// poll loops add it to their `poll()` set.
    pub fn wake_fd(&self) -> RawFd {
        self.wake.as_raw_fd()
    }

    /// A handle that submits requests from this process.
    pub fn sender(&self) -> Submitter {
        Submitter {
            tx: self.tx.clone(),
            pending: self.pending.clone(),
            wake: self.wake.clone(),
        }
    }

    /// Counts an answered request, and whether it was an error.
    pub fn count(&self, error: bool) {
        self.counters.requests.fetch_add(1, Ordering::Relaxed);
        if error {
            self.counters.errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The server's counters.
    pub fn stats(&self) -> crate::snapshot::ControlStats {
        crate::snapshot::ControlStats {
            requests: self.counters.requests.load(Ordering::Relaxed),
            errors: self.counters.errors.load(Ordering::Relaxed),
            refused: self.counters.refused.load(Ordering::Relaxed),
        }
    }
}

/// Submits requests to an [`Inbox`] and wakes its poll thread.
#[derive(Clone)]
pub struct Submitter {
    tx: Sender<Pending>,
    pending: Arc<AtomicBool>,
    wake: Arc<OwnedFd>,
}

impl Submitter {
    /// Queues a request; its answer arrives on the returned receiver.
    pub fn submit(&self, request: Request) -> Receiver<Body> {
        let (p, rx) = Pending::new(request);
        let _ = self.tx.send(p);
        self.pending.store(true, Ordering::Release);
        let one = 1u64;
        // SAFETY: writes 8 bytes from a live u64 to our eventfd.
        unsafe {
            libc::write(
                self.wake.as_raw_fd(),
                (&one as *const u64).cast(),
                std::mem::size_of::<u64>(),
            )
        };
        rx
    }

    /// Submits and waits for the answer at most `timeout`.
    pub fn call(&self, request: Request, timeout: Duration) -> Body {
        match self.submit(request).recv_timeout(timeout) {
            Ok(b) => b,
            Err(_) => Body::Error(ErrorReply::new(
                ErrorKind::Timeout,
                format!(
                    "the switch did not answer within {} ms",
                    timeout.as_millis()
                ),
            )),
        }
    }
}

/// Binds the control socket at `path` and starts serving it into `inbox`
/// for the life of the process. A socket file left by a dead switch is
/// replaced; one a live process answers on is an error naming it.
pub fn serve(path: &Path, inbox: &Inbox) -> io::Result<()> {
    bind(path, inbox, Arc::new(AtomicBool::new(false))).map(|_| ())
}

/// [`serve`] until the returned [`Served`] is dropped: then the socket
/// stops accepting and its file is removed, so a process that runs
/// switches one after another (a one-process engine's runs) can bind the
/// same path again.
pub fn serve_scoped(path: &Path, inbox: &Inbox) -> io::Result<Served> {
    let stop = Arc::new(AtomicBool::new(false));
    let listener = bind(path, inbox, stop.clone())?;
    Ok(Served {
        path: path.to_path_buf(),
        stop,
        listener: Some(listener),
    })
}

/// A control socket served until this is dropped ([`serve_scoped`]).
pub struct Served {
    path: std::path::PathBuf,
    stop: Arc<AtomicBool>,
    listener: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Served {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // The listener blocks in accept: a connection lets it see `stop`.
        let _ = UnixStream::connect(&self.path);
        if let Some(t) = self.listener.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

fn bind(
    path: &Path,
    inbox: &Inbox,
    stop: Arc<AtomicBool>,
) -> io::Result<std::thread::JoinHandle<()>> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!(
                    "control socket {} is in use by a running process (another switch of this name?); pass --control-socket",
                    path.display()
                ),
            ));
        }
        std::fs::remove_file(path)?;
    }
    // The socket must never be reachable by other users, not even between
    // bind and chmod: bind under a restrictive umask.
    // SAFETY: umask only swaps the process's file mode mask.
    let old = unsafe { libc::umask(0o177) };
    let bound = UnixListener::bind(path);
    // SAFETY: as above, restoring the previous mask.
    unsafe { libc::umask(old) };
    let listener = bound?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    let submit = inbox.sender();
    let counters = inbox.counters.clone();
    std::thread::Builder::new()
        .name("lcmp-control".into())
        .spawn(move || {
            for conn in listener.incoming() {
                if stop.load(Ordering::Acquire) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                accept(conn, &submit, &counters);
            }
        })
}

/// The uid of the process at the other end of `s`.
fn peer_uid(s: &UnixStream) -> io::Result<u32> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into the live `cred`.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(cred.uid)
}

fn refuse(mut conn: UnixStream, counters: &Counters, kind: ErrorKind, message: &str) {
    counters.refused.fetch_add(1, Ordering::Relaxed);
    let _ = conn.set_write_timeout(Some(LINE_TIMEOUT));
    let _ = conn.write_all(&encode_response(
        0,
        Body::Error(ErrorReply::new(kind, message)),
    ));
}

fn accept(conn: UnixStream, submit: &Submitter, counters: &Arc<Counters>) {
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    match peer_uid(&conn) {
        Ok(uid) if uid == 0 || uid == me => {}
        Ok(uid) => {
            return refuse(
                conn,
                counters,
                ErrorKind::Invalid,
                &format!("uid {uid} may not control this switch (root only)"),
            )
        }
        Err(_) => return,
    }
    if counters.clients.fetch_add(1, Ordering::AcqRel) >= MAX_CLIENTS {
        counters.clients.fetch_sub(1, Ordering::AcqRel);
        return refuse(
            conn,
            counters,
            ErrorKind::Invalid,
            &format!("{MAX_CLIENTS} clients are connected already"),
        );
    }
    let (submit, shared) = (submit.clone(), counters.clone());
    let spawned = std::thread::Builder::new()
        .name("lcmp-control-conn".into())
        .spawn(move || {
            let _ = serve_connection(conn, &submit, &shared);
            shared.clients.fetch_sub(1, Ordering::AcqRel);
        });
    if spawned.is_err() {
        // The closure (and its count) never ran.
        counters.clients.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Reads one line of at most [`MAX_REQUEST_BYTES`]: `Ok(None)` at end of
/// stream, `Err(TooLarge)` (as `InvalidData`) past the limit.
fn read_line(r: &mut BufReader<UnixStream>, line: &mut Vec<u8>) -> io::Result<Option<()>> {
    line.clear();
    r.get_ref().set_read_timeout(Some(IDLE_TIMEOUT))?;
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return Ok(None);
        }
        let (take, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        if line.len() + take > MAX_REQUEST_BYTES + 1 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "too large"));
        }
        line.extend_from_slice(&buf[..take]);
        r.consume(take);
        if done {
            line.pop();
            return Ok(Some(()));
        }
        // A line has started: the rest must come soon.
        r.get_ref().set_read_timeout(Some(LINE_TIMEOUT))?;
    }
}

fn serve_connection(conn: UnixStream, submit: &Submitter, counters: &Counters) -> io::Result<()> {
    conn.set_write_timeout(Some(LINE_TIMEOUT))?;
    let mut out = conn.try_clone()?;
    let mut reader = BufReader::with_capacity(64 * 1024, conn);
    let mut line = Vec::new();
    loop {
        let reply = match read_line(&mut reader, &mut line) {
            Ok(None) => return Ok(()),
            Ok(Some(())) if line.iter().all(u8::is_ascii_whitespace) => continue,
            Ok(Some(())) => match decode_request(&line) {
                Ok(req) => (req.id, submit.call(req.request, REPLY_TIMEOUT)),
                Err((id, e)) => {
                    counters.requests.fetch_add(1, Ordering::Relaxed);
                    counters.errors.fetch_add(1, Ordering::Relaxed);
                    (id, Body::Error(e))
                }
            },
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                counters.requests.fetch_add(1, Ordering::Relaxed);
                counters.errors.fetch_add(1, Ordering::Relaxed);
                let e = ErrorReply::new(
                    ErrorKind::TooLarge,
                    format!("request longer than {MAX_REQUEST_BYTES} bytes; closing"),
                );
                let _ = out.write_all(&encode_response(0, Body::Error(e)));
                // The rest of the line is not worth reading.
                let _ = reader.get_mut().shutdown(std::net::Shutdown::Read);
                let mut sink = [0u8; 1];
                let _ = reader.get_mut().read(&mut sink);
                return Ok(());
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                let e = ErrorReply::new(ErrorKind::Timeout, "request timed out; closing");
                let _ = out.write_all(&encode_response(0, Body::Error(e)));
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        out.write_all(&encode_response(reply.0, reply.1))?;
    }
}

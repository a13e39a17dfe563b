//! A blocking client of the control socket (for `lcmp-ctl`, the agent and
//! tests).
//!
//! A switch is trusted to speak the protocol, not to be well: a reply line
//! is read up to [`MAX_REPLY_BYTES`] and no further, and the timeout bounds
//! each call as a whole, so a server that drips its reply a byte at a time
//! cannot hold the client longer than one timeout.

use std::io::{self, BufRead, BufReader, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use lcmp_topology::echo;

use crate::proto::{encode_request, Body, ErrorReply, Reply, Request, ResponseEnvelope};

/// Longest reply line read, bytes (its newline aside). The largest reply is
/// a capture fetch: the switch holds up to 16 MiB of captured bytes between
/// fetches, sent as hex (32 MiB) with about 80 bytes of JSON per frame:
/// 52 MiB when all are minimal 64-byte frames. The others are far smaller
/// (`tables` is the table the agent pushes in one request of at most
/// [`crate::proto::MAX_REQUEST_BYTES`]). 64 MiB holds them with a margin and
/// bounds what a broken switch can make this client buffer.
pub const MAX_REPLY_BYTES: usize = 64 << 20;

/// Why a call failed.
#[derive(Debug)]
pub enum ClientError {
    /// No switch answers on the socket.
    NotRunning(PathBuf, io::Error),
    /// The connection failed mid-call, or the call ran out of time (kind
    /// [`io::ErrorKind::TimedOut`]).
    Io(io::Error),
    /// The switch answered something that is not a reply; the text is
    /// this client's, with any of the switch's already echoed.
    Protocol(String),
    /// The switch refused the request (its message is shown echoed).
    Refused(ErrorReply),
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::NotRunning(p, e) => match e.kind() {
                io::ErrorKind::PermissionDenied => write!(
                    f,
                    "{}: permission denied (the control socket is root's)",
                    p.display()
                ),
                _ => write!(f, "no switch answers on {} ({e})", p.display()),
            },
            ClientError::Io(e) => write!(f, "control connection failed: {e}"),
            ClientError::Protocol(m) => write!(f, "bad reply from the switch: {m}"),
            // The switch's words, not ours: a broken or hostile switch must
            // not drive the terminal or flood the line.
            ClientError::Refused(e) => write!(f, "the switch refused: {}", echo(&e.message)),
        }
    }
}

impl std::error::Error for ClientError {}

/// One connection to a switch's control socket.
pub struct Client {
    path: PathBuf,
    writer: UnixStream,
    reader: BufReader<UnixStream>,
    timeout: Duration,
    next_id: u64,
}

impl Client {
    /// Connects to the socket at `path`; each call (request sent and reply
    /// read) must be over within `timeout`.
    pub fn connect(path: &Path, timeout: Duration) -> Result<Client, ClientError> {
        let s = UnixStream::connect(path)
            .map_err(|e| ClientError::NotRunning(path.to_path_buf(), e))?;
        // 64 KiB reads: a capture fetch can be tens of MiB.
        let reader = BufReader::with_capacity(1 << 16, s.try_clone().map_err(ClientError::Io)?);
        Ok(Client {
            path: path.to_path_buf(),
            writer: s,
            reader,
            timeout,
            next_id: 1,
        })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Sends `request` and returns the switch's answer. A call that runs
    /// out of time or meets an overlong reply leaves the connection shut:
    /// what remains of the reply is never read, so later calls fail.
    pub fn call(&mut self, request: &Request) -> Result<Reply, ClientError> {
        let now = Instant::now();
        // A timeout too large for the clock is as good as none.
        let deadline = now
            .checked_add(self.timeout)
            .unwrap_or(now + Duration::from_secs(1 << 30));
        let id = self.next_id;
        self.next_id += 1;
        let line = self
            .send(&encode_request(id, request), deadline)
            .and_then(|()| self.read_line(deadline))
            .inspect_err(|_| {
                let _ = self.writer.shutdown(Shutdown::Both);
            })?;
        // serde's message repeats what it could not read (an unknown kind).
        let r: ResponseEnvelope = serde_json::from_slice(&line)
            .map_err(|e| ClientError::Protocol(echo(&e.to_string())))?;
        if r.id != id && r.id != 0 {
            return Err(ClientError::Protocol(format!(
                "reply to request {} while waiting for {id}",
                r.id
            )));
        }
        match r.body {
            Body::Ok(reply) => Ok(*reply),
            Body::Error(e) => Err(ClientError::Refused(e)),
        }
    }

    /// The time left before `deadline`, or the call's timeout error.
    fn left(&self, deadline: Instant) -> Result<Duration, ClientError> {
        match deadline.checked_duration_since(Instant::now()) {
            Some(left) if !left.is_zero() => Ok(left),
            _ => Err(ClientError::Io(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no reply within {} ms", self.timeout.as_millis()),
            ))),
        }
    }

    /// Whether `e` is a socket timeout (Linux says `WouldBlock`).
    fn timed_out(e: &io::Error) -> bool {
        matches!(
            e.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        )
    }

    fn send(&mut self, mut bytes: &[u8], deadline: Instant) -> Result<(), ClientError> {
        while !bytes.is_empty() {
            let left = self.left(deadline)?;
            self.writer
                .set_write_timeout(Some(left))
                .map_err(ClientError::Io)?;
            match self.writer.write(bytes) {
                Ok(0) => return Err(ClientError::Io(io::ErrorKind::WriteZero.into())),
                Ok(n) => bytes = &bytes[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // Checked against the deadline at the top of the loop.
                Err(e) if Self::timed_out(&e) => {}
                Err(e) => return Err(ClientError::Io(e)),
            }
        }
        Ok(())
    }

    /// One reply line without its newline, read within `deadline` and
    /// [`MAX_REPLY_BYTES`].
    fn read_line(&mut self, deadline: Instant) -> Result<Vec<u8>, ClientError> {
        let mut line = Vec::new();
        loop {
            let left = self.left(deadline)?;
            self.reader
                .get_ref()
                .set_read_timeout(Some(left))
                .map_err(ClientError::Io)?;
            let buf = match self.reader.fill_buf() {
                Ok(buf) => buf,
                Err(e) if e.kind() == io::ErrorKind::Interrupted || Self::timed_out(&e) => continue,
                Err(e) => return Err(ClientError::Io(e)),
            };
            if buf.is_empty() {
                return Err(ClientError::Protocol(
                    if line.is_empty() {
                        "connection closed"
                    } else {
                        "connection closed mid-reply"
                    }
                    .into(),
                ));
            }
            let (take, end) = match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (i, true),
                None => (buf.len(), false),
            };
            if line.len() + take > MAX_REPLY_BYTES {
                return Err(ClientError::Protocol(format!(
                    "reply longer than the {} MiB limit",
                    MAX_REPLY_BYTES >> 20
                )));
            }
            line.extend_from_slice(&buf[..take]);
            self.reader.consume(take + usize::from(end));
            if end {
                return Ok(line);
            }
        }
    }
}

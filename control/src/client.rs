//! A blocking client of the control socket (for `lcmp-ctl`, the agent and
//! tests).

use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::proto::{encode_request, Body, ErrorReply, Reply, Request, ResponseEnvelope};

/// Why a call failed.
#[derive(Debug)]
pub enum ClientError {
    /// No switch answers on the socket.
    NotRunning(PathBuf, io::Error),
    /// The connection failed mid-call.
    Io(io::Error),
    /// The switch answered something that is not a reply.
    Protocol(String),
    /// The switch refused the request.
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
            ClientError::Refused(e) => write!(f, "{}", e.message),
        }
    }
}

impl std::error::Error for ClientError {}

/// One connection to a switch's control socket.
pub struct Client {
    path: PathBuf,
    writer: UnixStream,
    reader: BufReader<UnixStream>,
    next_id: u64,
}

impl Client {
    /// Connects to the socket at `path`; calls time out after `timeout`.
    pub fn connect(path: &Path, timeout: Duration) -> Result<Client, ClientError> {
        let s = UnixStream::connect(path)
            .map_err(|e| ClientError::NotRunning(path.to_path_buf(), e))?;
        s.set_read_timeout(Some(timeout)).map_err(ClientError::Io)?;
        s.set_write_timeout(Some(timeout))
            .map_err(ClientError::Io)?;
        let reader = BufReader::new(s.try_clone().map_err(ClientError::Io)?);
        Ok(Client {
            path: path.to_path_buf(),
            writer: s,
            reader,
            next_id: 1,
        })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Sends `request` and returns the switch's answer.
    pub fn call(&mut self, request: &Request) -> Result<Reply, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        self.writer
            .write_all(&encode_request(id, request))
            .map_err(ClientError::Io)?;
        let mut line = String::new();
        let n = self.reader.read_line(&mut line).map_err(ClientError::Io)?;
        if n == 0 {
            return Err(ClientError::Protocol("connection closed".into()));
        }
        let r: ResponseEnvelope =
            serde_json::from_str(&line).map_err(|e| ClientError::Protocol(e.to_string()))?;
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
}

//! The wire protocol between client and server: one TCP connection per flow.
//!
//! ```text
//! client                                      server
//!   connect()  ---------- SYN / SYN-ACK ---------->  accept()
//!   header (16 bytes)  --------------------------->  flow id: u64 big-endian
//!                                                    size:    u64 big-endian
//!   `size` payload bytes  ------------------------>  reads exactly `size` bytes
//!                   <--------------------------  one acknowledgement byte (0x06)
//!   reads the ack: the flow is complete
//!   close()  ------------------ FIN -------------->  reads end of stream, closes
//! ```
//!
//! The client measures the flow completion time (FCT) from just before
//! `connect()` to the moment it reads the acknowledgement: the handshake,
//! the transfer, and one more round trip for the last byte and the ack.
//! The header and the first payload bytes leave in one write so that a
//! short flow does not spend a segment on its 16-byte header.
//!
//! The server rejects a header whose size exceeds [`MAX_FLOW_SIZE`] (1 TiB),
//! a stream that ends early, bytes after the flow's last byte, and a peer
//! that sends nothing for the idle timeout; each of these closes that
//! connection only. The client closes first, so its side of the connection
//! holds the TIME_WAIT state (and the local port) afterwards.

use std::fmt;
use std::io;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::timeout;

/// Bytes of the flow header.
pub const HEADER_LEN: usize = 16;
/// The largest flow size the server accepts: 1 TiB.
pub const MAX_FLOW_SIZE: u64 = 1 << 40;
/// The acknowledgement byte (ASCII ACK).
pub const ACK: u8 = 0x06;

/// Payload bytes sent in the same write as the header.
const FIRST_PAYLOAD: usize = 1400;
/// The payload is zeros, written from this buffer.
static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];
/// The server's receive buffer per connection.
const RECV_BUF: usize = 16 * 1024;

/// What the client announces before the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub flow_id: u64,
    pub size: u64,
}

impl Header {
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut bytes = [0u8; HEADER_LEN];
        bytes[..8].copy_from_slice(&self.flow_id.to_be_bytes());
        bytes[8..].copy_from_slice(&self.size.to_be_bytes());
        bytes
    }

    /// Decodes and checks a header (the size limit).
    pub fn decode(bytes: &[u8; HEADER_LEN]) -> Result<Header, ServeError> {
        let mut id = [0u8; 8];
        let mut size = [0u8; 8];
        id.copy_from_slice(&bytes[..8]);
        size.copy_from_slice(&bytes[8..]);
        let header = Header {
            flow_id: u64::from_be_bytes(id),
            size: u64::from_be_bytes(size),
        };
        if header.size > MAX_FLOW_SIZE {
            return Err(ServeError::SizeTooLarge(header.size));
        }
        Ok(header)
    }
}

/// Sends the header and `size` payload bytes.
pub async fn send_flow<W: AsyncWrite + Unpin>(w: &mut W, header: Header) -> io::Result<()> {
    let first = (header.size as usize).min(FIRST_PAYLOAD);
    let mut head = vec![0u8; HEADER_LEN + first];
    head[..HEADER_LEN].copy_from_slice(&header.encode());
    w.write_all(&head).await?;
    let mut left = header.size - first as u64;
    while left > 0 {
        let n = (left as usize).min(ZEROS.len());
        w.write_all(&ZEROS[..n]).await?;
        left -= n as u64;
    }
    w.flush().await
}

/// Waits for the server's acknowledgement byte.
pub async fn read_ack<R: AsyncRead + Unpin>(r: &mut R) -> io::Result<()> {
    let mut byte = [0u8; 1];
    match r.read(&mut byte).await? {
        0 => Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the server closed the connection without acknowledging",
        )),
        _ if byte[0] != ACK => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("bad acknowledgement byte {:#04x}", byte[0]),
        )),
        _ => Ok(()),
    }
}

/// Why the server gave up on a connection.
#[derive(Debug)]
pub enum ServeError {
    /// The stream ended before a complete header.
    EarlyEofHeader {
        got: usize,
    },
    /// The announced size exceeds [`MAX_FLOW_SIZE`].
    SizeTooLarge(u64),
    /// The stream ended before `size` payload bytes.
    EarlyEofPayload {
        got: u64,
        size: u64,
    },
    /// Bytes after the flow's last byte.
    TrailingData,
    /// No byte for the idle timeout.
    Idle(Duration),
    Io(io::Error),
}

impl fmt::Display for ServeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServeError::EarlyEofHeader { got } => {
                write!(f, "closed after {got} of {HEADER_LEN} header bytes")
            }
            ServeError::SizeTooLarge(size) => {
                write!(f, "announced size {size} exceeds {MAX_FLOW_SIZE} bytes")
            }
            ServeError::EarlyEofPayload { got, size } => {
                write!(f, "closed after {got} of {size} payload bytes")
            }
            ServeError::TrailingData => write!(f, "data after the flow's last byte"),
            ServeError::Idle(t) => write!(f, "nothing received for {} s", t.as_secs_f64()),
            ServeError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ServeError {}

impl From<io::Error> for ServeError {
    fn from(e: io::Error) -> Self {
        ServeError::Io(e)
    }
}

/// Serves one flow on a connection: header, payload, acknowledgement, then
/// the client's close. Every read waits at most `idle`.
pub async fn serve_flow<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    idle: Duration,
) -> Result<Header, ServeError> {
    let mut head = [0u8; HEADER_LEN];
    let mut got = 0;
    while got < HEADER_LEN {
        match read_idle(s, &mut head[got..], idle).await? {
            0 => return Err(ServeError::EarlyEofHeader { got }),
            n => got += n,
        }
    }
    let header = Header::decode(&head)?;
    // Read exactly `size` bytes (never beyond), so that extra bytes are seen.
    let mut buf = vec![0u8; RECV_BUF.min(header.size.max(1) as usize)];
    let mut left = header.size;
    while left > 0 {
        let want = (left as usize).min(buf.len());
        match read_idle(s, &mut buf[..want], idle).await? {
            0 => {
                return Err(ServeError::EarlyEofPayload {
                    got: header.size - left,
                    size: header.size,
                })
            }
            n => left -= n as u64,
        }
    }
    s.write_all(&[ACK]).await?;
    s.flush().await?;
    // The client closes once it has the ack.
    match read_idle(s, &mut buf[..1], idle).await? {
        0 => Ok(header),
        _ => Err(ServeError::TrailingData),
    }
}

async fn read_idle<R: AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut [u8],
    idle: Duration,
) -> Result<usize, ServeError> {
    match timeout(idle, r.read(buf)).await {
        Ok(result) => Ok(result?),
        Err(_) => Err(ServeError::Idle(idle)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::duplex;

    const IDLE: Duration = Duration::from_secs(30);

    #[test]
    fn header_round_trip() {
        let h = Header {
            flow_id: 0x0102_0304_0506_0708,
            size: 123_456,
        };
        let bytes = h.encode();
        assert_eq!(&bytes[..8], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&bytes[8..], &123_456u64.to_be_bytes());
        assert_eq!(Header::decode(&bytes).unwrap(), h);
        let big = Header {
            flow_id: 1,
            size: MAX_FLOW_SIZE + 1,
        };
        assert!(matches!(
            Header::decode(&big.encode()),
            Err(ServeError::SizeTooLarge(_))
        ));
    }

    #[tokio::test]
    async fn flow_round_trip() {
        for size in [0u64, 1, 1399, 1400, 1401, 65_536, 200_001] {
            let (mut client, mut server) = duplex(8 * 1024);
            let h = Header { flow_id: 9, size };
            let srv = tokio::spawn(async move { serve_flow(&mut server, IDLE).await });
            send_flow(&mut client, h).await.unwrap();
            read_ack(&mut client).await.unwrap();
            drop(client);
            assert_eq!(srv.await.unwrap().unwrap(), h);
        }
    }

    #[tokio::test]
    async fn rejects_oversized_header() {
        let (mut client, mut server) = duplex(1024);
        let h = Header {
            flow_id: 1,
            size: 2 << 40,
        };
        client.write_all(&h.encode()).await.unwrap();
        let e = serve_flow(&mut server, IDLE).await.unwrap_err();
        assert!(matches!(e, ServeError::SizeTooLarge(_)), "{e}");
    }

    #[tokio::test]
    async fn reports_truncated_streams() {
        let (mut client, mut server) = duplex(1024);
        client.write_all(&[0; 5]).await.unwrap();
        drop(client);
        let e = serve_flow(&mut server, IDLE).await.unwrap_err();
        assert!(matches!(e, ServeError::EarlyEofHeader { got: 5 }), "{e}");

        let (mut client, mut server) = duplex(1024);
        let h = Header {
            flow_id: 1,
            size: 100,
        };
        client.write_all(&h.encode()).await.unwrap();
        client.write_all(&[0; 40]).await.unwrap();
        drop(client);
        let e = serve_flow(&mut server, IDLE).await.unwrap_err();
        assert!(
            matches!(e, ServeError::EarlyEofPayload { got: 40, size: 100 }),
            "{e}"
        );
    }

    #[tokio::test]
    async fn rejects_trailing_data() {
        let (mut client, mut server) = duplex(1024);
        let h = Header {
            flow_id: 1,
            size: 3,
        };
        client.write_all(&h.encode()).await.unwrap();
        client.write_all(&[0; 4]).await.unwrap();
        let e = serve_flow(&mut server, IDLE).await.unwrap_err();
        assert!(matches!(e, ServeError::TrailingData), "{e}");
    }

    #[tokio::test]
    async fn idle_peer_times_out() {
        // The peer never sends, so the short timeout always fires.
        let (_client, mut server) = duplex(1024);
        let e = serve_flow(&mut server, Duration::from_millis(50))
            .await
            .unwrap_err();
        assert!(matches!(e, ServeError::Idle(_)), "{e}");
    }

    #[tokio::test]
    async fn client_sees_missing_or_bad_ack() {
        let (mut client, server) = duplex(1024);
        drop(server);
        let e = read_ack(&mut client).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        let (mut client, mut server) = duplex(1024);
        server.write_all(b"x").await.unwrap();
        let e = read_ack(&mut client).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    }
}

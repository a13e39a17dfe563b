//! The client against hostile servers: a reply line is read up to a stated
//! cap and no further, and the timeout bounds the whole call, not each
//! read. Each server is a thread on a plain `UnixListener` that reads the
//! request and then misbehaves.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use lcmp_control::proto::{encode_response, Applied};
use lcmp_control::{Body, Client, ClientError, ErrorKind, ErrorReply, Reply, Request};

/// The client's reply cap, 64 MiB: 64 * 1,048,576 bytes.
const CAP: usize = 67_108_864;

/// A server of one connection on a fresh socket: it reads one request
/// line, hands the stream to `misbehave` and reports the reply bytes the
/// client took.
struct Fake {
    dir: PathBuf,
    path: PathBuf,
    delivered: mpsc::Receiver<u64>,
}

impl Fake {
    fn start(tag: &str, misbehave: impl FnOnce(&mut UnixStream) -> u64 + Send + 'static) -> Fake {
        let dir = std::env::temp_dir().join(format!(
            "lcmp-ctl-limits-{}-{tag}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s1.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let (tx, delivered) = mpsc::channel();
        std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut request = String::new();
            BufReader::new(s.try_clone().unwrap())
                .read_line(&mut request)
                .unwrap();
            let _ = tx.send(misbehave(&mut s));
        });
        Fake {
            dir,
            path,
            delivered,
        }
    }

    fn connect(&self, timeout: Duration) -> Client {
        Client::connect(&self.path, timeout).unwrap()
    }

    /// What the server managed to write before the client hung up.
    fn delivered(&self) -> u64 {
        self.delivered
            .recv_timeout(Duration::from_secs(10))
            .expect("the fake server finishes once the client is gone")
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Writes `bytes`, then `filler` until `total` bytes are written in all;
/// the bytes written before the peer hung up.
fn pour(s: &mut UnixStream, bytes: &[u8], filler: u8, total: usize) -> u64 {
    let mut written = 0;
    let mut next = bytes.to_vec();
    let chunk = vec![filler; 1 << 20];
    while written < total {
        if next.is_empty() {
            next = chunk[..chunk.len().min(total - written)].to_vec();
        }
        match s.write(&next) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                written += n;
                next.drain(..n);
            }
        }
    }
    written as u64
}

/// A valid reply to request 1, padded with spaces (JSON whitespace) to
/// `len` bytes before its newline.
fn padded_reply(len: usize) -> Vec<u8> {
    let mut line = encode_response(
        1,
        Body::Ok(Box::new(Reply::Applied(Applied {
            message: "fine".into(),
            changed: false,
            flows_to_move: 0,
        }))),
    );
    assert_eq!(line.pop(), Some(b'\n'));
    assert!(line.len() <= len);
    line.resize(len, b' ');
    line.push(b'\n');
    line
}

#[test]
fn a_reply_of_the_cap_is_read_and_one_byte_longer_is_refused() {
    let at_cap = Fake::start("atcap", |s| {
        let line = padded_reply(CAP);
        pour(s, &line, b' ', line.len())
    });
    let reply = at_cap
        .connect(Duration::from_secs(10))
        .call(&Request::Status);
    assert!(
        matches!(reply, Ok(Reply::Applied(ref a)) if a.message == "fine"),
        "{reply:?}"
    );
    // The whole line and its newline.
    assert_eq!(at_cap.delivered(), 67_108_865);

    let over = Fake::start("overcap", |s| {
        let line = padded_reply(CAP + 1);
        pour(s, &line, b' ', line.len())
    });
    let mut c = over.connect(Duration::from_secs(10));
    let e = c.call(&Request::Status).unwrap_err();
    assert_eq!(
        e.to_string(),
        "bad reply from the switch: reply longer than the 64 MiB limit"
    );
    assert!(matches!(e, ClientError::Protocol(_)), "{e:?}");
}

#[test]
fn a_line_with_no_newline_is_cut_at_the_cap_and_no_more_is_read() {
    // 128 MiB of one line and no newline: a stand-in for an endless one
    // that does not fill this machine's memory if the client reads it all.
    let fake = Fake::start("nonewline", |s| pour(s, b"", b'x', 2 * CAP));
    let mut c = fake.connect(Duration::from_secs(10));
    let e = c.call(&Request::Status).unwrap_err();
    assert_eq!(
        e.to_string(),
        "bad reply from the switch: reply longer than the 64 MiB limit"
    );
    drop(c);
    // The cap, and what the socket buffers held when the client stopped:
    // far less than the 134,217,728 bytes offered. 72 MiB = 75,497,472.
    let delivered = fake.delivered();
    assert!(delivered < 75_497_472, "the client took {delivered} bytes");
}

#[test]
fn a_reply_dripped_a_byte_at_a_time_ends_at_the_call_deadline() {
    // 300 bytes at one each 200 ms: 60 s in all, every read well within
    // the 300 ms timeout.
    let fake = Fake::start("drip", |s| {
        let line = padded_reply(299);
        let mut written = 0;
        for b in line {
            if s.write_all(&[b]).is_err() {
                break;
            }
            written += 1;
            std::thread::sleep(Duration::from_millis(200));
        }
        written
    });
    let mut c = fake.connect(Duration::from_millis(300));
    let (tx, rx) = mpsc::channel();
    let started = Instant::now();
    std::thread::spawn(move || {
        let _ = tx.send(c.call(&Request::Status).map(|_| ()));
    });
    let result = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("a 300 ms call still running after 10 s");
    let e = result.unwrap_err();
    assert_eq!(
        e.to_string(),
        "control connection failed: no reply within 300 ms"
    );
    assert!(
        matches!(e, ClientError::Io(ref io) if io.kind() == std::io::ErrorKind::TimedOut),
        "{e:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    // A few bytes at most (one per 200 ms of the 300 ms), not the 300.
    assert!(fake.delivered() < 10);
}

/// Text from the switch is echoed as `lcmp_topology::echo` does: quoted,
/// control bytes escaped, cut to 100 characters with the size. A refusal
/// that clears the screen and a 10 kB one, and a reply whose kind is an
/// escape sequence and 10 kB long (serde names the unknown kind).
#[test]
fn text_from_the_switch_is_escaped_and_cut_in_errors() {
    // The client's error when the switch answers `line` (no newline).
    let error_for = |tag: &str, mut line: Vec<u8>| {
        line.push(b'\n');
        let fake = Fake::start(tag, move |s| pour(s, &line, b' ', line.len()));
        fake.connect(Duration::from_secs(10))
            .call(&Request::Status)
            .unwrap_err()
    };
    let refusal = |message: String| {
        let mut line =
            encode_response(1, Body::Error(ErrorReply::new(ErrorKind::Invalid, message)));
        line.pop();
        let e = error_for("refusal", line);
        assert!(matches!(e, ClientError::Refused(_)), "{e:?}");
        e.to_string()
    };
    assert_eq!(
        refusal("\x1b[2J\x1b[31mred\r\nsecond line".into()),
        "the switch refused: \"\\u{1b}[2J\\u{1b}[31mred\\r\\nsecond line\""
    );
    // "the switch refused: " (20) + the first 100 x quoted (102) +
    // "... (10000 bytes)" (17): 139 characters.
    let long = refusal("x".repeat(10_000));
    assert_eq!(
        long,
        format!(
            "the switch refused: \"{}\"... (10000 bytes)",
            "x".repeat(100)
        )
    );
    assert_eq!(long.len(), 139);

    let kind = format!("\x1b[31m{}", "y".repeat(10_000));
    let line = serde_json::to_vec(&serde_json::json!({
        "v": 1, "id": 1, "ok": { "kind": kind }
    }))
    .unwrap();
    let e = error_for("badkind", line);
    assert!(matches!(e, ClientError::Protocol(_)), "{e:?}");
    let shown = e.to_string();
    // serde's "unknown variant `" (17 characters), the escape (5) and 78
    // y make the 100 echoed.
    let want = format!(
        "bad reply from the switch: \"unknown variant `\\u{{1b}}[31m{}\"... (",
        "y".repeat(78)
    );
    assert!(shown.starts_with(&want), "{shown}");
    assert!(shown.ends_with(" bytes)"), "{shown}");
    assert!(!shown.chars().any(char::is_control), "{shown:?}");
    assert!(shown.len() <= 200, "{} characters", shown.len());
}

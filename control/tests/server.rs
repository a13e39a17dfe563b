//! The control socket end to end: a served inbox answered by a stand-in
//! poll thread; hostile and broken clients get errors and the server goes
//! on; other users are refused twice (file mode, then peer credentials).

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lcmp_control::proto::{Body, ErrorKind, Reply, Request, ResponseEnvelope, MAX_REQUEST_BYTES};
use lcmp_control::server::{serve, serve_scoped, Inbox};
use lcmp_control::{Client, ClientError, Snapshot};
use proptest::prelude::*;

/// A served socket and a thread answering `status` like a poll loop
/// would; counts the requests it answered.
struct Fixture {
    dir: PathBuf,
    path: PathBuf,
    stop: Arc<AtomicBool>,
    answered: Arc<AtomicU64>,
}

impl Fixture {
    fn new(tag: &str) -> Fixture {
        let dir = std::env::temp_dir().join(format!("lcmp-ctl-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("s1.sock");
        let inbox = Inbox::new().unwrap();
        serve(&path, &inbox).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let answered = Arc::new(AtomicU64::new(0));
        let (s, a) = (stop.clone(), answered.clone());
        std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                while let Some(p) = inbox.take() {
                    let body = Body::Ok(Box::new(Reply::Status(Box::new(Snapshot {
                        switch: "s1".into(),
                        ..Default::default()
                    }))));
                    inbox.count(false);
                    a.fetch_add(1, Ordering::Relaxed);
                    p.answer(body);
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        Fixture {
            dir,
            path,
            stop,
            answered,
        }
    }

    fn status_works(&self) {
        let mut c = Client::connect(&self.path, Duration::from_secs(5)).unwrap();
        match c.call(&Request::Status).unwrap() {
            Reply::Status(s) => assert_eq!(s.switch, "s1"),
            other => panic!("{other:?}"),
        }
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn send_raw(path: &Path, bytes: &[u8]) -> Vec<ResponseEnvelope> {
    let mut s = UnixStream::connect(path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // A server that closes early may refuse the rest: that is its right.
    let _ = s.write_all(bytes);
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut out = Vec::new();
    for line in BufReader::new(s).lines() {
        let Ok(line) = line else { break };
        out.push(serde_json::from_str(&line).expect("every reply line is a reply"));
    }
    out
}

fn error_kinds(replies: &[ResponseEnvelope]) -> Vec<ErrorKind> {
    replies
        .iter()
        .filter_map(|r| match &r.body {
            Body::Error(e) => Some(e.kind),
            Body::Ok(_) => None,
        })
        .collect()
}

#[test]
fn the_socket_is_root_only_on_disk() {
    let f = Fixture::new("mode");
    let mode = std::fs::metadata(&f.path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    f.status_works();
}

#[test]
fn broken_and_hostile_requests_get_errors_and_the_server_goes_on() {
    let f = Fixture::new("garbage");
    let replies = send_raw(
        &f.path,
        b"not json\n{\"v\":1,\"verb\":\"reboot\"}\n{\"v\":9,\"id\":4,\"verb\":\"status\"}\n\n\
          {\"v\":1,\"id\":5,\"verb\":\"status\"}\n{\"v\":1,\"id\":6,\"verb\":\"sta",
    );
    // Three errors, one answer, and the truncated last line is dropped at
    // end of stream without an answer.
    assert_eq!(
        error_kinds(&replies),
        vec![
            ErrorKind::BadRequest,
            ErrorKind::BadRequest,
            ErrorKind::Version
        ]
    );
    assert_eq!(replies.len(), 4);
    assert_eq!(replies[2].id, 4);
    assert_eq!(replies[3].id, 5);
    // An oversized line is refused and the connection closed.
    let mut big = vec![b'x'; MAX_REQUEST_BYTES + 10];
    big.push(b'\n');
    let replies = send_raw(&f.path, &big);
    assert_eq!(error_kinds(&replies), vec![ErrorKind::TooLarge]);
    // Random bytes in bulk.
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let noise: Vec<u8> = (0..200_000)
        .map(|_| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng as u8
        })
        .collect();
    let replies = send_raw(&f.path, &noise);
    assert!(replies.iter().all(|r| matches!(r.body, Body::Error(_))));
    f.status_works();
    assert!(f.answered.load(Ordering::Relaxed) >= 2);
}

#[test]
fn a_stalled_client_does_not_hold_the_server() {
    let f = Fixture::new("stall");
    // Half a request, never finished, on several connections at once.
    let stalled: Vec<UnixStream> = (0..4)
        .map(|_| {
            let mut s = UnixStream::connect(&f.path).unwrap();
            s.write_all(b"{\"v\":1,\"verb\":").unwrap();
            s
        })
        .collect();
    f.status_works();
    drop(stalled);
}

#[test]
fn a_second_server_on_a_live_socket_is_refused_and_a_stale_one_replaced() {
    let f = Fixture::new("inuse");
    let e = serve(&f.path, &Inbox::new().unwrap()).unwrap_err();
    assert!(e.to_string().contains("in use"), "{e}");
    // A socket file nobody listens on (a switch killed with -9).
    let stale = f.dir.join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    serve(&stale, &Inbox::new().unwrap()).unwrap();
    assert!(Client::connect(&stale, Duration::from_secs(1)).is_ok());
}

#[test]
fn a_scoped_server_stops_and_frees_its_path_when_dropped() {
    let dir = std::env::temp_dir().join(format!("lcmp-ctl-scoped-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join("s1.sock");
    let inbox = Inbox::new().unwrap();
    let served = serve_scoped(&path, &inbox).unwrap();
    assert!(Client::connect(&path, Duration::from_secs(1)).is_ok());
    // While it serves, the path is taken.
    assert!(serve_scoped(&path, &Inbox::new().unwrap()).is_err());
    drop(served);
    assert!(!path.exists());
    assert!(Client::connect(&path, Duration::from_secs(1)).is_err());
    // The next run binds the same path.
    let again = serve_scoped(&path, &Inbox::new().unwrap()).unwrap();
    assert!(Client::connect(&path, Duration::from_secs(1)).is_ok());
    drop(again);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn nothing_listening_is_named_as_such() {
    let e = match Client::connect(
        Path::new("/nonexistent/lcmp/s9.sock"),
        Duration::from_secs(1),
    ) {
        Err(e) => e,
        Ok(_) => panic!("connected to nothing"),
    };
    assert!(matches!(e, ClientError::NotRunning(..)));
    assert!(
        e.to_string()
            .contains("no switch answers on /nonexistent/lcmp/s9.sock"),
        "{e}"
    );
}

/// What a child running as `nobody` saw: connect's errno (0: connected)
/// and the first bytes of the reply to a status request.
fn as_nobody(path: &Path) -> (i32, Vec<u8>) {
    use std::os::unix::ffi::OsStrExt;
    // Everything the child needs is prepared before the fork: after it,
    // the child makes only raw system calls (no allocation, no locks).
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, s) in addr.sun_path.iter_mut().zip(path.as_os_str().as_bytes()) {
        *d = *s as libc::c_char;
    }
    let request = b"{\"v\":1,\"id\":1,\"verb\":\"status\"}\n";
    let mut fds = [0; 2];
    // SAFETY: pipe writes two descriptors into the array.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: the child only calls async-signal-safe functions (setgid,
    // setuid, socket, connect, write, read, _exit) on memory prepared
    // before the fork, then exits without returning.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: see above; every pointer is to live stack memory.
        unsafe {
            let mut status: [i32; 1] = [0];
            if libc::setgid(65534) != 0 || libc::setuid(65534) != 0 {
                status[0] = -1;
                libc::write(fds[1], status.as_ptr().cast(), 4);
                libc::_exit(1);
            }
            let s = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
            let r = libc::connect(
                s,
                (&addr as *const libc::sockaddr_un).cast(),
                std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
            );
            status[0] = if r == 0 { 0 } else { *libc::__errno_location() };
            libc::write(fds[1], status.as_ptr().cast(), 4);
            if r == 0 {
                libc::write(s, request.as_ptr().cast(), request.len());
                let mut buf = [0u8; 512];
                let n = libc::read(s, buf.as_mut_ptr().cast(), buf.len());
                if n > 0 {
                    libc::write(fds[1], buf.as_ptr().cast(), n as usize);
                }
            }
            libc::_exit(0);
        }
    }
    // SAFETY: the parent closes its copy of the write end it does not use.
    unsafe { libc::close(fds[1]) };
    // SAFETY: fds[0] is the pipe's read end, owned from here on.
    let mut reader = unsafe {
        use std::os::fd::FromRawFd;
        std::fs::File::from_raw_fd(fds[0])
    };
    let mut out = Vec::new();
    reader.read_to_end(&mut out).unwrap();
    let mut st = 0;
    // SAFETY: waits for our own child.
    unsafe { libc::waitpid(pid, &mut st, 0) };
    let errno = i32::from_ne_bytes(out[..4].try_into().unwrap());
    (errno, out[4..].to_vec())
}

#[test]
fn other_users_are_refused() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("not root: cannot run a client as another user; skipped");
        return;
    }
    let f = Fixture::new("nobody");
    // The temp directory must let nobody reach the socket at all.
    std::fs::set_permissions(&f.dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (errno, _) = as_nobody(&f.path);
    assert_eq!(errno, libc::EACCES, "mode 0600 keeps other users out");
    // Even with the file opened up by mistake, the server checks the
    // peer's credentials.
    std::fs::set_permissions(&f.path, std::fs::Permissions::from_mode(0o666)).unwrap();
    let (errno, reply) = as_nobody(&f.path);
    assert_eq!(errno, 0);
    let text = String::from_utf8_lossy(&reply);
    assert!(text.contains("uid 65534 may not control"), "{text}");
    assert!(!text.contains("\"ok\""), "{text}");
    f.status_works();
}

proptest! {
    #[test]
    fn the_decoder_never_panics_on_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = lcmp_control::proto::decode_request(&bytes);
    }

    #[test]
    fn the_decoder_never_panics_on_near_requests(
        verb in prop_oneof![
            Just("status"), Just("costs"), Just("set_link"), Just("replace_tables"),
            Just("set_params"), Just("flows"), Just("x"),
        ],
        key in "[a-z_]{1,12}",
        value in prop_oneof![
            Just("1".to_string()), Just("-1".to_string()), Just("\"p1\"".to_string()),
            Just("null".to_string()), Just("[]".to_string()), Just("{}".to_string()),
            Just("1e400".to_string()), Just("18446744073709551616".to_string()),
            Just("[{\"prefix\":\"10.0.0.0/8\",\"candidates\":[{\"port\":300}]}]".to_string()),
        ],
        cut in 0usize..120,
    ) {
        let line = format!("{{\"v\":1,\"id\":3,\"verb\":\"{verb}\",\"{key}\":{value}}}");
        let _ = lcmp_control::proto::decode_request(line.as_bytes());
        let cut = cut.min(line.len());
        let _ = lcmp_control::proto::decode_request(&line.as_bytes()[..cut]);
    }
}

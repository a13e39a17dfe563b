//! `lcmp-ctl` against hostile switches: a fake switch on a plain
//! `UnixListener` that drips its reply, sends a line that never ends, or
//! captures forever and sends frames past every limit. The binary must end
//! on its own terms: at `--timeout-ms` for the whole call, at the reply
//! cap, and at `--duration`, `--count`, `--max-bytes` and `--snaplen`.
//! Each run is killed after 10 s, which only a client that trusts the
//! switch reaches.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use lcmp_control::proto::{decode_request, encode_response, CaptureReply, CapturedFrame};
use lcmp_control::{Body, Reply, Request};
use pcap_file::pcapng::{Block, PcapNgReader};

/// What a fake switch does with one request: writes whatever it likes.
type Respond = Box<dyn FnMut(&Request, &mut UnixStream) -> std::io::Result<()> + Send>;

/// A switch named `dc1` serving one connection with `respond`, recording
/// the requests.
struct FakeSwitch {
    dir: PathBuf,
    socket: PathBuf,
    seen: Arc<Mutex<Vec<Request>>>,
    /// Reply bytes the client took (when `respond` reports them).
    delivered: mpsc::Receiver<u64>,
}

impl FakeSwitch {
    fn start(tag: &str, mut respond: Respond) -> FakeSwitch {
        FakeSwitch::start_counting(tag, move |r, s, _| respond(r, s))
    }

    /// As `start`; `respond` adds the bytes it wrote to its third
    /// argument.
    fn start_counting(
        tag: &str,
        mut respond: impl FnMut(&Request, &mut UnixStream, &mut u64) -> std::io::Result<()>
            + Send
            + 'static,
    ) -> FakeSwitch {
        let dir = std::env::temp_dir().join(format!(
            "lcmp-ctl-limits-{}-{tag}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let socket = dir.join("dc1.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let seen2 = seen.clone();
        let (tx, delivered) = mpsc::channel();
        std::thread::spawn(move || {
            let Ok((mut s, _)) = listener.accept() else {
                return;
            };
            let mut lines = BufReader::new(s.try_clone().unwrap());
            let mut written = 0;
            loop {
                let mut line = String::new();
                if !matches!(lines.read_line(&mut line), Ok(n) if n > 0) {
                    break;
                }
                let request = decode_request(line.trim_end().as_bytes())
                    .expect("lcmp-ctl sends valid requests")
                    .request;
                seen2.lock().unwrap().push(request.clone());
                if respond(&request, &mut s, &mut written).is_err() {
                    break;
                }
            }
            let _ = tx.send(written);
        });
        FakeSwitch {
            dir,
            socket,
            seen,
            delivered,
        }
    }

    fn seen(&self) -> Vec<Request> {
        self.seen.lock().unwrap().clone()
    }

    fn ctl(&self, args: &[&str]) -> Run {
        run_ctl(&self.socket, &self.dir, args)
    }
}

impl Drop for FakeSwitch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// How a run of `lcmp-ctl` ended.
struct Run {
    /// `None`: still running after 10 s, and killed.
    status: Option<ExitStatus>,
    stderr: String,
}

impl Run {
    /// The exit code, failing the test if it had to be killed.
    fn code(&self, what: &str) -> i32 {
        let status = self
            .status
            .unwrap_or_else(|| panic!("lcmp-ctl still running after 10 s: {what}"));
        status.code().expect("exited, not killed by a signal")
    }
}

/// Runs `lcmp-ctl --socket SOCKET args...`, killed after 10 s.
fn run_ctl(socket: &Path, dir: &Path, args: &[&str]) -> Run {
    let err_path = dir.join("stderr");
    let mut child = Command::new(env!("CARGO_BIN_EXE_lcmp-ctl"))
        .arg("--socket")
        .arg(socket)
        .args(args)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .expect("run lcmp-ctl");
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if started.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Run {
        status,
        stderr: std::fs::read_to_string(&err_path).unwrap(),
    }
}

fn reply(id: u64, r: Reply) -> Vec<u8> {
    encode_response(id, Body::Ok(Box::new(r)))
}

/// `n` frames of `len` bytes of 0xab each.
fn frames(n: usize, len: usize) -> Vec<CapturedFrame> {
    (0..n)
        .map(|i| CapturedFrame {
            time_unix_ns: 1_700_000_000_000_000_000 + i as u64,
            outbound: false,
            orig_len: len as u32,
            data: "ab".repeat(len),
        })
        .collect()
}

/// A switch that captures forever: every capture request, the stop too,
/// is answered with `per_reply` frames of `len` bytes and "not done".
fn endless(tag: &str, per_reply: usize, len: usize) -> FakeSwitch {
    let mut id = 0;
    FakeSwitch::start(
        tag,
        Box::new(move |_, s| {
            id += 1;
            s.write_all(&reply(
                id,
                Reply::Capture(CaptureReply {
                    port: "p0".into(),
                    snaplen: 65_535,
                    frames: frames(per_reply, len),
                    captured: id * per_reply as u64,
                    dropped: 0,
                    done: false,
                }),
            ))
        }),
    )
}

/// Each frame of a pcapng file: (captured length, original length).
fn pcap_lengths(file: &Path) -> Vec<(usize, u32)> {
    let mut reader = PcapNgReader::new(std::fs::File::open(file).unwrap()).unwrap();
    let mut out = Vec::new();
    while let Some(block) = reader.next_block() {
        if let Block::EnhancedPacket(epb) = block.unwrap() {
            out.push((epb.data.len(), epb.original_len));
        }
    }
    out
}

fn capture_start(snaplen: u32, max_frames: u64, max_bytes: u64, duration_ns: u64) -> Request {
    Request::CaptureStart {
        port: "p0".into(),
        snaplen,
        max_frames,
        max_bytes,
        duration_ns,
    }
}

#[test]
fn timeout_ms_bounds_the_whole_call_against_a_dripping_switch() {
    // A status reply padded to 300 bytes, one byte each 200 ms: 60 s, each
    // read well within the 300 ms.
    let sw = FakeSwitch::start(
        "drip",
        Box::new(|_, s| {
            let mut line = reply(
                1,
                Reply::Status(Box::new(lcmp_control::Snapshot {
                    switch: "dc1".into(),
                    ..Default::default()
                })),
            );
            line.pop();
            line.resize(line.len().max(299), b' ');
            line.push(b'\n');
            for b in line {
                s.write_all(&[b])?;
                std::thread::sleep(Duration::from_millis(200));
            }
            Ok(())
        }),
    );
    let run = sw.ctl(&["--timeout-ms", "300", "status"]);
    assert_eq!(run.code("--timeout-ms 300 does not bound the call"), 1);
    assert_eq!(
        run.stderr,
        format!(
            "lcmp-ctl: dc1: no reply on {} within 300 ms\n",
            sw.socket.display()
        )
    );
}

#[test]
fn a_reply_line_that_never_ends_is_cut_at_the_cap() {
    // 128 MiB (134,217,728 bytes) of one line with no newline; the client
    // must stop at its 64 MiB cap.
    let sw = FakeSwitch::start_counting("endless-line", |_, s, written| {
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..128 {
            let mut rest = &chunk[..];
            while !rest.is_empty() {
                let n = s.write(rest)?;
                *written += n as u64;
                rest = &rest[n..];
            }
        }
        Ok(())
    });
    let run = sw.ctl(&["status"]);
    assert_eq!(run.code("reading an endless line"), 1);
    assert_eq!(
        run.stderr,
        "lcmp-ctl: dc1: bad reply from the switch: reply longer than the 64 MiB limit\n"
    );
    // The cap and what the socket buffers held, far from the 128 MiB:
    // 72 MiB = 75,497,472 bytes.
    let delivered = sw.delivered.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(delivered < 75_497_472, "the client took {delivered} bytes");
}

#[test]
fn capture_stops_at_its_duration_when_the_switch_never_does() {
    let sw = endless("duration", 1, 60);
    let file = sw.dir.join("d.pcapng");
    let run = sw.ctl(&[
        "capture",
        "p0",
        "-w",
        file.to_str().unwrap(),
        "--duration",
        "500ms",
        "--count",
        "1000000",
        "--max-bytes",
        "1GB",
    ]);
    assert_eq!(
        run.code("--duration 500ms left to the switch"),
        0,
        "{}",
        run.stderr
    );
    let seen = sw.seen();
    assert_eq!(
        seen[0],
        capture_start(2048, 1_000_000, 1_000_000_000, 500_000_000)
    );
    assert_eq!(seen.last(), Some(&Request::CaptureStop));
    assert!(seen[1..seen.len() - 1]
        .iter()
        .all(|r| *r == Request::CaptureFetch));
    // Every frame whole (60 bytes, under the 2048 snaplen), one per reply.
    let lengths = pcap_lengths(&file);
    assert_eq!(lengths.len(), seen.len());
    assert!(lengths.iter().all(|&l| l == (60, 60)));
}

#[test]
fn capture_stops_at_its_count_when_the_switch_never_does() {
    // Three 100-byte frames a reply: the start's 3, then 2 of the fetch's.
    let sw = endless("count", 3, 100);
    let file = sw.dir.join("c.pcapng");
    let run = sw.ctl(&[
        "capture",
        "p0",
        "-w",
        file.to_str().unwrap(),
        "--count",
        "5",
        "--duration",
        "60s",
    ]);
    assert_eq!(
        run.code("--count 5 left to the switch"),
        0,
        "{}",
        run.stderr
    );
    assert_eq!(
        run.stderr,
        format!(
            "lcmp-ctl: dc1/p0: 5 frames, 500 bytes written to {}\n",
            file.display()
        )
    );
    assert_eq!(
        sw.seen(),
        vec![
            capture_start(2048, 5, 64_000_000, 60_000_000_000),
            Request::CaptureFetch,
            Request::CaptureStop,
        ]
    );
    assert_eq!(pcap_lengths(&file), vec![(100, 100); 5]);
}

#[test]
fn capture_stops_at_its_byte_limit_when_the_switch_never_does() {
    // Four 1500-byte frames a reply against 10 kB = 10,000 bytes: the
    // start's 4 (6,000), two of the fetch's (9,000), and the third cut to
    // the 1,000 left.
    let sw = endless("bytes", 4, 1500);
    let file = sw.dir.join("b.pcapng");
    let run = sw.ctl(&[
        "capture",
        "p0",
        "-w",
        file.to_str().unwrap(),
        "--max-bytes",
        "10kB",
        "--duration",
        "60s",
    ]);
    assert_eq!(
        run.code("--max-bytes 10kB left to the switch"),
        0,
        "{}",
        run.stderr
    );
    assert_eq!(
        run.stderr,
        format!(
            "lcmp-ctl: dc1/p0: 7 frames, 10000 bytes written to {}\n",
            file.display()
        )
    );
    assert_eq!(
        sw.seen(),
        vec![
            capture_start(2048, 10_000, 10_000, 60_000_000_000),
            Request::CaptureFetch,
            Request::CaptureStop,
        ]
    );
    let mut want = vec![(1500, 1500); 6];
    want.push((1000, 1500));
    assert_eq!(pcap_lengths(&file), want);
}

#[test]
fn capture_cuts_every_frame_to_the_snaplen_whatever_the_switch_sends() {
    // An 8 MiB frame (8,388,608 bytes) at --snaplen 2048, and a 100-byte
    // frame whose stated length (10) is shorter than its bytes.
    let sw = FakeSwitch::start(
        "snaplen",
        Box::new(|r, s| {
            let mut frames = frames(1, 8 << 20);
            frames.push(CapturedFrame {
                time_unix_ns: 1_700_000_000_000_000_001,
                outbound: true,
                orig_len: 10,
                data: "cd".repeat(100),
            });
            let (id, frames) = match r {
                Request::CaptureStart { .. } => (1, frames),
                _ => (2, vec![]),
            };
            s.write_all(&reply(
                id,
                Reply::Capture(CaptureReply {
                    port: "p0".into(),
                    snaplen: 2048,
                    frames,
                    captured: 2,
                    dropped: 0,
                    done: true,
                }),
            ))
        }),
    );
    let file = sw.dir.join("s.pcapng");
    let run = sw.ctl(&[
        "capture",
        "p0",
        "-w",
        file.to_str().unwrap(),
        "--snaplen",
        "2048",
    ]);
    assert_eq!(run.code("an 8 MiB frame"), 0, "{}", run.stderr);
    assert_eq!(
        run.stderr,
        format!(
            "lcmp-ctl: dc1/p0: 2 frames, 2148 bytes written to {}\n",
            file.display()
        )
    );
    assert_eq!(
        sw.seen(),
        vec![
            capture_start(2048, 10_000, 64_000_000, 10_000_000_000),
            Request::CaptureStop,
        ]
    );
    assert_eq!(pcap_lengths(&file), vec![(2048, 8_388_608), (100, 100)]);
}

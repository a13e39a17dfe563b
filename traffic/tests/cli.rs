//! The real binary: server and client on 127.0.0.1, bad input, misbehaving
//! peers. Nothing here waits a fixed time: readiness is the server's
//! `listening` line, completion is the client's exit.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Output, Stdio};
use std::time::Duration;

use lcmp_traffic::protocol::{Header, ACK, HEADER_LEN};
use lcmp_traffic::record::{FlowRecord, FlowStatus};

const BIN: &str = env!("CARGO_BIN_EXE_lcmp-traffic");

/// A scratch directory per test.
fn scratch(test: &str) -> PathBuf {
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cli-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Small flows (up to 200 KB) so that a debug build on a loaded machine
/// keeps up easily.
fn small_workload(dir: &Path) -> PathBuf {
    let path = dir.join("small.txt");
    std::fs::write(&path, "0 0\n1000 30\n10000 70\n50000 90\n200000 100\n").unwrap();
    path
}

struct Server {
    child: Child,
    addrs: Vec<SocketAddr>,
    // Held so that the server's stdout stays open.
    _stdout: BufReader<ChildStdout>,
}

impl Server {
    fn start(listen: &[&str]) -> Server {
        let mut cmd = Command::new(BIN);
        cmd.arg("server");
        for l in listen {
            cmd.args(["--listen", l]);
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut addrs = Vec::new();
        for _ in listen {
            let mut line = String::new();
            stdout.read_line(&mut line).unwrap();
            let Some(addr) = line.trim().strip_prefix("listening ") else {
                let mut err = String::new();
                let _ = child.stderr.take().unwrap().read_to_string(&mut err);
                panic!("server did not start: stdout {line:?}, stderr {err:?}");
            };
            addrs.push(addr.parse().unwrap());
        }
        Server {
            child,
            addrs,
            _stdout: stdout,
        }
    }

    /// SIGTERM; returns the exit status and stderr.
    fn stop(mut self) -> (std::process::ExitStatus, String) {
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: kill(2) with a pid we spawned and still own (not waited).
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        let status = self.child.wait().unwrap();
        let mut err = String::new();
        let _ = self.child.stderr.take().unwrap().read_to_string(&mut err);
        (status, err)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn client(args: &[&str]) -> Output {
    Command::new(BIN).arg("client").args(args).output().unwrap()
}

fn read_csv(path: &Path) -> (String, Vec<FlowRecord>) {
    let text = std::fs::read_to_string(path).unwrap();
    let header = text.lines().next().unwrap_or_default().to_string();
    let records = csv::Reader::from_reader(text.as_bytes())
        .deserialize()
        .collect::<Result<Vec<FlowRecord>, _>>()
        .unwrap();
    (header, records)
}

/// The header serde derives from FlowRecord's fields.
fn expected_header() -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.serialize(FlowRecord {
        id: 0,
        sender: String::new(),
        receiver: String::new(),
        src: String::new(),
        dst: String::new(),
        size_bytes: 0,
        start_ns: 0,
        fct_ns: None,
        min_rtt_us: None,
        status: FlowStatus::Ok,
        error: String::new(),
        warmup: false,
        path: None,
        switch_path: None,
        reverse_switch_path: None,
    })
    .unwrap();
    let bytes = w.into_inner().unwrap();
    String::from_utf8(bytes)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_string()
}

#[test]
fn flows_complete_end_to_end() {
    let dir = scratch("e2e");
    let workload = small_workload(&dir);
    let out = dir.join("flows.csv");
    let server = Server::start(&["127.0.0.1:0", "127.0.0.1:0"]);
    let dst_a = format!("ha={}", server.addrs[0]);
    let dst_b = format!("hb={}", server.addrs[1]);
    let result = client(&[
        "--name",
        "h1",
        "--dst",
        &dst_a,
        "--dst",
        &dst_b,
        "--workload",
        workload.to_str().unwrap(),
        "--flows-per-s",
        "40",
        "--duration",
        "2",
        "--warmup",
        "0.5",
        "--drain",
        "120",
        "--seed",
        "7",
        "--id-base",
        "5000",
        "--cc",
        "reno",
        "--progress-ms",
        "200",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&result.stdout);
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(result.status.success(), "{stdout}\n{stderr}");

    let (header, records) = read_csv(&out);
    assert_eq!(header, expected_header());
    assert_eq!(
        header,
        "id,sender,receiver,src,dst,size_bytes,start_ns,fct_ns,min_rtt_us,status,error,warmup,path,switch_path,reverse_switch_path"
    );
    assert!(!records.is_empty());
    let mut ids = HashSet::new();
    let mut receivers = HashSet::new();
    for r in &records {
        assert_eq!(r.status, FlowStatus::Ok, "{r:?}");
        assert!(r.fct_ns.is_some_and(|f| f > 0), "{r:?}");
        assert!(r.min_rtt_us.is_some(), "{r:?}");
        assert!(r.error.is_empty(), "{r:?}");
        assert!(ids.insert(r.id), "duplicate id {}", r.id);
        assert!(r.id >= 5000 && r.id < 5000 + records.len() as u64);
        assert!((1..=200_000).contains(&r.size_bytes), "{r:?}");
        assert!(r.start_ns < 2_000_000_000, "{r:?}");
        assert_eq!(r.warmup, r.start_ns < 500_000_000, "{r:?}");
        assert_eq!(r.sender, "h1");
        assert!(r.src.starts_with("127.0.0.1:"), "{r:?}");
        let expected_dst = if r.receiver == "ha" {
            server.addrs[0]
        } else {
            server.addrs[1]
        };
        assert_eq!(r.dst, expected_dst.to_string());
        receivers.insert(r.receiver.clone());
    }
    assert!(records.windows(2).all(|w| w[0].start_ns <= w[1].start_ns));
    // About 80 flows from a fixed seed: both receivers and the warm-up occur.
    assert_eq!(receivers.len(), 2);
    assert!(records.iter().any(|r| r.warmup));

    // Progress lines, then the final line with the totals.
    let lines: Vec<&str> = stdout.lines().collect();
    let (last, progress) = lines.split_last().unwrap();
    for l in progress {
        assert!(
            l.starts_with("{\"t_s\":") && l.contains("\"deferred\":"),
            "{l}"
        );
    }
    assert!(last.starts_with("{\"done\":true,"), "{last}");
    let total = format!(
        "\"started\":{},\"completed\":{},\"failed\":0,\"unfinished\":0",
        records.len(),
        records.len()
    );
    assert!(last.contains(&total), "{last}");

    let (status, err) = server.stop();
    assert!(status.success(), "{err}");
    assert!(
        err.contains(&format!("served {} flows", records.len())),
        "{err}"
    );
}

#[test]
fn bad_input_exits_2_with_one_line() {
    let dir = scratch("bad");
    let out = dir.join("never.csv");
    let out_s = out.to_str().unwrap().to_string();
    let bad_cdf = dir.join("bad.txt");
    std::fs::write(&bad_cdf, "0 0\n100 50\n90 100\n").unwrap();
    let base = |extra: &[&str], skip: &[&str]| -> Vec<String> {
        let mut args: Vec<(&str, &str)> = vec![
            ("--name", "h1"),
            ("--dst", "h2=127.0.0.1:9"),
            ("--workload", "websearch"),
            ("--rate-bps", "1G"),
            ("--duration", "1"),
            ("--out", &out_s),
        ];
        args.retain(|(flag, _)| !skip.contains(flag));
        let mut v: Vec<String> = args
            .into_iter()
            .flat_map(|(a, b)| [a.to_string(), b.to_string()])
            .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let cases: Vec<(Vec<String>, &str)> = vec![
        (base(&["--rate-bps", "0"], &["--rate-bps"]), "--rate-bps"),
        (base(&["--rate-bps", "-3G"], &["--rate-bps"]), "--rate-bps"),
        (
            base(&["--flows-per-s", "0"], &["--rate-bps"]),
            "--flows-per-s",
        ),
        (base(&["--duration", "0"], &["--duration"]), "--duration"),
        (base(&["--duration", "-1"], &["--duration"]), "--duration"),
        (
            base(&["--duration", "20S"], &["--duration"]),
            "case-sensitive; write \"20s\"",
        ),
        (
            base(&["--duration", "20 s"], &["--duration"]),
            "no space between the number and the unit; write \"20s\"",
        ),
        (base(&["--drain", "5 ms"], &[]), "--drain"),
        (base(&[], &["--dst"]), "--dst"),
        (base(&["--dst", "nonsense"], &["--dst"]), "--dst"),
        (
            base(&["--workload", "/nonexistent/cdf.txt"], &["--workload"]),
            "/nonexistent/cdf.txt",
        ),
        (
            base(&["--workload", bad_cdf.to_str().unwrap()], &["--workload"]),
            "bad.txt:3:",
        ),
        // Endless inputs are read up to the cap (they read ~2 GB, then
        // "out of memory").
        (
            base(&["--workload", "/dev/zero"], &["--workload"]),
            "larger than 256 MiB (the limit for a data file)",
        ),
        (
            base(
                &["--schedule", "/dev/zero"],
                &["--workload", "--rate-bps", "--duration"],
            ),
            "cannot read --schedule /dev/zero: larger than 256 MiB (the limit for a data file)",
        ),
        (base(&["--cc", "no-such-cc"], &[]), "available"),
        (base(&[], &["--rate-bps"]), "--rate-bps"),
        (base(&["--flows-per-s", "5"], &[]), "cannot be used"),
        (base(&["--warmup", "1"], &[]), "--warmup"),
    ];
    for (args, needle) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let r = client(&args);
        let stderr = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(r.stdout.is_empty(), "{args:?} started something");
        assert!(!out.exists(), "{args:?} created the output");
    }
    let args = base(&["--out", "/nonexistent-dir/flows.csv"], &["--out"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = client(&args);
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--out"), "{stderr}");
}

#[test]
fn unreachable_receivers_give_failed_and_unfinished_rows() {
    let dir = scratch("unreachable");
    let out = dir.join("flows.csv");
    // Connections complete in the kernel's backlog but are never accepted,
    // so no flow can be acknowledged.
    let black_hole = TcpListener::bind("127.0.0.1:0").unwrap();
    // A port nobody listens on any more.
    let refused = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let r = client(&[
        "--name",
        "h1",
        "--dst",
        &format!("hole={}", black_hole.local_addr().unwrap()),
        "--dst",
        &format!("gone={refused}"),
        "--workload",
        "alistorage",
        "--flows-per-s",
        "30",
        "--duration",
        "0.5",
        "--drain",
        "0.2",
        "--max-concurrent",
        "4",
        "--progress-ms",
        "0",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&r.stdout);
    assert!(
        r.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    let (_, records) = read_csv(&out);
    assert!(!records.is_empty());
    for r in &records {
        assert_eq!(r.fct_ns, None, "{r:?}");
        match r.status {
            FlowStatus::Failed => {
                assert_eq!(r.receiver, "gone");
                assert!(
                    r.error.contains("connect:") && r.error.contains("refused"),
                    "{r:?}"
                );
            }
            FlowStatus::Unfinished => assert!(r.error.is_empty(), "{r:?}"),
            FlowStatus::Ok => panic!("{r:?}"),
        }
        if r.receiver == "hole" {
            assert_eq!(r.status, FlowStatus::Unfinished, "{r:?}");
        }
    }
    assert!(records.iter().any(|r| r.receiver == "hole"));
    assert!(stdout.contains("\"unfinished\":"), "{stdout}");
}

#[test]
fn server_survives_misbehaving_clients() {
    let server = Server::start(&["127.0.0.1:0"]);
    let addr = server.addrs[0];
    let timeout = Some(Duration::from_secs(60));

    // Announces 2 TiB: the server closes without an ack.
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(timeout).unwrap();
    s.write_all(
        &Header {
            flow_id: 1,
            size: 2 << 40,
        }
        .encode(),
    )
    .unwrap();
    let mut buf = [0u8; 1];
    assert!(matches!(s.read(&mut buf), Ok(0) | Err(_)));

    // Vanishes after half a header, and after half a payload.
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(&[0u8; HEADER_LEN / 2]).unwrap();
    drop(s);
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(
        &Header {
            flow_id: 2,
            size: 1000,
        }
        .encode(),
    )
    .unwrap();
    s.write_all(&[0u8; 10]).unwrap();
    drop(s);

    // A proper flow still works.
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(timeout).unwrap();
    s.write_all(
        &Header {
            flow_id: 3,
            size: 100_000,
        }
        .encode(),
    )
    .unwrap();
    s.write_all(&vec![0u8; 100_000]).unwrap();
    s.read_exact(&mut buf).unwrap();
    assert_eq!(buf[0], ACK);
    drop(s);

    let (status, err) = server.stop();
    assert!(status.success(), "{err}");
    assert!(err.contains("exceeds"), "{err}");
}

#[test]
fn workloads_and_help() {
    let out = Command::new(BIN).arg("workloads").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for name in ["websearch", "alistorage", "fbhadoop", "googlerpc"] {
        assert!(text.contains(name), "{text}");
    }
    assert!(text.contains("1711250"), "{text}");

    let help = Command::new(BIN)
        .args(["client", "--help"])
        .output()
        .unwrap();
    assert!(help.status.success());
    let help = String::from_utf8_lossy(&help.stdout);
    for needle in [
        "--rate-bps",
        "--max-concurrent",
        "FCT",
        "16-byte header",
        "connect()",
    ] {
        assert!(help.contains(needle), "{needle}: {help}");
    }
}

/// The one-line usage errors of the new flags: exit 2, nothing on stdout,
/// no output file.
#[test]
fn schedule_scale_and_transport_errors() {
    let dir = scratch("bad-rocev2");
    let out = dir.join("never.csv");
    let out_s = out.to_str().unwrap().to_string();
    let bad_row = dir.join("bad-row.csv");
    std::fs::write(
        &bad_row,
        "id,receiver,size_bytes,start_ns\n1,h2,100,0\n2,h2,x,5\n",
    )
    .unwrap();
    let unknown = dir.join("unknown.csv");
    std::fs::write(
        &unknown,
        "id,receiver,size_bytes,start_ns\n1,h2,100,0\n2,h9,100,5\n",
    )
    .unwrap();
    let poisson = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = [
            "--name",
            "h1",
            "--dst",
            "h2=127.0.0.1:9",
            "--workload",
            "websearch",
            "--rate-bps",
            "1G",
            "--duration",
            "1",
            "--out",
            &out_s,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let scheduled = |file: &Path, extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = [
            "--name",
            "h1",
            "--dst",
            "h2=127.0.0.1:9",
            "--schedule",
            file.to_str().unwrap(),
            "--out",
            &out_s,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let cases: Vec<(Vec<String>, &str)> = vec![
        (scheduled(&bad_row, &[]), "bad-row.csv:3: size_bytes \"x\""),
        (
            scheduled(&unknown, &[]),
            "unknown.csv:3: unknown receiver \"h9\"",
        ),
        (
            poisson(&["--size-scale", "0"]),
            "--size-scale must be a number > 0",
        ),
        (
            poisson(&["--size-scale", "-1"]),
            "--size-scale must be a number > 0",
        ),
        (
            poisson(&["--dcqcn-rate-ai", "10M"]),
            "--dcqcn-rate-ai is a rocev2 option (--transport rocev2)",
        ),
        (poisson(&["--rto-ms", "10"]), "--rto-ms is a rocev2 option"),
        (
            poisson(&["--transport", "rocev2", "--cc", "reno"]),
            "--cc reno: rocev2 runs dcqcn, hpcc, timely or dctcp (a kernel congestion control is for --transport tcp)",
        ),
        (
            poisson(&["--transport", "ndp", "--cc", "hpcc"]),
            "--cc is a tcp and a rocev2 option (--transport tcp or rocev2)",
        ),
        // A CC's flags under another CC (dcqcn is the default) ...
        (
            poisson(&["--transport", "rocev2", "--hpcc-eta", "0.9"]),
            "--hpcc-eta is an hpcc option (--cc hpcc)",
        ),
        (
            poisson(&["--transport", "rocev2", "--cc", "hpcc", "--dcqcn-g", "0.5"]),
            "--dcqcn-g is a dcqcn option (--cc dcqcn)",
        ),
        (
            poisson(&["--transport", "rocev2", "--cc", "timely", "--int-hops", "3"]),
            "--int-hops is an hpcc option (--cc hpcc)",
        ),
        (
            poisson(&["--transport", "rocev2", "--cc", "dctcp", "--timely-beta", "0.5"]),
            "--timely-beta is a timely option (--cc timely)",
        ),
        (
            poisson(&["--transport", "rocev2", "--cc", "hpcc", "--dctcp-g", "0.5"]),
            "--dctcp-g is a dctcp option (--cc dctcp)",
        ),
        // ... and under other transports.
        (
            poisson(&["--hpcc-max-stage", "2"]),
            "--hpcc-max-stage is a rocev2 option (--transport rocev2)",
        ),
        (
            poisson(&["--transport", "ndp", "--timely-alpha", "0.5"]),
            "--timely-alpha is a rocev2 option (--transport rocev2)",
        ),
        (
            poisson(&["--base-rtt-us", "10"]),
            "--base-rtt-us is a rocev2 option (--transport rocev2)",
        ),
        // Values, named by their flag.
        (
            poisson(&["--transport", "rocev2", "--cc", "hpcc"]),
            "hpcc needs a base RTT and a window (--base-rtt-us",
        ),
        (
            poisson(&["--transport", "rocev2", "--cc", "hpcc", "--base-rtt-us", "10", "--int-hops", "17"]),
            "--int-hops must be in [1, 16], got 17",
        ),
        (
            poisson(&["--transport", "rocev2", "--cc", "hpcc", "--base-rtt-us", "10", "--hpcc-eta", "1.5"]),
            "--hpcc-eta must be in (0, 1], got 1.5",
        ),
        (
            poisson(&["--transport", "rocev2", "--cc", "timely", "--timely-t-low-us", "600"]),
            "--timely-t-low-us (600000 ns) exceeds --timely-t-high-us (500000 ns)",
        ),
        (
            poisson(&["--transport", "rocev2", "--cc", "dctcp", "--dctcp-g", "2"]),
            "--dctcp-g must be in (0, 1], got 2",
        ),
        (
            poisson(&["--transport", "rocev2", "--max-concurrent", "4"]),
            "--max-concurrent is a tcp option",
        ),
        (
            poisson(&["--transport", "rocev2", "--rate-scale", "0"]),
            "--rate-scale must be a number > 0",
        ),
        (
            poisson(&["--time-scale", "10"]),
            "--time-scale is a rocev2 option",
        ),
        (
            poisson(&["--transport", "rocev2", "--time-scale", "-3"]),
            "--time-scale must be a number in (0, 1e6]",
        ),
        (
            scheduled(&unknown, &["--duration", "3"]),
            "--schedule replaces",
        ),
    ];
    for (args, needle) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let r = client(&args);
        let stderr = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(r.stdout.is_empty(), "{args:?} started something");
        assert!(!out.exists(), "{args:?} created the output");
    }
    // The server's rocev2 flags under tcp.
    let r = Command::new(BIN)
        .args(["server", "--listen", "127.0.0.1:0", "--notify", "cnp"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--notify is a rocev2 option"), "{stderr}");
    let r = Command::new(BIN)
        .args(["server", "--listen", "127.0.0.1:0", "--time-scale", "10"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--time-scale is a rocev2 option"),
        "{stderr}"
    );
    // An unwritable --stats is refused before the server runs (it was found
    // at its end, the counters lost).
    let r = Command::new(BIN)
        .args([
            "server",
            "--transport",
            "rocev2",
            "--listen",
            "127.0.0.1",
            "--stats",
            "/nonexistent-dir/stats.json",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr.trim(),
        "lcmp-traffic server: cannot write --stats /nonexistent-dir/stats.json: \
         No such file or directory (os error 2)"
    );
}

/// A TCP run from a schedule, with sizes scaled: ids and sizes from the file.
#[test]
fn tcp_schedule_with_size_scale() {
    let dir = scratch("tcp-schedule");
    let out = dir.join("flows.csv");
    let sched = dir.join("s.csv");
    std::fs::write(
        &sched,
        "id,receiver,size_bytes,start_ns\n42,ha,1000000,0\n7,ha,400,20000000\n",
    )
    .unwrap();
    let server = Server::start(&["127.0.0.1:0"]);
    let dst = format!("ha={}", server.addrs[0]);
    let r = client(&[
        "--name",
        "h1",
        "--dst",
        &dst,
        "--schedule",
        sched.to_str().unwrap(),
        "--size-scale",
        "1000",
        "--progress-ms",
        "0",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let (_, records) = read_csv(&out);
    let got: Vec<(u64, u64, u64, FlowStatus)> = records
        .iter()
        .map(|r| (r.id, r.size_bytes, r.start_ns, r.status))
        .collect();
    // 1_000_000 / 1000 = 1000 bytes; 400 / 1000 = 0.4 -> at least 1 byte.
    assert_eq!(
        got,
        vec![
            (42, 1000, 0, FlowStatus::Ok),
            (7, 1, 20_000_000, FlowStatus::Ok)
        ]
    );
    drop(server);
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A rocev2 server on `addr` (port 4791) with extra flags.
fn roce_server(addr: &str, extra: &[&str]) -> Server {
    let mut cmd = Command::new(BIN);
    cmd.args(["server", "--transport", "rocev2", "--listen", addr]);
    cmd.args(extra);
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening ")
        .unwrap_or_else(|| panic!("server did not start: {line:?}"))
        .parse()
        .unwrap();
    Server {
        child,
        addrs: vec![addr],
        _stdout: stdout,
    }
}

/// A UDP relay between a rocev2 client and server that drops every
/// `drop_data`-th data packet and every `drop_acks`-th answer, re-encoding
/// the packets for its own addresses (the ICRC covers them). Stops when a
/// datagram arrives from anyone else.
fn relay(
    me: std::net::Ipv4Addr,
    client_ip: std::net::Ipv4Addr,
    server: std::net::SocketAddrV4,
    drop_data: u64,
    drop_acks: u64,
) -> std::thread::JoinHandle<(u64, u64)> {
    use lcmp_traffic::rocev2::net::{recv_tos, udp_socket, wait_readable};
    use lcmp_traffic::rocev2::wire::{encode_udp_payload, parse_udp_payload, Endpoints};
    use std::net::SocketAddrV4;
    use std::os::fd::AsRawFd;
    let sock = udp_socket(SocketAddrV4::new(me, 4791)).unwrap();
    std::thread::spawn(move || {
        let (mut data, mut acks, mut dropped_data, mut dropped_acks) = (0u64, 0u64, 0, 0);
        let mut buf = vec![0u8; 65536];
        let mut out = Vec::new();
        loop {
            wait_readable(&[sock.as_raw_fd()], None).unwrap();
            while let Some(r) = recv_tos(&sock, &mut buf).unwrap() {
                let from = *r.from.ip();
                let (to, back) = if from == client_ip {
                    (*server.ip(), true)
                } else if from == *server.ip() {
                    (client_ip, false)
                } else {
                    return (dropped_data, dropped_acks);
                };
                let rx = Endpoints {
                    src: from,
                    dst: me,
                    sport: r.from.port(),
                    dport: 4791,
                };
                let m = parse_udp_payload(&rx, &buf[..r.len]).unwrap();
                let drop = if back {
                    data += 1;
                    data % drop_data == 0
                } else {
                    acks += 1;
                    acks % drop_acks == 0
                };
                if drop {
                    if back {
                        dropped_data += 1
                    } else {
                        dropped_acks += 1
                    }
                    continue;
                }
                let tx = Endpoints {
                    src: me,
                    dst: to,
                    sport: 4791,
                    dport: 4791,
                };
                out.clear();
                encode_udp_payload(&mut out, &tx, &m).unwrap();
                sock.send_to(&out, SocketAddrV4::new(to, 4791)).unwrap();
            }
        }
    })
}

/// rocev2 over loopback (needs root for the raw socket): flows of 1, 999,
/// 1000, 1001 and 50_000 bytes, every byte checked by the server; the same
/// through a relay that drops packets; then 5000 concurrent flows. One test
/// because every client binds 127.0.0.1:4791 for its ACKs.
#[test]
fn rocev2_over_loopback() {
    if !is_root() {
        eprintln!("skipped: rocev2_over_loopback needs root (a raw socket)");
        return;
    }
    use std::net::Ipv4Addr;
    let dir = scratch("rocev2");
    let sched = dir.join("s.csv");
    std::fs::write(
        &sched,
        "id,receiver,size_bytes,start_ns\n1,r,1,0\n2,r,999,1000\n3,r,1000,2000\n4,r,1001,3000\n5,r,50000,4000\n",
    )
    .unwrap();
    let run = |dst: &str, out: &Path, extra: &[&str]| -> (String, Vec<FlowRecord>) {
        let mut args = vec![
            "--transport",
            "rocev2",
            "--name",
            "h1",
            "--dst",
            dst,
            "--schedule",
            sched.to_str().unwrap(),
            "--rate-scale",
            "1000",
            "--drain",
            "60",
            "--progress-ms",
            "0",
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let r = client(&args);
        let stdout = String::from_utf8_lossy(&r.stdout).to_string();
        assert!(
            r.status.success(),
            "{stdout} {}",
            String::from_utf8_lossy(&r.stderr)
        );
        (stdout, read_csv(out).1)
    };
    let check = |records: &[FlowRecord], dst: &str| {
        let sizes: Vec<(u64, u64)> = records.iter().map(|r| (r.id, r.size_bytes)).collect();
        assert_eq!(
            sizes,
            vec![(1, 1), (2, 999), (3, 1000), (4, 1001), (5, 50_000)]
        );
        for r in records {
            assert_eq!(r.status, FlowStatus::Ok, "{r:?}");
            assert!(
                r.fct_ns.is_some_and(|f| f > 0) && r.min_rtt_us.is_some(),
                "{r:?}"
            );
            assert_eq!(r.dst, dst);
            let port: u16 = r.src.strip_prefix("127.0.0.1:").unwrap().parse().unwrap();
            assert!(port >= 49152, "{r:?}");
        }
    };

    // Directly.
    let stats = dir.join("server.json");
    let server = roce_server("127.0.0.2", &["--stats", stats.to_str().unwrap()]);
    assert_eq!(server.addrs[0].to_string(), "127.0.0.2:4791");
    let (stdout, records) = run("r=127.0.0.2:4791", &dir.join("direct.csv"), &[]);
    check(&records, "127.0.0.2:4791");
    // 1 + 1 + 1 + 2 + 50 packets, none lost.
    assert!(
        stdout.contains("\"rocev2\":{\"packets\":55,\"retransmissions\":0,\"naks\":0,"),
        "{stdout}"
    );
    let (status, err) = server.stop();
    assert!(status.success(), "{err}");
    assert!(
        err.contains("served 5 flows (53001 payload bytes)"),
        "{err}"
    );
    let json = std::fs::read_to_string(&stats).unwrap();
    assert!(
        json.contains("\"flows_completed\":5,\"bytes\":53001"),
        "{json}"
    );
    assert!(
        json.contains("\"payload_errors\":0,\"malformed\":0"),
        "{json}"
    );

    // Through a relay dropping every 7th data packet and every 5th answer;
    // a short RTO recovers lost last ACKs.
    let server = roce_server("127.0.0.2", &["--stats", stats.to_str().unwrap()]);
    let relay_ip = Ipv4Addr::new(127, 0, 0, 3);
    let relay_thread = relay(
        relay_ip,
        Ipv4Addr::LOCALHOST,
        "127.0.0.2:4791".parse().unwrap(),
        7,
        5,
    );
    let (stdout, records) = run(
        "r=127.0.0.3:4791",
        &dir.join("lossy.csv"),
        &["--rto-ms", "50"],
    );
    check(&records, "127.0.0.3:4791");
    assert!(!stdout.contains("\"retransmissions\":0,"), "{stdout}");
    // Stop the relay: a datagram from an address it does not serve.
    let stopper = std::net::UdpSocket::bind("127.0.0.9:0").unwrap();
    stopper.send_to(b"stop", "127.0.0.3:4791").unwrap();
    let (dropped_data, dropped_acks) = relay_thread.join().unwrap();
    assert!(dropped_data > 0 && dropped_acks > 0);
    let (status, err) = server.stop();
    assert!(status.success(), "{err}");
    let json = std::fs::read_to_string(&stats).unwrap();
    assert!(
        json.contains("\"flows_completed\":5,\"bytes\":53001"),
        "{json}"
    );
    assert!(
        json.contains("\"payload_errors\":0,\"malformed\":0"),
        "{json}"
    );

    // 5000 concurrent flows of 2000 bytes (2 packets each), all at once.
    let many = dir.join("many.csv");
    let mut text = String::from("id,receiver,size_bytes,start_ns\n");
    for id in 0..5000 {
        text.push_str(&format!("{id},r,2000,0\n"));
    }
    std::fs::write(&many, text).unwrap();
    let server = roce_server("127.0.0.2", &["--stats", stats.to_str().unwrap()]);
    let out = dir.join("many-out.csv");
    let r = client(&[
        "--transport",
        "rocev2",
        "--name",
        "h1",
        "--dst",
        "r=127.0.0.2:4791",
        "--schedule",
        many.to_str().unwrap(),
        "--rate-scale",
        "1000",
        "--drain",
        "120",
        "--progress-ms",
        "0",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let (_, records) = read_csv(&out);
    assert_eq!(records.len(), 5000);
    assert!(records.iter().all(|r| r.status == FlowStatus::Ok));
    let (status, err) = server.stop();
    assert!(status.success(), "{err}");
    assert!(
        err.contains("served 5000 flows (10000000 payload bytes)"),
        "{err}"
    );
}

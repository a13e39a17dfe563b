//! Offered loads a client cannot start (issue 29, item 3): absurd rates are
//! refused in one line before anything starts, and a client that falls
//! behind sheds the arrivals it cannot hold, writing them as failed rows
//! counted as `skipped`, instead of queueing every flow until memory runs
//! out. Each client runs under an address-space and a CPU-time limit, so a
//! regression aborts the child instead of exhausting the shared machine.

use std::io::Read;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use lcmp_traffic::record::{FlowRecord, FlowStatus};

const BIN: &str = env!("CARGO_BIN_EXE_lcmp-traffic");
/// Flows a TCP client holds waiting for a slot (`client::MAX_WAITING`).
const MAX_WAITING: u64 = 262_144;
/// Flows a RoCEv2 client has in flight (`rocev2::client::MAX_ACTIVE_QPS`).
const MAX_ACTIVE_QPS: u64 = 65_536;

fn scratch(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("hostile-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

struct Ran {
    /// The exit code, or 128 + the signal that ended the child.
    code: i32,
    stdout: String,
    stderr: String,
    /// Peak resident set, KiB.
    max_rss_kib: i64,
}

/// Runs `lcmp-traffic client ARGS` with at most 2 GiB of address space and
/// 120 s of CPU time, and reports its peak RSS (wait4's rusage).
fn client_bounded(args: &[&str]) -> Ran {
    let mut cmd = Command::new(BIN);
    cmd.arg("client")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: setrlimit is async-signal-safe; the closure allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            let limit = |res, v| {
                let l = libc::rlimit {
                    rlim_cur: v,
                    rlim_max: v,
                };
                if libc::setrlimit(res, &l) == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            };
            limit(libc::RLIMIT_AS, 2 << 30)?;
            limit(libc::RLIMIT_CPU, 120)
        });
    }
    // Reaped by wait4 below, which also gives its rusage.
    #[allow(clippy::zombie_processes)]
    let mut child = cmd.spawn().unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        out.read_to_string(&mut s).unwrap();
        s
    });
    let mut stderr = String::new();
    err.read_to_string(&mut stderr).unwrap();
    let stdout = reader.join().unwrap();
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; the pid is our unreaped child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = child.id() as libc::pid_t;
    assert_eq!(unsafe { libc::wait4(pid, &mut status, 0, &mut ru) }, pid);
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    };
    Ran {
        code,
        stdout,
        stderr,
        max_rss_kib: ru.ru_maxrss,
    }
}

/// Runs a client (bounded) of `n` one-byte flows, all at time 0, to the
/// receiver of `dst` ("name=addr:port") from a schedule file, with the
/// `extra` flags, nothing drained nor reported; the run and its flow file.
fn burst(test: &str, n: u64, dst: &str, extra: &[&str]) -> (Ran, PathBuf) {
    let dir = scratch(test);
    let receiver = dst.split_once('=').expect("dst is name=address").0;
    let sched = dir.join("burst.csv");
    let mut text = String::from("id,receiver,size_bytes,start_ns\n");
    for id in 0..n {
        text.push_str(&format!("{id},{receiver},1,0\n"));
    }
    std::fs::write(&sched, text).unwrap();
    let out = dir.join("flows.csv");
    let mut args = vec![
        "--name",
        "h1",
        "--dst",
        dst,
        "--schedule",
        sched.to_str().unwrap(),
        "--drain",
        "0",
        "--progress-ms",
        "0",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    (client_bounded(&args), out)
}

fn read_csv(path: &Path) -> Vec<FlowRecord> {
    csv::Reader::from_path(path)
        .unwrap()
        .deserialize()
        .collect::<Result<Vec<FlowRecord>, _>>()
        .unwrap()
}

/// The probe's first two commands ask for more flows per second than a
/// client can start: refused before anything starts, naming the flag and
/// the limit (they used to abort on allocation).
#[test]
fn hostile_rates_are_refused_in_one_line() {
    let dir = scratch("refused");
    let out = dir.join("never.csv");
    let out_s = out.to_str().unwrap();
    let base = [
        "--name",
        "h1",
        "--dst",
        "h2=127.0.0.1:9",
        "--workload",
        "websearch",
        "--drain",
        "0",
        "--progress-ms",
        "0",
        "--out",
        out_s,
    ];
    // websearch's mean flow is 1_711_250 bytes: 1e15 / (8 x 1_711_250)
    // = 73_046_018.99 flows/s.
    let cases: [(&[&str], &[&str]); 3] = [
        (
            &["--flows-per-s", "1e9", "--duration", "100ms"],
            &["--flows-per-s 1000000000 ", "at most 1000000 flows/s"],
        ),
        (
            &["--rate-bps", "1000T", "--duration", "1s"],
            &[
                "--rate-bps 1000000000000000 ",
                "~7.305e7 flows/s",
                "at most 1000000 flows/s",
            ],
        ),
        // Just above the limit: one more flow per second is refused.
        (
            &["--flows-per-s", "1000001", "--duration", "1s"],
            &["--flows-per-s 1000001 ", "at most 1000000 flows/s"],
        ),
    ];
    for (extra, needles) in cases {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        let r = client_bounded(&args);
        assert_eq!(r.code, 2, "{extra:?}: {}{}", r.stdout, r.stderr);
        assert_eq!(r.stderr.lines().count(), 1, "{extra:?}: {}", r.stderr);
        for n in needles {
            assert!(r.stderr.contains(n), "{extra:?}: {}", r.stderr);
        }
        assert!(r.stdout.is_empty(), "{extra:?} started something");
        assert!(!out.exists(), "{extra:?} created the output");
    }
}

/// More arrivals than the client can hold: one slot (--max-concurrent 1)
/// taken for good by a flow to a listener that never accepts, then
/// MAX_WAITING + 1000 more flows, all at time 0. The first MAX_WAITING
/// wait for the slot (deferred, unfinished at the end); the last 1000 find
/// the queue full and are written at once as failed, error "skipped: ...".
/// Memory: a waiting flow is a small entry, and a finished flow's row is on
/// disk, not in memory.
#[test]
fn a_tcp_client_that_cannot_keep_up_skips_flows_in_bounded_memory() {
    let hole = TcpListener::bind("127.0.0.1:0").unwrap();
    let n = 1 + MAX_WAITING + 1000;
    let dst = format!("hole={}", hole.local_addr().unwrap());
    let (r, out) = burst("tcp-skip", n, &dst, &["--max-concurrent", "1"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let done = r.stdout.lines().last().unwrap_or_default();
    let want = format!(
        "\"started\":{n},\"completed\":0,\"failed\":1000,\"unfinished\":{},\"deferred\":{MAX_WAITING},\"skipped\":1000,",
        1 + MAX_WAITING
    );
    assert!(done.contains(&want), "{done}\nwant {want}");
    // Arrivals at the same time start in file order; the rows are in
    // arrival order (the skipped ones were held back behind flow 0). The
    // last 1000 were skipped.
    assert_rows_in_order_and_skipped(&out, n, n - 1000);
    // The schedule (32 bytes a flow, ~8 MiB, and its ~5 MiB of text), the
    // waiting flows (64 bytes each, 16 MiB) and the binary's own ~15 MiB
    // come to ~45 MiB; a task and a full record per flow (~1.1 KiB each)
    // took 285 MiB.
    assert!(r.max_rss_kib < 80 << 10, "peak RSS {} KiB", r.max_rss_kib);
    drop(hole);
}

/// The RoCEv2 client (root: a raw socket) keeps at most MAX_ACTIVE_QPS
/// flows in flight: a burst of MAX_ACTIVE_QPS + 10 flows at time 0 to an
/// address where nobody answers leaves MAX_ACTIVE_QPS flows unfinished,
/// and the last 10 are skipped.
#[test]
fn a_rocev2_client_keeps_at_most_65536_flows_in_flight() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root (a raw socket)");
        return;
    }
    let n = MAX_ACTIVE_QPS + 10;
    let (r, out) = burst(
        "roce-skip",
        n,
        "nobody=127.0.0.77:4791",
        &["--transport", "rocev2"],
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let done = r.stdout.lines().last().unwrap_or_default();
    let want = format!(
        "\"started\":{n},\"completed\":0,\"failed\":10,\"unfinished\":{MAX_ACTIVE_QPS},\"deferred\":0,\"skipped\":10,"
    );
    assert!(done.contains(&want), "{done}\nwant {want}");
    assert_rows_in_order_and_skipped(&out, n, MAX_ACTIVE_QPS);
}

/// `out` has a row for each of flows 0..n in id order, and the failed
/// ones are exactly `first_skipped..n`, each "skipped: ...".
fn assert_rows_in_order_and_skipped(out: &Path, n: u64, first_skipped: u64) {
    let records = read_csv(out);
    assert_eq!(records.len() as u64, n);
    let ids: Vec<u64> = records.iter().map(|r| r.id).collect();
    assert_eq!(ids, (0..n).collect::<Vec<u64>>());
    let skipped: Vec<u64> = records
        .iter()
        .filter(|r| r.status == FlowStatus::Failed)
        .inspect(|r| assert!(r.error.starts_with("skipped: "), "{r:?}"))
        .map(|r| r.id)
        .collect();
    assert_eq!(skipped, (first_skipped..n).collect::<Vec<u64>>());
}

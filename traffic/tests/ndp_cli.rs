//! `lcmp-traffic client|server --transport ndp` as a user runs them: the
//! flags of other transports and unusable values refused in one line
//! (exit 2, nothing written), and a server and a client on loopback moving
//! a schedule's flows, the rows in `flows.csv`, the sender's totals on the
//! done line, the receiver's counters in `--stats`.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use lcmp_traffic::record::{FlowRecord, FlowStatus};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_lcmp-traffic");

fn tmp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("lcmp-ndp-cli-{}-{name}", std::process::id()))
}

#[test]
fn bad_flags_are_refused_in_one_line() {
    let out = tmp("refused.csv");
    let o = out.to_str().unwrap();
    let poisson = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = [
            "client",
            "--transport",
            "ndp",
            "--name",
            "a",
            "--dst",
            "b=127.0.0.1:7247",
            "--workload",
            "websearch",
            "--flows-per-s",
            "10",
            "--duration",
            "1",
            "--out",
            o,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let strs = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            poisson(&["--dcqcn-rate-ai", "10M"]),
            "--dcqcn-rate-ai is a rocev2 option (--transport rocev2)",
        ),
        (
            poisson(&["--max-concurrent", "4"]),
            "--max-concurrent is a tcp option",
        ),
        (
            poisson(&["--payload", "1457"]),
            "--payload must be in [1, 1456]",
        ),
        (
            poisson(&["--initial-window", "0"]),
            "--initial-window must be at least 1",
        ),
        (poisson(&["--rto-ms", "0"]), "--rto-ms must be"),
        (poisson(&["--line-rate", "0"]), "--line-rate must be"),
        (
            strs(&[
                "client",
                "--transport",
                "rocev2",
                "--name",
                "a",
                "--dst",
                "b=127.0.0.1:4791",
                "--initial-window",
                "4",
                "--out",
                o,
            ]),
            "--initial-window is an ndp option (--transport ndp)",
        ),
        (
            strs(&[
                "client",
                "--transport",
                "ndp",
                "--name",
                "a",
                "--dst",
                "b=127.0.0.1:5001",
                "--out",
                o,
            ]),
            "NDP goes to port 7247",
        ),
        (
            strs(&[
                "client",
                "--name",
                "a",
                "--dst",
                "b=127.0.0.1:5001",
                "--serve",
                "--out",
                o,
            ]),
            "--serve is an ndp option (--transport ndp)",
        ),
        (
            strs(&[
                "client",
                "--transport",
                "rocev2",
                "--name",
                "a",
                "--dst",
                "b=127.0.0.1:4791",
                "--serve",
                "--out",
                o,
            ]),
            "--serve is an ndp option (--transport ndp)",
        ),
        (
            poisson(&["--stats", "/nonexistent/stats.json"]),
            "--stats needs --serve",
        ),
        (
            strs(&["server", "--transport", "ndp", "--listen", "0.0.0.0"]),
            "ndp needs a specific IPv4 address",
        ),
        (
            strs(&["server", "--transport", "ndp", "--listen", "127.0.0.1:5001"]),
            "NDP is port 7247",
        ),
        (
            strs(&["server", "--listen", "127.0.0.1:0", "--line-rate", "1G"]),
            "--line-rate is an ndp option (--transport ndp)",
        ),
        (
            strs(&[
                "server",
                "--transport",
                "ndp",
                "--listen",
                "127.0.0.1",
                "--notify",
                "cnp",
            ]),
            "--notify is a rocev2 option",
        ),
    ];
    for (args, needle) in cases {
        let r = Command::new(BIN).args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(r.stdout.is_empty(), "{args:?} started something");
        assert!(!out.exists(), "{args:?} created the output");
    }
}

/// Kills the server by its id if the test ends before it does.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_server_and_a_client_move_a_schedule() {
    // The receiver on 127.0.0.41; the client sends from the address the
    // route to it has (127.0.0.1 on loopback).
    let stats = tmp("rx.json");
    let mut server = Child(
        Command::new(BIN)
            .args([
                "server",
                "--transport",
                "ndp",
                "--listen",
                "127.0.0.41",
                "--line-rate",
                "1G",
                "--stats",
                stats.to_str().unwrap(),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut line = String::new();
    BufReader::new(server.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "listening 127.0.0.41:7247\n");
    let schedule = tmp("schedule.csv");
    // Two flows: 30_000 bytes (21 packets of at most 1442) and 1 byte.
    std::fs::write(
        &schedule,
        "id,receiver,size_bytes,start_ns\n5,b,30000,0\n6,b,1,1000000\n",
    )
    .unwrap();
    let out = tmp("flows.csv");
    let r = Command::new(BIN)
        .args([
            "client",
            "--transport",
            "ndp",
            "--name",
            "a",
            "--dst",
            "b=127.0.0.41:7247",
            "--schedule",
            schedule.to_str().unwrap(),
            "--line-rate",
            "1G",
            "--drain",
            "30",
            "--progress-ms",
            "0",
            "--out",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&r.stdout);
    assert!(
        r.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&r.stderr)
    );
    let done: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(
        (&done["completed"], &done["failed"]),
        (&2.into(), &0.into())
    );
    assert_eq!(done["bytes_completed"], 30_001);
    // 21 + 1 packets at least (a 1 ms timeout may resend on a busy
    // machine).
    let packets = done["ndp"]["packets"].as_u64().unwrap();
    let resent = done["ndp"]["retransmissions"].as_u64().unwrap();
    assert_eq!(packets, 22 + resent, "{done}");
    let rows: Vec<FlowRecord> = csv::Reader::from_path(&out)
        .unwrap()
        .deserialize()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rows.len(), 2);
    for (r, (id, size)) in rows.iter().zip([(5, 30_000), (6, 1)]) {
        assert_eq!((r.id, r.size_bytes, r.status), (id, size, FlowStatus::Ok));
        assert_eq!(r.dst, "127.0.0.41:7247");
        assert_eq!(
            r.src,
            format!("127.0.0.1:{}", lcmp_traffic::ndp::udp_sport_of(id as u32))
        );
    }
    // SIGTERM: the server writes its counters and ends.
    // SAFETY: kill(2) on our own child, not yet reaped.
    unsafe {
        libc::kill(server.0.id() as i32, libc::SIGTERM);
    }
    let status = server.0.wait().unwrap();
    assert!(status.success(), "{status}");
    let rx: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    assert_eq!(
        (&rx["bytes"], &rx["flows_completed"]),
        (&30_001.into(), &2.into())
    );
    assert_eq!((&rx["corrupt"], &rx["trimmed"]), (&0.into(), &0.into()));
    for f in [&stats, &schedule, &out] {
        let _ = std::fs::remove_file(f);
    }
}

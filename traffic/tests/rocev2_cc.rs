//! `lcmp-traffic client --transport rocev2 --cc dcqcn|hpcc|timely|dctcp`
//! end to end over UDP sockets (root): one server, the four CCs' clients
//! one after the other, every byte of every flow delivered and checked by
//! the server. Each CC's data carries its block (hpcc: an INT collect
//! block, no switch on the path so no hop in it; timely: the send time),
//! the server echoes it in every answer, and the done line names the CC
//! and counts the echoes.
//!
//! Client and server each get a network namespace (a client sends from the
//! address its route picks and binds it to port 4791 for ACKs), joined by
//! a veth pair, named uniquely and deleted on every exit path (as
//! tests/ndp_serve.rs does).

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use lcmp_traffic::record::{FlowRecord, FlowStatus};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_lcmp-traffic");

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("lcmp-rocev2-cc-{}-{name}", std::process::id()))
}

mod common;
use common::{Child, Pair};

/// Flows of 1, 999, 1000, 1001 and 50_000 bytes: 1 + 1 + 1 + 2 + 50 = 55
/// packets of at most 1000 bytes, 53_001 bytes.
const SCHEDULE: &str = "id,receiver,size_bytes,start_ns\n1,r,1,0\n2,r,999,1000\n3,r,1000,2000\n4,r,1001,3000\n5,r,50000,4000\n";

#[test]
fn every_cc_completes_every_byte_over_udp() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: every_cc_completes_every_byte_over_udp needs root (namespaces)");
        return;
    }
    let pair = Pair::new("rcc", 78);
    let (ns_a, ns_b) = (&pair.names[0], &pair.names[1]);
    let sched = tmp("schedule.csv");
    std::fs::write(&sched, SCHEDULE).unwrap();
    let stats = tmp("server.json");
    let mut server = Child(
        Command::new("ip")
            .args(["netns", "exec", ns_b, BIN])
            .args(["server", "--transport", "rocev2", "--listen", "10.78.0.2"])
            .arg("--stats")
            .arg(&stats)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut line = String::new();
    BufReader::new(server.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "listening 10.78.0.2:4791");

    for (cc, extra) in [
        ("dcqcn", &[][..]),
        ("hpcc", &["--base-rtt-us", "1000"][..]),
        ("timely", &[][..]),
        ("dctcp", &[][..]),
    ] {
        let out = tmp(&format!("{cc}.csv"));
        // 100G / 1000 = 100 Mbit/s. HPCC's window: 100G x 1 ms / 8 =
        // 12.5 MB of the network, 12_500 bytes at the scale (100 Mbit/s x
        // 1 ms), following the rate.
        let r = Command::new("ip")
            .args(["netns", "exec", ns_a, BIN])
            .args(["client", "--transport", "rocev2", "--cc", cc])
            .args(["--name", "h1", "--dst", "r=10.78.0.2:4791"])
            .arg("--schedule")
            .arg(&sched)
            .args([
                "--rate-scale",
                "1000",
                "--drain",
                "60",
                "--progress-ms",
                "0",
            ])
            .args(extra)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&r.stdout).to_string();
        assert!(
            r.status.success(),
            "{cc}: {stdout} {}",
            String::from_utf8_lossy(&r.stderr)
        );
        let text = std::fs::read_to_string(&out).unwrap();
        let _ = std::fs::remove_file(&out);
        let records: Vec<FlowRecord> = csv::Reader::from_reader(text.as_bytes())
            .deserialize()
            .collect::<Result<_, _>>()
            .unwrap();
        let got: Vec<(u64, u64, FlowStatus)> = records
            .iter()
            .map(|r| (r.id, r.size_bytes, r.status))
            .collect();
        assert_eq!(
            got,
            [(1, 1), (2, 999), (3, 1000), (4, 1001), (5, 50_000)]
                .map(|(id, size)| (id, size, FlowStatus::Ok))
                .to_vec(),
            "{cc}"
        );
        let done: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
        let t = &done["rocev2"];
        assert_eq!(t["cc"], cc, "{stdout}");
        // Nothing is lost on a veth: 55 packets, each answered once.
        assert_eq!(t["packets"], 55, "{stdout}");
        assert_eq!(t["retransmissions"], 0, "{stdout}");
        let (int, ts) = match cc {
            "hpcc" => (55, 0),
            "timely" => (0, 55),
            _ => (0, 0),
        };
        assert_eq!(
            (t["int_echoes"].as_u64(), t["timestamp_echoes"].as_u64()),
            (Some(int), Some(ts)),
            "{stdout}"
        );
        // No switch wrote a hop, and none overflowed.
        assert_eq!(t["int_overflows"], 0, "{stdout}");
    }

    // SAFETY: kill(2) with a pid we spawned and still own (not waited).
    assert_eq!(
        unsafe { libc::kill(server.0.id() as libc::pid_t, libc::SIGTERM) },
        0
    );
    let status = server.0.wait().unwrap();
    let mut err = String::new();
    let _ = server.0.stderr.take().unwrap().read_to_string(&mut err);
    assert!(status.success(), "{err}");
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    let _ = std::fs::remove_file(&stats);
    let _ = std::fs::remove_file(&sched);
    // Four runs of 5 flows, 53_001 bytes each, every byte as sent.
    assert_eq!(json["flows_completed"], 20, "{json}");
    assert_eq!(json["bytes"], 4 * 53_001, "{json}");
    assert_eq!(json["payload_errors"], 0, "{json}");
    assert_eq!(json["malformed"], 0, "{json}");
    // One echo per answered hpcc or timely packet.
    assert_eq!(
        (
            json["int_echoes_sent"].as_u64(),
            json["timestamp_echoes_sent"].as_u64()
        ),
        (Some(55), Some(55)),
        "{json}"
    );
}

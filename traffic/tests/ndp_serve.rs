//! `lcmp-traffic client --transport ndp --serve`: two hosts that each send
//! a schedule's flows to the other and receive the other's on the same
//! port 7247, as every host of a rotor experiment does. Both done lines
//! report every flow ok; after SIGTERM both exit 0 and their `--stats`
//! count the other's bytes, and those of its window.
//!
//! A client sends from the address its route to the receiver picks, so
//! two clients on loopback would both take 127.0.0.1: each host gets a
//! network namespace of its own (root), joined by a veth pair, named
//! uniquely and deleted on every exit path.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use lcmp_traffic::record::{FlowRecord, FlowStatus};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_lcmp-traffic");

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("lcmp-ndp-serve-{}-{name}", std::process::id()))
}

mod common;
use common::{Child, Pair};

/// One host: its namespace, name, the peer it sends to, its schedule
/// (id, size, start in ms), its files.
struct Host {
    ns: String,
    name: &'static str,
    peer: &'static str,
    peer_ip: &'static str,
    flows: [(u64, u64, u64); 3],
}

impl Host {
    fn file(&self, what: &str) -> PathBuf {
        tmp(&format!("{}-{what}", self.name))
    }

    fn spawn(&self) -> Child {
        self.spawn_with(&["--progress-ms", "0"])
    }

    fn spawn_with(&self, extra: &[&str]) -> Child {
        let mut rows = String::from("id,receiver,size_bytes,start_ns\n");
        for (id, size, ms) in self.flows {
            rows.push_str(&format!("{id},{},{size},{}\n", self.peer, ms * 1_000_000));
        }
        std::fs::write(self.file("schedule.csv"), rows).unwrap();
        let dst = format!("{}={}:7247", self.peer, self.peer_ip);
        let (schedule, out, stats) = (
            self.file("schedule.csv"),
            self.file("flows.csv"),
            self.file("stats.json"),
        );
        Child(
            Command::new("ip")
                .args(["netns", "exec", &self.ns, BIN])
                .args(["client", "--transport", "ndp", "--serve"])
                .args(["--name", self.name, "--dst", &dst])
                .arg("--schedule")
                .arg(&schedule)
                .args(["--warmup", "1", "--line-rate", "1G", "--drain", "30"])
                .args(extra)
                .arg("--out")
                .arg(&out)
                .arg("--stats")
                .arg(&stats)
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap(),
        )
    }

    fn cleanup(&self) {
        for f in ["schedule.csv", "flows.csv", "stats.json"] {
            let _ = std::fs::remove_file(self.file(f));
        }
    }
}

/// The client's stdout up to its first JSON line with `key`, which is
/// returned.
fn line_with(out: &mut impl BufRead, key: &str) -> Value {
    let mut line = String::new();
    loop {
        line.clear();
        let n = out.read_line(&mut line).unwrap();
        assert!(n > 0, "the client ended without a line with {key}");
        if let Ok(v) = serde_json::from_str::<Value>(&line) {
            if v.get(key).is_some() {
                return v;
            }
        }
    }
}

/// The client's stdout up to its done line, which is returned.
fn done_line(c: &mut Child) -> Value {
    line_with(&mut BufReader::new(c.0.stdout.take().unwrap()), "done")
}

fn sigterm(c: &Child) {
    // SAFETY: kill(2) on our own child (ip netns exec runs the client in
    // its own process, not a child of it), not yet reaped.
    unsafe {
        libc::kill(c.0.id() as i32, libc::SIGTERM);
    }
}

#[test]
fn two_serving_clients_exchange_flows_and_count_their_windows() {
    // SAFETY: geteuid(2) reads the process's credentials, nothing else.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: network namespaces need root");
        return;
    }
    let pair = Pair::new("ndsx", 77);
    // Both clients count the bytes arriving in [--warmup = 1 s, their last
    // start). Flows of a few tens of KB at 1 Gbit/s take well under a
    // millisecond; the two clients start within milliseconds of each
    // other; every flow starts at least 0.5 s from either end of the
    // other's window, so each lies wholly inside or outside it.
    let a = Host {
        ns: pair.names[0].clone(),
        name: "a",
        peer: "b",
        peer_ip: "10.77.0.2",
        // a's window: [1 s, 4 s).
        flows: [(1, 20_000, 0), (2, 30_000, 1_500), (3, 5_000, 4_000)],
    };
    let b = Host {
        ns: pair.names[1].clone(),
        name: "b",
        peer: "a",
        peer_ip: "10.77.0.1",
        // b's window: [1 s, 3 s).
        flows: [(11, 7_000, 0), (12, 11_000, 1_500), (13, 13_000, 3_000)],
    };
    let mut ca = a.spawn();
    let mut cb = b.spawn();
    for (host, client) in [(&a, &mut ca), (&b, &mut cb)] {
        let done = done_line(client);
        assert_eq!(
            (&done["completed"], &done["failed"], &done["interrupted"]),
            (&3.into(), &0.into(), &false.into()),
            "{}: {done}",
            host.name
        );
        let rows: Vec<FlowRecord> = csv::Reader::from_path(host.file("flows.csv"))
            .unwrap()
            .deserialize()
            .map(Result::unwrap)
            .collect();
        let ok: Vec<(u64, u64, FlowStatus)> = rows
            .iter()
            .map(|r| (r.id, r.size_bytes, r.status))
            .collect();
        let want: Vec<(u64, u64, FlowStatus)> = host
            .flows
            .iter()
            .map(|&(id, size, _)| (id, size, FlowStatus::Ok))
            .collect();
        assert_eq!(ok, want, "{}", host.name);
    }
    // The done lines are out: each keeps serving until SIGTERM, which is
    // then the normal end.
    for c in [&ca, &cb] {
        sigterm(c);
    }
    for (host, c) in [(&a, &mut ca), (&b, &mut cb)] {
        let status = c.0.wait().unwrap();
        assert_eq!(status.code(), Some(0), "{}: {status}", host.name);
    }
    let stats = |h: &Host| -> Value {
        serde_json::from_str(&std::fs::read_to_string(h.file("stats.json")).unwrap()).unwrap()
    };
    let (sa, sb) = (stats(&a), stats(&b));
    a.cleanup();
    b.cleanup();
    // a receives b's flows: 7_000 + 11_000 + 13_000 = 31_000 bytes; in a's
    // window [1 s, 4 s) those starting at 1.5 s and 3 s: 11_000 + 13_000 =
    // 24_000.
    assert_eq!(
        (&sa["bytes"], &sa["window_bytes"], &sa["flows_completed"]),
        (&31_000.into(), &24_000.into(), &3.into()),
        "a: {sa}"
    );
    // b receives a's: 20_000 + 30_000 + 5_000 = 55_000; in b's window
    // [1 s, 3 s) only the one starting at 1.5 s: 30_000.
    assert_eq!(
        (&sb["bytes"], &sb["window_bytes"], &sb["flows_completed"]),
        (&55_000.into(), &30_000.into(), &3.into()),
        "b: {sb}"
    );
    for s in [&sa, &sb] {
        assert_eq!((&s["corrupt"], &s["malformed"]), (&0.into(), &0.into()));
    }
}

#[test]
fn a_signal_before_the_done_line_interrupts_a_serving_client() {
    // SAFETY: geteuid(2) reads the process's credentials, nothing else.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: network namespaces need root");
        return;
    }
    let pair = Pair::new("ndsi", 77);
    // No one answers on b; the second flow would start after an hour.
    let a = Host {
        ns: pair.names[0].clone(),
        name: "ia",
        peer: "b",
        peer_ip: "10.77.0.2",
        flows: [(1, 5_000, 0), (2, 5_000, 3_600_000), (3, 5_000, 3_600_001)],
    };
    let mut c = a.spawn_with(&["--progress-ms", "20"]);
    let mut out = BufReader::new(c.0.stdout.take().unwrap());
    // Running: its first progress line.
    line_with(&mut out, "started");
    sigterm(&c);
    let done = line_with(&mut out, "done");
    assert_eq!(
        (&done["interrupted"], &done["completed"]),
        (&true.into(), &0.into())
    );
    // 128 + SIGTERM (15).
    assert_eq!(c.0.wait().unwrap().code(), Some(143));
    let stats: Value =
        serde_json::from_str(&std::fs::read_to_string(a.file("stats.json")).unwrap()).unwrap();
    a.cleanup();
    assert_eq!(
        (&stats["bytes"], &stats["window_bytes"]),
        (&0.into(), &0.into())
    );
}

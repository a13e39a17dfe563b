//! NDP end to end through a rotor network in namespaces (root): 4 ToRs x
//! 2 rotors (complete schedule, direct routing, Delta = 10 ms, Delta_r =
//! 1 ms, c = 100 Mbit/s, one host per ToR), the switches trimming NDP data
//! past 8 frames per queue (`--trim-packets 8`). Three hosts send two
//! flows each to the fourth with `lcmp-traffic client --transport ndp`,
//! all at once: every flow completes, the receiver gets every byte once,
//! and the initial windows (20 packets each, sent at line rate into
//! queues of 8) are trimmed on the way, the trimmed packets NACKed and
//! resent. The ToRs' trim counters are read from their final stats and
//! reported. The testbed has its own name and is taken down on every exit
//! path (and the traffic processes killed with their handles).

use std::path::PathBuf;
use std::time::Duration;

use lcmp_netlab::{require_root, Bg, Lab};
use lcmp_topology::rotor;
use lcmp_topology::rotor_net::{RotorNetwork, RotorRouting};
use lcmp_traffic::record::{FlowRecord, FlowStatus};
use serde_json::Value;

mod common;
use common::*;

/// Bytes of every flow: 150 KB, 105 packets of 1442 bytes (104 x 1442 =
/// 149_968, and 32 more).
const FLOW: u64 = 150_000;

/// The senders (ToRs 1-3), their flow ids, and the receiver on ToR 0.
const SENDERS: [(&str, [u64; 2]); 3] = [
    ("h1x0", [100, 101]),
    ("h2x0", [200, 201]),
    ("h3x0", [300, 301]),
];
const RECEIVER: &str = "h0x0";
const RECEIVER_IP: &str = "10.0.0.2";

fn network_file(dir: &std::path::Path) -> PathBuf {
    let s = rotor::complete(4, 2).unwrap();
    let mut net = RotorNetwork::from_schedule(&s, 10_000_000, 1_000_000);
    net.routing = Some(RotorRouting::Direct);
    net.rate_bps = 100_000_000;
    let path = dir.join("rotor.toml");
    std::fs::write(&path, net.to_toml()).unwrap();
    path
}

/// Every number under a key named `key`, anywhere in `v`, added up.
fn sum_key(v: &Value, key: &str) -> u64 {
    match v {
        Value::Object(m) => m
            .iter()
            .map(|(k, x)| {
                if k == key {
                    x.as_u64().unwrap_or(0)
                } else {
                    sum_key(x, key)
                }
            })
            .sum(),
        Value::Array(a) => a.iter().map(|x| sum_key(x, key)).sum(),
        _ => 0,
    }
}

#[test]
fn ndp_flows_cross_a_trimming_rotor_network_every_byte_once() {
    require_root!();
    let _s = serial();
    let name = unique_name("rn");
    let _down = Down(name.clone());
    let dir = std::env::temp_dir().join(format!("lcmp-rotor-ndp-{name}"));
    std::fs::create_dir_all(&dir).unwrap();
    let file = network_file(&dir);
    ok(&[
        "up",
        "--name",
        &name,
        "--topology",
        file.to_str().unwrap(),
        "--switch-arg=--trim-packets=8",
    ]);
    let mut st = lcmp_testbed::state::State::load(&name).unwrap();
    let (_, tb): (_, Lab) = lcmp_testbed::bed::attach(&st).unwrap();
    let traffic = bins().traffic.display().to_string();

    let stats = dir.join("rx.json");
    let server: Bg = tb
        .host(RECEIVER)
        .netns
        .spawn(&[
            &traffic,
            "server",
            "--transport",
            "ndp",
            "--listen",
            RECEIVER_IP,
            "--line-rate",
            "100M",
            "--stats",
            stats.to_str().unwrap(),
        ])
        .unwrap();
    wait_for("the ndp server", Duration::from_secs(10), || {
        server.log().contains("listening").then_some(())
    });

    let mut clients: Vec<(Bg, PathBuf)> = Vec::new();
    for (host, ids) in SENDERS {
        let schedule = dir.join(format!("schedule-{host}.csv"));
        let mut rows = String::from("id,receiver,size_bytes,start_ns\n");
        for id in ids {
            rows.push_str(&format!("{id},{RECEIVER},{FLOW},0\n"));
        }
        std::fs::write(&schedule, rows).unwrap();
        let out = dir.join(format!("flows-{host}.csv"));
        let dst = format!("{RECEIVER}={RECEIVER_IP}:7247");
        let args = [
            traffic.as_str(),
            "client",
            "--transport",
            "ndp",
            "--name",
            host,
            "--dst",
            &dst,
            "--schedule",
            schedule.to_str().unwrap(),
            "--line-rate",
            "100M",
            // Above a frame's wait for its circuit (a period is 20 ms), so
            // that the NACKs, not the timer, recover the trimmed packets.
            "--rto-ms",
            "100",
            "--drain",
            "40",
            "--out",
            out.to_str().unwrap(),
            "--progress-ms",
            "0",
        ];
        clients.push((tb.host(host).netns.spawn(&args).unwrap(), out));
    }
    let mut flows: Vec<FlowRecord> = Vec::new();
    let mut senders: Vec<Value> = Vec::new();
    for (client, out) in &mut clients {
        let status = wait_for("an ndp client", Duration::from_secs(50), || client.exited());
        assert!(status.success(), "client: {}", client.log());
        senders.push(
            client
                .log()
                .lines()
                .rev()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .find(|v| v["done"] == Value::Bool(true))
                .unwrap_or_else(|| panic!("no done line: {}", client.log()))["ndp"]
                .clone(),
        );
        flows.extend(
            csv::Reader::from_path(&*out)
                .unwrap()
                .deserialize::<FlowRecord>()
                .map(Result::unwrap),
        );
    }
    drop(server); // SIGTERM: the server writes its stats.
    let receiver: Value = wait_for("the server's stats", Duration::from_secs(10), || {
        serde_json::from_str(&std::fs::read_to_string(&stats).ok()?).ok()
    });
    // Stopping the switches writes their final stats.
    lcmp_testbed::bed::stop_switches(&mut st).unwrap();
    let tors: Vec<(String, Value)> = st
        .procs
        .iter()
        .filter(|p| p.name.starts_with("tor"))
        .map(|p| {
            let text = std::fs::read_to_string(&p.stats).unwrap_or_default();
            (
                p.name.clone(),
                serde_json::from_str(&text).unwrap_or(Value::Null),
            )
        })
        .collect();
    ok(&["down", "--name", &name]);
    let _ = std::fs::remove_dir_all(&dir);

    let (mut trimmed, mut trimmed_downlink) = (0, 0);
    for (tor, s) in &tors {
        let (t, d) = (sum_key(s, "trimmed"), sum_key(s, "trimmed_downlink"));
        eprintln!("{tor}: trimmed {t} in next-hop queues, {d} in host downlinks");
        trimmed += t;
        trimmed_downlink += d;
    }
    eprintln!("receiver {receiver}");
    for s in &senders {
        eprintln!("sender {s}");
    }
    for f in &flows {
        eprintln!(
            "flow {} {} B: {:?} fct {:?} ns, min rtt {:?} us",
            f.id, f.size_bytes, f.status, f.fct_ns, f.min_rtt_us
        );
    }
    // Every flow completed.
    assert_eq!(flows.len(), 6);
    assert!(
        flows.iter().all(|f| f.status == FlowStatus::Ok),
        "{flows:?}"
    );
    // Every byte once: 6 flows x 150_000 bytes, each packet counted once
    // (a copy resent by the timer is a duplicate, not counted), and each
    // whole packet's bytes the flow's at its offset.
    assert_eq!(receiver["bytes"], 6 * FLOW, "{receiver}");
    assert_eq!(receiver["flows_completed"], 6, "{receiver}");
    assert_eq!(receiver["corrupt"], 0, "{receiver}");
    assert_eq!(receiver["malformed"], 0, "{receiver}");
    // Six initial windows of 20 packets, each sender's two at its line
    // rate towards queues of 8 (a source ToR's queue for ToR 0 while its
    // circuit is down; the receiver's downlink, fed by up to two circuits
    // at once at its own rate): packets were trimmed, their headers
    // reached the receiver and were NACKed, and the senders resent them.
    assert!(
        trimmed + trimmed_downlink > 0,
        "no packet trimmed: {tors:?}"
    );
    let total = |key: &str| -> u64 { senders.iter().map(|s| s[key].as_u64().unwrap()).sum() };
    // Every header a ToR cut reached the receiver (the high-priority
    // queues hold 8 x 1500 bytes of 58-byte headers, far more than the
    // 120 initial-window packets in flight at once).
    assert_eq!(
        receiver["trimmed"],
        trimmed + trimmed_downlink,
        "{receiver}"
    );
    assert_eq!(receiver["nacks_sent"], receiver["trimmed"], "{receiver}");
    assert!(total("nacks") > 0, "{senders:?}");
    assert!(total("retransmissions") > 0, "{senders:?}");
}

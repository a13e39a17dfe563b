//! `lcmp-agent rotor-plan` as a user runs it: the paper's worked example,
//! a schedule file the switches can read, and a clear refusal.

use std::process::Command;

fn plan(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_lcmp-agent"))
        .arg("rotor-plan")
        .args(args)
        .output()
        .expect("lcmp-agent runs")
}

const PAPER: [&str; 10] = [
    "--tors",
    "16",
    "--uplinks",
    "2",
    "--slot",
    "100us",
    "--rate",
    "400Gbps",
    "--max-delay",
    "850us",
];

#[test]
fn the_papers_example_picks_degree_4_and_writes_its_schedule() {
    let file = std::env::temp_dir().join(format!("lcmp-rotor-{}.toml", std::process::id()));
    let mut args = PAPER.to_vec();
    let path = file.display().to_string();
    args.extend(["--buffer", "20MB", "--json", "--schedule", &path]);
    let out = plan(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["chosen_degree"], 4);
    assert_eq!(v["diameter"], 2);
    assert_eq!(v["throughput_bound"], 0.25);
    assert!(v["candidates"].as_array().unwrap().len() >= 8);
    // A rotor network file the switches run: 4 matchings of 16 ToRs, 2 per
    // rotor, with the planned rate and buffer.
    let net = lcmp_topology::rotor_net::RotorNetwork::load(&file).unwrap();
    assert_eq!((net.per_rotor, net.matchings.len()), (2, 4));
    assert!(net.matchings.iter().all(|m| m.len() == 16));
    assert_eq!(net.rate_bps, 400_000_000_000);
    assert_eq!(net.buffer(), 20_000_000);
    let _ = std::fs::remove_file(&file);
}

#[test]
fn no_degree_within_budget_is_refused_with_the_smallest_need() {
    let mut args = PAPER.to_vec();
    args.extend(["--buffer", "1MB"]);
    let out = plan(&args);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no degree fits the budget"), "{err}");
}

/// The reviewer's command: 100000 ToRs once aborted building a 10^10-entry
/// schedule (exit 134). Now refused before anything is allocated or
/// printed, naming the bound and why.
#[test]
fn a_schedule_beyond_the_file_format_is_refused_up_front() {
    let out = plan(&[
        "--tors",
        "100000",
        "--uplinks",
        "2",
        "--slot",
        "100us",
        "--rate",
        "100Gbps",
        "--buffer",
        "1000GB",
        "--max-delay",
        "100s",
        "--schedule",
        "x.toml",
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "lcmp-agent: 100000 ToRs: a schedule covers at most 250 (the rotor network file \
         numbers ToR t's hosts 10.t.h.2)\n"
    );
    assert!(out.stdout.is_empty());
    assert!(!std::path::Path::new("x.toml").exists());
}

#[test]
fn a_plan_beyond_its_bounds_is_refused() {
    let run = |tors: &str, slot: &str, buffer: &str, delay: &str| {
        let out = plan(&[
            "--tors",
            tors,
            "--uplinks",
            "2",
            "--slot",
            slot,
            "--rate",
            "100Gbps",
            "--buffer",
            buffer,
            "--max-delay",
            delay,
        ]);
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    assert_eq!(
        run("100000", "100us", "1000GB", "10s"),
        "lcmp-agent: 100000 ToRs: a plan covers at most 65536 (beyond any datacenter fabric)\n"
    );
    assert!(run("64", "2s", "1GB", "10s").starts_with("lcmp-agent: slot 2000000000 ns: at most"));
    assert!(run("64", "100us", "2TB", "10s")
        .starts_with("lcmp-agent: buffer 2000000000000 B per ToR: at most"));
    assert!(run("64", "100us", "1GB", "100s")
        .starts_with("lcmp-agent: delay budget 100000000000 ns: at most"));
}

/// At the bound the plan works: 65536 ToRs, 2 uplinks give degrees 2, 4,
/// ..., 65536 (32768 rows); d = 65536 has D = 1 (theta 1/2), a worst
/// delay of 2 x 1 x 32768 x 100 us = 6.5536 s and a buffer of 65536 x
/// 100 Gbit/s x 100 us / 8 = 81.92 GB, within 10 s and 1 TB: chosen.
#[test]
fn the_largest_plan_is_answered() {
    let out = plan(&[
        "--tors",
        "65536",
        "--uplinks",
        "2",
        "--slot",
        "100us",
        "--rate",
        "100Gbps",
        "--buffer",
        "1TB",
        "--max-delay",
        "10s",
        "--json",
    ]);
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["chosen_degree"], 65536);
    assert_eq!(v["throughput_bound"], 0.5);
    let cands = v["candidates"].as_array().unwrap();
    assert_eq!(cands.len(), 32768);
    assert_eq!(cands[32767]["delay_ns"], 6_553_600_000u64);
    assert_eq!(cands[32767]["buffer_bytes"], 81_920_000_000u64);
}

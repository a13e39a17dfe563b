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

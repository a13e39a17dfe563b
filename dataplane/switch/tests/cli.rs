//! `lcmp-switch` flags that are turned into nanoseconds: a value whose
//! nanoseconds would overflow u64 (debug panic, release wrap) is refused
//! at parse time, in one line naming the flag and its range, before any
//! file is read or interface touched (so no root is needed).

use std::process::{Command, Output};

fn switch(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lcmp-switch"))
        .args(args)
        .output()
        .expect("lcmp-switch runs")
}

fn topology() -> String {
    concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../topologies/2dc-3path.toml"
    )
    .to_string()
}

/// Runs `lcmp-switch KIND -t 2dc-3path.toml -s s1 --no-control FLAG VALUE`
/// and asserts it is refused with exit code 2, nothing on stdout and
/// `want` as the first line of stderr.
fn refused(kind: &str, flag: &str, value: &str, want: &str) {
    let topo = topology();
    let out = switch(&[kind, "-t", &topo, "-s", "s1", "--no-control", flag, value]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{kind} {flag} {value}: {err}");
    assert!(out.stdout.is_empty(), "{kind} {flag} {value}");
    assert_eq!(
        err.lines().next(),
        Some(want),
        "{kind} {flag} {value}: {err}"
    );
}

/// The smallest values whose nanoseconds overflow u64 (u64::MAX is
/// 18,446,744,073,709,551,615): microseconds x 1,000 from
/// 18,446,744,073,709,552, milliseconds x 1,000,000 from 18,446,744,073,710;
/// and the first value past each flag's bound. Before the bounds the
/// first were accepted and overflowed once converted.
#[test]
fn durations_past_their_bound_are_refused_in_one_line() {
    let cases = [
        // 1 s, 10,000 times the default 100 us.
        (
            "lcmp",
            "--sample-interval-us <SAMPLE_INTERVAL_US>",
            "18446744073709552",
            "0..=1000000",
        ),
        (
            "lcmp",
            "--sample-interval-us <SAMPLE_INTERVAL_US>",
            "1000001",
            "0..=1000000",
        ),
        // The flow cache's longest idle timeout: (2^23 - 2) ticks of
        // 2^20 ns = 8,796,090,925,056 ns, 8,796,090 whole ms.
        (
            "lcmp",
            "--flow-timeout-ms <FLOW_TIMEOUT_MS>",
            "18446744073710",
            "0..=8796090",
        ),
        (
            "lcmp",
            "--flow-timeout-ms <FLOW_TIMEOUT_MS>",
            "8796091",
            "0..=8796090",
        ),
        // A day: 86,400,000 ms.
        (
            "lcmp",
            "--link-check-ms <LINK_CHECK_MS>",
            "18446744073710",
            "0..=86400000",
        ),
        (
            "lcmp",
            "--link-check-ms <LINK_CHECK_MS>",
            "86400001",
            "0..=86400000",
        ),
        (
            "lcmp",
            "--stats-interval-ms <STATS_INTERVAL_MS>",
            "18446744073710",
            "0..=86400000",
        ),
        (
            "lcmp",
            "--stats-interval-ms <STATS_INTERVAL_MS>",
            "86400001",
            "0..=86400000",
        ),
        (
            "rotor",
            "--stats-interval-ms <STATS_INTERVAL_MS>",
            "18446744073710",
            "0..=86400000",
        ),
        // 1 s.
        (
            "rotor",
            "--slot-spin-us <US>",
            "18446744073709552",
            "0..=1000000",
        ),
        ("rotor", "--slot-spin-us <US>", "1000001", "0..=1000000"),
    ];
    for (kind, flag, value, range) in cases {
        refused(
            kind,
            flag.split(' ').next().unwrap(),
            value,
            &format!("error: invalid value '{value}' for '{flag}': {value} is not in {range}"),
        );
    }
}

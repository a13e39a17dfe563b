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

/// `--queues IFNAME=LIST` is read before anything is touched: a list that
/// is not ids and ranges, a reversed range, an id past the XSKMAP's 256
/// entries, a queue listed twice.
#[test]
fn bad_queue_lists_are_refused_in_one_line() {
    let topo = topology();
    for (value, want) in [
        ("p0", "\"p0\": expected IFNAME=LIST, e.g. eth0=0-3"),
        ("p0=", "\"p0=\": expected IFNAME=LIST, e.g. eth0=0-3"),
        ("p0=3-1", "\"3-1\": a range runs from low to high"),
        ("p0=256", "\"256\": not a queue id (0-255)"),
        ("p0=x", "\"x\": not a queue id (0-255)"),
        ("p0=0-2,1", "\"p0=0-2,1\": queue 1 is listed twice"),
    ] {
        let out = switch(&[
            "lcmp",
            "-t",
            &topo,
            "-s",
            "s1",
            "--no-control",
            "--queues",
            value,
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{value}: {err}");
        assert_eq!(
            err.lines().next(),
            Some(
                format!("error: invalid value '{value}' for '--queues <IFNAME=LIST>': {want}")
                    .as_str()
            ),
            "{value}"
        );
    }
}

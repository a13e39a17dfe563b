//! The command lines of lcmp-bench and lcmp-bench-tool (no root: only what
//! clap answers before anything runs).

use std::process::{Command, Output};

fn run(bin: &str, args: &[&str]) -> Output {
    Command::new(bin).args(args).output().expect("spawn")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `--help` (and `-h`) exit 0 and end with EXAMPLES and EXIT CODES (what
/// 0, 1 and 2 mean), in that order.
fn check_help(bin: &str, args: &[&str]) {
    for flag in ["--help", "-h"] {
        let mut argv = args.to_vec();
        argv.push(flag);
        let out = run(bin, &argv);
        let help = text(&out.stdout);
        assert!(out.status.success(), "{argv:?}: {out:?}");
        let examples = help
            .find("\nEXAMPLES:\n")
            .unwrap_or_else(|| panic!("{help}"));
        let codes = help
            .find("\nEXIT CODES:\n")
            .unwrap_or_else(|| panic!("{help}"));
        assert!(examples < codes, "{help}");
        for code in ["  0  ", "  1  ", "  2  "] {
            assert!(help[codes..].contains(code), "{argv:?}: {code:?} in {help}");
        }
    }
}

fn check_version(bin: &str, name: &str) {
    let out = run(bin, &["--version"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        text(&out.stdout).trim(),
        format!("{name} {}", env!("CARGO_PKG_VERSION"))
    );
}

/// A bad command line exits 2 with one line on stderr and nothing on stdout.
fn check_refused(bin: &str, args: &[&str]) {
    let out = run(bin, args);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{args:?}: {err:?}");
    assert!(out.stdout.is_empty(), "{args:?}: {out:?}");
}

const BENCH: &str = env!("CARGO_BIN_EXE_lcmp-bench");
const TOOL: &str = env!("CARGO_BIN_EXE_lcmp-bench-tool");

#[test]
fn lcmp_bench_help_keeps_the_method_and_ends_with_examples_and_exit_codes() {
    check_help(BENCH, &[]);
    let long = text(&run(BENCH, &["--help"]).stdout);
    for section in [
        "RIG.",
        "FORWARDERS",
        "PER BUSY CORE",
        "LATENCY.",
        "TESTBEDS",
    ] {
        assert!(long.contains(section), "{section} in {long}");
    }
    assert!(long.contains("LCMP_SWITCH_BIN"), "{long}");
}

#[test]
fn lcmp_bench_subcommands_keep_their_own_help() {
    for (sub, head) in [
        ("virtual-rotor", "lcmp-bench virtual-rotor: "),
        ("virtual-chain", "lcmp-bench virtual-chain: "),
    ] {
        let out = run(BENCH, &[sub, "--help"]);
        assert!(out.status.success(), "{out:?}");
        assert!(text(&out.stdout).starts_with(head), "{out:?}");
    }
}

#[test]
fn lcmp_bench_version_and_refusals() {
    check_version(BENCH, "lcmp-bench");
    check_refused(BENCH, &["--nope"]);
    check_refused(BENCH, &["--sizes", "20"]);
    check_refused(BENCH, &["virtual-chain", "--nope"]);
    // virtual-rotor's own parser refuses in one line with exit 2 too.
    check_refused(BENCH, &["virtual-rotor", "--nope", "1"]);
}

#[test]
fn lcmp_bench_tool_help_ends_with_examples_and_exit_codes() {
    check_help(TOOL, &[]);
    for sub in ["gen", "xdp", "latency"] {
        check_help(TOOL, &[sub]);
    }
}

#[test]
fn lcmp_bench_tool_version_and_refusals() {
    check_version(TOOL, "lcmp-bench-tool");
    check_refused(TOOL, &["--nope"]);
    check_refused(TOOL, &["xdp", "--dev", "lo", "frob"]);
    check_refused(TOOL, &["latency", "--from", "a", "--to", "b", "--dst", "x"]);
}

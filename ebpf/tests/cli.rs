//! The command line of lcmp-xdp-attach (no root: only what clap answers
//! before anything is attached).

use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_lcmp-xdp-attach");

fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("spawn")
}

#[test]
fn help_exits_0_and_ends_with_examples_and_exit_codes() {
    for flag in ["--help", "-h"] {
        let out = run(&[flag]);
        assert!(out.status.success(), "{out:?}");
        let help = String::from_utf8_lossy(&out.stdout);
        let examples = help
            .find("\nEXAMPLES:\n")
            .unwrap_or_else(|| panic!("{help}"));
        let codes = help
            .find("\nEXIT CODES:\n")
            .unwrap_or_else(|| panic!("{help}"));
        assert!(examples < codes, "{help}");
        for code in ["  0  ", "  1  ", "  2  "] {
            assert!(help[codes..].contains(code), "{code:?} in {help}");
        }
    }
}

#[test]
fn version_exits_0() {
    let out = run(&["--version"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("lcmp-xdp-attach {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn bad_arguments_exit_2_with_one_line() {
    for bad in [
        &["--nope"][..],
        &[],
        &["lo", "--mode", "skb"],
        &["lo", "eth0"],
    ] {
        let out = run(bad);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{bad:?}: {err:?}");
        assert!(out.stdout.is_empty(), "{bad:?}: {out:?}");
    }
}

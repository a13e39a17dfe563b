//! `lcmp-agent paths` with extreme weights and out-of-range flags, as the
//! hostile-input probe ran it (issue 29).

use std::process::{Command, Output};

fn paths(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lcmp-agent"))
        .arg("paths")
        .args(args)
        .output()
        .expect("lcmp-agent runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// DC1 -> DC8 with alpha 23,598,722: the costs are alpha * C_path, 18, 38
/// and 60 (via DC2, DC4, DC6 on ports 0, 2, 4) the cheapest. The 500 ms
/// path via DC3 (port 1, C_path 182) costs 182 * 23,598,722 =
/// 4,294,967,404 = 2^32 + 108: it showed cost 108 and was kept. It now
/// shows its exact cost and is not kept.
#[test]
fn a_huge_alpha_keeps_the_cheap_paths() {
    let out = paths(&["--switch", "dc1", "--alpha", "23598722"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report = text(&out.stdout);
    assert!(
        report.contains("  10.8.0.0/16 via dc8: 6 candidates, LCMP keeps 3 (ports 0, 2, 4)\n"),
        "{report}"
    );
    let dc3 = report
        .lines()
        .skip_while(|l| !l.contains("via dc8"))
        .find(|l| l.contains(" dc3 "))
        .expect("a dc3 row");
    let cols: Vec<&str> = dc3.split_whitespace().collect();
    assert_eq!(cols[cols.len() - 3..], ["182", "4294967404", "-"], "{dc3}");
}

/// `--path-shift 64` once shifted by 64 % 64 = 0 (release) or panicked
/// (debug); shifts above 40 leave every C_path 0 and are refused.
#[test]
fn a_path_shift_above_40_is_refused() {
    for shift in ["41", "64"] {
        let out = paths(&["--path-shift", shift]);
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        assert!(out.stdout.is_empty());
        assert_eq!(
            text(&out.stderr).lines().next(),
            Some(
                format!(
                    "error: invalid value '{shift}' for '--path-shift <PATH_SHIFT>': \
                     {shift} is not in 0..=40"
                )
                .as_str()
            )
        );
    }
    assert!(paths(&["--path-shift", "40"]).status.success());
}

/// 18,446,744,074 Gbit/s is beyond u64 bit/s (u64::MAX is about 1.8e19):
/// the conversion overflowed.
#[test]
fn a_top_capacity_beyond_u64_is_refused() {
    let out = paths(&["--max-capacity-gbps", "18446744074"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(
        text(&out.stderr).lines().next(),
        Some(
            "error: invalid value '18446744074' for '--max-capacity-gbps <MAX_CAPACITY_GBPS>': \
             18446744074 is not in 1..=18446744073"
        )
    );
    assert!(paths(&["--max-capacity-gbps", "18446744073"])
        .status
        .success());
}

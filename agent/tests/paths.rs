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

/// `paths --FLAG VALUE` is refused by the flag's parser: exit 2, no
/// report, clap's line naming the value and the `range` it must be in.
fn refused_flag(flag: &str, value: &str, range: &str) {
    let out = paths(&[&format!("--{flag}"), value]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(out.stdout.is_empty());
    let placeholder = flag.to_uppercase().replace('-', "_");
    assert_eq!(
        text(&out.stderr).lines().next(),
        Some(
            format!(
                "error: invalid value '{value}' for '--{flag} <{placeholder}>': \
                 {value} is not in {range}"
            )
            .as_str()
        )
    );
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
        refused_flag("path-shift", shift, "0..=40");
    }
    assert!(paths(&["--path-shift", "40"]).status.success());
}

/// 18,446,744,074 Gbit/s is beyond u64 bit/s (u64::MAX is about 1.8e19):
/// the conversion overflowed.
#[test]
fn a_top_capacity_beyond_u64_is_refused() {
    refused_flag("max-capacity-gbps", "18446744074", "1..=18446744073");
    assert!(paths(&["--max-capacity-gbps", "18446744073"])
        .status
        .success());
}

/// The delay cap is `--max-delay-us` rounded up to a power of two, shown
/// exactly. 2^63 us (also what 2^62 + 1 rounds up to) is 9,223,372,036,854,
/// 775.808 ms; it showed "18446744073709.552 ms", 2^64 - 1 ns, the
/// nanoseconds saturated. Above 2^63 nothing rounds up within u64 (the cap
/// stayed 2^63, below what was asked): refused, as is 0.
#[test]
fn the_delay_cap_is_shown_exactly_and_kept_roundable() {
    for given in ["9223372036854775808", "4611686018427387905"] {
        let out = paths(&["--switch", "dc1", "--max-delay-us", given]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let header = text(&out.stdout);
        assert!(
            header.contains("; delay cap 9223372036854775.808 ms (power of two), "),
            "{header}"
        );
    }
    for bad in ["9223372036854775809", "18446744073709551615", "0"] {
        refused_flag("max-delay-us", bad, "1..=9223372036854775808");
    }
}

/// A network file the command does not take, or a file it cannot use, is
/// refused before any output, in one line naming the file and line.
fn refused_file(tag: &str, toml: &str) -> String {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("paths-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("net.toml");
    std::fs::write(&file, toml).unwrap();
    let out = paths(&["--topology", file.to_str().unwrap()]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    let stderr = text(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    stderr.replace(&file.display().to_string(), "net.toml")
}

/// A rotor network file read "unknown field `rotor`".
#[test]
fn a_rotor_network_file_is_named_with_the_commands_that_take_it() {
    let s = lcmp_topology::rotor::complete(4, 2).unwrap();
    let net = lcmp_topology::rotor_net::RotorNetwork::from_schedule(&s, 1_000_000, 100_000);
    // Three comment lines, then [rotor].
    assert_eq!(
        refused_file("rotor", &net.to_toml()),
        "lcmp-agent: net.toml:4: rotor: a rotor network file, not a DCI topology; rotor \
         networks run with `lcmp-testbed up`, `lcmp-switch rotor` and `lcmp-agent run`\n"
    );
}

/// 17 links between s1 and s2 printed three lines of report, then "17
/// candidate next hops, at most 16 are supported". Link k (from 0) starts
/// on line 7 + 5k: link[16]'s `a` is on line 88, link[0]'s on line 8.
#[test]
fn seventeen_parallel_links_are_refused_before_any_output() {
    let mut toml = String::from(
        "[[switch]]\nname = \"s1\"\nprefixes = [\"10.0.1.0/24\"]\n\
         [[switch]]\nname = \"s2\"\nprefixes = [\"10.0.2.0/24\"]\n",
    );
    for _ in 0..17 {
        toml.push_str("[[link]]\na = \"s1\"\nb = \"s2\"\nrate = \"1Gbps\"\ndelay = \"1ms\"\n");
    }
    assert_eq!(
        refused_file("parallel", &toml),
        "lcmp-agent: net.toml:88: link[16]: more than 16 links between \"s1\" and \"s2\" (the \
         first at line 8); a route has at most 16 candidate next hops\n"
    );
}

/// A key of 5,000 dotted parts said "recursion limit", no line.
#[test]
fn a_key_nested_too_deep_names_its_line() {
    let toml = format!(
        "[[switch]]\nname = \"s1\"\n{} = 1\n",
        vec!["a"; 5000].join(".")
    );
    assert_eq!(
        refused_file("deep", &toml),
        "lcmp-agent: net.toml:3: a dotted key of more than 80 parts; the TOML reader nests at \
         most 80\n"
    );
}

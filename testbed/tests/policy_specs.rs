//! Policy specs (`lcmp:alpha=1:beta=3`, LCMP's weights with the policy)
//! listed as an experiment's policies, through the CLI on the virtual
//! engine (no root): the runs keep the spec as their policy, their
//! switches run its weights, and a bad spec is refused in one line before
//! anything is written. The experiment is fixtures/virtual-2dc.toml (five
//! flows from a to b over topologies/2dc-3path.toml).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_lcmp-testbed");

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// A fresh directory of this test process, absent.
fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lcmp-specs-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn testbed(args: &[&str]) -> Output {
    // The virtual engine runs neither lcmp-switch nor lcmp-traffic.
    Command::new(BIN)
        .args(args)
        .env("LCMP_SWITCH_BIN", "/nonexistent/lcmp-switch")
        .env("LCMP_TRAFFIC_BIN", "/nonexistent/lcmp-traffic")
        .output()
        .expect("lcmp-testbed runs")
}

fn json(file: &Path) -> Value {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    serde_json::from_str(&text).unwrap()
}

/// The fixture's experiment with `policies`, written under `out`.
fn run(policies: &str, out: &Path) -> Output {
    let config = fixture("virtual-2dc.toml");
    testbed(&[
        "experiment",
        "--config",
        config.to_str().unwrap(),
        "--policies",
        policies,
        "--out",
        out.to_str().unwrap(),
    ])
}

#[test]
fn runs_keep_their_spec_as_policy_and_their_switches_run_its_weights() {
    let out = scratch("run");
    // The second spec's keys out of order: it runs as its canonical
    // spelling, lcmp:w_ql=1:w_tl=2:w_dp=1.
    let o = run(
        "lcmp:beta=3:alpha=1:w_dl=1:w_lc=1,lcmp:w_dp=1:w_tl=2:w_ql=1",
        &out,
    );
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let specs = [
        "lcmp:alpha=1:beta=3:w_dl=1:w_lc=1",
        "lcmp:w_ql=1:w_tl=2:w_dp=1",
    ];
    let summary = json(&out.join("summary.json"));
    let policies: Vec<&str> = summary["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["policy"].as_str().unwrap())
        .collect();
    assert_eq!(policies, specs);
    // Each aggregate (the report's rows) is labelled with its spec.
    let aggregated: Vec<&str> = summary["aggregates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["policy"].as_str().unwrap())
        .collect();
    assert_eq!(aggregated, specs);
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    for spec in specs {
        assert!(report.contains(spec), "report.md lacks {spec}");
    }
    // The first spec gives alpha 1 and beta 3, the second leaves the
    // experiment's 3 and 1; the second gives C_cong's weights 1, 2, 1, the
    // first leaves the switch's 2, 1, 1: what every switch of the run
    // reports in force.
    for (spec, alpha, beta, cong) in [(specs[0], 1, 3, [2, 1, 1]), (specs[1], 3, 1, [1, 2, 1])] {
        let dir = out.join("runs").join(format!("virtual-trace-{spec}-seed1"));
        assert!(dir.join("flows.csv").is_file(), "{}", dir.display());
        for switch in ["s1", "s2", "p1", "p2", "p3"] {
            let snap = json(&dir.join(format!("switch-{switch}.json")));
            let p = &snap["policy"];
            assert_eq!(p["name"], "lcmp", "{spec} {switch}");
            assert_eq!(
                (p["alpha"].as_u64(), p["beta"].as_u64()),
                (Some(alpha), Some(beta)),
                "{spec} {switch}"
            );
            assert_eq!(
                p["congestion_weights"],
                serde_json::json!(cong),
                "{spec} {switch}"
            );
        }
    }
    // experiment.toml keeps the specs as run.
    let echo = std::fs::read_to_string(out.join("experiment.toml")).unwrap();
    assert!(echo.contains(specs[1]), "{echo}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_bad_spec_is_refused_in_one_line_naming_it_and_nothing_is_written() {
    let out = scratch("bad");
    for (policies, want) in [
        (
            "lcmp,lcmp:w_ql=0:w_tl=0:w_dp=0",
            "policy spec \"lcmp:w_ql=0:w_tl=0:w_dp=0\": the congestion weights w_ql + w_tl + w_dp sum to 0",
        ),
        (
            "lcmp:gamma=2",
            "policy spec \"lcmp:gamma=2\": unknown key \"gamma\"; one of alpha, beta, w_dl, w_lc, w_ql, w_tl, w_dp",
        ),
        (
            "ecmp:alpha=1",
            "policy spec \"ecmp:alpha=1\": ecmp takes no weights (only lcmp, lcmp-rm-alpha, lcmp-rm-beta do)",
        ),
    ] {
        let o = run(policies, &out);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{policies}: {err}");
        assert!(err.contains(want), "{policies}: {err:?} lacks {want:?}");
        assert_eq!(err.trim().lines().count(), 1, "{policies}: {err}");
        assert!(!out.exists(), "{policies}: {} was made", out.display());
    }
}

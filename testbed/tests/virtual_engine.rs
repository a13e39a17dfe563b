//! `lcmp-testbed experiment --engine virtual`: an FCT experiment with the
//! whole network in one process on the virtual clock, through the CLI, with
//! no root and no namespaces (fixtures/virtual-2dc.toml: a trace of five
//! flows from a to b over topologies/2dc-3path.toml, LCMP and ECMP; and a
//! trace between any two DCs over fixtures/3dc.toml). The expected numbers
//! are worked out by hand below.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_lcmp-testbed");

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn topology() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../topologies/2dc-3path.toml")
        .display()
        .to_string()
}

/// A fresh directory of this test process, absent.
fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lcmp-virtual-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn testbed(args: &[&str]) -> Output {
    // No lcmp-switch or lcmp-traffic is needed: point both at nothing.
    Command::new(BIN)
        .args(args)
        .env("LCMP_SWITCH_BIN", "/nonexistent/lcmp-switch")
        .env("LCMP_TRAFFIC_BIN", "/nonexistent/lcmp-traffic")
        .output()
        .expect("lcmp-testbed runs")
}

fn assert_success(o: &Output) {
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

fn run_fixture(out: &Path) {
    let config = fixture("virtual-2dc.toml");
    let o = testbed(&[
        "experiment",
        "--config",
        config.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_success(&o);
}

/// `flows.csv` of a run: one map of column to value per flow.
fn flows(file: &Path) -> Vec<BTreeMap<String, String>> {
    let mut rd = csv::Reader::from_path(file).unwrap();
    rd.deserialize().map(Result::unwrap).collect()
}

fn json(file: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap()
}

/// A lone one-packet flow's FCT over path `p` of 2dc-3path (the data and
/// its ACK both over `p`): the path's RTT plus each frame's serialization
/// at every hop, each rounded to the nanosecond as the egress shaper
/// rounds a departure.
///
/// The flow is 926 bytes, one RDMA WRITE Only packet padded to 928: 14
/// Ethernet + 20 IPv4 + 8 UDP + 12 BTH + 16 RETH + 928 + 4 ICRC = 1002
/// bytes. Its ACK: 14 + 20 + 8 + 12 + 4 AETH + 4 ICRC = 62 bytes. Host
/// links are 10 Gbit/s (0.8 ns/byte) and 10 us: 1002 B take 801.6 -> 802
/// ns, 62 B 49.6 -> 50 ns.
/// - p1: 1 Gbit/s (8 ns/byte), 5 ms per hop. RTT 2 x (10 ms + 20 us) =
///   20 040 000; data 802 + 8016 + 8016 + 802 = 17 636; ACK 50 + 496 +
///   496 + 50 = 1092; in all 20 058 728.
/// - p2: 500 Mbit/s (16 ns/byte), 10 ms per hop. RTT 40 040 000; data
///   802 + 16 032 + 16 032 + 802 = 33 668; ACK 50 + 992 + 992 + 50 =
///   2084; in all 40 075 752.
/// - p3: 200 Mbit/s (40 ns/byte), 2 ms per hop. RTT 2 x (4 ms + 20 us) =
///   8 040 000; data 802 + 40 080 + 40 080 + 802 = 81 764; ACK 50 +
///   2480 + 2480 + 50 = 5060; in all 8 126 824.
fn lone_flow_fct_ns(path: &str) -> u64 {
    match path {
        "p1" => 20_058_728,
        "p2" => 40_075_752,
        "p3" => 8_126_824,
        other => panic!("no path {other}"),
    }
}

#[test]
fn a_trace_replays_on_the_virtual_clock_exactly_and_deterministically() {
    let out = scratch("run");
    run_fixture(&out);
    let runs = out.join("runs");
    for policy in ["lcmp", "ecmp"] {
        let dir = runs.join(format!("virtual-trace-{policy}-seed1"));
        let f = flows(&dir.join("flows.csv"));
        // Every flow of the trace, every one completed, from a to b.
        assert_eq!(f.len(), 5, "{policy}: {f:?}");
        for (i, row) in f.iter().enumerate() {
            assert_eq!(row["id"], i.to_string());
            assert_eq!(row["status"], "ok", "{policy}: {row:?}");
            assert_eq!(
                (row["sender"].as_str(), row["receiver"].as_str()),
                ("a", "b")
            );
            // The switch paths come from the decision logs, both ways.
            let path = &row["path"];
            assert_eq!(row["switch_path"], format!("s1>{path}>s2"), "{row:?}");
            assert!(row["reverse_switch_path"].starts_with("s2>"), "{row:?}");
        }
        // Flow 0 is alone in the network (the next starts 100 ms later).
        let lone = &f[0];
        assert_eq!(lone["size_bytes"], "926");
        assert_eq!(lone["start_ns"], "0");
        let path = lone["path"].clone();
        assert_eq!(
            lone["reverse_switch_path"],
            format!("s2>{path}>s1"),
            "{policy}: the hand-worked FCT has the ACK on the data's path"
        );
        assert_eq!(
            lone["fct_ns"],
            lone_flow_fct_ns(&path).to_string(),
            "{policy} over {path}"
        );
        if policy == "lcmp" {
            // On an idle network LCMP's path cost decides: p3, the
            // shortest (the weight of delay, 3, over that of capacity, 1).
            assert_eq!(path, "p3");
        }
        // What a namespace run writes besides: the decision logs, and
        // every switch's final counters.
        for sw in ["s1", "s2", "p1", "p2", "p3"] {
            assert!(dir.join(format!("decisions-{sw}.csv")).is_file(), "{sw}");
            let snap = json(&dir.join(format!("switch-{sw}.json")));
            assert_eq!(snap["switch"], sw);
        }
        // And every host's final counters: the trace's 926, 60,000,
        // 20,000, 3,000 and 100,000 bytes are 1 + 60 + 20 + 3 + 100 = 184
        // packets of at most 1,000 bytes, each sent once by a, received
        // by b and acknowledged.
        let hosts = json(&dir.join("hosts.json"));
        let (a, b) = (&hosts["a"], &hosts["b"]);
        assert_eq!(a["host"]["flows_completed"], 5, "{a}");
        assert_eq!(a["sender"]["packets"], 184, "{a}");
        assert_eq!(a["sender"]["retransmissions"], 0, "{a}");
        assert_eq!(b["receiver"]["data_packets"], 184, "{b}");
        assert_eq!(b["receiver"]["acks_sent"], 184, "{b}");
    }

    // Calibration: the topology's RTTs, exactly (2 x (one-way delay of
    // the path + 2 x 10 us of host links)).
    let cal = json(&out.join("calibration.json"));
    let rtts: Vec<(String, u64, u64)> = cal["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().to_string(),
                p["configured_rtt_us"].as_u64().unwrap(),
                p["measured_rtt_us"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rtts,
        [
            ("p1".to_string(), 20_040, 20_040),
            ("p2".to_string(), 40_040, 40_040),
            ("p3".to_string(), 8_040, 8_040),
        ]
    );
    assert_eq!(cal["base_rtt_ns"], 8_040_000);
    assert_eq!(cal["ok"], true);
    assert!(cal["exact"].as_str().unwrap().contains("exactly"));

    // summary.json: which engine ran, and each run's virtual and wall time.
    let summary = json(&out.join("summary.json"));
    let engine = &summary["experiment"]["engine"];
    assert_eq!(engine["name"], "virtual");
    let runs_echo = engine["runs"].as_array().unwrap();
    assert_eq!(runs_echo.len(), 2);
    for r in runs_echo {
        assert!(r["virtual_s"].as_f64().unwrap() > 0.1, "{r}");
        assert!(r["wall_s"].as_f64().is_some(), "{r}");
    }
    // No scaling by default on the virtual engine.
    assert_eq!(summary["experiment"]["scaling"], "none");
    assert_eq!(summary["runs"][0]["flows_completed"], 5);
    assert!(out.join("report.md").is_file());

    // A second run of the same experiment writes the same flows, decision
    // logs and switch snapshots, byte for byte.
    let again = scratch("again");
    run_fixture(&again);
    for policy in ["lcmp", "ecmp"] {
        let mut files = vec!["flows.csv".to_string(), "hosts.json".to_string()];
        for sw in ["s1", "s2", "p1", "p2", "p3"] {
            files.push(format!("decisions-{sw}.csv"));
            files.push(format!("switch-{sw}.json"));
        }
        for f in files {
            let rel = format!("runs/virtual-trace-{policy}-seed1/{f}");
            assert_eq!(
                std::fs::read(out.join(&rel)).unwrap(),
                std::fs::read(again.join(&rel)).unwrap(),
                "{rel}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_dir_all(&again);
}

#[test]
fn check_prints_the_runs_and_builds_nothing() {
    let o = testbed(&[
        "experiment",
        "--config",
        fixture("virtual-2dc.toml").to_str().unwrap(),
        "--check",
    ]);
    assert_success(&o);
    let text = String::from_utf8_lossy(&o.stdout);
    // The fixture: five flows, 926 + 60,000 + 20,000 + 3,000 + 100,000
    // bytes, the last starting 100.002 ms after the first; two policies.
    for want in [
        "experiment \"virt\": engine virtual, transport rocev2, policies lcmp, ecmp",
        "from s1 (1 hosts) to s2 (1 hosts)",
        "scaling: none",
        "(hpcc-fct): 5 flows, 183926 bytes, arriving over 0.100 s",
        "2 runs:\n  virtual-trace-lcmp-seed1  (load ",
        "\n  virtual-trace-ecmp-seed1  (load ",
        "checked: nothing was built or run",
    ] {
        assert!(text.contains(want), "{want:?} not in {text}");
    }
    // A trace whose flow comes from a host the experiment does not send
    // from: the problem in one line, exit 2, as a run would refuse it.
    let dir = scratch("check");
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("back.txt");
    std::fs::write(&trace, "1\n16 0 3 100 926 2.0\n").unwrap();
    let o = testbed(&[
        "experiment",
        "--config",
        fixture("virtual-2dc.toml").to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
        "--trace-format",
        "hpcc-flow",
        "--check",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("host b sends, but the experiment sends from s1's hosts only"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_flag_the_config_file_would_override_is_refused() {
    // Once, --time-scale beside --config was dropped without a word (and
    // --check passed with --time-scale 1e-300).
    for flag in [
        ["--time-scale", "10"],
        ["--name", "other"],
        ["--seeds", "3"],
        ["--switch-arg", "--no-ecn"],
    ] {
        let o = testbed(&[
            "experiment",
            "--config",
            fixture("virtual-2dc.toml").to_str().unwrap(),
            flag[0],
            flag[1],
            "--check",
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{flag:?}: {err}");
        assert!(
            err.lines().next().unwrap_or("").starts_with(&format!(
                "error: the argument '--config <CONFIG>' cannot be used with '{}",
                flag[0]
            )),
            "{flag:?}: {err}"
        );
    }
}

#[test]
fn a_trace_beside_a_config_replaces_the_files_trace_and_its_references() {
    // The fixture's network with another trace, in the simulator's flow
    // list format and opened by comment lines as the artifact's all-pairs
    // lists are: host 0 is a (DC1's first), host 16 is b (DC2's first).
    let dir = scratch("override");
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("two.txt");
    std::fs::write(
        &trace,
        "# src dst pg dport size start_time\n2\n0 16 3 100 926 2.0\n0 16 3 100 3000 2.5\n",
    )
    .unwrap();
    // The fixture's experiment, with the simulator's FCTs of its own trace
    // as LCMP's reference.
    let config = dir.join("with-reference.toml");
    let fixture_text = std::fs::read_to_string(fixture("virtual-2dc.toml")).unwrap();
    let mut text = String::new();
    for line in fixture_text.lines() {
        match line.split_once(" = ") {
            Some(("topology", _)) => text += &format!("topology = {:?}\n", topology()),
            Some(("trace", _)) => text += &format!("trace = {:?}\n", fixture("virtual-trace.txt")),
            _ => text += &format!("{line}\n"),
        }
    }
    text += &format!("[reference]\nlcmp = {:?}\n", fixture("virtual-trace.txt"));
    std::fs::write(&config, text).unwrap();
    let out = dir.join("out");
    let o = testbed(&[
        "experiment",
        "--config",
        config.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
        "--trace-format",
        "hpcc-flow",
        "--policies",
        "lcmp",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_success(&o);
    let runs: Vec<_> = std::fs::read_dir(out.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let f = flows(&runs[0].join("flows.csv"));
    assert_eq!(f.len(), 2, "{f:?}");
    assert_eq!(
        (f[0]["size_bytes"].as_str(), f[1]["size_bytes"].as_str()),
        ("926", "3000")
    );
    assert_eq!(f[1]["start_ns"], "500000000");
    // Each alone in the network: the first is the hand-worked lone flow
    // over p3, LCMP's choice on an idle network.
    assert_eq!(f[0]["path"], "p3");
    assert_eq!(f[0]["fct_ns"], lone_flow_fct_ns("p3").to_string());
    // The file's reference was of its own trace: nothing compared.
    assert!(out.join("summary.json").is_file());
    assert!(!out.join("fidelity.json").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn poisson_arrivals_run_on_the_virtual_clock_alike_every_time() {
    let t = topology();
    let run = |out: &Path| {
        let o = testbed(&[
            "experiment",
            "--engine",
            "virtual",
            "--transport",
            "rocev2",
            "--topology",
            &t,
            "--from",
            "s1",
            "--to",
            "s2",
            "--workload",
            "googlerpc",
            "--load",
            "0.2",
            "--duration",
            "50ms",
            "--drain",
            "1",
            "--policies",
            "lcmp",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        std::fs::read(out.join("runs/googlerpc-load0.2-lcmp-seed1/flows.csv")).unwrap()
    };
    let (a, b) = (scratch("poisson-a"), scratch("poisson-b"));
    let first = run(&a);
    assert_eq!(first, run(&b), "two runs, two flows.csv");
    let f = flows(&a.join("runs/googlerpc-load0.2-lcmp-seed1/flows.csv"));
    assert!(f.len() > 10, "{}", f.len());
    for (i, row) in f.iter().enumerate() {
        // The one sender's ids from its id base, 0; arrivals within the
        // 50 ms, the first 10 % (5 ms) of them warm-up; every flow done.
        assert_eq!(row["id"], i.to_string());
        let start: u64 = row["start_ns"].parse().unwrap();
        assert!(start < 50_000_000, "{row:?}");
        assert_eq!(row["warmup"], (start < 5_000_000).to_string(), "{row:?}");
        assert_eq!(row["status"], "ok", "{row:?}");
        assert!(row["switch_path"].starts_with("s1>"), "{row:?}");
    }
    let _ = std::fs::remove_dir_all(&a);
    let _ = std::fs::remove_dir_all(&b);
}

#[test]
fn what_the_virtual_engine_cannot_run_is_one_line_and_leaves_nothing() {
    let t = topology();
    let dir = scratch("bad");
    std::fs::create_dir_all(&dir).unwrap();
    let veth = dir.join("veth.toml");
    let base = std::fs::read_to_string(fixture("virtual-2dc.toml"))
        .unwrap()
        .replace("../../../topologies/2dc-3path.toml", &t)
        .replace(
            "virtual-trace.txt",
            fixture("virtual-trace.txt").to_str().unwrap(),
        );
    std::fs::write(&veth, format!("links = \"veth\"\n{base}")).unwrap();
    let out = dir.join("out");
    let out_s = out.to_str().unwrap().to_string();
    let poisson = |extra: &[&str]| -> Vec<String> {
        let mut a: Vec<String> = [
            "experiment",
            "--engine",
            "virtual",
            "--topology",
            &t,
            "--from",
            "s1",
            "--to",
            "s2",
            "--workload",
            "websearch",
            "--load",
            "0.3",
            "--duration",
            "1",
            "--out",
            &out_s,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let cases: Vec<(Vec<String>, &str)> =
        vec![
        (
            poisson(&[]),
            "tcp runs on the namespaces engine only (kernel TCP stacks); the wall and virtual \
             engines carry rocev2",
        ),
        (
            poisson(&["--transport", "rocev2", "--switch-processes", "one"]),
            "switch_processes (--switch-processes)",
        ),
        (
            poisson(&["--transport", "rocev2", "--cc", "cubic"]),
            "cc (--cc) under transport rocev2: unknown congestion control \"cubic\": expected one of dcqcn, hpcc, timely, dctcp",
        ),
        (
            poisson(&["--transport", "rocev2", "--initcwnd", "10"]),
            "initcwnd (--initcwnd)",
        ),
        (
            poisson(&["--transport", "rocev2", "--switch-arg=--no-ecn"]),
            "switch_args (--switch-arg)",
        ),
        (
            vec![
                "experiment".into(),
                "--config".into(),
                veth.display().to_string(),
                "--out".into(),
                out_s.clone(),
            ],
            "links (--links)",
        ),
        (
            vec![
                "experiment".into(),
                "--config".into(),
                fixture("virtual-2dc.toml").display().to_string(),
                "--links".into(),
                "memory".into(),
                "--out".into(),
                out_s.clone(),
            ],
            "links (--links)",
        ),
        (
            poisson(&["--transport", "rocev2", "--pfc"])
                .into_iter()
                .map(|a| if a == "virtual" { "namespaces".into() } else { a })
                .collect(),
            "pfc (--pfc): a one-process engine option",
        ),
    ];
    for (args, want) in cases {
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = testbed(&argv);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{argv:?}: {err}");
        assert!(err.contains(want), "{argv:?}: {err:?} lacks {want:?}");
        assert_eq!(err.trim().lines().count(), 1, "{argv:?}: {err}");
        // Refused before anything was made.
        assert!(!out.exists(), "{argv:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn help_names_the_engines_and_what_each_is_for() {
    let o = testbed(&["experiment", "--help"]);
    assert!(o.status.success());
    let help = String::from_utf8_lossy(&o.stdout);
    assert!(help.contains("--engine <ENGINE>"), "{help}");
    for what in [
        "namespaces, wall or virtual (rotor-experiment runs on namespaces or virtual)",
        "- namespaces: For TCP, and RoCEv2 through real sockets: a network namespace per switch",
        "- virtual:    For RoCEv2 only: the whole network in this one process on a virtual clock",
        "no root",
        "- wall:       For RoCEv2 only: the same network in this one process on the wall clock",
    ] {
        assert!(help.contains(what), "{what:?} not in {help}");
    }
}

#[test]
fn the_trace_replays_on_the_wall_clock_no_faster_than_the_virtual_clock() {
    let out = scratch("wall");
    let trace = fixture("virtual-trace.txt");
    let name = format!("w{}", std::process::id() % 100_000);
    let o = testbed(&[
        "experiment",
        "--engine",
        "wall",
        "--name",
        &name,
        "--transport",
        "rocev2",
        "--topology",
        &topology(),
        "--from",
        "s1",
        "--to",
        "s2",
        "--trace",
        trace.to_str().unwrap(),
        "--trace-format",
        "hpcc-fct",
        "--policies",
        "lcmp",
        // The network as written: no dilation (the default on this engine
        // is the namespaces engine's, rates / 1000 and time x 10).
        "--scale",
        "1",
        "--time-scale",
        "1",
        "--drain",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_success(&o);
    let f = flows(&out.join("runs/virtual-trace-lcmp-seed1/flows.csv"));
    assert_eq!(f.len(), 5, "{f:?}");
    for (i, row) in f.iter().enumerate() {
        assert_eq!(row["id"], i.to_string());
        assert_eq!(row["status"], "ok", "{row:?}");
        assert!(row["switch_path"].starts_with("s1>"), "{row:?}");
    }
    // The lone flow: no sooner than the virtual clock's exact FCT on its
    // path (frames never leave a link early; how much later depends on
    // the machine), its RTT no less than the path's configured one.
    let lone = &f[0];
    let path = lone["path"].clone();
    let fct: u64 = lone["fct_ns"].parse().unwrap();
    assert!(fct >= lone_flow_fct_ns(&path), "{lone:?}");
    let configured_rtt_us = match path.as_str() {
        "p1" => 20_040,
        "p2" => 40_040,
        "p3" => 8_040,
        other => panic!("no path {other}"),
    };
    let min_rtt: u64 = lone["min_rtt_us"].parse().unwrap();
    assert!(min_rtt >= configured_rtt_us, "{lone:?}");
    // Calibration: the configured RTTs as the floor, said so.
    let cal = json(&out.join("calibration.json"));
    assert_eq!(cal["engine"], "wall");
    assert!(cal["floor"].as_str().unwrap().contains("floor"), "{cal}");
    assert_eq!(cal["base_rtt_ns"], 8_040_000);
    let summary = json(&out.join("summary.json"));
    assert_eq!(summary["experiment"]["engine"]["name"], "wall");
    assert_eq!(summary["experiment"]["scaling"], "none");
    assert_eq!(summary["runs"][0]["flows_completed"], 5);
    for sw in ["s1", "s2", "p1", "p2", "p3"] {
        let dir = out.join("runs/virtual-trace-lcmp-seed1");
        assert_eq!(json(&dir.join(format!("switch-{sw}.json")))["switch"], sw);
    }
    // The control sockets' directory (made as root) went with the run.
    assert!(!Path::new("/run/lcmp-testbed").join(&name).exists());
    let _ = std::fs::remove_dir_all(&out);
}

/// A path in the repository.
fn repo(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(rel)
        .display()
        .to_string()
}

/// fixtures/3dc.toml: three DCs, one host each, each pair of DCs joined
/// by one link of its own rate and delay.
fn three_dcs() -> String {
    fixture("3dc.toml").display().to_string()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The virtual-engine experiment replaying `trace` over `topo` between
/// any two DCs (no --from/--to: every host sends and receives, each
/// flow's ideal its own DC pair's), with `extra` flags.
fn all_pairs(topo: &str, trace: &Path, extra: &[&str]) -> Output {
    let trace = format!("--trace={}", trace.display());
    let mut args = vec![
        "experiment",
        "--engine=virtual",
        "--transport=rocev2",
        "--trace-format=hpcc-flow",
        &trace,
        "--topology",
        topo,
    ];
    args.extend_from_slice(extra);
    testbed(&args)
}

/// Three lone one-packet flows, each between another pair of DCs, 100
/// ms apart (each has ended long before the next starts), opened by
/// comment lines as the artifact's all-pairs traces are. Host 0 is xa
/// (DC1), 16 ya (DC2), 32 za (DC3).
const ALL_PAIRS_TRACE: &str = "\
# src dst pg dport size start_time
3
0 16 3 100 926 2.0
16 32 3 100 496 2.1
32 0 3 100 96 2.2
";

/// Each flow of [`ALL_PAIRS_TRACE`]: `(sender, receiver, src_dc, dst_dc,
/// switch path, FCT, ideal)`, nanoseconds.
///
/// A one-packet flow's FCT is its path's RTT plus the serialization of
/// its data frame and of the ACK at every hop (as in
/// [`lone_flow_fct_ns`]): data = 74 bytes of headers (14 Ethernet, 20 IPv4,
/// 8 UDP, 12 BTH, 16 RETH, 4 ICRC) + the payload padded to 4 bytes; ACK
/// 62 bytes. Host links: 10 Gbit/s (0.8 ns/byte, rounded to the ns as
/// the shaper rounds a departure) and 10 us, both ends.
///
/// The ideal is the pair's own: its base RTT (2 x (link + 2 x 10 us))
/// + payload x 8 / its bottleneck (the link; the hosts are faster).
///
/// - xa -> ya, 926 bytes (frame 1002) over x-y, 1 Gbit/s (8 ns/byte), 5
///   ms: RTT 10 040 000; data 802 + 8016 + 802 = 9620; ACK 50 + 496 + 50
///   = 596; FCT 10 050 216. Ideal 10 040 000 + 926 x 8 = 10 047 408.
/// - ya -> za, 496 bytes (frame 570) over y-z, 500 Mbit/s (16 ns/byte),
///   10 ms: RTT 20 040 000; data 456 + 9120 + 456 = 10 032; ACK 50 + 992
///   + 50 = 1092; FCT 20 051 124. Ideal 20 040 000 + 496 x 16 = 20 047 936.
/// - za -> xa, 96 bytes (frame 170) over z-x, 200 Mbit/s (40 ns/byte), 8
///   ms: RTT 16 040 000; data 136 + 6800 + 136 = 7072; ACK 50 + 2480 + 50
///   = 2580; FCT 16 049 652. Ideal 16 040 000 + 96 x 40 = 16 043 840.
///
/// One ideal for all (say DC1-DC2's) would put the second flow near 2.
const ALL_PAIRS_FLOWS: [(&str, &str, &str, &str, &str, u64, u64); 3] = [
    ("xa", "ya", "DC1", "DC2", "x>y", 10_050_216, 10_047_408),
    ("ya", "za", "DC2", "DC3", "y>z", 20_051_124, 20_047_936),
    ("za", "xa", "DC3", "DC1", "z>x", 16_049_652, 16_043_840),
];

#[test]
fn every_flow_of_a_trace_between_any_dcs_is_measured_against_its_own_pairs_ideal() {
    let dir = scratch("all-pairs");
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("trace.txt");
    std::fs::write(&trace, ALL_PAIRS_TRACE).unwrap();
    let out = dir.join("out");
    let o = all_pairs(
        &three_dcs(),
        &trace,
        &[
            "--policies",
            "lcmp,ecmp",
            "--drain",
            "1",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    // Slowdowns by hand: 10 050 216 / 10 047 408, ...; the median is the
    // first flow's (the second's is the smallest, the third's the largest).
    let slowdowns: Vec<f64> = ALL_PAIRS_FLOWS
        .iter()
        .map(|f| f.5 as f64 / f.6 as f64)
        .collect();
    let summary = json(&out.join("summary.json"));
    for (i, policy) in ["lcmp", "ecmp"].iter().enumerate() {
        let file = out.join(format!("runs/trace-{policy}-seed1/flows.csv"));
        // The record's columns as ever, the pair and the ideal after them.
        let header: Vec<String> = csv::Reader::from_path(&file)
            .unwrap()
            .headers()
            .unwrap()
            .iter()
            .map(String::from)
            .collect();
        assert_eq!(header[..3], ["id", "sender", "receiver"]);
        assert_eq!(
            header[12..],
            [
                "path",
                "switch_path",
                "reverse_switch_path",
                "src_dc",
                "dst_dc",
                "ideal_ns"
            ]
        );
        let rows = flows(&file);
        assert_eq!(rows.len(), 3, "{policy}: {rows:?}");
        for (row, (sender, receiver, src_dc, dst_dc, path, fct, ideal)) in
            rows.iter().zip(ALL_PAIRS_FLOWS)
        {
            let got = |k: &str| row[k].as_str();
            assert_eq!(
                (got("sender"), got("receiver"), got("status")),
                (sender, receiver, "ok"),
                "{policy}: {row:?}"
            );
            assert_eq!((got("src_dc"), got("dst_dc")), (src_dc, dst_dc));
            assert_eq!(got("switch_path"), path, "{policy}: {row:?}");
            assert_eq!(got("fct_ns"), fct.to_string(), "{policy}: {row:?}");
            assert_eq!(got("ideal_ns"), ideal.to_string(), "{policy}: {row:?}");
        }
        let run = &summary["runs"][i];
        assert_eq!(run["policy"], *policy);
        assert_eq!(run["flows_completed"], 3);
        let median = run["median_slowdown"].as_f64().unwrap();
        assert!((median - slowdowns[0]).abs() < 1e-12, "{policy}: {median}");
        assert_eq!(run["share_below_ideal"], 0.0);
    }
    // Each pair's ideal, echoed: base RTT and bottleneck by hand.
    let pairs: Vec<(String, String, u64, u64)> = summary["experiment"]["ideal"]["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["src_dc"].as_str().unwrap().to_string(),
                p["dst_dc"].as_str().unwrap().to_string(),
                p["base_rtt_ns"].as_u64().unwrap(),
                p["bottleneck_bps"].as_u64().unwrap(),
            )
        })
        .collect();
    let pair = |s: &str, d: &str, rtt, bps| (s.to_string(), d.to_string(), rtt, bps);
    assert_eq!(
        pairs,
        [
            pair("DC1", "DC2", 10_040_000, 1_000_000_000),
            pair("DC2", "DC3", 20_040_000, 500_000_000),
            pair("DC3", "DC1", 16_040_000, 200_000_000),
        ]
    );
    // Calibration per pair, exact: the path's configured RTT, in us.
    let cal = json(&out.join("calibration.json"));
    let rtts: Vec<(&str, &str, u64)> = cal["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["from"].as_str().unwrap(),
                p["to"].as_str().unwrap(),
                p["paths"][0]["measured_rtt_us"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rtts,
        [("x", "y", 10_040), ("y", "z", 20_040), ("z", "x", 16_040)]
    );
    assert_eq!(cal["ok"], true);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn what_a_trace_between_any_dcs_cannot_run_is_one_line_naming_it() {
    let dir = scratch("all-pairs-bad");
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, text: &str| {
        let f = dir.join(name);
        std::fs::write(&f, text).unwrap();
        f
    };
    // Host 48 is host 1 of DC 4; the network has three DCs. Line 5 of the
    // file (two comments, the count, a good flow first).
    let far = write(
        "far.txt",
        "# a\n# b\n2\n0 16 3 100 926 2.0\n48 0 3 100 926 2.1\n",
    );
    // Hosts 0 and 1 are both behind dc1 (8dc.toml, two hosts per DC):
    // no path between them to measure an ideal on.
    let local = write("local.txt", "1\n0 1 3 100 926 2.0\n");
    let eight = repo("topologies/8dc.toml");
    let t3 = three_dcs();
    let cases: [(Output, String); 4] = [
        (
            all_pairs(&t3, &far, &["--check"]),
            format!(
                "{}:5: trace host id 48 (DC 4, host 1) is not in the testbed (3 DCs x 1 hosts)",
                far.display()
            ),
        ),
        (
            all_pairs(&eight, &local, &["--hosts-per-dc", "2", "--check"]),
            format!(
                "{}:2: dc1h1 and dc1h2 are both behind dc1: a trace between any DCs needs each \
                 flow to leave its switch (no path to measure its ideal on)",
                local.display()
            ),
        ),
        (
            // From without to.
            all_pairs(&t3, &far, &["--from", "x", "--check"]),
            "from and to (--from, --to): the DC switches whose hosts send and receive; only \
             a trace may leave both out, its flows then between any two DCs"
                .to_string(),
        ),
        (
            testbed(&[
                "experiment",
                "--transport",
                "rocev2",
                "--topology",
                &t3,
                "--trace",
                far.to_str().unwrap(),
                "--trace-format",
                "hpcc-flow",
                "--check",
            ]),
            "a trace between any DCs (no from and to) runs on a one-process engine (engine = \
             \"virtual\" or \"wall\"); on the namespaces give from and to"
                .to_string(),
        ),
    ];
    for (o, want) in cases {
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{want}: {}", text(&o));
        assert_eq!(err.trim(), format!("lcmp-testbed: {want}"));
    }
    // A run refuses it alike, before it writes anything.
    let out = dir.join("out");
    let o = all_pairs(&t3, &far, &["--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(!out.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_shipped_all_pairs_experiments_check() {
    // The artifact's three traces over the simulator's network: 128 hosts
    // in 8 DCs, every ordered DC pair (8 x 7 = 56) sending.
    for (load, flows) in [("0.3", 2774), ("0.5", 4607), ("0.8", 5851)] {
        let config = repo(&format!("experiments/8dc-allpairs-{load}.toml"));
        let o = testbed(&["experiment", "--config", &config, "--check"]);
        assert!(o.status.success(), "{load}: {}", text(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        for want in [
            "engine virtual, transport rocev2, policies lcmp, ecmp, ucmp".to_string(),
            "128 hosts; flows between any two DCs".to_string(),
            "56 DC pairs".to_string(),
            format!("(hpcc-flow): {flows} flows"),
            "3 runs:".to_string(),
        ] {
            assert!(out.contains(&want), "{load}: {want:?} not in {out}");
        }
    }
}

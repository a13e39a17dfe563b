//! `lcmp-testbed` as a user runs it (root): up/status/exec/down on the
//! small and the 8-DC topology, teardown after `kill -9`, bad inputs, and a
//! smoke experiment. Each test uses its own testbed name; they run one at
//! a time (a lock), so the XDP program counts below are not disturbed by a
//! sibling test.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use lcmp_netlab::netns::{list_with_prefix, process_running};
use lcmp_netlab::require_root;
use serde_json::Value;

mod common;
use common::*;

/// Processes whose command line mentions `needle`.
fn processes_mentioning(needle: &str) -> Vec<u32> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == std::process::id() || !process_running(pid) {
            continue;
        }
        if let Ok(c) = std::fs::read(format!("/proc/{pid}/cmdline")) {
            if String::from_utf8_lossy(&c).contains(needle) {
                v.push(pid);
            }
        }
    }
    v
}

/// Nothing of testbed `name` is left: no namespace, no process, no state,
/// and (after the kernel's deferred frees) no more XDP programs than
/// `xdp_before`.
fn assert_gone(name: &str, xdp_before: usize) {
    let prefix = format!("lcmptb-{name}-");
    assert_eq!(list_with_prefix(&prefix), Vec::<String>::new());
    let state_dir = format!("/run/lcmp-testbed/{name}");
    assert!(!Path::new(&state_dir).exists(), "{state_dir} left behind");
    assert_eq!(processes_mentioning(&state_dir), Vec::<u32>::new());
    let deadline = Instant::now() + Duration::from_secs(10);
    while our_xdp_programs() > xdp_before {
        assert!(
            Instant::now() < deadline,
            "{} XDP programs left (had {xdp_before})",
            our_xdp_programs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn up_status_exec_down_on_2dc_3path() {
    require_root!();
    let _s = serial();
    let xdp_before = our_xdp_programs();
    let name = unique_name("a");
    let _down = Down(name.clone());
    let out = up_2dc(&name, &[]);
    assert!(out.contains("switch s1"), "{out}");

    let s = status_json(&name);
    assert_eq!(s["health"], "ok", "{s:#}");
    assert_eq!(s["switches"].as_array().unwrap().len(), 5);
    assert_eq!(s["hosts"].as_array().unwrap().len(), 2);
    let s1 = &s["switches"][0];
    assert_eq!(s1["name"], "s1");
    assert!(s1["running"].as_bool().unwrap());
    // Port 2 of s1 is the link to p3: 200 Mbit/s, 2 ms.
    assert_eq!(s1["ports"][2]["peer"], "p3:0");
    assert_eq!(s1["ports"][2]["rate_bps"], 200_000_000);
    assert_eq!(s1["ports"][2]["delay_us"], 2000);
    assert_eq!(s1["ports"][3]["peer"], "host a");

    // Any command in a host's namespace, exit code passed through.
    let o = tool(&[
        "exec", "--name", &name, "a", "--", "ping", "-c", "2", "-i", "0.2", "10.0.2.2",
    ]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("2 received"), "{}", stdout(&o));
    let o = tool(&["exec", "--name", &name, "b", "--", "false"]);
    assert_eq!(o.status.code(), Some(1));
    let o = tool(&["exec", "--name", &name, "zz", "--", "true"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("no host or switch \"zz\""),
        "{}",
        stderr(&o)
    );

    // The name is taken while it is up.
    let o = tool(&[
        "up",
        "--name",
        &name,
        "--topology",
        &topology("2dc-3path.toml"),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("is already up"), "{}", stderr(&o));
    assert_eq!(status_json(&name)["health"], "ok");

    let out = ok(&["list"]);
    assert!(out.contains(&name), "{out}");
    ok(&["down", "--name", &name]);
    assert_gone(&name, xdp_before);
    let o = tool(&["down", "--name", &name]);
    assert!(stderr(&o).contains("no testbed"), "{}", stderr(&o));
}

#[test]
fn up_8dc_with_generated_hosts_and_two_testbeds_coexist() {
    require_root!();
    let _s = serial();
    let xdp_before = our_xdp_programs();
    let big = unique_name("b");
    let small = unique_name("c");
    let _d1 = Down(big.clone());
    let _d2 = Down(small.clone());
    ok(&[
        "up",
        "--name",
        &big,
        "--topology",
        &topology("8dc.toml"),
        "--hosts-per-dc",
        "2",
        "--scale",
        "1000",
    ]);
    up_2dc(&small, &[]);
    let s = status_json(&big);
    assert_eq!(s["health"], "ok", "{s:#}");
    let hosts: Vec<&str> = s["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["name"].as_str().unwrap())
        .collect();
    assert_eq!(hosts.len(), 16);
    assert!(
        hosts.contains(&"dc1h1") && hosts.contains(&"dc8h2"),
        "{hosts:?}"
    );
    // dc1-dc2 is 200 Gbit/s / 1000, 25 ms.
    let dc1 = &s["switches"][0];
    assert_eq!(dc1["ports"][0]["peer"], "dc2:0");
    assert_eq!(dc1["ports"][0]["rate_bps"], 200_000_000);
    assert_eq!(dc1["ports"][0]["delay_us"], 25_000);
    let o = tool(&[
        "exec", "--name", &big, "dc1h2", "--", "ping", "-c", "1", "10.8.0.3",
    ]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(status_json(&small)["health"], "ok");

    ok(&["down", "--name", &big]);
    // The other testbed is untouched.
    assert_eq!(status_json(&small)["health"], "ok");
    ok(&["down", "--name", &small]);
    assert_gone(&big, xdp_before);
    assert_gone(&small, xdp_before);
}

#[test]
fn down_cleans_up_after_kill_9_of_a_switch_and_of_the_tool() {
    require_root!();
    let _s = serial();
    let xdp_before = our_xdp_programs();

    // A process per switch (the option beside the default one process):
    // a switch killed with -9 takes only itself down; status says so, down
    // removes the rest.
    let name = unique_name("d");
    let _down = Down(name.clone());
    up_2dc(&name, &["--switch-processes", "per-switch"]);
    let s = status_json(&name);
    let victim = &s["switches"][2];
    assert_eq!(victim["name"], "p1");
    let pid = victim["pid"].as_u64().unwrap() as i32;
    // SAFETY: kill(2) on the pid of the switch this test started.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while process_running(pid as u32) {
        assert!(Instant::now() < deadline, "switch survived SIGKILL");
        std::thread::sleep(Duration::from_millis(10));
    }
    let o = tool(&["status", "--name", &name]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("switch p1 is not running"),
        "{}",
        stdout(&o)
    );
    assert!(
        !stdout(&o).contains("switch s1 is not running"),
        "{}",
        stdout(&o)
    );
    ok(&["down", "--name", &name]);
    assert_gone(&name, xdp_before);

    // The tool killed with -9 in the middle of `up` (once its switches
    // run, before it has finished): down removes what it had made.
    let name = unique_name("e");
    let _down2 = Down(name.clone());
    let mut child = command(&["up", "--name", &name, "--topology", &topology("8dc.toml")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let state = format!("/run/lcmp-testbed/{name}/state.json");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let procs = std::fs::read_to_string(&state)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .map_or(0, |v| v["procs"].as_array().map_or(0, Vec::len));
        if procs >= 3 {
            break;
        }
        assert!(child.try_wait().unwrap().is_none(), "up ended early");
        assert!(Instant::now() < deadline, "up made no switches in 60 s");
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!list_with_prefix(&format!("lcmptb-{name}-")).is_empty());
    ok(&["down", "--name", &name]);
    assert_gone(&name, xdp_before);
}

#[test]
fn bad_inputs_get_one_clear_line_and_leave_nothing() {
    require_root!();
    let _s = serial();
    let dir = std::env::temp_dir().join(format!("lcmptb-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let nonmono = dir.join("nonmono.txt");
    std::fs::write(&nonmono, "0 0\n2000 50\n1000 100\n").unwrap();
    let empty = dir.join("empty.txt");
    std::fs::write(&empty, "").unwrap();
    // Traces: a line short of a field, a host of a ninth DC, one good flow.
    let short = dir.join("short.txt");
    std::fs::write(
        &short,
        "0b000101 0b007a01 10000 100 58600 2000036848 20032328\n",
    )
    .unwrap();
    let far = dir.join("far.txt");
    std::fs::write(
        &far,
        "0b000101 0b00ff01 10000 100 58600 2000036848 20032328 20032658\n",
    )
    .unwrap();
    let ok_trace = dir.join("ok.txt");
    std::fs::write(
        &ok_trace,
        "0b000101 0b007a01 10000 100 58600 2000036848 20032328 20032658\n",
    )
    .unwrap();
    let out = dir.join("out");
    let out = out.to_str().unwrap();
    let name = unique_name("f");
    let t8 = topology("8dc.toml");
    // A replay of the 8-DC trace format (host ids 0-15 in DC1, 112-127 in DC8).
    let replay = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = [
            "experiment",
            "--name",
            &name,
            "--topology",
            &t8,
            "--hosts-per-dc",
            "16",
            "--from",
            "dc1",
            "--to",
            "dc8",
            "--trace-format",
            "hpcc-fct",
            "--transport",
            "rocev2",
            "--out",
            out,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let t2 = topology("2dc-3path.toml");
    let exp = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = [
            "experiment",
            "--name",
            &name,
            "--topology",
            &t2,
            "--from",
            "s1",
            "--to",
            "s2",
            "--duration",
            "2",
            "--out",
            out,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                "up".into(),
                "--name".into(),
                name.clone(),
                "--scale".into(),
                "0".into(),
            ],
            "--scale must be a positive number",
        ),
        (
            vec!["up".into(), "--name".into(), "Bad-Name".into()],
            "bad testbed name",
        ),
        (
            vec![
                "up".into(),
                "--name".into(),
                name.clone(),
                "--policy".into(),
                "ospf".into(),
            ],
            "unknown policy \"ospf\"",
        ),
        (
            vec![
                "up".into(),
                "--name".into(),
                name.clone(),
                "--topology".into(),
                "/nonexistent.toml".into(),
            ],
            "/nonexistent.toml",
        ),
        (
            exp(&["--workload", "websearch", "--load", "0"]),
            "load must be a positive fraction",
        ),
        (
            exp(&["--workload", "websearch", "--load=-0.5"]),
            "load must be a positive fraction",
        ),
        (
            exp(&[
                "--workload",
                "websearch",
                "--load",
                "0.3",
                "--policies",
                "lcmp,ospf",
            ]),
            "unknown policy \"ospf\"",
        ),
        (
            exp(&["--workload", nonmono.to_str().unwrap(), "--load", "0.3"]),
            "nonmono.txt",
        ),
        (
            exp(&["--workload", empty.to_str().unwrap(), "--load", "0.3"]),
            "empty.txt",
        ),
        (
            {
                let mut v = exp(&["--workload", "websearch", "--load", "0.3"]);
                let i = v.iter().position(|a| a == "s2").unwrap();
                v[i] = "s9".into();
                v
            },
            "no switch \"s9\"",
        ),
        (
            replay(&["--trace", short.to_str().unwrap()]),
            "short.txt:1: expected 8 fields",
        ),
        (
            replay(&["--trace", far.to_str().unwrap()]),
            "trace host id 255 (DC 16, host 16) is not in the testbed",
        ),
        (
            replay(&["--trace", ok_trace.to_str().unwrap(), "--size-scale", "0"]),
            "--size-scale must be a positive number",
        ),
        (
            replay(&["--trace", ok_trace.to_str().unwrap(), "--time-scale", "0"]),
            "--time-scale must be a number in (0, 1e6]",
        ),
        (
            {
                let mut v = replay(&["--trace", ok_trace.to_str().unwrap()]);
                v.retain(|a| a != "--transport" && a != "rocev2");
                v.push("--rocev2-arg=--dcqcn-rate-ai=25M".into());
                v
            },
            "needs transport rocev2",
        ),
        (
            replay(&["--trace", ok_trace.to_str().unwrap(), "--cc", "cubic"]),
            "cc (--cc) under transport rocev2: unknown congestion control \"cubic\": expected one of dcqcn, hpcc, timely, dctcp",
        ),
    ];
    for (args, want) in cases {
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = tool(&argv);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{argv:?}: {err}");
        assert!(err.contains(want), "{argv:?}: {err:?} lacks {want:?}");
        assert_eq!(
            err.trim().lines().count(),
            1,
            "{argv:?}: not one line: {err}"
        );
        assert_eq!(
            list_with_prefix(&format!("lcmptb-{name}-")),
            Vec::<String>::new()
        );
        assert!(!Path::new(&format!("/run/lcmp-testbed/{name}")).exists());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn smoke_experiment_lcmp_avoids_the_last_ranked_path_ecmp_uses_it() {
    require_root!();
    let _s = serial();
    let xdp_before = our_xdp_programs();
    let dir = std::env::temp_dir().join(format!("lcmptb-smoke-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // Small flows (1-40 KB), for which the minimum-delay path p3 is also
    // the fastest one, so every slowdown is >= 1 up to measurement noise.
    let cdf = dir.join("small.txt");
    std::fs::write(&cdf, "0 0\n1000 10\n10000 60\n40000 100\n").unwrap();
    let out = dir.join("out");
    let name = unique_name("g");
    let _down = Down(name.clone());
    // s1's route to b has three candidates; by default LCMP keeps all of
    // three. With 2 of 3 kept it drops the path it ranks last, p2 (worse
    // than p1 in delay and capacity), which ECMP gives a third of the flows.
    let o = tool(&[
        "experiment",
        "--name",
        &name,
        "--topology",
        &topology("2dc-3path.toml"),
        "--scale",
        "10",
        "--from",
        "s1",
        "--to",
        "s2",
        "--workload",
        cdf.to_str().unwrap(),
        "--load",
        "0.1",
        "--policies",
        "lcmp,ecmp",
        "--duration",
        "6",
        "--warmup",
        "1",
        "--drain",
        "20",
        "--switch-arg=--keep=2/3",
        "--switch-arg=--keep-all-up-to=2",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("median slowdown"), "{text}");
    assert_gone(&name, xdp_before);

    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let runs = summary["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for r in runs {
        let policy = r["policy"].as_str().unwrap();
        let started = r["flows_started"].as_u64().unwrap();
        assert!(started >= 50, "{policy}: only {started} flows");
        assert_eq!(r["flows_completed"].as_u64().unwrap(), started, "{r:#}");
        let median = r["median_slowdown"].as_f64().unwrap();
        assert!(median >= 0.95, "{policy}: median slowdown {median}");
        // The share of flows below 1 is not asserted: how many come in
        // under an ideal whose RTT was pinged through idle switches
        // depends on the machine's load (0.050 in one CI run); each
        // flow's floor of 0.9 is checked below.
        assert!(r["share_below_ideal"].as_f64().is_some(), "{r:#}");
        // Bytes s1 sent on each path.
        let tx: Vec<(String, u64)> = r["paths"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["name"].as_str().unwrap().to_string(),
                    p["tx_bytes"].as_u64().unwrap(),
                )
            })
            .collect();
        let total: u64 = tx.iter().map(|t| t.1).sum();
        let p2 = tx.iter().find(|t| t.0 == "p2").unwrap().1;
        let share = p2 as f64 / total.max(1) as f64;
        match policy {
            "lcmp" => assert!(
                share < 0.02,
                "LCMP sent {share:.3} of its bytes via p2: {tx:?}"
            ),
            "ecmp" => assert!(share > 0.10, "ECMP sent only {share:.3} via p2: {tx:?}"),
            other => panic!("unexpected policy {other}"),
        }
    }
    for r in runs {
        let flows = out
            .join("runs")
            .join(format!(
                "small-load0.1-{}-seed1",
                r["policy"].as_str().unwrap()
            ))
            .join("flows.csv");
        let text = std::fs::read_to_string(&flows).unwrap();
        assert!(
            text.starts_with("id,sender,receiver,src,dst,size_bytes,start_ns,fct_ns"),
            "{text:.200}"
        );
        // Every flow carries the path s1 logged for it; LCMP's avoid p2.
        let rows: Vec<lcmp_traffic::record::FlowRecord> = csv::Reader::from_path(&flows)
            .unwrap()
            .deserialize()
            .map(|r| r.unwrap())
            .collect();
        // Every completed flow's slowdown is >= 0.9, with the ideal as the
        // docs/experiments.md defines it: 2 x base RTT + ceil(size / 1448) x 1514 bytes
        // over the bottleneck of the minimum-delay path. Not 1: the base RTT
        // is the minimum of pings through idle switches, which wake for
        // each one, and a flow through busy switches can be faster (flow
        // RTT 8.5 ms against a calibrated 9.1 ms, slowdown 0.949, in one of
        // three runs on this 2-core VM).
        let ideal = &summary["ideal"];
        let (rtt_ns, bps) = (
            ideal["base_rtt_ns"].as_f64().unwrap(),
            ideal["bottleneck_bps"].as_f64().unwrap(),
        );
        assert!(rtt_ns > 8.0e6 && bps == 20e6, "{ideal}");
        for f in rows.iter().filter(|f| !f.warmup) {
            let fct = f
                .fct_ns
                .unwrap_or_else(|| panic!("flow {} did not complete: {f:?}", f.id));
            let ideal_ns =
                2.0 * rtt_ns + (f.size_bytes as f64 / 1448.0).ceil() * 1514.0 * 8.0 / bps * 1e9;
            let slowdown = fct as f64 / ideal_ns;
            assert!(slowdown >= 0.9, "flow {} slowdown {slowdown}: {f:?}", f.id);
        }
        let mut per_path = std::collections::BTreeMap::<String, usize>::new();
        for f in &rows {
            let p = f
                .path
                .clone()
                .unwrap_or_else(|| panic!("flow {} has no path: {f:?}", f.id));
            // Only s1 and s2 choose: the data cross s1, the transit switch
            // s1 chose and s2; the ACKs s2, the one s2 chose, and s1.
            assert_eq!(f.switch_path, Some(format!("s1>{p}>s2")), "{f:?}");
            let back = f.reverse_switch_path.as_deref().unwrap_or_default();
            assert!(
                ["s2>p1>s1", "s2>p2>s1", "s2>p3>s1"].contains(&back),
                "{f:?}"
            );
            *per_path.entry(p).or_default() += 1;
        }
        // Every link direction measured, every flow's paths found.
        assert_eq!(
            r["link_utilization"].as_object().unwrap().len(),
            12,
            "{r:#}"
        );
        assert_eq!(r["forward_paths_missing"], serde_json::json!({}), "{r:#}");
        assert_eq!(r["reverse_paths_missing"], serde_json::json!({}), "{r:#}");
        assert_eq!(r["transit_choices"], serde_json::json!([]), "{r:#}");
        match r["policy"].as_str().unwrap() {
            // At empty queues LCMP keeps p1 and p3; a burst that makes
            // both costly (alpha * C_path + beta * C_cong) can bring p2
            // into the kept set for a moment, as designed: seen once in
            // ~1000 flows. ECMP sends it a third.
            "lcmp" => assert!(
                per_path.get("p2").copied().unwrap_or(0) * 50 <= rows.len(),
                "{per_path:?}"
            ),
            _ => assert!(
                per_path.get("p2").copied().unwrap_or(0) * 10 > rows.len(),
                "{per_path:?}"
            ),
        }
    }
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        report.contains("lcmp") && report.contains("ecmp"),
        "{report:.500}"
    );
    let plots: Vec<PathBuf> = std::fs::read_dir(out.join("plots"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    let svgs: Vec<&PathBuf> = plots
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "svg"))
        .collect();
    let pngs: Vec<&PathBuf> = plots
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "png"))
        .collect();
    assert!(svgs.len() >= 3 && pngs.len() >= 3, "{plots:?}");
    for p in svgs {
        let t = std::fs::read_to_string(p).unwrap();
        // `links-<workload>-<load>-<policy>` is one policy's figure.
        let stem = p.file_stem().unwrap().to_string_lossy();
        let policies: Vec<&str> = match stem.strip_prefix("links-") {
            Some(rest) => rest.rsplit('-').take(1).collect(),
            None => vec!["lcmp", "ecmp"],
        };
        assert!(
            t.contains("<svg") && policies.iter().all(|q| t.contains(q)),
            "{}",
            p.display()
        );
    }
    for p in pngs {
        let b = std::fs::read(p).unwrap();
        assert!(
            b.len() > 1000 && b.starts_with(b"\x89PNG\r\n\x1a\n"),
            "{}",
            p.display()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// RoCEv2 frames (UDP to 4791 with a BTH) cross the testbed, and queue
/// pairs (source ports) are separate flows: under ECMP they spread over
/// s1's three paths. SoftRoCE itself (`up --rdma`) is refused in one line
/// where the kernel lacks rdma_rxe or has one that works only in the root
/// namespace (perftest through the switches: `scripts/vm-test.sh`).
#[test]
fn rocev2_frames_cross_and_queue_pairs_spread() {
    require_root!();
    let _s = serial();
    if lcmp_testbed::rdma::probe() != lcmp_testbed::rdma::RxeSupport::PerNamespace {
        let o = tool(&[
            "up",
            "--name",
            &unique_name("r"),
            "--rdma",
            "--topology",
            &topology("2dc-3path.toml"),
        ]);
        assert_eq!(o.status.code(), Some(2));
        let err = stderr(&o);
        assert!(err.contains("rdma_rxe"), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    let name = unique_name("q");
    let _down = Down(name.clone());
    up_2dc(&name, &["--policy", "ecmp"]);
    let st = lcmp_testbed::state::State::load(&name).unwrap();
    let (_, tb) = lcmp_testbed::bed::attach(&st).unwrap();
    let b_addr = tb.host("b").ipv4().unwrap();

    const QPS: u16 = 48;
    const PER_QP: u32 = 20;
    let rx = tb.host("b").netns.spawn_thread(move || {
        let sock = std::net::UdpSocket::bind((b_addr, 4791)).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let mut per_port = std::collections::HashMap::<u16, u32>::new();
        let mut buf = [0u8; 2048];
        while let Ok((n, from)) = sock.recv_from(&mut buf) {
            // BTH: opcode 0x04 (RC SEND only), destination QP in bytes 5..8.
            if n >= 12 && buf[0] == 0x04 {
                *per_port.entry(from.port()).or_default() += 1;
            }
        }
        per_port
    });
    // Wait until the receiver is bound before sending.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !tb
        .host("b")
        .netns
        .exec(&["ss", "-uln"])
        .unwrap_or_default()
        .contains(":4791")
    {
        assert!(Instant::now() < deadline, "receiver did not bind");
        std::thread::sleep(Duration::from_millis(10));
    }
    tb.host("a")
        .netns
        .run_in(move || {
            for qp in 0..QPS {
                let sock = std::net::UdpSocket::bind(("0.0.0.0", 49152 + qp)).unwrap();
                for psn in 0..PER_QP {
                    // BTH (12 bytes): opcode, flags, P_Key 0xffff, reserved,
                    // destination QP (24 bits), ack-req + PSN (24 bits).
                    let mut frame = vec![0x04, 0x40, 0xff, 0xff, 0, 0, 0, qp as u8 + 1];
                    frame.extend_from_slice(&psn.to_be_bytes());
                    frame.extend_from_slice(&[0xab; 256]);
                    sock.send_to(&frame, (b_addr, 4791)).unwrap();
                    // Paced: bursts into a veth can overflow its ring.
                    std::thread::sleep(Duration::from_micros(300));
                }
            }
        })
        .unwrap();
    let per_port = rx.join().unwrap().unwrap();
    assert_eq!(per_port.len(), usize::from(QPS), "{per_port:?}");
    assert!(per_port.values().all(|&n| n == PER_QP), "{per_port:?}");

    // s1 sent them over more than one path: each QP is its own flow.
    let s = status_json(&name);
    let s1_tx: Vec<u64> = (0..3)
        .map(|i| {
            s["switches"][0]["ports"][i]["tx_frames"]
                .as_u64()
                .unwrap_or(0)
        })
        .collect();
    let used = s1_tx.iter().filter(|&&t| t >= u64::from(PER_QP)).count();
    assert!(used >= 2, "48 QPs all took one path under ECMP: {s1_tx:?}");
    // s1 counted each of them as RoCEv2 on its host port (port 3).
    assert_eq!(
        s["switches"][0]["ports"][3]["rx_rocev2_frames"].as_u64(),
        Some(u64::from(QPS) * u64::from(PER_QP)),
        "{}",
        s["switches"][0]["ports"][3]
    );
    ok(&["down", "--name", &name]);
}

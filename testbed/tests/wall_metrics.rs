//! A wall-engine experiment's run as a testbed while it runs (needs root:
//! its state and control sockets are under /run): `lcmp-testbed status`
//! lists its switches, in the experiment's process, with their stats;
//! the agent the run starts serves every switch's metrics; when the run
//! ends, or is interrupted, the testbed's directory and agent are gone.
//! A testbed of the experiment's name already up is refused. The network
//! is topologies/2dc-3path.toml unscaled; the trace's second flow starts
//! 4 s (or 60 s) after the first, which keeps the run going meanwhile.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::Duration;

use lcmp_netlab::netns::process_running;
use lcmp_netlab::require_root;
use serde_json::Value;

mod common;
use common::*;

const SWITCHES: [&str; 5] = ["s1", "s2", "p1", "p2", "p3"];

/// Kills the experiment (if it still runs) and removes the scratch
/// directory when the test ends, also on panic; `Down` takes what is left
/// of the testbed.
struct Running {
    child: Option<Child>,
    dir: PathBuf,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The experiment file: testbed `name`, a wall-engine run of LCMP with
/// two 3000-byte flows from a to b, the second `gap_s` after the first.
fn experiment(dir: &Path, name: &str, gap_s: u64) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("trace.txt"),
        format!(
            "0b000001 0b001001 10000 100 3000 1000000000 1 1\n\
             0b000001 0b001001 10001 100 3000 {} 1 1\n",
            (1 + gap_s) * 1_000_000_000
        ),
    )
    .unwrap();
    let file = dir.join("wall.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"{name}\"\ntopology = \"{}\"\nfrom = \"s1\"\nto = \"s2\"\n\
             policies = [\"lcmp\"]\ntransport = \"rocev2\"\nengine = \"wall\"\nscale = 1\n\
             time_scale = 1\ntrace = \"trace.txt\"\ntrace_format = \"hpcc-fct\"\ndrain_s = 1\n",
            topology("2dc-3path.toml")
        ),
    )
    .unwrap();
    file
}

fn start(config: &Path, out: &Path) -> Child {
    command(&[
        "experiment",
        "--config",
        config.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("lcmp-testbed runs")
}

fn finish(r: &mut Running) -> Output {
    r.child.take().unwrap().wait_with_output().unwrap()
}

/// GET /metrics from `addr`; `None` if it cannot be read.
fn scrape(addr: &str) -> Option<String> {
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    Some(text)
}

/// Whether `text` has a port's transmitted frames for every switch.
fn every_switch_reported(text: &str) -> bool {
    SWITCHES.iter().all(|sw| {
        text.lines()
            .any(|l| l.starts_with(&format!("lcmp_port_tx_packets_total{{switch=\"{sw}\",")))
    })
}

/// While the run goes on: status lists every switch in the experiment's
/// process with its stats file's ports, the agent running with metrics,
/// and a scrape of them has every switch's port families. Returns the
/// agent's pid.
fn check_while_running(name: &str, experiment_pid: u32) -> u32 {
    let (status, metrics) = wait_for(
        "the run's agent and metrics",
        Duration::from_secs(30),
        || {
            let o = tool(&["status", "--name", name, "--json"]);
            let st: Value = serde_json::from_slice(&o.stdout).ok()?;
            let addr = st["agent"]["metrics"].as_str()?.to_string();
            let text = scrape(&addr)?;
            // The metrics come over the control sockets; status reads the
            // stats files, whose first write may come later.
            let stats_written = st["switches"]
                .as_array()?
                .iter()
                .all(|s| s["stats_age_s"].is_number());
            (stats_written && every_switch_reported(&text)).then_some((st, text))
        },
    );
    let listed: Vec<&str> = status["switches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(listed, SWITCHES, "{status:#}");
    for sw in status["switches"].as_array().unwrap() {
        assert_eq!(sw["pid"], experiment_pid, "{sw:#}");
        assert_eq!(sw["running"], true, "{sw:#}");
        assert!(sw["stats_age_s"].is_number(), "{sw:#}");
        // The stats file's counters: every port has its tx count.
        for p in sw["ports"].as_array().unwrap() {
            assert!(p["tx_frames"].is_u64(), "{sw:#}");
        }
    }
    assert_eq!(status["agent"]["running"], true, "{status:#}");
    // A switch family beside the port's: the agent scraped each switch.
    for sw in SWITCHES {
        assert!(
            metrics.contains(&format!("switch=\"{sw}\"")),
            "{sw}: {metrics}"
        );
    }
    status["agent"]["pid"].as_u64().unwrap() as u32
}

fn assert_gone(name: &str, agent: u32) {
    let dir = Path::new("/run/lcmp-testbed").join(name);
    assert!(!dir.exists(), "{} is left", dir.display());
    // The agent was stopped before the directory went.
    assert!(!process_running(agent), "agent {agent} still runs");
}

#[test]
fn a_wall_run_is_a_testbed_with_status_and_metrics_while_it_runs() {
    require_root!();
    let name = unique_name("wm");
    let _down = Down(name.clone());
    let dir = std::env::temp_dir().join(format!("lcmp-wall-metrics-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    let mut r = Running {
        child: None,
        dir: dir.clone(),
    };

    // A testbed of that name up: refused in one line, and left alone.
    let state = Path::new("/run/lcmp-testbed").join(&name);
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(state.join("state.json"), "{}").unwrap();
    let config = experiment(&dir, &name, 4);
    let o = tool(&[
        "experiment",
        "--config",
        config.to_str().unwrap(),
        "--out",
        dir.join("refused").to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains(&format!("testbed {name:?} is up")) && err.trim().lines().count() == 1,
        "{err}"
    );
    assert!(state.join("state.json").exists());
    std::fs::remove_dir_all(&state).unwrap();

    // A run that ends by itself.
    let out = dir.join("out");
    r.child = Some(start(&config, &out));
    let pid = r.child.as_ref().unwrap().id();
    let agent = check_while_running(&name, pid);
    let o = finish(&mut r);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert_gone(&name, agent);
    let run = out.join("runs/trace-lcmp-seed1");
    assert!(run.join("agent.log").is_file());
    // The agent's table pushes changed no switch's tables (it computes
    // them as the switches do).
    for sw in SWITCHES {
        let snap: Value = serde_json::from_str(
            &std::fs::read_to_string(run.join(format!("switch-{sw}.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(snap["table_generation"], 1, "{sw}");
    }

    // A run interrupted (Ctrl-C) long before its second flow.
    let config = experiment(&dir, &name, 60);
    r.child = Some(start(&config, &dir.join("interrupted")));
    let pid = r.child.as_ref().unwrap().id();
    let agent = check_while_running(&name, pid);
    // SAFETY: kill(2) on the child this test started and has not reaped.
    unsafe {
        libc::kill(pid as i32, libc::SIGINT);
    }
    finish(&mut r);
    assert_gone(&name, agent);
}

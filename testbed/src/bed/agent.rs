//! A testbed's agent (`lcmp-agent run --testbed NAME`): started detached
//! with the switches' path-cost options, stopped, and checked for.

use std::thread;
use std::time::{Duration, Instant};

use lcmp_netlab::netns::{process_running, spawn_detached};

use super::process::{find_program, is_program, signal_and_wait, tail};
use super::AgentOptions;
use crate::state::{self, AgentProc, State};
use crate::{Error, Result};

/// Starts the testbed's agent (`lcmp-agent run --testbed NAME`), detached,
/// and waits until it has adopted the switches (its state file names its
/// pid and, with metrics, the address bound). A testbed without
/// namespaces runs its switches in the `lcmp-testbed` process (a
/// wall-engine experiment's run): its agent reads the same network file,
/// control sockets and state file, with no host namespaces to tune (the
/// hosts are nodes of that process, their NICs emulated there).
pub fn start_agent(st: &mut State, opts: &AgentOptions) -> Result<()> {
    let in_process = st.namespaces.is_empty();
    let bin = find_program("lcmp-agent", "LCMP_AGENT_BIN")?;
    let dir = state::dir(&st.name);
    let log = dir.join("agent.log");
    let state_file = dir.join("agent.json");
    let _ = std::fs::remove_file(&state_file);
    let mut argv: Vec<String> = vec![bin.display().to_string(), "run".into()];
    if in_process {
        argv.extend([
            "--topology".into(),
            st.topology_file.display().to_string(),
            "--socket-dir".into(),
            dir.display().to_string(),
            "--state-file".into(),
            state_file.display().to_string(),
        ]);
    } else {
        argv.extend(["--testbed".into(), st.name.clone()]);
    }
    // The agent computes C_path as the switches do: their options for it
    // (the experiment's metric, and --switch-arg's) go to the agent too.
    let mut path_cost = path_cost_args(&st.switches.extra_args);
    // A policy spec's path weights (`lcmp:w_dl=1:w_lc=3`), unless
    // --switch-arg gives them.
    for (flag, w) in [
        ("--w-delay", st.switches.w_delay),
        ("--w-capacity", st.switches.w_capacity),
    ] {
        if let Some(w) = w {
            if !path_cost.iter().any(|a| a.starts_with(flag)) {
                path_cost.push(format!("{flag}={w}"));
            }
        }
    }
    if let Some(m) = &st.switches.metric {
        if !path_cost.iter().any(|a| a.starts_with("--metric")) {
            argv.push(format!("--metric={m}"));
        }
    }
    argv.extend(path_cost);
    argv.extend(["--scaling".into(), st.scaling.to_string()]);
    match opts.metrics_listen {
        Some(mut addr) => {
            // Another testbed's agent (or any exporter) may hold the
            // default port: the testbed then asks for a free one and says
            // so (`status` shows it). Any other address is the user's: the
            // agent takes it as given or fails naming what holds it.
            let default = super::DEFAULT_METRICS_LISTEN.parse().ok();
            if Some(addr) == default {
                if let Err(e) = std::net::TcpListener::bind(addr) {
                    if e.kind() == std::io::ErrorKind::AddrInUse {
                        let holder = lcmp_control::http::listener_on(addr.port())
                            .unwrap_or_else(|| "another process".into());
                        eprintln!(
                            "lcmp-testbed: metrics: {addr} is in use by {holder}; the agent serves on a free port (lcmp-testbed status shows it)"
                        );
                        addr.set_port(0);
                    }
                }
            }
            argv.extend(["--metrics-listen".into(), addr.to_string()]);
        }
        None => argv.push("--no-metrics".into()),
    }
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let pid = spawn_detached(&argv, &log)?;
    st.agent = Some(AgentProc {
        pid,
        log: log.clone(),
        metrics: None,
    });
    st.save()?;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let written: Option<serde_json::Value> = std::fs::read_to_string(&state_file)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok());
        if let Some(v) = written.filter(|v| v["pid"] == pid) {
            let metrics = v["metrics"].as_str().map(str::to_string);
            if metrics.is_some() || opts.metrics_listen.is_none() {
                if let Some(a) = st.agent.as_mut() {
                    a.metrics = metrics;
                }
                return st.save();
            }
        }
        if !process_running(pid) {
            return Err(Error::new(format!(
                "the agent exited at start:\n{}",
                tail(&log, 20)
            )));
        }
        if Instant::now() >= deadline {
            return Err(Error::new(format!(
                "the agent did not adopt the switches within 20 s:\n{}",
                tail(&log, 20)
            )));
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// The options among a switch's extra arguments that shape C_path
/// (`--metric`, `--w-delay`, `--w-capacity`, as `--x=v` or `--x v`).
fn path_cost_args(extra: &[String]) -> Vec<String> {
    const FLAGS: [&str; 3] = ["--metric", "--w-delay", "--w-capacity"];
    let mut out = Vec::new();
    let mut it = extra.iter();
    while let Some(a) = it.next() {
        let flag = a.split('=').next().unwrap_or("");
        if !FLAGS.contains(&flag) {
            continue;
        }
        out.push(a.clone());
        if !a.contains('=') {
            if let Some(v) = it.next() {
                out.push(v.clone());
            }
        }
    }
    out
}

/// Stops the testbed's agent (SIGTERM); the switches keep forwarding.
pub fn stop_agent(st: &mut State) -> Result<()> {
    if let Some(a) = st.agent.as_mut() {
        if a.pid != 0 && is_program(a.pid, "lcmp-agent") {
            signal_and_wait(&[a.pid], Duration::from_secs(3));
        }
        a.pid = 0;
    }
    st.save()
}

/// Whether the testbed's agent runs.
pub fn agent_running(st: &State) -> bool {
    st.agent
        .as_ref()
        .is_some_and(|a| a.pid != 0 && is_program(a.pid, "lcmp-agent"))
}

#[cfg(test)]
mod agent_args_tests {
    use super::path_cost_args;

    #[test]
    fn only_the_path_cost_options_reach_the_agent() {
        let extra: Vec<String> = [
            "--no-ecn",
            "--metric",
            "local",
            "--w-delay=5",
            "--keep",
            "1/3",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            path_cost_args(&extra),
            vec!["--metric", "local", "--w-delay=5"]
        );
    }
}

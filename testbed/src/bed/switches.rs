//! A testbed's switch daemons: started detached (one process for every
//! switch, or one each), waited for until ready, recorded in the state
//! file and stopped again.

use std::path::{Path, PathBuf};
use std::time::Duration;

use lcmp_netlab::daemon::{switch_argv, switches_argv, wait_ready, SwitchKind};
use lcmp_netlab::netns::{process_running, spawn_detached};
use lcmp_netlab::{Lab, SwitchNode};

use super::process::{is_program, signal_and_wait, tail};
use super::{SwitchProcesses, STATS_INTERVAL_MS};
use crate::state::{self, State, SwitchProc};
use crate::Result;

/// Starts the switches of `tb` with `st.switches`, run as they ran last
/// ([`SwitchProcesses::of`]), and waits until all are ready; records their
/// pids in the state file.
pub fn start_switches(st: &mut State, tb: &Lab, switch_bin: &Path) -> Result<()> {
    let how = SwitchProcesses::of(st);
    start_switches_as(st, tb, switch_bin, how)
}

/// Starts the switches of `tb` with `st.switches`, detached: one process
/// for all of them or one each (`how`), and waits until all are ready;
/// records their pids in the state file.
pub fn start_switches_as(
    st: &mut State,
    tb: &Lab,
    switch_bin: &Path,
    how: SwitchProcesses,
) -> Result<()> {
    let topology = st.topology_file.clone();
    // Checked at `up`; a testbed built without veths between its switches
    // can only run them in one process.
    super::links_for(how, Some(st.links))?;
    if how == SwitchProcesses::One {
        let dir = state::dir(&st.name);
        let flow_log = flow_log_path(&dir.join("{switch}.stats.json"));
        // A loop per core (`--switch-arg=--loops=N`, given later, wins): a
        // single loop is a single core, which the 8-DC experiments
        // saturate.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let loops = cores.min(tb.switches.len()).max(1);
        let process = [
            "--flow-log".into(),
            flow_log.display().to_string(),
            "--links".into(),
            st.links.name().into(),
            "--loops".into(),
            loops.to_string(),
        ];
        // The switches read the unscaled network and emulate it scaled.
        let extra = st.switches.argv(&st.scaling, &process);
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let argv = switches_argv(
            switch_bin,
            SwitchKind::Lcmp,
            &topology,
            &tb.switches,
            &dir,
            STATS_INTERVAL_MS,
            &extra,
        );
        return launch_one_process(st, tb, &argv);
    }
    let extra = st.switches.argv(&st.scaling, &[]);
    launch_switches(st, tb, &|node, stats| {
        let mut extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let flow_log_arg = flow_log_path(stats).display().to_string();
        extra.extend(["--flow-log", flow_log_arg.as_str()]);
        switch_argv(
            switch_bin,
            SwitchKind::Lcmp,
            &topology,
            node,
            stats,
            STATS_INTERVAL_MS,
            &extra,
        )
    })
}

/// Starts one detached switch per switch of `tb`, each with the command
/// line `argv(node, stats file)` (logs and stats files in the state
/// directory), records their pids in the state file, and waits until every
/// one has written its first stats file.
pub fn launch_switches(
    st: &mut State,
    tb: &Lab,
    argv: &dyn Fn(&SwitchNode, &Path) -> Vec<String>,
) -> Result<()> {
    let dir = state::dir(&st.name);
    st.procs.clear();
    for node in &tb.switches {
        let stats = dir.join(format!("{}.stats.json", node.name));
        let log = dir.join(format!("{}.log", node.name));
        let _ = std::fs::remove_file(&stats);
        let argv = argv(node, &stats);
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let pid = spawn_detached(&argv, &log)?;
        st.procs.push(SwitchProc {
            name: node.name.clone(),
            pid,
            log,
            stats,
            shared: false,
        });
        st.save()?;
    }
    wait_all_ready(st)
}

/// Waits until every switch of `st` has written its first stats file (or
/// its process died, with the log's end).
fn wait_all_ready(st: &State) -> Result<()> {
    for p in &st.procs {
        wait_ready(&p.name, &p.stats, Duration::from_secs(30), || {
            (!process_running(p.pid)).then(|| tail(&p.log, 20))
        })?;
    }
    Ok(())
}

/// Starts `argv`, one detached `lcmp-switch` running every switch of `tb`
/// (stats files `DIR/<switch>.stats.json`), logging to `DIR/switches.log`;
/// records it as every switch's process in the state file and waits until
/// every switch has written its first stats file.
pub fn launch_one_process(st: &mut State, tb: &Lab, argv: &[String]) -> Result<()> {
    let dir = state::dir(&st.name);
    let log = dir.join("switches.log");
    st.procs.clear();
    for node in &tb.switches {
        let _ = std::fs::remove_file(dir.join(format!("{}.stats.json", node.name)));
    }
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let pid = spawn_detached(&argv, &log)?;
    for node in &tb.switches {
        st.procs.push(SwitchProc {
            name: node.name.clone(),
            pid,
            log: log.clone(),
            stats: dir.join(format!("{}.stats.json", node.name)),
            shared: true,
        });
    }
    st.save()?;
    wait_all_ready(st)
}

/// Pids of the switch daemons of `st` that still run, each once (switches
/// sharing a process share its pid).
pub(super) fn running_switches(st: &State) -> Vec<u32> {
    let mut pids: Vec<u32> = st
        .procs
        .iter()
        .map(|p| p.pid)
        .filter(|&pid| pid != 0 && is_program(pid, "lcmp-switch"))
        .collect();
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// Stops the switch daemons of `st` (SIGTERM: they detach their XDP
/// programs; SIGKILL after 3 s) and clears their pids.
pub fn stop_switches(st: &mut State) -> Result<()> {
    let pids = running_switches(st);
    signal_and_wait(&pids, Duration::from_secs(3));
    for p in &mut st.procs {
        p.pid = 0;
    }
    st.save()
}

/// The flow-decision log (`lcmp-switch lcmp --flow-log`) beside a switch's
/// stats file: which port the switch chose for each new flow.
pub fn flow_log_path(stats: &Path) -> PathBuf {
    let name = stats
        .file_name()
        .map(|n| n.to_string_lossy().replace(".stats.json", ".flows.csv"))
        .unwrap_or_else(|| "flows.csv".into());
    stats.with_file_name(name)
}

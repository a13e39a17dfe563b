//! The commands on testbeds that are up: `status`, `exec`, `link`,
//! `down`, `list` and `agent`.

use std::process::ExitCode;

use clap::Args;
use lcmp_testbed::bed;
use lcmp_testbed::state::{self, State};
use lcmp_testbed::{status, Error, Result};
use lcmp_topology::{out, outln};

use super::say;

/// `lcmp-testbed status`.
#[derive(Args, Debug)]
pub struct StatusArgs {
    /// Testbed name.
    #[arg(long)]
    name: String,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// `lcmp-testbed exec`.
#[derive(Args, Debug)]
pub struct ExecArgs {
    /// Testbed name.
    #[arg(long)]
    name: String,
    /// Host or switch name in the topology.
    node: String,
    /// The command and its arguments (after `--`).
    #[arg(last = true, required = true)]
    cmd: Vec<String>,
}

/// `lcmp-testbed link`.
#[derive(Args, Debug)]
pub struct LinkArgs {
    /// Testbed name.
    #[arg(long)]
    name: String,
    /// The link between two switches: SWITCH-SWITCH (either order).
    link: String,
    /// Its new carrier state.
    #[arg(value_name = "STATE", value_parser = ["up", "down"])]
    state: String,
}

/// `lcmp-testbed down`.
#[derive(Args, Debug)]
pub struct DownArgs {
    /// Testbed name.
    #[arg(long, required_unless_present = "all", conflicts_with = "all")]
    name: Option<String>,
    /// Remove every testbed (and any leftover lcmptb-* namespace).
    #[arg(long)]
    all: bool,
}

/// `lcmp-testbed agent`.
#[derive(Args, Debug)]
pub struct AgentArgs {
    /// Testbed name.
    #[arg(long)]
    name: String,
    /// Stop the agent instead.
    #[arg(long)]
    stop: bool,
    /// Where its metrics are served.
    #[arg(long, default_value = bed::DEFAULT_METRICS_LISTEN)]
    metrics_listen: std::net::SocketAddr,
    /// Serve no metrics.
    #[arg(long)]
    no_metrics: bool,
}

/// `lcmp-testbed status`: exit code 1 unless the testbed is healthy.
pub fn cmd_status(a: StatusArgs) -> Result<ExitCode> {
    let s = status::status(&a.name)?;
    if a.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&s).expect("status serializes")
        );
    } else {
        out!("{}", status::render(&s));
    }
    Ok(if s.health == "ok" {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `lcmp-testbed exec`: the command's exit code.
pub fn cmd_exec(a: ExecArgs) -> Result<ExitCode> {
    let ExecArgs { name, node, cmd } = a;
    bed::require_root()?;
    let st = State::load(&name)?;
    let ns = state::netns_name(&name, &node);
    if !st.namespaces.contains(&ns) {
        let nodes: Vec<&str> = st
            .namespaces
            .iter()
            .filter_map(|n| n.strip_prefix(&state::netns_prefix(&name)))
            .collect();
        return Err(Error::new(format!(
            "no host or switch {node:?} in testbed {name} (nodes: {})",
            nodes.join(", ")
        )));
    }
    let status = std::process::Command::new("ip")
        .args(["netns", "exec", &ns])
        .args(&cmd)
        .status()
        .map_err(|e| Error::new(format!("cannot run ip netns exec: {e}")))?;
    Ok(ExitCode::from(
        status.code().unwrap_or(1).clamp(0, 255) as u8
    ))
}

/// `lcmp-testbed link`: fails or restores a link (veth or memory).
pub fn cmd_link(a: LinkArgs) -> Result<ExitCode> {
    bed::require_root()?;
    let st = State::load(&a.name)?;
    let (topo, tb) = bed::attach(&st)?;
    let link = bed::find_link(&topo, &a.link)?;
    say(&bed::set_carrier(&st.name, &tb, link.id, a.state == "up")?);
    Ok(ExitCode::SUCCESS)
}

/// `lcmp-testbed down`.
pub fn cmd_down(a: DownArgs) -> Result<ExitCode> {
    let names = if a.all {
        bed::require_root()?;
        state::list()
    } else {
        vec![a.name.expect("clap requires --name without --all")]
    };
    if a.all && names.is_empty() {
        say("no testbed is up");
    }
    for n in names {
        let r = bed::down(&n)?;
        say(&format!(
            "testbed {n} is down ({} switch processes stopped, {} namespaces removed)",
            r.processes, r.namespaces
        ));
    }
    Ok(ExitCode::SUCCESS)
}

/// `lcmp-testbed list`: one line per testbed.
pub fn cmd_list() -> Result<ExitCode> {
    for n in state::list() {
        match status::status(&n) {
            Ok(s) => outln!(
                "{n}\t{}\t{} switches\t{} hosts\t{}",
                s.topology,
                s.switches.len(),
                s.hosts.len(),
                s.health
            ),
            Err(e) => outln!("{n}\t(broken: {e}; `lcmp-testbed down --name {n}`)"),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `lcmp-testbed agent`: starts the agent unless it runs, or stops it.
pub fn cmd_agent(a: AgentArgs) -> Result<ExitCode> {
    let AgentArgs {
        name,
        stop,
        metrics_listen,
        no_metrics,
    } = a;
    bed::require_root()?;
    let mut st = State::load(&name)?;
    if stop {
        bed::stop_agent(&mut st)?;
        say(&format!(
            "the agent of {name} is stopped; its switches keep forwarding"
        ));
    } else if bed::agent_running(&st) {
        let a = st.agent.as_ref().expect("running agent has a record");
        say(&format!(
            "the agent of {name} runs already (pid {}, metrics {})",
            a.pid,
            a.metrics.as_deref().unwrap_or("off")
        ));
    } else {
        bed::start_agent(
            &mut st,
            &bed::AgentOptions {
                metrics_listen: (!no_metrics).then_some(metrics_listen),
            },
        )?;
        let a = st.agent.as_ref().expect("just started");
        say(&format!(
            "agent of {name} started (pid {}, metrics {}); log {}",
            a.pid,
            a.metrics.as_deref().unwrap_or("off"),
            a.log.display()
        ));
    }
    Ok(ExitCode::SUCCESS)
}

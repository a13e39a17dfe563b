//! The commands on testbeds that are up: `status`, `exec`, `link`,
//! `down`, `list` and `agent`.

use std::process::ExitCode;

use clap::Args;
use lcmp_testbed::bed;
use lcmp_testbed::state::{self, State};
use lcmp_testbed::{status, Error, Result};
use lcmp_topology::{out, outln};

use super::say;

/// Which testbed a command acts on: `--testbed NAME` (`--name` as an
/// alias, the old spelling), or the one testbed that is up.
#[derive(Args, Debug, Clone)]
pub struct Selector {
    /// The testbed (default: the one that is up; with several up, name
    /// one).
    #[arg(long = "testbed", visible_alias = "name", value_name = "NAME")]
    testbed: Option<String>,
}

impl Selector {
    /// The testbed's name.
    pub fn name(&self) -> Result<String> {
        pick(self.testbed.as_deref(), &state::list())
    }
}

/// `given`, or the only name of `up`; else an error that says what to do.
fn pick(given: Option<&str>, up: &[String]) -> Result<String> {
    match (given, up) {
        (Some(name), _) => Ok(name.to_string()),
        (None, [only]) => Ok(only.clone()),
        (None, []) => Err(Error::new(
            "no testbed is up (`lcmp-testbed up` starts one; --testbed NAME names one)",
        )),
        (None, several) => Err(Error::new(format!(
            "{} testbeds are up ({}): name one with --testbed NAME",
            several.len(),
            several.join(", ")
        ))),
    }
}

/// `lcmp-testbed status`.
#[derive(Args, Debug)]
pub struct StatusArgs {
    #[command(flatten)]
    testbed: Selector,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// `lcmp-testbed exec`.
#[derive(Args, Debug)]
pub struct ExecArgs {
    #[command(flatten)]
    testbed: Selector,
    /// Host or switch name in the topology.
    node: String,
    /// The command and its arguments (after `--`).
    #[arg(last = true, required = true)]
    cmd: Vec<String>,
}

/// `lcmp-testbed link`.
#[derive(Args, Debug)]
pub struct LinkArgs {
    #[command(flatten)]
    testbed: Selector,
    /// The link between two switches: SWITCH-SWITCH (either order).
    link: String,
    /// Its new carrier state.
    #[arg(value_name = "STATE", value_parser = ["up", "down"])]
    state: String,
}

/// `lcmp-testbed down`.
#[derive(Args, Debug)]
pub struct DownArgs {
    #[command(flatten)]
    testbed: Selector,
    /// Remove every testbed (and any leftover lcmptb-* namespace).
    #[arg(long, conflicts_with = "testbed")]
    all: bool,
}

/// `lcmp-testbed agent`.
#[derive(Args, Debug)]
pub struct AgentArgs {
    #[command(flatten)]
    testbed: Selector,
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
    let s = status::status(&a.testbed.name()?)?;
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
    let ExecArgs { testbed, node, cmd } = a;
    let name = testbed.name()?;
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
    let st = State::load(&a.testbed.name()?)?;
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
        vec![a.testbed.name()?]
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
            Err(e) => outln!("{n}\t(broken: {e}; `lcmp-testbed down --testbed {n}`)"),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `lcmp-testbed agent`: starts the agent unless it runs, or stops it.
pub fn cmd_agent(a: AgentArgs) -> Result<ExitCode> {
    let AgentArgs {
        testbed,
        stop,
        metrics_listen,
        no_metrics,
    } = a;
    let name = testbed.name()?;
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

#[cfg(test)]
mod tests {
    use super::pick;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_named_testbed_wins_and_the_only_one_up_is_the_default() {
        assert_eq!(pick(Some("x"), &names(&["a", "b"])).unwrap(), "x");
        assert_eq!(pick(Some("x"), &[]).unwrap(), "x");
        assert_eq!(pick(None, &names(&["tb"])).unwrap(), "tb");
    }

    #[test]
    fn none_or_several_up_without_a_name_say_what_to_do() {
        let none = pick(None, &[]).unwrap_err().to_string();
        assert!(none.contains("no testbed is up"), "{none}");
        let two = pick(None, &names(&["a", "b"])).unwrap_err().to_string();
        assert!(two.contains("2 testbeds are up (a, b)"), "{two}");
        assert!(two.contains("--testbed NAME"), "{two}");
    }
}

//! `lcmp-testbed up`: a testbed from a DCI topology, or a rotor network.

use std::process::ExitCode;

use clap::Args;
use lcmp_testbed::bed::{self, UpOptions};
use lcmp_testbed::state::SwitchSettings;
use lcmp_testbed::{experiment, rdma, rotor, status, Error, Result};
use lcmp_topology::network::Network;
use lcmp_topology::out;
use lcmp_topology::rotor_net::RotorNetwork;

use super::say;

/// `lcmp-testbed up`.
#[derive(Args, Debug, Clone)]
pub struct UpArgs {
    /// Testbed name: 1 to 16 of a-z, 0-9, _.
    #[arg(
        long = "testbed",
        visible_alias = "name",
        value_name = "NAME",
        default_value = "tb"
    )]
    name: String,
    #[command(flatten)]
    topo: experiment::TopologyArgs,
    /// Path-selection policy of the switches: a name of `lcmp_policy`'s
    /// registry (lcmp, ecmp, wcmp, ucmp, lcmp-rm-alpha, lcmp-rm-beta, and
    /// any policy added there; an unknown one is refused in one line that
    /// lists them), or a spec with LCMP's weights: `lcmp:alpha=1:beta=3`,
    /// `lcmp:w_ql=1:w_tl=2:w_dp=1`, `lcmp:w_dl=1:w_lc=3`.
    #[arg(long, default_value = "lcmp")]
    policy: String,
    /// Extra argument for every lcmp-switch (repeatable), e.g.
    /// `--switch-arg=--no-ecn`.
    #[arg(long = "switch-arg", allow_hyphen_values = true)]
    switch_args: Vec<String>,
    /// Create SoftRoCE (rdma_rxe) devices on the hosts, where the kernel
    /// has it.
    #[arg(long)]
    rdma: bool,
    /// `one`: one lcmp-switch process runs every switch, an event loop per
    /// core (about two thirds of the CPU per gigabit of `per-switch`, and
    /// fewer drops where a real network has none); `per-switch`: a process
    /// per switch inside its namespace (a crash takes down one switch).
    /// Rotor networks run a process per switch unless --links memory.
    #[arg(long, value_name = "HOW", value_enum, default_value = "one")]
    switch_processes: bed::SwitchProcesses,
    /// How links between switches are made: `memory` (the default with one
    /// process: frames cross from switch to switch in memory, each
    /// direction still emulated by its sending port, at a fraction of a
    /// veth hop's CPU; `lcmp-ctl carrier` fails one, `lcmp-ctl capture`
    /// shows its frames) or `veth` (a veth pair each, the only kind with a
    /// process per switch). Host links are always veths. A rotor network's
    /// ToR-rotor links are veths, a process per switch, unless `memory`
    /// (one process: larger networks fit the cores, slot timing is shared
    /// with the other switches of a loop).
    #[arg(long, value_name = "KIND", value_parser = bed::parse_links)]
    links: Option<lcmp_netlab::SwitchLinks>,
    /// Where the agent serves Prometheus metrics of every switch (port 0:
    /// any free port; the default port, when taken, falls back to a free
    /// one). `lcmp-testbed status` shows the address.
    #[arg(long, default_value = bed::DEFAULT_METRICS_LISTEN)]
    metrics_listen: std::net::SocketAddr,
    /// Serve no metrics.
    #[arg(long)]
    no_metrics: bool,
    /// Start no agent: switches keep the tables they computed at start,
    /// and a link failure is seen only by the switches at its ends.
    #[arg(long)]
    no_agent: bool,
    /// Bring up the built-in rotor network instead of a topology: 8 ToRs x
    /// 2 rotors, one host per ToR, Mars's de Bruijn schedule as the
    /// planner chooses it (degree 4) for Delta = 1 ms, Delta_r = 100 us,
    /// c = 100 Mbit/s, B = 4 c Delta = 50 kB, delay budget 8.5 Delta;
    /// shift routing with Valiant load balancing. A --topology file with a
    /// [rotor] table (lcmp-agent rotor-plan --schedule) is a rotor network
    /// too. Rotor networks get no agent: the network file in the state
    /// directory carries the epoch of slot 0 (set at `up`).
    #[arg(long, conflicts_with = "topology")]
    rotor: bool,
}

/// `lcmp-testbed up`: a rotor network if the arguments name one, else a
/// DCI testbed.
pub fn cmd_up(a: UpArgs) -> Result<ExitCode> {
    if let Some((network, source)) = rotor_network(&a)? {
        return up_rotor(&a, network, source);
    }
    experiment::check_policy(&a.policy)?;
    a.topo.validate()?;
    if a.rdma {
        // Checked first: a testbed that cannot have what was asked
        // for is not built.
        rdma::check_available()?;
    }
    let opts = UpOptions {
        name: a.name.clone(),
        topology: a.topo.topology.clone(),
        hosts_per_dc: a.topo.hosts_per_dc,
        host_switches: None,
        scaling: a.topo.scaling(),
        // A policy spec's weights become the switches' options.
        switches: SwitchSettings {
            alpha: a.topo.alpha,
            beta: a.topo.beta,
            extra_args: a.switch_args.clone(),
            ..SwitchSettings::default()
        }
        .for_policy(&a.policy),
        cc: a.topo.cc.clone(),
        initcwnd: a.topo.initcwnd,
        agent: (!a.no_agent).then(|| bed::AgentOptions {
            metrics_listen: (!a.no_metrics).then_some(a.metrics_listen),
        }),
        switch_processes: a.switch_processes,
        links: a.links,
    };
    let st = bed::up(&opts, &say)?;
    if a.rdma {
        if let Err(e) = rdma::add_devices(&st) {
            let _ = bed::down(&st.name);
            return Err(e);
        }
    }
    let s = status::status(&st.name)?;
    out!("{}", status::render(&s));
    say(&format!(
        "testbed {} is up; `lcmp-testbed exec --testbed {} HOST -- CMD` runs a command on a \
         host, `lcmp-testbed down --testbed {}` removes it",
        st.name, st.name, st.name
    ));
    Ok(ExitCode::SUCCESS)
}

/// The rotor network `up` brings up, with where it came from: the
/// built-in one (`--rotor`) or a `--topology` file that is one; `None`
/// for a DCI topology (read again by the DCI path).
fn rotor_network(a: &UpArgs) -> Result<Option<(RotorNetwork, String)>> {
    if a.rotor {
        return Ok(Some((
            rotor::default_network(),
            rotor::BUILTIN_NAME.to_string(),
        )));
    }
    let Some(f) = &a.topo.topology else {
        return Ok(None);
    };
    match Network::load(f).map_err(|e| Error::new(e.to_string()))? {
        Network::Rotor(net) => Ok(Some((
            net,
            std::fs::canonicalize(f)
                .unwrap_or_else(|_| f.clone())
                .display()
                .to_string(),
        ))),
        Network::Dci(_) => Ok(None),
    }
}

/// `up` of a rotor network.
fn up_rotor(a: &UpArgs, network: RotorNetwork, source: String) -> Result<ExitCode> {
    let st = rotor::up(
        &rotor::RotorUpOptions {
            name: a.name.clone(),
            network,
            source,
            switch_args: a.switch_args.clone(),
            links: a.links.unwrap_or(lcmp_netlab::SwitchLinks::Veth),
        },
        &say,
    )?;
    let s = status::status(&st.name)?;
    out!("{}", status::render(&s));
    say(&format!(
        "rotor network {} is up; `lcmp-testbed exec --testbed {} h0x0 -- ping 10.1.0.2` runs a command on a host, `lcmp-testbed down --testbed {}` removes it",
        st.name, st.name, st.name
    ));
    Ok(ExitCode::SUCCESS)
}

//! `lcmp-agent run`: the control plane of a set of running switches.
//!
//! - Tables: every switch's routes are computed from the topology file and
//!   pushed over its control socket (hitless: flows keep their ports while
//!   those stay candidates). The file is watched (and SIGHUP reloads it).
//! - Failures: every switch's port state is watched; a link down anywhere
//!   (carrier or admin) is removed from the candidates of every switch
//!   routing over it, and restored when it comes back.
//! - Emulation: switch ports are emulated by the switches (AF_XDP bypasses
//!   qdiscs); host links' host-to-switch direction by netem where the
//!   kernel has it, else not at all. The plan is logged and written to the
//!   state file, never silent.
//! - Metrics: Prometheus/OpenMetrics for every managed switch.
//!
//! The agent holds no state the switches need: they keep forwarding with
//! their last tables while it is away, and a restarted agent re-adopts them
//! by reading their port state and pushing the same tables (no change, no
//! flow moves).

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use lcmp_control::proto::{Applied, Reply, Request};
use lcmp_control::snapshot::EmulationMode;
use lcmp_topology::network::Network;
use lcmp_topology::{LinkId, Topology};
use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use crate::emulation;
use crate::failover::{link_name, port_links, routes_for};
use crate::managed::{serve_metrics, write_json, Managed};
pub use crate::managed::{AgentIdentity, RunOptions};

/// What the agent reports about itself (its state file).
#[derive(Clone, Debug, Default, Serialize)]
pub struct AgentState {
    /// Pid, metrics endpoint, topology, switches.
    #[serde(flatten)]
    pub id: AgentIdentity,
    /// Links down now.
    pub down_links: Vec<String>,
    /// How each direction of each link is emulated.
    pub emulation: Vec<LinkEmulation>,
    /// Table pushes that changed a switch's tables.
    pub table_changes: u64,
}

/// One direction of one link (`lcmp-ctl links` reads it back).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LinkEmulation {
    /// `from->to`.
    pub direction: String,
    /// Who emulates it.
    pub mechanism: EmulationMode,
    /// Why.
    pub reason: String,
}

/// The agent's working state (behind a mutex: the tokio loop runs each
/// blocking step off the runtime thread).
pub struct Agent {
    opts: RunOptions,
    topo: Topology,
    topo_mtime: Option<SystemTime>,
    switches: Vec<Managed>,
    down: BTreeSet<LinkId>,
    state: AgentState,
}

fn mtime(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

impl Agent {
    /// Loads the topology and prepares to manage its switches.
    pub fn new(opts: RunOptions) -> Result<Agent, String> {
        let topo = load_dci(&opts.topology)?;
        Agent::with_topology(opts, topo)
    }

    /// Prepares to manage the switches of `topo`, loaded from
    /// `opts.topology`.
    pub fn with_topology(opts: RunOptions, topo: Topology) -> Result<Agent, String> {
        let switches = topo
            .switches()
            .iter()
            .map(|s| {
                Managed::new(
                    &s.name,
                    opts.socket_dir.join(format!("{}.sock", s.name)),
                    port_links(&topo, &s.name),
                )
            })
            .collect();
        let state = AgentState {
            id: AgentIdentity::new(
                &opts.topology,
                topo.switches().iter().map(|s| s.name.clone()).collect(),
            ),
            ..Default::default()
        };
        Ok(Agent {
            topo_mtime: mtime(&opts.topology),
            opts,
            topo,
            switches,
            down: BTreeSet::new(),
            state,
        })
    }

    /// The managed switches and their sockets.
    pub fn sockets(&self) -> Vec<(String, PathBuf)> {
        self.switches
            .iter()
            .map(|s| (s.name.clone(), s.socket.clone()))
            .collect()
    }

    /// Links that some managed switch reports down now (carrier or admin);
    /// `None` for a switch that did not answer (its links keep their last
    /// known state).
    fn observe(&mut self) -> BTreeSet<LinkId> {
        let timeout = self.opts.timeout;
        let mut down = BTreeSet::new();
        let mut seen = BTreeSet::new();
        for sw in &mut self.switches {
            match sw.call(&Request::LinkState, timeout) {
                Ok(Reply::LinkState(ls)) => {
                    if sw.reachable() {
                        info!(switch = %sw.name, "pushing its tables");
                        sw.needs_tables = true;
                    }
                    for p in &ls.ports {
                        if let Some(Some(link)) = sw.links.get(p.index as usize) {
                            seen.insert(*link);
                            if !p.up {
                                down.insert(*link);
                            }
                        }
                    }
                }
                Ok(other) => warn!(
                    switch = %sw.name,
                    "unexpected {} reply to link_state",
                    crate::ctl::reply_kind(&other)
                ),
                Err(e) => sw.unreachable(&e),
            }
        }
        // Links no answering switch reported keep their last state.
        for l in &self.down {
            if !seen.contains(l) {
                down.insert(*l);
            }
        }
        down
    }

    /// Pushes every switch's tables (for the links down now), or with
    /// `only_returned` only to switches that came back after an outage;
    /// returns how many switches' tables changed.
    fn push_tables_to(&mut self, only_returned: bool) -> usize {
        let down: Vec<LinkId> = self.down.iter().copied().collect();
        let timeout = self.opts.timeout;
        let mut changed = 0;
        for sw in &mut self.switches {
            if only_returned && !sw.needs_tables {
                continue;
            }
            let routes = match routes_for(&self.topo, &down, &sw.name, &self.opts.tables) {
                Ok(r) => r,
                Err(e) => {
                    warn!(switch = %sw.name, "cannot compute tables: {e}");
                    continue;
                }
            };
            match sw.call(&Request::ReplaceTables { routes }, timeout) {
                Ok(Reply::Applied(Applied {
                    changed: true,
                    message,
                    flows_to_move,
                })) => {
                    info!(switch = %sw.name, flows_to_move, "{message}");
                    changed += 1;
                    sw.needs_tables = false;
                }
                Ok(_) => sw.needs_tables = false,
                Err(e) => {
                    if !sw.unreachable {
                        warn!(switch = %sw.name, "table push failed: {e}");
                    }
                }
            }
        }
        self.state.table_changes += changed as u64;
        changed
    }

    /// Pushes each switch port's link (rate, delay, buffer) from the
    /// topology: after a reload that changed links.
    fn push_links(&mut self, old: &Topology) {
        let timeout = self.opts.timeout;
        // The switches emulate the scaled links.
        let (new, old) = match (
            self.opts.scaling.emulated(&self.topo),
            self.opts.scaling.emulated(old),
        ) {
            (Ok(n), Ok(o)) => (n, o),
            (Err(e), _) | (_, Err(e)) => {
                warn!("links not pushed: {e}");
                return;
            }
        };
        for sw in &mut self.switches {
            let (Some(new_sw), Some(old_sw)) =
                (new.switch_by_name(&sw.name), old.switch_by_name(&sw.name))
            else {
                continue;
            };
            let (new_ports, old_ports) = (new.ports(new_sw.id), old.ports(old_sw.id));
            for (p, o) in new_ports.iter().zip(old_ports) {
                if (p.rate_bps, p.delay_ns, p.buffer_bytes)
                    == (o.rate_bps, o.delay_ns, o.buffer_bytes)
                {
                    continue;
                }
                let req = Request::SetLink {
                    port: p.index.to_string(),
                    rate_bps: Some(p.rate_bps),
                    delay_ns: Some(p.delay_ns),
                    buffer_bytes: Some(p.buffer_bytes),
                    mode: Some(EmulationMode::Switch),
                };
                match sw.call(&req, timeout) {
                    Ok(Reply::Applied(a)) => info!(switch = %sw.name, "{}", a.message),
                    Ok(_) => {}
                    Err(e) => warn!(switch = %sw.name, port = p.index, "link update failed: {e}"),
                }
            }
        }
    }

    /// One watch step: reads port state everywhere and, when the set of
    /// down links changed, recomputes and pushes tables. Returns the
    /// change as (went down, came back).
    pub fn watch(&mut self) -> (Vec<String>, Vec<String>) {
        let down = self.observe();
        if down == self.down {
            if self.switches.iter().any(|s| s.needs_tables) {
                self.push_tables_to(true);
            }
            return (Vec::new(), Vec::new());
        }
        let topo = &self.topo;
        let name = |l: &LinkId| link_name(topo, *l);
        let went: Vec<String> = down.difference(&self.down).map(name).collect();
        let back: Vec<String> = self.down.difference(&down).map(name).collect();
        let names: Vec<String> = down.iter().map(name).collect();
        self.down = down;
        let t = Instant::now();
        let n = self.push_tables_to(false);
        info!(
            down = ?went,
            up = ?back,
            switches_changed = n,
            push_ms = t.elapsed().as_secs_f64() * 1e3,
            "link state changed; tables pushed"
        );
        self.state.down_links = names;
        self.write_state();
        (went, back)
    }

    /// First contact (start or restart): learns which links are down and
    /// pushes tables (unchanged ones change nothing), plans emulation.
    pub fn adopt(&mut self) {
        self.down = self.observe();
        let n = self.push_tables_to(false);
        info!(
            switches = self.switches.len(),
            down_links = self.down.len(),
            tables_changed = n,
            "adopted the running switches"
        );
        self.plan_emulation();
        let names: Vec<String> = self
            .down
            .iter()
            .map(|l| link_name(&self.topo, *l))
            .collect();
        self.state.down_links = names;
        self.write_state();
    }

    /// Reloads the topology if its file changed (or `force`, on SIGHUP).
    /// A file whose switches or ports differ from the running ones is
    /// refused (restart the switches for that).
    pub fn reload(&mut self, force: bool) {
        let now = mtime(&self.opts.topology);
        if !force && now == self.topo_mtime {
            return;
        }
        self.topo_mtime = now;
        let new = match load_dci(&self.opts.topology) {
            Ok(t) => t,
            Err(e) => {
                warn!("topology reload refused, keeping the running tables: {e}");
                return;
            }
        };
        let same_shape = new.switches().len() == self.topo.switches().len()
            && self.topo.switches().iter().all(|s| {
                new.switch_by_name(&s.name)
                    .is_some_and(|n| new.ports(n.id).len() == self.topo.ports(s.id).len())
            });
        if !same_shape {
            warn!(
                "topology reload refused: {} has other switches or ports than the running switches (restart them to change that)",
                self.opts.topology.display()
            );
            return;
        }
        let old = std::mem::replace(&mut self.topo, new);
        for sw in &mut self.switches {
            sw.links = port_links(&self.topo, &sw.name);
        }
        self.push_links(&old);
        let n = self.push_tables_to(false);
        info!(tables_changed = n, "topology reloaded");
        self.write_state();
    }

    /// Decides and applies who emulates each link direction.
    fn plan_emulation(&mut self) {
        let netem = emulation::netem_available();
        let mut plan = Vec::new();
        // Hosts' links as emulated (netem), scaled.
        let emulated = match self.opts.scaling.emulated(&self.topo) {
            Ok(t) => t,
            Err(e) => {
                warn!("no link emulation planned: {e}");
                self.state.emulation = Vec::new();
                return;
            }
        };
        for l in self.topo.links() {
            let (a, b) = (&self.topo.switch(l.a).name, &self.topo.switch(l.b).name);
            for dir in [format!("{a}->{b}"), format!("{b}->{a}")] {
                plan.push(LinkEmulation {
                    direction: dir,
                    mechanism: emulation::mechanism(true, netem),
                    reason: "sent by an lcmp-switch port (AF_XDP bypasses qdiscs)".into(),
                });
            }
        }
        for h in emulated.hosts() {
            let sw = &emulated.switch(h.switch).name;
            plan.push(LinkEmulation {
                direction: format!("{sw}->{}", h.name),
                mechanism: EmulationMode::Switch,
                reason: "sent by an lcmp-switch port".into(),
            });
            let in_testbed = self.opts.host_netns_prefix.is_some();
            let mut mechanism = emulation::mechanism(false, netem && in_testbed);
            let mut reason = if !netem {
                "sent by the host's kernel and this kernel has no sch_netem: not emulated (line rate)"
                    .to_string()
            } else if !in_testbed {
                "sent by the host's kernel; outside a testbed the agent does not know the host's namespace: not emulated by the agent"
                    .to_string()
            } else {
                "sent by the host's kernel: netem on its interface".to_string()
            };
            if let (EmulationMode::Netem, Some(prefix)) = (mechanism, &self.opts.host_netns_prefix)
            {
                let args = emulation::netem_args(
                    h.ifname_or_default(),
                    h.rate_bps,
                    h.delay_ns,
                    h.buffer_bytes,
                );
                if let Err(e) = emulation::apply_netem(Some(&format!("{prefix}{}", h.name)), &args)
                {
                    warn!(host = %h.name, "netem: {e}");
                    reason = format!("netem failed, not emulated: {e}");
                    mechanism = EmulationMode::None;
                }
            }
            plan.push(LinkEmulation {
                direction: format!("{}->{sw}", h.name),
                mechanism,
                reason,
            });
        }
        let not_emulated = plan
            .iter()
            .filter(|p| p.mechanism == EmulationMode::None)
            .count();
        if not_emulated > 0 {
            warn!(
                "{not_emulated} host-to-switch directions are not emulated: this kernel has no sch_netem (the switches emulate every direction they send)"
            );
        }
        self.state.emulation = plan;
    }

    fn write_state(&self) {
        if let Some(path) = &self.opts.state_file {
            write_json(path, &self.state);
        }
    }

    /// Records the metrics endpoint as bound.
    pub fn set_metrics_addr(&mut self, addr: SocketAddr) {
        self.state.id.metrics = Some(addr.to_string());
        self.write_state();
    }
}

/// Runs the agent until SIGINT/SIGTERM. The switches go on forwarding
/// with their last tables after it exits. A rotor network file runs the
/// rotor network's agent ([`crate::rotor_run`]).
pub fn run(opts: RunOptions) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))?;
    match Network::load(&opts.topology).map_err(|e| e.to_string())? {
        Network::Dci(topo) => rt.block_on(run_async(opts, topo)),
        Network::Rotor(net) => rt.block_on(crate::rotor_run::run(opts, net)),
    }
}

/// The DCI topology at `path` (bounded read); a rotor network file is
/// refused by name.
fn load_dci(path: &Path) -> Result<Topology, String> {
    match Network::load(path).map_err(|e| e.to_string())? {
        Network::Dci(topo) => Ok(topo),
        Network::Rotor(_) => Err(format!(
            "{}: a rotor network, not a DCI topology (its switches and agent cannot change kind while running)",
            path.display()
        )),
    }
}

async fn run_async(opts: RunOptions, topo: Topology) -> Result<(), String> {
    use tokio::signal::unix::{signal, SignalKind};
    let watch_every = opts.watch_interval;
    let metrics_listen = opts.metrics_listen;
    let mut agent = Agent::with_topology(opts, topo)?;
    let sockets = Arc::new(Mutex::new(agent.sockets()));
    if let Some(addr) = metrics_listen {
        let sockets = sockets.clone();
        let bound = serve_metrics(addr, agent.opts.timeout, move || {
            sockets.lock().map(|l| l.clone()).unwrap_or_default()
        })?;
        agent.set_metrics_addr(bound);
    }
    let agent = Arc::new(Mutex::new(agent));
    let step = |f: fn(&mut Agent)| {
        let agent = agent.clone();
        async move {
            let _ = tokio::task::spawn_blocking(move || {
                if let Ok(mut a) = agent.lock() {
                    f(&mut a);
                }
            })
            .await;
        }
    };
    step(Agent::adopt).await;
    let mut hup = signal(SignalKind::hangup()).map_err(|e| e.to_string())?;
    let mut term = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
    let mut int = signal(SignalKind::interrupt()).map_err(|e| e.to_string())?;
    let mut watch = tokio::time::interval(watch_every);
    watch.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut file = tokio::time::interval(Duration::from_secs(1));
    file.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = watch.tick() => step(|a| { a.watch(); }).await,
            _ = file.tick() => step(|a| a.reload(false)).await,
            _ = hup.recv() => {
                info!("SIGHUP: reloading the topology");
                step(|a| a.reload(true)).await;
            }
            _ = term.recv() => break,
            _ = int.recv() => break,
        }
        if let Ok(a) = agent.lock() {
            if let Ok(mut s) = sockets.lock() {
                *s = a.sockets();
            }
        }
    }
    info!("stopping; the switches keep forwarding with their last tables");
    Ok(())
}

//! `lcmp-agent run` on a rotor network: it paces the rotor matching
//! periods by giving every switch one epoch (the start of slot 0 on
//! `CLOCK_REALTIME`), from which each derives the slot by itself; watches
//! that every switch keeps it (a restarted switch gets it again); and
//! serves every switch's rotor metrics.
//!
//! The epoch is the file's `epoch_unix_ns` when set; otherwise the one the
//! running switches already agree on (a restarted agent changes nothing);
//! otherwise the next whole second.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lcmp_control::proto::{Reply, Request};
use lcmp_control::rotor::RotorStatus;
use lcmp_topology::rotor_net::RotorNetwork;
use serde::Serialize;
use tracing::{info, warn};

use crate::managed::{serve_metrics, write_json, AgentIdentity, Managed, RunOptions};

/// What the agent reports about itself (its state file).
#[derive(Clone, Debug, Default, Serialize)]
pub struct RotorAgentState {
    /// Pid, metrics endpoint, network file, switches.
    #[serde(flatten)]
    pub id: AgentIdentity,
    /// The epoch distributed, `CLOCK_REALTIME` ns.
    pub epoch_unix_ns: u64,
    /// Where it came from: `file`, `switches`, `chosen`.
    pub epoch_source: String,
    /// `set_epoch` calls that changed a switch's epoch.
    pub epochs_set: u64,
}

struct RotorAgent {
    opts: RunOptions,
    switches: Vec<Managed>,
    state: RotorAgentState,
}

fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl RotorAgent {
    fn new(opts: RunOptions, net: &RotorNetwork) -> Self {
        let names: Vec<String> = (0..net.tors)
            .map(|t| format!("tor{t}"))
            .chain((0..net.rotors).map(|r| format!("rotor{r}")))
            .collect();
        RotorAgent {
            switches: names
                .iter()
                .map(|n| Managed::new(n, opts.socket_dir.join(format!("{n}.sock")), Vec::new()))
                .collect(),
            state: RotorAgentState {
                id: AgentIdentity::new(&opts.topology, names),
                ..Default::default()
            },
            opts,
        }
    }

    fn statuses(&mut self) -> Vec<Option<RotorStatus>> {
        let timeout = self.opts.timeout;
        self.switches
            .iter_mut()
            .map(|m| match m.call(&Request::Rotor, timeout) {
                Ok(Reply::Rotor(s)) => {
                    m.reachable();
                    Some(*s)
                }
                Ok(_) => {
                    m.unreachable(&format!("{} is not a rotor network's switch", m.name()));
                    None
                }
                Err(e) => {
                    m.unreachable(&e);
                    None
                }
            })
            .collect()
    }

    /// Picks the epoch: the file's, else the one most running switches
    /// have, else the next whole second.
    fn choose_epoch(&mut self, net: &RotorNetwork) {
        if let Some(e) = net.epoch_unix_ns {
            (self.state.epoch_unix_ns, self.state.epoch_source) = (e, "file".into());
            return;
        }
        let mut votes: BTreeMap<u64, usize> = BTreeMap::new();
        for s in self.statuses().into_iter().flatten() {
            if let Some(e) = s.epoch_unix_ns {
                *votes.entry(e).or_default() += 1;
            }
        }
        match votes.into_iter().max_by_key(|(_, n)| *n) {
            Some((e, _)) => {
                (self.state.epoch_unix_ns, self.state.epoch_source) = (e, "switches".into())
            }
            None => {
                let second = 1_000_000_000;
                let e = (realtime_ns() / second + 1) * second;
                (self.state.epoch_unix_ns, self.state.epoch_source) = (e, "chosen".into());
            }
        }
        info!(
            epoch_unix_ns = self.state.epoch_unix_ns,
            source = %self.state.epoch_source,
            "rotor epoch"
        );
    }

    /// Gives the epoch to every switch that lacks it.
    fn distribute(&mut self) {
        let timeout = self.opts.timeout;
        let epoch = self.state.epoch_unix_ns;
        let statuses = self.statuses();
        for (m, s) in self.switches.iter_mut().zip(statuses) {
            let Some(s) = s else { continue };
            if s.epoch_unix_ns == Some(epoch) {
                continue;
            }
            match m.call(
                &Request::SetEpoch {
                    epoch_unix_ns: epoch,
                },
                timeout,
            ) {
                Ok(Reply::Applied(a)) if a.changed => {
                    self.state.epochs_set += 1;
                    info!(switch = %m.name(), epoch_unix_ns = epoch, was = ?s.epoch_unix_ns, "epoch set");
                }
                Ok(_) => {}
                Err(e) => warn!(switch = %m.name(), "set_epoch: {e}"),
            }
        }
    }

    fn write_state(&self) {
        if let Some(path) = &self.opts.state_file {
            write_json(path, &self.state);
        }
    }
}

/// Runs the agent of a rotor network until SIGINT/SIGTERM.
pub async fn run(opts: RunOptions, net: RotorNetwork) -> Result<(), String> {
    use tokio::signal::unix::{signal, SignalKind};
    let watch_every = opts.watch_interval.max(Duration::from_millis(100));
    let mut agent = RotorAgent::new(opts, &net);
    if let Some(addr) = agent.opts.metrics_listen {
        let sockets: Vec<(String, PathBuf)> = agent
            .switches
            .iter()
            .map(|m| (m.name().to_string(), m.socket().to_path_buf()))
            .collect();
        let bound = serve_metrics(addr, agent.opts.timeout, move || sockets.clone())?;
        agent.state.id.metrics = Some(bound.to_string());
    }
    let agent = Arc::new(Mutex::new(agent));
    let step = |f: Box<dyn FnOnce(&mut RotorAgent) + Send>| {
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
    step(Box::new(move |a| {
        a.choose_epoch(&net);
        a.distribute();
        a.write_state();
    }))
    .await;
    let mut term = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
    let mut int = signal(SignalKind::interrupt()).map_err(|e| e.to_string())?;
    let mut watch = tokio::time::interval(watch_every);
    watch.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = watch.tick() => step(Box::new(|a| {
                let before = a.state.epochs_set;
                a.distribute();
                if a.state.epochs_set != before {
                    a.write_state();
                }
            })).await,
            _ = term.recv() => break,
            _ = int.recv() => break,
        }
    }
    info!("stopping; the switches keep their epoch and slots");
    Ok(())
}

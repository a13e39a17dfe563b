//! What the DCI agent ([`crate::run`]) and the rotor network's agent
//! ([`crate::rotor_run`]) share: how they run, who they are in their state
//! file, the switches they talk to, the state file, the metrics endpoint.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use lcmp_control::metrics;
use lcmp_control::proto::{Reply, Request};
use lcmp_control::scrape::scrape_socket;
use lcmp_control::Client;
use lcmp_topology::LinkId;
use serde::Serialize;
use tracing::{info, warn};

use crate::failover::TableOptions;

/// How the agent runs.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The topology file the switches run.
    pub topology: PathBuf,
    /// Where the switches' control sockets are (`<dir>/<switch>.sock`).
    pub socket_dir: PathBuf,
    /// Metrics endpoint; `None`: none.
    pub metrics_listen: Option<SocketAddr>,
    /// How often port state is polled.
    pub watch_interval: Duration,
    /// How tables are computed.
    pub tables: TableOptions,
    /// Where the agent writes its state (pid, metrics address, links).
    pub state_file: Option<PathBuf>,
    /// Namespace of each host is this prefix + host name (testbeds): lets
    /// the agent put netem on host interfaces.
    pub host_netns_prefix: Option<String>,
    /// Per-call timeout.
    pub timeout: Duration,
    /// The experiment's scaling of the network in `topology`: applied to
    /// the links the agent sets up (`SetLink` after a reload, netem on
    /// host interfaces), never to the tables it computes.
    pub scaling: lcmp_topology::Scaling,
}

/// Who the agent is, first in its state file whatever it manages.
#[derive(Clone, Debug, Default, Serialize)]
pub struct AgentIdentity {
    /// Process id.
    pub pid: u32,
    /// The metrics endpoint as bound.
    pub metrics: Option<String>,
    /// The topology (or rotor network) file.
    pub topology: String,
    /// Managed switches.
    pub switches: Vec<String>,
}

impl AgentIdentity {
    /// This process, managing `switches` of `topology`.
    pub fn new(topology: &Path, switches: Vec<String>) -> Self {
        AgentIdentity {
            pid: std::process::id(),
            metrics: None,
            topology: topology.display().to_string(),
            switches,
        }
    }
}

/// A switch the agent talks to.
pub(crate) struct Managed {
    pub(crate) name: String,
    pub(crate) socket: PathBuf,
    pub(crate) client: Option<Client>,
    /// Port index -> switch link behind it.
    pub(crate) links: Vec<Option<LinkId>>,
    /// The last answer was an error (logged once per outage).
    pub(crate) unreachable: bool,
    /// Came back after an outage (restarted, perhaps with the tables it
    /// computed at start): gets its tables pushed at once.
    pub(crate) needs_tables: bool,
}

impl Managed {
    /// A switch at `socket`, its ports leading over `links`.
    pub(crate) fn new(name: &str, socket: PathBuf, links: Vec<Option<LinkId>>) -> Self {
        Managed {
            name: name.to_string(),
            socket,
            client: None,
            links,
            unreachable: false,
            needs_tables: false,
        }
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn socket(&self) -> &Path {
        &self.socket
    }

    /// The switch answered: logged once when it comes back. True if it
    /// had been unreachable.
    pub(crate) fn reachable(&mut self) -> bool {
        let back = self.unreachable;
        if back {
            info!(switch = %self.name, "switch answers again");
            self.unreachable = false;
        }
        back
    }

    /// The switch did not answer: logged once per outage.
    pub(crate) fn unreachable(&mut self, why: &str) {
        if !self.unreachable {
            warn!(switch = %self.name, "switch does not answer: {why}");
            self.unreachable = true;
        }
    }

    pub(crate) fn call(&mut self, request: &Request, timeout: Duration) -> Result<Reply, String> {
        if self.client.is_none() {
            self.client = Some(Client::connect(&self.socket, timeout).map_err(|e| e.to_string())?);
        }
        let c = self.client.as_mut().expect("connected above");
        match c.call(request) {
            Ok(r) => Ok(r),
            // Refused: the connection stays up. Shown as the client shows
            // it (the switch's text echoed), never raw into the log.
            Err(e @ lcmp_control::ClientError::Refused(_)) => Err(e.to_string()),
            Err(e) => {
                // A broken connection (switch restarted): reconnect next time.
                self.client = None;
                Err(e.to_string())
            }
        }
    }
}

/// Serves Prometheus metrics at `addr`: each scrape asks every switch that
/// `sockets` lists over its control socket. The address it bound.
pub(crate) fn serve_metrics(
    addr: SocketAddr,
    timeout: Duration,
    sockets: impl Fn() -> Vec<(String, PathBuf)> + Send + Sync + 'static,
) -> Result<SocketAddr, String> {
    let bound = lcmp_control::http::serve(addr, move |format| {
        let scrapes: Vec<_> = sockets()
            .iter()
            .map(|(name, path)| scrape_socket(name, path, timeout))
            .collect();
        metrics::render_as(&scrapes, format)
    })
    .map_err(|e| format!("metrics endpoint {addr}: {e}"))?;
    info!(%bound, "metrics at http://{bound}/metrics");
    Ok(bound)
}

/// Writes the agent's state file atomically (a failure is logged).
pub(crate) fn write_json(path: &Path, state: &impl Serialize) {
    let tmp = path.with_extension("tmp");
    let json = serde_json::to_vec_pretty(state).expect("state serializes");
    if let Err(e) = std::fs::write(&tmp, json).and_then(|_| std::fs::rename(&tmp, path)) {
        warn!("cannot write {}: {e}", path.display());
    }
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::net::UnixListener;

    use lcmp_control::proto::{encode_response, Body, ErrorKind, ErrorReply};

    use super::*;

    /// A refusal carrying a terminal escape reaches the log escaped, and
    /// the connection is kept for the next call.
    #[test]
    fn a_refusal_is_echoed_and_keeps_the_connection() {
        let dir = std::env::temp_dir().join(format!("lcmp-managed-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let socket = dir.join("s1.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let server = std::thread::spawn(move || {
            let (s, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(s.try_clone().unwrap());
            let mut w = s;
            for id in 1..=2 {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                let body = Body::Error(ErrorReply::new(ErrorKind::Invalid, "\x1b[31mred"));
                w.write_all(&encode_response(id, body)).unwrap();
            }
        });
        let mut m = Managed::new("s1", socket, vec![]);
        for _ in 0..2 {
            let e = m
                .call(&Request::Status, Duration::from_secs(10))
                .unwrap_err();
            assert_eq!(e, "the switch refused: \"\\u{1b}[31mred\"");
            assert!(m.client.is_some());
        }
        server.join().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}

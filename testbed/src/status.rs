//! `lcmp-testbed status`: what a testbed is made of and whether it is
//! healthy (every switch running and reporting), as a table or JSON.

use std::fmt::Write as _;
use std::time::SystemTime;

use lcmp_topology::{Peer, Topology};
use serde::Serialize;

use crate::bed::is_program;
use crate::state::{self, State};
use crate::Result;

/// A stats file older than this means the switch stopped reporting.
const STALE_AFTER_S: f64 = 5.0;

/// One port of a switch.
#[derive(Debug, Serialize)]
pub struct PortStatus {
    /// Port index.
    pub index: u8,
    /// Interface in the switch namespace.
    pub ifname: String,
    /// `switch:port` or `host NAME`.
    pub peer: String,
    /// Configured (scaled) rate, bits per second.
    pub rate_bps: u64,
    /// Configured one-way delay, microseconds.
    pub delay_us: u64,
    /// Buffer, bytes.
    pub buffer_bytes: u64,
    /// Frames transmitted (from the switch's stats), if known.
    pub tx_frames: Option<u64>,
    /// RoCEv2 frames (UDP to 4791) received (from the switch's stats), if
    /// known: RDMA crossing the port.
    pub rx_rocev2_frames: Option<u64>,
    /// Link up (from the switch's stats), if known.
    pub up: Option<bool>,
    /// What the port is (from the switch's stats), if known: `af_xdp` (an
    /// AF_XDP socket on a veth) or `memory` (a memory link).
    pub kind: Option<String>,
}

/// One switch.
#[derive(Debug, Serialize)]
pub struct SwitchStatus {
    /// Name in the topology.
    pub name: String,
    /// Its namespace.
    pub netns: String,
    /// Daemon pid (0: none recorded).
    pub pid: u32,
    /// Whether that pid runs lcmp-switch.
    pub running: bool,
    /// Age of its stats file, seconds.
    pub stats_age_s: Option<f64>,
    /// Frames dropped, all reasons.
    pub drops_total: Option<u64>,
    /// Its ports.
    pub ports: Vec<PortStatus>,
    /// Its log file.
    pub log: String,
}

/// One host.
#[derive(Debug, Serialize)]
pub struct HostStatus {
    /// Name.
    pub name: String,
    /// Its namespace.
    pub netns: String,
    /// Addresses with prefix length.
    pub addresses: Vec<String>,
    /// `switch:port` it hangs off.
    pub attached_to: String,
}

/// The whole testbed.
#[derive(Debug, Serialize)]
pub struct Status {
    /// Testbed name.
    pub name: String,
    /// `ok`, or what is wrong.
    pub health: String,
    /// Whether `up` completed.
    pub complete: bool,
    /// The user's topology file.
    pub topology: String,
    /// The network file the switches read (unscaled).
    pub topology_file: String,
    /// Generated hosts per DC switch.
    pub hosts_per_dc: usize,
    /// Rate scale divisor.
    pub scale: f64,
    /// Every scale factor (`rate=1000,buffer=1000,size=1,time=10`, or
    /// `none`); the rates and delays shown are the emulated ones.
    pub scaling: String,
    /// Policy of the switches.
    pub policy: String,
    /// LCMP alpha.
    pub alpha: u32,
    /// LCMP beta.
    pub beta: u32,
    /// How the links between switches are made: `memory` or `veth`.
    pub links: String,
    /// Switches.
    pub switches: Vec<SwitchStatus>,
    /// Hosts.
    pub hosts: Vec<HostStatus>,
    /// The agent: pid (0: none), running, metrics address.
    pub agent: Option<AgentStatus>,
}

/// The testbed's agent.
#[derive(Debug, Clone, Serialize)]
pub struct AgentStatus {
    /// Process id (0: stopped).
    pub pid: u32,
    /// Whether it runs.
    pub running: bool,
    /// Where it serves metrics.
    pub metrics: Option<String>,
    /// Its log.
    pub log: String,
}

fn peer_name(topo: &Topology, peer: &Peer) -> String {
    match *peer {
        Peer::Switch { switch, port, .. } => format!("{}:{port}", topo.switch(switch).name),
        Peer::Host { host } => format!("host {}", topo.host(host).name),
    }
}

/// Gathers the status of testbed `name`.
pub fn status(name: &str) -> Result<Status> {
    let st = State::load(name)?;
    let topo = crate::bed::emulated_topology(&st)?;
    let mut problems = Vec::new();
    if !st.complete {
        problems.push("`up` did not complete".to_string());
    }
    let mut switches = Vec::new();
    for sw in topo.switches() {
        let proc = st.procs.iter().find(|p| p.name == sw.name);
        let pid = proc.map_or(0, |p| p.pid);
        // A wall-engine experiment's switches run in its own process
        // (`lcmp-testbed`), a testbed without namespaces.
        let in_experiment = proc.is_some_and(|p| p.shared)
            && st.namespaces.is_empty()
            && is_program(pid, "lcmp-testbed");
        let running = pid != 0 && (is_program(pid, "lcmp-switch") || in_experiment);
        let stats: Option<lcmp_control::Snapshot> = proc
            .and_then(|p| std::fs::read_to_string(&p.stats).ok())
            .and_then(|t| serde_json::from_str(&t).ok());
        let age = proc
            .and_then(|p| std::fs::metadata(&p.stats).ok())
            .and_then(|m| m.modified().ok())
            .and_then(|t| SystemTime::now().duration_since(t).ok())
            .map(|d| d.as_secs_f64());
        if !running {
            problems.push(format!("switch {} is not running", sw.name));
        } else if age.is_none_or(|a| a > STALE_AFTER_S) {
            problems.push(format!("switch {} has not reported for 5 s", sw.name));
        }
        // A rotor network's switches write their own state instead.
        let rotor: Option<lcmp_control::rotor::RotorStatus> = proc
            .and_then(|p| std::fs::read_to_string(&p.stats).ok())
            .and_then(|t| serde_json::from_str(&t).ok())
            .filter(|_| stats.is_none());
        type Seen = (u64, bool, Option<u64>, Option<String>);
        let port_stats = |ifname: &str| -> Option<Seen> {
            if let Some(r) = &rotor {
                return r
                    .ports
                    .iter()
                    .find(|p| p.name == ifname)
                    .map(|p| (p.tx_frames, p.link_up, None, None));
            }
            stats.as_ref().and_then(|s| s.port(ifname)).map(|p| {
                (
                    p.counter("tx_frames"),
                    p.up,
                    Some(p.counter("rx_rocev2_frames")),
                    (!p.kind.is_empty()).then(|| p.kind.clone()),
                )
            })
        };
        let ports = topo
            .ports(sw.id)
            .iter()
            .map(|p| {
                let ifname = p.ifname.clone().unwrap_or_else(|| format!("p{}", p.index));
                let ps = port_stats(&ifname);
                PortStatus {
                    index: p.index,
                    peer: peer_name(&topo, &p.peer),
                    rate_bps: p.rate_bps,
                    delay_us: p.delay_ns / 1000,
                    buffer_bytes: p.buffer_bytes,
                    tx_frames: ps.as_ref().map(|p| p.0),
                    rx_rocev2_frames: ps.as_ref().and_then(|p| p.2),
                    up: ps.as_ref().map(|p| p.1),
                    kind: ps.and_then(|p| p.3),
                    ifname,
                }
            })
            .collect();
        switches.push(SwitchStatus {
            name: sw.name.clone(),
            netns: state::netns_name(name, &sw.name),
            pid,
            running,
            stats_age_s: age,
            drops_total: stats
                .as_ref()
                .map(|s| s.drops_total)
                .or_else(|| rotor.as_ref().map(|r| r.drops.values().sum())),
            ports,
            log: proc
                .map(|p| p.log.display().to_string())
                .unwrap_or_default(),
        });
    }
    let hosts = topo
        .hosts()
        .iter()
        .map(|h| HostStatus {
            name: h.name.clone(),
            netns: state::netns_name(name, &h.name),
            addresses: h.addresses.iter().map(|a| a.to_string()).collect(),
            attached_to: format!("{}:{}", topo.switch(h.switch).name, h.port),
        })
        .collect();
    if st.agent.is_some() && !crate::bed::agent_running(&st) {
        problems.push(format!(
            "the agent is not running (`lcmp-testbed agent --testbed {name}` restarts it)"
        ));
    }
    Ok(Status {
        name: name.to_string(),
        health: if problems.is_empty() {
            "ok".into()
        } else {
            problems.join("; ")
        },
        complete: st.complete,
        topology: st.topology_source.clone(),
        topology_file: st.topology_file.display().to_string(),
        hosts_per_dc: st.hosts_per_dc,
        scale: st.scaling.rate,
        scaling: st.scaling.to_string(),
        policy: st.switches.policy.clone(),
        alpha: st.switches.alpha,
        beta: st.switches.beta,
        links: st.links.name().to_string(),
        switches,
        hosts,
        agent: st.agent.as_ref().map(|a| AgentStatus {
            pid: a.pid,
            running: crate::bed::agent_running(&st),
            metrics: a.metrics.clone(),
            log: a.log.display().to_string(),
        }),
    })
}

pub use lcmp_topology::units::human_rate;

/// The status as a human table.
pub fn render(s: &Status) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "testbed {}: {}", s.name, s.health);
    if s.policy.starts_with("rotor") {
        let _ = writeln!(
            out,
            "rotor network {} ({} host(s) per ToR), switches in {}",
            s.topology, s.hosts_per_dc, s.policy
        );
    } else {
        let _ = writeln!(
            out,
            "topology {} (hosts per DC {}, rates / {}, scaling {}), policy {} (alpha {}, beta {}), {} links between switches",
            s.topology, s.hosts_per_dc, s.scale, s.scaling, s.policy, s.alpha, s.beta, s.links
        );
    }
    match &s.agent {
        Some(a) => {
            let _ = writeln!(
                out,
                "agent pid {} {}  metrics {}  (lcmp-ctl --testbed {} ...)",
                a.pid,
                if a.running { "running" } else { "NOT RUNNING" },
                a.metrics
                    .as_deref()
                    .map_or("off".into(), |m| format!("http://{m}/metrics")),
                s.name
            );
        }
        None if s.policy.starts_with("rotor") => {
            let _ = writeln!(
                out,
                "no agent (rotor network: the epoch of slot 0 is in the network file)"
            );
        }
        None => {
            let _ = writeln!(out, "no agent (started with --no-agent)");
        }
    }
    for sw in &s.switches {
        let _ = writeln!(
            out,
            "\nswitch {:<8} pid {:<8} {}  drops {}  ns {}",
            sw.name,
            sw.pid,
            if sw.running { "running" } else { "NOT RUNNING" },
            sw.drops_total.map_or("-".into(), |d| d.to_string()),
            sw.netns
        );
        for p in &sw.ports {
            let _ = writeln!(
                out,
                "  port {:<2} {:<6} {:<6} -> {:<12} {:>14} {:>10} us  buffer {:>10} B  {}  tx {}{}",
                p.index,
                p.ifname,
                match p.kind.as_deref() {
                    Some("memory") => "memory",
                    Some("af_xdp") => "veth",
                    _ => "",
                },
                p.peer,
                human_rate(p.rate_bps),
                p.delay_us,
                p.buffer_bytes,
                match p.up {
                    Some(true) => "up",
                    Some(false) => "DOWN",
                    None => "?",
                },
                p.tx_frames.map_or("-".into(), |t| t.to_string()),
                match p.rx_rocev2_frames {
                    Some(n) if n > 0 => format!("  rx RoCEv2 {n}"),
                    _ => String::new(),
                },
            );
        }
    }
    let _ = writeln!(out);
    for h in &s.hosts {
        let _ = writeln!(
            out,
            "host {:<8} {:<32} on {:<10} ns {}",
            h.name,
            h.addresses.join(" "),
            h.attached_to,
            h.netns
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::human_rate;

    #[test]
    fn rates() {
        assert_eq!(human_rate(200_000_000), "200 Mbit/s");
        assert_eq!(human_rate(25_000_000_000), "25 Gbit/s");
        assert_eq!(human_rate(1_500_000), "1.5 Mbit/s");
        assert_eq!(human_rate(999), "999 bit/s");
    }
}

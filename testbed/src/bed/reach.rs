//! Whether a testbed that is up forwards: every host pings every other,
//! waiting as long as its longest path takes.

use std::sync::Mutex;
use std::time::Duration;

use lcmp_netlab::Lab;
use lcmp_topology::Topology;

use super::process::parallel;
use crate::{Error, Result};

/// The longest RTT between switches along any path a switch may choose
/// (twice the largest one-way delay of a route's candidates).
pub fn longest_route_rtt(topo: &Topology) -> Duration {
    let one_way = topo
        .switches()
        .iter()
        .flat_map(|s| topo.routes(s.id))
        .flat_map(|r| r.candidates.into_iter().map(|c| c.delay_ns))
        .max()
        .unwrap_or(0);
    Duration::from_nanos(one_way.saturating_mul(2))
}

/// Checks that every host reaches every other over each address family
/// both have (one ping, retried: the first packets of a path may wait for
/// a switch to learn a neighbour), and names the pairs that do not. Each
/// ping waits up to `wait` for its reply (rotor networks hold a packet
/// until its circuit comes up).
pub fn check_reachability(tb: &Lab, wait: Duration) -> Result<()> {
    let mut pairs = Vec::new();
    for (i, a) in tb.hosts.iter().enumerate() {
        for (j, b) in tb.hosts.iter().enumerate() {
            if i == j {
                continue;
            }
            let dsts = [
                b.ipv4().map(std::net::IpAddr::V4),
                b.ipv6().map(std::net::IpAddr::V6),
            ];
            for dst in dsts.into_iter().flatten() {
                let src_has_family = if dst.is_ipv4() {
                    a.ipv4().is_some()
                } else {
                    a.ipv6().is_some()
                };
                if src_has_family {
                    pairs.push((i, j, dst));
                }
            }
        }
    }
    let failed: Mutex<Vec<String>> = Mutex::new(Vec::new());
    // Pings over long (dilated or rotor) paths mostly wait: more at once.
    let width = if wait > Duration::from_secs(3) {
        128
    } else {
        16
    };
    parallel(&pairs, width, |&(i, j, dst)| {
        let a = &tb.hosts[i];
        let d = dst.to_string();
        let w = format!("{:.3}", wait.as_secs_f64());
        let ok = (0..3).any(|_| {
            a.netns
                .exec_output(
                    &["ping", "-c", "1", "-W", &w, "-q", &d],
                    wait + Duration::from_secs(7),
                )
                .is_ok_and(|o| o.status.success())
        });
        if !ok {
            failed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(format!("{} -> {} ({d})", a.name, tb.hosts[j].name));
        }
        Ok(())
    })?;
    let failed = failed.into_inner().unwrap_or_else(|e| e.into_inner());
    if failed.is_empty() {
        Ok(())
    } else {
        // The first few name the problem; hundreds would bury it.
        const SHOWN: usize = 10;
        let more = match failed.len().saturating_sub(SHOWN) {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        Err(Error::new(format!(
            "{} of {} host pairs cannot reach each other: {}{more}",
            failed.len(),
            pairs.len(),
            failed[..failed.len().min(SHOWN)].join(", ")
        )))
    }
}

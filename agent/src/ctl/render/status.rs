//! `status` and `policy`: one line per switch from its snapshot.

use lcmp_control::snapshot::PolicyState;
use lcmp_control::Snapshot;

use crate::ctl::table::{Table, L, R};
use crate::ctl::units::duration;

/// `status`: one line per switch.
pub fn render_status(snapshots: &[(&str, &Snapshot)]) -> String {
    let mut t = Table::new(&[
        ("SWITCH", L),
        ("PID", R),
        ("UPTIME", R),
        ("POLICY", L),
        ("ECN", L),
        ("RX FRAMES", R),
        ("TX FRAMES", R),
        ("DROPS", R),
        ("FLOWS", R),
        ("TABLE GEN", R),
    ]);
    for (name, s) in snapshots {
        t.row(vec![
            name.to_string(),
            s.pid.to_string(),
            duration(s.uptime_ms),
            policy(&s.policy),
            ecn(&s.policy),
            s.counter("rx_frames").to_string(),
            s.counter("tx_frames").to_string(),
            s.drops_total.to_string(),
            s.flows.cached.to_string(),
            s.table_generation.to_string(),
        ]);
    }
    t.render("")
}

/// `policy`: the policy in force per switch.
pub fn render_policy(snapshots: &[(&str, &Snapshot)]) -> String {
    let mut t = Table::new(&[
        ("SWITCH", L),
        ("POLICY", L),
        ("ALPHA", R),
        ("BETA", R),
        ("ECN (KMIN,KMAX,PMAX)", L),
    ]);
    let opt = |v: Option<u32>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
    for (name, s) in snapshots {
        t.row(vec![
            name.to_string(),
            s.policy.name.clone(),
            opt(s.policy.alpha),
            opt(s.policy.beta),
            ecn(&s.policy),
        ]);
    }
    t.render("")
}

fn policy(p: &PolicyState) -> String {
    match (p.alpha, p.beta) {
        (Some(a), Some(b)) => format!("{} alpha={a} beta={b}", p.name),
        (Some(a), None) => format!("{} alpha={a}", p.name),
        (None, Some(b)) => format!("{} beta={b}", p.name),
        (None, None) => p.name.clone(),
    }
}

/// ECN thresholds in the syntax `set ecn` takes, or as time at link rate
/// (`lcmp-switch lcmp --ecn-link-time`), and ` at dequeue` when marks are
/// decided at departure (`lcmp-switch lcmp --ecn-mark-at dequeue`).
fn ecn(p: &PolicyState) -> String {
    let at = if p.ecn_mark_at.is_enqueue() {
        ""
    } else {
        " at dequeue"
    };
    if let Some(t) = &p.ecn_link_time {
        return format!(
            "link-time {}us,{}us,{},floor {}B{at}",
            t.kmin_ns as f64 / 1e3,
            t.kmax_ns as f64 / 1e3,
            t.pmax,
            t.kmin_floor_bytes
        );
    }
    p.ecn.as_ref().map_or_else(
        || "off".to_string(),
        |e| format!("{},{},{}{at}", e.kmin, e.kmax, e.pmax),
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use lcmp_control::snapshot::{EcnFractions, FlowStats};

    use super::*;

    fn snapshot(name: &str, policy: &str, alpha: Option<u32>) -> Snapshot {
        Snapshot {
            switch: name.into(),
            pid: 4242,
            uptime_ms: 3_723_000,
            policy: PolicyState {
                name: policy.into(),
                alpha,
                beta: alpha.map(|_| 1),
                congestion_weights: None,
                ecn: alpha.map(|_| EcnFractions::default()),
                ecn_link_time: None,
                ecn_mark_at: Default::default(),
            },
            counters: BTreeMap::from([
                ("rx_frames".to_string(), 123_456),
                ("tx_frames".to_string(), 123_000),
            ]),
            drops_total: 7,
            flows: FlowStats {
                cached: 12,
                capacity: 65536,
                ..FlowStats::default()
            },
            table_generation: 3,
            ..Snapshot::default()
        }
    }

    #[test]
    fn status_is_one_aligned_line_per_switch() {
        let (a, b) = (
            snapshot("dc1", "lcmp", Some(3)),
            snapshot("dc12", "ecmp", None),
        );
        assert_eq!(
            render_status(&[("dc1", &a), ("dc12", &b)]),
            "\
SWITCH   PID    UPTIME  POLICY               ECN          RX FRAMES  TX FRAMES  DROPS  FLOWS  TABLE GEN
dc1     4242  1h02m03s  lcmp alpha=3 beta=1  0.2,0.8,0.2     123456     123000      7     12          3
dc12    4242  1h02m03s  ecmp                 off             123456     123000      7     12          3
"
        );
    }

    #[test]
    fn policy_shows_weights_and_ecn() {
        let (a, b) = (
            snapshot("dc1", "lcmp", Some(3)),
            snapshot("dc2", "wcmp", None),
        );
        assert_eq!(
            render_policy(&[("dc1", &a), ("dc2", &b)]),
            "\
SWITCH  POLICY  ALPHA  BETA  ECN (KMIN,KMAX,PMAX)
dc1     lcmp        3     1  0.2,0.8,0.2
dc2     wcmp        -     -  off
"
        );
    }
}

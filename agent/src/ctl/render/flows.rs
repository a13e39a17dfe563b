//! `flows`: cached flows by port, decisions by destination, recent
//! decisions.

use std::fmt::Write as _;
use std::net::IpAddr;

use lcmp_control::proto::{FlowsReply, RecentDecision};

use crate::ctl::table::{Table, L, R};
use crate::ctl::units::age;

/// `flows`: cached flows by port, decisions by destination, recent
/// decisions.
pub fn render_flows(name: &str, r: &FlowsReply) -> String {
    let mut out = format!(
        "switch {name}: {} flows cached (capacity {})\n",
        r.cached, r.capacity
    );
    out.push_str("  cached flows by port:\n");
    let mut t = Table::new(&[("PORT", R), ("IFNAME", L), ("FLOWS", R)]);
    for p in &r.by_port {
        t.row(vec![
            p.port.to_string(),
            p.ifname.clone(),
            p.flows.to_string(),
        ]);
    }
    out.push_str(&t.render_or_none("    "));
    out.push_str("  decisions by destination:\n");
    let mut t = Table::new(&[("PREFIX", L), ("PORT", R), ("IFNAME", L), ("DECISIONS", R)]);
    for d in &r.by_destination {
        t.row(vec![
            d.prefix.clone(),
            d.port.to_string(),
            d.ifname.clone(),
            d.count.to_string(),
        ]);
    }
    out.push_str(&t.render_or_none("    "));
    let _ = writeln!(
        out,
        "  {} most recent decisions, newest first:",
        r.recent.len()
    );
    let mut t = Table::new(&[
        ("AGE", R),
        ("PROTO", L),
        ("SOURCE", L),
        ("DESTINATION", L),
        ("PORT", R),
        ("IFNAME", L),
        ("REASON", L),
    ]);
    for d in &r.recent {
        t.row(vec![
            age(d.age_ms),
            proto(d.proto),
            endpoint(d.src, d.sport, d),
            endpoint(d.dst, d.dport, d),
            d.port.to_string(),
            d.ifname.clone(),
            d.reason.clone(),
        ]);
    }
    out.push_str(&t.render_or_none("    "));
    out
}

fn proto(p: u8) -> String {
    match p {
        1 => "icmp".into(),
        6 => "tcp".into(),
        17 => "udp".into(),
        58 => "icmpv6".into(),
        132 => "sctp".into(),
        other => other.to_string(),
    }
}

/// An address with its port when the protocol has ports (`[v6]:port`).
fn endpoint(addr: IpAddr, port: u16, d: &RecentDecision) -> String {
    let has_ports = matches!(d.proto, 6 | 17 | 132) || d.sport != 0 || d.dport != 0;
    match (has_ports, addr) {
        (false, a) => a.to_string(),
        (true, IpAddr::V4(a)) => format!("{a}:{port}"),
        (true, IpAddr::V6(a)) => format!("[{a}]:{port}"),
    }
}

#[cfg(test)]
mod tests {
    use lcmp_control::proto::PortFlows;
    use lcmp_control::snapshot::DecisionCount;

    use super::*;

    #[test]
    fn flows_list_ports_destinations_and_recent_decisions() {
        let r = FlowsReply {
            switch: "dc1".into(),
            cached: 3,
            capacity: 65536,
            by_port: vec![
                PortFlows {
                    port: 0,
                    ifname: "eth0".into(),
                    flows: 2,
                },
                PortFlows {
                    port: 1,
                    ifname: "eth1".into(),
                    flows: 1,
                },
            ],
            by_destination: vec![DecisionCount {
                prefix: "10.0.2.0/24".into(),
                port: 0,
                ifname: "eth0".into(),
                count: 17,
            }],
            recent: vec![
                RecentDecision {
                    age_ms: 12,
                    src: "10.0.1.2".parse().unwrap(),
                    dst: "10.0.2.2".parse().unwrap(),
                    proto: 6,
                    sport: 40000,
                    dport: 80,
                    port: 0,
                    ifname: "eth0".into(),
                    reason: "new".into(),
                },
                RecentDecision {
                    age_ms: 3_456,
                    src: "fd00::1".parse().unwrap(),
                    dst: "fd00::2".parse().unwrap(),
                    proto: 58,
                    sport: 0,
                    dport: 0,
                    port: 1,
                    ifname: "eth1".into(),
                    reason: "failover".into(),
                },
            ],
        };
        assert_eq!(
            render_flows("dc1", &r),
            "\
switch dc1: 3 flows cached (capacity 65536)
  cached flows by port:
    PORT  IFNAME  FLOWS
       0  eth0        2
       1  eth1        1
  decisions by destination:
    PREFIX       PORT  IFNAME  DECISIONS
    10.0.2.0/24     0  eth0           17
  2 most recent decisions, newest first:
      AGE  PROTO   SOURCE          DESTINATION  PORT  IFNAME  REASON
    12 ms  tcp     10.0.1.2:40000  10.0.2.2:80     0  eth0    new
    3.5 s  icmpv6  fd00::1         fd00::2         1  eth1    failover
"
        );
        let empty = FlowsReply {
            by_port: vec![],
            by_destination: vec![],
            recent: vec![],
            cached: 0,
            ..r
        };
        assert_eq!(
            render_flows("dc1", &empty),
            "\
switch dc1: 0 flows cached (capacity 65536)
  cached flows by port:
    (none)
  decisions by destination:
    (none)
  0 most recent decisions, newest first:
    (none)
"
        );
    }
}

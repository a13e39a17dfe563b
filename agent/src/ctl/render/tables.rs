//! `tables`: the route table, each prefix with its candidates.

use lcmp_control::proto::TablesReply;

use crate::ctl::table::{Table, L};
use crate::ctl::units::rate;

/// `tables`: routes and their candidates.
pub fn render_tables(name: &str, r: &TablesReply) -> String {
    let mut out = format!(
        "switch {name}: table generation {}, {} routes; candidates as port ifname(C_path, capacity)\n",
        r.generation,
        r.routes.len()
    );
    let mut t = Table::new(&[("PREFIX", L), ("", L), ("CANDIDATES", L)]);
    for route in &r.routes {
        let candidates = route
            .candidates
            .iter()
            .map(|c| {
                let ifname = r.ifnames.get(c.port as usize).map_or("?", String::as_str);
                format!(
                    "{} {ifname}({}, {})",
                    c.port,
                    c.c_path,
                    rate(c.capacity_bps)
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        t.row(vec![route.prefix.clone(), "->".into(), candidates]);
    }
    out.push_str(&t.render_or_none("  "));
    out
}

#[cfg(test)]
mod tests {
    use lcmp_control::proto::{CandidateSpec, RouteSpec};

    use super::*;

    #[test]
    fn tables_list_candidates_with_cost_and_capacity() {
        let cand = |port, c_path, capacity_bps| CandidateSpec {
            port,
            c_path,
            capacity_bps,
        };
        let r = TablesReply {
            switch: "dc1".into(),
            generation: 2,
            ifnames: vec!["eth0".into(), "eth1".into()],
            routes: vec![
                RouteSpec {
                    prefix: "10.0.2.0/24".into(),
                    candidates: vec![cand(0, 18, 200_000_000_000), cand(1, 38, 100_000_000)],
                },
                RouteSpec {
                    prefix: "10.8.0.0/16".into(),
                    candidates: vec![cand(7, 60, 25_000_000_000)],
                },
            ],
        };
        assert_eq!(
            render_tables("dc1", &r),
            "\
switch dc1: table generation 2, 2 routes; candidates as port ifname(C_path, capacity)
  PREFIX           CANDIDATES
  10.0.2.0/24  ->  0 eth0(18, 200 Gbit/s), 1 eth1(38, 100 Mbit/s)
  10.8.0.0/16  ->  7 ?(60, 25 Gbit/s)
"
        );
    }
}

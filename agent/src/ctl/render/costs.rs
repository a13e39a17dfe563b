//! `costs`: every candidate's cost parts for one destination.

use std::fmt::Write as _;

use lcmp_control::proto::CostsReply;

use crate::ctl::table::{Table, L, R};
use crate::ctl::units::{bytes, rate, up_down};

/// `costs`: every candidate's cost parts, the kept set marked `*`.
pub fn render_costs(name: &str, r: &CostsReply) -> String {
    let mut out = format!(
        "switch {name}: {} matches route {}; policy {}; cost = {}*C_path + {}*C_cong\n",
        r.dst, r.prefix, r.policy, r.alpha, r.beta
    );
    let mut t = Table::new(&[
        ("", L),
        ("PORT", R),
        ("IFNAME", L),
        ("UP", L),
        ("C_PATH", R),
        ("CAPACITY", R),
        ("Q", R),
        ("T", R),
        ("D", R),
        ("C_CONG", R),
        ("COST", R),
        ("QUEUE", R),
    ]);
    for c in &r.candidates {
        t.row(vec![
            if c.kept { "*" } else { "" }.to_string(),
            c.port.to_string(),
            c.ifname.clone(),
            up_down(c.up),
            c.c_path.to_string(),
            rate(c.capacity_bps),
            c.q.to_string(),
            c.t.to_string(),
            c.d.to_string(),
            c.c_cong.to_string(),
            c.cost.to_string(),
            bytes(c.queue_bytes),
        ]);
    }
    out.push_str(&t.render_or_none("  "));
    // Only LCMP policies hash over the kept set; under the others the
    // switch still reports what LCMP would keep, which must not read as
    // what the switch does.
    if r.policy.starts_with("lcmp") {
        out.push_str("  * kept: the cheapest live candidates new flows hash over\n");
    } else {
        let _ = writeln!(
            out,
            "  * kept by LCMP if it were in force; policy {} chooses otherwise",
            r.policy
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use lcmp_control::proto::CandidateCost;

    use super::*;

    fn costs(policy: &str) -> CostsReply {
        let cand = |port: u32, up: bool, c_path: u8, c_cong: u8, kept: bool| CandidateCost {
            port,
            ifname: format!("eth{port}"),
            up,
            c_path,
            capacity_bps: 100_000_000_000 / (port as u64 + 1),
            q: c_cong / 2,
            t: 1,
            d: 0,
            c_cong,
            cost: 3 * c_path as u64 + c_cong as u64,
            kept,
            queue_bytes: 2_000 * port as u64,
        };
        CostsReply {
            switch: "dc1".into(),
            dst: "10.0.2.0/24".into(),
            prefix: "10.0.2.0/24".into(),
            policy: policy.into(),
            alpha: 3,
            beta: 1,
            candidates: vec![
                cand(0, true, 18, 0, true),
                cand(1, true, 38, 12, true),
                cand(2, false, 104, 0, false),
            ],
        }
    }

    #[test]
    fn costs_mark_the_kept_set() {
        assert_eq!(
            render_costs("dc1", &costs("lcmp")),
            "\
switch dc1: 10.0.2.0/24 matches route 10.0.2.0/24; policy lcmp; cost = 3*C_path + 1*C_cong
     PORT  IFNAME  UP    C_PATH      CAPACITY  Q  T  D  C_CONG  COST  QUEUE
  *     0  eth0    up        18    100 Gbit/s  0  1  0       0    54    0 B
  *     1  eth1    up        38     50 Gbit/s  6  1  0      12   126   2 kB
        2  eth2    down     104  33.33 Gbit/s  0  1  0       0   312   4 kB
  * kept: the cheapest live candidates new flows hash over
"
        );
        // Under ECMP the kept set is LCMP's hypothetical, and says so.
        let text = render_costs("dc1", &costs("ecmp"));
        assert!(
            text.ends_with("  * kept by LCMP if it were in force; policy ecmp chooses otherwise\n"),
            "{text}"
        );
    }
}

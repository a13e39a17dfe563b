//! The path report: each switch's candidates with delay, capacity, C_path,
//! fused cost and the LCMP kept set at empty queues.

use std::fmt::Write;

use lcmp_policy::{LcmpParams, PathCostModel, PortId, PortView, Ranking};

use lcmp_topology::tables::{RouteTable, SwitchTables};

/// Every port up with empty queues: the state the report ranks against.
pub struct IdlePorts;

impl PortView for IdlePorts {
    fn is_up(&self, _: PortId) -> bool {
        true
    }
    fn c_cong(&self, _: PortId) -> u8 {
        0
    }
}

/// The ports LCMP keeps for `route` when every queue is empty, cheapest
/// first.
pub fn kept_at_idle(route: &RouteTable, lcmp: &LcmpParams) -> Vec<PortId> {
    Ranking::new(lcmp, &route.set, &IdlePorts)
        .kept_ports()
        .collect()
}

pub use lcmp_topology::units::human_rate as rate;

/// A delay given in microseconds, in ms to the microsecond as
/// [`lcmp_topology::units::human_delay`] writes it; from the microseconds,
/// so that a cap beyond u64 nanoseconds (up to 2^63 us) is shown exactly.
pub fn delay(us: u64) -> String {
    format!("{} ms", lcmp_topology::units::decimal(us, 1_000, 3))
}

/// The report header: the scales C_path uses and the policy weights.
pub fn header(source: &str, model: &PathCostModel, lcmp: &LcmpParams) -> String {
    let p = model.params();
    format!(
        "topology {source}\n\
         C_path = min(({w_dl}*delayScore + {w_lc}*capScore) >> {s}, 255); \
         delay cap {cap} (power of two), capacity classes of {top}\n\
         LCMP cost = {alpha}*C_path + {beta}*C_cong; kept set at empty queues (C_cong = 0)\n",
        w_dl = p.w_delay,
        w_lc = p.w_capacity,
        s = p.shift,
        cap = delay(model.delay_cap_us()),
        top = rate(model.max_capacity_bps()),
        alpha = lcmp.alpha,
        beta = lcmp.beta,
    )
}

/// One switch's routes as a table.
pub fn switch_report(tables: &SwitchTables, lcmp: &LcmpParams) -> String {
    let mut out = format!("\nswitch {}\n", tables.switch);
    if tables.routes.is_empty() {
        out.push_str("  (no remote prefixes)\n");
    }
    for route in &tables.routes {
        let kept = kept_at_idle(route, lcmp);
        let _ = writeln!(
            out,
            "  {} via {}: {} candidates, LCMP keeps {} (ports {})",
            route.prefix,
            route.dest_switch,
            route.paths.len(),
            kept.len(),
            kept.iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        let _ = writeln!(
            out,
            "    {:>4}  {:<12} {:>4}  {:>12}  {:>12}  {:>6}  {:>5}  kept",
            "port", "next hop", "hops", "delay", "capacity", "C_path", "cost"
        );
        for p in &route.paths {
            let _ = writeln!(
                out,
                "    {:>4}  {:<12} {:>4}  {:>12}  {:>12}  {:>6}  {:>5}  {}",
                p.port,
                p.next_hop,
                p.hops,
                delay(p.delay_us),
                rate(p.capacity_bps),
                p.c_path,
                lcmp.cost_exact(p.c_path, 0),
                if kept.contains(&p.port) { "yes" } else { "-" }
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_read_naturally() {
        assert_eq!(rate(200_000_000_000), "200 Gbit/s");
        assert_eq!(rate(2_500_000_000), "2.5 Gbit/s");
        assert_eq!(rate(500_000_000), "500 Mbit/s");
        assert_eq!(delay(50_000), "50 ms");
        assert_eq!(delay(10), "0.01 ms");
        assert_eq!(delay(0), "0 ms");
        // 2^63 us: past u64 nanoseconds, which showed 18446744073709.552 ms.
        assert_eq!(delay(1 << 63), "9223372036854775.808 ms");
    }
}

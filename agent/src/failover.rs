//! The route tables the agent pushes: computed from the topology exactly
//! as `lcmp-switch` computes its own at start (same path-cost model over
//! the whole topology), with failed links avoided.

use lcmp_control::proto::RouteSpec;
use lcmp_policy::PathCostParams;
use lcmp_topology::tables::{path_cost_model, switch_tables, PathMetric};
use lcmp_topology::{LinkId, Peer, Topology};

/// What C_path describes and how; must match the switches' own options
/// (`--metric`, `--w-delay`, `--w-capacity`), whose defaults these are.
#[derive(Clone, Copy, Debug)]
pub struct TableOptions {
    /// Whole path or local link.
    pub metric: PathMetric,
    /// C_path weights and scales.
    pub path_cost: PathCostParams,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            metric: PathMetric::Path,
            path_cost: PathCostParams::default(),
        }
    }
}

/// The routes of switch `name` with links `down` failed. The C_path scale
/// comes from the full topology, so a failure elsewhere changes no cost,
/// only candidate sets. Routes left without a candidate are omitted (the
/// switch then drops their packets as `no_route`, counted).
pub fn routes_for(
    full: &Topology,
    down: &[LinkId],
    name: &str,
    opts: &TableOptions,
) -> Result<Vec<RouteSpec>, String> {
    let sw = full
        .switch_by_name(name)
        .ok_or_else(|| format!("{}: no switch named {name:?}", full.source()))?;
    let model = path_cost_model(full, opts.path_cost, opts.metric).map_err(|e| e.to_string())?;
    let degraded = full.with_links_down(down);
    let tables = switch_tables(&degraded, sw.id, &model, opts.metric).map_err(|e| e.to_string())?;
    Ok(tables
        .routes
        .into_iter()
        .filter(|r| !r.set.is_empty())
        .map(|r| RouteSpec::new(r.prefix.to_string(), &r.set))
        .collect())
}

/// The switch link behind each port of switch `name` (`None`: a host
/// port).
pub fn port_links(topo: &Topology, name: &str) -> Vec<Option<LinkId>> {
    let Some(sw) = topo.switch_by_name(name) else {
        return Vec::new();
    };
    topo.ports(sw.id)
        .iter()
        .map(|p| match p.peer {
            Peer::Switch { link, .. } => Some(link),
            Peer::Host { .. } => None,
        })
        .collect()
}

/// A link's name for logs: `a-b`.
pub fn link_name(topo: &Topology, link: LinkId) -> String {
    let l = topo.link(link);
    format!("{}-{}", topo.switch(l.a).name, topo.switch(l.b).name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topo() -> Topology {
        Topology::load(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../topologies/2dc-3path.toml"
        )))
        .unwrap()
    }

    #[test]
    fn a_far_link_failure_removes_only_that_candidate_and_keeps_costs() {
        let t = topo();
        let opts = TableOptions::default();
        let all = routes_for(&t, &[], "s1", &opts).unwrap();
        let p1_s2 = t.link_between("p1", "s2").unwrap();
        let some = routes_for(&t, &[p1_s2], "s1", &opts).unwrap();
        let find = |rs: &[RouteSpec]| {
            rs.iter()
                .find(|r| r.prefix == "10.0.2.0/24")
                .unwrap()
                .candidates
                .clone()
        };
        let before = find(&all);
        let after = find(&some);
        assert_eq!(
            before.iter().map(|c| c.port).collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
        assert_eq!(after, before[1..].to_vec(), "costs unchanged, p1 gone");
        assert_eq!(link_name(&t, p1_s2), "p1-s2");
        assert_eq!(port_links(&t, "s1").len(), 4);
        assert!(port_links(&t, "s1")[3].is_none(), "port 3 faces host a");
    }
}

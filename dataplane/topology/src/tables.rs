//! Per-switch route tables: for every remote prefix, the candidate egress
//! ports with their path attributes and C_path.
//!
//! [`switch_tables`] builds one switch's tables from one search from that
//! switch: time and memory in proportion to the network (switches, links,
//! prefixes), not to its square. The C_path scales are network-wide, so that
//! every switch scores paths alike: [`path_cost_model`] takes the ones not
//! given from every switch's candidates, the one step whose time grows
//! with the square of the network (one search per destination switch;
//! memory one search). A caller that builds many switches computes the
//! scales once ([`resolve_scales`]) and passes them on; then each switch
//! costs one search.

use crate::{Peer, SwitchId, Topology};
use ipnet::IpNet;
use lcmp_policy::path_cost::PathCostError;
use lcmp_policy::select::TooManyCandidates;
use lcmp_policy::{Candidate, CandidateSet, PathCostModel, PathCostParams};

/// Which path attributes C_path describes (the switch's and the agent's
/// `--metric path|local`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PathMetric {
    /// The whole path to the destination through the port: total one-way
    /// delay and bottleneck capacity (the paper's per-path scores; default).
    Path,
    /// The local egress link only (what the LCMP artifact does).
    #[value(name = "local")]
    LocalLink,
}

/// One candidate of a route, with what its C_path was computed from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CandidatePath {
    /// Egress port.
    pub port: u8,
    /// Name of the next-hop switch.
    pub next_hop: String,
    /// Switch-to-switch hops to the destination switch.
    pub hops: u32,
    /// One-way delay C_path used, microseconds.
    pub delay_us: u64,
    /// Capacity C_path used, bit/s.
    pub capacity_bps: u64,
    /// The path cost.
    pub c_path: u8,
}

/// The candidates of one destination prefix.
#[derive(Clone, Debug)]
pub struct RouteTable {
    /// Destination prefix.
    pub prefix: IpNet,
    /// Name of the switch delivering the prefix.
    pub dest_switch: String,
    /// Candidates in port order.
    pub paths: Vec<CandidatePath>,
    /// The candidates as the policy engine takes them.
    pub set: CandidateSet,
}

/// The route tables of one switch.
#[derive(Clone, Debug)]
pub struct SwitchTables {
    /// Switch name.
    pub switch: String,
    /// One table per remote prefix.
    pub routes: Vec<RouteTable>,
}

/// Errors building tables.
#[derive(Debug)]
pub enum TableError {
    /// The C_path parameters are unusable.
    PathCost(PathCostError),
    /// A route has more candidates than the engine supports.
    TooManyCandidates {
        /// Switch name.
        switch: String,
        /// Destination prefix.
        prefix: IpNet,
        /// The engine's error.
        error: TooManyCandidates,
    },
}

impl std::fmt::Display for TableError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TableError::PathCost(e) => e.fmt(f),
            TableError::TooManyCandidates {
                switch,
                prefix,
                error,
            } => write!(f, "switch {switch}, route {prefix}: {error}"),
        }
    }
}

impl std::error::Error for TableError {}

fn attributes(c: &crate::PortPaths, metric: PathMetric) -> (u64, u64) {
    match metric {
        PathMetric::Path => (c.delay_ns / 1_000, c.bottleneck_bps),
        PathMetric::LocalLink => (c.local_delay_ns / 1_000, c.local_rate_bps),
    }
}

/// The C_path model of a topology: scales not set in `params` come from
/// every candidate path of every switch (so the delay cap is the next power
/// of two at or above the longest candidate path). With both scales set
/// nothing is searched.
pub fn path_cost_model(
    topo: &Topology,
    params: PathCostParams,
    metric: PathMetric,
) -> Result<PathCostModel, TableError> {
    let extremes = if params.max_delay_us.is_some() && params.max_capacity_bps.is_some() {
        None
    } else {
        longest_and_widest(topo, metric)
    };
    // No candidates (a single switch, or both scales given): C_path is
    // never used or the scales are set, any values will do.
    let extremes = extremes.unwrap_or((1, 1));
    PathCostModel::for_paths(params, [extremes]).map_err(TableError::PathCost)
}

/// `params` with both scales set, to those [`path_cost_model`] derives:
/// the model of the result equals the model of `params` in every score,
/// and building it searches nothing. For a caller that builds the tables
/// of many switches (one model per switch would search from every switch
/// for each).
pub fn resolve_scales(
    topo: &Topology,
    params: PathCostParams,
    metric: PathMetric,
) -> Result<PathCostParams, TableError> {
    let model = path_cost_model(topo, params, metric)?;
    Ok(PathCostParams {
        max_delay_us: Some(model.delay_cap_us()),
        max_capacity_bps: Some(model.max_capacity_bps()),
        ..params
    })
}

/// The largest delay and the largest capacity (as `metric` reads them) of
/// the candidates of every switch; `None` if there are none. Kept as two
/// running maxima: collecting the candidates of every switch took memory
/// in the square of the switch count.
fn longest_and_widest(topo: &Topology, metric: PathMetric) -> Option<(u64, u64)> {
    let mut extremes: Option<(u64, u64)> = None;
    topo.for_each_candidate(|_, _, c| {
        let (d, b) = attributes(c, metric);
        let (d0, b0) = extremes.unwrap_or((0, 0));
        extremes = Some((d0.max(d), b0.max(b)));
    });
    extremes
}

/// The route tables of `switch`: one per remote prefix (candidates on
/// minimum-hop paths), then one host route per address of each host attached
/// to the switch.
pub fn switch_tables(
    topo: &Topology,
    switch: SwitchId,
    model: &PathCostModel,
    metric: PathMetric,
) -> Result<SwitchTables, TableError> {
    let name = |id: SwitchId| topo.switch(id).name.clone();
    let mut routes = Vec::new();
    for r in topo.routes(switch) {
        let paths: Vec<CandidatePath> = r
            .candidates
            .iter()
            .map(|c| {
                let (delay_us, capacity_bps) = attributes(c, metric);
                CandidatePath {
                    port: c.port,
                    next_hop: name(c.next_hop),
                    hops: c.hops,
                    delay_us,
                    capacity_bps,
                    c_path: model.c_path(delay_us, capacity_bps),
                }
            })
            .collect();
        let engine: Vec<Candidate> = paths
            .iter()
            .map(|p| Candidate {
                port: p.port,
                c_path: p.c_path,
                capacity_bps: p.capacity_bps,
            })
            .collect();
        let set = CandidateSet::new(&engine).map_err(|error| TableError::TooManyCandidates {
            switch: name(switch),
            prefix: r.prefix,
            error,
        })?;
        routes.push(RouteTable {
            prefix: r.prefix,
            dest_switch: name(r.dest_switch),
            paths,
            set,
        });
    }
    // Hosts attached to this switch (from its ports, in port order, which is
    // host order): one host route per address, straight out of the host's
    // port.
    let hosts = topo.ports(switch).iter().filter_map(|p| match p.peer {
        Peer::Host { host } => Some(topo.host(host)),
        Peer::Switch { .. } => None,
    });
    for h in hosts {
        for a in &h.addresses {
            let path = CandidatePath {
                port: h.port,
                next_hop: h.name.clone(),
                hops: 0,
                delay_us: h.delay_ns / 1_000,
                capacity_bps: h.rate_bps,
                c_path: 0,
            };
            let set = CandidateSet::new(&[Candidate {
                port: h.port,
                c_path: 0,
                capacity_bps: h.rate_bps,
            }])
            .expect("one candidate fits");
            routes.push(RouteTable {
                prefix: IpNet::from(a.addr()),
                dest_switch: name(switch),
                paths: vec![path],
                set,
            });
        }
    }
    Ok(SwitchTables {
        switch: name(switch),
        routes,
    })
}

//! Per-switch route tables: for every remote prefix, the candidate egress
//! ports with their path attributes and C_path.

use crate::{SwitchId, Topology};
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
/// of two at or above the longest candidate path).
pub fn path_cost_model(
    topo: &Topology,
    params: PathCostParams,
    metric: PathMetric,
) -> Result<PathCostModel, TableError> {
    let mut paths = Vec::new();
    for s in topo.switches() {
        for r in topo.routes(s.id) {
            paths.extend(r.candidates.iter().map(|c| attributes(c, metric)));
        }
    }
    if paths.is_empty() {
        // No remote prefixes (a single switch): C_path is never used, any
        // scale will do.
        paths.push((1, 1));
    }
    PathCostModel::for_paths(params, paths).map_err(TableError::PathCost)
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
    // Hosts attached to this switch: one host route per address, straight
    // out of the host's port.
    for h in topo.hosts().iter().filter(|h| h.switch == switch) {
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

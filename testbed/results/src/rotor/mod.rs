//! Rotor networks' results: the designs and the figures every design of an
//! experiment shares ([`Design`], [`RotorParams`]), the throughput
//! experiment's file, bounds, report and chart ([`experiment`]), the flow
//! experiment's (NDP flows: utilization, FCTs, buffer occupancy;
//! [`flows`]) and the slot-boundary statistics ([`boundary`]). Bringing networks up and
//! measuring them is `lcmp-testbed`'s (its `rotor` module).

pub mod boundary;
pub mod experiment;
pub mod flows;

/// The figures every design of an experiment shares.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RotorParams {
    /// ToRs (n_t).
    pub tors: u32,
    /// Rotors = uplinks per ToR (U).
    pub rotors: u32,
    /// Hosts behind each ToR.
    pub hosts_per_tor: u32,
    /// Slot Delta, ns.
    pub slot_ns: u64,
    /// Reconfiguration Delta_r, ns.
    pub reconfig_ns: u64,
    /// Uplink rate c, bit/s.
    pub rate_bps: u64,
    /// Buffer per ToR B, bytes.
    pub buffer_bytes: u64,
    /// Delay budget L that Mars's degree must meet, ns.
    pub max_delay_ns: u64,
}

impl RotorParams {
    /// What Mars's planner is given.
    pub fn inputs(&self) -> lcmp_topology::rotor::RotorInputs {
        lcmp_topology::rotor::RotorInputs {
            tors: self.tors,
            uplinks: self.rotors,
            slot_ns: self.slot_ns,
            reconfig_ns: self.reconfig_ns,
            rate_bps: self.rate_bps,
            buffer_bytes: self.buffer_bytes,
            max_delay_ns: self.max_delay_ns,
        }
    }
}

/// The built-in network's figures: 8 ToRs x 2 rotors, 1 host per ToR,
/// Delta = 1 ms, Delta_r = 100 us, c = 100 Mbit/s, B = 4 c Delta = 50 kB,
/// L = 8.5 Delta (the ratios of the Mars paper's worked example: B / (c
/// Delta) = 4 and L / Delta = 8.5, which make it choose d = 4).
pub const DEFAULT_PARAMS: RotorParams = RotorParams {
    tors: 8,
    rotors: 2,
    hosts_per_tor: 1,
    slot_ns: 1_000_000,
    reconfig_ns: 100_000,
    rate_bps: 100_000_000,
    buffer_bytes: 50_000,
    max_delay_ns: 8_500_000,
};

/// A schedule design of the throughput experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Design {
    /// RotorNet / Sirius: the complete graph, direct (one-hop) routing.
    Complete,
    /// The complete graph with Valiant load balancing (one hop per phase).
    CompleteValiant,
    /// A static expander: one matching per rotor, shortest-path routing.
    Static,
    /// Mars: de Bruijn of the planner's degree, shift routing with Valiant
    /// load balancing.
    Mars,
    /// Mars's graph with shift routing alone (no Valiant phase): what the
    /// emulated graph carries when the traffic is already spread.
    MarsShift,
}

impl Design {
    /// Every design, in report order.
    pub const ALL: [Design; 5] = [
        Design::Complete,
        Design::CompleteValiant,
        Design::Static,
        Design::Mars,
        Design::MarsShift,
    ];

    /// The name in configs and reports.
    pub fn name(self) -> &'static str {
        match self {
            Design::Complete => "complete",
            Design::CompleteValiant => "complete-valiant",
            Design::Static => "static",
            Design::Mars => "mars",
            Design::MarsShift => "mars-shift",
        }
    }

    /// By name.
    pub fn from_name(s: &str) -> Option<Design> {
        Self::ALL.into_iter().find(|d| d.name() == s)
    }
}

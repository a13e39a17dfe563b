//! The per-packet entry point: flow cache first, a decision only for new
//! flows and for flows whose port died, with counters.

use crate::flow::FlowHash;
use crate::flow_cache::FlowCache;
use crate::select::{CandidateSet, DecisionKind, Selector};
use crate::{PortId, PortView};

/// Counters of the flow router. Monotonic; readers take differences.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RouterStats {
    /// Packets of cached flows whose port is up.
    pub hits: u64,
    /// Packets of flows not in the cache (a decision was made).
    pub misses: u64,
    /// New flows cached.
    pub inserts: u64,
    /// Idle flows evicted (sweep and reclaim).
    pub evictions: u64,
    /// Cached flows moved off a dead port.
    pub failovers: u64,
    /// New flows decided but not cached because their bucket was full of
    /// live flows; their next packet is decided again.
    pub cache_full_decisions: u64,
    /// Decisions where every kept candidate was congested (LCMP fallback).
    pub all_congested_decisions: u64,
    /// Packets with no live candidate port.
    pub no_live_port: u64,
}

/// How a packet's port was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouteOutcome {
    /// The flow's cached port.
    Cached(PortId),
    /// A new flow, decided and cached.
    New(PortId),
    /// A new flow, decided, not cached (bucket full).
    Uncached(PortId),
    /// A cached flow whose port was down, moved to a live one.
    FailedOver(PortId),
    /// No candidate port is up.
    NoLivePort,
    /// The destination has no route (the lookup found none).
    NoRoute,
}

impl RouteOutcome {
    /// The egress port, if any.
    #[inline]
    pub fn port(self) -> Option<PortId> {
        match self {
            RouteOutcome::Cached(p)
            | RouteOutcome::New(p)
            | RouteOutcome::Uncached(p)
            | RouteOutcome::FailedOver(p) => Some(p),
            RouteOutcome::NoLivePort | RouteOutcome::NoRoute => None,
        }
    }
}

/// Flow cache + path selection for one switch (one poll thread).
pub struct FlowRouter {
    cache: FlowCache,
    selector: Selector,
    stats: RouterStats,
    /// Ports some route lost since flows were cached on them: a hit on one
    /// checks that the port is still a candidate of the flow's route.
    revalidate: PortSet,
}

/// A set of ports, one bit each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortSet([u64; 4]);

impl PortSet {
    /// The empty set.
    pub const EMPTY: PortSet = PortSet([0; 4]);

    /// Whether `port` is in the set.
    #[inline]
    pub fn contains(&self, port: PortId) -> bool {
        self.0[port as usize >> 6] >> (port & 63) & 1 != 0
    }

    /// Adds `port`.
    pub fn insert(&mut self, port: PortId) {
        self.0[port as usize >> 6] |= 1 << (port & 63);
    }

    /// Whether no port is in the set.
    pub fn is_empty(&self) -> bool {
        self.0 == [0; 4]
    }

    /// The ports in the set, ascending.
    pub fn iter(&self) -> impl Iterator<Item = PortId> + '_ {
        (0..=255u8).filter(|p| self.contains(*p))
    }
}

impl FlowRouter {
    /// A router deciding with `selector` and caching in `cache`.
    pub fn new(selector: Selector, cache: FlowCache) -> Self {
        FlowRouter {
            cache,
            selector,
            stats: RouterStats::default(),
            revalidate: PortSet::EMPTY,
        }
    }

    /// The egress port of a packet of flow `hash` whose destination has the
    /// candidates `set`. See [`FlowRouter::route_with`].
    #[inline]
    pub fn route<P: PortView>(
        &mut self,
        hash: FlowHash,
        set: &CandidateSet,
        ports: &P,
        now_ns: u64,
    ) -> RouteOutcome {
        self.route_with(hash, ports, now_ns, || Some(set))
    }

    /// The egress port of a packet of flow `hash`. `candidates` looks up
    /// the route of the packet's destination; it is called only when a
    /// decision is needed (a new flow, or a flow whose port died), so
    /// packets of cached flows skip the route lookup entirely.
    ///
    /// A cached flow keeps its port while that port is up and a candidate
    /// of the flow's route: a table update moves only the flows whose port
    /// left their route (ports in [`FlowRouter::set_revalidate`] are
    /// checked against the route at each hit), a policy change none. A
    /// flow on a dead port, or on a port its route lost, is re-decided
    /// among live candidates at once (lazy failover: nothing is rewritten
    /// in bulk).
    #[inline]
    pub fn route_with<'a, P: PortView>(
        &mut self,
        hash: FlowHash,
        ports: &P,
        now_ns: u64,
        candidates: impl FnOnce() -> Option<&'a CandidateSet>,
    ) -> RouteOutcome {
        match self.cache.lookup(hash.0, now_ns) {
            Some((port, _)) if ports.is_up(port) && !self.revalidate.contains(port) => {
                self.stats.hits += 1;
                RouteOutcome::Cached(port)
            }
            Some((port, slot)) => {
                let Some(set) = candidates() else {
                    return RouteOutcome::NoRoute;
                };
                // Still a live candidate of its route (a table change that
                // took the port off other routes): the flow stays.
                if ports.is_up(port) && set.as_slice().iter().any(|c| c.port == port) {
                    self.stats.hits += 1;
                    return RouteOutcome::Cached(port);
                }
                // A fresh pick (remixed hash) so the dead port's flows spread
                // over the live ones instead of following each other.
                match self.decide(set, ports, hash.remix()) {
                    Some(port) => {
                        self.cache.set_port(slot, port, now_ns);
                        self.stats.failovers += 1;
                        RouteOutcome::FailedOver(port)
                    }
                    None => RouteOutcome::NoLivePort,
                }
            }
            None => {
                self.stats.misses += 1;
                let Some(set) = candidates() else {
                    return RouteOutcome::NoRoute;
                };
                let Some(port) = self.decide(set, ports, hash) else {
                    return RouteOutcome::NoLivePort;
                };
                match self.cache.insert(hash.0, port, now_ns) {
                    Ok(_) => {
                        self.stats.inserts += 1;
                        RouteOutcome::New(port)
                    }
                    Err(_) => {
                        self.stats.cache_full_decisions += 1;
                        RouteOutcome::Uncached(port)
                    }
                }
            }
        }
    }

    #[inline]
    fn decide<P: PortView>(
        &mut self,
        set: &CandidateSet,
        ports: &P,
        hash: FlowHash,
    ) -> Option<PortId> {
        let Some(d) = self.selector.decide(set, ports, hash) else {
            self.stats.no_live_port += 1;
            return None;
        };
        if d.kind != DecisionKind::Hashed {
            self.stats.all_congested_decisions += 1;
        }
        Some(d.port)
    }

    /// Bounded idle eviction; call once per poll-loop iteration.
    pub fn evict_step(&mut self, now_ns: u64, max_buckets: usize) -> usize {
        self.cache.evict_step(now_ns, max_buckets)
    }

    /// The counters.
    pub fn stats(&self) -> RouterStats {
        RouterStats {
            evictions: self.cache.evictions(),
            ..self.stats
        }
    }

    /// The cache (sizes, occupancy).
    pub fn cache(&self) -> &FlowCache {
        &self.cache
    }

    /// The selector in use.
    pub fn selector(&self) -> &Selector {
        &self.selector
    }

    /// Sets the ports whose cached flows are checked against their route at
    /// each hit (ports a route table change removed from some route).
    pub fn set_revalidate(&mut self, ports: PortSet) {
        self.revalidate = ports;
    }

    /// Replaces the selector (policy change). Cached flows keep their ports.
    pub fn set_selector(&mut self, selector: Selector) {
        self.selector = selector;
    }
}

//! A switch's configuration from the topology file: its ports (with the
//! link each emulates), its routes (candidates with C_path from the shared
//! control-plane tables) and the policy options.
//!
//! The topology is the network as the user wrote it; an experiment's
//! [`Scaling`] (`--scaling`) applies to what the switch emulates (its
//! ports' rates, delays and buffers) and to its clocks (the congestion
//! sampling interval, ECN link times, flow idle timeout: durations of the
//! network's time), never to the routes: C_path and the kept sets are the
//! unscaled network's, so scaling changes no decision.

use std::collections::HashMap;

use lcmp_policy::{CongestionParams, PathCostParams, Policy};
use lcmp_topology::tables::{path_cost_model, switch_tables, PathMetric};
use lcmp_topology::{Scaling, Topology};
use lcmp_wire::MacAddr;

pub use crate::egress::EcnMarkAt;
use crate::egress::EgressConfig;
use crate::lpm::Route;
use crate::switch::{ecn_bytes, ConfigError, PortConfig, SwitchConfig};

pub use lcmp_control::snapshot::{EcnFractions, EcnLinkTime};

/// Every default of the switch, in one place: the command line and
/// [`Options::default`] both take them from here.
pub mod defaults {
    /// LCMP weight of C_path.
    pub const ALPHA: u32 = 3;
    /// LCMP weight of C_cong.
    pub const BETA: u32 = 1;
    /// Congestion sampling interval, microseconds.
    pub const SAMPLE_INTERVAL_US: u64 = 100;
    /// Flow cache capacity, flows.
    pub const FLOW_CAPACITY: usize = 1 << 16;
    /// Frames received per port per poll.
    pub const BATCH: usize = 64;
    /// Link-state check interval (link events also trigger a check at
    /// once; this is the fallback), milliseconds.
    pub const LINK_CHECK_MS: u64 = 100;
    /// Shortest flow idle timeout, milliseconds (twice the largest path
    /// RTT when that is longer).
    pub const MIN_FLOW_TIMEOUT_MS: u64 = 1_000;
    /// Stats file interval, milliseconds.
    pub const STATS_INTERVAL_MS: u64 = 500;
    /// Flow-log buffer, records.
    pub const FLOW_LOG_CAPACITY: usize = 65536;
    /// Frames in the shared UMEM.
    pub const FRAMES: u32 = 1 << 16;
    /// Entries per AF_XDP TX and completion ring.
    pub const RING_SIZE: u32 = 2048;
    /// Entries per AF_XDP RX and fill ring.
    pub const RX_RING_SIZE: u32 = 4096;
    /// Where the metrics endpoint listens when enabled.
    pub const METRICS_LISTEN: &str = "127.0.0.1:9464";
}

/// Everything besides the topology that shapes a switch.
#[derive(Clone, Debug)]
pub struct Options {
    /// Path-selection policy.
    pub policy: Policy,
    /// C_path weights and scales.
    pub path_cost: PathCostParams,
    /// What C_path describes.
    pub metric: PathMetric,
    /// Congestion estimator parameters.
    pub congestion: CongestionParams,
    /// Emulate each link's rate and delay (the testbed); off for real links.
    pub emulate_links: bool,
    /// ECN marking; `None` disables it (unless `ecn_link_time` is set).
    pub ecn: Option<EcnFractions>,
    /// ECN thresholds as time at each port's link rate, instead of `ecn`.
    pub ecn_link_time: Option<EcnLinkTime>,
    /// Where ECN marks are decided, with either kind of thresholds: on the
    /// queue a frame finds on arrival (the default) or on the queue it
    /// leaves behind at departure (the HPCC/LCMP ns-3 simulator's).
    pub ecn_mark_at: EcnMarkAt,
    /// Drop only beyond this many times a port's buffer (1: at it).
    pub drop_headroom: u64,
    /// INT: a hop record into every RoCEv2 frame with a collect block
    /// leaving a port ([`crate::switch::Switch::set_int`], applied by
    /// whoever builds the switch from these options).
    pub int: bool,
    /// Flow cache capacity.
    pub flow_capacity: usize,
    /// Flow idle timeout, ns. `None`: at least 1 s and at least twice the
    /// largest RTT of the switch's paths.
    pub flow_idle_timeout_ns: Option<u64>,
    /// Flow hash seed. `None`: derived from the switch name, so switches in
    /// series differ.
    pub seed: Option<u64>,
    /// Frames received per port per poll.
    pub batch_size: usize,
    /// Link-state read interval, ns.
    pub link_check_interval_ns: u64,
    /// Interface names by port index, overriding the topology's.
    pub ifnames: Vec<String>,
    /// Peer MACs by interface name.
    pub peer_macs: HashMap<String, MacAddr>,
    /// The experiment's scaling: applied to the emulated links and to the
    /// durations above (given in the network's time), not to the routes.
    pub scaling: Scaling,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            policy: Policy::from_name("lcmp").expect("lcmp exists"),
            path_cost: PathCostParams::default(),
            metric: PathMetric::Path,
            congestion: CongestionParams::default(),
            emulate_links: true,
            ecn: Some(EcnFractions::default()),
            ecn_link_time: None,
            ecn_mark_at: EcnMarkAt::Enqueue,
            drop_headroom: 1,
            int: false,
            flow_capacity: defaults::FLOW_CAPACITY,
            flow_idle_timeout_ns: None,
            seed: None,
            batch_size: defaults::BATCH,
            link_check_interval_ns: defaults::LINK_CHECK_MS * 1_000_000,
            ifnames: Vec::new(),
            peer_macs: HashMap::new(),
            scaling: Scaling::NONE,
        }
    }
}

/// Frames the delay line of a link may hold: its bandwidth-delay product in
/// 256-byte frames (small frames beyond that overflow, counted), at least
/// 1024.
pub fn delay_line_frames(rate_bps: u64, delay_ns: u64) -> usize {
    let bdp_bytes = rate_bps as u128 * delay_ns as u128 / 8_000_000_000;
    ((bdp_bytes / 256) as usize).max(1024)
}

/// The most frames a link can hold in flight: its bandwidth-delay product
/// in the smallest Ethernet frames (60 bytes), at least 1024. The delay
/// line of a switch that keeps only the bytes of what is on its links
/// ([`crate::switch::Switch::park_in_flight`]) needs no frame budget below
/// it: a link of ACKs (62 bytes each) overflowed the 256-byte one.
pub fn delay_line_capacity(rate_bps: u64, delay_ns: u64) -> usize {
    let bdp_bytes = rate_bps as u128 * delay_ns as u128 / 8_000_000_000;
    ((bdp_bytes / 60) as usize).max(1024)
}

/// A stable 64-bit seed from a name (FNV-1a).
pub fn seed_of(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The configuration of switch `name` of `topo`: port `i` is the
/// topology's port `i` of that switch. `port_mac` gives each interface's
/// own MAC address.
pub fn from_topology(
    topo: &Topology,
    name: &str,
    opts: &Options,
    port_mac: impl Fn(&str) -> Result<MacAddr, String>,
) -> Result<SwitchConfig, ConfigError> {
    let sw = topo
        .switch_by_name(name)
        .ok_or_else(|| ConfigError(format!("{}: no switch named {name:?}", topo.source())))?;
    let scaling = opts.scaling;
    scaling.check().map_err(ConfigError)?;
    // What the ports emulate; the routes below come from `topo` itself.
    let emulated = scaling
        .emulated(topo)
        .map_err(|e| ConfigError(e.to_string()))?;
    let tports = emulated.ports(sw.id);
    if !opts.ifnames.is_empty() && opts.ifnames.len() != tports.len() {
        return Err(ConfigError(format!(
            "switch {name} has {} ports in {} but {} interfaces were given",
            tports.len(),
            topo.source(),
            opts.ifnames.len()
        )));
    }
    let ecn_link_time = opts.ecn_link_time.map(|t| EcnLinkTime {
        kmin_ns: scaling.duration_ns(t.kmin_ns),
        kmax_ns: scaling.duration_ns(t.kmax_ns),
        ..t
    });
    let mut ports = Vec::new();
    for (i, p) in tports.iter().enumerate() {
        let ifname = match (opts.ifnames.get(i), &p.ifname) {
            (Some(n), _) => n.clone(),
            (None, Some(n)) => n.clone(),
            (None, None) => {
                return Err(ConfigError(format!(
                    "switch {name} port {i}: no interface name in {} and none given with --port",
                    topo.source()
                )))
            }
        };
        let mac = port_mac(&ifname).map_err(|e| ConfigError(format!("port {ifname}: {e}")))?;
        let (rate_bps, delay_ns) = if opts.emulate_links {
            (p.rate_bps, p.delay_ns)
        } else {
            (0, 0)
        };
        // Thresholds at link rate follow the link even when it is not emulated.
        let ecn = ecn_bytes(
            opts.ecn,
            ecn_link_time,
            opts.ecn_mark_at,
            p.rate_bps,
            p.buffer_bytes,
        );
        ports.push(PortConfig {
            peer_mac: opts.peer_macs.get(&ifname).copied(),
            name: ifname,
            mac,
            egress: EgressConfig {
                rate_bps,
                delay_ns,
                buffer_bytes: p.buffer_bytes,
                ecn,
                max_in_flight: delay_line_frames(rate_bps, delay_ns),
            },
        });
    }
    let model = path_cost_model(topo, opts.path_cost, opts.metric)
        .map_err(|e| ConfigError(e.to_string()))?;
    let tables =
        switch_tables(topo, sw.id, &model, opts.metric).map_err(|e| ConfigError(e.to_string()))?;
    let mut max_rtt_ns = 0;
    for r in topo.routes(sw.id) {
        for c in &r.candidates {
            max_rtt_ns = max_rtt_ns.max(2 * c.delay_ns);
        }
    }
    let routes = tables
        .routes
        .into_iter()
        .map(|r| Route {
            prefix: r.prefix,
            candidates: r.set,
        })
        .collect();
    Ok(SwitchConfig {
        ports,
        routes,
        // A switch the network pins to a policy (a fabric switch that
        // hashes) runs it, with its default parameters.
        policy: sw.policy.map_or(opts.policy, |p| p.policy()),
        congestion: CongestionParams {
            sample_interval_ns: scaling.duration_ns(opts.congestion.sample_interval_ns),
            ..opts.congestion
        },
        flow_capacity: opts.flow_capacity,
        flow_idle_timeout_ns: scaling.duration_ns(
            opts.flow_idle_timeout_ns
                .unwrap_or((2 * max_rtt_ns).max(defaults::MIN_FLOW_TIMEOUT_MS * 1_000_000)),
        ),
        seed: opts.seed.unwrap_or_else(|| seed_of(name)),
        batch_size: opts.batch_size,
        link_check_interval_ns: opts.link_check_interval_ns,
        ecn: opts.ecn,
        ecn_link_time,
        ecn_mark_at: opts.ecn_mark_at,
        drop_headroom: opts.drop_headroom,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topo() -> Topology {
        Topology::load(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../topologies/2dc-3path.toml"
        )))
        .unwrap()
    }

    fn mac(_: &str) -> Result<MacAddr, String> {
        Ok([2, 0, 0, 0, 0, 1])
    }

    #[test]
    fn s1_has_three_candidates_and_a_host_route() {
        let t = topo();
        let n = t.ports(t.switch_by_name("s1").unwrap().id).len();
        let opts = Options {
            ifnames: (0..n).map(|i| format!("p{i}")).collect(),
            ..Default::default()
        };
        let c = from_topology(&t, "s1", &opts, mac).unwrap();
        assert_eq!(c.ports.len(), n);
        let to_b = c
            .routes
            .iter()
            .find(|r| r.prefix.to_string() == "10.0.2.0/24")
            .unwrap();
        assert_eq!(to_b.candidates.len(), 3);
        assert!(c
            .routes
            .iter()
            .any(|r| r.prefix.to_string() == "10.0.1.2/32"));
        // Emulated links carry the topology's rate and delay.
        assert!(c.ports.iter().all(|p| p.egress.rate_bps > 0));
        assert!(c.flow_idle_timeout_ns >= 1_000_000_000);
    }

    /// The paper's 8-DC network with a generated host per DC.
    fn eight_dc() -> Topology {
        Topology::load(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../topologies/8dc.toml"
        )))
        .unwrap()
        .with_generated_hosts(
            1,
            lcmp_topology::HostTemplate {
                rate_bps: None,
                delay_ns: 10_000,
                buffer_bytes: None,
            },
        )
        .unwrap()
    }

    fn config_at(t: &Topology, name: &str, scaling: Scaling) -> SwitchConfig {
        let n = t.ports(t.switch_by_name(name).unwrap().id).len();
        let opts = Options {
            ifnames: (0..n).map(|i| format!("p{i}")).collect(),
            scaling,
            ..Default::default()
        };
        from_topology(t, name, &opts, mac).unwrap()
    }

    /// LCMP's kept set of every route at empty queues, as ports.
    fn kept_at_idle(c: &SwitchConfig) -> Vec<Vec<u8>> {
        struct Idle;
        impl lcmp_policy::PortView for Idle {
            fn is_up(&self, _: u8) -> bool {
                true
            }
            fn c_cong(&self, _: u8) -> u8 {
                0
            }
        }
        let Policy::Lcmp(p) = c.policy else {
            panic!("lcmp expected")
        };
        c.routes
            .iter()
            .map(|r| {
                lcmp_policy::select::Ranking::new(&p, &r.candidates, &Idle)
                    .kept_ports()
                    .collect()
            })
            .collect()
    }

    #[test]
    fn scaling_changes_what_is_emulated_and_no_route_table_or_kept_set() {
        let t = eight_dc();
        let dc1 = t.switch_by_name("dc1").unwrap().id;
        // DC1's ports to DC2..DC7 are its first six (the file's link order).
        let via: Vec<String> = t.ports(dc1)[..6]
            .iter()
            .map(|p| match p.peer {
                lcmp_topology::Peer::Switch { switch, .. } => t.switch(switch).name.clone(),
                _ => panic!("a link first"),
            })
            .collect();
        assert_eq!(via, ["dc2", "dc3", "dc4", "dc5", "dc6", "dc7"]);
        let base: Vec<SwitchConfig> = t
            .switches()
            .iter()
            .map(|s| config_at(&t, &s.name, Scaling::NONE))
            .collect();
        // DC1 -> DC8 at empty queues keeps DC2, DC4, DC6 (ports 0, 2, 4;
        // agent/tests/eight_dc.rs works the costs out by hand).
        let to_dc8 = base[0]
            .routes
            .iter()
            .position(|r| r.prefix.to_string() == "10.8.0.0/16")
            .unwrap();
        assert_eq!(kept_at_idle(&base[0])[to_dc8], [0, 2, 4]);
        for (rate, time) in [
            (1.0, 10.0),
            (1.0, 100.0),
            (1000.0, 1.0),
            (1000.0, 10.0),
            (1000.0, 100.0),
        ] {
            let scaling = Scaling {
                rate,
                buffer: rate,
                size: 1.0,
                time,
            };
            for (s, b) in t.switches().iter().zip(&base) {
                let c = config_at(&t, &s.name, scaling);
                assert_eq!(c.routes, b.routes, "{} at {scaling}", s.name);
                assert_eq!(kept_at_idle(&c), kept_at_idle(b), "{} at {scaling}", s.name);
            }
            // What DC1 emulates on its link to DC2 (200 Gbit/s, 25 ms,
            // 128 MiB) and its clocks are what scale.
            let c = config_at(&t, "dc1", scaling);
            let e = c.ports[0].egress;
            assert_eq!(e.rate_bps as f64, 200e9 / (rate * time), "{scaling}");
            assert_eq!(e.delay_ns as f64, 25e6 * time, "{scaling}");
            assert_eq!(e.buffer_bytes, (134_217_728.0 / rate) as u64, "{scaling}");
            // 100 us of sampling in the network's time.
            assert_eq!(c.congestion.sample_interval_ns as f64, 100e3 * time);
            // Twice DC1's longest RTT in the network's time: via DC3 two
            // hops of 250 ms, an RTT of 1 s, so 2 s.
            assert_eq!(c.flow_idle_timeout_ns as f64, 2e9 * time, "{scaling}");
        }
        // Feeding the switch the emulated network instead, as testbeds did
        // before scaling had one owner, moves the route costs under
        // dilation: the failure this design rules out.
        let dilated = Scaling {
            time: 10.0,
            ..Scaling::rates(1000.0)
        }
        .emulated(&t)
        .unwrap();
        let wrong = config_at(&dilated, "dc1", Scaling::NONE);
        assert_ne!(wrong.routes, base[0].routes);
    }

    #[test]
    fn a_switch_pinned_to_a_policy_runs_it_whatever_the_options_say() {
        // The imported fabric: leaves and spines hash, DCI switches run
        // the experiment's policy.
        let t = Topology::load(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../topologies/8dc-fabric.toml"
        )))
        .unwrap();
        let config = |name: &str| {
            let n = t.ports(t.switch_by_name(name).unwrap().id).len();
            let opts = Options {
                ifnames: (0..n).map(|i| format!("p{i}")).collect(),
                policy: Policy::from_name("lcmp").unwrap(),
                ..Default::default()
            };
            from_topology(&t, name, &opts, mac).unwrap()
        };
        assert_eq!(config("dc1leaf1").policy, Policy::Ecmp);
        assert_eq!(config("dc1spine2").policy, Policy::Ecmp);
        assert_eq!(config("dc1").policy.name(), "lcmp");
    }

    #[test]
    fn wrong_port_count_is_an_error() {
        let opts = Options {
            ifnames: vec!["x".into()],
            ..Default::default()
        };
        let e = from_topology(&topo(), "s1", &opts, mac).unwrap_err();
        assert!(e.0.contains("interfaces were given"), "{e}");
        let e = from_topology(&topo(), "nope", &Options::default(), mac).unwrap_err();
        assert!(e.0.contains("no switch named"), "{e}");
    }

    #[test]
    fn ecn_at_link_time_follows_each_ports_rate() {
        let t = topo();
        let n = t.ports(t.switch_by_name("s1").unwrap().id).len();
        let opts = Options {
            ifnames: (0..n).map(|i| format!("p{i}")).collect(),
            ecn_link_time: Some(EcnLinkTime::parse("32,128,0.2,2000").unwrap()),
            ..Default::default()
        };
        let c = from_topology(&t, "s1", &opts, mac).unwrap();
        let thresholds: Vec<(u64, u64)> = c.ports[..3]
            .iter()
            .map(|p| {
                let e = p.egress.ecn.unwrap();
                (e.kmin_bytes, e.kmax_bytes)
            })
            .collect();
        // Ports 0..2 at 1 Gbit/s, 500 and 200 Mbit/s: 32 us is 4000, 2000
        // and 800 bytes (floored to 2000), 128 us 16000, 8000 and 3200
        // (floored to 8000).
        assert_eq!(thresholds, vec![(4000, 16000), (2000, 8000), (2000, 8000)]);
        assert!(c
            .ports
            .iter()
            .all(|p| p.egress.ecn.unwrap().mark_at == EcnMarkAt::Enqueue));
    }

    #[test]
    fn ecn_mark_at_dequeue_applies_to_every_kind_of_threshold() {
        let t = topo();
        let n = t.ports(t.switch_by_name("s1").unwrap().id).len();
        for link_time in [None, Some(EcnLinkTime::parse("32,128,0.2,2000").unwrap())] {
            let opts = Options {
                ifnames: (0..n).map(|i| format!("p{i}")).collect(),
                ecn_link_time: link_time,
                ecn_mark_at: EcnMarkAt::Dequeue,
                ..Default::default()
            };
            let c = from_topology(&t, "s1", &opts, mac).unwrap();
            assert_eq!(c.ecn_mark_at, EcnMarkAt::Dequeue);
            assert!(c
                .ports
                .iter()
                .all(|p| p.egress.ecn.unwrap().mark_at == EcnMarkAt::Dequeue));
        }
    }

    #[test]
    fn seeds_differ_between_switches() {
        assert_ne!(seed_of("s1"), seed_of("s2"));
    }
}

//! The test switch shared by the pipeline and daemon tests: like s1 of the
//! 2dc-3path testbed, over in-memory ports.
#![allow(dead_code)]

use lcmp_policy::{Candidate, CandidateSet, CongestionParams, LcmpParams, Policy};
use lcmp_switch::egress::EgressConfig;
use lcmp_switch::lpm::Route;
use lcmp_switch::mem_io::MemIo;
use lcmp_switch::switch::{PortConfig, Switch, SwitchConfig};
use lcmp_wire::testing::FrameBuilder;

pub const MS: u64 = 1_000_000;
pub const US: u64 = 1_000;
pub const HOST_A: [u8; 6] = [2, 0, 0, 0, 0, 0xa];

pub fn mac(port: u8) -> [u8; 6] {
    [2, 0, 0, 0, 1, port]
}

pub fn peer(port: u8) -> [u8; 6] {
    [2, 0, 0, 0, 2, port]
}

/// A switch like s1 of the 2dc-3path testbed: port 0 faces host A
/// (10.0.1.2), ports 1-3 are three paths towards 10.0.2.0/24 with C_path
/// 10, 40, 80 (ascending cost).
pub struct Bed {
    pub sw: Switch<MemIo>,
}

pub fn unshaped() -> EgressConfig {
    EgressConfig {
        rate_bps: 0,
        delay_ns: 0,
        buffer_bytes: 1 << 20,
        ecn: None,
        max_in_flight: 4096,
    }
}

pub fn bed(policy: Policy, egress: [EgressConfig; 4]) -> Bed {
    bed_with_cache(policy, egress, 4096)
}

pub fn bed_with_cache(policy: Policy, egress: [EgressConfig; 4], flow_capacity: usize) -> Bed {
    bed_with(policy, egress, flow_capacity, 1)
}

/// A bed whose ports drop only beyond `drop_headroom` times their buffers.
pub fn bed_with(
    policy: Policy,
    egress: [EgressConfig; 4],
    flow_capacity: usize,
    drop_headroom: u64,
) -> Bed {
    let ports = egress
        .into_iter()
        .enumerate()
        .map(|(i, e)| PortConfig {
            name: format!("p{i}"),
            mac: mac(i as u8),
            peer_mac: Some(if i == 0 { HOST_A } else { peer(i as u8) }),
            egress: e,
        })
        .collect();
    let paths: Vec<Candidate> = [(1, 10), (2, 40), (3, 80)]
        .iter()
        .map(|&(port, c_path)| Candidate {
            port,
            c_path,
            capacity_bps: 1_000_000_000,
        })
        .collect();
    let routes = vec![
        Route {
            prefix: "10.0.2.0/24".parse().unwrap(),
            candidates: CandidateSet::new(&paths).unwrap(),
        },
        Route {
            prefix: "fd00:2::/64".parse().unwrap(),
            candidates: CandidateSet::new(&paths).unwrap(),
        },
        Route {
            prefix: "10.0.1.2/32".parse().unwrap(),
            candidates: CandidateSet::new(&[Candidate {
                port: 0,
                c_path: 0,
                capacity_bps: 10_000_000_000,
            }])
            .unwrap(),
        },
    ];
    let config = SwitchConfig {
        ports,
        routes,
        policy,
        congestion: CongestionParams::default(),
        flow_capacity,
        flow_idle_timeout_ns: 1_000 * MS,
        seed: 7,
        batch_size: 64,
        link_check_interval_ns: 100 * US,
        ecn: None,
        ecn_link_time: None,
        ecn_mark_at: Default::default(),
        drop_headroom,
    };
    Bed {
        sw: Switch::new(config, MemIo::new(4, 8192)).unwrap(),
    }
}

pub fn lcmp_keep_two_of_three() -> Policy {
    Policy::Lcmp(LcmpParams {
        keep_all_up_to: 2,
        keep_num: 2,
        keep_den: 3,
        ..Default::default()
    })
}

pub fn udp_a_to_b(sport: u16, seq: u16) -> Vec<u8> {
    FrameBuilder::ipv4([10, 0, 1, 2], [10, 0, 2, 2])
        .macs(HOST_A, mac(0))
        .ttl(64)
        .udp(sport, 5001)
        .payload(&seq.to_be_bytes())
        .build()
}

/// Sends frames into port 0, polls, returns (port, frame) of everything
/// sent out.
pub fn run(b: &mut Bed, frames: &[Vec<u8>], now: u64) -> Vec<(usize, Vec<u8>)> {
    for f in frames {
        assert!(b.sw.io().inject(0, f));
        // Keep the receive batches small enough for the ring.
    }
    let mut out = Vec::new();
    for _ in 0..(frames.len() / 64 + 2) {
        b.sw.poll(now);
    }
    for p in 0..4 {
        for f in b.sw.io().take_sent(p) {
            out.push((p, f));
        }
    }
    out
}

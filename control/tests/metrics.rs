//! The metrics exposition, the dashboard that queries it, and the HTTP
//! server that serves it.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lcmp_control::metrics::{self, Format, SwitchScrape};
use lcmp_control::proto::{CandidateCost, CostsReply};
use lcmp_control::rotor::{Lateness, NextHopQueue, RotorPort, RotorStatus};
use lcmp_control::snapshot::{
    Congestion, ControlStats, DecisionCount, EcnFractions, EcnThresholds, Emulation, EmulationMode,
    FlowLogStats, FlowStats, MemoryLinkStats, PolicyState, PortSnapshot, Snapshot, XskQueueStats,
    XskStats,
};

/// The build's series: this crate's version (the exporter's).
const BUILD_INFO: &str = concat!(
    "lcmp_build_info{version=\"",
    env!("CARGO_PKG_VERSION"),
    "\"} 1"
);

fn map(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

fn snapshot_s1() -> Snapshot {
    Snapshot {
        version: 2,
        switch: "s1".into(),
        pid: 4242,
        unix_time_ms: 1_700_000_000_000,
        uptime_ms: 12_500,
        policy: PolicyState {
            name: "lcmp".into(),
            alpha: Some(3),
            beta: Some(1),
            congestion_weights: Some([2, 1, 1]),
            ecn: Some(EcnFractions::default()),
            ecn_link_time: None,
            ecn_mark_at: Default::default(),
        },
        counters: map(&[
            ("rx_frames", 100),
            ("tx_frames", 90),
            ("departed_bytes", 69000),
            ("polls", 5000),
            ("polls_with_rx", 1200),
            ("frobs", 7),
        ]),
        drops: map(&[("queue_full", 2), ("no_route", 1)]),
        drops_total: 3,
        flows: FlowStats {
            cached: 17,
            capacity: 65536,
            hits: 900,
            misses: 20,
            inserts: 19,
            evictions: 3,
            failovers: 2,
            cache_full_decisions: 1,
            all_congested_decisions: 4,
            no_live_port: 0,
        },
        ports: vec![
            PortSnapshot {
                index: 0,
                name: "s1p0".into(),
                up: true,
                link_up: true,
                admin_up: true,
                peer_mac: Some("02:00:00:00:00:01".into()),
                counters: map(&[
                    ("rx_frames", 58),
                    ("rx_bytes", 87000),
                    ("tx_frames", 42),
                    ("tx_bytes", 63000),
                    // 42 frames sent plus the 4 in the delay line, 1500 B
                    // each: 46 departed, 46 * 1500 = 69000 B.
                    ("departed_frames", 46),
                    ("departed_bytes", 69000),
                    ("enqueued_frames", 45),
                    ("ce_marked", 3),
                    ("mystery", 11),
                ]),
                drops: map(&[("queue_full", 2), ("no_route", 1), ("truncated", 0)]),
                queue_bytes: 3000,
                queue_frames: 2,
                in_flight: 4,
                congestion: Congestion {
                    q: 2,
                    t: 1,
                    d: 0,
                    c_cong: 3,
                },
                emulation: Emulation {
                    mode: EmulationMode::Switch,
                    rate_bps: 1_000_000_000,
                    delay_ns: 2_500_000,
                    buffer_bytes: 150_000,
                },
                ecn: Some(EcnThresholds {
                    kmin_bytes: 30_000,
                    kmax_bytes: 120_000,
                    pmax: 0.2,
                }),
                kind: "af_xdp".into(),
                xsk: Some(XskStats {
                    xdp_mode: "drv".into(),
                    bind_mode: "copy".into(),
                    rx_dropped: 1,
                    rx_ring_full: 2,
                    fill_ring_empty: 3,
                    tx_invalid: 0,
                    xdp: map(&[("redirected", 100), ("passed", 5)]),
                    // Two RX queues bound (0 and 3); the first transmits.
                    queues: vec![
                        XskQueueStats {
                            queue: 0,
                            rx_frames: 40,
                            tx_frames: 42,
                            rx_dropped: 1,
                            ..Default::default()
                        },
                        XskQueueStats {
                            queue: 3,
                            rx_frames: 18,
                            ..Default::default()
                        },
                    ],
                }),
                memory_link: None,
            },
            PortSnapshot {
                index: 1,
                name: "s1p1".into(),
                up: false,
                link_up: true,
                admin_up: false,
                peer_mac: None,
                counters: map(&[("rx_frames", 42), ("tx_frames", 48)]),
                drops: map(&[("port_down", 6)]),
                emulation: Emulation {
                    mode: EmulationMode::None,
                    rate_bps: 0,
                    delay_ns: 0,
                    buffer_bytes: 64_000,
                },
                kind: "memory".into(),
                memory_link: Some(MemoryLinkStats {
                    peer: "p1/s1".into(),
                    transfer: "descriptor".into(),
                    carrier: true,
                    frames_sent: 48,
                    bytes_sent: 72_000,
                    frames_received: 42,
                    bytes_received: 2_520,
                    peer_buffers_empty: 7,
                }),
                ..PortSnapshot::default()
            },
        ],
        decisions: vec![
            DecisionCount {
                prefix: "10.0.2.0/24".into(),
                port: 0,
                ifname: "s1p0".into(),
                count: 12,
            },
            DecisionCount {
                prefix: "10.0.3.0/24".into(),
                port: 0,
                ifname: "s1p0".into(),
                count: 8,
            },
            DecisionCount {
                prefix: "10.0.2.0/24".into(),
                port: 1,
                ifname: "s1p1".into(),
                count: 5,
            },
        ],
        flow_log: Some(FlowLogStats {
            written: 10,
            dropped: 1,
            write_failed: 0,
            buffered: 2,
            capacity: 1024,
        }),
        control: ControlStats {
            requests: 7,
            errors: 1,
            refused: 0,
        },
        table_generation: 3,
    }
}

fn candidate(port: u32, c_path: u8, c_cong: u8, cost: u64, kept: bool, up: bool) -> CandidateCost {
    CandidateCost {
        port,
        ifname: format!("s1p{port}"),
        up,
        c_path,
        capacity_bps: 1_000_000_000,
        q: 0,
        t: 0,
        d: 0,
        c_cong,
        cost,
        kept,
        queue_bytes: 0,
    }
}

fn costs(dst: &str, cost0: u64) -> CostsReply {
    CostsReply {
        switch: "s1".into(),
        dst: dst.into(),
        prefix: "10.0.2.0/24".into(),
        policy: "lcmp".into(),
        alpha: 3,
        beta: 1,
        candidates: vec![
            candidate(0, 2, 3, cost0, true, true),
            candidate(1, 4, 0, 12, false, false),
        ],
    }
}

/// s1 up with everything, s2 down, and duplicates the exposition must not
/// repeat: s1 scraped twice, and two destinations of one route.
fn scrapes() -> Vec<SwitchScrape> {
    vec![
        SwitchScrape::up(
            "s1",
            snapshot_s1(),
            vec![costs("10.0.2.2", 9), costs("10.0.2.9", 99)],
        )
        .with_duration(Duration::from_millis(250)),
        SwitchScrape::down("s2"),
        SwitchScrape::up("s1", Snapshot::default(), vec![]),
        SwitchScrape::rotor("tor1", rotor_tor1()),
    ]
}

/// ToR 1 of 4 with two uplinks, in slot 12.
fn rotor_tor1() -> RotorStatus {
    RotorStatus {
        name: "tor1".into(),
        role: "tor".into(),
        index: 1,
        graph: "complete".into(),
        routing: "direct".into(),
        tors: 4,
        rotors: 2,
        slot_ns: 1_000_000,
        reconfig_ns: 100_000,
        epoch_unix_ns: Some(1_700_000_000_000_000_000),
        epoch_source: Some("agent".into()),
        slot: 12,
        slots_seen: 9,
        lateness: Lateness {
            samples: 9,
            p50_ns: 2_000,
            p99_ns: 31_000,
            max_ns: 40_000,
            last_ns: 1_000,
        },
        circuits: vec![Some(2), None, None],
        ports: ["u0", "u1", "h0"]
            .iter()
            .map(|n| RotorPort {
                name: n.to_string(),
                kind: if n.starts_with('u') { "uplink" } else { "host" }.into(),
                rx_frames: 5,
                rx_bytes: 5000,
                tx_frames: 4,
                tx_bytes: 4000,
                link_up: true,
            })
            .collect(),
        drops: map(&[("queue_full", 3), ("no_epoch", 0), ("data_queue_full", 1)]),
        // rx_frames is the sum of the ports' (exported per port); late_ns
        // is 4.5 us over 3 late frames; frobs is a counter with no family.
        // With NDP trimming (the keys and their meaning are those of
        // TorSwitch::trim_counters): 12 frames into the next-hop queues, 4
        // of them at high priority, 2 of those trimmed there; 9 into the
        // host downlinks, 1 trimmed there; the downlinks handed 8 to the
        // host ports (sent_downlink, the same frames as delivered), 1 from
        // high priority, 2 late by 3 us in all.
        counters: map(&[
            ("delivered", 8),
            ("late_frames", 3),
            ("late_ns", 4_500),
            ("rx_frames", 20),
            ("frobs", 1),
            ("queued", 12),
            ("queued_priority", 4),
            ("sent_uplink", 10),
            ("sent_priority_uplink", 3),
            ("trimmed", 2),
            ("trimmed_downlink", 1),
            ("queued_downlink", 9),
            ("sent_downlink", 8),
            ("sent_priority_downlink", 1),
            ("late_frames_downlink", 2),
            ("late_ns_downlink", 3_000),
        ]),
        queues: vec![NextHopQueue {
            next_hop: 2,
            frames: 2,
            bytes: 3000,
        }],
        buffer_bytes: 50_000,
        queued_bytes: 3000,
        ..Default::default()
    }
}

#[test]
fn a_rotor_network_switch_exports_its_slot_lateness_circuits_and_queues() {
    let text = metrics::render(&scrapes());
    let have = lines(&text);
    for line in [
        "lcmp_switch_up{switch=\"tor1\"} 1",
        "lcmp_rotor_info{switch=\"tor1\",role=\"tor\",index=\"1\",graph=\"complete\",routing=\"direct\"} 1",
        "lcmp_rotor_slot{switch=\"tor1\"} 12",
        "lcmp_rotor_epoch_timestamp_seconds{switch=\"tor1\"} 1700000000.0",
        "lcmp_rotor_slot_length_seconds{switch=\"tor1\"} 0.001",
        "lcmp_rotor_slot_reconfiguration_seconds{switch=\"tor1\"} 0.0001",
        // p50 2,000 ns, p99 31,000 ns, max 40,000 ns over 9 slots.
        "# TYPE lcmp_rotor_slot_lateness_seconds summary",
        "lcmp_rotor_slot_lateness_seconds{switch=\"tor1\",quantile=\"0.5\"} 0.000002",
        "lcmp_rotor_slot_lateness_seconds{switch=\"tor1\",quantile=\"0.99\"} 0.000031",
        "lcmp_rotor_slot_lateness_seconds{switch=\"tor1\",quantile=\"1\"} 0.00004",
        "lcmp_rotor_slot_lateness_seconds_count{switch=\"tor1\"} 9",
        "lcmp_rotor_circuit_tor{switch=\"tor1\",port=\"u0\"} 2",
        "lcmp_rotor_queue_bytes{switch=\"tor1\",next_hop=\"2\"} 3000",
        "lcmp_rotor_queue_packets{switch=\"tor1\",next_hop=\"2\"} 2",
        "lcmp_rotor_buffer_bytes{switch=\"tor1\"} 50000",
        "lcmp_rotor_dropped_packets_total{switch=\"tor1\",reason=\"queue_full\"} 3",
        "lcmp_rotor_dropped_packets_total{switch=\"tor1\",reason=\"data_queue_full\"} 1",
        "lcmp_rotor_delivered_packets_total{switch=\"tor1\"} 8",
        "lcmp_rotor_queued_packets_total{switch=\"tor1\",link=\"uplink\"} 12",
        "lcmp_rotor_queued_packets_total{switch=\"tor1\",link=\"downlink\"} 9",
        "lcmp_rotor_priority_queued_packets_total{switch=\"tor1\"} 4",
        "lcmp_rotor_uplink_sent_packets_total{switch=\"tor1\"} 10",
        "lcmp_rotor_priority_sent_packets_total{switch=\"tor1\",link=\"uplink\"} 3",
        "lcmp_rotor_priority_sent_packets_total{switch=\"tor1\",link=\"downlink\"} 1",
        "lcmp_rotor_late_packets_total{switch=\"tor1\",link=\"uplink\"} 3",
        "lcmp_rotor_late_packets_total{switch=\"tor1\",link=\"downlink\"} 2",
        // 4,500 ns and 3,000 ns.
        "lcmp_rotor_late_seconds_total{switch=\"tor1\",link=\"uplink\"} 0.0000045",
        "lcmp_rotor_late_seconds_total{switch=\"tor1\",link=\"downlink\"} 0.000003",
        "lcmp_rotor_trimmed_packets_total{switch=\"tor1\",link=\"uplink\"} 2",
        "lcmp_rotor_trimmed_packets_total{switch=\"tor1\",link=\"downlink\"} 1",
        "lcmp_rotor_other_events_total{switch=\"tor1\",counter=\"frobs\"} 1",
        "# UNIT lcmp_rotor_late_seconds seconds",
        "# UNIT lcmp_rotor_epoch_timestamp_seconds seconds",
        "lcmp_port_tx_bytes_total{switch=\"tor1\",port=\"h0\"} 4000",
    ] {
        assert!(have.contains(line), "missing {line} in\n{text}");
    }
    // No circuit on u1 now: no sample rather than a made-up value.
    assert!(!text.contains("lcmp_rotor_circuit_tor{switch=\"tor1\",port=\"u1\"}"));
    // Counters with a family, the ports' sums, and the downlinks' sends
    // (delivered) are not repeated by name: frobs is the one left over.
    let other: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("lcmp_rotor_other_events_total{"))
        .collect();
    assert_eq!(
        other,
        ["lcmp_rotor_other_events_total{switch=\"tor1\",counter=\"frobs\"} 1"]
    );
    // The lateness quantiles are the summary's, not a label of their own.
    assert!(!text.contains("stat="), "{text}");
}

fn lines(text: &str) -> HashSet<&str> {
    text.lines().collect()
}

#[test]
fn openmetrics_exposition_of_a_known_snapshot() {
    let text = metrics::render(&scrapes());
    let have = lines(&text);
    let expected = [
        BUILD_INFO,
        "lcmp_switch_up{switch=\"s1\"} 1",
        "lcmp_switch_up{switch=\"s2\"} 0",
        "lcmp_scrape_duration_seconds{switch=\"s1\"} 0.25",
        "lcmp_switch_info{switch=\"s1\",policy=\"lcmp\"} 1",
        "lcmp_switch_uptime_seconds{switch=\"s1\"} 12.5",
        "lcmp_policy_path_cost_weight{switch=\"s1\"} 3",
        "lcmp_policy_congestion_cost_weight{switch=\"s1\"} 1",
        "lcmp_route_table_generation{switch=\"s1\"} 3",
        "lcmp_switch_polls_total{switch=\"s1\"} 5000",
        "lcmp_switch_polls_with_rx_total{switch=\"s1\"} 1200",
        "lcmp_switch_other_events_total{switch=\"s1\",counter=\"frobs\"} 7",
        "lcmp_port_info{switch=\"s1\",port=\"s1p0\",index=\"0\",emulation_mode=\"switch\",kind=\"af_xdp\",xdp_mode=\"drv\",bind_mode=\"copy\"} 1",
        "lcmp_port_info{switch=\"s1\",port=\"s1p1\",index=\"1\",emulation_mode=\"none\",kind=\"memory\",peer=\"p1/s1\",transfer=\"descriptor\"} 1",
        "lcmp_port_up{switch=\"s1\",port=\"s1p0\"} 1",
        "lcmp_port_up{switch=\"s1\",port=\"s1p1\"} 0",
        "lcmp_port_link_up{switch=\"s1\",port=\"s1p1\"} 1",
        "lcmp_port_admin_up{switch=\"s1\",port=\"s1p1\"} 0",
        "lcmp_port_rx_packets_total{switch=\"s1\",port=\"s1p0\"} 58",
        "lcmp_port_rx_bytes_total{switch=\"s1\",port=\"s1p0\"} 87000",
        "lcmp_port_tx_packets_total{switch=\"s1\",port=\"s1p0\"} 42",
        "lcmp_port_tx_bytes_total{switch=\"s1\",port=\"s1p0\"} 63000",
        "lcmp_port_tx_packets_total{switch=\"s1\",port=\"s1p1\"} 48",
        "lcmp_port_enqueued_packets_total{switch=\"s1\",port=\"s1p0\"} 45",
        "lcmp_port_departed_packets_total{switch=\"s1\",port=\"s1p0\"} 46",
        "lcmp_port_departed_bytes_total{switch=\"s1\",port=\"s1p0\"} 69000",
        "lcmp_port_ecn_marked_packets_total{switch=\"s1\",port=\"s1p0\"} 3",
        "lcmp_port_other_events_total{switch=\"s1\",port=\"s1p0\",counter=\"mystery\"} 11",
        "lcmp_port_dropped_packets_total{switch=\"s1\",port=\"s1p0\",reason=\"queue_full\"} 2",
        "lcmp_port_dropped_packets_total{switch=\"s1\",port=\"s1p0\",reason=\"no_route\"} 1",
        "lcmp_port_dropped_packets_total{switch=\"s1\",port=\"s1p0\",reason=\"truncated\"} 0",
        "lcmp_port_dropped_packets_total{switch=\"s1\",port=\"s1p1\",reason=\"port_down\"} 6",
        "lcmp_port_queue_bytes{switch=\"s1\",port=\"s1p0\"} 3000",
        "lcmp_port_queue_packets{switch=\"s1\",port=\"s1p0\"} 2",
        "lcmp_port_delay_line_packets{switch=\"s1\",port=\"s1p0\"} 4",
        "lcmp_port_ecn_min_threshold_bytes{switch=\"s1\",port=\"s1p0\"} 30000",
        "lcmp_port_ecn_max_threshold_bytes{switch=\"s1\",port=\"s1p0\"} 120000",
        "lcmp_port_congestion_cost{switch=\"s1\",port=\"s1p0\"} 3",
        "lcmp_port_congestion_queue_score{switch=\"s1\",port=\"s1p0\"} 2",
        "lcmp_port_congestion_trend_score{switch=\"s1\",port=\"s1p0\"} 1",
        "lcmp_port_congestion_persistence_score{switch=\"s1\",port=\"s1p0\"} 0",
        "lcmp_port_emulation_rate_bytes_per_second{switch=\"s1\",port=\"s1p0\"} 125000000.0",
        "lcmp_port_emulation_rate_bytes_per_second{switch=\"s1\",port=\"s1p1\"} 0.0",
        "lcmp_port_emulation_delay_seconds{switch=\"s1\",port=\"s1p0\"} 0.0025",
        "lcmp_port_emulation_buffer_bytes{switch=\"s1\",port=\"s1p0\"} 150000",
        "lcmp_port_emulation_buffer_bytes{switch=\"s1\",port=\"s1p1\"} 64000",
        "lcmp_port_xdp_verdicts_total{switch=\"s1\",port=\"s1p0\",verdict=\"redirected\"} 100",
        "lcmp_port_xdp_verdicts_total{switch=\"s1\",port=\"s1p0\",verdict=\"passed\"} 5",
        "lcmp_port_xsk_rx_dropped_packets_total{switch=\"s1\",port=\"s1p0\"} 1",
        "lcmp_port_xsk_rx_ring_full_total{switch=\"s1\",port=\"s1p0\"} 2",
        "lcmp_port_xsk_fill_ring_empty_total{switch=\"s1\",port=\"s1p0\"} 3",
        "lcmp_port_xsk_tx_invalid_descriptors_total{switch=\"s1\",port=\"s1p0\"} 0",
        "lcmp_port_xsk_socket_info{switch=\"s1\",port=\"s1p0\",queue=\"0\",bind_mode=\"copy\"} 1",
        "lcmp_port_xsk_socket_info{switch=\"s1\",port=\"s1p0\",queue=\"3\",bind_mode=\"copy\"} 1",
        "lcmp_port_xsk_queue_packets_total{switch=\"s1\",port=\"s1p0\",queue=\"0\",direction=\"received\"} 40",
        "lcmp_port_xsk_queue_packets_total{switch=\"s1\",port=\"s1p0\",queue=\"0\",direction=\"sent\"} 42",
        "lcmp_port_xsk_queue_packets_total{switch=\"s1\",port=\"s1p0\",queue=\"3\",direction=\"received\"} 18",
        "lcmp_port_xsk_queue_packets_total{switch=\"s1\",port=\"s1p0\",queue=\"3\",direction=\"sent\"} 0",
        "lcmp_port_memory_link_packets_total{switch=\"s1\",port=\"s1p1\",direction=\"sent\"} 48",
        "lcmp_port_memory_link_packets_total{switch=\"s1\",port=\"s1p1\",direction=\"received\"} 42",
        "lcmp_port_memory_link_bytes_total{switch=\"s1\",port=\"s1p1\",direction=\"sent\"} 72000",
        "lcmp_port_memory_link_bytes_total{switch=\"s1\",port=\"s1p1\",direction=\"received\"} 2520",
        "lcmp_port_memory_link_peer_buffers_empty_total{switch=\"s1\",port=\"s1p1\"} 7",
        "lcmp_flow_cache_flows{switch=\"s1\"} 17",
        "lcmp_flow_cache_capacity_flows{switch=\"s1\"} 65536",
        "lcmp_flow_cache_hits_total{switch=\"s1\"} 900",
        "lcmp_flow_cache_misses_total{switch=\"s1\"} 20",
        "lcmp_flow_cache_inserts_total{switch=\"s1\"} 19",
        "lcmp_flow_cache_evictions_total{switch=\"s1\"} 3",
        "lcmp_flow_failovers_total{switch=\"s1\"} 2",
        "lcmp_flow_cache_full_decisions_total{switch=\"s1\"} 1",
        "lcmp_all_congested_decisions_total{switch=\"s1\"} 4",
        "lcmp_decisions_total{switch=\"s1\",policy=\"lcmp\",port=\"s1p0\"} 20",
        "lcmp_decisions_total{switch=\"s1\",policy=\"lcmp\",port=\"s1p1\"} 5",
        "lcmp_route_candidate_path_cost{switch=\"s1\",prefix=\"10.0.2.0/24\",port=\"s1p0\"} 2",
        "lcmp_route_candidate_congestion_cost{switch=\"s1\",prefix=\"10.0.2.0/24\",port=\"s1p0\"} 3",
        "lcmp_route_candidate_cost{switch=\"s1\",prefix=\"10.0.2.0/24\",port=\"s1p0\"} 9",
        "lcmp_route_candidate_cost{switch=\"s1\",prefix=\"10.0.2.0/24\",port=\"s1p1\"} 12",
        "lcmp_route_candidate_kept{switch=\"s1\",prefix=\"10.0.2.0/24\",port=\"s1p0\"} 1",
        "lcmp_route_candidate_kept{switch=\"s1\",prefix=\"10.0.2.0/24\",port=\"s1p1\"} 0",
        "lcmp_route_candidate_up{switch=\"s1\",prefix=\"10.0.2.0/24\",port=\"s1p1\"} 0",
        "lcmp_flow_log_written_records_total{switch=\"s1\"} 10",
        "lcmp_flow_log_dropped_records_total{switch=\"s1\"} 1",
        "lcmp_flow_log_write_failed_records_total{switch=\"s1\"} 0",
        "lcmp_flow_log_buffered_records{switch=\"s1\"} 2",
        "lcmp_flow_log_capacity_records{switch=\"s1\"} 1024",
        "lcmp_control_requests_total{switch=\"s1\"} 7",
        "lcmp_control_errors_total{switch=\"s1\"} 1",
        "lcmp_control_refused_connections_total{switch=\"s1\"} 0",
        // Metadata.
        "# TYPE lcmp_port_tx_packets counter",
        "# HELP lcmp_port_tx_packets Frames handed to the port's transmit ring.",
        "# TYPE lcmp_port_rx_bytes counter",
        "# UNIT lcmp_port_rx_bytes bytes",
        "# TYPE lcmp_port_departed_bytes counter",
        "# UNIT lcmp_port_departed_bytes bytes",
        "# TYPE lcmp_port_queue_bytes gauge",
        "# UNIT lcmp_port_queue_bytes bytes",
        "# UNIT lcmp_port_emulation_delay_seconds seconds",
        "# UNIT lcmp_port_emulation_rate_bytes_per_second bytes_per_second",
        "# TYPE lcmp_switch info",
        "# TYPE lcmp_switch_up gauge",
        "# TYPE lcmp_build info",
        "# TYPE lcmp_port_xsk_socket info",
        "# UNIT lcmp_port_ecn_min_threshold_bytes bytes",
    ];
    let missing: Vec<&str> = expected
        .iter()
        .copied()
        .filter(|l| !have.contains(l))
        .collect();
    assert!(missing.is_empty(), "missing {missing:#?}\nin\n{text}");

    assert!(text.ends_with("\n# EOF\n"), "{text}");
    // The parts of one thing are families, not label values of one.
    for label in ["weight=", "threshold=", "component=", "part="] {
        assert!(!text.contains(label), "{label} in\n{text}");
    }
    // Port counters summed over the switch are not exported twice.
    assert!(!text.contains("counter=\"rx_frames\""), "{text}");
    assert!(!text.contains("counter=\"tx_frames\""), "{text}");
    assert!(!text.contains("counter=\"departed_bytes\""), "{text}");
    // The second reply for the same prefix and the second s1 are ignored.
    assert!(!text.contains(" 99\n"), "{text}");
    assert_eq!(
        text.matches("lcmp_switch_up{switch=\"s1\"}").count(),
        1,
        "{text}"
    );
    // Nothing but health for the switch that was down.
    let s2: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("switch=\"s2\""))
        .collect();
    assert_eq!(s2, ["lcmp_switch_up{switch=\"s2\"} 0"]);
    check_structure(&text);
}

/// The probe's alpha 23,598,722 on a path of C_path 182: the cost is
/// 182 * 23,598,722 = 4,294,967,404 = 2^32 + 108, exported whole (a 32-bit
/// cost showed 108).
#[test]
fn a_cost_beyond_u32_is_exported_exactly() {
    let s = SwitchScrape::up("s1", snapshot_s1(), vec![costs("10.0.2.2", 4_294_967_404)]);
    let text = metrics::render(&[s]);
    let line =
        "lcmp_route_candidate_cost{switch=\"s1\",prefix=\"10.0.2.0/24\",port=\"s1p0\"} 4294967404";
    assert!(lines(&text).contains(line), "missing {line:?} in\n{text}");
}

#[test]
fn prometheus_text_exposition_names_counters_with_total() {
    let text = metrics::render_as(&scrapes(), Format::PrometheusText);
    let have = lines(&text);
    for line in [
        "# TYPE lcmp_port_tx_packets_total counter",
        "# HELP lcmp_port_tx_packets_total Frames handed to the port's transmit ring.",
        "lcmp_port_tx_packets_total{switch=\"s1\",port=\"s1p0\"} 42",
        "# TYPE lcmp_port_departed_bytes_total counter",
        "lcmp_port_departed_bytes_total{switch=\"s1\",port=\"s1p0\"} 69000",
        "# TYPE lcmp_switch_info gauge",
        "lcmp_switch_info{switch=\"s1\",policy=\"lcmp\"} 1",
        "# TYPE lcmp_build_info gauge",
        BUILD_INFO,
        "# TYPE lcmp_port_queue_bytes gauge",
        "lcmp_port_queue_bytes{switch=\"s1\",port=\"s1p0\"} 3000",
    ] {
        assert!(have.contains(line), "missing {line:?} in\n{text}");
    }
    assert!(!text.contains("# EOF"), "{text}");
    assert!(!text.contains("# UNIT"), "{text}");
}

/// Sample lines as (metric name, label text).
fn samples(text: &str) -> Vec<(&str, &str)> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let name_end = l.find(['{', ' ']).unwrap_or(l.len());
            let labels = if l[name_end..].starts_with('{') {
                &l[name_end..=name_end + l[name_end..].find('}').expect("closing brace")]
            } else {
                ""
            };
            (&l[..name_end], labels)
        })
        .collect()
}

/// OpenMetrics rules a text exposition must keep: each family declared
/// once with help and type, its samples right after it and named after
/// it, no series twice, and every series labelled with its switch.
fn check_structure(text: &str) {
    let mut declared = HashSet::new();
    let mut family: Option<(String, String)> = None;
    let mut helped = HashSet::new();
    let mut series = HashSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            helped.insert(rest.split(' ').next().unwrap().to_string());
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(declared.insert(name.to_string()), "{name} declared twice");
            assert!(helped.contains(name), "{name} has no HELP");
            family = Some((name.to_string(), kind.to_string()));
        } else if line.starts_with('#') {
            continue;
        } else {
            let (name, labels) = samples(line)[0];
            let (fam, kind) = family.as_ref().expect("sample before any TYPE");
            let want = match kind.as_str() {
                "counter" => format!("{fam}_total"),
                "info" => format!("{fam}_info"),
                // A summary's quantiles, then its count.
                "summary" if name.ends_with("_count") => format!("{fam}_count"),
                "summary" => {
                    assert!(labels.contains(",quantile=\""), "{line}");
                    fam.clone()
                }
                _ => fam.clone(),
            };
            assert_eq!(name, want, "{line} outside its family");
            // The process's build is the one series that is no switch's.
            if name != "lcmp_build_info" {
                assert!(labels.starts_with("{switch=\""), "{line}");
            }
            assert!(series.insert((name, labels)), "{line} twice");
        }
    }
}

fn dashboard_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../dashboards/lcmp-switch.json")
}

/// Every query string of a dashboard: panel `expr`s and template
/// variable queries.
fn dashboard_queries(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                match (k.as_str(), v) {
                    ("expr" | "query" | "definition", serde_json::Value::String(s)) => {
                        out.push(s.clone())
                    }
                    _ => dashboard_queries(v, out),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|v| dashboard_queries(v, out)),
        _ => {}
    }
}

/// Identifiers starting with `lcmp_` in a PromQL expression.
fn metric_names(expr: &str) -> Vec<String> {
    let b = expr.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b':';
    let mut names = Vec::new();
    let mut i = 0;
    while let Some(at) = expr[i..].find("lcmp_") {
        let start = i + at;
        let mut end = start;
        while end < b.len() && ident(b[end]) {
            end += 1;
        }
        if start == 0 || !ident(b[start - 1]) {
            names.push(expr[start..end].to_string());
        }
        i = end;
    }
    names
}

#[test]
fn metric_names_are_found_in_queries() {
    assert_eq!(
        metric_names(r#"sum by (port) (rate(lcmp_a_total{x="lcmp_no"}[5m])) / lcmp_b"#),
        ["lcmp_a_total", "lcmp_no", "lcmp_b"]
    );
    assert_eq!(metric_names("xlcmp_a + lcmp_b:rate5m"), ["lcmp_b:rate5m"]);
}

#[test]
fn every_metric_the_dashboard_queries_is_exported() {
    let text = std::fs::read_to_string(dashboard_path()).expect("dashboard JSON");
    let dashboard: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(dashboard["schemaVersion"], 38);
    let vars = dashboard["templating"]["list"]
        .as_array()
        .expect("variables");
    assert!(vars.iter().any(|v| v["name"] == "datasource"
        && v["type"] == "datasource"
        && v["query"] == "prometheus"));
    assert!(vars
        .iter()
        .any(|v| v["name"] == "switch"
            && v["query"]["query"] == "label_values(lcmp_switch_up, switch)"));

    let mut queries = Vec::new();
    dashboard_queries(&dashboard, &mut queries);
    let queried: BTreeSet<String> = queries.iter().flat_map(|q| metric_names(q)).collect();
    // The panels the dashboard is meant to have query at least these; the
    // check below would pass vacuously if the walk found nothing.
    assert!(queried.len() >= 15, "only {queried:?}");

    let exposition = metrics::render(&scrapes());
    let exported: HashSet<&str> = samples(&exposition).into_iter().map(|(n, _)| n).collect();
    let unknown: Vec<&String> = queried
        .iter()
        .filter(|n| !exported.contains(n.as_str()))
        .collect();
    assert!(
        unknown.is_empty(),
        "the dashboard queries metrics that are not exported: {unknown:?}"
    );
    for panel in dashboard["panels"].as_array().unwrap() {
        if panel["type"] != "row" {
            assert_eq!(
                panel["datasource"]["uid"], "${datasource}",
                "{}",
                panel["title"]
            );
            for t in panel["targets"].as_array().expect("targets") {
                let expr = t["expr"].as_str().expect("expr");
                assert!(expr.contains("switch=~\"$switch\""), "{expr}");
            }
        }
    }
}

/// Every family the exporter can emit, by the name a query uses: the
/// Prometheus text rendering declares every family of the table in
/// `metrics.rs` (`# TYPE`), series or not.
fn families() -> BTreeSet<String> {
    metrics::render_as(&[], Format::PrometheusText)
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|t| t.split(' ').next().unwrap().to_string())
        .collect()
}

#[test]
fn every_family_is_in_the_dashboards_readme_and_the_readme_names_no_other() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../dashboards/README.md");
    let readme = std::fs::read_to_string(path).expect("dashboards/README.md");
    let families = families();
    // The walk found the table, not nothing: one family of each kind.
    for f in [
        "lcmp_build_info",
        "lcmp_switch_up",
        "lcmp_port_rx_bytes_total",
        "lcmp_port_xsk_socket_info",
        "lcmp_port_xsk_queue_packets_total",
        "lcmp_port_memory_link_bytes_total",
        "lcmp_rotor_epoch_timestamp_seconds",
    ] {
        assert!(families.contains(f), "{f} not in {families:?}");
    }

    let start = readme.find("\n## Metric families\n").expect("the section");
    let section = &readme[start + 1..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    let documented: BTreeSet<String> = metric_names(section).into_iter().collect();
    let undocumented: Vec<&String> = families.difference(&documented).collect();
    assert!(
        undocumented.is_empty(),
        "families missing from the table of dashboards/README.md: {undocumented:?}"
    );

    let named: BTreeSet<String> = metric_names(&readme).into_iter().collect();
    let unknown: Vec<&String> = named.difference(&families).collect();
    assert!(
        unknown.is_empty(),
        "dashboards/README.md names families the exporter does not have: {unknown:?}"
    );
}

fn promtool() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin")])
        .map(|d| d.join("promtool"))
        .find(|p| p.is_file())
}

fn run(cmd: &mut Command, stdin: &str) -> (bool, String) {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool starts");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), said)
}

#[test]
fn promtool_accepts_the_exposition() {
    let Some(promtool) = promtool() else {
        eprintln!(
            "NOTICE: promtool not found (Debian package prometheus, see scripts/install-deps.sh); \
             skipping the promtool checks"
        );
        return;
    };
    // `promtool check metrics` lints names, help and units, but up to at
    // least 2.42 it parses only the Prometheus text format (an OpenMetrics
    // counter's `_total` samples look like a second, undocumented family
    // to it), so it gets the same collector's 0.0.4 rendering.
    let text = metrics::render_as(&scrapes(), Format::PrometheusText);
    let (ok, said) = run(Command::new(&promtool).args(["check", "metrics"]), &text);
    assert!(ok, "promtool check metrics:\n{said}\non\n{text}");

    // The OpenMetrics rendering through promtool's strict OpenMetrics
    // parser (backfilling needs a timestamp on every sample).
    let om = metrics::render(&scrapes());
    let stamped: String = om
        .lines()
        .map(|l| {
            if l.starts_with('#') {
                format!("{l}\n")
            } else {
                format!("{l} 1700000000\n")
            }
        })
        .collect();
    let dir = std::env::temp_dir().join(format!("lcmp-metrics-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("exposition.om");
    std::fs::write(&input, &stamped).unwrap();
    let (ok, said) = run(
        Command::new(&promtool)
            .args(["tsdb", "create-blocks-from", "openmetrics"])
            .arg(&input)
            .arg(dir.join("blocks")),
        "",
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert!(ok, "promtool's OpenMetrics parser:\n{said}\non\n{stamped}");
}

/// One request, the whole response: status code, headers, body.
fn request(addr: SocketAddr, raw: &[u8]) -> (u16, BTreeMap<String, String>, Vec<u8>) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(raw).unwrap();
    let mut resp = Vec::new();
    s.read_to_end(&mut resp).unwrap();
    let end = resp
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no header end in {:?}", String::from_utf8_lossy(&resp)));
    let head = std::str::from_utf8(&resp[..end]).unwrap();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap();
    let status: u16 = status_line
        .strip_prefix("HTTP/1.1 ")
        .and_then(|r| r.get(..3))
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("status line {status_line:?}"));
    let headers = lines
        .map(|l| {
            let (k, v) = l.split_once(": ").unwrap();
            (k.to_ascii_lowercase(), v.to_string())
        })
        .collect();
    (status, headers, resp[end + 4..].to_vec())
}

#[test]
fn the_http_server_serves_metrics_and_survives_bad_requests() {
    let addr = lcmp_control::http::serve("127.0.0.1:0".parse().unwrap(), |format| {
        metrics::render_as(&scrapes(), format)
    })
    .unwrap();
    assert_ne!(addr.port(), 0);
    let expected = metrics::render(&scrapes());
    let get = |path: &str| {
        request(
            addr,
            format!(
                "GET {path} HTTP/1.1\r\nHost: x\r\nAccept: application/openmetrics-text;version=1.0.0,text/plain;q=0.5\r\n\r\n"
            )
            .as_bytes(),
        )
    };

    let (status, headers, body) = get("/metrics");
    assert_eq!(status, 200);
    assert_eq!(
        headers["content-type"],
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    assert_eq!(headers["content-length"], body.len().to_string());
    assert_eq!(String::from_utf8(body).unwrap(), expected);
    // Without OpenMetrics in Accept (curl, promtool): the text format.
    let (status, headers, body) = request(addr, b"GET /metrics HTTP/1.1\r\n\r\n");
    assert_eq!(status, 200);
    assert!(headers["content-type"].starts_with("text/plain; version=0.0.4"));
    assert_eq!(
        String::from_utf8(body).unwrap(),
        metrics::render_as(&scrapes(), metrics::Format::PrometheusText)
    );

    // A client that connects and says nothing does not hold up others.
    let idle = TcpStream::connect(addr).unwrap();

    let (status, _, body) = request(addr, b"\x16\x03\x01\x02\x00garbage\r\n\r\n");
    assert_eq!(status, 400, "{}", String::from_utf8_lossy(&body));
    let (status, _, _) = request(addr, b"this is not http\n\n");
    assert_eq!(status, 400);
    // The client gives up halfway through the head.
    let mut half = TcpStream::connect(addr).unwrap();
    half.write_all(b"GET /metr").unwrap();
    half.shutdown(Shutdown::Write).unwrap();
    let mut resp = String::new();
    half.read_to_string(&mut resp).unwrap();
    assert!(resp.starts_with("HTTP/1.1 400 "), "{resp}");

    let mut big = b"GET /metrics HTTP/1.1\r\nX-Pad: ".to_vec();
    big.resize(big.len() + 16 * 1024, b'a');
    big.extend_from_slice(b"\r\n\r\n");
    assert_eq!(request(addr, &big).0, 431);
    assert_eq!(request(addr, b"DELETE /metrics HTTP/1.1\r\n\r\n").0, 405);
    assert_eq!(get("/nothing").0, 404);

    let (status, headers, body) = get("/");
    assert_eq!(status, 200);
    assert!(headers["content-type"].starts_with("text/html"));
    assert!(String::from_utf8(body)
        .unwrap()
        .contains("href=\"/metrics\""));

    let (status, headers, body) = request(
        addr,
        b"HEAD /metrics HTTP/1.1\r\nAccept: application/openmetrics-text\r\n\r\n",
    );
    assert_eq!(status, 200);
    assert_eq!(headers["content-length"], expected.len().to_string());
    assert!(body.is_empty());

    // Still serving after all that, and promptly despite the idle client.
    let started = Instant::now();
    let (status, _, body) = get("/metrics?from=test");
    assert_eq!(status, 200);
    assert_eq!(String::from_utf8(body).unwrap(), expected);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    drop(idle);
}

#[test]
fn a_panicking_renderer_fails_the_scrape_not_the_server() {
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = calls.clone();
    let addr = lcmp_control::http::serve("127.0.0.1:0".parse().unwrap(), move |_| {
        if seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            panic!("first render fails (expected by the test)");
        }
        "# EOF\n".to_string()
    })
    .unwrap();
    let get = || request(addr, b"GET /metrics HTTP/1.1\r\n\r\n");
    assert_eq!(get().0, 500);
    let (status, _, body) = get();
    assert_eq!((status, body.as_slice()), (200, &b"# EOF\n"[..]));
}

/// An address in use is an error naming what holds it (here this very
/// process), never a quiet move to another port.
#[test]
fn an_address_in_use_is_refused_naming_what_holds_it() {
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = held.local_addr().unwrap();
    let comm = std::fs::read_to_string("/proc/self/comm").unwrap();
    let holder = format!("{:?} (pid {})", comm.trim_end(), std::process::id());
    assert_eq!(
        lcmp_control::http::listener_on(addr.port()),
        Some(holder.clone())
    );
    let err = lcmp_control::http::serve(addr, |_| String::new()).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse);
    assert_eq!(err.to_string(), format!("address in use by {holder}"));
    drop(held);
    // Released: the same address is served as asked.
    assert_eq!(
        lcmp_control::http::serve(addr, |_| String::new()).unwrap(),
        addr
    );
}

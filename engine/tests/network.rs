//! Whole networks on the virtual clock through [`run_virtual`]: switches
//! and RoCEv2 hosts built from a topology, every link in memory. Every
//! expectation is worked out by hand below.

use lcmp_control::Snapshot;
use lcmp_engine::network::{host_pool_frames, pool_frames};
use lcmp_engine::network::{run_wall, WallOptions};
use lcmp_engine::{run_virtual, HostTraffic, VirtualOutcome, VirtualRun};
use lcmp_policy::{LcmpParams, Policy};
use lcmp_switch::config::Options;
use lcmp_topology::{Peer, Topology};
use lcmp_traffic::cdf::Cdf;
use lcmp_traffic::client::{write_records, Destination};
use lcmp_traffic::flows::{Arrivals, FlowSource, ScheduledFlow};
use lcmp_traffic::record::{FlowRecord, FlowStatus};
use lcmp_traffic::rocev2::client::RoceOptions;

/// a - s1, two paths to s2 - b: via m2 (file order first, so s1's lower
/// port) 400 Mbit/s and 100 us per hop, via m1 800 Mbit/s (10 ns/byte)
/// from m1 to s2 and 8 Gbit/s from s1 to m1, 5 us per hop. Host links 8
/// Gbit/s (1 byte/ns), 1 us. Buffers of 1 MB everywhere.
const TWO_PATHS: &str = r#"
[defaults]
buffer = "1MB"
[[dc]]
name = "DC1"
[[dc]]
name = "DC2"
[[switch]]
name = "s1"
dc = "DC1"
prefixes = ["10.0.1.0/24", "fd00:1::/64"]
[[switch]]
name = "s2"
dc = "DC2"
prefixes = ["10.0.2.0/24"]
[[switch]]
name = "m2"
[[switch]]
name = "m1"
[[host]]
name = "a"
switch = "s1"
addresses = ["10.0.1.2/24"]
rate = "8Gbps"
delay = "1us"
[[host]]
name = "c"
switch = "s1"
addresses = ["10.0.1.3/24"]
rate = "8Gbps"
delay = "1us"
[[host]]
name = "b"
switch = "s2"
addresses = ["10.0.2.2/24"]
rate = "8Gbps"
delay = "1us"
[[link]]
a = "s1"
b = "m2"
rate = "400Mbps"
delay = "100us"
[[link]]
a = "m2"
b = "s2"
rate = "400Mbps"
delay = "100us"
[[link]]
a = "s1"
b = "m1"
rate = "8Gbps"
delay = "5us"
[[link]]
a = "m1"
b = "s2"
rate = "800Mbps"
delay = "5us"
"#;

fn topo(text: &str) -> Topology {
    Topology::parse(text, "test.toml").unwrap()
}

fn b() -> Destination {
    "b=10.0.2.2:4791".parse().unwrap()
}

fn flow(id: u64, size: u64, start_ns: u64) -> ScheduledFlow {
    ScheduledFlow {
        id,
        dst: 0,
        size,
        start_ns,
    }
}

/// LCMP keeping one path of two (the cheaper half, rounded down), so
/// which one is decided by C_path alone.
fn lcmp_keep_one() -> Policy {
    Policy::Lcmp(LcmpParams {
        keep_all_up_to: 1,
        ..LcmpParams::default()
    })
}

fn run(
    text: &str,
    senders: &[(&str, Vec<ScheduledFlow>)],
    end_ns: u64,
    flow_log: Option<std::path::PathBuf>,
) -> Result<VirtualOutcome, String> {
    run_virtual(network_run(text, senders, end_ns, flow_log))
}

/// The run of `senders`' flows (to b) on network `text`, ending at
/// `end_ns` at the latest.
fn network_run(
    text: &str,
    senders: &[(&str, Vec<ScheduledFlow>)],
    end_ns: u64,
    flow_log: Option<std::path::PathBuf>,
) -> VirtualRun {
    let traffic = senders
        .iter()
        .map(|(host, flows)| HostTraffic {
            host: host.to_string(),
            flows: FlowSource::new(Arrivals::Schedule(flows.clone()), 0, 0, 0.0, 1.0, 1),
            dsts: vec![b()],
        })
        .collect();
    VirtualRun {
        network: topo(text),
        switch: Options {
            policy: lcmp_keep_one(),
            ecn: None,
            ..Options::default()
        },
        roce: RoceOptions {
            // Nothing is lost here: no timeout may fire.
            rto_ms: 1000.0,
            ..RoceOptions::default()
        },
        traffic,
        end_ns,
        flow_log,
        pfc: false,
    }
}

/// The port of `switch` towards switch `peer`.
fn port_towards(topo: &Topology, switch: &str, peer: &str) -> u32 {
    let sw = topo.switch_by_name(switch).unwrap();
    topo.ports(sw.id)
        .iter()
        .find(|p| matches!(p.peer, Peer::Switch { switch, .. } if topo.switch(switch).name == peer))
        .unwrap()
        .index
        .into()
}

/// The records of the run's only sender, `sender`.
fn records_of<'a>(out: &'a VirtualOutcome, sender: &str) -> &'a [FlowRecord] {
    let [(name, recs)] = &out.records[..] else {
        panic!("{:?}", out.records);
    };
    assert_eq!(name, sender);
    recs
}

fn snapshot<'a>(out: &'a VirtualOutcome, name: &str) -> &'a Snapshot {
    &out.switches.iter().find(|(n, _)| n == name).unwrap().1
}

#[test]
fn one_flow_completes_in_the_path_rtt_plus_serialization_at_the_bottleneck() {
    let out = run(
        TWO_PATHS,
        &[("a", vec![flow(7, 3000, 0)])],
        1_000_000_000,
        None,
    )
    .unwrap();
    // 3000 bytes, 1000 per packet: First 1074 bytes (14 Ethernet + 20 IPv4
    // + 8 UDP + 12 BTH + 16 RETH + 1000 + 4 ICRC), Middle and Last 1058;
    // the ACK 62 (14 + 20 + 8 + 12 + 4 AETH + 4 ICRC). The path is s1 - m1
    // - s2 (see `the_flow_takes_the_path_lcmp_keeps`).
    //
    // a's NIC (1 byte/ns) ends them at 1074, 2132, 3190; s1 has them 1 us
    // later: 2074, 3132, 4190. s1 -> m1 (1 byte/ns, 5 us): 2074-3148,
    // 3148-4206, 4206-5264; at m1 5 us later: 8148, 9206, 10264. m1 -> s2
    // (10 ns/byte, the bottleneck) busy from 8148: ends 18888, 29468,
    // 40048; the Last reaches s2 at 45048, ends on s2 -> b at 46106, is at
    // b at 47106. Its ACK: b's NIC 62 + 1000 -> s2 at 48168; s2 -> m1 (800
    // Mbit/s back) 620 + 5000 -> 53788; m1 -> s1 62 + 5000 -> 58850; s1 ->
    // a 62 + 1000 -> a at 59912.
    //
    // That is the path's RTT 2 x (1 + 5 + 5 + 1) us = 24000, plus the
    // flow's serialization at the bottleneck 10 x (1074 + 1058 + 1058) =
    // 31900, plus the store-and-forward terms the bottleneck does not
    // hide: the First on a's NIC and on s1 -> m1 (2 x 1074), the Last on
    // s2 -> b (1058), the ACK on each of its four hops (62 + 620 + 62 +
    // 62): 24000 + 31900 + 2148 + 1058 + 806 = 59912.
    let recs = records_of(&out, "a");
    let [rec] = recs else {
        panic!("{recs:?}");
    };
    assert_eq!(rec.status, FlowStatus::Ok);
    assert_eq!(rec.fct_ns, Some(59_912));
    assert_eq!((rec.id, rec.size_bytes, rec.start_ns), (7, 3000, 0));
    // The First's ACK: the First reaches s2 at 23888, b at 23888 + 1074 +
    // 1000 = 25962; the ACK takes 62 + 1000 + 620 + 5000 + 62 + 5000 + 62
    // + 1000 = 12806 back: a has it at 38768, 38.768 us after the First
    // left -> 39.
    assert_eq!(rec.min_rtt_us, Some(39));
    let mut csv = Vec::new();
    write_records(&mut csv, recs).unwrap();
    assert_eq!(
        String::from_utf8(csv).unwrap(),
        "id,sender,receiver,src,dst,size_bytes,start_ns,fct_ns,min_rtt_us,status,error,warmup,path,switch_path,reverse_switch_path\n\
         7,a,b,10.0.1.2:49233,10.0.2.2:4791,3000,0,59912,39,ok,,false,,,\n"
    );
    // The run ended with the flow (its last ACK at a), not at 1 s.
    assert_eq!(out.end_ns, 59_912);
    // Frame-hops: 3 data frames and 3 ACKs, each sent by three switches
    // (s1, m1, s2 and back): 18.
    assert_eq!(out.frame_hops, 18);
    assert!(out.polls > 0);
}

#[test]
fn the_flow_takes_the_path_lcmp_keeps() {
    let dir = std::env::temp_dir().join(format!("lcmp-engine-net-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("{switch}.csv");
    let out = run(
        TWO_PATHS,
        &[("a", vec![flow(7, 3000, 0)])],
        1_000_000_000,
        Some(log),
    )
    .unwrap();
    let t = topo(TWO_PATHS);
    // C_path (dataplane/policy path_cost: (3 x delayScore + capScore) >> 2,
    // the delay cap the power of two at or above the largest path delay,
    // 256 us): via m1 10 us, delayScore 10 x 255 / 256 = 9, so C_path <=
    // (27 + 255) / 4 = 70; via m2 200 us, delayScore 199, C_path >= 597 / 4
    // = 149. LCMP keeping one of two keeps m1, though m2 has s1's lower
    // port (m2's link comes first in the file).
    let to_m1 = port_towards(&t, "s1", "m1");
    let to_m2 = port_towards(&t, "s1", "m2");
    assert!(to_m2 < to_m1);
    // s1 decided once on the route to DC2, for the flow a -> b, onto m1;
    // s2 once on the route to DC1, for the ACKs b -> a, onto m1 too (the
    // same costs from its side). (Each also decided once on its own DC's
    // route, delivering to the host.)
    let decisions = |sw: &str, prefix: &str| -> Vec<(u32, u64)> {
        snapshot(&out, sw)
            .decisions
            .iter()
            .filter(|d| d.count > 0 && d.prefix == prefix)
            .map(|d| (d.port, d.count))
            .collect()
    };
    assert_eq!(decisions("s1", "10.0.2.0/24"), vec![(to_m1, 1)]);
    assert_eq!(
        decisions("s2", "10.0.1.0/24"),
        vec![(port_towards(&t, "s2", "m1"), 1)]
    );
    // m2 carried nothing; m1 the 3 data frames and 3 ACKs.
    assert_eq!(snapshot(&out, "m2").counters["tx_frames"], 0);
    assert_eq!(snapshot(&out, "m1").counters["tx_frames"], 6);
    // The decision log says the same: a header, the flow's first frame at
    // s1 at 2074 (after a's NIC and the host link) onto the port to m1,
    // and the ACKs' flow b -> a when its first ACK reached s1, at 38768 -
    // 1062 (s1 -> a: 62 + 1000) = 37706, onto a's port.
    let s1_log = std::fs::read_to_string(dir.join("s1.csv")).unwrap();
    let lines: Vec<Vec<&str>> = s1_log.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(lines.len(), 3, "{s1_log:?}");
    let (to_m1, to_a) = (
        to_m1.to_string(),
        t.host_by_name("a").unwrap().port.to_string(),
    );
    fn line<'a>(l: &[&'a str]) -> (&'a str, &'a str, &'a str, &'a str, &'a str) {
        (l[0], l[1], l[2], l[6], l[9])
    }
    assert_eq!(
        line(&lines[1]),
        (
            "2074",
            "10.0.1.2",
            "10.0.2.2",
            to_m1.as_str(),
            "10.0.2.0/24"
        )
    );
    assert_eq!(
        line(&lines[2]),
        (
            "37706",
            "10.0.2.2",
            "10.0.1.2",
            to_a.as_str(),
            "10.0.1.2/32"
        )
    );
    // Every switch wrote its log (m1 and m2 decide nothing: a header).
    for sw in ["s2", "m1", "m2"] {
        assert!(dir.join(format!("{sw}.csv")).exists(), "{sw}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Two senders and six flows sharing the bottleneck, with ECN marking and
/// DCQCN reacting: enough interplay for any nondeterminism to show.
fn busy_run() -> (Vec<u8>, Vec<Vec<u8>>) {
    let senders = [
        (
            "a",
            vec![
                flow(1, 200_000, 0),
                flow(2, 50_000, 3_000),
                flow(3, 8_000, 9_000),
            ],
        ),
        (
            "c",
            vec![
                flow(11, 120_000, 500),
                flow(12, 30_000, 4_000),
                flow(13, 1, 20_000),
            ],
        ),
    ];
    let traffic = senders
        .iter()
        .map(|(host, flows)| HostTraffic {
            host: host.to_string(),
            flows: FlowSource::new(Arrivals::Schedule(flows.clone()), 0, 0, 0.0, 1.0, 1),
            dsts: vec![b()],
        })
        .collect();
    let out = run_virtual(VirtualRun {
        network: topo(TWO_PATHS),
        switch: Options::default(),
        roce: RoceOptions::default(),
        traffic,
        end_ns: 2_000_000_000,
        flow_log: None,
        pfc: false,
    })
    .unwrap();
    let mut csv = Vec::new();
    for (_, recs) in &out.records {
        assert!(recs.iter().all(|r| r.status == FlowStatus::Ok), "{recs:?}");
        write_records(&mut csv, recs).unwrap();
    }
    let snaps = out
        .switches
        .into_iter()
        .map(|(_, mut s)| {
            // The wall-clock time of the snapshot, the only field not of
            // the run.
            s.unix_time_ms = 0;
            serde_json::to_vec(&s).unwrap()
        })
        .collect();
    (csv, snaps)
}

#[test]
fn two_runs_give_identical_flows_and_snapshots() {
    let first = busy_run();
    let second = busy_run();
    // 2 headers + 6 flows.
    assert_eq!(String::from_utf8_lossy(&first.0).lines().count(), 8);
    assert_eq!(first.0, second.0, "byte-identical flows.csv");
    assert_eq!(first.1.len(), 4);
    assert_eq!(first.1, second.1, "identical snapshots");
}

#[test]
fn flows_running_at_the_end_are_reported_unfinished() {
    // The flow of the first test completes at 59912; stop at 30000. Flow 8
    // would arrive at 40000, after the end: it never starts.
    let out = run(
        TWO_PATHS,
        &[("a", vec![flow(7, 3000, 0), flow(8, 1000, 40_000)])],
        30_000,
        None,
    )
    .unwrap();
    assert_eq!(out.end_ns, 30_000);
    let recs = &out.records[0].1;
    assert_eq!(recs.len(), 1, "{recs:?}");
    assert_eq!(recs[0].id, 7);
    assert_eq!(recs[0].status, FlowStatus::Unfinished);
    assert_eq!((recs[0].fct_ns, recs[0].min_rtt_us), (None, None));
    let mut csv = Vec::new();
    write_records(&mut csv, recs).unwrap();
    assert!(String::from_utf8(csv)
        .unwrap()
        .ends_with("7,a,b,10.0.1.2:49233,10.0.2.2:4791,3000,0,,,unfinished,,false,,,\n"));
    // A port hands a frame to its link when it reaches the far end (the
    // link's delay is the port's): by 30000 m1 has handed s2 the First
    // (at 23888); the Middle left m1 at 29468 and is on the wire until
    // 34468, the Last is still being serialized.
    assert_eq!(snapshot(&out, "m1").counters["tx_frames"], 1);
}

#[test]
fn a_sender_without_ipv4_is_refused_in_one_line() {
    let v6 = TWO_PATHS.replace(
        "name = \"c\"\nswitch = \"s1\"\naddresses = [\"10.0.1.3/24\"]",
        "name = \"c\"\nswitch = \"s1\"\naddresses = [\"fd00:1::3/64\"]",
    );
    assert_ne!(v6, TWO_PATHS);
    let err = run(&v6, &[("c", vec![flow(1, 1000, 0)])], 1_000_000, None).unwrap_err();
    assert!(err.contains("host c") && err.contains("IPv4"), "{err}");
    assert!(!err.contains('\n'), "{err}");
    // A sender that is not a host, and one given twice.
    let err = run(TWO_PATHS, &[("m1", vec![])], 1_000_000, None).unwrap_err();
    assert!(err.contains("\"m1\" is not a host"), "{err}");
    let err = run(TWO_PATHS, &[("a", vec![]), ("a", vec![])], 1_000_000, None).unwrap_err();
    assert!(err.contains("twice"), "{err}");
}

#[test]
fn a_burst_queues_past_the_plain_buffer_under_headroom_and_loses_nothing() {
    // 31 flows of 200 kB from a at once, no ECN: a's NIC sends the 6.2 MB
    // at 8 Gbit/s, all of it via m1 (C_path keeps it, and at 0 no queue
    // says otherwise), whose 800 Mbit/s port to s2 drains a tenth of that:
    // its queue peaks near 5.6 MB, past the 1 MB buffer but within the
    // 1000 x headroom. So nothing may drop anywhere: not at that queue,
    // and not upstream because m1 ran out of frame buffers (s1's delay
    // line towards m1 would overflow: `emulation_overflow`). And the run
    // must end (two parked nodes once woke each other for ever).
    let flows: Vec<ScheduledFlow> = (0..31).map(|i| flow(i, 200_000, 0)).collect();
    let traffic = vec![HostTraffic {
        host: "a".into(),
        flows: FlowSource::new(Arrivals::Schedule(flows), 0, 0, 0.0, 1.0, 1),
        dsts: vec![b()],
    }];
    let out = run_virtual(VirtualRun {
        network: topo(TWO_PATHS),
        switch: Options {
            policy: lcmp_keep_one(),
            ecn: None,
            drop_headroom: 1000,
            ..Options::default()
        },
        roce: RoceOptions {
            rto_ms: 1000.0,
            ..RoceOptions::default()
        },
        traffic,
        end_ns: 1_000_000_000,
        flow_log: None,
        pfc: false,
    })
    .unwrap();
    let [(_, recs)] = &out.records[..] else {
        panic!("{:?}", out.records);
    };
    assert_eq!(recs.len(), 31);
    assert!(recs.iter().all(|r| r.status == FlowStatus::Ok), "{recs:?}");
    for (name, snap) in &out.switches {
        assert_eq!(snap.drops_total, 0, "{name}: {:?}", snap.drops);
    }
    // The queue at m1 did pass the plain buffer: 6.2 MB of payload went
    // that way (over 5,800 frames of 1058 bytes), more than the 1 MB
    // buffer's 945.
    let m1 = port_towards(&topo(TWO_PATHS), "m1", "s2");
    let sent = snapshot(&out, "m1").ports[m1 as usize].counters["tx_frames"];
    assert!(sent > 5_800, "{sent}");
    // Over 0.06 s of virtual time: 6.2 MB at 800 Mbit/s.
    assert!(out.end_ns > 62_000_000, "{}", out.end_ns);
}

#[test]
fn a_network_that_would_not_fit_in_memory_is_refused_in_one_line() {
    // Poisson arrivals at 10^12 flows/s for 10^4 s: 10^16 flows, each a
    // queue pair (~340 bytes) and a record (over 200 bytes) at least: far
    // beyond any machine's memory.
    let traffic = vec![HostTraffic {
        host: "a".into(),
        flows: FlowSource::new(
            Arrivals::Poisson {
                cdf: Cdf::builtin("websearch").unwrap(),
                lambda: 1e12,
                duration_s: 1e4,
            },
            1,
            0,
            0.0,
            1.0,
            1,
        ),
        dsts: vec![b()],
    }];
    let err = run_virtual(VirtualRun {
        network: topo(TWO_PATHS),
        switch: Options::default(),
        roce: RoceOptions::default(),
        traffic,
        end_ns: 1_000_000,
        flow_log: None,
        pfc: false,
    })
    .unwrap_err();
    assert!(err.starts_with("the network needs "), "{err}");
    assert!(err.contains("10000000000000000 flows"), "{err}");
    assert!(err.contains("available") && !err.contains('\n'), "{err}");
}

#[test]
fn a_pool_holds_a_links_bandwidth_delay_product_and_buffer() {
    // 8 Gbit/s x 1 ms = 1 MB in flight, plus a 1 MB buffer: 2 MB in
    // frames of 1000 + 58 bytes: ceil(2e6 / 1058) = 1891 frames, plus the
    // slack of 512 lent + 2 x 64 in hand = 640: 2531.
    assert_eq!(pool_frames(8_000_000_000, 1_000_000, 1_000_000, 1000), 2531);
    // A link with no delay and no buffer: the slack alone.
    assert_eq!(pool_frames(100_000_000_000, 0, 0, 1000), 640);
    // A host: the same link's 1 MB in flight as data frames (946) and the
    // slack (640), and its 1 MiB NIC buffer in 62-byte ACKs (58 + a 4-byte
    // AETH): ceil(1 048 576 / 62) = 16 913.
    assert_eq!(
        host_pool_frames(8_000_000_000, 1_000_000, 1 << 20, 1000),
        946 + 640 + 16_913
    );
}

#[test]
fn on_the_wall_clock_the_flow_completes_no_sooner_than_the_virtual_clock_says() {
    let out = run_wall(
        network_run(
            TWO_PATHS,
            &[("a", vec![flow(7, 3000, 0)])],
            30_000_000_000,
            None,
        ),
        &WallOptions::default(),
    )
    .unwrap();
    let recs = records_of(&out, "a");
    let [rec] = recs else {
        panic!("{recs:?}");
    };
    assert_eq!(rec.status, FlowStatus::Ok);
    assert_eq!((rec.id, rec.size_bytes), (7, 3000));
    // The virtual clock's 59,912 ns (worked out above) is the schedule
    // with no lateness: a frame never leaves a link early, so the wall
    // clock can only add to it (how much depends on the machine).
    let fct = rec.fct_ns.unwrap();
    assert!(fct >= 59_912, "{rec:?}");
    assert!(rec.min_rtt_us.unwrap() >= 39, "{rec:?}");
    // The run ended with the flow, long before its 30 s end.
    assert!(out.end_ns < 30_000_000_000);
    // Nothing lost, nothing sent twice: the same 18 frame-hops (3 data
    // frames and 3 ACKs through three switches) and the same path.
    assert_eq!(out.frame_hops, 18);
    let topo = topo(TWO_PATHS);
    let s1 = snapshot(&out, "s1");
    let via_m1 = port_towards(&topo, "s1", "m1") as usize;
    assert_eq!(s1.ports[via_m1].counter("tx_frames"), 3, "{s1:?}");
}

#[test]
fn a_wall_clock_run_answers_its_control_sockets_and_stops_when_told() {
    use lcmp_control::client::Client;
    use lcmp_control::{Reply, Request};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    let dir = std::env::temp_dir().join(format!("lcmp-engine-wall-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let sockets = dir.clone();
    static STOP: AtomicBool = AtomicBool::new(false);
    // The flow would start at 20 s, the run end at 60 s: only the stop
    // ends it.
    let runner = std::thread::spawn(move || {
        let socket = move |name: &str| sockets.join(format!("{name}.sock"));
        run_wall(
            network_run(
                TWO_PATHS,
                &[("a", vec![flow(7, 3000, 20_000_000_000)])],
                60_000_000_000,
                None,
            ),
            &WallOptions {
                control_socket: Some(&socket),
                stop: Some(&STOP),
            },
        )
    });
    // Waits for s2's socket (bound before the run starts), then asks.
    let path = dir.join("s2.sock");
    let reply = loop {
        match Client::connect(&path, Duration::from_secs(5))
            .and_then(|mut c| c.call(&Request::Status))
        {
            Ok(r) => break r,
            Err(_) if !runner.is_finished() => std::thread::yield_now(),
            Err(e) => panic!("{e}: {:?}", runner.join()),
        }
    };
    let Reply::Status(snap) = reply else {
        panic!("{reply:?}");
    };
    assert_eq!(snap.switch, "s2");
    // s2: m2, m1 and host b.
    assert_eq!(snap.ports.len(), 3, "{snap:?}");
    STOP.store(true, Ordering::Relaxed);
    let out = runner.join().unwrap().unwrap();
    // Stopped before the flow's arrival: it never started, no record.
    assert_eq!(out.records, vec![("a".to_string(), Vec::new())]);
    assert!(out.end_ns < 20_000_000_000, "{}", out.end_ns);
    assert_eq!(out.switches.len(), 4);
    // The sockets are gone with the run.
    for name in ["s1", "s2", "m1", "m2"] {
        assert!(!dir.join(format!("{name}.sock")).exists(), "{name}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

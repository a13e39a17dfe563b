//! Priority flow control on the virtual clock: two hosts at line rate into
//! one link of the same rate (2:1), with and without PFC. Expectations
//! worked out by hand below.

use lcmp_engine::{run_virtual, HostTraffic, VirtualOutcome, VirtualRun};
use lcmp_policy::Policy;
use lcmp_switch::config::Options;
use lcmp_topology::Topology;
use lcmp_traffic::flows::{Arrivals, FlowSource, ScheduledFlow};
use lcmp_traffic::record::FlowStatus;
use lcmp_traffic::rocev2::client::RoceOptions;

/// A network of `switches` (name, prefix delivered if any), `links`
/// between them (a, b, rate) and `hosts` (name, switch, address); every
/// link and host link 10 us, hosts at 8 Gbit/s (1 byte/ns), buffers 1 MB.
fn network(
    switches: &[(&str, Option<&str>)],
    links: &[(&str, &str, &str)],
    hosts: &[(&str, &str, &str)],
) -> String {
    let mut toml = String::from("[defaults]\nbuffer = \"1MB\"\n");
    for (name, prefix) in switches {
        toml += &format!("[[switch]]\nname = \"{name}\"\n");
        if let Some(p) = prefix {
            toml += &format!("prefixes = [\"{p}\"]\n");
        }
    }
    for (a, b, rate) in links {
        toml +=
            &format!("[[link]]\na = \"{a}\"\nb = \"{b}\"\nrate = \"{rate}\"\ndelay = \"10us\"\n");
    }
    for (name, switch, address) in hosts {
        toml += &format!(
            "[[host]]\nname = \"{name}\"\nswitch = \"{switch}\"\naddresses = [\"{address}\"]\n\
             rate = \"8Gbps\"\ndelay = \"10us\"\n"
        );
    }
    toml
}

/// a and c on s1, b on s2; every link 8 Gbit/s (1 byte/ns) and 10 us;
/// buffers 1 MB. s1's ports: p0 to s2 (the link), p1 a, p2 c.
fn two_to_one_network() -> String {
    network(
        &[("s1", Some("10.0.1.0/24")), ("s2", Some("10.0.2.0/24"))],
        &[("s1", "s2", "8Gbps")],
        &[
            ("a", "s1", "10.0.1.2/24"),
            ("c", "s1", "10.0.1.3/24"),
            ("b", "s2", "10.0.2.2/24"),
        ],
    )
}

/// Each of `senders` sends one 2 MB flow to b (10.0.2.2) at time 0 over
/// `network`, DCQCN without ECN (so at line rate throughout), switches
/// hashing.
fn two_mb_each_to_b(network: &str, senders: &[&str], pfc: bool) -> VirtualOutcome {
    let traffic = senders
        .iter()
        .enumerate()
        .map(|(i, host)| HostTraffic {
            host: host.to_string(),
            flows: FlowSource::new(
                Arrivals::Schedule(vec![ScheduledFlow {
                    id: i as u64 + 1,
                    dst: 0,
                    size: 2_000_000,
                    start_ns: 0,
                }]),
                0,
                0,
                0.0,
                1.0,
                1,
            ),
            dsts: vec!["b=10.0.2.2:4791".parse().unwrap()],
        })
        .collect();
    run_virtual(VirtualRun {
        network: Topology::parse(network, "pfc-test.toml").unwrap(),
        switch: Options {
            policy: Policy::Ecmp,
            ecn: None,
            ..Options::default()
        },
        roce: RoceOptions::default(),
        traffic,
        end_ns: 10_000_000_000,
        flow_log: None,
        pfc,
    })
    .unwrap()
}

/// a and c each send 2 MB to b at time 0.
fn two_to_one(pfc: bool) -> VirtualOutcome {
    two_mb_each_to_b(&two_to_one_network(), &["a", "c"], pfc)
}

#[test]
fn pfc_pauses_the_senders_instead_of_dropping_and_keeps_the_link_busy() {
    let out = two_to_one(true);
    let s1 = &out.switches.iter().find(|(n, _)| n == "s1").unwrap().1;
    let s2 = &out.switches.iter().find(|(n, _)| n == "s2").unwrap().1;
    // s1's buffer is 1 MB; each of its 3 ports has a 4 KiB reserve and a
    // headroom of 3 x 8 Gbit/s x 10 us = 30,000 bytes (28 frames: what a
    // host sends while a pause reaches it, 10 us, and what is on its link
    // then, 10 us more), so 1,000,000 - 90,000 - 12,288 = 897,712 bytes
    // are shared. Two ports filling it equally each pause at x = (897,712
    // - 2x) / 8, x = 89,771 bytes: far below the 2 MB each host sends,
    // far below the 1 MB buffer the link's queue would otherwise fill.
    // So: nothing dropped anywhere, both hosts paused (and resumed).
    for (name, snap) in &out.switches {
        assert_eq!(snap.drops_total, 0, "{name}: {:?}", snap.drops);
    }
    for host_port in [1, 2] {
        let c = &s1.ports[host_port].counters;
        assert!(c["pfc_pauses_sent"] >= 1, "port {host_port}: {c:?}");
        assert!(c["pfc_resumes_sent"] >= 1, "port {host_port}: {c:?}");
    }
    // The link is not oversubscribed downstream: s2 pauses no one, and s1
    // hears no pause.
    assert_eq!(s2.counters["pfc_pauses_sent"], 0);
    assert_eq!(s1.counters["pfc_received"], 0);
    // Work-conserving: the paused ports' ~90 KB queued each outlast the
    // ~20 us a resume takes to bring data back (20 KB), so s1's link is
    // never idle. Each flow is 2,000 packets of 1,000 bytes: a First of
    // 1,074 bytes (with RETH) and 1,999 of 1,058, 2,116,016 bytes; both,
    // 4,232,032 bytes at 1 byte/ns. The link starts when a's and c's
    // first frames reach s1 (1,074 ns serialization + 10 us): 11,074 ns;
    // its last frame leaves at 11,074 + 4,232,032 = 4,243,106 ns, reaches
    // s2 10 us later, crosses s2 -> b (1,058 + 10,000 ns): 4,264,164; its
    // ACK (62 bytes) comes back over three hops of 62 + 10,000 ns:
    // 4,294,350 ns. The flow that ends last cannot end earlier, and ends
    // within 1 % of it.
    let mut fcts = Vec::new();
    for (host, recs) in &out.records {
        let [rec] = &recs[..] else {
            panic!("{host}: {recs:?}")
        };
        assert_eq!(rec.status, FlowStatus::Ok, "{host}: {rec:?}");
        fcts.push(rec.fct_ns.unwrap());
    }
    let last = *fcts.iter().max().unwrap();
    assert!(
        (4_294_350..=4_337_294).contains(&last),
        "the later flow ended at {last} ns: {fcts:?}"
    );
}

#[test]
fn without_pfc_the_same_burst_overflows_the_buffer() {
    // The same 4.2 MB in, at twice the link's rate: the link's queue grows
    // by 1 byte/ns and reaches s1's 1 MB buffer after ~1 ms: tail drops,
    // counted on the link's port, which PFC prevents above.
    let out = two_to_one(false);
    let s1 = &out.switches.iter().find(|(n, _)| n == "s1").unwrap().1;
    assert!(s1.ports[0].drops["queue_full"] > 0, "{:?}", s1.drops);
    assert_eq!(s1.counters["pfc_pauses_sent"], 0);
}

/// a on s1, s1 - s2 - s3 in a chain, b on s3; every link 8 Gbit/s and
/// 10 us but s2 - s3 at 4 Gbit/s (2 ns/byte); buffers 1 MB.
fn chain_network() -> String {
    network(
        &[
            ("s1", Some("10.0.1.0/24")),
            ("s2", None),
            ("s3", Some("10.0.2.0/24")),
        ],
        &[("s1", "s2", "8Gbps"), ("s2", "s3", "4Gbps")],
        &[("a", "s1", "10.0.1.2/24"), ("b", "s3", "10.0.2.2/24")],
    )
}

#[test]
fn a_paused_switch_stops_and_pauses_its_own_senders_in_turn() {
    let out = two_mb_each_to_b(&chain_network(), &["a"], true);
    let snap = |name: &str| &out.switches.iter().find(|(n, _)| n == name).unwrap().1;
    // a sends at 8 Gbit/s into s2's 4 Gbit/s link: s2's share from s1
    // fills ((1,000,000 - 45,000 headroom - 8,192 reserves) / 9 = 105,201
    // bytes) and s2 pauses s1; s1 stops, its own queue fills, and s1
    // pauses a. Without s1 stopping, s2's 30,000 bytes of headroom would
    // overflow (the frames keep coming at 8 Gbit/s): nothing is dropped.
    for (name, s) in &out.switches {
        assert_eq!(s.drops_total, 0, "{name}: {:?}", s.drops);
    }
    assert!(snap("s2").counters["pfc_pauses_sent"] >= 1);
    assert!(
        snap("s1").counters["pfc_received"] >= 2,
        "a pause and a resume"
    );
    assert!(snap("s1").counters["pfc_pauses_sent"] >= 1);
    // The 4 Gbit/s link never idles: 2,116,016 bytes at 2 ns/byte from
    // the first frame's arrival at s2 (1,074 + 10,000 twice: 22,148 ns):
    // the last leaves s2 at 4,254,180 ns, is at b 10,000 + 1,058 + 10,000
    // later (4,275,238), and its ACK comes back over 4 hops of 10 us and
    // 62 bytes (124 ns on the 4 Gbit/s hop): 4,315,548 ns; within 1 %.
    let [(_, recs)] = &out.records[..] else {
        panic!("{:?}", out.records)
    };
    assert_eq!(recs[0].status, FlowStatus::Ok);
    let fct = recs[0].fct_ns.unwrap();
    assert!((4_315_548..=4_358_703).contains(&fct), "{fct}");
}

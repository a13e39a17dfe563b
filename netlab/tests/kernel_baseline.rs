//! The kernel baseline on the 2dc-3path testbed: every switch namespace is
//! a kernel IP router with multipath routes. Validates the harness that the
//! switch tests reuse. Root only (skips otherwise).

use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;

use lcmp_netlab::{
    iperf3_client, iperf3_server, load_topology, ping, require_root, require_tools, tcp_transfer,
    Lab,
};

fn testbed() -> Lab {
    let topo = load_topology("2dc-3path.toml").expect("topology loads");
    let tb = Lab::from_topology(&topo).expect("testbed builds");
    tb.kernel_routing().expect("kernel routing");
    tb
}

#[test]
fn ping_v4_and_v6_across_kernel_routers() {
    require_root!();
    require_tools(&["ip", "ethtool", "ping", "sysctl", "ss"]);
    let tb = testbed();
    let (a, b) = (tb.host("a"), tb.host("b"));
    for dst in [
        IpAddr::V4(b.ipv4().expect("b has IPv4")),
        IpAddr::V6(b.ipv6().expect("b has IPv6")),
    ] {
        let s = ping(&a.netns, dst, 5, Duration::from_millis(50)).expect("ping runs");
        assert_eq!(s.transmitted, 5, "{dst}: {s:?}");
        // Allow one loss on a loaded machine; the route must work.
        assert!(s.received >= 4, "{dst}: only {} of 5 replies", s.received);
        assert!(s.max_ms > 0.0 && s.min_ms <= s.avg_ms && s.avg_ms <= s.max_ms);
    }
    // And back, b -> a (reverse routes).
    let s = ping(
        &b.netns,
        IpAddr::V4(a.ipv4().unwrap()),
        3,
        Duration::from_millis(50),
    )
    .unwrap();
    assert!(s.received >= 2, "b -> a: {s:?}");
}

#[test]
fn tcp_bytes_cross_intact_and_iperf3_runs() {
    require_root!();
    require_tools(&["ip", "ethtool", "iperf3", "sysctl", "ss"]);
    let tb = testbed();
    let (a, b) = (tb.host("a"), tb.host("b"));

    // 10 MB of a pseudo-random pattern, every byte checked, both families.
    for (dst, port) in [
        (IpAddr::V4(b.ipv4().unwrap()), 7001),
        (IpAddr::V6(b.ipv6().unwrap()), 7002),
    ] {
        let r = tcp_transfer(
            &a.netns,
            &b.netns,
            dst,
            port,
            10_000_000,
            Duration::from_secs(60),
        )
        .expect("transfer completes");
        assert!(r.intact, "{dst}: {r:?}");
        assert_eq!(r.received, 10_000_000);
    }

    // iperf3 for 2 s: the JSON parses and data crossed.
    let server = iperf3_server(&b.netns, 5201).expect("iperf3 server");
    let res = iperf3_client(&a.netns, IpAddr::V4(b.ipv4().unwrap()), 5201, 2, &[])
        .expect("iperf3 client");
    drop(server);
    assert!(res.bits_per_second > 0.0, "{res:?}");
    assert!(res.bytes_received > 0, "{res:?}");
    assert!(
        res.bytes_received <= res.bytes_sent,
        "received more than sent: {res:?}"
    );
}

#[test]
fn multipath_routes_use_every_path() {
    require_root!();
    require_tools(&["ip", "ethtool", "sysctl"]);
    let tb = testbed();
    let s1 = tb.switch("s1");
    let routes = s1
        .netns
        .ip(&["-4", "route", "show", "10.0.2.0/24"])
        .unwrap();
    for p in ["p0", "p1", "p2"] {
        assert!(
            routes.contains(&format!("dev {p}")),
            "no nexthop on {p}: {routes}"
        );
    }
    let routes6 = s1
        .netns
        .ip(&["-6", "route", "show", "fd00:2::/64"])
        .unwrap();
    assert_eq!(routes6.matches("nexthop").count(), 3, "{routes6}");

    // 60 UDP flows (distinct source ports) spread over the three paths with
    // the L4 hash: each transit switch forwards some of them.
    let a = tb.host("a");
    let b = tb.host("b");
    let dst = std::net::SocketAddr::new(IpAddr::V4(b.ipv4().unwrap()), 9999);
    let before: Vec<u64> = ["p1", "p2", "p3"]
        .iter()
        .map(|p| tb.switch(p).netns.link_counters("p1").unwrap().tx_packets)
        .collect();
    for port in 0..60u16 {
        lcmp_netlab::udp_send(&a.netns, dst, 20_000 + port, 3, 64, Duration::ZERO).expect("send");
    }
    std::thread::sleep(Duration::from_millis(200));
    let after: Vec<u64> = ["p1", "p2", "p3"]
        .iter()
        .map(|p| tb.switch(p).netns.link_counters("p1").unwrap().tx_packets)
        .collect();
    for (i, (x, y)) in before.iter().zip(&after).enumerate() {
        assert!(y > x, "path p{} carried none of 60 flows", i + 1);
    }
}

#[test]
fn udp_sequence_arrives_in_order() {
    require_root!();
    require_tools(&["ip", "ethtool", "sysctl"]);
    let tb = testbed();
    let (a, b) = (tb.host("a"), tb.host("b"));
    let dst = std::net::SocketAddr::new(IpAddr::V6(b.ipv6().unwrap()), 9000);
    let rx = lcmp_netlab::UdpReceiver::start(&b.netns, dst).expect("receiver");
    let sent = lcmp_netlab::udp_send(&a.netns, dst, 41_000, 2000, 200, Duration::from_micros(50))
        .expect("sender");
    let r = rx
        .finish(Duration::from_millis(200), Duration::from_secs(10))
        .expect("receiver finishes");
    assert_eq!(sent.sent, 2000);
    // One flow over kernel routers: no reordering, no duplicates; allow a
    // tiny loss on a loaded machine.
    assert_eq!(r.reordered, 0, "{r:?}");
    assert_eq!(r.duplicates, 0);
    assert!(r.lost(2000, 1) <= 20, "lost {}", r.lost(2000, 1));
    let p50 = r.delay_quantile_us(0.5).unwrap();
    assert!(p50 > 0.0 && p50 < 100_000.0, "p50 one-way delay {p50} us");
}

#[test]
fn cleanup_leaves_nothing_behind() {
    require_root!();
    require_tools(&["ip", "ethtool", "sysctl"]);
    let tb = testbed();
    let names = tb.namespaces();
    assert_eq!(names.len(), 7);
    for n in &names {
        assert!(Path::new("/var/run/netns").join(n).exists(), "{n} exists");
    }
    // A background process inside must die with the testbed.
    let bg = tb.host("b").netns.spawn(&["sleep", "600"]).unwrap();
    let pid = bg.pid();
    assert!(Path::new(&format!("/proc/{pid}")).exists());
    // Devices live only inside the namespaces.
    let s1_links = tb.switch("s1").netns.links().unwrap();
    assert_eq!(s1_links, vec!["p0", "p1", "p2", "p3"]);
    drop(bg);
    drop(tb);
    let listed = lcmp_netlab::netns::run(&["ip", "netns", "list"]).unwrap();
    for n in &names {
        assert!(!listed.contains(n.as_str()), "{n} still listed");
        assert!(
            !Path::new("/var/run/netns").join(n).exists(),
            "{n} still mounted"
        );
    }
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "background process {pid} survived"
    );
    // Nothing leaked into the root namespace.
    let root_links = lcmp_netlab::netns::run(&["ip", "-o", "link", "show"]).unwrap();
    for dev in ["p0@", "p1@", "p2@", "p3@", "eth0@"] {
        assert!(
            !root_links.lines().any(|l| l.contains(&format!(": {dev}"))),
            "{dev} in the root namespace: {root_links}"
        );
    }
}

#[test]
fn namespace_guard_cleans_up_on_panic() {
    require_root!();
    let mut name = String::new();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let ns = lcmp_netlab::Netns::new("panic").unwrap();
        name = ns.name().to_string();
        panic!("test panic inside a namespace guard");
    }));
    assert!(r.is_err());
    assert!(!name.is_empty());
    assert!(!Path::new("/var/run/netns").join(&name).exists());
}

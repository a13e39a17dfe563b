//! What the testbed does with kernel features this build machine lacks and
//! stock distribution kernels have: netem on the host-to-switch direction
//! of host links, and SoftRoCE (rdma_rxe) with perftest through the
//! switches. `scripts/vm-test.sh` runs these inside VMs booted with
//! Debian's kernels and sets `LCMP_REQUIRE_KERNEL_FEATURES=1`, which makes
//! a missing feature a failure; elsewhere a test without its feature says
//! so on stderr and ends.
//!
//! Lines starting with `RESULT ` are the measurements `vm-test.sh`
//! collects into its summary.

mod common;

use std::time::Duration;

use common::*;
use lcmp_netlab::{require_root, Lab};
use lcmp_testbed::rdma::{self, RxeSupport};

/// Returns from the test when `have` is false, unless the run requires the
/// kernel's features (then it fails naming the missing one).
macro_rules! require_feature {
    ($have:expr, $what:expr) => {
        if !$have {
            if std::env::var_os("LCMP_REQUIRE_KERNEL_FEATURES").is_some() {
                panic!("this kernel lacks {}, which this run requires", $what);
            }
            eprintln!(
                "skipped: this kernel lacks {} (scripts/vm-test.sh boots one that has it)",
                $what
            );
            return;
        }
    };
}

fn netem_loads() -> bool {
    std::process::Command::new("modprobe")
        .arg("sch_netem")
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn attach(name: &str) -> Lab {
    let st = lcmp_testbed::state::State::load(name).expect("state");
    lcmp_testbed::bed::attach(&st).expect("attach").1
}

/// `ping -c N` from a host: (min, avg) RTT in ms and packets lost.
fn ping(tb: &Lab, host: &str, dst: &str, n: u32) -> (f64, f64, u32) {
    let out = tb
        .host(host)
        .netns
        .exec(&["ping", "-c", &n.to_string(), "-i", "0.2", "-W", "3", dst])
        .unwrap_or_else(|e| panic!("ping {dst} from {host}: {e}"));
    let rtt = out
        .lines()
        .find(|l| l.contains("min/avg/max"))
        .and_then(|l| l.split('=').nth(1))
        .unwrap_or_else(|| panic!("no RTT line: {out}"));
    let v: Vec<f64> = rtt
        .trim()
        .trim_end_matches(" ms")
        .split('/')
        .filter_map(|x| x.parse().ok())
        .collect();
    let received: u32 = out
        .split(',')
        .find(|s| s.contains("received"))
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (v[0], v[1], n - received)
}

/// A one-path network whose host a hangs off s1 by a slow, thin link
/// (50 ms, 4 Mbit/s): the a -> s1 direction is the host's kernel's to
/// emulate (netem), s1 -> a the switch's.
const NETEM_TOPOLOGY: &str = r#"
[[dc]]
name = "DC1"

[[dc]]
name = "DC2"

[[switch]]
name = "s1"
dc = "DC1"
prefixes = ["10.0.1.0/24"]

[[switch]]
name = "s2"
dc = "DC2"
prefixes = ["10.0.2.0/24"]

[[host]]
name = "a"
switch = "s1"
addresses = ["10.0.1.2/24"]
rate = "4Mbps"
delay = "50ms"
buffer = "100kB"

[[host]]
name = "b"
switch = "s2"
addresses = ["10.0.2.2/24"]
rate = "1Gbps"
delay = "10us"
buffer = "1MB"

[[link]]
a = "s1"
b = "s2"
rate = "1Gbps"
delay = "1ms"
buffer = "1MB"
"#;

/// Where the kernel has sch_netem, the agent puts netem on each host's
/// interface (the host-to-switch direction), `agent.json` and `lcmp-ctl
/// links` say so, and the direction gets the configured delay and rate.
#[test]
fn netem_emulates_the_host_to_switch_direction_of_host_links() {
    require_root!();
    require_feature!(netem_loads(), "sch_netem");
    let _s = serial();
    let dir = std::env::temp_dir().join(unique_name("netem-topo"));
    std::fs::create_dir_all(&dir).unwrap();
    let topo = dir.join("netem.toml");
    std::fs::write(&topo, NETEM_TOPOLOGY).unwrap();
    let name = unique_name("nm");
    let _down = Down(name.clone());
    ok(&[
        "up",
        "--name",
        &name,
        "--topology",
        topo.to_str().unwrap(),
        "--no-metrics",
    ]);
    let tb = attach(&name);

    // The plan: a -> s1 and b -> s2 by netem, every switch-sent direction
    // by the switch.
    let agent_json = format!("/run/lcmp-testbed/{name}/agent.json");
    let plan: serde_json::Value = wait_for(
        "the agent's emulation plan",
        Duration::from_secs(20),
        || {
            let v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&agent_json).ok()?).ok()?;
            (v["emulation"].as_array().is_some_and(|a| !a.is_empty())).then_some(v)
        },
    );
    let mech = |dir: &str| -> String {
        plan["emulation"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["direction"] == dir)
            .unwrap_or_else(|| panic!("no {dir} in {}", plan["emulation"]))["mechanism"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(mech("a->s1"), "netem", "{}", plan["emulation"]);
    assert_eq!(mech("b->s2"), "netem");
    assert_eq!(mech("s1->a"), "switch");
    assert_eq!(mech("s1->s2"), "switch");
    let links = std::process::Command::new(&bins().ctl)
        .args(["--testbed", &name, "links"])
        .output()
        .expect("lcmp-ctl runs");
    let links = String::from_utf8_lossy(&links.stdout);
    assert!(
        links
            .lines()
            .any(|l| l.contains("a->s1") && l.contains("netem")),
        "lcmp-ctl links:\n{links}"
    );
    // The switch's modes on this kernel, from its status: its AF_XDP
    // ports' (its links to the path switches are in memory).
    let st = std::process::Command::new(&bins().ctl)
        .args(["--testbed", &name, "--json", "-s", "s1", "status"])
        .output()
        .expect("lcmp-ctl runs");
    let st: serde_json::Value = serde_json::from_slice(&st.stdout).expect("status JSON");
    let modes: std::collections::BTreeSet<String> = st[0]["reply"]["ports"]
        .as_array()
        .expect("ports")
        .iter()
        .filter(|p| p["kind"] == "af_xdp")
        .map(|p| {
            format!(
                "XDP {}, AF_XDP {}",
                p["xsk"]["xdp_mode"].as_str().unwrap_or("?"),
                p["xsk"]["bind_mode"].as_str().unwrap_or("?")
            )
        })
        .collect();
    println!(
        "RESULT switch modes on Linux {}: {modes:?}",
        std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
    );
    assert!(
        !modes.is_empty() && modes.iter().all(|m| m.ends_with("AF_XDP copy")),
        "{modes:?}"
    );
    let qdisc = tb.host("a").netns.exec(&["tc", "qdisc", "show"]).unwrap();
    assert!(
        qdisc.contains("netem") && qdisc.contains("delay 50ms") && qdisc.contains("rate 4Mbit"),
        "{qdisc}"
    );

    // Delay: a -> b -> a crosses a -> s1 (netem, 50 ms), s1 -> s2 (1 ms),
    // s2 -> b (10 us), and back b -> s2 (netem, 10 us), s2 -> s1 (1 ms),
    // s1 -> a (the switch, 50 ms): 102.02 ms. Without netem on a -> s1 it
    // would be 52 ms.
    let (min, avg, lost) = ping(&tb, "a", "10.0.2.2", 10);
    println!(
        "RESULT netem delay: host link a-s1 configured 50 ms one way (RTT a->b 102.0 ms configured), measured RTT min {min:.1} ms avg {avg:.1} ms, {lost} lost"
    );
    assert!(min >= 101.9, "RTT {min} ms is below the configured 102 ms");
    assert!(min < 160.0, "RTT {min} ms: far above the configured 102 ms");
    assert!(lost <= 1, "{lost} of 10 pings lost");

    // Rate: UDP offered at 8 Mbit/s for 4 s from a: netem lets 4 Mbit/s
    // through and drops the rest at its limit.
    let server = tb
        .host("b")
        .netns
        .spawn(&["iperf3", "-s", "-1", "-p", "5201"])
        .expect("iperf3 server");
    wait_for("iperf3 to listen", Duration::from_secs(10), || {
        tb.host("b")
            .netns
            .exec(&["ss", "-H", "-t", "-l", "-n", "sport = :5201"])
            .ok()
            .filter(|o| !o.trim().is_empty())
    });
    let out = tb
        .host("a")
        .netns
        .exec(&[
            "iperf3", "-c", "10.0.2.2", "-p", "5201", "-u", "-b", "8M", "-l", "1000", "-t", "4",
            "--json",
        ])
        .expect("iperf3 client");
    drop(server);
    let v: serde_json::Value = serde_json::from_str(&out).expect("iperf3 JSON");
    // The receiver's view (server side): what came through.
    let received_bps = v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .or_else(|| v["end"]["sum"]["bits_per_second"].as_f64())
        .expect("received rate");
    let lost_pct = v["end"]["sum"]["lost_percent"].as_f64().unwrap_or(0.0);
    println!(
        "RESULT netem rate: host link a-s1 configured 4 Mbit/s, UDP offered 8 Mbit/s, received {:.2} Mbit/s ({lost_pct:.0} % lost)",
        received_bps / 1e6
    );
    assert!(
        received_bps < 4.4e6,
        "{received_bps} bit/s arrived through a 4 Mbit/s netem link"
    );
    assert!(
        received_bps > 2.0e6,
        "only {received_bps} bit/s of 4 Mbit/s arrived"
    );
    ok(&["down", "--name", &name]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The GID index of `dev`'s IPv4-mapped GID for `addr` (RoCEv2 over IPv4).
fn ipv4_gid_index(dev: &str, addr: std::net::Ipv4Addr) -> String {
    let [a, b, c, d] = addr.octets();
    let want = format!("0000:0000:0000:0000:0000:ffff:{a:02x}{b:02x}:{c:02x}{d:02x}");
    let dir = format!("/sys/class/infiniband/{dev}/ports/1/gids");
    wait_for(
        &format!("{dev}'s GID for {addr}"),
        Duration::from_secs(10),
        || {
            (0..16).find_map(|i| {
                let g = std::fs::read_to_string(format!("{dir}/{i}")).ok()?;
                (g.trim() == want).then(|| i.to_string())
            })
        },
    )
}

/// rxe's counter `name` of `dev` (0 if absent).
fn rxe_counter(dev: &str, name: &str) -> u64 {
    std::fs::read_to_string(format!(
        "/sys/class/infiniband/{dev}/ports/1/hw_counters/{name}"
    ))
    .ok()
    .and_then(|s| s.trim().parse().ok())
    .unwrap_or(0)
}

/// rxe's counters of packets out of sequence: the responder's
/// out-of-sequence requests and the requester's sequence-error NAKs.
/// Without loss they stay 0 when every QP keeps one path.
const RXE_ORDER_COUNTERS: [&str; 2] = ["out_of_seq_request", "rcvd_seq_err"];

/// rxe's counters of retransmissions: requester retries (timeouts) and the
/// responder's duplicates. Under TCG an ACK can come later than the retry
/// timeout, so these count without loss too; reported, not asserted.
const RXE_RETRY_COUNTERS: [&str; 2] = ["completer_retry_err", "duplicate_request"];

fn rxe_sum(counters: &[&str]) -> u64 {
    counters
        .iter()
        .map(|c| rxe_counter("rxe_a", c) + rxe_counter("rxe_b", c))
        .sum()
}

fn switch_drops(name: &str) -> u64 {
    status_json(name)["switches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|sw| sw["drops_total"].as_u64().unwrap_or(0))
        .sum()
}

/// perftest options of the multi-QP runs: one outstanding 8 KiB write per
/// QP (rxe does not pace, and 8 QPs x perftest's default 128 outstanding
/// messages would overflow the paths' 100-500 kB buffers at once: RoCE
/// without congestion control), and a 1 s ACK timeout (2^18 x 4.096 us)
/// so that slow guests do not retransmit spuriously.
const GENTLE: [&str; 6] = ["-t", "1", "-s", "8192", "-u", "18"];

/// s1's decisions for RoCEv2 flows from its flow log: (sport, port, reason).
fn s1_rocev2_decisions(name: &str) -> Vec<(u16, u8, String)> {
    std::fs::read_to_string(format!("/run/lcmp-testbed/{name}/s1.flows.csv"))
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f.get(5)? == &"4791" && f.get(1)? == &"10.0.1.2").then_some(())?;
            Some((
                f[4].parse().ok()?,
                f[6].parse().ok()?,
                f.get(8)?.to_string(),
            ))
        })
        .collect()
}

/// Runs a perftest pair: the server on b, then the client on a; returns
/// the client's output (the server's on failure).
fn perftest(tb: &Lab, tool: &str, args: &[&str], timeout: Duration) -> String {
    let gid_b = ipv4_gid_index("rxe_b", "10.0.2.2".parse().unwrap());
    let gid_a = ipv4_gid_index("rxe_a", "10.0.1.2".parse().unwrap());
    let mut server_argv = vec![tool, "-d", "rxe_b", "-x", &gid_b];
    server_argv.extend_from_slice(args);
    let mut server = tb
        .host("b")
        .netns
        .spawn(&server_argv)
        .expect("perftest server");
    wait_for(
        &format!("{tool} to listen"),
        Duration::from_secs(20),
        || {
            tb.host("b")
                .netns
                .exec(&["ss", "-H", "-t", "-l", "-n", "sport = :18515"])
                .ok()
                .filter(|o| !o.trim().is_empty())
        },
    );
    let mut client_argv = vec![tool, "-d", "rxe_a", "-x", &gid_a];
    client_argv.extend_from_slice(args);
    client_argv.push("10.0.2.2");
    let o = tb
        .host("a")
        .netns
        .exec_output(&client_argv, timeout)
        .expect("perftest client runs");
    let server_done = server.wait_timeout(Duration::from_secs(20));
    assert!(
        o.status.success(),
        "{tool} {args:?} failed ({:?}):\n{}{}\nserver ({server_done:?}):\n{}",
        o.status,
        o.stdout,
        o.stderr,
        server.log()
    );
    o.stdout
}

/// The numbers of perftest's result line (the line after the header that
/// starts with `#bytes`).
fn result_row(out: &str) -> Vec<f64> {
    let mut lines = out
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("#bytes"));
    lines.next();
    lines
        .find(|l| !l.trim().is_empty())
        .unwrap_or_else(|| panic!("no result row:\n{out}"))
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect()
}

/// SoftRoCE through the switches: perftest over RC (write and send
/// bandwidth, read latency) between the two DCs; RoCEv2 in s1's counters;
/// 8 QPs as 8 flows over more than one path under ECMP, in order; a link
/// failure under a running transfer moves its QPs and the transfer
/// completes.
#[test]
fn softroce_perftest_crosses_the_switches_and_survives_a_link_failure() {
    require_root!();
    let support = rdma::probe();
    require_feature!(
        support == RxeSupport::PerNamespace,
        format!("a namespace-aware rdma_rxe ({support:?})")
    );
    require_feature!(
        std::process::Command::new("ib_write_bw")
            .arg("--help")
            .output()
            .is_ok(),
        "perftest (ib_write_bw)"
    );
    let _s = serial();
    let name = unique_name("rd");
    let _down = Down(name.clone());
    up_2dc(&name, &["--rdma", "--policy", "ecmp", "--no-metrics"]);
    let tb = attach(&name);
    let long = Duration::from_secs(180);
    // Bandwidth with at most 64 KiB in flight (4 messages of 16 KiB): the
    // smallest path buffer holds 100 kB. With perftest's default of 128
    // outstanding messages the host bursts megabytes into the paths, and
    // under the resulting go-back-N storm rxe has ended runs with a
    // remote-invalid-request completion (status 9).
    let bw_args = ["-s", "16384", "-t", "4", "-n", "400", "-u", "18", "-F"];
    let w = perftest(&tb, "ib_write_bw", &bw_args, long);
    let write_bw = result_row(&w)[3];
    let r = perftest(
        &tb,
        "ib_read_lat",
        &["-s", "64", "-n", "200", "-u", "18", "-F"],
        long,
    );
    // #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%
    let read_lat = result_row(&r);
    let sb = perftest(&tb, "ib_send_bw", &bw_args, long);
    let send_bw = result_row(&sb)[3];
    println!(
        "RESULT perftest RC through the switches: ib_write_bw {write_bw:.2} MB/s, ib_send_bw {send_bw:.2} MB/s (16 KiB messages, 4 outstanding), ib_read_lat typical {:.1} us, min {:.1} us (64 B)",
        read_lat[4], read_lat[2]
    );

    // 8 QPs: 8 flows at s1, spread over more than one path (ECMP), each
    // in order.
    let before = s1_rocev2_decisions(&name).len();
    let (order_before, retry_before, drops_before) = (
        rxe_sum(&RXE_ORDER_COUNTERS),
        rxe_sum(&RXE_RETRY_COUNTERS),
        switch_drops(&name),
    );
    let roce_before = status_json(&name)["switches"][0]["ports"][3]["rx_rocev2_frames"]
        .as_u64()
        .unwrap_or(0);
    let mut args = vec!["-q", "8", "-n", "200", "-F"];
    args.extend_from_slice(&GENTLE);
    let m = perftest(&tb, "ib_write_bw", &args, long);
    let multi_bw = result_row(&m)[3];
    let decisions = s1_rocev2_decisions(&name);
    let new: Vec<_> = decisions[before..]
        .iter()
        .filter(|d| d.2 == "new")
        .collect();
    let sports: std::collections::BTreeSet<u16> = new.iter().map(|d| d.0).collect();
    let paths: std::collections::BTreeSet<u8> = new.iter().map(|d| d.1).collect();
    println!(
        "RESULT perftest 8 QPs: ib_write_bw -q 8 -t 1 -s 8192 {multi_bw:.2} MB/s; s1 saw {} RoCEv2 flows (source ports {sports:?}) on {} paths (ports {paths:?})",
        sports.len(),
        paths.len()
    );
    assert_eq!(sports.len(), 8, "8 QPs are 8 flows at s1: {new:?}");
    assert!(paths.len() > 1, "ECMP put all 8 QPs on one path: {new:?}");
    let roce_in = status_json(&name)["switches"][0]["ports"][3]["rx_rocev2_frames"]
        .as_u64()
        .unwrap_or(0)
        - roce_before;
    let drops = switch_drops(&name) - drops_before;
    let out_of_order = rxe_sum(&RXE_ORDER_COUNTERS) - order_before;
    let retries = rxe_sum(&RXE_RETRY_COUNTERS) - retry_before;
    println!(
        "RESULT RoCEv2 at s1 (8-QP run): {roce_in} frames in from host a; switch drops {drops}; rxe out-of-sequence counters +{out_of_order}, retransmission counters +{retries}"
    );
    // 1600 writes of 8 KiB are at least 8 frames each at rxe's 1024-byte MTU.
    assert!(roce_in >= 1600 * 8, "s1 counted {roce_in} RoCEv2 frames");
    if drops == 0 {
        assert_eq!(
            out_of_order, 0,
            "no frame was dropped, yet rxe counted {out_of_order} packets out of sequence"
        );
    }

    // A link failure under a running 8-QP transfer: s1's port to the path
    // carrying the most QPs goes down; the QPs move and every byte arrives.
    let before = s1_rocev2_decisions(&name).len();
    let gid_b = ipv4_gid_index("rxe_b", "10.0.2.2".parse().unwrap());
    let gid_a = ipv4_gid_index("rxe_a", "10.0.1.2".parse().unwrap());
    let mut args = vec!["-q", "8", "-n", "300", "-F"];
    args.extend_from_slice(&GENTLE);
    let mut server_argv = vec!["ib_write_bw", "-d", "rxe_b", "-x", &gid_b];
    server_argv.extend_from_slice(&args);
    let mut server = tb.host("b").netns.spawn(&server_argv).expect("server");
    wait_for("ib_write_bw to listen", Duration::from_secs(20), || {
        tb.host("b")
            .netns
            .exec(&["ss", "-H", "-t", "-l", "-n", "sport = :18515"])
            .ok()
            .filter(|o| !o.trim().is_empty())
    });
    let mut client_argv = vec!["ib_write_bw", "-d", "rxe_a", "-x", &gid_a];
    client_argv.extend_from_slice(&args);
    client_argv.push("10.0.2.2");
    let mut client = tb.host("a").netns.spawn(&client_argv).expect("client");
    let placed: Vec<(u16, u8, String)> =
        wait_for("s1 to place the 8 QPs", Duration::from_secs(60), || {
            let d: Vec<_> = s1_rocev2_decisions(&name)[before..]
                .iter()
                .filter(|d| d.2 == "new")
                .cloned()
                .collect();
            (d.len() >= 8).then_some(d)
        });
    let busiest = (0u8..3)
        .max_by_key(|p| placed.iter().filter(|d| d.1 == *p).count())
        .unwrap();
    let moved_qps = placed.iter().filter(|d| d.1 == busiest).count();
    // s1's ports 0..2 lead to p1..p3 (2dc-3path.toml).
    let link = format!("s1-p{}", busiest + 1);
    ok(&["link", "--name", &name, &link, "down"]);
    let client_done = client.wait_timeout(Duration::from_secs(240));
    let server_done = server.wait_timeout(Duration::from_secs(30));
    ok(&["link", "--name", &name, &link, "up"]);
    assert!(
        client_done.is_some_and(|s| s.success()),
        "ib_write_bw did not complete after the link failure ({client_done:?}):\n{}\nserver ({server_done:?}):\n{}",
        client.log(),
        server.log()
    );
    let failovers: Vec<_> = s1_rocev2_decisions(&name)[before..]
        .iter()
        .filter(|d| d.2 == "failover")
        .cloned()
        .collect();
    println!(
        "RESULT link failure: s1 port {busiest} down under ib_write_bw -q 8 -n 300; {moved_qps} QPs were on it, {} failover decisions (to ports {:?}); the transfer completed",
        failovers.len(),
        failovers.iter().map(|d| d.1).collect::<std::collections::BTreeSet<_>>()
    );
    // Every QP that sent on after the failure moved off the port (a QP
    // that had finished its writes before it sends nothing more), and
    // only QPs of that port moved.
    let on_busiest: std::collections::BTreeSet<u16> = placed
        .iter()
        .filter(|d| d.1 == busiest)
        .map(|d| d.0)
        .collect();
    assert!(
        !failovers.is_empty(),
        "{moved_qps} QPs on the failed port, none moved"
    );
    assert!(
        failovers
            .iter()
            .all(|d| d.1 != busiest && on_busiest.contains(&d.0)),
        "QPs on port {busiest}: {on_busiest:?}; failovers {failovers:?}"
    );
    ok(&["down", "--name", &name]);
}

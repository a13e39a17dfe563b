//! The switch on a real NIC driver: two pairs of multi-queue virtio-net
//! NICs in a VM (`scripts/vm.sh --nic-pair 4 --nic-pair 4`, each pair
//! joined on the host by a bridge; `scripts/vm-test.sh` runs this), host a
//! on one end of the first pair, the switch on the other end and on the
//! first end of the second pair, host b on the last. The switch must bind
//! a socket on every RX queue, in the bind mode `LCMP_EXPECT_BIND_MODE`
//! names (the VM suite runs it on 7.3, whose virtio-net binds AF_XDP in
//! zero-copy; the 6.12 and 6.1 builds refuse zero-copy with EOPNOTSUPP and
//! the switch falls back to copy), and forward on each queue.
//!
//! Outside such a VM the NICs are missing and the test says so and passes,
//! unless `LCMP_REQUIRE_NICS=1` (set by the VM suite) makes that a failure.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lcmp_netlab::{
    require_root, switch_binary, Mac, Netns, PortNode, PortPeer, SwitchDaemon, SwitchNode,
};
use lcmp_topology::{Peer, Topology};

/// The MACs `scripts/vm.sh --nic-pair` gives: 02:4c:43:PAIR:00:END.
const HOST_A: [u8; 6] = [0x02, 0x4c, 0x43, 0, 0, 0];
const SWITCH_0: [u8; 6] = [0x02, 0x4c, 0x43, 0, 0, 1];
const SWITCH_1: [u8; 6] = [0x02, 0x4c, 0x43, 1, 0, 0];
const HOST_B: [u8; 6] = [0x02, 0x4c, 0x43, 1, 0, 1];

/// Queue pairs of each NIC (`--nic-pair 4`).
const QUEUES: u32 = 4;

/// Flows (UDP source ports) sent each way: the host's tap picks a guest
/// RX queue by flow hash, so with 64 flows over 4 queues a queue gets
/// none with probability 4 * (3/4)^64, about 4e-8.
const FLOWS: u16 = 64;

const TOPOLOGY: &str = r#"
[[dc]]
name = "DC1"
[[switch]]
name = "s1"
dc = "DC1"
prefixes = ["10.88.1.0/24", "10.88.2.0/24"]
[[host]]
name = "a"
switch = "s1"
addresses = ["10.88.1.2/24"]
rate = "10Gbps"
delay = "1us"
buffer = "1MB"
[[host]]
name = "b"
switch = "s1"
addresses = ["10.88.2.2/24"]
rate = "10Gbps"
delay = "1us"
buffer = "1MB"
"#;

/// The interface with MAC `mac` in the calling namespace.
fn nic(mac: [u8; 6]) -> Option<String> {
    let want = Mac(mac).to_string();
    let out = std::process::Command::new("ip")
        .args(["-o", "link", "show"])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout).lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let name = f
            .nth(1)?
            .trim_end_matches(':')
            .split('@')
            .next()?
            .to_string();
        l.contains(&format!("link/ether {want}")).then_some(name)
    })
}

/// Moves `ifname` into `ns`, sets its queue pairs, addresses and route.
fn plumb(ns: &Netns, ifname: &str, addr: &str, gateway: Option<&str>) {
    let run = |args: &[&str]| {
        let out = std::process::Command::new(args[0])
            .args(&args[1..])
            .output()
            .expect("runs");
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(&["ethtool", "-L", ifname, "combined", &QUEUES.to_string()]);
    run(&["ip", "link", "set", "dev", ifname, "netns", ns.name()]);
    ns.sysctl(&["net.ipv6.conf.all.disable_ipv6=1"])
        .expect("sysctl");
    ns.ip(&["addr", "add", addr, "dev", ifname]).expect("addr");
    ns.ip(&["link", "set", "dev", ifname, "up"]).expect("up");
    if let Some(gw) = gateway {
        ns.ip(&["route", "add", "default", "via", gw])
            .expect("route");
    }
}

#[test]
fn every_queue_of_a_virtio_nic_forwards() {
    require_root!();
    let found: Vec<Option<String>> = [HOST_A, SWITCH_0, SWITCH_1, HOST_B]
        .iter()
        .map(|m| nic(*m))
        .collect();
    let Some(nics) = found.iter().cloned().collect::<Option<Vec<String>>>() else {
        assert!(
            std::env::var("LCMP_REQUIRE_NICS").as_deref() != Ok("1"),
            "virtio-net NICs missing ({found:?}): the VM was not started with --nic-pair 4 --nic-pair 4"
        );
        eprintln!("skipped: no virtio-net NIC pairs here (scripts/vm.sh --nic-pair 4 --nic-pair 4 has them)");
        return;
    };
    let bin = switch_binary().expect("lcmp-switch builds");
    let topo_path =
        TempFile(std::env::temp_dir().join(format!("lcmp-virtio-nic-{}.toml", std::process::id())));
    std::fs::write(&topo_path.0, TOPOLOGY).expect("topology written");
    let topo = Topology::load(&topo_path.0).expect("topology loads");

    let ha = Netns::new("nica").expect("namespace");
    let hb = Netns::new("nicb").expect("namespace");
    let sw = Netns::new("nicsw").expect("namespace");
    plumb(&ha, &nics[0], "10.88.1.2/24", Some("10.88.1.1"));
    plumb(&sw, &nics[1], "10.88.1.1/24", None);
    plumb(&sw, &nics[2], "10.88.2.1/24", None);
    plumb(&hb, &nics[3], "10.88.2.2/24", Some("10.88.2.1"));

    // The switch's ports in topology order, each to its host's NIC.
    let s1 = topo.switch_by_name("s1").expect("s1");
    let ports: Vec<PortNode> = topo
        .ports(s1.id)
        .iter()
        .map(|p| {
            let Peer::Host { host: h } = p.peer else {
                panic!("s1 has only host ports")
            };
            let a = topo.host(h).name == "a";
            PortNode {
                index: p.index,
                ifname: nics[if a { 1 } else { 2 }].clone(),
                mac: Mac(if a { SWITCH_0 } else { SWITCH_1 }),
                peer_mac: Mac(if a { HOST_A } else { HOST_B }),
                peer_ifname: nics[if a { 0 } else { 3 }].clone(),
                peer: PortPeer::Host(h),
                gateways: Vec::new(),
            }
        })
        .collect();
    let node = SwitchNode {
        name: "s1".into(),
        id: s1.id,
        ports,
        netns: sw,
    };
    let daemon = SwitchDaemon::start(&bin, &topo_path.0, &node, &["--no-emulation"])
        .expect("the switch starts on the virtio NICs");

    let a_to_b = exchange(&ha, "10.88.1.2", &hb, "10.88.2.2", 20000);
    let b_to_a = exchange(&hb, "10.88.2.2", &ha, "10.88.1.2", 30000);
    let stats = daemon.fresh_stats().expect("stats");
    let log = daemon.stop();
    assert_eq!(
        (a_to_b, b_to_a),
        (usize::from(FLOWS), usize::from(FLOWS)),
        "flows echoed through the switch, each way\n{log}"
    );

    let want_mode = std::env::var("LCMP_EXPECT_BIND_MODE").ok();
    for p in &stats.ports {
        let x = p.xsk.as_ref().expect("an AF_XDP port");
        eprintln!(
            "port {} ({}): xdp {}, bind {}, per queue (rx, tx): {:?}",
            p.index,
            p.name,
            x.xdp_mode,
            x.bind_mode,
            x.queues
                .iter()
                .map(|q| (q.queue, q.rx_frames, q.tx_frames))
                .collect::<Vec<_>>()
        );
        if let Some(want) = &want_mode {
            assert_eq!(&x.bind_mode, want, "bind mode of {}\n{log}", p.name);
        }
        assert_eq!(
            x.xdp_mode, "native (drv)",
            "virtio-net runs XDP in the driver"
        );
        let ids: Vec<u32> = x.queues.iter().map(|q| q.queue).collect();
        assert_eq!(ids, (0..QUEUES).collect::<Vec<_>>(), "a socket per queue");
        for q in &x.queues {
            assert!(
                q.rx_frames > 0,
                "{} queue {} received nothing: {:?}",
                p.name,
                q.queue,
                x.queues
            );
            // A port transmits on its first queue only (flow order).
            assert_eq!(
                q.tx_frames > 0,
                q.queue == 0,
                "{} TX: {:?}",
                p.name,
                x.queues
            );
        }
    }
}

/// A file removed when dropped.
struct TempFile(std::path::PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Sends one datagram on each of [`FLOWS`] source ports from `from`
/// (address `src`, ports `base`..) to `dst`:`base` in `to`, which echoes
/// it; retries each
/// flow until its echo is back (frames can be lost while the NICs
/// settle). Returns the flows echoed.
///
/// Each direction has flows of its own: the host's tap steers a flow to
/// the guest queue it last saw the guest send that flow on (tun's
/// automatic queue selection), and the switch sends on its first queue, so
/// the echoes of one direction's flows all arrive on queue 0. The tap's
/// flow hash is symmetric with addresses and ports sorted apart, so the
/// two directions use different ports (`base`), not just swapped ends.
fn exchange(from: &Netns, src: &'static str, to: &Netns, dst: &'static str, base: u16) -> usize {
    let stop = Arc::new(AtomicBool::new(false));
    let stop_echo = stop.clone();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let echo = to.spawn_thread(move || {
        let s = UdpSocket::bind((dst, base)).expect("bind the echo");
        s.set_read_timeout(Some(Duration::from_millis(50))).ok();
        ready_tx.send(()).ok();
        let mut buf = [0u8; 2048];
        while !stop_echo.load(Ordering::Relaxed) {
            if let Ok((n, from)) = s.recv_from(&mut buf) {
                let _ = s.send_to(&buf[..n], from);
            }
        }
    });
    ready_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("echo server ready");
    let sender = from.spawn_thread(move || {
        let to = SocketAddr::new(dst.parse().expect("address"), base);
        let mut echoed = 0;
        for flow in 0..FLOWS {
            let s = UdpSocket::bind((src, base + 1 + flow)).expect("bind the sender");
            s.set_read_timeout(Some(Duration::from_millis(200))).ok();
            let payload = [flow.to_be_bytes().as_slice(), &[0x5a; 200]].concat();
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut buf = [0u8; 2048];
            while Instant::now() < deadline {
                s.send_to(&payload, to).expect("send");
                if matches!(s.recv_from(&mut buf), Ok((n, _)) if buf[..n] == payload[..]) {
                    echoed += 1;
                    break;
                }
            }
        }
        echoed
    });
    let echoed = sender.join().expect("sender").expect("sender runs");
    stop.store(true, Ordering::Relaxed);
    echo.join().expect("echo").expect("echo runs");
    echoed
}

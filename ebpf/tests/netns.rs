//! Root tests: the loader on veth pairs in network namespaces. Without root
//! they print a skip message and pass.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{Lab, Netns, FAR_IP, UNRESOLVED_IP};
use lcmp_ebpf::{attachments, AttachedMode, Error, VerdictCounters, XdpMode, XdpSteering};

const WAIT: Duration = Duration::from_secs(5);

fn attach(ns: &Netns, ifname: &str, mode: XdpMode) -> Result<XdpSteering, Error> {
    ns.run(|| XdpSteering::attach(ifname, mode))
}

fn attached_in(ns: &Netns, ifname: &str) -> lcmp_ebpf::XdpAttachments {
    ns.run(|| attachments(ifname)).expect("query XDP state")
}

fn send_udp(lab: &Lab, to_ip: &str, n: usize) {
    let s = lab.h1_socket(0);
    for i in 0..n {
        s.send_to(format!("probe {i}").as_bytes(), (to_ip, 9))
            .expect("send");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn counters_reach(
    s: &XdpSteering,
    what: &str,
    pred: impl Fn(&VerdictCounters) -> bool,
) -> VerdictCounters {
    let mut last = VerdictCounters::default();
    let ok = common::wait_until(WAIT, || {
        last = s.counters().expect("read counters");
        pred(&last)
    });
    assert!(ok, "counters never showed {what}: {last:?}");
    last
}

fn check_mode(mode: XdpMode, expect: AttachedMode) {
    let lab = Lab::new();
    let s = attach(&lab.sw, "sw0", mode).expect("attach");
    assert_eq!(s.mode(), expect);
    assert!(s.is_attached());
    let a = attached_in(&lab.sw, "sw0");
    match expect {
        AttachedMode::Native => assert_eq!((a.native, a.generic), (Some(s.program_id()), None)),
        AttachedMode::Generic => assert_eq!((a.native, a.generic), (None, Some(s.program_id()))),
    }
    assert_eq!(s.counters().unwrap(), VerdictCounters::default());

    // IPv4 to a resolved neighbour: IP, but no socket registered -> kernel.
    send_udp(&lab, FAR_IP, 3);
    let c = counters_reach(&s, "3 IPv4 frames passed for lack of a socket", |c| {
        c.passed_no_socket >= 3
    });
    assert_eq!(c.redirected, 0, "{c:?}");

    // An unresolved address makes h1 send ARP requests -> kernel.
    send_udp(&lab, UNRESOLVED_IP, 1);
    let c = counters_reach(&s, "an ARP request", |c| c.passed_arp >= 1);
    assert_eq!(
        (c.redirected, c.passed_vlan, c.passed_nd, c.truncated),
        (0, 0, 0, 0),
        "{c:?}"
    );

    s.detach().expect("detach");
    assert!(
        attached_in(&lab.sw, "sw0").is_empty(),
        "detach left a program behind"
    );
}

#[test]
fn generic_mode_counts_arp_and_ipv4() {
    require_root!();
    check_mode(XdpMode::Generic, AttachedMode::Generic);
}

#[test]
fn native_mode_counts_arp_and_ipv4() {
    require_root!();
    check_mode(XdpMode::Native, AttachedMode::Native);
}

#[test]
fn auto_mode_picks_native_on_veth() {
    require_root!();
    let lab = Lab::new();
    let s = attach(&lab.sw, "sw0", XdpMode::Auto).expect("attach");
    assert_eq!(s.mode(), AttachedMode::Native);
    drop(s);
    assert!(
        attached_in(&lab.sw, "sw0").is_empty(),
        "drop left a program behind"
    );
}

#[test]
fn vlan_non_ip_runts_and_neighbour_discovery_go_to_the_kernel() {
    require_root!();
    let lab = Lab::new();
    let s = attach(&lab.sw, "sw0", XdpMode::Generic).expect("attach");

    // The kernel here has no 8021q module: build tagged frames by hand.
    let mut tagged_ipv4 = vec![0x00, 0x0a, 0x08, 0x00]; // VID 10, IPv4 inside
    tagged_ipv4.extend_from_slice(&[
        0x45, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 10, 98, 0, 1, 10, 98, 0, 2,
    ]);
    for tpid in [0x8100, 0x88a8, 0x9100] {
        common::send_raw(&lab.h1, "h1", &common::frame_to_sw0(tpid, &tagged_ipv4));
    }
    counters_reach(&s, "3 VLAN-tagged frames", |c| c.passed_vlan >= 3);

    // LLDP: not IP.
    common::send_raw(&lab.h1, "h1", &common::frame_to_sw0(0x88cc, &[0; 46]));
    counters_reach(&s, "an LLDP frame", |c| c.passed_non_ip >= 1);

    // Runt: an IPv4 EtherType with 10 bytes of header.
    common::send_raw(&lab.h1, "h1", &common::frame_to_sw0(0x0800, &[0x45; 10]));
    counters_reach(&s, "a truncated IPv4 frame", |c| c.truncated >= 1);

    lab.h1.sysctl("net.ipv6.conf.h1.disable_ipv6=0");
    lab.h1.exec(&[
        "ip",
        "-6",
        "addr",
        "add",
        "fd99::1/64",
        "dev",
        "h1",
        "nodad",
    ]);
    let sock6 = common::udp_socket(&lab.h1, "[fd99::1]:0");
    // No neighbour entry for fd99::3: h1 sends a Neighbor Solicitation.
    sock6.send_to(b"nd", ("fd99::3", 9)).unwrap();
    let c = counters_reach(&s, "a Neighbor Solicitation", |c| c.passed_nd >= 1);
    assert_eq!(c.redirected, 0, "{c:?}");
}

#[test]
fn second_attach_while_first_is_alive_is_refused() {
    require_root!();
    let lab = Lab::new();
    let first = attach(&lab.sw, "sw0", XdpMode::Native).expect("attach");
    let err = attach(&lab.sw, "sw0", XdpMode::Native).expect_err("second attach must fail");
    match &err {
        Error::Busy { prog_id, .. } => assert_eq!(*prog_id, first.program_id(), "{err}"),
        other => panic!("expected Error::Busy, got {other}"),
    }
    // The live owner is untouched.
    assert_eq!(attached_in(&lab.sw, "sw0").native, Some(first.program_id()));
}

/// Starts `lcmp-xdp-attach` in the switch namespace and waits for its
/// "attached" line; returns the child and the program id it reported.
fn spawn_owner(lab: &Lab, mode: &str) -> (std::process::Child, u32) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lcmp-xdp-attach"))
        .args(["--netns", &lab.sw.name, "sw0", "--mode", mode])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn lcmp-xdp-attach");
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let prog_id = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("prog_id="))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("unexpected output from lcmp-xdp-attach: {line:?}"));
    (child, prog_id)
}

#[test]
fn restart_after_kill_9_reattaches() {
    require_root!();
    let lab = Lab::new();
    for mode in ["native", "generic"] {
        let (mut child, prog_id) = spawn_owner(&lab, mode);
        let a = attached_in(&lab.sw, "sw0");
        assert!(
            a.native == Some(prog_id) || a.generic == Some(prog_id),
            "{a:?}"
        );

        child.kill().expect("SIGKILL"); // std sends SIGKILL
        let status = child.wait().unwrap();
        assert!(!status.success());
        // bpf_link: the kernel detached the program when the process died.
        let left = attached_in(&lab.sw, "sw0");
        assert!(
            left.is_empty(),
            "{mode}: program left attached after kill -9: {left:?}"
        );

        let again = attach(&lab.sw, "sw0", XdpMode::Native).expect("re-attach after kill -9");
        assert_ne!(again.program_id(), prog_id);
        drop(again);
    }
}

#[test]
fn graceful_exit_detaches() {
    require_root!();
    let lab = Lab::new();
    let (mut child, prog_id) = spawn_owner(&lab, "auto");
    assert_eq!(attached_in(&lab.sw, "sw0").native, Some(prog_id));
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "counters").unwrap();
    drop(stdin); // EOF: the tool detaches and exits
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("redirected=0"), "{text}");
    assert!(text.contains("detached"), "{text}");
    assert!(attached_in(&lab.sw, "sw0").is_empty());
}

#[test]
fn stale_netlink_program_is_replaced() {
    require_root!();
    let lab = Lab::new();
    // Another tool (iproute2, through netlink) left a generic-mode program
    // behind; netlink attachments outlive their process.
    let obj =
        std::env::temp_dir().join(format!("lcmp_xdp-{}-{}.o", std::process::id(), lab.sw.name));
    std::fs::write(&obj, lcmp_ebpf::object()).unwrap();
    let res = std::panic::catch_unwind(|| {
        lab.sw.exec(&[
            "ip",
            "link",
            "set",
            "dev",
            "sw0",
            "xdpgeneric",
            "obj",
            obj.to_str().unwrap(),
            "sec",
            "xdp",
        ]);
    });
    let _ = std::fs::remove_file(&obj);
    if let Err(panic) = res {
        std::panic::resume_unwind(panic);
    }
    let stale = attached_in(&lab.sw, "sw0");
    let stale_id = stale.generic.expect("iproute2 attached a generic program");

    // Native requested while a generic program sits there: the kernel would
    // refuse both modes at once, so the leftover must go first.
    let s = attach(&lab.sw, "sw0", XdpMode::Native).expect("attach over a stale program");
    assert_eq!(s.mode(), AttachedMode::Native);
    let now = attached_in(&lab.sw, "sw0");
    assert_eq!(now.native, Some(s.program_id()));
    assert_eq!(now.generic, None, "stale program {stale_id} still attached");
    drop(s);
    assert!(attached_in(&lab.sw, "sw0").is_empty());
}

#[test]
fn socket_queue_out_of_range_is_rejected() {
    require_root!();
    let lab = Lab::new();
    let mut s = attach(&lab.sw, "sw0", XdpMode::Generic).expect("attach");
    let err = s.register_socket(lcmp_ebpf::MAX_QUEUES, 0).unwrap_err();
    assert!(matches!(err, Error::QueueOutOfRange { .. }), "{err}");
    // A non-XSK fd is refused by the kernel.
    let udp = lab.h1_socket(0);
    use std::os::fd::AsRawFd;
    assert!(s.register_socket(0, udp.as_raw_fd()).is_err());
    s.unregister_socket(0)
        .expect("unregistering an empty slot is fine");
}

#[test]
fn rx_queues_are_counted_as_ethtool_shows_them() {
    require_root!();
    let ns = Netns::new("rxq");
    // A veth end has as many RX queues as it was made with (veth reports
    // them as RX channels; unset, the count follows the machine's CPUs).
    ns.exec(&[
        "ip",
        "link",
        "add",
        "q4",
        "numrxqueues",
        "4",
        "numtxqueues",
        "4",
        "type",
        "veth",
        "peer",
        "name",
        "q1",
        "numrxqueues",
        "1",
        "numtxqueues",
        "1",
    ]);
    let counts = ns.run(|| {
        [
            lcmp_ebpf::sys::rx_queue_count("q4").map_err(|e| e.raw_os_error()),
            lcmp_ebpf::sys::rx_queue_count("q1").map_err(|e| e.raw_os_error()),
            // Loopback reports no channels: one queue is all there is.
            lcmp_ebpf::sys::rx_queue_count("lo").map_err(|e| e.raw_os_error()),
            lcmp_ebpf::sys::rx_queue_count("nosuch0").map_err(|e| e.raw_os_error()),
        ]
    });
    assert_eq!(
        counts,
        [Ok(Some(4)), Ok(Some(1)), Ok(None), Err(Some(libc::ENODEV))]
    );
}

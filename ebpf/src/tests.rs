//! Unit tests. Those that load the program into the kernel need root and
//! skip (with a message) without it; the rest are pure.

use super::*;
use aya::programs::{TestRun, TestRunOptions};

const XDP_PASS: u32 = 2;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

macro_rules! require_root {
    () => {
        if !is_root() {
            eprintln!("skipping: this test loads BPF programs and needs root");
            return;
        }
    };
}

// ---- the object, without the kernel ----

#[test]
fn object_is_aligned_elf() {
    let o = object();
    assert_eq!(&o[..4], b"\x7fELF");
    assert_eq!(o.as_ptr() as usize % 32, 0);
}

#[test]
fn object_has_program_and_maps() {
    let obj = aya_obj::Object::parse(object()).expect("embedded object parses");
    assert!(obj.btf.is_some(), "object must carry BTF (built with -g)");
    assert_eq!(obj.license.to_str().unwrap(), "Apache-2.0");

    let prog = obj.programs.get(PROGRAM_NAME).expect("program lcmp_xdp");
    assert!(
        matches!(
            prog.section,
            aya_obj::ProgramSection::Xdp { frags: false, .. }
        ),
        "{:?}",
        prog.section
    );

    const BPF_MAP_TYPE_PERCPU_ARRAY: u32 = 6;
    const BPF_MAP_TYPE_XSKMAP: u32 = 17;
    let xsks = obj.maps.get(XSKMAP_NAME).expect("map xsks");
    assert_eq!(xsks.map_type(), BPF_MAP_TYPE_XSKMAP);
    assert_eq!((xsks.key_size(), xsks.value_size()), (4, 4));
    assert_eq!(xsks.max_entries(), MAX_QUEUES);

    let verdicts = obj.maps.get(COUNTERS_MAP_NAME).expect("map verdicts");
    assert_eq!(verdicts.map_type(), BPF_MAP_TYPE_PERCPU_ARRAY);
    assert_eq!((verdicts.key_size(), verdicts.value_size()), (4, 8));
    assert_eq!(verdicts.max_entries(), slot::COUNT);
}

#[test]
fn shared_header_matches_rust() {
    let header = include_str!("bpf/lcmp_shared.h");
    let defines: std::collections::HashMap<&str, u32> = header
        .lines()
        .filter_map(|l| {
            let mut w = l.strip_prefix("#define ")?.split_whitespace();
            Some((w.next()?, w.next()?.parse().ok()?))
        })
        .collect();
    let expect = [
        ("LCMP_CNT_REDIRECTED", slot::REDIRECTED),
        ("LCMP_CNT_PASSED_NO_SOCKET", slot::PASSED_NO_SOCKET),
        ("LCMP_CNT_PASSED_ARP", slot::PASSED_ARP),
        ("LCMP_CNT_PASSED_ND", slot::PASSED_ND),
        ("LCMP_CNT_PASSED_VLAN", slot::PASSED_VLAN),
        ("LCMP_CNT_PASSED_NON_IP", slot::PASSED_NON_IP),
        ("LCMP_CNT_TRUNCATED", slot::TRUNCATED),
        ("LCMP_CNT_PASSED_MULTICAST", slot::PASSED_MULTICAST),
        ("LCMP_CNT_PASSED_LOCAL", slot::PASSED_LOCAL),
        ("LCMP_LOCAL_MAX_ENTRIES", MAX_LOCAL_ADDRESSES),
        ("LCMP_CNT_COUNT", slot::COUNT),
        ("LCMP_XSKS_MAX_ENTRIES", MAX_QUEUES),
    ];
    for (name, value) in expect {
        assert_eq!(defines.get(name), Some(&value), "{name} in lcmp_shared.h");
    }
    let counters_in_header = defines
        .keys()
        .filter(|k| k.starts_with("LCMP_CNT_") && **k != "LCMP_CNT_COUNT")
        .count();
    assert_eq!(counters_in_header as u32, slot::COUNT);
}

#[test]
fn counters_arithmetic() {
    let c = VerdictCounters::from_slots([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    assert_eq!(c.redirected, 1);
    assert_eq!(c.truncated, 7);
    assert_eq!(c.passed_multicast, 8);
    assert_eq!(c.passed_local, 9);
    assert_eq!(c.total(), 45);
    assert_eq!(c.passed(), 44);
    let names: Vec<_> = c.as_pairs().iter().map(|(n, _)| *n).collect();
    assert_eq!(names[0], "redirected");
    let later = VerdictCounters {
        passed_arp: 10,
        ..c
    };
    assert_eq!(
        later.delta_since(&c),
        VerdictCounters {
            passed_arp: 7,
            ..Default::default()
        }
    );
    assert_eq!(c.delta_since(&later).passed_arp, 0);
}

#[test]
fn handle_is_send() {
    fn assert_send<T: Send>() {}
    assert_send::<XdpSteering>();
}

#[test]
fn unknown_interface_is_reported() {
    let e = XdpSteering::attach("no-such-if-x", XdpMode::Auto).unwrap_err();
    assert!(matches!(e, Error::UnknownInterface(_)), "{e}");
    assert!(matches!(
        attachments("bad\0name"),
        Err(Error::UnknownInterface(_))
    ));
}

// ---- fixtures through BPF_PROG_TEST_RUN (root) ----

const MAC_A: [u8; 6] = [0x02, 0, 0, 0, 0, 0xa];
const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0, 0xb];

fn eth(ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(14 + payload.len());
    f.extend_from_slice(&MAC_A);
    f.extend_from_slice(&MAC_B);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

fn ipv4_udp() -> Vec<u8> {
    let mut ip = vec![0x45, 0, 0, 28, 0, 0, 0x40, 0, 64, 17, 0, 0];
    ip.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
    ip.extend_from_slice(&[0x9c, 0x40, 0x9c, 0x41, 0, 8, 0, 0]); // UDP, no payload
    ip
}

fn ipv4_to(dst: [u8; 4]) -> Vec<u8> {
    let mut ip = ipv4_udp();
    ip[16..20].copy_from_slice(&dst);
    ip
}

fn ipv6_to(next_header: u8, dst: [u8; 16], payload: &[u8]) -> Vec<u8> {
    let mut ip = ipv6(next_header, payload);
    ip[24..40].copy_from_slice(&dst);
    ip
}

fn ipv6(next_header: u8, payload: &[u8]) -> Vec<u8> {
    let mut ip = vec![0x60, 0, 0, 0];
    ip.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    ip.extend_from_slice(&[next_header, 255]);
    ip.extend_from_slice(&[0xfd, 0x99, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    ip.extend_from_slice(&[0xfd, 0x99, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    ip.extend_from_slice(payload);
    ip
}

fn icmpv6(ty: u8) -> Vec<u8> {
    ipv6(58, &[ty, 0, 0, 0, 0, 0, 0, 0])
}

/// (name, frame, expected slot). All expect XDP_PASS: no socket is
/// registered, so even IP frames fall back to the kernel.
fn fixtures() -> Vec<(&'static str, Vec<u8>, u32)> {
    let arp = {
        let mut a = vec![0, 1, 8, 0, 6, 4, 0, 1];
        a.extend_from_slice(&MAC_B);
        a.extend_from_slice(&[10, 0, 0, 1]);
        a.extend_from_slice(&[0; 6]);
        a.extend_from_slice(&[10, 0, 0, 2]);
        a
    };
    let vlan = |tpid: u16| {
        let mut inner = vec![0x00, 0x0a, 0x08, 0x00]; // VID 10, then IPv4
        inner.extend_from_slice(&ipv4_udp());
        eth(tpid, &inner)
    };
    let mut full_ip6 = ipv6(58, &[]);
    full_ip6.truncate(40); // ICMPv6 next header but no ICMPv6 byte
    vec![
        ("ipv4 udp", eth(0x0800, &ipv4_udp()), slot::PASSED_NO_SOCKET),
        (
            "ipv6 udp",
            eth(0x86dd, &ipv6(17, &[0; 8])),
            slot::PASSED_NO_SOCKET,
        ),
        (
            "icmpv6 echo",
            eth(0x86dd, &icmpv6(128)),
            slot::PASSED_NO_SOCKET,
        ),
        (
            "mld report 143",
            eth(0x86dd, &icmpv6(143)),
            slot::PASSED_NO_SOCKET,
        ),
        (
            "mld done 132",
            eth(0x86dd, &icmpv6(132)),
            slot::PASSED_NO_SOCKET,
        ),
        (
            "icmpv6 138",
            eth(0x86dd, &icmpv6(138)),
            slot::PASSED_NO_SOCKET,
        ),
        (
            "router solicitation",
            eth(0x86dd, &icmpv6(133)),
            slot::PASSED_ND,
        ),
        ("router advert", eth(0x86dd, &icmpv6(134)), slot::PASSED_ND),
        (
            "neighbour solicitation",
            eth(0x86dd, &icmpv6(135)),
            slot::PASSED_ND,
        ),
        (
            "neighbour advert",
            eth(0x86dd, &icmpv6(136)),
            slot::PASSED_ND,
        ),
        ("redirect", eth(0x86dd, &icmpv6(137)), slot::PASSED_ND),
        ("arp", eth(0x0806, &arp), slot::PASSED_ARP),
        ("802.1q", vlan(0x8100), slot::PASSED_VLAN),
        ("802.1ad", vlan(0x88a8), slot::PASSED_VLAN),
        ("qinq 0x9100", vlan(0x9100), slot::PASSED_VLAN),
        ("lldp", eth(0x88cc, &[0; 32]), slot::PASSED_NON_IP),
        (
            "ipv4 multicast",
            eth(0x0800, &ipv4_to([224, 0, 0, 251])),
            slot::PASSED_MULTICAST,
        ),
        (
            "ipv4 broadcast",
            eth(0x0800, &ipv4_to([255, 255, 255, 255])),
            slot::PASSED_MULTICAST,
        ),
        (
            "ipv6 multicast (mld to ff02::16)",
            eth(
                0x86dd,
                &ipv6_to(
                    58,
                    [0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x16],
                    &[143, 0, 0, 0, 0, 0, 0, 0],
                ),
            ),
            slot::PASSED_MULTICAST,
        ),
        (
            "ipv4 to the port's own address",
            eth(0x0800, &ipv4_to([10, 0, 1, 1])),
            slot::PASSED_LOCAL,
        ),
        (
            "ipv6 to the port's own address",
            eth(
                0x86dd,
                &ipv6_to(
                    17,
                    [0xfd, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
                    &[0; 8],
                ),
            ),
            slot::PASSED_LOCAL,
        ),
        ("mpls", eth(0x8847, &[0; 32]), slot::PASSED_NON_IP),
        (
            "802.3 length field",
            eth(0x0040, &[0; 64]),
            slot::PASSED_NON_IP,
        ),
        (
            "ethernet header only, ipv4",
            eth(0x0800, &[]),
            slot::TRUNCATED,
        ),
        (
            "ipv4 19 bytes",
            eth(0x0800, &ipv4_udp()[..19]),
            slot::TRUNCATED,
        ),
        (
            "ethernet header only, ipv6",
            eth(0x86dd, &[]),
            slot::TRUNCATED,
        ),
        (
            "ipv6 39 bytes",
            eth(0x86dd, &ipv6(17, &[])[..39]),
            slot::TRUNCATED,
        ),
        (
            "icmpv6 without type byte",
            eth(0x86dd, &full_ip6),
            slot::TRUNCATED,
        ),
    ]
}

#[test]
fn fixtures_give_expected_verdicts() {
    require_root!();
    let (mut ebpf, _id) = load().expect("load");
    // The interface's own addresses (as the loader puts them at attach).
    set_local_addresses(
        &mut ebpf,
        &["10.0.1.1".parse().unwrap(), "fd00:1::1".parse().unwrap()],
    )
    .expect("local addresses");
    let counters: PerCpuArray<MapData, u64> = ebpf
        .take_map(COUNTERS_MAP_NAME)
        .unwrap()
        .try_into()
        .unwrap();
    let prog = xdp_program(&mut ebpf);
    for (name, frame, slot) in fixtures() {
        let before = read_counters(&counters).unwrap();
        let result = prog
            .test_run(TestRunOptions {
                data_in: Some(&frame),
                ..Default::default()
            })
            .unwrap_or_else(|e| panic!("{name}: test run failed: {e}"));
        assert_eq!(result.return_value, XDP_PASS, "{name}: action");
        let delta = read_counters(&counters).unwrap().delta_since(&before);
        let mut expected = [0u64; slot::COUNT as usize];
        expected[slot as usize] = 1;
        assert_eq!(delta, VerdictCounters::from_slots(expected), "{name}");
    }
}

#[test]
fn netlink_query_of_loopback() {
    require_root!();
    // Nothing attaches XDP to lo in tests; the query itself must work.
    let a = attachments("lo").expect("query lo");
    assert!(a.offload.is_none());
}

#[test]
fn bpf_command_numbers_match_kernel_headers() {
    use aya_obj::generated::bpf_cmd;
    assert_eq!(
        sys::BPF_LINK_GET_FD_BY_ID,
        bpf_cmd::BPF_LINK_GET_FD_BY_ID as libc::c_long
    );
    assert_eq!(
        sys::BPF_LINK_DETACH,
        bpf_cmd::BPF_LINK_DETACH as libc::c_long
    );
}

//! The size caps (`lcmp_topology::limits`): a network beyond one is refused
//! when the file is parsed, with one line naming the count found and the
//! cap; a network at every cap parses (in time linear in the file: counting
//! lines for every entry made 200,000 `[[dc]]` entries take over a minute).

use std::fmt::Write as _;

use lcmp_topology::limits::{
    MAX_DCS, MAX_HOSTS, MAX_HOST_ADDRESSES, MAX_LINKS, MAX_PREFIXES, MAX_SWITCHES,
};
use lcmp_topology::{HostTemplate, Topology};

mod common;
use common::switches_and_links;

fn refused(text: &str, file: &str) -> String {
    Topology::parse(text, file).unwrap_err().to_string()
}

#[test]
fn a_network_beyond_the_switch_cap_is_refused_when_parsed() {
    assert_eq!(MAX_SWITCHES, 4_096);
    // The probe's 20,000-switch chain (it took over 60 s and 1.4 GB) and
    // 16,000-switch binary tree (a 4 GB allocation failed after 38 s).
    // switch[4096] starts on line 4096 * 4 + 1 = 16385.
    let chain = switches_and_links(20_000, |i| i - 1);
    assert_eq!(
        refused(&chain, "chain.toml"),
        "chain.toml:16385: switch[4096]: 20000 [[switch]] entries; a topology has at most \
         4096 switches"
    );
    let tree = switches_and_links(16_000, |i| (i - 1) / 2);
    assert_eq!(
        refused(&tree, "tree.toml"),
        "tree.toml:16385: switch[4096]: 16000 [[switch]] entries; a topology has at most \
         4096 switches"
    );
}

#[test]
fn more_dcs_links_hosts_prefixes_or_addresses_than_the_caps_are_refused() {
    assert_eq!(
        (
            MAX_DCS,
            MAX_LINKS,
            MAX_HOSTS,
            MAX_PREFIXES,
            MAX_HOST_ADDRESSES
        ),
        (4_096, 16_384, 65_536, 16_384, 65_536)
    );
    let two = "[[switch]]\nname = \"a\"\nprefixes = [\"10.0.0.0/8\"]\n\n\
               [[switch]]\nname = \"b\"\n\n\
               [[link]]\na = \"a\"\nb = \"b\"\nrate = \"1Gbps\"\ndelay = \"1ms\"\n\n";
    // The probe's 200,000 DCs (over 60 s before), 3 lines each: dc[4096]
    // is on line 4096 * 3 + 1 = 12289.
    let mut dcs = String::new();
    for i in 0..200_000 {
        let _ = write!(dcs, "[[dc]]\nname = \"d{i}\"\n\n");
    }
    dcs.push_str(two);
    assert_eq!(
        refused(&dcs, "dcs.toml"),
        "dcs.toml:12289: dc[4096]: 200000 [[dc]] entries; a topology has at most 4096 DCs"
    );
    // Links: `two` takes lines 1-13 with its link; then 16,384 more
    // parallel links of 6 lines each, so link[16384] (the 16,384th extra
    // one) starts on line 14 + 16383 * 6 = 98312.
    let mut links = String::from(two);
    for _ in 0..MAX_LINKS {
        links.push_str("[[link]]\na = \"a\"\nb = \"b\"\nrate = \"1Gbps\"\ndelay = \"1ms\"\n\n");
    }
    assert_eq!(
        refused(&links, "links.toml"),
        "links.toml:98312: link[16384]: 16385 [[link]] entries; a topology has at most 16384 \
         links"
    );
    // Hosts, 7 lines each from line 14: host[65536] on 14 + 65536 * 7.
    let mut hosts = String::from(two);
    for i in 0..=MAX_HOSTS {
        let _ = write!(
            hosts,
            "[[host]]\nname = \"h{i}\"\nswitch = \"a\"\naddresses = [\"10.{}.{}.{}/8\"]\n\
             rate = \"1Gbps\"\ndelay = \"1us\"\n\n",
            i >> 16,
            (i >> 8) & 255,
            i & 255
        );
    }
    assert_eq!(
        refused(&hosts, "hosts.toml"),
        format!(
            "hosts.toml:{}: host[65536]: 65537 [[host]] entries; a topology has at most 65536 \
             hosts",
            14 + 65_536 * 7
        )
    );
    // Prefixes and addresses count over all entries: two switches with
    // 10,000 prefixes each; the 16,385th is switch[1].prefixes[6384], on
    // the line of switch[1]'s list.
    let many = |first: usize| -> String {
        (first..first + 10_000)
            .map(|k| format!("\"10.{}.{}.0/24\"", k / 256, k % 256))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let prefixes = format!(
        "[[switch]]\nname = \"a\"\nprefixes = [{}]\n\n[[switch]]\nname = \"b\"\nprefixes = [{}]\n",
        many(0),
        many(10_000)
    );
    assert_eq!(
        refused(&prefixes, "prefixes.toml"),
        "prefixes.toml:7: switch[1].prefixes[6384]: 20000 switch prefixes in all; a topology \
         has at most 16384"
    );
    // One host with 65,537 addresses, its list on line 17.
    let addresses: Vec<String> = (0..=MAX_HOST_ADDRESSES)
        .map(|i| format!("\"10.{}.{}.{}/8\"", i >> 16, (i >> 8) & 255, i & 255))
        .collect();
    let one_host = format!(
        "{two}[[host]]\nname = \"h\"\nswitch = \"a\"\naddresses = [{}]\nrate = \"1Gbps\"\n\
         delay = \"1us\"\n",
        addresses.join(", ")
    );
    assert_eq!(
        refused(&one_host, "addresses.toml"),
        "addresses.toml:17: host[0].addresses[65536]: 65537 host addresses in all; a topology \
         has at most 65536"
    );
}

/// A network at every cap: 4,096 DCs and switches (switch `i` in DC `i`,
/// delivering 4 prefixes `10.<i/16>.<(i%16)*16 + j>.0/24`), 16,384 links
/// (a chain, each pair of neighbours joined 4 times, the first 4 pairs 5
/// times: 16,384 = 4 * 4,095 + 4), 65,536 hosts (16 per
/// switch, host `h` of switch `i` at `.<2+h>` of prefix `h % 4`).
fn at_the_caps() -> String {
    let n = MAX_SWITCHES;
    let mut t = String::new();
    for i in 0..MAX_DCS {
        let _ = write!(t, "[[dc]]\nname = \"d{i}\"\n\n");
    }
    let prefix = |i: usize, j: usize| format!("10.{}.{}", i / 16, (i % 16) * 16 + j);
    for i in 0..n {
        let p: Vec<String> = (0..4)
            .map(|j| format!("\"{}.0/24\"", prefix(i, j)))
            .collect();
        let _ = write!(
            t,
            "[[switch]]\nname = \"s{i}\"\ndc = \"d{i}\"\nprefixes = [{}]\n\n",
            p.join(", ")
        );
    }
    for l in 0..MAX_LINKS {
        let a = l % (n - 1);
        let _ = write!(
            t,
            "[[link]]\na = \"s{a}\"\nb = \"s{}\"\nrate = \"10Gbps\"\ndelay = \"1ms\"\n\n",
            a + 1
        );
    }
    for i in 0..n {
        for h in 0..MAX_HOSTS / n {
            let _ = write!(
                t,
                "[[host]]\nname = \"s{i}h{h}\"\nswitch = \"s{i}\"\naddresses = [\"{}.{}/24\"]\n\
                 rate = \"10Gbps\"\ndelay = \"1us\"\n\n",
                prefix(i, h % 4),
                2 + h
            );
        }
    }
    t
}

#[test]
fn a_network_at_every_cap_parses() {
    let t = Topology::parse(&at_the_caps(), "caps.toml").unwrap();
    assert_eq!(
        (
            t.dcs().len(),
            t.switches().len(),
            t.links().len(),
            t.hosts().len()
        ),
        (MAX_DCS, MAX_SWITCHES, MAX_LINKS, MAX_HOSTS)
    );
    let prefixes: usize = t.switches().iter().map(|s| s.prefixes.len()).sum();
    assert_eq!(prefixes, MAX_PREFIXES);
    // s100 has 4 links to s99, 4 to s101 (ports 0-7), then its 16 hosts;
    // s1 5 and 5.
    let s100 = t.switch_by_name("s100").unwrap();
    assert_eq!(t.ports(s100.id).len(), 24);
    assert_eq!(t.dc(s100.dc.unwrap()).name, "d100");
    assert_eq!(t.ports(t.switch_by_name("s1").unwrap().id).len(), 26);
}

#[test]
fn generated_hosts_stay_within_the_caps() {
    // 300 switches in a chain, each delivering a /24 with room for 253
    // hosts (.2 .. .254) and 2 link ports: 253 hosts each would be 75,900.
    // 259 switches take 259 * 253 = 65,527 hosts; s259 would make 65,780.
    let chain = Topology::parse(&switches_and_links(300, |i| i - 1), "chain.toml").unwrap();
    let host = HostTemplate::default();
    assert_eq!(
        chain
            .with_generated_hosts(253, host)
            .unwrap_err()
            .to_string(),
        "chain.toml: switch[259]: 253 generated hosts on switch \"s259\" make more than 65536 \
         hosts, the most a topology may have"
    );
    let fewer = chain.with_generated_hosts(218, host).unwrap();
    // 300 * 218 = 65,400 hosts.
    assert_eq!(fewer.hosts().len(), 65_400);
}

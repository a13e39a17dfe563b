//! Invalid files: every error names the file, the line and the field.

use lcmp_topology::{Topology, TopologyError};

const FILE: &str = "topologies/x.toml";

/// Lines 1-12. Tests append from line 13 on.
const BASE: &str = r#"[[dc]]
name = "DC1"

[[switch]]
name = "s1"
dc = "DC1"
prefixes = ["10.0.1.0/24", "fd00:1::/64"]

[[switch]]
name = "s2"
prefixes = ["10.0.2.0/24"]

"#;

/// Lines 13-17 when appended to BASE.
const LINK: &str = r#"[[link]]
a = "s1"
b = "s2"
rate = "1Gbps"
delay = "1ms"
"#;

fn err(tail: &str) -> TopologyError {
    let text = format!("{BASE}{tail}");
    match Topology::parse(&text, FILE) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e,
    }
}

/// Asserts the full message and its parts.
fn check(tail: &str, line: usize, field: &str, message: &str) {
    let e = err(tail);
    assert_eq!(e.to_string(), format!("{FILE}:{line}: {field}: {message}"));
    assert_eq!(e.file(), FILE);
    assert_eq!(e.line(), Some(line));
    assert_eq!(e.field(), Some(field));
}

#[test]
fn base_is_valid() {
    let t = Topology::parse(&format!("{BASE}{LINK}"), FILE).unwrap();
    assert_eq!(t.links().len(), 1);
    assert_eq!(
        t.links()[0].buffer_bytes,
        lcmp_topology::DEFAULT_BUFFER_BYTES
    );
}

#[test]
fn bad_rate_names_file_line_and_field() {
    // Three good links of 5 lines plus a blank line each (lines 13-30),
    // then link[3] from line 31, with its rate on line 34.
    let mut tail = String::new();
    for _ in 0..3 {
        tail.push_str(LINK);
        tail.push('\n');
    }
    tail.push_str("[[link]]\na = \"s1\"\nb = \"s2\"\nrate = \"20Gbs\"\ndelay = \"1ms\"\n");
    check(
        &tail,
        34,
        "link[3].rate",
        r#""20Gbs" is not a rate (expected e.g. "200Gbps")"#,
    );
}

#[test]
fn bad_delay_and_buffer() {
    check(
        "[[link]]\na = \"s1\"\nb = \"s2\"\nrate = \"1Gbps\"\ndelay = \"5 minutes\"\n",
        17,
        "link[0].delay",
        r#""5 minutes" is not a delay (expected e.g. "25ms")"#,
    );
    check(
        &format!("{LINK}buffer = \"32M\"\n"),
        18,
        "link[0].buffer",
        r#""32M" is not a buffer size (expected e.g. "32MB" or "128MiB")"#,
    );
    check(
        &format!("{LINK}\n[defaults]\nbuffer = \"0MB\"\n"),
        20,
        "defaults.buffer",
        r#""0MB": a buffer size must be positive"#,
    );
}

#[test]
fn zero_rate() {
    check(
        "[[link]]\na = \"s1\"\nb = \"s2\"\nrate = \"0Gbps\"\ndelay = \"1ms\"\n",
        16,
        "link[0].rate",
        r#""0Gbps": a rate must be positive"#,
    );
}

#[test]
fn unknown_switch() {
    check(
        "[[link]]\na = \"s1\"\nb = \"s9\"\nrate = \"1Gbps\"\ndelay = \"1ms\"\n",
        15,
        "link[0].b",
        r#"unknown switch "s9""#,
    );
    check(
        "[[host]]\nname = \"h\"\nswitch = \"nope\"\naddresses = [\"10.0.1.2/24\"]\nrate = \"1G\"\ndelay = \"1us\"\n",
        15,
        "host[0].switch",
        r#"unknown switch "nope""#,
    );
}

#[test]
fn link_to_a_host() {
    check(
        "[[host]]\nname = \"h\"\nswitch = \"s1\"\naddresses = [\"10.0.1.2/24\"]\nrate = \"1G\"\ndelay = \"1us\"\n\n\
         [[link]]\na = \"h\"\nb = \"s2\"\nrate = \"1Gbps\"\ndelay = \"1ms\"\n",
        21,
        "link[0].a",
        r#""h" is a host, not a switch (hosts are attached with [[host]])"#,
    );
}

#[test]
fn self_loop() {
    check(
        "[[link]]\na = \"s1\"\nb = \"s1\"\nrate = \"1Gbps\"\ndelay = \"1ms\"\n",
        15,
        "link[0].b",
        r#"link from "s1" to itself"#,
    );
}

#[test]
fn duplicate_names() {
    check(
        "[[switch]]\nname = \"s1\"\n",
        14,
        "switch[2].name",
        r#"duplicate name "s1" (first used at line 5)"#,
    );
    // Hosts and switches share one namespace.
    check(
        "[[host]]\nname = \"s2\"\nswitch = \"s1\"\naddresses = [\"10.0.1.2/24\"]\nrate = \"1G\"\ndelay = \"1us\"\n",
        14,
        "host[0].name",
        r#"duplicate name "s2" (first used at line 10)"#,
    );
    check(
        "[[dc]]\nname = \"DC1\"\n",
        14,
        "dc[1].name",
        r#"duplicate DC name "DC1" (first used at line 2)"#,
    );
    check(
        "[[switch]]\nname = \"bad name\"\n",
        14,
        "switch[2].name",
        r#""bad name" is not a valid switch name (use letters, digits, '_', '.', '-')"#,
    );
}

#[test]
fn unknown_dc() {
    check(
        "[[switch]]\nname = \"s3\"\ndc = \"DC9\"\n",
        15,
        "switch[2].dc",
        r#"unknown DC "DC9" (declare it with [[dc]])"#,
    );
}

#[test]
fn malformed_prefixes() {
    check(
        "[[switch]]\nname = \"s3\"\nprefixes = [\"10.3.0.0/16\", \"10.3.0.0\"]\n",
        15,
        "switch[2].prefixes[1]",
        r#""10.3.0.0" is not a prefix (expected e.g. "10.1.0.0/16" or "fd00:1::/64")"#,
    );
    check(
        "[[switch]]\nname = \"s3\"\nprefixes = [\"10.3.0.1/16\"]\n",
        15,
        "switch[2].prefixes[0]",
        "10.3.0.1/16 has host bits set (did you mean 10.3.0.0/16?)",
    );
    check(
        "[[switch]]\nname = \"s3\"\nprefixes = [\n  \"10.9.0.0/16\",\n  \"fd00:1::/64\",\n]\n",
        17,
        "switch[2].prefixes[1]",
        "prefix fd00:1::/64 is already delivered by another entry (line 7)",
    );
}

#[test]
fn host_addresses() {
    let host = |addr: &str| {
        format!(
            "[[host]]\nname = \"h\"\nswitch = \"s1\"\naddresses = [\"{addr}\"]\nrate = \"1G\"\ndelay = \"1us\"\n"
        )
    };
    check(
        &host("10.0.2.5/24"),
        16,
        "host[0].addresses[0]",
        r#"10.0.2.5 is not inside any prefix of switch "s1" (10.0.1.0/24, fd00:1::/64)"#,
    );
    check(
        &host("10.0.1.2"),
        16,
        "host[0].addresses[0]",
        r#""10.0.1.2" is not a host address with prefix length (expected e.g. "10.1.0.2/24" or "fd00:1::2/64")"#,
    );
    check(
        &host("10.0.1.0/24"),
        16,
        "host[0].addresses[0]",
        "10.0.1.0 is not a usable host address in 10.0.1.0/24",
    );
    // IPv6 is checked the same way and hosts may have several addresses.
    let ok = "[[host]]\nname = \"h\"\nswitch = \"s1\"\naddresses = [\"10.0.1.2/24\", \"fd00:1::2/64\"]\nrate = \"1G\"\ndelay = \"1us\"\n";
    Topology::parse(&format!("{BASE}{LINK}{ok}"), FILE).unwrap();
    check(
        &format!("{ok}\n[[host]]\nname = \"h2\"\nswitch = \"s1\"\naddresses = [\"fd00:1::2/64\"]\nrate = \"1G\"\ndelay = \"1us\"\n"),
        23,
        "host[1].addresses[0]",
        "address fd00:1::2 is already used (line 16)",
    );
}

#[test]
fn shape_errors_from_toml() {
    check(
        &format!("{LINK}rat = \"1Gbps\"\n"),
        18,
        "link[0].rat",
        "unknown field `rat`, expected one of `a`, `b`, `rate`, `delay`, `buffer`, `a_ifname`, `b_ifname`",
    );
    check(
        "[[link]]\na = \"s1\"\nb = \"s2\"\nrate = \"1Gbps\"\n",
        13,
        "link[0].delay",
        "required field is missing",
    );
    check(
        "[[link]]\na = \"s1\"\nb = \"s2\"\nrate = 100\ndelay = \"1ms\"\n",
        16,
        "link[0].rate",
        "invalid type: integer `100`, expected a string",
    );
    check(
        "[[lnk]]\na = \"s1\"\n",
        13,
        "lnk",
        "unknown field `lnk`, expected one of `defaults`, `dc`, `switch`, `host`, `link`",
    );
}

#[test]
fn syntax_error_has_line_but_no_field() {
    let e = err("[[link]\na = \"s1\"\n");
    assert_eq!(e.line(), Some(13));
    assert_eq!(e.field(), None);
    assert!(e.to_string().starts_with(&format!("{FILE}:13: ")), "{e}");
}

#[test]
fn interface_names() {
    check(
        &format!("{LINK}a_ifname = \"this-name-is-too-long\"\n"),
        18,
        "link[0].a_ifname",
        r#""this-name-is-too-long" is not a valid interface name (1 to 15 bytes, no '/', ':' or spaces)"#,
    );
    check(
        &format!("{LINK}a_ifname = \"eth1\"\n\n{LINK}a_ifname = \"eth1\"\n"),
        25,
        "link[1].a_ifname",
        r#"interface name "eth1" is used twice on this switch"#,
    );
    // The same name on different switches is fine.
    Topology::parse(
        &format!("{BASE}{LINK}a_ifname = \"eth1\"\nb_ifname = \"eth1\"\n"),
        FILE,
    )
    .unwrap();
}

#[test]
fn too_many_ports() {
    let mut text = String::from("[[switch]]\nname = \"hub\"\n\n");
    for i in 0..256 {
        text.push_str(&format!(
            "[[switch]]\nname = \"leaf{i}\"\n\n[[link]]\na = \"hub\"\nb = \"leaf{i}\"\nrate = \"1G\"\ndelay = \"1us\"\n\n"
        ));
    }
    let e = Topology::parse(&text, FILE).unwrap_err();
    // Each block is 9 lines after the 3-line header; block 255 starts on
    // line 4 + 255 * 9 and its link's `a` is 4 lines further.
    let line = 4 + 255 * 9 + 4;
    assert_eq!(
        e.to_string(),
        format!(r#"{FILE}:{line}: link[255].a: switch "hub" would have more than 255 ports"#)
    );
    // 255 ports are fine and numbered 0..=254.
    let cut = text.find("[[switch]]\nname = \"leaf255\"").unwrap();
    let t = Topology::parse(&text[..cut], FILE).unwrap();
    let hub = t.switch_by_name("hub").unwrap().id;
    assert_eq!(t.ports(hub).len(), 255);
    assert_eq!(t.ports(hub)[254].index, 254);
}

#[test]
fn load_names_the_path() {
    let dir = std::env::temp_dir().join(format!("lcmp-topology-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.toml");
    std::fs::write(
        &path,
        format!("{BASE}[[link]]\na = \"s1\"\nb = \"s2\"\nrate = \"20Gbs\"\ndelay = \"1ms\"\n"),
    )
    .unwrap();
    let e = Topology::load(&path).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            r#"{}:16: link[0].rate: "20Gbs" is not a rate (expected e.g. "200Gbps")"#,
            path.display()
        )
    );
    let missing = dir.join("missing.toml");
    let e = Topology::load(&missing).unwrap_err();
    assert!(matches!(e, TopologyError::Io { .. }));
    assert!(e.to_string().starts_with(&missing.display().to_string()));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Names that would become a command-line option (`-rf` as the argument of
/// `--switch`), a directory (`.`, `..`) or a hidden file.
#[test]
fn names_must_not_start_with_a_dash_or_a_dot() {
    for bad in ["-rf", "--help", ".", "..", ".hidden", "-"] {
        check(
            &format!("[[switch]]\nname = \"{bad}\"\n"),
            14,
            "switch[2].name",
            &format!("{bad:?} is not a valid switch name (it must not start with '-' or '.')"),
        );
        check(
            &format!(
                "[[host]]\nname = \"{bad}\"\nswitch = \"s1\"\naddresses = [\"10.0.1.2/24\"]\n\
                 rate = \"1G\"\ndelay = \"1us\"\n"
            ),
            14,
            "host[0].name",
            &format!("{bad:?} is not a valid host name (it must not start with '-' or '.')"),
        );
        check(
            &format!("[[dc]]\nname = \"{bad}\"\n"),
            14,
            "dc[1].name",
            &format!("{bad:?} is not a valid DC name (it must not start with '-' or '.')"),
        );
    }
    // Inside a name, '-' and '.' are fine.
    let t = Topology::parse(
        &format!("{BASE}{LINK}\n[[switch]]\nname = \"dc-1.edge_a\"\n\n[[link]]\na = \"s1\"\nb = \"dc-1.edge_a\"\nrate = \"1Gbps\"\ndelay = \"1ms\"\n"),
        FILE,
    )
    .unwrap();
    assert!(t.switch_by_name("dc-1.edge_a").is_some());
}

/// A switch's testbed control socket `/run/lcmp-testbed/<testbed>/<switch>.sock`
/// has 107 usable bytes: 18 + 16 (longest testbed name) + 1 + name + 5, so
/// the name may have 67 bytes. A host is only a namespace
/// `lcmptb-<testbed>-<host>` of at most 255 bytes (NAME_MAX): 7 + 16 + 1 +
/// name, so 231 bytes.
#[test]
fn name_length_limits() {
    let longest = "s".repeat(67);
    let t = Topology::parse(
        &format!(
            "[[switch]]\nname = \"{longest}\"\n\n[[switch]]\nname = \"b\"\n\n\
             [[link]]\na = \"{longest}\"\nb = \"b\"\nrate = \"1Gbps\"\ndelay = \"1ms\"\n"
        ),
        FILE,
    )
    .unwrap();
    assert_eq!(t.switches()[0].name.len(), 67);
    let too_long = "s".repeat(68);
    check(
        &format!("[[switch]]\nname = \"{too_long}\"\n"),
        14,
        "switch[2].name",
        &format!(
            "{too_long:?} is not a valid switch name (68 bytes, at most 67: its control socket \
             /run/lcmp-testbed/<testbed>/<switch>.sock must fit in 107 bytes)"
        ),
    );

    let host = |name: &str| {
        format!(
            "[[host]]\nname = \"{name}\"\nswitch = \"s1\"\naddresses = [\"10.0.1.2/24\"]\n\
             rate = \"1G\"\ndelay = \"1us\"\n"
        )
    };
    let longest = "h".repeat(231);
    let t = Topology::parse(&format!("{BASE}{LINK}\n{}", host(&longest)), FILE).unwrap();
    assert_eq!(t.hosts()[0].name.len(), 231);
    let too_long = "h".repeat(232);
    check(
        &host(&too_long),
        14,
        "host[0].name",
        // Messages show at most 100 characters of a value.
        &format!(
            "\"{}\"... (232 bytes) is not a valid host name (232 bytes, at most 231: its \
             network namespace lcmptb-<testbed>-<host> must fit in 255 bytes)",
            "h".repeat(100)
        ),
    );
}

#[test]
fn a_file_without_switches_is_an_error() {
    for text in [
        "",
        "# nothing yet\n",
        "[[dc]]\nname = \"DC1\"\n",
        "[defaults]\nbuffer = \"1MB\"\n",
    ] {
        let e = Topology::parse(text, FILE).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("{FILE}: the topology has no switches (declare at least one [[switch]])"),
            "{text:?}"
        );
        assert_eq!(e.line(), None);
    }
    // One switch needs no link.
    let t = Topology::parse("[[switch]]\nname = \"s1\"\n", FILE).unwrap();
    assert!(t.is_connected());
}

#[test]
fn switches_that_cannot_reach_each_other_are_an_error() {
    // BASE alone: s1 and s2 without a link.
    let e = Topology::parse(BASE, FILE).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{FILE}: the switches are not all connected: switch \"s1\" cannot reach switch \"s2\" \
             (2 groups of 1, 1 switches; one switch of each: \"s1\", \"s2\"); links must join \
             every switch to every other"
        )
    );
    // Groups {a, b, c}, {d}, {e, f}: largest first, so "a" and "e" are named
    // as the two that cannot reach each other. A host does not join groups.
    let mut text = String::new();
    for (i, n) in ["a", "b", "c", "d", "e", "f"].iter().enumerate() {
        text.push_str(&format!(
            "[[switch]]\nname = \"{n}\"\nprefixes = [\"10.0.{i}.0/24\"]\n\n"
        ));
    }
    text.push_str(
        "[[host]]\nname = \"h\"\nswitch = \"d\"\naddresses = [\"10.0.3.2/24\"]\nrate = \"1G\"\ndelay = \"1us\"\n\n",
    );
    for (a, b) in [("a", "b"), ("c", "b"), ("e", "f")] {
        text.push_str(&format!(
            "[[link]]\na = \"{a}\"\nb = \"{b}\"\nrate = \"1Gbps\"\ndelay = \"1ms\"\n\n"
        ));
    }
    let e = Topology::parse(&text, FILE).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{FILE}: the switches are not all connected: switch \"a\" cannot reach switch \"e\" \
             (3 groups of 3, 2, 1 switches; one switch of each: \"a\", \"e\", \"d\"); links must \
             join every switch to every other"
        )
    );
    // Linking d to f joins everything.
    text.push_str("[[link]]\na = \"d\"\nb = \"f\"\nrate = \"1Gbps\"\ndelay = \"1ms\"\n\n");
    text.push_str("[[link]]\na = \"d\"\nb = \"c\"\nrate = \"1Gbps\"\ndelay = \"1ms\"\n");
    assert!(Topology::parse(&text, FILE).unwrap().is_connected());
}

/// Units are case-sensitive in files too: `100GBps` would be read as
/// 100 Gbit/s and `20Mb` as 20 megabytes otherwise.
#[test]
fn ambiguous_units_name_the_field() {
    check(
        "[[link]]\na = \"s1\"\nb = \"s2\"\nrate = \"100GBps\"\ndelay = \"1ms\"\n",
        16,
        "link[0].rate",
        r#""100GBps" is not a rate: "B" is bytes; write "100Gbps" (bits per second)"#,
    );
    check(
        &format!("{LINK}buffer = \"20Mb\"\n"),
        18,
        "link[0].buffer",
        r#""20Mb" is not a buffer size: "b" is bits; write "20MB" (bytes)"#,
    );
    check(
        "[[link]]\na = \"s1\"\nb = \"s2\"\nrate = \"1Gbps\"\ndelay = \"25MS\"\n",
        17,
        "link[0].delay",
        r#""25MS" is not a delay: units are case-sensitive; write "25ms""#,
    );
}

#[test]
fn a_pinned_policy_is_read_back_and_an_unknown_one_named() {
    let t = Topology::parse(
        &format!(
            "{BASE}[[switch]]\nname = \"leaf\"\npolicy = \"ecmp\"\n\n{LINK}\n\
             [[link]]\na = \"leaf\"\nb = \"s1\"\nrate = \"1Gbps\"\ndelay = \"1ms\"\n"
        ),
        FILE,
    )
    .unwrap();
    let leaf = t.switch_by_name("leaf").unwrap();
    assert_eq!(leaf.policy, Some(lcmp_policy::PolicyName::Ecmp));
    assert_eq!(t.switch_by_name("s1").unwrap().policy, None);
    // Line 13 is [[switch]], 14 the name, 15 the policy.
    let e = err("[[switch]]\nname = \"leaf\"\npolicy = \"fastest\"\n");
    assert_eq!(e.line(), Some(15));
    assert_eq!(e.field(), Some("switch[2].policy"));
    assert!(e.to_string().contains("fastest"), "{e}");
}

#[test]
fn a_huge_value_is_cut_in_the_message() {
    // A 1 MB switch name and a 1 MB rate: the message shows 100
    // characters of each and its size, not the megabyte.
    let name = "n".repeat(1 << 20);
    check(
        &format!("[[switch]]\nname = \"{name}\"\n"),
        14,
        "switch[2].name",
        &format!(
            "\"{}\"... (1048576 bytes) is not a valid switch name (1048576 bytes, at most 67: \
             its control socket /run/lcmp-testbed/<testbed>/<switch>.sock must fit in 107 bytes)",
            "n".repeat(100)
        ),
    );
    let rate = "1".repeat(1 << 20);
    check(
        &LINK.replace("1Gbps", &rate),
        16,
        "link[0].rate",
        &format!(
            "\"{}\"... (1048576 bytes) is not a rate (expected e.g. \"200Gbps\")",
            "1".repeat(100)
        ),
    );
}

/// A route has at most 16 candidate next hops
/// (`lcmp_policy::select::MAX_CANDIDATES`): a 17th link between one pair
/// of switches is refused where it is written, in either direction. It
/// used to pass here and fail later, in `lcmp-agent paths` or the switch.
#[test]
fn more_than_16_links_between_two_switches_are_refused() {
    let sixteen = LINK.repeat(16);
    let t = Topology::parse(&format!("{BASE}{sixteen}"), FILE).unwrap();
    assert_eq!(t.links().len(), 16);
    // Link k's `a` is on line 14 + 5k: link[16]'s on line 94. It runs
    // s2 - s1, the other way.
    let reversed = "[[link]]\na = \"s2\"\nb = \"s1\"\nrate = \"1Gbps\"\ndelay = \"1ms\"\n";
    check(
        &format!("{sixteen}{reversed}"),
        94,
        "link[16]",
        "more than 16 links between \"s2\" and \"s1\" (the first at line 14); \
         a route has at most 16 candidate next hops",
    );
}

/// A rotor network file is named as one, with the commands that read it;
/// it read "unknown field `rotor`".
#[test]
fn a_rotor_network_file_is_not_taken_for_a_bad_topology() {
    let s = lcmp_topology::rotor::complete(4, 2).unwrap();
    let text =
        lcmp_topology::rotor_net::RotorNetwork::from_schedule(&s, 1_000_000, 100_000).to_toml();
    // Three comment lines, then [rotor] on line 4.
    assert_eq!(text.lines().nth(3), Some("[rotor]"));
    let e = Topology::parse(&text, FILE).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{FILE}:4: rotor: a rotor network file, not a DCI topology; rotor networks run \
             with `lcmp-testbed up`, `lcmp-switch rotor` and `lcmp-agent run`"
        )
    );
}

/// toml refuses a dotted key of more than 80 parts without a position
/// ("recursion limit"): the line is found, in a key and in a table header,
/// past a comment line full of dots. 80 parts are read (and the key is
/// then unknown), which pins the limit the message states.
#[test]
fn a_key_nested_too_deep_names_its_line() {
    let key = |parts: usize| vec!["a"; parts].join(".");
    let deep = "a dotted key of more than 80 parts; the TOML reader nests at most 80";
    let comment = format!("# {}\n", ".".repeat(200));
    let e = err(&format!("{comment}{} = 1\n", key(5000)));
    assert_eq!(e.to_string(), format!("{FILE}:14: {deep}"));
    assert_eq!(e.line(), Some(14));
    let e = err(&format!("{comment}x = 1\n[{}]\nb = 1\n", key(81)));
    assert_eq!(e.to_string(), format!("{FILE}:15: {deep}"));
    let e = err(&format!("{} = 1\n", key(80)));
    assert_eq!(e.line(), Some(13));
    assert!(e.to_string().contains("unknown field `a`"), "{e}");
}

/// Keys and strings from the file are echoed in messages: control bytes
/// escaped, cut at 100 characters with the size. An escape sequence as a
/// key printed raw to the terminal; a 10,000-character key made a 20 kB
/// line.
#[test]
fn keys_and_strings_from_the_file_are_echoed() {
    let fields = "expected one of `name`, `dc`, `prefixes`, `policy`";
    check(
        "\"\\u001b[31mRED\" = 1\n",
        13,
        "switch[1].\"\\u{1b}[31mRED\"",
        &format!("unknown field \"\\u{{1b}}[31mRED\", {fields}"),
    );
    let k = "k".repeat(10_000);
    let cut = format!("\"{}\"... (10000 bytes)", "k".repeat(100));
    check(
        &format!("{k} = 1\n"),
        13,
        &format!("switch[1].{cut}"),
        &format!("unknown field {cut}, {fields}"),
    );
    check(
        &format!(
            "[[switch]]\nname = \"s3\"\nprefixes = \"\\u001b{}\"\n",
            "p".repeat(10_000)
        ),
        15,
        "switch[2].prefixes",
        &format!(
            "invalid type: string \"\\u{{1b}}{}\"... (10001 bytes), expected a sequence",
            "p".repeat(99)
        ),
    );
}

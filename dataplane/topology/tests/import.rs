//! `lcmp-topology import`: hand-written fixtures with hand-computed
//! distances, errors, and the shipped converted WANs.

use std::path::{Path, PathBuf};

use lcmp_topology::import::{import, Format, ImportOptions};
use lcmp_topology::{HostTemplate, Topology};

fn fixture(name: &str) -> (String, String) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    (text, path.display().to_string())
}

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
}

/// (a, b, rate bit/s, delay ns) of every link.
fn links(t: &Topology) -> Vec<(String, String, u64, u64)> {
    t.links()
        .iter()
        .map(|l| {
            (
                t.switch(l.a).name.clone(),
                t.switch(l.b).name.clone(),
                l.rate_bps,
                l.delay_ns,
            )
        })
        .collect()
}

fn err(text: &str, path: &str) -> String {
    import(text, None, path, &ImportOptions::default())
        .unwrap_err()
        .to_string()
}

// Distances in the fixtures, with R = 6371 km:
// - 1 degree along the equator or a meridian: 2 pi R / 360 = 111.1949 km;
//   at 5 us/km 555.97 us -> 556 us.
// - (0, 0) to (1, 1), or (0, 1) to (1, 0): haversine
//   h = sin^2(0.5 deg) + cos(0) cos(1 deg) sin^2(0.5 deg)
//     = 7.6152e-5 * (1 + 0.999848) = 1.52292e-4,
//   d = 2 R asin(sqrt(h)) = 2 * 6371 * 0.0123407 = 157.25 km;
//   at 5 us/km 786.2 us -> 786 us.

#[test]
fn graphml_fixture() {
    let (text, path) = fixture("square.graphml");
    let got = import(&text, None, &path, &ImportOptions::default()).unwrap();
    let t = &got.topology;
    // "Alpha One" twice -> alphaone, alphaone2; "7 Sisters" starts with a
    // digit -> n7sisters; "Zürich" loses its non-ASCII letter -> zrich.
    let names: Vec<&str> = t.switches().iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["alphaone", "alphaone2", "n7sisters", "zrich"]);
    let prefixes: Vec<String> = t
        .switches()
        .iter()
        .map(|s| s.prefixes[0].to_string())
        .collect();
    assert_eq!(
        prefixes,
        ["10.1.0.0/16", "10.2.0.0/16", "10.3.0.0/16", "10.4.0.0/16"]
    );
    let s = |a: &str, b: &str, r: u64, d: u64| (a.to_string(), b.to_string(), r, d);
    assert_eq!(
        links(t),
        [
            // LinkSpeed "2.5" + the key's default unit G; 1 degree: 556 us.
            s("alphaone", "alphaone2", 2_500_000_000, 556_000),
            // LinkLabel OC-48: 48 x 51.84 Mbit/s = 2488.32 Mbit/s.
            s("alphaone2", "n7sisters", 2_488_320_000, 556_000),
            // LinkLabel "Lit Fibre" is no rate: default 10G; diagonal 786 us.
            s("alphaone", "n7sisters", 10_000_000_000, 786_000),
            // LinkSpeedRaw 1000000000.0 bit/s.
            s("alphaone2", "zrich", 1_000_000_000, 556_000),
            // The parallel edge, written 3 -> 1, LinkSpeed 10 G.
            s("zrich", "alphaone2", 10_000_000_000, 556_000),
        ]
    );
    // The self-loop 3 -> 3 is dropped.
    assert_eq!(got.self_loops, ["Zürich"]);
    assert_eq!((got.rate_from_data, got.rate_default), (4, 1));
    assert_eq!(got.parallel, 1);
    // alphaone -> alphaone2 -> zrich: 556 + 556 us.
    assert_eq!(
        got.diameter,
        (1_112_000, "alphaone".to_string(), "zrich".to_string())
    );
    assert!(got
        .toml
        .contains("# Rate: from the data for 4 links; the default 10Gbps for 1.\n"));
    assert!(got
        .toml
        .contains("# node \"2\", label \"7 Sisters\", latitude 1, longitude 1\n"));
    assert!(got
        .toml
        .contains("# Self-loops dropped: 1 (at \"Zürich\").\n"));
    assert_eq!(t.default_buffer_bytes(), 128 << 20);
}

#[test]
fn node_link_fixture_and_options() {
    let (text, path) = fixture("triangle.json");
    let opts = ImportOptions {
        // 4.9 us/km: 111.1949 km -> 544.85 us -> 545 us;
        // 157.25 km -> 770.5 us -> 771 us (157.2496 km: 770.52).
        ns_per_km: 4_900,
        default_rate_bps: 25_000_000_000,
        buffer_bytes: 1_000_000,
        comments: vec!["Provenance: hand-written.".into()],
    };
    let got = import(&text, None, &path, &opts).unwrap();
    let t = &got.topology;
    let s = |a: &str, b: &str, r: u64, d: u64| (a.to_string(), b.to_string(), r, d);
    assert_eq!(
        links(t),
        [
            // 0 -> 1 and its reverse 1 -> 0 (directed graph) are one link,
            // with no capacity: the default 25G.
            s("gdask", "krakw", 25_000_000_000, 545_000),
            s("krakw", "warsaw", 100_000_000_000, 771_000),
            // capacity 40000000000 (a number: bit/s).
            s("warsaw", "gdask", 40_000_000_000, 545_000),
        ]
    );
    assert_eq!(got.reverse_merged, 1);
    assert_eq!((got.rate_from_data, got.rate_default), (2, 1));
    assert!(got.toml.starts_with("# Provenance: hand-written.\n#\n"));
    assert!(got.toml.contains("at 4.9us per km"));
    assert_eq!(t.default_buffer_bytes(), 1_000_000);
}

#[test]
fn format_detection() {
    assert_eq!(Format::detect("a.GraphML", "{"), Ok(Format::GraphMl));
    assert_eq!(Format::detect("a.json", "<"), Ok(Format::NodeLink));
    assert_eq!(Format::detect("a", "  <?xml"), Ok(Format::GraphMl));
    assert_eq!(Format::detect("a", "\n{\"nodes\""), Ok(Format::NodeLink));
    assert_eq!(
        Format::detect("a.txt", "nodes: 3").unwrap_err().to_string(),
        "a.txt: cannot tell the format (neither a .graphml/.json name nor XML/JSON content); \
         give --format graphml or --format node-link"
    );
}

#[test]
fn not_the_expected_shape() {
    assert_eq!(
        err("<html><body/></html>", "x.graphml"),
        "x.graphml is not GraphML: the root element is <html>, expected <graphml>"
    );
    assert!(err("<graphml><graph>", "x.graphml").starts_with("x.graphml is not GraphML: "));
    assert_eq!(
        err("<graphml/>", "x.graphml"),
        "x.graphml is not GraphML: no <graph> element"
    );
    assert_eq!(
        err("[1, 2]", "x.json"),
        "x.json is not NetworkX node-link JSON: the top level is not an object"
    );
    assert_eq!(
        err(r#"{"nodes": []}"#, "x.json"),
        "x.json is not NetworkX node-link JSON: no \"links\" (or \"edges\") array"
    );
    assert_eq!(
        err(
            r#"{"nodes": [{"id": "a", "lat": 0, "lon": 0}], "links": [{"source": "a", "target": "b"}]}"#,
            "x.json"
        ),
        "x.json is not NetworkX node-link JSON: links[0].target \"b\" is no node's id"
    );
}

#[test]
fn node_without_coordinates() {
    let text = r#"<graphml>
      <key id="lat" for="node" attr.name="Latitude"/>
      <key id="lon" for="node" attr.name="Longitude"/>
      <key id="l" for="node" attr.name="label"/>
      <graph>
        <node id="0"><data key="lat">0</data><data key="lon">0</data></node>
        <node id="1"><data key="l">Oslo</data><data key="lat">1</data></node>
        <edge source="0" target="1"/>
      </graph></graphml>"#;
    assert_eq!(
        err(text, "x.graphml"),
        "x.graphml: node \"1\" (label \"Oslo\") has no coordinates (Latitude/Longitude); the \
         delay of its links cannot be derived"
    );
    // Gabriel graphs in topohub have planar positions, not degrees.
    assert_eq!(
        err(
            r#"{"nodes": [{"id": 0, "pos": [188.48, 463.39]}], "edges": []}"#,
            "g.json"
        ),
        "g.json: node \"0\": pos: latitude 463.39 is outside -90..90 degrees (not geographic \
         coordinates?)"
    );
}

#[test]
fn disconnected_and_empty() {
    // Components {a, b, c}, {d}, {e, f}: largest first, equal sizes in node
    // order.
    let text = r#"{"nodes": [
        {"id": "a", "lat": 0, "lon": 0}, {"id": "b", "lat": 0, "lon": 1},
        {"id": "c", "lat": 0, "lon": 2}, {"id": "d", "lat": 0, "lon": 3},
        {"id": "e", "lat": 0, "lon": 4}, {"id": "f", "lat": 0, "lon": 5}],
      "links": [{"source": "a", "target": "b"}, {"source": "b", "target": "c"},
                {"source": "e", "target": "f"}, {"source": "d", "target": "d"}]}"#;
    assert_eq!(
        err(text, "x.json"),
        "x.json: the graph is not connected: 3 components of 3, 2, 1 nodes (one node of each: \
         \"a\", \"e\", \"d\"); every switch must reach every other"
    );
    assert_eq!(
        err(r#"{"nodes": [], "links": []}"#, "x.json"),
        "x.json: the graph has no nodes"
    );
}

#[test]
fn too_many_nodes_for_the_address_plan() {
    // 256 nodes in a chain: one more than 10.1.0.0/16 .. 10.255.0.0/16.
    let nodes: Vec<String> = (0..256)
        .map(|i| format!(r#"{{"id": {i}, "lat": 0, "lon": {}}}"#, i as f64 / 100.0))
        .collect();
    let links: Vec<String> = (1..256)
        .map(|i| format!(r#"{{"source": {}, "target": {i}}}"#, i - 1))
        .collect();
    let text = format!(
        r#"{{"nodes": [{}], "links": [{}]}}"#,
        nodes.join(","),
        links.join(",")
    );
    assert_eq!(
        err(&text, "x.json"),
        "x.json: 256 nodes, but the address plan 10.<k>.0.0/16 (k = 1..255) has room for 255 \
         switches"
    );
}

/// The shipped conversions: raw file, output, and the options used (the
/// commands in topologies/README.md).
fn shipped() -> Vec<(&'static str, &'static str, ImportOptions)> {
    let with = |comments: &[&str]| ImportOptions {
        comments: comments.iter().map(|c| c.to_string()).collect(),
        ..ImportOptions::default()
    };
    vec![
        (
            "topologies/zoo/Geant2009.graphml",
            "topologies/geant2009.toml",
            with(GEANT2009_COMMENTS),
        ),
        (
            "topologies/zoo/topohub-Abilene.json",
            "topologies/abilene.toml",
            with(ABILENE_COMMENTS),
        ),
    ]
}

const GEANT2009_COMMENTS: &[&str] = &[
    "GEANT, the pan-European research and education backbone, February 2009,",
    "from the Internet Topology Zoo (Knight et al., \"The Internet Topology Zoo\",",
    "IEEE JSAC 29(9), 2011). Source: https://topology-zoo.org/files/Geant2009.graphml",
    "(raw copy: zoo/Geant2009.graphml). License: CC BY 4.0 (Topology Zoo data).",
];

const ABILENE_COMMENTS: &[&str] = &[
    "Abilene (Internet2), February 2005, from the Internet Topology Zoo as",
    "converted by topohub (https://github.com/piotrjurkiewicz/topohub,",
    "data/topozoo/Abilene.json; raw copy: zoo/topohub-Abilene.json). Licenses:",
    "Topology Zoo data CC BY 4.0; topohub MIT. topohub has no capacities: every",
    "link gets the default rate (Abilene's links were OC-192c, about 10 Gbit/s).",
];

#[test]
fn shipped_conversions_are_reproducible_and_connected() {
    for (raw, toml, opts) in shipped() {
        let raw_path = repo(raw);
        let text = std::fs::read_to_string(&raw_path).unwrap();
        let got = import(&text, None, &raw_path.display().to_string(), &opts).unwrap();
        let shipped = std::fs::read_to_string(repo(toml)).unwrap();
        assert!(
            got.toml == shipped,
            "{toml} is not what `lcmp-topology import {raw}` gives; regenerate it"
        );
        let t = Topology::load(&repo(toml)).unwrap();
        // Every switch has a route to every other switch's prefix.
        for s in t.switches() {
            let routes = t.routes(s.id);
            assert_eq!(routes.len(), t.switches().len() - 1, "{toml}: {}", s.name);
            assert!(routes.iter().all(|r| !r.candidates.is_empty()));
        }
    }
}

#[test]
fn shipped_geant2009_figures() {
    let t = Topology::load(&repo("topologies/geant2009.toml")).unwrap();
    assert_eq!((t.switches().len(), t.links().len()), (34, 52));
    // Every Geant2009 edge has LinkSpeed + LinkSpeedUnits.
    let text = std::fs::read_to_string(repo("topologies/geant2009.toml")).unwrap();
    assert!(text.contains("# Rate: from the data for 52 links; the default 10Gbps for 0.\n"));
    // Amsterdam (52.37403 N, 4.88969 E) - Brussels (50.85045 N, 4.34878 E):
    // dlat = 1.52358 deg, dlon = 0.54091 deg, haversine 173.5 km -> 867 us.
    let nl = t.switch_by_name("nl").unwrap().id;
    let be = t.switch_by_name("be").unwrap().id;
    let l = t.links().iter().find(|l| (l.a, l.b) == (nl, be)).unwrap();
    assert_eq!((l.rate_bps, l.delay_ns), (10_000_000_000, 867_000));
    // The testbed can give every switch hosts (names `<switch>h<i>` stay
    // free, prefixes are /16).
    let host = HostTemplate {
        rate_bps: None,
        delay_ns: 1_000,
        buffer_bytes: None,
    };
    let with_hosts = t.with_generated_hosts(2, host).unwrap();
    assert_eq!(with_hosts.hosts().len(), 68);
    let t = Topology::load(&repo("topologies/abilene.toml")).unwrap();
    assert_eq!((t.switches().len(), t.links().len()), (11, 14));
    // New York (40.71, -74.01) - Chicago (41.85, -87.65): dlat 1.14 deg,
    // dlon 13.64 deg; h = sin^2(0.57 deg) + cos(40.71) cos(41.85)
    // sin^2(6.82 deg) = 9.897e-5 + 0.75810 * 0.74480 * 0.014102 = 8.0614e-3,
    // d = 2 * 6371 * asin(0.089785) = 1145.6 km -> 5728 us at 5 us/km.
    // (topohub's own "dist" says 1146.16 km: it does not use a 6371 km
    // sphere.)
    let ny = t.switch_by_name("newyork").unwrap().id;
    let chi = t.switch_by_name("chicago").unwrap().id;
    let l = t.links().iter().find(|l| (l.a, l.b) == (ny, chi)).unwrap();
    assert_eq!(l.delay_ns, 5_728_000);
}

/// Two nodes one degree apart and one edge with `data` (GraphML `<data>`
/// elements), the edge on line 10.
fn one_edge_graphml(data: &str) -> String {
    format!(
        r#"<graphml>
  <key id="lat" for="node" attr.name="Latitude"/>
  <key id="lon" for="node" attr.name="Longitude"/>
  <key id="l" for="node" attr.name="label"/>
  <key id="s" for="edge" attr.name="LinkSpeed"/>
  <key id="u" for="edge" attr.name="LinkSpeedUnits"/>
  <graph>
    <node id="0"><data key="l">Oslo</data><data key="lat">0</data><data key="lon">0</data></node>
    <node id="1"><data key="l">Bergen</data><data key="lat">0</data><data key="lon">1</data></node>
    <edge source="0" target="1">{data}</edge>
  </graph>
</graphml>"#
    )
}

#[test]
fn a_speed_the_data_gives_must_be_a_link_rate() {
    // The probe's values, each of which used to become the default rate
    // with only a count in the header.
    let speed = |s: &str, u: &str| {
        err(
            &one_edge_graphml(&format!(
                r#"<data key="s">{s}</data><data key="u">{u}</data>"#
            )),
            "x.graphml",
        )
    };
    let edge = "x.graphml: edge \"Oslo\" - \"Bergen\" (line 10)";
    let fix = "fix it, or remove it to use the default rate";
    assert_eq!(
        speed("0", "G"),
        format!("{edge}: LinkSpeed \"0\" G is zero; {fix}")
    );
    assert_eq!(
        speed("-5", "G"),
        format!("{edge}: LinkSpeed \"-5\" G is negative; {fix}")
    );
    assert_eq!(
        speed("NaN", "G"),
        format!("{edge}: LinkSpeed \"NaN\" G is not a finite number; {fix}")
    );
    // 1e30 Tbit/s = 1e42 bit/s.
    assert_eq!(
        speed("1e30", "T"),
        format!("{edge}: LinkSpeed \"1e30\" T is above 100Tbps; {fix}")
    );
    assert_eq!(
        speed("10", "Q"),
        format!(
            "{edge}: LinkSpeed \"10\" \"Q\" has no known unit (LinkSpeedUnits is K, M, G or T); \
             {fix}"
        )
    );
    // 0.5 Kbit/s, and 200 Tbit/s.
    assert_eq!(
        speed("0.5", "K"),
        format!("{edge}: LinkSpeed \"0.5\" K is below 1Kbps; {fix}")
    );
    assert_eq!(
        speed("200", "T"),
        format!("{edge}: LinkSpeed \"200\" T is above 100Tbps; {fix}")
    );
    // Node-link JSON: the edge is named by its index in the list.
    let json = |capacity: &str| {
        err(
            &format!(
                r#"{{"nodes": [{{"id": 0, "name": "Oslo", "lat": 0, "lon": 0}},
                              {{"id": 1, "name": "Bergen", "lat": 0, "lon": 1}}],
                   "edges": [{{"source": 0, "target": 1}},
                             {{"source": 1, "target": 0, "capacity": {capacity}}}]}}"#
            ),
            "x.json",
        )
    };
    assert_eq!(
        json("\"lots\""),
        format!(
            "x.json: edge \"Bergen\" - \"Oslo\" (edges[1]): capacity \"lots\" is not a number; \
             {fix}"
        )
    );
    assert_eq!(
        json("-5"),
        format!(
            "x.json: edge \"Bergen\" - \"Oslo\" (edges[1]): capacity \"-5\" is negative; {fix}"
        )
    );
    // A value is repeated escaped and cut: a terminal escape (ESC [ 2 J, 4
    // bytes) and 200 digits, 204 bytes; the first 100 characters shown.
    let long = format!("\\u001b[2J{}", "9".repeat(200));
    let message = json(&format!("\"{long}\""));
    assert_eq!(
        message,
        format!(
            "x.json: edge \"Bergen\" - \"Oslo\" (edges[1]): capacity \"\\u{{1b}}[2J{}\"... (204 \
             bytes) is not a number; {fix}",
            "9".repeat(96)
        )
    );
}

#[test]
fn a_link_without_a_speed_gets_the_default_and_is_named() {
    // 13 edges around a ring of 13 nodes, the seventh with a capacity.
    let nodes: Vec<String> = (0..13)
        .map(|i| format!(r#"{{"id": {i}, "lat": 0, "lon": {}}}"#, f64::from(i) / 10.0))
        .collect();
    let links: Vec<String> = (0..13)
        .map(|i| {
            let capacity = if i == 6 {
                r#", "capacity": "1Gbps""#
            } else {
                ""
            };
            format!(r#"{{"source": {i}, "target": {}{capacity}}}"#, (i + 1) % 13)
        })
        .collect();
    let text = format!(
        r#"{{"nodes": [{}], "links": [{}]}}"#,
        nodes.join(","),
        links.join(",")
    );
    let got = import(&text, None, "ring.json", &ImportOptions::default()).unwrap();
    assert_eq!((got.rate_from_data, got.rate_default), (1, 12));
    let note = |i: usize| {
        format!(
            "ring.json: edge \"{i}\" - \"{}\" (links[{i}]): no speed in the data: default 10Gbps",
            (i + 1) % 13
        )
    };
    let want: Vec<String> = [0, 1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 12].map(note).into();
    assert_eq!(got.defaulted, want);
    // On stderr: the first 10, then how many more.
    let mut shown = want[..10].to_vec();
    shown.push("... and 2 more links at the default rate".into());
    assert_eq!(got.default_rate_notes(), shown);

    // The command names them on stderr: square.graphml's third edge (line
    // 45) has only the label "Lit Fibre".
    let (_, path) = fixture("square.graphml");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lcmp-topology"))
        .args(["import", &path])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        format!(
            "{path}: edge \"Alpha One\" - \"7 Sisters\" (line 45): LinkLabel \"Lit Fibre\" is no \
             rate: default 10Gbps\n"
        )
    );
}

#[test]
fn a_30_mb_label_is_cut_in_the_output() {
    // The probe's 30 MB label made a 63 MB topology (the label in the
    // switch's comment and in each link's), which the 16 MiB limit on
    // network files then refused.
    let label = "A".repeat(30 << 20);
    let text = format!(
        r#"{{"nodes": [{{"id": 0, "name": "{label}", "lat": 0, "lon": 0}},
                      {{"id": 1, "name": "Red\u001b[31m", "lat": 0, "lon": 1}}],
           "links": [{{"source": 0, "target": 1}}, {{"source": 1, "target": 0}}]}}"#
    );
    let got = import(&text, None, "big.json", &ImportOptions::default()).unwrap();
    // The name takes 12 bytes of the label; comments 100 characters of it.
    let names: Vec<&str> = got
        .topology
        .switches()
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(names, ["aaaaaaaaaaaa", "red31m"]);
    let cut = format!("\"{}\"... (31457280 bytes)", "A".repeat(100));
    assert!(got.toml.contains(&format!(
        "# node \"0\", label {cut}, latitude 0, longitude 0\n"
    )));
    assert!(got
        .toml
        .contains(&format!("# {cut} - \"Red\\u{{1b}}[31m\": 111.2 km;")));
    assert!(got.toml.len() < 4_000, "{} bytes", got.toml.len());
    // The stderr notes are cut too.
    assert_eq!(
        got.default_rate_notes()[0],
        format!("big.json: edge {cut} - \"Red\\u{{1b}}[31m\" (links[0]): no speed in the data: default 10Gbps")
    );
    // And the file is one a network file reader takes.
    assert_eq!(
        lcmp_topology::network::Network::parse(&got.toml, "big.toml")
            .unwrap()
            .kind(),
        "dci"
    );
}

/// A route has at most 16 candidate next hops: a 17th edge between two
/// nodes is refused at that edge (it made a topology that failed later).
#[test]
fn more_than_16_parallel_edges_are_refused_at_the_edge() {
    let graph = |n: usize| {
        format!(
            r#"{{"nodes": [{{"id": "a", "lat": 0, "lon": 0}}, {{"id": "b", "lat": 0, "lon": 1}}],
                "links": [{}]}}"#,
            vec![r#"{"source": "a", "target": "b"}"#; n].join(",")
        )
    };
    let sixteen = import(&graph(16), None, "x.json", &ImportOptions::default()).unwrap();
    assert_eq!(sixteen.parallel, 15);
    assert_eq!(
        err(&graph(17), "x.json"),
        "x.json: edge \"a\" - \"b\" (links[16]): more than 16 edges between these nodes; a \
         route has at most 16 candidate next hops"
    );
}

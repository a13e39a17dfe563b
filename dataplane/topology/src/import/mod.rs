//! `lcmp-topology import`: real WAN topologies (Internet Topology Zoo
//! GraphML, NetworkX node-link JSON as published by `topohub`) converted
//! into this crate's topology TOML.
//!
//! The conversion (see [`convert`]):
//! - one switch per node, named from its label ([`names::safe_names`]),
//!   delivering `10.<k>.0.0/16` for k = 1, 2, ... in node order, so that any
//!   two switches can be source and destination;
//! - one full-duplex link per edge. Parallel edges stay parallel links (the
//!   format allows them, and a Zoo multigraph's parallel edges are distinct
//!   circuits); in a directed graph an edge and its reverse are one link;
//!   self-loops are dropped and named in the header;
//! - delay from the great-circle distance between the endpoints
//!   ([`geo::haversine_km`]) at a per-km figure (default 5 us/km, light in
//!   fibre), rounded to whole microseconds;
//! - rate from the data where present ([`speed::edge_speed`]), else a
//!   default, counted in the header and named per link
//!   ([`Imported::default_rate_notes`]); a speed the data gives that is no
//!   usable rate (not a number, an unknown unit, zero, negative, beyond
//!   1 kbit/s .. 100 Tbit/s) is an error naming the edge and the value;
//! - one port buffer for every link, in `[defaults]`.
//!
//! A node without coordinates, a disconnected graph, an empty graph and
//! more nodes than the address plan holds are errors.
//!
//! Values from the data that the output or a message repeats (ids,
//! labels, attributes) are quoted, escaped and cut to 100 characters: a
//! 30 MB label makes neither a 30 MB comment nor a 30 MB message.
//!
//! [`hpcc`] converts the HPCC ns-3 simulator's topology files (the LCMP
//! artifact's) with their intra-DC fabric; it has its own options and
//! result, as hosts, DCs and fabric switches have no place in a WAN graph.

pub mod geo;
mod graphml;
pub mod hpcc;
pub mod names;
mod node_link;
pub mod speed;

use std::collections::HashMap;
use std::fmt::{self, Write as _};

use crate::error::echo;
use crate::units::{format_bytes, format_delay, format_rate};
use crate::Topology;
use geo::LatLon;
use lcmp_policy::select::MAX_CANDIDATES;
use speed::Speed;

/// Most switches the address plan `10.<k>.0.0/16`, k = 1 ..= 255, holds.
pub const MAX_SWITCHES: usize = 255;

/// The largest file `lcmp-topology import` reads: 64 MiB, far above any
/// real topology (the Zoo's largest GraphML is under 1 MB), so that
/// `/dev/zero` is an error and not an endless read.
pub const MAX_INPUT_BYTES: u64 = 64 << 20;

/// Default delay per km of great-circle distance: 5 us, light in fibre
/// (refractive index ~1.5, 200 000 km/s).
pub const DEFAULT_NS_PER_KM: u64 = 5_000;

/// Default link rate where the data gives none: 10 Gbit/s.
pub const DEFAULT_RATE_BPS: u64 = 10_000_000_000;

/// Default port buffer: 128 MiB, as `topologies/8dc.toml` (the LCMP
/// artifact's `DCI_BUFFER_SIZE 128`, MiB), so that imported WANs and the
/// paper's topologies are run with the same DCI switch.
pub const DEFAULT_BUFFER_BYTES: u64 = 128 << 20;

/// Why a file could not be imported; `Display` is one complete line
/// naming the file, e.g. `x.graphml: node "7" (label "Oslo") has no
/// coordinates (Latitude/Longitude)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportError(String);

impl ImportError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

impl fmt::Display for ImportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ImportError {}

/// The input formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// GraphML (Internet Topology Zoo `.graphml`).
    GraphMl,
    /// NetworkX node-link JSON (`topohub`'s `.json`).
    NodeLink,
}

impl Format {
    /// The format's name as in messages and `--format`.
    pub fn name(self) -> &'static str {
        match self {
            Format::GraphMl => "GraphML",
            Format::NodeLink => "NetworkX node-link JSON",
        }
    }

    /// The format of `path` by its extension (`.graphml`, `.xml`;
    /// `.json`), else by its first non-blank character (`<` or `{`).
    pub fn detect(path: &str, text: &str) -> Result<Format, ImportError> {
        let ext = path
            .rsplit_once('.')
            .map(|(_, e)| e.to_ascii_lowercase())
            .unwrap_or_default();
        match ext.as_str() {
            "graphml" | "xml" => return Ok(Format::GraphMl),
            "json" => return Ok(Format::NodeLink),
            _ => {}
        }
        match text
            .trim_start_matches('\u{feff}')
            .trim_start()
            .chars()
            .next()
        {
            Some('<') => Ok(Format::GraphMl),
            Some('{') => Ok(Format::NodeLink),
            _ => Err(ImportError::new(format!(
                "{path}: cannot tell the format (neither a .graphml/.json name nor XML/JSON \
                 content); give --format graphml or --format node-link"
            ))),
        }
    }
}

/// A graph as read from a file, before conversion.
#[derive(Debug, Clone, PartialEq)]
pub struct Graph {
    /// The format it was read from.
    pub format: Format,
    /// Whether edges are directed (then an edge and its reverse are one
    /// link).
    pub directed: bool,
    /// Graph-level attributes worth repeating in the header (Zoo
    /// `Network`, `NetworkDate`, `Source`; node-link `name`), in order.
    pub meta: Vec<(String, String)>,
    /// Nodes in file order.
    pub nodes: Vec<Node>,
    /// Edges in file order.
    pub edges: Vec<Edge>,
    /// The attribute names coordinates are read from, for messages.
    pub coordinate_keys: &'static str,
}

/// One node.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// The node's id in the file.
    pub id: String,
    /// Its label (the id where there is none).
    pub label: String,
    /// Its coordinates, if the file gives them.
    pub position: Option<LatLon>,
}

/// One edge, between node indices.
#[derive(Debug, Clone, PartialEq)]
pub struct Edge {
    /// Index of the source node in [`Graph::nodes`].
    pub a: usize,
    /// Index of the target node.
    pub b: usize,
    /// Its capacity per the data.
    pub speed: Speed,
    /// Where it is in the file, for messages: `line 40` (GraphML),
    /// `links[3]` (node-link JSON).
    pub at: String,
}

/// Reads `text` (from `source`, for messages) as `format`.
pub fn read_graph(text: &str, format: Format, source: &str) -> Result<Graph, ImportError> {
    match format {
        Format::GraphMl => graphml::read(text, source),
        Format::NodeLink => node_link::read(text, source),
    }
}

/// Choices of the conversion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportOptions {
    /// One-way delay per km of great-circle distance, ns.
    pub ns_per_km: u64,
    /// Rate of links the data gives no capacity for, bits/s.
    pub default_rate_bps: u64,
    /// Buffer of every port, bytes.
    pub buffer_bytes: u64,
    /// Lines put at the top of the file (provenance, license).
    pub comments: Vec<String>,
}

impl Default for ImportOptions {
    fn default() -> Self {
        Self {
            ns_per_km: DEFAULT_NS_PER_KM,
            default_rate_bps: DEFAULT_RATE_BPS,
            buffer_bytes: DEFAULT_BUFFER_BYTES,
            comments: Vec::new(),
        }
    }
}

/// A converted topology and what the conversion did.
#[derive(Debug, Clone)]
pub struct Imported {
    /// The topology file.
    pub toml: String,
    /// The file, parsed and validated.
    pub topology: Topology,
    /// Links whose rate came from the data.
    pub rate_from_data: usize,
    /// Links that got the default rate.
    pub rate_default: usize,
    /// One line per link that got the default rate, naming it (see
    /// [`Imported::default_rate_notes`]).
    pub defaulted: Vec<String>,
    /// Self-loops dropped (labels of their nodes).
    pub self_loops: Vec<String>,
    /// Edges merged into their reverse (directed graphs).
    pub reverse_merged: usize,
    /// Links that run parallel to an earlier link between the same pair.
    pub parallel: usize,
    /// The largest smallest-delay path between two switches, ns, and the
    /// two switch names (the first pair in node order reaching it).
    pub diameter: (u64, String, String),
}

/// Most links [`Imported::default_rate_notes`] names one by one.
pub const NOTES_SHOWN: usize = 10;

impl Imported {
    /// Lines for stderr naming the links that got the default rate, so
    /// that no default goes unnoticed: `x.json: edge "A" - "B" (links[3]):
    /// no speed in the data: default 10Gbps`, at most [`NOTES_SHOWN`], then
    /// `... and 4 more links at the default rate`.
    pub fn default_rate_notes(&self) -> Vec<String> {
        let mut notes: Vec<String> = self.defaulted.iter().take(NOTES_SHOWN).cloned().collect();
        if self.defaulted.len() > NOTES_SHOWN {
            notes.push(format!(
                "... and {} more links at the default rate",
                self.defaulted.len() - NOTES_SHOWN
            ));
        }
        notes
    }
}

/// Reads and converts `text`, the contents of file `path`; `format`
/// `None` detects it ([`Format::detect`]). The header names the file by
/// its file name only, so the output does not depend on where it is run.
pub fn import(
    text: &str,
    format: Option<Format>,
    path: &str,
    opts: &ImportOptions,
) -> Result<Imported, ImportError> {
    let format = match format {
        Some(f) => f,
        None => Format::detect(path, text)?,
    };
    let graph = read_graph(text, format, path)?;
    let file_name = path.rsplit('/').next().unwrap_or(path);
    convert(&graph, path, file_name, opts)
}

/// One link of the output, before writing.
struct OutLink {
    a: usize,
    b: usize,
    km: f64,
    delay_ns: u64,
    rate_bps: u64,
    note: String,
}

/// Converts `graph` (read from `path`, named `file_name` in the header).
pub fn convert(
    graph: &Graph,
    path: &str,
    file_name: &str,
    opts: &ImportOptions,
) -> Result<Imported, ImportError> {
    let n = graph.nodes.len();
    if n == 0 {
        return Err(ImportError::new(format!("{path}: the graph has no nodes")));
    }
    if n > MAX_SWITCHES {
        return Err(ImportError::new(format!(
            "{path}: {n} nodes, but the address plan 10.<k>.0.0/16 (k = 1..{MAX_SWITCHES}) has \
             room for {MAX_SWITCHES} switches"
        )));
    }
    let mut positions = Vec::with_capacity(n);
    for node in &graph.nodes {
        match node.position {
            Some(p) => positions.push(p),
            None => {
                return Err(ImportError::new(format!(
                    "{path}: node {} (label {}) has no coordinates ({}); the delay of its \
                     links cannot be derived",
                    echo(&node.id),
                    echo(&node.label),
                    graph.coordinate_keys
                )))
            }
        }
    }

    let mut self_loops = Vec::new();
    let mut reverse_merged = 0;
    let mut parallel = 0;
    // Directed edges a->b still waiting for their b->a.
    let mut unpaired: HashMap<(usize, usize), usize> = HashMap::new();
    let mut pair_count: HashMap<(usize, usize), usize> = HashMap::new();
    let mut links = Vec::new();
    let (mut rate_from_data, mut rate_default) = (0, 0);
    let mut defaulted = Vec::new();
    let edge = |e: &Edge| {
        format!(
            "{path}: edge {} - {} ({})",
            echo(&graph.nodes[e.a].label),
            echo(&graph.nodes[e.b].label),
            e.at
        )
    };
    for e in &graph.edges {
        // Bad data is an error wherever it is, also on an edge dropped or
        // merged below.
        if let Speed::Bad { from, why } = &e.speed {
            return Err(ImportError::new(format!(
                "{}: {from} {why}; fix it, or remove it to use the default rate",
                edge(e)
            )));
        }
        if e.a == e.b {
            self_loops.push(graph.nodes[e.a].label.clone());
            continue;
        }
        if graph.directed {
            if let Some(waiting) = unpaired.get_mut(&(e.b, e.a)).filter(|w| **w > 0) {
                *waiting -= 1;
                reverse_merged += 1;
                continue;
            }
            *unpaired.entry((e.a, e.b)).or_default() += 1;
        }
        let key = (e.a.min(e.b), e.a.max(e.b));
        let seen = pair_count.entry(key).or_default();
        if *seen > 0 {
            parallel += 1;
        }
        *seen += 1;
        // Said at the edge rather than in the converted file's terms.
        if *seen > MAX_CANDIDATES {
            return Err(ImportError::new(format!(
                "{}: more than {MAX_CANDIDATES} edges between these nodes; a route has at most \
                 {MAX_CANDIDATES} candidate next hops",
                edge(e)
            )));
        }
        let km = geo::haversine_km(positions[e.a], positions[e.b]);
        let rate_bps = match &e.speed {
            Speed::Known { bps, .. } => {
                rate_from_data += 1;
                *bps
            }
            Speed::Bad { .. } => unreachable!("refused at the top of the loop"),
            Speed::Unknown { .. } => {
                rate_default += 1;
                defaulted.push(format!(
                    "{}: {}",
                    edge(e),
                    e.speed.describe(opts.default_rate_bps)
                ));
                opts.default_rate_bps
            }
        };
        links.push(OutLink {
            a: e.a,
            b: e.b,
            km,
            delay_ns: geo::delay_ns(km, opts.ns_per_km),
            rate_bps,
            note: e.speed.describe(opts.default_rate_bps),
        });
    }

    check_connected(graph, &links, path)?;

    let labels: Vec<String> = graph.nodes.iter().map(|n| n.label.clone()).collect();
    let names = names::safe_names(&labels);
    let diameter = diameter(n, &links);
    let diameter = (
        diameter.0,
        names[diameter.1].clone(),
        names[diameter.2].clone(),
    );

    let mut out = String::new();
    // Writing to a String cannot fail.
    macro_rules! w {
        ($($arg:tt)*) => {
            let _ = writeln!(out, $($arg)*);
        };
    }
    out.push_str(&comment_block(&opts.comments));
    w!(
        "# Generated by `lcmp-topology import` from {file_name:?} ({}).",
        graph.format.name()
    );
    w!("# Regenerate rather than edit.");
    for (k, v) in &graph.meta {
        w!("# Graph attribute {k} = {}", echo(v));
    }
    w!("#");
    w!("# {n} switches, one per node, each a DC switch delivering 10.<k>.0.0/16 (k = 1..{n}");
    w!("# in node order), so that any two can be source and destination.");
    w!(
        "# {} links, one per edge, full duplex; parallel edges stay parallel links ({parallel}).",
        links.len()
    );
    if graph.directed {
        w!("# Directed graph: an edge and its reverse are one link ({reverse_merged} merged).");
    }
    if self_loops.is_empty() {
        w!("# Self-loops dropped: none.");
    } else {
        let mut at: Vec<String> = self_loops
            .iter()
            .take(NOTES_SHOWN)
            .map(|l| echo(l))
            .collect();
        if self_loops.len() > NOTES_SHOWN {
            at.push(format!("and {} more", self_loops.len() - NOTES_SHOWN));
        }
        w!(
            "# Self-loops dropped: {} (at {}).",
            self_loops.len(),
            at.join(", ")
        );
    }
    w!(
        "# Delay: great-circle distance between the endpoints (haversine, Earth radius {} km)",
        geo::EARTH_RADIUS_KM
    );
    w!(
        "# at {} per km, rounded to the nearest microsecond.",
        format_delay(opts.ns_per_km)
    );
    w!(
        "# Rate: from the data for {rate_from_data} links; the default {} for {rate_default}.",
        format_rate(opts.default_rate_bps)
    );
    w!(
        "# Buffer: {} per port (the [defaults] below).",
        format_bytes(opts.buffer_bytes)
    );
    w!(
        "# Largest smallest-delay path between two switches: {} ({} - {}).",
        format_delay(diameter.0),
        diameter.1,
        diameter.2
    );
    w!();
    w!("[defaults]");
    w!("buffer = {:?}", format_bytes(opts.buffer_bytes));
    for (k, (node, name)) in graph.nodes.iter().zip(&names).enumerate() {
        let p = positions[k];
        w!();
        w!("[[switch]]");
        w!(
            "# node {}, label {}, latitude {}, longitude {}",
            echo(&node.id),
            echo(&node.label),
            p.lat,
            p.lon
        );
        w!("name = {name:?}");
        w!("prefixes = [\"10.{}.0.0/16\"]", k + 1);
    }
    for l in &links {
        w!();
        w!("[[link]]");
        w!(
            "# {} - {}: {:.1} km; {}",
            echo(&graph.nodes[l.a].label),
            echo(&graph.nodes[l.b].label),
            l.km,
            l.note
        );
        w!("a = {:?}", names[l.a]);
        w!("b = {:?}", names[l.b]);
        w!("rate = {:?}", format_rate(l.rate_bps));
        w!("delay = {:?}", format_delay(l.delay_ns));
    }

    let topology = Topology::parse(&out, file_name).map_err(|e| {
        ImportError::new(format!("{path}: the converted topology is not valid: {e}"))
    })?;
    Ok(Imported {
        toml: out,
        topology,
        rate_from_data,
        rate_default,
        defaulted,
        self_loops,
        reverse_merged,
        parallel,
        diameter,
    })
}

/// Errors naming the components (sizes and one node of each, largest
/// first) unless every node reaches every other.
fn check_connected(graph: &Graph, links: &[OutLink], path: &str) -> Result<(), ImportError> {
    let n = graph.nodes.len();
    let mut adj = vec![Vec::new(); n];
    for l in links {
        adj[l.a].push(l.b);
        adj[l.b].push(l.a);
    }
    let mut component = vec![usize::MAX; n];
    // (size, first node) per component, in order of first node.
    let mut components: Vec<(usize, usize)> = Vec::new();
    for start in 0..n {
        if component[start] != usize::MAX {
            continue;
        }
        let c = components.len();
        component[start] = c;
        let mut stack = vec![start];
        let mut size = 0;
        while let Some(v) = stack.pop() {
            size += 1;
            for &u in &adj[v] {
                if component[u] == usize::MAX {
                    component[u] = c;
                    stack.push(u);
                }
            }
        }
        components.push((size, start));
    }
    if components.len() == 1 {
        return Ok(());
    }
    // Largest first; equal sizes in node order (the sort is stable).
    components.sort_by_key(|c| std::cmp::Reverse(c.0));
    let sizes: Vec<String> = components.iter().map(|c| c.0.to_string()).collect();
    let firsts: Vec<String> = components
        .iter()
        .map(|c| echo(&graph.nodes[c.1].label))
        .collect();
    Err(ImportError::new(format!(
        "{path}: the graph is not connected: {} components of {} nodes (one node of each: {}); \
         every switch must reach every other",
        components.len(),
        sizes.join(", "),
        firsts.join(", ")
    )))
}

/// The largest smallest-delay distance between two nodes (Floyd-Warshall:
/// at most 255 nodes) and the first pair (i < j, in node order) at it.
fn diameter(n: usize, links: &[OutLink]) -> (u64, usize, usize) {
    let mut d = vec![vec![u64::MAX; n]; n];
    for (i, row) in d.iter_mut().enumerate() {
        row[i] = 0;
    }
    for l in links {
        let w = l.delay_ns.min(d[l.a][l.b]);
        d[l.a][l.b] = w;
        d[l.b][l.a] = w;
    }
    for k in 0..n {
        for i in 0..n {
            if d[i][k] == u64::MAX {
                continue;
            }
            for j in 0..n {
                let via = d[i][k].saturating_add(d[k][j]);
                if via < d[i][j] {
                    d[i][j] = via;
                }
            }
        }
    }
    let mut best = (0, 0, 0);
    for (i, row) in d.iter().enumerate() {
        for (j, &v) in row.iter().enumerate().skip(i + 1) {
            if v > best.0 {
                best = (v, i, j);
            }
        }
    }
    best
}

/// The user's `--comment` lines as a TOML comment block, then an empty
/// comment line (nothing without comments): the head of every import.
pub(crate) fn comment_block(comments: &[String]) -> String {
    let mut out = String::new();
    for c in comments {
        for line in c.lines() {
            out.push_str(format!("# {line}").trim_end());
            out.push('\n');
        }
    }
    if !comments.is_empty() {
        out.push_str("#\n");
    }
    out
}

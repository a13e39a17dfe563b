//! `lcmp-topology import --format hpcc`: the HPCC ns-3 simulator's topology
//! format, as the LCMP artifact's `topology_LeafSpine_MultiDC*.txt` use it,
//! converted with the intra-DC fabric (hosts, leaves, spines) so that the
//! testbed can run the simulated network whole.
//!
//! The format: `#` comment lines and blank lines are skipped. The first data
//! line is `<nodes> <intra-DC switches> <DCI switches> <links>`; then the
//! intra-DC switch ids, then the DCI switch ids (each list may wrap over
//! lines but ends at a line end); then one link a line, `<a> <b> <rate>
//! <delay> <error rate>` (`0 128 100Gbps 1us 0`). Node ids are `0..nodes`;
//! nodes in neither list are hosts.
//!
//! The conversion (see [`import`]):
//! - DC k (from 1) is the k-th DCI switch by id and every node it reaches
//!   without crossing another DCI switch;
//! - DCI switch `dc<k>` (as `topologies/8dc.toml`), intra-DC switches with
//!   hosts ("leaves") `dc<k>leaf<j>`, the others ("spines")
//!   `dc<k>spine<j>`, j from 1 in id order; intra-DC switches pin policy
//!   `ecmp` (the simulator's fabric hashes whatever the DCI switches run);
//! - leaf j delivers `10.<k>.<j>.0/24` and its i-th host (id order, from 0)
//!   is `10.<k>.<j>.<2+i>/24`; DCI switches and spines are transit;
//! - hosts `dc<k>h<n>`, n from 1 in id order within the DC, written DC by
//!   DC in id order (trace tooling maps the simulator's host ids onto them
//!   by position);
//! - switch-to-switch links in file order with the file's rate and delay;
//!   a non-zero error rate is refused (loss is not modelled);
//! - port buffers: one size for links touching a DCI switch, another for
//!   the rest and for hosts (the simulator's two shared switch buffers).

use std::collections::HashMap;
use std::fmt::Write as _;

use super::speed::{MAX_RATE_BPS, MIN_RATE_BPS};
use super::ImportError;
use crate::error::echo;
use crate::units::{format_bytes, format_delay, format_rate, parse_delay, parse_rate};
use crate::Topology;

/// Default buffer of intra-DC switch and host ports: 32 MiB, the artifact's
/// `BUFFER_SIZE 32` (MiB, `config_batch.txt`).
pub const DEFAULT_BUFFER_BYTES: u64 = 32 << 20;

/// Default buffer of ports on links that touch a DCI switch: 128 MiB, the
/// artifact's `DCI_BUFFER_SIZE 128` (as `topologies/8dc.toml`).
pub const DEFAULT_DCI_BUFFER_BYTES: u64 = 128 << 20;

/// Most DCs the address plan `10.<k>.<j>.0/24` holds (k = 1..=255).
pub const MAX_DCS: usize = 255;

/// Most leaves per DC the address plan holds (j = 1..=255).
pub const MAX_LEAVES_PER_DC: usize = 255;

/// Most hosts per leaf: `.2` .. `.254` of its /24 (`.1` stays free, `.255`
/// is the broadcast address).
pub const MAX_HOSTS_PER_LEAF: usize = 253;

/// Choices of the conversion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HpccOptions {
    /// Buffer of intra-DC switch ports and hosts, bytes (`[defaults]`).
    pub buffer_bytes: u64,
    /// Buffer of both ports of a link that touches a DCI switch, bytes.
    pub dci_buffer_bytes: u64,
    /// Lines put at the top of the file (provenance, license).
    pub comments: Vec<String>,
}

impl Default for HpccOptions {
    fn default() -> Self {
        Self {
            buffer_bytes: DEFAULT_BUFFER_BYTES,
            dci_buffer_bytes: DEFAULT_DCI_BUFFER_BYTES,
            comments: Vec::new(),
        }
    }
}

/// A converted HPCC topology and its counts.
#[derive(Debug, Clone)]
pub struct HpccImported {
    /// The topology file.
    pub toml: String,
    /// The file, parsed and validated.
    pub topology: Topology,
    /// DCs (= DCI switches).
    pub dcs: usize,
    /// Intra-DC switches with hosts.
    pub leaves: usize,
    /// Intra-DC switches without hosts.
    pub spines: usize,
    /// Hosts.
    pub hosts: usize,
    /// Links between switches (the file's links less the host links).
    pub switch_links: usize,
    /// Links between switches of different DCs.
    pub inter_dc_links: usize,
}

/// Whether `text` looks like an HPCC topology file: its first line that is
/// neither blank nor a comment is four unsigned integers (GraphML and JSON
/// never do).
pub fn looks_like(text: &str) -> bool {
    data_lines(text)
        .next()
        .is_some_and(|(_, l)| header_counts(l).is_some())
}

/// Reads and converts `text`, the contents of file `path` (`path` starts
/// every message). The header names the file by its file name, and shows
/// the command with `path` as given when it is relative (its file name
/// when absolute), so the output does not depend on where it is run from.
pub fn import(text: &str, path: &str, opts: &HpccOptions) -> Result<HpccImported, ImportError> {
    let file = read(text, path)?;
    convert(&file, path, opts)
}

/// The lines holding data: (1-based line number, trimmed text).
fn data_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.trim_start_matches('\u{feff}')
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
}

/// `<nodes> <intra> <dci> <links>` of a header line.
fn header_counts(line: &str) -> Option<[usize; 4]> {
    let mut counts = [0; 4];
    let mut tokens = line.split_whitespace();
    for c in &mut counts {
        *c = tokens.next()?.parse().ok()?;
    }
    tokens.next().is_none().then_some(counts)
}

/// At most 60 characters of `line`, for messages.
fn excerpt(line: &str) -> String {
    match line.char_indices().nth(60) {
        Some((i, _)) => format!("{}...", &line[..i]),
        None => line.to_string(),
    }
}

/// `text` in lines of at most `width` characters, broken at spaces (a
/// longer word gets a line of its own).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// What a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Host,
    Intra,
    Dci,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Host => "host",
            Kind::Intra => "intra-DC switch",
            Kind::Dci => "DCI switch",
        }
    }
}

/// One link line.
struct FileLink {
    line: usize,
    a: usize,
    b: usize,
    rate_bps: u64,
    delay_ns: u64,
}

/// The file as read: counts checked, ids in range, units parsed.
struct File {
    header_line: usize,
    nodes: usize,
    kinds: Vec<Kind>,
    /// DCI switch ids, ascending (DC k is the k-th).
    dci: Vec<usize>,
    links: Vec<FileLink>,
}

fn read(text: &str, path: &str) -> Result<File, ImportError> {
    let err = |line: usize, msg: String| ImportError::new(format!("{path}:{line}: {msg}"));
    let mut lines = data_lines(text);
    let Some((header_line, header)) = lines.next() else {
        return Err(ImportError::new(format!(
            "{path}: not an HPCC topology file: it has only comments and blank lines"
        )));
    };
    let Some([nodes, intra, dci, link_count]) = header_counts(header) else {
        return Err(err(
            header_line,
            format!(
                "not an HPCC topology file: the first line that is not a comment should be \
                 \"<nodes> <intra-DC switches> <DCI switches> <links>\", found {:?}",
                excerpt(header)
            ),
        ));
    };
    let hosts = nodes
        .checked_sub(intra.saturating_add(dci))
        .ok_or_else(|| {
            err(
                header_line,
                format!("{intra} intra-DC + {dci} DCI switches are more than the {nodes} nodes"),
            )
        })?;
    if dci == 0 {
        return Err(err(
            header_line,
            "no DCI switches: each DC is defined by its DCI switch".into(),
        ));
    }
    // Every host has a link of its own. With the switch ids and links
    // counted in the file below, this also bounds `nodes` by the file's
    // size before anything is allocated per node.
    if hosts > link_count {
        return Err(err(
            header_line,
            format!(
                "{nodes} nodes less {} switches leave {hosts} hosts, but there are only \
                 {link_count} links (a host needs one)",
                intra + dci
            ),
        ));
    }

    let range = format!(
        "the header, line {header_line}, gives {nodes} nodes: 0 to {}",
        nodes - 1
    );
    let node = |line: usize, token: &str| -> Result<usize, ImportError> {
        match token.parse::<usize>() {
            Ok(id) if id < nodes => Ok(id),
            Ok(id) => Err(err(line, format!("node {id} is not a node ({range})"))),
            Err(_) => Err(err(line, format!("{} is not a node id", echo(token)))),
        }
    };

    // Switch ids. A list may wrap but ends at a line end, so that a wrong
    // count is caught at the line where the lists part.
    let mut listed: HashMap<usize, (Kind, usize)> = HashMap::new();
    for (kind, count) in [(Kind::Intra, intra), (Kind::Dci, dci)] {
        let what = kind.name();
        let mut got = 0;
        while got < count {
            let Some((line, l)) = lines.next() else {
                return Err(ImportError::new(format!(
                    "{path}: the file ends after {got} of the {count} {what} ids the header \
                     (line {header_line}) gives"
                )));
            };
            let tokens: Vec<&str> = l.split_whitespace().collect();
            if tokens.iter().any(|t| t.parse::<usize>().is_err()) {
                return Err(err(
                    line,
                    format!(
                        "expected {} more {what} ids ({count} in all, per the header on line \
                         {header_line}), found {:?}",
                        count - got,
                        excerpt(l)
                    ),
                ));
            }
            if got + tokens.len() > count {
                return Err(err(
                    line,
                    format!(
                        "{} {what} ids by the end of this line, but the header (line \
                         {header_line}) gives {count}",
                        got + tokens.len()
                    ),
                ));
            }
            for t in tokens {
                let id = node(line, t)?;
                if let Some((k, first)) = listed.insert(id, (kind, line)) {
                    return Err(err(
                        line,
                        format!(
                            "node {id} is listed twice (first as a {} on line {first})",
                            k.name()
                        ),
                    ));
                }
                got += 1;
            }
        }
    }

    let mut links = Vec::new();
    for (line, l) in lines {
        if links.len() == link_count {
            return Err(err(
                line,
                format!(
                    "a link beyond the {link_count} the header (line {header_line}) gives: {:?}",
                    excerpt(l)
                ),
            ));
        }
        let t: Vec<&str> = l.split_whitespace().collect();
        let [a, b, rate, delay, error_rate] = t[..] else {
            return Err(err(
                line,
                format!(
                    "a link is \"<a> <b> <rate> <delay> <error rate>\" (5 fields), found {} \
                     in {:?}",
                    t.len(),
                    excerpt(l)
                ),
            ));
        };
        let (a, b) = (node(line, a)?, node(line, b)?);
        if a == b {
            return Err(err(line, format!("link from node {a} to itself")));
        }
        let rate_bps = parse_rate(rate).map_err(|e| err(line, format!("rate: {e}")))?;
        if !(MIN_RATE_BPS..=MAX_RATE_BPS).contains(&rate_bps) {
            return Err(err(
                line,
                format!(
                    "rate {rate} on link {a} - {b} is outside {} .. {}: no link runs at it",
                    format_rate(MIN_RATE_BPS),
                    format_rate(MAX_RATE_BPS)
                ),
            ));
        }
        let delay_ns = parse_delay(delay).map_err(|e| err(line, format!("delay: {e}")))?;
        match error_rate.parse::<f64>() {
            Ok(0.0) => {}
            Ok(r) if r.is_finite() && r > 0.0 => {
                return Err(err(
                    line,
                    format!(
                        "error rate {r} on link {a} - {b}: packet loss is not modelled; \
                         only 0 is accepted"
                    ),
                ))
            }
            _ => {
                return Err(err(
                    line,
                    format!(
                        "error rate {} is not a number from 0 to 1",
                        echo(error_rate)
                    ),
                ))
            }
        }
        links.push(FileLink {
            line,
            a,
            b,
            rate_bps,
            delay_ns,
        });
    }
    if links.len() < link_count {
        return Err(ImportError::new(format!(
            "{path}: {} links, but the header (line {header_line}) gives {link_count}",
            links.len()
        )));
    }

    let mut kinds = vec![Kind::Host; nodes];
    for (&id, &(kind, _)) in &listed {
        kinds[id] = kind;
    }
    let dci: Vec<usize> = (0..nodes).filter(|&i| kinds[i] == Kind::Dci).collect();
    Ok(File {
        header_line,
        nodes,
        kinds,
        dci,
        links,
    })
}

/// `path` for the command line in the header: as given if relative, else
/// its file name (no machine's directories in a shipped file).
fn shown_path(path: &str) -> &str {
    if path.starts_with('/') {
        path.rsplit('/').next().unwrap_or(path)
    } else {
        path
    }
}

fn convert(file: &File, path: &str, opts: &HpccOptions) -> Result<HpccImported, ImportError> {
    let n = file.nodes;
    let kinds = &file.kinds;
    let node_err = |msg: String| ImportError::new(format!("{path}: {msg}"));
    let line_err = |line: usize, msg: String| ImportError::new(format!("{path}:{line}: {msg}"));

    // Hosts: each on exactly one link, to an intra-DC switch.
    let mut host_link: Vec<Option<usize>> = vec![None; n];
    let mut switch_links = Vec::new();
    for (i, l) in file.links.iter().enumerate() {
        let (ka, kb) = (kinds[l.a], kinds[l.b]);
        let (h, s) = match (ka, kb) {
            (Kind::Host, Kind::Host) => {
                return Err(line_err(
                    l.line,
                    format!(
                        "link between two hosts ({} and {}); a host links to one intra-DC switch",
                        l.a, l.b
                    ),
                ))
            }
            (Kind::Host, _) => (l.a, l.b),
            (_, Kind::Host) => (l.b, l.a),
            _ => {
                switch_links.push(i);
                continue;
            }
        };
        if kinds[s] == Kind::Dci {
            return Err(line_err(
                l.line,
                format!(
                    "host {h} is linked to DCI switch {s}; hosts hang off intra-DC switches \
                     (a DCI switch delivers no prefix here)"
                ),
            ));
        }
        if let Some(first) = host_link[h] {
            let f = &file.links[first];
            let other = if f.a == h { f.b } else { f.a };
            return Err(line_err(
                l.line,
                format!(
                    "host {h} is attached to a second switch ({s}; the first, {other}, on line \
                     {}); a host has one link",
                    f.line
                ),
            ));
        }
        host_link[h] = Some(i);
    }
    if let Some(h) = (0..n).find(|&h| kinds[h] == Kind::Host && host_link[h].is_none()) {
        return Err(node_err(format!(
            "node {h} is in neither switch list, so a host, but has no link (the header, line \
             {}, gives {n} nodes)",
            file.header_line
        )));
    }

    // DCs: flood from each DCI switch without entering another.
    let mut adj = vec![Vec::new(); n];
    for l in &file.links {
        adj[l.a].push(l.b);
        adj[l.b].push(l.a);
    }
    let mut dc_of: Vec<Option<usize>> = vec![None; n];
    for (k, &d) in file.dci.iter().enumerate() {
        dc_of[d] = Some(k);
        let mut stack = vec![d];
        while let Some(v) = stack.pop() {
            for &u in &adj[v] {
                if kinds[u] == Kind::Dci {
                    continue;
                }
                match dc_of[u] {
                    None => {
                        dc_of[u] = Some(k);
                        stack.push(u);
                    }
                    Some(other) if other != k => {
                        return Err(node_err(format!(
                            "{} {u} reaches DCI switches {} and {d} without crossing another \
                             DCI switch, so it belongs to no single DC",
                            kinds[u].name(),
                            file.dci[other]
                        )));
                    }
                    Some(_) => {}
                }
            }
        }
    }
    if let Some(v) = (0..n).find(|&v| dc_of[v].is_none()) {
        return Err(node_err(format!(
            "{} {v} reaches no DCI switch without crossing another, so it belongs to no DC",
            kinds[v].name()
        )));
    }
    let dc_count = file.dci.len();
    if dc_count > MAX_DCS {
        return Err(node_err(format!(
            "{dc_count} DCI switches, but the address plan 10.<k>.<j>.0/24 has room for \
             {MAX_DCS} DCs"
        )));
    }

    // Per DC, in id order: leaves, spines, hosts (ids ascend).
    let mut hosts_on = vec![Vec::new(); n];
    for h in (0..n).filter(|&h| kinds[h] == Kind::Host) {
        let l = &file.links[host_link[h].expect("checked above")];
        hosts_on[if l.a == h { l.b } else { l.a }].push(h);
    }
    let mut leaves = vec![Vec::new(); dc_count];
    let mut spines = vec![Vec::new(); dc_count];
    let mut dc_hosts = vec![Vec::new(); dc_count];
    for v in 0..n {
        let k = dc_of[v].expect("checked above");
        match kinds[v] {
            Kind::Intra if hosts_on[v].is_empty() => spines[k].push(v),
            Kind::Intra => leaves[k].push(v),
            Kind::Host => dc_hosts[k].push(v),
            Kind::Dci => {}
        }
    }
    let mut name = vec![String::new(); n];
    // Each host's address: 10.<k>.<j>.<2+i>/24 for the i-th host of leaf j.
    let mut address = vec![String::new(); n];
    for k in 0..dc_count {
        let dc = k + 1;
        name[file.dci[k]] = format!("dc{dc}");
        if leaves[k].len() > MAX_LEAVES_PER_DC {
            return Err(node_err(format!(
                "DC{dc} (DCI switch {}) has {} leaves, but the address plan 10.<k>.<j>.0/24 \
                 has room for {MAX_LEAVES_PER_DC}",
                file.dci[k],
                leaves[k].len()
            )));
        }
        for (j, &leaf) in leaves[k].iter().enumerate() {
            name[leaf] = format!("dc{dc}leaf{}", j + 1);
            if hosts_on[leaf].len() > MAX_HOSTS_PER_LEAF {
                return Err(node_err(format!(
                    "switch {leaf} has {} hosts, but its /24 has room for {MAX_HOSTS_PER_LEAF}",
                    hosts_on[leaf].len()
                )));
            }
            for (i, &h) in hosts_on[leaf].iter().enumerate() {
                address[h] = format!("10.{dc}.{}.{}/24", j + 1, i + 2);
            }
        }
        for (j, &spine) in spines[k].iter().enumerate() {
            name[spine] = format!("dc{dc}spine{}", j + 1);
        }
        for (i, &h) in dc_hosts[k].iter().enumerate() {
            name[h] = format!("dc{dc}h{}", i + 1);
        }
    }

    let is_dci = |v: usize| kinds[v] == Kind::Dci;
    let inter_dc_links = switch_links
        .iter()
        .filter(|&&i| {
            let l = &file.links[i];
            dc_of[l.a] != dc_of[l.b]
        })
        .count();
    let leaf_count: usize = leaves.iter().map(Vec::len).sum();
    let spine_count: usize = spines.iter().map(Vec::len).sum();
    let host_count: usize = dc_hosts.iter().map(Vec::len).sum();
    let file_name = path.rsplit('/').next().unwrap_or(path);

    let mut out = String::new();
    // Writing to a String cannot fail.
    macro_rules! w {
        ($($arg:tt)*) => {
            let _ = writeln!(out, $($arg)*);
        };
    }
    out.push_str(&super::comment_block(&opts.comments));
    let mut command = format!("lcmp-topology import --format hpcc {}", shown_path(path));
    if opts.buffer_bytes != DEFAULT_BUFFER_BYTES {
        let _ = write!(command, " --buffer {}", format_bytes(opts.buffer_bytes));
    }
    if opts.dci_buffer_bytes != DEFAULT_DCI_BUFFER_BYTES {
        let _ = write!(
            command,
            " --dci-buffer {}",
            format_bytes(opts.dci_buffer_bytes)
        );
    }
    if !opts.comments.is_empty() {
        command.push_str(" (with the --comment lines above)");
    }
    let dci_buffer = format_bytes(opts.dci_buffer_bytes);
    let buffer = format_bytes(opts.buffer_bytes);
    let switch_count = dc_count + leaf_count + spine_count;
    let paragraphs = [
        format!(
            "Generated by `lcmp-topology import` from {file_name:?}, a topology file of the \
             HPCC ns-3 simulator (as the LCMP artifact uses it), with the intra-DC fabric, by:"
        ),
        format!(
            "{dc_count} DCs: DC<k> is the k-th DCI switch by node id and every node it reaches \
             without crossing another DCI switch."
        ),
        format!(
            "{switch_count} switches: {dc_count} DCI switches dc<k> (transit); {leaf_count} \
             leaves dc<k>leaf<j>, the intra-DC switches with hosts, leaf j delivering \
             10.<k>.<j>.0/24; {spine_count} spines dc<k>spine<j>, the other intra-DC switches \
             (transit); j counts from 1 in node id order. Intra-DC switches pin policy \
             \"ecmp\": the simulator's DC fabric hashes whatever the DCI switches run."
        ),
        format!(
            "{host_count} hosts dc<k>h<n>, n from 1 in node id order within the DC; the i-th \
             host of leaf j (node id order, from 0) is 10.<k>.<j>.<2+i>/24; rate and delay are \
             those of its link."
        ),
        format!(
            "{} links between switches ({inter_dc_links} between DCs; the file's other \
             {host_count} links attach the hosts), in file order, with the file's rate and \
             delay (and error rate 0).",
            switch_links.len()
        ),
        format!(
            "Buffers: the simulator gives each switch one buffer shared by all its ports; here \
             each port gets the whole size: {dci_buffer} (--dci-buffer) on both ports of a link \
             that touches a DCI switch (per link), {buffer} (--buffer) on the other links and \
             on hosts ([defaults]). The artifact's config_batch.txt has BUFFER_SIZE 32 and \
             DCI_BUFFER_SIZE 128 (MiB)."
        ),
    ];
    for (i, p) in paragraphs.iter().enumerate() {
        if i > 0 {
            w!("#");
        }
        for line in wrap(p, 76) {
            w!("# {line}");
        }
        if i == 0 {
            w!("#   {command}");
            w!("# Regenerate rather than edit.");
        }
    }
    w!();
    w!("[defaults]");
    w!("buffer = {:?}", format_bytes(opts.buffer_bytes));
    for k in 1..=dc_count {
        w!();
        w!("[[dc]]");
        w!("name = \"DC{k}\"");
    }
    for k in 0..dc_count {
        let dc = k + 1;
        let d = file.dci[k];
        w!();
        w!("[[switch]]");
        w!("# node {d}");
        w!("name = {:?}", name[d]);
        w!("dc = \"DC{dc}\"");
        for (j, &leaf) in leaves[k].iter().enumerate() {
            w!();
            w!("[[switch]]");
            w!("# node {leaf}");
            w!("name = {:?}", name[leaf]);
            w!("dc = \"DC{dc}\"");
            w!("prefixes = [\"10.{dc}.{}.0/24\"]", j + 1);
            w!("policy = \"ecmp\"");
        }
        for &spine in &spines[k] {
            w!();
            w!("[[switch]]");
            w!("# node {spine}");
            w!("name = {:?}", name[spine]);
            w!("dc = \"DC{dc}\"");
            w!("policy = \"ecmp\"");
        }
    }
    for hosts in &dc_hosts {
        for &h in hosts {
            let l = &file.links[host_link[h].expect("checked above")];
            let s = if l.a == h { l.b } else { l.a };
            w!();
            w!("[[host]]");
            w!("# node {h}, line {}", l.line);
            w!("name = {:?}", name[h]);
            w!("switch = {:?}", name[s]);
            w!("addresses = [{:?}]", address[h]);
            w!("rate = {:?}", format_rate(l.rate_bps));
            w!("delay = {:?}", format_delay(l.delay_ns));
        }
    }
    for &i in &switch_links {
        let l = &file.links[i];
        let (da, db) = (dc_of[l.a].unwrap_or(0) + 1, dc_of[l.b].unwrap_or(0) + 1);
        let place = if da == db {
            format!("DC{da}")
        } else {
            format!("DC{da} - DC{db}")
        };
        w!();
        w!("[[link]]");
        w!("# {place}: nodes {} - {}, line {}", l.a, l.b, l.line);
        w!("a = {:?}", name[l.a]);
        w!("b = {:?}", name[l.b]);
        w!("rate = {:?}", format_rate(l.rate_bps));
        w!("delay = {:?}", format_delay(l.delay_ns));
        if is_dci(l.a) || is_dci(l.b) {
            w!("buffer = {:?}", format_bytes(opts.dci_buffer_bytes));
        }
    }

    let topology = Topology::parse(&out, file_name).map_err(|e| {
        ImportError::new(format!("{path}: the converted topology is not valid: {e}"))
    })?;
    Ok(HpccImported {
        toml: out,
        topology,
        dcs: dc_count,
        leaves: leaf_count,
        spines: spine_count,
        hosts: host_count,
        switch_links: switch_links.len(),
        inter_dc_links,
    })
}

//! Flow traces to replay, in the formats of the HPCC ns-3 simulator the
//! LCMP artifact is built on.
//!
//! - `hpcc-fct`: the simulator's FCT output, one finished flow a line,
//!   `sip dip sport dport size_bytes start_ns fct_ns standalone_ns` (IPs in
//!   hex, `0b000101`). A trace to replay and, with its FCTs, the reference
//!   the testbed is compared with ([`crate::fidelity`]).
//! - `hpcc-flow`: the simulator's flow input (`simulation/mix/flow.txt`):
//!   the number of flows on the first line, then `src dst pg dport size
//!   start_s` per flow (host ids in decimal, start in seconds).
//!
//! Host ids: the simulator numbers hosts 0, 1, ... and gives host `i` the
//! IP `0x0b000001 + (i << 8)`. A trace's host `i` is host `i % H + 1` of DC
//! `i / H + 1` for `H` hosts per DC (16 in the artifact); [`HostMap`]
//! resolves that to a testbed host name.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::str::FromStr;

use lcmp_topology::Topology;
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// The IP of the simulator's host 0; host `i` is this plus `i << 8`.
pub const HPCC_HOST_IP_BASE: u32 = 0x0b00_0001;

/// Hosts per DC in the LCMP artifact's 8-DC topology.
pub const ARTIFACT_HOSTS_PER_DC: u32 = 16;

/// Which simulator format a trace file is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TraceFormat {
    /// FCT output: `sip dip sport dport size_bytes start_ns fct_ns standalone_ns`.
    HpccFct,
    /// Flow input: a count line, then `src dst pg dport size start_s`.
    HpccFlow,
}

impl TraceFormat {
    /// The name on the command line and in configs.
    pub fn name(self) -> &'static str {
        match self {
            TraceFormat::HpccFct => "hpcc-fct",
            TraceFormat::HpccFlow => "hpcc-flow",
        }
    }
}

impl fmt::Display for TraceFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for TraceFormat {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "hpcc-fct" => Ok(TraceFormat::HpccFct),
            "hpcc-flow" => Ok(TraceFormat::HpccFlow),
            other => Err(Error::new(format!(
                "unknown trace format {other:?} (hpcc-fct or hpcc-flow)"
            ))),
        }
    }
}

/// One flow of a trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceFlow {
    /// Position among the trace's flows (0-based, file order).
    pub index: usize,
    /// Its line in the file (1-based), for messages about it.
    #[serde(default)]
    pub line: usize,
    /// Simulator host ids.
    pub src_host: u32,
    pub dst_host: u32,
    /// Payload bytes (> 0).
    pub size_bytes: u64,
    /// Start as in the file (the simulator's clock), nanoseconds.
    pub start_ns: u64,
    /// The simulator's FCT (`hpcc-fct` only).
    pub reference_fct_ns: Option<u64>,
    /// The flow's FCT alone on the minimum-delay path (`hpcc-fct` only, > 0).
    pub standalone_ns: Option<u64>,
}

/// A parsed trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trace {
    /// The file it came from (as given, for messages).
    pub file: String,
    pub format: TraceFormat,
    /// At least one.
    pub flows: Vec<TraceFlow>,
    /// Non-empty lines after the announced number of flows of an
    /// `hpcc-flow` file, which the simulator does not read either (HPCC's
    /// own `flow.txt` ends with a description of the format).
    pub ignored_lines: usize,
}

/// `FILE:LINE: msg`.
fn at(file: &str, line: usize, msg: impl fmt::Display) -> Error {
    Error::new(format!("{file}:{line}: {msg}"))
}

fn field<T: FromStr>(file: &str, line: usize, what: &str, s: &str) -> Result<T> {
    s.parse().map_err(|_| {
        at(
            file,
            line,
            format!("{what} {s:?} is not a non-negative integer"),
        )
    })
}

/// The simulator host id of a hex IP (`0b000101` -> 1).
fn host_of_ip(file: &str, line: usize, what: &str, s: &str) -> Result<u32> {
    let hex = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    let ip = u32::from_str_radix(hex, 16)
        .ok()
        .filter(|_| !hex.is_empty() && hex.len() <= 8 && !hex.starts_with('+'))
        .ok_or_else(|| {
            at(
                file,
                line,
                format!("{what} {s:?} is not a hex IPv4 address"),
            )
        })?;
    if ip < HPCC_HOST_IP_BASE || ip & 0xff != 0x01 {
        return Err(at(
            file,
            line,
            format!(
                "{what} {s} is no simulator host address (0b000001 + id x 0x100: \
                 at least 0b000001, last byte 01)"
            ),
        ));
    }
    Ok((ip - HPCC_HOST_IP_BASE) >> 8)
}

/// Seconds as written (`2.000036848`, `2`, `1e-3`) to nanoseconds. Plain
/// decimals are converted exactly (rounded to the nearest nanosecond), so
/// the simulator's `%.9f` start times keep every digit.
fn seconds_to_ns(s: &str) -> Option<u64> {
    let plain = !s.is_empty()
        && s.chars().all(|c| c.is_ascii_digit() || c == '.')
        && s.matches('.').count() <= 1
        && s != ".";
    if !plain {
        let v: f64 = s.parse().ok()?;
        let ns = (v * 1e9).round();
        return (v.is_finite() && v >= 0.0 && ns < u64::MAX as f64).then_some(ns as u64);
    }
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let int: u64 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let mut frac_ns: u64 = 0;
    for (k, c) in frac.bytes().take(9).enumerate() {
        frac_ns += u64::from(c - b'0') * 10u64.pow(8 - k as u32);
    }
    if frac.as_bytes().get(9).is_some_and(|&c| c >= b'5') {
        frac_ns += 1;
    }
    int.checked_mul(1_000_000_000)?.checked_add(frac_ns)
}

/// Non-empty lines with their 1-based numbers.
/// The non-blank lines of `text` with their 1-based numbers, split into
/// fields; lines starting with `#` are comments (the artifact's all-pairs
/// flow lists open with two).
fn lines(text: &str) -> impl Iterator<Item = (usize, Vec<&str>)> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim_start().starts_with('#'))
        .map(|(i, l)| (i + 1, l.split_whitespace().collect::<Vec<_>>()))
        .filter(|(_, f)| !f.is_empty())
}

fn check_hosts(file: &str, line: usize, src: u32, dst: u32) -> Result<()> {
    if src == dst {
        return Err(at(
            file,
            line,
            format!("source and destination are both host {src}"),
        ));
    }
    Ok(())
}

fn check_size(file: &str, line: usize, size: u64) -> Result<u64> {
    if size == 0 {
        return Err(at(file, line, "flow size is 0 bytes"));
    }
    Ok(size)
}

fn parse_fct(text: &str, file: &str) -> Result<Vec<TraceFlow>> {
    let mut flows = Vec::new();
    for (line, f) in lines(text) {
        if f.len() != 8 {
            return Err(at(
                file,
                line,
                format!(
                    "expected 8 fields (sip dip sport dport size_bytes start_ns fct_ns \
                     standalone_ns), found {}",
                    f.len()
                ),
            ));
        }
        let src = host_of_ip(file, line, "source IP", f[0])?;
        let dst = host_of_ip(file, line, "destination IP", f[1])?;
        check_hosts(file, line, src, dst)?;
        let _sport: u32 = field(file, line, "source port", f[2])?;
        let _dport: u32 = field(file, line, "destination port", f[3])?;
        let size = check_size(file, line, field(file, line, "size", f[4])?)?;
        let start: u64 = field(file, line, "start", f[5])?;
        let fct: u64 = field(file, line, "FCT", f[6])?;
        let standalone: u64 = field(file, line, "standalone FCT", f[7])?;
        if standalone == 0 {
            return Err(at(file, line, "standalone FCT is 0 (no slowdown defined)"));
        }
        flows.push(TraceFlow {
            index: flows.len(),
            line,
            src_host: src,
            dst_host: dst,
            size_bytes: size,
            start_ns: start,
            reference_fct_ns: Some(fct),
            standalone_ns: Some(standalone),
        });
    }
    Ok(flows)
}

fn parse_flow_file(text: &str, file: &str) -> Result<(Vec<TraceFlow>, usize)> {
    let mut it = lines(text);
    let Some((line, first)) = it.next() else {
        return Ok((Vec::new(), 0));
    };
    if first.len() != 1 {
        return Err(at(
            file,
            line,
            format!(
                "expected the number of flows alone on the first line, found {} fields",
                first.len()
            ),
        ));
    }
    let count: usize = field(file, line, "number of flows", first[0])?;
    let mut flows = Vec::with_capacity(count.min(1 << 20));
    let mut last_line = line;
    let mut prev_start = 0;
    for (line, f) in it.by_ref().take(count) {
        last_line = line;
        if f.len() != 6 {
            return Err(at(
                file,
                line,
                format!(
                    "expected 6 fields (src dst pg dport size start_s), found {}",
                    f.len()
                ),
            ));
        }
        let src: u32 = field(file, line, "source host", f[0])?;
        let dst: u32 = field(file, line, "destination host", f[1])?;
        check_hosts(file, line, src, dst)?;
        let _pg: u32 = field(file, line, "priority group", f[2])?;
        let _dport: u32 = field(file, line, "destination port", f[3])?;
        let size = check_size(file, line, field(file, line, "size", f[4])?)?;
        let start = seconds_to_ns(f[5]).ok_or_else(|| {
            at(
                file,
                line,
                format!("start {:?} is not a time in seconds", f[5]),
            )
        })?;
        // The simulator schedules each flow from the previous one's start.
        if start < prev_start {
            return Err(at(
                file,
                line,
                format!(
                    "start {} s is before the previous flow's (the simulator needs \
                     ascending start times)",
                    f[5]
                ),
            ));
        }
        prev_start = start;
        flows.push(TraceFlow {
            index: flows.len(),
            line,
            src_host: src,
            dst_host: dst,
            size_bytes: size,
            start_ns: start,
            reference_fct_ns: None,
            standalone_ns: None,
        });
    }
    if flows.len() < count {
        return Err(at(
            file,
            last_line,
            format!(
                "the first line announces {count} flows, the file has {}",
                flows.len()
            ),
        ));
    }
    Ok((flows, it.count()))
}

/// Parses `text` in `format`; `file_name` names the file in errors
/// (`FILE:LINE: what is wrong`, one line).
pub fn parse(text: &str, format: TraceFormat, file_name: &str) -> Result<Trace> {
    let (flows, ignored_lines) = match format {
        TraceFormat::HpccFct => (parse_fct(text, file_name)?, 0),
        TraceFormat::HpccFlow => parse_flow_file(text, file_name)?,
    };
    if flows.is_empty() {
        return Err(Error::new(format!(
            "{file_name}: no flows in this {format} trace"
        )));
    }
    Ok(Trace {
        file: file_name.to_string(),
        format,
        flows,
        ignored_lines,
    })
}

/// Reads and parses the trace file at `path`.
pub fn load(path: &Path, format: TraceFormat) -> Result<Trace> {
    let name = path.display().to_string();
    let text =
        lcmp_topology::read_data_file(path).map_err(|e| Error::new(format!("{name}: {e}")))?;
    parse(&text, format, &name)
}

impl Trace {
    /// A copy with start times relative to the earliest flow's.
    pub fn relative(&self) -> Trace {
        let t0 = self.flows.iter().map(|f| f.start_ns).min().unwrap_or(0);
        let mut t = self.clone();
        for f in &mut t.flows {
            f.start_ns -= t0;
        }
        t
    }

    /// Per sending host (testbed name), its flows in start order: flow
    /// index, receiver, size as in the trace (unscaled: the traffic client
    /// scales sizes itself) and start relative to the trace's first flow,
    /// as the emulation runs it (`scaling`'s time dilation). Fails on the
    /// first host id the testbed lacks, naming the file and its line.
    pub fn schedules(
        &self,
        hosts: &HostMap,
        scaling: &lcmp_topology::Scaling,
    ) -> Result<BTreeMap<String, Vec<ScheduleRow>>> {
        let mut out: BTreeMap<String, Vec<ScheduleRow>> = BTreeMap::new();
        for f in &self.relative().flows {
            let name = |id| hosts.name(id).map_err(|e| at(&self.file, f.line, e));
            let sender = name(f.src_host)?;
            let receiver = name(f.dst_host)?;
            out.entry(sender.to_string())
                .or_default()
                .push(ScheduleRow {
                    id: f.index as u64,
                    receiver: receiver.to_string(),
                    size_bytes: f.size_bytes,
                    start_ns: scaling.duration_ns(f.start_ns),
                });
        }
        for rows in out.values_mut() {
            rows.sort_by_key(|r| (r.start_ns, r.id));
        }
        Ok(out)
    }
}

/// One flow of a sender's schedule file (`id,receiver,size_bytes,start_ns`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleRow {
    /// The flow's [`TraceFlow::index`].
    pub id: u64,
    /// Receiving host (testbed name).
    pub receiver: String,
    /// Payload bytes as in the trace.
    pub size_bytes: u64,
    /// Start relative to the trace's first flow, nanoseconds.
    pub start_ns: u64,
}

/// Writes `rows` as CSV with the header `id,receiver,size_bytes,start_ns`.
pub fn write_schedule(path: &Path, rows: &[ScheduleRow]) -> Result<()> {
    let name = path.display();
    let mut w = csv::Writer::from_path(path).map_err(|e| Error::new(format!("{name}: {e}")))?;
    if rows.is_empty() {
        w.write_record(["id", "receiver", "size_bytes", "start_ns"])
            .map_err(|e| Error::new(format!("{name}: {e}")))?;
    }
    for r in rows {
        w.serialize(r)
            .map_err(|e| Error::new(format!("{name}: {e}")))?;
    }
    w.flush().map_err(|e| Error::new(format!("{name}: {e}")))
}

/// `(DC, host)`, both 1-based, of trace host `id` with `hosts_per_dc`
/// hosts per DC: host `id % hosts_per_dc + 1` of DC `id / hosts_per_dc + 1`.
/// `hosts_per_dc` 0 is taken as 1.
pub fn dc_host(id: u32, hosts_per_dc: u32) -> (u32, u32) {
    let h = hosts_per_dc.max(1);
    (id / h + 1, id % h + 1)
}

/// Trace host ids to testbed host names: DC `k` is the topology's `k`-th
/// `[[dc]]` (file order; without `[[dc]]` tables, the `k`-th switch with
/// hosts), host `j` its `j`-th host in file order, which for generated hosts
/// is `<switch>h<j>` (`dc8h3`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostMap {
    hosts_per_dc: u32,
    /// Per DC, its hosts' names.
    dcs: Vec<Vec<String>>,
}

impl HostMap {
    /// The map for `topo` (the effective topology, hosts generated) and a
    /// trace with `trace_hosts_per_dc` hosts per DC.
    pub fn new(topo: &Topology, trace_hosts_per_dc: u32) -> HostMap {
        let hosts_of = |switches: &[lcmp_topology::SwitchId]| -> Vec<String> {
            topo.hosts()
                .iter()
                .filter(|h| switches.contains(&h.switch))
                .map(|h| h.name.clone())
                .collect()
        };
        let dcs = if topo.dcs().is_empty() {
            topo.switches()
                .iter()
                .map(|s| hosts_of(&[s.id]))
                .filter(|h| !h.is_empty())
                .collect()
        } else {
            topo.dcs()
                .iter()
                .map(|d| hosts_of(&topo.switches_in_dc(d.id).map(|s| s.id).collect::<Vec<_>>()))
                .collect()
        };
        HostMap::from_dcs(dcs, trace_hosts_per_dc)
    }

    /// A map from per-DC host names directly.
    pub fn from_dcs(dcs: Vec<Vec<String>>, trace_hosts_per_dc: u32) -> HostMap {
        HostMap {
            hosts_per_dc: trace_hosts_per_dc.max(1),
            dcs,
        }
    }

    /// The testbed host of trace host `id`, or a one-line error naming the
    /// id, its DC and host, and what the testbed has.
    pub fn name(&self, id: u32) -> Result<&str> {
        let (dc, host) = dc_host(id, self.hosts_per_dc);
        self.dcs
            .get(dc as usize - 1)
            .and_then(|hosts| hosts.get(host as usize - 1))
            .map(String::as_str)
            .ok_or_else(|| {
                Error::new(format!(
                    "trace host id {id} (DC {dc}, host {host}) is not in the testbed ({})",
                    self.describe()
                ))
            })
    }

    /// `8 DCs x 16 hosts`, or the count per DC where they differ.
    fn describe(&self) -> String {
        let counts: Vec<usize> = self.dcs.iter().map(Vec::len).collect();
        let n = self.dcs.len();
        let dcs = if n == 1 { "DC" } else { "DCs" };
        match counts.first() {
            Some(&c) if counts.iter().all(|&x| x == c) => format!("{n} {dcs} x {c} hosts"),
            _ => format!(
                "{n} {dcs} with {} hosts",
                counts
                    .iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FCT: &str = "\
0b000101 0b007a01 10000 100 58600 2000036848 20032328 20032658
0b000801 0b007801 10001 100 16361 2000887563 20661493 20018496

0b000c01 0b007d01 10000 100 17046 2001333359 20501987 20018731
";

    fn err(r: Result<Trace>) -> String {
        r.unwrap_err().to_string()
    }

    #[test]
    fn fct_lines_by_hand() {
        let t = parse(FCT, TraceFormat::HpccFct, "f.txt").unwrap();
        assert_eq!(t.flows.len(), 3);
        // 0x0b000101: host 1; 0x0b007a01: (0x7a00) >> 8 = 122.
        assert_eq!(
            t.flows[0],
            TraceFlow {
                index: 0,
                line: 1,
                src_host: 1,
                dst_host: 122,
                size_bytes: 58_600,
                start_ns: 2_000_036_848,
                reference_fct_ns: Some(20_032_328),
                standalone_ns: Some(20_032_658),
            }
        );
        assert_eq!((t.flows[1].src_host, t.flows[1].dst_host), (8, 120));
        // The blank line does not count as a flow, but as a line.
        assert_eq!((t.flows[2].index, t.flows[2].src_host), (2, 12));
        assert_eq!(t.flows[2].line, 4);
        assert_eq!(t.flows[2].dst_host, 125);
        let r = t.relative();
        let starts: Vec<u64> = r.flows.iter().map(|f| f.start_ns).collect();
        assert_eq!(starts, [0, 850_715, 1_296_511]);
    }

    #[test]
    fn malformed_fct_lines_name_file_and_line() {
        let p = |s: &str| err(parse(s, TraceFormat::HpccFct, "f.txt"));
        let good = "0b000101 0b007a01 10000 100 58600 2000036848 20032328 20032658\n";
        assert_eq!(
            p(&format!(
                "{good}0b000101 0b007a01 10000 100 58600 2000036848 20032328\n"
            )),
            "f.txt:2: expected 8 fields (sip dip sport dport size_bytes start_ns fct_ns \
             standalone_ns), found 7"
        );
        assert_eq!(
            p("0b0001zz 0b007a01 1 100 5 2 3 4"),
            "f.txt:1: source IP \"0b0001zz\" is not a hex IPv4 address"
        );
        assert_eq!(
            p("0b000101 0a000001 1 100 5 2 3 4"),
            "f.txt:1: destination IP 0a000001 is no simulator host address \
             (0b000001 + id x 0x100: at least 0b000001, last byte 01)"
        );
        assert!(
            p("0b000102 0b007a01 1 100 5 2 3 4").starts_with("f.txt:1: source IP 0b000102 is no")
        );
        assert_eq!(
            p(&format!("{good}\n0b000101 0b007a01 1 100 0 2 3 4")),
            "f.txt:3: flow size is 0 bytes"
        );
        assert_eq!(
            p("0b000101 0b007a01 1 100 5 -2 3 4"),
            "f.txt:1: start \"-2\" is not a non-negative integer"
        );
        assert_eq!(
            p("0b000101 0b000101 1 100 5 2 3 4"),
            "f.txt:1: source and destination are both host 1"
        );
        assert_eq!(
            p("0b000101 0b007a01 1 100 5 2 3 0"),
            "f.txt:1: standalone FCT is 0 (no slowdown defined)"
        );
        assert_eq!(p("\n\n"), "f.txt: no flows in this hpcc-fct trace");
    }

    #[test]
    fn flow_file_by_hand() {
        // HPCC's simulation/mix/flow.txt layout, with its trailing notes.
        let text = "3\n2 1 3 100 200000000 2\n17 130 3 100 1000 2.000036848\n\
                    5 1 3 100 7 2.5\n\nFirst line: # of flows\n";
        let t = parse(text, TraceFormat::HpccFlow, "flow.txt").unwrap();
        assert_eq!(t.flows.len(), 3);
        assert_eq!(t.ignored_lines, 1);
        assert_eq!(
            t.flows[1],
            TraceFlow {
                index: 1,
                line: 3,
                src_host: 17,
                dst_host: 130,
                size_bytes: 1000,
                start_ns: 2_000_036_848,
                reference_fct_ns: None,
                standalone_ns: None,
            }
        );
        assert_eq!(t.flows[0].start_ns, 2_000_000_000);
        assert_eq!(t.flows[2].start_ns, 2_500_000_000);
        let starts: Vec<u64> = t.relative().flows.iter().map(|f| f.start_ns).collect();
        assert_eq!(starts, [0, 36_848, 500_000_000]);
    }

    #[test]
    fn an_endless_trace_is_read_up_to_the_cap() {
        // /dev/zero as --trace or --reference read ~2 GB, then "out of
        // memory".
        let e = load(Path::new("/dev/zero"), TraceFormat::HpccFct).unwrap_err();
        assert_eq!(
            e.to_string(),
            "/dev/zero: larger than 256 MiB (the limit for a data file)"
        );
    }

    #[test]
    fn comment_lines_are_skipped_and_lines_keep_their_numbers() {
        // The artifact's traffic_WebSearch_8DC-*util.txt open so.
        let text = "# \u{6d41}\u{6e90}IP \u{76ee}\u{7684}IP pg dport size start\n\
                    # src dst pg dport size start_time\n2\n\
                    25 123 3 100 66130 2.000001009\n\
                    106 60 3 100 44195 2.000003456\n";
        let t = parse(text, TraceFormat::HpccFlow, "t.txt").unwrap();
        assert_eq!(t.flows.len(), 2);
        assert_eq!((t.flows[0].src_host, t.flows[0].dst_host), (25, 123));
        assert_eq!(t.flows[1].size_bytes, 44195);
        assert_eq!(t.flows[1].start_ns, 2_000_003_456);
        assert_eq!((t.flows[0].line, t.flows[1].line), (4, 5));
        // A host the testbed lacks is named with its line: host 25 is host
        // 25 % 16 + 1 = 10 of DC 25 / 16 + 1 = 2, and DCs have 2 hosts.
        assert_eq!(
            t.schedules(
                &HostMap::new(&eight_dc(2), ARTIFACT_HOSTS_PER_DC),
                &lcmp_topology::Scaling::NONE
            )
            .unwrap_err()
            .to_string(),
            "t.txt:4: trace host id 25 (DC 2, host 10) is not in the testbed (8 DCs x 2 hosts)"
        );
        // Errors still name the line as the file numbers it.
        assert_eq!(
            err(parse(
                "# a\n# b\n1\n1 2 3 100 10\n",
                TraceFormat::HpccFlow,
                "t.txt"
            )),
            "t.txt:4: expected 6 fields (src dst pg dport size start_s), found 5"
        );
    }

    #[test]
    fn seconds_convert_exactly() {
        assert_eq!(seconds_to_ns("2"), Some(2_000_000_000));
        assert_eq!(seconds_to_ns("2.000036848"), Some(2_000_036_848));
        assert_eq!(seconds_to_ns(".5"), Some(500_000_000));
        // A tenth digit rounds to the nearest nanosecond.
        assert_eq!(seconds_to_ns("0.0000000015"), Some(2));
        assert_eq!(seconds_to_ns("0.0000000014"), Some(1));
        assert_eq!(seconds_to_ns("1e-3"), Some(1_000_000));
        assert_eq!(seconds_to_ns("-1"), None);
        assert_eq!(seconds_to_ns("1.2.3"), None);
        assert_eq!(seconds_to_ns("x"), None);
        assert_eq!(seconds_to_ns("."), None);
    }

    #[test]
    fn malformed_flow_files_name_file_and_line() {
        let p = |s: &str| err(parse(s, TraceFormat::HpccFlow, "flow.txt"));
        assert_eq!(
            p("2 1\n"),
            "flow.txt:1: expected the number of flows alone on the first line, found 2 fields"
        );
        assert_eq!(
            p("two\n"),
            "flow.txt:1: number of flows \"two\" is not a non-negative integer"
        );
        assert_eq!(
            p("2\n1 2 3 100 10 2\n1 2 3 100 10\n"),
            "flow.txt:3: expected 6 fields (src dst pg dport size start_s), found 5"
        );
        assert_eq!(
            p("1\n1 2 3 100 10 2.x\n"),
            "flow.txt:2: start \"2.x\" is not a time in seconds"
        );
        assert_eq!(
            p("1\n0x1 2 3 100 10 2\n"),
            "flow.txt:2: source host \"0x1\" is not a non-negative integer"
        );
        assert_eq!(
            p("2\n1 2 3 100 10 2\n1 2 3 100 10 1.5\n"),
            "flow.txt:3: start 1.5 s is before the previous flow's (the simulator needs \
             ascending start times)"
        );
        assert_eq!(
            p("3\n1 2 3 100 10 2\n\n1 2 3 100 10 2\n"),
            "flow.txt:4: the first line announces 3 flows, the file has 2"
        );
        assert_eq!(p("0\n"), "flow.txt: no flows in this hpcc-flow trace");
        assert_eq!(
            p("1\n4 4 3 100 10 2\n"),
            "flow.txt:2: source and destination are both host 4"
        );
    }

    #[test]
    fn formats_by_name() {
        assert_eq!(
            "hpcc-fct".parse::<TraceFormat>().unwrap(),
            TraceFormat::HpccFct
        );
        assert_eq!(
            "hpcc-flow".parse::<TraceFormat>().unwrap(),
            TraceFormat::HpccFlow
        );
        assert_eq!(
            "ns3".parse::<TraceFormat>().unwrap_err().to_string(),
            "unknown trace format \"ns3\" (hpcc-fct or hpcc-flow)"
        );
        assert_eq!(TraceFormat::HpccFlow.to_string(), "hpcc-flow");
        assert_eq!(
            serde_json::to_string(&TraceFormat::HpccFct).unwrap(),
            "\"hpcc-fct\""
        );
    }

    #[test]
    fn host_ids_map_to_dc_and_host() {
        assert_eq!(dc_host(0, 16), (1, 1));
        assert_eq!(dc_host(15, 16), (1, 16));
        assert_eq!(dc_host(16, 16), (2, 1));
        assert_eq!(dc_host(122, 16), (8, 11));
        assert_eq!(dc_host(130, 16), (9, 3));
    }

    /// The built-in 8-DC topology with `n` generated hosts per DC switch.
    fn eight_dc(n: usize) -> Topology {
        Topology::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../topologies/8dc.toml"))
            .unwrap()
            .with_generated_hosts(
                n,
                lcmp_topology::HostTemplate {
                    rate_bps: None,
                    delay_ns: 10_000,
                    buffer_bytes: None,
                },
            )
            .unwrap()
    }

    #[test]
    fn host_map_of_the_8dc_testbed() {
        let m = HostMap::new(&eight_dc(16), ARTIFACT_HOSTS_PER_DC);
        assert_eq!(m.name(0).unwrap(), "dc1h1");
        assert_eq!(m.name(122).unwrap(), "dc8h11");
        assert_eq!(m.name(127).unwrap(), "dc8h16");
        assert_eq!(
            m.name(130).unwrap_err().to_string(),
            "trace host id 130 (DC 9, host 3) is not in the testbed (8 DCs x 16 hosts)"
        );
        // Two hosts per DC: host 3 of DC 1 is missing.
        let m = HostMap::new(&eight_dc(2), ARTIFACT_HOSTS_PER_DC);
        assert_eq!(m.name(17).unwrap(), "dc2h2");
        assert_eq!(
            m.name(2).unwrap_err().to_string(),
            "trace host id 2 (DC 1, host 3) is not in the testbed (8 DCs x 2 hosts)"
        );
        let m = HostMap::from_dcs(vec![vec!["a".into()], vec![]], 16);
        assert_eq!(
            m.name(16).unwrap_err().to_string(),
            "trace host id 16 (DC 2, host 1) is not in the testbed (2 DCs with 1, 0 hosts)"
        );
    }

    #[test]
    fn schedules_per_sender_in_start_order() {
        // Host 1 sends twice (the second flow first), host 17 once.
        let text = "\
0b000201 0b007a01 1 100 300 5000 1 1
0b001101 0b000101 1 100 200 1000 1 1
0b000201 0b007b01 1 100 100 3000 1 1
";
        let t = parse(text, TraceFormat::HpccFct, "t").unwrap();
        let m = HostMap::new(&eight_dc(16), 16);
        let s = t.schedules(&m, &lcmp_topology::Scaling::NONE).unwrap();
        // Dilated ten-fold: the starts only.
        let dilated = lcmp_topology::Scaling {
            time: 10.0,
            ..lcmp_topology::Scaling::NONE
        };
        let d = t.schedules(&m, &dilated).unwrap();
        assert_eq!(d["dc1h3"][1].start_ns, 40_000);
        assert_eq!(d["dc1h3"][1].size_bytes, 300);
        let row = |id, receiver: &str, size, start| ScheduleRow {
            id,
            receiver: receiver.into(),
            size_bytes: size,
            start_ns: start,
        };
        assert_eq!(s.keys().collect::<Vec<_>>(), ["dc1h3", "dc2h2"]);
        assert_eq!(
            s["dc1h3"],
            [row(2, "dc8h12", 100, 2000), row(0, "dc8h11", 300, 4000)]
        );
        assert_eq!(s["dc2h2"], [row(1, "dc1h2", 200, 0)]);
        let dir = std::env::temp_dir().join(format!("lcmp-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("dc1h3.csv");
        write_schedule(&f, &s["dc1h3"]).unwrap();
        assert_eq!(
            std::fs::read_to_string(&f).unwrap(),
            "id,receiver,size_bytes,start_ns\n2,dc8h12,100,2000\n0,dc8h11,300,4000\n"
        );
        write_schedule(&f, &[]).unwrap();
        assert_eq!(
            std::fs::read_to_string(&f).unwrap(),
            "id,receiver,size_bytes,start_ns\n"
        );
        let _ = std::fs::remove_dir_all(&dir);
        // A receiver the testbed lacks fails the whole schedule.
        let m = HostMap::new(&eight_dc(2), 16);
        assert_eq!(
            t.schedules(&m, &lcmp_topology::Scaling::NONE)
                .unwrap_err()
                .to_string(),
            "t:1: trace host id 2 (DC 1, host 3) is not in the testbed (8 DCs x 2 hosts)"
        );
    }
}

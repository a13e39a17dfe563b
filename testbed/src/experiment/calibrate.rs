//! Calibration: does the emulation do what the topology says?
//!
//! On the idle testbed, every path a run's flows can take from the source
//! to the destination DC switch ([`paths`]: the product of the minimum-hop
//! choices of every switch on the way) is pinned in turn and its base RTT
//! measured with pings. Pinning a path ([`pins`]) takes down, at every
//! switch on it, the links of its other candidates toward the destination
//! and, for the replies, toward the source, so that no switch on the path,
//! the source switch or one downstream, has a choice left. The
//! minimum-delay path's rate is measured with one bulk TCP transfer. The
//! measured base RTT of the minimum-delay path is what the ideal FCT uses;
//! deviations beyond the tolerances below flag every run.
//!
//! A path's name: where only the source switch chooses, its next hop, as
//! before (on the 8-DC topology `dc2` .. `dc7`, the switch the path goes
//! via), which is also what the per-path tables and `flows.csv` call the
//! path; where switches downstream choose too, the whole switch sequence
//! joined by `>` (on 13dc from dc1 to dc13, `dc1>dc3>dc6>dc10>dc12>dc13`),
//! as `crate::flow_paths::path_name` names a flow's switch path, so the
//! two can be joined. Where parallel links of a switch lead to the same
//! next hop, that hop carries the switch's port, `m2#1`, so that every
//! name is one path's.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use lcmp_control::proto::TablesReply;
use lcmp_control::{Client, Reply, Request};
use lcmp_netlab::{iperf3_client, iperf3_server, ping_waiting, HostNode, Lab};
use lcmp_results::analysis::PathSpec;
use lcmp_topology::{IpNet, LinkId, PortPaths, SwitchId, Topology};
use serde::Serialize;

use crate::{Error, Result};

/// A path's measured RTT may exceed the configured one by this fraction...
pub const RTT_TOLERANCE_FRACTION: f64 = 0.05;
/// ...plus this (switch processing, timer lateness), milliseconds.
pub const RTT_TOLERANCE_MS: f64 = 1.0;
/// The minimum-delay path's TCP goodput must reach this fraction of its
/// configured rate times 1448/1514 (payload per frame).
pub const RATE_TOLERANCE: f64 = 0.85;
/// Rates above this are not checked: copy-mode AF_XDP on 2 cores cannot
/// carry them, so only scaled-down testbeds are calibrated for rate.
pub const MAX_CHECKED_RATE_BPS: u64 = 2_000_000_000;
/// A path whose RTT comes out above tolerance is pinged again, up to this
/// many rounds of ten, and keeps the minimum; a rate below tolerance is
/// measured again up to this many times and keeps the maximum. A busy
/// machine only adds delay and takes rate away, for a second at a time;
/// an emulation that is off stays off in every round.
pub const MAX_ROUNDS: u32 = 3;
/// At most this many paths are calibrated: each takes pings over its RTT
/// (seconds on a dilated or long-haul path), and a WAN's product of choices
/// grows fast.
pub const MAX_PATHS: usize = 64;
/// How long the switches' tables may take to follow links going down or
/// up: the agent polls port state every 20 ms and pushes at once; a busy
/// 2-core machine may take far longer.
const TABLES_TIMEOUT: Duration = Duration::from_secs(10);

/// A switch's port and the link behind it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Egress {
    /// The switch.
    pub switch: SwitchId,
    /// Its port.
    pub port: u8,
    /// The switch-to-switch link behind the port.
    pub link: LinkId,
}

/// One path from the source DC switch to the destination DC switch.
#[derive(Debug, Clone, Serialize)]
pub struct PathCal {
    /// Name (see the module docs).
    pub name: String,
    /// The switches it crosses, the source DC's first, the destination
    /// DC's last.
    pub switches: Vec<String>,
    /// Port of the source switch.
    pub port: u8,
    /// Configured one-way delay between the two DC switches (the sum of
    /// the path's link delays), nanoseconds.
    pub delay_ns: u64,
    /// Configured base RTT (both directions over this path, host links
    /// included), microseconds.
    pub configured_rtt_us: u64,
    /// Configured bottleneck rate (scaled, host links included), bits per
    /// second.
    pub bottleneck_bps: u64,
    /// Minimum RTT of the pings, microseconds.
    pub measured_rtt_us: Option<u64>,
    /// Rounds of ten pings taken (see [`MAX_ROUNDS`]).
    pub ping_rounds: u32,
    /// Within tolerance.
    pub ok: bool,
    /// Every switch but the last, leaving through the path's port.
    #[serde(skip)]
    pub hops: Vec<Egress>,
}

/// The rate check of the minimum-delay path.
#[derive(Debug, Clone, Serialize)]
pub struct RateCal {
    /// Configured bottleneck, bits per second.
    pub configured_bps: u64,
    /// TCP goodput measured, bits per second.
    pub goodput_bps: f64,
    /// goodput / (configured x 1448/1514).
    pub ratio: f64,
    /// Transfers made (see [`MAX_ROUNDS`]); the fastest counts.
    pub transfers: u32,
    /// Within tolerance.
    pub ok: bool,
}

/// Calibration of an experiment's testbed.
#[derive(Debug, Clone, Serialize)]
pub struct Calibration {
    /// Every path ([`paths`] order).
    pub paths: Vec<PathCal>,
    /// Index (into `paths`) of the minimum-delay path.
    pub min_path: usize,
    /// Base RTT for the ideal FCT: measured on the minimum-delay path,
    /// pinned end to end, or configured if the measurement failed,
    /// nanoseconds.
    pub base_rtt_ns: u64,
    /// Bottleneck of the minimum-delay path (host links included).
    pub bottleneck_bps: u64,
    /// Rate check, when the rate is low enough to check.
    pub rate: Option<RateCal>,
    /// What deviated.
    pub notes: Vec<String>,
    /// Everything within tolerance.
    pub ok: bool,
}

impl Calibration {
    /// The source switch's candidate paths toward the destination, one per
    /// port in port order, for the per-path tables: named by the neighbour
    /// behind the port (as the source switch's flow log names a flow's
    /// path), with the smallest configured RTT and the largest bottleneck
    /// of the paths leaving through it (what the switch's own candidate
    /// describes).
    pub fn first_hops(&self) -> Vec<PathSpec> {
        let mut by_port: BTreeMap<u8, PathSpec> = BTreeMap::new();
        for p in &self.paths {
            let spec = by_port.entry(p.port).or_insert_with(|| PathSpec {
                name: p.switches[1].clone(),
                port: p.port,
                rtt_us: p.configured_rtt_us,
                bottleneck_bps: p.bottleneck_bps,
            });
            spec.rtt_us = spec.rtt_us.min(p.configured_rtt_us);
            spec.bottleneck_bps = spec.bottleneck_bps.max(p.bottleneck_bps);
        }
        by_port.into_values().collect()
    }
}

/// The host links at the two ends of every path (for each DC switch, its
/// host link of the smallest delay), which the pings cross too.
struct Ends {
    delay_ns: u64,
    rate_bps: u64,
}

impl Ends {
    fn of(topo: &Topology, from: SwitchId, to: SwitchId) -> Ends {
        let host_link = |sw: SwitchId| {
            topo.hosts()
                .iter()
                .filter(|h| h.switch == sw)
                .map(|h| (h.delay_ns, h.rate_bps))
                .min()
                .unwrap_or((0, u64::MAX))
        };
        let (d_src, r_src) = host_link(from);
        let (d_dst, r_dst) = host_link(to);
        Ends {
            delay_ns: d_src + d_dst,
            rate_bps: r_src.min(r_dst),
        }
    }
}

/// Paths through the minimum-hop choices from `at` to `to` (saturating).
fn count_paths(
    choices: &[Vec<PortPaths>],
    at: SwitchId,
    to: SwitchId,
    memo: &mut [Option<u64>],
) -> u64 {
    if at == to {
        return 1;
    }
    if let Some(n) = memo[at.0] {
        return n;
    }
    let n = choices[at.0]
        .iter()
        .map(|c| count_paths(choices, c.next_hop, to, memo))
        .fold(0, u64::saturating_add);
    memo[at.0] = Some(n);
    n
}

/// Every hop sequence from `at` to `to` over the minimum-hop choices,
/// depth first in port order, each extending `prefix`.
fn walk<'a>(
    choices: &'a [Vec<PortPaths>],
    at: SwitchId,
    to: SwitchId,
    prefix: &mut Vec<(SwitchId, &'a PortPaths)>,
    out: &mut Vec<Vec<(SwitchId, &'a PortPaths)>>,
) {
    if at == to {
        out.push(prefix.clone());
        return;
    }
    for c in &choices[at.0] {
        prefix.push((at, c));
        walk(choices, c.next_hop, to, prefix, out);
        prefix.pop();
    }
}

/// Every path from `from` to `to` that a run's flows can take: at each
/// switch, any of its minimum-hop candidates toward `to` (the choices the
/// switches' tables offer), in port order at each switch; with the
/// configured one-way delay, base RTT (both directions, host links of the
/// two ends included) and bottleneck (host links included). More than
/// [`MAX_PATHS`] is refused.
pub fn paths(topo: &Topology, from: SwitchId, to: SwitchId) -> Result<Vec<PathCal>> {
    let name = |s: SwitchId| topo.switch(s).name.clone();
    let choices: Vec<Vec<PortPaths>> = topo
        .switches()
        .iter()
        .map(|s| topo.candidates(s.id, to))
        .collect();
    if choices[from.0].is_empty() {
        return Err(Error::new(format!(
            "{} has no route to {}",
            name(from),
            name(to)
        )));
    }
    let count = count_paths(&choices, from, to, &mut vec![None; choices.len()]);
    if count > MAX_PATHS as u64 {
        return Err(Error::new(format!(
            "{} to {}: {count} minimum-hop paths, more than the {MAX_PATHS} calibration pins \
             one at a time; narrow the experiment (a --from and --to with fewer path choices \
             between them)",
            name(from),
            name(to)
        )));
    }
    let ends = Ends::of(topo, from, to);
    let mut walks = Vec::new();
    walk(&choices, from, to, &mut Vec::new(), &mut walks);
    // Whether a switch past the source chooses too (then the source's next
    // hop does not name a path).
    let downstream_choices = walks
        .iter()
        .any(|hops| hops[1..].iter().any(|(at, _)| choices[at.0].len() > 1));
    Ok(walks
        .iter()
        .map(|hops| {
            let token = |(at, c): &(SwitchId, &PortPaths)| {
                let parallel = choices[at.0]
                    .iter()
                    .filter(|o| o.next_hop == c.next_hop)
                    .count()
                    > 1;
                if parallel {
                    format!("{}#{}", name(c.next_hop), c.port)
                } else {
                    name(c.next_hop)
                }
            };
            let label = if downstream_choices {
                std::iter::once(name(from))
                    .chain(hops.iter().map(token))
                    .collect::<Vec<_>>()
                    .join(">")
            } else {
                token(&hops[0])
            };
            let delay_ns: u64 = hops.iter().map(|(_, c)| c.local_delay_ns).sum();
            let rate = hops.iter().map(|(_, c)| c.local_rate_bps).min();
            PathCal {
                name: label,
                switches: hops
                    .iter()
                    .map(|(at, _)| name(*at))
                    .chain([name(to)])
                    .collect(),
                port: hops[0].1.port,
                delay_ns,
                configured_rtt_us: 2 * (delay_ns + ends.delay_ns) / 1000,
                bottleneck_bps: rate.unwrap_or(u64::MAX).min(ends.rate_bps),
                measured_rtt_us: None,
                ping_rounds: 0,
                ok: false,
                hops: hops
                    .iter()
                    .map(|(at, c)| Egress {
                        switch: *at,
                        port: c.port,
                        link: c.link,
                    })
                    .collect(),
            }
        })
        .collect())
}

/// The ports to take down to pin `path` (one of [`paths`] from `from` to
/// `to`), one per link, in path order: at every switch on it, those of its
/// other candidates toward `to` and, for the replies, toward `from`. With
/// minimum-hop routes neither ever is a link of the path (the previous
/// switch is no candidate toward `to`, the next none toward `from`); a pin
/// that would be one, or a switch whose route toward `from` does not lead
/// back along the path, means the path cannot be pinned: an error naming
/// the path and the switch.
pub fn pins(topo: &Topology, from: SwitchId, to: SwitchId, path: &PathCal) -> Result<Vec<Egress>> {
    let name = |s: SwitchId| topo.switch(s).name.as_str();
    let own: Vec<LinkId> = path.hops.iter().map(|h| h.link).collect();
    let mut out: Vec<Egress> = Vec::new();
    let mut pin = |at: SwitchId, keep: LinkId, dest: SwitchId| -> Result<()> {
        for c in topo.candidates(at, dest).iter().filter(|c| c.link != keep) {
            if own.contains(&c.link) {
                return Err(Error::new(format!(
                    "path {} cannot be pinned: at {}, pinning its route toward {} would take down \
                     the path's own link to {}",
                    path.name,
                    name(at),
                    name(dest),
                    name(c.next_hop)
                )));
            }
            if !out.iter().any(|e| e.link == c.link) {
                out.push(Egress {
                    switch: at,
                    port: c.port,
                    link: c.link,
                });
            }
        }
        Ok(())
    };
    for h in &path.hops {
        pin(h.switch, h.link, to)?;
    }
    for (i, h) in path.hops.iter().enumerate() {
        let back = path.hops.get(i + 1).map_or(to, |n| n.switch);
        if !topo.candidates(back, from).iter().any(|c| c.link == h.link) {
            return Err(Error::new(format!(
                "path {} cannot be pinned: {}'s route toward {} does not lead back over its \
                 link to {}",
                path.name,
                name(back),
                name(from),
                name(h.switch)
            )));
        }
        pin(back, h.link, from)?;
    }
    Ok(out)
}

/// The index of the minimum-delay path (ties: the faster one, then the
/// first).
pub fn min_delay_path(paths: &[PathCal]) -> Option<usize> {
    (0..paths.len()).min_by_key(|&i| {
        (
            paths[i].configured_rtt_us,
            std::cmp::Reverse(paths[i].bottleneck_bps),
        )
    })
}

/// Sets the link behind a switch port up or down (its carrier, veth or
/// memory link).
fn set_port(testbed: &str, tb: &Lab, e: Egress, up: bool) -> Result<()> {
    crate::bed::set_port_carrier(testbed, tb, e.switch, e.port, up).map(|_| ())
}

/// Ports taken down for a pin, set up again by [`Pinned::restore`] or, on
/// an error's way out, when dropped.
struct Pinned<'a> {
    testbed: &'a str,
    tb: &'a Lab,
    down: Vec<Egress>,
}

impl<'a> Pinned<'a> {
    fn take(testbed: &'a str, tb: &'a Lab, pins: &[Egress]) -> Result<Pinned<'a>> {
        let mut p = Pinned {
            testbed,
            tb,
            down: Vec::new(),
        };
        for &e in pins {
            set_port(testbed, tb, e, false)?;
            p.down.push(e);
        }
        Ok(p)
    }

    /// Sets every port up again, also past one that fails (the first
    /// failure is returned).
    fn restore(&mut self) -> Result<()> {
        let mut first = None;
        for e in std::mem::take(&mut self.down) {
            if let Err(err) = set_port(self.testbed, self.tb, e, true) {
                first.get_or_insert(err);
            }
        }
        first.map_or(Ok(()), Err)
    }
}

impl Drop for Pinned<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.restore() {
            eprintln!("lcmp-testbed: calibration: setting a link up again: {e}");
        }
    }
}

/// Where `reply` (the tables of switch `at`) differs from the topology's
/// candidates of `at` toward `dest`, leaving out the ports whose links are
/// `down`; `None` if nowhere.
fn table_mismatch(
    topo: &Topology,
    reply: &TablesReply,
    at: SwitchId,
    dest: SwitchId,
    down: &[LinkId],
) -> Option<String> {
    let is_up = |port: u32| {
        u8::try_from(port)
            .ok()
            .and_then(|p| topo.port(at, p))
            .is_some_and(|p| p.link().is_none_or(|l| !down.contains(&l)))
    };
    let mut want: Vec<u32> = topo
        .candidates(at, dest)
        .iter()
        .map(|c| u32::from(c.port))
        .filter(|&p| is_up(p))
        .collect();
    want.sort_unstable();
    for prefix in &topo.switch(dest).prefixes {
        let mut have: Vec<u32> = reply
            .routes
            .iter()
            .find(|r| r.prefix.parse::<IpNet>().ok() == Some(*prefix))
            .map(|r| {
                r.candidates
                    .iter()
                    .map(|c| c.port)
                    .filter(|&p| is_up(p))
                    .collect()
            })
            .unwrap_or_default();
        have.sort_unstable();
        if have != want {
            return Some(format!(
                "{} routes {prefix} over ports {have:?}, expected {want:?}",
                topo.switch(at).name
            ));
        }
    }
    None
}

/// Waits until the tables of `switches` route toward `from` and `to` over
/// the candidates the topology gives them, leaving out ports whose links
/// are `down`. Without an agent the tables never change and this holds at
/// once (a switch skips its own ports that are down). With one, tables
/// follow the links it saw down at its last poll; a table pushed for an
/// earlier pin can offer a port that is no candidate of the full topology
/// and so not pinned, which would send a probe off the path, and one from
/// before a restore can leave a run without a path: this waits them out.
fn wait_for_tables(
    testbed: &str,
    topo: &Topology,
    switches: &[SwitchId],
    ends: [SwitchId; 2],
    down: &[LinkId],
    what: &str,
) -> Result<()> {
    let deadline = Instant::now() + TABLES_TIMEOUT;
    loop {
        let mismatch = switches.iter().find_map(|&at| {
            let name = &topo.switch(at).name;
            let socket = lcmp_control::paths::testbed_socket(testbed, name);
            let reply = Client::connect(&socket, Duration::from_secs(1))
                .and_then(|mut c| c.call(&Request::Tables));
            match reply {
                Ok(Reply::Tables(t)) => ends
                    .iter()
                    .filter(|&&dest| dest != at)
                    .find_map(|&dest| table_mismatch(topo, &t, at, dest, down)),
                Ok(other) => Some(format!("{name} answered {other:?} to `tables`")),
                Err(e) => Some(format!("{name}: {e}")),
            }
        });
        let Some(why) = mismatch else {
            return Ok(());
        };
        if Instant::now() >= deadline {
            return Err(Error::new(format!(
                "calibration: the switches' tables did not follow {what} within \
                 {TABLES_TIMEOUT:?}: {why}"
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Measures `path`'s base RTT with pings from `src` to `dst_addr` (the
/// path pinned), and with `rate` its TCP goodput into `rate`.
fn measure(
    path: &mut PathCal,
    src: &HostNode,
    dst: &HostNode,
    dst_addr: IpAddr,
    rate: Option<&mut Option<RateCal>>,
    say: &dyn Fn(&str),
) -> Result<()> {
    // Wait until a probe gets through: the switches act on link events at
    // once, but the first probe may still be in flight on a path that just
    // went down.
    // A dilated testbed's paths may take longer than ping's usual 2 s to
    // answer.
    let wait = Duration::from_micros(2 * path.configured_rtt_us).max(Duration::from_secs(2));
    let deadline = Instant::now() + Duration::from_secs(10) + wait;
    let probe = |n| ping_waiting(&src.netns, dst_addr, n, Duration::from_millis(200), wait);
    while probe(1)?.received == 0 {
        if Instant::now() > deadline {
            return Err(Error::new(format!(
                "calibration: no ping gets through path {} ({}), pinned hop by hop",
                path.name,
                path.switches.join(" ")
            )));
        }
    }
    for round in 1..=MAX_ROUNDS {
        let p = ping_waiting(&src.netns, dst_addr, 10, Duration::from_millis(100), wait)?;
        path.ping_rounds = round;
        if p.received > 0 {
            let m = (p.min_ms * 1000.0).round() as u64;
            path.measured_rtt_us = Some(path.measured_rtt_us.map_or(m, |old| old.min(m)));
        }
        match path.measured_rtt_us {
            Some(m) if rtt_vs_tolerance(path.configured_rtt_us, m) != Tolerance::Above => break,
            _ => {}
        }
    }
    let Some(rate) = rate else {
        return Ok(());
    };
    say(&format!("calibration: rate of path via {}", path.name));
    let _server = iperf3_server(&dst.netns, 5201)?;
    // Slow start is left out of the measurement: on a dilated path it
    // takes seconds to reach the rate.
    let rtt_s = path.measured_rtt_us.unwrap_or(path.configured_rtt_us) as f64 / 1e6;
    let omit = (8.0 * rtt_s).ceil().to_string();
    let expect = path.bottleneck_bps as f64 * 1448.0 / 1514.0;
    let mut best: Option<RateCal> = None;
    for transfer in 1..=MAX_ROUNDS {
        let r = iperf3_client(&src.netns, dst_addr, 5201, 3, &["-O", &omit])?;
        let goodput_bps = best
            .as_ref()
            .map_or(r.bits_per_second, |b| b.goodput_bps.max(r.bits_per_second));
        let ratio = goodput_bps / expect;
        let cal = RateCal {
            configured_bps: path.bottleneck_bps,
            goodput_bps,
            ratio,
            transfers: transfer,
            ok: ratio >= RATE_TOLERANCE,
        };
        let done = cal.ok;
        best = Some(cal);
        if done {
            break;
        }
    }
    *rate = best;
    Ok(())
}

/// Where a measured RTT lies against the configured one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tolerance {
    /// Shorter than configured beyond tolerance: the emulation misses
    /// delay.
    Below,
    /// Within [`RTT_TOLERANCE_FRACTION`] + [`RTT_TOLERANCE_MS`] either side.
    Within,
    /// Longer beyond tolerance.
    Above,
}

/// Compares a measured RTT with the configured one, both microseconds.
pub fn rtt_vs_tolerance(configured_us: u64, measured_us: u64) -> Tolerance {
    let configured_ms = configured_us as f64 / 1000.0;
    let measured_ms = measured_us as f64 / 1000.0;
    if measured_ms > configured_ms * (1.0 + RTT_TOLERANCE_FRACTION) + RTT_TOLERANCE_MS {
        Tolerance::Above
    } else if measured_ms < configured_ms * (1.0 - RTT_TOLERANCE_FRACTION) - RTT_TOLERANCE_MS {
        Tolerance::Below
    } else {
        Tolerance::Within
    }
}

/// Calibrates the paths from host `src` to host `dst` of testbed `testbed`
/// (see the module docs). `say` reports progress. Every link is up again
/// afterwards, whatever the outcome.
pub fn calibrate(
    tb: &Lab,
    topo: &Topology,
    testbed: &str,
    src: &str,
    dst: &str,
    say: &dyn Fn(&str),
) -> Result<Calibration> {
    let src_h = tb.host(src);
    let dst_h = tb.host(dst);
    let from = src_h.switch;
    let to = dst_h.switch;
    let dst_addr: IpAddr = dst_h
        .ipv4()
        .map(IpAddr::V4)
        .or(dst_h.ipv6().map(IpAddr::V6))
        .ok_or_else(|| Error::new(format!("host {dst} has no address")))?;
    let mut paths = paths(topo, from, to)?;
    // Every path's pins first: one that cannot be pinned stops the
    // calibration before any link goes down.
    let pins: Vec<Vec<Egress>> = paths
        .iter()
        .map(|p| pins(topo, from, to, p))
        .collect::<Result<_>>()?;
    let min_path = min_delay_path(&paths).ok_or_else(|| Error::new("no candidate path"))?;
    let all: Vec<SwitchId> = topo.switches().iter().map(|s| s.id).collect();
    let mut notes = Vec::new();
    let mut rate = None;
    for (i, path) in paths.iter_mut().enumerate() {
        let on_path: Vec<SwitchId> = path.hops.iter().map(|h| h.switch).chain([to]).collect();
        let down: Vec<LinkId> = pins[i].iter().map(|e| e.link).collect();
        let mut pinned = Pinned::take(testbed, tb, &pins[i])?;
        let result = wait_for_tables(
            testbed,
            topo,
            &on_path,
            [from, to],
            &down,
            &format!("the pins of path {}", path.name),
        )
        .and_then(|()| {
            let check_rate = i == min_path && path.bottleneck_bps <= MAX_CHECKED_RATE_BPS;
            measure(
                path,
                src_h,
                dst_h,
                dst_addr,
                check_rate.then_some(&mut rate),
                say,
            )
        });
        let restored = pinned.restore();
        result?;
        restored?;
        // The next path's pins, and after the last the runs, start from
        // tables for every link up.
        wait_for_tables(
            testbed,
            topo,
            &all,
            [from, to],
            &[],
            &format!("the links of path {}'s pins coming back up", path.name),
        )?;
        let p = path;
        let configured_ms = p.configured_rtt_us as f64 / 1000.0;
        match p.measured_rtt_us {
            Some(m) => {
                let m_ms = m as f64 / 1000.0;
                p.ok = rtt_vs_tolerance(p.configured_rtt_us, m) == Tolerance::Within;
                if !p.ok {
                    notes.push(format!(
                        "path via {}: RTT {m_ms:.2} ms, configured {configured_ms:.2} ms",
                        p.name
                    ));
                }
            }
            None => notes.push(format!("path via {}: no ping reply", p.name)),
        }
        say(&format!(
            "calibration: path via {}: RTT {} ms (configured {configured_ms:.2} ms)",
            p.name,
            p.measured_rtt_us
                .map_or("-".into(), |m| format!("{:.2}", m as f64 / 1000.0)),
        ));
    }
    if let Some(r) = &rate {
        if !r.ok {
            notes.push(format!(
                "minimum-delay path: TCP goodput {:.1} Mbit/s is {:.0}% of the configured {:.1} \
                 Mbit/s x 1448/1514",
                r.goodput_bps / 1e6,
                r.ratio * 100.0,
                r.configured_bps as f64 / 1e6
            ));
        }
    }
    let mp = &paths[min_path];
    let base_rtt_ns = mp.measured_rtt_us.unwrap_or(mp.configured_rtt_us) * 1000;
    let ok = notes.is_empty();
    Ok(Calibration {
        min_path,
        base_rtt_ns,
        bottleneck_bps: mp.bottleneck_bps,
        paths,
        rate,
        notes,
        ok,
    })
}

/// The calibration of a network whose delays and rates are exact, as the
/// virtual engine's are: every path of [`paths`] from `from` to `to` with
/// its configured RTT as the measured one (no pings), the minimum-delay
/// path's base RTT to the nanosecond (both directions of its links and of
/// the two ends' host links) and its bottleneck, nothing deviating.
pub fn configured(topo: &Topology, from: SwitchId, to: SwitchId) -> Result<Calibration> {
    let mut paths = paths(topo, from, to)?;
    for p in &mut paths {
        p.measured_rtt_us = Some(p.configured_rtt_us);
        p.ok = true;
    }
    let min_path = min_delay_path(&paths).ok_or_else(|| Error::new("no candidate path"))?;
    let mp = &paths[min_path];
    Ok(Calibration {
        min_path,
        base_rtt_ns: 2 * (mp.delay_ns + Ends::of(topo, from, to).delay_ns),
        bottleneck_bps: mp.bottleneck_bps,
        paths,
        rate: None,
        notes: Vec::new(),
        ok: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(file: &str) -> Topology {
        crate::experiment::config::load_topology(Some(
            &lcmp_netlab::repo_root().join("topologies").join(file),
        ))
        .unwrap()
    }

    fn id(topo: &Topology, name: &str) -> SwitchId {
        topo.switch_by_name(name).unwrap().id
    }

    /// `(switch, port)` of each pin.
    fn pin_ports(topo: &Topology, pins: &[Egress]) -> Vec<(String, u8)> {
        pins.iter()
            .map(|e| (topo.switch(e.switch).name.clone(), e.port))
            .collect()
    }

    fn pin_ports_of(topo: &Topology, from: &str, to: &str, path: &str) -> Vec<(String, u8)> {
        let (f, t) = (id(topo, from), id(topo, to));
        let p = paths(topo, f, t).unwrap();
        let p = p.iter().find(|p| p.name == path).unwrap();
        pin_ports(topo, &pins(topo, f, t, p).unwrap())
    }

    fn owned(v: &[(&str, u8)]) -> Vec<(String, u8)> {
        v.iter().map(|(s, p)| (s.to_string(), *p)).collect()
    }

    #[test]
    fn paths_of_2dc_3path() {
        let topo = load("2dc-3path.toml");
        let p = paths(&topo, id(&topo, "s1"), id(&topo, "s2")).unwrap();
        let names: Vec<&str> = p.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["p1", "p2", "p3"]);
        assert_eq!(p[2].switches, ["s1", "p3", "s2"]);
        // p1: 2 x (5 + 5 ms + 10 us + 10 us) = 20.04 ms; p3: 2 x 4.02 ms.
        assert_eq!(p[0].delay_ns, 10_000_000);
        assert_eq!(p[0].configured_rtt_us, 20_040);
        assert_eq!(p[1].configured_rtt_us, 40_040);
        assert_eq!(p[2].configured_rtt_us, 8_040);
        assert_eq!(p[0].bottleneck_bps, 1_000_000_000);
        assert_eq!(p[2].bottleneck_bps, 200_000_000);
        // Only the edge switches choose: s1's and s2's ports 0 and 1 (to
        // p1 and p2) go down.
        assert_eq!(
            pin_ports_of(&topo, "s1", "s2", "p3"),
            owned(&[("s1", 0), ("s1", 1), ("s2", 0), ("s2", 1)])
        );
    }

    #[test]
    fn paths_of_8dc_are_the_six_via_switches_in_port_order_as_before() {
        let topo = load("8dc.toml");
        let (dc1, dc8) = (id(&topo, "dc1"), id(&topo, "dc8"));
        let p = paths(&topo, dc1, dc8).unwrap();
        let got: Vec<(&str, u8, u64, u64)> = p
            .iter()
            .map(|p| {
                (
                    p.name.as_str(),
                    p.port,
                    p.configured_rtt_us,
                    p.bottleneck_bps,
                )
            })
            .collect();
        // dc1's links in file order give ports 0..5 toward dc2..dc7; no
        // hosts in the file, so RTT = 2 x (both links' delays).
        let g = 1_000_000_000;
        assert_eq!(
            got,
            [
                ("dc2", 0, 100_000, 200 * g),
                ("dc3", 1, 1_000_000, 200 * g),
                ("dc4", 2, 40_000, 100 * g),
                ("dc5", 3, 400_000, 100 * g),
                ("dc6", 4, 20_000, 25 * g),
                ("dc7", 5, 200_000, 25 * g),
            ]
        );
        assert_eq!(p[4].switches, ["dc1", "dc6", "dc8"]);
        assert_eq!(min_delay_path(&p), Some(4));
        // dc8's links in file order: ports 0..5 toward dc2..dc7 too.
        assert_eq!(
            pin_ports_of(&topo, "dc1", "dc8", "dc6"),
            owned(&[
                ("dc1", 0),
                ("dc1", 1),
                ("dc1", 2),
                ("dc1", 3),
                ("dc1", 5),
                ("dc8", 0),
                ("dc8", 1),
                ("dc8", 2),
                ("dc8", 3),
                ("dc8", 5),
            ])
        );
        // With the choice at the source only, the per-path tables' paths
        // are the calibrated ones.
        let cal = Calibration {
            paths: p.clone(),
            min_path: 4,
            base_rtt_ns: 0,
            bottleneck_bps: 0,
            rate: None,
            notes: Vec::new(),
            ok: true,
        };
        let specs: Vec<(String, u8, u64, u64)> = cal
            .first_hops()
            .into_iter()
            .map(|s| (s.name, s.port, s.rtt_us, s.bottleneck_bps))
            .collect();
        let want: Vec<(String, u8, u64, u64)> = got
            .iter()
            .map(|&(n, port, rtt, b)| (n.to_string(), port, rtt, b))
            .collect();
        assert_eq!(specs, want);
    }

    #[test]
    fn an_exact_network_is_calibrated_by_its_configured_rtts_to_the_nanosecond() {
        // The transit fixture: RTTs as in `paths_through_choices_at_transit_switches`,
        // each the measured one; the minimum-delay path via v is the base:
        // 2 x (5 ms + 2 x 10 us) = 10 040 000 ns at 20 Mbit/s.
        let topo = Topology::parse(
            include_str!("../../tests/fixtures/transit.toml"),
            "transit.toml",
        )
        .unwrap();
        let cal = configured(&topo, id(&topo, "s1"), id(&topo, "s2")).unwrap();
        let rtts: Vec<(&str, Option<u64>, bool)> = cal
            .paths
            .iter()
            .map(|p| (p.name.as_str(), p.measured_rtt_us, p.ok))
            .collect();
        assert_eq!(
            rtts,
            [
                ("s1>t>u>w1>s2", Some(14_040), true),
                ("s1>t>u>w2>s2", Some(22_040), true),
                ("s1>t>v>x>s2", Some(10_040), true),
            ]
        );
        assert_eq!(
            (cal.min_path, cal.base_rtt_ns, cal.bottleneck_bps),
            (2, 10_040_000, 20_000_000)
        );
        assert!(cal.ok && cal.notes.is_empty() && cal.rate.is_none());
        // Below a microsecond too: a 1 000 123 ns link and 100 ns host
        // links give 2 x (1 000 123 + 2 x 100) = 2 000 646 ns, where the
        // configured microseconds (2000) lose the rest.
        let topo = Topology::parse(
            r#"
            [[switch]]
            name = "s1"
            prefixes = ["10.0.1.0/24"]
            [[switch]]
            name = "s2"
            prefixes = ["10.0.2.0/24"]
            [[host]]
            name = "a"
            switch = "s1"
            addresses = ["10.0.1.2/24"]
            rate = "1Gbps"
            delay = "100ns"
            [[host]]
            name = "b"
            switch = "s2"
            addresses = ["10.0.2.2/24"]
            rate = "1Gbps"
            delay = "100ns"
            [[link]]
            a = "s1"
            b = "s2"
            rate = "1Gbps"
            delay = "1000123ns"
            "#,
            "sub-us.toml",
        )
        .unwrap();
        let cal = configured(&topo, id(&topo, "s1"), id(&topo, "s2")).unwrap();
        assert_eq!(cal.paths[0].configured_rtt_us, 2000);
        assert_eq!(cal.base_rtt_ns, 2_000_646);
    }

    #[test]
    fn paths_through_choices_at_transit_switches() {
        // The namespace test's fixture; its header draws it.
        let topo = Topology::parse(
            include_str!("../../tests/fixtures/transit.toml"),
            "transit.toml",
        )
        .unwrap();
        let (s1, s2) = (id(&topo, "s1"), id(&topo, "s2"));
        let p = paths(&topo, s1, s2).unwrap();
        let got: Vec<(&str, u64, u64, u64)> = p
            .iter()
            .map(|p| {
                (
                    p.name.as_str(),
                    p.delay_ns,
                    p.configured_rtt_us,
                    p.bottleneck_bps,
                )
            })
            .collect();
        // Via w1: 1 + 2 + 3 + 1 ms, RTT 2 x (7 ms + 2 x 10 us), slowest
        // link w1-s2; via w2: 1 + 2 + 6 + 2 ms; via v: 1 + 1 + 1 + 2 ms,
        // slowest t-v. t and u choose, so the names are the whole paths.
        let m = 1_000_000;
        assert_eq!(
            got,
            [
                ("s1>t>u>w1>s2", 7 * m, 14_040, 50 * m),
                ("s1>t>u>w2>s2", 11 * m, 22_040, 100 * m),
                ("s1>t>v>x>s2", 5 * m, 10_040, 20 * m),
            ]
        );
        assert_eq!(p[0].switches, ["s1", "t", "u", "w1", "s2"]);
        assert_eq!(p[2].switches, ["s1", "t", "v", "x", "s2"]);
        assert!(p.iter().all(|p| p.port == 0));
        assert_eq!(min_delay_path(&p), Some(2));
        // Via w1: at t the link to v (port 2), at u the one to w2 (port 2);
        // toward s1 only s2 chooses: w2 (port 1) and x (port 2) go down.
        assert_eq!(
            pin_ports_of(&topo, "s1", "s2", "s1>t>u>w1>s2"),
            owned(&[("t", 2), ("u", 2), ("s2", 1), ("s2", 2)])
        );
        assert_eq!(
            pin_ports_of(&topo, "s1", "s2", "s1>t>u>w2>s2"),
            owned(&[("t", 2), ("u", 1), ("s2", 0), ("s2", 2)])
        );
        // Via v: u is not on the path, its choice needs no pin.
        assert_eq!(
            pin_ports_of(&topo, "s1", "s2", "s1>t>v>x>s2"),
            owned(&[("t", 1), ("s2", 0), ("s2", 1)])
        );
        // The source has one next hop: one path for the per-path tables,
        // with the best RTT and bottleneck behind it (via v's RTT, via
        // w2's rate).
        let cal = Calibration {
            paths: p,
            min_path: 2,
            base_rtt_ns: 0,
            bottleneck_bps: 0,
            rate: None,
            notes: Vec::new(),
            ok: true,
        };
        assert_eq!(
            cal.first_hops(),
            [PathSpec {
                name: "t".into(),
                port: 0,
                rtt_us: 10_040,
                bottleneck_bps: 100 * m,
            }]
        );
    }

    #[test]
    fn parallel_links_are_told_apart_by_port_and_pinned_once() {
        let topo = Topology::parse(
            r#"
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
            [[switch]]
            name = "m1"
            [[switch]]
            name = "m2"
            [[link]]
            a = "s1"
            b = "m1"
            rate = "1Gbps"
            delay = "1ms"
            [[link]]
            a = "s1"
            b = "m2"
            rate = "1Gbps"
            delay = "2ms"
            [[link]]
            a = "s1"
            b = "m2"
            rate = "500Mbps"
            delay = "3ms"
            [[link]]
            a = "m1"
            b = "s2"
            rate = "1Gbps"
            delay = "1ms"
            [[link]]
            a = "m2"
            b = "s2"
            rate = "1Gbps"
            delay = "1ms"
            "#,
            "parallel.toml",
        )
        .unwrap();
        let p = paths(&topo, id(&topo, "s1"), id(&topo, "s2")).unwrap();
        let got: Vec<(&str, u64, u64)> = p
            .iter()
            .map(|p| (p.name.as_str(), p.configured_rtt_us, p.bottleneck_bps))
            .collect();
        // No hosts: RTT = 2 x (1 + 1), 2 x (2 + 1), 2 x (3 + 1) ms.
        assert_eq!(
            got,
            [
                ("m1", 4_000, 1_000_000_000),
                ("m2#1", 6_000, 1_000_000_000),
                ("m2#2", 8_000, 500_000_000),
            ]
        );
        // Via s1's port 1: s1's ports 0 and 2 go down; m2's route back to
        // s1 would take down the same s1-m2 link at its end (once is
        // enough); s2's port 0 (to m1) goes down.
        assert_eq!(
            pin_ports_of(&topo, "s1", "s2", "m2#1"),
            owned(&[("s1", 0), ("s1", 2), ("s2", 0)])
        );

        // The same past a transit switch t, which chooses: whole paths,
        // the parallel hop with t's port.
        let topo = Topology::parse(
            r#"
            [[switch]]
            name = "s1"
            prefixes = ["10.0.1.0/24"]
            [[switch]]
            name = "s2"
            prefixes = ["10.0.2.0/24"]
            [[switch]]
            name = "t"
            [[switch]]
            name = "m"
            [[switch]]
            name = "n"
            [[link]]
            a = "s1"
            b = "t"
            rate = "1Gbps"
            delay = "1ms"
            [[link]]
            a = "t"
            b = "m"
            rate = "1Gbps"
            delay = "1ms"
            [[link]]
            a = "t"
            b = "m"
            rate = "1Gbps"
            delay = "1ms"
            [[link]]
            a = "t"
            b = "n"
            rate = "1Gbps"
            delay = "1ms"
            [[link]]
            a = "m"
            b = "s2"
            rate = "1Gbps"
            delay = "1ms"
            [[link]]
            a = "n"
            b = "s2"
            rate = "1Gbps"
            delay = "1ms"
            "#,
            "transit-parallel.toml",
        )
        .unwrap();
        let names: Vec<String> = paths(&topo, id(&topo, "s1"), id(&topo, "s2"))
            .unwrap()
            .into_iter()
            .map(|p| p.name)
            .collect();
        assert_eq!(names, ["s1>t>m#1>s2", "s1>t>m#2>s2", "s1>t>n>s2"]);
        // At t its ports 2 (the other t-m link) and 3 (to n); m's route
        // back to s1 would take down that t-m link again; s2's port 1 (to
        // n).
        assert_eq!(
            pin_ports_of(&topo, "s1", "s2", "s1>t>m#1>s2"),
            owned(&[("t", 2), ("t", 3), ("s2", 1)])
        );
    }

    #[test]
    fn paths_of_13dc_from_dc1_to_dc13_choose_at_dc3_and_dc6() {
        // Hop counts to dc13 (from the file's links): dc12 1; dc8, dc9,
        // dc10, dc11 2; dc2 (via dc8), dc5 and dc7 (via dc11), dc6 (via
        // dc9, dc10) 3; dc3 4 (dc4 is 4 too, so no candidate of dc3);
        // dc1 5. So dc3 chooses among dc2, dc5, dc6, dc7 (its ports 1, 3,
        // 4, 5) and dc6 between dc9 and dc10 (its ports 2, 3): 3 + 2 = 5
        // paths.
        let topo = load("13dc.toml");
        let (dc1, dc13) = (id(&topo, "dc1"), id(&topo, "dc13"));
        let p = paths(&topo, dc1, dc13).unwrap();
        let got: Vec<(&str, u64, u64)> = p
            .iter()
            .map(|p| (p.name.as_str(), p.configured_rtt_us, p.bottleneck_bps))
            .collect();
        // One-way delays: 1+1+1+1+1, 1+5+5+5+1, 1+1+5+5+1, 1+1+1+1+1,
        // 1+10+10+5+1 ms; slowest links 40 (dc2's), 200, 100 (dc6's), 100,
        // 200 Gbit/s.
        let g = 1_000_000_000;
        assert_eq!(
            got,
            [
                ("dc1>dc3>dc2>dc8>dc12>dc13", 10_000, 40 * g),
                ("dc1>dc3>dc5>dc11>dc12>dc13", 34_000, 200 * g),
                ("dc1>dc3>dc6>dc9>dc12>dc13", 26_000, 100 * g),
                ("dc1>dc3>dc6>dc10>dc12>dc13", 10_000, 100 * g),
                ("dc1>dc3>dc7>dc11>dc12>dc13", 54_000, 200 * g),
            ]
        );
        assert_eq!(p[2].switches, ["dc1", "dc3", "dc6", "dc9", "dc12", "dc13"]);
        // Named as the per-flow switch paths are.
        for p in &p {
            let ids: Vec<SwitchId> = p.switches.iter().map(|s| id(&topo, s)).collect();
            assert_eq!(p.name, crate::flow_paths::path_name(&topo, &ids));
        }
        // Via dc2 and via dc10 tie on delay; the faster one wins.
        assert_eq!(min_delay_path(&p), Some(3));
        // Via dc9: at dc3 the links to dc2, dc5, dc7; at dc6 the one
        // to dc10. Toward dc1, dc12 chooses among dc8, dc9, dc10, dc11
        // (all 3 hops from dc1; its ports 0..3): 0, 2, 3 go down; dc9
        // and dc6 have one way back each (dc6's dc2 is as far from dc1).
        assert_eq!(
            pin_ports_of(&topo, "dc1", "dc13", "dc1>dc3>dc6>dc9>dc12>dc13"),
            owned(&[
                ("dc3", 1),
                ("dc3", 3),
                ("dc3", 5),
                ("dc6", 3),
                ("dc12", 0),
                ("dc12", 2),
                ("dc12", 3),
            ])
        );
    }

    #[test]
    fn a_path_the_routes_do_not_lead_back_along_cannot_be_pinned() {
        // A triangle: s1-s2 is the only minimum-hop path; one through m
        // (as a switch that does not route by hop count might take) has no
        // way back, since s2's only candidate toward s1 is the direct link.
        let topo = Topology::parse(
            r#"
            [[switch]]
            name = "s1"
            prefixes = ["10.0.1.0/24"]
            [[switch]]
            name = "s2"
            prefixes = ["10.0.2.0/24"]
            [[switch]]
            name = "m"
            [[link]]
            a = "s1"
            b = "s2"
            rate = "1Gbps"
            delay = "1ms"
            [[link]]
            a = "s1"
            b = "m"
            rate = "1Gbps"
            delay = "1ms"
            [[link]]
            a = "m"
            b = "s2"
            rate = "1Gbps"
            delay = "1ms"
            "#,
            "triangle.toml",
        )
        .unwrap();
        let (s1, s2, m) = (id(&topo, "s1"), id(&topo, "s2"), id(&topo, "m"));
        let p = paths(&topo, s1, s2).unwrap();
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].switches, ["s1", "s2"]);
        let mut via_m = p[0].clone();
        via_m.name = "m".into();
        via_m.switches = vec!["s1".into(), "m".into(), "s2".into()];
        via_m.hops = vec![
            Egress {
                switch: s1,
                port: 1,
                link: LinkId(1),
            },
            Egress {
                switch: m,
                port: 1,
                link: LinkId(2),
            },
        ];
        assert_eq!(
            pins(&topo, s1, s2, &via_m).unwrap_err().to_string(),
            "path m cannot be pinned: s2's route toward s1 does not lead back over its link to m"
        );
    }

    /// `n` diamonds in a row: `j0 = a0/b0 = j1 = ... = jn`, 2^n paths.
    fn diamonds(n: usize) -> Topology {
        let mut t = String::from(
            "[[switch]]\nname = \"j0\"\nprefixes = [\"10.0.0.0/24\"]\n\
             [[switch]]\nname = \"jn\"\nprefixes = [\"10.0.1.0/24\"]\n",
        );
        let joint = |i: usize| {
            if i == n {
                "jn".to_string()
            } else {
                format!("j{i}")
            }
        };
        for i in 1..n {
            t += &format!("[[switch]]\nname = \"j{i}\"\n");
        }
        for i in 0..n {
            for mid in ["a", "b"] {
                t += &format!("[[switch]]\nname = \"{mid}{i}\"\n");
                for (x, y) in [
                    (joint(i), format!("{mid}{i}")),
                    (format!("{mid}{i}"), joint(i + 1)),
                ] {
                    t += &format!(
                        "[[link]]\na = \"{x}\"\nb = \"{y}\"\nrate = \"1Gbps\"\ndelay = \"1ms\"\n"
                    );
                }
            }
        }
        Topology::parse(&t, "diamonds.toml").unwrap()
    }

    #[test]
    fn rtt_tolerance_is_five_percent_plus_a_millisecond_either_side() {
        // 10.04 ms configured: 8.538 .. 11.542 ms.
        assert_eq!(rtt_vs_tolerance(10_040, 12_318), Tolerance::Above);
        assert_eq!(rtt_vs_tolerance(10_040, 11_545), Tolerance::Above);
        assert_eq!(rtt_vs_tolerance(10_040, 11_540), Tolerance::Within);
        assert_eq!(rtt_vs_tolerance(10_040, 10_040), Tolerance::Within);
        assert_eq!(rtt_vs_tolerance(10_040, 8_540), Tolerance::Within);
        assert_eq!(rtt_vs_tolerance(10_040, 8_530), Tolerance::Below);
        // 100 ms: 94 .. 106 ms.
        assert_eq!(rtt_vs_tolerance(100_000, 106_500), Tolerance::Above);
        assert_eq!(rtt_vs_tolerance(100_000, 105_900), Tolerance::Within);
        assert_eq!(rtt_vs_tolerance(100_000, 93_900), Tolerance::Below);
    }

    #[test]
    fn more_than_64_paths_are_refused_with_their_count() {
        let six = diamonds(6);
        let p = paths(&six, id(&six, "j0"), id(&six, "jn")).unwrap();
        assert_eq!(p.len(), 64);
        // Every joint but the last chooses.
        assert_eq!(p[0].name, "j0>a0>j1>a1>j2>a2>j3>a3>j4>a4>j5>a5>jn");
        assert_eq!(p[63].name, "j0>b0>j1>b1>j2>b2>j3>b3>j4>b4>j5>b5>jn");
        let seven = diamonds(7);
        let e = paths(&seven, id(&seven, "j0"), id(&seven, "jn"))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "j0 to jn: 128 minimum-hop paths, more than the 64 calibration pins one at a time; \
             narrow the experiment (a --from and --to with fewer path choices between them)"
        );
    }
}

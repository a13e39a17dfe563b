//! Calibration: does the emulation do what the topology says?
//!
//! On the idle testbed, each path from the source to the destination DC is
//! forced in turn (every other first hop taken down at both edge switches,
//! so both directions of a probe use it) and its base RTT measured with
//! pings; the minimum-delay path's rate is measured with one bulk TCP
//! transfer. The measured base RTT of the minimum-delay path is what the
//! ideal FCT uses; deviations beyond the tolerances below flag every run.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use lcmp_netns_tests::{iperf3_client, iperf3_server, ping, Testbed};
use lcmp_topology::{SwitchId, Topology};
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

/// One candidate path of the source switch toward the destination.
#[derive(Debug, Clone, Serialize)]
pub struct PathCal {
    /// Name: the neighbour switch the path leaves through.
    pub name: String,
    /// Port of the source switch.
    pub port: u8,
    /// Configured base RTT (both directions over this path, host links
    /// included), microseconds.
    pub configured_rtt_us: u64,
    /// Configured bottleneck rate (scaled), bits per second.
    pub bottleneck_bps: u64,
    /// Minimum RTT of the pings, microseconds.
    pub measured_rtt_us: Option<u64>,
    /// Within tolerance.
    pub ok: bool,
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
    /// Within tolerance.
    pub ok: bool,
}

/// Calibration of an experiment's testbed.
#[derive(Debug, Clone, Serialize)]
pub struct Calibration {
    /// Every candidate path, in port order.
    pub paths: Vec<PathCal>,
    /// Index (into `paths`) of the minimum-delay path.
    pub min_path: usize,
    /// Base RTT for the ideal FCT: measured on the minimum-delay path, or
    /// configured if the measurement failed, nanoseconds.
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

/// The candidate paths of `from` toward `to`, in port order, with their
/// configured base RTT (both directions, host links of the two ends
/// included) and bottleneck (host links included).
pub fn paths(topo: &Topology, from: SwitchId, to: SwitchId) -> Result<Vec<PathCal>> {
    let route = topo
        .routes(from)
        .into_iter()
        .find(|r| r.dest_switch == to)
        .ok_or_else(|| {
            Error::new(format!(
                "{} has no route to {}",
                topo.switch(from).name,
                topo.switch(to).name
            ))
        })?;
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
    Ok(route
        .candidates
        .iter()
        .map(|c| PathCal {
            name: topo.switch(c.next_hop).name.clone(),
            port: c.port,
            configured_rtt_us: 2 * (c.delay_ns + d_src + d_dst) / 1000,
            bottleneck_bps: c.bottleneck_bps.min(r_src).min(r_dst),
            measured_rtt_us: None,
            ok: false,
        })
        .collect())
}

/// Sets the given ports of a switch up or down.
fn set_ports(tb: &Testbed, sw: SwitchId, ports: &[u8], up: bool) -> Result<()> {
    let node = &tb.switches[sw.0];
    for &p in ports {
        node.netns.ip(&[
            "link",
            "set",
            "dev",
            &node.port(p).ifname,
            if up { "up" } else { "down" },
        ])?;
    }
    Ok(())
}

/// The first-hop ports of `from` and `to` (toward each other) that do not
/// lead through `via`.
fn other_ports(topo: &Topology, from: SwitchId, to: SwitchId, via: &str) -> (Vec<u8>, Vec<u8>) {
    let ports = |a: SwitchId, b: SwitchId| -> Vec<u8> {
        topo.routes(a)
            .into_iter()
            .find(|r| r.dest_switch == b)
            .map(|r| {
                r.candidates
                    .iter()
                    .filter(|c| topo.switch(c.next_hop).name != via)
                    .map(|c| c.port)
                    .collect()
            })
            .unwrap_or_default()
    };
    (ports(from, to), ports(to, from))
}

/// Calibrates the paths from host `src` to host `dst` (see the module
/// docs). `say` reports progress. Every link is up again afterwards.
pub fn calibrate(
    tb: &Testbed,
    topo: &Topology,
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
    let min_path = (0..paths.len())
        .min_by_key(|&i| {
            (
                paths[i].configured_rtt_us,
                std::cmp::Reverse(paths[i].bottleneck_bps),
            )
        })
        .ok_or_else(|| Error::new("no candidate path"))?;
    let mut notes = Vec::new();
    let mut rate = None;
    for (i, path) in paths.iter_mut().enumerate() {
        let (down_src, down_dst) = other_ports(topo, from, to, &path.name);
        set_ports(tb, from, &down_src, false)?;
        set_ports(tb, to, &down_dst, false)?;
        let result = (|| -> Result<()> {
            // Wait until a probe gets through: the switches act on link
            // events at once, but the first probe may still be in flight
            // on a path that just went down.
            let deadline = Instant::now() + Duration::from_secs(10);
            while ping(&src_h.netns, dst_addr, 1, Duration::from_millis(200))?.received == 0 {
                if Instant::now() > deadline {
                    return Err(Error::new(format!(
                        "no ping gets through path {}",
                        path.name
                    )));
                }
            }
            let p = ping(&src_h.netns, dst_addr, 10, Duration::from_millis(100))?;
            if p.received > 0 {
                path.measured_rtt_us = Some((p.min_ms * 1000.0).round() as u64);
            }
            if i == min_path && path.bottleneck_bps <= MAX_CHECKED_RATE_BPS {
                say(&format!("calibration: rate of path via {}", path.name));
                let _server = iperf3_server(&dst_h.netns, 5201)?;
                let r = iperf3_client(&src_h.netns, dst_addr, 5201, 3, &[])?;
                let expect = path.bottleneck_bps as f64 * 1448.0 / 1514.0;
                let ratio = r.bits_per_second / expect;
                rate = Some(RateCal {
                    configured_bps: path.bottleneck_bps,
                    goodput_bps: r.bits_per_second,
                    ratio,
                    ok: ratio >= RATE_TOLERANCE,
                });
            }
            Ok(())
        })();
        set_ports(tb, from, &down_src, true)?;
        set_ports(tb, to, &down_dst, true)?;
        result?;
        let p = path;
        let configured_ms = p.configured_rtt_us as f64 / 1000.0;
        match p.measured_rtt_us {
            Some(m) => {
                let m_ms = m as f64 / 1000.0;
                p.ok = m_ms <= configured_ms * (1.0 + RTT_TOLERANCE_FRACTION) + RTT_TOLERANCE_MS
                    && m_ms >= configured_ms * (1.0 - RTT_TOLERANCE_FRACTION) - RTT_TOLERANCE_MS;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_of_2dc_3path() {
        let topo = crate::experiment::config::load_topology(Some(
            &lcmp_netns_tests::repo_root().join("topologies/2dc-3path.toml"),
        ))
        .unwrap();
        let s1 = topo.switch_by_name("s1").unwrap().id;
        let s2 = topo.switch_by_name("s2").unwrap().id;
        let p = paths(&topo, s1, s2).unwrap();
        let names: Vec<&str> = p.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["p1", "p2", "p3"]);
        // p1: 2 x (5 + 5 ms + 10 us + 10 us) = 20.04 ms; p3: 2 x 4.02 ms.
        assert_eq!(p[0].configured_rtt_us, 20_040);
        assert_eq!(p[1].configured_rtt_us, 40_040);
        assert_eq!(p[2].configured_rtt_us, 8_040);
        assert_eq!(p[0].bottleneck_bps, 1_000_000_000);
        assert_eq!(p[2].bottleneck_bps, 200_000_000);
        let (a, b) = other_ports(&topo, s1, s2, "p3");
        assert_eq!((a, b), (vec![0, 1], vec![0, 1]));
    }
}

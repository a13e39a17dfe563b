//! Slot-boundary accuracy of a rotor network, measured at the receiving
//! host: how far the first and last frame of each circuit window lie from
//! where the schedule puts them, and whether any frame crossed outside
//! every window (through a port the schedule did not match).
//!
//! Two clocks are read at the host. The ToRs deliver each frame with the
//! instant the sending ToR put it on the circuit in its source MAC
//! (`lcmp-switch rotor --deliver-send-stamps`; the instant the rotor judges the
//! frame by): the *circuit* report says when frames crossed, which is what
//! the slot boundaries govern. The kernel's receive timestamps give the
//! *arrival* report, which adds the forwarding latency of the hops after
//! the rotor (each a process woken by the frame: tens to hundreds of
//! microseconds on a shared VM).
//!
//! The windows and the errors are defined, and computed, in
//! `lcmp_results::rotor::boundary`.

use std::net::SocketAddr;
use std::time::Duration;

use lcmp_control::rotor::Lateness;
use lcmp_netlab::traffic::{realtime_ns, FrameCapture};
use lcmp_netlab::{udp_send_flows, UdpReceiver};
use lcmp_results::rotor::boundary::{boundary_errors, circuit_windows, BoundaryReport};
use lcmp_topology::rotor;
use lcmp_topology::rotor_net::RotorNetwork;
use serde::Serialize;

use super::{host_name, RotorUpOptions};
use crate::{bed, Error, Result};

/// The network and stream a measurement runs: in the options and, the
/// same fields, at the top of the report.
#[derive(Debug, Clone, Serialize)]
pub struct TimingSetup {
    /// ToRs (complete schedule, direct routing, 1 host per ToR).
    pub tors: u32,
    /// Rotors.
    pub rotors: u32,
    /// Delta, ns.
    pub slot_ns: u64,
    /// Delta_r, ns.
    pub reconfig_ns: u64,
    /// c, bit/s.
    pub rate_bps: u64,
    /// The sending ToR a and the receiving ToR b.
    pub from: u32,
    /// See `from`.
    pub to: u32,
    /// Ethernet frame size of the stream, bytes.
    pub frame_bytes: u32,
}

/// What [`measure`] is asked for.
#[derive(Debug, Clone)]
pub struct TimingOptions {
    /// Testbed name.
    pub name: String,
    /// The network and the stream.
    pub setup: TimingSetup,
    /// Offered rate / c (above 1: a's queue for b is backlogged whenever
    /// its circuit comes up).
    pub load: f64,
    /// How long a sends.
    pub duration: Duration,
    /// Extra arguments for every switch.
    pub switch_args: Vec<String>,
}

/// Ethernet + IPv4 + UDP headers in front of a UDP payload.
pub const HEADERS: u32 = 14 + 20 + 8;

/// What [`measure`] found.
#[derive(Debug, Clone, Serialize)]
pub struct TimingReport {
    /// The network the switches ran and the stream.
    #[serde(flatten)]
    pub setup: TimingSetup,
    /// Serialization of one frame at c, ns.
    pub ser_ns: u64,
    /// Packets sent (and failed sends).
    pub sent: u64,
    /// Failed sends.
    pub send_errors: u64,
    /// Stray tolerance used, ns (Delta_r / 2).
    pub stray_tolerance_ns: u64,
    /// The bound the issue sets: Delta_r / 10, ns.
    pub bound_ns: u64,
    /// How late this machine lets a running thread see the clock, before
    /// the testbed started: the share of instants later than the bound.
    /// Where it is 1 % or more the p99 cannot meet the bound here.
    pub platform_floor: super::clock_floor::ClockFloor,
    /// The sending ToR's slot lateness (its stats file) at the end.
    pub sender_lateness: Lateness,
    /// Every switch's non-zero drop counters at the end, `switch.reason`.
    pub drops: std::collections::BTreeMap<String, u64>,
    /// When frames crossed the circuit (their send stamps, read at the
    /// host), against the windows; strays: stamps outside every window.
    pub boundary: BoundaryReport,
    /// Frames captured at the host without a send stamp (delivered not
    /// from a circuit, or by a ToR without `--deliver-send-stamps`).
    pub unstamped: u64,
    /// When frames reached the host (kernel receive timestamps), against
    /// the windows: the circuit timing plus the downstream forwarding
    /// latency; strays here are frames delivered more than Delta_r / 2
    /// outside every window.
    pub arrival: BoundaryReport,
}

/// The switches' arguments for a measurement: the hosts read when each
/// frame crossed from its source MAC (`--deliver-send-stamps`), and a ToR
/// polls from 200 us before its first frame of a slot is due
/// (`--slot-spin-us`: a sleeping ToR wakes tens of microseconds late on a
/// VM), unless `extra` says otherwise.
pub fn timing_switch_args(extra: &[String]) -> Vec<String> {
    let mut args = vec!["--deliver-send-stamps".to_string()];
    if !extra.iter().any(|a| a.starts_with("--slot-spin-us")) {
        args.push("--slot-spin-us=200".into());
    }
    args.extend(extra.iter().cloned());
    args
}

/// Brings up a complete-schedule rotor network with direct routing (one
/// host per ToR), has host a send a steady stream of `load` x c to host b,
/// and measures the slot-boundary errors at b. The testbed is taken down on
/// every exit path.
pub fn measure(o: &TimingOptions, progress: &dyn Fn(&str)) -> Result<TimingReport> {
    if o.setup.from == o.setup.to || o.setup.from >= o.setup.tors || o.setup.to >= o.setup.tors {
        return Err(Error::new(format!(
            "ToRs {} and {} must differ and be below {}",
            o.setup.from, o.setup.to, o.setup.tors
        )));
    }
    if o.setup.frame_bytes < HEADERS + lcmp_netlab::traffic::UDP_HEADER as u32
        || o.setup.frame_bytes > 1514
    {
        return Err(Error::new(format!(
            "frame size {} B: need {} to 1514",
            o.setup.frame_bytes,
            HEADERS + lcmp_netlab::traffic::UDP_HEADER as u32
        )));
    }
    if !(o.load.is_finite() && o.load > 0.0) {
        return Err(Error::new("the load must be a positive number"));
    }
    let schedule =
        rotor::complete(o.setup.tors, o.setup.rotors).map_err(|e| Error::new(e.to_string()))?;
    let mut net = RotorNetwork::from_schedule(&schedule, o.setup.slot_ns, o.setup.reconfig_ns);
    net.rate_bps = o.setup.rate_bps;
    net.routing = Some(lcmp_topology::rotor_net::RotorRouting::Direct);
    let net = RotorNetwork::parse(&net.to_toml(), "timing network")
        .map_err(|e| Error::new(e.to_string()))?;
    progress("measuring the machine's own floor: a thread reads the clock for 1 s on each CPU");
    let bound_ns = o.setup.reconfig_ns / 10;
    let platform_floor = super::clock_floor::measure(Duration::from_secs(1), bound_ns);
    let st = super::up(
        &RotorUpOptions {
            name: o.name.clone(),
            network: net,
            source: format!(
                "rotor-timing: complete {} ToRs x {} rotors, direct",
                o.setup.tors, o.setup.rotors
            ),
            switch_args: timing_switch_args(&o.switch_args),
            // Slot timing: each switch keeps a core's timing to itself.
            links: lcmp_netlab::SwitchLinks::Veth,
        },
        progress,
    )?;
    let _guard = crate::experiment::TestbedGuard(o.name.clone());
    let net = super::load_network(&st)?;
    let epoch = super::epoch(&st)?;
    let (_, tb) = bed::attach(&st)?;
    let src = tb.host(&host_name(o.setup.from, 0));
    let dst_host = tb.host(&host_name(o.setup.to, 0));
    let dst = SocketAddr::new(RotorNetwork::host_ip(o.setup.to, 0).into(), 7000);
    let rx = UdpReceiver::start(&dst_host.netns, dst)?;
    let capture = FrameCapture::start(&dst_host.netns, &dst_host.ifname, dst.port())?;
    let frame_bits = u64::from(o.setup.frame_bytes) * 8;
    let gap = Duration::from_secs_f64(frame_bits as f64 / (o.load * o.setup.rate_bps as f64));
    let count = (o.duration.as_secs_f64() / gap.as_secs_f64()).ceil() as u64;
    progress(&format!(
        "sending {count} frames of {} B from {} to {} at {:.0} Mbit/s",
        o.setup.frame_bytes,
        src.name,
        dst_host.name,
        o.load * o.setup.rate_bps as f64 / 1e6
    ));
    let t0 = realtime_ns();
    let sent = udp_send_flows(
        &src.netns,
        &[dst],
        &[0],
        0,
        count,
        (o.setup.frame_bytes - HEADERS) as usize,
        gap,
        Duration::ZERO,
    )?;
    let t1 = realtime_ns();
    let period = net.slot_ns * u64::from(net.per_rotor);
    // The queue drains within a few periods after the last send.
    let quiet = Duration::from_nanos(4 * period).max(Duration::from_millis(300));
    let report = rx.finish(quiet, Duration::from_secs(10))?;
    // The sending ToR's own account of how late it woke at slot starts,
    // and every switch's drops, to tell a late ToR from a slow path.
    let status = super::fresh_status(&st)?;
    let sender_lateness = status
        .get(&format!("tor{}", o.setup.from))
        .map(|s| s.lateness)
        .unwrap_or_default();
    let drops: std::collections::BTreeMap<String, u64> = status
        .iter()
        .flat_map(|(sw, s)| {
            s.drops
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(move |(why, n)| (format!("{sw}.{why}"), *n))
        })
        .collect();
    let frames = capture.finish()?;
    let crossings: Vec<u64> = frames
        .iter()
        .filter_map(|f| lcmp_wire::rotor::stamp_time(&f.src_mac, f.rx_ns, 1_000_000_000))
        .collect();
    let unstamped = (frames.len() - crossings.len()) as u64;
    let arrivals: Vec<u64> = report.arrivals.iter().map(|a| a.rx_ns()).collect();
    let last = arrivals.iter().copied().max().unwrap_or(t1);
    let windows = circuit_windows(
        &net,
        epoch,
        o.setup.from,
        o.setup.to,
        t0.saturating_sub(period),
        last.max(t1) + period,
    );
    let ser_ns = frame_bits * 1_000_000_000 / o.setup.rate_bps;
    let stray_ns = net.reconfig_ns / 2;
    // Backlogged from one period after the start until the sender stops.
    let measured = (t0 + period, t1);
    // A stamp is when the frame's serialization ended on the uplink: it
    // belongs inside a window, exactly.
    let boundary = boundary_errors(&windows, &crossings, ser_ns, 0, measured);
    let arrival = boundary_errors(&windows, &arrivals, ser_ns, stray_ns, measured);
    Ok(TimingReport {
        setup: o.setup.clone(),
        ser_ns,
        sent: sent.sent,
        send_errors: sent.errors,
        stray_tolerance_ns: stray_ns,
        bound_ns,
        platform_floor,
        sender_lateness,
        drops,
        boundary,
        unstamped,
        arrival,
    })
}

/// The report for people.
pub fn render(r: &TimingReport) -> String {
    let us = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:.1} us", v / 1e3));
    let line = |what: &str, b: &BoundaryReport, outside: &str| {
        format!(
            "{what}: {} frames, {} windows measured ({} empty); boundary error p50 {} p99 {} max {}; \
             median start error {}, largest end error {}; {} {outside}\n",
            b.arrivals,
            b.windows.len(),
            b.empty_windows,
            us(b.p50_ns),
            us(b.p99_ns),
            us(b.max_ns),
            us(b.start_p50_ns),
            us(b.end_max_ns.map(|v| v as f64)),
            b.strays.len(),
        )
    };
    format!(
        "rotor slot boundaries: {} ToRs x {} rotors, Delta {} us, Delta_r {} us, c {} Mbit/s, \
         tor{} -> tor{}; {} frames sent ({} failed); bound Delta_r/10 = {:.1} us; \
         serialization {:.1} us\n{}{}{} frames without a send stamp\n\
         tor{} reports its slot lateness p50 {} p99 {} max {}; drops: {}\n",
        r.setup.tors,
        r.setup.rotors,
        r.setup.slot_ns / 1000,
        r.setup.reconfig_ns / 1000,
        r.setup.rate_bps / 1_000_000,
        r.setup.from,
        r.setup.to,
        r.sent,
        r.send_errors,
        r.bound_ns as f64 / 1e3,
        r.ser_ns as f64 / 1e3,
        line(
            "circuit (send stamps)",
            &r.boundary,
            "crossed outside every window"
        ),
        line(
            "arrival (host receive times, + forwarding latency)",
            &r.arrival,
            "arrived more than Delta_r/2 outside every window"
        ),
        r.unstamped,
        r.setup.from,
        us(Some(r.sender_lateness.p50_ns as f64)),
        us(Some(r.sender_lateness.p99_ns as f64)),
        us(Some(r.sender_lateness.max_ns as f64)),
        if r.drops.is_empty() {
            "none".to_string()
        } else {
            r.drops
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    ) + &floor_line(&r.platform_floor)
}

/// What the machine's own floor means for the bound.
fn floor_line(f: &super::clock_floor::ClockFloor) -> String {
    let verdict = if f.late_share >= 0.01 {
        "so no thread here can meet it at the p99"
    } else {
        "below 1 %: the machine allows the bound at the p99"
    };
    format!(
        "machine floor: a thread reading the clock ({} CPUs in turn, {:.0} s each, before the testbed) saw {:.3} % \
         of instants more than {:.1} us late (longest gap {:.1} us), {verdict}\n",
        f.threads,
        f.seconds,
        f.late_share * 100.0,
        f.threshold_ns as f64 / 1e3,
        f.max_gap_ns as f64 / 1e3,
    )
}

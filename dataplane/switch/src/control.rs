//! The switch's answers to the control protocol ([`lcmp_control`]): its
//! state as a [`Snapshot`], and the requests that read or change it. Runs
//! on the poll thread between polls, so every change is atomic with respect
//! to forwarding.

use std::net::IpAddr;

use ipnet::IpNet;
use lcmp_control::proto::{
    hex_encode, Applied, Body, CandidateCost, CaptureReply, CapturedFrame, CostsReply, ErrorKind,
    ErrorReply, FlowsReply, LinkStateReply, PortFlows, PortLink, PortsReply, RecentDecision, Reply,
    Request, RouteSpec, TablesReply,
};
use lcmp_control::snapshot::{
    Congestion, ControlStats, DecisionCount, EcnThresholds, Emulation, EmulationMode, FlowStats,
    PolicyState, PortSnapshot, Snapshot, SNAPSHOT_VERSION,
};
use lcmp_policy::{Candidate, CandidateSet, LcmpParams, Policy, PortView, Ranking};

use crate::capture::CaptureSpec;
use crate::flow_log::FlowLog;
use crate::io::PacketIo;
use crate::lpm::Route;
use crate::switch::Switch;

/// What the daemon knows about itself beyond the switch.
#[derive(Clone, Debug, Default)]
pub struct DaemonInfo {
    /// The switch's name.
    pub name: String,
    /// Process id.
    pub pid: u32,
    /// Time since forwarding started, ns.
    pub uptime_ns: u64,
    /// Wall-clock time, ms since the Unix epoch.
    pub unix_time_ms: u64,
    /// Control-socket counters.
    pub control: ControlStats,
    /// Per port, the link as declared by `set_link` when something other
    /// than the switch emulates it (netem); `None`: the switch's own
    /// shaper and delay line (or none, at rate 0).
    pub declared: Vec<Option<Emulation>>,
    /// The LCMP parameters `set_policy lcmp` returns to: those the switch
    /// started with (or last set), so leaving LCMP and coming back keeps
    /// the weights and the kept fraction.
    pub lcmp: LcmpParams,
}

impl DaemonInfo {
    /// The LCMP parameters to remember from a switch's policy: its own
    /// (an ablation's zero weight back at its default), else the defaults.
    pub fn lcmp_of(policy: Policy) -> LcmpParams {
        let d = LcmpParams::default();
        match policy {
            Policy::Lcmp(p) => LcmpParams {
                alpha: if p.alpha == 0 { d.alpha } else { p.alpha },
                beta: if p.beta == 0 { d.beta } else { p.beta },
                ..p
            },
            _ => d,
        }
    }
}

fn mac_text(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

fn policy_state<IO: PacketIo>(sw: &Switch<IO>) -> PolicyState {
    let p = sw.policy();
    let (alpha, beta) = match p {
        Policy::Lcmp(l) => (Some(l.alpha), Some(l.beta)),
        _ => (None, None),
    };
    let c = sw.congestion_params();
    PolicyState {
        name: p.name().to_string(),
        alpha,
        beta,
        congestion_weights: alpha.map(|_| [c.w_queue, c.w_trend, c.w_persist]),
        ecn: sw.ecn(),
        ecn_link_time: sw.ecn_link_time(),
        ecn_mark_at: match sw.ecn_mark_at() {
            crate::egress::EcnMarkAt::Enqueue => lcmp_control::snapshot::EcnMarkAt::Enqueue,
            crate::egress::EcnMarkAt::Dequeue => lcmp_control::snapshot::EcnMarkAt::Dequeue,
        },
    }
}

fn port_snapshots<IO: PacketIo>(sw: &Switch<IO>, info: &DaemonInfo) -> Vec<PortSnapshot> {
    sw.port_reports()
        .into_iter()
        .enumerate()
        .map(|(i, p)| {
            let e = sw.port_states().estimator(i as u8);
            let link = sw.link(i);
            let counters = sw.counters().port(i);
            let xsk = sw.io_ref().port_stats(i);
            let memory_link = sw.io_ref().memory_link_stats(i);
            PortSnapshot {
                index: i as u32,
                name: p.name,
                up: p.up,
                link_up: p.link_up,
                admin_up: p.admin_up,
                peer_mac: p.peer_mac.map(mac_text),
                counters: {
                    let mut c = counters.named();
                    c.insert("enqueued_frames".into(), p.egress.enqueued_frames);
                    c.insert("enqueued_bytes".into(), p.egress.enqueued_bytes);
                    c
                },
                drops: counters.named_drops(),
                queue_bytes: p.queue_bytes,
                queue_frames: p.queue_frames as u64,
                in_flight: p.in_flight as u64,
                congestion: Congestion {
                    q: e.q(),
                    t: e.t(),
                    d: e.d(),
                    c_cong: p.c_cong,
                },
                emulation: info
                    .declared
                    .get(i)
                    .copied()
                    .flatten()
                    .unwrap_or(Emulation {
                        mode: if link.rate_bps == 0 && link.delay_ns == 0 {
                            EmulationMode::None
                        } else {
                            EmulationMode::Switch
                        },
                        rate_bps: link.rate_bps,
                        delay_ns: link.delay_ns,
                        buffer_bytes: link.buffer_bytes,
                    }),
                ecn: link.ecn.map(|e| EcnThresholds {
                    kmin_bytes: e.kmin_bytes,
                    kmax_bytes: e.kmax_bytes,
                    pmax: e.pmax,
                }),
                kind: match (&xsk, &memory_link) {
                    (Some(_), _) => "af_xdp",
                    (None, Some(_)) => "memory",
                    (None, None) => "",
                }
                .to_string(),
                xsk,
                memory_link,
            }
        })
        .collect()
}

fn decision_counts<IO: PacketIo>(sw: &Switch<IO>) -> Vec<DecisionCount> {
    sw.decision_counts()
        .into_iter()
        .map(|(r, port, count)| DecisionCount {
            prefix: r.prefix.to_string(),
            port: port as u32,
            ifname: sw.port_name(port).to_string(),
            count,
        })
        .collect()
}

/// The switch's whole state.
pub fn snapshot<IO: PacketIo>(sw: &Switch<IO>, info: &DaemonInfo) -> Snapshot {
    let c = sw.counters();
    let r = sw.router_stats();
    let (polls, polls_with_rx) = sw.polls();
    let mut counters = c.named();
    counters.insert("polls".into(), polls);
    counters.insert("polls_with_rx".into(), polls_with_rx);
    Snapshot {
        version: SNAPSHOT_VERSION,
        switch: info.name.clone(),
        pid: info.pid,
        unix_time_ms: info.unix_time_ms,
        uptime_ms: info.uptime_ns / 1_000_000,
        policy: policy_state(sw),
        counters,
        drops: c.named_drops(),
        drops_total: c.total_drops(),
        flows: FlowStats {
            cached: sw.cached_flows() as u64,
            capacity: sw.flow_capacity() as u64,
            hits: r.hits,
            misses: r.misses,
            inserts: r.inserts,
            evictions: r.evictions,
            failovers: r.failovers,
            cache_full_decisions: r.cache_full_decisions,
            all_congested_decisions: r.all_congested_decisions,
            no_live_port: r.no_live_port,
        },
        ports: port_snapshots(sw, info),
        decisions: decision_counts(sw),
        flow_log: sw.flow_log().map(FlowLog::stats),
        control: info.control,
        table_generation: sw.table_generation(),
    }
}

fn error(kind: ErrorKind, message: impl Into<String>) -> Body {
    Body::Error(ErrorReply::new(kind, message))
}

fn ok(reply: Reply) -> Body {
    Body::Ok(Box::new(reply))
}

fn applied(message: String, changed: bool) -> Body {
    ok(Reply::Applied(Applied {
        message,
        changed,
        flows_to_move: 0,
    }))
}

/// A destination given as an address or a prefix (its network address).
fn parse_dst(dst: &str) -> Option<IpAddr> {
    dst.parse::<IpAddr>()
        .ok()
        .or_else(|| dst.parse::<IpNet>().ok().map(|n| n.network()))
}

/// The LCMP parameters the switch reports costs with: the policy's own,
/// or the defaults under other policies (what LCMP would compute).
fn lcmp_params(p: Policy) -> LcmpParams {
    match p {
        Policy::Lcmp(l) => l,
        _ => LcmpParams::default(),
    }
}

fn costs<IO: PacketIo>(sw: &Switch<IO>, name: &str, dst: &str) -> Body {
    let Some(addr) = parse_dst(dst) else {
        return error(
            ErrorKind::Invalid,
            format!("{dst:?} is not an address or prefix"),
        );
    };
    let Some(route) = sw.route_for(addr) else {
        return error(ErrorKind::NoRoute, format!("no route for {dst}"));
    };
    let params = lcmp_params(sw.policy());
    let states = sw.port_states();
    let ranking = Ranking::new(&params, &route.candidates, states);
    let kept: Vec<u8> = ranking.kept_ports().collect();
    let candidates = route
        .candidates
        .as_slice()
        .iter()
        .map(|c| {
            let e = states.estimator(c.port);
            let c_cong = states.c_cong(c.port);
            CandidateCost {
                port: c.port as u32,
                ifname: sw.port_name(c.port as usize).to_string(),
                up: states.is_up(c.port),
                c_path: c.c_path,
                capacity_bps: c.capacity_bps,
                q: e.q(),
                t: e.t(),
                d: e.d(),
                c_cong,
                cost: params.cost_exact(c.c_path, c_cong),
                kept: kept.contains(&c.port),
                queue_bytes: sw.queue_bytes(c.port as usize),
            }
        })
        .collect();
    ok(Reply::Costs(CostsReply {
        switch: name.to_string(),
        dst: dst.to_string(),
        prefix: route.prefix.to_string(),
        policy: sw.policy().name().to_string(),
        alpha: params.alpha,
        beta: params.beta,
        candidates,
    }))
}

fn flows<IO: PacketIo>(sw: &Switch<IO>, name: &str, top: u32, now_ns: u64) -> Body {
    let by_port = sw
        .flows_per_port()
        .into_iter()
        .enumerate()
        .map(|(i, n)| PortFlows {
            port: i as u32,
            ifname: sw.port_name(i).to_string(),
            flows: n,
        })
        .collect();
    let recent = sw
        .recent_decisions()
        .take(top as usize)
        .map(|r| RecentDecision {
            age_ms: now_ns.saturating_sub(r.time_ns) / 1_000_000,
            src: r.flow.src_ip(),
            dst: r.flow.dst_ip(),
            proto: r.flow.proto(),
            sport: r.flow.sport(),
            dport: r.flow.dport(),
            port: r.port as u32,
            ifname: sw.port_name(r.port as usize).to_string(),
            reason: r.reason.as_str().to_string(),
        })
        .collect();
    ok(Reply::Flows(FlowsReply {
        switch: name.to_string(),
        cached: sw.cached_flows() as u64,
        capacity: sw.flow_capacity() as u64,
        by_port,
        by_destination: decision_counts(sw),
        recent,
    }))
}

fn route_specs(routes: &[Route]) -> Vec<RouteSpec> {
    routes
        .iter()
        .map(|r| RouteSpec::new(r.prefix.to_string(), &r.candidates))
        .collect()
}

/// Routes from their wire form, checked.
pub fn routes_from_specs(specs: &[RouteSpec]) -> Result<Vec<Route>, String> {
    specs
        .iter()
        .map(|r| {
            let prefix: IpNet = r
                .prefix
                .parse()
                .map_err(|_| format!("{:?} is not a prefix", r.prefix))?;
            let cands = r
                .candidates
                .iter()
                .map(|c| {
                    u8::try_from(c.port)
                        .map(|port| Candidate {
                            port,
                            c_path: c.c_path,
                            capacity_bps: c.capacity_bps,
                        })
                        .map_err(|_| format!("route {prefix}: port {} out of range", c.port))
                })
                .collect::<Result<Vec<_>, _>>()?;
            let candidates =
                CandidateSet::new(&cands).map_err(|e| format!("route {prefix}: {e}"))?;
            Ok(Route {
                prefix: prefix.trunc(),
                candidates,
            })
        })
        .collect()
}

/// The frames captured since the last fetch (`stop`: and ends the
/// capture), their times turned from the switch's clock (`now_ns`) into
/// `CLOCK_REALTIME`.
fn capture_reply<IO: PacketIo>(sw: &mut Switch<IO>, now_ns: u64, stop: bool) -> Body {
    let Some(c) = sw.capture_mut() else {
        return error(ErrorKind::Invalid, "no capture runs: `capture_start` first");
    };
    c.tick(now_ns);
    let spec = *c.spec();
    let (frames, data) = c.drain();
    let (captured, _, dropped) = c.counts();
    let done = c.done() || stop;
    if stop {
        sw.stop_capture();
    }
    // The switch's clock is monotonic; both are read now, so a frame's
    // wall-clock time is as exact as its monotonic one.
    let offset = realtime_ns() as i128 - now_ns as i128;
    ok(Reply::Capture(CaptureReply {
        port: sw.port_name(spec.port).to_string(),
        snaplen: spec.snaplen as u32,
        frames: frames
            .iter()
            .map(|f| CapturedFrame {
                time_unix_ns: (f.time_ns as i128 + offset).max(0) as u64,
                outbound: f.outbound,
                orig_len: f.orig_len,
                data: hex_encode(&data[f.start..f.start + f.len]),
            })
            .collect(),
        captured,
        dropped,
        done,
    }))
}

fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Answers one request; changes apply at once (the caller runs between
/// polls). `set_link` records non-switch emulation in `info.declared`.
pub fn handle<IO: PacketIo>(
    sw: &mut Switch<IO>,
    info: &mut DaemonInfo,
    request: Request,
    now_ns: u64,
) -> Body {
    let name = info.name.clone();
    let name = name.as_str();
    match request {
        Request::Rotor | Request::SetEpoch { .. } => error(
            ErrorKind::Unsupported,
            format!(
                "{name} is an LCMP switch, not part of a rotor network: `{}` is for rotors and ToRs",
                request.verb()
            ),
        ),
        Request::Status => ok(Reply::Status(Box::new(snapshot(sw, info)))),
        Request::Ports => ok(Reply::Ports(PortsReply {
            switch: name.to_string(),
            ports: port_snapshots(sw, info),
        })),
        Request::LinkState => ok(Reply::LinkState(LinkStateReply {
            switch: name.to_string(),
            table_generation: sw.table_generation(),
            ports: sw
                .port_reports()
                .into_iter()
                .enumerate()
                .map(|(i, p)| PortLink {
                    index: i as u32,
                    name: p.name,
                    up: p.up,
                    link_up: p.link_up,
                    admin_up: p.admin_up,
                })
                .collect(),
        })),
        Request::Flows { top } => flows(sw, name, top, now_ns),
        Request::Costs { dst } => costs(sw, name, &dst),
        Request::Tables => ok(Reply::Tables(TablesReply {
            switch: name.to_string(),
            generation: sw.table_generation(),
            ifnames: (0..sw.port_count())
                .map(|i| sw.port_name(i).to_string())
                .collect(),
            routes: route_specs(sw.routes()),
        })),
        Request::SetPolicy { policy } => {
            let Some(p) = Policy::from_name(&policy) else {
                return error(
                    ErrorKind::Invalid,
                    format!(
                        "unknown policy {policy:?}; one of {}",
                        Policy::NAMES.join(", ")
                    ),
                );
            };
            // LCMP variants take the remembered parameters (weights, kept
            // fraction), with an ablation's weight set to 0.
            let p = match p {
                Policy::Lcmp(named) => Policy::Lcmp(LcmpParams {
                    alpha: if named.alpha == 0 { 0 } else { info.lcmp.alpha },
                    beta: if named.beta == 0 { 0 } else { info.lcmp.beta },
                    ..info.lcmp
                }),
                other => other,
            };
            let changed = p != sw.policy();
            sw.set_policy(p);
            applied(format!("policy {}", p.name()), changed)
        }
        Request::SetParams {
            alpha,
            beta,
            ecn,
            ecn_off,
        } => {
            if ecn.is_some() && ecn_off {
                return error(
                    ErrorKind::Invalid,
                    "give ecn thresholds or ecn_off, not both",
                );
            }
            if let Some(f) = ecn {
                if let Err(e) = f.check() {
                    return error(ErrorKind::Invalid, e);
                }
            }
            let mut said = Vec::new();
            let mut changed = false;
            if alpha.is_some() || beta.is_some() {
                let Policy::Lcmp(mut l) = sw.policy() else {
                    return error(
                        ErrorKind::Invalid,
                        format!(
                            "alpha and beta are LCMP weights; the policy is {}",
                            sw.policy().name()
                        ),
                    );
                };
                if let Some(a) = alpha {
                    l.alpha = a;
                    said.push(format!("alpha {a}"));
                }
                if let Some(b) = beta {
                    l.beta = b;
                    said.push(format!("beta {b}"));
                }
                changed |= Policy::Lcmp(l) != sw.policy();
                sw.set_policy(Policy::Lcmp(l));
                info.lcmp = DaemonInfo::lcmp_of(Policy::Lcmp(l));
            }
            if ecn_off || ecn.is_some() {
                changed |= ecn != sw.ecn();
                sw.set_ecn(ecn);
                said.push(match ecn {
                    Some(f) => format!("ecn {},{},{}", f.kmin, f.kmax, f.pmax),
                    None => "ecn off".into(),
                });
            }
            if said.is_empty() {
                return error(ErrorKind::Invalid, "set_params with nothing to set");
            }
            applied(said.join(", "), changed)
        }
        Request::ReplaceTables { routes } => {
            let routes = match routes_from_specs(&routes) {
                Ok(r) => r,
                Err(e) => return error(ErrorKind::Invalid, e),
            };
            let n = routes.len();
            match sw.replace_routes(routes) {
                Ok(c) => ok(Reply::Applied(Applied {
                    message: if c.changed {
                        format!(
                            "{n} routes installed (generation {}); ports that left a route: {:?}",
                            sw.table_generation(),
                            c.ports_left
                        )
                    } else {
                        format!("{n} routes, unchanged")
                    },
                    changed: c.changed,
                    flows_to_move: c.flows_on_ports_left,
                })),
                Err(e) => error(ErrorKind::Invalid, e.0),
            }
        }
        Request::SetLink {
            port,
            rate_bps,
            delay_ns,
            buffer_bytes,
            mode,
        } => {
            let Some(i) = sw.port_by_name(&port) else {
                return error(ErrorKind::UnknownPort, format!("no port {port:?}"));
            };
            if info.declared.len() <= i {
                info.declared.resize(i + 1, None);
            }
            let before = port_snapshots(sw, info)[i].emulation;
            let want = Emulation {
                mode: mode.unwrap_or(before.mode),
                rate_bps: rate_bps.unwrap_or(before.rate_bps),
                delay_ns: delay_ns.unwrap_or(before.delay_ns),
                buffer_bytes: buffer_bytes.unwrap_or(before.buffer_bytes),
            };
            if want.buffer_bytes == 0 {
                return error(
                    ErrorKind::Invalid,
                    "a port needs a buffer of at least 1 byte",
                );
            }
            // Under netem (or none) the switch forwards at line rate and
            // keeps only the buffer; netem shapes and delays.
            match want.mode {
                EmulationMode::Switch => {
                    sw.set_link(i, want.rate_bps, want.delay_ns, want.buffer_bytes);
                    info.declared[i] = None;
                }
                EmulationMode::Netem | EmulationMode::None => {
                    sw.set_link(i, 0, 0, want.buffer_bytes);
                    info.declared[i] = (want.mode == EmulationMode::Netem).then_some(want);
                }
            }
            let mode = want.mode;
            let changed = port_snapshots(sw, info)[i].emulation != before;
            applied(
                format!(
                    "{}: rate {} bit/s, delay {} ns, buffer {} B, emulated by {}",
                    sw.port_name(i),
                    want.rate_bps,
                    want.delay_ns,
                    want.buffer_bytes,
                    match mode {
                        EmulationMode::Switch => "the switch",
                        EmulationMode::Netem => "netem",
                        EmulationMode::None => "nothing (line rate)",
                    }
                ),
                changed,
            )
        }
        Request::SetCarrier { port, up } => {
            let Some(i) = sw.port_by_name(&port) else {
                return error(ErrorKind::UnknownPort, format!("no port {port:?}"));
            };
            let was = sw.port_reports()[i].link_up;
            if let Err(e) = sw.io().set_carrier(i, up) {
                return error(
                    ErrorKind::Unsupported,
                    format!("{}: {e}", sw.port_name(i)),
                );
            }
            applied(
                format!(
                    "{} carrier {} (both ends of the memory link)",
                    sw.port_name(i),
                    if up { "up" } else { "down" }
                ),
                was != up,
            )
        }
        Request::CaptureStart {
            port,
            snaplen,
            max_frames,
            max_bytes,
            duration_ns,
        } => {
            let Some(i) = sw.port_by_name(&port) else {
                return error(ErrorKind::UnknownPort, format!("no port {port:?}"));
            };
            if snaplen == 0 || max_frames == 0 || max_bytes == 0 || duration_ns == 0 {
                return error(
                    ErrorKind::Invalid,
                    "capture: snaplen, frames, bytes and duration must be positive",
                );
            }
            sw.start_capture(CaptureSpec {
                port: i,
                snaplen: snaplen as usize,
                max_frames,
                max_bytes,
                until_ns: now_ns.saturating_add(duration_ns),
            });
            capture_reply(sw, now_ns, false)
        }
        Request::CaptureFetch => capture_reply(sw, now_ns, false),
        Request::CaptureStop => capture_reply(sw, now_ns, true),
        Request::SetAdmin { port, up } => {
            let Some(i) = sw.port_by_name(&port) else {
                return error(ErrorKind::UnknownPort, format!("no port {port:?}"));
            };
            let changed = sw.admin_up(i) != up;
            sw.set_admin(i, up);
            applied(
                format!(
                    "{} admin {}",
                    sw.port_name(i),
                    if up { "up" } else { "down" }
                ),
                changed,
            )
        }
    }
}

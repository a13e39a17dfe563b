//! The daemon loop over in-memory ports with a fake clock: control
//! requests between polls, hitless changes under continuous traffic,
//! transmit back-pressure, the stats file. No root.

mod common;
use common::*;

use std::cell::Cell;
use std::collections::HashMap;
use std::rc::Rc;

use lcmp_control::proto::{Applied, CandidateSpec, Reply, Request, RouteSpec};
use lcmp_control::{Body, ErrorKind, Snapshot};
use lcmp_policy::{LcmpParams, Policy};
use lcmp_switch::counters::{Counter, DropReason};
use lcmp_switch::daemon::{Daemon, DaemonConfig, PollMode};
use lcmp_switch::egress::{EcnConfig, EcnMarkAt, EgressConfig};
use lcmp_switch::lcmp_node::LcmpNode;
use lcmp_switch::mem_io::MemIo;
use lcmp_wire::testing::FrameBuilder;
use lcmp_wire::Ecn;

type Clock = Box<dyn FnMut() -> u64>;

struct Rig {
    d: Daemon<LcmpNode<MemIo>, Clock>,
    now: Rc<Cell<u64>>,
}

fn rig_with(b: Bed, stats_file: Option<std::path::PathBuf>) -> Rig {
    let now = Rc::new(Cell::new(0));
    let t = now.clone();
    let d = Daemon::new(
        LcmpNode::new(b.sw, "s1", None, 100 * MS).unwrap(),
        Box::new(move || t.get()) as Clock,
        DaemonConfig {
            name: "s1".into(),
            poll: PollMode::Busy,
            stats_file,
            stats_interval_ns: 100 * MS,
        },
    );
    Rig { d, now }
}

fn rig(policy: Policy) -> Rig {
    rig_with(
        bed(policy, [unshaped(), unshaped(), unshaped(), unshaped()]),
        None,
    )
}

fn lcmp() -> Policy {
    Policy::Lcmp(LcmpParams::default())
}

impl Rig {
    /// Injects one frame per flow with sequence `seq`, steps once, and
    /// returns what left as (port, sport, seq).
    fn round(&mut self, sports: &[u16], seq: u16) -> Vec<(usize, u16, u16)> {
        for &s in sports {
            assert!(self.d.switch().io().inject(0, &udp_a_to_b(s, seq)));
        }
        self.now.set(self.now.get() + MS);
        self.d.step();
        self.d.step();
        self.collect()
    }

    fn collect(&mut self) -> Vec<(usize, u16, u16)> {
        let mut out = Vec::new();
        for p in 0..4 {
            for f in self.d.switch().io().take_sent(p) {
                let sport = u16::from_be_bytes([f[34], f[35]]);
                let seq = u16::from_be_bytes([f[42], f[43]]);
                out.push((p, sport, seq));
            }
        }
        out
    }

    fn ok(&mut self, r: Request) -> Reply {
        match self.d.handle(r) {
            Body::Ok(r) => *r,
            Body::Error(e) => panic!("refused: {e:?}"),
        }
    }

    fn applied(&mut self, r: Request) -> Applied {
        match self.ok(r) {
            Reply::Applied(a) => a,
            other => panic!("not applied: {other:?}"),
        }
    }
}

/// Per flow: the ports it left by and its sequence numbers in order.
#[derive(Default)]
struct Trace {
    ports: HashMap<u16, Vec<usize>>,
    seqs: HashMap<u16, Vec<u16>>,
    frames: usize,
}

impl Trace {
    fn add(&mut self, out: &[(usize, u16, u16)]) {
        for &(p, s, q) in out {
            self.ports.entry(s).or_default().push(p);
            self.seqs.entry(s).or_default().push(q);
            self.frames += 1;
        }
    }

    fn port_of(&self, sport: u16) -> usize {
        self.ports[&sport][0]
    }

    /// Every flow stayed on one port and arrived complete and in order.
    fn assert_stable(&self, rounds: u16) {
        for (s, ports) in &self.ports {
            assert!(
                ports.iter().all(|p| *p == ports[0]),
                "flow {s} moved: {ports:?}"
            );
            let want: Vec<u16> = (0..rounds).collect();
            assert_eq!(self.seqs[s], want, "flow {s} lost or reordered frames");
        }
    }
}

fn routes_with(c_paths: [(u32, u8); 3]) -> Vec<RouteSpec> {
    let paths: Vec<CandidateSpec> = c_paths
        .iter()
        .map(|&(port, c_path)| CandidateSpec {
            port,
            c_path,
            capacity_bps: 1_000_000_000,
        })
        .collect();
    vec![
        RouteSpec {
            prefix: "10.0.2.0/24".into(),
            candidates: paths.clone(),
        },
        RouteSpec {
            prefix: "fd00:2::/64".into(),
            candidates: paths,
        },
        RouteSpec {
            prefix: "10.0.1.2/32".into(),
            candidates: vec![CandidateSpec {
                port: 0,
                c_path: 0,
                capacity_bps: 10_000_000_000,
            }],
        },
    ]
}

#[test]
fn table_push_and_policy_and_alpha_changes_move_no_flow_and_lose_nothing() {
    let mut r = rig(lcmp());
    let sports: Vec<u16> = (2000..2064).collect();
    let mut trace = Trace::default();
    let changes: Vec<Request> = vec![
        // The same table, then one with other costs (a recomputation).
        Request::ReplaceTables {
            routes: routes_with([(1, 10), (2, 40), (3, 80)]),
        },
        Request::ReplaceTables {
            routes: routes_with([(1, 60), (2, 10), (3, 30)]),
        },
        Request::SetPolicy {
            policy: "ecmp".into(),
        },
        Request::SetPolicy {
            policy: "lcmp".into(),
        },
        Request::SetParams {
            alpha: Some(7),
            beta: None,
            ecn: None,
            ecn_off: false,
        },
    ];
    let rounds = 12u16;
    let mut changes = changes.into_iter();
    for seq in 0..rounds {
        trace.add(&r.round(&sports, seq));
        if seq % 2 == 1 {
            if let Some(c) = changes.next() {
                r.applied(c);
            }
        }
    }
    assert!(changes.next().is_none(), "every change was applied");
    assert_eq!(trace.frames, sports.len() * rounds as usize);
    trace.assert_stable(rounds);
    let snap = r.d.status();
    assert_eq!(snap.drops_total, 0);
    assert_eq!(snap.flows.failovers, 0);
    assert_eq!(snap.policy.alpha, Some(7));
    assert_eq!(
        snap.table_generation, 2,
        "the identical push changed nothing"
    );
    // Decisions use the new table: its costs, weighted by alpha 7.
    let Reply::Costs(c) = r.ok(Request::Costs {
        dst: "10.0.2.2".into(),
    }) else {
        panic!("not costs");
    };
    let costs: Vec<(u32, u8, u64)> = c
        .candidates
        .iter()
        .map(|c| (c.port, c.c_path, c.cost))
        .collect();
    assert_eq!(costs, vec![(1, 60, 420), (2, 10, 70), (3, 30, 210)]);
}

/// alpha = u32::MAX = 4,294,967,295 at empty queues: the costs are alpha *
/// C_path for C_path 10, 40, 80, i.e. 42,949,672,950, 171,798,691,800 and
/// 343,597,383,600, all past u32 and reported whole (in u32 they wrapped
/// to 2^32 - 10, 2^32 - 40 and 2^32 - 80). Three live candidates are all
/// kept.
#[test]
fn costs_past_u32_are_reported_exactly() {
    let mut r = rig(Policy::Lcmp(LcmpParams {
        alpha: u32::MAX,
        ..Default::default()
    }));
    let Reply::Costs(c) = r.ok(Request::Costs {
        dst: "10.0.2.2".into(),
    }) else {
        panic!("not costs");
    };
    assert_eq!(c.alpha, u32::MAX);
    let parts: Vec<(u32, u8, u8, u64, bool)> = c
        .candidates
        .iter()
        .map(|c| (c.port, c.c_path, c.c_cong, c.cost, c.kept))
        .collect();
    assert_eq!(
        parts,
        vec![
            (1, 10, 0, 42_949_672_950, true),
            (2, 40, 0, 171_798_691_800, true),
            (3, 80, 0, 343_597_383_600, true),
        ]
    );
}

#[test]
fn a_port_leaving_a_route_moves_only_its_flows_and_drops_nothing() {
    let mut r = rig(Policy::Ecmp);
    let sports: Vec<u16> = (4000..4096).collect();
    let mut trace = Trace::default();
    trace.add(&r.round(&sports, 0));
    let on1: Vec<u16> = sports
        .iter()
        .copied()
        .filter(|s| trace.port_of(*s) == 1)
        .collect();
    assert!(!on1.is_empty());
    // The agent withdraws port 1 from the remote routes (its far link died).
    let mut routes = routes_with([(1, 10), (2, 40), (3, 80)]);
    for r in routes.iter_mut().take(2) {
        r.candidates.retain(|c| c.port != 1);
    }
    let a = r.applied(Request::ReplaceTables { routes });
    assert!(a.changed);
    assert_eq!(a.flows_to_move, on1.len() as u64);
    let out = r.round(&sports, 1);
    assert_eq!(out.len(), sports.len(), "nothing dropped");
    for (p, s, _) in &out {
        if on1.contains(s) {
            assert!(*p == 2 || *p == 3, "flow {s} still on port 1");
        } else {
            assert_eq!(*p, trace.port_of(*s), "flow {s} moved without cause");
        }
    }
    // Port 1 back: nothing moves again (flows stay where they are), new
    // flows may use it.
    let before: HashMap<u16, usize> = out.iter().map(|(p, s, _)| (*s, *p)).collect();
    r.applied(Request::ReplaceTables {
        routes: routes_with([(1, 10), (2, 40), (3, 80)]),
    });
    let out = r.round(&sports, 2);
    assert!(out.iter().all(|(p, s, _)| before[s] == *p));
    let fresh: Vec<u16> = (5000..5096).collect();
    assert!(r.round(&fresh, 0).iter().any(|(p, _, _)| *p == 1));
    assert_eq!(r.d.status().drops_total, 0);
}

#[test]
fn admin_down_fails_flows_over_and_admin_up_restores_the_port() {
    let mut r = rig(Policy::Ecmp);
    let sports: Vec<u16> = (6000..6048).collect();
    let mut trace = Trace::default();
    trace.add(&r.round(&sports, 0));
    r.applied(Request::SetAdmin {
        port: "p1".into(),
        up: false,
    });
    let snap = r.d.status();
    let p1 = snap.port("p1").unwrap();
    assert!(!p1.up && p1.link_up && !p1.admin_up);
    let out = r.round(&sports, 1);
    assert_eq!(out.len(), sports.len());
    assert!(out.iter().all(|(p, _, _)| *p != 1));
    r.applied(Request::SetAdmin {
        port: "1".into(),
        up: true,
    });
    assert!(r.d.status().port("p1").unwrap().up);
    match r.d.handle(Request::SetAdmin {
        port: "p9".into(),
        up: true,
    }) {
        Body::Error(e) => assert_eq!(e.kind, ErrorKind::UnknownPort),
        other => panic!("{other:?}"),
    }
}

#[test]
fn bad_changes_are_refused_and_change_nothing() {
    let mut r = rig(lcmp());
    let refused = |r: &mut Rig, req: Request, kind: ErrorKind| match r.d.handle(req) {
        Body::Error(e) => assert_eq!(e.kind, kind, "{}", e.message),
        other => panic!("accepted: {other:?}"),
    };
    refused(
        &mut r,
        Request::SetPolicy {
            policy: "fastest".into(),
        },
        ErrorKind::Invalid,
    );
    let mut bad = routes_with([(1, 10), (2, 40), (7, 80)]);
    bad.truncate(1);
    refused(
        &mut r,
        Request::ReplaceTables { routes: bad },
        ErrorKind::Invalid,
    );
    refused(
        &mut r,
        Request::ReplaceTables {
            routes: vec![RouteSpec {
                prefix: "10.0.2.0/33".into(),
                candidates: vec![],
            }],
        },
        ErrorKind::Invalid,
    );
    refused(
        &mut r,
        Request::SetParams {
            alpha: None,
            beta: None,
            ecn: Some(lcmp_control::snapshot::EcnFractions {
                kmin: 0.9,
                kmax: 0.1,
                pmax: 0.2,
            }),
            ecn_off: false,
        },
        ErrorKind::Invalid,
    );
    refused(
        &mut r,
        Request::Costs {
            dst: "192.0.2.1".into(),
        },
        ErrorKind::NoRoute,
    );
    let snap = r.d.status();
    assert_eq!(snap.table_generation, 1);
    assert_eq!(snap.policy.name, "lcmp");
    r.applied(Request::SetPolicy {
        policy: "ecmp".into(),
    });
    refused(
        &mut r,
        Request::SetParams {
            alpha: Some(2),
            beta: None,
            ecn: None,
            ecn_off: false,
        },
        ErrorKind::Invalid,
    );
}

#[test]
fn costs_show_every_candidate_and_the_kept_set_follows_a_queue() {
    // Port 1 (C_path 10) is a slow link: a burst queues there.
    let slow = EgressConfig {
        rate_bps: 10_000_000,
        delay_ns: 0,
        buffer_bytes: 100_000,
        ecn: None,
        max_in_flight: 4096,
    };
    let keep_one = Policy::Lcmp(LcmpParams {
        keep_all_up_to: 1,
        ..Default::default()
    });
    let mut r = rig_with(
        bed(keep_one, [unshaped(), slow, unshaped(), unshaped()]),
        None,
    );
    let costs = |r: &mut Rig| match r.ok(Request::Costs {
        dst: "10.0.2.0/24".into(),
    }) {
        Reply::Costs(c) => c,
        other => panic!("{other:?}"),
    };
    let c = costs(&mut r);
    assert_eq!(c.prefix, "10.0.2.0/24");
    let parts: Vec<(u32, u8, u64, bool)> = c
        .candidates
        .iter()
        .map(|c| (c.port, c.c_path, c.cost, c.kept))
        .collect();
    // alpha 3, beta 1, empty queues: cost = 3 * C_path; 3 live keep 1.
    assert_eq!(
        parts,
        vec![(1, 10, 30, true), (2, 40, 120, false), (3, 80, 240, false)]
    );
    // One flow's burst of 90 kB onto port 1, held there by the 10 Mbit/s
    // link while the monitor samples it.
    for seq in 0..90 {
        let f = FrameBuilder::ipv4([10, 0, 1, 2], [10, 0, 2, 2])
            .macs(HOST_A, mac(0))
            .udp(7000, 5001)
            .payload(&[seq as u8; 958])
            .build();
        assert!(r.d.switch().io().inject(0, &f));
    }
    r.d.step();
    r.d.step();
    for _ in 0..20 {
        r.now.set(r.now.get() + 100_000);
        r.d.step();
    }
    let c = costs(&mut r);
    let p1 = &c.candidates[0];
    assert!(p1.queue_bytes > 50_000, "{p1:?}");
    assert!(p1.c_cong > 0 && p1.q > 0, "{p1:?}");
    assert!(!p1.kept, "a congested port leaves the kept set: {c:?}");
    assert!(c.candidates[1].kept, "{c:?}");
}

#[test]
fn a_full_transmit_ring_holds_frames_instead_of_dropping_them() {
    let mut r = rig(Policy::Ecmp);
    r.d.switch().io().set_tx_room(3);
    for seq in 0..200u16 {
        assert!(r.d.switch().io().inject(0, &udp_a_to_b(8000, seq)));
    }
    let mut out = Vec::new();
    for _ in 0..200 {
        r.now.set(r.now.get() + 10_000);
        r.d.step();
        out.extend(r.collect());
    }
    let seqs: Vec<u16> = out.iter().map(|(_, _, q)| *q).collect();
    assert_eq!(seqs, (0..200).collect::<Vec<_>>(), "all, in order");
    let snap = r.d.status();
    assert_eq!(snap.dropped("tx_ring_full"), 0);
    assert_eq!(snap.drops_total, 0);
}

#[test]
fn only_marks_made_here_count_as_ce_marked() {
    let marking = EgressConfig {
        rate_bps: 1_000_000,
        delay_ns: 0,
        buffer_bytes: 1 << 20,
        ecn: Some(EcnConfig {
            kmin_bytes: 0,
            kmax_bytes: 1,
            pmax: 1.0,
            mark_at: EcnMarkAt::Enqueue,
        }),
        max_in_flight: 4096,
    };
    let mut r = rig_with(
        bed(Policy::Ecmp, [unshaped(), marking, marking, marking]),
        None,
    );
    let frame = |ecn, seq: u16| {
        FrameBuilder::ipv4([10, 0, 1, 2], [10, 0, 2, 2])
            .macs(HOST_A, mac(0))
            .ecn(ecn)
            .udp(9000, 5001)
            .payload(&seq.to_be_bytes())
            .build()
    };
    for seq in 0..10 {
        assert!(r.d.switch().io().inject(0, &frame(Ecn::Ce, seq)));
    }
    r.d.step();
    assert_eq!(r.d.switch_ref().counters().get(Counter::CeMarked), 0);
    for seq in 10..20 {
        assert!(r.d.switch().io().inject(0, &frame(Ecn::Ect0, seq)));
    }
    r.d.step();
    // The first ECT frame may find the queue empty (below kmax).
    let marked = r.d.switch_ref().counters().get(Counter::CeMarked);
    assert!((9..=10).contains(&marked), "{marked}");
}

#[test]
fn status_over_the_inbox_and_the_stats_file_share_one_schema() {
    let dir = std::env::temp_dir().join(format!("lcmp-daemon-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let stats = dir.join("s1.json");
    let mut r = rig_with(
        bed(lcmp(), [unshaped(), unshaped(), unshaped(), unshaped()]),
        Some(stats.clone()),
    );
    let inbox = lcmp_control::server::Inbox::new().unwrap();
    let submit = inbox.sender();
    r.d.attach_inbox(inbox);
    r.round(&[1, 2, 3], 0);
    let answer = submit.submit(Request::Status);
    r.d.step();
    let Ok(Body::Ok(reply)) = answer.try_recv() else {
        panic!("no answer after one step");
    };
    let Reply::Status(live) = *reply else {
        panic!("not a status");
    };
    assert_eq!(live.switch, "s1");
    assert_eq!(live.counter("rx_frames"), 3);
    assert_eq!(live.port("p0").unwrap().counter("rx_frames"), 3);
    assert_eq!(live.control.requests, 0, "counted after the answer");
    // The stats file is written on the loop's clock.
    r.now.set(r.now.get() + 200 * MS);
    r.d.step();
    let file: Snapshot = serde_json::from_slice(&std::fs::read(&stats).unwrap()).unwrap();
    assert_eq!(file.counter("rx_frames"), 3);
    assert_eq!(file.control.requests, 1);
    assert_eq!(file.uptime_ms, 201, "1 ms of traffic, then 200 ms");
    assert_eq!(file.pid, std::process::id());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_flow_timeout_beyond_the_cache_limit_is_an_error_not_a_panic() {
    use lcmp_switch::switch::{Switch, SwitchConfig};
    let b = bed(
        Policy::Ecmp,
        [unshaped(), unshaped(), unshaped(), unshaped()],
    );
    drop(b);
    let cfg = SwitchConfig {
        ports: Vec::new(),
        routes: Vec::new(),
        policy: Policy::Ecmp,
        congestion: Default::default(),
        flow_capacity: 16,
        flow_idle_timeout_ns: 3 * 3600 * 1_000_000_000,
        seed: 1,
        batch_size: 1,
        link_check_interval_ns: MS,
        ecn: None,
        ecn_link_time: None,
        ecn_mark_at: Default::default(),
        drop_headroom: 1,
    };
    let Err(e) = Switch::new(cfg, MemIo::new(0, 1)) else {
        panic!("accepted");
    };
    assert!(e.0.contains("flow idle timeout"), "{e}");
}

#[test]
fn drops_count_on_the_port_they_happen_at() {
    let mut r = rig(Policy::Ecmp);
    let no_route = FrameBuilder::ipv4([10, 0, 1, 2], [192, 0, 2, 1])
        .macs(HOST_A, mac(0))
        .udp(1, 2)
        .build();
    assert!(r.d.switch().io().inject(0, &no_route));
    r.d.step();
    let snap = r.d.status();
    assert_eq!(snap.port("p0").unwrap().dropped("no_route"), 1);
    assert_eq!(snap.port("p1").unwrap().dropped("no_route"), 0);
    assert_eq!(snap.dropped("no_route"), 1);
    assert_eq!(r.d.switch_ref().counters().dropped(DropReason::NoRoute), 1);
}

#[test]
fn leaving_lcmp_and_coming_back_keeps_its_parameters() {
    let keep_one = Policy::Lcmp(LcmpParams {
        alpha: 4,
        keep_all_up_to: 1,
        ..Default::default()
    });
    let mut r = rig(keep_one);
    for p in ["ecmp", "lcmp-rm-beta", "lcmp"] {
        r.applied(Request::SetPolicy { policy: p.into() });
    }
    assert_eq!(r.d.switch_ref().policy(), keep_one);
    r.applied(Request::SetPolicy {
        policy: "lcmp-rm-alpha".into(),
    });
    let Policy::Lcmp(p) = r.d.switch_ref().policy() else {
        panic!("not LCMP");
    };
    assert_eq!((p.alpha, p.beta, p.keep_all_up_to), (0, 1, 1));
}

#[test]
fn a_hostile_control_client_does_not_stop_forwarding() {
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::net::UnixStream;
    let dir = std::env::temp_dir().join(format!("lcmp-daemon-sock-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join("s1.sock");
    let mut r = rig(lcmp());
    let inbox = lcmp_control::server::Inbox::new().unwrap();
    lcmp_control::server::serve(&path, &inbox).unwrap();
    r.d.attach_inbox(inbox);
    // A client that sends noise, a truncated request, an oversized line
    // and finally a real request, while the switch forwards.
    let client_path = path.clone();
    let client = std::thread::spawn(move || {
        let mut s = UnixStream::connect(&client_path).unwrap();
        s.write_all(b"\x00\x01garbage\n{\"v\":1,\"verb\":\"costs\",\"dst\":\n{\"v\":1,\"id\":2,\"verb\":\"status\"}\n")
            .unwrap();
        let mut lines = BufReader::new(s.try_clone().unwrap()).lines();
        let first = lines.next().unwrap().unwrap();
        let second = lines.next().unwrap().unwrap();
        let mut big = UnixStream::connect(&client_path).unwrap();
        let _ = big.write_all(&vec![b'{'; lcmp_control::proto::MAX_REQUEST_BYTES + 2]);
        let mut status = UnixStream::connect(&client_path).unwrap();
        status
            .write_all(b"{\"v\":1,\"id\":9,\"verb\":\"status\"}\n")
            .unwrap();
        let third = BufReader::new(status).lines().next().unwrap().unwrap();
        (first, second, third)
    });
    let sports: Vec<u16> = (9000..9016).collect();
    let mut trace = Trace::default();
    let mut seq = 0u16;
    while !client.is_finished() {
        trace.add(&r.round(&sports, seq));
        seq += 1;
        assert!(seq < 20_000, "the client never finished");
    }
    let (first, second, third) = client.join().unwrap();
    assert!(first.contains("\"error\""), "{first}");
    // The truncated request is refused on its own line.
    assert!(second.contains("\"error\""), "{second}");
    assert!(
        third.contains("\"id\":9") && third.contains("\"ok\""),
        "{third}"
    );
    trace.assert_stable(seq);
    assert_eq!(r.d.status().drops_total, 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Several switches on one loop (`run_many`): each forwards its own
/// frames with its own counters and stats file, and the loop runs every
/// daemon's side work until told to stop.
#[test]
fn run_many_steps_every_switch_with_its_own_state() {
    use lcmp_switch::daemon::run_many;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let dir = std::env::temp_dir().join(format!("lcmp-run-many-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let mut daemons = Vec::new();
    for (i, name) in ["s1", "s2"].iter().enumerate() {
        let mut b = bed(lcmp(), [unshaped(), unshaped(), unshaped(), unshaped()]);
        // s1 gets 3 frames, s2 gets 5: the counters must not mix.
        for seq in 0..(3 + 2 * i as u16) {
            assert!(b.sw.io().inject(0, &udp_a_to_b(7000, seq)));
        }
        let mut t = 0u64;
        let mut d = Daemon::new(
            LcmpNode::new(b.sw, name, None, 10 * MS).unwrap(),
            Box::new(move || {
                t += MS;
                t
            }) as Clock,
            DaemonConfig {
                name: name.to_string(),
                poll: PollMode::Busy,
                stats_file: Some(dir.join(format!("{name}.stats.json"))),
                stats_interval_ns: 10 * MS,
            },
        );
        // The last daemon stops the loop once every daemon has run a while
        // (its side work runs only when the loop steps it).
        if i == 1 {
            let stop = stop.clone();
            let mut runs = 0;
            d.add_side_task(Box::new(move |_, now| {
                runs += 1;
                if runs == 50 {
                    stop.store(true, Ordering::Relaxed);
                }
                now
            }));
        }
        daemons.push(d);
    }
    run_many(&mut daemons, &stop);
    for (d, (name, frames)) in daemons.iter_mut().zip([("s1", 3u64), ("s2", 5)]) {
        let snap = d.finish();
        assert_eq!(snap.switch, name);
        assert_eq!(snap.counter("rx_frames"), frames, "{name}");
        assert_eq!(snap.counter("tx_frames"), frames, "{name}");
        let file: Snapshot = serde_json::from_str(
            &std::fs::read_to_string(dir.join(format!("{name}.stats.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(file.switch, name);
        assert_eq!(file.counter("tx_frames"), frames);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Switches of different kinds on one loop: an LCMP switch and a rotor of
/// a rotor network, each with its own clock, forwarding and stats file
/// (a `Snapshot` and a `RotorStatus`).
#[test]
fn run_many_runs_switches_of_every_kind_on_one_thread() {
    use lcmp_control::rotor::RotorStatus;
    use lcmp_switch::daemon::{run_many, Loop};
    use lcmp_switch::rotor_daemon::{RotorNode, RotorNodeConfig};
    use lcmp_topology::rotor_net::RotorNetwork;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let dir = std::env::temp_dir().join(format!("lcmp-run-kinds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let stats = |name: &str| dir.join(format!("{name}.stats.json"));
    let cfg = |name: &str| DaemonConfig {
        name: name.into(),
        poll: PollMode::Busy,
        stats_file: Some(stats(name)),
        stats_interval_ns: 10 * MS,
    };
    let mut b = bed(lcmp(), [unshaped(), unshaped(), unshaped(), unshaped()]);
    for seq in 0..3 {
        assert!(b.sw.io().inject(0, &udp_a_to_b(7000, seq)));
    }
    let mut t = 0u64;
    let lcmp_daemon = Daemon::new(
        LcmpNode::new(b.sw, "s1", None, 10 * MS).unwrap(),
        Box::new(move || {
            t += MS;
            t
        }) as Clock,
        cfg("s1"),
    );
    // 4 ToRs, 2 rotors, 1 ms slots with 100 us reconfiguration; rotor 0
    // applies shift +1 in slot 0. Its clock starts past the
    // reconfiguration and advances 1 us per reading: every poll of this
    // test is in slot 0, where port 1 (ToR 1) reaches port 2 (ToR 2).
    let net =
        RotorNetwork::from_schedule(&lcmp_topology::rotor::complete(4, 2).unwrap(), MS, 100 * US);
    let mut io = MemIo::new(4, 64);
    assert!(io.inject(1, &udp_a_to_b(7001, 0)));
    let mut rt = 200 * US;
    let mut rotor = Daemon::new(
        RotorNode::new(
            io,
            &net,
            0,
            RotorNodeConfig {
                port_names: (0..4).map(|i| format!("t{i}")).collect(),
                epoch: Some((0, "file".into())),
                spin_ns: 0,
            },
        )
        .unwrap(),
        Box::new(move || {
            rt += US;
            rt
        }) as Clock,
        cfg("rotor0"),
    );
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        let mut runs = 0;
        rotor.add_side_task(Box::new(move |_, now| {
            runs += 1;
            if runs == 50 {
                stop.store(true, Ordering::Relaxed);
            }
            now
        }));
    }
    let mut loops: Vec<Box<dyn Loop>> = vec![Box::new(lcmp_daemon), Box::new(rotor)];
    run_many(&mut loops, &stop);
    drop(loops);
    let snap: Snapshot =
        serde_json::from_str(&std::fs::read_to_string(stats("s1")).unwrap()).unwrap();
    assert_eq!(snap.switch, "s1");
    assert_eq!(snap.counter("tx_frames"), 3);
    let rs: RotorStatus =
        serde_json::from_str(&std::fs::read_to_string(stats("rotor0")).unwrap()).unwrap();
    assert_eq!(
        (rs.name.as_str(), rs.role.as_str(), rs.slot),
        ("rotor0", "rotor", 0)
    );
    assert_eq!(rs.counters["tx_frames"], 1);
    assert_eq!(rs.ports[2].tx_frames, 1, "ToR 1's frame out to ToR 2");
    let _ = std::fs::remove_dir_all(&dir);
}

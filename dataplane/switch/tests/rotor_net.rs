//! A rotor network's switches over in-memory ports with a fake clock: the
//! ToR's packet path (routing, Valiant marks, pacing, slot ends, buffer)
//! and a ToR -> rotor -> ToR chain that moves frames only on matched
//! circuits.

use lcmp_switch::mem_io::MemIo;
use lcmp_switch::rotor::{RotorSwitch, SlotClock};
use lcmp_switch::tor_path::{TorConfig, TorDropReason, TorSwitch, TARGET_MAC_PREFIX};
use lcmp_topology::rotor;
use lcmp_topology::rotor_net::{RotorNetwork, RotorRouting};
use lcmp_wire::testing::FrameBuilder;

const SLOT: u64 = 1_000_000;
const RECONF: u64 = 100_000;
/// A 1000-byte frame at 100 Mbit/s.
const SER: u64 = 80_000;
const HOST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x11];

fn mac(port: usize) -> [u8; 6] {
    [0x02, 0xaa, 0, 0, 0, port as u8]
}

/// 4 ToRs x 2 rotors, complete graph: rotor 0 cycles shifts +1, +2;
/// rotor 1 shift +3 then idle.
fn net(routing: RotorRouting) -> RotorNetwork {
    let mut n = RotorNetwork::from_schedule(&rotor::complete(4, 2).unwrap(), SLOT, RECONF);
    n.routing = Some(routing);
    n.tx_guard_ns = 0;
    n.buffer_bytes = Some(10_000);
    n
}

fn tor(t: u32, net: &RotorNetwork, epoch: bool) -> TorSwitch<MemIo> {
    tor_over(MemIo::new(3, 64), t, net, epoch)
}

/// ToR `t` of `net` over `io` (uplinks, then the host port).
fn tor_over<IO: lcmp_switch::io::PacketIo>(
    io: IO,
    t: u32,
    net: &RotorNetwork,
    epoch: bool,
) -> TorSwitch<IO> {
    TorSwitch::new(
        io,
        TorConfig::for_network(
            net,
            t,
            (0..3).map(mac).collect(),
            vec![Some(HOST_MAC)],
            0,
            7,
        )
        .unwrap(),
        epoch,
    )
    .unwrap()
}

/// A 1000-byte UDP frame from host (s, 0) to host (d, 0), TTL 64.
fn frame(s: u8, d: u8, dst_mac: [u8; 6]) -> Vec<u8> {
    FrameBuilder::ipv4([10, s, 0, 2], [10, d, 0, 2])
        .macs(HOST_MAC, dst_mac)
        .udp(4000, 5000)
        .pad_to(1000)
        .build()
}

fn ttl(f: &[u8]) -> u8 {
    f[14 + 8]
}

#[test]
fn a_hosts_frame_waits_for_its_circuit_and_leaves_marked_at_line_rate() {
    let n = net(RotorRouting::Direct);
    // ToR 0 to ToR 2: shift +2 is rotor 0's matching in odd slots.
    let mut t = tor(0, &n, true);
    assert!(t.io().inject(2, &frame(0, 2, mac(2))));
    t.poll(RECONF + SER);
    assert!(t.io().take_sent(0).is_empty(), "slot 0 reaches ToR 1");
    assert_eq!(t.core().queue_bytes(2), 1000);
    t.poll(SLOT + RECONF + SER - 1);
    assert!(t.io().take_sent(0).is_empty(), "still serializing");
    t.poll(SLOT + RECONF + SER);
    let sent = t.io().take_sent(0);
    assert_eq!(sent.len(), 1);
    let f = &sent[0];
    assert_eq!(f[..5], TARGET_MAC_PREFIX);
    assert_eq!(f[5], 2, "target ToR in the destination MAC");
    assert_eq!(
        f[6..12],
        lcmp_switch::tor_path::send_stamp(SLOT + RECONF + SER),
        "the send time in the source MAC"
    );
    assert_eq!(
        lcmp_switch::tor_path::sent_at(f, SLOT + RECONF + SER + 70_000, SLOT),
        Some(SLOT + RECONF + SER)
    );
    assert_eq!(ttl(f), 63);
    assert!(lcmp_wire::testing::ipv4_header_checksum_ok(f).unwrap());
    assert_eq!(t.traffic()[0].tx_frames, 1);
}

#[test]
fn a_frame_at_its_target_goes_to_the_host_and_transit_frames_move_on() {
    let n = net(RotorRouting::Direct);
    let mut t = tor(2, &n, true);
    let mut marked = TARGET_MAC_PREFIX.to_vec();
    marked.push(2);
    let mut f = frame(0, 2, [0; 6]);
    f[..6].copy_from_slice(&marked);
    lcmp_wire::testing::fix_ipv4_checksum(&mut f);
    assert!(t.io().inject(0, &f));
    t.poll(RECONF);
    let got = t.io().take_sent(2);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0][..6], HOST_MAC);
    assert_eq!(got[0][6..12], mac(2));
    assert_eq!(t.counters().delivered, 1);
    // Marked for ToR 2 but addressed to ToR 3: ToR 2 was the Valiant
    // intermediate; on to ToR 3 (shift +1: rotor 0, even slots).
    let mut g = frame(0, 3, [0; 6]);
    g[..6].copy_from_slice(&marked);
    assert!(t.io().inject(0, &g));
    t.poll(2 * SLOT + RECONF);
    assert!(
        t.io().take_sent(0).is_empty(),
        "serializing from its arrival"
    );
    t.poll(2 * SLOT + RECONF + SER);
    let sent = t.io().take_sent(0);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0][5], 3, "re-targeted at the destination's ToR");
    assert_eq!(t.counters().transit, 1);
}

#[test]
fn valiant_spreads_over_intermediates_and_shift_routing_takes_the_table() {
    let n = net(RotorRouting::Valiant);
    let mut t = tor(0, &n, true);
    let mut targets = [0u32; 4];
    for round in 0..40u64 {
        assert!(t.io().inject(2, &frame(0, 1, mac(2))));
        // Every slot of a period, to the end of each.
        for k in 0..2 {
            let now = (round * 2 + k) * SLOT + SLOT - 1;
            t.poll(now);
            for port in 0..2 {
                for f in t.io().take_sent(port) {
                    targets[f[5] as usize] += 1;
                }
            }
        }
    }
    assert_eq!(targets[0], 0, "never marked for itself");
    assert!(
        targets[1] > 0 && targets[2] > 0 && targets[3] > 0,
        "direct and both detours: {targets:?}"
    );
    assert_eq!(
        t.counters().valiant_detours,
        (targets[2] + targets[3]) as u64
    );
}

#[test]
fn the_buffer_no_epoch_and_bad_frames_are_counted_drops() {
    let n = net(RotorRouting::Direct);
    // No epoch: nothing enters a circuit, local delivery still works.
    let mut t = tor(0, &n, false);
    assert!(t.io().inject(2, &frame(0, 1, mac(2))));
    assert!(t.io().inject(2, &frame(0, 0, mac(2))));
    t.poll(RECONF);
    assert_eq!(t.io().take_sent(2).len(), 1, "host to host on one ToR");
    t.set_epoch(0);
    // Buffer 10 kB: ten 1000-byte frames fit, the eleventh does not.
    for _ in 0..11 {
        assert!(t.io().inject(2, &frame(0, 2, mac(2))));
    }
    t.poll(RECONF);
    assert_eq!(t.core().total_bytes(), 10_000);
    // Not for this network, not IPv4, truncated.
    assert!(t.io().inject(
        2,
        &FrameBuilder::ipv4([10, 0, 0, 2], [10, 9, 0, 2])
            .udp(1, 2)
            .build()
    ));
    assert!(t.io().inject(
        2,
        &FrameBuilder::ipv6([0xfd; 16], [0xfe; 16]).udp(1, 2).build()
    ));
    assert!(t.io().inject(2, &[0u8; 20]));
    t.poll(RECONF);
    let drops: Vec<(&str, u64)> = t
        .drops()
        .filter(|(_, n)| *n > 0)
        .map(|(r, n)| (r.name(), n))
        .collect();
    assert_eq!(
        drops,
        vec![
            ("no_epoch", 1),
            ("not_forwardable", 2),
            ("unknown_destination", 1),
            ("queue_full", 1)
        ]
    );
    // Shutdown hands the ten queued frames back, counted.
    t.drain();
    assert_eq!(
        t.drops()
            .find(|(r, _)| *r == TorDropReason::Shutdown)
            .unwrap()
            .1,
        10
    );
    assert_eq!(t.io().free_frames(), 64);
}

/// Moves what `from` sent on `port` into `to`'s `to_port`.
fn carry(from: &mut MemIo, port: usize, to: &mut MemIo, to_port: usize) -> usize {
    let frames = from.take_sent(port);
    for f in &frames {
        assert!(to.inject(to_port, f));
    }
    frames.len()
}

#[test]
fn tor_rotor_tor_moves_frames_only_on_matched_circuits() {
    let n = net(RotorRouting::Direct);
    let mut a = tor(0, &n, true);
    let mut b = tor(3, &n, true);
    // Rotor 1 (uplink 1): shift +3 in even slots, idle in odd ones.
    let mut r1 = RotorSwitch::new(
        MemIo::new(4, 64),
        n.rotor_matchings(1),
        SlotClock {
            epoch_ns: 0,
            slot_ns: SLOT,
            reconfig_ns: RECONF,
        },
    )
    .unwrap();
    for _ in 0..5 {
        assert!(a.io().inject(2, &frame(0, 3, mac(2))));
    }
    let mut delivered = Vec::new();
    // Step through two periods in 10 us steps.
    for step in 0..400u64 {
        let now = step * 10_000;
        a.poll(now);
        let crossed = carry(a.io(), 1, r1.io(), 0);
        // Rotor 0 would take ToR 0 -> 3 never (shifts +1, +2).
        assert!(a.io().take_sent(0).is_empty());
        r1.poll(now);
        let out = carry(r1.io(), 3, b.io(), 1);
        assert_eq!(crossed, out, "a bufferless rotor at {now}");
        b.poll(now);
        for _ in b.io().take_sent(2) {
            delivered.push(now);
        }
    }
    assert_eq!(delivered.len(), 5);
    for t in &delivered {
        let offset = t % SLOT;
        assert_eq!((t / SLOT) % 2, 0, "only in slots where 0 -> 3 is up");
        assert!(
            offset >= RECONF + SER,
            "not before the reconfiguration and one serialization: {t}"
        );
    }
    assert_eq!(r1.counters().dropped_reconfiguring, 0);
}

mod daemon {
    use std::cell::Cell;
    use std::rc::Rc;

    use lcmp_control::proto::{Body, ErrorKind, Reply};
    use lcmp_control::rotor::RotorStatus;
    use lcmp_control::Request;
    use lcmp_switch::daemon::{Daemon, DaemonConfig, Loop, PollMode};
    use lcmp_switch::io::PacketIo;
    use lcmp_switch::node::Node;
    use lcmp_switch::rotor_daemon::{RotorNode, RotorNodeConfig, TorNode};

    use super::*;

    type Clock = Box<dyn FnMut() -> u64>;

    /// A clock every daemon of a test reads: the test sets the time.
    fn shared_clock() -> (Rc<Cell<u64>>, impl Fn() -> Clock) {
        let now = Rc::new(Cell::new(0u64));
        let n = now.clone();
        (now, move || {
            let n = n.clone();
            Box::new(move || n.get()) as Clock
        })
    }

    fn config(name: &str, stats_file: Option<std::path::PathBuf>) -> DaemonConfig {
        DaemonConfig {
            name: name.into(),
            poll: PollMode::Event,
            stats_file,
            stats_interval_ns: 1_000_000_000,
        }
    }

    fn node_config(ports: &[&str], epoch: Option<u64>, spin_ns: u64) -> RotorNodeConfig {
        RotorNodeConfig {
            port_names: ports.iter().map(|p| p.to_string()).collect(),
            epoch: epoch.map(|e| (e, "file".into())),
            spin_ns,
        }
    }

    fn tor_daemon(
        t: u32,
        epoch: Option<u64>,
        stats_file: Option<std::path::PathBuf>,
        spin_ns: u64,
        clock: Clock,
    ) -> Daemon<TorNode<MemIo>, Clock> {
        let n = net(RotorRouting::Direct);
        Daemon::new(
            TorNode::new(
                tor(t, &n, false),
                node_config(&["u0", "u1", "h0"], epoch, spin_ns),
            ),
            clock,
            config(&format!("tor{t}"), stats_file),
        )
    }

    fn daemon(epoch: Option<u64>) -> (Daemon<TorNode<MemIo>, Clock>, Rc<Cell<u64>>) {
        daemon_with(epoch, None, 0)
    }

    fn daemon_with(
        epoch: Option<u64>,
        stats_file: Option<std::path::PathBuf>,
        spin_ns: u64,
    ) -> (Daemon<TorNode<MemIo>, Clock>, Rc<Cell<u64>>) {
        let (now, clock) = shared_clock();
        (tor_daemon(0, epoch, stats_file, spin_ns, clock()), now)
    }

    fn status<N: Node>(d: &mut Daemon<N, Clock>) -> RotorStatus {
        match d.handle(Request::Rotor) {
            Body::Ok(r) => match *r {
                Reply::Rotor(s) => *s,
                other => panic!("{other:?}"),
            },
            Body::Error(e) => panic!("{e:?}"),
        }
    }

    #[test]
    fn the_agents_epoch_starts_the_slots_and_the_status_shows_them() {
        let (mut d, now) = daemon(None);
        let s = status(&mut d);
        assert_eq!(
            (s.epoch_unix_ns, s.role.as_str(), s.index),
            (None, "tor", 0)
        );
        // Not an LCMP switch: LCMP verbs are refused by name.
        match d.handle(Request::Status) {
            Body::Error(e) => {
                assert_eq!(e.kind, ErrorKind::Unsupported);
                assert_eq!(
                    e.message,
                    "tor0 is a switch of a rotor network: it answers `rotor` and `set_epoch`, not `status`"
                );
            }
            other => panic!("{other:?}"),
        }
        let epoch = 5 * SLOT;
        match d.handle(Request::SetEpoch {
            epoch_unix_ns: epoch,
        }) {
            Body::Ok(r) => assert!(matches!(*r, Reply::Applied(ref a) if a.changed)),
            other => panic!("{other:?}"),
        }
        // The same epoch again changes nothing.
        match d.handle(Request::SetEpoch {
            epoch_unix_ns: epoch,
        }) {
            Body::Ok(r) => assert!(matches!(*r, Reply::Applied(ref a) if !a.changed)),
            other => panic!("{other:?}"),
        }
        assert_eq!(d.node_ref().epoch(), Some(epoch));
        // Slot 3 since the epoch, outside the reconfiguration: rotor 0
        // applies shift +2 (odd slot), rotor 1 is idle.
        now.set(epoch + 3 * SLOT + RECONF + 1);
        let s = status(&mut d);
        assert_eq!(s.epoch_unix_ns, Some(epoch));
        assert_eq!(s.epoch_source.as_deref(), Some("agent"));
        assert_eq!(s.slot, 3);
        assert_eq!(s.circuits, vec![Some(2), None]);
        assert_eq!(s.schedule.len(), 2);
        assert_eq!(s.queues.len(), 3, "one per other ToR");
    }

    #[test]
    fn the_stats_file_waits_for_the_slot_opening_instead_of_delaying_it() {
        let path =
            std::env::temp_dir().join(format!("lcmp-rotor-stats-{}.json", std::process::id()));
        let _ = std::fs::remove_file(&path);
        // Slots open (reconfiguration over) at 0.1 ms, 1.1 ms, ...; the ToR
        // spins 200 us before an opening.
        let (mut d, now) = daemon_with(Some(0), Some(path.clone()), 200_000);
        now.set(SLOT);
        d.step();
        assert!(!path.exists(), "written 100 us before a slot opening");
        // Asleep, it wakes at the opening to write it.
        assert_eq!(d.timeout_ns(), RECONF);
        now.set(SLOT + RECONF);
        d.step();
        let s: RotorStatus =
            serde_json::from_slice(&std::fs::read(&path).expect("written after the opening"))
                .unwrap();
        assert_eq!(
            (s.name.as_str(), s.role.as_str(), s.slot),
            ("tor0", "tor", 1)
        );
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn lateness_is_measured_only_for_slots_frames_waited_for() {
        let (mut d, now) = daemon(Some(0));
        // A frame for ToR 2 arrives in slot 0 (rotor 0 reaches ToR 1):
        // it waits for slot 1.
        now.set(RECONF + 500_000);
        assert!(d.node().switch().io().inject(2, &frame(0, 2, mac(2))));
        d.step();
        // The loop wakes 3 us after slot 1's reconfiguration ends.
        now.set(SLOT + RECONF + 3_000);
        d.step();
        now.set(SLOT + RECONF + SER + 3_000);
        d.step();
        let s = status(&mut d);
        assert_eq!(s.slots_seen, 1, "slot 0 began before anything waited");
        assert_eq!(s.lateness.last_ns, 3_000);
        assert_eq!(s.ports[0].tx_frames, 1);
        // Nothing waits: slot 2 is not a sample.
        now.set(2 * SLOT + RECONF + 50_000);
        d.step();
        assert_eq!(status(&mut d).slots_seen, 1);
    }

    /// Moves what daemon `from` sent on `port` into `to`'s `to_port`.
    fn carry<A: Node<Io = MemIo>, B: Node<Io = MemIo>>(
        from: &mut Daemon<A, Clock>,
        port: usize,
        to: &mut Daemon<B, Clock>,
        to_port: usize,
    ) -> usize {
        let frames = from.node().io().take_sent(port);
        for f in &frames {
            assert!(to.node().io().inject(to_port, f));
        }
        frames.len()
    }

    /// Three whole daemons on one fake clock: ToR 0, rotor 1 (uplink 1 of
    /// every ToR) and ToR 3. A frame from host (0, 0) to host (3, 0) waits
    /// at ToR 0 for rotor 1's shift +3, which it applies in even slots.
    #[test]
    fn a_frame_crosses_tor_rotor_tor_in_the_slot_the_schedule_gives() {
        const EPOCH: u64 = 7 * SLOT;
        let n = net(RotorRouting::Direct);
        let (now, clock) = shared_clock();
        let mut a = tor_daemon(0, Some(EPOCH), None, 0, clock());
        let mut b = tor_daemon(3, Some(EPOCH), None, 0, clock());
        let mut r = Daemon::new(
            RotorNode::new(
                MemIo::new(4, 64),
                &n,
                1,
                node_config(&["t0", "t1", "t2", "t3"], Some(EPOCH), 0),
            )
            .unwrap(),
            clock(),
            config("rotor1", None),
        );
        // Sent in slot 1 (odd: rotor 1 idle), half way through.
        let sent = EPOCH + SLOT + 500_000;
        now.set(sent);
        assert!(a.node().switch().io().inject(2, &frame(0, 3, mac(2))));
        a.step();
        assert_eq!(a.node().switch().core().queue_bytes(3), 1000);
        // Slot 2 opens at EPOCH + 2 SLOT + RECONF, 600 us from now: the
        // ToR sleeps until then; the rotor, with nothing timed, until a
        // frame arrives.
        let opening = EPOCH + 2 * SLOT + RECONF;
        assert_eq!(a.timeout_ns(), 600_000);
        assert_eq!(r.timeout_ns(), u64::MAX);
        // At the opening the frame starts on uplink 1; its last bit is on
        // the link one serialization (80 us) later, when it is handed out.
        now.set(opening);
        a.step();
        assert_eq!(a.timeout_ns(), SER);
        let due = opening + SER;
        now.set(due - 1);
        a.step();
        assert_eq!(a.node().io().take_sent(1).len(), 0, "still serializing");
        now.set(due);
        a.step();
        assert_eq!(
            a.node().io().take_sent(0).len(),
            0,
            "rotor 0 never links 0 to 3"
        );
        assert_eq!(carry(&mut a, 1, &mut r, 0), 1);
        r.step();
        // Through the circuit 0 -> 3 of slot 2, and nowhere else.
        for p in 0..3 {
            assert!(r.node().io().take_sent(p).is_empty(), "rotor port {p}");
        }
        assert_eq!(carry(&mut r, 3, &mut b, 1), 1);
        b.step();
        let got = b.node().io().take_sent(2);
        assert_eq!(got.len(), 1, "delivered to ToR 3's host at {due}");
        assert_eq!(got[0][..6], HOST_MAC);
        assert_eq!(got[0][6..12], mac(2), "from ToR 3's host port");
        assert_eq!(ttl(&got[0]), 62, "one hop per ToR");
        // What each daemon reports of it.
        let rs = status(&mut r);
        assert_eq!((rs.role.as_str(), rs.index, rs.slot), ("rotor", 1, 2));
        assert_eq!(rs.circuits, vec![Some(3), Some(0), Some(1), Some(2)]);
        assert_eq!((rs.counters["rx_frames"], rs.counters["tx_frames"]), (1, 1));
        let s = status(&mut a);
        assert_eq!(s.counters["sent_uplink"], 1);
        assert_eq!((s.ports[1].name.as_str(), s.ports[1].tx_frames), ("u1", 1));
        assert_eq!(status(&mut b).counters["delivered"], 1);
        // Shutdown returns every buffer to each pool.
        for d in [&mut a, &mut b] {
            let s = d.finish();
            assert_eq!(s.queued_bytes, 0);
            assert_eq!(d.node().io().free_frames(), 64);
        }
        r.finish();
        assert_eq!(r.node().io().free_frames(), 64);
    }

    /// The same crossing with the whole network in memory: every ToR
    /// uplink and rotor port a memory link, hosts on in-memory ports, six
    /// daemons stepped in turn as one event loop steps them. The frame
    /// reaches ToR 3's host at the same instant as when carried by hand.
    #[test]
    fn a_network_of_memory_links_delivers_in_the_slot_the_schedule_gives() {
        use lcmp_switch::frames::FrameShare;
        use lcmp_switch::linked_io::LinkedIo;
        use lcmp_switch::mem_link::{MemoryLinks, Transfer};

        const EPOCH: u64 = 7 * SLOT;
        let n = net(RotorRouting::Direct);
        let wiring = n.wiring().unwrap();
        let names: Vec<&str> = wiring.switches().iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["tor0", "tor1", "tor2", "tor3", "rotor0", "rotor1"]);
        let ifnames = |sw: &str, i: u8| {
            let role = n.role(sw).unwrap();
            n.port_names(role)[usize::from(i)].clone()
        };
        let mut links = MemoryLinks::build(&wiring, &names, 16, &ifnames).unwrap();
        assert_eq!(links.len(), 8, "4 ToRs x 2 rotors");
        let mut shares = FrameShare::split_area(&[64; 6]).unwrap().into_iter();
        let (now, clock) = shared_clock();
        let mut tors: Vec<Daemon<TorNode<LinkedIo<MemIo>>, Clock>> = (0..4)
            .map(|t| {
                // The host port is the in-memory I/O's only port.
                let io = MemIo::in_share(1, shares.next().unwrap());
                let io = LinkedIo::new(
                    io,
                    links.layout(&format!("tor{t}"), 3),
                    Transfer::Descriptor,
                )
                .unwrap();
                Daemon::new(
                    TorNode::new(
                        tor_over(io, t, &n, false),
                        node_config(&["u0", "u1", "h0"], Some(EPOCH), 0),
                    ),
                    clock(),
                    config(&format!("tor{t}"), None),
                )
            })
            .collect();
        let mut rotors: Vec<Daemon<RotorNode<LinkedIo<MemIo>>, Clock>> = (0..2)
            .map(|r| {
                let io = MemIo::in_share(0, shares.next().unwrap());
                let io = LinkedIo::new(
                    io,
                    links.layout(&format!("rotor{r}"), 4),
                    Transfer::Descriptor,
                )
                .unwrap();
                Daemon::new(
                    RotorNode::new(
                        io,
                        &n,
                        r,
                        node_config(&["t0", "t1", "t2", "t3"], Some(EPOCH), 0),
                    )
                    .unwrap(),
                    clock(),
                    config(&format!("rotor{r}"), None),
                )
            })
            .collect();
        // Steps every daemon until none has work at the time set.
        let step_all =
            |tors: &mut Vec<Daemon<TorNode<LinkedIo<MemIo>>, Clock>>,
             rotors: &mut Vec<Daemon<RotorNode<LinkedIo<MemIo>>, Clock>>| {
                for _ in 0..10 {
                    let work: usize = tors.iter_mut().map(|d| d.step()).sum::<usize>()
                        + rotors.iter_mut().map(|d| d.step()).sum::<usize>();
                    if work == 0 {
                        return;
                    }
                }
            };
        let sent = EPOCH + SLOT + 500_000;
        now.set(sent);
        assert!(tors[0]
            .node()
            .io()
            .inner_mut()
            .inject(0, &frame(0, 3, mac(2))));
        step_all(&mut tors, &mut rotors);
        let opening = EPOCH + 2 * SLOT + RECONF;
        let due = opening + SER;
        for t in [opening, due - 1] {
            now.set(t);
            step_all(&mut tors, &mut rotors);
            assert!(
                tors[3].node().io().inner_mut().take_sent(0).is_empty(),
                "at {t}"
            );
        }
        now.set(due);
        step_all(&mut tors, &mut rotors);
        let got = tors[3].node().io().inner_mut().take_sent(0);
        assert_eq!(got.len(), 1, "delivered to ToR 3's host at {due}");
        assert_eq!(ttl(&got[0]), 62, "one hop per ToR");
        // Rotor 1 carried it (ToR 0's uplink 1), rotor 0 nothing.
        let r1 = rotors[1].node().io().memory_link_stats(0).unwrap();
        assert_eq!((r1.peer.as_str(), r1.frames_received), ("tor0/u1", 1));
        let r0 = rotors[0].node().io().memory_link_stats(0).unwrap();
        assert_eq!(r0.frames_received, 0);
        for t in &mut tors {
            t.finish();
        }
        for r in &mut rotors {
            r.finish();
        }
        let free: usize = tors
            .iter_mut()
            .map(|d| d.node().io().inner().free_frames())
            .chain(
                rotors
                    .iter_mut()
                    .map(|d| d.node().io().inner().free_frames()),
            )
            .sum();
        assert_eq!(free, 6 * 64, "every buffer back in a pool");
    }
}

mod hostile_frames {
    use proptest::prelude::*;

    use super::*;

    /// A frame: random bytes, or a valid UDP frame between random hosts
    /// (some outside the network) with a random or valid circuit mark.
    fn frame_strategy() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..200),
            (
                0u8..6,
                0u8..6,
                any::<u8>(),
                any::<bool>(),
                2u8..=64,
                60usize..1500
            )
                .prop_map(|(s, d, target, marked, ttl, len)| {
                    let dst_mac = if marked {
                        lcmp_wire::rotor::target_mac(target)
                    } else {
                        mac(2)
                    };
                    FrameBuilder::ipv4([10, s, 0, 2], [10, d, 0, 2])
                        .macs(HOST_MAC, dst_mac)
                        .ttl(ttl)
                        .udp(4000, 5000)
                        .pad_to(len)
                        .build()
                }),
        ]
    }

    proptest! {
        /// Whatever arrives on any port at any time, a ToR and a rotor
        /// neither panic nor lose a buffer: every frame received is sent,
        /// dropped (counted) or still queued, and the pool is whole after
        /// the queues drain.
        #[test]
        fn tor_and_rotor_count_every_frame(
            steps in proptest::collection::vec(
                (0usize..3, frame_strategy(), 0u64..3 * SLOT),
                1..60,
            ),
            routing in prop_oneof![
                Just(RotorRouting::Direct),
                Just(RotorRouting::Valiant),
                Just(RotorRouting::Shift),
                Just(RotorRouting::ShiftValiant),
            ],
        ) {
            let n = net(routing);
            let mut t = tor(0, &n, true);
            let mut r = RotorSwitch::new(
                MemIo::new(4, 64),
                n.rotor_matchings(0),
                SlotClock { epoch_ns: 0, slot_ns: SLOT, reconfig_ns: RECONF },
            )
            .unwrap();
            let mut now = 0;
            let (mut injected, mut sent) = (0u64, 0u64);
            let (mut r_in, mut r_out) = (0u64, 0u64);
            for (port, bytes, dt) in &steps {
                now += dt;
                if t.io().inject(*port, bytes) {
                    injected += 1;
                }
                t.poll(now);
                for p in 0..3 {
                    for f in t.io().take_sent(p) {
                        sent += 1;
                        // What a ToR sends, a rotor takes on the matching
                        // port.
                        if r.io().inject(p, &f) {
                            r_in += 1;
                        }
                    }
                }
                if r.io().inject(3, bytes) {
                    r_in += 1;
                }
                r.poll(now);
                for p in 0..4 {
                    r_out += r.io().take_sent(p).len() as u64;
                }
            }
            let dropped: u64 = t.drops().map(|(_, n)| n).sum();
            let queued = (0..4).map(|h| t.core().queue_frames(h) as u64).sum::<u64>();
            prop_assert_eq!(injected, sent + dropped + queued);
            t.drain();
            prop_assert_eq!(t.io().free_frames(), 64);
            let c = r.counters();
            prop_assert_eq!(c.rx_frames, r_in);
            prop_assert_eq!(
                r_in,
                r_out + c.dropped_reconfiguring + c.dropped_no_circuit + c.dropped_tx_full
                    + c.dropped_no_epoch
            );
            prop_assert_eq!(r.io().free_frames(), 64);
        }
    }
}

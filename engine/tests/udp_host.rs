//! Two UDP hosts ([`lcmp_engine::udp_host`]) through a rotor network of 4
//! ToRs x 2 rotors on the virtual clock ([`lcmp_engine::rotor`]): frames
//! cross only in the slots whose matching connects the two ToRs, at the
//! instants and in the numbers worked out by hand below.

use std::net::Ipv4Addr;

use lcmp_engine::rotor::{RotorHostTraffic, RotorNet, RotorRun};
use lcmp_engine::udp_host::UdpSchedule;
use lcmp_topology::rotor;
use lcmp_topology::rotor_net::{RotorNetwork, RotorRouting};

const US: u64 = 1_000;
const MS: u64 = 1_000_000;
/// Delta and Delta_r.
const SLOT: u64 = MS;
const RECONF: u64 = 100 * US;
/// A ToR starts nothing on an uplink that ends later than this before
/// the slot does.
const GUARD: u64 = 20 * US;
/// Every frame, bytes: 80 us at the uplinks' 100 Mbit/s, 8 us at the
/// hosts' 1 Gbit/s NICs.
const FRAME: u32 = 1000;
const PORT: u16 = 7000;

/// 4 ToRs x 2 rotors, RotorNet's complete graph, direct routing, one host
/// per ToR, a 1 MB buffer per ToR (nothing is dropped here).
fn network() -> RotorNetwork {
    let mut n = RotorNetwork::from_schedule(&rotor::complete(4, 2).unwrap(), SLOT, RECONF);
    n.routing = Some(RotorRouting::Direct);
    n.tx_guard_ns = GUARD;
    n.rate_bps = 100_000_000;
    n.buffer_bytes = Some(1_000_000);
    n.hosts_per_tor = 1;
    // Rotor 0 applies shift +1 in even slots and +2 in odd ones; rotor 1
    // +3 in even slots and nothing (its fixed points) in odd ones. So ToR
    // 0 reaches ToR 1 only in even slots, through rotor 0.
    assert_eq!(
        n.rotor_matchings(0),
        vec![vec![1, 2, 3, 0], vec![2, 3, 0, 1]]
    );
    assert_eq!(
        n.rotor_matchings(1),
        vec![vec![3, 0, 1, 2], vec![0, 1, 2, 3]]
    );
    n
}

/// Host h0x0 (10.0.0.2) sends 1000-byte frames to h1x0 (10.1.0.2) from
/// `sports` in turn, one every `gap_ns` from time 0; h1x0 counts what
/// reaches port 7000 in `window`.
fn run(gap_ns: u64, sports: Vec<u16>, window: std::ops::Range<u64>) -> RotorNet {
    let mut rn = RotorNet::build(RotorRun {
        network: network(),
        traffic: vec![RotorHostTraffic {
            tor: 0,
            host: 0,
            send: UdpSchedule {
                dsts: vec![Ipv4Addr::new(10, 1, 0, 2)],
                dport: PORT,
                sports,
                frame_bytes: FRAME,
                start_ns: 0,
                gap_ns,
                frames: 1000,
            },
        }],
        nic_rate_bps: Some(1_000_000_000),
        listen_port: PORT,
        window_ns: window,
        ndp: None,
        trim: None,
    })
    .unwrap();
    rn.host(1, 0).unwrap().keep_arrivals(1000);
    rn
}

fn arrivals_us(rn: &mut RotorNet) -> Vec<u64> {
    let got = rn.host(1, 0).unwrap().arrivals().to_vec();
    for a in &got {
        assert_eq!((a.src, a.len), (Ipv4Addr::new(10, 0, 0, 2), FRAME));
        // Every arrival is in an even slot, after its reconfiguration and
        // one uplink serialization, and no later than the guard allows.
        let (slot, offset) = (a.at_ns / SLOT, a.at_ns % SLOT);
        assert_eq!(slot % 2, 0, "{a:?} in an odd slot");
        assert!((RECONF + 80 * US..=SLOT - GUARD).contains(&offset), "{a:?}");
    }
    got.iter().map(|a| a.at_ns / US).collect()
}

/// One frame every 250 us (32 Mbit/s): frame n is due at 250 n us and at
/// ToR 0 8 us later (the NIC's serialization). In an even slot's usable
/// part (100 to 980 us into it) the circuit to ToR 1 is up and a frame
/// crosses one uplink serialization (80 us) after it starts; otherwise it
/// waits for the next even slot's opening, and those waiting leave back to
/// back from there.
#[test]
fn frames_cross_at_the_slot_openings_worked_out_by_hand() {
    let mut rn = run(250 * US, vec![40000], 2300 * US..4600 * US);
    rn.run_until(5 * MS);
    let expected = vec![
        // Slot 0 (open from 100 us): frame 0 (at ToR 0 at 8 us) starts at
        // the opening, 180; frames 1-3 (258, 508, 758) at once: 338, 588,
        // 838.
        180, 338, 588, 838,
        // Slot 1 (odd): frames 4-7 (1008 .. 1758) wait; frame 8 (2008)
        // arrives in slot 2's reconfiguration. Slot 2 opens at 2100: frames
        // 4-8 back to back, 2180 .. 2500; frame 9 (2258) behind them, 2580;
        // frame 10 (2508) starts when 9 ends, 2660; frame 11 (2758) at
        // once, 2838.
        2180, 2260, 2340, 2420, 2500, 2580, 2660, 2838,
        // Slot 3 (odd): frames 12-15 wait, frame 16 (4008) too; slot 4 as
        // slot 2, 2 ms later.
        4180, 4260, 4340, 4420, 4500, 4580, 4660, 4838,
    ];
    assert_eq!(arrivals_us(&mut rn), expected);
    let b = rn.host(1, 0).unwrap().stats();
    // The window [2.3 ms, 4.6 ms): 2340 .. 2838 (6) and 4180 .. 4580 (6).
    assert_eq!(
        (b.received, b.window_frames, b.window_bytes),
        (20, 12, 12_000)
    );
    assert_eq!(b.other, 0);
    // Frames 0-20 are due at 0 .. 5000 us: 21 sent by 5 ms inclusive
    // (frame 20 still in the NIC), none lost.
    let a = rn.host(0, 0).unwrap().stats();
    assert_eq!((a.frames_sent, a.send_errors, a.received), (21, 0, 0));
}

/// One frame every 50 us (160 Mbit/s, above what the circuit carries): the
/// queue for ToR 1 never empties, so each even slot carries as many frames
/// as fit between its opening and the guard: 100 + 80 k <= 980 - 80, k =
/// 0..10, eleven frames crossing at 180, 260, .. 980 us into the slot.
#[test]
fn a_saturated_circuit_delivers_what_a_slot_holds_and_the_window_counts_it() {
    let mut rn = run(50 * US, vec![40000, 40001], 2500 * US..6500 * US);
    rn.run_until(8 * MS);
    let got = arrivals_us(&mut rn);
    let expected: Vec<u64> = [0, 2000, 4000, 6000]
        .into_iter()
        .flat_map(|slot| (0..11).map(move |k| slot + 180 + 80 * k))
        .collect();
    assert_eq!(got, expected);
    // In order: frame i from port 40000 + i % 2, sequence number i / 2,
    // sent at 50 i us.
    let first: Vec<(u16, u64, u64)> = rn.host(1, 0).unwrap().arrivals()[..3]
        .iter()
        .map(|a| (a.sport, a.seq, a.sent_ns))
        .collect();
    assert_eq!(
        first,
        vec![(40000, 0, 0), (40001, 0, 50 * US), (40000, 1, 100 * US)]
    );
    // The window [2.5 ms, 6.5 ms): slot 2 from 2500 (k = 4..10: 7), slot
    // 4 whole (11), slot 6 up to 6420 (k = 0..3: 4): 22 frames.
    let b = rn.host(1, 0).unwrap().stats();
    assert_eq!((b.window_frames, b.window_bytes), (22, 22_000));
    // 161 frames due by 8 ms inclusive (0 .. 8000 us), all taken by the
    // NIC; the last reaches ToR 0 only at 8008 us.
    let a = rn.host(0, 0).unwrap().stats();
    assert_eq!((a.frames_sent, a.send_errors), (161, 0));
    // The switches agree: ToR 0 queued 160 and sent 44, deferring
    // the head once in each even slot; rotor 0 carried the 44, rotor 1
    // nothing; ToR 1 delivered them. Nothing dropped.
    let status = rn.switch_status().unwrap();
    let get = |name: &str| &status.iter().find(|(n, _)| n == name).unwrap().1;
    let tor0 = &get("tor0").counters;
    assert_eq!(
        (
            tor0["queued"],
            tor0["sent_uplink"],
            tor0["deferred_slot_end"]
        ),
        (160, 44, 4)
    );
    assert_eq!(get("tor1").counters["delivered"], 44);
    assert_eq!(get("rotor0").counters["tx_frames"], 44);
    assert_eq!(get("rotor1").counters["tx_frames"], 0);
    for (name, s) in &status {
        assert!(s.drops.values().all(|&d| d == 0), "{name}: {:?}", s.drops);
    }
    rn.finish().unwrap();
}

/// A frame longer than a buffer, or a sender that is no host of the
/// network, is refused in one line.
#[test]
fn bad_frames_are_refused_in_one_line() {
    let r = RotorRun {
        network: network(),
        traffic: vec![RotorHostTraffic {
            tor: 0,
            host: 0,
            send: UdpSchedule {
                dsts: vec![Ipv4Addr::new(10, 1, 0, 2)],
                dport: PORT,
                sports: vec![40000],
                frame_bytes: 4000,
                start_ns: 0,
                gap_ns: US,
                frames: 1,
            },
        }],
        nic_rate_bps: None,
        listen_port: PORT,
        window_ns: 0..1,
        ndp: None,
        trim: None,
    };
    let traffic = r.traffic.clone();
    let err = RotorNet::build(r).err().unwrap();
    assert!(err.contains("frames of 4000 bytes"), "{err}");
    assert!(!err.contains('\n'));
    let mut r = RotorRun {
        network: network(),
        traffic,
        nic_rate_bps: None,
        listen_port: PORT,
        window_ns: 0..1,
        ndp: None,
        trim: None,
    };
    r.traffic[0].tor = 9;
    let err = RotorNet::build(r).err().unwrap();
    assert!(err.contains("not one of the network's 4 ToRs"), "{err}");
}

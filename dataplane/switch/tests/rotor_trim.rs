//! NDP trimming in the rotor-aware ToR (issue 27, item 1) over in-memory
//! ports with a fake clock: a next hop's data queue stays at K, NDP data
//! past it is cut to its headers and leaves first, other frames past K are
//! dropped, control packets bypass the data queue, headers fit slot ends
//! full frames do not, the host downlink serializes at the host rate and
//! trims, and with trimming off nothing changes.
//!
//! The network is `rotor_net.rs`'s: 4 ToRs x 2 rotors, complete graph;
//! rotor 0 cycles shifts +1 (even slots) and +2 (odd slots), rotor 1 shift
//! +3 (even slots), idle (odd). Slots of 1 ms, the first 100 us
//! reconfiguring, no guard, 100 Mbit/s on every link: a 1000-byte frame
//! takes 80 us, a trimmed one (58 bytes: Ethernet, IPv4, UDP, NDP headers)
//! 4.64 us. ToR 0 reaches ToR 2 on uplink 0 in odd slots: slot 1 opens at
//! 1.1 ms.

use lcmp_switch::mem_io::MemIo;
use lcmp_switch::rotor_tor::TrimSettings;
use lcmp_switch::tor_path::{target_mac, TorConfig, TorSwitch};
use lcmp_topology::rotor;
use lcmp_topology::rotor_net::{RotorNetwork, RotorRouting};
use lcmp_wire::ndp::{self, Header, Kind, HEADERS_LEN};
use lcmp_wire::testing::FrameBuilder;

const SLOT: u64 = 1_000_000;
const RECONF: u64 = 100_000;
/// A 1000-byte frame at 100 Mbit/s.
const SER: u64 = 80_000;
/// A 58-byte header at 100 Mbit/s.
const HSER: u64 = 4_640;
/// Slot 1, ToR 0's first with a circuit to ToR 2, opens.
const OPEN: u64 = SLOT + RECONF;
const HOST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x11];
const HOST_PORT: usize = 2;

fn mac(port: usize) -> [u8; 6] {
    [0x02, 0xaa, 0, 0, 0, port as u8]
}

fn net(buffer: u64) -> RotorNetwork {
    let mut n = RotorNetwork::from_schedule(&rotor::complete(4, 2).unwrap(), SLOT, RECONF);
    n.routing = Some(RotorRouting::Direct);
    n.tx_guard_ns = 0;
    n.buffer_bytes = Some(buffer);
    n
}

/// ToR `t` of `net` (ports: uplinks 0 and 1, host port 2), trimming at
/// `trim` (`None`: the default, `set_trimming` not called).
fn tor(t: u32, net: &RotorNetwork, trim: Option<TrimSettings>) -> TorSwitch<MemIo> {
    let mut sw = TorSwitch::new(
        MemIo::new(3, 256),
        TorConfig::for_network(
            net,
            t,
            (0..3).map(mac).collect(),
            vec![Some(HOST_MAC)],
            0,
            7,
        )
        .unwrap(),
        true,
    )
    .unwrap();
    if trim.is_some() {
        sw.set_trimming(trim).unwrap();
    }
    sw
}

/// An NDP packet of `len` bytes from host (s, 0) to host (d, 0), TTL 64.
fn ndp_frame(s: u8, d: u8, kind: Kind, flags: u8, seq: u32, len: usize) -> Vec<u8> {
    let mut payload = Header {
        kind,
        flags,
        flow: 7,
        seq,
        value: 100,
    }
    .to_bytes()
    .to_vec();
    payload.resize(len - 42, 0xab);
    let f = FrameBuilder::ipv4([10, s, 0, 2], [10, d, 0, 2])
        .macs(HOST_MAC, mac(HOST_PORT))
        .udp(40_000, ndp::UDP_PORT)
        .payload(&payload)
        .build();
    assert_eq!(f.len(), len);
    f
}

/// A 1000-byte NDP data packet, number `seq`, from ToR 0's host to ToR
/// `d`'s.
fn data(d: u8, seq: u32) -> Vec<u8> {
    ndp_frame(0, d, Kind::Data, 0, seq, 1000)
}

/// A 1000-byte UDP frame that is not NDP, from ToR 0's host to ToR `d`'s.
fn plain(d: u8, seq: u8) -> Vec<u8> {
    FrameBuilder::ipv4([10, 0, 0, 2], [10, d, 0, 2])
        .macs(HOST_MAC, mac(HOST_PORT))
        .udp(4000, 5000)
        .payload(&[seq])
        .pad_to(1000)
        .build()
}

/// `f` as arriving on an uplink, marked for ToR `t`.
fn marked(mut f: Vec<u8>, t: u8) -> Vec<u8> {
    f[..6].copy_from_slice(&target_mac(t));
    f
}

fn ttl(f: &[u8]) -> u8 {
    f[14 + 8]
}

/// The NDP header of `f`: (kind, sequence number, trimmed).
fn ndp_of(f: &[u8]) -> (Kind, u32, bool) {
    let h = ndp::header_of(f).unwrap();
    (h.kind, h.seq, h.trimmed())
}

fn drops(t: &TorSwitch<MemIo>) -> Vec<(&'static str, u64)> {
    t.drops()
        .filter(|(_, n)| *n > 0)
        .map(|(r, n)| (r.name(), n))
        .collect()
}

fn counter(t: &TorSwitch<MemIo>, name: &str) -> u64 {
    t.trim_counters()
        .into_iter()
        .find(|(k, _)| *k == name)
        .unwrap()
        .1
}

#[test]
fn trimming_keeps_a_queue_at_k_and_the_headers_leave_first() {
    let n = net(100_000);
    let mut t = tor(0, &n, Some(TrimSettings::new(4)));
    // K + 5 = 9 NDP data packets for ToR 2 in slot 0, when ToR 0 reaches
    // ToRs 1 and 3 only.
    for seq in 0..9 {
        assert!(t.io().inject(HOST_PORT, &data(2, seq)));
    }
    t.poll(RECONF);
    assert!(t.io().take_sent(0).is_empty() && t.io().take_sent(1).is_empty());
    let core = t.core();
    assert_eq!((core.data_frames(2), core.priority_frames(2)), (4, 5));
    assert_eq!(core.queue_bytes(2), 4 * 1000 + 5 * HEADERS_LEN as u64);
    assert_eq!(t.counters().trimmed, 5);
    assert_eq!(drops(&t), vec![]);
    // Slot 1 opens at 1.1 ms: the five headers leave first, one every
    // 4.64 us (1.10464 .. 1.1232 ms), then the four whole packets, one
    // every 80 us (1.2032 .. 1.4432 ms).
    let mut want: Vec<(u64, u32, bool)> = (0..5u64)
        .map(|k| (OPEN + (k + 1) * HSER, 4 + k as u32, true))
        .collect();
    want.extend((0..4u64).map(|j| (OPEN + 5 * HSER + (j + 1) * SER, j as u32, false)));
    for (at, seq, trimmed) in want {
        t.poll(at - 1);
        assert!(t.io().take_sent(0).is_empty(), "nothing before {at}");
        t.poll(at);
        let sent = t.io().take_sent(0);
        assert_eq!(sent.len(), 1, "one frame at {at}");
        let f = &sent[0];
        assert_eq!(ndp_of(f), (Kind::Data, seq, trimmed), "at {at}");
        assert_eq!(f.len(), if trimmed { HEADERS_LEN } else { 1000 });
        assert_eq!(f[..6], target_mac(2), "marked for ToR 2");
        assert_eq!(f[6..12], lcmp_switch::tor_path::send_stamp(at));
        assert_eq!(ttl(f), 63);
        assert!(lcmp_wire::testing::ipv4_header_checksum_ok(f).unwrap());
        // The IPv4 length says what is left.
        let ip_len = u16::from_be_bytes([f[16], f[17]]) as usize;
        assert_eq!(ip_len, f.len() - 14);
    }
    assert!(t.io().take_sent(1).is_empty(), "rotor 1 idles in odd slots");
    assert_eq!(t.core().total_bytes(), 0);
    let c = t.core().counters();
    assert_eq!((c.queued, c.priority_queued), (9, 5));
    assert_eq!((c.sent, c.priority_sent), (9, 5));
    assert_eq!(counter(&t, "trimmed"), 5);
    assert_eq!(counter(&t, "sent_priority_uplink"), 5);
    assert_eq!(t.traffic()[0].tx_bytes, 4 * 1000 + 5 * HEADERS_LEN as u64);
}

#[test]
fn frames_other_than_ndp_data_past_k_are_dropped() {
    let n = net(100_000);
    let mut t = tor(0, &n, Some(TrimSettings::new(4)));
    for i in 0..6 {
        assert!(t.io().inject(HOST_PORT, &plain(2, i)));
    }
    // The queue is at K: an NDP data packet now is trimmed, not dropped.
    assert!(t.io().inject(HOST_PORT, &data(2, 0)));
    t.poll(RECONF);
    assert_eq!(drops(&t), vec![("data_queue_full", 2)]);
    assert_eq!(
        t.core().counters().dropped_data_full,
        2,
        "trimmed is not dropped"
    );
    assert_eq!(t.counters().trimmed, 1);
    let core = t.core();
    assert_eq!((core.data_frames(2), core.priority_frames(2)), (4, 1));
    // The header at 1.10464 ms, then the four kept at 80 us each.
    t.poll(OPEN + HSER + 4 * SER);
    let sent = t.io().take_sent(0);
    assert_eq!(sent.len(), 5);
    assert_eq!(sent[0].len(), HEADERS_LEN);
    let kept: Vec<u8> = sent[1..].iter().map(|f| f[42]).collect();
    assert_eq!(kept, vec![0, 1, 2, 3], "the first four, in order");
    // The trimming reasons are reported while trimming is on.
    assert_eq!(t.drops().count(), 14);
}

#[test]
fn ndp_data_the_shared_buffer_refuses_is_trimmed_too() {
    // Buffer 10,500 bytes, K = 16: ten whole packets fill 10,000 and the
    // eleventh would pass 10,500, so the other ten are trimmed. Their
    // headers (58 bytes each) do not count against the shared buffer,
    // which bounds data only while trimming: they fit the high-priority
    // queue's own 16 x 1,500 bytes, and nothing is dropped.
    let n = net(10_500);
    let mut t = tor(0, &n, Some(TrimSettings::new(16)));
    for seq in 0..20 {
        assert!(t.io().inject(HOST_PORT, &data(2, seq)));
    }
    t.poll(RECONF);
    let core = t.core();
    assert_eq!((core.data_frames(2), core.priority_frames(2)), (10, 10));
    assert_eq!(core.total_bytes(), 10_580);
    assert_eq!(t.counters().trimmed, 10);
    assert_eq!(drops(&t), Vec::<(&str, u64)>::new());
}

#[test]
fn control_packets_and_trimmed_headers_bypass_the_data_queue() {
    let n = net(100_000);
    let mut t = tor(0, &n, Some(TrimSettings::new(4)));
    let upstream_trimmed = {
        let mut f = data(2, 9);
        let len = ndp::trim(&mut f).unwrap();
        f.truncate(len);
        f
    };
    let frames = [
        data(2, 0),
        data(2, 1),
        ndp_frame(0, 2, Kind::Pull, 0, 0, HEADERS_LEN),
        ndp_frame(0, 2, Kind::Ack, 0, 1, HEADERS_LEN),
        ndp_frame(0, 2, Kind::Nack, 0, 2, HEADERS_LEN),
        upstream_trimmed,
        data(2, 2),
        data(2, 3),
        // The data queue is at K now; a pull still goes.
        ndp_frame(0, 2, Kind::Pull, 0, 3, HEADERS_LEN),
    ];
    for f in &frames {
        assert!(t.io().inject(HOST_PORT, f));
    }
    t.poll(RECONF);
    let core = t.core();
    assert_eq!((core.data_frames(2), core.priority_frames(2)), (4, 5));
    assert_eq!(t.counters().trimmed, 0, "nothing was cut");
    assert_eq!(drops(&t), vec![]);
    // The five high-priority frames are out by 1.1232 ms, before any data.
    t.poll(OPEN + 5 * HSER - 1);
    assert_eq!(t.io().take_sent(0).len(), 4);
    t.poll(OPEN + 5 * HSER);
    let mut sent = t.io().take_sent(0);
    assert_eq!(sent.len(), 1);
    t.poll(OPEN + 5 * HSER + SER - 1);
    assert!(t.io().take_sent(0).is_empty());
    t.poll(OPEN + 5 * HSER + 4 * SER);
    sent.extend(t.io().take_sent(0));
    let order: Vec<(Kind, u32, bool)> = sent.iter().map(|f| ndp_of(f)).collect();
    assert_eq!(
        order,
        vec![
            (Kind::Pull, 3, false),
            (Kind::Data, 0, false),
            (Kind::Data, 1, false),
            (Kind::Data, 2, false),
            (Kind::Data, 3, false),
        ]
    );
    // The high-priority queue's bound: 3 headers' bytes, the fourth pull
    // is dropped.
    let mut b = tor(
        0,
        &n,
        Some(TrimSettings {
            data_packets: 4,
            priority_bytes: 3 * HEADERS_LEN as u64,
        }),
    );
    for seq in 0..4 {
        assert!(b
            .io()
            .inject(HOST_PORT, &ndp_frame(0, 2, Kind::Pull, 0, seq, HEADERS_LEN)));
    }
    b.poll(RECONF);
    assert_eq!(b.core().priority_frames(2), 3);
    assert_eq!(drops(&b), vec![("priority_queue_full", 1)]);
}

#[test]
fn a_header_fits_a_slot_end_that_a_full_frame_does_not() {
    let n = net(100_000);
    let mut t = tor(0, &n, Some(TrimSettings::new(16)));
    for seq in 0..12 {
        assert!(t.io().inject(HOST_PORT, &data(2, seq)));
    }
    t.poll(RECONF);
    // Slot 1 carries eleven (1.1 + 11 x 0.08 = 1.98 ms); the twelfth would
    // end at 2.06 ms, past the slot's end.
    t.poll(OPEN + 11 * SER);
    assert_eq!(t.io().take_sent(0).len(), 11);
    assert_eq!(t.core().counters().deferred_slot_end, 1);
    // A pull at 1.99 ms ends at 1.99464 ms: inside the slot.
    let pull_at = 2 * SLOT - 10_000;
    assert!(t
        .io()
        .inject(HOST_PORT, &ndp_frame(0, 2, Kind::Pull, 0, 0, HEADERS_LEN)));
    t.poll(pull_at);
    assert_eq!(t.next_deadline(), pull_at + HSER);
    t.poll(pull_at + HSER - 1);
    assert!(t.io().take_sent(0).is_empty());
    t.poll(pull_at + HSER);
    let sent = t.io().take_sent(0);
    assert_eq!(sent.len(), 1);
    assert_eq!(ndp_of(&sent[0]).0, Kind::Pull);
    // The twelfth waits for slot 3 (ToR 2's next): 3.1 ms + 80 us.
    t.poll(3 * SLOT + RECONF + SER - 1);
    assert!(t.io().take_sent(0).is_empty());
    t.poll(3 * SLOT + RECONF + SER);
    let sent = t.io().take_sent(0);
    assert_eq!(sent.len(), 1);
    assert_eq!(ndp_of(&sent[0]), (Kind::Data, 11, false));
}

#[test]
fn a_downlink_serializes_at_the_host_rate_and_trims_past_k() {
    let n = net(100_000);
    // ToR 2 receives on uplink 0 for its host.
    let mut t = tor(2, &n, Some(TrimSettings::new(4)));
    let t0 = 50_000;
    assert!(t.io().inject(0, &marked(data(2, 0), 2)));
    t.poll(t0);
    assert!(t.io().take_sent(HOST_PORT).is_empty(), "serializing");
    assert_eq!(t.next_deadline(), t0 + SER);
    // Six more 10 us later: packet 0 is still on the link and in the
    // queue, so 1, 2 and 3 fill it to K and 4, 5 and 6 are trimmed.
    let t1 = t0 + 10_000;
    for seq in 1..7 {
        assert!(t.io().inject(0, &marked(data(2, seq), 2)));
    }
    t.poll(t1);
    let d = t.downlink(0).unwrap();
    assert_eq!((d.data_frames(), d.priority_frames()), (4, 3));
    assert_eq!(t.counters().trimmed_downlink, 3);
    // 0 at 130 us; the headers next, 4.64 us each (134.64, 139.28,
    // 143.92 us); then 1, 2, 3 at 80 us each (223.92, 303.92, 383.92 us).
    let want = [
        (t0 + SER, 0, false),
        (t0 + SER + HSER, 4, true),
        (t0 + SER + 2 * HSER, 5, true),
        (t0 + SER + 3 * HSER, 6, true),
        (t0 + 2 * SER + 3 * HSER, 1, false),
        (t0 + 3 * SER + 3 * HSER, 2, false),
        (t0 + 4 * SER + 3 * HSER, 3, false),
    ];
    for (at, seq, trimmed) in want {
        assert_eq!(t.next_deadline(), at);
        t.poll(at - 1);
        assert!(
            t.io().take_sent(HOST_PORT).is_empty(),
            "nothing before {at}"
        );
        t.poll(at);
        let sent = t.io().take_sent(HOST_PORT);
        assert_eq!(sent.len(), 1, "one frame at {at}");
        let f = &sent[0];
        assert_eq!(ndp_of(f), (Kind::Data, seq, trimmed), "at {at}");
        assert_eq!(f.len(), if trimmed { HEADERS_LEN } else { 1000 });
        assert_eq!(f[..6], HOST_MAC);
        assert_eq!(f[6..12], mac(HOST_PORT));
        assert_eq!(ttl(f), 63);
        assert!(lcmp_wire::testing::ipv4_header_checksum_ok(f).unwrap());
    }
    assert_eq!(t.next_deadline(), u64::MAX, "nothing left");
    assert_eq!(t.counters().delivered, 7);
    assert_eq!(t.traffic()[HOST_PORT].tx_bytes, 4 * 1000 + 3 * 58);
    assert_eq!(counter(&t, "sent_priority_downlink"), 3);
    assert_eq!(counter(&t, "trimmed_downlink"), 3);
    // Five frames that are not NDP: four queued, one dropped; a late poll
    // at the fourth's end hands all four out (three of them late).
    let t2 = 400_000;
    for i in 0..5 {
        assert!(t.io().inject(0, &marked(plain(2, i), 2)));
    }
    t.poll(t2);
    assert_eq!(drops(&t), vec![("downlink_data_queue_full", 1)]);
    t.poll(t2 + 4 * SER);
    assert_eq!(t.io().take_sent(HOST_PORT).len(), 4);
    assert_eq!(t.downlink(0).unwrap().counters().late_frames, 3);
    assert_eq!(t.downlink(0).unwrap().bytes(), 0);
}

#[test]
fn with_trimming_off_the_numbers_are_as_before() {
    // rotor_net.rs's first test, off by default and turned off after on:
    // ToR 0 to ToR 2 leaves at 1.1 ms + 80 us.
    let n = net(10_000);
    for turned_off in [false, true] {
        let mut t = if turned_off {
            let mut t = tor(0, &n, Some(TrimSettings::new(4)));
            t.set_trimming(None).unwrap();
            assert!(t.downlink(0).is_none());
            t
        } else {
            tor(0, &n, None)
        };
        assert!(t.io().inject(HOST_PORT, &plain(2, 0)));
        t.poll(RECONF + SER);
        assert!(t.io().take_sent(0).is_empty());
        assert_eq!(t.core().queue_bytes(2), 1000);
        t.poll(OPEN + SER - 1);
        assert!(t.io().take_sent(0).is_empty());
        t.poll(OPEN + SER);
        assert_eq!(t.io().take_sent(0).len(), 1);
    }
    // Nine NDP data packets, as in the first test above: none trimmed, no
    // high-priority queue, 80 us apart from 1.18 ms; the buffer (10 kB)
    // drops none.
    let mut t = tor(0, &n, None);
    for seq in 0..9 {
        assert!(t.io().inject(HOST_PORT, &data(2, seq)));
    }
    t.poll(RECONF);
    assert_eq!(
        (t.core().data_frames(2), t.core().priority_frames(2)),
        (9, 0)
    );
    for j in 0..9u64 {
        t.poll(OPEN + (j + 1) * SER - 1);
        assert!(t.io().take_sent(0).is_empty());
        t.poll(OPEN + (j + 1) * SER);
        let sent = t.io().take_sent(0);
        assert_eq!(sent.len(), 1);
        assert_eq!(ndp_of(&sent[0]), (Kind::Data, j as u32, false));
        assert_eq!(sent[0].len(), 1000);
    }
    // Local delivery at once, no downlink; the drop reasons and counters
    // of trimming are not reported.
    assert!(t.io().inject(HOST_PORT, &data(0, 0)));
    t.poll(2 * SLOT);
    assert_eq!(t.io().take_sent(HOST_PORT).len(), 1);
    assert!(t.downlink(0).is_none());
    assert_eq!(t.drops().count(), 10);
    assert!(t.trim_counters().is_empty());
    assert_eq!(t.counters().trimmed, 0);
}

#[test]
fn below_k_trimming_changes_no_uplink_timing() {
    // The same frames through a ToR with trimming off and one with K = 8:
    // what leaves, when, byte for byte, while no queue reaches K.
    let n = net(100_000);
    let mut off = tor(0, &n, None);
    let mut on = tor(0, &n, Some(TrimSettings::new(8)));
    let mut outputs = [Vec::new(), Vec::new()];
    for (i, t) in [&mut off, &mut on].into_iter().enumerate() {
        for k in 0..6u8 {
            let f = if k % 2 == 0 {
                plain(1 + k % 3, k)
            } else {
                data(1 + k % 3, u32::from(k))
            };
            assert!(t.io().inject(HOST_PORT, &f));
        }
        for step in 0..60u64 {
            let now = step * 50_000;
            t.poll(now);
            for port in 0..2 {
                for f in t.io().take_sent(port) {
                    outputs[i].push((now, port, f));
                }
            }
        }
    }
    assert_eq!(outputs[0].len(), 6);
    assert_eq!(outputs[0], outputs[1]);
}

#[test]
fn trimming_changes_only_while_nothing_is_held() {
    let n = net(100_000);
    let mut t = tor(0, &n, None);
    assert!(t.io().inject(HOST_PORT, &data(2, 0)));
    t.poll(RECONF);
    assert!(t.set_trimming(Some(TrimSettings::new(8))).is_err());
    assert_eq!(t.trimming(), None);
    assert!(t
        .set_trimming(Some(TrimSettings {
            data_packets: 0,
            priority_bytes: 1
        }))
        .is_err());
    // Drained at shutdown, counted, every buffer back.
    let mut u = tor(2, &n, Some(TrimSettings::new(2)));
    for seq in 0..4 {
        assert!(u.io().inject(0, &marked(data(2, seq), 2)));
    }
    u.poll(0);
    u.drain();
    let shutdown = u
        .drops()
        .find(|(r, _)| r.name() == "shutdown")
        .map(|(_, n)| n);
    assert_eq!(shutdown, Some(4));
    assert_eq!(u.io().free_frames(), 256);
}

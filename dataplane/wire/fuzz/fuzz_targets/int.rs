//! The INT block: arbitrary bytes as a hop (the first 16) and an Ethernet
//! frame (the rest) given to `push_hop`, and as a bare block given to
//! `IntBlock::parse`. No panic; a refused or non-INT frame is unchanged; a
//! push changes exactly nhop, one slot and the UDP checksum (or the
//! OVERFLOW flag and the checksum) and reads back; an echo of any parsed
//! block reads back as the same hops, time and flag.
#![no_main]

use lcmp_wire::int::{INT_FLAG_OVERFLOW, INT_HEADER_LEN, INT_HOP_LEN};
use lcmp_wire::{push_hop, IntBlock, IntHop, PushOutcome};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((hop, frame)) = data.split_first_chunk::<INT_HOP_LEN>() else {
        return;
    };
    let hop = IntHop::from_bytes(hop);
    check_block(frame);
    let mut f = frame.to_vec();
    let out = push_hop(&mut f, hop);
    let (Ok(PushOutcome::Pushed) | Ok(PushOutcome::Overflow)) = out else {
        assert_eq!(f, frame, "{out:?} changes nothing");
        return;
    };
    // push_hop accepted it: IPv4 header of IHL words, UDP, then the BTH.
    let udp = 14 + usize::from(frame[14] & 0x0f) * 4;
    let block = udp + 8 + 12;
    let (capacity, nhop, flags) = (frame[block + 1], frame[block + 2], frame[block + 3]);
    let mut want = frame.to_vec();
    want[udp + 6..udp + 8].copy_from_slice(&[0, 0]);
    if out == Ok(PushOutcome::Pushed) {
        assert!(nhop < capacity);
        want[block + 2] = nhop + 1;
        let slot = block + INT_HEADER_LEN + INT_HOP_LEN * usize::from(nhop);
        want[slot..slot + INT_HOP_LEN].copy_from_slice(&hop.to_bytes());
        let b = IntBlock::in_udp_payload(&f[udp + 8..]).expect("a pushed block parses");
        assert_eq!(b.and_then(|b| b.hops().last()), Some(hop));
    } else {
        assert!(nhop >= capacity);
        if flags & INT_FLAG_OVERFLOW != 0 {
            // Already flagged: nothing at all to write.
            want = frame.to_vec();
        }
        want[block + 3] = flags | INT_FLAG_OVERFLOW;
    }
    assert_eq!(f, want);
});

fn check_block(bytes: &[u8]) {
    let Ok(b) = IntBlock::parse(bytes) else {
        return;
    };
    assert!(b.len() <= bytes.len());
    let mut out = [0u8; 300];
    let n = b.echo_into(&mut out).expect("an echo fits 260 bytes");
    let echo = IntBlock::parse(&out[..n]).expect("an echo parses");
    assert!(echo.hops().eq(b.hops()));
    assert_eq!(echo.timestamp(), b.timestamp());
    assert_eq!(echo.overflow(), b.overflow());
}

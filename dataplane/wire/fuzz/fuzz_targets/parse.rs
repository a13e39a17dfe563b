//! Parses arbitrary bytes as a frame; if accepted, marks CE and forwards it,
//! checking that the IPv4 header checksum stays valid and the frame still
//! parses to the same flow.
#![no_main]

use lcmp_wire::testing::ipv4_header_checksum_ok;
use lcmp_wire::{forward_rewrite, mark_ce, parse, ParseError, L3};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(parsed) = parse(data) else {
        return;
    };
    assert!(parsed.ttl >= 2);
    assert!(parsed.frame_len_unpadded() <= data.len());

    let mut frame = data.to_vec();
    mark_ce(&mut frame, &parsed).expect("mark_ce on an accepted frame");
    forward_rewrite(
        &mut frame,
        &parsed,
        [0x02, 0, 0, 0, 0, 1],
        [0x02, 0, 0, 0, 0, 2],
    )
    .expect("forward_rewrite on an accepted frame");
    if parsed.l3 == L3::V4 {
        assert_eq!(ipv4_header_checksum_ok(&frame), Some(true));
    }
    match parse(&frame) {
        Ok(after) => {
            assert_eq!(after.flow, parsed.flow);
            assert_eq!(after.ttl, parsed.ttl - 1);
        }
        Err(e) => assert_eq!((e, parsed.ttl), (ParseError::TtlExpired, 2)),
    }
});

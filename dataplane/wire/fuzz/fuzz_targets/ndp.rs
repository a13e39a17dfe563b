//! Reads arbitrary bytes as an NDP frame and trims it: no panic, and a
//! trimmed frame is a valid IPv4/UDP datagram of the headers alone that
//! reads back as the same packet, flagged trimmed.
#![no_main]

use lcmp_wire::ndp::{header_of, trim, HEADERS_LEN};
use lcmp_wire::testing::ipv4_header_checksum_ok;
use lcmp_wire::parse;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let before = header_of(data);
    let mut frame = data.to_vec();
    let Ok(n) = trim(&mut frame) else {
        assert_eq!(frame, data, "a refused trim changes nothing");
        return;
    };
    assert_eq!(n, HEADERS_LEN);
    let after = header_of(&frame[..n]).expect("a trimmed frame is NDP");
    let before = before.expect("only NDP frames are trimmed");
    assert!(after.trimmed() && !before.trimmed());
    assert_eq!((after.flow, after.seq, after.value), (before.flow, before.seq, before.value));
    assert_eq!(ipv4_header_checksum_ok(&frame[..n]), Some(true));
    if let Ok(p) = parse(&frame[..n]) {
        assert_eq!(p.ip_total_len + 14, n);
    }
});

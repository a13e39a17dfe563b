//! IEEE 802.1Qbb priority flow control (PFC) frames: a MAC control frame
//! that asks the link peer to stop sending on some of its eight priorities
//! for a while (pause) or to start again at once (time 0, often called
//! XON or resume).
//!
//! Layout (untagged, no FCS, as everywhere in this crate):
//!
//! ```text
//!  0  destination 01:80:c2:00:00:01 (the MAC control multicast)
//!  6  source MAC of the sending port
//! 12  EtherType 0x8808 (MAC control)
//! 14  opcode 0x0101 (PFC)
//! 16  priority-enable vector: bit p set = the time of priority p is valid
//!     (the high octet is reserved, sent as 0)
//! 18  eight 16-bit times, priority 0 first, in quanta of 512 bit times
//! 34  zero padding to the 60-byte minimum frame
//! ```
//!
//! The 802.3x PAUSE frame shares the destination, the EtherType and the
//! layout up to the opcode (0x0001, one time for the whole link); the
//! parser names it apart ([`PfcError::Pause`]) so that a switch can count
//! it rather than mistake it for a broken frame.
//!
//! Like the rest of the crate: no panics on any bytes, no allocation.

use core::fmt;

use crate::ethernet::{self, MacAddr};

/// Destination MAC of PFC and PAUSE frames: the reserved multicast that
/// bridges never forward (802.1Q table 8-1).
pub const DST_MAC: MacAddr = [0x01, 0x80, 0xc2, 0x00, 0x00, 0x01];
/// EtherType of MAC control frames (PFC, PAUSE).
pub const ETHERTYPE_MAC_CONTROL: u16 = 0x8808;
/// MAC control opcode of PFC.
pub const OPCODE_PFC: u16 = 0x0101;
/// MAC control opcode of the 802.3x link-wide PAUSE.
pub const OPCODE_PAUSE: u16 = 0x0001;
/// Priorities (traffic classes) a PFC frame addresses.
pub const PRIORITIES: usize = 8;
/// Length of a PFC frame as written: the 60-byte Ethernet minimum without
/// the FCS.
pub const FRAME_LEN: usize = 60;
/// Bytes that carry fields (Ethernet header, opcode, enable vector, eight
/// times); the rest is padding. The parser needs only these: a frame
/// from a veth or a raw socket need not be padded.
pub const FIELDS_LEN: usize = 34;
/// Bit times in one pause quantum.
pub const QUANTUM_BIT_TIMES: u64 = 512;

/// Where the opcode is: right after the untagged Ethernet header (MAC
/// control frames are never VLAN-tagged).
const OPCODE_OFFSET: usize = ethernet::HEADER_LEN;
/// Bytes up to and including the opcode.
const OPCODE_END: usize = OPCODE_OFFSET + 2;
/// EtherType and opcode as they appear on the wire, for [`is_pfc`].
const PFC_TYPE_AND_OPCODE: [u8; 4] = {
    let [t0, t1] = ETHERTYPE_MAC_CONTROL.to_be_bytes();
    let [o0, o1] = OPCODE_PFC.to_be_bytes();
    [t0, t1, o0, o1]
};
const NS_PER_S: u64 = 1_000_000_000;

/// What a PFC frame says: which priorities it addresses and for how long.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Pfc {
    /// Priority-enable vector: bit `p` set means `quanta[p]` is valid. Bits
    /// 8..16 are reserved; they are written and parsed as they are, so
    /// that a frame round-trips, and ignored by [`Pfc::time`].
    pub enable: u16,
    /// Pause time per priority (index = priority), in quanta of 512 bit
    /// times; 0 with the enable bit set means resume now.
    pub quanta: [u16; PRIORITIES],
}

impl Pfc {
    /// A frame that pauses `priority` for `quanta` (0: resumes it), or
    /// `None` for a priority above 7.
    pub fn pause(priority: u8, quanta: u16) -> Option<Pfc> {
        Pfc::default().with(priority, quanta)
    }

    /// A frame that resumes `priority` (its time 0), or `None` for a
    /// priority above 7.
    pub fn resume(priority: u8) -> Option<Pfc> {
        Pfc::pause(priority, 0)
    }

    /// This frame with `priority` enabled and its time set to `quanta`, or
    /// `None` for a priority above 7.
    pub fn with(mut self, priority: u8, quanta: u16) -> Option<Pfc> {
        let bit = enable_bit(priority)?;
        *self.quanta.get_mut(usize::from(priority))? = quanta;
        self.enable |= bit;
        Some(self)
    }

    /// The time `priority` is asked to pause for, in quanta (`Some(0)`:
    /// resume), or `None` when the frame does not address it (enable bit
    /// clear, or a priority above 7).
    pub fn time(&self, priority: u8) -> Option<u16> {
        let bit = enable_bit(priority)?;
        if self.enable & bit == 0 {
            return None;
        }
        self.quanta.get(usize::from(priority)).copied()
    }
}

/// Bit of `priority` in the enable vector, if it is one of the eight.
fn enable_bit(priority: u8) -> Option<u16> {
    if usize::from(priority) >= PRIORITIES {
        return None;
    }
    1u16.checked_shl(u32::from(priority))
}

/// Why a frame is not a PFC frame.
///
/// Checked in this order: the EtherType (needs 14 bytes), the opcode
/// (16), the fields (34). Variants are listed in [`PfcError::ALL`] with a
/// stable [`index`](PfcError::index) for counter arrays.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PfcError {
    /// The frame ends before the field that decides (the EtherType, the
    /// opcode, or the eight times).
    Truncated,
    /// The EtherType is not MAC control (0x8808): ordinary traffic, or a
    /// VLAN-tagged frame (MAC control frames are never tagged).
    NotMacControl,
    /// An 802.3x PAUSE (opcode 0x0001): link-wide flow control, not PFC.
    Pause,
    /// Another MAC control opcode (e.g. 802.3 EPON's GATE, 0x0002).
    UnknownOpcode,
}

impl PfcError {
    /// Number of variants.
    pub const COUNT: usize = 4;

    /// Every variant, in [`index`](PfcError::index) order.
    pub const ALL: [PfcError; PfcError::COUNT] = [
        PfcError::Truncated,
        PfcError::NotMacControl,
        PfcError::Pause,
        PfcError::UnknownOpcode,
    ];

    /// A dense index in `0..COUNT`, for per-reason counter arrays.
    #[inline]
    pub const fn index(self) -> usize {
        self as usize
    }

    /// A snake_case name, suitable as a metric label value.
    pub const fn as_str(self) -> &'static str {
        match self {
            PfcError::Truncated => "truncated",
            PfcError::NotMacControl => "not_mac_control",
            PfcError::Pause => "pause",
            PfcError::UnknownOpcode => "unknown_opcode",
        }
    }
}

impl fmt::Display for PfcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl core::error::Error for PfcError {}

/// The buffer given to [`write()`] cannot hold a PFC frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BufferTooShort {
    /// Bytes a PFC frame needs ([`FRAME_LEN`]).
    pub needed: usize,
    /// Bytes the buffer has.
    pub got: usize,
}

impl fmt::Display for BufferTooShort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "buffer of {} bytes, a PFC frame needs {}",
            self.got, self.needed
        )
    }
}

impl core::error::Error for BufferTooShort {}

/// Whether `frame` is a PFC frame, by its EtherType and opcode alone: cheap
/// enough to ask of every received frame before [`parse`]ing the few that
/// are. A frame too short to hold both is not.
#[inline]
pub fn is_pfc(frame: &[u8]) -> bool {
    frame
        .get(ethernet::ETHERTYPE_OFFSET..OPCODE_END)
        .is_some_and(|b| *b == PFC_TYPE_AND_OPCODE)
}

/// Reads the PFC frame in `frame` (untrusted bytes; the destination MAC is
/// not checked, since 802.3 also accepts MAC control frames sent to the
/// station's own address, and padding beyond the fields is not required).
pub fn parse(frame: &[u8]) -> Result<Pfc, PfcError> {
    let (header, _) = frame
        .split_first_chunk::<{ ethernet::HEADER_LEN }>()
        .ok_or(PfcError::Truncated)?;
    let [.., t0, t1] = *header;
    if u16::from_be_bytes([t0, t1]) != ETHERTYPE_MAC_CONTROL {
        return Err(PfcError::NotMacControl);
    }
    let (control, body) = frame
        .split_first_chunk::<OPCODE_END>()
        .ok_or(PfcError::Truncated)?;
    let [.., o0, o1] = *control;
    match u16::from_be_bytes([o0, o1]) {
        OPCODE_PFC => {}
        OPCODE_PAUSE => return Err(PfcError::Pause),
        _ => return Err(PfcError::UnknownOpcode),
    }
    // Enable vector, then the eight times.
    let (&[e0, e1], times) = body.split_first_chunk::<2>().ok_or(PfcError::Truncated)?;
    let times: &[u8; 2 * PRIORITIES] = times.first_chunk().ok_or(PfcError::Truncated)?;
    let mut quanta = [0u16; PRIORITIES];
    for (q, word) in quanta.iter_mut().zip(times.chunks_exact(2)) {
        if let [hi, lo] = *word {
            *q = u16::from_be_bytes([hi, lo]);
        }
    }
    Ok(Pfc {
        enable: u16::from_be_bytes([e0, e1]),
        quanta,
    })
}

/// Writes a PFC frame from `src` saying `pfc` into the start of `buf`,
/// padding included (zeroed, since buffers are reused), and returns its
/// length, [`FRAME_LEN`]. The enable vector is written as given.
pub fn write(buf: &mut [u8], src: MacAddr, pfc: &Pfc) -> Result<usize, BufferTooShort> {
    let got = buf.len();
    let out = buf.get_mut(..FRAME_LEN).ok_or(BufferTooShort {
        needed: FRAME_LEN,
        got,
    })?;
    fill(out, src, pfc);
    Ok(FRAME_LEN)
}

/// The PFC frame from `src` saying `pfc`, as an array.
pub fn frame(src: MacAddr, pfc: &Pfc) -> [u8; FRAME_LEN] {
    let mut f = [0u8; FRAME_LEN];
    fill(&mut f, src, pfc);
    f
}

/// Zeroes `out` and lays the fields over its start (all of them when `out`
/// is at least [`FIELDS_LEN`] long, which both callers ensure).
fn fill(out: &mut [u8], src: MacAddr, pfc: &Pfc) {
    let fields = DST_MAC
        .into_iter()
        .chain(src)
        .chain(ETHERTYPE_MAC_CONTROL.to_be_bytes())
        .chain(OPCODE_PFC.to_be_bytes())
        .chain(pfc.enable.to_be_bytes())
        .chain(pfc.quanta.into_iter().flat_map(u16::to_be_bytes));
    out.fill(0);
    for (o, b) in out.iter_mut().zip(fields) {
        *o = b;
    }
}

/// How long `quanta` pause quanta last on a link of `rate_bps`, in ns,
/// rounded up (a paused sender must not start again early); `None` for a
/// rate of 0. At most 65,535 x 512 bits = 33.6 Gbit, 33.6 ms at 1 Gbit/s;
/// the arithmetic saturates all the same.
pub fn quanta_to_ns(quanta: u16, rate_bps: u64) -> Option<u64> {
    let bit_ns = u64::from(quanta)
        .saturating_mul(QUANTUM_BIT_TIMES)
        .saturating_mul(NS_PER_S);
    let whole = bit_ns.checked_div(rate_bps)?;
    let part = bit_ns.checked_rem(rate_bps)?;
    Some(if part == 0 {
        whole
    } else {
        whole.saturating_add(1)
    })
}

/// The quanta that cover `ns` on a link of `rate_bps`, rounded up and
/// capped at 65,535 (the longest pause a frame can ask for; 335.5 us at
/// 100 Gbit/s, so a longer pause is asked again before it runs out);
/// `None` for a rate of 0.
pub fn ns_to_quanta(ns: u64, rate_bps: u64) -> Option<u16> {
    if rate_bps == 0 {
        return None;
    }
    // u64 x u64 always fits u128; the divisor is a non-zero constant.
    let bit_ns = u128::from(ns).saturating_mul(u128::from(rate_bps));
    let per_quantum = u128::from(QUANTUM_BIT_TIMES).saturating_mul(u128::from(NS_PER_S));
    let whole = bit_ns.checked_div(per_quantum)?;
    let part = bit_ns.checked_rem(per_quantum)?;
    let quanta = if part == 0 {
        whole
    } else {
        whole.saturating_add(1)
    };
    Some(u16::try_from(quanta).unwrap_or(u16::MAX))
}

#[cfg(test)]
#[allow(
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::unwrap_used
)]
mod tests {
    use super::*;

    use proptest::prelude::*;

    const SRC: MacAddr = [0x02, 0x00, 0x00, 0x00, 0x00, 0x01];

    /// Priority 3 paused for 0xffff quanta from 02:00:00:00:00:01: enable
    /// 0x0008 (bit 3), the fourth time 0xffff, 26 bytes of padding.
    const PAUSE_P3: [u8; FRAME_LEN] = [
        0x01, 0x80, 0xc2, 0x00, 0x00, 0x01, // destination
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // source
        0x88, 0x08, // MAC control
        0x01, 0x01, // PFC
        0x00, 0x08, // enable: priority 3
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, // times 0..3
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // times 4..7
        // padding: 26 bytes
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, //
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, //
    ];

    /// From 02:aa:bb:cc:dd:ee: priority 0 paused for 0x1234 quanta,
    /// priorities 3 and 5 resumed (enabled, time 0): enable 0x0029
    /// (bits 0, 3, 5); priority 7's time 0xbeef is not enabled.
    const MIXED: [u8; FRAME_LEN] = [
        0x01, 0x80, 0xc2, 0x00, 0x00, 0x01, // destination
        0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, // source
        0x88, 0x08, 0x01, 0x01, // MAC control, PFC
        0x00, 0x29, // enable: priorities 0, 3, 5
        0x12, 0x34, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // times 0..3
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xbe, 0xef, // times 4..7
        // padding: 26 bytes
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, //
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, //
    ];

    /// An 802.3x PAUSE of 0xffff quanta: same destination and EtherType,
    /// opcode 0x0001, one time, 42 bytes of padding.
    const PAUSE_8023X: [u8; FRAME_LEN] = [
        0x01, 0x80, 0xc2, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x88, 0x08, 0x00,
        0x01, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];

    fn mixed() -> Pfc {
        Pfc::pause(0, 0x1234)
            .and_then(|p| p.with(3, 0))
            .and_then(|p| p.with(5, 0))
            .map(|mut p| {
                p.quanta[7] = 0xbeef; // a time whose enable bit is clear
                p
            })
            .unwrap()
    }

    #[test]
    fn writes_the_hand_laid_frames() {
        let mut buf = [0xa5u8; 100]; // stale bytes the padding must clear
        assert_eq!(
            write(&mut buf, SRC, &Pfc::pause(3, 0xffff).unwrap()),
            Ok(60)
        );
        assert_eq!(buf[..60], PAUSE_P3);
        assert_eq!(buf[60..], [0xa5; 40], "nothing written past the frame");
        assert_eq!(frame([0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee], &mixed()), MIXED);
    }

    #[test]
    fn parses_the_hand_laid_frames() {
        let p = parse(&PAUSE_P3).unwrap();
        assert_eq!(p.enable, 0x0008);
        assert_eq!(p.quanta, [0, 0, 0, 0xffff, 0, 0, 0, 0]);
        assert_eq!(p.time(3), Some(0xffff));
        assert_eq!(p.time(2), None);

        let m = parse(&MIXED).unwrap();
        assert_eq!(m, mixed());
        assert_eq!(m.time(0), Some(0x1234));
        assert_eq!(m.time(3), Some(0), "resume");
        assert_eq!(m.time(5), Some(0), "resume");
        assert_eq!(m.time(7), None, "time present, enable bit clear");
        assert_eq!(m.time(8), None, "no such priority");
        assert!(is_pfc(&PAUSE_P3) && is_pfc(&MIXED));
    }

    #[test]
    fn parses_unpadded_frames() {
        assert_eq!(parse(&PAUSE_P3[..FIELDS_LEN]), parse(&PAUSE_P3));
    }

    #[test]
    fn tells_other_frames_apart() {
        assert_eq!(parse(&PAUSE_8023X), Err(PfcError::Pause));
        assert!(!is_pfc(&PAUSE_8023X));

        let mut gate = PAUSE_P3;
        gate[14..16].copy_from_slice(&[0x00, 0x02]);
        assert_eq!(parse(&gate), Err(PfcError::UnknownOpcode));
        assert!(!is_pfc(&gate));

        // The same bytes as IPv4, and as a VLAN-tagged PFC frame.
        let mut ip = PAUSE_P3;
        ip[12..14].copy_from_slice(&[0x08, 0x00]);
        assert_eq!(parse(&ip), Err(PfcError::NotMacControl));
        assert!(!is_pfc(&ip));
        let mut tagged = [0u8; 64];
        tagged[..12].copy_from_slice(&PAUSE_P3[..12]);
        tagged[12..16].copy_from_slice(&[0x81, 0x00, 0x00, 0x03]);
        tagged[16..].copy_from_slice(&PAUSE_P3[12..]);
        assert_eq!(parse(&tagged), Err(PfcError::NotMacControl));
        assert!(!is_pfc(&tagged));
    }

    #[test]
    fn truncated_frames() {
        for len in 0..FIELDS_LEN {
            assert_eq!(parse(&PAUSE_P3[..len]), Err(PfcError::Truncated), "{len}");
            assert_eq!(is_pfc(&PAUSE_P3[..len]), len >= 16, "{len}");
        }
        // A PAUSE cut after its opcode is still known as a PAUSE; cut
        // before it, it is truncated.
        assert_eq!(parse(&PAUSE_8023X[..16]), Err(PfcError::Pause));
        assert_eq!(parse(&PAUSE_8023X[..15]), Err(PfcError::Truncated));
        // An IPv4 frame cut after its EtherType is simply not MAC control.
        assert_eq!(
            parse(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x08, 0x00]),
            Err(PfcError::NotMacControl)
        );
    }

    #[test]
    fn short_buffer_is_refused_untouched() {
        let mut buf = [0xa5u8; FRAME_LEN - 1];
        assert_eq!(
            write(&mut buf, SRC, &Pfc::default()),
            Err(BufferTooShort {
                needed: 60,
                got: 59
            })
        );
        assert_eq!(buf, [0xa5; FRAME_LEN - 1]);
        assert_eq!(
            write(&mut [], SRC, &Pfc::default()).map_err(|e| e.got),
            Err(0)
        );
    }

    #[test]
    fn priorities_above_7_are_refused() {
        assert_eq!(Pfc::pause(8, 1), None);
        assert_eq!(Pfc::resume(255), None);
        assert_eq!(Pfc::resume(7).map(|p| p.enable), Some(0x0080));
    }

    #[test]
    fn quanta_in_nanoseconds() {
        // One quantum, 512 bits: 5.12 ns at 100 Gbit/s (rounded up to 6),
        // 512 ns at 1 Gbit/s, 20.48 ns at 25 Gbit/s (21).
        assert_eq!(quanta_to_ns(1, 100_000_000_000), Some(6));
        assert_eq!(quanta_to_ns(1, 1_000_000_000), Some(512));
        assert_eq!(quanta_to_ns(1, 25_000_000_000), Some(21));
        // 0xffff quanta = 33,553,920 bits: 335,539.2 ns at 100 Gbit/s,
        // 33,553,920 ns at 1 Gbit/s.
        assert_eq!(quanta_to_ns(0xffff, 100_000_000_000), Some(335_540));
        assert_eq!(quanta_to_ns(0xffff, 1_000_000_000), Some(33_553_920));
        // At 1 bit/s the longest pause is 33,553,920 s, still in range.
        assert_eq!(quanta_to_ns(0xffff, 1), Some(33_553_920_000_000_000));
        assert_eq!(quanta_to_ns(0, 100_000_000_000), Some(0));
        assert_eq!(quanta_to_ns(1, 0), None);

        // 5 us at 100 Gbit/s = 500,000 bits = 976.5625 quanta -> 977.
        assert_eq!(ns_to_quanta(5_000, 100_000_000_000), Some(977));
        // 512 ns at 1 Gbit/s is exactly one quantum.
        assert_eq!(ns_to_quanta(512, 1_000_000_000), Some(1));
        // 1 ms at 100 Gbit/s is 195,312.5 quanta: capped.
        assert_eq!(ns_to_quanta(1_000_000, 100_000_000_000), Some(0xffff));
        assert_eq!(ns_to_quanta(u64::MAX, u64::MAX), Some(0xffff));
        assert_eq!(ns_to_quanta(5_000, 0), None);
    }

    fn any_pfc() -> impl Strategy<Value = Pfc> {
        (any::<u16>(), any::<[u16; PRIORITIES]>())
            .prop_map(|(enable, quanta)| Pfc { enable, quanta })
    }

    proptest! {
        /// Whatever is written parses back to itself, and is a PFC frame.
        #[test]
        fn round_trip(src in any::<[u8; 6]>(), pfc in any_pfc(), extra in 0usize..8) {
            let mut buf = std::vec![0xa5u8; FRAME_LEN + extra];
            prop_assert_eq!(write(&mut buf, src, &pfc), Ok(FRAME_LEN));
            prop_assert!(is_pfc(&buf));
            prop_assert_eq!(parse(&buf), Ok(pfc));
            prop_assert_eq!(parse(&buf[..FRAME_LEN]), Ok(pfc));
            prop_assert_eq!(&buf[..6], &DST_MAC[..]);
            prop_assert_eq!(&buf[6..12], &src[..]);
            prop_assert!(buf[FIELDS_LEN..FRAME_LEN].iter().all(|&b| b == 0));
        }

        /// Arbitrary bytes never panic, and `is_pfc` agrees with `parse`
        /// whenever the fields are all there.
        #[test]
        fn arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            let parsed = parse(&bytes);
            if bytes.len() >= FIELDS_LEN {
                prop_assert_eq!(is_pfc(&bytes), parsed.is_ok());
            }
            if parsed.is_ok() {
                prop_assert!(is_pfc(&bytes));
            }
        }

        /// Conversions never panic, and a pause asked in ns lasts at least
        /// that long unless capped.
        #[test]
        fn conversions(ns in 0u64..10_000_000, rate in 1u64..1_000_000_000_000) {
            let q = ns_to_quanta(ns, rate).unwrap();
            let back = quanta_to_ns(q, rate).unwrap();
            prop_assert!(q == u16::MAX || back >= ns);
        }
    }
}

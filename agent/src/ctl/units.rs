//! How values read in the human outputs: rates, delays, sizes, durations
//! and states.

/// A port state as `ports` and `costs` show it.
pub(super) fn up_down(up: bool) -> String {
    if up { "up" } else { "down" }.to_string()
}

use lcmp_topology::units::{decimal, human_bytes, human_delay, human_rate, human_size};

/// A rate; 0 is line rate (no shaping).
pub fn rate(bps: u64) -> String {
    if bps == 0 {
        return "line rate".into();
    }
    human_rate(bps)
}

/// A delay (see [`human_delay`]).
pub fn delay(ns: u64) -> String {
    human_delay(ns)
}

/// A live byte count (queues).
pub fn bytes(b: u64) -> String {
    human_bytes(b)
}

/// A configured size.
pub fn size(b: u64) -> String {
    human_size(b)
}

pub use lcmp_topology::units::human_duration as duration;

/// How long ago: `12 ms`, `3.4 s`, then as [`duration`].
pub(super) fn age(ms: u64) -> String {
    match ms {
        0..=999 => format!("{ms} ms"),
        1_000..=59_999 => format!("{} s", decimal(ms, 1_000, 1)),
        _ => duration(ms),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_read_naturally() {
        assert_eq!(rate(0), "line rate");
        assert_eq!(rate(999), "999 bit/s");
        assert_eq!(rate(1_234_567), "1.23 Mbit/s");
        assert_eq!(rate(200_000_000_000), "200 Gbit/s");
        assert_eq!(delay(0), "0 ms");
        assert_eq!(delay(750), "750 ns");
        assert_eq!(delay(25_000_000), "25 ms");
        assert_eq!(delay(1_500), "0.002 ms");
        assert_eq!(bytes(999), "999 B");
        assert_eq!(bytes(1_049), "1 kB");
        assert_eq!(bytes(1_050), "1.1 kB");
        assert_eq!(size(128 << 20), "128 MiB");
        assert_eq!(size(64 << 10), "64 KiB");
        assert_eq!(size(250_000), "250 kB");
        assert_eq!(duration(45_999), "45s");
        assert_eq!(duration(303_000), "5m03s");
        assert_eq!(duration(2 * 86_400_000 + 3_720_000), "2d01h02m");
    }
}

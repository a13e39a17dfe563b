//! Rates, delays and buffer sizes written as human strings ("2.5Gbps",
//! "25ms", "128MiB") and parsed into exact integers.
//!
//! Numbers are decimal (`"2.5Gbps"`), parsed exactly without floating point;
//! a value that is not a whole number of the base unit (`"1.5ns"`) is an
//! error rather than being rounded. Units are case-insensitive and may be
//! separated from the number by spaces. A bare number without a unit is
//! rejected: it is too easy to mean the wrong unit.

use std::fmt;

/// A unit string that could not be parsed; its `Display` is the complete
/// message, e.g. `"20Gbs" is not a rate (expected e.g. "200Gbps")`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitError(String);

impl fmt::Display for UnitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UnitError {}

/// What kind of quantity is being parsed; selects the unit table and wording.
struct Quantity {
    /// "a rate", "a delay", "a buffer size"
    what: &'static str,
    /// Example(s) for the error message, already quoted.
    example: &'static str,
    /// Base unit for the "not a whole number" message.
    base: &'static str,
    /// Whether zero is acceptable.
    zero_ok: bool,
    /// Maps a lower-cased unit to its multiplier.
    unit: fn(&str) -> Option<u64>,
}

const RATE: Quantity = Quantity {
    what: "a rate",
    example: "\"200Gbps\"",
    base: "bits per second",
    zero_ok: false,
    unit: rate_unit,
};

const DELAY: Quantity = Quantity {
    what: "a delay",
    example: "\"25ms\"",
    base: "nanoseconds",
    zero_ok: true,
    unit: delay_unit,
};

const BUFFER: Quantity = Quantity {
    what: "a buffer size",
    example: "\"32MB\" or \"128MiB\"",
    base: "bytes",
    zero_ok: false,
    unit: buffer_unit,
};

/// Parses a link rate into bits per second.
///
/// Accepts `bps`, `Kbps`, `Mbps`, `Gbps`, `Tbps`, the `bit` / `bit/s` /
/// `b/s` spellings (`"10Gbit"`), and a bare prefix (`"10G"`), in any case.
/// Zero is rejected.
pub fn parse_rate(text: &str) -> Result<u64, UnitError> {
    parse(text, &RATE)
}

/// Parses a one-way delay into nanoseconds: `ns`, `us` (also `µs`), `ms`, `s`.
pub fn parse_delay(text: &str) -> Result<u64, UnitError> {
    parse(text, &DELAY)
}

/// Parses a buffer size into bytes: `B`, `KB`/`MB`/`GB`/`TB` (powers of 1000)
/// and `KiB`/`MiB`/`GiB`/`TiB` (powers of 1024). Zero is rejected.
pub fn parse_buffer(text: &str) -> Result<u64, UnitError> {
    parse(text, &BUFFER)
}

fn rate_unit(unit: &str) -> Option<u64> {
    let prefix = ["bits/s", "bit/s", "bps", "b/s", "bit"]
        .iter()
        .find_map(|suffix| unit.strip_suffix(suffix));
    let prefix = match prefix {
        Some(p) => p,
        // A bare SI prefix ("10G"), but not a bare number.
        None if !unit.is_empty() => unit,
        None => return None,
    };
    match prefix {
        "" => Some(1),
        "k" => Some(1_000),
        "m" => Some(1_000_000),
        "g" => Some(1_000_000_000),
        "t" => Some(1_000_000_000_000),
        _ => None,
    }
}

fn delay_unit(unit: &str) -> Option<u64> {
    match unit {
        "ns" => Some(1),
        "us" | "\u{b5}s" | "\u{3bc}s" => Some(1_000),
        "ms" => Some(1_000_000),
        "s" => Some(1_000_000_000),
        _ => None,
    }
}

fn buffer_unit(unit: &str) -> Option<u64> {
    match unit {
        "b" => Some(1),
        "kb" => Some(1_000),
        "mb" => Some(1_000_000),
        "gb" => Some(1_000_000_000),
        "tb" => Some(1_000_000_000_000),
        "kib" => Some(1 << 10),
        "mib" => Some(1 << 20),
        "gib" => Some(1 << 30),
        "tib" => Some(1 << 40),
        _ => None,
    }
}

fn parse(text: &str, q: &Quantity) -> Result<u64, UnitError> {
    let malformed = || {
        UnitError(format!(
            "{text:?} is not {} (expected e.g. {})",
            q.what, q.example
        ))
    };
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let multiplier = (q.unit)(&unit.trim_start().to_lowercase()).ok_or_else(malformed)?;

    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    if int.is_empty() && frac.is_empty() || frac.contains('.') {
        return Err(malformed());
    }
    // 20 significant digits keep every intermediate value inside u128.
    let digits = int.trim_start_matches('0').len() + frac.len();
    if digits > 20 {
        return Err(UnitError(format!("{text:?} is too large")));
    }
    let joined = format!("{int}{frac}");
    let significant = joined.trim_start_matches('0');
    let mantissa: u128 = if significant.is_empty() {
        0
    } else {
        significant.parse().map_err(|_| malformed())?
    };
    let scale = 10u128.pow(frac.len() as u32);
    let scaled = mantissa * u128::from(multiplier);
    if scaled % scale != 0 {
        return Err(UnitError(format!(
            "{text:?} is not a whole number of {}",
            q.base
        )));
    }
    let value =
        u64::try_from(scaled / scale).map_err(|_| UnitError(format!("{text:?} is too large")))?;
    if value == 0 && !q.zero_ok {
        return Err(UnitError(format!("{text:?}: {} must be positive", q.what)));
    }
    Ok(value)
}

/// Formats bits per second with the largest unit that keeps it short,
/// e.g. `2_500_000_000` -> `"2.5Gbps"`.
pub fn format_rate(bps: u64) -> String {
    format_scaled(
        bps,
        &[
            ("Tbps", 1_000_000_000_000),
            ("Gbps", 1_000_000_000),
            ("Mbps", 1_000_000),
            ("Kbps", 1_000),
            ("bps", 1),
        ],
    )
}

/// Formats nanoseconds, e.g. `25_000_000` -> `"25ms"`, `1_500` -> `"1.5us"`.
pub fn format_delay(ns: u64) -> String {
    format_scaled(
        ns,
        &[
            ("s", 1_000_000_000),
            ("ms", 1_000_000),
            ("us", 1_000),
            ("ns", 1),
        ],
    )
}

/// Formats bytes with whichever of the binary or decimal units gives the
/// shorter form: `128 << 20` -> `"128MiB"`, `32_000_000` -> `"32MB"`.
pub fn format_bytes(bytes: u64) -> String {
    let decimal = format_scaled(
        bytes,
        &[
            ("TB", 1_000_000_000_000),
            ("GB", 1_000_000_000),
            ("MB", 1_000_000),
            ("KB", 1_000),
            ("B", 1),
        ],
    );
    let binary = [
        ("TiB", 1u64 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ]
    .into_iter()
    .find(|&(_, m)| bytes >= m && bytes % m == 0)
    .map(|(unit, m)| format!("{}{unit}", bytes / m));
    match binary {
        Some(b) if b.len() <= decimal.len() => b,
        _ => decimal,
    }
}

fn format_scaled(value: u64, units: &[(&str, u64)]) -> String {
    let (unit, m) = units
        .iter()
        .copied()
        .find(|&(_, m)| value >= m)
        .unwrap_or(units[units.len() - 1]);
    let whole = value / m;
    let rem = value % m;
    if rem == 0 {
        return format!("{whole}{unit}");
    }
    let width = m.ilog10() as usize;
    let frac = format!("{rem:0width$}");
    format!("{whole}.{}{unit}", frac.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        let ok = [
            ("200Gbps", 200_000_000_000),
            ("200gbps", 200_000_000_000),
            ("200GBPS", 200_000_000_000),
            ("2.5Gbps", 2_500_000_000),
            ("10Gbit", 10_000_000_000),
            ("10gbit/s", 10_000_000_000),
            ("10G", 10_000_000_000),
            ("10 G", 10_000_000_000),
            ("500Mbps", 500_000_000),
            ("500m", 500_000_000),
            ("64Kbps", 64_000),
            ("64kbit", 64_000),
            ("9600bps", 9_600),
            ("1Tbps", 1_000_000_000_000),
            ("0.5Mbps", 500_000),
            (".5Mbps", 500_000),
            ("25.Gbps", 25_000_000_000),
            (" 1Gbps ", 1_000_000_000),
        ];
        for (text, want) in ok {
            assert_eq!(parse_rate(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn bad_rates() {
        for text in [
            "",
            "20Gbs",
            "200",
            "Gbps",
            "20GB",
            "20 Gb",
            "1.2.3Gbps",
            "-1Gbps",
            "1e9bps",
            "10Q",
            ".Gbps",
        ] {
            let err = parse_rate(text).unwrap_err().to_string();
            assert_eq!(
                err,
                format!("{text:?} is not a rate (expected e.g. \"200Gbps\")"),
                "{text}"
            );
        }
        assert_eq!(
            parse_rate("0Gbps").unwrap_err().to_string(),
            "\"0Gbps\": a rate must be positive"
        );
        assert_eq!(
            parse_rate("0.5bps").unwrap_err().to_string(),
            "\"0.5bps\" is not a whole number of bits per second"
        );
        assert!(parse_rate("100000000000Tbps")
            .unwrap_err()
            .to_string()
            .contains("too large"));
        assert!(parse_rate("123456789012345678901234bps")
            .unwrap_err()
            .to_string()
            .contains("too large"));
    }

    #[test]
    fn delays() {
        let ok = [
            ("25ms", 25_000_000),
            ("25MS", 25_000_000),
            ("1us", 1_000),
            ("1\u{b5}s", 1_000),
            ("1\u{3bc}s", 1_000),
            ("1.5us", 1_500),
            ("0.25s", 250_000_000),
            ("2s", 2_000_000_000),
            ("100ns", 100),
            ("0ms", 0),
            ("250 ms", 250_000_000),
        ];
        for (text, want) in ok {
            assert_eq!(parse_delay(text), Ok(want), "{text}");
        }
        for text in ["25", "25msec", "ms", "25m", "1h", "-1ms"] {
            assert_eq!(
                parse_delay(text).unwrap_err().to_string(),
                format!("{text:?} is not a delay (expected e.g. \"25ms\")")
            );
        }
        assert_eq!(
            parse_delay("1.5ns").unwrap_err().to_string(),
            "\"1.5ns\" is not a whole number of nanoseconds"
        );
    }

    #[test]
    fn buffers() {
        let ok = [
            ("32MB", 32_000_000),
            ("32mb", 32_000_000),
            ("128MiB", 128 << 20),
            ("128mib", 128 << 20),
            ("1.5KB", 1_500),
            ("4KiB", 4_096),
            ("1GB", 1_000_000_000),
            ("2GiB", 2 << 30),
            ("1500B", 1_500),
            ("0.5MiB", 512 << 10),
        ];
        for (text, want) in ok {
            assert_eq!(parse_buffer(text), Ok(want), "{text}");
        }
        for text in ["32M", "32", "32 MBytes", "MB", "32Mbps"] {
            assert_eq!(
                parse_buffer(text).unwrap_err().to_string(),
                format!("{text:?} is not a buffer size (expected e.g. \"32MB\" or \"128MiB\")")
            );
        }
        assert!(parse_buffer("0B").is_err());
        assert!(parse_buffer("0.3B").is_err());
    }

    #[test]
    fn formatting_round_trips() {
        assert_eq!(format_rate(2_500_000_000), "2.5Gbps");
        assert_eq!(format_rate(200_000_000_000), "200Gbps");
        assert_eq!(format_rate(1_234), "1.234Kbps");
        assert_eq!(format_rate(7), "7bps");
        assert_eq!(format_delay(25_000_000), "25ms");
        assert_eq!(format_delay(1_500), "1.5us");
        assert_eq!(format_delay(0), "0ns");
        assert_eq!(format_bytes(128 << 20), "128MiB");
        assert_eq!(format_bytes(32_000_000), "32MB");
        assert_eq!(format_bytes(1_500), "1.5KB");
        for v in [
            1,
            999,
            1_000,
            1_001,
            123_456_789,
            200_000_000_000,
            u64::MAX / 7,
        ] {
            assert_eq!(parse_rate(&format_rate(v)), Ok(v));
            assert_eq!(parse_delay(&format_delay(v)), Ok(v));
            assert_eq!(parse_buffer(&format_bytes(v)), Ok(v));
        }
    }
}

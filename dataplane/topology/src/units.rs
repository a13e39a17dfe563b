//! Rates, delays and buffer sizes written as human strings ("2.5Gbps",
//! "25ms", "128MiB") and parsed into exact integers.
//!
//! Numbers are decimal (`"2.5Gbps"`), parsed exactly without floating point;
//! a value that is not a whole number of the base unit (`"1.5ns"`) is an
//! error rather than being rounded. The unit may be separated from the
//! number by spaces. A bare number without a unit is rejected: it is too
//! easy to mean the wrong unit. A text of more than 100 characters is no
//! quantity (and is not repeated whole in the message).
//!
//! Units are case-sensitive, because case carries meaning: `b` is bits and
//! `B` bytes, `m` is milli and `M` mega. Only unambiguous spellings are
//! accepted:
//!
//! - rates: `bps`, `Kbps` (or `kbps`), `Mbps`, `Gbps`, `Tbps`; the same
//!   prefixes with `bit`, `bit/s`, `bits/s` or `b/s` (`"10Gbit/s"`); or the
//!   prefix alone (`"10G"`);
//! - buffers: `B`, `KB` (or `kB`), `MB`, `GB`, `TB` (powers of 1000) and
//!   `KiB`, `MiB`, `GiB`, `TiB` (powers of 1024);
//! - delays: `ns`, `us` (or `µs`), `ms`, `s`;
//! - durations of command-line options and config files: the delay units,
//!   written against the number (`"30s"`, `"250ms"`); options documented in
//!   seconds also take a bare number of seconds ([`parse_duration_or_secs`]).
//!
//! A unit that only differs from an accepted one in case, or that counts
//! bytes where bits are meant (or the reverse), is an error that says so and
//! gives the spelling to write: `"20Mb" is not a buffer size: "b" is bits;
//! write "20MB" (bytes)`, `"100GBps" is not a rate: "B" is bytes; write
//! "100Gbps" (bits per second)`, `"25MS" is not a delay: units are
//! case-sensitive; write "25ms"`.

use std::fmt;

use crate::error::{echo, ECHO_CHARS};

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
    /// Maps an accepted unit (exact spelling) to its multiplier.
    unit: fn(&str) -> Option<u64>,
    /// For a unit that is not accepted but close to one: why it is
    /// rejected and the unit to write instead.
    hint: fn(&str) -> Option<Hint>,
}

/// Why a near-miss unit is rejected, and the accepted unit meant.
struct Hint {
    reason: &'static str,
    unit: String,
    /// Appended after the suggestion, e.g. " (bytes)".
    note: &'static str,
}

const RATE: Quantity = Quantity {
    what: "a rate",
    example: "\"200Gbps\"",
    base: "bits per second",
    zero_ok: false,
    unit: rate_unit,
    hint: rate_hint,
};

const DELAY: Quantity = Quantity {
    what: "a delay",
    example: "\"25ms\"",
    base: "nanoseconds",
    zero_ok: true,
    unit: delay_unit,
    hint: delay_hint,
};

const DURATION: Quantity = Quantity {
    what: "a duration",
    example: "\"30s\" or \"250ms\"",
    base: "nanoseconds",
    zero_ok: true,
    unit: delay_unit,
    hint: duration_hint,
};

const BUFFER: Quantity = Quantity {
    what: "a buffer size",
    example: "\"32MB\" or \"128MiB\"",
    base: "bytes",
    zero_ok: false,
    unit: buffer_unit,
    hint: buffer_hint,
};

const CASE: &str = "units are case-sensitive";

/// Parses a link rate into bits per second.
///
/// Accepts `bps`, `Kbps` (or `kbps`), `Mbps`, `Gbps`, `Tbps`, the `bit` /
/// `bit/s` / `bits/s` / `b/s` spellings (`"10Gbit"`), and a bare prefix
/// (`"10G"`); case-sensitive. Zero is rejected.
pub fn parse_rate(text: &str) -> Result<u64, UnitError> {
    parse(text, &RATE)
}

/// Parses a one-way delay into nanoseconds: `ns`, `us` (also `µs`), `ms`,
/// `s`; case-sensitive.
pub fn parse_delay(text: &str) -> Result<u64, UnitError> {
    parse(text, &DELAY)
}

/// Parses a duration on a command line or in a config file into
/// nanoseconds: a number and a unit written together, `ns`, `us` (also
/// `µs`), `ms`, `s` (`"30s"`, `"1.5s"`, `"250ms"`, `"100us"`);
/// case-sensitive. A space between number and unit (`"20 s"`) is refused
/// with the spelling to write, as is a bare number.
pub fn parse_duration(text: &str) -> Result<u64, UnitError> {
    too_long(text, &DURATION)?;
    let trimmed = text.trim();
    if trimmed.contains(char::is_whitespace) {
        let fixed: String = trimmed.split_whitespace().collect();
        return Err(UnitError(format!(
            "{text:?} is not a duration: no space between the number and the unit; write {fixed:?}"
        )));
    }
    parse(trimmed, &DURATION)
}

/// [`parse_duration`], or a bare number of seconds (`"20"`, `"1.5"`): for
/// options that have always been documented in seconds.
pub fn parse_duration_or_secs(text: &str) -> Result<u64, UnitError> {
    too_long(text, &DURATION)?;
    let trimmed = text.trim();
    let bare = !trimmed.is_empty() && trimmed.chars().all(|c| c.is_ascii_digit() || c == '.');
    if bare {
        return parse(&format!("{trimmed}s"), &DURATION).map_err(|_| {
            UnitError(format!(
                "{text:?} is not a duration (expected a number of seconds, or e.g. \"30s\" or \"250ms\")"
            ))
        });
    }
    parse_duration(text)
}

/// Parses a buffer size into bytes: `B`, `KB` (or `kB`), `MB`, `GB`, `TB`
/// (powers of 1000) and `KiB`/`MiB`/`GiB`/`TiB` (powers of 1024);
/// case-sensitive. Zero is rejected.
pub fn parse_buffer(text: &str) -> Result<u64, UnitError> {
    parse(text, &BUFFER)
}

/// Spellings of "per second in bits" after a rate prefix, longest first.
const RATE_SUFFIXES: [&str; 5] = ["bits/s", "bit/s", "bps", "b/s", "bit"];

fn rate_prefix(prefix: &str) -> Option<u64> {
    match prefix {
        "" => Some(1),
        // `k` is the SI spelling, `K` the common one; neither is ambiguous.
        "K" | "k" => Some(1_000),
        "M" => Some(1_000_000),
        "G" => Some(1_000_000_000),
        "T" => Some(1_000_000_000_000),
        _ => None,
    }
}

fn rate_unit(unit: &str) -> Option<u64> {
    match RATE_SUFFIXES.iter().find_map(|s| unit.strip_suffix(s)) {
        Some(prefix) => rate_prefix(prefix),
        // A bare SI prefix ("10G"), but not a bare number.
        None if !unit.is_empty() => rate_prefix(unit),
        None => None,
    }
}

/// The accepted spelling of a rate prefix written in any case.
fn rate_prefix_fixed(lower: &str) -> Option<&'static str> {
    match lower {
        "" => Some(""),
        "k" => Some("K"),
        "m" => Some("M"),
        "g" => Some("G"),
        "t" => Some("T"),
        _ => None,
    }
}

fn rate_hint(unit: &str) -> Option<Hint> {
    if unit.is_empty() {
        // A bare number: no unit to correct.
        return None;
    }
    let lower = unit.to_ascii_lowercase();
    // Bytes where bits are meant: `GBps`, `GB/s`, `GB`. The `b` stands
    // first in what follows the prefix, so its case is checked there.
    for suffix in ["bps", "b/s", "b"] {
        let Some(prefix) = lower.strip_suffix(suffix) else {
            continue;
        };
        let Some(fixed) = rate_prefix_fixed(prefix) else {
            continue;
        };
        let bytes = unit[prefix.len()..].starts_with('B');
        if bytes {
            return Some(Hint {
                reason: "\"B\" is bytes",
                unit: format!("{fixed}bps"),
                note: " (bits per second)",
            });
        }
        if suffix == "b" {
            return Some(Hint {
                reason: "\"b\" is an amount of bits, not a rate",
                unit: format!("{fixed}bps"),
                note: "",
            });
        }
    }
    // Right letters, wrong case: `gbps`, `10g`, `500mbps` ("m" is milli).
    let (prefix, suffix) = match RATE_SUFFIXES.iter().find_map(|s| lower.strip_suffix(s)) {
        Some(p) => (p, &lower[p.len()..]),
        None => (lower.as_str(), ""),
    };
    let fixed = rate_prefix_fixed(prefix)?;
    Some(Hint {
        reason: CASE,
        unit: format!("{fixed}{suffix}"),
        note: "",
    })
}

fn delay_unit(unit: &str) -> Option<u64> {
    match unit {
        "ns" => Some(1),
        // Micro sign and Greek small mu look the same; accept both.
        "us" | "\u{b5}s" | "\u{3bc}s" => Some(1_000),
        "ms" => Some(1_000_000),
        "s" => Some(1_000_000_000),
        _ => None,
    }
}

fn delay_hint(unit: &str) -> Option<Hint> {
    let lower = unit.to_lowercase();
    delay_unit(&lower).map(|_| Hint {
        reason: CASE,
        unit: lower,
        note: "",
    })
}

fn duration_hint(unit: &str) -> Option<Hint> {
    if unit.is_empty() {
        return Some(Hint {
            reason: "a bare number has no unit",
            unit: "s".into(),
            note: " (or ms, us, ns)",
        });
    }
    delay_hint(unit)
}

fn buffer_unit(unit: &str) -> Option<u64> {
    match unit {
        "B" => Some(1),
        // `k` is the SI spelling, `K` the common one; neither is ambiguous.
        "KB" | "kB" => Some(1_000),
        "MB" => Some(1_000_000),
        "GB" => Some(1_000_000_000),
        "TB" => Some(1_000_000_000_000),
        "KiB" => Some(1 << 10),
        "MiB" => Some(1 << 20),
        "GiB" => Some(1 << 30),
        "TiB" => Some(1 << 40),
        _ => None,
    }
}

fn buffer_hint(unit: &str) -> Option<Hint> {
    let lower = unit.to_ascii_lowercase();
    let fixed = match lower.as_str() {
        "b" => "B",
        "kb" => "KB",
        "mb" => "MB",
        "gb" => "GB",
        "tb" => "TB",
        "kib" => "KiB",
        "mib" => "MiB",
        "gib" => "GiB",
        "tib" => "TiB",
        _ => return None,
    };
    Some(if unit.ends_with('b') {
        Hint {
            reason: "\"b\" is bits",
            unit: fixed.to_string(),
            note: " (bytes)",
        }
    } else {
        Hint {
            reason: CASE,
            unit: fixed.to_string(),
            note: "",
        }
    })
}

/// No quantity takes more than [`ECHO_CHARS`] characters; a longer text
/// (from a hostile or broken file) is refused with an excerpt, so that no
/// message repeats it whole.
fn too_long(text: &str, q: &Quantity) -> Result<(), UnitError> {
    if text.chars().nth(ECHO_CHARS).is_none() {
        return Ok(());
    }
    Err(UnitError(format!(
        "{} is not {} (expected e.g. {})",
        echo(text),
        q.what,
        q.example
    )))
}

fn parse(text: &str, q: &Quantity) -> Result<u64, UnitError> {
    too_long(text, q)?;
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
    let unit = unit.trim_start();

    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    if int.is_empty() && frac.is_empty() || frac.contains('.') {
        return Err(malformed());
    }
    let multiplier = match (q.unit)(unit) {
        Some(m) => m,
        None => {
            return Err(match (q.hint)(unit) {
                Some(h) => UnitError(format!(
                    "{text:?} is not {}: {}; write \"{number}{}\"{}",
                    q.what, h.reason, h.unit, h.note
                )),
                None => malformed(),
            })
        }
    };
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

// For people (tables, reports, plot labels): rounded, a space before the
// unit, units spelled as people read them. The one set every human output
// uses; `format_*` above are for files (exact, and parse back).

/// `n / unit` rounded to `decimals` decimals, trailing zeros dropped:
/// `decimal(2_500, 1_000, 2)` is `"2.5"`.
pub fn decimal(n: u64, unit: u64, decimals: u32) -> String {
    let scale = 10u128.pow(decimals);
    let unit = u128::from(unit.max(1));
    let scaled = (u128::from(n) * scale + unit / 2) / unit;
    let (whole, frac) = (scaled / scale, scaled % scale);
    if frac == 0 {
        return whole.to_string();
    }
    let frac = format!("{frac:0width$}", width = decimals as usize);
    format!("{whole}.{}", frac.trim_end_matches('0'))
}

/// A rate in the largest unit it reaches, to two decimals: `"2.5 Gbit/s"`,
/// `"33.33 Gbit/s"`, `"999 bit/s"`.
pub fn human_rate(bps: u64) -> String {
    let (unit, name) = match bps {
        b if b >= 1_000_000_000_000 => (1_000_000_000_000, "Tbit/s"),
        b if b >= 1_000_000_000 => (1_000_000_000, "Gbit/s"),
        b if b >= 1_000_000 => (1_000_000, "Mbit/s"),
        b if b >= 1_000 => (1_000, "kbit/s"),
        _ => (1, "bit/s"),
    };
    format!("{} {name}", decimal(bps, unit, 2))
}

/// A byte count in decimal (SI) units to one decimal: `"999 B"`,
/// `"1.1 kB"`, `"32 MB"`.
pub fn human_bytes(bytes: u64) -> String {
    let (unit, name) = match bytes {
        b if b >= 1_000_000_000_000 => (1_000_000_000_000, "TB"),
        b if b >= 1_000_000_000 => (1_000_000_000, "GB"),
        b if b >= 1_000_000 => (1_000_000, "MB"),
        b if b >= 1_000 => (1_000, "kB"),
        _ => return format!("{bytes} B"),
    };
    format!("{} {name}", decimal(bytes, unit, 1))
}

/// A configured size: in binary units when it is a whole number of them
/// (buffers are configured as "128MiB"), else as [`human_bytes`].
pub fn human_size(bytes: u64) -> String {
    [(1u64 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")]
        .into_iter()
        .find(|&(m, _)| bytes >= m && bytes % m == 0)
        .map_or_else(
            || human_bytes(bytes),
            |(m, name)| format!("{} {name}", bytes / m),
        )
}

/// A delay in ms to the microsecond; below a microsecond in ns: `"25 ms"`,
/// `"0.002 ms"`, `"750 ns"`.
pub fn human_delay(ns: u64) -> String {
    if ns > 0 && ns < 1_000 {
        return format!("{ns} ns");
    }
    format!("{} ms", decimal(ns, 1_000_000, 3))
}

/// A long duration (an uptime): `"45s"`, `"5m03s"`, `"1h02m03s"`,
/// `"2d01h02m"`.
pub fn human_duration(ms: u64) -> String {
    let s = ms / 1000;
    let (d, h, m, s) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m{s:02}s"),
        (0, _, _) => format!("{h}h{m:02}m{s:02}s"),
        _ => format!("{d}d{h:02}h{m:02}m"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        let ok = [
            ("200Gbps", 200_000_000_000),
            ("2.5Gbps", 2_500_000_000),
            ("10Gbit", 10_000_000_000),
            ("10Gbit/s", 10_000_000_000),
            ("10Gbits/s", 10_000_000_000),
            ("10Gb/s", 10_000_000_000),
            ("10G", 10_000_000_000),
            ("10 G", 10_000_000_000),
            ("500Mbps", 500_000_000),
            ("500M", 500_000_000),
            ("64Kbps", 64_000),
            ("64kbps", 64_000),
            ("64kbit", 64_000),
            ("64K", 64_000),
            ("9600bps", 9_600),
            ("9600bit/s", 9_600),
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
            "1.2.3Gbps",
            "-1Gbps",
            "1e9bps",
            "10Q",
            ".Gbps",
            "10Mibps",
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

    /// Bytes per second and wrong-case prefixes used to be read as bits per
    /// second (`100GBps` as 100 Gbit/s, 8 times too slow); now each is an
    /// error naming the spelling to write.
    #[test]
    fn ambiguous_rates_are_rejected_with_the_fix() {
        let cases = [
            (
                "100GBps",
                r#""100GBps" is not a rate: "B" is bytes; write "100Gbps" (bits per second)"#,
            ),
            (
                "100GB/s",
                r#""100GB/s" is not a rate: "B" is bytes; write "100Gbps" (bits per second)"#,
            ),
            (
                "20GB",
                r#""20GB" is not a rate: "B" is bytes; write "20Gbps" (bits per second)"#,
            ),
            (
                "200GBPS",
                r#""200GBPS" is not a rate: "B" is bytes; write "200Gbps" (bits per second)"#,
            ),
            (
                "64KBps",
                r#""64KBps" is not a rate: "B" is bytes; write "64Kbps" (bits per second)"#,
            ),
            (
                "9600Bps",
                r#""9600Bps" is not a rate: "B" is bytes; write "9600bps" (bits per second)"#,
            ),
            (
                "20 Gb",
                r#""20 Gb" is not a rate: "b" is an amount of bits, not a rate; write "20Gbps""#,
            ),
            (
                "200gbps",
                r#""200gbps" is not a rate: units are case-sensitive; write "200Gbps""#,
            ),
            (
                "500mbps",
                r#""500mbps" is not a rate: units are case-sensitive; write "500Mbps""#,
            ),
            (
                "500m",
                r#""500m" is not a rate: units are case-sensitive; write "500M""#,
            ),
            (
                "10gbit/s",
                r#""10gbit/s" is not a rate: units are case-sensitive; write "10Gbit/s""#,
            ),
            (
                "10GBIT",
                r#""10GBIT" is not a rate: units are case-sensitive; write "10Gbit""#,
            ),
            (
                "1tbps",
                r#""1tbps" is not a rate: units are case-sensitive; write "1Tbps""#,
            ),
        ];
        for (text, want) in cases {
            assert_eq!(parse_rate(text).unwrap_err().to_string(), want, "{text}");
        }
    }

    #[test]
    fn delays() {
        let ok = [
            ("25ms", 25_000_000),
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

    /// `MS` would be megaseconds; no spelling but the lower-case one is
    /// taken.
    #[test]
    fn wrong_case_delays_are_rejected_with_the_fix() {
        for (text, fixed) in [
            ("25MS", "25ms"),
            ("25Ms", "25ms"),
            ("100NS", "100ns"),
            ("1US", "1us"),
            ("2S", "2s"),
            ("1\u{b5}S", "1\u{b5}s"),
        ] {
            assert_eq!(
                parse_delay(text).unwrap_err().to_string(),
                format!("{text:?} is not a delay: units are case-sensitive; write {fixed:?}"),
            );
        }
    }

    #[test]
    fn buffers() {
        let ok = [
            ("32MB", 32_000_000),
            ("128MiB", 128 << 20),
            ("1.5KB", 1_500),
            ("1.5kB", 1_500),
            ("4KiB", 4_096),
            ("1GB", 1_000_000_000),
            ("2GiB", 2 << 30),
            ("1TB", 1_000_000_000_000),
            ("1TiB", 1 << 40),
            ("1500B", 1_500),
            ("1500 B", 1_500),
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

    /// `20Mb` used to be read as 20 megabytes; it says megabits.
    #[test]
    fn bits_and_wrong_case_buffers_are_rejected_with_the_fix() {
        let cases = [
            (
                "20Mb",
                r#""20Mb" is not a buffer size: "b" is bits; write "20MB" (bytes)"#,
            ),
            (
                "32mb",
                r#""32mb" is not a buffer size: "b" is bits; write "32MB" (bytes)"#,
            ),
            (
                "128Mib",
                r#""128Mib" is not a buffer size: "b" is bits; write "128MiB" (bytes)"#,
            ),
            (
                "1500b",
                r#""1500b" is not a buffer size: "b" is bits; write "1500B" (bytes)"#,
            ),
            (
                "32mB",
                r#""32mB" is not a buffer size: units are case-sensitive; write "32MB""#,
            ),
            (
                "1gB",
                r#""1gB" is not a buffer size: units are case-sensitive; write "1GB""#,
            ),
            (
                "128MIB",
                r#""128MIB" is not a buffer size: units are case-sensitive; write "128MiB""#,
            ),
            (
                "4kiB",
                r#""4kiB" is not a buffer size: units are case-sensitive; write "4KiB""#,
            ),
        ];
        for (text, want) in cases {
            assert_eq!(parse_buffer(text).unwrap_err().to_string(), want, "{text}");
        }
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

    #[test]
    fn human_forms_by_hand() {
        assert_eq!(decimal(2_500, 1_000, 2), "2.5");
        assert_eq!(decimal(1_996, 1_000, 2), "2");
        assert_eq!(human_rate(999), "999 bit/s");
        assert_eq!(human_rate(1_234_567), "1.23 Mbit/s");
        assert_eq!(human_rate(33_333_333_333), "33.33 Gbit/s");
        assert_eq!(human_rate(200_000_000_000), "200 Gbit/s");
        assert_eq!(human_rate(1_500_000_000_000), "1.5 Tbit/s");
        assert_eq!(human_bytes(999), "999 B");
        assert_eq!(human_bytes(1_049), "1 kB");
        assert_eq!(human_bytes(1_050), "1.1 kB");
        assert_eq!(human_bytes(73_000), "73 kB");
        assert_eq!(human_bytes(30_000_000), "30 MB");
        assert_eq!(human_size(128 << 20), "128 MiB");
        assert_eq!(human_size(250_000), "250 kB");
        assert_eq!(human_delay(0), "0 ms");
        assert_eq!(human_delay(750), "750 ns");
        assert_eq!(human_delay(1_500), "0.002 ms");
        assert_eq!(human_delay(25_000_000), "25 ms");
        assert_eq!(human_duration(45_999), "45s");
        assert_eq!(human_duration(303_000), "5m03s");
        assert_eq!(human_duration(2 * 86_400_000 + 3_720_000), "2d01h02m");
    }

    #[test]
    fn durations() {
        let ms = 1_000_000;
        assert_eq!(parse_duration("1.5s"), Ok(1_500 * ms));
        assert_eq!(parse_duration("250ms"), Ok(250 * ms));
        assert_eq!(parse_duration("100us"), Ok(100_000));
        assert_eq!(parse_duration("30s"), Ok(30_000 * ms));
        assert_eq!(parse_duration("0s"), Ok(0));
        assert_eq!(parse_duration_or_secs("20"), Ok(20_000 * ms));
        assert_eq!(parse_duration_or_secs("1.5"), Ok(1_500 * ms));
        assert_eq!(parse_duration_or_secs("0.25"), Ok(250 * ms));
        assert_eq!(parse_duration_or_secs("250ms"), Ok(250 * ms));
        type Parser = fn(&str) -> Result<u64, UnitError>;
        let (unit, or_secs): (Parser, Parser) = (parse_duration, parse_duration_or_secs);
        for (parse, text, message) in [
            (or_secs, "20 s", "\"20 s\" is not a duration: no space between the number and the unit; write \"20s\""),
            (or_secs, "20S", "\"20S\" is not a duration: units are case-sensitive; write \"20s\""),
            (unit, "25MS", "\"25MS\" is not a duration: units are case-sensitive; write \"25ms\""),
            (unit, "20", "\"20\" is not a duration: a bare number has no unit; write \"20s\" (or ms, us, ns)"),
            (or_secs, "-1", "\"-1\" is not a duration (expected e.g. \"30s\" or \"250ms\")"),
            (or_secs, "1.2.3", "\"1.2.3\" is not a duration (expected a number of seconds, or e.g. \"30s\" or \"250ms\")"),
            (unit, "1.5ns", "\"1.5ns\" is not a whole number of nanoseconds"),
        ] {
            assert_eq!(parse(text).unwrap_err().to_string(), message, "{text:?}");
        }
    }
}

//! Link capacity from the attributes an edge carries in either format.
//!
//! A speed the data gives must be usable: a value that is not a number, has
//! an unknown unit, or is not a physical link rate (zero, negative, below
//! [`MIN_RATE_BPS`], above [`MAX_RATE_BPS`]) is refused ([`Speed::Bad`])
//! rather than replaced by the default, which would hide the error in the
//! data. Only an edge with no speed at all takes the default.

use crate::error::echo;
use crate::units::{format_rate, parse_rate};

/// Lowest rate taken from the data: 1 kbit/s, the lowest any transform
/// produces ([`crate::MIN_SCALED_RATE_BPS`]); below it a link would take
/// seconds per frame.
pub const MIN_RATE_BPS: u64 = crate::MIN_SCALED_RATE_BPS;

/// Highest rate taken from the data: 100 Tbit/s. A fibre carries tens of
/// Tbit/s today, so more is an error in the data (a wrong unit), not a
/// link.
pub const MAX_RATE_BPS: u64 = 100_000_000_000_000;

/// What the data says about one edge's capacity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Speed {
    /// A capacity read from the data, bits/s, and the attribute(s) it came
    /// from as written (`LinkSpeed "2.5" G`), for the file's comments.
    Known {
        /// Bits per second.
        bps: u64,
        /// Where the value came from.
        from: String,
    },
    /// No capacity in the data: the link takes the default.
    Unknown {
        /// A free-text `LinkLabel` that is no rate (`LinkLabel "Lit
        /// Fibre"`), for the link's comment.
        label: Option<String>,
    },
    /// A capacity the data gives but that is no usable rate: the import is
    /// refused.
    Bad {
        /// The attribute(s) as written, cut to a readable length
        /// (`LinkSpeed "-5" G`).
        from: String,
        /// What is wrong (`is negative`).
        why: String,
    },
}

/// The capacity of an edge whose attribute `name` is `get(name)`.
///
/// The first of these the edge has decides (an empty value counts as
/// absent):
/// - `capacity` (NetworkX convention): a number is bits/s, a string may
///   carry a unit (`"10Gbps"`);
/// - Topology Zoo `LinkSpeed` with `LinkSpeedUnits` (`"2.5"` + `"G"`);
/// - Topology Zoo `LinkSpeedRaw`, bits/s (`"2500000000.0"`);
/// - Topology Zoo `LinkLabel` when it reads as a rate (`"10 Gbps"`,
///   `"2.5 Gbit/s"`) or a SONET level (`"OC-192c"` = 192 x 51.84 Mbit/s);
///   a label is free text, so one that does not ("Lit Fibre") is no speed.
///
/// Numbers are read exactly as decimals (no floating point), with an
/// optional exponent (`1e10`, as Python writes large floats).
pub fn edge_speed(get: impl Fn(&str) -> Option<String>) -> Speed {
    let present = |name: &str| get(name).filter(|v| !v.trim().is_empty());
    if let Some(c) = present("capacity") {
        let c = c.trim();
        let (number, unit) = split_unit(c);
        // A bare number is bits/s.
        let unit = if unit.is_empty() { "bps" } else { unit };
        return rate(number, unit, format!("capacity {}", echo(c)));
    }
    if let Some(speed) = present("LinkSpeed") {
        let units = get("LinkSpeedUnits").unwrap_or_default();
        let (s, u) = (speed.trim(), units.trim());
        // The field holds only the prefix letter, so its case cannot mean
        // milli or bytes: upper-case it for the case-sensitive rate parser.
        // No unit would make the number bits/s, which the Zoo never means.
        let unit = u.to_ascii_uppercase();
        if !matches!(unit.as_str(), "K" | "M" | "G" | "T") {
            return Speed::Bad {
                from: format!("LinkSpeed {} {}", echo(s), echo(u)),
                why: "has no known unit (LinkSpeedUnits is K, M, G or T)".into(),
            };
        }
        return rate(
            s,
            &format!("{unit}bps"),
            format!("LinkSpeed {} {u}", echo(s)),
        );
    }
    if let Some(raw) = present("LinkSpeedRaw") {
        let r = raw.trim();
        return rate(r, "bps", format!("LinkSpeedRaw {}", echo(r)));
    }
    let Some(label) = present("LinkLabel") else {
        return Speed::Unknown { label: None };
    };
    let l = label.trim();
    let from = format!("LinkLabel {}", echo(l));
    // A label is a speed only if it reads as a number with a rate unit (or
    // a SONET level); then it must be a usable one.
    let (number, unit) = split_unit(l);
    if !number.is_empty() && parse_rate(&format!("1{unit}")).is_ok() {
        return rate(number, unit, from);
    }
    match sonet(l) {
        Some(bps) => checked(bps, from),
        None => Speed::Unknown { label: Some(from) },
    }
}

/// `s` split into a leading number (sign, digits, point, exponent) and
/// the rest, its unit (`"2.5 Gbps"` -> `"2.5"`, `" Gbps"`).
fn split_unit(s: &str) -> (&str, &str) {
    let b = s.as_bytes();
    let sign = usize::from(matches!(b.first(), Some(b'-' | b'+')));
    let mut i = sign
        + b[sign..]
            .iter()
            .take_while(|c| c.is_ascii_digit() || **c == b'.')
            .count();
    // An `e` starts an exponent only if digits follow (`1e10`, `1E-3`);
    // otherwise it is the unit's.
    if matches!(b.get(i), Some(b'e' | b'E')) {
        let j = i + 1 + usize::from(matches!(b.get(i + 1), Some(b'-' | b'+')));
        let digits = b[j.min(b.len())..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        if digits > 0 {
            i = j + digits;
        }
    }
    s.split_at(i)
}

/// The speed `number` x `unit` (a unit `parse_rate` reads: `"bps"`,
/// `"Gbps"`, `" Mbit/s"`), taken from `from`.
fn rate(number: &str, unit: &str, from: String) -> Speed {
    let why = match plain_number(number) {
        Err(why) => why,
        Ok(plain) => match parse_rate(&format!("1{unit}")) {
            Err(_) => format!("has an unknown unit {}", echo(unit.trim())),
            Ok(multiplier) => {
                // The range first, roughly: a number too long or too large
                // for the exact parser is still called what it is.
                let approx = plain.parse::<f64>().unwrap_or(0.0) * multiplier as f64;
                if approx == 0.0 {
                    "is zero".into()
                } else if approx < MIN_RATE_BPS as f64 {
                    format!("is below {}", format_rate(MIN_RATE_BPS))
                } else if approx > MAX_RATE_BPS as f64 {
                    format!("is above {}", format_rate(MAX_RATE_BPS))
                } else {
                    match parse_rate(&format!("{plain}{unit}")) {
                        Ok(bps) => return checked(bps, from),
                        Err(_) => "is not a whole number of bit/s".into(),
                    }
                }
            }
        },
    };
    Speed::Bad { from, why }
}

/// `bps` if it is a physical link rate, else why not (the exact check at
/// the bounds).
fn checked(bps: u64, from: String) -> Speed {
    let why = if bps < MIN_RATE_BPS {
        format!(
            "is {}, below {}",
            format_rate(bps),
            format_rate(MIN_RATE_BPS)
        )
    } else if bps > MAX_RATE_BPS {
        format!(
            "is {}, above {}",
            format_rate(bps),
            format_rate(MAX_RATE_BPS)
        )
    } else {
        return Speed::Known { bps, from };
    };
    Speed::Bad { from, why }
}

/// A non-negative decimal number with an optional exponent (`2.5`,
/// `1e10`, `2.5E+9`) written out without one (`2.5`, `10000000000`,
/// `2500000000`), or why it is none.
fn plain_number(s: &str) -> Result<String, String> {
    let not_a_number = || "is not a number".to_string();
    let lower = s.to_ascii_lowercase();
    if matches!(
        lower.trim_start_matches(['+', '-']),
        "nan" | "inf" | "infinity"
    ) {
        return Err("is not a finite number".into());
    }
    if lower.starts_with('-') && lower[1..].parse::<f64>().is_ok() {
        return Err("is negative".into());
    }
    let (mantissa, exponent) = lower.split_once('e').unwrap_or((&lower, "0"));
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = |d: &str| d.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() && frac.is_empty() || !digits(int) || !digits(frac) {
        return Err(not_a_number());
    }
    let all = format!("{int}{frac}");
    let magnitude = exponent.trim_start_matches(['+', '-']);
    if magnitude.is_empty() || !digits(magnitude) {
        return Err(not_a_number());
    }
    if magnitude.len() > 2 {
        // 1e300 and the like: beyond any rate whatever the unit, and not
        // worth writing out.
        return Err(if all.bytes().all(|b| b == b'0') {
            "is zero".into()
        } else if exponent.starts_with('-') {
            format!("is below {}", format_rate(MIN_RATE_BPS))
        } else {
            format!("is above {}", format_rate(MAX_RATE_BPS))
        });
    }
    let exponent: i64 = exponent.parse().map_err(|_| not_a_number())?;
    // Move the decimal point by the exponent.
    let point = int.len() as i64 + exponent;
    Ok(if point <= 0 {
        format!("0.{}{all}", "0".repeat(point.unsigned_abs() as usize))
    } else if point as usize >= all.len() {
        format!("{all}{}", "0".repeat(point as usize - all.len()))
    } else {
        let (i, f) = all.split_at(point as usize);
        format!("{i}.{f}")
    })
}

/// `OC-<n>` (optionally with a trailing `c`, concatenated): n x 51.84 Mbit/s.
fn sonet(label: &str) -> Option<u64> {
    let lower = label.to_ascii_lowercase();
    let rest = lower
        .strip_prefix("oc-")
        .or_else(|| lower.strip_prefix("oc"))?;
    let n = rest.strip_suffix('c').unwrap_or(rest);
    let n: u64 = n.parse().ok().filter(|&n| n > 0)?;
    n.checked_mul(51_840_000)
}

impl Speed {
    /// A short description for a link comment.
    pub fn describe(&self, default_bps: u64) -> String {
        match self {
            Speed::Known { from, .. } => format!("rate from {from}"),
            Speed::Unknown { label: None } => {
                format!("no speed in the data: default {}", format_rate(default_bps))
            }
            Speed::Unknown { label: Some(l) } => {
                format!("{l} is no rate: default {}", format_rate(default_bps))
            }
            Speed::Bad { from, why } => format!("{from} {why}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn speed(attrs: &[(&str, &str)]) -> Speed {
        edge_speed(|k| {
            attrs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        })
    }

    fn bps(s: Speed) -> Option<u64> {
        match s {
            Speed::Known { bps, .. } => Some(bps),
            other => panic!("{other:?}"),
        }
    }

    /// `from` and `why` of a refused speed.
    fn bad(attrs: &[(&str, &str)]) -> String {
        match speed(attrs) {
            Speed::Bad { from, why } => format!("{from} {why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn sources_in_order() {
        assert_eq!(
            bps(speed(&[("capacity", "10000000000")])),
            Some(10_000_000_000)
        );
        assert_eq!(bps(speed(&[("capacity", "2.5Gbps")])), Some(2_500_000_000));
        assert_eq!(
            bps(speed(&[("LinkSpeed", "2.5"), ("LinkSpeedUnits", "G")])),
            Some(2_500_000_000)
        );
        // A lower-case Zoo prefix letter still means giga.
        assert_eq!(
            bps(speed(&[("LinkSpeed", "2.5"), ("LinkSpeedUnits", "g")])),
            Some(2_500_000_000)
        );
        assert_eq!(
            bps(speed(&[("LinkSpeedRaw", "45000000.0")])),
            Some(45_000_000)
        );
        // LinkSpeed wins over LinkSpeedRaw and LinkLabel.
        assert_eq!(
            bps(speed(&[
                ("LinkSpeed", "155"),
                ("LinkSpeedUnits", "M"),
                ("LinkSpeedRaw", "1.0"),
                ("LinkLabel", "1 Gbps")
            ])),
            Some(155_000_000)
        );
        assert_eq!(
            bps(speed(&[("LinkLabel", "2.5 Gbit/s")])),
            Some(2_500_000_000)
        );
        // OC-192: 192 x 51_840_000 = 9_953_280_000 bit/s.
        assert_eq!(bps(speed(&[("LinkLabel", "OC-192c")])), Some(9_953_280_000));
        assert_eq!(bps(speed(&[("LinkLabel", "OC3")])), Some(155_520_000));
        // Exponents, as Python writes large floats: 1e10 = 10 Gbit/s,
        // 2.5E+9 = 2.5 Gbit/s, 1.5e-3 T = 1.5 Gbit/s.
        assert_eq!(
            bps(speed(&[("LinkSpeedRaw", "1e10")])),
            Some(10_000_000_000)
        );
        assert_eq!(bps(speed(&[("capacity", "2.5E+9")])), Some(2_500_000_000));
        assert_eq!(
            bps(speed(&[("LinkSpeed", "1.5e-3"), ("LinkSpeedUnits", "T")])),
            Some(1_500_000_000)
        );
        // The bounds themselves are rates.
        assert_eq!(bps(speed(&[("capacity", "1000")])), Some(1_000));
        assert_eq!(
            bps(speed(&[("capacity", "100Tbps")])),
            Some(100_000_000_000_000)
        );
    }

    #[test]
    fn a_speed_given_must_be_a_physical_rate() {
        let g = |v: &'static str| bad(&[("LinkSpeed", v), ("LinkSpeedUnits", "G")]);
        assert_eq!(g("0"), "LinkSpeed \"0\" G is zero");
        assert_eq!(g("-5"), "LinkSpeed \"-5\" G is negative");
        assert_eq!(g("NaN"), "LinkSpeed \"NaN\" G is not a finite number");
        assert_eq!(g("inf"), "LinkSpeed \"inf\" G is not a finite number");
        assert_eq!(g("fast"), "LinkSpeed \"fast\" G is not a number");
        // 0.0000005 G = 500 bit/s; 100001 G = 100.001 Tbit/s.
        assert_eq!(g("0.0000005"), "LinkSpeed \"0.0000005\" G is below 1Kbps");
        assert_eq!(g("100001"), "LinkSpeed \"100001\" G is above 100Tbps");
        // A fraction of a bit/s: 1.0000000001 G = 1000000000.1 bit/s.
        assert_eq!(
            g("1.0000000001"),
            "LinkSpeed \"1.0000000001\" G is not a whole number of bit/s"
        );
        assert_eq!(
            bad(&[("LinkSpeed", "1e30"), ("LinkSpeedUnits", "T")]),
            "LinkSpeed \"1e30\" T is above 100Tbps"
        );
        assert_eq!(g("1e-300"), "LinkSpeed \"1e-300\" G is below 1Kbps");
        assert_eq!(
            bad(&[("LinkSpeed", "10"), ("LinkSpeedUnits", "Q")]),
            "LinkSpeed \"10\" \"Q\" has no known unit (LinkSpeedUnits is K, M, G or T)"
        );
        // The Zoo always gives the unit with the speed.
        assert_eq!(
            bad(&[("LinkSpeed", "10")]),
            "LinkSpeed \"10\" \"\" has no known unit (LinkSpeedUnits is K, M, G or T)"
        );
        assert_eq!(
            bad(&[("capacity", "lots")]),
            "capacity \"lots\" is not a number"
        );
        assert_eq!(
            bad(&[("capacity", "10Qbps")]),
            "capacity \"10Qbps\" has an unknown unit \"Qbps\""
        );
        assert_eq!(bad(&[("capacity", "-5")]), "capacity \"-5\" is negative");
        assert_eq!(bad(&[("capacity", "0")]), "capacity \"0\" is zero");
        assert_eq!(
            bad(&[("LinkSpeedRaw", "1e999")]),
            "LinkSpeedRaw \"1e999\" is above 100Tbps"
        );
        // A label that reads as a rate is one, and must be usable.
        assert_eq!(
            bad(&[("LinkLabel", "0 Gbps")]),
            "LinkLabel \"0 Gbps\" is zero"
        );
        // The first attribute given decides: a bad capacity is not
        // overridden by a good LinkSpeed.
        assert_eq!(
            bad(&[
                ("capacity", "lots"),
                ("LinkSpeed", "10"),
                ("LinkSpeedUnits", "G")
            ]),
            "capacity \"lots\" is not a number"
        );
        // A control byte is escaped, a long value cut to 100 characters.
        assert_eq!(
            bad(&[("capacity", "\u{1b}[2J")]),
            "capacity \"\\u{1b}[2J\" is not a number"
        );
        let long = "x".repeat(1_000);
        assert_eq!(
            bad(&[("capacity", &long)]),
            format!(
                "capacity \"{}\"... (1000 bytes) is not a number",
                "x".repeat(100)
            )
        );
    }

    #[test]
    fn unknown() {
        assert_eq!(speed(&[]), Speed::Unknown { label: None });
        // Empty values are no values; units alone are no speed.
        assert_eq!(
            speed(&[
                ("LinkSpeed", " "),
                ("capacity", ""),
                ("LinkSpeedUnits", "G")
            ]),
            Speed::Unknown { label: None }
        );
        // A label is free text: one that is no rate is no speed.
        let lit = speed(&[("LinkLabel", "Lit Fibre")]);
        assert_eq!(
            lit,
            Speed::Unknown {
                label: Some("LinkLabel \"Lit Fibre\"".into())
            }
        );
        assert_eq!(
            lit.describe(10_000_000_000),
            "LinkLabel \"Lit Fibre\" is no rate: default 10Gbps"
        );
        assert_eq!(
            speed(&[("LinkLabel", "34/45 Mbit/s")]).describe(1_000_000_000),
            "LinkLabel \"34/45 Mbit/s\" is no rate: default 1Gbps"
        );
    }
}

//! Link capacity from the attributes an edge carries in either format.

use crate::units::{format_rate, parse_rate};

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
    /// No capacity attribute, or none that could be read (then what was
    /// there, e.g. `LinkLabel "Lit Fibre"`).
    Unknown {
        /// The unreadable attributes, if any.
        unreadable: Option<String>,
    },
}

/// The capacity of an edge whose attribute `name` is `get(name)`.
///
/// Tried in order, the first readable wins:
/// - `capacity` (NetworkX convention): a number is bits/s, a string may
///   carry a unit (`"10Gbps"`);
/// - Topology Zoo `LinkSpeed` with `LinkSpeedUnits` (`"2.5"` + `"G"`);
/// - Topology Zoo `LinkSpeedRaw`, bits/s (`"2500000000.0"`);
/// - Topology Zoo `LinkLabel` when it is a rate (`"10 Gbps"`, `"2.5 Gbit/s"`)
///   or a SONET level (`"OC-192c"` = 192 x 51.84 Mbit/s).
///
/// Values are read exactly as decimals (no floating point).
pub fn edge_speed(get: impl Fn(&str) -> Option<String>) -> Speed {
    let mut seen = Vec::new();
    if let Some(c) = get("capacity") {
        let c = c.trim().to_string();
        let bare_number = c.bytes().all(|b| b.is_ascii_digit() || b == b'.');
        let parsed = if bare_number {
            parse_rate(&format!("{c}bps"))
        } else {
            parse_rate(&c)
        };
        match parsed {
            Ok(bps) => {
                return Speed::Known {
                    bps,
                    from: format!("capacity {c:?}"),
                }
            }
            Err(_) => seen.push(format!("capacity {c:?}")),
        }
    }
    if let Some(speed) = get("LinkSpeed") {
        let units = get("LinkSpeedUnits").unwrap_or_default();
        let (s, u) = (speed.trim(), units.trim());
        // An empty unit would make the number bits/s; the Zoo always
        // gives one (K, M, G, T) where the speed is known. The field holds
        // only that prefix letter, so its case cannot mean milli or bytes:
        // upper-case it for the case-sensitive rate parser.
        let parsed = if u.is_empty() {
            Err(())
        } else {
            parse_rate(&format!("{s}{}bps", u.to_ascii_uppercase())).map_err(|_| ())
        };
        match parsed {
            Ok(bps) => {
                return Speed::Known {
                    bps,
                    from: format!("LinkSpeed {s:?} {u}"),
                }
            }
            Err(()) => seen.push(format!("LinkSpeed {s:?} {u:?}")),
        }
    }
    if let Some(raw) = get("LinkSpeedRaw") {
        let r = raw.trim();
        match parse_rate(&format!("{r}bps")) {
            Ok(bps) => {
                return Speed::Known {
                    bps,
                    from: format!("LinkSpeedRaw {r}"),
                }
            }
            Err(_) => seen.push(format!("LinkSpeedRaw {r:?}")),
        }
    }
    if let Some(label) = get("LinkLabel") {
        let l = label.trim();
        match parse_rate(l).ok().or_else(|| sonet(l)) {
            Some(bps) => {
                return Speed::Known {
                    bps,
                    from: format!("LinkLabel {l:?}"),
                }
            }
            // A label is free text and often no rate at all ("Lit Fibre"):
            // only worth a note, like the other unreadable attributes.
            None => seen.push(format!("LinkLabel {l:?}")),
        }
    }
    Speed::Unknown {
        unreadable: (!seen.is_empty()).then(|| seen.join(", ")),
    }
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
            Speed::Unknown { unreadable: None } => {
                format!("no speed in the data: default {}", format_rate(default_bps))
            }
            Speed::Unknown {
                unreadable: Some(what),
            } => format!("unreadable {what}: default {}", format_rate(default_bps)),
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
            Speed::Unknown { .. } => None,
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
    }

    #[test]
    fn unknown() {
        assert_eq!(speed(&[]), Speed::Unknown { unreadable: None });
        assert_eq!(
            speed(&[("LinkLabel", "Lit Fibre"), ("LinkSpeedRaw", "1e10")]),
            Speed::Unknown {
                unreadable: Some("LinkSpeedRaw \"1e10\", LinkLabel \"Lit Fibre\"".into())
            }
        );
        assert_eq!(
            speed(&[("LinkSpeed", "10")]).describe(10_000_000_000),
            "unreadable LinkSpeed \"10\" \"\": default 10Gbps"
        );
    }
}

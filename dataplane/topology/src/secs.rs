//! Durations in seconds on the command line and in experiment files: a
//! bare number of seconds (`30`, `1.5`), as the options and files have
//! always taken, or a value with a unit (`"30s"`, `"250ms"`, `"100us"`),
//! parsed by the topology's one unit parser
//! ([`crate::units::parse_duration_or_secs`]).

use serde::de::{self, Deserializer, Visitor};

/// Parses a command-line duration into seconds.
pub fn parse(text: &str) -> Result<f64, String> {
    crate::units::parse_duration_or_secs(text)
        .map(|ns| ns as f64 / 1e9)
        .map_err(|e| e.to_string())
}

struct SecsVisitor;

impl Visitor<'_> for SecsVisitor {
    type Value = f64;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a number of seconds or a duration with a unit such as \"30s\" or \"250ms\"")
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<f64, E> {
        Ok(v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<f64, E> {
        Ok(v as f64)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<f64, E> {
        Ok(v as f64)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<f64, E> {
        parse(v).map_err(E::custom)
    }
}

/// `deserialize_with` for seconds: a number, or a string with a unit.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    d.deserialize_any(SecsVisitor)
}

/// `deserialize_with` for optional seconds (with `#[serde(default)]`).
pub fn deserialize_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    deserialize(d).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    struct T {
        #[serde(deserialize_with = "deserialize")]
        d: f64,
    }

    fn toml_secs(v: &str) -> Result<f64, String> {
        toml::from_str::<T>(&format!("d = {v}"))
            .map(|t| t.d)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn numbers_and_units() {
        assert_eq!(parse("20"), Ok(20.0));
        assert_eq!(parse("1.5s"), Ok(1.5));
        assert_eq!(parse("250ms"), Ok(0.25));
        assert_eq!(parse("100us"), Ok(0.0001));
        assert!(parse("20 s").unwrap_err().contains("write \"20s\""));
        assert!(parse("20S")
            .unwrap_err()
            .contains("case-sensitive; write \"20s\""));
        assert_eq!(toml_secs("30"), Ok(30.0));
        assert_eq!(toml_secs("2.5"), Ok(2.5));
        assert_eq!(toml_secs("\"30s\""), Ok(30.0));
        assert_eq!(toml_secs("\"1500ms\""), Ok(1.5));
        let e = toml_secs("\"30 s\"").unwrap_err();
        assert!(
            e.contains("no space between the number and the unit"),
            "{e}"
        );
        let e = toml_secs("true").unwrap_err();
        assert!(e.contains("a number of seconds or a duration"), "{e}");
    }
}

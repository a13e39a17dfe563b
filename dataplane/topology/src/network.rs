//! A network file of either kind, parsed once: a DCI topology
//! ([`Topology`]: `[[switch]]`, `[[link]]`, ...) or a rotor network
//! ([`RotorNetwork`]: one `[rotor]` table).
//!
//! The kind is decided by parsing the file's top-level sections into one
//! structure that knows both kinds' sections: a file with only DCI sections
//! is a topology, one with only `[rotor]` a rotor network, anything else
//! (both, neither, an unknown section) is refused with one message. The
//! kind's own parser then reads the file, so its errors keep their line and
//! field.
//!
//! Files are read with a size bound ([`MAX_FILE_BYTES`]): `--topology
//! /dev/zero` is an error, not an unbounded read.
//!
//! ```
//! use lcmp_topology::network::Network;
//!
//! let net = Network::parse("[[switch]]\nname = \"s1\"\n", "one.toml")?;
//! assert!(matches!(net, Network::Dci(_)));
//! let e = Network::parse("[rotor]\n[[switch]]\nname = \"s1\"\n", "both.toml").unwrap_err();
//! assert!(e.to_string().starts_with("both.toml: mixes"));
//! # Ok::<(), lcmp_topology::network::NetworkError>(())
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use serde::de::IgnoredAny;
use serde::Deserialize;

use crate::rotor::RotorError;
use crate::rotor_net::RotorNetwork;
use crate::{TomlError, Topology, TopologyError};

pub use crate::{read_text, MAX_FILE_BYTES};

/// A network file of either kind.
#[derive(Clone, Debug, PartialEq)]
pub enum Network {
    /// A DCI topology: LCMP switches, hosts, links.
    Dci(Topology),
    /// A rotor network: ToRs and rotors on a slot schedule.
    Rotor(RotorNetwork),
}

/// Why a network file could not be read, or what is wrong with it.
#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    /// Unreadable, too big or not text ([`read_text`]'s message).
    #[error("{0}")]
    Read(String),
    /// Not TOML, or of no (or both) kinds.
    #[error("{file}: {message}")]
    File {
        /// The path (or source name) as given.
        file: String,
        /// What is wrong.
        message: String,
    },
    /// A DCI topology that is not valid.
    #[error(transparent)]
    Dci(#[from] TopologyError),
    /// A rotor network that is not valid.
    #[error(transparent)]
    Rotor(#[from] RotorError),
}

/// The top-level sections of both kinds. Only their presence is read
/// here; the kind's parser reads their contents.
#[derive(Deserialize)]
struct Sections {
    rotor: Option<IgnoredAny>,
    defaults: Option<IgnoredAny>,
    dc: Option<IgnoredAny>,
    switch: Option<IgnoredAny>,
    host: Option<IgnoredAny>,
    link: Option<IgnoredAny>,
    #[serde(flatten)]
    other: BTreeMap<String, IgnoredAny>,
}

const DCI_SECTIONS: &str = "[defaults], [[dc]], [[switch]], [[host]], [[link]]";

impl Network {
    /// Reads (at most [`MAX_FILE_BYTES`]) and parses the file at `path`;
    /// errors name the path.
    pub fn load(path: &Path) -> Result<Network, NetworkError> {
        let text = read_text(path, MAX_FILE_BYTES).map_err(NetworkError::Read)?;
        Network::parse(&text, &path.display().to_string())
    }

    /// Parses a network file's text; `source` names it in errors.
    pub fn parse(text: &str, source: &str) -> Result<Network, NetworkError> {
        let fail = |message: String| NetworkError::File {
            file: source.to_string(),
            message,
        };
        let s: Sections = toml::from_str(text).map_err(|e| {
            let TomlError { line, message, .. } = TomlError::new(text, &e);
            match line {
                Some(l) => NetworkError::File {
                    file: format!("{source}:{l}"),
                    message,
                },
                None => fail(message),
            }
        })?;
        let dci = [&s.defaults, &s.dc, &s.switch, &s.host, &s.link]
            .iter()
            .any(|x| x.is_some());
        match (s.rotor.is_some(), dci) {
            (true, true) => Err(fail(format!(
                "mixes a rotor network ([rotor]) with DCI topology sections ({DCI_SECTIONS}); a file is one or the other"
            ))),
            (true, false) => Ok(Network::Rotor(RotorNetwork::parse(text, source)?)),
            (false, true) => Ok(Network::Dci(Topology::parse(text, source)?)),
            (false, false) => Err(fail(match s.other.keys().next() {
                Some(k) => format!(
                    "unknown section `{k}`: a DCI topology has {DCI_SECTIONS}, a rotor network one [rotor] table"
                ),
                None => format!(
                    "empty: neither a DCI topology ({DCI_SECTIONS}) nor a rotor network ([rotor])"
                ),
            })),
        }
    }

    /// "dci" or "rotor", for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Network::Dci(_) => "dci",
            Network::Rotor(_) => "rotor",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DCI: &str = "[[switch]]\nname = \"s1\"\nprefixes = [\"10.0.1.0/24\"]\n\n\
                       [[switch]]\nname = \"s2\"\n\n\
                       [[link]]\na = \"s1\"\nb = \"s2\"\nrate = \"1Gbps\"\ndelay = \"5ms\"\n";

    fn rotor_text() -> String {
        let s = crate::rotor::complete(4, 2).unwrap();
        RotorNetwork::from_schedule(&s, 1_000_000, 100_000).to_toml()
    }

    fn message(text: &str) -> String {
        Network::parse(text, "n.toml").unwrap_err().to_string()
    }

    #[test]
    fn each_kind_is_parsed_by_its_own_parser() {
        match Network::parse(DCI, "d.toml").unwrap() {
            Network::Dci(t) => assert_eq!(t.switches().len(), 2),
            other => panic!("{other:?}"),
        }
        match Network::parse(&rotor_text(), "r.toml").unwrap() {
            Network::Rotor(n) => assert_eq!((n.tors, n.rotors, n.per_rotor), (4, 2, 2)),
            other => panic!("{other:?}"),
        }
        // A bad field keeps the kind's located error.
        let e = message(&DCI.replace("\"1Gbps\"", "\"fast\""));
        assert!(e.starts_with("n.toml:11: link[0].rate:"), "{e}");
        let e = message(&rotor_text().replace("tors = 4", "tors = 1"));
        assert_eq!(e, "n.toml: tors = 1: need 2 to 250");
    }

    #[test]
    fn a_file_of_both_kinds_of_neither_or_unknown_is_one_clear_error() {
        let both = format!("{}\n{DCI}", rotor_text());
        assert_eq!(
            message(&both),
            format!("n.toml: mixes a rotor network ([rotor]) with DCI topology sections ({DCI_SECTIONS}); a file is one or the other")
        );
        assert_eq!(
            message("[router]\nname = \"x\"\n"),
            format!("n.toml: unknown section `router`: a DCI topology has {DCI_SECTIONS}, a rotor network one [rotor] table")
        );
        assert!(message("# nothing\n").starts_with("n.toml: empty: neither"));
        // Not TOML at all: the line of the syntax error.
        let e = message("[[switch]]\nname = \"s1\"\nprefixes = [\n");
        assert!(e.starts_with("n.toml:3: "), "{e}");
        // A section named like a key inside the other kind's table is not
        // a kind: `rotor` nested under a switch is the DCI parser's error.
        let e = message("[[switch]]\nname = \"s1\"\nrotor = 1\n");
        assert!(e.contains("switch[0]"), "{e}");
    }

    /// toml gives no line for a key of more than 80 parts: found, for a
    /// file of either kind and for a rotor network read as one.
    #[test]
    fn a_key_nested_too_deep_is_located() {
        let deep = format!("{} = 1\n", vec!["a"; 81].join("."));
        let what = "a dotted key of more than 80 parts; the TOML reader nests at most 80";
        // DCI's 12 lines, then the key.
        assert_eq!(
            message(&format!("{DCI}{deep}")),
            format!("n.toml:13: {what}")
        );
        let e = RotorNetwork::parse(&format!("[rotor]\n{deep}"), "r.toml").unwrap_err();
        assert_eq!(e.0, format!("r.toml:2: {what}"));
    }

    #[test]
    fn reading_stops_at_the_limit() {
        let e = Network::load(Path::new("/dev/zero")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "/dev/zero: larger than 16 MiB (the limit for a network file)"
        );
        let dir = std::env::temp_dir().join(format!("lcmp-network-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let big = dir.join("big.toml");
        // A comment line padding a valid file past the limit.
        let mut text = String::from(DCI);
        text.push('#');
        text.push_str(&"x".repeat(MAX_FILE_BYTES as usize));
        std::fs::write(&big, &text).unwrap();
        let e = Network::load(&big).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}: larger than 16 MiB (the limit for a network file)",
                big.display()
            )
        );
        // Exactly at the limit is read (a smaller bound keeps this fast).
        let small = dir.join("small.toml");
        std::fs::write(&small, DCI).unwrap();
        let n = DCI.len() as u64;
        assert_eq!(read_text(&small, n).unwrap(), DCI);
        assert_eq!(
            read_text(&small, n - 1).unwrap_err().to_string(),
            format!(
                "{}: larger than {} bytes (the limit for a network file)",
                small.display(),
                n - 1
            )
        );
        std::fs::write(&small, b"[[switch]]\nname = \"\xff\"\n").unwrap();
        assert_eq!(
            Network::load(&small).unwrap_err().to_string(),
            format!(
                "{}: not UTF-8 text (invalid byte at offset 19)",
                small.display()
            )
        );
        let missing = dir.join("missing.toml");
        assert!(Network::load(&missing)
            .unwrap_err()
            .to_string()
            .starts_with(&format!("{}: No such file", missing.display())));
        let _ = std::fs::remove_dir_all(&dir);
    }
}

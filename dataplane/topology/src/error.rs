//! The one error type of this crate.

use std::ops::Range;

/// Why a topology file could not be read or is not valid.
///
/// `Display` names the file, the line and the field path, e.g.
/// `topologies/x.toml:14: link[3].rate: "20Gbs" is not a rate (expected e.g. "200Gbps")`.
/// Array indices in field paths are 0-based (`link[3]` is the fourth `[[link]]`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TopologyError {
    /// The file could not be read.
    #[error("{file}: {error}")]
    Io {
        /// The path as given.
        file: String,
        /// The underlying error.
        #[source]
        error: std::io::Error,
    },
    /// The file was read but is not valid TOML or not a valid topology.
    #[error("{}{message}", location(.file, .line, .field))]
    Invalid {
        /// The source name given to [`crate::Topology::parse`] (usually the path).
        file: String,
        /// 1-based line number, when the position is known.
        line: Option<usize>,
        /// Field path such as `link[3].rate`, when known.
        field: Option<String>,
        /// What is wrong.
        message: String,
    },
    /// A transform of a valid topology ([`crate::Topology::scaled`],
    /// [`crate::Topology::with_generated_hosts`]) cannot be applied, e.g.
    /// `topologies/8dc.toml: link[0].rate: 200Gbps scaled by 1000000000 is
    /// 200bps (link dc1 - dc2), below the 1Kbps minimum`.
    #[error("{}{message}", location(.file, &None, .field))]
    Transform {
        /// The source name of the topology being transformed.
        file: String,
        /// The entity or field concerned, such as `link[3].rate` or
        /// `switch[2].prefixes[0]`, when there is one.
        field: Option<String>,
        /// What is wrong.
        message: String,
    },
}

fn location(file: &str, line: &Option<usize>, field: &Option<String>) -> String {
    let mut out = file.to_string();
    if let Some(line) = line {
        out.push_str(&format!(":{line}"));
    }
    out.push_str(": ");
    if let Some(field) = field {
        out.push_str(field);
        out.push_str(": ");
    }
    out
}

impl TopologyError {
    /// The file (source name) the error is about.
    pub fn file(&self) -> &str {
        match self {
            Self::Io { file, .. } | Self::Invalid { file, .. } | Self::Transform { file, .. } => {
                file
            }
        }
    }

    /// The 1-based line, if known.
    pub fn line(&self) -> Option<usize> {
        match self {
            Self::Io { .. } | Self::Transform { .. } => None,
            Self::Invalid { line, .. } => *line,
        }
    }

    /// The field path (e.g. `link[3].rate`), if known.
    pub fn field(&self) -> Option<&str> {
        match self {
            Self::Io { .. } => None,
            Self::Invalid { field, .. } | Self::Transform { field, .. } => field.as_deref(),
        }
    }
}

/// Most characters of a value from the input that a message or a
/// generated file repeats.
pub const ECHO_CHARS: usize = 100;

/// `s` quoted and escaped as `{:?}` does (control bytes as `\u{1b}`, so
/// that a value cannot break a line or drive a terminal), cut to
/// [`ECHO_CHARS`] characters with its full size: a 30 MB value must not
/// make a 30 MB message or file. The one way every tool repeats input.
pub fn echo(s: &str) -> String {
    match s.char_indices().nth(ECHO_CHARS) {
        None => format!("{s:?}"),
        Some((cut, _)) => format!("{:?}... ({} bytes)", &s[..cut], s.len()),
    }
}

/// Builds located errors for one source text.
pub(crate) struct Reporter<'a> {
    pub(crate) file: &'a str,
    pub(crate) text: &'a str,
}

impl Reporter<'_> {
    /// 1-based line of a byte offset (clamped to the text).
    pub(crate) fn line_of(&self, offset: usize) -> usize {
        let end = offset.min(self.text.len());
        self.text.as_bytes()[..end]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1
    }

    /// An error at `span` about `field`.
    pub(crate) fn at(
        &self,
        span: &Range<usize>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> TopologyError {
        let field = field.into();
        TopologyError::Invalid {
            file: self.file.to_string(),
            line: Some(self.line_of(span.start)),
            field: (!field.is_empty()).then_some(field),
            message: message.into(),
        }
    }
}

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

/// 1-based line of byte `offset` of `text` (clamped to the text).
pub fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Whether a key from the file can be shown as written: a short bare key
/// (letters, digits, `_`, `-`), nothing to escape or cut.
fn is_bare(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= ECHO_CHARS
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A key from the file in a field path: as written when bare, else
/// [`echo`]ed.
pub(crate) fn key_name(key: &str) -> String {
    if is_bare(key) {
        key.to_string()
    } else {
        echo(key)
    }
}

/// Most parts of a dotted key (`a.b.c` has 3) the TOML reader takes.
/// toml 0.9 refuses more with "recursion limit" and no position; a test
/// reads 80 and refuses 81.
pub const MAX_KEY_PARTS: usize = 80;

/// What toml says when a key has more than [`MAX_KEY_PARTS`] parts.
const KEY_TOO_DEEP: &str = "recursion limit";

/// A TOML reader's error, located in the text it read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TomlError {
    /// Byte span in the text, when known.
    pub span: Option<Range<usize>>,
    /// 1-based line of the span's start, when known.
    pub line: Option<usize>,
    /// What is wrong, one line.
    pub message: String,
}

impl TomlError {
    /// `e`, an error of reading `text`, as messages show it: toml's message
    /// and position, except where toml gives no position for a key nested
    /// too deep (its line is found and the message says what it is), and
    /// with what serde repeats from the file (an unknown key, a string of
    /// the wrong type) [`echo`]ed: a key may be an escape sequence or
    /// megabytes long.
    pub fn new(text: &str, e: &toml::de::Error) -> TomlError {
        let (span, message) = match e.span() {
            None if e.message() == KEY_TOO_DEEP => (
                line_with_too_deep_key(text),
                format!(
                    "a dotted key of more than {MAX_KEY_PARTS} parts; \
                     the TOML reader nests at most {MAX_KEY_PARTS}"
                ),
            ),
            span => {
                let message = echo_serde_input(text, span.as_ref(), e.message().trim_end());
                (span, message)
            }
        };
        TomlError {
            line: span.as_ref().map(|s| line_of(text, s.start)),
            span,
            message,
        }
    }

    /// The one-line message for a file: `FILE:LINE: message` (`FILE:
    /// message` where the line is not known).
    pub fn in_file(&self, file: &std::path::Path) -> String {
        match self.line {
            Some(line) => format!("{}:{line}: {}", file.display(), self.message),
            None => format!("{}: {}", file.display(), self.message),
        }
    }
}

/// The span of the first line whose key toml finds too deep. Only on that
/// error: the lines with enough dots to hold such a key are candidates, and
/// the first whose head of the text toml refuses so is found by bisection
/// (a head refused so holds the key; a shorter one does not).
fn line_with_too_deep_key(text: &str) -> Option<Range<usize>> {
    let mut candidates = Vec::new();
    let mut start = 0;
    for line in text.split_inclusive('\n') {
        let end = start + line.len();
        if line.bytes().filter(|&b| b == b'.').count() >= MAX_KEY_PARTS {
            candidates.push(start..end);
        }
        start = end;
    }
    let too_deep = |head: &str| {
        toml::de::DeTable::parse_recoverable(head)
            .1
            .iter()
            .any(|e| e.span().is_none() && e.message() == KEY_TOO_DEEP)
    };
    let first = candidates.partition_point(|l| !too_deep(&text[..l.end]));
    candidates.get(first).cloned()
}

/// serde's `message` with the file's text it repeats echoed: the key of
/// "unknown field `KEY`, ..." (and variant), the string of "invalid
/// type: string \"...\", ..." (and value), read back from `span`.
fn echo_serde_input(text: &str, span: Option<&Range<usize>>, message: &str) -> String {
    for (lead, tails) in [
        ("unknown field", ["`, expected ", "`, there are no fields"]),
        (
            "unknown variant",
            ["`, expected ", "`, there are no variants"],
        ),
    ] {
        let Some(rest) = message
            .strip_prefix(lead)
            .and_then(|m| m.strip_prefix(" `"))
        else {
            continue;
        };
        // What follows the key is this program's names, the key anything:
        // the last separator ends it.
        if let Some(end) = tails.iter().filter_map(|t| rest.rfind(t)).max() {
            let key = &rest[..end];
            let shown = if is_bare(key) {
                format!("`{key}`")
            } else {
                echo(key)
            };
            return format!("{lead} {shown}{}", &rest[end + 1..]);
        }
    }
    for what in ["invalid type: string ", "invalid value: string "] {
        if message.starts_with(what) {
            let value = span
                .and_then(|s| text.get(s.clone()))
                .and_then(|v| toml::de::DeValue::parse(v).ok())
                .and_then(|v| v.get_ref().as_str().map(echo));
            if let (Some(value), Some(i)) = (value, message.rfind(", expected ")) {
                return format!("{what}{value}{}", &message[i..]);
            }
        }
    }
    message.to_string()
}

/// Builds located errors for one source text.
pub(crate) struct Reporter<'a> {
    pub(crate) file: &'a str,
    pub(crate) text: &'a str,
}

impl Reporter<'_> {
    /// 1-based line of a byte offset (clamped to the text).
    pub(crate) fn line_of(&self, offset: usize) -> usize {
        line_of(self.text, offset)
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

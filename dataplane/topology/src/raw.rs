//! The file as written: serde structures that keep every value's byte span,
//! and conversion of TOML/serde errors into located [`TopologyError`]s.

use std::ops::Range;

use serde::Deserialize;
use toml::de::{DeTable, DeValue};
use toml::Spanned;

use crate::error::{key_name, Reporter, TomlError, TopologyError};

pub(crate) type Str = Spanned<String>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFile {
    pub defaults: Option<Spanned<RawDefaults>>,
    #[serde(default)]
    pub dc: Vec<Spanned<RawDc>>,
    #[serde(default)]
    pub switch: Vec<Spanned<RawSwitch>>,
    #[serde(default)]
    pub host: Vec<Spanned<RawHost>>,
    #[serde(default)]
    pub link: Vec<Spanned<RawLink>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDefaults {
    pub buffer: Option<Str>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDc {
    pub name: Str,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSwitch {
    pub name: Str,
    pub dc: Option<Str>,
    #[serde(default)]
    pub prefixes: Vec<Str>,
    pub policy: Option<Str>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawHost {
    pub name: Str,
    pub switch: Str,
    pub addresses: Vec<Str>,
    pub rate: Str,
    pub delay: Str,
    pub buffer: Option<Str>,
    pub ifname: Option<Str>,
    pub switch_ifname: Option<Str>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLink {
    pub a: Str,
    pub b: Str,
    pub rate: Str,
    pub delay: Str,
    pub buffer: Option<Str>,
    pub a_ifname: Option<Str>,
    pub b_ifname: Option<Str>,
}

/// Deserializes the file, turning TOML syntax and shape errors (unknown
/// key, missing key, wrong type) into located errors.
pub(crate) fn read(rep: &Reporter<'_>) -> Result<RawFile, TopologyError> {
    toml::from_str(rep.text).map_err(|e| {
        let TomlError {
            span,
            line,
            mut message,
        } = TomlError::new(rep.text, &e);
        let mut field = span.as_ref().and_then(|s| field_at(rep.text, s.start));
        // serde's "missing field `delay`" is reported at the enclosing table;
        // name the field itself instead.
        let missing = message
            .strip_prefix("missing field `")
            .and_then(|m| m.strip_suffix('`'))
            .map(str::to_string);
        if let Some(name) = missing {
            field = Some(match field {
                Some(table) => format!("{table}.{name}"),
                None => name,
            });
            message = "required field is missing".to_string();
        }
        // The other kind of network file, not a topology with a bad key.
        if field.as_deref() == Some("rotor") && message.starts_with("unknown field `rotor`,") {
            message = "a rotor network file, not a DCI topology; rotor networks run with \
                       `lcmp-testbed up`, `lcmp-switch rotor` and `lcmp-agent run`"
                .to_string();
        }
        TopologyError::Invalid {
            file: rep.file.to_string(),
            line,
            field,
            message,
        }
    })
}

/// The field path (`link[3].rate`) of the innermost key or value that
/// contains byte `offset`, if the text is syntactically valid TOML.
fn field_at(text: &str, offset: usize) -> Option<String> {
    let root = DeTable::parse(text).ok()?;
    let mut path = String::new();
    locate_in_table(root.get_ref(), offset, &mut path);
    (!path.is_empty()).then_some(path)
}

fn covers(span: Range<usize>, offset: usize) -> bool {
    span.start <= offset && offset < span.end.max(span.start + 1)
}

/// Whether `offset` lies in the value or in anything nested inside it (the
/// span of an array-of-tables element need not cover its keys).
fn contains(value: &Spanned<DeValue<'_>>, offset: usize) -> bool {
    covers(value.span(), offset)
        || match value.get_ref() {
            DeValue::Table(t) => t
                .iter()
                .any(|(k, v)| covers(k.span(), offset) || contains(v, offset)),
            DeValue::Array(a) => a.iter().any(|v| contains(v, offset)),
            _ => false,
        }
}

fn locate_in_table(table: &DeTable<'_>, offset: usize, path: &mut String) {
    for (key, value) in table {
        let on_key = covers(key.span(), offset);
        if on_key || contains(value, offset) {
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(&key_name(key.get_ref()));
            if !on_key {
                locate_in_value(value.get_ref(), offset, path);
            }
            return;
        }
    }
}

fn locate_in_value(value: &DeValue<'_>, offset: usize, path: &mut String) {
    match value {
        DeValue::Table(t) => locate_in_table(t, offset, path),
        DeValue::Array(a) => {
            if let Some((i, item)) = a.iter().enumerate().find(|(_, v)| contains(v, offset)) {
                path.push_str(&format!("[{i}]"));
                locate_in_value(item.get_ref(), offset, path);
            }
        }
        _ => {}
    }
}

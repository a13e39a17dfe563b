//! The largest network a topology file may describe, checked by
//! [`Topology::parse`](crate::Topology::parse) right after reading the
//! file and before any work that grows faster than the file does.
//!
//! Why a cap: every switch has a route to every other switch's prefixes,
//! so the tables of all switches (what a one-process engine builds) grow
//! with switches x prefixes, and the path-cost scales (from every switch's
//! candidates, [`path_cost_model`](crate::tables::path_cost_model)) take
//! time in switches x (switches + links). Without a cap a 1.7 MB file of
//! 16,000 switches ran out of memory. At the caps the scales take about
//! 2 s (release build) for a random graph of 4,096 switches and 16,384
//! links, one switch's tables well under a second.
//!
//! The caps are far above what this project runs or a researcher loads:
//! the Topology Zoo's largest graphs have about 750 nodes and 1,000 edges
//! (and `lcmp-topology import` makes at most 255 switches), the 13-DC
//! fabric 91 switches, 208 hosts and 150 links; a k = 32 fat-tree (1,280
//! switches, 8,192 hosts, 16,384 links) fits. No index type sets them
//! (switch, host and link ids are `usize`); a switch's ports have their own
//! cap, [`MAX_PORTS`](crate::MAX_PORTS). Rotor networks have theirs
//! ([`rotor`](crate::rotor)).

use std::ops::Range;

use crate::error::{Reporter, TopologyError};
use crate::raw::RawFile;

/// Most `[[switch]]` entries.
pub const MAX_SWITCHES: usize = 4_096;

/// Most `[[link]]` entries (4 per switch at [`MAX_SWITCHES`]; a k = 32
/// fat-tree's 16,384).
pub const MAX_LINKS: usize = 16_384;

/// Most `[[host]]` entries (16 per switch at [`MAX_SWITCHES`]).
pub const MAX_HOSTS: usize = 65_536;

/// Most host addresses, all hosts together: each is a host route.
pub const MAX_HOST_ADDRESSES: usize = 65_536;

/// Most `[[dc]]` entries (one per switch at [`MAX_SWITCHES`]).
pub const MAX_DCS: usize = 4_096;

/// Most prefixes, all switches together (4 per switch at
/// [`MAX_SWITCHES`], e.g. two IPv4 and two IPv6): each is a route on every
/// other switch, so this bounds one switch's table.
pub const MAX_PREFIXES: usize = 16_384;

/// An error at the first entry beyond a cap, naming the section, the
/// count found and the cap.
pub(crate) fn check(raw: &RawFile, rep: &Reporter<'_>) -> Result<(), TopologyError> {
    let sections = [
        entry(&raw.dc, "dc", MAX_DCS, "DCs"),
        entry(&raw.switch, "switch", MAX_SWITCHES, "switches"),
        entry(&raw.host, "host", MAX_HOSTS, "hosts"),
        entry(&raw.link, "link", MAX_LINKS, "links"),
    ];
    if let Some((field, span, message)) = sections.into_iter().flatten().next() {
        return Err(rep.at(&span, field, message));
    }
    // Prefixes and addresses are counted over all entries.
    let prefixes = raw.switch.iter().enumerate().flat_map(|(i, s)| {
        let s = s.get_ref();
        s.prefixes
            .iter()
            .enumerate()
            .map(move |(j, p)| (i, j, p.span()))
    });
    nested(prefixes, MAX_PREFIXES, "switch", "prefixes", rep)?;
    let addresses = raw.host.iter().enumerate().flat_map(|(i, h)| {
        let h = h.get_ref();
        h.addresses
            .iter()
            .enumerate()
            .map(move |(j, a)| (i, j, a.span()))
    });
    nested(addresses, MAX_HOST_ADDRESSES, "host", "addresses", rep)
}

/// (field, span, message) of the first entry of `section` beyond `cap`.
fn entry<T>(
    entries: &[toml::Spanned<T>],
    section: &str,
    cap: usize,
    what: &str,
) -> Option<(String, Range<usize>, String)> {
    let first_beyond = entries.get(cap)?;
    Some((
        format!("{section}[{cap}]"),
        first_beyond.span(),
        format!(
            "{} [[{section}]] entries; a topology has at most {cap} {what}",
            entries.len()
        ),
    ))
}

/// An error at the first item beyond `cap` of `items`: (entry index, item
/// index, span) of the `key` lists of `section`'s entries.
fn nested(
    mut items: impl Iterator<Item = (usize, usize, Range<usize>)>,
    cap: usize,
    section: &str,
    key: &str,
    rep: &Reporter<'_>,
) -> Result<(), TopologyError> {
    let Some((i, j, span)) = items.nth(cap) else {
        return Ok(());
    };
    let count = cap + 1 + items.count();
    Err(rep.at(
        &span,
        format!("{section}[{i}].{key}[{j}]"),
        format!("{count} {section} {key} in all; a topology has at most {cap}"),
    ))
}

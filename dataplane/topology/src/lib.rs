//! Topology model for the LCMP DCI switch, its agent and its testbed.
//!
//! One declarative TOML file (format in `topologies/README.md`) describes
//! DCs, switches with the prefixes they deliver, optional end hosts, and
//! full-duplex links with rate, one-way delay and buffer. [`Topology::parse`]
//! validates it and reports errors with file, line and field path;
//! [`Topology::routes`] computes, for a switch, the candidate egress ports
//! towards every remote prefix (minimum-hop paths) with the path attributes
//! LCMP's path cost needs.
//!
//! For testbeds, [`Topology::with_generated_hosts`] adds end hosts to the
//! switches that deliver prefixes, [`Topology::scaled`] slows every rate
//! (and buffer) down by a factor, and [`Topology::to_toml`] writes the
//! result as a complete topology file that parses back to an equal
//! `Topology`.
//!
//! [`limits`] caps the size of the network a file may describe (4,096
//! switches, 16,384 links, ...), checked when it is parsed.
//!
//! [`network::Network`] reads a file of either kind (a DCI topology or a
//! rotor network, [`rotor_net`]) and says which it is.
//!
//! [`import`] converts real WAN topologies (Internet Topology Zoo GraphML,
//! NetworkX node-link JSON) into topology files (`lcmp-topology import`).
//!
//! ```
//! use lcmp_topology::Topology;
//!
//! let topo = Topology::parse(
//!     r#"
//!     [[switch]]
//!     name = "s1"
//!     prefixes = ["10.0.1.0/24"]
//!
//!     [[switch]]
//!     name = "s2"
//!     prefixes = ["10.0.2.0/24"]
//!
//!     [[link]]
//!     a = "s1"
//!     b = "s2"
//!     rate = "1Gbps"
//!     delay = "5ms"
//!     "#,
//!     "example.toml",
//! )?;
//! let s1 = topo.switch_by_name("s1").unwrap().id;
//! let routes = topo.routes(s1);
//! assert_eq!(routes[0].prefix.to_string(), "10.0.2.0/24");
//! assert_eq!(routes[0].candidates[0].delay_ns, 5_000_000);
//! # Ok::<(), lcmp_topology::TopologyError>(())
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod candidates;
pub mod cli;
mod error;
pub mod import;
pub mod limits;
mod model;
pub mod network;
mod raw;
pub mod rotor;
pub mod rotor_net;
pub mod scaling;
pub mod secs;
pub mod stdout;
pub mod tables;
mod transform;
pub mod units;

pub use candidates::{PortPaths, PrefixPaths};
pub use error::TopologyError;
pub use error::{echo, line_of, TomlError, ECHO_CHARS, MAX_KEY_PARTS};
pub use ipnet::IpNet;
pub use model::{
    Dc, DcId, Host, HostId, Link, LinkId, Peer, Port, Switch, SwitchId, Topology,
    DEFAULT_BUFFER_BYTES, MAX_PORTS,
};
pub use scaling::Scaling;
pub use transform::{HostTemplate, MIN_SCALED_BUFFER_BYTES, MIN_SCALED_RATE_BPS};

/// The largest network file read, bytes (the largest topology in the tree
/// is a few hundred kB; `/dev/zero` must not be read for ever).
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// Reads the file at `path` as UTF-8 text of at most `limit` bytes; the
/// error is one line naming the file (and the limit when it is exceeded).
pub fn read_text(path: &std::path::Path, limit: u64) -> Result<String, String> {
    read_bounded(path, limit).map_err(|e| format!("{}: {e}", path.display()))
}

/// The largest data file a tool reads: a workload CDF, a flow schedule, a
/// trace, the simulator's FCTs (the 8-DC trace is 0.6 MB; a schedule of a
/// million flows ~40 MB); `/dev/zero` must not be read until memory runs
/// out.
pub const MAX_DATA_BYTES: u64 = 256 << 20;

/// Reads a data file ([`MAX_DATA_BYTES`] at most) as UTF-8 text; the
/// error does not name the file (the caller says which input it was).
pub fn read_data_file(path: &std::path::Path) -> std::io::Result<String> {
    read_bounded_as(path, MAX_DATA_BYTES, "a data file")
}

/// [`read_text`] with the error as an `io::Error` that does not name the
/// file (for error types that add it themselves).
pub(crate) fn read_bounded(path: &std::path::Path, limit: u64) -> std::io::Result<String> {
    read_bounded_as(path, limit, "a network file")
}

/// At most `limit` bytes of UTF-8 text from `path`; `kind` names the limit
/// in the error.
fn read_bounded_as(path: &std::path::Path, limit: u64, kind: &str) -> std::io::Result<String> {
    use std::io::Read;
    let file = std::fs::File::open(path)?;
    let mut bytes = Vec::new();
    // One byte past the limit tells a file of exactly `limit` bytes from a
    // larger (or endless) one.
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        let size = if limit % (1 << 20) == 0 {
            format!("{} MiB", limit >> 20)
        } else {
            format!("{limit} bytes")
        };
        return Err(std::io::Error::other(format!(
            "larger than {size} (the limit for {kind})"
        )));
    }
    String::from_utf8(bytes).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "not UTF-8 text (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

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

mod error;
pub mod import;
mod model;
mod raw;
pub mod rotor;
pub mod rotor_net;
mod routes;
pub mod tables;
mod transform;
pub mod units;

pub use error::TopologyError;
pub use ipnet::IpNet;
pub use model::{
    Dc, DcId, Host, HostId, Link, LinkId, Peer, Port, Switch, SwitchId, Topology,
    DEFAULT_BUFFER_BYTES, MAX_PORTS,
};
pub use routes::{Candidate, Route};
pub use transform::{HostTemplate, MIN_SCALED_BUFFER_BYTES, MIN_SCALED_RATE_BPS};

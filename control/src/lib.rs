//! The control plane's contract with `lcmp-switch`.
//!
//! - [`proto`]: the versioned request/reply protocol of the control socket.
//! - [`snapshot`]: the switch's state as one serializable value, shared by
//!   the stats file, the control socket and the metrics.
//! - [`server`]: the switch's end of the socket (threads off the packet
//!   path feeding an inbox the poll thread drains).
//! - [`client`]: a blocking client.
//! - [`paths`]: where sockets live.
//! - [`metrics`]: Prometheus metrics of switch snapshots and costs.
//! - [`http`]: a tiny HTTP server for `/metrics`, on its own threads.
//! - [`scrape`]: one switch's status, tables and costs for the metrics.

pub mod client;
pub mod http;
pub mod metrics;
pub mod paths;
pub mod pcapng;
pub mod proto;
pub mod rotor;
pub mod scrape;
pub mod server;
pub mod snapshot;

pub use client::{Client, ClientError};
pub use proto::{Body, ErrorKind, ErrorReply, Reply, Request};
pub use snapshot::Snapshot;

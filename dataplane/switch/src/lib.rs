//! The LCMP DCI switch data plane.
//!
//! - [`io`]: the packet I/O trait; [`mem_io`] its in-memory side, [`xsk`]
//!   its AF_XDP side; [`frames`]: the frame memory they share.
//! - [`mem_link`]: links in memory between switches of one process;
//!   [`linked_io`]: a switch's ports over packet I/O and memory links.
//! - [`switch`]: the forwarding pipeline.
//! - [`egress`]: per-port buffer, ECN, shaper and delay line.
//! - [`lpm`]: longest-prefix match to candidate sets.
//! - [`counters`]: drops by reason.
//! - [`capture`]: a port's frames copied out for `lcmp-ctl capture`.
//! - [`icmp`]: the ICMP errors a router sends (time exceeded, unreachable).
//! - [`slot`]: a rotor network's slot clock and per-port traffic.
//! - [`rotor`]: a rotor (circuit) switch on slots of a shared clock.
//! - [`rotor_tor`]: a rotor-aware ToR's per-next-hop queues.
//! - [`tor_path`]: a rotor-aware ToR's packet path (routing, Valiant marks).
//! - [`flow_log`]: the log of path decisions (`--flow-log`).
//! - [`control`]: the state snapshot and the answers to control requests.
//! - [`node`]: what the daemon runs: a [`node::Node`] per kind of switch,
//!   over a [`node::Clock`].
//! - [`lcmp_node`]: the LCMP switch as a node (control, snapshot, flow log).
//! - [`rotor_daemon`]: the rotor and the ToR as nodes (epoch, slot
//!   lateness, rotor status).
//! - [`daemon`]: the one poll loop of every kind (control, stats file,
//!   side work, sleeping until the earliest deadline; several per thread).
//! - [`config`]: a switch from the topology file; every default.
//! - [`virtual_clock`]: a whole network of nodes in one thread on a
//!   virtual clock (a discrete-event driver of the daemons).
//! - [`netns`]: entering a switch's network namespace to open its ports.

pub mod capture;
pub mod config;
pub mod control;
pub mod counters;
pub mod daemon;
pub mod egress;
pub mod flight;
pub mod flow_log;
pub mod frames;
pub mod icmp;
pub mod in_memory;
pub mod io;
pub mod lcmp_node;
pub mod linked_io;
pub mod lpm;
pub mod mem_io;
pub mod mem_link;
pub mod netns;
pub mod node;
pub mod pfc;
pub mod rotor;
pub mod rotor_daemon;
pub mod rotor_tor;
pub mod slot;
pub mod switch;
pub mod tor_path;
pub mod virtual_clock;
pub mod xsk;

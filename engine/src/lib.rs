//! `lcmp-engine`: whole networks in one process
//! (`/work/shared/docs/engines.md`). The switches already run as
//! [`lcmp_switch::node::Node`]s over memory links; this crate adds the
//! hosts, so that no namespace, socket or kernel is on any hop.
//!
//! - [`host`]: the RoCEv2/DCQCN host (sender and receiver, one NIC at its
//!   line rate) as a node on a memory link to its switch, its flows from
//!   the generator's sources and its `flows.csv` as the generator's.
//! - [`network`]: a whole network (switches and hosts) on the virtual
//!   clock ([`run_virtual`]).
//! - [`roce_frame`]: RoCEv2 datagrams in Ethernet frames.
//! - [`rotor`]: a rotor network (ToRs, rotors, UDP hosts) on the virtual
//!   clock, for `lcmp-testbed rotor-experiment --engine virtual`.
//! - [`udp_host`]: the constant-rate UDP sender and receiver of the rotor
//!   experiments as a node.
//! - [`ndp_host`]: the NDP host (sender and receiver, pulls paced at its
//!   line rate), the trimming transport of the rotor networks.
//!
//! TCP stays a namespace transport.

pub mod host;
mod host_nic;
pub mod ndp_host;
pub mod network;
pub mod roce_frame;
pub mod rotor;
mod udp_frame;
pub mod udp_host;

pub use network::{
    run_virtual, run_virtual_observed, HostTraffic, Progress, VirtualOutcome, VirtualRun,
};

use lcmp_switch::frames::FrameShare;
use lcmp_switch::linked_io::LinkedIo;
use lcmp_switch::mem_io::MemIo;
use lcmp_switch::mem_link::{LinkEnd, Transfer};

/// A host's I/O: its NIC's one port is `link` (the end facing it of a
/// memory link to its switch), its pool `share` of the frame area the
/// switches use.
pub fn host_io(share: FrameShare, link: LinkEnd, transfer: Transfer) -> LinkedIo<MemIo> {
    LinkedIo::new(MemIo::in_share(0, share), vec![Some(link)], transfer)
        .expect("one memory-link port and a packet I/O without ports")
}

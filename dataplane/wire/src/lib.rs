//! Checked, zero-copy parsing and in-place rewriting of the frames the LCMP
//! switch forwards.
//!
//! Frames arrive from AF_XDP as raw Ethernet bytes and are untrusted. The
//! hot path is:
//!
//! 1. [`parse`] looks once at the few bytes it needs (Ethernet, IPv4 or
//!    IPv6, TCP/UDP ports, RoCEv2 BTH) and returns either a small
//!    [`ParsedFrame`] (offsets, [`FlowTuple`], ECN, TTL) or a
//!    [`ParseError`] naming why the frame is not for the fast path, so the
//!    switch can count it and drop it or hand it elsewhere.
//! 2. [`forward_rewrite`] sets the MAC addresses and decrements TTL / hop
//!    limit in place (RFC 1624 incremental IPv4 checksum).
//! 3. [`mark_ce`] sets ECN Congestion Experienced in place.
//! 4. [`push_hop`] appends an INT hop record to a RoCEv2 packet's collect
//!    block at egress (the [`int`] module: the INT / timestamp block HPCC
//!    and TIMELY use).
//!
//! # Guarantees
//!
//! * No panics on any input: the library code (everything but the
//!   [`testing`] module) is compiled with `clippy::indexing_slicing`,
//!   `clippy::arithmetic_side_effects`, `unwrap`/`expect`/`panic` denied.
//!   Headers are read by first taking a fixed-size array out of the frame
//!   with a checked `split_first_chunk`, then indexing that array with
//!   constants, which the compiler checks; `proptest` and a `cargo fuzz`
//!   target exercise it on arbitrary and mutated frames.
//! * No allocation: the crate is `no_std`; only the [`testing`] module
//!   (frame builders for tests) uses `alloc`.
//! * No `unsafe`.
//! * The rewrite functions re-check the bytes they touch, so even a
//!   [`ParsedFrame`] that does not belong to the frame (a caller bug) gives
//!   an error, never a panic or an out-of-bounds write.
//!
//! # Classification order
//!
//! Structural problems are reported first (`Truncated`, `BadIpv4Header`,
//! `Ipv4Checksum`, `BadIpv6Header`), then `TtlExpired`, then what the fast
//! path does not handle (`Ipv4Options`, `Fragment`, `Ipv6ExtensionHeader`),
//! then L4 problems (`Truncated`, `BadL4Header`). See [`ParseError`].
#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![deny(
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::unreachable,
    clippy::todo,
    clippy::unimplemented
)]

#[cfg(test)]
extern crate std;

extern crate alloc;

pub mod checksum;
pub mod ethernet;
mod flow;
pub mod icmp;
pub mod int;
pub mod ip;
pub mod ndp;
mod parse;
pub mod pfc;
mod rewrite;
pub mod rotor;
pub mod testing;
mod transport;

pub use checksum::ipv4_checksum;
pub use ethernet::MacAddr;
pub use flow::FlowTuple;
pub use int::{
    block_len, push_hop, write_collect, write_echo, write_timestamp, IntBlock, IntError, IntHop,
    IntKind, PushOutcome, BTH_INT, INT_HEADER_LEN, INT_HOP_LEN, INT_MAX_SLOTS, TIMESTAMP_BLOCK_LEN,
};
pub use ip::{Ecn, L3};
pub use parse::{parse, ParseError, ParsedFrame};
pub use rewrite::{forward_rewrite, mark_ce, mark_ce_at, CeMark, RewriteError};
pub use transport::{Bth, ROCEV2_UDP_PORT};

//! The namespace lab of the LCMP switch (root only): what `lcmp-testbed`,
//! `lcmp-bench` and the switch's namespace tests are built on.
//!
//! A [`Lab`] turns a [`lcmp_topology::Topology`] into network
//! namespaces joined by veth pairs: one namespace per switch and per host,
//! one veth pair per link and per host attachment. Each namespace is held
//! by a [`Netns`] guard that deletes it (and so its devices and anything
//! still running inside) on drop, including when a test panics; namespaces
//! left by a crashed earlier run are swept at the first creation.
//!
//! Addressing and ARP/ND: each host gets its topology addresses and a
//! default route `via <gateway> dev eth0 onlink` per family. The gateway is
//! the first free address of the host's subnet (`10.0.1.1`, `fd00:1::1` in
//! `2dc-3path.toml`), configured as /32 and /128 on the switch side of the
//! host link. Neighbour entries are static in both directions (host:
//! gateway, and other hosts inside its subnets, -> switch port MAC; switch:
//! host address -> host MAC), so no
//! ARP or ND is ever needed on host links, whether the kernel routes
//! ([`Lab::kernel_routing`]) or a userspace switch owns the ports (its
//! XDP program may redirect everything; the addresses on the port are then
//! simply unused). Inter-switch links get addresses only from
//! `kernel_routing` (169.254.0.0/16 /31s and fe80::1/fe80::2).
//!
//! Code runs inside a namespace in two ways: commands through
//! `ip netns exec` ([`Netns::exec`], [`Netns::spawn`]), and Rust closures on
//! a thread that joined the namespace with `setns(2)` ([`Netns::run_in`],
//! [`Netns::spawn_thread`]); sockets a thread creates belong to the
//! namespace the thread is in, and the rest of the process is unaffected.
//!
//! The switch itself runs as [`SwitchDaemon`]s, one `lcmp-switch` per switch
//! namespace on that switch's ports (see [`daemon`] for how the binary is
//! found or built).
//!
//! Tests start with [`require_root!`], which prints "skipping: needs root"
//! and returns when not run as root.

pub mod daemon;
pub mod lab;
pub mod netns;
pub mod traffic;
pub mod xdp;

use std::fmt;

pub use daemon::{release_binary, switch_binary, SwitchDaemon};
pub use lab::{HostNode, Lab, Mac, PortNode, PortPeer, SwitchLinks, SwitchNode};
pub use netns::{Bg, CmdOutput, LinkCounters, Netns};
pub use traffic::{
    iperf3_client, iperf3_server, ping, ping_waiting, tcp_transfer, udp_send, udp_send_flows,
    IperfResult, PingStats, TransferReport, UdpReceiver, UdpReport, UdpSendReport,
};

/// An error of the testbed: a failed command, a parse error, an I/O error.
#[derive(Debug)]
pub struct Error(String);

impl Error {
    /// An error with this message.
    pub fn new(msg: impl Into<String>) -> Error {
        Error(msg.into())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error(e.to_string())
    }
}

/// Result with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// Whether the process runs as root (effective uid 0).
pub fn is_root() -> bool {
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// True when root; otherwise prints "skipping: needs root" and returns
/// false, so a test can `return` and pass.
pub fn skip_unless_root() -> bool {
    if is_root() {
        true
    } else {
        eprintln!("skipping: needs root");
        false
    }
}

/// Returns from the calling test (which then passes) unless running as
/// root, after printing "skipping: needs root".
#[macro_export]
macro_rules! require_root {
    () => {
        if !$crate::skip_unless_root() {
            return;
        }
    };
}

/// The tools in `names` that are not on `PATH`. Tests assert this is empty,
/// naming `scripts/install-deps.sh`.
pub fn missing_tools(names: &[&str]) -> Vec<String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs: Vec<std::path::PathBuf> = std::env::split_paths(&path).collect();
    // Root's tools live in sbin, which a non-login PATH may lack.
    dirs.extend(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(Into::into));
    names
        .iter()
        .filter(|n| !dirs.iter().any(|d| d.join(n).is_file()))
        .map(|n| n.to_string())
        .collect()
}

/// Panics with a helpful message if any of `names` is missing.
pub fn require_tools(names: &[&str]) {
    let missing = missing_tools(names);
    assert!(
        missing.is_empty(),
        "missing tools {missing:?}: run scripts/install-deps.sh (as root)"
    );
}

/// The repository root (the directory above this crate's manifest directory).
pub fn repo_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("crate has a parent directory")
        .to_path_buf()
}

/// Loads `topologies/<file>` from the repository.
pub fn load_topology(file: &str) -> Result<lcmp_topology::Topology> {
    let path = repo_root().join("topologies").join(file);
    lcmp_topology::Topology::load(&path).map_err(|e| Error::new(e.to_string()))
}

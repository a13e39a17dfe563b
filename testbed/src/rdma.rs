//! SoftRoCE (`rdma_rxe`) devices on testbed hosts, so that perftest
//! (`ib_write_bw`, `ib_read_lat`, `ib_send_bw`) runs RoCEv2 through the
//! switches, where the kernel has it.
//!
//! Testbed hosts are network namespaces, and SoftRoCE works in one only on
//! kernels whose rxe is namespace-aware. Before that (every kernel up to
//! Debian 12's 6.1 and its backports' 6.12) rxe routes every packet it
//! sends in the root namespace, with the output interface set to the
//! device's index (which names some other device there, or none), and
//! listens for UDP 4791 only in the root namespace: a host's rxe device
//! comes up ACTIVE, perftest exchanges its queue-pair numbers over TCP, and
//! not one RoCE frame leaves the host. Debian 13's backports kernels (7.x)
//! have a per-namespace rxe socket, and RDMA crosses the switches there.
//! [`probe`] tells the two apart by what the kernel does, not by version:
//! it adds an rxe device in a scratch namespace and looks for rxe's UDP
//! socket inside it.

use std::path::Path;

use lcmp_netlab::Netns;

use crate::state::{self, State};
use crate::{Error, Result};

/// What SoftRoCE can do on the running kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxeSupport {
    /// No `rdma_rxe` module (or no `rdma` tool to drive it).
    Missing,
    /// rxe works only in the root namespace: no use for testbed hosts.
    RootNamespaceOnly,
    /// rxe sends and receives in the namespace of its network device.
    PerNamespace,
}

/// Whether the running kernel has the rxe module: loaded, or it loads.
pub fn kernel_has_rxe() -> bool {
    Path::new("/sys/module/rdma_rxe").exists()
        || std::process::Command::new("modprobe")
            .arg("rdma_rxe")
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
}

/// Adds an rxe device on a veth inside a scratch namespace and checks
/// whether rxe's UDP socket (port 4791) is in that namespace. The
/// namespace, and with its veth the device, is removed on return.
pub fn probe() -> RxeSupport {
    if !kernel_has_rxe() {
        return RxeSupport::Missing;
    }
    let Ok(ns) = Netns::new("rxe-probe") else {
        return RxeSupport::Missing;
    };
    let added = ns
        .ip(&[
            "link", "add", "rxp0", "type", "veth", "peer", "name", "rxp1",
        ])
        .and_then(|_| ns.ip(&["link", "set", "rxp0", "up"]))
        .and_then(|_| ns.ip(&["link", "set", "rxp1", "up"]))
        .and_then(|_| {
            ns.exec(&[
                "rdma",
                "link",
                "add",
                "rxe_probe",
                "type",
                "rxe",
                "netdev",
                "rxp0",
            ])
        });
    if added.is_err() {
        return RxeSupport::Missing;
    }
    let listening = ns
        .exec(&["ss", "-H", "-u", "-l", "-n", "sport = :4791"])
        .is_ok_and(|out| !out.trim().is_empty());
    let _ = ns.exec(&["rdma", "link", "delete", "rxe_probe"]);
    if listening {
        RxeSupport::PerNamespace
    } else {
        RxeSupport::RootNamespaceOnly
    }
}

/// Fails, in one line, if `--rdma` cannot be honoured here.
pub fn check_available() -> Result<()> {
    match probe() {
        RxeSupport::PerNamespace => Ok(()),
        RxeSupport::Missing => Err(Error::new(
            "--rdma: this kernel has no rdma_rxe (SoftRoCE) module, so hosts cannot get RDMA \
             devices and perftest cannot run; RoCEv2 frames (UDP 4791) still cross the switches \
             as flows of their own per QP (source port); `scripts/vm.sh --kernel 7.3 -- \
             lcmp-testbed up --rdma ...` runs a kernel that has it",
        )),
        RxeSupport::RootNamespaceOnly => Err(Error::new(format!(
            "--rdma: this kernel's rdma_rxe (Linux {}) works only in the root network namespace \
             (it routes and listens for UDP 4791 there), and testbed hosts are namespaces: their \
             RoCE frames would never leave them; a kernel with namespace-aware rxe (Debian 13's \
             backports 7.x: `scripts/vm.sh --kernel 7.3 -- lcmp-testbed up --rdma ...`) runs \
             RDMA through the switches",
            std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|r| r.trim().to_string())
                .unwrap_or_else(|_| "?".into())
        ))),
    }
}

/// Adds one rxe device per host on its testbed interface
/// (`rdma link add rxe_<host> type rxe netdev <ifname>` in its namespace).
pub fn add_devices(st: &State) -> Result<()> {
    let (_, tb) = crate::bed::attach(st)?;
    for h in &tb.hosts {
        let dev = format!("rxe_{}", h.name);
        h.netns
            .exec(&[
                "rdma", "link", "add", &dev, "type", "rxe", "netdev", &h.ifname,
            ])
            .map_err(|e| {
                Error::new(format!(
                    "host {}: cannot add SoftRoCE device ({e}); namespace {}",
                    h.name,
                    state::netns_name(&st.name, &h.name)
                ))
            })?;
    }
    Ok(())
}

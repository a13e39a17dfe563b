//! SoftRoCE (`rdma_rxe`) devices on testbed hosts, so that perftest
//! (`ib_write_bw`, `ib_send_lat`) runs RoCEv2 through the switches, where
//! the kernel has it.

use std::path::Path;

use crate::state::{self, State};
use crate::{Error, Result};

/// Whether the running kernel can create SoftRoCE devices: the module is
/// loaded or loads.
pub fn kernel_has_rxe() -> bool {
    Path::new("/sys/module/rdma_rxe").exists()
        || std::process::Command::new("modprobe")
            .arg("rdma_rxe")
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
}

/// Fails, in one line, if `--rdma` cannot be honoured here.
pub fn check_available() -> Result<()> {
    if kernel_has_rxe() {
        Ok(())
    } else {
        Err(Error::new(
            "--rdma: this kernel has no rdma_rxe (SoftRoCE) module, so hosts cannot get RDMA \
             devices and perftest cannot run; RoCEv2 frames (UDP 4791) still cross the switches \
             as flows of their own per QP (source port)",
        ))
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

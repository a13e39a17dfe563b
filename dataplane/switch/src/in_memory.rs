//! A switch of a topology in one process: its ports to other switches are
//! memory links ([`MemoryLinks`]), its hosts' ports in-memory ports
//! ([`MemIo`]) unless the caller gives their link ends. The one place
//! such a switch is put together, for the one-process engine, the
//! virtual-clock tests and their benchmarks.

use lcmp_topology::{HostId, Peer, Topology};
use lcmp_wire::MacAddr;

use crate::config::{from_topology, Options};
use crate::frames::FrameShare;
use crate::linked_io::LinkedIo;
use crate::mem_io::MemIo;
use crate::mem_link::{port_mac, LinkEnd, MemoryLinks, Transfer};
use crate::switch::Switch;

/// The interface name of port `i` of a switch built here.
pub fn port_name(i: u8) -> String {
    format!("p{i}")
}

/// Switch `name` of `topo`, configured by `opts` (whose interface names
/// and peer MACs are set here: port `i` is `p{i}`, its own MAC
/// [`port_mac`]`(name, i)`), its frames from `share`. A port to a switch
/// takes its end of `links` (built with [`port_name`]); a host's port the
/// end `host_ends` gives for it, else an in-memory port. `host_mac` is a
/// host's MAC as its switch addresses it. The switch parks the frames on
/// its links ([`Switch::park_in_flight`]).
pub fn switch(
    topo: &Topology,
    name: &str,
    opts: &Options,
    links: &mut MemoryLinks,
    host_ends: Vec<(u8, LinkEnd)>,
    share: FrameShare,
    host_mac: &dyn Fn(HostId) -> MacAddr,
) -> Result<Switch<LinkedIo<MemIo>>, String> {
    let sw = topo
        .switch_by_name(name)
        .ok_or_else(|| format!("no switch {name} in the topology"))?;
    let ports = topo.ports(sw.id);
    let n = ports.len();
    let mut opts = Options {
        ifnames: (0..n).map(|i| port_name(i as u8)).collect(),
        peer_macs: Default::default(),
        ..opts.clone()
    };
    for (i, p) in ports.iter().enumerate() {
        let peer = match p.peer {
            Peer::Host { host, .. } => host_mac(host),
            Peer::Switch { .. } => links
                .peer_mac(name, i as u8)
                .ok_or_else(|| format!("switch {name} port {i}: no memory link"))?,
        };
        opts.peer_macs.insert(port_name(i as u8), peer);
    }
    let own = |ifname: &str| {
        ifname[1..]
            .parse::<u8>()
            .map(|i| port_mac(name, i))
            .map_err(|e| e.to_string())
    };
    let config = from_topology(topo, name, &opts, own).map_err(|e| e.to_string())?;
    let mut layout = links.layout(name, n);
    for (port, end) in host_ends {
        let slot = layout
            .get_mut(usize::from(port))
            .ok_or_else(|| format!("switch {name} has no port {port}"))?;
        *slot = Some(end);
    }
    let plain = layout.iter().filter(|p| p.is_none()).count();
    let io = LinkedIo::new(MemIo::in_share(plain, share), layout, Transfer::Descriptor)
        .map_err(|e| format!("switch {name}: {e}"))?;
    let mut sw = Switch::new(config, io).map_err(|e| format!("switch {name}: {e}"))?;
    sw.set_int(opts.int);
    // A whole network in one process holds what is on its links in its
    // memory: their bytes, not a pool buffer a frame.
    sw.park_in_flight();
    Ok(sw)
}

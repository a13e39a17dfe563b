//! Failing and restoring a link of a testbed, whatever it is made of: a
//! veth's carrier is the kernel's (`ip link set DEV down` at one end drops
//! it at both), a memory link's is the switches' (`set_carrier` on the
//! control socket of either end's switch). Either way both switches see
//! their port down at their next link check, as with a pulled cable.

use std::time::Duration;

use lcmp_control::proto::Reply;
use lcmp_control::{Client, Request};
use lcmp_netlab::{Lab, SwitchLinks};
use lcmp_topology::{LinkId, SwitchId};

use crate::state;
use crate::{Error, Result};

/// How long a switch has to answer.
const ANSWER_WITHIN: Duration = Duration::from_secs(5);

/// Sets the carrier of link `link` of testbed `testbed` (attached as
/// `tb`), from its `a` end; returns what was done, for the operator.
pub fn set_carrier(testbed: &str, tb: &Lab, link: LinkId, up: bool) -> Result<String> {
    let topo = tb.topology();
    let l = topo.link(link);
    let name = format!("{}-{}", topo.switch(l.a).name, topo.switch(l.b).name);
    set_port_carrier(testbed, tb, l.a, l.a_port, up)
        .map(|what| format!("link {name} {} ({what})", if up { "up" } else { "down" }))
        .map_err(|e| Error::new(format!("link {name}: {e}")))
}

/// Sets the carrier of the link behind port `port` of switch `switch`;
/// returns what the link is (`veth s1/p0`, `memory link s1/p0`).
pub fn set_port_carrier(
    testbed: &str,
    tb: &Lab,
    switch: SwitchId,
    port: u8,
    up: bool,
) -> Result<String> {
    let node = &tb.switches[switch.0];
    let ifname = &node.port(port).ifname;
    match tb.switch_links {
        SwitchLinks::Veth => {
            node.netns
                .ip(&["link", "set", "dev", ifname, if up { "up" } else { "down" }])?;
            Ok(format!("veth {}/{ifname}", node.name))
        }
        SwitchLinks::Memory => {
            let socket = state::dir(testbed).join(format!("{}.sock", node.name));
            let request = Request::SetCarrier {
                port: ifname.clone(),
                up,
            };
            let failed = |e: String| Error::new(format!("switch {}: {e}", node.name));
            match Client::connect(&socket, ANSWER_WITHIN)
                .and_then(|mut c| c.call(&request))
                .map_err(|e| failed(e.to_string()))?
            {
                Reply::Applied(_) => Ok(format!("memory link {}/{ifname}", node.name)),
                other => Err(failed(format!("unexpected reply {other:?}"))),
            }
        }
    }
}

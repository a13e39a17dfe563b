//! Who emulates each link's rate and delay. netem can only shape traffic
//! that leaves through a kernel qdisc: `lcmp-switch` transmits on AF_XDP
//! sockets, which bypass qdiscs, so every switch port is emulated by the
//! switch's own shaper and delay line. Links whose sender is a kernel
//! stack (a host's interface, a kernel router) can use netem, where the
//! kernel has `sch_netem`. The plan says which, per direction, and is
//! reported (never silent).

use std::path::Path;

use lcmp_control::snapshot::EmulationMode;

/// Whether the running kernel can load `sch_netem` (loaded already, or a
/// module file for this kernel exists).
pub fn netem_available() -> bool {
    if Path::new("/sys/module/sch_netem").exists() {
        return true;
    }
    let Ok(release) = std::fs::read_to_string("/proc/sys/kernel/osrelease") else {
        return false;
    };
    let dir = Path::new("/lib/modules")
        .join(release.trim())
        .join("kernel/net/sched");
    [
        "sch_netem.ko",
        "sch_netem.ko.xz",
        "sch_netem.ko.zst",
        "sch_netem.ko.gz",
    ]
    .iter()
    .any(|f| dir.join(f).exists())
}

/// The mechanism for one direction of a link: its sender forwards with
/// AF_XDP (a switch port) or with the kernel stack.
pub fn mechanism(sender_is_afxdp: bool, netem: bool) -> EmulationMode {
    match (sender_is_afxdp, netem) {
        (true, _) => EmulationMode::Switch,
        (false, true) => EmulationMode::Netem,
        (false, false) => EmulationMode::None,
    }
}

/// The `tc` arguments that make `ifname` emulate a link of `rate_bps`,
/// one-way `delay_ns` and a buffer of `buffer_bytes` (netem's limit counts
/// packets: the buffer in full-size 1514-byte frames, at least 1).
pub fn netem_args(ifname: &str, rate_bps: u64, delay_ns: u64, buffer_bytes: u64) -> Vec<String> {
    let limit = buffer_bytes.div_ceil(1514).max(1);
    let mut v: Vec<String> = ["qdisc", "replace", "dev", ifname, "root", "netem"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    v.extend([
        "delay".into(),
        format!("{}us", delay_ns.div_ceil(1_000)),
        "limit".into(),
        limit.to_string(),
    ]);
    if rate_bps > 0 {
        v.extend(["rate".into(), format!("{rate_bps}bit")]);
    }
    v
}

/// Runs `tc` with `args` in network namespace `netns` (or the current one).
pub fn apply_netem(netns: Option<&str>, args: &[String]) -> Result<(), String> {
    let mut cmd = match netns {
        Some(ns) => {
            let mut c = std::process::Command::new("ip");
            c.args(["netns", "exec", ns, "tc"]);
            c
        }
        None => std::process::Command::new("tc"),
    };
    let out = cmd
        .args(args)
        .output()
        .map_err(|e| format!("cannot run tc: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "tc {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn netem_commands_carry_rate_delay_and_limit() {
        assert_eq!(
            netem_args("h1eth0", 50_000_000, 25_000_000, 67_000),
            vec![
                "qdisc",
                "replace",
                "dev",
                "h1eth0",
                "root",
                "netem",
                "delay",
                "25000us",
                "limit",
                "45",
                "rate",
                "50000000bit"
            ]
        );
        // Line rate: delay only; a tiny buffer still holds one frame.
        assert_eq!(
            netem_args("x", 0, 10_500, 100),
            vec!["qdisc", "replace", "dev", "x", "root", "netem", "delay", "11us", "limit", "1"]
        );
    }

    #[test]
    fn afxdp_senders_are_always_emulated_by_the_switch() {
        assert_eq!(mechanism(true, true), EmulationMode::Switch);
        assert_eq!(mechanism(true, false), EmulationMode::Switch);
        assert_eq!(mechanism(false, true), EmulationMode::Netem);
        assert_eq!(mechanism(false, false), EmulationMode::None);
    }
}

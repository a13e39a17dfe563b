//! `ports` and `links`: each port's state, counters and link emulation.

use lcmp_control::proto::PortsReply;
use lcmp_control::snapshot::EmulationMode;

use crate::ctl::table::{Table, L, R};
use crate::ctl::units::{bytes, delay, rate, size, up_down};

/// `ports`: one table per switch.
pub fn render_ports(name: &str, r: &PortsReply) -> String {
    let mut t = Table::new(&[
        ("PORT", R),
        ("NAME", L),
        ("UP", L),
        ("LINK", L),
        ("ADMIN", L),
        ("RX PKTS", R),
        ("TX PKTS", R),
        // Onto the link; TX PKTS counts them a link delay later.
        ("DEPARTED", R),
        ("QUEUE", R),
        ("C_CONG", R),
        ("DROPS", R),
        ("RATE", R),
        ("DELAY", R),
        ("BUFFER", R),
        ("MODE", L),
        // How frames reach the switch: AF_XDP sockets (one per RX queue)
        // and their bind mode, or a memory link.
        ("SOCKETS", L),
    ]);
    for p in &r.ports {
        t.row(vec![
            p.index.to_string(),
            p.name.clone(),
            up_down(p.up),
            up_down(p.link_up),
            up_down(p.admin_up),
            p.counter("rx_frames").to_string(),
            p.counter("tx_frames").to_string(),
            p.counter("departed_frames").to_string(),
            bytes(p.queue_bytes),
            p.congestion.c_cong.to_string(),
            p.drops.values().sum::<u64>().to_string(),
            rate(p.emulation.rate_bps),
            delay(p.emulation.delay_ns),
            size(p.emulation.buffer_bytes),
            mode_name(p.emulation.mode).to_string(),
            sockets(p),
        ]);
    }
    format!("switch {name}: {} ports\n{}", r.ports.len(), t.render("  "))
}

/// `links`: every port's link emulation, one table across switches.
pub fn render_links(replies: &[(&str, &PortsReply)]) -> String {
    let mut t = Table::new(&[
        ("SWITCH", L),
        ("PORT", R),
        ("NAME", L),
        ("RATE", R),
        ("DELAY", R),
        ("BUFFER", R),
        ("EMULATED BY", L),
    ]);
    for (name, r) in replies {
        for p in &r.ports {
            t.row(vec![
                name.to_string(),
                p.index.to_string(),
                p.name.clone(),
                rate(p.emulation.rate_bps),
                delay(p.emulation.delay_ns),
                size(p.emulation.buffer_bytes),
                emulated_by(p.emulation.mode).to_string(),
            ]);
        }
    }
    t.render("")
}

/// `4 zero-copy`, `1 copy`, `memory` or `-` (in-memory test ports).
fn sockets(p: &lcmp_control::snapshot::PortSnapshot) -> String {
    match (&p.xsk, &p.memory_link) {
        (Some(x), _) => format!("{} {}", x.queues.len().max(1), x.bind_mode),
        (None, Some(_)) => "memory".into(),
        (None, None) => "-".into(),
    }
}

pub(super) fn mode_name(m: EmulationMode) -> &'static str {
    match m {
        EmulationMode::Switch => "switch",
        EmulationMode::Netem => "netem",
        EmulationMode::None => "none",
    }
}

/// The mechanism behind a link, spelled out: a link "emulated" by nothing
/// must never look like one the switch shapes.
fn emulated_by(m: EmulationMode) -> &'static str {
    match m {
        EmulationMode::Switch => "switch (shaper + delay line)",
        EmulationMode::Netem => "netem (kernel qdisc; the switch forwards at line rate)",
        EmulationMode::None => "none (line rate, not emulated)",
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use lcmp_control::snapshot::{
        Congestion, Emulation, MemoryLinkStats, PortSnapshot, XskQueueStats, XskStats,
    };

    use super::*;

    fn port(index: u32, name: &str, mode: EmulationMode, rate_bps: u64) -> PortSnapshot {
        PortSnapshot {
            index,
            name: name.into(),
            up: index != 2,
            link_up: true,
            admin_up: index != 2,
            counters: BTreeMap::from([
                ("rx_frames".to_string(), 1000 * (index as u64 + 1)),
                ("tx_frames".to_string(), 990 * (index as u64 + 1)),
                ("departed_frames".to_string(), 995 * (index as u64 + 1)),
            ]),
            drops: BTreeMap::from([
                ("queue_full".to_string(), index as u64),
                ("port_down".to_string(), 2 * index as u64),
            ]),
            queue_bytes: [0, 12_345, 1_500_000][index as usize],
            congestion: Congestion {
                q: 1,
                t: 2,
                d: 3,
                c_cong: 10 * index as u8,
            },
            emulation: Emulation {
                mode,
                rate_bps,
                delay_ns: [10_000_000, 500_000, 0][index as usize],
                buffer_bytes: [128 << 20, 500_000, 1_000_000][index as usize],
            },
            ..PortSnapshot::default()
        }
    }

    fn ports() -> PortsReply {
        PortsReply {
            switch: "dc1".into(),
            ports: vec![
                PortSnapshot {
                    // Four RX queues bound in zero-copy.
                    xsk: Some(XskStats {
                        bind_mode: "zero-copy".into(),
                        queues: (0..4)
                            .map(|queue| XskQueueStats {
                                queue,
                                ..XskQueueStats::default()
                            })
                            .collect(),
                        ..XskStats::default()
                    }),
                    ..port(0, "eth0", EmulationMode::Switch, 100_000_000)
                },
                PortSnapshot {
                    memory_link: Some(MemoryLinkStats::default()),
                    ..port(1, "eth1", EmulationMode::Netem, 2_500_000_000)
                },
                port(2, "eth2", EmulationMode::None, 0),
            ],
        }
    }

    #[test]
    fn ports_show_state_counters_and_emulation() {
        assert_eq!(
            render_ports("dc1", &ports()),
            "\
switch dc1: 3 ports
  PORT  NAME  UP    LINK  ADMIN  RX PKTS  TX PKTS  DEPARTED    QUEUE  C_CONG  DROPS        RATE   DELAY   BUFFER  MODE    SOCKETS
     0  eth0  up    up    up        1000      990       995      0 B       0      0  100 Mbit/s   10 ms  128 MiB  switch  4 zero-copy
     1  eth1  up    up    up        2000     1980      1990  12.3 kB      10      3  2.5 Gbit/s  0.5 ms   500 kB  netem   memory
     2  eth2  down  up    down      3000     2970      2985   1.5 MB      20      6   line rate    0 ms     1 MB  none    -
"
        );
    }

    #[test]
    fn links_name_the_emulating_mechanism_of_every_port() {
        let r = ports();
        assert_eq!(
            render_links(&[("dc1", &r), ("dc2", &r)]),
            "\
SWITCH  PORT  NAME        RATE   DELAY   BUFFER  EMULATED BY
dc1        0  eth0  100 Mbit/s   10 ms  128 MiB  switch (shaper + delay line)
dc1        1  eth1  2.5 Gbit/s  0.5 ms   500 kB  netem (kernel qdisc; the switch forwards at line rate)
dc1        2  eth2   line rate    0 ms     1 MB  none (line rate, not emulated)
dc2        0  eth0  100 Mbit/s   10 ms  128 MiB  switch (shaper + delay line)
dc2        1  eth1  2.5 Gbit/s  0.5 ms   500 kB  netem (kernel qdisc; the switch forwards at line rate)
dc2        2  eth2   line rate    0 ms     1 MB  none (line rate, not emulated)
"
        );
    }
}

//! `rotor`: a rotor network's switch: epoch, slot, circuits, schedule.

use crate::ctl::table::{Table, L, R};

/// `rotor`: a rotor network's switch: slot and lateness, circuits now,
/// the schedule, queues, drops.
pub fn render_rotor(name: &str, r: &lcmp_control::rotor::RotorStatus) -> String {
    let us = |ns: u64| format!("{:.1}us", ns as f64 / 1e3);
    let mut out = format!(
        "{} {name} ({} {}): {} ToRs x {} rotors, {} graph, {} routing, slot {} (reconfiguration {})\n",
        r.role,
        r.role,
        r.index,
        r.tors,
        r.rotors,
        r.graph,
        r.routing,
        us(r.slot_ns),
        us(r.reconfig_ns)
    );
    match r.epoch_unix_ns {
        Some(e) => out.push_str(&format!(
            "  epoch {e} ns ({}), slot now {}\n",
            r.epoch_source.as_deref().unwrap_or("?"),
            r.slot
        )),
        None => out.push_str("  no epoch yet: forwarding nothing into the circuits\n"),
    }
    if r.role == "tor" {
        let l = &r.lateness;
        out.push_str(&format!(
            "  slot lateness over {} slots: p50 {} p99 {} max {} last {}\n",
            l.samples,
            us(l.p50_ns),
            us(l.p99_ns),
            us(l.max_ns),
            us(l.last_ns)
        ));
    }
    let mut t = Table::new(&[
        ("PORT", L),
        ("KIND", L),
        ("CIRCUIT", L),
        ("SCHEDULE", L),
        ("RX", R),
        ("TX", R),
    ]);
    for (i, p) in r.ports.iter().enumerate() {
        let circuit = r.circuits.get(i).copied().flatten();
        // A rotor's port i follows every matching at i; a ToR's uplink i
        // follows rotor i's matchings at the ToR's own index.
        let schedule: Vec<String> = match r.role.as_str() {
            "rotor" => r.schedule.first().map_or(Vec::new(), |m| {
                m.iter()
                    .map(|x| x.get(i).map_or("?".into(), u32::to_string))
                    .collect()
            }),
            _ => r.schedule.get(i).map_or(Vec::new(), |m| {
                m.iter()
                    .map(|x| x.get(r.index as usize).map_or("?".into(), u32::to_string))
                    .collect()
            }),
        };
        t.row(vec![
            p.name.clone(),
            p.kind.clone(),
            circuit.map_or("-".into(), |c| format!("tor{c}")),
            schedule.join(" "),
            p.rx_frames.to_string(),
            p.tx_frames.to_string(),
        ]);
    }
    out.push_str(&t.render("  "));
    if r.role == "tor" {
        let waiting: Vec<String> = r
            .queues
            .iter()
            .filter(|q| q.frames > 0)
            .map(|q| format!("tor{} {} frames {} B", q.next_hop, q.frames, q.bytes))
            .collect();
        out.push_str(&format!(
            "  queued {} of {} B{}{}\n",
            r.queued_bytes,
            r.buffer_bytes,
            if waiting.is_empty() { "" } else { ": " },
            waiting.join(", ")
        ));
    }
    let drops: Vec<String> = r
        .drops
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    out.push_str(&format!(
        "  drops: {}\n",
        if drops.is_empty() {
            "none".into()
        } else {
            drops.join(", ")
        }
    ));
    out
}

//! The switch's counters as JSON, for the stats file operators and tests
//! read.

use serde_json::{json, Value};

use crate::io::PacketIo;
use crate::switch::Switch;

fn mac(m: Option<[u8; 6]>) -> Value {
    m.map_or(Value::Null, |m| {
        Value::String(
            m.iter()
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(":"),
        )
    })
}

/// Counters, drops by reason, flow-router counters and per-port state;
/// with the flow log on, its counters under `flow_log`: records `written`
/// to the file, `dropped` (buffer full at the decision), `write_failed`
/// (lost to a write error), `buffered` (not written yet) and `capacity`.
pub fn snapshot<IO: PacketIo>(sw: &Switch<IO>) -> Value {
    let c = sw.counters();
    let drops: serde_json::Map<String, Value> = c
        .drops()
        .into_iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    let r = sw.router_stats();
    let ports: Vec<Value> = sw
        .port_reports()
        .into_iter()
        .map(|p| {
            json!({
                "name": p.name,
                "up": p.up,
                "queue_bytes": p.queue_bytes,
                "in_flight": p.in_flight,
                "c_cong": p.c_cong,
                "peer_mac": mac(p.peer_mac),
                "tx_frames": p.egress.transmitted_frames,
                "tx_bytes": p.egress.transmitted_bytes,
                "enqueued": p.egress.enqueued_frames,
                "ce_marked": p.egress.ce_marked,
                "dropped_queue_full": p.egress.dropped_queue_full,
                "dropped_emulation_overflow": p.egress.dropped_emulation_overflow,
            })
        })
        .collect();
    let (polls, polls_with_rx) = sw.polls();
    let mut v = json!({
        "polls": polls,
        "polls_with_rx": polls_with_rx,
        "rx_frames": c.rx_frames,
        "rx_bytes": c.rx_bytes,
        "tx_frames": c.tx_frames,
        "tx_bytes": c.tx_bytes,
        "ce_marked": c.ce_marked,
        "drops": drops,
        "drops_total": c.total_drops(),
        "flows": {
            "cached": sw.cached_flows(),
            "hits": r.hits,
            "misses": r.misses,
            "inserts": r.inserts,
            "evictions": r.evictions,
            "failovers": r.failovers,
            "cache_full_decisions": r.cache_full_decisions,
            "all_congested_decisions": r.all_congested_decisions,
            "no_live_port": r.no_live_port,
        },
        "ports": ports,
    });
    if let Some(log) = sw.flow_log() {
        let l = log.stats();
        v["flow_log"] = json!({
            "written": l.written,
            "dropped": l.dropped,
            "write_failed": l.write_failed,
            "buffered": l.buffered,
            "capacity": l.capacity,
        });
    }
    v
}

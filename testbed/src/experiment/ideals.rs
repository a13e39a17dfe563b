//! What an experiment's slowdowns are measured against ([`Ideals`]): the
//! ideal FCT on one DC pair's minimum-delay path, or, for a trace between
//! any two DCs ([`super::ExperimentConfig::all_pairs`]), each flow's own
//! DC pair's, as the simulator gives every host pair its own standalone
//! FCT (`pairRtt` and `pairBw` in the artifact's `scratch/third.cc`).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use lcmp_results::analysis::{IdealModel, PathSpec};
use lcmp_results::trace::Trace;
use lcmp_topology::{SwitchId, Topology};
use lcmp_traffic::record::FlowRecord;
use serde::Serialize;
use serde_json::json;

use super::calibrate::{self, Calibration};
use super::{Schedules, Transport};
use crate::{Error, Result};

/// One DC pair's calibration and the ideal on its minimum-delay path.
pub(crate) struct Pair {
    pub cal: Calibration,
    pub ideal: IdealModel,
}

/// What the slowdowns of an experiment's flows are measured against.
pub(crate) enum Ideals {
    /// `from` to `to`: every flow's ideal is this pair's.
    One(Pair),
    /// A trace between any two DCs: per (sender's switch, receiver's
    /// switch) of its flows, that pair's. `run` is the run-wide model, one
    /// without a rate, which defines no ideal: every flow has its own.
    Pairs {
        run: IdealModel,
        pairs: BTreeMap<(SwitchId, SwitchId), Pair>,
    },
}

/// The columns an all-pairs run adds to `flows.csv` after the
/// [`FlowRecord`]'s, which stay as they are.
#[derive(Serialize)]
pub(crate) struct PairColumns {
    /// The sender's DC ([`dc_name`]).
    pub src_dc: String,
    /// The receiver's DC.
    pub dst_dc: String,
    /// The flow's ideal FCT (its DC pair's), nanoseconds, rounded.
    pub ideal_ns: Option<u64>,
}

/// The name of the DC of `sw` (the topology's `[[dc]]`), or the switch's
/// where it is in none (as `trace::HostMap` takes such switches as DCs).
pub(crate) fn dc_name(topo: &Topology, sw: SwitchId) -> String {
    let s = topo.switch(sw);
    s.dc.map_or_else(|| s.name.clone(), |d| topo.dc(d).name.clone())
}

impl Ideals {
    /// Each DC pair that `schedules` (the flows of `trace`) send between,
    /// calibrated as a one-process engine calibrates one pair
    /// ([`calibrate::configured`]: the topology's exact RTTs). A flow
    /// whose two hosts hang off one switch has no path to measure an ideal
    /// on: refused, naming its line.
    pub fn of_pairs(
        topo: &Topology,
        transport: Transport,
        trace: &Trace,
        schedules: &Schedules,
    ) -> Result<Ideals> {
        let switch = |h: &str| topo.host_by_name(h).expect("a host of the trace").switch;
        let mut pairs = BTreeMap::new();
        for (sender, rows) in schedules {
            let s = switch(sender);
            for r in rows {
                let d = switch(&r.receiver);
                if pairs.contains_key(&(s, d)) {
                    continue;
                }
                // A schedule's ids are the trace's flow indices.
                let line = || {
                    let f = usize::try_from(r.id).ok().and_then(|i| trace.flows.get(i));
                    format!("{}:{}", trace.file, f.map_or(0, |f| f.line))
                };
                if s == d {
                    return Err(Error::new(format!(
                        "{}: {sender} and {} are both behind {}: a trace between any DCs needs \
                         each flow to leave its switch (no path to measure its ideal on)",
                        line(),
                        r.receiver,
                        topo.switch(s).name
                    )));
                }
                let cal = calibrate::configured(topo, s, d)
                    .map_err(|e| Error::new(format!("{}: {e}", line())))?;
                let ideal = super::ideal_model(transport, cal.base_rtt_ns, cal.bottleneck_bps);
                pairs.insert((s, d), Pair { cal, ideal });
            }
        }
        Ok(Ideals::Pairs {
            run: super::ideal_model(transport, 0, 0),
            pairs,
        })
    }

    /// The run-wide ideal (see [`Ideals::Pairs`]).
    pub fn run_ideal(&self) -> &IdealModel {
        match self {
            Ideals::One(p) => &p.ideal,
            Ideals::Pairs { run, .. } => run,
        }
    }

    /// What calibration found, carried by every run.
    pub fn notes(&self) -> &[String] {
        match self {
            Ideals::One(p) => &p.cal.notes,
            // The topology's exact RTTs: nothing deviates.
            Ideals::Pairs { .. } => &[],
        }
    }

    /// The source switch's candidate paths for the per-path tables; none
    /// when every DC sends (no one source switch).
    pub fn first_hops(&self) -> Vec<PathSpec> {
        match self {
            Ideals::One(p) => p.cal.first_hops(),
            Ideals::Pairs { .. } => Vec::new(),
        }
    }

    /// The (sender's switch, receiver's switch) pairs, when every DC
    /// sends.
    pub fn pairs(&self) -> Vec<(SwitchId, SwitchId)> {
        match self {
            Ideals::One(_) => Vec::new(),
            Ideals::Pairs { pairs, .. } => pairs.keys().copied().collect(),
        }
    }

    /// How many DC pairs (by [`dc_name`]) the pairs are.
    pub fn dc_pairs(&self, topo: &Topology) -> usize {
        let dcs: BTreeSet<(String, String)> = self
            .pairs()
            .into_iter()
            .map(|(s, d)| (dc_name(topo, s), dc_name(topo, d)))
            .collect();
        dcs.len()
    }

    /// Each pair's base RTT, ns, when every DC sends.
    pub fn pair_base_rtts_ns(&self) -> Vec<u64> {
        match self {
            Ideals::One(_) => Vec::new(),
            Ideals::Pairs { pairs, .. } => pairs.values().map(|p| p.ideal.base_rtt_ns).collect(),
        }
    }

    /// The pair of flow `f`, when every DC sends.
    fn pair_of(&self, topo: &Topology, f: &FlowRecord) -> Option<(SwitchId, SwitchId, &Pair)> {
        let Ideals::Pairs { pairs, .. } = self else {
            return None;
        };
        let s = topo.host_by_name(&f.sender)?.switch;
        let d = topo.host_by_name(&f.receiver)?.switch;
        Some((s, d, pairs.get(&(s, d))?))
    }

    /// Each flow's own ideal, by flow id (empty for one pair: the run's
    /// is every flow's).
    pub fn flow_ideals(&self, topo: &Topology, flows: &[FlowRecord]) -> HashMap<u64, IdealModel> {
        flows
            .iter()
            .filter_map(|f| Some((f.id, self.pair_of(topo, f)?.2.ideal.clone())))
            .collect()
    }

    /// The columns `flows.csv` gets beside `f`'s record when every DC
    /// sends; `None` for one pair (its flows.csv is as it always was).
    pub fn columns(&self, topo: &Topology, f: &FlowRecord) -> Option<PairColumns> {
        let (s, d, p) = self.pair_of(topo, f)?;
        Some(PairColumns {
            src_dc: dc_name(topo, s),
            dst_dc: dc_name(topo, d),
            ideal_ns: p
                .ideal
                .ideal_fct_ns(f.size_bytes)
                .map(|ns| ns.round() as u64),
        })
    }

    /// `calibration.json`: the pair's calibration, or per pair its ends
    /// and calibration.
    pub fn calibration_json(&self, topo: &Topology) -> serde_json::Value {
        match self {
            Ideals::One(p) => serde_json::to_value(&p.cal).expect("calibration serializes"),
            Ideals::Pairs { pairs, .. } => json!({
                "pairs": pairs
                    .iter()
                    .map(|(&(s, d), p)| {
                        let mut v = serde_json::to_value(&p.cal).expect("calibration serializes");
                        v["from"] = json!(topo.switch(s).name);
                        v["to"] = json!(topo.switch(d).name);
                        v
                    })
                    .collect::<Vec<_>>(),
                "ok": pairs.values().all(|p| p.cal.ok),
            }),
        }
    }

    /// `summary.json`'s `experiment.ideal` but its definition: the base
    /// RTT, bottleneck and path, of the pair or of each pair.
    pub fn echo(&self, topo: &Topology) -> serde_json::Value {
        let of = |p: &Pair| {
            json!({
                "base_rtt_ns": p.ideal.base_rtt_ns,
                "bottleneck_bps": p.ideal.bottleneck_bps,
                "path": p.cal.paths[p.cal.min_path].name,
            })
        };
        match self {
            Ideals::One(p) => of(p),
            Ideals::Pairs { pairs, .. } => json!({
                "pairs": pairs
                    .iter()
                    .map(|(&(s, d), p)| {
                        let mut v = of(p);
                        v["from"] = json!(topo.switch(s).name);
                        v["to"] = json!(topo.switch(d).name);
                        v["src_dc"] = json!(dc_name(topo, s));
                        v["dst_dc"] = json!(dc_name(topo, d));
                        v
                    })
                    .collect::<Vec<_>>(),
            }),
        }
    }
}

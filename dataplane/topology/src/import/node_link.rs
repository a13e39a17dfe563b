//! NetworkX node-link JSON:
//! `{"directed": .., "multigraph": .., "graph": {..}, "nodes": [{"id": ..}],
//! "links": [{"source": .., "target": ..}]}`.
//!
//! `topohub` (its Topology Zoo, SNDlib, CAIDA and backbone sets) writes the
//! edge list as `"edges"` (NetworkX 3.4's `edges="edges"`), names nodes in
//! `"name"` and gives their coordinates as `"pos": [longitude, latitude]`;
//! it has no capacities. Also read: labels in `"label"`, coordinates as
//! `"Latitude"`/`"Longitude"` (a Zoo GraphML converted by NetworkX) or
//! `"lat"`/`"lon"`, and capacities as described in [`super::speed`].

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::geo::LatLon;
use super::speed::edge_speed;
use super::{Edge, Format, Graph, ImportError, Node};
use crate::error::echo;

pub(super) fn read(text: &str, path: &str) -> Result<Graph, ImportError> {
    let not =
        |why: String| ImportError::new(format!("{path} is not NetworkX node-link JSON: {why}"));
    let value: Value = serde_json::from_str(text).map_err(|e| not(e.to_string()))?;
    let top = value
        .as_object()
        .ok_or_else(|| not("the top level is not an object".to_string()))?;
    let directed = top
        .get("directed")
        .map(|d| {
            d.as_bool()
                .ok_or_else(|| not("\"directed\" is not true/false".into()))
        })
        .transpose()?
        .unwrap_or(false);
    let list = |key: &str| -> Result<Option<&Vec<Value>>, ImportError> {
        top.get(key)
            .map(|v| {
                v.as_array()
                    .ok_or_else(|| not(format!("{key:?} is not an array")))
            })
            .transpose()
    };
    let json_nodes = list("nodes")?.ok_or_else(|| not("no \"nodes\" array".to_string()))?;
    let (json_links, links_key) = match (list("links")?, list("edges")?) {
        (Some(l), None) => (l, "links"),
        (None, Some(l)) => (l, "edges"),
        (None, None) => return Err(not("no \"links\" (or \"edges\") array".to_string())),
        (Some(_), Some(_)) => {
            return Err(not(
                "both \"links\" and \"edges\" arrays; which are the edges?".to_string(),
            ))
        }
    };
    let meta = top
        .get("graph")
        .and_then(|g| g.get("name"))
        .and_then(scalar)
        .map(|n| vec![("name".to_string(), n)])
        .unwrap_or_default();

    let mut nodes = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for (i, v) in json_nodes.iter().enumerate() {
        let obj = v
            .as_object()
            .ok_or_else(|| not(format!("nodes[{i}] is not an object")))?;
        let id = obj
            .get("id")
            .and_then(scalar)
            .ok_or_else(|| not(format!("nodes[{i}] has no \"id\" (string or number)")))?;
        if index.insert(id.clone(), nodes.len()).is_some() {
            return Err(not(format!("node id {} is used twice", echo(&id))));
        }
        let label = ["name", "label"]
            .iter()
            .find_map(|k| obj.get(*k).and_then(scalar))
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .unwrap_or_else(|| id.clone());
        let position = position(obj, &id, path)?;
        nodes.push(Node {
            id,
            label,
            position,
        });
    }

    let mut edges = Vec::new();
    for (i, v) in json_links.iter().enumerate() {
        let obj = v
            .as_object()
            .ok_or_else(|| not(format!("{links_key}[{i}] is not an object")))?;
        let end = |key: &str| -> Result<usize, ImportError> {
            let id = obj
                .get(key)
                .and_then(scalar)
                .ok_or_else(|| not(format!("{links_key}[{i}] has no {key:?}")))?;
            index.get(&id).copied().ok_or_else(|| {
                not(format!(
                    "{links_key}[{i}].{key} {} is no node's id",
                    echo(&id)
                ))
            })
        };
        let (a, b) = (end("source")?, end("target")?);
        edges.push(Edge {
            a,
            b,
            speed: edge_speed(|k| obj.get(k).and_then(scalar)),
            at: format!("{links_key}[{i}]"),
        });
    }
    Ok(Graph {
        format: Format::NodeLink,
        directed,
        meta,
        nodes,
        edges,
        coordinate_keys: "pos [lon, lat], Latitude/Longitude or lat/lon",
    })
}

/// A string, or a number as written (`2500000000.0` stays exact), as text.
fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The node's coordinates from `pos` ([lon, lat], topohub), or
/// `Latitude`/`Longitude`, or `lat`/`lon`.
fn position(obj: &Map<String, Value>, id: &str, path: &str) -> Result<Option<LatLon>, ImportError> {
    let bad = |why: String| ImportError::new(format!("{path}: node {}: {why}", echo(id)));
    let (lat, lon, what) = if let Some(pos) = obj.get("pos") {
        match pos.as_array().map(Vec::as_slice) {
            Some([lon, lat]) => (lat, lon, "pos"),
            _ => {
                return Err(bad(format!(
                    "pos {} is not [longitude, latitude]",
                    echo(&pos.to_string())
                )))
            }
        }
    } else if let (Some(lat), Some(lon)) = (obj.get("Latitude"), obj.get("Longitude")) {
        (lat, lon, "Latitude/Longitude")
    } else if let (Some(lat), Some(lon)) = (obj.get("lat"), obj.get("lon")) {
        (lat, lon, "lat/lon")
    } else {
        return Ok(None);
    };
    let degrees = |v: &Value, limit: f64, name: &str| -> Result<f64, ImportError> {
        let x = v.as_f64().ok_or_else(|| {
            bad(format!(
                "{what}: {name} {} is not a number",
                echo(&v.to_string())
            ))
        })?;
        if x.abs() > limit {
            return Err(bad(format!(
                "{what}: {name} {x} is outside -{limit}..{limit} degrees (not geographic \
                 coordinates?)"
            )));
        }
        Ok(x)
    };
    Ok(Some(LatLon {
        lat: degrees(lat, 90.0, "latitude")?,
        lon: degrees(lon, 180.0, "longitude")?,
    }))
}

//! GraphML as the Internet Topology Zoo writes it.
//!
//! Attributes are `<data key="d29">52.37</data>` elements whose key is
//! declared once as `<key id="d29" for="node" attr.name="Latitude"/>`
//! (with an optional `<default>`); only the first `<graph>` is read.
//! Nodes: `label`, `Latitude`, `Longitude` (degrees). Edges: `LinkSpeed` +
//! `LinkSpeedUnits`, `LinkSpeedRaw`, `LinkLabel` (see [`super::speed`]).

use std::collections::HashMap;

use roxmltree::{Document, Node as XmlNode};

use super::geo::LatLon;
use super::speed::edge_speed;
use super::{Edge, Format, Graph, ImportError, Node};
use crate::error::echo;

/// Graph attributes the Zoo sets that are worth a header line.
const META: [&str; 4] = ["label", "Network", "NetworkDate", "Source"];

/// A declared `<key>`.
struct Key<'a> {
    /// `node`, `edge`, `graph` or `all`.
    domain: &'a str,
    name: String,
    default: Option<String>,
}

pub(super) fn read(text: &str, path: &str) -> Result<Graph, ImportError> {
    let not = |why: String| ImportError::new(format!("{path} is not GraphML: {why}"));
    let doc = Document::parse(text).map_err(|e| not(e.to_string()))?;
    let root = doc.root_element();
    if root.tag_name().name() != "graphml" {
        return Err(not(format!(
            "the root element is <{}>, expected <graphml>",
            root.tag_name().name()
        )));
    }
    let mut keys: HashMap<&str, Key<'_>> = HashMap::new();
    for k in elements(root, "key") {
        let Some(id) = k.attribute("id") else {
            return Err(not(format!("a <key> has no id (line {})", line(&doc, k))));
        };
        keys.insert(
            id,
            Key {
                domain: k.attribute("for").unwrap_or("all"),
                // Without attr.name, GraphML readers use the id as the name.
                name: k.attribute("attr.name").unwrap_or(id).to_string(),
                default: elements(k, "default")
                    .next()
                    .map(|d| d.text().unwrap_or("").to_string()),
            },
        );
    }
    let graph = elements(root, "graph")
        .next()
        .ok_or_else(|| not("no <graph> element".to_string()))?;
    let directed = graph.attribute("edgedefault") == Some("directed");

    let attrs = |el: XmlNode<'_, '_>, domain: &str| -> HashMap<String, String> {
        let mut map: HashMap<String, String> = keys
            .values()
            .filter(|k| k.domain == domain || k.domain == "all")
            .filter_map(|k| Some((k.name.clone(), k.default.clone()?)))
            .collect();
        for d in elements(el, "data") {
            if let Some(key) = d.attribute("key").and_then(|k| keys.get(k)) {
                map.insert(key.name.clone(), d.text().unwrap_or("").to_string());
            }
        }
        map
    };

    let graph_attrs = attrs(graph, "graph");
    let meta = META
        .iter()
        .filter_map(|&k| Some((k.to_string(), graph_attrs.get(k)?.trim().to_string())))
        .collect();

    let mut nodes = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    for el in elements(graph, "node") {
        let Some(id) = el.attribute("id") else {
            return Err(not(format!("a <node> has no id (line {})", line(&doc, el))));
        };
        if index.insert(id, nodes.len()).is_some() {
            return Err(not(format!("node id {} is used twice", echo(id))));
        }
        let a = attrs(el, "node");
        let label = a
            .get("label")
            .map(|l| l.trim())
            .filter(|l| !l.is_empty())
            .unwrap_or(id)
            .to_string();
        let position = position(&a, id, path)?;
        nodes.push(Node {
            id: id.to_string(),
            label,
            position,
        });
    }

    let mut edges = Vec::new();
    for el in elements(graph, "edge") {
        let end = |attr: &str| -> Result<usize, ImportError> {
            let id = el
                .attribute(attr)
                .ok_or_else(|| not(format!("an <edge> has no {attr} (line {})", line(&doc, el))))?;
            index.get(id).copied().ok_or_else(|| {
                not(format!(
                    "an <edge> (line {}) has {attr} {}, which is no node",
                    line(&doc, el),
                    echo(id)
                ))
            })
        };
        let (a, b) = (end("source")?, end("target")?);
        let attrs = attrs(el, "edge");
        edges.push(Edge {
            a,
            b,
            speed: edge_speed(|k| attrs.get(k).cloned()),
            at: format!("line {}", line(&doc, el)),
        });
    }
    Ok(Graph {
        format: Format::GraphMl,
        directed,
        meta,
        nodes,
        edges,
        coordinate_keys: "Latitude/Longitude",
    })
}

/// Child elements of `el` named `name` (any namespace: GraphML files use
/// the GraphML namespace, hand-written ones often none).
fn elements<'a, 'input>(
    el: XmlNode<'a, 'input>,
    name: &'static str,
) -> impl Iterator<Item = XmlNode<'a, 'input>> {
    el.children()
        .filter(move |c| c.is_element() && c.tag_name().name() == name)
}

fn line(doc: &Document<'_>, el: XmlNode<'_, '_>) -> u32 {
    doc.text_pos_at(el.range().start).row
}

/// `Latitude` and `Longitude`, both or neither.
fn position(
    a: &HashMap<String, String>,
    id: &str,
    path: &str,
) -> Result<Option<LatLon>, ImportError> {
    let (Some(lat), Some(lon)) = (a.get("Latitude"), a.get("Longitude")) else {
        return Ok(None);
    };
    let number = |what: &str, v: &str, limit: f64| -> Result<f64, ImportError> {
        let x: f64 = v.trim().parse().map_err(|_| {
            ImportError::new(format!(
                "{path}: node {}: {what} {} is not a number",
                echo(id),
                echo(v)
            ))
        })?;
        if !x.is_finite() || x.abs() > limit {
            return Err(ImportError::new(format!(
                "{path}: node {}: {what} {} is outside -{limit}..{limit} degrees",
                echo(id),
                echo(v.trim())
            )));
        }
        Ok(x)
    };
    Ok(Some(LatLon {
        lat: number("Latitude", lat, 90.0)?,
        lon: number("Longitude", lon, 180.0)?,
    }))
}

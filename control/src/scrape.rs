//! One scrape of a switch for the metrics: its status, its route table,
//! and the costs of every route with a choice (two or more candidates);
//! of a rotor network's switch, its rotor status.
//! The agent scrapes over the socket, a standalone switch over its own
//! inbox; both go through [`scrape`].

use std::time::{Duration, Instant};

use crate::metrics::SwitchScrape;
use crate::proto::{Reply, Request};

/// Scrapes switch `name` through `call` (one request, its reply; `None`
/// when the switch did not answer). A failed status makes the whole scrape
/// `down`; a failed costs request leaves that route out.
pub fn scrape(name: &str, mut call: impl FnMut(&Request) -> Option<Reply>) -> SwitchScrape {
    let start = Instant::now();
    let snapshot = match call(&Request::Status) {
        Some(Reply::Status(snapshot)) => snapshot,
        // A rotor network's switch refuses `status`.
        _ => {
            return match call(&Request::Rotor) {
                Some(Reply::Rotor(status)) => {
                    SwitchScrape::rotor(name, *status).with_duration(start.elapsed())
                }
                _ => SwitchScrape::down(name),
            }
        }
    };
    let mut costs = Vec::new();
    if let Some(Reply::Tables(t)) = call(&Request::Tables) {
        for r in t.routes.iter().filter(|r| r.candidates.len() > 1) {
            if let Some(Reply::Costs(c)) = call(&Request::Costs {
                dst: r.prefix.clone(),
            }) {
                costs.push(c);
            }
        }
    }
    SwitchScrape::up(name, *snapshot, costs).with_duration(start.elapsed())
}

/// Scrapes the switch listening on `path` (a fresh connection per scrape,
/// so a wedged earlier one cannot stall the next).
pub fn scrape_socket(name: &str, path: &std::path::Path, timeout: Duration) -> SwitchScrape {
    match crate::Client::connect(path, timeout) {
        Ok(mut c) => scrape(name, |r| c.call(r).ok()),
        Err(_) => SwitchScrape::down(name),
    }
}

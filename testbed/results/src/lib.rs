//! `lcmp-results`: what `lcmp-testbed`'s experiments make of their
//! measurements, with no root, no processes and no namespaces (files in,
//! files out), so that all of it is tested by `cargo test` alone.
//!
//! Models first, then one renderer per output format, each depending on
//! the models and on [`format`](mod@format) and [`table`] only, never on another:
//!
//! - Models: [`analysis`] (slowdowns, size buckets, aggregates over seeds,
//!   the `summary.json` schema), [`pairs`] (per DC pair of a trace
//!   between any two DCs, and `pairs.csv`), [`paper`] (the paper's
//!   claims), [`trace`] (simulator traces to replay), [`fidelity`] (a
//!   run's results against the simulator's, or against another run;
//!   `fidelity.json`), read from a run directory by [`run_dir`].
//! - Renderers: [`report`] (markdown: `report.md`), [`text`] (what the
//!   tools print), [`plots`] (the SVG and PNG figures); JSON and CSV are
//!   the models' own serde forms.
//! - [`rotor`]: rotor networks' designs, the throughput experiment's file,
//!   bounds, report and chart, and the slot-boundary statistics.

pub mod analysis;
pub mod fidelity;
pub mod format;
pub mod pairs;
pub mod paper;
pub mod plots;
pub mod report;
pub mod rotor;
pub mod run_dir;
pub mod table;
pub mod text;
pub mod trace;

/// What went wrong, in one line for the user (file, line, field).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Error(String);

impl Error {
    /// An error with this message.
    pub fn new(msg: impl Into<String>) -> Error {
        Error(msg.into())
    }
}

/// The message, for callers with an error type of their own
/// (`.map_err(TheirError::new)` where that takes `impl Into<String>`).
impl From<Error> for String {
    fn from(e: Error) -> String {
        e.0
    }
}

/// Result with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

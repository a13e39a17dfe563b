//! `--json`: every switch's reply or error as one JSON document.

use lcmp_control::Reply;
use serde::Serialize;

use crate::ctl::Outcome;

/// The outcomes as one JSON array of `{switch, reply}` / `{switch, error}`.
pub fn render_json(outcomes: &[Outcome]) -> String {
    #[derive(Serialize)]
    struct Entry<'a> {
        switch: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        reply: Option<&'a Reply>,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<&'a str>,
    }
    let entries: Vec<Entry> = outcomes
        .iter()
        .map(|o| Entry {
            switch: &o.switch,
            reply: o.result.as_ref().ok(),
            error: o.result.as_ref().err().map(String::as_str),
        })
        .collect();
    let mut s = serde_json::to_string_pretty(&entries).expect("replies serialize");
    s.push('\n');
    s
}

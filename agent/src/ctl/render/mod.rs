//! The replies as the operator reads them: one module per output (or
//! family of outputs on the same reply), like ripgrep's printers, and
//! [`report`], which picks the output and writes it.

use std::io::{self, Write};

use lcmp_control::{Reply, Snapshot};

use super::{Command, Outcome};

pub(super) mod applied;
pub(super) mod costs;
pub(super) mod flows;
pub(super) mod json;
pub(super) mod plan;
pub(super) mod ports;
pub(super) mod rotor;
pub(super) mod status;
pub(super) mod tables;

use applied::render_applied;
use costs::render_costs;
use flows::render_flows;
use json::render_json;
use plan::render_agent_plan;
use ports::{render_links, render_ports};
use rotor::render_rotor;
use status::{render_policy, render_status};
use tables::render_tables;

/// Prints the outcomes (human tables or JSON on `out`, one line per failed
/// switch on `err`) and returns the exit status: 1 if any switch failed.
/// Human `links` adds the agent's plan; one that cannot be read fails too.
pub fn report(
    command: &Command,
    outcomes: &[Outcome],
    json: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> io::Result<u8> {
    let mut failed = false;
    for o in outcomes {
        if let Err(e) = &o.result {
            failed = true;
            writeln!(err, "lcmp-ctl: {}: {e}", o.switch)?;
        }
    }
    let text = if json {
        render_json(outcomes)
    } else {
        let ok: Vec<(&str, &Reply)> = outcomes
            .iter()
            .filter_map(|o| o.result.as_ref().ok().map(|r| (o.switch.as_str(), r)))
            .collect();
        render(command, &ok)
    };
    out.write_all(text.as_bytes())?;
    // The JSON document is the switches' replies alone.
    if matches!(command, Command::Links) && !json {
        let (plan, errors) = render_agent_plan(outcomes.iter().map(|o| o.socket.as_path()));
        out.write_all(plan.as_bytes())?;
        for e in &errors {
            failed = true;
            writeln!(err, "lcmp-ctl: {e}")?;
        }
    }
    Ok(u8::from(failed))
}

/// The human rendering of the switches that answered. The replies have the
/// kind `command` expects (see [`crate::ctl::query`]); any other is skipped.
pub fn render(command: &Command, replies: &[(&str, &Reply)]) -> String {
    // With no switch answering, stderr has said why: a bare table header
    // on stdout would only suggest an empty answer.
    if replies.is_empty() {
        return String::new();
    }
    macro_rules! each {
        ($kind:ident) => {
            replies
                .iter()
                .filter_map(|(s, r)| match r {
                    Reply::$kind(x) => Some((*s, x)),
                    _ => None,
                })
                .collect::<Vec<_>>()
        };
    }
    let statuses: Vec<(&str, &Snapshot)> =
        each!(Status).into_iter().map(|(s, b)| (s, &**b)).collect();
    match command {
        Command::Status => render_status(&statuses),
        Command::Policy => render_policy(&statuses),
        Command::Ports => sections(&each!(Ports), render_ports),
        Command::Links => render_links(&each!(Ports)),
        Command::Flows { .. } => sections(&each!(Flows), render_flows),
        Command::Costs { .. } => sections(&each!(Costs), render_costs),
        Command::Tables => sections(&each!(Tables), render_tables),
        Command::Rotor => sections(
            &each!(Rotor)
                .into_iter()
                .map(|(s, b)| (s, &**b))
                .collect::<Vec<_>>(),
            render_rotor,
        ),
        Command::Change(_) => render_applied(&each!(Applied)),
    }
}

/// Per-switch sections separated by a blank line.
fn sections<T>(items: &[(&str, &T)], f: fn(&str, &T) -> String) -> String {
    items
        .iter()
        .map(|(s, x)| f(s, x))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use lcmp_control::proto::Applied;

    use super::*;
    use crate::ctl::render_json;

    #[test]
    fn json_lists_replies_and_errors_per_switch() {
        let outcomes = [
            Outcome {
                switch: "dc1".into(),
                socket: "/x/dc1.sock".into(),
                result: Ok(Reply::Applied(Applied {
                    message: "alpha 5".into(),
                    changed: true,
                    flows_to_move: 0,
                })),
            },
            Outcome {
                switch: "dc2".into(),
                socket: "/x/dc2.sock".into(),
                result: Err("no switch answers on /x/dc2.sock".into()),
            },
        ];
        let v: serde_json::Value = serde_json::from_str(&render_json(&outcomes)).unwrap();
        assert_eq!(
            v,
            serde_json::json!([
                {"switch": "dc1", "reply": {"kind": "applied", "message": "alpha 5", "changed": true, "flows_to_move": 0}},
                {"switch": "dc2", "error": "no switch answers on /x/dc2.sock"}
            ])
        );
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = report(&Command::Status, &outcomes[1..], false, &mut out, &mut err).unwrap();
        assert_eq!(code, 1);
        assert_eq!(out, b"");
        assert_eq!(
            String::from_utf8(err).unwrap(),
            "lcmp-ctl: dc2: no switch answers on /x/dc2.sock\n"
        );
    }
}

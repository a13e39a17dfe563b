//! What `links` adds below the switch ports: the directions no switch
//! sends (a host's kernel sends host-to-switch traffic), as the agent
//! planned them in its state file, `agent.json` beside the sockets.

use std::fmt::Write as _;
use std::io;
use std::path::Path;

use lcmp_control::snapshot::EmulationMode;
use serde::Deserialize;

use super::ports::mode_name;
use crate::ctl::table::{Table, L};
use crate::run::LinkEmulation;

/// The part of the agent's state file that `links` shows, in the agent's
/// own entry type. The file is `run::AgentState` or, for a rotor network,
/// `rotor_run::RotorAgentState`, which plans no emulation and has no list:
/// that reads as an empty plan.
#[derive(Debug, Default, Deserialize)]
pub struct AgentPlan {
    /// How each direction of each link is emulated.
    #[serde(default)]
    pub emulation: Vec<LinkEmulation>,
}

impl AgentPlan {
    /// The plan in `file`; `None` when there is none (no agent). A file
    /// that is not a plan this `lcmp-ctl` reads (another agent version's)
    /// is a one-line error, never taken for "no plan".
    pub fn read(file: &Path) -> Result<Option<AgentPlan>, String> {
        let text = match std::fs::read_to_string(file) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(format!(
                    "cannot read the agent plan {}: {e}",
                    file.display()
                ))
            }
        };
        // serde's message repeats what it could not read (an unknown
        // mechanism): echoed, as any text from a file.
        serde_json::from_str(&text).map(Some).map_err(|e| {
            format!(
                "{}: not an agent plan this lcmp-ctl reads ({}); was it written by another lcmp-agent version?",
                file.display(),
                lcmp_topology::echo(&e.to_string())
            )
        })
    }
}

/// The plans beside `sockets` (one per directory), and one error line per
/// plan that cannot be read. Said even when there is no plan, so a
/// direction is never silently unemulated.
pub fn render_agent_plan<'a>(sockets: impl IntoIterator<Item = &'a Path>) -> (String, Vec<String>) {
    let mut dirs: Vec<&Path> = sockets.into_iter().filter_map(Path::parent).collect();
    dirs.dedup();
    let (mut out, mut errors) = (String::new(), Vec::new());
    for dir in dirs {
        match AgentPlan::read(&dir.join("agent.json")) {
            Ok(Some(plan)) => out.push_str(&render_plan_entries(&plan)),
            Ok(None) => {
                let _ = writeln!(
                    out,
                    "\nno agent plan in {} (no agent): directions sent by hosts' kernels are emulated by nothing the switches control",
                    dir.display()
                );
            }
            Err(e) => errors.push(e),
        }
    }
    (out, errors)
}

/// The non-switch entries of an agent plan as a table.
pub fn render_plan_entries(plan: &AgentPlan) -> String {
    let mut t = Table::new(&[("DIRECTION", L), ("EMULATED BY", L), ("WHY", L)]);
    for e in &plan.emulation {
        if e.mechanism == EmulationMode::Switch {
            continue;
        }
        t.row(vec![
            e.direction.clone(),
            mode_name(e.mechanism).to_string(),
            e.reason.clone(),
        ]);
    }
    format!(
        "\ndirections no switch sends (the agent's plan):\n{}",
        t.render_or_none("")
    )
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::rotor_run::RotorAgentState;
    use crate::run::AgentState;

    /// A directory standing in for a testbed's, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> TempDir {
            let dir =
                std::env::temp_dir().join(format!("lcmp-ctl-plan-{}-{tag}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }

        /// `links` on switch s1 of this directory with `agent.json` holding
        /// `json`.
        fn links_with(&self, json: &str) -> (String, Vec<String>) {
            std::fs::write(self.0.join("agent.json"), json).unwrap();
            render_agent_plan([self.0.join("s1.sock").as_path()])
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn entry(direction: &str, mechanism: EmulationMode, reason: &str) -> LinkEmulation {
        LinkEmulation {
            direction: direction.into(),
            mechanism,
            reason: reason.into(),
        }
    }

    #[test]
    fn links_name_the_directions_no_switch_sends() {
        let plan: AgentPlan = serde_json::from_value(serde_json::json!({"emulation": [
            {"direction": "s1->p1", "mechanism": "switch", "reason": "sent by an lcmp-switch port"},
            {"direction": "a->s1", "mechanism": "none", "reason": "no sch_netem"},
            {"direction": "b->s2", "mechanism": "netem", "reason": "netem on its interface"}
        ]}))
        .unwrap();
        let text = render_plan_entries(&plan);
        assert!(!text.contains("s1->p1"), "{text}");
        let rows: Vec<Vec<&str>> = text
            .lines()
            .skip(2)
            .map(|l| l.split_whitespace().take(2).collect())
            .collect();
        assert_eq!(
            rows,
            vec![
                vec!["DIRECTION", "EMULATED"],
                vec!["a->s1", "none"],
                vec!["b->s2", "netem"]
            ]
        );
        // No plan beside the sockets: said, not skipped.
        let (none, errors) = render_agent_plan([Path::new("/nonexistent-lcmp-dir/s1.sock")]);
        assert!(
            none.contains("no agent plan in /nonexistent-lcmp-dir"),
            "{none}"
        );
        assert!(errors.is_empty(), "{errors:?}");
    }

    #[test]
    fn the_plan_reads_back_what_the_agent_writes() {
        let dir = TempDir::new("agent");
        let state = AgentState {
            emulation: vec![
                entry(
                    "s1->a",
                    EmulationMode::Switch,
                    "sent by an lcmp-switch port",
                ),
                entry("a->s1", EmulationMode::None, "no sch_netem"),
                entry("b->s1", EmulationMode::Netem, "netem on its interface"),
            ],
            ..AgentState::default()
        };
        let (text, errors) = dir.links_with(&serde_json::to_string_pretty(&state).unwrap());
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(
            text,
            "
directions no switch sends (the agent's plan):
DIRECTION  EMULATED BY  WHY
a->s1      none         no sch_netem
b->s1      netem        netem on its interface
"
        );
        // A rotor network's agent plans no emulation: an empty plan.
        let (text, errors) =
            dir.links_with(&serde_json::to_string(&RotorAgentState::default()).unwrap());
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(
            text,
            "\ndirections no switch sends (the agent's plan):\n(none)\n"
        );
    }

    #[test]
    fn a_plan_of_another_shape_is_an_error_not_no_plan() {
        let dir = TempDir::new("other");
        let file = dir.0.join("agent.json");
        let (text, errors) =
            dir.links_with(r#"{"pid": 7, "emulation": [{"direction": "a->s1", "mode": "netem"}]}"#);
        assert_eq!(text, "", "nothing to show for that directory");
        // One line naming the file and what is wrong (serde's position
        // follows the field).
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].starts_with(&format!(
                "{}: not an agent plan this lcmp-ctl reads (\"missing field `mechanism`",
                file.display()
            )) && errors[0].ends_with("); was it written by another lcmp-agent version?"),
            "{errors:?}"
        );
        let (_, errors) = dir.links_with(
            r#"{"emulation": [{"direction": "a->s1", "mechanism": "shaper", "reason": ""}]}"#,
        );
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].contains("unknown variant `shaper`"), "{errors:?}");
        // A mechanism that is a terminal escape and 10 kB: serde repeats it,
        // the line shows the first 100 characters of serde's message
        // ("unknown variant `" is 17, the escape and "[2J" 4, then 79 z).
        let hostile = format!("\x1b[2J{}", "z".repeat(10_000));
        let (_, errors) = dir.links_with(
            &serde_json::json!({"emulation": [
                {"direction": "a->s1", "mechanism": hostile, "reason": ""}
            ]})
            .to_string(),
        );
        let want = format!("(\"unknown variant `\\u{{1b}}[2J{}\"... (", "z".repeat(79));
        assert!(errors[0].contains(&want), "{errors:?}");
        assert!(!errors[0].chars().any(char::is_control), "{errors:?}");
        assert!(errors[0].len() < 300, "{} bytes", errors[0].len());
    }
}

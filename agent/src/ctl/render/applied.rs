//! Changes (`policy NAME`, `set`, `link`): what each switch did.

use std::fmt::Write as _;

use lcmp_control::proto::Applied;

/// Changes: what each switch did, in its words.
pub fn render_applied(replies: &[(&str, &Applied)]) -> String {
    let mut out = String::new();
    for (name, a) in replies {
        let _ = write!(out, "{name}: {}", a.message);
        if !a.changed {
            out.push_str(" (nothing changed)");
        }
        if a.flows_to_move > 0 {
            let _ = write!(out, "; {} cached flows move", a.flows_to_move);
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_report_each_switch_in_its_words() {
        let a = Applied {
            message: "policy lcmp -> ecmp".into(),
            changed: true,
            flows_to_move: 0,
        };
        let b = Applied {
            message: "policy is ecmp already".into(),
            changed: false,
            flows_to_move: 0,
        };
        assert_eq!(
            render_applied(&[("dc1", &a), ("dc2", &b)]),
            "dc1: policy lcmp -> ecmp\ndc2: policy is ecmp already (nothing changed)\n"
        );
    }
}

//! Policy specs: a policy name with LCMP's weights, `NAME[:KEY=VALUE]...`,
//! as experiments list policies (`policies = ["lcmp:alpha=1:beta=3"]`,
//! `--policies lcmp,lcmp:w_dl=1:w_lc=1`). Colons and `=` only, so a spec
//! fits a comma-separated list and a TOML string.
//!
//! The keys are the paper's names of the weights:
//!
//! | key    | weight of                      | in                        | default |
//! |--------|--------------------------------|---------------------------|---------|
//! | alpha  | C_path in the fused cost       | [`LcmpParams::alpha`]     | 3       |
//! | beta   | C_cong in the fused cost       | [`LcmpParams::beta`]      | 1       |
//! | w_dl   | delay score in C_path          | [`PathCostParams::w_delay`]   | 3   |
//! | w_lc   | capacity score in C_path       | [`PathCostParams::w_capacity`]| 1   |
//! | w_ql   | queue level Q in C_cong        | [`CongestionParams::w_queue`] | 2   |
//! | w_tl   | queue trend T in C_cong        | [`CongestionParams::w_trend`] | 1   |
//! | w_dp   | persistence D in C_cong        | [`CongestionParams::w_persist`]| 1  |
//!
//! A bare name is the policy as registered. Only the LCMP family (`lcmp`
//! and its ablations) takes weights, the others use neither cost; an
//! ablation does not take the weight it removes. A weight tuple whose
//! members, given or default, sum to 0 is refused: it would make that
//! cost 0 for every path, which is another policy (an ablation) or none.
//! [`PolicySpec`]'s `Display` is canonical (keys in the table's order), the
//! label of an experiment's runs.

use std::fmt;
use std::str::FromStr;

use crate::{CongestionParams, LcmpParams, PathCostParams, Policy, PolicyName};

/// The keys of a spec, in canonical order.
pub const KEYS: [&str; 7] = ["alpha", "beta", "w_dl", "w_lc", "w_ql", "w_tl", "w_dp"];

/// The weights a spec gives; `None`: the default (the switch's, or the
/// experiment's alpha and beta).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Weights {
    /// alpha: weight of C_path in LCMP's fused cost.
    pub alpha: Option<u32>,
    /// beta: weight of C_cong in LCMP's fused cost.
    pub beta: Option<u32>,
    /// w_dl: weight of the delay score in C_path.
    pub w_dl: Option<u32>,
    /// w_lc: weight of the capacity score in C_path.
    pub w_lc: Option<u32>,
    /// w_ql: weight of the queue level in C_cong.
    pub w_ql: Option<u32>,
    /// w_tl: weight of the queue trend in C_cong.
    pub w_tl: Option<u32>,
    /// w_dp: weight of the persistence in C_cong.
    pub w_dp: Option<u32>,
}

impl Weights {
    /// The weights in [`KEYS`] order.
    fn slots(&self) -> [Option<u32>; 7] {
        [
            self.alpha, self.beta, self.w_dl, self.w_lc, self.w_ql, self.w_tl, self.w_dp,
        ]
    }

    fn slot_mut(&mut self, key: usize) -> &mut Option<u32> {
        match key {
            0 => &mut self.alpha,
            1 => &mut self.beta,
            2 => &mut self.w_dl,
            3 => &mut self.w_lc,
            4 => &mut self.w_ql,
            5 => &mut self.w_tl,
            _ => &mut self.w_dp,
        }
    }

    /// Whether no weight is given.
    pub fn is_empty(&self) -> bool {
        self.slots().iter().all(Option::is_none)
    }

    /// `base` with the path weights given here.
    pub fn path_cost(&self, base: PathCostParams) -> PathCostParams {
        PathCostParams {
            w_delay: self.w_dl.unwrap_or(base.w_delay),
            w_capacity: self.w_lc.unwrap_or(base.w_capacity),
            ..base
        }
    }

    /// `base` with the congestion weights given here.
    pub fn congestion(&self, base: CongestionParams) -> CongestionParams {
        CongestionParams {
            w_queue: self.w_ql.unwrap_or(base.w_queue),
            w_trend: self.w_tl.unwrap_or(base.w_trend),
            w_persist: self.w_dp.unwrap_or(base.w_persist),
            ..base
        }
    }
}

/// A policy with the weights it runs with: `NAME[:KEY=VALUE]...` parsed
/// and checked (see the [module docs](self)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PolicySpec {
    name: PolicyName,
    weights: Weights,
}

impl PolicySpec {
    /// The policy's name.
    pub fn name(&self) -> PolicyName {
        self.name
    }

    /// The weights given.
    pub fn weights(&self) -> &Weights {
        &self.weights
    }

    /// The policy with alpha and beta as given, else `base`'s (an
    /// ablation's zero weight stays 0): what the switch runs for this
    /// spec with `--alpha base.alpha --beta base.beta`.
    pub fn policy(&self, base: &LcmpParams) -> Policy {
        match self.name.policy() {
            Policy::Lcmp(p) => Policy::Lcmp(LcmpParams {
                alpha: if p.alpha == 0 {
                    0
                } else {
                    self.weights.alpha.unwrap_or(base.alpha)
                },
                beta: if p.beta == 0 {
                    0
                } else {
                    self.weights.beta.unwrap_or(base.beta)
                },
                ..*base
            }),
            other => other,
        }
    }
}

impl From<PolicyName> for PolicySpec {
    fn from(name: PolicyName) -> Self {
        PolicySpec {
            name,
            weights: Weights::default(),
        }
    }
}

impl fmt::Display for PolicySpec {
    /// Canonical: the name, then the weights given in [`KEYS`] order.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name.name())?;
        for (key, value) in KEYS.iter().zip(self.weights.slots()) {
            if let Some(v) = value {
                write!(f, ":{key}={v}")?;
            }
        }
        Ok(())
    }
}

impl FromStr for PolicySpec {
    type Err = String;

    /// Parses and checks a spec; the error is one line naming it.
    fn from_str(spec: &str) -> Result<Self, String> {
        let refuse = |why: String| format!("policy spec {spec:?}: {why}");
        let mut parts = spec.split(':');
        let name: PolicyName = parts.next().unwrap_or_default().parse().map_err(refuse)?;
        let mut weights = Weights::default();
        for part in parts {
            let Some((key, value)) = part.split_once('=') else {
                return Err(refuse(format!(
                    "{part:?} is not KEY=VALUE (keys: {})",
                    KEYS.join(", ")
                )));
            };
            let Some(k) = KEYS.iter().position(|&known| known == key) else {
                return Err(refuse(format!(
                    "unknown key {key:?}; one of {}",
                    KEYS.join(", ")
                )));
            };
            let v: u32 = value.parse().map_err(|_| {
                refuse(format!(
                    "{key} = {value:?} is not a whole number from 0 to {}",
                    u32::MAX
                ))
            })?;
            let slot = weights.slot_mut(k);
            if slot.is_some() {
                return Err(refuse(format!("{key} is given twice")));
            }
            *slot = Some(v);
        }
        let Policy::Lcmp(named) = name.policy() else {
            if weights.is_empty() {
                return Ok(PolicySpec { name, weights });
            }
            let family: Vec<&str> = lcmp_family().map(PolicyName::name).collect();
            return Err(refuse(format!(
                "{name} takes no weights (only {} do)",
                family.join(", ")
            )));
        };
        // An ablation is LCMP with one weight at 0: that weight is not
        // its to set (`lcmp:alpha=N` is).
        let removed = [
            ("alpha", named.alpha == 0 && weights.alpha.is_some()),
            ("beta", named.beta == 0 && weights.beta.is_some()),
        ];
        if let Some((key, _)) = removed.iter().find(|(_, given)| *given) {
            return Err(refuse(format!(
                "{name} is LCMP with {key} 0, so it takes no {key} (lcmp:{key}=N does)"
            )));
        }
        let sum = |v: &[(Option<u32>, u32)]| -> u64 {
            v.iter().map(|&(w, d)| u64::from(w.unwrap_or(d))).sum()
        };
        let path = PathCostParams::default();
        let cong = CongestionParams::default();
        let tuples = [
            (
                "global weights alpha + beta",
                sum(&[(weights.alpha, named.alpha), (weights.beta, named.beta)]),
            ),
            (
                "path weights w_dl + w_lc",
                sum(&[
                    (weights.w_dl, path.w_delay),
                    (weights.w_lc, path.w_capacity),
                ]),
            ),
            (
                "congestion weights w_ql + w_tl + w_dp",
                sum(&[
                    (weights.w_ql, cong.w_queue),
                    (weights.w_tl, cong.w_trend),
                    (weights.w_dp, cong.w_persist),
                ]),
            ),
        ];
        if let Some((what, _)) = tuples.iter().find(|(_, s)| *s == 0) {
            return Err(refuse(format!("the {what} sum to 0")));
        }
        Ok(PolicySpec { name, weights })
    }
}

/// The names that take weights: LCMP and its ablations.
fn lcmp_family() -> impl Iterator<Item = PolicyName> {
    PolicyName::ALL
        .into_iter()
        .filter(|n| matches!(n.policy(), Policy::Lcmp(_)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<PolicySpec, String> {
        s.parse()
    }

    #[test]
    fn a_bare_name_is_the_registered_policy() {
        for name in PolicyName::ALL {
            let s = parse(name.name()).unwrap();
            assert_eq!(s, PolicySpec::from(name));
            assert_eq!(s.to_string(), name.name());
            assert!(s.weights().is_empty());
        }
    }

    #[test]
    fn keys_are_read_into_their_weights_and_written_in_canonical_order() {
        let s = parse("lcmp:w_dp=7:beta=3:w_lc=5:alpha=1:w_ql=2:w_dl=4:w_tl=0").unwrap();
        assert_eq!(s.name(), PolicyName::Lcmp);
        assert_eq!(
            *s.weights(),
            Weights {
                alpha: Some(1),
                beta: Some(3),
                w_dl: Some(4),
                w_lc: Some(5),
                w_ql: Some(2),
                w_tl: Some(0),
                w_dp: Some(7),
            }
        );
        assert_eq!(
            s.to_string(),
            "lcmp:alpha=1:beta=3:w_dl=4:w_lc=5:w_ql=2:w_tl=0:w_dp=7"
        );
        // Round trip: the canonical form parses to the same spec.
        assert_eq!(parse(&s.to_string()).unwrap(), s);
        for canonical in [
            "lcmp:alpha=1:beta=1",
            "lcmp:alpha=1:beta=3",
            "lcmp:w_ql=1:w_tl=2:w_dp=1",
            "lcmp:w_dl=1:w_lc=3",
            "lcmp-rm-alpha:w_ql=4",
            "lcmp-rm-beta:alpha=2",
            "lcmp:alpha=4294967295",
        ] {
            assert_eq!(parse(canonical).unwrap().to_string(), canonical);
        }
    }

    #[test]
    fn the_weights_apply_to_their_costs_and_the_rest_stay() {
        let s = parse("lcmp:beta=3:w_lc=5:w_tl=4").unwrap();
        // alpha from the base (7), beta given (3).
        let base = LcmpParams {
            alpha: 7,
            ..LcmpParams::default()
        };
        assert_eq!(
            s.policy(&base),
            Policy::Lcmp(LcmpParams {
                alpha: 7,
                beta: 3,
                ..LcmpParams::default()
            })
        );
        // w_dl stays the default 3, w_lc is 5.
        let p = s.weights().path_cost(PathCostParams::default());
        assert_eq!((p.w_delay, p.w_capacity, p.shift), (3, 5, 2));
        // w_ql and w_dp stay 2 and 1, w_tl is 4; the cadence is untouched.
        let c = s.weights().congestion(CongestionParams::default());
        assert_eq!((c.w_queue, c.w_trend, c.w_persist), (2, 4, 1));
        assert_eq!(c.sample_interval_ns, 100_000);
        // An ablation keeps its zero whatever the base.
        let rm = parse("lcmp-rm-alpha:beta=5").unwrap();
        assert_eq!(
            rm.policy(&base),
            Policy::Lcmp(LcmpParams {
                alpha: 0,
                beta: 5,
                ..LcmpParams::default()
            })
        );
        assert_eq!(parse("ucmp").unwrap().policy(&base), Policy::Ucmp);
    }

    #[test]
    fn refusals_name_the_spec_and_the_problem_in_one_line() {
        for (spec, why) in [
            (
                "ospf:alpha=1",
                "policy spec \"ospf:alpha=1\": unknown policy \"ospf\"; one of lcmp, ecmp",
            ),
            (
                "lcmp:gamma=1",
                "policy spec \"lcmp:gamma=1\": unknown key \"gamma\"; one of alpha, beta, w_dl, w_lc, w_ql, w_tl, w_dp",
            ),
            (
                "lcmp:alpha=1:alpha=2",
                "policy spec \"lcmp:alpha=1:alpha=2\": alpha is given twice",
            ),
            (
                "lcmp:beta=x",
                "policy spec \"lcmp:beta=x\": beta = \"x\" is not a whole number from 0 to 4294967295",
            ),
            (
                "lcmp:beta=-1",
                "policy spec \"lcmp:beta=-1\": beta = \"-1\" is not a whole number",
            ),
            (
                "lcmp:alpha=4294967296",
                "alpha = \"4294967296\" is not a whole number",
            ),
            (
                "lcmp:alpha",
                "policy spec \"lcmp:alpha\": \"alpha\" is not KEY=VALUE",
            ),
            ("lcmp:", "policy spec \"lcmp:\": \"\" is not KEY=VALUE"),
            (
                "ecmp:alpha=1",
                "policy spec \"ecmp:alpha=1\": ecmp takes no weights (only lcmp, lcmp-rm-alpha, lcmp-rm-beta do)",
            ),
            ("wcmp:w_ql=1", "wcmp takes no weights"),
            (
                "lcmp-rm-alpha:alpha=2",
                "policy spec \"lcmp-rm-alpha:alpha=2\": lcmp-rm-alpha is LCMP with alpha 0, so it takes no alpha",
            ),
            (
                "lcmp-rm-beta:beta=2",
                "lcmp-rm-beta is LCMP with beta 0, so it takes no beta",
            ),
            (
                "lcmp:w_ql=0:w_tl=0:w_dp=0",
                "policy spec \"lcmp:w_ql=0:w_tl=0:w_dp=0\": the congestion weights w_ql + w_tl + w_dp sum to 0",
            ),
            // alpha 0 given, beta 1 default: 1; both 0: refused.
            (
                "lcmp:alpha=0:beta=0",
                "policy spec \"lcmp:alpha=0:beta=0\": the global weights alpha + beta sum to 0",
            ),
            // lcmp-rm-alpha's alpha is 0, so beta 0 leaves nothing.
            (
                "lcmp-rm-alpha:beta=0",
                "the global weights alpha + beta sum to 0",
            ),
            (
                "lcmp:w_dl=0:w_lc=0",
                "policy spec \"lcmp:w_dl=0:w_lc=0\": the path weights w_dl + w_lc sum to 0",
            ),
        ] {
            let e = parse(spec).unwrap_err();
            assert!(e.contains(why), "{spec}: {e}");
            assert!(!e.contains('\n'), "{spec}: {e}");
        }
    }

    #[test]
    fn one_zero_member_of_a_tuple_is_accepted() {
        // alpha 0 + beta 1 = 1; w_dl 0 + w_lc 1 = 1; w_ql 0 + 1 + 1 = 2.
        for spec in ["lcmp:alpha=0", "lcmp:w_dl=0", "lcmp:w_ql=0:w_tl=0"] {
            parse(spec).unwrap();
        }
        // Two zeros of three leave w_dp's default 1.
        assert_eq!(
            parse("lcmp:w_ql=0:w_tl=0")
                .unwrap()
                .weights()
                .congestion(Default::default())
                .w_persist,
            1
        );
    }
}

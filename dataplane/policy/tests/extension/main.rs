//! The policy extension point, worked: a new policy (`least-congested`, in
//! `least_congested.rs` beside this file) is one module and one registry line,
//! and is then decided, named and parsed like the built-in ones.
//!
//! A test cannot add a line to the crate's own registry, so it calls the
//! same macro with its line: `lcmp_policy::registry!` generates the
//! built-in policies followed by the new one, in module `net`. In the tree
//! the line goes into `registry!` in `dataplane/policy/src/policies/mod.rs`.

mod least_congested;

mod net {
    lcmp_policy::registry! {
        /// The live candidates of lowest C_cong, hashed over.
        LeastCongested: crate::least_congested::LeastCongested = "least-congested",
    }
}

use lcmp_policy::{Candidate, CandidateSet, FlowHash, LcmpParams, PortId, PortView};
use net::{Policy, PolicyName};

const G: u64 = 1_000_000_000;

/// Ports whose state is set by hand.
struct Fixed {
    up: [bool; 4],
    c_cong: [u8; 4],
}

impl PortView for Fixed {
    fn is_up(&self, port: PortId) -> bool {
        self.up[port as usize]
    }
    fn c_cong(&self, port: PortId) -> u8 {
        self.c_cong[port as usize]
    }
}

/// Ports 0..3 with C_path 10, 200, 50, 0.
fn route() -> CandidateSet {
    let c = |port, c_path, gbps| Candidate {
        port,
        c_path,
        capacity_bps: gbps * G,
    };
    CandidateSet::new(&[c(0, 10, 100), c(1, 200, 10), c(2, 50, 40), c(3, 0, 100)]).unwrap()
}

fn port(policy: Policy, ports: &Fixed, hash: u64) -> Option<PortId> {
    policy
        .decide(&route(), ports, FlowHash(hash))
        .map(|d| d.port)
}

// `FlowHash::pick(n)` is `(high 32 bits * n) >> 32`, so for the hashes used:
//
// | hash                  | high 32     | pick(2)                 | pick(3)               |
// |-----------------------|-------------|-------------------------|-----------------------|
// | 0                     | 0           | 0                       | 0                     |
// | 0x7fff_ffff_ffff_ffff | 2^31 - 1    | (2^32 - 2) >> 32 = 0    |                       |
// | 0x8000_0000_0000_0000 | 2^31        | 2^32 >> 32 = 1          | 3 * 2^31 >> 32 = 1    |
// | u64::MAX              | 2^32 - 1    | (2^33 - 2) >> 32 = 1    |                       |
const ZERO: u64 = 0;
const BELOW_HALF: u64 = 0x7fff_ffff_ffff_ffff;
const HALF: u64 = 0x8000_0000_0000_0000;

#[test]
fn least_congested_decisions_worked_by_hand() {
    let lc = Policy::LeastCongested;
    // C_cong 40, 10, 10, 0; port 3, the least congested, is down.
    let mut ports = Fixed {
        up: [true, true, true, false],
        c_cong: [40, 10, 10, 0],
    };
    // Live: 0 (40), 1 (10), 2 (10). Lowest 10: ports [1, 2], in candidate
    // order; pick(2) 0 -> port 1, 1 -> port 2.
    assert_eq!(port(lc, &ports, ZERO), Some(1));
    assert_eq!(port(lc, &ports, BELOW_HALF), Some(1));
    assert_eq!(port(lc, &ports, HALF), Some(2));
    assert_eq!(port(lc, &ports, u64::MAX), Some(2));

    // Port 1 at 11: port 2 alone is lowest, whatever the hash.
    ports.c_cong[1] = 11;
    for h in [ZERO, HALF, u64::MAX] {
        assert_eq!(port(lc, &ports, h), Some(2));
    }
    // Port 2 down too: 0 (40) and 1 (11) are live, port 1 is lowest.
    ports.up[2] = false;
    for h in [ZERO, HALF, u64::MAX] {
        assert_eq!(port(lc, &ports, h), Some(1));
    }
    // Nothing live: no decision.
    ports.up = [false; 4];
    assert_eq!(port(lc, &ports, ZERO), None);
}

#[test]
fn built_in_policies_decide_as_before_beside_the_new_one() {
    let ports = Fixed {
        up: [true, true, true, false],
        c_cong: [40, 10, 10, 0],
    };
    // ECMP: live [0, 1, 2], pick(3) of HALF = 1 -> port 1.
    assert_eq!(port(Policy::Ecmp, &ports, HALF), Some(1));
    // LCMP (3 * C_path + C_cong): port 0 30 + 40 = 70, port 1 600 + 10 =
    // 610, port 2 150 + 10 = 160. Three live candidates are all kept,
    // ranked [0, 2, 1]; pick(3) of HALF = 1 -> port 2.
    assert_eq!(port(Policy::Lcmp(LcmpParams::PAPER), &ports, HALF), Some(2));
    // The same decisions as the crate's own registry gives.
    let own = |p: lcmp_policy::Policy| p.decide(&route(), &ports, FlowHash(HALF)).map(|d| d.port);
    assert_eq!(own(lcmp_policy::Policy::Ecmp), Some(1));
    assert_eq!(own(lcmp_policy::Policy::Lcmp(LcmpParams::PAPER)), Some(2));
}

#[test]
fn the_new_policy_is_named_and_parsed_with_the_others() {
    assert_eq!(
        Policy::NAMES,
        [
            "lcmp",
            "ecmp",
            "wcmp",
            "ucmp",
            "lcmp-rm-alpha",
            "lcmp-rm-beta",
            "least-congested"
        ]
    );
    let name: PolicyName = "least-congested".parse().unwrap();
    assert_eq!(name, PolicyName::LeastCongested);
    assert_eq!(name.policy(), Policy::LeastCongested);
    assert_eq!(name.to_string(), "least-congested");
    assert_eq!(
        Policy::from_name("least-congested").map(|p| p.name()),
        Some("least-congested")
    );
    // The built-in names keep their parameters.
    assert_eq!(
        Policy::from_name("lcmp-rm-beta"),
        Some(Policy::Lcmp(LcmpParams {
            beta: 0,
            ..LcmpParams::PAPER
        }))
    );
    assert_eq!(
        "min-delay".parse::<PolicyName>(),
        Err(
            "unknown policy \"min-delay\"; one of lcmp, ecmp, wcmp, ucmp, \
             lcmp-rm-alpha, lcmp-rm-beta, least-congested"
                .to_string()
        )
    );
    // The crate's own registry has no such line.
    assert_eq!(lcmp_policy::Policy::from_name("least-congested"), None);
}

/// The name on a command line, parsed as `lcmp-switch lcmp --policy` and
/// `lcmp-ctl policy` parse it (`cargo test -p lcmp-policy --features clap`).
#[cfg(feature = "clap")]
#[test]
fn the_new_policy_is_a_command_line_value() {
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        /// Path-selection policy.
        #[arg(long, value_enum, default_value_t = PolicyName::Lcmp)]
        policy: PolicyName,
    }

    let cli = Cli::try_parse_from(["lcmp-switch", "--policy", "least-congested"]).unwrap();
    assert_eq!(cli.policy, PolicyName::LeastCongested);
    assert_eq!(
        Cli::try_parse_from(["lcmp-switch"]).unwrap().policy,
        PolicyName::Lcmp
    );
    let refused = Cli::try_parse_from(["lcmp-switch", "--policy", "min-delay"])
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("[possible values: lcmp, ecmp, wcmp, ucmp, lcmp-rm-alpha, lcmp-rm-beta, least-congested]"),
        "{refused}"
    );
}

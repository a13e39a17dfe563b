//! What the operator asked for: each command, checked before anything is
//! sent, and the request it sends every selected switch.

use std::net::IpAddr;

use lcmp_control::snapshot::EcnFractions;
use lcmp_control::Request;

use super::CtlError;

/// What the operator asked for.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// `status`.
    Status,
    /// `ports`.
    Ports,
    /// `flows --top N`.
    Flows {
        /// Recent decisions to list.
        top: u32,
    },
    /// `costs PREFIX_OR_ADDR`.
    Costs {
        /// The address or prefix, as typed.
        dst: String,
    },
    /// `policy` without a name: show it.
    Policy,
    /// `tables`.
    Tables,
    /// `links`.
    Links,
    /// `rotor`: a rotor network's switches.
    Rotor,
    /// `policy NAME`, `set ...`, `link PORT up|down`: a change each switch
    /// answers with what it did.
    Change(Request),
}

impl Command {
    /// `costs`: the destination must be an address or a prefix, so a typo
    /// is named here rather than as the switch's "no route".
    pub fn costs(dst: &str) -> Result<Command, CtlError> {
        let dst = dst.trim();
        if dst.parse::<IpAddr>().is_err() && dst.parse::<lcmp_topology::IpNet>().is_err() {
            return Err(CtlError::Usage(format!(
                "costs: {dst:?} is neither an address nor a prefix (e.g. 10.0.2.2 or 10.0.2.0/24)"
            )));
        }
        Ok(Command::Costs { dst: dst.into() })
    }

    /// `policy [NAME]`. Names are checked against the policies the switch
    /// accepts (`lcmp_policy::Policy::from_name`, the switch's own parser).
    pub fn policy(name: Option<&str>) -> Result<Command, CtlError> {
        let Some(name) = name else {
            return Ok(Command::Policy);
        };
        if lcmp_policy::Policy::from_name(name).is_none() {
            return Err(CtlError::Usage(format!(
                "unknown policy {name:?}; policies: {}",
                lcmp_policy::Policy::NAMES.join(", ")
            )));
        }
        Ok(Command::Change(Request::SetPolicy {
            policy: name.into(),
        }))
    }

    /// `set alpha N`, `set beta N`, `set ecn KMIN,KMAX,PMAX`, `set ecn off`.
    pub fn set(param: &str, value: &str) -> Result<Command, CtlError> {
        let usage = |m: String| CtlError::Usage(format!("set {param}: {m}"));
        let weight = || {
            value
                .parse::<u32>()
                .map_err(|_| usage(format!("{value:?} is not a non-negative integer")))
        };
        let request = match param {
            "alpha" => Request::SetParams {
                alpha: Some(weight()?),
                beta: None,
                ecn: None,
                ecn_off: false,
            },
            "beta" => Request::SetParams {
                alpha: None,
                beta: Some(weight()?),
                ecn: None,
                ecn_off: false,
            },
            "ecn" if value == "off" => Request::SetParams {
                alpha: None,
                beta: None,
                ecn: None,
                ecn_off: true,
            },
            "ecn" => Request::SetParams {
                alpha: None,
                beta: None,
                ecn: Some(parse_ecn(value).map_err(usage)?),
                ecn_off: false,
            },
            other => {
                return Err(CtlError::Usage(format!(
                    "set: unknown parameter {other:?}; parameters: alpha, beta, ecn"
                )))
            }
        };
        Ok(Command::Change(request))
    }

    /// `link PORT up|down`.
    pub fn link(port: &str, state: &str) -> Result<Command, CtlError> {
        Ok(Command::Change(Request::SetAdmin {
            port: port.into(),
            up: up_or_down("link", port, state)?,
        }))
    }

    /// `carrier PORT up|down`: a memory link's carrier.
    pub fn carrier(port: &str, state: &str) -> Result<Command, CtlError> {
        Ok(Command::Change(Request::SetCarrier {
            port: port.into(),
            up: up_or_down("carrier", port, state)?,
        }))
    }

    /// The request sent to every selected switch.
    pub fn request(&self) -> Request {
        match self {
            Command::Status | Command::Policy => Request::Status,
            Command::Ports | Command::Links => Request::Ports,
            Command::Flows { top } => Request::Flows { top: *top },
            Command::Costs { dst } => Request::Costs { dst: dst.clone() },
            Command::Tables => Request::Tables,
            Command::Rotor => Request::Rotor,
            Command::Change(r) => r.clone(),
        }
    }

    /// The reply kind a correct switch answers with.
    pub(super) fn expected_reply(&self) -> &'static str {
        match self {
            Command::Status | Command::Policy => "status",
            Command::Ports | Command::Links => "ports",
            Command::Flows { .. } => "flows",
            Command::Costs { .. } => "costs",
            Command::Tables => "tables",
            Command::Rotor => "rotor",
            Command::Change(_) => "applied",
        }
    }
}

/// A port state of `verb PORT STATE`: `up` (true) or `down`.
fn up_or_down(verb: &str, port: &str, state: &str) -> Result<bool, CtlError> {
    match state {
        "up" => Ok(true),
        "down" => Ok(false),
        other => Err(CtlError::Usage(format!(
            "{verb} {port}: state {other:?} is neither up nor down"
        ))),
    }
}

/// `KMIN,KMAX,PMAX` as fractions, checked as the switch checks them.
fn parse_ecn(text: &str) -> Result<EcnFractions, String> {
    // `set ecn` also takes `off`: say so where the shape is wrong.
    EcnFractions::parse(text).map_err(|e| {
        if e.contains("is not KMIN,KMAX,PMAX") {
            format!("{e} or off")
        } else {
            e
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_map_to_requests() {
        assert_eq!(
            Command::set("ecn", "0.1,0.5,0.3").unwrap().request(),
            Request::SetParams {
                alpha: None,
                beta: None,
                ecn: Some(EcnFractions {
                    kmin: 0.1,
                    kmax: 0.5,
                    pmax: 0.3
                }),
                ecn_off: false,
            }
        );
        assert_eq!(
            Command::set("ecn", "off").unwrap().request(),
            Request::SetParams {
                alpha: None,
                beta: None,
                ecn: None,
                ecn_off: true,
            }
        );
        assert_eq!(
            Command::set("alpha", "5").unwrap().request(),
            Request::SetParams {
                alpha: Some(5),
                beta: None,
                ecn: None,
                ecn_off: false,
            }
        );
        assert_eq!(
            Command::set("beta", "0").unwrap().request(),
            Request::SetParams {
                alpha: None,
                beta: Some(0),
                ecn: None,
                ecn_off: false,
            }
        );
        assert_eq!(
            Command::link("eth1", "down").unwrap().request(),
            Request::SetAdmin {
                port: "eth1".into(),
                up: false
            }
        );
        assert_eq!(
            Command::policy(Some("ecmp")).unwrap().request(),
            Request::SetPolicy {
                policy: "ecmp".into()
            }
        );
        assert_eq!(Command::policy(None).unwrap(), Command::Policy);
        assert_eq!(
            Command::costs(" 10.0.2.0/24").unwrap().request(),
            Request::Costs {
                dst: "10.0.2.0/24".into()
            }
        );
        assert_eq!(Command::Links.request(), Request::Ports);
        assert_eq!(
            Command::Flows { top: 5 }.request(),
            Request::Flows { top: 5 }
        );
    }

    fn usage(r: Result<Command, CtlError>) -> String {
        match r {
            Err(CtlError::Usage(m)) => m,
            other => panic!("expected a usage error, got {other:?}"),
        }
    }

    #[test]
    fn bad_arguments_are_refused_before_sending() {
        assert_eq!(
            usage(Command::set("ecn", "0.5,0.1,0.3")),
            "set ecn: ECN thresholds need 0 <= kmin < kmax <= 1 and 0 <= pmax <= 1 (got kmin 0.5, kmax 0.1, pmax 0.3)"
        );
        assert_eq!(
            usage(Command::set("ecn", "0.1,0.5")),
            "set ecn: \"0.1,0.5\" is not KMIN,KMAX,PMAX (three fractions, e.g. 0.2,0.8,0.2) or off"
        );
        assert_eq!(
            usage(Command::set("ecn", "0.1,x,0.3")),
            "set ecn: KMAX \"x\" is not a number"
        );
        assert!(usage(Command::set("ecn", "nan,0.5,0.3")).contains("kmin < kmax"));
        assert_eq!(
            usage(Command::set("alpha", "-1")),
            "set alpha: \"-1\" is not a non-negative integer"
        );
        assert!(usage(Command::set("gamma", "1")).contains("unknown parameter \"gamma\""));
        assert!(usage(Command::link("eth0", "sideways")).contains("neither up nor down"));
        let m = usage(Command::policy(Some("fastest")));
        assert!(
            m.starts_with("unknown policy \"fastest\"; policies: lcmp, ecmp"),
            "{m}"
        );
        assert!(usage(Command::costs("10.0.2")).contains("neither an address nor a prefix"));
        assert!(usage(Command::costs("10.0.2.0/33")).contains("neither"));
    }
}

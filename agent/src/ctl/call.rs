//! The calls: every selected switch asked at once, and a reply of the
//! wrong kind turned into that switch's error.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use lcmp_control::{Client, ClientError, Reply, Request};

use super::{Command, Target};

/// The default wait for each switch, ms: a second longer than the switch
/// gives its poll thread to answer, so a switch whose poll thread is stuck
/// says so itself (its timeout error) instead of the client guessing.
pub const DEFAULT_TIMEOUT_MS: u64 = lcmp_control::server::REPLY_TIMEOUT.as_millis() as u64 + 1000;

/// One switch's answer, or why there is none.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The switch.
    pub switch: String,
    /// The control socket it was asked on (`links` reads the agent's plan
    /// beside it).
    pub socket: PathBuf,
    /// Its reply, or the one-line error.
    pub result: Result<Reply, String>,
}

/// Sends `command`'s request to every target at once (one thread each, so
/// a testbed of dead switches costs one timeout, not one per switch) and
/// returns the outcomes in target order.
pub fn query(targets: &[Target], command: &Command, timeout: Duration) -> Vec<Outcome> {
    let request = command.request();
    std::thread::scope(|scope| {
        let handles: Vec<_> = targets
            .iter()
            .map(|t| {
                let request = &request;
                scope.spawn(move || call(t, request, timeout))
            })
            .collect();
        targets
            .iter()
            .zip(handles)
            .map(|(t, h)| Outcome {
                switch: t.name.clone(),
                socket: t.path.clone(),
                result: h
                    .join()
                    .unwrap_or_else(|_| Err("the call panicked".into()))
                    .and_then(|reply| check_kind(command, reply)),
            })
            .collect()
    })
}

fn call(target: &Target, request: &Request, timeout: Duration) -> Result<Reply, String> {
    let describe = |e: ClientError| match e {
        ClientError::Io(io)
            if matches!(
                io.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) =>
        {
            format!(
                "no reply on {} within {} ms",
                target.path.display(),
                timeout.as_millis()
            )
        }
        other => other.to_string(),
    };
    Client::connect(&target.path, timeout)
        .and_then(|mut c| c.call(request))
        .map_err(describe)
}

/// The reply's kind as the protocol names it, for messages that must not
/// repeat the reply itself.
pub(crate) fn reply_kind(reply: &Reply) -> &'static str {
    match reply {
        Reply::Status(_) => "status",
        Reply::Ports(_) => "ports",
        Reply::Flows(_) => "flows",
        Reply::Costs(_) => "costs",
        Reply::Tables(_) => "tables",
        Reply::Applied(_) => "applied",
        Reply::LinkState(_) => "link_state",
        Reply::Rotor(_) => "rotor",
        Reply::Capture(_) => "capture",
    }
}

/// A reply of another kind than the request's is the switch's bug, named
/// as such rather than rendered as something it is not.
fn check_kind(command: &Command, reply: Reply) -> Result<Reply, String> {
    let (want, got) = (command.expected_reply(), reply_kind(&reply));
    if want == got {
        Ok(reply)
    } else {
        Err(format!(
            "bad reply from the switch: a {got} reply to a {} request",
            command.request().verb()
        ))
    }
}

#[cfg(test)]
mod tests {
    use lcmp_control::proto::PortsReply;

    use super::*;

    fn ports() -> PortsReply {
        PortsReply {
            switch: "dc1".into(),
            ports: vec![],
        }
    }

    #[test]
    fn wrong_reply_kinds_are_errors() {
        let r = check_kind(&Command::Status, Reply::Ports(ports())).unwrap_err();
        assert_eq!(
            r,
            "bad reply from the switch: a ports reply to a status request"
        );
        assert!(check_kind(&Command::Links, Reply::Ports(ports())).is_ok());
    }
}

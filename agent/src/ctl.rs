//! `lcmp-ctl`: the operator's view of running switches, in the style of
//! `ovs-appctl`. This module holds everything but the argument parsing:
//! which sockets a command line selects, the request each command sends,
//! the calls (in parallel, one thread per switch) and the rendering of the
//! replies as aligned human tables or as one JSON document.
//!
//! Exit statuses: 0 when every selected switch answered, 1 when any failed
//! (not running, refused the request, or a selection naming a testbed or
//! switch that does not exist), 2 for a malformed command line (caught
//! before anything is sent).
//!
//! `costs` runs on every selected switch like the other read verbs, one
//! switch's candidates after the other: asking a whole testbed how it would
//! route one prefix is the common question.

use std::fmt::Write as _;
use std::io::{self, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use lcmp_control::paths::{sockets_in, SWITCH_RUN_DIR, TESTBED_RUN_DIR};
use lcmp_control::proto::{
    Applied, CostsReply, FlowsReply, PortsReply, RecentDecision, TablesReply,
};
use lcmp_control::snapshot::{EcnFractions, EmulationMode, PolicyState};
use lcmp_control::{Client, ClientError, Reply, Request, Snapshot};
use serde::Serialize;

/// The default wait for each switch, ms: a second longer than the switch
/// gives its poll thread to answer, so a switch whose poll thread is stuck
/// says so itself (its timeout error) instead of the client guessing.
pub const DEFAULT_TIMEOUT_MS: u64 = lcmp_control::server::REPLY_TIMEOUT.as_millis() as u64 + 1000;

/// Why `lcmp-ctl` stops before (or instead of) talking to a switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CtlError {
    /// The command line is malformed: exit status 2.
    Usage(String),
    /// The command line is fine but the world does not match it (an unknown
    /// testbed or switch): exit status 1.
    Failed(String),
}

impl CtlError {
    /// The process exit status for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            CtlError::Usage(_) => 2,
            CtlError::Failed(_) => 1,
        }
    }
}

impl std::fmt::Display for CtlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CtlError::Usage(m) | CtlError::Failed(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for CtlError {}

/// One switch to talk to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Its name as shown in output (the socket's file stem for `--socket`:
    /// sockets are named `<switch>.sock`).
    pub name: String,
    /// Its control socket.
    pub path: PathBuf,
}

/// Which switches a command line selects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// `--socket PATH`.
    Socket(PathBuf),
    /// `--testbed NAME [-s SWITCH]...`: the named switches, or all when none
    /// is named.
    Testbed {
        /// The testbed.
        name: String,
        /// Switches named with `-s`.
        switches: Vec<String>,
    },
    /// `-s SWITCH...` without `--testbed`: standalone switches.
    Standalone(Vec<String>),
    /// Nothing given: the one running testbed, if there is exactly one.
    Auto,
}

impl Selection {
    /// The selection the options describe; `socket` excludes the others.
    pub fn from_options(
        testbed: Option<String>,
        switches: Vec<String>,
        socket: Option<PathBuf>,
    ) -> Result<Selection, CtlError> {
        for name in testbed.iter().chain(&switches) {
            check_name(name)?;
        }
        match (socket, testbed) {
            (Some(_), Some(_)) => Err(CtlError::Usage(
                "--socket addresses one socket; it cannot be combined with --testbed".into(),
            )),
            (Some(_), None) if !switches.is_empty() => Err(CtlError::Usage(
                "--socket addresses one socket; it cannot be combined with -s".into(),
            )),
            (Some(path), None) => Ok(Selection::Socket(path)),
            (None, Some(name)) => Ok(Selection::Testbed { name, switches }),
            (None, None) if switches.is_empty() => Ok(Selection::Auto),
            (None, None) => Ok(Selection::Standalone(switches)),
        }
    }
}

/// A testbed or switch name becomes a path component: refuse anything that
/// would leave the run directory or name nothing.
fn check_name(name: &str) -> Result<(), CtlError> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err(CtlError::Usage(format!(
            "{name:?} is not a testbed or switch name"
        )));
    }
    Ok(())
}

/// Where sockets live (the defaults of `lcmp_control::paths`; tests point
/// them at temporary directories).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunDirs {
    /// One subdirectory per testbed, holding `<switch>.sock`.
    pub testbeds: PathBuf,
    /// Standalone switches' `<switch>.sock`.
    pub standalone: PathBuf,
}

impl Default for RunDirs {
    fn default() -> Self {
        RunDirs {
            testbeds: PathBuf::from(TESTBED_RUN_DIR),
            standalone: PathBuf::from(SWITCH_RUN_DIR),
        }
    }
}

/// The sockets a selection addresses, in the order they will be shown.
pub fn resolve(selection: &Selection, dirs: &RunDirs) -> Result<Vec<Target>, CtlError> {
    match selection {
        Selection::Socket(path) => Ok(vec![Target {
            name: path
                .file_stem()
                .and_then(|s| s.to_str())
                .filter(|s| !s.is_empty())
                .map_or_else(|| path.display().to_string(), str::to_string),
            path: path.clone(),
        }]),
        Selection::Standalone(names) => Ok(dedup(names)
            .into_iter()
            .map(|name| Target {
                path: dirs.standalone.join(format!("{name}.sock")),
                name,
            })
            .collect()),
        Selection::Testbed { name, switches } => testbed_targets(name, switches, dirs),
        Selection::Auto => {
            let running: Vec<String> = list_testbeds(&dirs.testbeds)?
                .into_iter()
                .filter(|t| matches!(sockets_in(&dirs.testbeds.join(t)), Ok(s) if !s.is_empty()))
                .collect();
            match running.as_slice() {
                [one] => testbed_targets(one, &[], dirs),
                [] => {
                    let standalone = match sockets_in(&dirs.standalone) {
                        Ok(s) if !s.is_empty() => format!(
                            " (standalone switches in {}: {})",
                            dirs.standalone.display(),
                            s.into_iter().map(|(n, _)| n).collect::<Vec<_>>().join(", ")
                        ),
                        _ => String::new(),
                    };
                    Err(CtlError::Failed(format!(
                        "no switch selected and no testbed is running under {}{standalone}; pass --testbed NAME, -s SWITCH or --socket PATH",
                        dirs.testbeds.display()
                    )))
                }
                several => Err(CtlError::Failed(format!(
                    "no switch selected and several testbeds are running under {} ({}); pick one with --testbed NAME",
                    dirs.testbeds.display(),
                    several.join(", ")
                ))),
            }
        }
    }
}

/// `names` without repeats, first occurrence kept.
fn dedup(names: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for n in names {
        if !out.contains(n) {
            out.push(n.clone());
        }
    }
    out
}

/// The testbed directories under `dir`, sorted; none when `dir` is absent.
fn list_testbeds(dir: &Path) -> Result<Vec<String>, CtlError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(CtlError::Failed(format!(
                "cannot list {}: {e}",
                dir.display()
            )))
        }
    };
    let mut out: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    out.sort();
    Ok(out)
}

fn testbed_targets(
    testbed: &str,
    switches: &[String],
    dirs: &RunDirs,
) -> Result<Vec<Target>, CtlError> {
    let dir = dirs.testbeds.join(testbed);
    if !dir.is_dir() {
        let known = list_testbeds(&dirs.testbeds)?;
        return Err(CtlError::Failed(if known.is_empty() {
            format!(
                "unknown testbed {testbed:?}: there are no testbeds under {}",
                dirs.testbeds.display()
            )
        } else {
            format!(
                "unknown testbed {testbed:?}; testbeds under {}: {}",
                dirs.testbeds.display(),
                known.join(", ")
            )
        }));
    }
    let sockets = sockets_in(&dir)
        .map_err(|e| CtlError::Failed(format!("cannot list {}: {e}", dir.display())))?;
    if sockets.is_empty() {
        return Err(CtlError::Failed(format!(
            "testbed {testbed:?} has no switch sockets in {} (is it running?)",
            dir.display()
        )));
    }
    if switches.is_empty() {
        return Ok(sockets
            .into_iter()
            .map(|(name, path)| Target { name, path })
            .collect());
    }
    dedup(switches)
        .into_iter()
        .map(|name| match sockets.iter().find(|(n, _)| *n == name) {
            Some((_, path)) => Ok(Target {
                path: path.clone(),
                name,
            }),
            None => Err(CtlError::Failed(format!(
                "testbed {testbed:?} has no switch {name:?}; its switches: {}",
                sockets
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        })
        .collect()
}

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
        let up = match state {
            "up" => true,
            "down" => false,
            other => {
                return Err(CtlError::Usage(format!(
                    "link {port}: state {other:?} is neither up nor down"
                )))
            }
        };
        Ok(Command::Change(Request::SetAdmin {
            port: port.into(),
            up,
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
    fn expected_reply(&self) -> &'static str {
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

/// One switch's answer, or why there is none.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The switch.
    pub switch: String,
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

fn reply_kind(reply: &Reply) -> &'static str {
    match reply {
        Reply::Status(_) => "status",
        Reply::Ports(_) => "ports",
        Reply::Flows(_) => "flows",
        Reply::Costs(_) => "costs",
        Reply::Tables(_) => "tables",
        Reply::Applied(_) => "applied",
        Reply::LinkState(_) => "link_state",
        Reply::Rotor(_) => "rotor",
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

/// Prints the outcomes (human tables or JSON on `out`, one line per failed
/// switch on `err`) and returns the exit status: 1 if any switch failed.
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
    Ok(u8::from(failed))
}

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

/// The human rendering of the switches that answered. The replies have the
/// kind `command` expects (see [`query`]); any other is skipped.
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

/// `status`: one line per switch.
pub fn render_status(snapshots: &[(&str, &Snapshot)]) -> String {
    let mut t = Table::new(&[
        ("SWITCH", L),
        ("PID", R),
        ("UPTIME", R),
        ("POLICY", L),
        ("ECN", L),
        ("RX FRAMES", R),
        ("TX FRAMES", R),
        ("DROPS", R),
        ("FLOWS", R),
        ("TABLE GEN", R),
    ]);
    for (name, s) in snapshots {
        t.row(vec![
            name.to_string(),
            s.pid.to_string(),
            duration(s.uptime_ms),
            policy(&s.policy),
            ecn(&s.policy),
            s.counter("rx_frames").to_string(),
            s.counter("tx_frames").to_string(),
            s.drops_total.to_string(),
            s.flows.cached.to_string(),
            s.table_generation.to_string(),
        ]);
    }
    t.render("")
}

/// `policy`: the policy in force per switch.
pub fn render_policy(snapshots: &[(&str, &Snapshot)]) -> String {
    let mut t = Table::new(&[
        ("SWITCH", L),
        ("POLICY", L),
        ("ALPHA", R),
        ("BETA", R),
        ("ECN (KMIN,KMAX,PMAX)", L),
    ]);
    let opt = |v: Option<u32>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
    for (name, s) in snapshots {
        t.row(vec![
            name.to_string(),
            s.policy.name.clone(),
            opt(s.policy.alpha),
            opt(s.policy.beta),
            ecn(&s.policy),
        ]);
    }
    t.render("")
}

/// `ports`: one table per switch.
pub fn render_ports(name: &str, r: &PortsReply) -> String {
    let mut t = Table::new(&[
        ("PORT", R),
        ("NAME", L),
        ("UP", L),
        ("LINK", L),
        ("ADMIN", L),
        ("RX PKTS", R),
        ("TX PKTS", R),
        ("QUEUE", R),
        ("C_CONG", R),
        ("DROPS", R),
        ("RATE", R),
        ("DELAY", R),
        ("BUFFER", R),
        ("MODE", L),
    ]);
    for p in &r.ports {
        t.row(vec![
            p.index.to_string(),
            p.name.clone(),
            up_down(p.up),
            up_down(p.link_up),
            up_down(p.admin_up),
            p.counter("rx_frames").to_string(),
            p.counter("tx_frames").to_string(),
            bytes(p.queue_bytes),
            p.congestion.c_cong.to_string(),
            p.drops.values().sum::<u64>().to_string(),
            rate(p.emulation.rate_bps),
            delay(p.emulation.delay_ns),
            size(p.emulation.buffer_bytes),
            mode_name(p.emulation.mode).to_string(),
        ]);
    }
    format!("switch {name}: {} ports\n{}", r.ports.len(), t.render("  "))
}

/// `links`: every port's link emulation, one table across switches.
pub fn render_links(replies: &[(&str, &PortsReply)]) -> String {
    let mut t = Table::new(&[
        ("SWITCH", L),
        ("PORT", R),
        ("NAME", L),
        ("RATE", R),
        ("DELAY", R),
        ("BUFFER", R),
        ("EMULATED BY", L),
    ]);
    for (name, r) in replies {
        for p in &r.ports {
            t.row(vec![
                name.to_string(),
                p.index.to_string(),
                p.name.clone(),
                rate(p.emulation.rate_bps),
                delay(p.emulation.delay_ns),
                size(p.emulation.buffer_bytes),
                emulated_by(p.emulation.mode).to_string(),
            ]);
        }
    }
    t.render("")
}

/// What `links` adds below the switch ports: the directions no switch
/// sends (a host's kernel sends host-to-switch traffic), as the agent
/// planned them in `agent.json` beside the sockets. Said even when there
/// is no plan, so a direction is never silently unemulated.
pub fn render_agent_plan(targets: &[Target]) -> String {
    let mut dirs: Vec<&Path> = targets.iter().filter_map(|t| t.path.parent()).collect();
    dirs.dedup();
    let mut out = String::new();
    for dir in dirs {
        let file = dir.join("agent.json");
        let plan: Option<serde_json::Value> = std::fs::read_to_string(&file)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok());
        let Some(plan) = plan else {
            let _ = writeln!(
                out,
                "\nno agent plan in {} (no agent): directions sent by hosts' kernels are emulated by nothing the switches control",
                dir.display()
            );
            continue;
        };
        out.push_str(&render_plan_entries(&plan));
    }
    out
}

/// The non-switch entries of an agent plan (`agent.json`) as a table.
pub fn render_plan_entries(plan: &serde_json::Value) -> String {
    let mut t = Table::new(&[("DIRECTION", L), ("EMULATED BY", L), ("WHY", L)]);
    for e in plan["emulation"].as_array().into_iter().flatten() {
        if e["mechanism"] == "switch" {
            continue;
        }
        t.row(vec![
            e["direction"].as_str().unwrap_or("?").to_string(),
            e["mechanism"].as_str().unwrap_or("?").to_string(),
            e["reason"].as_str().unwrap_or("").to_string(),
        ]);
    }
    format!(
        "\ndirections no switch sends (the agent's plan):\n{}",
        t.render_or_none("")
    )
}

/// `flows`: cached flows by port, decisions by destination, recent
/// decisions.
pub fn render_flows(name: &str, r: &FlowsReply) -> String {
    let mut out = format!(
        "switch {name}: {} flows cached (capacity {})\n",
        r.cached, r.capacity
    );
    out.push_str("  cached flows by port:\n");
    let mut t = Table::new(&[("PORT", R), ("IFNAME", L), ("FLOWS", R)]);
    for p in &r.by_port {
        t.row(vec![
            p.port.to_string(),
            p.ifname.clone(),
            p.flows.to_string(),
        ]);
    }
    out.push_str(&t.render_or_none("    "));
    out.push_str("  decisions by destination:\n");
    let mut t = Table::new(&[("PREFIX", L), ("PORT", R), ("IFNAME", L), ("DECISIONS", R)]);
    for d in &r.by_destination {
        t.row(vec![
            d.prefix.clone(),
            d.port.to_string(),
            d.ifname.clone(),
            d.count.to_string(),
        ]);
    }
    out.push_str(&t.render_or_none("    "));
    let _ = writeln!(
        out,
        "  {} most recent decisions, newest first:",
        r.recent.len()
    );
    let mut t = Table::new(&[
        ("AGE", R),
        ("PROTO", L),
        ("SOURCE", L),
        ("DESTINATION", L),
        ("PORT", R),
        ("IFNAME", L),
        ("REASON", L),
    ]);
    for d in &r.recent {
        t.row(vec![
            age(d.age_ms),
            proto(d.proto),
            endpoint(d.src, d.sport, d),
            endpoint(d.dst, d.dport, d),
            d.port.to_string(),
            d.ifname.clone(),
            d.reason.clone(),
        ]);
    }
    out.push_str(&t.render_or_none("    "));
    out
}

/// `costs`: every candidate's cost parts, the kept set marked `*`.
pub fn render_costs(name: &str, r: &CostsReply) -> String {
    let mut out = format!(
        "switch {name}: {} matches route {}; policy {}; cost = {}*C_path + {}*C_cong\n",
        r.dst, r.prefix, r.policy, r.alpha, r.beta
    );
    let mut t = Table::new(&[
        ("", L),
        ("PORT", R),
        ("IFNAME", L),
        ("UP", L),
        ("C_PATH", R),
        ("CAPACITY", R),
        ("Q", R),
        ("T", R),
        ("D", R),
        ("C_CONG", R),
        ("COST", R),
        ("QUEUE", R),
    ]);
    for c in &r.candidates {
        t.row(vec![
            if c.kept { "*" } else { "" }.to_string(),
            c.port.to_string(),
            c.ifname.clone(),
            up_down(c.up),
            c.c_path.to_string(),
            rate(c.capacity_bps),
            c.q.to_string(),
            c.t.to_string(),
            c.d.to_string(),
            c.c_cong.to_string(),
            c.cost.to_string(),
            bytes(c.queue_bytes),
        ]);
    }
    out.push_str(&t.render_or_none("  "));
    // Only LCMP policies hash over the kept set; under the others the
    // switch still reports what LCMP would keep, which must not read as
    // what the switch does.
    if r.policy.starts_with("lcmp") {
        out.push_str("  * kept: the cheapest live candidates new flows hash over\n");
    } else {
        let _ = writeln!(
            out,
            "  * kept by LCMP if it were in force; policy {} chooses otherwise",
            r.policy
        );
    }
    out
}

/// `tables`: routes and their candidates.
pub fn render_tables(name: &str, r: &TablesReply) -> String {
    let mut out = format!(
        "switch {name}: table generation {}, {} routes; candidates as port ifname(C_path, capacity)\n",
        r.generation,
        r.routes.len()
    );
    let mut t = Table::new(&[("PREFIX", L), ("", L), ("CANDIDATES", L)]);
    for route in &r.routes {
        let candidates = route
            .candidates
            .iter()
            .map(|c| {
                let ifname = r.ifnames.get(c.port as usize).map_or("?", String::as_str);
                format!(
                    "{} {ifname}({}, {})",
                    c.port,
                    c.c_path,
                    rate(c.capacity_bps)
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        t.row(vec![route.prefix.clone(), "->".into(), candidates]);
    }
    out.push_str(&t.render_or_none("  "));
    out
}

/// `rotor`: a rotor network's switch: slot and lateness, circuits now,
/// the schedule, queues, drops.
pub fn render_rotor(name: &str, r: &lcmp_control::rotor::RotorStatus) -> String {
    let us = |ns: u64| format!("{:.1}us", ns as f64 / 1e3);
    let mut out = format!(
        "{} {name} ({} {}): {} ToRs x {} rotors, {} graph, {} routing, slot {} (reconfiguration {})\n",
        r.role,
        r.role,
        r.index,
        r.tors,
        r.rotors,
        r.graph,
        r.routing,
        us(r.slot_ns),
        us(r.reconfig_ns)
    );
    match r.epoch_unix_ns {
        Some(e) => out.push_str(&format!(
            "  epoch {e} ns ({}), slot now {}\n",
            r.epoch_source.as_deref().unwrap_or("?"),
            r.slot
        )),
        None => out.push_str("  no epoch yet: forwarding nothing into the circuits\n"),
    }
    if r.role == "tor" {
        let l = &r.lateness;
        out.push_str(&format!(
            "  slot lateness over {} slots: p50 {} p99 {} max {} last {}\n",
            l.samples,
            us(l.p50_ns),
            us(l.p99_ns),
            us(l.max_ns),
            us(l.last_ns)
        ));
    }
    let mut t = Table::new(&[
        ("PORT", L),
        ("KIND", L),
        ("CIRCUIT", L),
        ("SCHEDULE", L),
        ("RX", R),
        ("TX", R),
    ]);
    for (i, p) in r.ports.iter().enumerate() {
        let circuit = r.circuits.get(i).copied().flatten();
        // A rotor's port i follows every matching at i; a ToR's uplink i
        // follows rotor i's matchings at the ToR's own index.
        let schedule: Vec<String> = match r.role.as_str() {
            "rotor" => r.schedule.first().map_or(Vec::new(), |m| {
                m.iter()
                    .map(|x| x.get(i).map_or("?".into(), u32::to_string))
                    .collect()
            }),
            _ => r.schedule.get(i).map_or(Vec::new(), |m| {
                m.iter()
                    .map(|x| x.get(r.index as usize).map_or("?".into(), u32::to_string))
                    .collect()
            }),
        };
        t.row(vec![
            p.name.clone(),
            p.kind.clone(),
            circuit.map_or("-".into(), |c| format!("tor{c}")),
            schedule.join(" "),
            p.rx_frames.to_string(),
            p.tx_frames.to_string(),
        ]);
    }
    out.push_str(&t.render("  "));
    if r.role == "tor" {
        let waiting: Vec<String> = r
            .queues
            .iter()
            .filter(|q| q.frames > 0)
            .map(|q| format!("tor{} {} frames {} B", q.next_hop, q.frames, q.bytes))
            .collect();
        out.push_str(&format!(
            "  queued {} of {} B{}{}\n",
            r.queued_bytes,
            r.buffer_bytes,
            if waiting.is_empty() { "" } else { ": " },
            waiting.join(", ")
        ));
    }
    let drops: Vec<String> = r
        .drops
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    out.push_str(&format!(
        "  drops: {}\n",
        if drops.is_empty() {
            "none".into()
        } else {
            drops.join(", ")
        }
    ));
    out
}

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

#[derive(Clone, Copy, PartialEq, Eq)]
enum Align {
    Left,
    Right,
}
use Align::{Left as L, Right as R};

/// Columns padded to their widest cell, two spaces apart, no trailing
/// blanks.
struct Table {
    header: Vec<(String, Align)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn new(header: &[(&str, Align)]) -> Table {
        Table {
            header: header.iter().map(|&(h, a)| (h.to_string(), a)).collect(),
            rows: Vec::new(),
        }
    }

    fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.header.len());
        self.rows.push(cells);
    }

    fn render(&self, indent: &str) -> String {
        let mut widths: Vec<usize> = self.header.iter().map(|(h, _)| h.chars().count()).collect();
        for row in &self.rows {
            for (w, c) in widths.iter_mut().zip(row) {
                *w = (*w).max(c.chars().count());
            }
        }
        let header: Vec<String> = self.header.iter().map(|(h, _)| h.clone()).collect();
        let mut out = String::new();
        for row in std::iter::once(&header).chain(&self.rows) {
            let mut line = indent.to_string();
            for (i, cell) in row.iter().enumerate() {
                if i > 0 {
                    line.push_str("  ");
                }
                let pad = widths[i] - cell.chars().count();
                if self.header[i].1 == R {
                    line.extend(std::iter::repeat_n(' ', pad));
                    line.push_str(cell);
                } else {
                    line.push_str(cell);
                    line.extend(std::iter::repeat_n(' ', pad));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }

    /// The table, or `(none)` when it has no rows.
    fn render_or_none(&self, indent: &str) -> String {
        if self.rows.is_empty() {
            format!("{indent}(none)\n")
        } else {
            self.render(indent)
        }
    }
}

fn up_down(up: bool) -> String {
    if up { "up" } else { "down" }.to_string()
}

fn policy(p: &PolicyState) -> String {
    match (p.alpha, p.beta) {
        (Some(a), Some(b)) => format!("{} alpha={a} beta={b}", p.name),
        (Some(a), None) => format!("{} alpha={a}", p.name),
        (None, Some(b)) => format!("{} beta={b}", p.name),
        (None, None) => p.name.clone(),
    }
}

/// ECN thresholds in the syntax `set ecn` takes, or as time at link rate
/// (`lcmp-switch --ecn-link-time`).
fn ecn(p: &PolicyState) -> String {
    if let Some(t) = &p.ecn_link_time {
        return format!(
            "link-time {}us,{}us,{},floor {}B",
            t.kmin_ns as f64 / 1e3,
            t.kmax_ns as f64 / 1e3,
            t.pmax,
            t.kmin_floor_bytes
        );
    }
    p.ecn.as_ref().map_or_else(
        || "off".to_string(),
        |e| format!("{},{},{}", e.kmin, e.kmax, e.pmax),
    )
}

fn mode_name(m: EmulationMode) -> &'static str {
    match m {
        EmulationMode::Switch => "switch",
        EmulationMode::Netem => "netem",
        EmulationMode::None => "none",
    }
}

/// The mechanism behind a link, spelled out: a link "emulated" by nothing
/// must never look like one the switch shapes.
fn emulated_by(m: EmulationMode) -> &'static str {
    match m {
        EmulationMode::Switch => "switch (shaper + delay line)",
        EmulationMode::Netem => "netem (kernel qdisc; the switch forwards at line rate)",
        EmulationMode::None => "none (line rate, not emulated)",
    }
}

/// `n / unit` with up to `decimals` decimals, rounded, trailing zeros
/// dropped: `fixed(2_500, 1_000, 2)` is `"2.5"`.
fn fixed(n: u64, unit: u64, decimals: u32) -> String {
    let scale = 10u128.pow(decimals);
    let scaled = (n as u128 * scale + unit as u128 / 2) / unit as u128;
    let (whole, frac) = (scaled / scale, scaled % scale);
    if frac == 0 {
        return whole.to_string();
    }
    let frac = format!("{frac:0width$}", width = decimals as usize);
    format!("{whole}.{}", frac.trim_end_matches('0'))
}

/// A rate in the largest unit it reaches; 0 is line rate (no shaping).
pub fn rate(bps: u64) -> String {
    let (unit, name) = match bps {
        0 => return "line rate".into(),
        b if b >= 1_000_000_000 => (1_000_000_000, "Gbit/s"),
        b if b >= 1_000_000 => (1_000_000, "Mbit/s"),
        b if b >= 1_000 => (1_000, "kbit/s"),
        _ => (1, "bit/s"),
    };
    format!("{} {name}", fixed(bps, unit, 2))
}

/// A delay in ms to the microsecond; below a microsecond in ns.
pub fn delay(ns: u64) -> String {
    if ns > 0 && ns < 1_000 {
        return format!("{ns} ns");
    }
    format!("{} ms", fixed(ns, 1_000_000, 3))
}

/// A byte count in decimal units to one decimal (queues: live values).
pub fn bytes(b: u64) -> String {
    let (unit, name) = match b {
        b if b >= 1_000_000_000 => (1_000_000_000, "GB"),
        b if b >= 1_000_000 => (1_000_000, "MB"),
        b if b >= 1_000 => (1_000, "KB"),
        _ => return format!("{b} B"),
    };
    format!("{} {name}", fixed(b, unit, 1))
}

/// A configured size: in binary units when it is a whole number of them
/// (buffers are configured as "128MiB"), else as [`bytes`].
pub fn size(b: u64) -> String {
    [(1u64 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")]
        .into_iter()
        .find(|&(m, _)| b >= m && b % m == 0)
        .map_or_else(|| bytes(b), |(m, name)| format!("{} {name}", b / m))
}

/// An uptime: `45s`, `5m03s`, `1h02m03s`, `2d01h02m`.
pub fn duration(ms: u64) -> String {
    let s = ms / 1000;
    let (d, h, m, s) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m{s:02}s"),
        (0, _, _) => format!("{h}h{m:02}m{s:02}s"),
        _ => format!("{d}d{h:02}h{m:02}m"),
    }
}

/// How long ago: `12 ms`, `3.4 s`, then as [`duration`].
fn age(ms: u64) -> String {
    match ms {
        0..=999 => format!("{ms} ms"),
        1_000..=59_999 => format!("{} s", fixed(ms, 1_000, 1)),
        _ => duration(ms),
    }
}

fn proto(p: u8) -> String {
    match p {
        1 => "icmp".into(),
        6 => "tcp".into(),
        17 => "udp".into(),
        58 => "icmpv6".into(),
        132 => "sctp".into(),
        other => other.to_string(),
    }
}

/// An address with its port when the protocol has ports (`[v6]:port`).
fn endpoint(addr: IpAddr, port: u16, d: &RecentDecision) -> String {
    let has_ports = matches!(d.proto, 6 | 17 | 132) || d.sport != 0 || d.dport != 0;
    match (has_ports, addr) {
        (false, a) => a.to_string(),
        (true, IpAddr::V4(a)) => format!("{a}:{port}"),
        (true, IpAddr::V6(a)) => format!("[{a}]:{port}"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn links_name_the_directions_no_switch_sends() {
        let plan = serde_json::json!({"emulation": [
            {"direction": "s1->p1", "mechanism": "switch", "reason": "sent by an lcmp-switch port"},
            {"direction": "a->s1", "mechanism": "none", "reason": "no sch_netem"},
            {"direction": "b->s2", "mechanism": "netem", "reason": "netem on its interface"}
        ]});
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
        let none = render_agent_plan(&[Target {
            name: "s1".into(),
            path: PathBuf::from("/nonexistent-lcmp-dir/s1.sock"),
        }]);
        assert!(
            none.contains("no agent plan in /nonexistent-lcmp-dir"),
            "{none}"
        );
    }

    use std::collections::BTreeMap;

    use lcmp_control::proto::{CandidateCost, CandidateSpec, PortFlows, RouteSpec};
    use lcmp_control::snapshot::{Congestion, DecisionCount, Emulation, FlowStats, PortSnapshot};

    use super::*;

    fn port(index: u32, name: &str, mode: EmulationMode, rate_bps: u64) -> PortSnapshot {
        PortSnapshot {
            index,
            name: name.into(),
            up: index != 2,
            link_up: true,
            admin_up: index != 2,
            counters: BTreeMap::from([
                ("rx_frames".to_string(), 1000 * (index as u64 + 1)),
                ("tx_frames".to_string(), 990 * (index as u64 + 1)),
            ]),
            drops: BTreeMap::from([
                ("queue_full".to_string(), index as u64),
                ("port_down".to_string(), 2 * index as u64),
            ]),
            queue_bytes: [0, 12_345, 1_500_000][index as usize],
            congestion: Congestion {
                q: 1,
                t: 2,
                d: 3,
                c_cong: 10 * index as u8,
            },
            emulation: Emulation {
                mode,
                rate_bps,
                delay_ns: [10_000_000, 500_000, 0][index as usize],
                buffer_bytes: [128 << 20, 500_000, 1_000_000][index as usize],
            },
            ..PortSnapshot::default()
        }
    }

    fn ports() -> PortsReply {
        PortsReply {
            switch: "dc1".into(),
            ports: vec![
                port(0, "eth0", EmulationMode::Switch, 100_000_000),
                port(1, "eth1", EmulationMode::Netem, 2_500_000_000),
                port(2, "eth2", EmulationMode::None, 0),
            ],
        }
    }

    fn snapshot(name: &str, policy: &str, alpha: Option<u32>) -> Snapshot {
        Snapshot {
            switch: name.into(),
            pid: 4242,
            uptime_ms: 3_723_000,
            policy: PolicyState {
                name: policy.into(),
                alpha,
                beta: alpha.map(|_| 1),
                ecn: alpha.map(|_| EcnFractions::default()),
                ecn_link_time: None,
            },
            counters: BTreeMap::from([
                ("rx_frames".to_string(), 123_456),
                ("tx_frames".to_string(), 123_000),
            ]),
            drops_total: 7,
            flows: FlowStats {
                cached: 12,
                capacity: 65536,
                ..FlowStats::default()
            },
            table_generation: 3,
            ..Snapshot::default()
        }
    }

    #[test]
    fn status_is_one_aligned_line_per_switch() {
        let (a, b) = (
            snapshot("dc1", "lcmp", Some(3)),
            snapshot("dc12", "ecmp", None),
        );
        assert_eq!(
            render_status(&[("dc1", &a), ("dc12", &b)]),
            "\
SWITCH   PID    UPTIME  POLICY               ECN          RX FRAMES  TX FRAMES  DROPS  FLOWS  TABLE GEN
dc1     4242  1h02m03s  lcmp alpha=3 beta=1  0.2,0.8,0.2     123456     123000      7     12          3
dc12    4242  1h02m03s  ecmp                 off             123456     123000      7     12          3
"
        );
    }

    #[test]
    fn ports_show_state_counters_and_emulation() {
        assert_eq!(
            render_ports("dc1", &ports()),
            "\
switch dc1: 3 ports
  PORT  NAME  UP    LINK  ADMIN  RX PKTS  TX PKTS    QUEUE  C_CONG  DROPS        RATE   DELAY   BUFFER  MODE
     0  eth0  up    up    up        1000      990      0 B       0      0  100 Mbit/s   10 ms  128 MiB  switch
     1  eth1  up    up    up        2000     1980  12.3 KB      10      3  2.5 Gbit/s  0.5 ms   500 KB  netem
     2  eth2  down  up    down      3000     2970   1.5 MB      20      6   line rate    0 ms     1 MB  none
"
        );
    }

    #[test]
    fn links_name_the_emulating_mechanism_of_every_port() {
        let r = ports();
        assert_eq!(
            render_links(&[("dc1", &r), ("dc2", &r)]),
            "\
SWITCH  PORT  NAME        RATE   DELAY   BUFFER  EMULATED BY
dc1        0  eth0  100 Mbit/s   10 ms  128 MiB  switch (shaper + delay line)
dc1        1  eth1  2.5 Gbit/s  0.5 ms   500 KB  netem (kernel qdisc; the switch forwards at line rate)
dc1        2  eth2   line rate    0 ms     1 MB  none (line rate, not emulated)
dc2        0  eth0  100 Mbit/s   10 ms  128 MiB  switch (shaper + delay line)
dc2        1  eth1  2.5 Gbit/s  0.5 ms   500 KB  netem (kernel qdisc; the switch forwards at line rate)
dc2        2  eth2   line rate    0 ms     1 MB  none (line rate, not emulated)
"
        );
    }

    fn costs(policy: &str) -> CostsReply {
        let cand = |port: u32, up: bool, c_path: u8, c_cong: u8, kept: bool| CandidateCost {
            port,
            ifname: format!("eth{port}"),
            up,
            c_path,
            capacity_bps: 100_000_000_000 / (port as u64 + 1),
            q: c_cong / 2,
            t: 1,
            d: 0,
            c_cong,
            cost: 3 * c_path as u32 + c_cong as u32,
            kept,
            queue_bytes: 2_000 * port as u64,
        };
        CostsReply {
            switch: "dc1".into(),
            dst: "10.0.2.0/24".into(),
            prefix: "10.0.2.0/24".into(),
            policy: policy.into(),
            alpha: 3,
            beta: 1,
            candidates: vec![
                cand(0, true, 18, 0, true),
                cand(1, true, 38, 12, true),
                cand(2, false, 104, 0, false),
            ],
        }
    }

    #[test]
    fn costs_mark_the_kept_set() {
        assert_eq!(
            render_costs("dc1", &costs("lcmp")),
            "\
switch dc1: 10.0.2.0/24 matches route 10.0.2.0/24; policy lcmp; cost = 3*C_path + 1*C_cong
     PORT  IFNAME  UP    C_PATH      CAPACITY  Q  T  D  C_CONG  COST  QUEUE
  *     0  eth0    up        18    100 Gbit/s  0  1  0       0    54    0 B
  *     1  eth1    up        38     50 Gbit/s  6  1  0      12   126   2 KB
        2  eth2    down     104  33.33 Gbit/s  0  1  0       0   312   4 KB
  * kept: the cheapest live candidates new flows hash over
"
        );
        // Under ECMP the kept set is LCMP's hypothetical, and says so.
        let text = render_costs("dc1", &costs("ecmp"));
        assert!(
            text.ends_with("  * kept by LCMP if it were in force; policy ecmp chooses otherwise\n"),
            "{text}"
        );
    }

    #[test]
    fn flows_list_ports_destinations_and_recent_decisions() {
        let r = FlowsReply {
            switch: "dc1".into(),
            cached: 3,
            capacity: 65536,
            by_port: vec![
                PortFlows {
                    port: 0,
                    ifname: "eth0".into(),
                    flows: 2,
                },
                PortFlows {
                    port: 1,
                    ifname: "eth1".into(),
                    flows: 1,
                },
            ],
            by_destination: vec![DecisionCount {
                prefix: "10.0.2.0/24".into(),
                port: 0,
                ifname: "eth0".into(),
                count: 17,
            }],
            recent: vec![
                RecentDecision {
                    age_ms: 12,
                    src: "10.0.1.2".parse().unwrap(),
                    dst: "10.0.2.2".parse().unwrap(),
                    proto: 6,
                    sport: 40000,
                    dport: 80,
                    port: 0,
                    ifname: "eth0".into(),
                    reason: "new".into(),
                },
                RecentDecision {
                    age_ms: 3_456,
                    src: "fd00::1".parse().unwrap(),
                    dst: "fd00::2".parse().unwrap(),
                    proto: 58,
                    sport: 0,
                    dport: 0,
                    port: 1,
                    ifname: "eth1".into(),
                    reason: "failover".into(),
                },
            ],
        };
        assert_eq!(
            render_flows("dc1", &r),
            "\
switch dc1: 3 flows cached (capacity 65536)
  cached flows by port:
    PORT  IFNAME  FLOWS
       0  eth0        2
       1  eth1        1
  decisions by destination:
    PREFIX       PORT  IFNAME  DECISIONS
    10.0.2.0/24     0  eth0           17
  2 most recent decisions, newest first:
      AGE  PROTO   SOURCE          DESTINATION  PORT  IFNAME  REASON
    12 ms  tcp     10.0.1.2:40000  10.0.2.2:80     0  eth0    new
    3.5 s  icmpv6  fd00::1         fd00::2         1  eth1    failover
"
        );
        let empty = FlowsReply {
            by_port: vec![],
            by_destination: vec![],
            recent: vec![],
            cached: 0,
            ..r
        };
        assert_eq!(
            render_flows("dc1", &empty),
            "\
switch dc1: 0 flows cached (capacity 65536)
  cached flows by port:
    (none)
  decisions by destination:
    (none)
  0 most recent decisions, newest first:
    (none)
"
        );
    }

    #[test]
    fn tables_list_candidates_with_cost_and_capacity() {
        let cand = |port, c_path, capacity_bps| CandidateSpec {
            port,
            c_path,
            capacity_bps,
        };
        let r = TablesReply {
            switch: "dc1".into(),
            generation: 2,
            ifnames: vec!["eth0".into(), "eth1".into()],
            routes: vec![
                RouteSpec {
                    prefix: "10.0.2.0/24".into(),
                    candidates: vec![cand(0, 18, 200_000_000_000), cand(1, 38, 100_000_000)],
                },
                RouteSpec {
                    prefix: "10.8.0.0/16".into(),
                    candidates: vec![cand(7, 60, 25_000_000_000)],
                },
            ],
        };
        assert_eq!(
            render_tables("dc1", &r),
            "\
switch dc1: table generation 2, 2 routes; candidates as port ifname(C_path, capacity)
  PREFIX           CANDIDATES
  10.0.2.0/24  ->  0 eth0(18, 200 Gbit/s), 1 eth1(38, 100 Mbit/s)
  10.8.0.0/16  ->  7 ?(60, 25 Gbit/s)
"
        );
    }

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

    #[test]
    fn policy_shows_weights_and_ecn() {
        let (a, b) = (
            snapshot("dc1", "lcmp", Some(3)),
            snapshot("dc2", "wcmp", None),
        );
        assert_eq!(
            render_policy(&[("dc1", &a), ("dc2", &b)]),
            "\
SWITCH  POLICY  ALPHA  BETA  ECN (KMIN,KMAX,PMAX)
dc1     lcmp        3     1  0.2,0.8,0.2
dc2     wcmp        -     -  off
"
        );
    }

    #[test]
    fn units_read_naturally() {
        assert_eq!(rate(0), "line rate");
        assert_eq!(rate(999), "999 bit/s");
        assert_eq!(rate(1_234_567), "1.23 Mbit/s");
        assert_eq!(rate(200_000_000_000), "200 Gbit/s");
        assert_eq!(delay(0), "0 ms");
        assert_eq!(delay(750), "750 ns");
        assert_eq!(delay(25_000_000), "25 ms");
        assert_eq!(delay(1_500), "0.002 ms");
        assert_eq!(bytes(999), "999 B");
        assert_eq!(bytes(1_049), "1 KB");
        assert_eq!(bytes(1_050), "1.1 KB");
        assert_eq!(size(128 << 20), "128 MiB");
        assert_eq!(size(64 << 10), "64 KiB");
        assert_eq!(size(250_000), "250 KB");
        assert_eq!(duration(45_999), "45s");
        assert_eq!(duration(303_000), "5m03s");
        assert_eq!(duration(2 * 86_400_000 + 3_720_000), "2d01h02m");
    }

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

    #[test]
    fn wrong_reply_kinds_are_errors() {
        let r = check_kind(&Command::Status, Reply::Ports(ports())).unwrap_err();
        assert_eq!(
            r,
            "bad reply from the switch: a ports reply to a status request"
        );
        assert!(check_kind(&Command::Links, Reply::Ports(ports())).is_ok());
    }

    #[test]
    fn json_lists_replies_and_errors_per_switch() {
        let outcomes = [
            Outcome {
                switch: "dc1".into(),
                result: Ok(Reply::Applied(Applied {
                    message: "alpha 5".into(),
                    changed: true,
                    flows_to_move: 0,
                })),
            },
            Outcome {
                switch: "dc2".into(),
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

    /// A run directory tree in the temporary directory, removed on drop.
    struct TempRun(PathBuf);

    impl TempRun {
        fn new(tag: &str) -> TempRun {
            let dir =
                std::env::temp_dir().join(format!("lcmp-ctl-unit-{}-{tag}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(dir.join("testbeds")).unwrap();
            std::fs::create_dir_all(dir.join("standalone")).unwrap();
            TempRun(dir)
        }

        fn dirs(&self) -> RunDirs {
            RunDirs {
                testbeds: self.0.join("testbeds"),
                standalone: self.0.join("standalone"),
            }
        }

        /// A socket file: `sockets_in` goes by name, so a plain file will do.
        fn sock(&self, rel: &str) {
            let p = self.0.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, b"").unwrap();
        }
    }

    impl Drop for TempRun {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn failed(r: Result<Vec<Target>, CtlError>) -> String {
        match r {
            Err(CtlError::Failed(m)) => m,
            other => panic!("expected a failure, got {other:?}"),
        }
    }

    fn names(r: Result<Vec<Target>, CtlError>) -> Vec<String> {
        r.unwrap().into_iter().map(|t| t.name).collect()
    }

    #[test]
    fn selection_finds_testbed_and_standalone_sockets() {
        let run = TempRun::new("select");
        let dirs = run.dirs();
        let tb = |name: &str, sw: &[&str]| Selection::Testbed {
            name: name.into(),
            switches: sw.iter().map(|s| s.to_string()).collect(),
        };
        // Nothing running: the error says where it looked.
        let m = failed(resolve(&Selection::Auto, &dirs));
        assert!(
            m.starts_with("no switch selected and no testbed is running"),
            "{m}"
        );
        run.sock("standalone/edge.sock");
        let m = failed(resolve(&Selection::Auto, &dirs));
        assert!(
            m.contains("standalone switches in") && m.contains(": edge)"),
            "{m}"
        );

        run.sock("testbeds/alpha/dc2.sock");
        run.sock("testbeds/alpha/dc1.sock");
        run.sock("testbeds/alpha/notes.txt");
        std::fs::create_dir_all(run.0.join("testbeds/stale")).unwrap();
        // One testbed with sockets: chosen, its switches sorted.
        assert_eq!(names(resolve(&Selection::Auto, &dirs)), ["dc1", "dc2"]);
        assert_eq!(
            names(resolve(&tb("alpha", &["dc2", "dc2"]), &dirs)),
            ["dc2"]
        );
        let t = resolve(&tb("alpha", &["dc1"]), &dirs).unwrap();
        assert_eq!(t[0].path, dirs.testbeds.join("alpha/dc1.sock"));

        assert_eq!(
            failed(resolve(&tb("alpha", &["dc9"]), &dirs)),
            "testbed \"alpha\" has no switch \"dc9\"; its switches: dc1, dc2"
        );
        assert_eq!(
            failed(resolve(&tb("beta", &[]), &dirs)),
            format!(
                "unknown testbed \"beta\"; testbeds under {}: alpha, stale",
                dirs.testbeds.display()
            )
        );
        assert!(failed(resolve(&tb("stale", &[]), &dirs)).contains("has no switch sockets"));

        run.sock("testbeds/gamma/dc1.sock");
        let m = failed(resolve(&Selection::Auto, &dirs));
        assert!(
            m.contains("several testbeds are running") && m.contains("(alpha, gamma)"),
            "{m}"
        );

        let t = resolve(&Selection::Standalone(vec!["edge".into()]), &dirs).unwrap();
        assert_eq!(t[0].path, dirs.standalone.join("edge.sock"));
        let t = resolve(&Selection::Socket("/tmp/x/dc7.sock".into()), &dirs).unwrap();
        assert_eq!(
            (t[0].name.as_str(), t[0].path.as_path()),
            ("dc7", Path::new("/tmp/x/dc7.sock"))
        );
    }

    #[test]
    fn options_combine_into_one_selection() {
        assert_eq!(
            Selection::from_options(None, vec![], None).unwrap(),
            Selection::Auto
        );
        assert_eq!(
            Selection::from_options(None, vec!["a".into()], None).unwrap(),
            Selection::Standalone(vec!["a".into()])
        );
        assert!(matches!(
            Selection::from_options(Some("t".into()), vec![], Some("/s".into())),
            Err(CtlError::Usage(_))
        ));
        assert!(matches!(
            Selection::from_options(None, vec!["a".into()], Some("/s".into())),
            Err(CtlError::Usage(_))
        ));
        assert_eq!(
            Selection::from_options(Some("../etc".into()), vec![], None),
            Err(CtlError::Usage(
                "\"../etc\" is not a testbed or switch name".into()
            ))
        );
    }
}

//! A flow's path through the network: the sequence of switches it crossed,
//! reconstructed from every switch's decision log (`lcmp-switch
//! --flow-log`, CSV `time_ns,src,dst,proto,sport,dport,port,ifname,reason,prefix`).
//!
//! LCMP is distributed: every switch decides for the flows it forwards, so
//! the source switch's choice is not the path (on `topologies/13dc.toml`
//! DC1 has a single link and the choices are at DC3 and DC6). [`walk`]
//! starts at the sender's switch and follows the port each switch logged
//! for the flow's 5-tuple to the next switch, until a port leads to the
//! receiving host. A switch on the way without a decision, a port to
//! another host or a loop leave the path unreconstructed, with the reason
//! ([`Missing`]); nothing is guessed.
//!
//! Every switch a flow crosses logs a decision for it, also where its
//! route has a single candidate: `Switch::forward`
//! (`dataplane/switch/src/switch.rs`) sends every frame through
//! `Router::route_with`, which decides a flow missing from the cache
//! (`RouteOutcome::New`) whatever the number of candidates -- the
//! destination switch's route to its host has one -- and `note_decision`
//! logs every `New`, `FailedOver` and `Uncached` outcome. So the walk never
//! follows a route's only candidate on its own: a missing decision means
//! the record was lost (the log's `dropped` and `write_failed` counters in
//! the switch's stats) or the flow never reached that switch.
//!
//! Pure: the logs come in as text, the topology as a value.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io::Read;
use std::net::{IpAddr, SocketAddr};

use lcmp_topology::{HostId, Peer, SwitchId, Topology};

/// A flow's (source, destination) socket addresses, as a switch sees them.
pub type Tuple = (SocketAddr, SocketAddr);

/// Why a switch logged a decision (the log's `reason` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// A flow not in the cache, decided and cached.
    New,
    /// A cached flow whose port went down, moved to a live one.
    Failover,
    /// Decided but not cached (its cache bucket was full).
    CacheFull,
}

/// One line of a decision log (the columns the walk needs).
#[derive(Debug, serde::Deserialize)]
struct Line {
    src: IpAddr,
    dst: IpAddr,
    sport: u16,
    dport: u16,
    port: u8,
    reason: Reason,
}

/// The egress port one switch logged for each flow it forwarded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SwitchDecisions {
    ports: HashMap<Tuple, u8>,
}

impl SwitchDecisions {
    /// Adds one logged decision. The one rule for repeated lines: a
    /// `failover` line moves a flow off a dead port, but the path the flow
    /// was put on is the decision before it, so a failover counts only for
    /// a flow without one (its first line lost from the log); a `new` or
    /// `cache_full` line sets the port.
    pub fn record(&mut self, tuple: Tuple, port: u8, reason: Reason) {
        if reason == Reason::Failover {
            self.ports.entry(tuple).or_insert(port);
        } else {
            self.ports.insert(tuple, port);
        }
    }

    /// The port logged for `tuple`.
    pub fn port(&self, tuple: &Tuple) -> Option<u8> {
        self.ports.get(tuple).copied()
    }

    /// Flows with a decision.
    pub fn len(&self) -> usize {
        self.ports.len()
    }

    /// No decision at all.
    pub fn is_empty(&self) -> bool {
        self.ports.is_empty()
    }

    /// The decisions of one switch's log (with its header line); `source`
    /// names the log in errors.
    pub fn from_csv(log: impl Read, source: &str) -> Result<SwitchDecisions, String> {
        let mut d = SwitchDecisions::default();
        for row in csv::Reader::from_reader(log).deserialize::<Line>() {
            let l = row.map_err(|e| format!("{source}: {e}"))?;
            d.record(
                (
                    SocketAddr::new(l.src, l.sport),
                    SocketAddr::new(l.dst, l.dport),
                ),
                l.port,
                l.reason,
            );
        }
        Ok(d)
    }
}

/// Why a flow's path was not reconstructed. [`Missing::to_string`] is the
/// key it is counted under: a kind, and where the walk stopped
/// (`no_decision@dc3`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Missing {
    /// The flow has no 5-tuple: its connection never got a local address.
    NoTuple,
    /// The sender or receiver (named) is no host of the topology.
    UnknownHost(String),
    /// No decision log of the switch (named) was read.
    NoLog(String),
    /// The switch's log has no decision for the flow.
    NoDecision(String),
    /// The switch logged a port it does not have.
    NoPort(String),
    /// The switch's logged port leads to a host other than the receiver.
    WrongHost(String),
    /// The walk came back to the switch: the decisions form a loop.
    Loop(String),
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Missing::NoTuple => write!(f, "no_tuple"),
            Missing::UnknownHost(h) => write!(f, "unknown_host@{h}"),
            Missing::NoLog(s) => write!(f, "no_log@{s}"),
            Missing::NoDecision(s) => write!(f, "no_decision@{s}"),
            Missing::NoPort(s) => write!(f, "no_port@{s}"),
            Missing::WrongHost(s) => write!(f, "wrong_host@{s}"),
            Missing::Loop(s) => write!(f, "loop@{s}"),
        }
    }
}

/// One direction of a flow: its switches in order, or why not.
pub type PathResult = Result<Vec<SwitchId>, Missing>;

/// The path of the packets with `tuple` from host `from` to host `to`:
/// start at `from`'s switch, follow each switch's logged port
/// (`decisions[switch id]`, `None` or absent: no log read) to the next
/// switch, end at the switch whose port leads to `to`.
pub fn walk(
    topo: &Topology,
    decisions: &[Option<SwitchDecisions>],
    from: HostId,
    to: HostId,
    tuple: &Tuple,
) -> PathResult {
    let name = |s: SwitchId| topo.switch(s).name.clone();
    let mut at = topo.host(from).switch;
    let mut path = Vec::new();
    let mut visited = vec![false; topo.switches().len()];
    loop {
        // Visiting a switch twice is a loop; it also bounds the walk to as
        // many hops as there are switches.
        if std::mem::replace(&mut visited[at.0], true) {
            return Err(Missing::Loop(name(at)));
        }
        path.push(at);
        let Some(log) = decisions.get(at.0).and_then(Option::as_ref) else {
            return Err(Missing::NoLog(name(at)));
        };
        let Some(port) = log.port(tuple) else {
            return Err(Missing::NoDecision(name(at)));
        };
        let Some(p) = topo.port(at, port) else {
            return Err(Missing::NoPort(name(at)));
        };
        match p.peer {
            Peer::Switch { switch, .. } => at = switch,
            Peer::Host { host } if host == to => return Ok(path),
            Peer::Host { .. } => return Err(Missing::WrongHost(name(at))),
        }
    }
}

/// A flow's forward path (sender to receiver, its own tuple) and reverse
/// path (receiver to sender, the tuple its acknowledgements carry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowPaths {
    /// Data direction.
    pub forward: PathResult,
    /// Acknowledgement direction.
    pub reverse: PathResult,
}

/// Both paths of a flow between the hosts named `sender` and `receiver`;
/// `None` tuples (no socket address) are [`Missing::NoTuple`].
pub fn flow_paths(
    topo: &Topology,
    decisions: &[Option<SwitchDecisions>],
    sender: &str,
    receiver: &str,
    forward: Option<Tuple>,
    reverse: Option<Tuple>,
) -> FlowPaths {
    let host = |n: &str| {
        topo.host_by_name(n)
            .map(|h| h.id)
            .ok_or_else(|| Missing::UnknownHost(n.to_string()))
    };
    let one = |from: &str, to: &str, tuple: Option<Tuple>| -> PathResult {
        let (from, to) = (host(from)?, host(to)?);
        walk(topo, decisions, from, to, &tuple.ok_or(Missing::NoTuple)?)
    };
    FlowPaths {
        forward: one(sender, receiver, forward),
        reverse: one(receiver, sender, reverse),
    }
}

/// A path as switch names joined by `>`: `dc1>dc3>dc6>dc13`.
pub fn path_name(topo: &Topology, path: &[SwitchId]) -> String {
    path.iter()
        .map(|&s| topo.switch(s).name.as_str())
        .collect::<Vec<_>>()
        .join(">")
}

/// Counts an unreconstructed path under its [`Missing`] key.
pub fn tally(counts: &mut BTreeMap<String, u64>, path: &PathResult) {
    if let Err(why) = path {
        *counts.entry(why.to_string()).or_insert(0) += 1;
    }
}

/// The name of what port `port` of `switch` leads to (a switch or a
/// host), `None` if the switch has no such port.
pub fn neighbour_name(topo: &Topology, switch: SwitchId, port: u8) -> Option<String> {
    Some(match topo.port(switch, port)?.peer {
        Peer::Switch { switch, .. } => topo.switch(switch).name.clone(),
        Peer::Host { host } => topo.host(host).name.clone(),
    })
}

/// The switches other than `from` that choose among more than one next hop
/// for traffic from `from` to `to`: every switch on a minimum-hop path
/// between them (the candidates of [`Topology::candidates`], followed from
/// `from`) with more than one candidate toward `to`, in topology order.
pub fn transit_choices(topo: &Topology, from: SwitchId, to: SwitchId) -> Vec<SwitchId> {
    let n = topo.switches().len();
    let mut seen = vec![false; n];
    let mut stack = vec![from];
    seen[from.0] = true;
    let mut choosing = Vec::new();
    while let Some(s) = stack.pop() {
        let candidates = topo.candidates(s, to);
        if s != from && candidates.len() > 1 {
            choosing.push(s);
        }
        for c in candidates {
            if !std::mem::replace(&mut seen[c.next_hop.0], true) {
                stack.push(c.next_hop);
            }
        }
    }
    choosing.sort();
    choosing
}

/// Whether the source switch is the only one that chooses a path from
/// `from` to `to` ([`transit_choices`] is empty): then the bytes leaving
/// each of its ports are one path's, and per-path figures mean something.
pub fn choice_only_at_source(topo: &Topology, from: SwitchId, to: SwitchId) -> bool {
    transit_choices(topo, from, to).is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A diamond with the choice at a transit switch: `a` has one link (to
    /// `b`), `b` chooses between `c` and `d`, both lead to `e`. Ports, by
    /// the topology's rule (links in file order, then hosts):
    /// a: 0 -> b, 1 -> ha; b: 0 -> a, 1 -> c, 2 -> d; c: 0 -> b, 1 -> e;
    /// d: 0 -> b, 1 -> e; e: 0 -> c, 1 -> d, 2 -> he, 3 -> he2.
    const DIAMOND: &str = r#"
        [[switch]]
        name = "a"
        prefixes = ["10.1.0.0/16"]
        [[switch]]
        name = "b"
        [[switch]]
        name = "c"
        [[switch]]
        name = "d"
        [[switch]]
        name = "e"
        prefixes = ["10.5.0.0/16"]
        [[host]]
        name = "ha"
        switch = "a"
        addresses = ["10.1.0.2/16"]
        rate = "1Gbps"
        delay = "10us"
        [[host]]
        name = "he"
        switch = "e"
        addresses = ["10.5.0.2/16"]
        rate = "1Gbps"
        delay = "10us"
        [[host]]
        name = "he2"
        switch = "e"
        addresses = ["10.5.0.3/16"]
        rate = "1Gbps"
        delay = "10us"
        [[link]]
        a = "a"
        b = "b"
        rate = "1Gbps"
        delay = "1ms"
        [[link]]
        a = "b"
        b = "c"
        rate = "1Gbps"
        delay = "1ms"
        [[link]]
        a = "b"
        b = "d"
        rate = "1Gbps"
        delay = "1ms"
        [[link]]
        a = "c"
        b = "e"
        rate = "1Gbps"
        delay = "1ms"
        [[link]]
        a = "d"
        b = "e"
        rate = "1Gbps"
        delay = "1ms"
    "#;

    fn diamond() -> Topology {
        Topology::parse(DIAMOND, "diamond.toml").unwrap()
    }

    const HEADER: &str = "time_ns,src,dst,proto,sport,dport,port,ifname,reason,prefix\n";

    /// One log per switch of the diamond, in its order a..e.
    fn logs(lines: [&str; 5]) -> Vec<Option<SwitchDecisions>> {
        lines
            .iter()
            .enumerate()
            .map(|(i, l)| {
                Some(
                    SwitchDecisions::from_csv(format!("{HEADER}{l}").as_bytes(), &i.to_string())
                        .unwrap(),
                )
            })
            .collect()
    }

    fn tuple(s: &str, d: &str) -> Tuple {
        (s.parse().unwrap(), d.parse().unwrap())
    }

    /// ha's flow 10.1.0.2:40000 -> he's 10.5.0.2:5001 and its ACKs.
    fn fwd() -> Tuple {
        tuple("10.1.0.2:40000", "10.5.0.2:5001")
    }

    fn rev() -> Tuple {
        tuple("10.5.0.2:5001", "10.1.0.2:40000")
    }

    fn names(topo: &Topology, p: &PathResult) -> Result<String, String> {
        p.as_ref()
            .map(|p| path_name(topo, p))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn forward_and_reverse_paths_differ() {
        let t = diamond();
        // Data: a port 0 (b), b port 1 (c), c port 1 (e), e port 2 (he).
        // ACKs: e port 1 (d), d port 0 (b), b port 0 (a), a port 1 (ha).
        let d = logs([
            "1,10.1.0.2,10.5.0.2,6,40000,5001,0,p0,new,10.5.0.0/16\n\
             3,10.5.0.2,10.1.0.2,6,5001,40000,1,p1,new,10.1.0.2/32\n",
            "1,10.1.0.2,10.5.0.2,6,40000,5001,1,p1,new,10.5.0.0/16\n\
             2,10.5.0.2,10.1.0.2,6,5001,40000,0,p0,new,10.1.0.0/16\n",
            "1,10.1.0.2,10.5.0.2,6,40000,5001,1,p1,new,10.5.0.0/16\n",
            "2,10.5.0.2,10.1.0.2,6,5001,40000,0,p0,new,10.1.0.0/16\n",
            "1,10.1.0.2,10.5.0.2,6,40000,5001,2,p2,new,10.5.0.2/32\n\
             1,10.5.0.2,10.1.0.2,6,5001,40000,1,p1,new,10.1.0.0/16\n",
        ]);
        let p = flow_paths(&t, &d, "ha", "he", Some(fwd()), Some(rev()));
        assert_eq!(names(&t, &p.forward), Ok("a>b>c>e".into()));
        assert_eq!(names(&t, &p.reverse), Ok("e>d>b>a".into()));
        // The source switch's own choice: the neighbour behind its port 0.
        assert_eq!(neighbour_name(&t, SwitchId(0), 0).as_deref(), Some("b"));
        assert_eq!(neighbour_name(&t, SwitchId(0), 1).as_deref(), Some("ha"));
        assert_eq!(neighbour_name(&t, SwitchId(0), 2), None);
    }

    #[test]
    fn a_missing_transit_decision_is_counted_by_switch() {
        let t = diamond();
        // b chose c for the data, but c's log has no line for the flow (a
        // record lost to a full log buffer); the ACKs' path is whole.
        let d = logs([
            "1,10.1.0.2,10.5.0.2,6,40000,5001,0,p0,new,\n\
             3,10.5.0.2,10.1.0.2,6,5001,40000,1,p1,new,\n",
            "1,10.1.0.2,10.5.0.2,6,40000,5001,1,p1,new,\n\
             2,10.5.0.2,10.1.0.2,6,5001,40000,0,p0,new,\n",
            "",
            "2,10.5.0.2,10.1.0.2,6,5001,40000,0,p0,new,\n",
            "1,10.1.0.2,10.5.0.2,6,40000,5001,2,p2,new,\n\
             1,10.5.0.2,10.1.0.2,6,5001,40000,1,p1,new,\n",
        ]);
        let p = flow_paths(&t, &d, "ha", "he", Some(fwd()), Some(rev()));
        assert_eq!(p.forward, Err(Missing::NoDecision("c".into())));
        assert_eq!(names(&t, &p.reverse), Ok("e>d>b>a".into()));
        // A second flow without any line, and one that never connected.
        let other = flow_paths(
            &t,
            &d,
            "ha",
            "he",
            Some(tuple("10.1.0.2:40001", "10.5.0.2:5001")),
            Some(tuple("10.5.0.2:5001", "10.1.0.2:40001")),
        );
        let never = flow_paths(&t, &d, "ha", "he", None, None);
        let mut forward = BTreeMap::new();
        let mut reverse = BTreeMap::new();
        for f in [&p, &other, &never] {
            tally(&mut forward, &f.forward);
            tally(&mut reverse, &f.reverse);
        }
        // The first flow stops at c, the second at a (the source) and e.
        assert_eq!(
            forward.into_iter().collect::<Vec<_>>(),
            [
                ("no_decision@a".to_string(), 1),
                ("no_decision@c".to_string(), 1),
                ("no_tuple".to_string(), 1)
            ]
        );
        assert_eq!(
            reverse.into_iter().collect::<Vec<_>>(),
            [
                ("no_decision@e".to_string(), 1),
                ("no_tuple".to_string(), 1)
            ]
        );
        // No log read for d at all, and a host the topology lacks.
        let mut d2 = d.clone();
        d2[3] = None;
        let p2 = flow_paths(&t, &d2, "ha", "he", Some(fwd()), Some(rev()));
        assert_eq!(p2.reverse, Err(Missing::NoLog("d".into())));
        let p3 = flow_paths(&t, &d, "ha", "hx", Some(fwd()), Some(rev()));
        assert_eq!(p3.forward.unwrap_err().to_string(), "unknown_host@hx");
    }

    #[test]
    fn a_failover_does_not_override_the_first_decision() {
        let t = diamond();
        // b put the flow on c (port 1); c-e failed later and b moved it to
        // d (port 2). The path the flow was put on is via c.
        let d = logs([
            "1,10.1.0.2,10.5.0.2,6,40000,5001,0,p0,new,\n",
            "1,10.1.0.2,10.5.0.2,6,40000,5001,1,p1,new,\n\
             9,10.1.0.2,10.5.0.2,6,40000,5001,2,p2,failover,\n",
            "1,10.1.0.2,10.5.0.2,6,40000,5001,1,p1,new,\n",
            "9,10.1.0.2,10.5.0.2,6,40000,5001,1,p1,new,\n",
            "1,10.1.0.2,10.5.0.2,6,40000,5001,2,p2,new,\n",
        ]);
        let p = walk(&t, &d, HostId(0), HostId(1), &fwd());
        assert_eq!(names(&t, &p), Ok("a>b>c>e".into()));
        // A failover alone (the first line lost) still names the port; a
        // later `new` (the flow evicted and decided again) replaces it.
        let mut s = SwitchDecisions::default();
        s.record(fwd(), 2, Reason::Failover);
        assert_eq!(s.port(&fwd()), Some(2));
        s.record(fwd(), 1, Reason::Failover);
        assert_eq!(s.port(&fwd()), Some(2));
        s.record(fwd(), 1, Reason::CacheFull);
        assert_eq!(s.port(&fwd()), Some(1));
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn a_loop_or_a_wrong_host_is_no_path() {
        let t = diamond();
        // b sends the flow to c, c back to b (port 0): b twice.
        let d = logs([
            "1,10.1.0.2,10.5.0.2,6,40000,5001,0,p0,new,\n",
            "1,10.1.0.2,10.5.0.2,6,40000,5001,1,p1,new,\n",
            "1,10.1.0.2,10.5.0.2,6,40000,5001,0,p0,new,\n",
            "",
            "",
        ]);
        assert_eq!(
            walk(&t, &d, HostId(0), HostId(1), &fwd()),
            Err(Missing::Loop("b".into()))
        );
        // e delivers to he2 (port 3) a flow for he; a logs port 7.
        let d = logs([
            "1,10.1.0.2,10.5.0.2,6,40000,5001,0,p0,new,\n\
             1,10.1.0.2,10.5.0.3,6,40000,5001,7,p7,new,\n",
            "1,10.1.0.2,10.5.0.2,6,40000,5001,2,p2,new,\n",
            "",
            "1,10.1.0.2,10.5.0.2,6,40000,5001,1,p1,new,\n",
            "1,10.1.0.2,10.5.0.2,6,40000,5001,3,p3,new,\n",
        ]);
        assert_eq!(
            walk(&t, &d, HostId(0), HostId(1), &fwd()),
            Err(Missing::WrongHost("e".into()))
        );
        assert_eq!(
            walk(
                &t,
                &d,
                HostId(0),
                HostId(2),
                &tuple("10.1.0.2:40000", "10.5.0.3:5001")
            ),
            Err(Missing::NoPort("a".into()))
        );
    }

    #[test]
    fn logs_read_ipv6_and_refuse_unknown_reasons() {
        let text =
            format!("{HEADER}5,fd00:1::2,fd00:5::2,17,49152,4791,0,p0,cache_full,fd00:5::/64\n");
        let d = SwitchDecisions::from_csv(text.as_bytes(), "a.flows.csv").unwrap();
        assert_eq!(
            d.port(&tuple("[fd00:1::2]:49152", "[fd00:5::2]:4791")),
            Some(0)
        );
        let bad = format!("{HEADER}5,10.1.0.2,10.5.0.2,6,1,2,0,p0,moved,\n");
        let e = SwitchDecisions::from_csv(bad.as_bytes(), "a.flows.csv").unwrap_err();
        assert!(e.starts_with("a.flows.csv: "), "{e}");
        assert!(e.contains("moved"), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }

    fn load(file: &str) -> Topology {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../topologies")
            .join(file);
        Topology::load(&path).unwrap()
    }

    fn id(t: &Topology, name: &str) -> SwitchId {
        t.switch_by_name(name).unwrap().id
    }

    #[test]
    fn choice_only_at_the_source_on_8dc_not_on_13dc() {
        // 8-DC: DC1 chooses among DC2..DC7, each of which has one link on
        // to DC8.
        let t = load("8dc.toml");
        assert!(choice_only_at_source(&t, id(&t, "dc1"), id(&t, "dc8")));
        // 13-DC: DC1's one link leads to DC3, which chooses among DC2, DC5,
        // DC6 and DC7 (all 4 hops from DC13); DC6 then among DC9 and DC10.
        let t = load("13dc.toml");
        let names: Vec<&str> = transit_choices(&t, id(&t, "dc1"), id(&t, "dc13"))
            .into_iter()
            .map(|s| t.switch(s).name.as_str())
            .collect();
        assert_eq!(names, ["dc3", "dc6"]);
        assert!(!choice_only_at_source(&t, id(&t, "dc1"), id(&t, "dc13")));
        // The diamond: from a, b chooses; from e (which chooses itself)
        // nobody after it does.
        let t = diamond();
        assert_eq!(transit_choices(&t, id(&t, "a"), id(&t, "e")), [id(&t, "b")]);
        assert!(choice_only_at_source(&t, id(&t, "e"), id(&t, "a")));
    }
}

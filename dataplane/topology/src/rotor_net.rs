//! A rotor network file: the schedule of [`crate::rotor`] plus what the
//! switches and the testbed need to run it — uplink rate, ToR buffer,
//! routing, hosts, and the shared epoch of slot 0.
//!
//! One `[rotor]` table (what `lcmp-agent rotor-plan --schedule` writes;
//! the fields it leaves out take the defaults below):
//!
//! ```toml
//! [rotor]
//! kind = "de-bruijn"        # or "complete", "static"
//! tors = 8
//! rotors = 2                # = uplinks per ToR
//! per_rotor = 2
//! slot_ns = 1000000         # Delta
//! reconfig_ns = 100000      # Delta_r
//! matchings = [[...], ...]  # matchings[m][i]: where ToR i's uplink leads
//! rate_bps = 100000000      # uplink rate c
//! buffer_bytes = 50000      # per ToR, shared by its next-hop queues
//! routing = "shift-valiant" # direct | valiant | shift | shift-valiant
//! hosts_per_tor = 1
//! tx_guard_ns = 20000       # a ToR starts nothing that ends later than
//!                           # this before the slot's end
//! epoch_unix_ns = 0         # start of slot 0 (CLOCK_REALTIME); the agent
//!                           # distributes it when absent
//! ```
//!
//! Names and addresses follow from the indices: ToR t is switch `tor{t}`
//! with uplink r on interface `u{r}` and host port h on `h{h}`; rotor r is
//! switch `rotor{r}` with the port facing ToR t on `t{t}`. Host h of ToR t
//! is 10.t.h.2/24 behind gateway 10.t.h.1 (the ToR's port).

use std::net::Ipv4Addr;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::rotor::{RotorError, Schedule, ScheduleKind};
use crate::TomlError;

/// How ToRs route on the emulated graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RotorRouting {
    /// One hop: wait for the circuit to the destination (RotorNet).
    Direct,
    /// Two phases through a random intermediate ToR, each one hop.
    Valiant,
    /// Shortest paths on the emulated graph (de Bruijn shift routing).
    Shift,
    /// Two phases through a random intermediate, each by shift routing
    /// (Mars; what the throughput bound assumes).
    ShiftValiant,
}

impl RotorRouting {
    /// Every routing's name, as in the file.
    pub const NAMES: [&'static str; 4] = ["direct", "valiant", "shift", "shift-valiant"];

    /// The name in the file.
    pub fn name(self) -> &'static str {
        match self {
            RotorRouting::Direct => "direct",
            RotorRouting::Valiant => "valiant",
            RotorRouting::Shift => "shift",
            RotorRouting::ShiftValiant => "shift-valiant",
        }
    }

    /// By name.
    pub fn from_name(s: &str) -> Option<Self> {
        Self::NAMES
            .iter()
            .position(|n| *n == s)
            .map(|i| [Self::Direct, Self::Valiant, Self::Shift, Self::ShiftValiant][i])
    }

    /// Two phases through an intermediate.
    pub fn valiant(self) -> bool {
        matches!(self, RotorRouting::Valiant | RotorRouting::ShiftValiant)
    }

    /// Multi-hop routes on the emulated graph (else one hop, straight to
    /// the target).
    pub fn shift(self) -> bool {
        matches!(self, RotorRouting::Shift | RotorRouting::ShiftValiant)
    }
}

/// A switch of a rotor network.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RotorRole {
    /// ToR t.
    Tor(u32),
    /// Rotor r.
    Rotor(u32),
}

fn default_rate() -> u64 {
    100_000_000
}
fn default_hosts() -> u32 {
    1
}
fn default_guard() -> u64 {
    20_000
}

/// The `[rotor]` table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RotorNetwork {
    /// The emulated graph: "de-bruijn", "complete" or "static".
    pub kind: String,
    /// ToRs (n_t).
    pub tors: u32,
    /// Rotors = uplinks per ToR (n_u).
    pub rotors: u32,
    /// Matchings per rotor.
    pub per_rotor: u32,
    /// Slot length Delta, ns.
    pub slot_ns: u64,
    /// Reconfiguration Delta_r at the start of each slot, ns.
    pub reconfig_ns: u64,
    /// `matchings[m][i]`: the ToR that ToR i's uplink reaches under
    /// matching m; rotor r applies `matchings[r * per_rotor + slot mod
    /// per_rotor]`.
    pub matchings: Vec<Vec<u32>>,
    /// Uplink rate c, bit/s.
    #[serde(default = "default_rate")]
    pub rate_bps: u64,
    /// Buffer per ToR, bytes (default: 4 c Delta, the Mars paper's
    /// B / (c Delta) at its worked example).
    #[serde(default)]
    pub buffer_bytes: Option<u64>,
    /// Routing (default: direct for complete, shift-valiant for
    /// de Bruijn, shift for static).
    #[serde(default)]
    pub routing: Option<RotorRouting>,
    /// Hosts behind each ToR.
    #[serde(default = "default_hosts")]
    pub hosts_per_tor: u32,
    /// A ToR starts no frame whose serialization ends later than this
    /// before the slot's end: the time from its transmit ring to the
    /// rotor's judgement, so a frame is not cut by the reconfiguration.
    #[serde(default = "default_guard")]
    pub tx_guard_ns: u64,
    /// Start of slot 0, `CLOCK_REALTIME` ns. Absent: switches wait for the
    /// agent's.
    #[serde(default)]
    pub epoch_unix_ns: Option<u64>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct File {
    rotor: RotorNetwork,
}

impl RotorNetwork {
    /// Parses and validates a file's text; errors name `origin`.
    pub fn parse(text: &str, origin: &str) -> Result<Self, RotorError> {
        let f: File = toml::from_str(text).map_err(|e| {
            let TomlError { line, message, .. } = TomlError::new(text, &e);
            RotorError(match line {
                Some(l) => format!("{origin}:{l}: {message}"),
                None => format!("{origin}: {message}"),
            })
        })?;
        f.rotor
            .validate()
            .map_err(|e| RotorError(format!("{origin}: {e}")))?;
        Ok(f.rotor)
    }

    /// Reads (at most [`crate::MAX_FILE_BYTES`]) and parses a file. A file
    /// of either kind: [`crate::network::Network::load`].
    pub fn load(path: &Path) -> Result<Self, RotorError> {
        let text = crate::read_text(path, crate::MAX_FILE_BYTES).map_err(RotorError)?;
        Self::parse(&text, &path.display().to_string())
    }

    /// The network of `schedule` with the defaults.
    pub fn from_schedule(s: &Schedule, slot_ns: u64, reconfig_ns: u64) -> Self {
        RotorNetwork {
            kind: kind_name(s.kind).into(),
            tors: s.tors,
            rotors: s.rotors,
            per_rotor: s.per_rotor() as u32,
            slot_ns,
            reconfig_ns,
            matchings: s.matchings.clone(),
            rate_bps: default_rate(),
            buffer_bytes: None,
            routing: None,
            hosts_per_tor: default_hosts(),
            tx_guard_ns: default_guard(),
            epoch_unix_ns: None,
        }
    }

    /// The file's text.
    pub fn to_toml(&self) -> String {
        let mut out = String::from(
            "# Rotor network (lcmp-switch rotor/ToR modes, lcmp-testbed).\n\
             # Rotor r applies matchings[r * per_rotor + slot mod per_rotor];\n\
             # matchings[m][i] is the ToR that ToR i's uplink reaches (i itself: no circuit).\n",
        );
        out.push_str(
            &toml::to_string(&File {
                rotor: self.clone(),
            })
            .expect("rotor networks serialize"),
        );
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out
    }

    fn validate(&self) -> Result<(), String> {
        if !(2..=250).contains(&self.tors) {
            return Err(format!("tors = {}: need 2 to 250", self.tors));
        }
        if self.rotors == 0 || self.per_rotor == 0 {
            return Err("rotors and per_rotor must be at least 1".into());
        }
        if self.matchings.len() != (self.rotors * self.per_rotor) as usize {
            return Err(format!(
                "{} matchings for {} rotors x {} per rotor",
                self.matchings.len(),
                self.rotors,
                self.per_rotor
            ));
        }
        for (k, m) in self.matchings.iter().enumerate() {
            let mut seen = vec![false; self.tors as usize];
            if m.len() != self.tors as usize {
                return Err(format!(
                    "matching {k} has {} entries for {} ToRs",
                    m.len(),
                    self.tors
                ));
            }
            for &j in m {
                match seen.get_mut(j as usize) {
                    Some(s) if !*s => *s = true,
                    _ => return Err(format!("matching {k} is not a permutation of the ToRs")),
                }
            }
        }
        if self.slot_ns == 0 || self.reconfig_ns >= self.slot_ns {
            return Err(format!(
                "reconfig_ns = {} must be below slot_ns = {}",
                self.reconfig_ns, self.slot_ns
            ));
        }
        if self.tx_guard_ns >= self.slot_ns - self.reconfig_ns {
            return Err("tx_guard_ns leaves nothing of the slot".into());
        }
        if self.rate_bps == 0 {
            return Err("rate_bps must be positive".into());
        }
        if !(1..=250).contains(&self.hosts_per_tor) {
            return Err(format!(
                "hosts_per_tor = {}: need 1 to 250",
                self.hosts_per_tor
            ));
        }
        if self.buffer_bytes == Some(0) {
            return Err("buffer_bytes must be positive".into());
        }
        self.schedule_kind()?;
        let (_, hops) = crate::rotor::routes(&self.schedule()?);
        if self.routing().shift() && hops.iter().flatten().any(|h| *h == u32::MAX) {
            return Err("the emulated graph does not connect every ToR pair".into());
        }
        Ok(())
    }

    fn schedule_kind(&self) -> Result<ScheduleKind, String> {
        match self.kind.as_str() {
            "de-bruijn" => Ok(ScheduleKind::DeBruijn),
            "complete" => Ok(ScheduleKind::Complete),
            "static" => Ok(ScheduleKind::Static),
            k => Err(format!("kind = {k:?}: one of de-bruijn, complete, static")),
        }
    }

    /// The schedule.
    pub fn schedule(&self) -> Result<Schedule, String> {
        Ok(Schedule {
            kind: self.schedule_kind()?,
            tors: self.tors,
            rotors: self.rotors,
            matchings: self.matchings.clone(),
        })
    }

    /// The matchings rotor `r` cycles through.
    pub fn rotor_matchings(&self, r: u32) -> Vec<Vec<u32>> {
        let per = self.per_rotor as usize;
        self.matchings[r as usize * per..(r as usize + 1) * per].to_vec()
    }

    /// The routing in force.
    pub fn routing(&self) -> RotorRouting {
        self.routing.unwrap_or(match self.kind.as_str() {
            "complete" => RotorRouting::Direct,
            "static" => RotorRouting::Shift,
            _ => RotorRouting::ShiftValiant,
        })
    }

    /// The buffer per ToR in force.
    pub fn buffer(&self) -> u64 {
        self.buffer_bytes.unwrap_or_else(|| {
            (4 * self.rate_bps as u128 * self.slot_ns as u128 / 8_000_000_000) as u64
        })
    }

    /// Which switch `name` is.
    pub fn role(&self, name: &str) -> Result<RotorRole, String> {
        let parse = |p: &str| name.strip_prefix(p).and_then(|i| i.parse::<u32>().ok());
        match (parse("tor"), parse("rotor")) {
            (Some(t), _) if t < self.tors => Ok(RotorRole::Tor(t)),
            (_, Some(r)) if r < self.rotors => Ok(RotorRole::Rotor(r)),
            _ => Err(format!(
                "no switch named {name:?} in this rotor network (tor0..tor{}, rotor0..rotor{})",
                self.tors - 1,
                self.rotors - 1
            )),
        }
    }

    /// The default interface names of a switch's ports, in port order: a
    /// ToR's uplinks then its host ports; a rotor's port per ToR.
    pub fn port_names(&self, role: RotorRole) -> Vec<String> {
        match role {
            RotorRole::Tor(_) => (0..self.rotors)
                .map(|r| format!("u{r}"))
                .chain((0..self.hosts_per_tor).map(|h| format!("h{h}")))
                .collect(),
            RotorRole::Rotor(_) => (0..self.tors).map(|t| format!("t{t}")).collect(),
        }
    }

    /// Host h of ToR t.
    pub fn host_ip(tor: u32, host: u32) -> Ipv4Addr {
        Ipv4Addr::new(10, tor as u8, host as u8, 2)
    }

    /// The ToR's address on the port of host h (the host's gateway).
    pub fn gateway_ip(tor: u32, host: u32) -> Ipv4Addr {
        Ipv4Addr::new(10, tor as u8, host as u8, 1)
    }

    /// The ToR and host of an address in this network.
    pub fn host_of(&self, ip: Ipv4Addr) -> Option<(u32, u32)> {
        let o = ip.octets();
        let (t, h) = (o[1] as u32, o[2] as u32);
        (o[0] == 10 && t < self.tors && h < self.hosts_per_tor).then_some((t, h))
    }

    /// The network's wiring as a topology (what a testbed builds its
    /// namespaces, veths and memory links from): ToR t is switch `tor{t}`,
    /// its uplink r port `u{r}` and its host h's port `h{h}`; rotor r is
    /// `rotor{r}`, its port facing ToR t `t{t}`; host (t, h) is `h{t}x{h}`
    /// at 10.t.h.2/24. Rates and buffers are the network's; no link has a
    /// delay. Port order matches [`RotorNetwork::port_names`]: links are
    /// listed ToR by ToR, rotor by rotor, so ToR t's port r is its uplink
    /// to rotor r and rotor r's port t faces ToR t; host ports follow.
    pub fn wiring(&self) -> Result<crate::Topology, crate::TopologyError> {
        use std::fmt::Write as _;
        let mut t = String::new();
        let rate = format!("{}bps", self.rate_bps);
        let buffer = format!("{}B", self.buffer());
        for tor in 0..self.tors {
            let prefixes: Vec<String> = (0..self.hosts_per_tor)
                .map(|h| format!("\"10.{tor}.{h}.0/24\""))
                .collect();
            let _ = writeln!(
                t,
                "[[switch]]\nname = \"tor{tor}\"\nprefixes = [{}]\n",
                prefixes.join(", ")
            );
        }
        for r in 0..self.rotors {
            let _ = writeln!(t, "[[switch]]\nname = \"rotor{r}\"\n");
        }
        for tor in 0..self.tors {
            for h in 0..self.hosts_per_tor {
                let _ = writeln!(
                    t,
                    "[[host]]\nname = \"{}\"\nswitch = \"tor{tor}\"\naddresses = [\"{}/24\"]\n\
                     rate = \"{rate}\"\ndelay = \"0ns\"\nbuffer = \"{buffer}\"\nifname = \"eth0\"\n\
                     switch_ifname = \"h{h}\"\n",
                    Self::host_name(tor, h),
                    Self::host_ip(tor, h)
                );
            }
        }
        for tor in 0..self.tors {
            for r in 0..self.rotors {
                let _ = writeln!(
                    t,
                    "[[link]]\na = \"tor{tor}\"\nb = \"rotor{r}\"\nrate = \"{rate}\"\ndelay = \"0ns\"\n\
                     buffer = \"{buffer}\"\na_ifname = \"u{r}\"\nb_ifname = \"t{tor}\"\n"
                );
            }
        }
        crate::Topology::parse(&t, "rotor network wiring")
    }

    /// The node name of host `h` of ToR `t`.
    pub fn host_name(tor: u32, host: u32) -> String {
        format!("h{tor}x{host}")
    }
}

/// The name of a schedule kind in the file.
pub fn kind_name(kind: ScheduleKind) -> &'static str {
    match kind {
        ScheduleKind::DeBruijn => "de-bruijn",
        ScheduleKind::Complete => "complete",
        ScheduleKind::Static => "static",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rotor;

    #[test]
    fn a_planned_network_round_trips_with_defaults() {
        let s = rotor::de_bruijn(8, 4, 2).unwrap();
        let net = RotorNetwork::from_schedule(&s, 1_000_000, 100_000);
        let text = net.to_toml();
        let back = RotorNetwork::parse(&text, "t.toml").unwrap();
        assert_eq!(back, net);
        assert_eq!(back.routing(), RotorRouting::ShiftValiant);
        // 4 x 100 Mbit/s x 1 ms = 50 kB.
        assert_eq!(back.buffer(), 50_000);
        assert_eq!(back.rotor_matchings(1), s.matchings[2..4].to_vec());
        assert_eq!(back.role("tor7"), Ok(RotorRole::Tor(7)));
        assert_eq!(back.role("rotor1"), Ok(RotorRole::Rotor(1)));
        assert!(back.role("tor8").unwrap_err().contains("tor0..tor7"));
        assert_eq!(back.port_names(RotorRole::Tor(3)), vec!["u0", "u1", "h0"]);
        assert_eq!(back.host_of(Ipv4Addr::new(10, 5, 0, 2)), Some((5, 0)));
        assert_eq!(back.host_of(Ipv4Addr::new(10, 8, 0, 2)), None);
        assert_eq!(back.host_of(Ipv4Addr::new(10, 5, 1, 2)), None);
    }

    #[test]
    fn the_planners_schedule_file_is_a_network_file() {
        let s = rotor::complete(8, 2).unwrap();
        let text = s.to_toml(1_000_000, 100_000);
        let net = RotorNetwork::parse(&text, "plan.toml").unwrap();
        assert_eq!(net.routing(), RotorRouting::Direct);
        assert_eq!(net.per_rotor, 4);
    }

    #[test]
    fn bad_files_are_named() {
        let s = rotor::de_bruijn(8, 2, 2).unwrap();
        let net = RotorNetwork::from_schedule(&s, 1_000_000, 100_000);
        let bad = |f: &dyn Fn(&mut RotorNetwork)| {
            let mut n = net.clone();
            f(&mut n);
            RotorNetwork::parse(&n.to_toml(), "x.toml").unwrap_err().0
        };
        assert!(bad(&|n| n.matchings[0][0] = n.matchings[0][1]).contains("not a permutation"));
        assert!(bad(&|n| n.reconfig_ns = n.slot_ns).contains("below slot_ns"));
        assert!(bad(&|n| n.per_rotor = 3).contains("matchings for"));
        assert!(bad(&|n| n.kind = "ring".into()).contains("one of de-bruijn"));
        assert!(bad(&|n| n.hosts_per_tor = 0).contains("hosts_per_tor"));
        let e = RotorNetwork::parse("[rotor]\ntors = 2\n", "y.toml").unwrap_err();
        assert!(e.0.starts_with("y.toml:1: missing field"), "{e}");
    }
}

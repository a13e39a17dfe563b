//! The control protocol: one JSON object per line each way over a Unix
//! stream socket. A request names the protocol version, an id the reply
//! echoes, and a verb with its arguments:
//!
//! ```text
//! {"v":1,"id":7,"verb":"costs","dst":"10.0.2.2"}
//! {"v":1,"id":7,"ok":{"kind":"costs",...}}
//! {"v":1,"id":8,"error":{"kind":"no_route","message":"..."}}
//! ```
//!
//! A connection carries any number of requests, answered in order. Lines
//! longer than [`MAX_REQUEST_BYTES`] are refused without being buffered
//! whole, so a hostile client cannot make the switch allocate.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::snapshot::{EcnFractions, Emulation, PortSnapshot, Snapshot};

/// The protocol version this crate speaks.
pub const PROTOCOL_VERSION: u32 = 1;

/// Longest request line accepted, bytes (a full route table of a large
/// topology is a few tens of KiB).
pub const MAX_REQUEST_BYTES: usize = 1 << 20;

/// A request with its envelope.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestEnvelope {
    /// Protocol version of the client.
    pub v: u32,
    /// Echoed in the reply.
    #[serde(default)]
    pub id: u64,
    /// The request.
    #[serde(flatten)]
    pub request: Request,
}

/// What a client can ask.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "verb", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// Everything: the [`Snapshot`].
    Status,
    /// The ports only.
    Ports,
    /// Each port's link state only: cheap enough for an agent to ask
    /// every few milliseconds.
    LinkState,
    /// Flows: cached flows per port, decisions per destination, and the
    /// `top` most recent path decisions with their 5-tuples.
    Flows {
        /// How many recent decisions to list.
        #[serde(default = "default_top")]
        top: u32,
    },
    /// Every candidate's cost parts for a destination address (or the
    /// network address of a prefix).
    Costs {
        /// An address, or a prefix `a.b.c.d/len`.
        dst: String,
    },
    /// The route table in use.
    Tables,
    /// Switches the policy (`lcmp`, `ecmp`, ...). LCMP weights stay as set.
    SetPolicy {
        /// Policy name.
        policy: String,
    },
    /// Sets LCMP weights and/or ECN thresholds; absent fields keep their
    /// value.
    SetParams {
        /// Weight of C_path.
        #[serde(default)]
        alpha: Option<u32>,
        /// Weight of C_cong.
        #[serde(default)]
        beta: Option<u32>,
        /// ECN thresholds; see `ecn_off`.
        #[serde(default)]
        ecn: Option<EcnFractions>,
        /// Turns ECN marking off.
        #[serde(default)]
        ecn_off: bool,
    },
    /// Replaces the whole route table atomically. Flows keep their port
    /// while it stays a candidate of their route.
    ReplaceTables {
        /// The new routes.
        routes: Vec<RouteSpec>,
    },
    /// Sets a port's link emulation; absent fields keep their value.
    SetLink {
        /// Interface name or port index.
        port: String,
        /// Rate, bit/s (0: line rate).
        #[serde(default)]
        rate_bps: Option<u64>,
        /// One-way delay, ns.
        #[serde(default)]
        delay_ns: Option<u64>,
        /// Egress buffer, bytes.
        #[serde(default)]
        buffer_bytes: Option<u64>,
        /// Who emulates the link: `switch` (default) shapes and delays in
        /// the switch; `netem` records that a netem qdisc does it, and the
        /// switch forwards at line rate (keeping the buffer and ECN).
        #[serde(default)]
        mode: Option<crate::snapshot::EmulationMode>,
    },
    /// Administratively enables or disables a port.
    SetAdmin {
        /// Interface name or port index.
        port: String,
        /// Up or down.
        up: bool,
    },
    /// Drops or restores a memory link's carrier, at both ends, as
    /// pulling or plugging its cable would (a veth's carrier is the
    /// kernel's: `ip link set DEV down`).
    SetCarrier {
        /// Interface name or port index.
        port: String,
        /// Up or down.
        up: bool,
    },
    /// Starts capturing a port's frames, both directions (replacing a
    /// capture that runs); `capture_fetch` takes what was captured.
    CaptureStart {
        /// Interface name or port index.
        port: String,
        /// Bytes kept of each frame.
        snaplen: u32,
        /// Frames to take in all.
        max_frames: u64,
        /// Bytes (as kept) to take in all.
        max_bytes: u64,
        /// How long, ns.
        duration_ns: u64,
    },
    /// The frames captured since the last fetch.
    CaptureFetch,
    /// Ends the capture; its last frames come with the reply.
    CaptureStop,
    /// A rotor-network switch's state: schedule, slot, lateness, queues.
    Rotor,
    /// Sets a rotor-network switch's epoch: the start of slot 0,
    /// `CLOCK_REALTIME` ns (the agent distributes one to every switch).
    SetEpoch {
        /// The epoch.
        epoch_unix_ns: u64,
    },
}

fn default_top() -> u32 {
    20
}

impl Request {
    /// The verb's name as on the wire.
    pub fn verb(&self) -> &'static str {
        match self {
            Request::Status => "status",
            Request::Ports => "ports",
            Request::LinkState => "link_state",
            Request::Flows { .. } => "flows",
            Request::Costs { .. } => "costs",
            Request::Tables => "tables",
            Request::SetPolicy { .. } => "set_policy",
            Request::SetParams { .. } => "set_params",
            Request::ReplaceTables { .. } => "replace_tables",
            Request::SetLink { .. } => "set_link",
            Request::SetAdmin { .. } => "set_admin",
            Request::SetCarrier { .. } => "set_carrier",
            Request::CaptureStart { .. } => "capture_start",
            Request::CaptureFetch => "capture_fetch",
            Request::CaptureStop => "capture_stop",
            Request::Rotor => "rotor",
            Request::SetEpoch { .. } => "set_epoch",
        }
    }
}

/// One route as pushed by the agent and reported by `tables`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteSpec {
    /// Destination prefix.
    pub prefix: String,
    /// Candidate egress ports.
    pub candidates: Vec<CandidateSpec>,
}

impl RouteSpec {
    /// The wire form of a route to `prefix` over `set`.
    pub fn new(prefix: String, set: &lcmp_policy::CandidateSet) -> Self {
        RouteSpec {
            prefix,
            candidates: set
                .as_slice()
                .iter()
                .map(|c| CandidateSpec {
                    port: c.port as u32,
                    c_path: c.c_path,
                    capacity_bps: c.capacity_bps,
                })
                .collect(),
        }
    }
}

/// One candidate of a route.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CandidateSpec {
    /// Egress port index.
    pub port: u32,
    /// The path cost C_path.
    pub c_path: u8,
    /// The path's bottleneck capacity, bit/s (WCMP/UCMP weights).
    pub capacity_bps: u64,
}

/// A reply with its envelope.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResponseEnvelope {
    /// Protocol version of the server.
    pub v: u32,
    /// The request's id.
    pub id: u64,
    /// The outcome.
    #[serde(flatten)]
    pub body: Body,
}

/// A reply's outcome.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Body {
    /// Done, with the answer.
    Ok(Box<Reply>),
    /// Refused, with why.
    Error(ErrorReply),
}

/// A successful answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Reply {
    /// To `status` (boxed: a snapshot is far larger than the other
    /// replies).
    Status(Box<Snapshot>),
    /// To `ports`.
    Ports(PortsReply),
    /// To `link_state`.
    LinkState(LinkStateReply),
    /// To `flows`.
    Flows(FlowsReply),
    /// To `costs`.
    Costs(CostsReply),
    /// To `tables`.
    Tables(TablesReply),
    /// To a `set_*` or `replace_tables`: what changed.
    Applied(Applied),
    /// To `rotor`.
    Rotor(Box<crate::rotor::RotorStatus>),
    /// To `capture_*`: frames captured since the last fetch.
    Capture(CaptureReply),
}

/// Frames of a capture.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaptureReply {
    /// The captured port's name.
    pub port: String,
    /// Bytes kept of each frame.
    pub snaplen: u32,
    /// The frames since the last fetch, in the order the switch saw them.
    pub frames: Vec<CapturedFrame>,
    /// Frames taken since the capture started.
    pub captured: u64,
    /// Frames lost because the reader fell behind (the switch holds at
    /// most 16 MiB between fetches).
    pub dropped: u64,
    /// Nothing more will be captured (limits reached, time up, stopped).
    pub done: bool,
}

/// One captured frame.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapturedFrame {
    /// When the switch received it, or handed it to the port:
    /// `CLOCK_REALTIME` ns.
    pub time_unix_ns: u64,
    /// Leaving by the port (else arriving on it).
    pub outbound: bool,
    /// The frame's length.
    pub orig_len: u32,
    /// Its first `snaplen` bytes, hex.
    pub data: String,
}

/// Lowercase hex of `bytes` (captured frames on the wire).
pub fn hex_encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

/// The bytes of [`hex_encode`]'s text; `None` if it is not hex.
pub fn hex_decode(text: &str) -> Option<Vec<u8>> {
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let t = text.as_bytes();
    if t.len() % 2 != 0 {
        return None;
    }
    t.chunks(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

/// The ports.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PortsReply {
    /// Switch name.
    pub switch: String,
    /// Per port.
    pub ports: Vec<PortSnapshot>,
}

/// Each port's link state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkStateReply {
    /// Switch name.
    pub switch: String,
    /// Route-table generation.
    pub table_generation: u64,
    /// Per port, in port order.
    pub ports: Vec<PortLink>,
}

/// One port's link state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortLink {
    /// Port index.
    pub index: u32,
    /// Interface name.
    pub name: String,
    /// Forwarding: carrier and admin up.
    pub up: bool,
    /// Carrier.
    pub link_up: bool,
    /// Administrative state.
    pub admin_up: bool,
}

/// Flows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FlowsReply {
    /// Switch name.
    pub switch: String,
    /// Flows in the cache now.
    pub cached: u64,
    /// Cache capacity.
    pub capacity: u64,
    /// Cached flows per egress port.
    pub by_port: Vec<PortFlows>,
    /// Decisions per destination prefix and port since the table was
    /// installed.
    pub by_destination: Vec<crate::snapshot::DecisionCount>,
    /// The most recent path decisions, newest first.
    pub recent: Vec<RecentDecision>,
}

/// Cached flows on one port.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortFlows {
    /// Port index.
    pub port: u32,
    /// Interface name.
    pub ifname: String,
    /// Flows cached on it.
    pub flows: u64,
}

/// One path decision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecentDecision {
    /// How long ago, ms.
    pub age_ms: u64,
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// IP protocol.
    pub proto: u8,
    /// Source port (0 without ports).
    pub sport: u16,
    /// Destination port (0 without ports).
    pub dport: u16,
    /// Chosen egress port.
    pub port: u32,
    /// Its interface.
    pub ifname: String,
    /// `new`, `failover` or `cache_full`.
    pub reason: String,
}

/// Cost parts of every candidate of a route.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CostsReply {
    /// Switch name.
    pub switch: String,
    /// The destination asked about.
    pub dst: String,
    /// The route it matched.
    pub prefix: String,
    /// The policy in force.
    pub policy: String,
    /// LCMP weights (also reported under other policies: what LCMP would
    /// compute).
    pub alpha: u32,
    /// See `alpha`.
    pub beta: u32,
    /// Candidates in port order.
    pub candidates: Vec<CandidateCost>,
}

/// One candidate's cost parts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CandidateCost {
    /// Egress port index.
    pub port: u32,
    /// Its interface.
    pub ifname: String,
    /// Port forwarding (carrier and admin up).
    pub up: bool,
    /// Path cost.
    pub c_path: u8,
    /// Bottleneck capacity, bit/s.
    pub capacity_bps: u64,
    /// Queue-level score.
    pub q: u8,
    /// Trend score.
    pub t: u8,
    /// Persistence score.
    pub d: u8,
    /// Congestion cost.
    pub c_cong: u8,
    /// alpha * C_path + beta * C_cong, exact (below 2^41 for any u32
    /// weights). Widened from u32 within protocol version 1: every cost
    /// that fit u32 is the same JSON number; an older client (decoding u32)
    /// refuses only the larger ones, which older switches sent wrapped.
    pub cost: u64,
    /// In the kept set (LCMP: the cheapest live candidates new flows hash
    /// over).
    pub kept: bool,
    /// Bytes in the port's egress buffer.
    pub queue_bytes: u64,
}

/// The route table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TablesReply {
    /// Switch name.
    pub switch: String,
    /// Table generation (1 at start, +1 per replacement).
    pub generation: u64,
    /// Interface of each port, by index.
    pub ifnames: Vec<String>,
    /// The routes.
    pub routes: Vec<RouteSpec>,
}

/// What a change did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    /// One line for the operator.
    pub message: String,
    /// Whether anything changed (a push of the same tables changes
    /// nothing).
    pub changed: bool,
    /// Cached flows whose port left their route: they move at their next
    /// packet (table replacement only).
    #[serde(default)]
    pub flows_to_move: u64,
}

/// Why a request failed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorReply {
    /// Machine-readable kind.
    pub kind: ErrorKind,
    /// One line for the operator.
    pub message: String,
}

/// Kinds of failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The client speaks another protocol version.
    Version,
    /// Not JSON, or not a request.
    BadRequest,
    /// The request line is longer than [`MAX_REQUEST_BYTES`].
    TooLarge,
    /// A port name or index the switch does not have.
    UnknownPort,
    /// No route for the destination.
    NoRoute,
    /// Values out of range (a policy name, thresholds, a table naming a
    /// missing port).
    Invalid,
    /// The switch did not answer in time.
    Timeout,
    /// The verb is not for this kind of switch (LCMP verbs to a rotor
    /// network's switch, `rotor` to an LCMP switch).
    Unsupported,
}

impl ErrorReply {
    /// An error of `kind` saying `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        ErrorReply {
            kind,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for ErrorReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Decodes one request line. The error is the reply to send: a line that
/// is not a request, or of another version, never reaches the switch.
pub fn decode_request(line: &[u8]) -> Result<RequestEnvelope, (u64, ErrorReply)> {
    if line.len() > MAX_REQUEST_BYTES {
        return Err((
            0,
            ErrorReply::new(
                ErrorKind::TooLarge,
                format!("request longer than {MAX_REQUEST_BYTES} bytes"),
            ),
        ));
    }
    // The id and version first, so even a request with a bad verb gets
    // its id back and a version mismatch is named as such.
    let bad = |id, m: String| (id, ErrorReply::new(ErrorKind::BadRequest, m));
    let value: serde_json::Value =
        serde_json::from_slice(line).map_err(|e| bad(0, format!("not a JSON request: {e}")))?;
    let serde_json::Value::Object(mut fields) = value else {
        return Err(bad(0, "a request is a JSON object".into()));
    };
    let id = match fields.remove("id") {
        None => 0,
        Some(v) => v
            .as_u64()
            .ok_or_else(|| bad(0, "\"id\" must be a non-negative integer".into()))?,
    };
    match fields.remove("v").map(|v| v.as_u64()) {
        Some(Some(v)) if v == PROTOCOL_VERSION as u64 => {}
        Some(Some(v)) => {
            return Err((
                id,
                ErrorReply::new(
                    ErrorKind::Version,
                    format!(
                    "protocol version {v} is not supported (this switch speaks {PROTOCOL_VERSION})"
                ),
                ),
            ))
        }
        Some(None) => return Err(bad(id, "\"v\" must be an integer".into())),
        None => return Err(bad(id, "request has no protocol version \"v\"".into())),
    }
    // Unknown fields are refused (deny_unknown_fields on `Request`): a
    // misspelt argument must not be silently ignored.
    let given: Vec<String> = fields.keys().cloned().collect();
    let request = Request::deserialize(serde_json::Value::Object(fields))
        .map_err(|e| bad(id, format!("bad request: {e}")))?;
    // serde does not refuse extra fields of unit variants (`status`):
    // compare with the fields the request has.
    if let Ok(serde_json::Value::Object(known)) = serde_json::to_value(&request) {
        if let Some(k) = given.iter().find(|k| !known.contains_key(*k)) {
            return Err(bad(
                id,
                format!("bad request: {} takes no field {k:?}", request.verb()),
            ));
        }
    }
    Ok(RequestEnvelope {
        v: PROTOCOL_VERSION,
        id,
        request,
    })
}

/// One line (with its newline) for a request.
pub fn encode_request(id: u64, request: &Request) -> Vec<u8> {
    let mut v = serde_json::to_vec(&RequestEnvelope {
        v: PROTOCOL_VERSION,
        id,
        request: request.clone(),
    })
    .expect("requests serialize");
    v.push(b'\n');
    v
}

/// One line (with its newline) for a reply.
pub fn encode_response(id: u64, body: Body) -> Vec<u8> {
    let mut v = serde_json::to_vec(&ResponseEnvelope {
        v: PROTOCOL_VERSION,
        id,
        body,
    })
    .expect("replies serialize");
    v.push(b'\n');
    v
}

/// A port's emulation as a request would set it.
pub fn set_link_request(port: &str, e: &Emulation) -> Request {
    Request::SetLink {
        port: port.to_string(),
        rate_bps: Some(e.rate_bps),
        delay_ns: Some(e.delay_ns),
        buffer_bytes: Some(e.buffer_bytes),
        mode: Some(e.mode),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_refuses_what_is_not_hex() {
        assert_eq!(hex_encode(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        assert_eq!(hex_decode("000fa5ff"), Some(vec![0x00, 0x0f, 0xa5, 0xff]));
        assert_eq!(hex_decode("0A"), Some(vec![0x0a]));
        assert_eq!(hex_decode(""), Some(vec![]));
        assert_eq!(hex_decode("abc"), None);
        assert_eq!(hex_decode("zz"), None);
    }

    #[test]
    fn capture_and_carrier_requests_decode_from_their_documented_form() {
        let r = decode_request(
            br#"{"v":1,"id":2,"verb":"capture_start","port":"p0","snaplen":128,"max_frames":10,"max_bytes":1000,"duration_ns":5}"#,
        )
        .unwrap();
        assert_eq!(
            r.request,
            Request::CaptureStart {
                port: "p0".into(),
                snaplen: 128,
                max_frames: 10,
                max_bytes: 1000,
                duration_ns: 5
            }
        );
        let r = decode_request(br#"{"v":1,"verb":"capture_fetch"}"#).unwrap();
        assert_eq!(r.request, Request::CaptureFetch);
        let r = decode_request(br#"{"v":1,"verb":"set_carrier","port":"1","up":false}"#).unwrap();
        assert_eq!(
            r.request,
            Request::SetCarrier {
                port: "1".into(),
                up: false
            }
        );
    }

    #[test]
    fn requests_decode_from_their_documented_form() {
        let r = decode_request(br#"{"v":1,"id":7,"verb":"costs","dst":"10.0.2.2"}"#).unwrap();
        assert_eq!(r.id, 7);
        assert_eq!(
            r.request,
            Request::Costs {
                dst: "10.0.2.2".into()
            }
        );
        let r = decode_request(br#"{"v":1,"verb":"flows"}"#).unwrap();
        assert_eq!(r.request, Request::Flows { top: 20 });
        let r = decode_request(br#"{"v":1,"id":1,"verb":"set_params","alpha":5}"#).unwrap();
        assert_eq!(
            r.request,
            Request::SetParams {
                alpha: Some(5),
                beta: None,
                ecn: None,
                ecn_off: false
            }
        );
    }

    #[test]
    fn bad_requests_name_the_problem_and_keep_the_id() {
        let (id, e) = decode_request(br#"{"v":2,"id":9,"verb":"status"}"#).unwrap_err();
        assert_eq!((id, e.kind), (9, ErrorKind::Version));
        let (id, e) = decode_request(br#"{"v":1,"id":3,"verb":"reboot"}"#).unwrap_err();
        assert_eq!((id, e.kind), (3, ErrorKind::BadRequest));
        assert!(e.message.contains("reboot"), "{}", e.message);
        let (_, e) = decode_request(br#"{"id":3,"verb":"status"}"#).unwrap_err();
        assert_eq!(e.kind, ErrorKind::BadRequest);
        let (_, e) = decode_request(b"\xff\xfe").unwrap_err();
        assert_eq!(e.kind, ErrorKind::BadRequest);
        let (_, e) = decode_request(br#"{"v":1,"verb":"status","extra":1}"#).unwrap_err();
        assert_eq!(e.kind, ErrorKind::BadRequest);
        let (_, e) = decode_request(&vec![b' '; MAX_REQUEST_BYTES + 1]).unwrap_err();
        assert_eq!(e.kind, ErrorKind::TooLarge);
    }

    #[test]
    fn replies_round_trip() {
        let line = encode_response(
            4,
            Body::Error(ErrorReply::new(ErrorKind::UnknownPort, "no port x")),
        );
        assert_eq!(
            std::str::from_utf8(&line).unwrap(),
            "{\"v\":1,\"id\":4,\"error\":{\"kind\":\"unknown_port\",\"message\":\"no port x\"}}\n"
        );
        let ok = encode_response(
            5,
            Body::Ok(Box::new(Reply::Applied(Applied {
                message: "policy ecmp".into(),
                changed: true,
                flows_to_move: 0,
            }))),
        );
        let back: ResponseEnvelope = serde_json::from_slice(&ok).unwrap();
        assert_eq!(back.id, 5);
        assert!(
            matches!(back.body, Body::Ok(r) if matches!(*r, Reply::Applied(ref a) if a.changed))
        );
    }
}

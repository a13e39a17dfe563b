//! `lcmp-traffic`: command-line front end (see `lcmp-traffic --help`).

use std::io::{self, Write};
use std::net::{IpAddr, SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{ArgGroup, Args, Parser, Subcommand, ValueEnum};

use lcmp_traffic::cdf::{Cdf, BUILTIN};
use lcmp_traffic::client::{self, ClientConfig, Destination, Load};
use lcmp_traffic::flows::{Arrivals, FlowSource};
use lcmp_traffic::ndp;
use lcmp_traffic::ndp::socket::{Endpoint as NdpEndpoint, NdpOptions};
use lcmp_traffic::rocev2::cc::{CcParams, CongestionControl, DEFAULT_INT_HOPS};
use lcmp_traffic::rocev2::client::{check_time_scale, RoceOptions};
use lcmp_traffic::rocev2::dcqcn::DcqcnParams;
use lcmp_traffic::rocev2::dctcp::DctcpParams;
use lcmp_traffic::rocev2::hpcc::HpccParams;
use lcmp_traffic::rocev2::net::Signals;
use lcmp_traffic::rocev2::server::{self as roce_server, Notify, RoceServerConfig};
use lcmp_traffic::rocev2::timely::TimelyParams;
use lcmp_traffic::rocev2::wire::ROCEV2_PORT;
use lcmp_traffic::server::{self, ServerConfig};
use lcmp_traffic::sockopt;

const ABOUT: &str = "Workload generator for DCI testbeds: Poisson flow arrivals (or a schedule), \
flow sizes from an empirical CDF, one TCP connection, one RoCEv2 queue pair (DCQCN, \
go-back-N) or one NDP flow (pulls, trimming) per flow, per-flow completion times.";

const PROTOCOL_HELP: &str = "\
Protocol: every flow is a new TCP connection (a new 5-tuple). The client sends a 16-byte \
header (flow id, u64 big-endian; payload size, u64 big-endian) and then `size` payload bytes; \
the server reads the header and exactly `size` bytes, writes one acknowledgement byte (0x06) \
and waits for the client to close. Sizes above 1 TiB are refused.

FCT (flow completion time): measured by the client from just before connect() to the moment \
it reads the acknowledgement byte, i.e. handshake + transfer + one round trip for the last \
byte and the ack. A flow that had to wait for a free --max-concurrent slot is timed from its \
arrival instead, so the wait counts. min_rtt_us is the kernel's tcpi_min_rtt of the connection.

--transport rocev2: every flow is one RC RDMA WRITE message on its own queue pair (QP number \
from the flow id, UDP source port from the QP number, 49152-65535), sent as real RoCEv2: IPv4 \
(ECT(0), DF) + UDP to port 4791 (checksum 0) + InfiniBand BTH (P_Key 0xffff, A bit set) + RETH \
on the first packet (VA = flow id, R_Key, DMA length = the flow's size) + payload (--payload \
bytes per packet, the last one shorter; a pattern of (QP, offset) the receiver checks) + the \
4-byte ICRC. No handshake. The receiver answers every packet to the sender's port 4791 with an \
RC Acknowledge (AETH ACK, PSN = next expected) whose BECN bit echoes a CE mark, or a NAK (PSN \
sequence error, the expected PSN; at most once per --nak-interval-us for one PSN) for a packet \
ahead of it; with --notify cnp a CE mark is signalled by a CNP (opcode 0x81) instead of the \
echo. The sender paces each QP at the rate of its congestion control (--cc: dcqcn, the LCMP \
simulator's Mellanox DCQCN, timers evaluated lazily; hpcc; timely; dctcp; as HPCC's ns-3 \
rdma-hw.cc runs them), keeps its bytes in flight under the CC's window (--window-bytes, \
following the rate), serializes all QPs at --line-rate, goes back to the NAKed PSN, and after \
--rto-ms without progress goes back to the first unacknowledged packet. hpcc: every data \
packet carries an INT block after the BTH (BTH byte 4 bit 0x20; --int-hops 16-byte hop slots \
that switches fill, masked in the ICRC) and the receiver echoes the hops in its ACK; timely: \
the block carries the send time and the ACK echoes it (an RTT sample); dcqcn and dctcp: no \
block, the ECN echo. A server echoes whatever block a packet carries: it serves every CC.

rocev2 FCT: from the flow's arrival (when its QP may send: the simulator's startTime) to the \
ACK of its last packet. min_rtt_us: the smallest data -> ACK time of the flow's timed packets. \
src is senderIP:udp_sport of the QP, dst the receiver's ADDR:PORT. The final line carries the \
sender's totals under \"rocev2\" (packets, retransmissions, naks, ecn_echoes, cnps, rate_cuts, \
timeouts, ..., cc: the CC's name, cc_updates, cc_fast_reactions, int_echoes, int_overflows, \
timestamp_echoes, window_stalls).

--transport ndp: NDP (Handley et al. 2017), the rotor networks' trimming transport, as the \
engine's hosts run it, over kernel UDP sockets: every packet goes to UDP port 7247 (the port \
rotor ToRs trim and prioritize; `lcmp-switch rotor --trim-packets K`) from the flow's entropy \
port (49152-65535, from the flow id), its UDP payload a 16-byte NDP header (kind data, ack, \
nack or pull; flags trimmed, last, retransmission; flow id; sequence number; value) and, for \
data, --payload bytes (the last packet shorter; a pattern of (flow, offset) the receiver \
checks). The sender sends an initial window (--initial-window packets) at --line-rate, then one \
packet per pull; the receiver answers every data packet at once, ACK if whole, NACK if a switch \
cut it to its headers (the sender then resends it on the next pull), and paces its pulls at \
one full data frame per frame time at its --line-rate. A packet unanswered for --rto-ms \
(default 1) is resent. One process per address holds port 7247: a host that sends and \
receives runs `client --serve`, which also answers data as the server does (--line-rate paces \
its pulls) and, after its done line, serves until SIGINT/SIGTERM.

ndp FCT: from the flow's arrival to the ACK of its last unacked packet. min_rtt_us: the \
smallest data -> ACK time of its packets sent once. src is senderIP:sport, dst ADDR:7247. The \
final line carries the sender's totals under \"ndp\" (packets, retransmissions, acks, nacks, \
pulls, timeouts, ...).";

#[derive(Parser)]
#[command(name = "lcmp-traffic", version, about = ABOUT, after_long_help = PROTOCOL_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Accept flows on one or more addresses until SIGTERM/SIGINT.
    ///
    /// Once every address is bound, prints one line `listening ADDR:PORT` per
    /// address on stdout (with the real port when given port 0). Connection
    /// errors are counted (the first few printed on stderr); a summary goes
    /// to stderr at exit. Exit status: 0 after SIGTERM/SIGINT, 1 if an
    /// address cannot be bound, 2 for bad usage.
    #[command(after_long_help = PROTOCOL_HELP)]
    Server(ServerArgs),
    /// Start flows at Poisson arrival times and write one CSV row per flow.
    ///
    /// Flows arrive for --duration seconds; each picks a --dst uniformly and a
    /// size from the --workload CDF (both seeded). Each flow's row is written
    /// to --out when it ends; after arrivals the client waits at most --drain
    /// seconds for active flows, and writes those still open as unfinished.
    ///
    /// A client starts at most 1000000 flows/s (a higher --flows-per-s or
    /// --rate-bps is refused). Arrivals it cannot hold (tcp: 262144 already
    /// waiting for a --max-concurrent slot; rocev2: 65536 flows in flight)
    /// are skipped: written as failed, error "skipped: ...", and counted.
    ///
    /// Progress: every --progress-ms one JSON line on stdout,
    /// {"t_s":..,"started":..,"completed":..,"failed":..,"active":..,"deferred":..,"skipped":..},
    /// and, once the CSV is complete, one line with "done":true and the
    /// totals (started, completed, failed, unfinished, deferred, skipped,
    /// warmup, ...).
    ///
    /// Exit status: 0 when the run completed (whatever the flows' outcome); 2
    /// for bad input (one line on stderr, nothing started, no file written);
    /// 1 if the CSV cannot be written; 128+signal after SIGINT/SIGTERM (the
    /// CSV is still written, open flows as unfinished; with --serve, a
    /// signal after the done line is the normal end: 0).
    #[command(after_long_help = PROTOCOL_HELP)]
    Client(Box<ClientArgs>),
    /// List the built-in workloads (points, mean, median, max).
    Workloads,
}

/// The flows' transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Transport {
    /// One TCP connection per flow.
    Tcp,
    /// One RoCEv2 queue pair per flow (DCQCN, go-back-N).
    Rocev2,
    /// NDP over UDP port 7247 (pulls; trimmed packets NACKed and resent).
    Ndp,
}

/// How the rocev2 receiver signals a CE mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum NotifyArg {
    /// The ECN echo (BECN bit) of the packet's ACK, as the simulator.
    Echo,
    /// A CNP (opcode 0x81); the ACK carries no echo.
    Cnp,
}

/// ADDR:PORT, or ADDR alone (rocev2: port 4791).
#[derive(Debug, Clone, Copy)]
struct ListenAddr {
    ip: IpAddr,
    port: Option<u16>,
}

fn parse_listen(s: &str) -> Result<ListenAddr, String> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(ListenAddr {
            ip: a.ip(),
            port: Some(a.port()),
        });
    }
    s.parse::<IpAddr>()
        .map(|ip| ListenAddr { ip, port: None })
        .map_err(|_| format!("expected ADDR:PORT or ADDR (IPv6: [ADDR]:PORT), got {s:?}"))
}

/// The server's --idle-timeout default, s; also how long a client's
/// receiving side (`--serve`) keeps an idle flow.
const DEFAULT_IDLE_TIMEOUT_S: f64 = 60.0;

#[derive(Args)]
struct ServerArgs {
    /// The transport: tcp, rocev2 or ndp (see the protocol notes below).
    #[arg(long, value_enum, default_value_t = Transport::Tcp)]
    transport: Transport,
    /// Address to accept flows on, ADDR:PORT (IPv6: [ADDR]:PORT); repeat
    /// for several. Port 0 picks a free port; the `listening` line shows it.
    /// rocev2: a specific IPv4 address, the port defaults to 4791. ndp: one
    /// specific IPv4 address, port 7247 (the default).
    #[arg(long, value_name = "ADDR:PORT", required = true, value_parser = parse_listen)]
    listen: Vec<ListenAddr>,
    /// rocev2: signal CE marks by the ACK's ECN echo (default) or by CNPs.
    #[arg(long, value_enum)]
    notify: Option<NotifyArg>,
    /// rocev2: at most one NAK per this interval for the same expected PSN.
    /// Default 500 (the simulator's).
    #[arg(long, value_name = "US")]
    nak_interval_us: Option<f64>,
    /// rocev2: the testbed's time dilation T: the NAK interval is
    /// multiplied by T (as the sender's intervals are). ndp: the line rate
    /// is divided by T as well. Default 1.
    #[arg(long, value_name = "T", allow_negative_numbers = true)]
    time_scale: Option<f64>,
    /// ndp: the host link's rate (suffixes k, M, G), divided by
    /// --rate-scale and --time-scale: one pull per full data frame's time
    /// at it. Default 100G.
    #[arg(long, value_name = "B", value_parser = parse_rate, allow_hyphen_values = true)]
    line_rate: Option<f64>,
    /// ndp: --line-rate is in simulator units, divided by S. Default 1.
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    rate_scale: Option<f64>,
    /// ndp: the senders' payload bytes per packet (a full frame's size, and
    /// where a packet's bytes start). Default 1442 (1500-byte frames).
    #[arg(long, value_name = "BYTES")]
    payload: Option<u32>,
    /// rocev2, ndp: write the receiver's counters as JSON to FILE at exit.
    #[arg(long, value_name = "FILE")]
    stats: Option<PathBuf>,
    /// Close a connection that sends nothing for this long (rocev2: drop the
    /// state of a message that received nothing for this long).
    /// A bare number is seconds; or a unit: 90s, 500ms.
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = DEFAULT_IDLE_TIMEOUT_S,
        value_parser = parse_secs,
        allow_negative_numbers = true
    )]
    idle_timeout: f64,
}

#[derive(Args)]
#[command(group(ArgGroup::new("load").args(["flows_per_s", "rate_bps"])))]
struct ClientArgs {
    /// The transport: tcp, rocev2 or ndp (see the protocol notes below).
    #[arg(long, value_enum, default_value_t = Transport::Tcp)]
    transport: Transport,
    /// Name of this (sending) host, written to every row.
    #[arg(long, value_name = "HOST")]
    name: String,
    /// Receiver NAME=ADDR:PORT (a running `lcmp-traffic server`); at least
    /// one, repeat for several. Each flow picks one uniformly (seeded).
    #[arg(long, value_name = "NAME=ADDR:PORT")]
    dst: Vec<Destination>,
    /// Flow-size CDF: websearch, alistorage, fbhadoop, googlerpc, datamining (built in;
    /// file stems work too) or the path of a file in the same format.
    #[arg(long, value_name = "NAME|FILE")]
    workload: Option<String>,
    /// Instead of --workload, --rate-bps/--flows-per-s and --duration: a CSV
    /// file with the header id,receiver,size_bytes,start_ns (receiver: a
    /// NAME of a --dst; start_ns after the client's start). Flow ids come
    /// from the file; arrivals end at the last start; --warmup defaults 0.
    #[arg(long, value_name = "FILE.csv")]
    schedule: Option<PathBuf>,
    /// Divide every flow size by S: max(1, round(size / S)) bytes.
    /// --rate-bps is then the offered payload after scaling.
    #[arg(
        long,
        value_name = "S",
        default_value_t = 1.0,
        allow_negative_numbers = true
    )]
    size_scale: f64,
    /// Mean flow arrival rate (Poisson), flows per second; at most 1e6.
    #[arg(long, value_name = "R", allow_negative_numbers = true)]
    flows_per_s: Option<f64>,
    /// Offered payload rate, bits per second (suffixes k, M, G: 2.5G);
    /// flows/s = rate / (8 * mean (scaled) flow size), at most 1e6.
    #[arg(long, value_name = "B", value_parser = parse_rate, allow_hyphen_values = true)]
    rate_bps: Option<f64>,
    /// How long flows arrive: a bare number is seconds, or with a unit
    /// (30s, 1.5s, 250ms).
    #[arg(long, value_name = "SECS", value_parser = parse_secs, allow_negative_numbers = true)]
    duration: Option<f64>,
    /// Flows arriving in the first SECS are marked warmup=true (analysis
    /// excludes them); must be shorter than --duration. A bare number is
    /// seconds, or with a unit (3s, 500ms).
    #[arg(
        long,
        value_name = "SECS",
        default_value = "0",
        value_parser = parse_secs,
        allow_negative_numbers = true
    )]
    warmup: f64,
    /// After arrivals stop, wait at most SECS for active flows; the rest
    /// are recorded as unfinished. A bare number is seconds, or with a
    /// unit (30s, 500ms).
    #[arg(
        long,
        value_name = "SECS",
        default_value = "30",
        value_parser = parse_secs,
        allow_negative_numbers = true
    )]
    drain: f64,
    /// Seed of arrivals, sizes and destinations (give each client its own).
    #[arg(long, value_name = "N", default_value_t = 1)]
    seed: u64,
    /// Flow ids are id-base + 0, 1, 2, ... (give clients disjoint ranges).
    #[arg(long, value_name = "N", default_value_t = 0)]
    id_base: u64,
    /// CSV file for the flows (every flow: ok, failed or unfinished) with a
    /// header row. Columns:
    /// id,sender,receiver,src,dst,size_bytes,start_ns,fct_ns,min_rtt_us,status,error,warmup
    /// (start_ns: arrival since the start; fct_ns empty unless ok). Rows are
    /// written as flows end, in arrival order (unless 65536 flows end while
    /// an earlier one is still open: from then on as flows end).
    #[arg(long, value_name = "FILE.csv")]
    out: PathBuf,
    /// The congestion control of every flow. tcp: a kernel one
    /// (TCP_CONGESTION), in
    /// /proc/sys/net/ipv4/tcp_available_congestion_control; default the
    /// system's. rocev2: dcqcn (default), hpcc, timely or dctcp (each
    /// with its --dcqcn-*, --hpcc-*, --timely-*, --dctcp-* flags).
    #[arg(long, value_name = "NAME")]
    cc: Option<String>,
    /// At most N flows in flight (each holds a socket); an arrival beyond it
    /// waits for a slot and is counted as deferred (at most 262144 wait; an
    /// arrival beyond them is skipped). Lowered to fit the open-file limit,
    /// with a note on stderr. tcp only; default 4096.
    #[arg(long, value_name = "N")]
    max_concurrent: Option<usize>,
    /// Progress line interval, milliseconds (0: only the final line).
    #[arg(long, value_name = "MS", default_value_t = 500)]
    progress_ms: u64,
    /// rocev2, ndp: rate flags are in simulator units and divided by S
    /// (the testbed's link-rate scale), as is the default line rate.
    /// Default 1.
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    rate_scale: Option<f64>,
    /// rocev2, ndp: the testbed's time dilation T (its links' delays x T,
    /// rates / T): DCQCN's intervals and the timeout are multiplied by T
    /// and rates divided by T on top of --rate-scale, so the transport
    /// keeps its timescales relative to the RTT. Default 1.
    #[arg(long, value_name = "T", allow_negative_numbers = true)]
    time_scale: Option<f64>,
    /// rocev2: the host NIC's rate (and DCQCN's line rate), divided by
    /// --rate-scale. ndp: the rate this host's data leave at (the initial
    /// window back to back at it), divided by --rate-scale. Default 100G.
    #[arg(long, value_name = "B", value_parser = parse_rate, allow_hyphen_values = true)]
    line_rate: Option<f64>,
    /// rocev2, ndp: payload bytes per packet (the last one of a flow is
    /// shorter). Default 1000 (rocev2), 1442 (ndp: 1500-byte frames; at
    /// most 1456).
    #[arg(long, value_name = "BYTES")]
    payload: Option<u32>,
    /// rocev2: DCQCN additive increase step. Default 50M.
    #[arg(long, value_name = "B", value_parser = parse_rate, allow_hyphen_values = true)]
    dcqcn_rate_ai: Option<f64>,
    /// rocev2: DCQCN hyper increase step. Default 100M.
    #[arg(long, value_name = "B", value_parser = parse_rate, allow_hyphen_values = true)]
    dcqcn_rate_hai: Option<f64>,
    /// rocev2: DCQCN minimum rate. Default 100M.
    #[arg(long, value_name = "B", value_parser = parse_rate, allow_hyphen_values = true)]
    dcqcn_min_rate: Option<f64>,
    /// rocev2: DCQCN alpha gain g. Default 1/256 = 0.00390625.
    #[arg(long, value_name = "G", allow_negative_numbers = true)]
    dcqcn_g: Option<f64>,
    /// rocev2: alpha update interval. Default 55.
    #[arg(long, value_name = "US", allow_negative_numbers = true)]
    dcqcn_alpha_interval_us: Option<f64>,
    /// rocev2: rate decrease check interval. Default 4.
    #[arg(long, value_name = "US", allow_negative_numbers = true)]
    dcqcn_decrease_interval_us: Option<f64>,
    /// rocev2: rate increase timer. Default 900.
    #[arg(long, value_name = "US", allow_negative_numbers = true)]
    dcqcn_increase_interval_us: Option<f64>,
    /// rocev2: fast recovery steps before additive increase. Default 1.
    #[arg(long, value_name = "N")]
    dcqcn_fast_recovery: Option<u32>,
    /// rocev2: the largest RTT between hosts (the simulator's maxRtt):
    /// HPCC's base RTT T and the delay of its window; multiplied by
    /// --time-scale. Required by --cc hpcc.
    #[arg(long, value_name = "US", allow_negative_numbers = true)]
    base_rtt_us: Option<f64>,
    /// rocev2: the bytes in flight allowed at the line rate (the
    /// simulator's maxBdp; the window follows the rate), divided by
    /// --rate-scale; 0 = none. Default: line rate x --base-rtt-us for hpcc,
    /// none for the others.
    #[arg(long, value_name = "BYTES")]
    window_bytes: Option<u64>,
    /// rocev2 --cc hpcc: hop slots of the INT block every data packet
    /// carries (16 bytes each), 1 to 16. Default 5.
    #[arg(long, value_name = "N")]
    int_hops: Option<u8>,
    /// rocev2 --cc hpcc: the target utilization eta (U_TARGET). Default 0.95.
    #[arg(long, value_name = "ETA", allow_negative_numbers = true)]
    hpcc_eta: Option<f64>,
    /// rocev2 --cc hpcc: additive increases before a multiplicative one
    /// (MI_THRESH, maxStage). Default 0.
    #[arg(long, value_name = "N")]
    hpcc_max_stage: Option<u32>,
    /// rocev2 --cc hpcc: the additive increase W_AI as a rate (RATE_AI).
    /// Default 50M.
    #[arg(long, value_name = "B", value_parser = parse_rate, allow_hyphen_values = true)]
    hpcc_rate_ai: Option<f64>,
    /// rocev2 --cc hpcc: the minimum rate. Default 100M.
    #[arg(long, value_name = "B", value_parser = parse_rate, allow_hyphen_values = true)]
    hpcc_min_rate: Option<f64>,
    /// rocev2 --cc hpcc: react to every ACK between per-RTT updates
    /// (FAST_REACT). Default true.
    #[arg(long, value_name = "BOOL")]
    hpcc_fast_react: Option<bool>,
    /// rocev2 --cc hpcc: one rate per hop (MULTI_RATE). Default false.
    #[arg(long, value_name = "BOOL")]
    hpcc_multi_rate: Option<bool>,
    /// rocev2 --cc hpcc: fast reactions skip hops with an empty queue
    /// (SAMPLE_FEEDBACK). Default false.
    #[arg(long, value_name = "BOOL")]
    hpcc_sample_feedback: Option<bool>,
    /// rocev2 --cc timely: the additive step (RATE_AI). Default 50M.
    #[arg(long, value_name = "B", value_parser = parse_rate, allow_hyphen_values = true)]
    timely_rate_ai: Option<f64>,
    /// rocev2 --cc timely: the hyper-active step (RATE_HAI). Default 100M.
    #[arg(long, value_name = "B", value_parser = parse_rate, allow_hyphen_values = true)]
    timely_rate_hai: Option<f64>,
    /// rocev2 --cc timely: the minimum rate. Default 100M.
    #[arg(long, value_name = "B", value_parser = parse_rate, allow_hyphen_values = true)]
    timely_min_rate: Option<f64>,
    /// rocev2 --cc timely: the EWMA weight of a new RTT difference.
    /// Default 0.875.
    #[arg(long, value_name = "A", allow_negative_numbers = true)]
    timely_alpha: Option<f64>,
    /// rocev2 --cc timely: the multiplicative decrease factor. Default 0.8.
    #[arg(long, value_name = "B", allow_negative_numbers = true)]
    timely_beta: Option<f64>,
    /// rocev2 --cc timely: below this RTT, increase. Default 50.
    #[arg(long, value_name = "US", allow_negative_numbers = true)]
    timely_t_low_us: Option<f64>,
    /// rocev2 --cc timely: above this RTT, decrease. Default 500.
    #[arg(long, value_name = "US", allow_negative_numbers = true)]
    timely_t_high_us: Option<f64>,
    /// rocev2 --cc timely: the gradient's normalizer (minRTT). Default 20.
    #[arg(long, value_name = "US", allow_negative_numbers = true)]
    timely_min_rtt_us: Option<f64>,
    /// rocev2 --cc timely: additive increases before hyper-active ones.
    /// Default 5.
    #[arg(long, value_name = "N")]
    timely_hai_after: Option<u32>,
    /// rocev2 --cc dctcp: the increase per window without marks
    /// (DCTCP_RATE_AI). Default 1G.
    #[arg(long, value_name = "B", value_parser = parse_rate, allow_hyphen_values = true)]
    dctcp_rate_ai: Option<f64>,
    /// rocev2 --cc dctcp: the minimum rate. Default 100M.
    #[arg(long, value_name = "B", value_parser = parse_rate, allow_hyphen_values = true)]
    dctcp_min_rate: Option<f64>,
    /// rocev2 --cc dctcp: alpha's gain g. Default 1/256 = 0.00390625.
    #[arg(long, value_name = "G", allow_negative_numbers = true)]
    dctcp_g: Option<f64>,
    /// rocev2: go back to the first unacknowledged packet after this long
    /// without progress; keep it well above the longest RTT. Default 4000.
    /// ndp: resend a packet unanswered this long (NDP's minimum RTO, as
    /// the Mars paper sets it). Default 1.
    #[arg(long, value_name = "MS", allow_negative_numbers = true)]
    rto_ms: Option<f64>,
    /// ndp: packets a flow sends before its first pull. Default 20.
    #[arg(long, value_name = "N")]
    initial_window: Option<u32>,
    /// ndp: also receive on this address's port 7247, as `server
    /// --transport ndp` does (answers at once, pulls paced at --line-rate,
    /// the payload checked), for hosts that both send and receive. After
    /// the done line the client keeps serving until SIGINT/SIGTERM, which
    /// then ends it with exit status 0.
    #[arg(long)]
    serve: bool,
    /// ndp with --serve: at exit write the receiving side's counters as
    /// JSON to FILE: the object of `server --transport ndp --stats`, plus
    /// window_bytes: payload bytes received once whose packet arrived in
    /// [--warmup, --duration) s after the client's start (with --schedule:
    /// [--warmup, the last start)); not_data counts the datagrams neither
    /// side could use.
    #[arg(long, value_name = "FILE")]
    stats: Option<PathBuf>,
}

/// The flags NDP shares with rocev2 (the rest of [`ClientArgs::rocev2_flags`]
/// is DCQCN's).
const NDP_CLIENT_FLAGS: [&str; 5] = [
    "--rate-scale",
    "--time-scale",
    "--line-rate",
    "--payload",
    "--rto-ms",
];

/// The client flags of NDP alone.
const NDP_ONLY_CLIENT_FLAGS: [&str; 2] = ["--initial-window", "--serve"];

/// The transports a client flag of another transport is for.
fn owners(flag: &str) -> &'static str {
    match flag {
        f if NDP_ONLY_CLIENT_FLAGS.contains(&f) => "an ndp option (--transport ndp)",
        f if NDP_CLIENT_FLAGS.contains(&f) => {
            "a rocev2 option, and an ndp one (--transport rocev2 or ndp)"
        }
        _ => "a rocev2 option (--transport rocev2)",
    }
}

/// The CC a rocev2 client flag belongs to, if it is one CC's.
fn cc_of_flag(flag: &str) -> Option<CongestionControl> {
    match flag {
        f if f.starts_with("--dcqcn-") => Some(CongestionControl::Dcqcn),
        f if f.starts_with("--hpcc-") || f == "--int-hops" => Some(CongestionControl::Hpcc),
        f if f.starts_with("--timely-") => Some(CongestionControl::Timely),
        f if f.starts_with("--dctcp-") => Some(CongestionControl::Dctcp),
        _ => None,
    }
}

/// "a"/"an" before a CC's name.
fn cc_article(cc: CongestionControl) -> &'static str {
    match cc {
        CongestionControl::Hpcc => "an",
        _ => "a",
    }
}

impl ClientArgs {
    /// The NDP options (defaults for what was not given).
    fn ndp_options(&self) -> NdpOptions {
        let d = NdpOptions::default();
        NdpOptions {
            scaling: lcmp_topology::Scaling {
                time: self.time_scale.unwrap_or(d.scaling.time),
                ..lcmp_topology::Scaling::rates(self.rate_scale.unwrap_or(d.scaling.rate))
            },
            line_rate: self.line_rate.unwrap_or(d.line_rate),
            payload: self.payload.unwrap_or(d.payload),
            initial_window: self.initial_window.unwrap_or(d.initial_window),
            rto_ms: self.rto_ms.unwrap_or(d.rto_ms),
        }
    }

    /// The rocev2 flags that were given (ndp shares some:
    /// [`NDP_CLIENT_FLAGS`]).
    fn rocev2_flags(&self) -> Vec<&'static str> {
        [
            (self.rate_scale.is_some(), "--rate-scale"),
            (self.time_scale.is_some(), "--time-scale"),
            (self.line_rate.is_some(), "--line-rate"),
            (self.payload.is_some(), "--payload"),
            (self.dcqcn_rate_ai.is_some(), "--dcqcn-rate-ai"),
            (self.dcqcn_rate_hai.is_some(), "--dcqcn-rate-hai"),
            (self.dcqcn_min_rate.is_some(), "--dcqcn-min-rate"),
            (self.dcqcn_g.is_some(), "--dcqcn-g"),
            (
                self.dcqcn_alpha_interval_us.is_some(),
                "--dcqcn-alpha-interval-us",
            ),
            (
                self.dcqcn_decrease_interval_us.is_some(),
                "--dcqcn-decrease-interval-us",
            ),
            (
                self.dcqcn_increase_interval_us.is_some(),
                "--dcqcn-increase-interval-us",
            ),
            (self.dcqcn_fast_recovery.is_some(), "--dcqcn-fast-recovery"),
            (self.rto_ms.is_some(), "--rto-ms"),
            (self.base_rtt_us.is_some(), "--base-rtt-us"),
            (self.window_bytes.is_some(), "--window-bytes"),
            (self.int_hops.is_some(), "--int-hops"),
            (self.hpcc_eta.is_some(), "--hpcc-eta"),
            (self.hpcc_max_stage.is_some(), "--hpcc-max-stage"),
            (self.hpcc_rate_ai.is_some(), "--hpcc-rate-ai"),
            (self.hpcc_min_rate.is_some(), "--hpcc-min-rate"),
            (self.hpcc_fast_react.is_some(), "--hpcc-fast-react"),
            (self.hpcc_multi_rate.is_some(), "--hpcc-multi-rate"),
            (
                self.hpcc_sample_feedback.is_some(),
                "--hpcc-sample-feedback",
            ),
            (self.timely_rate_ai.is_some(), "--timely-rate-ai"),
            (self.timely_rate_hai.is_some(), "--timely-rate-hai"),
            (self.timely_min_rate.is_some(), "--timely-min-rate"),
            (self.timely_alpha.is_some(), "--timely-alpha"),
            (self.timely_beta.is_some(), "--timely-beta"),
            (self.timely_t_low_us.is_some(), "--timely-t-low-us"),
            (self.timely_t_high_us.is_some(), "--timely-t-high-us"),
            (self.timely_min_rtt_us.is_some(), "--timely-min-rtt-us"),
            (self.timely_hai_after.is_some(), "--timely-hai-after"),
            (self.dctcp_rate_ai.is_some(), "--dctcp-rate-ai"),
            (self.dctcp_min_rate.is_some(), "--dctcp-min-rate"),
            (self.dctcp_g.is_some(), "--dctcp-g"),
        ]
        .into_iter()
        .filter_map(|(given, flag)| given.then_some(flag))
        .collect()
    }

    /// The rocev2 CC (`--cc`, default dcqcn); a flag of another CC is
    /// refused.
    fn rocev2_cc(&self) -> Result<CongestionControl, String> {
        let cc = match &self.cc {
            None => CongestionControl::Dcqcn,
            Some(name) => CongestionControl::from_name(name).map_err(|_| {
                format!(
                    "--cc {name}: rocev2 runs dcqcn, hpcc, timely or dctcp (a kernel congestion control is for --transport tcp)"
                )
            })?,
        };
        for flag in self.rocev2_flags() {
            if let Some(theirs) = cc_of_flag(flag).filter(|&c| c != cc) {
                return Err(format!(
                    "{flag} is {} {theirs} option (--cc {theirs})",
                    cc_article(theirs)
                ));
            }
        }
        Ok(cc)
    }

    /// The rocev2 options (defaults for what was not given).
    fn rocev2_options(&self) -> Result<RoceOptions, String> {
        let d = RoceOptions::default();
        let us = |v: Option<f64>, default_ns: u64, flag: &str| -> Result<u64, String> {
            match v {
                None => Ok(default_ns),
                Some(us) if us.is_finite() && us > 0.0 && us <= 1e12 => {
                    Ok((us * 1e3).round() as u64)
                }
                Some(us) => Err(format!("{flag} must be a number in (0, 1e12], got {us}")),
            }
        };
        let p = DcqcnParams::default();
        let cc = match self.rocev2_cc()? {
            CongestionControl::Dcqcn => CcParams::Dcqcn(DcqcnParams {
                rate_ai: self.dcqcn_rate_ai.unwrap_or(p.rate_ai),
                rate_hai: self.dcqcn_rate_hai.unwrap_or(p.rate_hai),
                min_rate: self.dcqcn_min_rate.unwrap_or(p.min_rate),
                g: self.dcqcn_g.unwrap_or(p.g),
                alpha_interval_ns: us(
                    self.dcqcn_alpha_interval_us,
                    p.alpha_interval_ns,
                    "--dcqcn-alpha-interval-us",
                )?,
                decrease_interval_ns: us(
                    self.dcqcn_decrease_interval_us,
                    p.decrease_interval_ns,
                    "--dcqcn-decrease-interval-us",
                )?,
                increase_interval_ns: us(
                    self.dcqcn_increase_interval_us,
                    p.increase_interval_ns,
                    "--dcqcn-increase-interval-us",
                )?,
                fast_recovery_times: self.dcqcn_fast_recovery.unwrap_or(p.fast_recovery_times),
                ..p
            }),
            CongestionControl::Hpcc => {
                let h = HpccParams::default();
                CcParams::Hpcc(HpccParams {
                    rate_ai: self.hpcc_rate_ai.unwrap_or(h.rate_ai),
                    min_rate: self.hpcc_min_rate.unwrap_or(h.min_rate),
                    u_target: self.hpcc_eta.unwrap_or(h.u_target),
                    mi_thresh: self.hpcc_max_stage.unwrap_or(h.mi_thresh),
                    fast_react: self.hpcc_fast_react.unwrap_or(h.fast_react),
                    multi_rate: self.hpcc_multi_rate.unwrap_or(h.multi_rate),
                    sample_feedback: self.hpcc_sample_feedback.unwrap_or(h.sample_feedback),
                    ..h
                })
            }
            CongestionControl::Timely => {
                let t = TimelyParams::default();
                CcParams::Timely(TimelyParams {
                    rate_ai: self.timely_rate_ai.unwrap_or(t.rate_ai),
                    rate_hai: self.timely_rate_hai.unwrap_or(t.rate_hai),
                    min_rate: self.timely_min_rate.unwrap_or(t.min_rate),
                    alpha: self.timely_alpha.unwrap_or(t.alpha),
                    beta: self.timely_beta.unwrap_or(t.beta),
                    t_low_ns: us(self.timely_t_low_us, t.t_low_ns, "--timely-t-low-us")?,
                    t_high_ns: us(self.timely_t_high_us, t.t_high_ns, "--timely-t-high-us")?,
                    min_rtt_ns: us(self.timely_min_rtt_us, t.min_rtt_ns, "--timely-min-rtt-us")?,
                    hai_after: self.timely_hai_after.unwrap_or(t.hai_after),
                    ..t
                })
            }
            CongestionControl::Dctcp => {
                let t = DctcpParams::default();
                CcParams::Dctcp(DctcpParams {
                    rate_ai: self.dctcp_rate_ai.unwrap_or(t.rate_ai),
                    min_rate: self.dctcp_min_rate.unwrap_or(t.min_rate),
                    g: self.dctcp_g.unwrap_or(t.g),
                    ..t
                })
            }
        };
        Ok(RoceOptions {
            scaling: lcmp_topology::Scaling {
                time: self.time_scale.unwrap_or(d.scaling.time),
                ..lcmp_topology::Scaling::rates(self.rate_scale.unwrap_or(d.scaling.rate))
            },
            line_rate: self.line_rate.unwrap_or(d.line_rate),
            payload: self.payload.unwrap_or(d.payload),
            rto_ms: self.rto_ms.unwrap_or(d.rto_ms),
            cc,
            int_hops: self.int_hops.unwrap_or(DEFAULT_INT_HOPS),
            base_rtt_ns: us(self.base_rtt_us, 0, "--base-rtt-us")?,
            window_bytes: self.window_bytes,
        })
    }
}

/// A rate in bit/s: a number with an optional k/M/G/T suffix (powers of 1000).
fn parse_rate(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1e3),
        Some((i, 'M')) => (&t[..i], 1e6),
        Some((i, 'G')) => (&t[..i], 1e9),
        Some((i, 'T')) => (&t[..i], 1e12),
        _ => (t, 1.0),
    };
    num.parse::<f64>()
        .map(|v| v * mult)
        .map_err(|_| format!("expected bits per second like 2500000000 or 2.5G, got {s:?}"))
}

/// A duration in seconds: a bare number of seconds or a value with a unit
/// (`30s`, `250ms`), by the topology's one unit parser.
fn parse_secs(s: &str) -> Result<f64, String> {
    lcmp_topology::units::parse_duration_or_secs(s)
        .map(|ns| ns as f64 / 1e9)
        .map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let cli: Cli = match lcmp_topology::cli::parse_or_exit("lcmp-traffic") {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    match cli.command {
        Command::Server(args) => server_main(args),
        Command::Client(args) => client_main(*args),
        Command::Workloads => workloads_main(),
    }
}

/// clap's message without the usage block, on one line.
fn server_main(args: ServerArgs) -> ExitCode {
    let usage = |m: String| {
        eprintln!("lcmp-traffic server: {m}");
        ExitCode::from(2)
    };
    const ROCEV2: &str = "a rocev2 option (--transport rocev2)";
    const NDP: &str = "an ndp option (--transport ndp)";
    const BOTH: &str = "a rocev2 option, and an ndp one (--transport rocev2 or ndp)";
    for (given, flag, whose) in [
        (args.notify.is_some(), "--notify", ROCEV2),
        (args.nak_interval_us.is_some(), "--nak-interval-us", ROCEV2),
        (args.time_scale.is_some(), "--time-scale", BOTH),
        (args.stats.is_some(), "--stats", BOTH),
        (args.line_rate.is_some(), "--line-rate", NDP),
        (args.rate_scale.is_some(), "--rate-scale", NDP),
        (args.payload.is_some(), "--payload", NDP),
    ] {
        let theirs = match args.transport {
            Transport::Tcp => false,
            Transport::Rocev2 => whose != NDP,
            Transport::Ndp => whose != ROCEV2,
        };
        if given && !theirs {
            return usage(format!("{flag} is {whose}"));
        }
    }
    // The bound keeps deadlines representable (~31 years).
    if !(args.idle_timeout > 0.0 && args.idle_timeout <= 1e9) {
        return usage(format!(
            "--idle-timeout must be a number in (0, 1e9] seconds, got {}",
            args.idle_timeout
        ));
    }
    match args.transport {
        Transport::Rocev2 => return rocev2_server_main(args),
        Transport::Ndp => return ndp_server_main(args),
        Transport::Tcp => {}
    }
    let mut listen = Vec::new();
    for l in &args.listen {
        match l.port {
            Some(port) => listen.push(SocketAddr::new(l.ip, port)),
            None => return usage(format!("--listen {}: tcp needs ADDR:PORT", l.ip)),
        }
    }
    // Each concurrent connection holds a descriptor.
    if let Err(e) = sockopt::raise_nofile_limit() {
        eprintln!("lcmp-traffic server: cannot raise RLIMIT_NOFILE: {e}");
    }
    let config = ServerConfig {
        listen,
        idle_timeout: Duration::from_secs_f64(args.idle_timeout),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("lcmp-traffic")
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("lcmp-traffic server: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(server::run(&config));
    runtime.shutdown_background();
    match result {
        Ok(stats) => {
            eprintln!("lcmp-traffic server: {}", stats.summary());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("lcmp-traffic server: {e}");
            ExitCode::FAILURE
        }
    }
}

fn rocev2_server_main(args: ServerArgs) -> ExitCode {
    let usage = |m: String| {
        eprintln!("lcmp-traffic server: {m}");
        ExitCode::from(2)
    };
    let mut listen = Vec::new();
    for l in &args.listen {
        match l.ip {
            IpAddr::V4(ip) if !ip.is_unspecified() => {
                listen.push(SocketAddrV4::new(ip, l.port.unwrap_or(ROCEV2_PORT)))
            }
            _ => {
                return usage(format!(
                    "--listen {}: rocev2 needs a specific IPv4 address (its ACKs are sent from it)",
                    l.ip
                ))
            }
        }
    }
    let time_scale = args.time_scale.unwrap_or(1.0);
    if let Err(e) = check_time_scale(time_scale) {
        return usage(e);
    }
    let dilation = lcmp_topology::Scaling {
        time: time_scale,
        ..lcmp_topology::Scaling::NONE
    };
    let nak_interval_ns = match args.nak_interval_us {
        None => dilation.duration_ns(500_000),
        Some(us) if (0.0..=1e12).contains(&us) => dilation.duration_ns((us * 1e3).round() as u64),
        Some(us) => return usage(format!("--nak-interval-us must be in [0, 1e12], got {us}")),
    };
    let config = RoceServerConfig {
        listen,
        notify: match args.notify {
            Some(NotifyArg::Cnp) => Notify::Cnp,
            _ => Notify::Echo,
        },
        nak_interval_ns,
        idle_timeout: Duration::from_secs_f64(args.idle_timeout),
    };
    // Opened now: an unwritable --stats is found before the run, not at
    // its end with the counters lost.
    let stats_file = match &args.stats {
        Some(path) => match std::fs::File::create(path) {
            Ok(f) => Some((path, f)),
            Err(e) => return usage(format!("cannot write --stats {}: {e}", path.display())),
        },
        None => None,
    };
    // Blocked before anything else: the server is this one thread.
    let signals = match Signals::new() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("lcmp-traffic server: signal handling: {e}");
            return ExitCode::FAILURE;
        }
    };
    let sockets = match roce_server::bind(&config.listen) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("lcmp-traffic server: {e}");
            return ExitCode::FAILURE;
        }
    };
    match roce_server::run(&config, sockets, signals) {
        Ok(stats) => {
            eprintln!("lcmp-traffic server: {}", stats.summary());
            if let Some((path, mut file)) = stats_file {
                if let Err(e) = file.write_all((stats.json() + "\n").as_bytes()) {
                    eprintln!(
                        "lcmp-traffic server: cannot write --stats {}: {e}",
                        path.display()
                    );
                    return ExitCode::FAILURE;
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("lcmp-traffic server: {e}");
            ExitCode::FAILURE
        }
    }
}

fn client_main(args: ClientArgs) -> ExitCode {
    let usage = |m: String| {
        eprintln!("lcmp-traffic client: {m}");
        ExitCode::from(2)
    };
    let load = match (args.flows_per_s, args.rate_bps) {
        (Some(r), _) => Some(Load::FlowsPerSecond(r)),
        (None, Some(b)) => Some(Load::BitsPerSecond(b)),
        (None, None) => None,
    };
    let mut foreign = args.rocev2_flags();
    for (given, flag) in [
        (args.initial_window.is_some(), "--initial-window"),
        (args.serve, "--serve"),
    ] {
        if given {
            foreign.push(flag);
        }
    }
    let foreign = foreign.into_iter().find(|f| match args.transport {
        Transport::Tcp => true,
        Transport::Rocev2 => NDP_ONLY_CLIENT_FLAGS.contains(f),
        Transport::Ndp => !NDP_CLIENT_FLAGS.contains(f) && !NDP_ONLY_CLIENT_FLAGS.contains(f),
    });
    if let Some(flag) = foreign {
        return usage(format!("{flag} is {}", owners(flag)));
    }
    if args.stats.is_some() && !args.serve {
        return usage(
            "--stats needs --serve (--transport ndp): it writes the counters of the client's receiving side"
                .into(),
        );
    }
    if args.transport == Transport::Ndp && args.cc.is_some() {
        return usage("--cc is a tcp and a rocev2 option (--transport tcp or rocev2)".into());
    }
    if args.transport != Transport::Tcp && args.max_concurrent.is_some() {
        return usage("--max-concurrent is a tcp option (--transport tcp)".into());
    }
    let rocev2 = match args.transport {
        Transport::Tcp => None,
        Transport::Ndp => return ndp_client_main(args, load),
        Transport::Rocev2 => match args.rocev2_options() {
            Ok(o) => Some(o),
            Err(e) => return usage(e),
        },
    };
    let config = ClientConfig {
        name: args.name,
        dsts: args.dst,
        workload: args.workload,
        load,
        duration_s: args.duration,
        schedule: args.schedule,
        size_scale: args.size_scale,
        warmup_s: args.warmup,
        drain_s: args.drain,
        seed: args.seed,
        id_base: args.id_base,
        out: args.out,
        // rocev2's --cc is in its options.
        cc: args.cc.filter(|_| rocev2.is_none()),
        max_concurrent: args.max_concurrent.unwrap_or(4096),
        progress_ms: args.progress_ms,
        rocev2,
    };
    let plan = match client::prepare(config) {
        Ok(plan) => plan,
        Err(e) => return usage(e),
    };
    match client::run(plan) {
        Ok(summary) => match summary.interrupted {
            Some(signo) => ExitCode::from(128u8.saturating_add(signo as u8)),
            None => ExitCode::SUCCESS,
        },
        Err(e) => {
            eprintln!("lcmp-traffic client: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `client --transport ndp`: the flags checked as every client's
/// ([`client::prepare`]), the sockets opened, the flows run.
fn ndp_client_main(args: ClientArgs, load: Option<Load>) -> ExitCode {
    let usage = |m: String| {
        eprintln!("lcmp-traffic client: {m}");
        ExitCode::from(2)
    };
    let (params, line_bps) = match args.ndp_options().resolve() {
        Ok(p) => p,
        Err(e) => return usage(e),
    };
    // Blocked before anything else: the client is this one thread.
    let signals = match Signals::new() {
        Ok(s) => s,
        Err(e) => return usage(format!("cannot set up signal handling: {e}")),
    };
    // Opened before the output file exists, so that a taken port leaves
    // none behind.
    let mut endpoint = match NdpEndpoint::for_receivers(&args.dst) {
        Ok(ep) => ep,
        Err(e) => return usage(e),
    };
    let config = ClientConfig {
        name: args.name,
        dsts: args.dst,
        workload: args.workload,
        load,
        duration_s: args.duration,
        schedule: args.schedule,
        size_scale: args.size_scale,
        warmup_s: args.warmup,
        drain_s: args.drain,
        seed: args.seed,
        id_base: args.id_base,
        out: args.out,
        cc: None,
        // No connection slots: NDP flows hold no socket of their own.
        max_concurrent: 1,
        progress_ms: args.progress_ms,
        rocev2: None,
    };
    let plan = match client::prepare(config) {
        Ok(plan) => plan,
        Err(e) => return usage(e),
    };
    let client::Plan {
        config, arrivals, ..
    } = plan;
    // The plan's handle on the file it created is private to it; the
    // file is empty, and opened again here.
    let out = match std::fs::File::create(&config.out) {
        Ok(f) => f,
        Err(e) => return usage(format!("cannot write --out {}: {e}", config.out.display())),
    };
    // Opened now: an unwritable --stats is found before the run, not at
    // its end with the counters lost (and then no --out is left behind).
    let stats_file = match &args.stats {
        Some(path) => match std::fs::File::create(path) {
            Ok(f) => Some((path, f)),
            Err(e) => {
                let _ = std::fs::remove_file(&config.out);
                return usage(format!("cannot write --stats {}: {e}", path.display()));
            }
        },
        None => None,
    };
    // The window whose arrivals the analysis measures, on the run's clock.
    let secs_ns = |s: f64| (s * 1e9).round() as u64;
    let window_end_ns = match &arrivals {
        Arrivals::Poisson { duration_s, .. } => secs_ns(*duration_s),
        Arrivals::Schedule(list) => list.last().map_or(0, |f| f.start_ns),
    };
    let serve = args.serve.then(|| ndp::client::Serve {
        config: ndp::server::ServerConfig {
            params,
            line_bps,
            idle_timeout: Duration::from_secs_f64(DEFAULT_IDLE_TIMEOUT_S),
        },
        window_ns: secs_ns(config.warmup_s)..window_end_ns,
    });
    let source = FlowSource::new(
        arrivals,
        config.seed,
        config.id_base,
        config.warmup_s,
        config.size_scale,
        config.dsts.len(),
    );
    let run = ndp::client::Run {
        name: config.name,
        dsts: config.dsts,
        out,
        out_path: config.out.display().to_string(),
        progress_ms: config.progress_ms,
        drain_s: config.drain_s,
        source,
        params,
        line_bps,
    };
    match ndp::client::run_and_serve(run, serve, &mut endpoint, &signals) {
        Ok(o) => {
            if let Some(r) = &o.receiver {
                eprintln!(
                    "lcmp-traffic client: received: {}, {} bytes in the window",
                    r.server.summary(),
                    r.window_bytes
                );
            }
            if let (Some((path, mut file)), Some(r)) = (stats_file, &o.receiver) {
                if let Err(e) = file.write_all((r.json() + "\n").as_bytes()) {
                    eprintln!(
                        "lcmp-traffic client: cannot write --stats {}: {e}",
                        path.display()
                    );
                    return ExitCode::FAILURE;
                }
            }
            match o.summary.interrupted {
                Some(signo) => ExitCode::from(128u8.saturating_add(signo as u8)),
                None => ExitCode::SUCCESS,
            }
        }
        Err(e) => {
            eprintln!("lcmp-traffic client: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `server --transport ndp`: one address, port 7247, until SIGINT/SIGTERM.
fn ndp_server_main(args: ServerArgs) -> ExitCode {
    let usage = |m: String| {
        eprintln!("lcmp-traffic server: {m}");
        ExitCode::from(2)
    };
    let [l] = args.listen[..] else {
        return usage("ndp listens on one address (one process per NDP address)".into());
    };
    let ip = match l.ip {
        IpAddr::V4(ip) if !ip.is_unspecified() => ip,
        _ => {
            return usage(format!(
                "--listen {}: ndp needs a specific IPv4 address (its answers are sent from it)",
                l.ip
            ))
        }
    };
    if let Some(port) = l.port.filter(|&p| p != ndp::socket::UDP_PORT) {
        return usage(format!(
            "--listen {ip}:{port}: NDP is port {} (the port switches trim)",
            ndp::socket::UDP_PORT
        ));
    }
    let d = NdpOptions::default();
    let options = NdpOptions {
        scaling: lcmp_topology::Scaling {
            time: args.time_scale.unwrap_or(d.scaling.time),
            ..lcmp_topology::Scaling::rates(args.rate_scale.unwrap_or(d.scaling.rate))
        },
        line_rate: args.line_rate.unwrap_or(d.line_rate),
        payload: args.payload.unwrap_or(d.payload),
        ..d
    };
    let (params, line_bps) = match options.resolve() {
        Ok(p) => p,
        Err(e) => return usage(e),
    };
    let stats_file = match &args.stats {
        Some(path) => match std::fs::File::create(path) {
            Ok(f) => Some((path, f)),
            Err(e) => return usage(format!("cannot write --stats {}: {e}", path.display())),
        },
        None => None,
    };
    let signals = match Signals::new() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("lcmp-traffic server: signal handling: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut endpoint = match NdpEndpoint::bind(ip) {
        Ok(ep) => ep,
        Err(e) => {
            eprintln!("lcmp-traffic server: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("listening {ip}:{}", ndp::socket::UDP_PORT);
    let _ = io::stdout().flush();
    let config = ndp::server::ServerConfig {
        params,
        line_bps,
        idle_timeout: Duration::from_secs_f64(args.idle_timeout),
    };
    match ndp::server::serve(&config, &mut endpoint, &signals) {
        Ok(stats) => {
            eprintln!("lcmp-traffic server: {}", stats.summary());
            if let Some((path, mut file)) = stats_file {
                if let Err(e) = file.write_all((stats.json() + "\n").as_bytes()) {
                    eprintln!(
                        "lcmp-traffic server: cannot write --stats {}: {e}",
                        path.display()
                    );
                    return ExitCode::FAILURE;
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("lcmp-traffic server: {e}");
            ExitCode::FAILURE
        }
    }
}

fn workloads_main() -> ExitCode {
    match write_workloads(&mut io::stdout().lock()) {
        Ok(()) => ExitCode::SUCCESS,
        // A reader that has all it wants (`| head`): end quietly with
        // 128 + SIGPIPE, what a shell reports for coreutils cut short.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::from(141),
        Err(e) => {
            eprintln!("lcmp-traffic workloads: cannot write to stdout: {e}");
            ExitCode::FAILURE
        }
    }
}

fn write_workloads(out: &mut impl Write) -> io::Result<()> {
    writeln!(
        out,
        "{:<11} {:<28} {:>6} {:>12} {:>12} {:>12}",
        "name", "file", "points", "mean_bytes", "median_bytes", "max_bytes"
    )?;
    for (short, stem, _) in BUILTIN {
        let Some(cdf) = Cdf::builtin(short) else {
            continue;
        };
        writeln!(
            out,
            "{:<11} {:<28} {:>6} {:>12.0} {:>12.0} {:>12}",
            short,
            format!("{stem}.txt"),
            cdf.points().len(),
            cdf.mean(),
            cdf.median(),
            cdf.max_size()
        )?;
    }
    out.flush()
}

//! `lcmp-traffic`: command-line front end (see `lcmp-traffic --help`).

use std::io::{self, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::error::ErrorKind;
use clap::{ArgGroup, Args, Parser, Subcommand};

use lcmp_traffic::cdf::{Cdf, BUILTIN};
use lcmp_traffic::client::{self, ClientConfig, Destination, Load};
use lcmp_traffic::server::{self, ServerConfig};
use lcmp_traffic::sockopt;

const ABOUT: &str = "Workload generator for DCI testbeds: Poisson flow arrivals, flow sizes from \
an empirical CDF, one TCP connection per flow, per-flow completion times.";

const PROTOCOL_HELP: &str = "\
Protocol: every flow is a new TCP connection (a new 5-tuple). The client sends a 16-byte \
header (flow id, u64 big-endian; payload size, u64 big-endian) and then `size` payload bytes; \
the server reads the header and exactly `size` bytes, writes one acknowledgement byte (0x06) \
and waits for the client to close. Sizes above 1 TiB are refused.

FCT (flow completion time): measured by the client from just before connect() to the moment \
it reads the acknowledgement byte, i.e. handshake + transfer + one round trip for the last \
byte and the ack. A flow that had to wait for a free --max-concurrent slot is timed from its \
arrival instead, so the wait counts. min_rtt_us is the kernel's tcpi_min_rtt of the connection.";

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
    /// size from the --workload CDF (both seeded). Then the client waits at
    /// most --drain seconds for active flows and writes every flow to --out.
    ///
    /// Progress: every --progress-ms one JSON line on stdout,
    /// {"t_s":..,"started":..,"completed":..,"failed":..,"active":..,"deferred":..},
    /// and, once the CSV is complete, one line with "done":true and the
    /// totals (started, completed, failed, unfinished, deferred, warmup, ...).
    ///
    /// Exit status: 0 when the run completed (whatever the flows' outcome); 2
    /// for bad input (one line on stderr, nothing started, no file written);
    /// 1 if the CSV cannot be written; 128+signal after SIGINT/SIGTERM (the
    /// CSV is still written, open flows as unfinished).
    #[command(after_long_help = PROTOCOL_HELP)]
    Client(ClientArgs),
    /// List the built-in workloads (points, mean, median, max).
    Workloads,
}

#[derive(Args)]
struct ServerArgs {
    /// Address to accept flows on, ADDR:PORT (IPv6: [ADDR]:PORT); repeat
    /// for several. Port 0 picks a free port; the `listening` line shows it.
    #[arg(long, value_name = "ADDR:PORT", required = true)]
    listen: Vec<SocketAddr>,
    /// Close a connection that sends nothing for this long.
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = 60.0,
        allow_negative_numbers = true
    )]
    idle_timeout: f64,
}

#[derive(Args)]
#[command(group(ArgGroup::new("load").required(true).args(["flows_per_s", "rate_bps"])))]
struct ClientArgs {
    /// Name of this (sending) host, written to every row.
    #[arg(long, value_name = "HOST")]
    name: String,
    /// Receiver NAME=ADDR:PORT (a running `lcmp-traffic server`); at least
    /// one, repeat for several. Each flow picks one uniformly (seeded).
    #[arg(long, value_name = "NAME=ADDR:PORT")]
    dst: Vec<Destination>,
    /// Flow-size CDF: websearch, alistorage, fbhadoop, googlerpc (built in;
    /// file stems work too) or the path of a file in the same format.
    #[arg(long, value_name = "NAME|FILE")]
    workload: String,
    /// Mean flow arrival rate (Poisson), flows per second.
    #[arg(long, value_name = "R", allow_negative_numbers = true)]
    flows_per_s: Option<f64>,
    /// Offered payload rate, bits per second (suffixes k, M, G: 2.5G);
    /// flows/s = rate / (8 * mean flow size).
    #[arg(long, value_name = "B", value_parser = parse_rate, allow_hyphen_values = true)]
    rate_bps: Option<f64>,
    /// Seconds during which flows arrive.
    #[arg(long, value_name = "SECS", allow_negative_numbers = true)]
    duration: f64,
    /// Flows arriving in the first SECS are marked warmup=true (analysis
    /// excludes them); must be shorter than --duration.
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = 0.0,
        allow_negative_numbers = true
    )]
    warmup: f64,
    /// After arrivals stop, wait at most SECS for active flows; the rest
    /// are recorded as unfinished.
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = 30.0,
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
    /// (start_ns: arrival since the start; fct_ns empty unless ok).
    #[arg(long, value_name = "FILE.csv")]
    out: PathBuf,
    /// TCP congestion control for every flow (TCP_CONGESTION); must be in
    /// /proc/sys/net/ipv4/tcp_available_congestion_control. Default: the
    /// system's.
    #[arg(long, value_name = "NAME")]
    cc: Option<String>,
    /// At most N flows in flight (each holds a socket); an arrival beyond it
    /// waits for a slot and is counted as deferred. Lowered to fit the
    /// open-file limit, with a note on stderr.
    #[arg(long, value_name = "N", default_value_t = 4096)]
    max_concurrent: usize,
    /// Progress line interval, milliseconds (0: only the final line).
    #[arg(long, value_name = "MS", default_value_t = 500)]
    progress_ms: u64,
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

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            return match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
                    let _ = e.print();
                    ExitCode::SUCCESS
                }
                ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                    let _ = e.print();
                    ExitCode::from(2)
                }
                _ => {
                    eprintln!(
                        "lcmp-traffic: {} (see --help)",
                        first_paragraph(&e.render().to_string())
                    );
                    ExitCode::from(2)
                }
            };
        }
    };
    match cli.command {
        Command::Server(args) => server_main(args),
        Command::Client(args) => client_main(args),
        Command::Workloads => workloads_main(),
    }
}

/// clap's message without the usage block, on one line.
fn first_paragraph(rendered: &str) -> String {
    let text: Vec<&str> = rendered
        .lines()
        .map(str::trim)
        .take_while(|l| !l.is_empty())
        .collect();
    let joined = text.join(" ");
    joined
        .strip_prefix("error: ")
        .unwrap_or(&joined)
        .to_string()
}

fn server_main(args: ServerArgs) -> ExitCode {
    // The bound keeps deadlines representable (~31 years).
    if !(args.idle_timeout > 0.0 && args.idle_timeout <= 1e9) {
        eprintln!(
            "lcmp-traffic server: --idle-timeout must be a number in (0, 1e9] seconds, got {}",
            args.idle_timeout
        );
        return ExitCode::from(2);
    }
    // Each concurrent connection holds a descriptor.
    if let Err(e) = sockopt::raise_nofile_limit() {
        eprintln!("lcmp-traffic server: cannot raise RLIMIT_NOFILE: {e}");
    }
    let config = ServerConfig {
        listen: args.listen,
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

fn client_main(args: ClientArgs) -> ExitCode {
    let load = match (args.flows_per_s, args.rate_bps) {
        (Some(r), _) => Load::FlowsPerSecond(r),
        (None, Some(b)) => Load::BitsPerSecond(b),
        // clap's `load` group requires one of them.
        (None, None) => {
            eprintln!("lcmp-traffic client: give --flows-per-s or --rate-bps");
            return ExitCode::from(2);
        }
    };
    let config = ClientConfig {
        name: args.name,
        dsts: args.dst,
        workload: args.workload,
        load,
        duration_s: args.duration,
        warmup_s: args.warmup,
        drain_s: args.drain,
        seed: args.seed,
        id_base: args.id_base,
        out: args.out,
        cc: args.cc,
        max_concurrent: args.max_concurrent,
        progress_ms: args.progress_ms,
    };
    let plan = match client::prepare(config) {
        Ok(plan) => plan,
        Err(e) => {
            eprintln!("lcmp-traffic client: {e}");
            return ExitCode::from(2);
        }
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

fn workloads_main() -> ExitCode {
    let mut out = io::stdout().lock();
    let _ = writeln!(
        out,
        "{:<11} {:<28} {:>6} {:>12} {:>12} {:>12}",
        "name", "file", "points", "mean_bytes", "median_bytes", "max_bytes"
    );
    for (short, stem, _) in BUILTIN {
        let Some(cdf) = Cdf::builtin(short) else {
            continue;
        };
        let _ = writeln!(
            out,
            "{:<11} {:<28} {:>6} {:>12.0} {:>12.0} {:>12}",
            short,
            format!("{stem}.txt"),
            cdf.points().len(),
            cdf.mean(),
            cdf.median(),
            cdf.max_size()
        );
    }
    ExitCode::SUCCESS
}

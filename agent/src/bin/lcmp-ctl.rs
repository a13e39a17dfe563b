//! `lcmp-ctl`: queries and steers running `lcmp-switch` daemons over their
//! control sockets, like `ovs-appctl`. Parsing and exit statuses only; the
//! logic is `lcmp_agent::ctl`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use lcmp_agent::ctl::{self, CaptureOptions, Command, CtlError, RunDirs, Selection};
use lcmp_policy::PolicyName;

#[derive(Parser)]
#[command(
    name = "lcmp-ctl",
    version,
    about = "Query and steer running lcmp-switch daemons over their control sockets",
    after_help = "\
Switch selection: --testbed NAME addresses the testbed's switches (all, or those named \
with -s); -s SWITCH alone addresses the standalone /run/lcmp-switch/SWITCH.sock, or, \
when there is none, the switch SWITCH of the one testbed running; --socket PATH one \
socket directly. With none of them, the one testbed running under /run/lcmp-testbed is \
used. Read commands (and costs) run on every selected switch, one \
after the other; set commands apply to each and report what changed.

Exit status: 0 all selected switches answered, 1 any failed, the selection names \
nothing that exists or (links) the agent's plan is unreadable, 2 usage error."
)]
struct Cli {
    /// Address the switches of this testbed (/run/lcmp-testbed/NAME/*.sock).
    #[arg(long, value_name = "NAME", global = true)]
    testbed: Option<String>,
    /// Address this switch (repeatable): one of the testbed's with --testbed,
    /// else the standalone /run/lcmp-switch/SWITCH.sock, or the one running
    /// testbed's SWITCH when that does not exist.
    #[arg(short = 's', long = "switch", value_name = "SWITCH", global = true)]
    switches: Vec<String>,
    /// Address this control socket directly.
    #[arg(long, value_name = "PATH", global = true)]
    socket: Option<PathBuf>,
    /// Print the replies as one JSON array of {switch, reply} / {switch, error}.
    #[arg(long, global = true)]
    json: bool,
    /// How long to wait for each switch's reply to a request, ms: the
    /// whole exchange, however slowly the reply comes.
    #[arg(
        long,
        value_name = "N",
        default_value_t = ctl::DEFAULT_TIMEOUT_MS,
        value_parser = clap::value_parser!(u64).range(1..=3_600_000),
        global = true
    )]
    timeout_ms: u64,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// One line per switch: pid, uptime, policy, traffic, drops, flows, table generation.
    Status,
    /// Per switch and port: state, counters, queue, congestion, drops, emulation.
    Ports,
    /// Cached flows by port, decisions by destination, recent decisions.
    Flows {
        /// How many recent decisions to list.
        #[arg(long, value_name = "N", default_value_t = 20)]
        top: u32,
    },
    /// Every candidate's cost parts for a destination; the kept set is marked *.
    Costs {
        /// An address (10.0.2.2) or prefix (10.0.2.0/24).
        #[arg(value_name = "PREFIX_OR_ADDR")]
        dst: String,
    },
    /// Show the path-selection policy, or set it to NAME.
    Policy {
        /// The policy to set.
        #[arg(value_enum)]
        name: Option<PolicyName>,
    },
    /// Set an LCMP weight or the ECN thresholds: alpha N | beta N | ecn KMIN,KMAX,PMAX | ecn off.
    Set {
        /// The parameter.
        #[arg(value_name = "PARAM", value_enum)]
        param: Param,
        /// The value.
        #[arg(value_name = "VALUE", allow_hyphen_values = true)]
        value: String,
    },
    /// Set a port administratively up or down.
    Link {
        /// Interface name or port index.
        port: String,
        /// The state to set.
        #[arg(value_name = "STATE", value_enum)]
        state: LinkState,
    },
    /// Drop or restore a memory link's carrier at both ends, as pulling or
    /// plugging its cable would (a veth's is the kernel's: `ip link set DEV
    /// down` in the switch's namespace).
    Carrier {
        /// Interface name or port index.
        port: String,
        /// The state to set.
        #[arg(value_name = "STATE", value_enum)]
        state: LinkState,
    },
    /// Capture a port's frames, both directions, into a pcapng file
    /// (tcpdump -r, Wireshark): the way to look into a memory link, which
    /// has no interface for tcpdump; works on any port. Stops at the first
    /// limit reached, or at Ctrl-C.
    Capture {
        /// [SWITCH] PORT: the port (interface name or index) of the switch
        /// named first, or of the one switch -s, --socket or --testbed
        /// select.
        #[arg(value_names = ["SWITCH", "PORT"], num_args = 1..=2, required = true)]
        target: Vec<String>,
        /// The pcapng file to write.
        #[arg(long, short = 'w', value_name = "FILE")]
        out: PathBuf,
        /// Frames to capture at most.
        #[arg(long, short = 'c', value_name = "N", default_value_t = 10_000,
              value_parser = clap::value_parser!(u64).range(1..))]
        count: u64,
        /// How long to capture at most (10s, 500ms, ...).
        #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
        duration: Duration,
        /// Bytes to capture at most, as kept (64MB, 500kB, ...); the frame
        /// that reaches the limit is cut to it.
        #[arg(long, value_name = "SIZE", default_value = "64MB", value_parser = parse_size)]
        max_bytes: u64,
        /// Bytes kept of each frame.
        #[arg(long, value_name = "BYTES", default_value_t = 2048,
              value_parser = clap::value_parser!(u32).range(1..))]
        snaplen: u32,
    },
    /// The route table: prefix -> candidates with C_path and capacity.
    Tables,
    /// Each port's link emulation (rate, delay, buffer) and what emulates it.
    Links,
    /// Rotor networks: each switch's epoch, current slot, slot lateness,
    /// circuits now and schedule per port, queues and drops.
    Rotor,
}

/// A parameter `set` changes.
#[derive(Clone, Copy, ValueEnum)]
enum Param {
    /// LCMP's weight of C_path (a non-negative integer).
    Alpha,
    /// LCMP's weight of C_cong (a non-negative integer).
    Beta,
    /// ECN thresholds KMIN,KMAX,PMAX, or `off`.
    Ecn,
}

/// An administrative port state.
#[derive(Clone, Copy, ValueEnum)]
enum LinkState {
    Up,
    Down,
}

/// The name a value is written with on the command line.
fn value_name(v: &impl ValueEnum) -> String {
    v.to_possible_value()
        .expect("no variant is skipped")
        .get_name()
        .to_string()
}

fn command(cmd: Cmd) -> Result<Command, CtlError> {
    Ok(match cmd {
        Cmd::Status => Command::Status,
        Cmd::Ports => Command::Ports,
        Cmd::Flows { top } => Command::Flows { top },
        Cmd::Costs { dst } => Command::costs(&dst)?,
        Cmd::Policy { name } => Command::policy(name.map(PolicyName::name))?,
        Cmd::Set { param, value } => Command::set(&value_name(&param), &value)?,
        Cmd::Link { port, state } => Command::link(&port, &value_name(&state))?,
        Cmd::Carrier { port, state } => Command::carrier(&port, &value_name(&state))?,
        Cmd::Capture { .. } => unreachable!("capture is run by run_capture"),
        Cmd::Tables => Command::Tables,
        Cmd::Links => Command::Links,
        Cmd::Rotor => Command::Rotor,
    })
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    lcmp_topology::units::parse_duration(s)
        .map(Duration::from_nanos)
        .map_err(|e| e.to_string())
}

fn parse_size(s: &str) -> Result<u64, String> {
    lcmp_topology::units::parse_buffer(s).map_err(|e| e.to_string())
}

/// Set by SIGINT: the capture stops and its file is completed.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// `capture`: one switch, one port, into a file.
fn run_capture(cli: Cli) -> Result<String, CtlError> {
    let Cmd::Capture {
        mut target,
        out,
        count,
        duration,
        max_bytes,
        snaplen,
    } = cli.command
    else {
        unreachable!("called for capture only");
    };
    let port = target.pop().expect("clap requires the port");
    let mut switches = cli.switches;
    switches.extend(target);
    let selection = Selection::from_options(cli.testbed, switches, cli.socket)?;
    let resolved = ctl::resolve(&selection, &RunDirs::default())?;
    if let Some(note) = resolved.note {
        eprintln!("lcmp-ctl: {note}");
    }
    let [target] = resolved.targets.as_slice() else {
        return Err(CtlError::Usage(format!(
            "capture takes one switch, and {} are selected: name it (capture SWITCH PORT)",
            resolved.targets.len()
        )));
    };
    // SAFETY: the handler only stores to an atomic, which is
    // async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_sigint as *const () as libc::sighandler_t);
    }
    let s = ctl::capture(
        target,
        &CaptureOptions {
            port,
            out: out.clone(),
            snaplen,
            max_frames: count,
            max_bytes,
            duration,
        },
        Duration::from_millis(cli.timeout_ms),
        &INTERRUPTED,
    )?;
    Ok(format!(
        "{}/{}: {} frames, {} bytes written to {}{}",
        target.name,
        s.port,
        s.frames,
        s.bytes,
        out.display(),
        if s.dropped > 0 {
            format!(
                " ({} frames lost: this reader fell behind the switch)",
                s.dropped
            )
        } else {
            String::new()
        }
    ))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if matches!(cli.command, Cmd::Capture { .. }) {
        return match run_capture(cli) {
            Ok(line) => {
                eprintln!("lcmp-ctl: {line}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("lcmp-ctl: {e}");
                ExitCode::from(e.exit_code())
            }
        };
    }
    let prepared = command(cli.command).and_then(|cmd| {
        let selection = Selection::from_options(cli.testbed, cli.switches, cli.socket)?;
        let resolved = ctl::resolve(&selection, &RunDirs::default())?;
        if let Some(note) = resolved.note {
            eprintln!("lcmp-ctl: {note}");
        }
        Ok((cmd, resolved.targets))
    });
    let (cmd, targets) = match prepared {
        Ok(p) => p,
        Err(e) => {
            eprintln!("lcmp-ctl: {e}");
            return ExitCode::from(e.exit_code());
        }
    };
    let outcomes = ctl::query(&targets, &cmd, Duration::from_millis(cli.timeout_ms));
    match ctl::report(
        &cmd,
        &outcomes,
        cli.json,
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    ) {
        Ok(code) => ExitCode::from(code),
        // A reader that has all it wants (`| head`): end quietly with
        // 128 + SIGPIPE, what a shell reports for coreutils cut short.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::from(141),
        Err(e) => {
            eprintln!("lcmp-ctl: cannot write the output: {e}");
            ExitCode::FAILURE
        }
    }
}

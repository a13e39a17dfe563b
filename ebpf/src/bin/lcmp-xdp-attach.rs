//! `lcmp-xdp-attach IFNAME [--mode auto|native|generic] [--netns NAME]`
//!
//! Attaches the lcmp XDP steering program to IFNAME (optionally inside the
//! named network namespace, as created by `ip netns add`), prints one line
//!
//! ```text
//! attached ifname=IFNAME prog_id=N mode=native
//! ```
//!
//! then prints the verdict counters for every line read on standard input,
//! and detaches when standard input reaches end-of-file. A diagnostic tool,
//! also used by the tests to check that a `kill -9`ed owner leaves nothing
//! behind.

use std::io::{BufRead, Write};
use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use lcmp_ebpf::{XdpMode, XdpSteering};

const AFTER_HELP: &str = "\
OUTPUT:
  attached ifname=IFNAME prog_id=N mode=native|generic
  <the verdict counters as name=value pairs, one line per line read on stdin>
  detached

EXAMPLES:
  Attach to eth0 in driver mode, print the counters once, detach:
    echo | lcmp-xdp-attach eth0 --mode native
  Inside the namespace sw (ip netns add sw), counters every second until ^C:
    while sleep 1; do echo; done | lcmp-xdp-attach sw0 --netns sw

EXIT CODES:
  0  standard input ended and the program was detached
  1  the namespace could not be entered, or attaching, reading the
     counters or detaching failed (the message says which)
  2  bad arguments
  Killed by a signal, it leaves nothing attached: the kernel drops the
  program with the process's bpf_link.";

#[derive(Parser, Debug)]
#[command(
    name = "lcmp-xdp-attach",
    version,
    about = "Attach the lcmp XDP steering program to an interface until stdin ends",
    long_about = "Attach the lcmp XDP steering program to IFNAME, print one \
    `attached` line, then the program's verdict counters for every line read \
    on standard input, and detach when standard input ends. A diagnostic \
    tool; the namespace tests use it to check that a `kill -9`ed owner \
    leaves nothing behind.",
    after_help = AFTER_HELP,
    // As the hand parser did: a repeated option replaces the earlier value.
    args_override_self = true
)]
struct Cli {
    /// The interface to attach to.
    #[arg(value_name = "IFNAME")]
    ifname: String,
    /// XDP attach mode.
    #[arg(long, value_enum, default_value_t = Mode::Auto)]
    mode: Mode,
    /// Enter /run/netns/NAME (a namespace made by `ip netns add`) first.
    #[arg(long, value_name = "NAME")]
    netns: Option<String>,
}

/// The CLI spelling of [`XdpMode`] (the library type stays free of clap).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// Native if the driver supports it, otherwise generic.
    Auto,
    /// Driver mode only.
    Native,
    /// skb mode: works on every device, slower.
    Generic,
}

impl From<Mode> for XdpMode {
    fn from(m: Mode) -> Self {
        match m {
            Mode::Auto => XdpMode::Auto,
            Mode::Native => XdpMode::Native,
            Mode::Generic => XdpMode::Generic,
        }
    }
}

fn enter_netns(name: &str) -> Result<(), String> {
    let path = format!("/run/netns/{name}");
    let f = std::fs::File::open(&path).map_err(|e| format!("{path}: {e}"))?;
    lcmp_ebpf::sys::enter_netns(&f).map_err(|e| format!("setns {path}: {e}"))
}

fn run(cli: Cli) -> Result<(), String> {
    if let Some(ns) = &cli.netns {
        enter_netns(ns)?;
    }
    let ifname = cli.ifname;
    let steering = XdpSteering::attach(&ifname, cli.mode.into()).map_err(|e| e.to_string())?;
    let mode = match steering.mode() {
        lcmp_ebpf::AttachedMode::Native => "native",
        lcmp_ebpf::AttachedMode::Generic => "generic",
    };
    let mut out = std::io::stdout().lock();
    let say = |out: &mut std::io::StdoutLock<'_>, line: String| {
        // A closed stdout is not worth failing for.
        let _ = writeln!(out, "{line}").and_then(|()| out.flush());
    };
    say(
        &mut out,
        format!(
            "attached ifname={ifname} prog_id={} mode={mode}",
            steering.program_id()
        ),
    );
    for line in std::io::stdin().lock().lines() {
        if line.is_err() {
            break;
        }
        let c = steering.counters().map_err(|e| e.to_string())?;
        let fields: Vec<String> = c
            .as_pairs()
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect();
        say(&mut out, fields.join(" "));
    }
    steering.detach().map_err(|e| e.to_string())?;
    say(&mut out, "detached".into());
    Ok(())
}

fn main() -> ExitCode {
    let cli: Cli = match lcmp_topology::cli::parse_or_exit("lcmp-xdp-attach") {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lcmp-xdp-attach: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("lcmp-xdp-attach").chain(args.iter().copied()))
    }

    #[test]
    fn the_namespace_tests_invocation_parses() {
        Cli::command().debug_assert();
        // ebpf/tests/netns.rs spawn_owner: options before the interface.
        for (mode, want) in [("native", Mode::Native), ("generic", Mode::Generic)] {
            let c = parse(&["--netns", "lcmpt-1-sw", "sw0", "--mode", mode]).unwrap();
            assert_eq!(c.ifname, "sw0");
            assert_eq!(c.mode, want);
            assert_eq!(c.netns.as_deref(), Some("lcmpt-1-sw"));
        }
        let c = parse(&["eth0"]).unwrap();
        assert_eq!(
            (c.ifname.as_str(), c.mode, c.netns),
            ("eth0", Mode::Auto, None)
        );
        // A repeat replaces, as with the hand parser.
        let c = parse(&["eth0", "--mode", "native", "--mode=auto"]).unwrap();
        assert_eq!(c.mode, Mode::Auto);
        assert_eq!(XdpMode::from(Mode::Generic), XdpMode::Generic);
    }

    #[test]
    fn bad_arguments_are_refused() {
        for bad in [
            &[][..],
            &["eth0", "eth1"],
            &["eth0", "--mode", "skb"],
            &["eth0", "--netns"],
            &["eth0", "--nope"],
        ] {
            let e = parse(bad).err().unwrap_or_else(|| panic!("{bad:?} parsed"));
            assert_eq!(e.exit_code(), 2, "{bad:?}");
            assert!(
                !lcmp_topology::cli::clap_error_line(&e).contains('\n'),
                "{bad:?}"
            );
        }
    }
}

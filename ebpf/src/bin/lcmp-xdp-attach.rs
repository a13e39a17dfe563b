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

use lcmp_ebpf::{XdpMode, XdpSteering};

const USAGE: &str = "usage: lcmp-xdp-attach IFNAME [--mode auto|native|generic] [--netns NAME]";

fn enter_netns(name: &str) -> Result<(), String> {
    let path = format!("/run/netns/{name}");
    let f = std::fs::File::open(&path).map_err(|e| format!("{path}: {e}"))?;
    lcmp_ebpf::sys::enter_netns(&f).map_err(|e| format!("setns {path}: {e}"))
}

fn run() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let mut ifname = None;
    let mut mode = XdpMode::Auto;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--mode" => {
                mode = match args.next().as_deref() {
                    Some("auto") => XdpMode::Auto,
                    Some("native") => XdpMode::Native,
                    Some("generic") => XdpMode::Generic,
                    _ => return Err(USAGE.into()),
                }
            }
            "--netns" => enter_netns(&args.next().ok_or(USAGE)?)?,
            "-h" | "--help" => return Err(USAGE.into()),
            _ if ifname.is_none() => ifname = Some(arg),
            _ => return Err(USAGE.into()),
        }
    }
    let ifname = ifname.ok_or(USAGE)?;
    let steering = XdpSteering::attach(&ifname, mode).map_err(|e| e.to_string())?;
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
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lcmp-xdp-attach: {e}");
            ExitCode::FAILURE
        }
    }
}

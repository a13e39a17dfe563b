//! Kernel-side helpers of the forwarding benchmark, run inside a namespace
//! with `ip netns exec` (`lcmp-bench`, which `scripts/bench-forwarding.sh`
//! runs, calls the same library functions in-process):
//!
//! ```text
//! lcmp-bench-tool gen --dev IF --dst-mac MAC --src-ip A --dst-ip B
//!                     [--src-mac MAC] [--size BYTES] [--duration SECS]
//!                     [--batch N] [--threads N] [--dst-port P]
//!                     [--rate PPS]
//!     XDP live-frames UDP generator (BPF_PROG_TEST_RUN + XDP_TX out of IF);
//!     prints `frames=N seconds=S pps=R`.
//! lcmp-bench-tool xdp --dev IF (drop|pass|tx|redirect:IF2|off) [--skb]
//!     Attaches a minimal XDP program (native mode unless --skb) that stays
//!     attached after exit; `off` detaches.
//! lcmp-bench-tool latency --from NS --to NS --dst IP:PORT
//!                         [--count N] [--gap-us US] [--size BYTES]
//!     One-way UDP delay probe: a sender thread in namespace --from sends
//!     packets stamped with CLOCK_REALTIME, paced --gap-us apart, to a
//!     receiver thread in --to that takes the kernel's receive timestamp
//!     (SO_TIMESTAMPNS); prints
//!     `sent=N received=M p50_ns=X p99_ns=Y`.
//! ```

use std::net::{Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use lcmp_netlab::xdp::{self, Action};
use lcmp_netlab::{udp_send, Mac, Netns, UdpReceiver};

const AFTER_HELP: &str = "\
EXAMPLES:
  An XDP_DROP sink on s0 in namespace sink, then detach it:
    ip netns exec sink lcmp-bench-tool xdp --dev s0 drop
    ip netns exec sink lcmp-bench-tool xdp --dev s0 off
  5 s of 64-byte frames out of g0, two threads, 1 Mpps in total:
    ip netns exec gen lcmp-bench-tool gen --dev g0 --dst-mac 02:00:00:00:00:01 \\
        --src-ip 198.18.0.2 --dst-ip 198.18.1.2 --threads 2 --rate 1000000
  One-way delay from namespace gen to namespace sink, 500 probes:
    lcmp-bench-tool latency --from gen --to sink --dst 198.18.1.2:9000 --count 500

EXIT CODES:
  0  done (gen and latency print their result line)
  1  the command failed: no such device or namespace, the kernel refused
     the XDP program, a send or receive failed (the message says which)
  2  bad arguments";

const GEN_HELP: &str = "\
EXAMPLES:
  ip netns exec gen lcmp-bench-tool gen --dev g0 --dst-mac 02:00:00:00:00:01 \\
      --src-ip 198.18.0.2 --dst-ip 198.18.1.2 --size 1500 --duration 3

EXIT CODES:
  0  the frames were sent; the result line printed
  1  the device's MAC could not be read, or the kernel refused the
     generator (no such device, no XDP live frames)
  2  bad arguments";

const XDP_HELP: &str = "\
EXAMPLES:
  ip netns exec dut lcmp-bench-tool xdp --dev d0 redirect:d1
  ip netns exec dut lcmp-bench-tool xdp --dev d0 off

EXIT CODES:
  0  attached (or detached)
  1  no such device, or the kernel refused the program
  2  bad arguments";

const LATENCY_HELP: &str = "\
EXAMPLES:
  lcmp-bench-tool latency --from gen --to sink --dst 198.18.1.2:9000 --gap-us 200

EXIT CODES:
  0  the probes were sent; the result line printed
  1  no such namespace, or the receiver could not bind or a send failed
  2  bad arguments";

#[derive(Parser, Debug)]
#[command(
    name = "lcmp-bench-tool",
    version,
    about = "Kernel-side helpers of the forwarding benchmark: XDP frame generator, XDP programs, latency probe",
    long_about = "Kernel-side helpers of the forwarding benchmark (root). gen and \
    xdp act on a device of the current namespace: run them with `ip netns \
    exec`; latency enters the namespaces it is given. lcmp-bench calls the \
    same library functions in-process.",
    after_help = AFTER_HELP,
    // As the hand parser did: a repeated option replaces the earlier value
    // (clap propagates this to the subcommands).
    args_override_self = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// XDP live-frames UDP generator; prints `frames=N seconds=S pps=R`.
    #[command(
        long_about = "XDP live-frames UDP generator: BPF_PROG_TEST_RUN + XDP_TX out \
        of --dev, one UDP flow per thread (source port 10000 + thread). Prints \
        `frames=N seconds=S pps=R`.",
        after_help = GEN_HELP
    )]
    Gen(GenArgs),
    /// Attach a minimal XDP program that stays after exit (`off` detaches).
    #[command(
        long_about = "Attaches a minimal XDP program to --dev, in native mode \
        unless --skb; it stays attached after exit, and `off` detaches it.",
        after_help = XDP_HELP
    )]
    Xdp(XdpArgs),
    /// One-way UDP delay probe; prints `sent=N received=M p50_ns=X p99_ns=Y`.
    #[command(
        long_about = "One-way UDP delay probe: a sender thread in namespace --from \
        sends packets stamped with CLOCK_REALTIME, paced --gap-us apart, to a \
        receiver thread in --to that takes the kernel's receive timestamp \
        (SO_TIMESTAMPNS). A first 10 packets warm the neighbour and route \
        caches and are not counted. Prints `sent=N received=M p50_ns=X p99_ns=Y` \
        (null when nothing arrived).",
        after_help = LATENCY_HELP
    )]
    Latency(LatencyArgs),
}

#[derive(Args, Debug)]
struct GenArgs {
    /// Device to send out of.
    #[arg(long, value_name = "IF")]
    dev: String,
    /// Destination MAC of the frames.
    #[arg(long, value_name = "MAC")]
    dst_mac: Mac,
    /// Source MAC [the device's own].
    #[arg(long, value_name = "MAC")]
    src_mac: Option<Mac>,
    /// Source IPv4 address.
    #[arg(long, value_name = "A")]
    src_ip: Ipv4Addr,
    /// Destination IPv4 address.
    #[arg(long, value_name = "B")]
    dst_ip: Ipv4Addr,
    /// Ethernet frame size without FCS, 42..=1514.
    #[arg(long, value_name = "BYTES", default_value_t = 64, value_parser = frame_size)]
    size: usize,
    /// Seconds to send for (fractions allowed).
    #[arg(long, value_name = "SECS", default_value = "5", value_parser = seconds)]
    duration: Duration,
    /// Frames per BPF_PROG_TEST_RUN call.
    #[arg(long, value_name = "N", default_value_t = 64)]
    batch: u32,
    /// Sending threads, one flow each.
    #[arg(long, value_name = "N", default_value_t = 1)]
    threads: usize,
    /// UDP destination port.
    #[arg(long, value_name = "P", default_value_t = 9)]
    dst_port: u16,
    /// Total rate over all threads in frames per second; 0: unpaced.
    #[arg(long, value_name = "PPS", default_value_t = 0)]
    rate: u64,
}

#[derive(Args, Debug)]
struct XdpArgs {
    /// Device to attach to (or detach from).
    #[arg(long, value_name = "IF")]
    dev: String,
    /// drop | pass | tx | redirect:IF2 (bpf_redirect out of IF2) | off.
    #[arg(value_name = "PROGRAM", value_parser = program)]
    program: Program,
    /// Generic (skb) mode instead of native.
    #[arg(long)]
    skb: bool,
}

#[derive(Args, Debug)]
struct LatencyArgs {
    /// Namespace of the sender.
    #[arg(long, value_name = "NS")]
    from: String,
    /// Namespace of the receiver.
    #[arg(long, value_name = "NS")]
    to: String,
    /// Address the receiver binds and the sender sends to.
    #[arg(long, value_name = "IP:PORT")]
    dst: SocketAddr,
    /// Probes to send after the warm-up.
    #[arg(long, value_name = "N", default_value_t = 2000)]
    count: u64,
    /// Gap between probes in microseconds.
    #[arg(long, value_name = "US", default_value_t = 1000)]
    gap_us: u64,
    /// UDP payload bytes per probe.
    #[arg(long, value_name = "BYTES", default_value_t = 64)]
    size: usize,
}

/// What `xdp` attaches; a redirect target is resolved when attaching, in
/// the namespace the command runs in.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Program {
    Off,
    Drop,
    Pass,
    Tx,
    Redirect(String),
}

fn program(s: &str) -> Result<Program, String> {
    Ok(match s {
        "off" => Program::Off,
        "drop" => Program::Drop,
        "pass" => Program::Pass,
        "tx" => Program::Tx,
        w => match w.strip_prefix("redirect:") {
            Some(to) if !to.is_empty() => Program::Redirect(to.to_string()),
            _ => return Err("expected drop, pass, tx, redirect:IF or off".into()),
        },
    })
}

fn frame_size(s: &str) -> Result<usize, String> {
    match s.parse() {
        Ok(n @ 42..=1514) => Ok(n),
        _ => Err("expected 42..=1514 (an Ethernet frame without FCS)".into()),
    }
}

/// Seconds as a number; refuses what `Duration` cannot hold (negative,
/// NaN, too large), which would otherwise panic.
fn seconds(s: &str) -> Result<Duration, String> {
    let secs: f64 = s.parse().map_err(|_| "expected seconds, e.g. 5 or 0.5")?;
    Duration::try_from_secs_f64(secs).map_err(|e| e.to_string())
}

fn gen(a: &GenArgs) -> Result<(), String> {
    let dev = &a.dev;
    let src_mac: Mac = match a.src_mac {
        Some(m) => m,
        None => std::fs::read_to_string(format!("/sys/class/net/{dev}/address"))
            .map_err(|e| format!("MAC of {dev}: {e}"))?
            .parse()
            .map_err(|e| format!("{e}"))?,
    };
    let (dst_mac, src, dst, size, dst_port) = (a.dst_mac, a.src_ip, a.dst_ip, a.size, a.dst_port);
    let (duration, batch, threads) = (a.duration, a.batch, a.threads);
    // Total rate over all threads; 0 means unpaced.
    let per_thread = (a.rate > 0).then(|| a.rate.div_ceil(threads.max(1) as u64));
    let results: Vec<Result<xdp::GenReport, String>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let frame = xdp::udp4_frame(
                    dst_mac,
                    src_mac,
                    src,
                    dst,
                    10_000 + t as u16,
                    dst_port,
                    64,
                    size,
                );
                let dev = dev.clone();
                s.spawn(move || {
                    xdp::generate(&dev, &frame, duration, batch, per_thread)
                        .map_err(|e| e.to_string())
                })
            })
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("generator thread panicked".into()))
            })
            .collect::<Vec<_>>();
        hs
    });
    let mut frames = 0;
    let mut seconds = 0f64;
    for r in results {
        let r = r?;
        frames += r.frames;
        seconds = seconds.max(r.elapsed.as_secs_f64());
    }
    println!(
        "frames={frames} seconds={seconds:.3} pps={:.0}",
        frames as f64 / seconds.max(1e-9)
    );
    Ok(())
}

fn attach(a: &XdpArgs) -> Result<(), String> {
    let (dev, skb) = (&a.dev, a.skb);
    let action = match &a.program {
        Program::Off => return xdp::detach(dev, skb).map_err(|e| format!("detach {dev}: {e}")),
        Program::Drop => Action::Drop,
        Program::Pass => Action::Pass,
        Program::Tx => Action::Tx,
        Program::Redirect(to) => Action::Redirect(xdp::ifindex(to).map_err(|e| e.to_string())?),
    };
    xdp::attach(dev, action, skb).map_err(|e| format!("attach {action:?} to {dev}: {e}"))
}

fn latency(a: &LatencyArgs) -> Result<(), String> {
    let from = Netns::open(&a.from).map_err(|e| e.to_string())?;
    let to = Netns::open(&a.to).map_err(|e| e.to_string())?;
    let (dst, count, size) = (a.dst, a.count, a.size);
    let gap = Duration::from_micros(a.gap_us);
    let rx = UdpReceiver::start(&to, dst).map_err(|e| e.to_string())?;
    // Warm up neighbour and route caches, then measure.
    udp_send(&from, dst, 0, 10, size, gap).map_err(|e| e.to_string())?;
    std::thread::sleep(Duration::from_millis(50));
    rx.finish(Duration::from_millis(50), Duration::from_secs(2))
        .map_err(|e| e.to_string())?;
    let rx = UdpReceiver::start(&to, dst).map_err(|e| e.to_string())?;
    let sent = udp_send(&from, dst, 0, count, size, gap).map_err(|e| e.to_string())?;
    let report = rx
        .finish(Duration::from_millis(200), Duration::from_secs(10))
        .map_err(|e| e.to_string())?;
    let q = |x: f64| {
        report
            .delay_quantile_us(x)
            .map_or("null".to_string(), |us| format!("{:.0}", us * 1e3))
    };
    println!(
        "sent={} received={} p50_ns={} p99_ns={}",
        sent.sent,
        report.unique,
        q(0.5),
        q(0.99)
    );
    Ok(())
}

fn main() -> ExitCode {
    let cli: Cli = match lcmp_topology::cli::parse_or_exit("lcmp-bench-tool") {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let r = match &cli.command {
        Command::Gen(a) => gen(a),
        Command::Xdp(a) => attach(a),
        Command::Latency(a) => latency(a),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lcmp-bench-tool: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(args: &str) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("lcmp-bench-tool").chain(args.split_whitespace()))
    }

    #[test]
    fn gen_takes_every_option_and_keeps_the_defaults() {
        Cli::command().debug_assert();
        let Command::Gen(a) = parse(
            "gen --dev g0 --dst-mac 02:00:00:00:00:01 --src-ip 198.18.0.2 --dst-ip 198.18.1.2 \
             --src-mac 02:00:00:00:00:0a --size 1500 --duration 0.5 --batch 32 --threads 2 \
             --dst-port 4791 --rate 1000000",
        )
        .unwrap()
        .command
        else {
            panic!("not gen")
        };
        assert_eq!(a.dev, "g0");
        assert_eq!(a.dst_mac, Mac([2, 0, 0, 0, 0, 1]));
        assert_eq!(a.src_mac, Some(Mac([2, 0, 0, 0, 0, 0xa])));
        assert_eq!(a.src_ip, Ipv4Addr::new(198, 18, 0, 2));
        assert_eq!(a.dst_ip, Ipv4Addr::new(198, 18, 1, 2));
        assert_eq!(
            (a.size, a.batch, a.threads, a.dst_port),
            (1500, 32, 2, 4791)
        );
        assert_eq!(
            (a.duration, a.rate),
            (Duration::from_millis(500), 1_000_000)
        );

        let Command::Gen(a) =
            parse("gen --dev g0 --dst-mac 2:0:0:0:0:1 --src-ip 10.0.0.1 --dst-ip 10.0.0.2")
                .unwrap()
                .command
        else {
            panic!("not gen")
        };
        assert_eq!(a.src_mac, None);
        assert_eq!((a.size, a.batch, a.threads, a.dst_port), (64, 64, 1, 9));
        assert_eq!((a.duration, a.rate), (Duration::from_secs(5), 0));
    }

    #[test]
    fn xdp_and_latency_parse_as_documented() {
        for (args, dev, want, skb) in [
            ("xdp --dev s0 drop", "s0", Program::Drop, false),
            ("xdp --dev d0 pass --skb", "d0", Program::Pass, true),
            ("xdp --skb --dev d0 tx", "d0", Program::Tx, true),
            (
                "xdp --dev d0 redirect:d1",
                "d0",
                Program::Redirect("d1".into()),
                false,
            ),
            ("xdp --dev s0 off", "s0", Program::Off, false),
        ] {
            let Command::Xdp(a) = parse(args).unwrap().command else {
                panic!("{args}: not xdp")
            };
            assert_eq!(
                (a.dev.as_str(), a.program, a.skb),
                (dev, want, skb),
                "{args}"
            );
        }
        let Command::Latency(a) = parse(
            "latency --from gen --to sink --dst 198.18.1.2:9000 --count 500 --gap-us 200 --size 100",
        )
        .unwrap()
        .command
        else {
            panic!("not latency")
        };
        assert_eq!((a.from.as_str(), a.to.as_str()), ("gen", "sink"));
        assert_eq!(a.dst, "198.18.1.2:9000".parse::<SocketAddr>().unwrap());
        assert_eq!((a.count, a.gap_us, a.size), (500, 200, 100));
        let Command::Latency(a) = parse("latency --from a --to b --dst 10.0.0.2:9")
            .unwrap()
            .command
        else {
            panic!("not latency")
        };
        assert_eq!((a.count, a.gap_us, a.size), (2000, 1000, 64));
    }

    #[test]
    fn bad_arguments_are_refused_with_exit_2() {
        let gen = "gen --dev g0 --dst-mac 2:0:0:0:0:1 --src-ip 10.0.0.1 --dst-ip 10.0.0.2";
        for bad in [
            "",
            "frob",
            "gen --dev g0",
            &format!("{gen} --size 41"),
            &format!("{gen} --size 1515"),
            &format!("{gen} --duration -1"),
            &format!("{gen} --dst-mac 02:00"),
            "xdp --dev s0",
            "xdp --dev s0 frob",
            "xdp --dev s0 redirect:",
            "xdp --dev s0 drop pass",
            "latency --from a --to b --dst 10.0.0.2",
            "latency --from a --to b --dst 10.0.0.2:9 --nope 1",
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

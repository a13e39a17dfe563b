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

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::process::ExitCode;
use std::time::Duration;

use lcmp_netlab::xdp::{self, Action};
use lcmp_netlab::{udp_send, Mac, Netns, UdpReceiver};

fn usage() -> ExitCode {
    eprintln!(
        "usage: lcmp-bench-tool gen --dev IF --dst-mac MAC --src-ip A --dst-ip B \
         [--src-mac MAC] [--size BYTES] [--duration SECS] [--batch N] [--threads N] [--dst-port P] [--rate PPS]\n\
         \x20      lcmp-bench-tool xdp --dev IF (drop|pass|tx|redirect:IF2|off) [--skb]\n\
         \x20      lcmp-bench-tool latency --from NS --to NS --dst IP:PORT [--count N] [--gap-us US] [--size BYTES]"
    );
    ExitCode::from(2)
}

/// `--key value` pairs and bare words.
fn parse(args: &[String]) -> Result<(HashMap<String, String>, Vec<String>), String> {
    let mut opts = HashMap::new();
    let mut words = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if let Some(k) = a.strip_prefix("--") {
            if k == "skb" {
                opts.insert(k.to_string(), String::new());
                continue;
            }
            let v = it.next().ok_or_else(|| format!("--{k} needs a value"))?;
            opts.insert(k.to_string(), v.clone());
        } else {
            words.push(a.clone());
        }
    }
    Ok((opts, words))
}

fn get<T: std::str::FromStr>(
    opts: &HashMap<String, String>,
    key: &str,
    default: Option<T>,
) -> Result<T, String> {
    match opts.get(key) {
        Some(v) => v.parse().map_err(|_| format!("bad --{key} {v:?}")),
        None => default.ok_or_else(|| format!("--{key} is required")),
    }
}

fn gen(opts: &HashMap<String, String>) -> Result<(), String> {
    let dev: String = get(opts, "dev", None)?;
    let dst_mac: Mac = opts
        .get("dst-mac")
        .ok_or("--dst-mac is required")?
        .parse()
        .map_err(|e| format!("{e}"))?;
    let src_mac: Mac = match opts.get("src-mac") {
        Some(m) => m.parse().map_err(|e| format!("{e}"))?,
        None => std::fs::read_to_string(format!("/sys/class/net/{dev}/address"))
            .map_err(|e| format!("MAC of {dev}: {e}"))?
            .parse()
            .map_err(|e| format!("{e}"))?,
    };
    let src: Ipv4Addr = get(opts, "src-ip", None)?;
    let dst: Ipv4Addr = get(opts, "dst-ip", None)?;
    let size: usize = get(opts, "size", Some(64))?;
    let secs: f64 = get(opts, "duration", Some(5.0))?;
    let batch: u32 = get(opts, "batch", Some(64))?;
    let threads: usize = get(opts, "threads", Some(1))?;
    let dst_port: u16 = get(opts, "dst-port", Some(9))?;
    // Total rate over all threads; 0 means unpaced.
    let rate: u64 = get(opts, "rate", Some(0))?;
    let per_thread = (rate > 0).then(|| rate.div_ceil(threads.max(1) as u64));
    if !(42..=1514).contains(&size) {
        return Err("--size must be 42..=1514 (Ethernet frame without FCS)".into());
    }
    let duration = Duration::from_secs_f64(secs);
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

fn attach(opts: &HashMap<String, String>, words: &[String]) -> Result<(), String> {
    let dev: String = get(opts, "dev", None)?;
    let skb = opts.contains_key("skb");
    let what = words
        .first()
        .ok_or("which program? drop|pass|tx|redirect:IF|off")?;
    let action = match what.as_str() {
        "off" => return xdp::detach(&dev, skb).map_err(|e| format!("detach {dev}: {e}")),
        "drop" => Action::Drop,
        "pass" => Action::Pass,
        "tx" => Action::Tx,
        w => match w.strip_prefix("redirect:") {
            Some(to) => Action::Redirect(xdp::ifindex(to).map_err(|e| e.to_string())?),
            None => return Err(format!("unknown program {w:?}")),
        },
    };
    xdp::attach(&dev, action, skb).map_err(|e| format!("attach {action:?} to {dev}: {e}"))
}

fn latency(opts: &HashMap<String, String>) -> Result<(), String> {
    let from = Netns::open(&get::<String>(opts, "from", None)?).map_err(|e| e.to_string())?;
    let to = Netns::open(&get::<String>(opts, "to", None)?).map_err(|e| e.to_string())?;
    let dst: std::net::SocketAddr = get(opts, "dst", None)?;
    let count: u64 = get(opts, "count", Some(2000))?;
    let gap = Duration::from_micros(get(opts, "gap-us", Some(1000))?);
    let size: usize = get(opts, "size", Some(64))?;
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
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((cmd, rest)) = args.split_first() else {
        return usage();
    };
    let (opts, words) = match parse(rest) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("lcmp-bench-tool: {e}");
            return usage();
        }
    };
    let r = match cmd.as_str() {
        "gen" => gen(&opts),
        "xdp" => attach(&opts, &words),
        "latency" => latency(&opts),
        _ => return usage(),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lcmp-bench-tool: {e}");
            ExitCode::FAILURE
        }
    }
}

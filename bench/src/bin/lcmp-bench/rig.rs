//! The three-namespace rig (gen, dut, sink), the rate measurement, the
//! switch as DUT with its port's NAPI on the forwarding CPU, and the
//! latency probes.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use lcmp_netlab::xdp::{self, Action};
use lcmp_netlab::{udp_send, Bg, Error, Mac, Netns, Result, UdpReceiver};

use crate::stats::{CpuPair, CpuShare};

/// Set by SIGINT/SIGTERM; every step checks it so the guards unwind.
pub static STOP: AtomicBool = AtomicBool::new(false);

/// Err("interrupted") once a stop signal arrived.
pub fn check_stop() -> Result<()> {
    if STOP.load(Ordering::Relaxed) {
        Err(Error::new("interrupted"))
    } else {
        Ok(())
    }
}

/// Polls `cond` every 10 ms until it holds (Ok(true)), `timeout` passes
/// (Ok(false)) or a stop signal arrives.
pub fn wait_for(timeout: Duration, mut cond: impl FnMut() -> bool) -> Result<bool> {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return Ok(true);
        }
        check_stop()?;
        if Instant::now() >= deadline {
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub const GEN_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
pub const DUT_IN_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
pub const DUT_OUT_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 1);
pub const SINK_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 2);
pub const REF_GEN_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 2, 2);
pub const REF_SINK_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 2, 1);
pub const MAC_G0: Mac = Mac([0x02, 0x4c, 0xb0, 0, 0, 1]);
pub const MAC_D0: Mac = Mac([0x02, 0x4c, 0xb0, 0, 0, 2]);
pub const MAC_D1: Mac = Mac([0x02, 0x4c, 0xb0, 0, 0, 3]);
pub const MAC_S0: Mac = Mac([0x02, 0x4c, 0xb0, 0, 0, 4]);
pub const MAC_G1: Mac = Mac([0x02, 0x4c, 0xb0, 0, 0, 5]);
pub const MAC_S1: Mac = Mac([0x02, 0x4c, 0xb0, 0, 0, 6]);

/// Measurement settings shared by every case.
#[derive(Debug, Clone)]
pub struct Settings {
    pub duration: Duration,
    pub gen_cpu: usize,
    pub fwd_cpu: usize,
    pub probe_count: u64,
    pub probe_gap: Duration,
    pub switch_rx_ring: u32,
    pub threaded_napi: bool,
    /// Run the NAPI kthread SCHED_FIFO (it then preempts the busy-polling
    /// switch whenever frames arrive, as an interrupt would).
    pub napi_fifo: bool,
    pub switch_args: Vec<String>,
}

/// The namespaces and devices; everything is removed when it drops (the
/// namespaces take their veths with them).
pub struct Rig {
    pub gen: Netns,
    pub dut: Netns,
    pub sink: Netns,
    /// Device names: unique per run (the pid) so that the switch port's
    /// NAPI kthread, `napi/<dev>-<id>` in the root pid namespace, is ours.
    pub g0: String,
    pub g1: String,
    pub d0: String,
    pub d1: String,
    pub s0: String,
    pub s1: String,
    /// The one-switch topology for the switch as DUT.
    pub topology: PathBuf,
    _dir: TempDir,
}

/// A directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Result<TempDir> {
        let p = std::env::temp_dir().join(format!("lcmp-bench-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&p).map_err(|e| Error::new(format!("{}: {e}", p.display())))?;
        Ok(TempDir(p))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn veth(a: &Netns, da: &str, ma: Mac, b: &Netns, db: &str, mb: Mac) -> Result<()> {
    lcmp_netlab::netns::run(&[
        "ip",
        "link",
        "add",
        "name",
        da,
        "address",
        &ma.to_string(),
        "netns",
        a.name(),
        "type",
        "veth",
        "peer",
        "name",
        db,
        "address",
        &mb.to_string(),
        "netns",
        b.name(),
    ])?;
    for (ns, d) in [(a, da), (b, db)] {
        ns.exec(&[
            "ethtool", "-K", d, "tso", "off", "gso", "off", "gro", "off", "tx", "off",
        ])?;
        ns.ip(&["link", "set", d, "up"])?;
    }
    Ok(())
}

impl Rig {
    /// Builds the topology of the header of `main.rs`.
    pub fn new() -> Result<Rig> {
        let gen = Netns::new("bench-gen")?;
        let dut = Netns::new("bench-dut")?;
        let sink = Netns::new("bench-sink")?;
        let tag = format!("b{}", std::process::id() % 100_000);
        let dev = |s: &str| format!("{tag}{s}");
        let (g0, g1, d0, d1, s0, s1) = (
            dev("g0"),
            dev("g1"),
            dev("d0"),
            dev("d1"),
            dev("s0"),
            dev("s1"),
        );
        for ns in [&gen, &dut, &sink] {
            ns.sysctl(&[
                "net.ipv4.conf.all.rp_filter=0",
                "net.ipv4.conf.default.rp_filter=0",
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ])?;
        }
        veth(&gen, &g0, MAC_G0, &dut, &d0, MAC_D0)?;
        veth(&dut, &d1, MAC_D1, &sink, &s0, MAC_S0)?;
        veth(&gen, &g1, MAC_G1, &sink, &s1, MAC_S1)?;
        let s = |ip: Ipv4Addr| ip.to_string();
        let pfx = |ip: Ipv4Addr| format!("{ip}/24");
        gen.ip(&["addr", "add", &pfx(GEN_IP), "dev", &g0])?;
        gen.ip(&["addr", "add", &pfx(REF_GEN_IP), "dev", &g1])?;
        gen.ip(&[
            "route",
            "add",
            "198.18.1.0/24",
            "via",
            &s(DUT_IN_IP),
            "dev",
            &g0,
        ])?;
        gen.ip(&[
            "neigh",
            "replace",
            &s(DUT_IN_IP),
            "lladdr",
            &MAC_D0.to_string(),
            "dev",
            &g0,
            "nud",
            "permanent",
        ])?;
        gen.ip(&[
            "neigh",
            "replace",
            &s(REF_SINK_IP),
            "lladdr",
            &MAC_S1.to_string(),
            "dev",
            &g1,
            "nud",
            "permanent",
        ])?;
        dut.ip(&["addr", "add", &pfx(DUT_IN_IP), "dev", &d0])?;
        dut.ip(&["addr", "add", &pfx(DUT_OUT_IP), "dev", &d1])?;
        dut.ip(&[
            "neigh",
            "replace",
            &s(GEN_IP),
            "lladdr",
            &MAC_G0.to_string(),
            "dev",
            &d0,
            "nud",
            "permanent",
        ])?;
        dut.ip(&[
            "neigh",
            "replace",
            &s(SINK_IP),
            "lladdr",
            &MAC_S0.to_string(),
            "dev",
            &d1,
            "nud",
            "permanent",
        ])?;
        sink.ip(&["addr", "add", &pfx(SINK_IP), "dev", &s0])?;
        sink.ip(&["addr", "add", &pfx(REF_SINK_IP), "dev", &s1])?;
        sink.ip(&[
            "route",
            "add",
            "198.18.0.0/24",
            "via",
            &s(DUT_OUT_IP),
            "dev",
            &s0,
        ])?;
        sink.ip(&[
            "neigh",
            "replace",
            &s(DUT_OUT_IP),
            "lladdr",
            &MAC_D1.to_string(),
            "dev",
            &s0,
            "nud",
            "permanent",
        ])?;
        sink.ip(&[
            "neigh",
            "replace",
            &s(REF_GEN_IP),
            "lladdr",
            &MAC_G1.to_string(),
            "dev",
            &s1,
            "nud",
            "permanent",
        ])?;
        let dir = TempDir::new("rig")?;
        let topology = dir.0.join("bench-topology.toml");
        std::fs::write(
            &topology,
            format!(
                "# lcmp-bench: one switch between a traffic source and a sink.\n\
                 [[switch]]\nname = \"dut\"\nprefixes = [\"198.18.0.0/24\", \"198.18.1.0/24\"]\n\n\
                 [[host]]\nname = \"gen\"\nswitch = \"dut\"\naddresses = [\"{GEN_IP}/24\"]\n\
                 rate = \"100Gbps\"\ndelay = \"0us\"\nifname = \"{g0}\"\nswitch_ifname = \"{d0}\"\n\n\
                 [[host]]\nname = \"sink\"\nswitch = \"dut\"\naddresses = [\"{SINK_IP}/24\"]\n\
                 rate = \"100Gbps\"\ndelay = \"0us\"\nifname = \"{s0}\"\nswitch_ifname = \"{d1}\"\n"
            ),
        )
        .map_err(|e| Error::new(format!("{}: {e}", topology.display())))?;
        Ok(Rig {
            gen,
            dut,
            sink,
            g0,
            g1,
            d0,
            d1,
            s0,
            s1,
            topology,
            _dir: dir,
        })
    }

    /// Attaches (Some) or detaches (None) a minimal XDP program on `dev`
    /// inside `ns`; `Redirect` takes the target device's name.
    pub fn xdp(&self, ns: &Netns, dev: &str, prog: Option<Prog<'_>>) -> Result<()> {
        let r = ns.run_in(|| -> std::io::Result<()> {
            match prog {
                None => xdp::detach(dev, false),
                Some(Prog::Drop) => xdp::attach(dev, Action::Drop, false),
                Some(Prog::Pass) => xdp::attach(dev, Action::Pass, false),
                Some(Prog::Redirect(to)) => {
                    xdp::attach(dev, Action::Redirect(xdp::ifindex(to)?), false)
                }
            }
        })?;
        r.map_err(|e| Error::new(format!("XDP {prog:?} on {dev} in {}: {e}", ns.name())))
    }

    /// The DUT's RPS mask on d0 (0: off).
    pub fn rps(&self, mask: u64) -> Result<()> {
        let path = format!("/sys/class/net/{}/queues/rx-0/rps_cpus", self.d0);
        // sysfs shows the namespace of the process that mounted it: write
        // through `ip netns exec`, which mounts the DUT's.
        self.dut
            .exec(&["sh", "-c", &format!("echo {mask:x} > {path}")])
            .map(drop)
    }

    /// d0's receive back in the sender's softirq (veth's default); call
    /// with an XDP program on d0. A switch trial's threaded NAPI outlives
    /// the switch (the flag stays on the device and the next NAPI, e.g.
    /// the kernel's XDP_PASS one, is threaded): every later kernel trial
    /// had d0's receive in a kthread on the forwarding CPU, as system time
    /// and not the method, and veth dropped at d0's ring while that core
    /// idled. The flag can only be cleared while d0 has a NAPI (EIO
    /// otherwise), and is written only when set.
    pub fn napi_inline(&self) -> Result<()> {
        let f = format!("/sys/class/net/{}/threaded", self.d0);
        self.dut
            .exec(&[
                "sh",
                "-c",
                &format!("[ \"$(cat {f})\" = 0 ] || echo 0 > {f}"),
            ])
            .map(drop)
            .map_err(|e| Error::new(format!("NAPI of {} back inline: {e}", self.d0)))
    }

    /// The DUT back to plain (no XDP on d0, no RPS, no forwarding).
    pub fn dut_plain(&self) -> Result<()> {
        self.xdp(&self.dut, &self.d0, None)?;
        self.rps(0)?;
        self.dut.sysctl(&["net.ipv4.ip_forward=0"])
    }

    /// Kernel forwarding with RPS to the forwarding CPU (`rps`) or inline.
    pub fn dut_kernel(&self, s: &Settings, rps: bool) -> Result<()> {
        self.dut.sysctl(&["net.ipv4.ip_forward=1"])?;
        // XDP_PASS only to turn on veth NAPI (else RPS never sees a packet
        // off the generator's XDP_TX path).
        self.xdp(&self.dut, &self.d0, Some(Prog::Pass))?;
        self.napi_inline()?;
        self.rps(if rps { 1 << s.fwd_cpu } else { 0 })
    }
}

/// The programs the rig attaches.
#[derive(Debug, Clone, Copy)]
pub enum Prog<'a> {
    Drop,
    Pass,
    Redirect(&'a str),
}

/// Sum of the `ethtool -S` counters of `dev` in `ns` named
/// `<prefix><queue number><suffix>`.
fn counter(ns: &Netns, dev: &str, prefix: &str, suffix: &str) -> Result<u64> {
    Ok(ns
        .ethtool_stats(dev)?
        .iter()
        .filter(|(k, _)| {
            k.strip_prefix(prefix)
                .and_then(|r| r.strip_suffix(suffix))
                .is_some_and(|q| !q.is_empty() && q.bytes().all(|b| b.is_ascii_digit()))
        })
        .map(|(_, v)| v)
        .sum())
}

/// Packets dropped at the kernel's per-CPU backlogs, all CPUs.
fn backlog_drops() -> Result<u64> {
    let t = std::fs::read_to_string("/proc/net/softnet_stat")?;
    Ok(t.lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .filter_map(|h| u64::from_str_radix(h, 16).ok())
        .sum())
}

/// Jiffies of one CPU from /proc/stat: (user+nice, system, irq+softirq,
/// idle+iowait, total).
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuTimes {
    user: u64,
    system: u64,
    softirq: u64,
    idle: u64,
    total: u64,
}

pub fn cpu_times(cpu: usize) -> Result<CpuTimes> {
    let t = std::fs::read_to_string("/proc/stat")?;
    let want = format!("cpu{cpu}");
    let line = t
        .lines()
        .find(|l| l.split_whitespace().next() == Some(want.as_str()))
        .ok_or_else(|| Error::new(format!("/proc/stat has no {want}")))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let g = |i: usize| v.get(i).copied().unwrap_or(0);
    // user nice system idle iowait irq softirq steal
    Ok(CpuTimes {
        user: g(0) + g(1),
        system: g(2),
        softirq: g(5) + g(6),
        idle: g(3) + g(4),
        total: (0..8).map(g).sum(),
    })
}

fn share(a: CpuTimes, b: CpuTimes) -> CpuShare {
    let t = (b.total - a.total).max(1) as f64;
    let p = |x: u64, y: u64| crate::stats::round(100.0 * (y - x) as f64 / t, 1);
    CpuShare {
        user_pct: p(a.user, b.user),
        system_pct: p(a.system, b.system),
        softirq_pct: p(a.softirq, b.softirq),
        idle_pct: p(a.idle, b.idle),
    }
}

/// One rate trial.
#[derive(Debug, Clone, Copy)]
pub struct Rate {
    pub pps: f64,
    pub offered_pps: f64,
    /// The source offered more than 2 % above what was forwarded: the
    /// forwarder, not the source, set the rate.
    pub forwarder_bound: bool,
    pub cpu: CpuPair,
}

/// Which path a rate trial takes.
pub enum Path2 {
    /// g1 -> s1, no DUT.
    Direct,
    /// g0 -> DUT -> s0.
    Dut,
}

/// Runs the generator unpaced for the duration on the generator CPU and
/// counts at the sink; logs one line (and a WARNING if source-bound unless
/// `inline`, where offered equals forwarded by construction).
pub fn measure_rate(
    rig: &Rig,
    s: &Settings,
    label: &str,
    size: usize,
    path: Path2,
    inline: bool,
) -> Result<Rate> {
    check_stop()?;
    let (gdev, sdev, dmac, smac, src, dst) = match path {
        Path2::Direct => (&rig.g1, &rig.s1, MAC_S1, MAC_G1, REF_GEN_IP, REF_SINK_IP),
        Path2::Dut => (&rig.g0, &rig.s0, MAC_D0, MAC_G0, GEN_IP, SINK_IP),
    };
    let rx = || counter(&rig.sink, sdev, "rx_queue_", "_xdp_packets");
    let c0 = rx()?;
    let e0 = counter(&rig.gen, gdev, "tx_queue_", "_xdp_xmit_errors")?;
    let b0 = backlog_drops()?;
    let (ga, fa) = (cpu_times(s.gen_cpu)?, cpu_times(s.fwd_cpu)?);
    let frame = xdp::udp4_frame(dmac, smac, src, dst, 10_000, 9, 64, size);
    let (dev, duration, cpu) = (gdev.clone(), s.duration, s.gen_cpu);
    let report = rig
        .gen
        .spawn_thread(move || -> std::io::Result<xdp::GenReport> {
            pin(0, cpu)?;
            xdp::generate(&dev, &frame, duration, 64, None)
        })
        .join()
        .map_err(|_| Error::new("generator thread panicked"))??
        .map_err(|e| Error::new(format!("generator on {gdev}: {e}")))?;
    let (gb, fb) = (cpu_times(s.gen_cpu)?, cpu_times(s.fwd_cpu)?);
    // Frames still in rings and queues drain within milliseconds: wait until
    // the sink's count stops moving.
    let mut last = rx()?;
    let mut still_since = Instant::now();
    wait_for(Duration::from_secs(2), || {
        let now = rx().unwrap_or(last);
        if now != last {
            last = now;
            still_since = Instant::now();
        }
        still_since.elapsed() >= Duration::from_millis(100)
    })?;
    let c1 = last;
    let e1 = counter(&rig.gen, gdev, "tx_queue_", "_xdp_xmit_errors")?;
    let b1 = backlog_drops()?;
    let secs = report.elapsed.as_secs_f64().max(1e-9);
    let pps = ((c1 - c0) as f64 / secs).round();
    let offered = (report.frames as f64 / secs).round();
    let forwarder_bound = offered > pps * 1.02;
    let cpu = CpuPair {
        generator_cpu: share(ga, gb),
        forwarding_cpu: share(fa, fb),
    };
    log(&format!(
        "{label:<14} size {size:>4}: forwarded {pps:>9} pps, offered {offered:>9} pps; drops: DUT veth ring {}, backlog {}; \
         busy% gen cpu (sys/softirq) {:.0}/{:.0}, fwd cpu {:.0}/{:.0} (idle {:.0})",
        e1 - e0,
        b1.saturating_sub(b0),
        cpu.generator_cpu.system_pct,
        cpu.generator_cpu.softirq_pct,
        cpu.forwarding_cpu.system_pct + cpu.forwarding_cpu.user_pct,
        cpu.forwarding_cpu.softirq_pct,
        cpu.forwarding_cpu.idle_pct,
    ));
    if !forwarder_bound && !inline {
        log(&format!(
            "WARNING: {label} {size} B: the source offered no more than was forwarded; {pps} pps is a lower bound of the forwarder's rate"
        ));
    }
    Ok(Rate {
        pps,
        offered_pps: offered,
        forwarder_bound,
        cpu,
    })
}

/// Pins thread (or process) `tid` (0: the caller) to `cpu`.
pub fn pin(tid: i32, cpu: usize) -> std::io::Result<()> {
    // SAFETY: cpu_set_t is plain data for which all-zero is the empty set;
    // CPU_SET writes inside it (cpu is checked against its size), and
    // sched_setaffinity only reads `set` for the size given.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
            return Err(std::io::Error::other(format!("CPU {cpu} out of range")));
        }
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// `lcmp-switch` as the DUT: pinned to the forwarding CPU, stopped (SIGINT,
/// which detaches its XDP programs) when dropped.
pub struct Switch {
    bg: Option<Bg>,
    /// pids of the NAPI kthreads moved to the forwarding CPU.
    pub napi_threads: Vec<i32>,
    /// Their CPU seconds when the switch was ready.
    napi_cpu_s0: f64,
    /// The switch's own CPU seconds then.
    cpu_s0: f64,
}

impl Switch {
    /// Starts the switch (`poll`: busy or event) and waits until it logs
    /// that it is forwarding; with `s.threaded_napi` then moves d0's
    /// receive to a NAPI kthread pinned to the forwarding CPU.
    pub fn start(
        rig: &Rig,
        s: &Settings,
        bin: &Path,
        poll: &str,
        stats_file: bool,
        dir: &Path,
    ) -> Result<Switch> {
        check_stop()?;
        let stats = dir.join("switch-stats.json");
        let fwd = s.fwd_cpu.to_string();
        let rx_ring = s.switch_rx_ring.to_string();
        let frames = (u64::from(s.switch_rx_ring) * 4).to_string();
        let (pm0, pm1) = (
            format!("{}={MAC_G0}", rig.d0),
            format!("{}={MAC_S0}", rig.d1),
        );
        let bin_s = bin.to_string_lossy();
        let topo = rig.topology.to_string_lossy();
        let stats_s = stats.to_string_lossy();
        let mut args: Vec<&str> = vec![
            "taskset",
            "-c",
            &fwd,
            &bin_s,
            "lcmp",
            "--topology",
            &topo,
            "--switch",
            "dut",
            "--port",
            &rig.d0,
            "--port",
            &rig.d1,
            "--peer-mac",
            &pm0,
            "--peer-mac",
            &pm1,
            "--no-emulation",
            "--poll",
            poll,
            "--rx-ring-size",
            &rx_ring,
            "--frames",
            &frames,
        ];
        if stats_file {
            args.extend(["--stats-file", &stats_s]);
        }
        args.extend(s.switch_args.iter().map(String::as_str));
        let bg = rig.dut.spawn(&args)?;
        let mut sw = Switch {
            bg: Some(bg),
            napi_threads: Vec::new(),
            napi_cpu_s0: 0.0,
            cpu_s0: 0.0,
        };
        let bgr = sw.bg.as_mut().expect("just set");
        let ready = wait_for(Duration::from_secs(20), || {
            bgr.log().contains("forwarding") || bgr.exited().is_some()
        })?;
        if !ready || bgr.exited().is_some() {
            let log = sw.bg.take().map(Bg::stop).unwrap_or_default();
            let last = log
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("(no output)");
            return Err(Error::new(format!("lcmp-switch did not start: {last}")));
        }
        if s.threaded_napi {
            sw.napi_threads = threaded_napi(rig, &rig.d0, s.fwd_cpu, s.napi_fifo)?;
        }
        sw.napi_cpu_s0 = sw.napi_cpu_s();
        sw.cpu_s0 = cpu_seconds(sw.pid()).unwrap_or(0.0);
        Ok(sw)
    }

    pub fn pid(&self) -> u32 {
        self.bg.as_ref().map_or(0, Bg::pid)
    }

    /// Stops it and logs its final stats line (drops by reason).
    pub fn stop(mut self) {
        self.shutdown();
    }

    /// CPU seconds of the NAPI kthreads so far.
    fn napi_cpu_s(&self) -> f64 {
        let pids = self.napi_threads.iter();
        pids.filter_map(|&p| cpu_seconds(p as u32).ok()).sum()
    }

    fn shutdown(&mut self) {
        let Some(bg) = self.bg.as_ref() else { return };
        // Where the port's receive ran: the kthreads' and the switch's CPU
        // time over its life (the trial), before it exits.
        let cpu = cpu_seconds(bg.pid()).unwrap_or(0.0) - self.cpu_s0;
        let napi = (!self.napi_threads.is_empty()).then(|| self.napi_cpu_s() - self.napi_cpu_s0);
        let Some(mut bg) = self.bg.take() else { return };
        bg.signal(libc::SIGINT);
        bg.wait_timeout(Duration::from_secs(5));
        let log = bg.stop();
        let last = log.lines().rev().find(|l| l.starts_with('{'));
        let v: serde_json::Value = last
            .and_then(|l| serde_json::from_str(l).ok())
            .unwrap_or_default();
        let napi = napi.map_or("inline".to_string(), |t| {
            format!(
                "kthreads {:?} on the forwarding CPU {t:.2} s",
                self.napi_threads
            )
        });
        log_line(&format!(
            "    switch: rx {} tx {} frames, drops {} (rx ring full {}), CPU {cpu:.2} s; port NAPI {napi}",
            v["counters"]["rx_frames"],
            v["counters"]["tx_frames"],
            v["drops_total"],
            v["ports"][0]["xsk"]["rx_ring_full"],
        ));
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Puts `dev`'s NAPI in a kthread (`/sys/class/net/<dev>/threaded` = 1)
/// and pins every `napi/<dev>-<id>` kthread to `cpu`: the receive path of
/// the port (the XDP program and the copy into the AF_XDP ring) then runs
/// on the forwarding core instead of in the sender's softirq. Returns the
/// kthreads' pids; fails if none appears.
pub fn threaded_napi(rig: &Rig, dev: &str, cpu: usize, fifo: bool) -> Result<Vec<i32>> {
    rig.dut
        .exec(&[
            "sh",
            "-c",
            &format!("echo 1 > /sys/class/net/{dev}/threaded"),
        ])
        .map_err(|e| Error::new(format!("threaded NAPI on {dev}: {e}")))?;
    // The kernel names the thread napi/<dev>-<napi id>, cut to 15 bytes.
    let want: String = format!("napi/{dev}-").chars().take(15).collect();
    let mut pids = Vec::new();
    wait_for(Duration::from_secs(5), || {
        pids = kthreads_named(&want);
        !pids.is_empty()
    })?;
    if pids.is_empty() {
        return Err(Error::new(format!(
            "threaded NAPI on {dev}: no {want}* kthread appeared"
        )));
    }
    for &p in &pids {
        pin(p, cpu).map_err(|e| Error::new(format!("pin NAPI kthread {p} to CPU {cpu}: {e}")))?;
        if fifo {
            let prm = libc::sched_param { sched_priority: 1 };
            // SAFETY: sched_setscheduler reads `prm` for the call only.
            if unsafe { libc::sched_setscheduler(p, libc::SCHED_FIFO, &prm) } != 0 {
                let e = std::io::Error::last_os_error();
                return Err(Error::new(format!("SCHED_FIFO for NAPI kthread {p}: {e}")));
            }
        }
    }
    Ok(pids)
}

fn kthreads_named(prefix: &str) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm"))
                .is_ok_and(|c| c.trim_end().starts_with(prefix))
        })
        .collect()
}

/// utime + stime of a process or thread, seconds.
pub fn cpu_seconds(pid: u32) -> Result<f64> {
    let st = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let rest = st.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let g = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    // Fields after the command: state is 0, utime 11, stime 12.
    Ok((g(11) + g(12)) as f64 / hz)
}

/// One-way UDP delay quantiles gen -> `dst` (ns): p50, p99, received.
fn probe(rig: &Rig, s: &Settings, dst: Ipv4Addr) -> Result<(Option<f64>, Option<f64>, u64)> {
    let dst = SocketAddr::from((dst, 7777));
    // Warm up neighbour and route caches, then measure.
    let rx = UdpReceiver::start(&rig.sink, dst)?;
    udp_send(&rig.gen, dst, 0, 10, 64, s.probe_gap)?;
    rx.finish(Duration::from_millis(50), Duration::from_secs(2))?;
    check_stop()?;
    let rx = UdpReceiver::start(&rig.sink, dst)?;
    udp_send(&rig.gen, dst, 0, s.probe_count, 64, s.probe_gap)?;
    let r = rx.finish(Duration::from_millis(200), Duration::from_secs(10))?;
    let q = |x: f64| r.delay_quantile_us(x).map(|us| us * 1e3);
    Ok((q(0.5), q(0.99), r.unique))
}

/// Added one-way latency (p50, p99, us) of the path through the DUT
/// against the direct pair; None if more than 5 % of the probes were lost.
pub fn measure_latency(rig: &Rig, s: &Settings, label: &str) -> Result<(Option<f64>, Option<f64>)> {
    let (d50, d99, dn) = probe(rig, s, REF_SINK_IP)?;
    let (p50, p99, n) = probe(rig, s, SINK_IP)?;
    let (Some(d50), Some(d99), Some(p50), Some(p99)) = (d50, d99, p50, p99) else {
        log(&format!("WARNING: {label} latency: no delay quantiles (direct {dn}, via DUT {n} probes arrived)"));
        return Ok((None, None));
    };
    if n < s.probe_count * 95 / 100 {
        log(&format!(
            "WARNING: {label} latency: only {n} of {} probes through the DUT arrived",
            s.probe_count
        ));
        return Ok((None, None));
    }
    let a50 = crate::stats::round((p50 - d50) / 1e3, 2);
    let a99 = crate::stats::round((p99 - d99) / 1e3, 2);
    log(&format!(
        "{label:<14} one-way delay p50/p99 ns: direct {d50:.0}/{d99:.0} ({dn}), via DUT {p50:.0}/{p99:.0} ({n}) -> added p50 {a50} us, p99 {a99} us"
    ));
    Ok((Some(a50), Some(a99)))
}

pub fn log(msg: &str) {
    eprintln!("[bench] {msg}");
}

fn log_line(msg: &str) {
    eprintln!("{msg}");
}

//! Cases on `lcmp-testbed` testbeds: the 5-hop chain's CPU cost per
//! forwarded Gbit and the dense 2dc-3path figures, a switch process per
//! switch against one process; and the idle cost of one switch.

use std::path::{Path, PathBuf};
use std::time::Duration;

use lcmp_netlab::traffic::{parse_iperf3, IperfResult};
use lcmp_netlab::{Bg, Error, Result};
use serde_json::Value;

use crate::rig::{check_stop, cpu_seconds, log, wait_for, Rig, Settings, Switch};
use crate::stats::round;

/// `lcmp-testbed` and the testbed's name; `down` on drop, so a failed or
/// interrupted case leaves nothing behind.
pub struct Testbed<'a> {
    bin: &'a Path,
    name: String,
    up: bool,
}

impl<'a> Testbed<'a> {
    pub fn new(bin: &'a Path) -> Testbed<'a> {
        // Testbed names are 1-16 of [a-z0-9_].
        Testbed {
            bin,
            name: format!("lcmpb{}", std::process::id() % 100_000),
            up: false,
        }
    }

    fn dir(&self) -> PathBuf {
        Path::new("/run/lcmp-testbed").join(&self.name)
    }

    fn up(&mut self, topology: &Path, args: &[&str]) -> Result<()> {
        check_stop()?;
        let bin = self.bin.to_string_lossy();
        let topo = topology.to_string_lossy();
        let mut v = vec![
            &*bin,
            "up",
            "--name",
            &self.name,
            "--topology",
            &topo,
            "--no-agent",
        ];
        v.extend_from_slice(args);
        // `down` even if `up` failed half way.
        self.up = true;
        lcmp_netlab::netns::run_output(&v, Duration::from_secs(300))?
            .ok()
            .map_err(|e| {
                Error::new(format!(
                    "lcmp-testbed up: {}",
                    e.to_string().lines().last().unwrap_or("")
                ))
            })?;
        Ok(())
    }

    fn exec_args<'b>(&'b self, bin: &'b str, host: &'b str, cmd: &[&'b str]) -> Vec<&'b str> {
        let mut v = vec![bin, "exec", "--name", &self.name, host, "--"];
        v.extend_from_slice(cmd);
        v
    }

    fn down(&mut self) {
        if std::mem::take(&mut self.up) {
            let bin = self.bin.to_string_lossy();
            let _ = lcmp_netlab::netns::run_output(
                &[&bin, "down", "--name", &self.name],
                Duration::from_secs(120),
            );
        }
    }

    /// The switches' summed counters and their processes' CPU seconds.
    fn sample(&self) -> Result<Sample> {
        let st = read_json(&self.dir().join("state.json"))?;
        let procs = st["procs"]
            .as_array()
            .ok_or_else(|| Error::new("state.json: no procs"))?;
        let mut s = Sample::default();
        let mut pids = Vec::new();
        for p in procs {
            let path = p["stats"]
                .as_str()
                .ok_or_else(|| Error::new("state.json: proc without stats"))?;
            let j = read_json(Path::new(path))?;
            let n = |v: &Value| v.as_u64().unwrap_or(0);
            s.tx_bytes += n(&j["counters"]["tx_bytes"]);
            s.tx_ring_full += n(&j["drops"]["tx_ring_full"]);
            s.queue_full += n(&j["drops"]["queue_full"]);
            // p1..p3 have links of one rate in and out: a real network
            // drops nothing there.
            if p["name"].as_str().is_some_and(|n| n.starts_with('p')) {
                s.transit_drops += n(&j["drops_total"]);
                s.transit_ce += n(&j["counters"]["ce_marked"]);
            }
            let pid = p["pid"].as_u64().unwrap_or(0) as u32;
            if pid != 0 && !pids.contains(&pid) {
                pids.push(pid);
            }
        }
        for pid in pids {
            s.cpu_s += cpu_seconds(pid)?;
        }
        Ok(s)
    }

    /// Every switch process's nonzero drop counters and the ports' link
    /// state, one line, for a run that forwarded nothing.
    fn drops_line(&self) -> String {
        let Ok(st) = read_json(&self.dir().join("state.json")) else {
            return "no state.json".into();
        };
        let mut parts = Vec::new();
        for p in st["procs"].as_array().into_iter().flatten() {
            let Some(j) = p["stats"]
                .as_str()
                .and_then(|f| read_json(Path::new(f)).ok())
            else {
                continue;
            };
            let name = p["name"].as_str().unwrap_or("?");
            for (k, v) in j["drops"].as_object().into_iter().flatten() {
                if v.as_u64().unwrap_or(0) > 0 {
                    parts.push(format!("{name} {k} {v}"));
                }
            }
            for (k, v) in j["counters"].as_object().into_iter().flatten() {
                if k.starts_with("rx_") || k.starts_with("tx_") {
                    parts.push(format!("{name} {k} {v}"));
                }
            }
        }
        parts.join(", ")
    }

    /// Waits until switch `sw` rewrites its stats file (every 200 ms), so
    /// counters read afterwards include the end of the transfer.
    fn wait_stats_rewrite(&self, sw: &str) -> Result<()> {
        let f = self.dir().join(format!("{sw}.stats.json"));
        let stamp = || std::fs::metadata(&f).ok().and_then(|m| m.modified().ok());
        let m0 = stamp();
        wait_for(Duration::from_secs(5), || stamp() != m0)?;
        Ok(())
    }

    /// iperf3 from a to b (10.0.2.2); the server is up once a client
    /// connects, so the client retries until then. Returns the client's
    /// result and the sample taken just before the successful attempt.
    /// Success is judged from the JSON, never the exit status: iperf3 3.12
    /// with -J exits 0 on "Connection refused", which once read as a
    /// transfer that moved nothing (the "memory-link stall" of issue 29).
    fn iperf(&self, client: &[&str]) -> Result<(IperfResult, Sample)> {
        let bin = self.bin.to_string_lossy();
        let _server = Bg::start(
            &self.exec_args(&bin, "b", &["iperf3", "-s", "-1"]),
            "iperf3-b",
        )?;
        let mut last_err = String::new();
        for _ in 0..50 {
            check_stop()?;
            let before = self.sample()?;
            let mut cmd = vec!["iperf3", "-c", "10.0.2.2", "-J"];
            cmd.extend_from_slice(client);
            let out = lcmp_netlab::netns::run_output(
                &self.exec_args(&bin, "a", &cmd),
                Duration::from_secs(120),
            )?;
            match parse_iperf3(&out.stdout, &out.stderr) {
                Ok(r) => return Ok((r, before)),
                Err(e) => last_err = e.to_string(),
            }
            // Condition: the server's socket; a short back-off between tries.
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(Error::new(format!(
            "iperf3 a -> b never completed: {last_err}"
        )))
    }
}

impl Drop for Testbed<'_> {
    fn drop(&mut self) {
        self.down();
    }
}

fn read_json(p: &Path) -> Result<Value> {
    let t = std::fs::read_to_string(p).map_err(|e| Error::new(format!("{}: {e}", p.display())))?;
    serde_json::from_str(&t).map_err(|e| Error::new(format!("{}: {e}", p.display())))
}

#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    tx_bytes: u64,
    tx_ring_full: u64,
    queue_full: u64,
    transit_drops: u64,
    transit_ce: u64,
    cpu_s: f64,
}

/// The 5-switch chain (hosts a - c1 - ... - c5 - b, 1 Gbit/s links).
fn chain_topology(dir: &Path) -> Result<PathBuf> {
    let mut t = String::from(
        "[[dc]]\nname = \"DC1\"\n\n[[dc]]\nname = \"DC2\"\n\n\
         [[switch]]\nname = \"c1\"\ndc = \"DC1\"\nprefixes = [\"10.0.1.0/24\"]\n\n",
    );
    for i in 2..=4 {
        t += &format!("[[switch]]\nname = \"c{i}\"\n\n");
    }
    t += "[[switch]]\nname = \"c5\"\ndc = \"DC2\"\nprefixes = [\"10.0.2.0/24\"]\n\n";
    for (h, sw, a) in [("a", "c1", "10.0.1.2/24"), ("b", "c5", "10.0.2.2/24")] {
        t += &format!(
            "[[host]]\nname = \"{h}\"\nswitch = \"{sw}\"\naddresses = [\"{a}\"]\n\
             rate = \"10Gbps\"\ndelay = \"10us\"\nbuffer = \"1MB\"\n\n"
        );
    }
    for i in 1..=4 {
        t += &format!(
            "[[link]]\na = \"c{i}\"\nb = \"c{}\"\nrate = \"1Gbps\"\ndelay = \"5ms\"\nbuffer = \"500KB\"\n\n",
            i + 1
        );
    }
    let f = dir.join("chain.toml");
    std::fs::write(&f, t).map_err(|e| Error::new(format!("{}: {e}", f.display())))?;
    Ok(f)
}

/// How a testbed's switches run and are linked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A process per switch, veth links.
    Processes,
    /// One process, veth links between its switches.
    OneProcess,
    /// One process, memory links (descriptors move).
    MemoryLinks,
    /// One process, memory links that copy each frame.
    MemoryLinksCopy,
}

impl Mode {
    /// The suffix of its figures' names.
    pub fn suffix(self) -> &'static str {
        match self {
            Mode::Processes => "processes",
            Mode::OneProcess => "one_process",
            Mode::MemoryLinks => "memory_links",
            Mode::MemoryLinksCopy => "memory_links_copy",
        }
    }

    /// Its `lcmp-testbed up` arguments.
    fn args(self) -> Vec<&'static str> {
        match self {
            Mode::Processes => vec!["--switch-processes", "per-switch", "--links", "veth"],
            Mode::OneProcess => vec!["--switch-processes", "one", "--links", "veth"],
            Mode::MemoryLinks => vec!["--switch-processes", "one", "--links", "memory"],
            Mode::MemoryLinksCopy => vec![
                "--switch-processes",
                "one",
                "--links",
                "memory",
                "--switch-arg=--memory-link-transfer=copy",
            ],
        }
    }
}

/// The runs of each mode, in the order of the modes given; None for a run
/// that forwarded nothing.
pub type Alternating<T> = Vec<Vec<Option<T>>>;

/// Testbed settings.
pub struct TbSettings {
    pub chain_duration: u64,
    pub dense_duration: u64,
    pub runs: usize,
    pub dense_rate: Option<String>,
    pub switch_args: Vec<String>,
}

fn switch_arg_flags(s: &TbSettings) -> Vec<String> {
    s.switch_args
        .iter()
        .map(|a| format!("--switch-arg={a}"))
        .collect()
}

/// CPU seconds per forwarded Gbit of the chain with the switches run as
/// `mode` says.
fn chain_case(bin: &Path, s: &TbSettings, dir: &Path, mode: Mode) -> Result<Option<f64>> {
    let topo = chain_topology(dir)?;
    let mut tb = Testbed::new(bin);
    let extra = switch_arg_flags(s);
    let how = mode.suffix();
    let mut args = mode.args();
    args.push("--switch-arg=--no-emulation");
    if mode != Mode::Processes {
        // The load fits one core: one event loop.
        args.push("--switch-arg=--loops=1");
    }
    args.extend(extra.iter().map(String::as_str));
    tb.up(&topo, &args)?;
    let t = s.chain_duration.to_string();
    let (iperf, before) = tb.iperf(&["-P", "4", "-b", "100M", "-t", &t])?;
    // CPU now; counters after the next stats rewrite.
    let cpu_end = tb.sample()?.cpu_s;
    tb.wait_stats_rewrite("c1")?;
    let after = tb.sample()?;
    let gbit = (after.tx_bytes.saturating_sub(before.tx_bytes)) as f64 * 8.0 / 1e9;
    // Under a megabit: the transfer did not run (e.g. a starved client).
    let stalled = (gbit < 1e-3).then(|| tb.drops_line());
    tb.down();
    let goodput = iperf.bits_per_second;
    if let Some(counters) = stalled {
        log(&format!(
            "WARNING: 5-hop chain, {how}: nothing forwarded (switch tx bytes {} before, {} after; iperf3 goodput {:.0} Mbit/s; {counters})",
            before.tx_bytes,
            after.tx_bytes,
            goodput / 1e6,
        ));
        return Ok(None);
    }
    let cpu = cpu_end - before.cpu_s;
    log(&format!(
        "5-hop chain, {how}: {gbit:.2} Gbit forwarded (all hops), {cpu:.2} CPU s, iperf3 goodput {:.0} Mbit/s",
        goodput / 1e6
    ));
    Ok(Some(round(cpu / gbit, 4)))
}

/// Chain runs of each of `modes`, alternating (one of each per round).
pub fn chain_cases(
    bin: &Path,
    s: &TbSettings,
    dir: &Path,
    modes: &[Mode],
) -> Result<Alternating<f64>> {
    let mut runs = vec![Vec::new(); modes.len()];
    for _ in 0..s.runs {
        for (m, r) in modes.iter().zip(&mut runs) {
            r.push(chain_case(bin, s, dir, *m)?);
        }
    }
    Ok(runs)
}

/// The dense figures of one run, in the order of [`DENSE_KEYS`].
pub type Dense = [f64; 6];

/// Figure names of the dense testbed (suffixed _2dc_processes and
/// _2dc_one_process in the report).
pub const DENSE_KEYS: [&str; 6] = [
    "goodput_gbps",
    "tx_ring_full_per_gbit",
    "drops_per_gbit",
    "transit_drops_per_gbit",
    "transit_ce_marks_per_gbit",
    "cpu_s_per_gbit",
];

fn dense_case(bin: &Path, s: &TbSettings, mode: Mode) -> Result<Option<Dense>> {
    let topo = lcmp_netlab::repo_root().join("topologies/2dc-3path.toml");
    let mut tb = Testbed::new(bin);
    let extra = switch_arg_flags(s);
    let how = mode.suffix();
    let mut args = mode.args();
    args.extend(extra.iter().map(String::as_str));
    tb.up(&topo, &args)?;
    let t = s.dense_duration.to_string();
    let mut client = vec!["-P", "8", "-t", &t];
    if let Some(r) = &s.dense_rate {
        client.extend(["-b", r.as_str()]);
    }
    let (iperf, b) = tb.iperf(&client)?;
    let c = tb.sample()?;
    tb.wait_stats_rewrite("s1")?;
    let a = tb.sample()?;
    tb.down();
    let gbit = (a.tx_bytes.saturating_sub(b.tx_bytes)) as f64 * 8.0 / 1e9;
    if gbit < 1e-3 {
        log(&format!("WARNING: 2dc-3path, {how}: nothing forwarded"));
        return Ok(None);
    }
    let per = |x: u64, y: u64| round(y.saturating_sub(x) as f64 / gbit, 2);
    let goodput = iperf.bits_per_second / 1e9;
    let r = [
        round(goodput, 3),
        per(b.tx_ring_full, a.tx_ring_full),
        per(b.tx_ring_full + b.queue_full, a.tx_ring_full + a.queue_full),
        per(b.transit_drops, a.transit_drops),
        per(b.transit_ce, a.transit_ce),
        round((c.cpu_s - b.cpu_s) / gbit, 4),
    ];
    log(&format!(
        "2dc-3path iperf3 -P 8, {how}: {gbit:.2} Gbit forwarded (all hops), {:?}",
        DENSE_KEYS.iter().zip(r).collect::<Vec<_>>()
    ));
    Ok(Some(r))
}

/// Dense runs of each of `modes`, alternating.
pub fn dense_cases(bin: &Path, s: &TbSettings, modes: &[Mode]) -> Result<Alternating<Dense>> {
    let mut runs = vec![Vec::new(); modes.len()];
    for _ in 0..s.runs {
        for (m, r) in modes.iter().zip(&mut runs) {
            r.push(dense_case(bin, s, *m)?);
        }
    }
    Ok(runs)
}

/// CPU use of an idle switch in event mode, percent of one core, over
/// `secs` (the measurement window, utime + stime).
pub fn idle_cpu(
    rig: &Rig,
    s: &Settings,
    bin: &Path,
    stats_file: bool,
    secs: u64,
    dir: &Path,
) -> Result<Option<f64>> {
    let mut s = s.clone();
    // Idle: nothing to move to a kthread.
    s.threaded_napi = false;
    let sw = Switch::start(rig, &s, bin, "event", stats_file, dir)?;
    let pid = sw.pid();
    let t0 = cpu_seconds(pid)?;
    let start = std::time::Instant::now();
    let window = Duration::from_secs(secs);
    // The window is the measurement itself; a stop signal ends it early.
    wait_for(window, || start.elapsed() >= window)?;
    let t1 = cpu_seconds(pid)?;
    sw.stop();
    Ok(Some(round(
        100.0 * (t1 - t0) / start.elapsed().as_secs_f64(),
        2,
    )))
}

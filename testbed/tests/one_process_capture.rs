//! `capture = [...]` (`--capture`) on the virtual engine: a port's frames
//! of every run in `runs/<run>/capture-<switch>.pcapng`, written by
//! `lcmp-ctl capture`, with virtual nanosecond timestamps; no root. The
//! network is topologies/2dc-3path.toml (a - s1 = p1|p2|p3 = s2 - b), one
//! flow of 3000 bytes from a to b, alone: three data packets and three
//! ACKs. The expected frames and times are worked out by hand below.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_lcmp-testbed");

/// A fresh directory of this test process, absent.
fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lcmp-capture-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Removes a directory when the test ends, also on panic.
struct Gone(PathBuf);

impl Drop for Gone {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn ctl() -> PathBuf {
    lcmp_netlab::release_binary("lcmp-agent", "lcmp-ctl", "LCMP_CTL_BIN").unwrap()
}

fn testbed(args: &[&str]) -> Output {
    // No lcmp-switch or lcmp-traffic is needed: point both at nothing.
    Command::new(BIN)
        .args(args)
        .env("LCMP_SWITCH_BIN", "/nonexistent/lcmp-switch")
        .env("LCMP_TRAFFIC_BIN", "/nonexistent/lcmp-traffic")
        .env("LCMP_CTL_BIN", ctl())
        .output()
        .expect("lcmp-testbed runs")
}

fn said(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The experiment file in `dir`: one flow of `size` bytes from a (behind
/// s1) to b (behind s2) at the trace's start, LCMP, the virtual engine
/// (no scaling), `capture` as given.
fn experiment(dir: &Path, capture: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    // hpcc-fct: sip dip sport dport size start_ns fct_ns standalone_ns.
    std::fs::write(
        dir.join("trace.txt"),
        "0b000001 0b001001 10000 100 3000 2000000000 8126824 8126824\n",
    )
    .unwrap();
    let topology = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies/2dc-3path.toml");
    let file = dir.join("capture.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"cap\"\ntopology = \"{}\"\nfrom = \"s1\"\nto = \"s2\"\npolicies = [\"lcmp\"]\n\
             transport = \"rocev2\"\nengine = \"virtual\"\ntrace = \"trace.txt\"\n\
             trace_format = \"hpcc-fct\"\ndrain_s = 1\ncapture = {capture}\n",
            topology.display()
        ),
    )
    .unwrap();
    file
}

fn run(config: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "experiment",
        "--config",
        config.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    testbed(&args)
}

/// One frame of a pcapng file.
#[derive(Debug)]
struct Frame {
    /// In the interface's resolution (checked to be ns).
    time_ns: u64,
    outbound: bool,
    caplen: usize,
    orig_len: u32,
    data: Vec<u8>,
}

/// A pcapng file as `lcmp-ctl capture` writes it: one section, one
/// Ethernet interface with nanosecond timestamps; its name, snaplen and
/// frames. Panics on anything else (a reader of the format, not a second
/// writer).
fn read_pcapng(file: &Path) -> (String, u32, Vec<Frame>) {
    let b = std::fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
    let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
    assert_eq!(u32_at(0), 0x0A0D_0D0A, "a section header first");
    assert_eq!(u32_at(8), 0x1A2B_3C4D, "little-endian");
    let (mut name, mut snaplen, mut frames) = (None, 0, Vec::new());
    let mut at = 0;
    while at < b.len() {
        let (kind, len) = (u32_at(at), u32_at(at + 4) as usize);
        assert!(
            len >= 12 && len % 4 == 0 && at + len <= b.len(),
            "block at {at}"
        );
        assert_eq!(
            u32_at(at + len - 4) as usize,
            len,
            "block at {at}: trailing length"
        );
        let body = at + 8;
        let end = at + len - 4;
        // Options: code, length, value padded to 4 bytes; 0 ends them.
        let options = |mut o: usize| {
            let mut out = Vec::new();
            while o + 4 <= end {
                let (code, l) = (u16_at(o), usize::from(u16_at(o + 2)));
                if code == 0 {
                    break;
                }
                out.push((code, b[o + 4..o + 4 + l].to_vec()));
                o += 4 + l.div_ceil(4) * 4;
            }
            out
        };
        match kind {
            0x0A0D_0D0A => {}
            1 => {
                assert!(name.is_none(), "one interface");
                assert_eq!(u16_at(body), 1, "Ethernet");
                snaplen = u32_at(body + 4);
                let opts = options(body + 8);
                let tsresol = opts.iter().find(|(c, _)| *c == 9).map(|(_, v)| v[0]);
                assert_eq!(tsresol, Some(9), "nanosecond timestamps");
                name = opts
                    .iter()
                    .find(|(c, _)| *c == 2)
                    .map(|(_, v)| String::from_utf8(v.clone()).unwrap());
            }
            6 => {
                assert_eq!(u32_at(body), 0, "interface 0");
                let time_ns = (u64::from(u32_at(body + 4)) << 32) | u64::from(u32_at(body + 8));
                let caplen = u32_at(body + 12) as usize;
                let orig_len = u32_at(body + 16);
                let data = b[body + 20..body + 20 + caplen].to_vec();
                let flags = options(body + 20 + caplen.div_ceil(4) * 4)
                    .into_iter()
                    .find(|(c, _)| *c == 2)
                    .map(|(_, v)| u32::from_le_bytes(v[..4].try_into().unwrap()))
                    .expect("each frame's direction in its flags");
                assert!(flags & 3 == 1 || flags & 3 == 2, "flags {flags:#x}");
                frames.push(Frame {
                    time_ns,
                    outbound: flags & 3 == 2,
                    caplen,
                    orig_len,
                    data,
                });
            }
            other => panic!("block type {other:#x} at {at}"),
        }
        at += len;
    }
    (name.expect("an interface"), snaplen, frames)
}

/// The UDP destination port of an IPv4 frame.
fn udp_dst(f: &Frame) -> u16 {
    u16::from_be_bytes([f.data[36], f.data[37]])
}

fn flows_csv(dir: &Path) -> Vec<std::collections::BTreeMap<String, String>> {
    let mut rd = csv::Reader::from_path(dir.join("flows.csv")).unwrap();
    rd.deserialize().map(Result::unwrap).collect()
}

/// The frames, by hand. The flow is 3000 bytes, three RDMA WRITE packets
/// of 1000 (RoCEv2's default payload): the first with its RETH, 14
/// Ethernet + 20 IPv4 + 8 UDP + 12 BTH + 16 RETH + 1000 + 4 ICRC = 1074
/// bytes, the next two 1058; each answered by an ACK of 14 + 20 + 8 + 12
/// + 4 AETH + 4 ICRC = 62 bytes.
///
/// - s1 port 3 (host a's): the three data frames in, then three ACKs out.
///   a's NIC (10 Gbit/s, 0.8 ns/byte, 10 us) sends them back to back from
///   0: they end at 859.2, 1705.6 and 2552.0 ns, rounded to the
///   nanosecond as the NIC's shaper rounds a departure (859, 1706, 2552),
///   and reach s1 10 us later: 10 859, 11 706, 12 552. The last ACK
///   reaches a when the flow completes: its FCT.
/// - s2 port 3 (host b's), the flow over p3 (200 Mbit/s, 40 ns/byte, 2 ms
///   per hop): the first data frame leaves for b when it reaches b, at
///   10 859 + 2 x (1074 x 40 + 2 000 000) + 859 (1074 B at 10 Gbit/s) +
///   10 000 = 4 107 638; then, each in turn, b's ACK in and the next data
///   frame out.
#[test]
fn a_virtual_run_captures_a_port_as_pcapng_at_virtual_times_deterministically() {
    let dir = scratch("virtual");
    let _gone = Gone(dir.clone());
    let config = experiment(&dir, "[\"s1:p3\", \"s2:3\"]");
    let (out1, out2) = (dir.join("out1"), dir.join("out2"));
    for out in [&out1, &out2] {
        let o = run(&config, out, &[]);
        assert!(o.status.success(), "{}", said(&o));
        // Every frame of the ports was recorded: no cap line.
        assert!(!said(&o).contains("cap was reached"), "{}", said(&o));
    }
    let run_dir = out1.join("runs/trace-lcmp-seed1");
    let flows = flows_csv(&run_dir);
    assert_eq!(flows.len(), 1, "{flows:?}");
    let flow = &flows[0];
    assert_eq!(
        (flow["status"].as_str(), flow["start_ns"].as_str()),
        ("ok", "0")
    );
    assert_eq!(flow["path"], "p3", "the hand-worked times take p3");
    let fct_ns: u64 = flow["fct_ns"].parse().unwrap();

    let (name, snaplen, s1) = read_pcapng(&run_dir.join("capture-s1.pcapng"));
    assert_eq!((name.as_str(), snaplen), ("s1/p3", 2048));
    let summary: Vec<(bool, u32, u16)> = s1
        .iter()
        .map(|f| (f.outbound, f.orig_len, udp_dst(f)))
        .collect();
    assert_eq!(
        summary,
        [
            (false, 1074, 4791),
            (false, 1058, 4791),
            (false, 1058, 4791),
            (true, 62, 4791),
            (true, 62, 4791),
            (true, 62, 4791),
        ],
        "{s1:?}"
    );
    assert!(s1.iter().all(|f| f.caplen == f.orig_len as usize));
    let times: Vec<u64> = s1.iter().map(|f| f.time_ns).collect();
    assert_eq!(times[..3], [10_859, 11_706, 12_552], "{times:?}");
    assert_eq!(times[5], fct_ns, "{times:?}");
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");

    let (name, _, s2) = read_pcapng(&run_dir.join("capture-s2.pcapng"));
    assert_eq!(name, "s2/p3");
    let dirs: Vec<(bool, u32)> = s2.iter().map(|f| (f.outbound, f.orig_len)).collect();
    assert_eq!(
        dirs,
        [
            (true, 1074),
            (false, 62),
            (true, 1058),
            (false, 62),
            (true, 1058),
            (false, 62),
        ],
        "{s2:?}"
    );
    assert_eq!(s2[0].time_ns, 4_107_638);

    // The same inputs, the same files, byte for byte.
    for f in ["capture-s1.pcapng", "capture-s2.pcapng"] {
        let a = std::fs::read(run_dir.join(f)).unwrap();
        let b = std::fs::read(out2.join("runs/trace-lcmp-seed1").join(f)).unwrap();
        assert!(a == b, "{f} differs between two runs");
    }

    // tcpdump reads it (where installed).
    if let Ok(o) = Command::new("tcpdump")
        .args(["-nn", "-tt", "--time-stamp-precision=nano", "-r"])
        .arg(run_dir.join("capture-s1.pcapng"))
        .output()
    {
        let text = String::from_utf8_lossy(&o.stdout).to_string();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 6, "{text}");
        assert!(
            lines[0].starts_with("0.000010859 IP 10.0.1.2.")
                && lines[0].contains("> 10.0.2.2.4791"),
            "{text}"
        );
    }
}

/// The cap: 2 kB (as kept) holds the first data frame (1074 bytes) and
/// the first 926 of the second; the port carried six, said in one line.
/// A switch alone is a port only when it has one; a second port of a
/// switch, a port it lacks and the namespaces engine are refused.
#[test]
fn a_capture_keeps_to_its_cap_and_says_what_it_left_out() {
    let dir = scratch("cap");
    let _gone = Gone(dir.clone());
    let config = experiment(&dir, "[\"s2:p3\"]");
    let out = dir.join("out");
    // --capture replaces the file's.
    let o = run(
        &config,
        &out,
        &["--capture", "s1:p3", "--capture-max-bytes", "2kB"],
    );
    assert!(o.status.success(), "{}", said(&o));
    let run_dir = out.join("runs/trace-lcmp-seed1");
    assert!(!run_dir.join("capture-s2.pcapng").exists());
    let text = said(&o);
    let cap: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("capture s1:p3"))
        .collect();
    assert_eq!(cap.len(), 1, "{text}");
    assert!(
        cap[0].contains("2 of the port's 6 frames recorded, 4 not recorded"),
        "{text}"
    );
    let (_, _, frames) = read_pcapng(&run_dir.join("capture-s1.pcapng"));
    let kept: Vec<(usize, u32)> = frames.iter().map(|f| (f.caplen, f.orig_len)).collect();
    assert_eq!(kept, [(1074, 1074), (926, 1058)]);

    for (capture, expect) in [
        (
            "s1",
            "capture \"s1\": s1 has 4 ports; name one (s1:p0 to s1:p3)",
        ),
        ("s1:p4", "capture \"s1:p4\": s1 has no port \"p4\""),
        ("s1:0,s1:1", "capture \"s1:1\": s1:p0 is captured already"),
        ("x9:0", "capture \"x9:0\": no switch \"x9\""),
    ] {
        let o = run(&config, &out, &["--check", "--capture", capture]);
        assert_eq!(o.status.code(), Some(2), "{capture}: {}", said(&o));
        let text = said(&o);
        assert_eq!(text.trim().lines().count(), 1, "{capture}: {text}");
        assert!(text.contains(expect), "{capture}: {text}");
    }
    let o = run(
        &config,
        &out,
        &["--check", "--engine", "namespaces", "--capture", "s1:p3"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", said(&o));
    assert!(
        said(&o).contains("capture (--capture): a one-process engine option"),
        "{}",
        said(&o)
    );
}

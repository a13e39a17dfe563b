//! Tiny XDP programs for benchmarks, loaded with raw `bpf(2)` calls and
//! attached over rtnetlink, and a kernel-side UDP traffic generator.
//!
//! No ELF objects, no clang and no libbpf: each program is a handful of
//! hand-encoded BPF instructions. That keeps the bench harness independent
//! of the toolchain (and of xdp-tools 1.3, whose BPF objects no longer load
//! on kernels without the `xdp_redirect_map*` tracepoints).
//!
//! The generator uses `BPF_PROG_TEST_RUN` with `BPF_F_TEST_XDP_LIVE_FRAMES`
//! (kernel 5.18+): the kernel runs a program that returns `XDP_TX` on a
//! prepared frame, `repeat` times, and transmits each copy out of the
//! device named in the context. On a veth the frames land in the peer's XDP
//! ring, so the peer needs NAPI enabled (an XDP program or GRO on it).
//!
//! Everything here acts on the calling thread's network namespace: call it
//! from a process started inside the namespace or from
//! [`crate::Netns::run_in`].

use std::ffi::CString;
use std::io;
use std::mem::size_of;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use crate::Mac;

const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_TEST_RUN: libc::c_long = 10;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_F_TEST_XDP_LIVE_FRAMES: u32 = 1 << 1;
/// Largest batch `BPF_PROG_TEST_RUN` accepts in live-frames mode.
const TEST_XDP_MAX_BATCH: u32 = 256;
const BPF_FUNC_REDIRECT: i32 = 23;

/// XDP verdicts (`enum xdp_action`).
const XDP_DROP: i32 = 1;
const XDP_PASS: i32 = 2;
const XDP_TX: i32 = 3;

/// Native (driver) mode; veth implements it.
pub const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
/// Generic (skb) mode.
pub const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;

/// What an attached program does with every frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// `XDP_DROP`: count-and-drop sink (the device's XDP stats count it).
    Drop,
    /// `XDP_PASS`: hand every frame to the stack (enables veth NAPI).
    Pass,
    /// `XDP_TX`: bounce every frame back out of the receiving device.
    Tx,
    /// `bpf_redirect(ifindex, 0)`: send every frame out of another device.
    Redirect(u32),
}

/// One BPF instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Clone, Copy)]
struct Insn {
    code: u8,
    /// dst_reg in the low nibble, src_reg in the high nibble.
    regs: u8,
    off: i16,
    imm: i32,
}

/// `r<dst> = imm` (BPF_ALU64 | BPF_MOV | BPF_K).
fn mov64_imm(dst: u8, imm: i32) -> Insn {
    Insn {
        code: 0xb7,
        regs: dst & 0x0f,
        off: 0,
        imm,
    }
}

/// Call helper `id` (BPF_JMP | BPF_CALL).
fn call(id: i32) -> Insn {
    Insn {
        code: 0x85,
        regs: 0,
        off: 0,
        imm: id,
    }
}

/// `r<dst> = *(u32 *)(r<src> + off)` (BPF_LDX | BPF_MEM | BPF_W).
fn ldx_w(dst: u8, src: u8, off: i16) -> Insn {
    Insn {
        code: 0x61,
        regs: (dst & 0x0f) | (src << 4),
        off,
        imm: 0,
    }
}

/// `r<dst> = r<src>` (BPF_ALU64 | BPF_MOV | BPF_X).
fn mov64_reg(dst: u8, src: u8) -> Insn {
    Insn {
        code: 0xbf,
        regs: (dst & 0x0f) | (src << 4),
        off: 0,
        imm: 0,
    }
}

/// `r<dst> += imm` (BPF_ALU64 | BPF_ADD | BPF_K).
fn add64_imm(dst: u8, imm: i32) -> Insn {
    Insn {
        code: 0x07,
        regs: dst & 0x0f,
        off: 0,
        imm,
    }
}

/// `if r<dst> > r<src> goto +off` (BPF_JMP | BPF_JGT | BPF_X).
fn jgt_reg(dst: u8, src: u8, off: i16) -> Insn {
    Insn {
        code: 0x2d,
        regs: (dst & 0x0f) | (src << 4),
        off,
        imm: 0,
    }
}

/// `*(u32 *)(r<dst> + off) = imm` (BPF_ST | BPF_MEM | BPF_W).
fn st_w(dst: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code: 0x62,
        regs: dst & 0x0f,
        off,
        imm,
    }
}

/// Return r0 (BPF_JMP | BPF_EXIT).
fn exit() -> Insn {
    Insn {
        code: 0x95,
        regs: 0,
        off: 0,
        imm: 0,
    }
}

fn program(action: Action) -> Vec<Insn> {
    match action {
        Action::Drop => vec![mov64_imm(0, XDP_DROP), exit()],
        Action::Pass => vec![mov64_imm(0, XDP_PASS), exit()],
        Action::Tx => vec![mov64_imm(0, XDP_TX), exit()],
        Action::Redirect(ifindex) => vec![
            // ifindex fits an i32 (the kernel's ifindex is an int).
            mov64_imm(1, ifindex as i32),
            mov64_imm(2, 0),
            call(BPF_FUNC_REDIRECT),
            exit(),
        ],
    }
}

/// The generator's program: rewrite the first `header.len()` bytes (a
/// multiple of 4) of the frame with `header`, then `XDP_TX`.
///
/// In live-frames mode the kernel initialises a page's contents only when
/// its page pool first hands it out; a page recycled after a receiver
/// changed the frame (a forwarding DUT rewrites MACs, TTL and checksum)
/// comes back modified. Restoring the headers on every run keeps every
/// transmitted frame identical.
fn tx_restore_program(header: &[u8]) -> Vec<Insn> {
    assert!(header.len().is_multiple_of(4) && header.len() <= 256);
    let words: Vec<i32> = header
        .chunks(4)
        .map(|c| i32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let mut p = vec![
        ldx_w(2, 1, 0), // r2 = ctx->data
        ldx_w(3, 1, 4), // r3 = ctx->data_end
        mov64_reg(4, 2),
        add64_imm(4, header.len() as i32),
        // Skip the stores and the XDP_TX exit (2) if the frame is short.
        jgt_reg(4, 3, words.len() as i16 + 2),
    ];
    for (i, w) in words.iter().enumerate() {
        p.push(st_w(2, (4 * i) as i16, *w));
    }
    p.extend([mov64_imm(0, XDP_TX), exit(), mov64_imm(0, XDP_DROP), exit()]);
    p
}

fn sys_bpf(cmd: libc::c_long, attr: &mut [u8; 128]) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is laid out as the `union bpf_attr` member for `cmd`
    // (callers fill it field by field; unused bytes stay zero as the kernel
    // requires), and the instruction, license and log pointers it holds
    // point at buffers the caller keeps alive across the call.
    unsafe { lcmp_ebpf::sys::bpf(cmd, attr) }
}

fn put_u32(buf: &mut [u8], off: usize, v: u32) {
    buf[off..off + 4].copy_from_slice(&v.to_ne_bytes());
}

fn put_u64(buf: &mut [u8], off: usize, v: u64) {
    buf[off..off + 8].copy_from_slice(&v.to_ne_bytes());
}

/// Loads the XDP program for `action` and returns its fd.
pub fn load(action: Action) -> io::Result<OwnedFd> {
    load_insns(&program(action), &format!("{action:?}"))
}

fn load_insns(insns: &[Insn], what: &str) -> io::Result<OwnedFd> {
    let license = CString::new("Apache-2.0").expect("no NUL");
    let mut log = vec![0u8; 4096];
    let mut attr = [0u8; 128];
    // struct { prog_type; insn_cnt; insns; license; log_level; log_size;
    //          log_buf; kern_version; prog_flags; prog_name[16]; ... }
    put_u32(&mut attr, 0, BPF_PROG_TYPE_XDP);
    put_u32(&mut attr, 4, insns.len() as u32);
    put_u64(&mut attr, 8, insns.as_ptr() as u64);
    put_u64(&mut attr, 16, license.as_ptr() as u64);
    put_u32(&mut attr, 24, 1);
    put_u32(&mut attr, 28, log.len() as u32);
    put_u64(&mut attr, 32, log.as_mut_ptr() as u64);
    let name = b"lcmpt_bench";
    attr[48..48 + name.len()].copy_from_slice(name);
    match sys_bpf(BPF_PROG_LOAD, &mut attr) {
        // SAFETY: BPF_PROG_LOAD returned a new file descriptor that nothing
        // else owns.
        Ok(fd) => Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) }),
        Err(e) => {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let log = String::from_utf8_lossy(&log[..end]);
            Err(io::Error::new(
                e.kind(),
                format!("BPF_PROG_LOAD ({what}): {e}; verifier log: {log}"),
            ))
        }
    }
}

/// The index of interface `ifname` in the calling thread's namespace.
pub fn ifindex(ifname: &str) -> io::Result<u32> {
    let c = CString::new(ifname).map_err(|_| io::Error::other("NUL in interface name"))?;
    // SAFETY: `c` is a valid NUL-terminated string for the whole call.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no interface {ifname:?}: {}", io::Error::last_os_error()),
        ))
    } else {
        Ok(idx)
    }
}

/// Attaches program `prog_fd` (or detaches with `None`) to `ifindex` with
/// `flags` (`XDP_FLAGS_*`) through an `RTM_SETLINK` request (lcmp-ebpf's
/// netlink client). The kernel holds the program while attached; the fd may
/// be closed afterwards.
pub fn set_link_xdp(ifindex: u32, prog_fd: Option<i32>, flags: u32) -> io::Result<()> {
    lcmp_ebpf::set_link_xdp(ifindex, prog_fd, flags)
        .map_err(|e| io::Error::new(io::Error::from_raw_os_error(e.errno).kind(), e.to_string()))
}

/// Loads the program for `action` and attaches it to `ifname` in native
/// mode (generic mode if `skb_mode`). It stays attached after this process
/// exits, until detached with [`detach`] (`ip link set dev X xdp off`) or
/// until the device goes away.
pub fn attach(ifname: &str, action: Action, skb_mode: bool) -> io::Result<()> {
    let idx = ifindex(ifname)?;
    let prog = load(action)?;
    let flags = if skb_mode {
        XDP_FLAGS_SKB_MODE
    } else {
        XDP_FLAGS_DRV_MODE
    };
    set_link_xdp(idx, Some(prog.as_raw_fd()), flags)
}

/// Detaches any native-mode (or generic, if `skb_mode`) XDP program.
pub fn detach(ifname: &str, skb_mode: bool) -> io::Result<()> {
    let flags = if skb_mode {
        XDP_FLAGS_SKB_MODE
    } else {
        XDP_FLAGS_DRV_MODE
    };
    set_link_xdp(ifindex(ifname)?, None, flags)
}

/// An Ethernet + IPv4 + UDP frame of `frame_len` bytes (Ethernet header
/// included, FCS excluded; at least 42), DF set, checksums filled in,
/// payload filled with a counter pattern.
#[allow(clippy::too_many_arguments)]
pub fn udp4_frame(
    dst_mac: Mac,
    src_mac: Mac,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    src_port: u16,
    dst_port: u16,
    ttl: u8,
    frame_len: usize,
) -> Vec<u8> {
    let payload: Vec<u8> = (0..frame_len.max(42) - 42).map(|i| i as u8).collect();
    lcmp_wire::testing::FrameBuilder::ipv4(src.octets(), dst.octets())
        .macs(src_mac.0, dst_mac.0)
        .ttl(ttl)
        .ipv4_fragment(false, true, 0)
        .udp(src_port, dst_port)
        .payload(&payload)
        .build()
}

/// Result of [`generate`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GenReport {
    /// Frames the kernel ran through the `XDP_TX` program (each was handed
    /// to the device; a veth may still drop it if the peer's ring is full).
    pub frames: u64,
    /// Wall time spent generating.
    pub elapsed: Duration,
}

impl GenReport {
    /// Frames per second.
    pub fn pps(&self) -> f64 {
        self.frames as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Transmits copies of `frame` out of `ifname` for `duration` with the
/// kernel's live-frames test run (`XDP_TX`, `batch` frames per flush, at
/// most 256), from the calling thread. With `rate_pps` it sends 1 ms worth
/// of frames per millisecond (approximately; never faster than the kernel
/// can run them), else as fast as it can. Returns how many frames were
/// handed to the device.
pub fn generate(
    ifname: &str,
    frame: &[u8],
    duration: Duration,
    batch: u32,
    rate_pps: Option<u64>,
) -> io::Result<GenReport> {
    let idx = ifindex(ifname)?;
    // Ethernet + IPv4 + UDP headers, rounded up to whole words.
    let restore = frame.len().min(44) / 4 * 4;
    let prog = load_insns(&tx_restore_program(&frame[..restore]), "generator")?;
    // struct xdp_md { data, data_end, data_meta, ingress_ifindex,
    //                 rx_queue_index, egress_ifindex }
    let ctx: [u32; 6] = [0, frame.len() as u32, 0, idx, 0, 0];
    let batch = batch.clamp(1, TEST_XDP_MAX_BATCH);
    let start = Instant::now();
    let deadline = start + duration;
    let mut frames = 0u64;
    // Unpaced: start small and size each run to about 50 ms.
    let mut repeat: u32 = 16_384;
    loop {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        if let Some(rate) = rate_pps {
            // Frames due by the end of the current millisecond.
            let due_t = (now - start).as_secs_f64() + 0.001;
            let due = (rate as f64 * due_t) as u64;
            if due <= frames {
                std::thread::sleep(Duration::from_micros(200));
                continue;
            }
            repeat = (due - frames).clamp(1, u64::from(u32::MAX)) as u32;
        }
        let mut attr = [0u8; 128];
        // struct { prog_fd; retval; data_size_in; data_size_out; data_in;
        //          data_out; repeat; duration; ctx_size_in; ctx_size_out;
        //          ctx_in; ctx_out; flags; cpu; batch_size; }
        put_u32(&mut attr, 0, prog.as_raw_fd() as u32);
        put_u32(&mut attr, 8, frame.len() as u32);
        put_u64(&mut attr, 16, frame.as_ptr() as u64);
        put_u32(&mut attr, 32, repeat);
        put_u32(&mut attr, 40, size_of::<[u32; 6]>() as u32);
        put_u64(&mut attr, 48, ctx.as_ptr() as u64);
        put_u32(&mut attr, 64, BPF_F_TEST_XDP_LIVE_FRAMES);
        put_u32(&mut attr, 72, batch);
        let t0 = Instant::now();
        match sys_bpf(BPF_PROG_TEST_RUN, &mut attr) {
            Ok(_) => frames += u64::from(repeat),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => break,
            Err(e) => return Err(io::Error::new(e.kind(), format!("BPF_PROG_TEST_RUN: {e}"))),
        }
        if rate_pps.is_none() {
            let took = t0.elapsed().as_secs_f64().max(1e-6);
            let left = deadline
                .saturating_duration_since(Instant::now())
                .as_secs_f64();
            let rate = f64::from(repeat) / took;
            let want = (rate * left.min(0.05)).max(f64::from(batch));
            repeat = want.min(f64::from(u32::MAX)) as u32;
        }
    }
    Ok(GenReport {
        frames,
        elapsed: start.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_layout() {
        let f = udp4_frame(
            Mac([2, 0, 0, 0, 0, 1]),
            Mac([2, 0, 0, 0, 0, 2]),
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(10, 0, 0, 2),
            1000,
            9,
            64,
            64,
        );
        assert_eq!(f.len(), 64);
        assert_eq!(&f[12..14], &[8, 0]);
        assert_eq!(u16::from_be_bytes([f[16], f[17]]), 50);
        assert_eq!(
            lcmp_wire::testing::ipv4_header_checksum_ok(&f),
            Some(true),
            "IPv4 header checksum verifies"
        );
        assert_eq!(lcmp_wire::testing::l4_checksum_ok(&f), Some(true));
        assert_eq!(u16::from_be_bytes([f[38], f[39]]), 30);
    }

    #[test]
    fn insn_encoding() {
        let p = program(Action::Redirect(7));
        assert_eq!(p.len(), 4);
        assert_eq!((p[0].code, p[0].regs, p[0].imm), (0xb7, 1, 7));
        assert_eq!((p[2].code, p[2].imm), (0x85, 23));
        assert_eq!(p[3].code, 0x95);
        assert_eq!(size_of::<Insn>(), 8);
        let g = tx_restore_program(&[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(g.len(), 5 + 2 + 4);
        // The length check jumps over the stores and the XDP_TX exit.
        assert_eq!(g[4].off, 4);
        assert_eq!(g[5 + 2 + 2].code, 0xb7);
        assert_eq!(g[5 + 2 + 2].imm, XDP_DROP);
    }
}

//! `lcmp-ctl capture SWITCH PORT --out FILE.pcapng`: a port's frames, both
//! directions, as pcapng (tcpdump, Wireshark). The one way to look into a
//! memory link, which has no interface for tcpdump to open; it works on
//! any port.
//!
//! The switch copies the port's frames into a bounded buffer; this drains
//! it every [`FETCH_INTERVAL`] and appends the frames to the file until
//! the capture's limits (frames, bytes, duration) are reached or it is
//! interrupted, then stops the capture; [`lcmp_control::pcapng`] writes
//! the file (directions in the EPB flags, nanosecond times).
//!
//! The switch is asked to keep the limits, and this keeps them too, so
//! that a broken or hostile switch can neither run a capture past its
//! duration nor have more frames or bytes written than asked, or a frame
//! longer than the snaplen.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use lcmp_control::pcapng::PcapngFile;
use lcmp_control::proto::{hex_decode, CaptureReply};
use lcmp_control::{Client, Reply, Request};

use super::call::reply_kind;
use super::{CtlError, Target};

/// How often the switch's buffer is drained. It holds 16 MiB: at this
/// interval a reader keeps up with over 1 Gbit/s of captured bytes.
pub const FETCH_INTERVAL: Duration = Duration::from_millis(50);

/// What to capture.
#[derive(Debug, Clone)]
pub struct CaptureOptions {
    /// Interface name or port index.
    pub port: String,
    /// The pcapng file to write.
    pub out: PathBuf,
    /// Bytes kept of each frame.
    pub snaplen: u32,
    /// Frames to take in all.
    pub max_frames: u64,
    /// Bytes (as kept) to take in all.
    pub max_bytes: u64,
    /// How long.
    pub duration: Duration,
}

/// What a capture took.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CaptureSummary {
    /// The port's name.
    pub port: String,
    /// Frames written.
    pub frames: u64,
    /// Bytes written (as kept).
    pub bytes: u64,
    /// Frames the switch dropped because this reader fell behind.
    pub dropped: u64,
}

fn io_failed(path: &Path, e: impl std::fmt::Display) -> CtlError {
    CtlError::Failed(format!("{}: {e}", path.display()))
}

/// Captures on `target` as `opts` says until its limits or until `stop`
/// is set (SIGINT), then stops the capture; the file is complete either
/// way. Each call to the switch has `timeout`.
pub fn capture(
    target: &Target,
    opts: &CaptureOptions,
    timeout: Duration,
    stop: &AtomicBool,
) -> Result<CaptureSummary, CtlError> {
    let failed = |e: lcmp_control::ClientError| CtlError::Failed(format!("{}: {e}", target.name));
    let mut client = Client::connect(&target.path, timeout).map_err(failed)?;
    let file = File::create(&opts.out).map_err(|e| io_failed(&opts.out, e))?;
    let first = fetch(
        &mut client,
        &Request::CaptureStart {
            port: opts.port.clone(),
            snaplen: opts.snaplen,
            max_frames: opts.max_frames,
            max_bytes: opts.max_bytes,
            duration_ns: u64::try_from(opts.duration.as_nanos()).unwrap_or(u64::MAX),
        },
        target,
    )?;
    // Timed from the start's reply, after the switch started its own
    // clock: a switch that keeps time ends the capture first, and this end
    // only stops one that does not. `None`: beyond the clock's range,
    // never.
    let end = Instant::now().checked_add(opts.duration);
    let if_name = format!("{}/{}", target.name, first.port);
    let mut pcap =
        PcapngFile::new(file, &if_name, opts.snaplen).map_err(|e| io_failed(&opts.out, e))?;
    let mut summary = CaptureSummary {
        port: first.port.clone(),
        ..Default::default()
    };
    let mut reply = first;
    let mut stopping = false;
    loop {
        write_frames(&mut pcap, &reply, opts, &mut summary).map_err(|e| io_failed(&opts.out, e))?;
        summary.dropped = reply.dropped;
        // The stop's reply is the last, whatever it says.
        if stopping {
            break;
        }
        let full = summary.frames >= opts.max_frames || summary.bytes >= opts.max_bytes;
        // Done by the limits: one last call that also frees the switch's
        // capture state, at once.
        if !reply.done && !full {
            let left = end.map_or(FETCH_INTERVAL, |end| {
                end.saturating_duration_since(Instant::now())
            });
            std::thread::sleep(FETCH_INTERVAL.min(left));
        }
        let time_up = end.is_some_and(|end| Instant::now() >= end);
        stopping = reply.done || full || time_up || stop.load(Ordering::Relaxed);
        let request = if stopping {
            Request::CaptureStop
        } else {
            Request::CaptureFetch
        };
        reply = fetch(&mut client, &request, target)?;
    }
    pcap.finish().map_err(|e| io_failed(&opts.out, e))?;
    Ok(summary)
}

fn fetch(
    client: &mut Client,
    request: &Request,
    target: &Target,
) -> Result<CaptureReply, CtlError> {
    match client.call(request) {
        Ok(Reply::Capture(r)) => Ok(r),
        // Its kind, not the reply: a reply is the switch's text, and can
        // be megabytes.
        Ok(other) => Err(CtlError::Failed(format!(
            "{}: bad reply from the switch: a {} reply to a {} request",
            target.name,
            reply_kind(&other),
            request.verb()
        ))),
        Err(e) => Err(CtlError::Failed(format!("{}: {e}", target.name))),
    }
}

/// Writes the frames of `reply` that fit the limits: no more frames or
/// bytes than asked, each cut to the snaplen, the last cut to the bytes
/// left.
fn write_frames(
    pcap: &mut PcapngFile,
    reply: &CaptureReply,
    opts: &CaptureOptions,
    summary: &mut CaptureSummary,
) -> Result<(), String> {
    for f in &reply.frames {
        if summary.frames >= opts.max_frames || summary.bytes >= opts.max_bytes {
            break;
        }
        let mut data = hex_decode(&f.data).ok_or("the switch sent a frame that is not hex")?;
        let room = usize::try_from(opts.max_bytes - summary.bytes).unwrap_or(usize::MAX);
        data.truncate(room.min(opts.snaplen as usize));
        summary.bytes += data.len() as u64;
        pcap.write(f.time_unix_ns, f.outbound, f.orig_len, &data)
            .map_err(|e| e.to_string())?;
        summary.frames += 1;
    }
    Ok(())
}

//! Capturing one port's frames (`lcmp-ctl capture`): what a memory link
//! carries has no interface for tcpdump to open, so the switch copies the
//! frames it receives on the port and those it hands to the port, in the
//! order and at the times it does, into a bounded buffer that the control
//! socket drains (`capture_fetch`); `lcmp-ctl` writes them as pcapng.
//!
//! Bounded three ways: the frames and bytes a capture takes in all, its
//! duration, and the bytes held between two fetches (a reader that falls
//! behind loses frames, counted as `dropped`, instead of growing the
//! switch's memory). Costs nothing when no capture runs: one branch per
//! batch.

/// Bytes held between two fetches, at most.
pub const BUFFER_LIMIT: usize = 16 << 20;

/// What a capture takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CaptureSpec {
    /// The port.
    pub port: usize,
    /// Bytes kept of each frame (its length is recorded whole).
    pub snaplen: usize,
    /// Frames to take in all.
    pub max_frames: u64,
    /// Bytes (as kept) to take in all.
    pub max_bytes: u64,
    /// The switch's clock at which the capture ends, ns.
    pub until_ns: u64,
}

/// One captured frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Captured {
    /// The switch's clock when the frame was received or handed to the
    /// port, ns.
    pub time_ns: u64,
    /// Handed to the port (leaving by it), not received on it.
    pub outbound: bool,
    /// The frame's length.
    pub orig_len: u32,
    /// Where its kept bytes are in [`Capture::data`].
    pub start: usize,
    /// How many bytes were kept.
    pub len: usize,
}

/// A running capture.
#[derive(Debug)]
pub struct Capture {
    spec: CaptureSpec,
    frames: Vec<Captured>,
    data: Vec<u8>,
    /// Frames taken so far (fetched or not).
    taken: u64,
    /// Bytes taken so far.
    taken_bytes: u64,
    /// Frames lost because the buffer was full.
    dropped: u64,
    /// The limits are reached or the time is up: nothing more is taken.
    done: bool,
}

impl Capture {
    /// A capture to `spec`.
    pub fn new(spec: CaptureSpec) -> Capture {
        Capture {
            spec,
            frames: Vec::new(),
            data: Vec::new(),
            taken: 0,
            taken_bytes: 0,
            dropped: 0,
            done: false,
        }
    }

    /// What it takes.
    pub fn spec(&self) -> &CaptureSpec {
        &self.spec
    }

    /// Whether it takes frames of `port` still.
    #[inline]
    pub fn wants(&self, port: usize) -> bool {
        self.spec.port == port && !self.done
    }

    /// Records a frame of the port at `now_ns`; whether it was kept.
    pub fn record(&mut self, now_ns: u64, outbound: bool, frame: &[u8]) -> bool {
        if self.done {
            return false;
        }
        if now_ns >= self.spec.until_ns
            || self.taken >= self.spec.max_frames
            || self.taken_bytes >= self.spec.max_bytes
        {
            self.done = true;
            return false;
        }
        let len = frame.len().min(self.spec.snaplen);
        if self.data.len() + len > BUFFER_LIMIT {
            self.dropped += 1;
            return false;
        }
        self.frames.push(Captured {
            time_ns: now_ns,
            outbound,
            orig_len: frame.len() as u32,
            start: self.data.len(),
            len,
        });
        self.data.extend_from_slice(&frame[..len]);
        self.taken += 1;
        self.taken_bytes += len as u64;
        true
    }

    /// Forgets the last `n` frames recorded (handed to a port that then
    /// took fewer than it was given).
    pub fn unrecord(&mut self, n: usize) {
        for _ in 0..n {
            let Some(f) = self.frames.pop() else { return };
            self.data.truncate(f.start);
            self.taken -= 1;
            self.taken_bytes -= f.len as u64;
        }
    }

    /// Ends the capture if its time is up at `now_ns` (a capture on an
    /// idle port ends too).
    pub fn tick(&mut self, now_ns: u64) {
        if now_ns >= self.spec.until_ns {
            self.done = true;
        }
    }

    /// Whether nothing more will be taken.
    pub fn done(&self) -> bool {
        self.done
    }

    /// Frames taken, bytes taken, frames dropped (buffer full), so far.
    pub fn counts(&self) -> (u64, u64, u64) {
        (self.taken, self.taken_bytes, self.dropped)
    }

    /// The frames recorded since the last call, with the bytes their
    /// `start`/`len` point into; the buffer is empty afterwards.
    pub fn drain(&mut self) -> (Vec<Captured>, Vec<u8>) {
        (
            std::mem::take(&mut self.frames),
            std::mem::take(&mut self.data),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> CaptureSpec {
        CaptureSpec {
            port: 1,
            snaplen: 4,
            max_frames: 3,
            max_bytes: 100,
            until_ns: 1_000,
        }
    }

    #[test]
    fn frames_are_cut_to_the_snaplen_and_limited_in_number_and_time() {
        let mut c = Capture::new(spec());
        assert!(c.wants(1) && !c.wants(0));
        c.record(10, false, &[1, 2, 3, 4, 5, 6]);
        c.record(20, true, &[7, 8]);
        let (frames, data) = c.drain();
        assert_eq!(
            frames,
            vec![
                Captured {
                    time_ns: 10,
                    outbound: false,
                    orig_len: 6,
                    start: 0,
                    len: 4
                },
                Captured {
                    time_ns: 20,
                    outbound: true,
                    orig_len: 2,
                    start: 4,
                    len: 2
                },
            ]
        );
        assert_eq!(data, vec![1, 2, 3, 4, 7, 8]);
        // The third frame is the last one taken.
        c.record(30, false, &[9]);
        c.record(40, false, &[9]);
        assert!(c.done());
        assert_eq!(c.counts(), (3, 7, 0));
        assert_eq!(c.drain().0.len(), 1);
        // Time up.
        let mut c = Capture::new(spec());
        c.tick(999);
        assert!(!c.done());
        c.tick(1_000);
        assert!(c.done() && !c.wants(1));
    }

    #[test]
    fn a_frame_the_port_did_not_take_is_forgotten() {
        let mut c = Capture::new(spec());
        c.record(10, true, &[1, 2]);
        c.record(10, true, &[3, 4]);
        c.unrecord(1);
        assert_eq!(c.counts(), (1, 2, 0));
        let (frames, data) = c.drain();
        assert_eq!((frames.len(), data), (1, vec![1, 2]));
    }

    #[test]
    fn a_full_buffer_drops_and_counts() {
        let mut c = Capture::new(CaptureSpec {
            snaplen: 2048,
            max_frames: u64::MAX,
            max_bytes: u64::MAX,
            until_ns: u64::MAX,
            ..spec()
        });
        let frame = vec![0u8; 2048];
        for _ in 0..BUFFER_LIMIT / 2048 + 3 {
            c.record(1, false, &frame);
        }
        assert_eq!(c.counts().2, 3);
        c.drain();
        c.record(2, false, &frame);
        assert_eq!(c.counts().0, (BUFFER_LIMIT / 2048 + 1) as u64);
    }
}

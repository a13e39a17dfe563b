//! Shared-buffer ingress accounting that decides when to pause and resume
//! the sender on each ingress port (IEEE 802.1Qbb PFC), modelled on the
//! switch MMU of the LCMP paper's ns-3 simulator (HPCC's `switch-mmu.cc`,
//! configured by its `third.cc`). A pure model: no time, no I/O; the
//! caller says when a frame arrives ([`Mmu::admit`]) and when it leaves the
//! switch ([`Mmu::release`]), and sends the [`PfcAction`] it gets back out
//! of the port it names (a frame from [`lcmp_wire::pfc`]).
//!
//! # The accounting
//!
//! * Each ingress port owns a **reserve** (default 4 KiB) counted apart:
//!   its first bytes never touch the shared pool.
//! * Bytes beyond the reserve are drawn from the **shared pool**, as long
//!   as the port's shared use stays within the **dynamic threshold**
//!   `(buffer - sum of headrooms - sum of reserves - shared bytes used) >>
//!   shift`: the fuller the pool, the less any one port may take.
//! * A frame that would take the port's shared use past the threshold goes
//!   to the port's **headroom** (3 bandwidth-delay products of its link,
//!   what arrives while a pause travels to the sender and takes effect). A
//!   frame that fits neither is refused: a drop in a fabric that is meant
//!   to be lossless, so it is counted.
//! * A port is **paused** when it uses headroom or its shared use reaches
//!   the threshold, and **resumed** when its headroom is empty and its
//!   shared use is 0 or at least the resume offset (default 3 KiB) below
//!   the threshold (hysteresis, so that it does not flap).
//! * `shift` is 3 (a port may hold 1/8 of the free pool), less one for
//!   each halving it takes to bring the port's rate down to the hosts' NIC
//!   rate, down to 0: a fast uplink may hold more than a host port.
//!
//! One lossless class per port: the simulator keys this state by (port,
//! priority queue) and runs its RDMA data in one queue; the switch has one.
//!
//! # Where this model differs on purpose
//!
//! * **Integer widths.** The simulator holds every byte count in `u32`. Its
//!   headroom, `rate * delay / 8 / 1e9 * 3` with `rate` in bit/s and
//!   `delay` in ns, is computed in `u64` and stored in a `u32`: for a
//!   200 Gbit/s port on a 250 ms link, `rate * delay` = 5 x 10^19 already
//!   wraps `u64` (to 13,106,511,852,580,896,768), which gives
//!   4,914,941,943, stored as 619,974,647 bytes, where the true headroom is
//!   18,750,000,000 bytes. Its threshold (`buffer - headrooms - reserves -
//!   shared`, `u32`) wraps likewise when the headrooms exceed the buffer
//!   (619,974,647 bytes exceed a 128 MiB DCI switch buffer): to a large
//!   number instead of below 0, so the switch hardly ever pauses. Here
//!   everything is `u64` with saturating arithmetic (the headroom product
//!   in `u128`): headrooms are exact, and a buffer smaller than its
//!   headrooms and reserves gives a threshold of 0, which a shared use of
//!   0 already reaches: every port is paused by its first frame.
//! * **Admission.** The simulator refuses a frame when `len + headroom
//!   used > headroom and len + shared used > threshold` before it looks at
//!   the reserve, so a small frame that still fits its port's reserve is
//!   refused while the headroom is full and the frame alone exceeds the
//!   threshold. Here where the frame would go decides: a frame that fits
//!   the reserve is always admitted.
//! * **A refusal pauses.** The simulator sends no pause for a refused
//!   frame. A port that has headroom in use is paused already, but a
//!   headroom smaller than one frame (a link of almost no delay) is never
//!   used, and the shared use of a port need not land on its threshold
//!   exactly, so frame after frame could be dropped without a pause; here
//!   the refusal carries a pause if the port is not paused yet.
//! * **Over-release.** Releasing more than a port holds is a caller bug; it
//!   is clamped at 0 and counted, never an underflow.
//!
//! PFC pauses on the wire expire (their time is in quanta, at most 65,535
//! x 512 bit times); the simulator's receivers ignore the time and wait for
//! the resume. A caller that sends real frames re-sends the pause for every
//! port still [`paused`](Mmu::is_paused) before the time runs out.

use lcmp_wire::pfc::Pfc;

/// The priority RoCEv2 traffic is sent in and PFC pauses (the simulator's
/// priority group 3, which its RDMA data and ACKs use).
pub const ROCE_PRIORITY: u8 = 3;

/// The pause time a switch asks for, quanta: the longest there is (335 us
/// at 100 Gbit/s); the switch re-sends it while the port stays paused and
/// resumes the port explicitly, so a pause ends when the switch says so,
/// as the simulator's do.
pub const PAUSE_QUANTA: u16 = u16::MAX;

/// The reserve of each ingress port, bytes (the simulator's 4 KiB).
pub const DEFAULT_RESERVE_BYTES: u64 = 4 * 1024;
/// How far below the threshold a paused port's shared use must fall to be
/// resumed, bytes (the simulator's 3 KiB).
pub const DEFAULT_RESUME_OFFSET_BYTES: u64 = 3 * 1024;
/// The threshold shift of a port no faster than the hosts' NICs: 1/8 of the
/// free pool.
pub const DEFAULT_SHIFT: u32 = 3;
/// Headroom per port in bandwidth-delay products of its link (the
/// simulator's 3): what the sender puts on the link while a pause is on its
/// way (one delay) and what is on the link already (another), with room for
/// the frames each end is in the middle of.
pub const HEADROOM_BDPS: u64 = 3;

/// The largest frame a port's headroom must hold twice over, bytes: a
/// frame buffer of the switch ([`crate::frames::FRAME_SIZE`]).
pub const HEADROOM_FRAMES: u64 = crate::frames::FRAME_SIZE as u64;

const BITS_PER_BYTE: u128 = 8;
const NS_PER_S: u128 = 1_000_000_000;

/// The link behind one ingress port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortPfc {
    /// The port's rate, bit/s.
    pub rate_bps: u64,
    /// The one-way propagation delay of its link, ns.
    pub delay_ns: u64,
}

impl PortPfc {
    /// Its headroom: [`HEADROOM_BDPS`] bandwidth-delay products, floored
    /// per product as the simulator does (`rate * delay / 8 / 1e9 * 3`),
    /// exact up to `u64::MAX` bytes, where it saturates; and at least two
    /// products and two [`HEADROOM_FRAMES`] bytes (what is on the wire
    /// both ways while the pause travels, and the frames each end is in
    /// the middle of): the same at the simulator's rates and delays
    /// (100 Gbit/s, 1 us: 37,500 bytes), but a link so slow or short that
    /// three products are less than a frame (an experiment at 1/1000 of
    /// the rates) still holds what arrives after its pause.
    pub fn headroom_bytes(&self) -> u64 {
        let bdp = u128::from(self.rate_bps)
            .saturating_mul(u128::from(self.delay_ns))
            .checked_div(BITS_PER_BYTE.saturating_mul(NS_PER_S))
            .unwrap_or(0);
        let products = bdp.saturating_mul(u128::from(HEADROOM_BDPS));
        let with_frames = bdp
            .saturating_mul(2)
            .saturating_add(2 * u128::from(HEADROOM_FRAMES));
        u64::try_from(products.max(with_frames)).unwrap_or(u64::MAX)
    }

    /// Its threshold shift: [`DEFAULT_SHIFT`], less one each time the rate
    /// must be halved to come down to `nic_rate_bps`, down to 0 (100 Gbit/s
    /// NICs: 3 for 100, 2 for 150 or 200, 1 for 400, 0 for 800 Gbit/s).
    pub fn shift(&self, nic_rate_bps: u64) -> u32 {
        let mut shift = DEFAULT_SHIFT;
        let mut rate = self.rate_bps;
        while rate > nic_rate_bps && shift > 0 {
            shift = shift.saturating_sub(1);
            rate /= 2;
        }
        shift
    }
}

/// What the [`Mmu`] is built from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MmuConfig {
    /// The switch's whole packet buffer, bytes.
    pub buffer_bytes: u64,
    /// Each ingress port's reserve, bytes.
    pub reserve_bytes: u64,
    /// Hysteresis of the resume, bytes below the threshold.
    pub resume_offset_bytes: u64,
    /// The ingress ports, indexed as [`Mmu::admit`] names them.
    pub ports: Vec<PortPfc>,
    /// The rate of the hosts' NICs, bit/s: ports faster than this get a
    /// smaller shift ([`PortPfc::shift`]).
    pub nic_rate_bps: u64,
}

impl MmuConfig {
    /// `Err` with the reason when the buffer cannot keep the fabric
    /// lossless: it does not exceed the ports' headrooms and reserves (a
    /// DCI switch whose long-haul links would need gigabytes of headroom;
    /// the simulator's `u32` arithmetic wraps there and its threshold
    /// becomes too large to pause, so such a switch never pauses there
    /// either: a caller leaves PFC off on it).
    pub fn check_lossless(&self) -> Result<(), String> {
        let headroom = self
            .ports
            .iter()
            .fold(0u64, |sum, p| sum.saturating_add(p.headroom_bytes()));
        let reserves = self
            .reserve_bytes
            .saturating_mul(u64::try_from(self.ports.len()).unwrap_or(u64::MAX));
        let needed = headroom.saturating_add(reserves);
        if needed < self.buffer_bytes {
            Ok(())
        } else {
            Err(format!(
                "its ports' headroom ({headroom} bytes, {HEADROOM_BDPS} bandwidth-delay products each) and reserves ({reserves} bytes) leave nothing of its {} byte buffer to share",
                self.buffer_bytes
            ))
        }
    }

    /// A configuration with the simulator's reserve and resume offset.
    pub fn new(buffer_bytes: u64, ports: Vec<PortPfc>, nic_rate_bps: u64) -> Self {
        MmuConfig {
            buffer_bytes,
            reserve_bytes: DEFAULT_RESERVE_BYTES,
            resume_offset_bytes: DEFAULT_RESUME_OFFSET_BYTES,
            ports,
            nic_rate_bps,
        }
    }
}

/// A PFC frame to send: out of the port named, to the sender on its link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PfcAction {
    /// Pause the sender on this port.
    Pause(usize),
    /// Let the sender on this port go on.
    Resume(usize),
}

impl PfcAction {
    /// The port to send the frame out of.
    pub fn port(self) -> usize {
        match self {
            PfcAction::Pause(p) | PfcAction::Resume(p) => p,
        }
    }

    /// What the frame says, for [`lcmp_wire::pfc::write`]: `priority`
    /// paused for `pause_quanta`, or resumed (time 0). `None` for a
    /// priority above 7.
    pub fn pfc(self, priority: u8, pause_quanta: u16) -> Option<Pfc> {
        match self {
            PfcAction::Pause(_) => Pfc::pause(priority, pause_quanta),
            PfcAction::Resume(_) => Pfc::resume(priority),
        }
    }
}

/// A frame [`Mmu::admit`] refused: over its port's threshold with no
/// headroom left (or an unknown port). The caller drops it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Refused {
    /// A pause to send all the same, if the port was not paused yet (see
    /// the module notes: a headroom smaller than a frame).
    pub pause: Option<PfcAction>,
}

/// A port's limits, fixed at construction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortLimits {
    /// Its headroom, bytes.
    pub headroom_bytes: u64,
    /// Its threshold shift.
    pub shift: u32,
}

/// Where the bytes that arrived on a port and are still in the switch sit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortUsage {
    /// In its reserve (at most the reserve).
    pub reserve_bytes: u64,
    /// In the shared pool.
    pub shared_bytes: u64,
    /// In its headroom (at most its headroom).
    pub headroom_bytes: u64,
    /// Whether its sender is paused.
    pub paused: bool,
}

/// What happened on one port since the start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortCounters {
    /// Pauses sent out of the port.
    pub pauses_sent: u64,
    /// Resumes sent out of the port.
    pub resumes_sent: u64,
    /// Frames refused (drops in a lossless fabric).
    pub refused_frames: u64,
    /// Bytes of those frames.
    pub refused_bytes: u64,
    /// Releases of more bytes than the port held (a caller bug, clamped).
    pub over_releases: u64,
    /// Bytes released beyond what the port held.
    pub over_released_bytes: u64,
    /// The most headroom the port has used at once, bytes.
    pub peak_headroom_bytes: u64,
}

/// The counters of the whole switch: the ports' summed, and what belongs
/// to no port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MmuCounters {
    /// Every port's counters summed (`peak_headroom_bytes`: the largest).
    pub ports: PortCounters,
    /// The most shared-pool bytes in use at once.
    pub peak_shared_bytes: u64,
    /// Admissions and releases naming a port that does not exist (a caller
    /// bug; admissions are refused, releases ignored).
    pub unknown_port: u64,
}

/// One ingress port's state.
#[derive(Clone, Copy, Debug)]
struct PortState {
    limits: PortLimits,
    /// Bytes in reserve and shared pool together, as the simulator keeps
    /// them: the shared part is what exceeds the reserve.
    ingress_bytes: u64,
    headroom_used: u64,
    paused: bool,
    counters: PortCounters,
}

impl PortState {
    /// Marks the port paused and counts the pause it sends.
    fn pause(&mut self, port: usize) -> PfcAction {
        self.paused = true;
        self.counters.pauses_sent = self.counters.pauses_sent.saturating_add(1);
        PfcAction::Pause(port)
    }
}

/// The constants the threshold and the resume test need, apart from the
/// ports so that a port can be borrowed mutably beside them.
#[derive(Clone, Copy, Debug)]
struct Pool {
    /// The buffer less every headroom and reserve: what the pool can lend.
    lendable: u64,
    resume_offset: u64,
}

impl Pool {
    /// `(lendable - shared_used) >> shift`.
    fn threshold(self, shared_used: u64, shift: u32) -> u64 {
        self.lendable
            .saturating_sub(shared_used)
            .checked_shr(shift)
            .unwrap_or(0)
    }
}

/// Where an arriving frame goes.
enum Place {
    Reserve,
    Shared,
    Headroom,
    Refuse,
}

/// The ingress accounting of one switch (see the module documentation).
/// Allocates only in [`Mmu::new`].
#[derive(Clone, Debug)]
pub struct Mmu {
    pool: Pool,
    reserve_bytes: u64,
    /// Shared-pool bytes in use, all ports.
    shared_used: u64,
    peak_shared: u64,
    unknown_port: u64,
    ports: Vec<PortState>,
}

impl Mmu {
    /// An empty buffer for the ports of `config`, none paused.
    pub fn new(config: MmuConfig) -> Self {
        let ports: Vec<PortState> = config
            .ports
            .iter()
            .map(|p| PortState {
                limits: PortLimits {
                    headroom_bytes: p.headroom_bytes(),
                    shift: p.shift(config.nic_rate_bps),
                },
                ingress_bytes: 0,
                headroom_used: 0,
                paused: false,
                counters: PortCounters::default(),
            })
            .collect();
        let set_aside_bytes = ports.iter().fold(0u64, |sum, p| {
            sum.saturating_add(p.limits.headroom_bytes)
                .saturating_add(config.reserve_bytes)
        });
        Mmu {
            pool: Pool {
                lendable: config.buffer_bytes.saturating_sub(set_aside_bytes),
                resume_offset: config.resume_offset_bytes,
            },
            reserve_bytes: config.reserve_bytes,
            shared_used: 0,
            peak_shared: 0,
            unknown_port: 0,
            ports,
        }
    }

    /// Number of ports.
    pub fn port_count(&self) -> usize {
        self.ports.len()
    }

    /// Shared-pool bytes in use, all ports.
    pub fn shared_used(&self) -> u64 {
        self.shared_used
    }

    /// `port`'s dynamic threshold now, bytes of shared use.
    pub fn threshold(&self, port: usize) -> Option<u64> {
        let p = self.ports.get(port)?;
        Some(self.pool.threshold(self.shared_used, p.limits.shift))
    }

    /// `port`'s headroom and shift.
    pub fn limits(&self, port: usize) -> Option<PortLimits> {
        self.ports.get(port).map(|p| p.limits)
    }

    /// Where `port`'s bytes sit and whether it is paused.
    pub fn usage(&self, port: usize) -> Option<PortUsage> {
        let p = self.ports.get(port)?;
        Some(PortUsage {
            reserve_bytes: p.ingress_bytes.min(self.reserve_bytes),
            shared_bytes: p.ingress_bytes.saturating_sub(self.reserve_bytes),
            headroom_bytes: p.headroom_used,
            paused: p.paused,
        })
    }

    /// Whether `port`'s sender is paused (an unknown port is not).
    pub fn is_paused(&self, port: usize) -> bool {
        self.ports.get(port).is_some_and(|p| p.paused)
    }

    /// `port`'s counters.
    pub fn counters(&self, port: usize) -> Option<PortCounters> {
        self.ports.get(port).map(|p| p.counters)
    }

    /// The switch's counters.
    pub fn totals(&self) -> MmuCounters {
        let ports = self.ports.iter().fold(PortCounters::default(), |s, p| {
            let c = p.counters;
            PortCounters {
                pauses_sent: s.pauses_sent.saturating_add(c.pauses_sent),
                resumes_sent: s.resumes_sent.saturating_add(c.resumes_sent),
                refused_frames: s.refused_frames.saturating_add(c.refused_frames),
                refused_bytes: s.refused_bytes.saturating_add(c.refused_bytes),
                over_releases: s.over_releases.saturating_add(c.over_releases),
                over_released_bytes: s.over_released_bytes.saturating_add(c.over_released_bytes),
                peak_headroom_bytes: s.peak_headroom_bytes.max(c.peak_headroom_bytes),
            }
        });
        MmuCounters {
            ports,
            peak_shared_bytes: self.peak_shared,
            unknown_port: self.unknown_port,
        }
    }

    /// A frame of `len` bytes arrived on `port`: account for it. `Ok` with
    /// a pause to send if the port just crossed into pausing; [`Refused`]
    /// if it fits neither the shared pool nor the port's headroom (or the
    /// port does not exist), in which case nothing is accounted and the
    /// caller drops the frame.
    pub fn admit(&mut self, port: usize, len: u64) -> Result<Option<PfcAction>, Refused> {
        let pool = self.pool;
        let reserve = self.reserve_bytes;
        let Some(p) = self.ports.get_mut(port) else {
            self.unknown_port = self.unknown_port.saturating_add(1);
            return Err(Refused { pause: None });
        };
        let threshold = pool.threshold(self.shared_used, p.limits.shift);
        let new_ingress = p.ingress_bytes.saturating_add(len);
        let place = if new_ingress <= reserve {
            Place::Reserve
        } else if new_ingress.saturating_sub(reserve) <= threshold {
            Place::Shared
        } else if p.headroom_used.saturating_add(len) <= p.limits.headroom_bytes {
            Place::Headroom
        } else {
            Place::Refuse
        };
        match place {
            Place::Reserve => p.ingress_bytes = new_ingress,
            Place::Shared => {
                // Only the part beyond the reserve is the pool's: a frame
                // may straddle the two.
                let drawn = len.min(new_ingress.saturating_sub(reserve));
                p.ingress_bytes = new_ingress;
                self.shared_used = self.shared_used.saturating_add(drawn);
                self.peak_shared = self.peak_shared.max(self.shared_used);
            }
            Place::Headroom => {
                p.headroom_used = p.headroom_used.saturating_add(len);
                p.counters.peak_headroom_bytes =
                    p.counters.peak_headroom_bytes.max(p.headroom_used);
            }
            Place::Refuse => {
                p.counters.refused_frames = p.counters.refused_frames.saturating_add(1);
                p.counters.refused_bytes = p.counters.refused_bytes.saturating_add(len);
                let pause = (!p.paused).then(|| p.pause(port));
                return Err(Refused { pause });
            }
        }
        // The pool may have shrunk: the threshold is read again.
        let threshold = pool.threshold(self.shared_used, p.limits.shift);
        let shared = p.ingress_bytes.saturating_sub(reserve);
        let pause = !p.paused && (p.headroom_used > 0 || shared >= threshold);
        Ok(pause.then(|| p.pause(port)))
    }

    /// A frame of `len` bytes that arrived on `port` left the switch (sent
    /// or dropped after admission): give its bytes back, headroom first,
    /// then shared pool, then reserve, as the simulator does. A resume to
    /// send if the port was paused and now qualifies. Releasing more than
    /// the port holds is clamped and counted.
    pub fn release(&mut self, port: usize, len: u64) -> Option<PfcAction> {
        let pool = self.pool;
        let reserve = self.reserve_bytes;
        let Some(p) = self.ports.get_mut(port) else {
            self.unknown_port = self.unknown_port.saturating_add(1);
            return None;
        };
        let from_headroom = len.min(p.headroom_used);
        let rest = len.saturating_sub(from_headroom);
        let from_ingress = rest.min(p.ingress_bytes);
        let over = rest.saturating_sub(from_ingress);
        let from_shared = from_ingress.min(p.ingress_bytes.saturating_sub(reserve));
        p.headroom_used = p.headroom_used.saturating_sub(from_headroom);
        p.ingress_bytes = p.ingress_bytes.saturating_sub(from_ingress);
        if over > 0 {
            p.counters.over_releases = p.counters.over_releases.saturating_add(1);
            p.counters.over_released_bytes = p.counters.over_released_bytes.saturating_add(over);
        }
        self.shared_used = self.shared_used.saturating_sub(from_shared);
        let threshold = pool.threshold(self.shared_used, p.limits.shift);
        let shared = p.ingress_bytes.saturating_sub(reserve);
        let resume = p.paused
            && p.headroom_used == 0
            && (shared == 0 || shared.saturating_add(pool.resume_offset) <= threshold);
        resume.then(|| {
            p.paused = false;
            p.counters.resumes_sent = p.counters.resumes_sent.saturating_add(1);
            PfcAction::Resume(port)
        })
    }
}

/// PFC as a switch runs it: the [`Mmu`] and what it decides, turned into
/// frames to send (a pause, re-sent before it runs out while the port
/// stays paused, and a resume). Pure: the caller feeds it arrivals and
/// departures, asks for the frames due ([`PfcControl::frames_due`]) and
/// writes and queues them.
#[derive(Debug)]
pub struct PfcControl {
    mmu: Mmu,
    priority: u8,
    /// A paused port's pause is re-sent this long after the last, ns: half
    /// the pause time at the port's rate.
    refresh_ns: Vec<u64>,
    /// When a paused port's pause is due again (`u64::MAX`: not paused).
    next_pause_ns: Vec<u64>,
    /// Resumes decided and not sent yet, by port.
    resume_due: Vec<bool>,
    /// Ports with something due now (a pause or a resume decided).
    pending: bool,
}

/// A PFC frame to send out of `port`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PfcFrame {
    /// The port it leaves by (the paused peer's).
    pub port: usize,
    /// What it says.
    pub pfc: Pfc,
    /// A pause (else a resume).
    pub pause: bool,
}

impl PfcControl {
    /// PFC over `config`, pausing `priority`; refused with the reason when
    /// the buffer cannot keep the ports lossless
    /// ([`MmuConfig::check_lossless`]).
    pub fn new(config: MmuConfig, priority: u8) -> Result<Self, String> {
        config.check_lossless()?;
        if Pfc::pause(priority, 0).is_none() {
            return Err(format!("PFC priority {priority}: priorities are 0 to 7"));
        }
        let refresh_ns = config
            .ports
            .iter()
            .map(|p| {
                // Unshaped ports (rate 0) are taken at 100 Gbit/s.
                let rate = if p.rate_bps == 0 {
                    100_000_000_000
                } else {
                    p.rate_bps
                };
                lcmp_wire::pfc::quanta_to_ns(PAUSE_QUANTA, rate).unwrap_or(1) / 2
            })
            .collect();
        let n = config.ports.len();
        Ok(PfcControl {
            mmu: Mmu::new(config),
            priority,
            refresh_ns,
            next_pause_ns: vec![u64::MAX; n],
            resume_due: vec![false; n],
            pending: false,
        })
    }

    /// The accounting.
    pub fn mmu(&self) -> &Mmu {
        &self.mmu
    }

    /// A frame of `len` bytes arrived on `port`: whether it may be queued
    /// (else it is a drop the accounting counted).
    #[inline]
    pub fn admit(&mut self, port: usize, len: u32) -> bool {
        match self.mmu.admit(port, u64::from(len)) {
            Ok(action) => {
                self.act(action);
                true
            }
            Err(refused) => {
                self.act(refused.pause);
                false
            }
        }
    }

    /// A frame of `len` bytes that arrived on `port` left the switch (or
    /// its buffer: departed, dropped, flushed).
    #[inline]
    pub fn release(&mut self, port: usize, len: u32) {
        let action = self.mmu.release(port, u64::from(len));
        self.act(action);
    }

    fn act(&mut self, action: Option<PfcAction>) {
        match action {
            None => {}
            Some(PfcAction::Pause(p)) => {
                if let Some(t) = self.next_pause_ns.get_mut(p) {
                    // Sent at the next `frames_due`.
                    *t = 0;
                    self.pending = true;
                }
                if let Some(r) = self.resume_due.get_mut(p) {
                    *r = false;
                }
            }
            Some(PfcAction::Resume(p)) => {
                if let Some(t) = self.next_pause_ns.get_mut(p) {
                    *t = u64::MAX;
                }
                if let Some(r) = self.resume_due.get_mut(p) {
                    *r = true;
                    self.pending = true;
                }
            }
        }
    }

    /// When a frame is due next (a pause to re-send), or `None`.
    pub fn next_due_ns(&self) -> Option<u64> {
        if self.pending {
            return Some(0);
        }
        self.next_pause_ns
            .iter()
            .copied()
            .filter(|&t| t != u64::MAX)
            .min()
    }

    /// Appends the frames due at `now_ns` to `out`: pauses decided or due
    /// for their refresh, and resumes decided.
    pub fn frames_due(&mut self, now_ns: u64, out: &mut Vec<PfcFrame>) {
        if !self.pending && self.next_due_ns().is_none_or(|t| t > now_ns) {
            return;
        }
        self.pending = false;
        for port in 0..self.next_pause_ns.len() {
            if self.next_pause_ns[port] <= now_ns {
                if let Some(pfc) = Pfc::pause(self.priority, PAUSE_QUANTA) {
                    out.push(PfcFrame {
                        port,
                        pfc,
                        pause: true,
                    });
                }
                self.next_pause_ns[port] = now_ns.saturating_add(self.refresh_ns[port].max(1));
            }
            if std::mem::take(&mut self.resume_due[port]) {
                if let Some(pfc) = Pfc::resume(self.priority) {
                    out.push(PfcFrame {
                        port,
                        pfc,
                        pause: false,
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: u64 = 1_000_000_000;
    const MIB: u64 = 1024 * 1024;

    fn ports(rates_gbps: &[u64], delay_ns: u64) -> Vec<PortPfc> {
        rates_gbps
            .iter()
            .map(|&r| PortPfc {
                rate_bps: r * G,
                delay_ns,
            })
            .collect()
    }

    /// Four 100 Gbit/s ports with 1 us links, 100 Gbit/s NICs, 1 MiB.
    fn four_port() -> Mmu {
        Mmu::new(MmuConfig::new(MIB, ports(&[100; 4], 1_000), 100 * G))
    }

    #[test]
    fn headroom_and_shift() {
        // 100 Gbit/s x 1 us = 100,000 bits = 12,500 B; x 3 = 37,500.
        let p = PortPfc {
            rate_bps: 100 * G,
            delay_ns: 1_000,
        };
        assert_eq!(p.headroom_bytes(), 37_500);
        assert_eq!(p.shift(100 * G), 3);
        // 400 Gbit/s: 50,000 B per BDP, 150,000; halved twice to reach
        // 100: shift 1.
        let fast = PortPfc {
            rate_bps: 400 * G,
            ..p
        };
        assert_eq!(fast.headroom_bytes(), 150_000);
        assert_eq!(fast.shift(100 * G), 1);
        // 200 -> 2 (one halving), 150 -> 2 (150 > 100, halved to 75),
        // 800 -> 0, 1,600 -> 0 (floor), 25 -> 3, slower than the NIC -> 3.
        let shift = |gbps: u64| {
            PortPfc {
                rate_bps: gbps * G,
                delay_ns: 0,
            }
            .shift(100 * G)
        };
        assert_eq!(
            [200, 150, 800, 1_600, 25, 100].map(shift),
            [2, 2, 0, 0, 3, 3]
        );
        // A zero delay still has two frames of headroom, as any link too
        // short for three products to hold them: 2 x 2,048.
        assert_eq!(PortPfc { delay_ns: 0, ..p }.headroom_bytes(), 4_096);
        // 100 Gbit/s, 1 us: 3 x 12,500 = 37,500 > 2 x 12,500 + 4,096.
        assert_eq!(
            PortPfc {
                delay_ns: 1_000,
                ..p
            }
            .headroom_bytes(),
            37_500
        );
    }

    #[test]
    fn simulator_headroom_wraps_where_ours_does_not() {
        // third.cc: uint32_t headroom = rate * delay / 8 / 1000000000 * 3,
        // rate and delay u64. 200e9 x 250e6 = 5e19 > 2^64 (1.8447e19).
        let (rate, delay) = (200 * G, 250_000_000u64);
        let product = rate.wrapping_mul(delay);
        assert_eq!(product, 13_106_511_852_580_896_768); // 5e19 - 2 x 2^64
        let sim = (product / 8 / G * 3) as u32;
        assert_eq!(product / 8 / G * 3, 4_914_941_943);
        assert_eq!(sim, 619_974_647); // 4,914,941,943 - 2^32
        let ours = PortPfc {
            rate_bps: rate,
            delay_ns: delay,
        };
        // 25e9 B/s x 0.25 s = 6.25e9 B per BDP, x 3.
        assert_eq!(ours.headroom_bytes(), 18_750_000_000);
        // The extreme saturates rather than wraps.
        let huge = PortPfc {
            rate_bps: u64::MAX,
            delay_ns: u64::MAX,
        };
        assert_eq!(huge.headroom_bytes(), u64::MAX);
    }

    /// The worked example: 1,000-byte frames from port 0 of `four_port`.
    ///
    /// Set aside: headrooms 4 x 37,500 = 150,000, reserves 4 x 4,096 =
    /// 16,384; the pool is 1,048,576 - 166,384 = 882,192 and the threshold
    /// of an idle switch 882,192 >> 3 = 110,274.
    ///
    /// * Frames 1-4 fill the reserve (4,000 <= 4,096).
    /// * Frame 5 brings 5,000 B, 904 beyond the reserve: 904 shared.
    /// * After frame k (5 <= k <= 102) the shared use is S = 1,000k -
    ///   4,096 and the threshold (882,192 - S) >> 3. Frame k goes to the
    ///   pool while 1,000k - 4,096 <= (887,288 - 1,000k) / 8 (the threshold
    ///   before it), that is 9,000k <= 920,056, k <= 102; the pause needs S
    ///   >= (886,288 - 1,000k) / 8 after it, 9,000k >= 919,056, k >= 103.
    /// * After frame 102: S = 97,904, threshold 784,288 >> 3 = 98,036.
    /// * Frame 103 would make S 98,904 > 98,036: it goes to the headroom
    ///   (1,000 B), and the headroom in use sends the pause.
    /// * Frames 104-139 fill the headroom to 37,000 (37 frames); frame
    ///   140 would need 38,000 > 37,500: refused, already paused.
    /// * Releases take headroom first: releases 1-37 empty it. Then S =
    ///   97,904 - 1,000j and the threshold (784,288 + 1,000j) >> 3 =
    ///   98,036 + 125j after j more; resume needs S + 3,072 <= threshold,
    ///   100,976 - 1,000j <= 98,036 + 125j, j >= 2.61: release 40.
    #[test]
    fn worked_example_pause_headroom_refusal_resume() {
        let mut m = four_port();
        assert_eq!(m.threshold(0), Some(110_274));
        assert_eq!(m.threshold(3), Some(110_274));
        for k in 1..=4 {
            assert_eq!(m.admit(0, 1_000), Ok(None), "frame {k}");
        }
        assert_eq!(
            m.usage(0),
            Some(PortUsage {
                reserve_bytes: 4_000,
                ..PortUsage::default()
            })
        );
        assert_eq!(m.admit(0, 1_000), Ok(None), "frame 5");
        assert_eq!(m.shared_used(), 904);
        assert_eq!(m.usage(0).unwrap().reserve_bytes, 4_096);
        // (882,192 - 904) >> 3 = 881,288 / 8 = 110,161.
        assert_eq!(m.threshold(0), Some(110_161));
        for k in 6..=102 {
            assert_eq!(m.admit(0, 1_000), Ok(None), "frame {k}");
        }
        assert_eq!(m.shared_used(), 97_904);
        assert_eq!(m.threshold(0), Some(98_036));
        assert!(!m.is_paused(0));

        assert_eq!(
            m.admit(0, 1_000),
            Ok(Some(PfcAction::Pause(0))),
            "frame 103"
        );
        assert_eq!(
            m.usage(0),
            Some(PortUsage {
                reserve_bytes: 4_096,
                shared_bytes: 97_904,
                headroom_bytes: 1_000,
                paused: true,
            })
        );
        // Headroom does not shrink the pool.
        assert_eq!(m.threshold(0), Some(98_036));
        for k in 104..=139 {
            assert_eq!(m.admit(0, 1_000), Ok(None), "frame {k}, paused already");
        }
        assert_eq!(m.usage(0).unwrap().headroom_bytes, 37_000);
        assert_eq!(m.admit(0, 1_000), Err(Refused { pause: None }), "frame 140");
        let c = m.counters(0).unwrap();
        assert_eq!(
            (c.pauses_sent, c.refused_frames, c.refused_bytes),
            (1, 1, 1_000)
        );
        assert_eq!(c.peak_headroom_bytes, 37_000);
        // Another port is untouched, but sees the smaller pool.
        assert_eq!(m.usage(1), Some(PortUsage::default()));
        assert_eq!(m.threshold(1), Some(98_036));

        for r in 1..=39 {
            assert_eq!(m.release(0, 1_000), None, "release {r}");
        }
        assert_eq!(m.usage(0).unwrap().headroom_bytes, 0);
        assert_eq!(m.shared_used(), 95_904);
        // (784,288 + 2,000) >> 3 = 98,286 < 95,904 + 3,072 = 98,976.
        assert_eq!(m.threshold(0), Some(98_286));
        assert_eq!(
            m.release(0, 1_000),
            Some(PfcAction::Resume(0)),
            "release 40"
        );
        // 94,904 + 3,072 = 97,976 <= 787,288 >> 3 = 98,411.
        assert_eq!(m.threshold(0), Some(98_411));
        assert!(!m.is_paused(0));
        let t = m.totals();
        assert_eq!((t.ports.pauses_sent, t.ports.resumes_sent), (1, 1));
        assert_eq!(t.peak_shared_bytes, 97_904);
        assert_eq!(t.ports.over_released_bytes, 0);
    }

    #[test]
    fn a_faster_port_may_hold_more() {
        // Port 3 at 400 Gbit/s: headroom 150,000, shift 1. Set aside
        // 3 x 37,500 + 150,000 + 16,384 = 278,884; pool 1,048,576 -
        // 278,884 = 769,692: thresholds 769,692 >> 3 = 96,211 for the
        // 100 Gbit/s ports, 769,692 >> 1 = 384,846 for port 3.
        let mut m = Mmu::new(MmuConfig::new(
            MIB,
            ports(&[100, 100, 100, 400], 1_000),
            100 * G,
        ));
        assert_eq!(
            m.limits(3),
            Some(PortLimits {
                headroom_bytes: 150_000,
                shift: 1
            })
        );
        assert_eq!(m.threshold(0), Some(96_211));
        assert_eq!(m.threshold(3), Some(384_846));
        // 200 frames of 1,000 B on port 3: S = 195,904, threshold
        // (769,692 - 195,904) >> 1 = 286,894: no pause, where a 100 Gbit/s
        // port pauses once S >= (769,692 - S) >> 3, near S = 85,500.
        for _ in 0..200 {
            assert_eq!(m.admit(3, 1_000), Ok(None));
        }
        assert_eq!(m.usage(3).unwrap().shared_bytes, 195_904);
        assert_eq!(m.threshold(3), Some(286_894));
        // The slow ports' threshold shrank with the pool: 573,788 >> 3.
        assert_eq!(m.threshold(0), Some(71_723));
    }

    #[test]
    fn a_link_without_delay_still_holds_two_frames_after_its_pause() {
        // One port with no link delay: headroom 2 x 2,048 = 4,096 (no
        // bandwidth-delay product). 10,000 B buffer: pool 10,000 - 4,096 -
        // 4,096 = 1,808, threshold 1,808 >> 3 = 226. Frames 1-4 fill the
        // reserve; frame 5 would put 904 > 226 in the pool: headroom, and
        // the sender paused; frames 6-8 fill the headroom to 4,000; frame
        // 9 would take it to 5,000 > 4,096: refused.
        let mut m = Mmu::new(MmuConfig::new(10_000, ports(&[100], 0), 100 * G));
        assert_eq!(m.threshold(0), Some(226));
        for _ in 0..4 {
            assert_eq!(m.admit(0, 1_000), Ok(None));
        }
        assert_eq!(m.admit(0, 1_000), Ok(Some(PfcAction::Pause(0))));
        for _ in 0..3 {
            assert_eq!(m.admit(0, 1_000), Ok(None));
        }
        assert_eq!(m.usage(0).unwrap().headroom_bytes, 4_000);
        assert_eq!(m.admit(0, 1_000), Err(Refused { pause: None }));
        assert_eq!(m.counters(0).unwrap().refused_frames, 1);
        assert_eq!(m.counters(0).unwrap().pauses_sent, 1);
        // The headroom empties first (4 releases), then the pool is empty:
        // the 4th release resumes.
        for _ in 0..3 {
            assert_eq!(m.release(0, 1_000), None);
        }
        assert_eq!(m.release(0, 1_000), Some(PfcAction::Resume(0)));
        assert_eq!(m.usage(0).unwrap().reserve_bytes, 4_000);
    }

    #[test]
    fn a_buffer_smaller_than_its_set_asides_pauses_at_once() {
        // 100 KiB against 4 x (37,500 + 4,096) = 166,384 set aside: the
        // threshold is 0, where the simulator's u32 wraps to (2^32 -
        // 63,984) >> 3 = 536,862,914. A shared use of 0 reaches it (the
        // simulator's `>=`: no pool left to draw from), so the first frame
        // pauses though it sits in the reserve.
        let mut m = Mmu::new(MmuConfig::new(100 * 1024, ports(&[100; 4], 1_000), 100 * G));
        assert_eq!(m.threshold(0), Some(0));
        assert_eq!((100u32 * 1024).wrapping_sub(166_384) >> 3, 536_862_914);
        assert_eq!(m.admit(0, 1_000), Ok(Some(PfcAction::Pause(0))));
        assert_eq!(m.usage(0).unwrap().reserve_bytes, 1_000);
        for _ in 2..=4 {
            assert_eq!(m.admit(0, 1_000), Ok(None));
        }
        // Frame 5: 904 beyond the reserve > 0: to the headroom.
        assert_eq!(m.admit(0, 1_000), Ok(None));
        assert_eq!(m.usage(0).unwrap().headroom_bytes, 1_000);
        // Its release empties the headroom; shared use 0: resume.
        assert_eq!(m.release(0, 1_000), Some(PfcAction::Resume(0)));
        assert_eq!(m.usage(0).unwrap().reserve_bytes, 4_000);
    }

    #[test]
    fn a_frame_that_fits_the_reserve_is_admitted_with_the_headroom_full() {
        // 10,000 B against 37,500 + 4,096 set aside: threshold 0. 3,000 B
        // in the reserve (paused at once, 0 >= 0); 1,500 B frames then
        // straddle the reserve (4,500 - 4,096 = 404 > 0) and go to the
        // headroom, 25 of them filling its 37,500; the 26th is refused.
        let mut m = Mmu::new(MmuConfig::new(10_000, ports(&[100], 1_000), 100 * G));
        assert_eq!(m.admit(0, 3_000), Ok(Some(PfcAction::Pause(0))));
        for _ in 0..25 {
            assert_eq!(m.admit(0, 1_500), Ok(None));
        }
        assert_eq!(m.usage(0).unwrap().headroom_bytes, 37_500);
        assert_eq!(m.admit(0, 1_500), Err(Refused { pause: None }));
        // 64 B fit the reserve (3,064 <= 4,096): admitted, where the
        // simulator's check (64 + 37,500 > 37,500 and 64 + 0 > 0) refuses.
        assert_eq!(m.admit(0, 64), Ok(None));
        assert_eq!(m.usage(0).unwrap().reserve_bytes, 3_064);
    }

    #[test]
    fn release_never_underflows() {
        let mut m = four_port();
        assert_eq!(m.admit(2, 1_000), Ok(None));
        assert_eq!(m.release(2, 5_000), None);
        assert_eq!(m.usage(2), Some(PortUsage::default()));
        assert_eq!(m.release(2, u64::MAX), None);
        let c = m.counters(2).unwrap();
        assert_eq!((c.over_releases, c.over_released_bytes), (2, u64::MAX));
        assert_eq!(m.shared_used(), 0);
        // Unknown ports: refused, ignored, counted.
        assert_eq!(m.admit(4, 1_000), Err(Refused { pause: None }));
        assert_eq!(m.release(9, 1_000), None);
        assert_eq!(m.totals().unknown_port, 2);
        assert_eq!(m.threshold(4), None);
        assert!(!m.is_paused(4));
        // Huge frames saturate, never wrap.
        assert_eq!(
            m.admit(0, u64::MAX),
            Err(Refused {
                pause: Some(PfcAction::Pause(0))
            })
        );
        assert_eq!(
            m.usage(0),
            Some(PortUsage {
                paused: true,
                ..PortUsage::default()
            })
        );
    }

    #[test]
    fn the_action_as_a_frame() {
        assert_eq!(PfcAction::Pause(2).port(), 2);
        assert_eq!(
            PfcAction::Pause(2).pfc(3, 0xffff),
            Some(Pfc {
                enable: 0x0008,
                quanta: [0, 0, 0, 0xffff, 0, 0, 0, 0]
            })
        );
        assert_eq!(
            PfcAction::Resume(2).pfc(3, 0xffff).and_then(|p| p.time(3)),
            Some(0)
        );
        assert_eq!(PfcAction::Resume(2).pfc(8, 0), None);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Admit(usize, u64),
        Release(usize, u64),
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            (0usize..4, 0u64..3_000).prop_map(|(p, l)| Op::Admit(p, l)),
            (0usize..4, 0u64..3_000).prop_map(|(p, l)| Op::Release(p, l)),
        ]
    }

    proptest::proptest! {
        /// Any interleaving: the pool's use is the ports' shared bytes
        /// summed, headroom and reserve stay within bounds, a pause and a
        /// resume alternate per port, and only ports over their threshold
        /// or in headroom are paused right after an admission.
        #[test]
        fn accounting_stays_consistent(
            buffer in 0u64..400_000,
            delay in 0u64..2_000,
            ops in proptest::collection::vec(op(), 0..400),
        ) {
            let mut m = Mmu::new(MmuConfig::new(buffer, ports(&[100, 100, 200, 400], delay), 100 * G));
            for op in ops {
                match op {
                    Op::Admit(p, len) => {
                        let was = m.is_paused(p);
                        match m.admit(p, len) {
                            Ok(Some(a)) => {
                                proptest::prop_assert_eq!(a, PfcAction::Pause(p));
                                proptest::prop_assert!(!was);
                                let u = m.usage(p).unwrap();
                                proptest::prop_assert!(
                                    u.headroom_bytes > 0 || u.shared_bytes >= m.threshold(p).unwrap()
                                );
                            }
                            Err(Refused { pause: Some(a) }) => {
                                proptest::prop_assert_eq!(a, PfcAction::Pause(p));
                                proptest::prop_assert!(!was);
                            }
                            Ok(None) | Err(Refused { pause: None }) => {
                                proptest::prop_assert_eq!(m.is_paused(p), was);
                            }
                        }
                    }
                    Op::Release(p, len) => {
                        let was = m.is_paused(p);
                        match m.release(p, len) {
                            Some(a) => {
                                proptest::prop_assert_eq!(a, PfcAction::Resume(p));
                                proptest::prop_assert!(was && !m.is_paused(p));
                            }
                            None => proptest::prop_assert_eq!(m.is_paused(p), was),
                        }
                    }
                }
                let mut shared = 0;
                for p in 0..m.port_count() {
                    let u = m.usage(p).unwrap();
                    let l = m.limits(p).unwrap();
                    proptest::prop_assert!(u.reserve_bytes <= DEFAULT_RESERVE_BYTES);
                    proptest::prop_assert!(u.headroom_bytes <= l.headroom_bytes);
                    proptest::prop_assert!(u.shared_bytes == 0 || u.reserve_bytes == DEFAULT_RESERVE_BYTES);
                    let c = m.counters(p).unwrap();
                    proptest::prop_assert_eq!(c.pauses_sent - c.resumes_sent, u64::from(u.paused));
                    shared += u.shared_bytes;
                }
                proptest::prop_assert_eq!(m.shared_used(), shared);
                proptest::prop_assert!(m.totals().peak_shared_bytes >= shared);
            }
        }
    }

    #[test]
    fn control_sends_the_pause_refreshes_it_and_then_the_resume() {
        // Four 100 Gbit/s, 1 us ports, 1 MiB: port 0 pauses at its 103rd
        // frame of 1,000 B (the worked example above).
        let mut c = PfcControl::new(
            MmuConfig::new(MIB, ports(&[100; 4], 1_000), 100 * G),
            ROCE_PRIORITY,
        )
        .unwrap();
        let mut out = Vec::new();
        for _ in 0..102 {
            assert!(c.admit(0, 1_000));
        }
        assert_eq!(c.next_due_ns(), None);
        assert!(c.admit(0, 1_000));
        assert_eq!(c.next_due_ns(), Some(0));
        c.frames_due(5_000, &mut out);
        let pause = Pfc::pause(ROCE_PRIORITY, PAUSE_QUANTA).unwrap();
        assert_eq!(
            out,
            [PfcFrame {
                port: 0,
                pfc: pause,
                pause: true
            }]
        );
        // 65,535 quanta of 512 bits at 100 Gbit/s: 335,539.2 ns, rounded
        // up to 335,540; re-sent after half of it, 167,770 ns.
        assert_eq!(c.next_due_ns(), Some(5_000 + 167_770));
        out.clear();
        c.frames_due(5_000 + 167_769, &mut out);
        assert!(out.is_empty());
        c.frames_due(5_000 + 167_770, &mut out);
        assert_eq!(
            out,
            [PfcFrame {
                port: 0,
                pfc: pause,
                pause: true
            }]
        );
        // Everything leaves: the resume goes (once), the refresh stops.
        out.clear();
        for _ in 0..103 {
            c.release(0, 1_000);
        }
        c.frames_due(400_000, &mut out);
        let resume = Pfc::resume(ROCE_PRIORITY).unwrap();
        assert_eq!(
            out,
            [PfcFrame {
                port: 0,
                pfc: resume,
                pause: false
            }]
        );
        assert_eq!(c.next_due_ns(), None);
        out.clear();
        c.frames_due(10_000_000, &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn control_refuses_a_buffer_that_cannot_be_lossless() {
        // A DCI switch's 128 MiB against a 200 Gbit/s, 250 ms link's 18.75
        // GB of headroom.
        let e = PfcControl::new(
            MmuConfig::new(128 * MIB, ports(&[200], 250_000_000), 100 * G),
            ROCE_PRIORITY,
        )
        .unwrap_err();
        assert!(e.contains("18750000000"), "{e}");
    }
}

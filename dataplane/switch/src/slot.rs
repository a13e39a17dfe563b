//! What a rotor network's switches share: the slot clock and per-port
//! traffic counts. Its own module so that the rotor ([`crate::rotor`]) and
//! the ToR ([`crate::rotor_tor`], [`crate::tor_path`]) depend on it, not on
//! each other.

/// Where in the schedule an instant falls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotPosition {
    /// Slots since the epoch.
    pub slot: u64,
    /// Time since the slot began, ns.
    pub offset_ns: u64,
    /// Within the slot's reconfiguration (its first `reconfig_ns`).
    pub reconfiguring: bool,
    /// When the slot ends, ns of the clock.
    pub end_ns: u64,
}

/// Slot timing: slot k spans `[epoch + k Delta, epoch + (k + 1) Delta)`,
/// the first `Delta_r` of it reconfiguring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotClock {
    /// The shared start of slot 0, ns of the clock.
    pub epoch_ns: u64,
    /// Delta, ns (at least 1).
    pub slot_ns: u64,
    /// Delta_r, ns (below `slot_ns`).
    pub reconfig_ns: u64,
}

impl SlotClock {
    /// The position of `now_ns` (instants before the epoch are slot 0,
    /// reconfiguring).
    pub fn at(&self, now_ns: u64) -> SlotPosition {
        let slot_ns = self.slot_ns.max(1);
        let Some(since) = now_ns.checked_sub(self.epoch_ns) else {
            return SlotPosition {
                slot: 0,
                offset_ns: 0,
                reconfiguring: true,
                end_ns: self.epoch_ns.saturating_add(slot_ns),
            };
        };
        let slot = since / slot_ns;
        let offset_ns = since % slot_ns;
        SlotPosition {
            slot,
            offset_ns,
            reconfiguring: offset_ns < self.reconfig_ns,
            end_ns: self
                .epoch_ns
                .saturating_add(slot.saturating_add(1).saturating_mul(slot_ns)),
        }
    }

    /// The earliest instant from `t` on that lies at least `margin_ns`
    /// before the next slot opening (the end of a reconfiguration, when a
    /// ToR sends the slot's first frame): `t` itself if it does, else that
    /// opening (right after it the next one is a slot away). Housekeeping
    /// that may take a while (the stats file, control requests) waits for
    /// such an instant so that it never delays an opening. `t` when no
    /// slot has room for the margin.
    pub fn quiet_from(&self, t: u64, margin_ns: u64) -> u64 {
        let slot_ns = self.slot_ns.max(1);
        if margin_ns >= slot_ns {
            return t;
        }
        let first = self.epoch_ns.saturating_add(self.reconfig_ns);
        let next_opening = match t.checked_sub(first) {
            None => first,
            Some(since) => first.saturating_add((since / slot_ns + 1).saturating_mul(slot_ns)),
        };
        if t.saturating_add(margin_ns) <= next_opening {
            t
        } else {
            next_opening
        }
    }
}

/// Frames and bytes through one port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortTraffic {
    /// Frames received.
    pub rx_frames: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Frames sent.
    pub tx_frames: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
}

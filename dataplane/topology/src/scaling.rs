//! An experiment's scaling, owned in one place.
//!
//! A testbed that cannot run a network at its own rates and sizes runs it
//! slower: rates divided by `rate`, buffers by `buffer`, flow sizes by
//! `size`, and time stretched by `time` (delays and every time constant
//! multiplied, rates divided once more, so every bandwidth-delay product
//! in bytes stays what `rate` alone gives). [`Scaling`] is the one type
//! that holds those factors and the only code that applies them: to the
//! emulated links ([`Scaling::emulated`]), to durations of the network's
//! time ([`Scaling::duration_ns`]: switches' sampling intervals and ECN
//! link times, hosts' DCQCN timers, NAK interval and timeouts), to rates
//! ([`Scaling::rate_bps`]) and to flow sizes ([`Scaling::size_bytes`]).
//!
//! What a policy decides from (C_path's delays and capacities, capacity
//! classes, thresholds relative to a link) always comes from the unscaled
//! network: a switch reads the network as the user wrote it and applies a
//! `Scaling` to its emulation and its clocks only, so an experiment's
//! scaling never changes a decision (`lcmp-switch`'s config tests check the
//! route tables and kept sets at several scalings).
//!
//! On the command line a scaling is one value, `rate=1000,time=10` (the
//! factors left out are 1), rendered by `Display` and read by `FromStr` in
//! this module alone.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::{Topology, TopologyError};

/// An experiment's scale factors (each finite and > 0; 1 = unscaled).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scaling {
    /// Link (and host line) rates are divided by this.
    pub rate: f64,
    /// Buffers are divided by this (by default the rate factor: bytes per
    /// bandwidth-delay product are kept).
    pub buffer: f64,
    /// Flow sizes are divided by this.
    pub size: f64,
    /// Time is stretched by this: delays and time constants multiplied,
    /// rates divided once more.
    pub time: f64,
}

impl Default for Scaling {
    fn default() -> Self {
        Scaling::NONE
    }
}

/// The largest time dilation accepted.
pub const MAX_TIME_SCALE: f64 = 1e6;

impl Scaling {
    /// No scaling: the network at its own rates, sizes and times.
    pub const NONE: Scaling = Scaling {
        rate: 1.0,
        buffer: 1.0,
        size: 1.0,
        time: 1.0,
    };

    /// Rates and buffers divided by `rate`, nothing else scaled.
    pub fn rates(rate: f64) -> Scaling {
        Scaling {
            rate,
            buffer: rate,
            ..Scaling::NONE
        }
    }

    /// Checks every factor; the error names the factor and what it does.
    pub fn check(&self) -> Result<(), String> {
        let positive = |v: f64, what: &str, does: &str| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(format!(
                    "the {what} scale must be a positive number ({does}), not {v}"
                ))
            }
        };
        positive(self.rate, "rate", "rates are divided by it")?;
        positive(self.buffer, "buffer", "buffers are divided by it")?;
        positive(self.size, "size", "flow sizes are divided by it")?;
        positive(self.time, "time", "delays are multiplied by it")?;
        if self.time > MAX_TIME_SCALE {
            return Err(format!(
                "the time scale must be at most {MAX_TIME_SCALE}, not {}",
                self.time
            ));
        }
        Ok(())
    }

    /// True when nothing is scaled.
    pub fn is_none(&self) -> bool {
        *self == Scaling::NONE
    }

    /// What rates are divided by in all: the rate scale times the time
    /// dilation.
    pub fn rate_divisor(&self) -> f64 {
        self.rate * self.time
    }

    /// The network as it is emulated: every link's and host's rate divided
    /// by [`Scaling::rate_divisor`], its buffer by the buffer scale, its
    /// delay multiplied by the time scale. Errors name the link or host
    /// whose value cannot be scaled.
    pub fn emulated(&self, topo: &Topology) -> Result<Topology, TopologyError> {
        if self.is_none() {
            return Ok(topo.clone());
        }
        let t = topo.scaled_apart(self.rate_divisor(), self.buffer)?;
        if self.time == 1.0 {
            Ok(t)
        } else {
            t.dilated(self.time)
        }
    }

    /// A duration of the network's time, ns, as the emulation runs it.
    pub fn duration_ns(&self, ns: u64) -> u64 {
        if self.time == 1.0 {
            return ns;
        }
        (ns as f64 * self.time).round().min(u64::MAX as f64) as u64
    }

    /// A duration as the emulation runs it back in the network's time, ns.
    pub fn network_ns(&self, emulated_ns: u64) -> u64 {
        if self.time == 1.0 {
            return emulated_ns;
        }
        (emulated_ns as f64 / self.time).round() as u64
    }

    /// A rate of the network, bit/s, as it is emulated.
    pub fn rate_bps(&self, bps: f64) -> f64 {
        bps / self.rate_divisor()
    }

    /// A flow size of the workload as it is sent, bytes (at least 1).
    pub fn size_bytes(&self, bytes: u64) -> u64 {
        if self.size == 1.0 {
            return bytes;
        }
        ((bytes as f64 / self.size).round() as u64).max(1)
    }
}

impl fmt::Display for Scaling {
    /// `rate=1000,buffer=1000,size=1,time=10`: every factor, so the text
    /// says all there is (`none` when nothing is scaled).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_none() {
            return f.write_str("none");
        }
        write!(
            f,
            "rate={},buffer={},size={},time={}",
            self.rate, self.buffer, self.size, self.time
        )
    }
}

impl FromStr for Scaling {
    type Err = String;

    /// `none`, or `key=value` pairs separated by commas with keys `rate`,
    /// `buffer`, `size` and `time`; a factor not given is 1, except
    /// `buffer`, which follows `rate`.
    fn from_str(s: &str) -> Result<Scaling, String> {
        let s = s.trim();
        if s == "none" {
            return Ok(Scaling::NONE);
        }
        let mut out = Scaling::NONE;
        let mut buffer = None;
        for part in s.split(',') {
            let (key, value) = part.split_once('=').ok_or_else(|| {
                format!("{part:?} is not key=value (keys: rate, buffer, size, time; e.g. rate=1000,time=10)")
            })?;
            let v: f64 = value
                .trim()
                .parse()
                .map_err(|_| format!("{}: {value:?} is not a number", key.trim()))?;
            match key.trim() {
                "rate" => out.rate = v,
                "buffer" => buffer = Some(v),
                "size" => out.size = v,
                "time" => out.time = v,
                other => {
                    return Err(format!(
                        "unknown scale {other:?} (keys: rate, buffer, size, time)"
                    ))
                }
            }
        }
        out.buffer = buffer.unwrap_or(out.rate);
        out.check()?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO: &str = r#"
[[switch]]
name = "s1"
prefixes = ["10.0.1.0/24"]
[[switch]]
name = "s2"
prefixes = ["10.0.2.0/24"]
[[link]]
a = "s1"
b = "s2"
rate = "100Gbps"
delay = "25ms"
buffer = "128MB"
"#;

    #[test]
    fn text_reads_back_and_buffer_follows_rate() {
        let s: Scaling = "rate=1000,time=10".parse().unwrap();
        assert_eq!(
            s,
            Scaling {
                rate: 1000.0,
                buffer: 1000.0,
                size: 1.0,
                time: 10.0
            }
        );
        assert_eq!(s.to_string(), "rate=1000,buffer=1000,size=1,time=10");
        assert_eq!(s.to_string().parse::<Scaling>().unwrap(), s);
        assert_eq!("none".parse::<Scaling>().unwrap(), Scaling::NONE);
        assert_eq!(Scaling::NONE.to_string(), "none");
        let b: Scaling = "rate=1000,buffer=1".parse().unwrap();
        assert_eq!(b.buffer, 1.0);
    }

    #[test]
    fn bad_text_names_the_problem() {
        for (text, says) in [
            ("rate=0", "rate scale must be a positive number"),
            ("time=-1", "time scale"),
            ("time=2e6", "at most"),
            ("speed=2", "unknown scale \"speed\""),
            ("rate", "not key=value"),
            ("rate=fast", "not a number"),
            ("size=NaN", "size scale"),
        ] {
            let e = text.parse::<Scaling>().unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn emulation_divides_rates_by_rate_times_time_and_stretches_delays() {
        let topo = Topology::parse(TWO, "two.toml").unwrap();
        let s: Scaling = "rate=1000,time=10".parse().unwrap();
        let e = s.emulated(&topo).unwrap();
        let l = &e.links()[0];
        // 100 Gbit/s / (1000 x 10) = 10 Mbit/s; 25 ms x 10 = 250 ms;
        // 128 MB / 1000 = 128 kB.
        assert_eq!(
            (l.rate_bps, l.delay_ns, l.buffer_bytes),
            (10_000_000, 250_000_000, 128_000)
        );
        // The network itself is untouched.
        assert_eq!(topo.links()[0].rate_bps, 100_000_000_000);
        assert_eq!(Scaling::NONE.emulated(&topo).unwrap(), topo);
        // 55 us of DCQCN's timer x 10 = 550 us, and back.
        assert_eq!(s.duration_ns(55_000), 550_000);
        assert_eq!(s.network_ns(550_000), 55_000);
        assert_eq!(s.rate_bps(100e9), 1e7);
        let sized = Scaling { size: 1000.0, ..s };
        // 30 MB / 1000 = 30 kB; a 1-byte flow stays 1 byte.
        assert_eq!(sized.size_bytes(30_000_000), 30_000);
        assert_eq!(sized.size_bytes(1), 1);
    }
}

//! Which flows a client starts, for either transport: Poisson arrivals with
//! sizes from a CDF, or a `--schedule` file; sizes divided by
//! `--size-scale`.
//!
//! A schedule is a CSV file with the header `id,receiver,size_bytes,start_ns`
//! (receiver: a NAME given with `--dst`; start_ns: nanoseconds after the
//! client's start). Rows may come in any order; flows start in start order
//! (ties in file order). Errors name the file and the line.

use std::collections::HashSet;
use std::time::Duration;

use rand::RngExt;
use rand_pcg::Pcg64;

use crate::arrivals::PoissonArrivals;
use crate::cdf::Cdf;
use crate::client::Destination;
use crate::protocol::MAX_FLOW_SIZE;
use crate::{seeded_rng, stream};

/// The header a schedule must start with.
pub const SCHEDULE_HEADER: &str = "id,receiver,size_bytes,start_ns";

/// A flow's size after scaling: max(1, round(size / scale)).
pub fn scale_size(size: u64, scale: f64) -> u64 {
    if scale == 1.0 {
        return size.max(1);
    }
    ((size as f64 / scale).round() as u64).max(1)
}

/// The mean scaled size of flows drawn from `cdf`: `cdf.mean()` at scale 1
/// (as before scaling existed), otherwise the mean of max(1, round(x /
/// scale)) over the sampled sizes x, integrated numerically over the
/// sampler's uniform variable (the rounding and the floor of one byte
/// matter when most flows become one packet).
pub fn mean_scaled_size(cdf: &Cdf, scale: f64) -> f64 {
    if scale == 1.0 {
        return cdf.mean();
    }
    const STEPS: u32 = 100_000;
    let sum: f64 = (0..STEPS)
        .map(|i| {
            let r = (f64::from(i) + 0.5) * 100.0 / f64::from(STEPS);
            let size = (cdf.quantile(r) as u64).max(1);
            scale_size(size, scale) as f64
        })
        .sum();
    sum / f64::from(STEPS)
}

/// One row of a schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduledFlow {
    pub id: u64,
    /// Index into the client's destinations.
    pub dst: usize,
    /// Scaled size.
    pub size: u64,
    pub start_ns: u64,
}

/// The latest start a schedule may give, a week: an experiment's flows
/// start within seconds to hours; a start of 2^64 - 1 ns would have the
/// client wait 584 years.
pub const MAX_SCHEDULE_START_NS: u64 = 7 * 86_400 * 1_000_000_000;

/// Parses a schedule; `source` names it in errors (one line each).
pub fn parse_schedule(
    text: &str,
    source: &str,
    dsts: &[Destination],
    size_scale: f64,
) -> Result<Vec<ScheduledFlow>, String> {
    let mut lines = text.lines().enumerate();
    let header = lines
        .by_ref()
        .find(|(_, l)| !l.trim().is_empty())
        .map(|(_, l)| l.trim());
    if header != Some(SCHEDULE_HEADER) {
        return Err(format!(
            "{source}:1: expected the header {SCHEDULE_HEADER:?}, got {:?}",
            header.unwrap_or("")
        ));
    }
    let mut flows = Vec::new();
    let mut ids = HashSet::new();
    for (i, line) in lines {
        let n = i + 1;
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let err = |m: String| format!("{source}:{n}: {m}");
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        let [id, receiver, size, start] = fields[..] else {
            return Err(err(format!(
                "expected 4 fields (id,receiver,size_bytes,start_ns), got {}",
                fields.len()
            )));
        };
        let int = |v: &str, what: &str| {
            v.parse::<u64>()
                .map_err(|_| err(format!("{what} {v:?} is not a whole number")))
        };
        let id = int(id, "id")?;
        let size = int(size, "size_bytes")?;
        let start_ns = int(start, "start_ns")?;
        let dst = dsts
            .iter()
            .position(|d| d.name == receiver)
            .ok_or_else(|| {
                err(format!(
                    "unknown receiver {receiver:?} (not a NAME of any --dst)"
                ))
            })?;
        if size == 0 || size > MAX_FLOW_SIZE {
            return Err(err(format!(
                "size_bytes must be in [1, {MAX_FLOW_SIZE}], got {size}"
            )));
        }
        if start_ns > MAX_SCHEDULE_START_NS {
            return Err(err(format!(
                "start_ns {start_ns} is more than a week ({MAX_SCHEDULE_START_NS} ns) after the start"
            )));
        }
        if !ids.insert(id) {
            return Err(err(format!("duplicate id {id}")));
        }
        flows.push(ScheduledFlow {
            id,
            dst,
            size: scale_size(size, size_scale),
            start_ns,
        });
    }
    flows.sort_by_key(|f| f.start_ns);
    Ok(flows)
}

/// Where flows come from.
#[derive(Debug, Clone)]
pub enum Arrivals {
    /// Poisson arrivals at `lambda` flows/s for `duration_s`, sizes from `cdf`.
    Poisson {
        cdf: Cdf,
        lambda: f64,
        duration_s: f64,
    },
    Schedule(Vec<ScheduledFlow>),
}

/// One flow to start.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedFlow {
    pub id: u64,
    pub dst: usize,
    /// Scaled size, bytes.
    pub size: u64,
    /// Arrival time after the start.
    pub offset: Duration,
    pub warmup: bool,
}

/// The flows of a run, in arrival order.
#[derive(Debug)]
pub struct FlowSource {
    kind: SourceKind,
    warmup_s: f64,
}

#[derive(Debug)]
enum SourceKind {
    Poisson {
        arrivals: PoissonArrivals,
        sizes: Pcg64,
        dsts: Pcg64,
        n_dsts: usize,
        cdf: Cdf,
        duration_s: f64,
        id_base: u64,
        k: u64,
        size_scale: f64,
    },
    Schedule {
        flows: std::vec::IntoIter<ScheduledFlow>,
    },
}

impl FlowSource {
    pub fn new(
        arrivals: Arrivals,
        seed: u64,
        id_base: u64,
        warmup_s: f64,
        size_scale: f64,
        n_dsts: usize,
    ) -> FlowSource {
        let kind = match arrivals {
            Arrivals::Poisson {
                cdf,
                lambda,
                duration_s,
            } => SourceKind::Poisson {
                arrivals: PoissonArrivals::new(lambda, seed),
                sizes: seeded_rng(seed, stream::SIZES),
                dsts: seeded_rng(seed, stream::DESTINATIONS),
                n_dsts,
                cdf,
                duration_s,
                id_base,
                k: 0,
                size_scale,
            },
            Arrivals::Schedule(flows) => SourceKind::Schedule {
                flows: flows.into_iter(),
            },
        };
        FlowSource { kind, warmup_s }
    }

    /// How many flows are still to come: exact for a schedule, the mean
    /// (rate x the time left) for Poisson arrivals. For sizing memory
    /// before a run.
    pub fn expected_remaining(&self) -> f64 {
        match &self.kind {
            SourceKind::Poisson {
                arrivals,
                duration_s,
                ..
            } => arrivals.rate_per_s() * (duration_s - arrivals.now_s()).max(0.0),
            SourceKind::Schedule { flows } => flows.len() as f64,
        }
    }

    /// The next flow; its size and destination are drawn here (each from
    /// its own random stream, so the values do not depend on when).
    pub fn next_flow(&mut self) -> Option<PlannedFlow> {
        match &mut self.kind {
            SourceKind::Poisson {
                arrivals,
                sizes,
                dsts,
                n_dsts,
                cdf,
                duration_s,
                id_base,
                k,
                size_scale,
            } => {
                let offset_s = arrivals.next_offset_s();
                if offset_s >= *duration_s {
                    return None;
                }
                let size = scale_size(cdf.sample(sizes), *size_scale);
                let dst = dsts.random_range(0..*n_dsts);
                let id = id_base.wrapping_add(*k);
                *k += 1;
                Some(PlannedFlow {
                    id,
                    dst,
                    size,
                    offset: Duration::from_secs_f64(offset_s),
                    warmup: offset_s < self.warmup_s,
                })
            }
            SourceKind::Schedule { flows } => {
                let f = flows.next()?;
                let offset = Duration::from_nanos(f.start_ns);
                Some(PlannedFlow {
                    id: f.id,
                    dst: f.dst,
                    size: f.size,
                    offset,
                    warmup: offset.as_secs_f64() < self.warmup_s,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dsts() -> Vec<Destination> {
        vec![
            "a=10.0.0.1:4791".parse().unwrap(),
            "b=10.0.0.2:4791".parse().unwrap(),
        ]
    }

    #[test]
    fn the_flows_still_to_come_are_counted_or_expected() {
        let flows = (0..3)
            .map(|i| ScheduledFlow {
                id: i,
                dst: 0,
                size: 10,
                start_ns: i * 100,
            })
            .collect();
        let mut s = FlowSource::new(Arrivals::Schedule(flows), 0, 0, 0.0, 1.0, 1);
        assert_eq!(s.expected_remaining(), 3.0);
        s.next_flow();
        assert_eq!(s.expected_remaining(), 2.0);
        // Poisson: 100 flows/s for 2 s, 200 expected before the first draw.
        let cdf = Cdf::parse("0 0\n1000 100\n", "u").unwrap();
        let p = FlowSource::new(
            Arrivals::Poisson {
                cdf,
                lambda: 100.0,
                duration_s: 2.0,
            },
            1,
            0,
            0.0,
            1.0,
            1,
        );
        assert_eq!(p.expected_remaining(), 200.0);
    }

    #[test]
    fn scaling_rounds_and_keeps_one_byte() {
        assert_eq!(scale_size(1000, 1.0), 1000);
        assert_eq!(scale_size(1500, 1000.0), 2); // 1.5 rounds up
        assert_eq!(scale_size(1499, 1000.0), 1);
        assert_eq!(scale_size(10, 1000.0), 1); // 0.01 -> at least 1
        assert_eq!(scale_size(30_000_000, 1000.0), 30_000);
    }

    #[test]
    fn mean_of_scaled_sizes() {
        // Uniform sizes 0..1000 (CDF 0 0, 1000 100) at scale 100: the sampled
        // size x = floor(10 r) (>= 1); round(x / 100) is 0 (-> 1) for x < 50,
        // k for x in [100k - 50, 100k + 50), 10 for x >= 950: mean =
        // 0.05 * 1 + 0.1 * (1 + ... + 9) + 0.05 * 10 = 0.05 + 4.5 + 0.5 = 5.05.
        let cdf = Cdf::parse("0 0\n1000 100\n", "u").unwrap();
        assert!((mean_scaled_size(&cdf, 100.0) - 5.05).abs() < 1e-3);
        assert_eq!(mean_scaled_size(&cdf, 1.0), cdf.mean());
    }

    #[test]
    fn schedule_parses_sorts_and_scales() {
        let text = "id,receiver,size_bytes,start_ns\n7,b,5000,200\n\n3,a,400,100\n9,a,1,200\n";
        let flows = parse_schedule(text, "s.csv", &dsts(), 1000.0).unwrap();
        assert_eq!(
            flows,
            vec![
                ScheduledFlow {
                    id: 3,
                    dst: 0,
                    size: 1,
                    start_ns: 100
                },
                ScheduledFlow {
                    id: 7,
                    dst: 1,
                    size: 5,
                    start_ns: 200
                },
                ScheduledFlow {
                    id: 9,
                    dst: 0,
                    size: 1,
                    start_ns: 200
                },
            ]
        );
        let mut src = FlowSource::new(Arrivals::Schedule(flows), 1, 0, 0.0, 1000.0, 2);
        let first = src.next_flow().unwrap();
        assert_eq!((first.id, first.offset), (3, Duration::from_nanos(100)));
        assert!(!first.warmup);
        assert_eq!(src.next_flow().unwrap().id, 7);
        assert_eq!(src.next_flow().unwrap().id, 9);
        assert_eq!(src.next_flow(), None);
    }

    #[test]
    fn schedule_errors_name_the_line() {
        let cases = [
            ("id,receiver,size\n", "s.csv:1: expected the header"),
            (
                "id,receiver,size_bytes,start_ns\n1,a,10,0\n2,zz,10,0\n",
                "s.csv:3: unknown receiver \"zz\"",
            ),
            (
                "id,receiver,size_bytes,start_ns\n1,a,10\n",
                "s.csv:2: expected 4 fields",
            ),
            (
                "id,receiver,size_bytes,start_ns\n1,a,ten,0\n",
                "s.csv:2: size_bytes \"ten\"",
            ),
            (
                "id,receiver,size_bytes,start_ns\n1,a,0,0\n",
                "s.csv:2: size_bytes must be",
            ),
            (
                "id,receiver,size_bytes,start_ns\n1,a,1,0\n1,b,1,5\n",
                "s.csv:3: duplicate id 1",
            ),
            (
                "id,receiver,size_bytes,start_ns\n1,a,1,-5\n",
                "s.csv:2: start_ns",
            ),
            (
                "id,receiver,size_bytes,start_ns\n1,a,1,18446744073709551615\n",
                "s.csv:2: start_ns 18446744073709551615 is more than a week \
                 (604800000000000 ns) after the start",
            ),
        ];
        for (text, want) in cases {
            let e = parse_schedule(text, "s.csv", &dsts(), 1.0).unwrap_err();
            assert!(e.starts_with(want), "{e}");
            assert!(!e.contains('\n'));
        }
    }

    /// The first flows of one seed, recorded from the generator before the
    /// clients stopped keeping every record (issue 29): experiments are
    /// replayed from seeds, so these must never change.
    #[test]
    fn a_seed_gives_the_recorded_flows() {
        let arrivals = Arrivals::Poisson {
            cdf: Cdf::builtin("websearch").unwrap(),
            lambda: 1000.0,
            duration_s: 1.0,
        };
        let mut src = FlowSource::new(arrivals, 42, 7, 0.002, 1.0, 3);
        let got: Vec<(u64, usize, u64, u128, bool)> = (0..6)
            .map(|_| {
                let f = src.next_flow().unwrap();
                (f.id, f.dst, f.size, f.offset.as_nanos(), f.warmup)
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (7, 0, 31_534, 211_562, true),
                (8, 1, 153, 1_206_499, true),
                (9, 0, 64_335, 1_896_257, true),
                // 2.109888 ms: past the 2 ms warm-up.
                (10, 0, 3_147_980, 2_109_888, false),
                (11, 0, 57_278, 3_275_749, false),
                (12, 2, 4_956_921, 4_764_502, false),
            ]
        );
    }

    /// The probe's parameters (issue 29): 1e9 flows/s for 100 ms, 1000T
    /// of websearch (~7.3e7 flows/s) for 1 s, 1e5 flows/s for 1000 s, each
    /// ~1e8 flows. The source draws one flow per call, so the first ten
    /// thousand come at once and the rest is still to come: nothing is
    /// built ahead.
    #[test]
    fn huge_runs_are_drawn_one_flow_at_a_time() {
        let cdf = Cdf::builtin("websearch").unwrap();
        let websearch_1000t = 1e15 / (8.0 * cdf.mean());
        for (lambda, duration_s) in [(1e9, 0.1), (websearch_1000t, 1.0), (1e5, 1000.0)] {
            let arrivals = Arrivals::Poisson {
                cdf: cdf.clone(),
                lambda,
                duration_s,
            };
            let mut src = FlowSource::new(arrivals, 1, 0, 0.0, 1.0, 2);
            let total = lambda * duration_s;
            assert!(total > 7e7, "{total}");
            assert_eq!(src.expected_remaining(), total);
            let mut last = Duration::ZERO;
            for k in 0..10_000 {
                let f = src.next_flow().unwrap();
                assert_eq!(f.id, k);
                assert!(f.offset >= last && f.offset.as_secs_f64() < duration_s);
                last = f.offset;
            }
            // 10_000 drawn: about that many fewer remain (the mean rate
            // times the time left after the last one).
            let left = src.expected_remaining();
            assert!((total - left - 1e4).abs() < 500.0, "{lambda}: {left}");
        }
    }

    #[test]
    fn poisson_source_matches_the_tcp_clients_streams() {
        let cdf = Cdf::builtin("websearch").unwrap();
        let arrivals = Arrivals::Poisson {
            cdf: cdf.clone(),
            lambda: 100.0,
            duration_s: 1.0,
        };
        let mut src = FlowSource::new(arrivals, 5, 10, 0.2, 1.0, 2);
        let mut times = PoissonArrivals::new(100.0, 5);
        let mut sizes = seeded_rng(5, stream::SIZES);
        let mut k = 0;
        while let Some(f) = src.next_flow() {
            let t = times.next_offset_s();
            assert_eq!(f.offset, Duration::from_secs_f64(t));
            assert_eq!(f.size, cdf.sample(&mut sizes));
            assert_eq!(f.id, 10 + k);
            assert_eq!(f.warmup, t < 0.2);
            k += 1;
        }
        assert!(k > 50 && k < 150, "{k}");
    }
}

//! Slot-boundary statistics of a rotor network (`lcmp-testbed
//! rotor-timing` measures the arrivals): the circuit windows the schedule
//! gives a ToR pair and how far a stream's arrivals lie from them.
//!
//! For every slot k in which some rotor connects ToR a to ToR b (rotor r
//! applies `matchings[r * per_rotor + k mod per_rotor]`), the window is
//! `W_k = [epoch + k Delta + Delta_r, epoch + (k + 1) Delta]`. Each arrival
//! (kernel receive timestamp) belongs to the nearest window; one more than
//! a tolerance outside every window is a *stray*. Per window with
//! arrivals: start error = first arrival - (W_k.start + ser), where ser =
//! frame bits / c (the ToR hands a frame to the wire when its emulated
//! serialization ends); end error = max(0, last arrival - W_k.end); the
//! window's boundary error = max(|start error|, end error).

use lcmp_stats::quantile;
use lcmp_topology::rotor_net::RotorNetwork;
use serde::Serialize;

/// When a circuit from one ToR to another is up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Window {
    /// The slot.
    pub slot: u64,
    /// Its end of reconfiguration, `CLOCK_REALTIME` ns.
    pub start_ns: u64,
    /// Its end.
    pub end_ns: u64,
}

/// The windows of the slots overlapping `[from_ns, to_ns]` in which some
/// rotor of `net` (whose epoch is `epoch_ns`) connects ToR `a` to ToR `b`.
pub fn circuit_windows(
    net: &RotorNetwork,
    epoch_ns: u64,
    a: u32,
    b: u32,
    from_ns: u64,
    to_ns: u64,
) -> Vec<Window> {
    let per = u64::from(net.per_rotor.max(1));
    let first = from_ns.saturating_sub(epoch_ns) / net.slot_ns;
    let last = to_ns.saturating_sub(epoch_ns) / net.slot_ns;
    (first..=last)
        // A ToR mapped to itself has no circuit (idle matching).
        .filter(|k| {
            a != b
                && (0..net.rotors).any(|r| {
                    let m = &net.matchings[(u64::from(r) * per + k % per) as usize];
                    m.get(a as usize) == Some(&b)
                })
        })
        .map(|k| Window {
            slot: k,
            start_ns: epoch_ns + k * net.slot_ns + net.reconfig_ns,
            end_ns: epoch_ns + (k + 1) * net.slot_ns,
        })
        .collect()
}

/// One window's figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct WindowError {
    /// The window.
    pub window: Window,
    /// Arrivals attributed to it.
    pub arrivals: u64,
    /// First arrival - (start + ser), ns.
    pub start_error_ns: i64,
    /// max(0, last arrival - end), ns.
    pub end_error_ns: u64,
    /// max(|start error|, end error), ns.
    pub error_ns: u64,
}

/// The boundary errors of a stream of arrivals.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BoundaryReport {
    /// Arrivals analysed.
    pub arrivals: u64,
    /// Every measured window that had arrivals, in time order.
    pub windows: Vec<WindowError>,
    /// Measured windows without any arrival.
    pub empty_windows: u64,
    /// Receive times of arrivals further than the tolerance from every
    /// window: delivered through a port the schedule did not match.
    pub strays: Vec<u64>,
    /// Median boundary error over the measured windows, ns.
    pub p50_ns: Option<f64>,
    /// 99th percentile, ns.
    pub p99_ns: Option<f64>,
    /// Largest, ns.
    pub max_ns: Option<f64>,
    /// Median start error (signed), ns: the forwarding latency after
    /// serialization.
    pub start_p50_ns: Option<f64>,
    /// Largest end error, ns.
    pub end_max_ns: Option<u64>,
}

/// Distance from `t` to window `w` (0 inside).
fn distance(w: &Window, t: u64) -> u64 {
    if t < w.start_ns {
        w.start_ns - t
    } else {
        t.saturating_sub(w.end_ns)
    }
}

/// Attributes each arrival time (ns, any order) to the nearest of
/// `windows` (sorted by time, disjoint), counts as stray those more than
/// `stray_ns` from every window, and reports the boundary errors of the
/// windows that lie inside `measure` (start and end within it): `ser_ns`
/// is one frame's serialization at the uplink rate.
pub fn boundary_errors(
    windows: &[Window],
    arrivals_ns: &[u64],
    ser_ns: u64,
    stray_ns: u64,
    measure: (u64, u64),
) -> BoundaryReport {
    let mut times = arrivals_ns.to_vec();
    times.sort_unstable();
    // Per window: (arrivals, first, last).
    let mut seen: Vec<(u64, u64, u64)> = vec![(0, u64::MAX, 0); windows.len()];
    let mut strays = Vec::new();
    for &t in &times {
        // The first window ending at or after t, and the one before it,
        // are the only candidates for the nearest.
        let i = windows.partition_point(|w| w.end_ns < t);
        let nearest = [i.checked_sub(1), (i < windows.len()).then_some(i)]
            .into_iter()
            .flatten()
            .min_by_key(|&j| distance(&windows[j], t));
        match nearest {
            Some(j) if distance(&windows[j], t) <= stray_ns => {
                let s = &mut seen[j];
                s.0 += 1;
                s.1 = s.1.min(t);
                s.2 = s.2.max(t);
            }
            _ => strays.push(t),
        }
    }
    let mut out = Vec::new();
    let mut empty = 0;
    for (w, &(n, first, last)) in windows.iter().zip(&seen) {
        if w.start_ns < measure.0 || w.end_ns > measure.1 {
            continue;
        }
        if n == 0 {
            empty += 1;
            continue;
        }
        let start_error_ns = first as i64 - (w.start_ns + ser_ns) as i64;
        let end_error_ns = last.saturating_sub(w.end_ns);
        out.push(WindowError {
            window: *w,
            arrivals: n,
            start_error_ns,
            end_error_ns,
            error_ns: start_error_ns.unsigned_abs().max(end_error_ns),
        });
    }
    let errors: Vec<f64> = out.iter().map(|w| w.error_ns as f64).collect();
    let starts: Vec<f64> = out.iter().map(|w| w.start_error_ns as f64).collect();
    BoundaryReport {
        arrivals: times.len() as u64,
        p50_ns: quantile(&errors, 0.5),
        p99_ns: quantile(&errors, 0.99),
        max_ns: quantile(&errors, 1.0),
        start_p50_ns: quantile(&starts, 0.5),
        end_max_ns: out.iter().map(|w| w.end_error_ns).max(),
        windows: out,
        empty_windows: empty,
        strays,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lcmp_topology::rotor;

    fn net4() -> RotorNetwork {
        // Complete graph on 4 ToRs, 2 rotors: rotor 0 applies +1, +2;
        // rotor 1 applies +3 and the idle matching.
        let s = rotor::complete(4, 2).unwrap();
        RotorNetwork::from_schedule(&s, 10_000_000, 1_000_000)
    }

    #[test]
    fn windows_follow_the_schedule() {
        let net = net4();
        let epoch = 1_000_000_000;
        // 0 -> 1 is +1: rotor 0, even slots.
        let w = circuit_windows(&net, epoch, 0, 1, epoch, epoch + 45_000_000);
        assert_eq!(
            w,
            vec![
                Window {
                    slot: 0,
                    start_ns: epoch + 1_000_000,
                    end_ns: epoch + 10_000_000
                },
                Window {
                    slot: 2,
                    start_ns: epoch + 21_000_000,
                    end_ns: epoch + 30_000_000
                },
                Window {
                    slot: 4,
                    start_ns: epoch + 41_000_000,
                    end_ns: epoch + 50_000_000
                },
            ]
        );
        // 0 -> 3 is +3: rotor 1, even slots too; 0 -> 2 (+2): odd slots.
        let w3 = circuit_windows(&net, epoch, 0, 3, epoch, epoch + 25_000_000);
        assert_eq!(w3.iter().map(|w| w.slot).collect::<Vec<_>>(), vec![0, 2]);
        let w2 = circuit_windows(&net, epoch, 0, 2, epoch, epoch + 25_000_000);
        assert_eq!(w2.iter().map(|w| w.slot).collect::<Vec<_>>(), vec![1]);
        // Nothing connects a ToR to itself.
        assert!(circuit_windows(&net, epoch, 1, 1, epoch, epoch + 100_000_000).is_empty());
    }

    fn w(slot: u64, start_ns: u64, end_ns: u64) -> Window {
        Window {
            slot,
            start_ns,
            end_ns,
        }
    }

    #[test]
    fn errors_of_synthetic_arrivals() {
        // Windows [1000, 2000] and [3000, 4000]; ser 100; strays beyond 300.
        let windows = [w(0, 1000, 2000), w(2, 3000, 4000)];
        let arrivals = [
            // Window 0: first 1150 (start error +50), last 2040 (end +40).
            1150, 1500, 2040, //
            // Window 1: first 3080 (start error -20), last 3990 (end 0).
            3990, 3080, //
            // 2500 is 500 from both: a stray; 4250 is 250 after window 1:
            // still window 1, end error 250.
            2500, 4250,
        ];
        let r = boundary_errors(&windows, &arrivals, 100, 300, (0, 5000));
        assert_eq!(r.arrivals, 7);
        assert_eq!(r.strays, vec![2500]);
        assert_eq!(r.empty_windows, 0);
        let got: Vec<(u64, i64, u64, u64)> = r
            .windows
            .iter()
            .map(|e| (e.arrivals, e.start_error_ns, e.end_error_ns, e.error_ns))
            .collect();
        assert_eq!(got, vec![(3, 50, 40, 50), (3, -20, 250, 250)]);
        // Type 7 over the errors [50, 250]: p50 halfway, 150; p99
        // 50 + 0.99 x 200 = 248. Start errors [-20, 50]: p50 15.
        assert_eq!(r.p50_ns, Some(150.0));
        assert!((r.p99_ns.unwrap() - 248.0).abs() < 1e-9);
        assert_eq!(r.max_ns, Some(250.0));
        assert_eq!(r.start_p50_ns, Some(15.0));
        assert_eq!(r.end_max_ns, Some(250));
    }

    #[test]
    fn only_windows_inside_the_measurement_count() {
        let windows = [w(0, 1000, 2000), w(2, 3000, 4000), w(4, 5000, 6000)];
        // Window 0 is before the measurement, window 2 gets nothing (empty),
        // window 4 is measured: first 5100 + ser 0 = error 100.
        let r = boundary_errors(&windows, &[1500, 5100, 5900], 0, 300, (2500, 6000));
        assert_eq!(r.windows.len(), 1);
        assert_eq!(r.windows[0].window.slot, 4);
        assert_eq!(r.windows[0].error_ns, 100);
        assert_eq!(r.empty_windows, 1);
        assert!(r.strays.is_empty());
        // Before every window and after every window: strays.
        let r = boundary_errors(&windows, &[100, 9000], 0, 300, (0, 9000));
        assert_eq!(r.strays, vec![100, 9000]);
        assert_eq!(r.p99_ns, None);
        let none = boundary_errors(&[], &[5], 0, 300, (0, 10));
        assert_eq!(none.strays, vec![5]);
    }

    #[test]
    fn percentiles_are_type_7_over_windows() {
        // 100 windows of 1000 ns, 1000 apart; window i's first arrival is i
        // ns late (ser 0), so the errors are 0..=99.
        let windows: Vec<Window> = (0..100u64)
            .map(|i| w(2 * i, 1000 + 2000 * i, 2000 + 2000 * i))
            .collect();
        let arrivals: Vec<u64> = (0..100u64).map(|i| 1000 + 2000 * i + i).collect();
        let r = boundary_errors(&windows, &arrivals, 0, 500, (0, u64::MAX));
        assert_eq!(r.windows.len(), 100);
        // Type 7 over 0..=99: h = 99 p; p50 at h = 49.5, p99 at 98.01.
        assert_eq!(r.p50_ns, Some(49.5));
        assert!((r.p99_ns.unwrap() - 98.01).abs() < 1e-9);
        assert_eq!(r.max_ns, Some(99.0));
    }
}

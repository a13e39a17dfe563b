//! The LCMP paper's claims that `report.md` sets our figures against.

/// One claim of the paper (EuroSys 2026, 8-DC testbed, RDMA with DCQCN):
/// LCMP's change of the median and p99 slowdown against a baseline, in
/// percent (negative = LCMP lower). A range `(a, b)` spans the loads the
/// claim covers; `a == b` is a single number.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PaperClaim {
    /// Normalized workload key (see [`workload_key`]).
    pub workload: &'static str,
    /// Loads (fractions) the claim covers.
    pub loads: &'static [f64],
    /// The policy compared with.
    pub baseline: &'static str,
    /// Change of the median slowdown, percent.
    pub median_pct: Option<(f64, f64)>,
    /// Change of the p99 slowdown, percent.
    pub p99_pct: Option<(f64, f64)>,
    /// Where in the paper.
    pub source: &'static str,
}

/// The paper's claims (from `docs/experiments.md`). It has no WCMP numbers.
pub const PAPER_CLAIMS: &[PaperClaim] = &[
    PaperClaim {
        workload: "websearch",
        loads: &[0.3, 0.5, 0.8],
        baseline: "ecmp",
        median_pct: Some((-36.0, -41.0)),
        p99_pct: Some((-56.0, -68.0)),
        source: "8-DC, 30/50/80 %",
    },
    PaperClaim {
        workload: "websearch",
        loads: &[0.3, 0.5, 0.8],
        baseline: "ucmp",
        median_pct: Some((-76.0, -76.0)),
        p99_pct: Some((-45.0, -64.0)),
        source: "8-DC, 30/50/80 %",
    },
    PaperClaim {
        workload: "websearch",
        loads: &[0.3],
        baseline: "ecmp",
        median_pct: Some((-36.0, -36.0)),
        p99_pct: Some((-58.0, -58.0)),
        source: "Fig. 9",
    },
    PaperClaim {
        workload: "websearch",
        loads: &[0.3],
        baseline: "ucmp",
        median_pct: Some((-76.0, -76.0)),
        p99_pct: Some((-82.0, -82.0)),
        source: "Fig. 9",
    },
    PaperClaim {
        workload: "alistorage",
        loads: &[0.3],
        baseline: "ecmp",
        median_pct: Some((-32.0, -32.0)),
        p99_pct: Some((-68.0, -68.0)),
        source: "Fig. 9",
    },
    PaperClaim {
        workload: "alistorage",
        loads: &[0.3],
        baseline: "ucmp",
        median_pct: Some((-80.0, -80.0)),
        p99_pct: Some((-68.0, -68.0)),
        source: "Fig. 9",
    },
    PaperClaim {
        workload: "fbhadoop",
        loads: &[0.3],
        baseline: "ecmp",
        median_pct: Some((-26.0, -26.0)),
        p99_pct: Some((-69.0, -69.0)),
        source: "Fig. 9",
    },
    PaperClaim {
        workload: "fbhadoop",
        loads: &[0.3],
        baseline: "ucmp",
        median_pct: Some((-78.0, -78.0)),
        p99_pct: Some((-69.0, -69.0)),
        source: "Fig. 9",
    },
];

/// The paper's name for a workload given as a name or file name
/// (`WebSearch_distribution.txt` -> `websearch`, `FbHdp_distribution2015`
/// -> `fbhadoop`); `None` if it is none of the paper's three.
pub fn workload_key(workload: &str) -> Option<&'static str> {
    let w: String = workload
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    if w.contains("websearch") {
        Some("websearch")
    } else if w.contains("alistorage") {
        Some("alistorage")
    } else if w.contains("fbhdp") || w.contains("hadoop") {
        Some("fbhadoop")
    } else {
        None
    }
}

/// The claims for one (workload, load, baseline); the load may be given as
/// a fraction or in percent.
pub fn paper_claims(workload: &str, load: f64, baseline: &str) -> Vec<&'static PaperClaim> {
    let Some(key) = workload_key(workload) else {
        return Vec::new();
    };
    PAPER_CLAIMS
        .iter()
        .filter(|c| {
            c.workload == key
                && c.baseline.eq_ignore_ascii_case(baseline)
                && c.loads
                    .iter()
                    .any(|&l| (l - load).abs() < 1e-9 || (l * 100.0 - load).abs() < 1e-6)
        })
        .collect()
}

# Per run directory given: policy, flows finished, slowdown median / p99
# overall (summary.json), then by the DC pair's minimum-delay RTT and by
# the choice the DCI switches have (runs/*/flows.csv: fct_ns / ideal_ns).
#   python3 results/8dc-allpairs-0.3/pair-groups.py results/8dc-allpairs-0.3/{lcmp,ecmp,ucmp}
import csv, glob, json, sys


def q(v, p):  # type 7, as lcmp_results' quantile_sorted
    v = sorted(v)
    h = (len(v) - 1) * p
    lo = int(h)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (h - lo) * (v[hi] - v[lo])


def choice(a, b):  # topologies/8dc(-fabric).toml's DCI links
    if {a, b} == {"DC1", "DC8"}:
        return "DC1<->DC8 (6 paths)"
    if not {a, b} & {"DC1", "DC8"}:
        return "DC2..7 among them (2 paths)"
    return "one path"


bins = [(0, 31e6, "10-30 ms"), (31e6, 101e6, "50-100 ms"), (101e6, 301e6, "110-300 ms"), (301e6, 1e12, "500-700 ms")]
for d in sys.argv[1:]:
    s = json.load(open(f"{d}/summary.json"))
    rtt = {(p["src_dc"], p["dst_dc"]): p["base_rtt_ns"] for p in s["experiment"]["ideal"]["pairs"]}
    r = s["runs"][0]
    rows = [x for x in csv.DictReader(open(glob.glob(f"{d}/runs/*/flows.csv")[0])) if x["fct_ns"]]
    sd = lambda x: int(x["fct_ns"]) / int(x["ideal_ns"])
    out = [r["policy"], f'{r["flows_completed"]}/{r["flows_started"]}', f'{r["median_slowdown"]:.3f} / {r["p99_slowdown"]:.2f}']
    for lo, hi, name in bins:
        v = [sd(x) for x in rows if lo < rtt[(x["src_dc"], x["dst_dc"])] <= hi]
        out.append(f"{name}: n={len(v)} {q(v, .5):.3f} / {q(v, .99):.2f}")
    groups = {}
    for x in rows:
        groups.setdefault(choice(x["src_dc"], x["dst_dc"]), []).append(sd(x))
    out += [f"{k}: n={len(v)} {q(v, .5):.3f} / {q(v, .99):.2f}" for k, v in sorted(groups.items())]
    print(" | ".join(out))

#!/usr/bin/env bash
# Cost of the RoCEv2 + DCQCN transport through a testbed (root).
#
#   sudo scripts/bench-rocev2.sh      # writes target/bench/rocev2.json
#
# A 2dc-3path testbed (`lcmp-testbed up`, its switches emulating the three
# paths at 1 Gbit/s, 500 and 200 Mbit/s, dropping only beyond 1000 times
# their buffers as in the RDMA experiments); `lcmp-traffic client --transport
# rocev2` on host a sends WebSearch flows with sizes / 1000 (the experiments'
# regime: most flows one or two packets) at a line rate of 1 Gbit/s to
# `lcmp-traffic server` on b, Poisson arrivals for DURATION seconds at each
# rate in RATES flows/s, REPEAT times per rate (alternating the rates).
# Measured per run: the client's and the server's CPU time (/usr/bin/time),
# flows completed of started, data packets (the server's count), and from
# them CPU microseconds per flow and per packet. "Sustained" is the highest
# rate whose every run completed all its flows with no transport timeout.
# The spread over repetitions is reported (min..max). The numbers are of
# this machine and its load; they are a benchmark, not a test.
set -euo pipefail

RATES=${RATES:-"1000 4000 16000 32000"}
REPEAT=${REPEAT:-3}
DURATION=${DURATION:-2}
repo=$(cd "$(dirname "$0")/.." && pwd)
out_dir="$repo/target/bench"
[ "$(id -u)" = 0 ] || { echo "bench-rocev2.sh: run as root (it builds a namespace testbed)" >&2; exit 1; }
for t in ip jq; do
    command -v "$t" >/dev/null || { echo "missing $t: run scripts/install-deps.sh" >&2; exit 1; }
done
[ -x /usr/bin/time ] || { echo "missing /usr/bin/time (package time): run scripts/install-deps.sh" >&2; exit 1; }

cargo build --release --manifest-path "$repo/Cargo.toml" -p lcmp-testbed -p lcmp-traffic -p lcmp-switch >&2
bin="$repo/target/release"
name="rb$$"
work=$(mktemp -d)
cleanup() {
    "$bin/lcmp-testbed" down --name "$name" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT INT TERM
export LCMP_SWITCH_BIN="$bin/lcmp-switch" LCMP_TRAFFIC_BIN="$bin/lcmp-traffic"
"$bin/lcmp-testbed" up --name "$name" --topology "$repo/topologies/2dc-3path.toml" \
    --no-agent --policy ecmp --switch-arg=--drop-headroom=1000 >/dev/null
ex() { "$bin/lcmp-testbed" exec --name "$name" "$@"; }

# One run: prints "rate cpu_client_s cpu_server_s started completed timeouts packets".
one() {
    local rate=$1 k=$2
    local stats="$work/rx-$rate-$k.json" tserver="$work/ts-$rate-$k" tclient="$work/tc-$rate-$k"
    ex b -- /usr/bin/time -f "%U %S" -o "$tserver" "$bin/lcmp-traffic" server \
        --transport rocev2 --listen 10.0.2.2:4791 --stats "$stats" >/dev/null 2>&1 &
    local spid=$!
    # Wait until the server is bound.
    for _ in $(seq 100); do
        ex b -- ss -uln 2>/dev/null | grep -q ':4791' && break
        sleep 0.05
    done
    ex a -- /usr/bin/time -f "%U %S" -o "$tclient" "$bin/lcmp-traffic" client \
        --transport rocev2 --name a --dst b=10.0.2.2:4791 --workload websearch \
        --size-scale 1000 --flows-per-s "$rate" --duration "$DURATION" --drain 30 \
        --rate-scale 100 --line-rate 100G --progress-ms 0 \
        --out "$work/flows-$rate-$k.csv" >"$work/client-$rate-$k.log" 2>&1
    # The server itself, not /usr/bin/time around it (whose command line
    # also names it).
    pkill -TERM -f "^$bin/lcmp-traffic server" || true
    wait "$spid" || true
    local done
    done=$(grep '"done":true' "$work/client-$rate-$k.log" | tail -1)
    printf '%s %s %s %s %s %s %s\n' "$rate" \
        "$(awk '{print $1+$2}' "$tclient")" "$(awk '{print $1+$2}' "$tserver")" \
        "$(jq '.started' <<<"$done")" "$(jq '.completed' <<<"$done")" \
        "$(jq '.rocev2.timeouts' <<<"$done")" "$(jq '.data_packets' "$stats")"
}

results="$work/results.txt"
for k in $(seq "$REPEAT"); do
    for rate in $RATES; do
        one "$rate" "$k" | tee -a "$results" >&2
    done
done

mkdir -p "$out_dir"
# Per rate: spread of the per-flow and per-packet CPU (client + server).
jq -R -s --argjson duration "$DURATION" '
  split("\n") | map(select(length > 0) | split(" ") | map(tonumber)
    | {rate: .[0], cpu_client_s: .[1], cpu_server_s: .[2], started: .[3],
       completed: .[4], timeouts: .[5], packets: .[6]})
  | group_by(.rate) | map({
      flows_per_s: .[0].rate,
      runs: length,
      completed_share: (map(.completed / .started) | [min, max]),
      timeouts: (map(.timeouts) | [min, max]),
      client_us_per_flow: (map(.cpu_client_s * 1e6 / .started) | [min, max]),
      server_us_per_flow: (map(.cpu_server_s * 1e6 / .started) | [min, max]),
      us_per_packet: (map((.cpu_client_s + .cpu_server_s) * 1e6 / .packets) | [min, max]),
      all_complete: (map(.completed == .started and .timeouts == 0) | all)
    })
  | {duration_s: $duration, by_rate: .,
     sustained_flows_per_s: (map(select(.all_complete)) | map(.flows_per_s) | max)}
' "$results" | tee "$out_dir/rocev2.json"

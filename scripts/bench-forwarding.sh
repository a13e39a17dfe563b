#!/usr/bin/env bash
# Packet-rate and latency harness for a forwarder on veth (root): builds and
# runs `lcmp-bench` (lcmp-bench crate, bench/), which writes
# target/bench/forwarding.json. The method and every option: lcmp-bench --help
# (or scripts/bench-forwarding.sh --help). Arguments are passed through; the
# environment variables of the former shell harness still apply: DURATION,
# PAIRS, GEN_CPU, FWD_CPU, PROBE_COUNT, PROBE_GAP_US, SWITCH_RX_RING,
# DEEP_BACKLOG, SWITCH_ARGS, CHAIN_DURATION, DENSE_DURATION, DENSE_RATE,
# CHAIN_RUNS, OUT, ONLY_SWITCH / ONLY_KERNEL / ONLY_CHAIN / ONLY_DENSE (one
# of them; ONLY_SWITCH with ONLY_KERNEL is --only pairs), SKIP_BUILD,
# CARGO_TARGET_DIR.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
args=()
for v in DURATION:duration PAIRS:pairs GEN_CPU:gen-cpu FWD_CPU:fwd-cpu PROBE_COUNT:probe-count \
    PROBE_GAP_US:probe-gap-us SWITCH_RX_RING:switch-rx-ring DEEP_BACKLOG:deep-backlog \
    CHAIN_DURATION:chain-duration DENSE_DURATION:dense-duration DENSE_RATE:dense-rate \
    CHAIN_RUNS:testbed-runs OUT:out; do
    name=${v%%:*}
    if [[ -n ${!name:-} ]]; then args+=("--${v#*:}" "${!name}"); fi
done
for a in ${SWITCH_ARGS:-}; do args+=(--switch-arg "$a"); done
only=()
for o in SWITCH KERNEL CHAIN DENSE; do
    v=ONLY_$o
    if [[ -n ${!v:-} ]]; then only+=("${o,,}"); fi
done
# --only takes one value (a repeat replaces it): switch with kernel is the
# pairs alone; any other combination would silently run only the last.
case "${only[*]}" in
    "") ;;
    "switch kernel") args+=(--only pairs) ;;
    *" "*)
        echo "bench-forwarding.sh: set one ONLY_* (ONLY_SWITCH with ONLY_KERNEL runs the pairs), not: ${only[*]}" >&2
        exit 2
        ;;
    *) args+=(--only "${only[0]}") ;;
esac
if [[ -z ${SKIP_BUILD:-} ]]; then
    (cd "$ROOT" && CARGO_TARGET_DIR=$TARGET_DIR cargo build --release --quiet \
        -p lcmp-bench --bin lcmp-bench -p lcmp-switch --bin lcmp-switch \
        -p lcmp-testbed --bin lcmp-testbed)
fi
export LCMP_SWITCH_BIN=${LCMP_SWITCH_BIN:-$TARGET_DIR/release/lcmp-switch}
export LCMP_TESTBED_BIN=${LCMP_TESTBED_BIN:-$TARGET_DIR/release/lcmp-testbed}
exec "$TARGET_DIR/release/lcmp-bench" "${args[@]}" "$@"

#!/usr/bin/env bash
# The main job: the LCMP paper's 8-DC testbed in network namespaces (one
# lcmp-switch per DC, links at 1/2000 of the paper's rates with their real
# delays, two hosts per DC), a short WebSearch comparison of ECMP, UCMP and
# LCMP (experiments/demo.toml), the result table, and where the report and
# plots are. Tears the testbed down at the end (also on error or Ctrl-C).
# Installs what it needs first. About 5-8 minutes on a 2-core VM including
# the first release build.
#
#   sudo ./scripts/demo.sh                  # results in target/demo/
#   sudo OUT=/tmp/demo ./scripts/demo.sh
#
# The kept-set tables alone (no root, no testbed):
#   cargo run --release -p lcmp-agent -- paths [--topology F] [--switch S]
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh
if [[ $(id -u) -ne 0 ]]; then
    echo "demo.sh: run as root: the testbed creates network namespaces, veths and XDP programs" >&2
    exit 1
fi
out=${OUT:-target/demo}

echo "== building (release) =="
cargo build --release --quiet -p lcmp-switch -p lcmp-traffic -p lcmp-testbed -p lcmp-agent

echo "== LCMP's view of DC1 -> DC8 at empty queues (lcmp-agent paths --switch dc1) =="
target/release/lcmp-agent paths --switch dc1 | awk '/10\.8\.0\.0/ {p = 1} p'

echo "== WebSearch at 50% load over the 8-DC testbed: ECMP, UCMP, LCMP =="
rm -rf "$out"
time target/release/lcmp-testbed experiment --config experiments/demo.toml --out "$out"

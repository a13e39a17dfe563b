#!/usr/bin/env bash
# The main job: the LCMP control plane on the paper's 8-DC topology (built
# in), printing every switch's candidate next hops per destination with path
# delay, bottleneck capacity, C_path, the fused cost at empty queues and the
# LCMP kept set. Installs what it needs first.
#
#   sudo ./scripts/demo.sh                      # built-in 8-DC topology
#   sudo ./scripts/demo.sh --topology topologies/13dc.toml --switch dc3
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh
cargo run --release --quiet -p lcmp-agent -- paths "$@"

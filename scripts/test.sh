#!/usr/bin/env bash
# Runs every test of the project: unit, property and in-process switch tests
# (no root needed) and, when run as root, the namespace tests over real veth
# links. Installs what it needs first (Debian packages, rustup components).
#
#   sudo ./scripts/test.sh           # everything
#   ./scripts/test.sh                # as a user: namespace tests skip themselves
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh

# Namespace tests share two cores with everything else: run test binaries
# one at a time so traffic tests do not compete with each other.
export RUST_TEST_THREADS="${RUST_TEST_THREADS:-2}"

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
cargo test --workspace --no-fail-fast

#!/usr/bin/env bash
# Runs every test of the project: unit, property and in-process switch tests
# (no root needed) and, when run as root, the namespace tests over real veth
# links. Installs what it needs first (Debian packages, rustup components).
#
#   sudo ./scripts/test.sh           # everything
#   sudo ./scripts/test.sh --no-vm   # without the last stage (quick local runs)
#   ./scripts/test.sh                # as a user: namespace tests skip themselves
#
# Last stage: what this machine's kernel cannot do itself (sch_netem,
# SoftRoCE; Debian's own 6.1 and 6.12 kernels) runs in VMs booted with
# stock kernels, scripts/vm-test.sh (its CI subset; --full there for every
# namespace test on every kernel). A kernel that has netem and rdma_rxe
# runs the kernel-feature tests directly instead.
set -euo pipefail
cd "$(dirname "$0")/.."

vm_stage=1
for a in "$@"; do
    case $a in
    --no-vm) vm_stage=0 ;;
    *) echo "test.sh: unknown option $a (--no-vm skips the VM stage)" >&2; exit 2 ;;
    esac
done

./scripts/install-deps.sh

# Namespace tests share two cores with everything else: run test binaries
# one at a time so traffic tests do not compete with each other.
export RUST_TEST_THREADS="${RUST_TEST_THREADS:-2}"

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
# Every dependency's licence against deny.toml; the RustSec advisories when
# their database (a git repository on GitHub) can be fetched.
cargo deny --log-level error check licenses
if cargo deny --log-level error fetch db >/dev/null 2>&1; then
    cargo deny --log-level error check advisories
else
    echo "test.sh: advisories NOT checked: the RustSec advisory database could not be fetched (cargo deny fetch db)"
fi
host_has_features=0
if [[ $(id -u) -eq 0 ]] && modprobe -q sch_netem 2>/dev/null && modprobe -q rdma_rxe 2>/dev/null; then
    host_has_features=1
    # The kernel-feature tests then must find what they test.
    export LCMP_REQUIRE_KERNEL_FEATURES=1
fi
cargo test --workspace --no-fail-fast

if ((!vm_stage)); then
    echo "test.sh: --no-vm: the VM stage (scripts/vm-test.sh: netem, SoftRoCE, Debian's stock kernels) was NOT run"
elif ((host_has_features)); then
    echo "test.sh: this kernel has sch_netem and rdma_rxe: the kernel-feature tests ran on it; no VM stage"
elif [[ $(id -u) -ne 0 ]]; then
    echo "test.sh: not root: the VM stage (scripts/vm-test.sh) was NOT run"
else
    echo "== last stage: scripts/vm-test.sh (this kernel has no sch_netem or rdma_rxe) =="
    ./scripts/vm-test.sh
fi

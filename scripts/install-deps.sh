#!/usr/bin/env bash
# Installs what building and testing the project needs on Debian 12, and
# nothing when it is all there already (safe to run again and again).
#
#   clang, llvm          compile the XDP program (ebpf/build.rs)
#   libbpf-dev           <bpf/bpf_helpers.h> and friends for the XDP program
#   linux-libc-dev       <linux/bpf.h>, <asm/types.h> (multiarch include dir)
#   iproute2, ethtool    namespaces, veth pairs, offload settings in tests
#   procps               sysctl inside test namespaces (netns-tests)
#   iputils-ping, iputils-tracepath, iperf3, tcpdump, bpftool   traffic and debugging
#   fonts-dejavu-core    the font of lcmp-testbed's plots (PNG and SVG)
#   rustfmt, clippy      rustup components used by CI
#   --vm: qemu-system-x86, kmod, udev, perftest, ibverbs-providers (VM tests)
#
# Run as root (or with sudo available). apt-get update runs only when a
# package is missing.
set -euo pipefail

APT_PACKAGES=(
    clang
    llvm
    libbpf-dev
    linux-libc-dev
    iproute2
    ethtool
    procps
    iputils-ping
    iputils-tracepath
    iperf3
    tcpdump
    bpftool
    fonts-dejavu-core
    prometheus
    jq
    time
)
# With --vm, also what scripts/vm.sh and scripts/vm-test.sh need: the VM
# (qemu, kmod's depmod, udev for the guest's serial ports) and what the
# guests run from this machine's root file system (perftest and the rxe
# verbs provider for SoftRoCE).
if [[ ${1:-} == --vm ]]; then
    APT_PACKAGES+=(qemu-system-x86 kmod udev perftest ibverbs-providers)
fi
RUST_COMPONENTS=(rustfmt clippy)

is_installed() {
    dpkg -s "$1" 2>/dev/null | grep -q '^Status: install ok installed$'
}

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    is_installed "$pkg" || missing+=("$pkg")
done

if ((${#missing[@]} > 0)); then
    echo "install-deps: installing ${missing[*]}"
    if [[ $(id -u) -eq 0 ]]; then
        sudo=()
    elif command -v sudo >/dev/null; then
        sudo=(sudo)
    else
        echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -q
    "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
else
    echo "install-deps: apt packages already installed"
fi

if command -v rustup >/dev/null; then
    installed_components=$(rustup component list --installed)
    for comp in "${RUST_COMPONENTS[@]}"; do
        if ! grep -q "^${comp}\(-\|$\)" <<<"$installed_components"; then
            echo "install-deps: rustup component add $comp"
            rustup component add "$comp"
        fi
    done
else
    echo "install-deps: rustup not found; skipping ${RUST_COMPONENTS[*]}" >&2
fi

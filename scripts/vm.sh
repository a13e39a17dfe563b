#!/usr/bin/env bash
# Runs a command inside a VM booted with a stock Debian kernel, with this
# machine's root file system (read-only, through virtme-ng) and the
# repository writable, as root. Output and exit status are the command's.
#
#   sudo scripts/vm.sh -- uname -r                      # Debian 12's 6.1 series
#   sudo scripts/vm.sh --kernel 6.12 -- lcmp-testbed up ...  # bookworm-backports
#   sudo scripts/vm.sh --kernel 6.1.0-57-amd64 -- CMD   # one exact build
#   scripts/vm.sh --list-kernels                        # what can be booted
#
# The command runs in the repository root with target/release and
# target/debug on PATH (build the binaries on the host first: the guest
# sees the host's files, it does not build).
#
# Options:
#   --kernel V     a series (6.1, 6.12, 7.3: the newest build of it) or
#                  one build (6.1.0-57-amd64, 6.12.117+deb12-amd64);
#                  default 6.1 (Debian 12's own kernel)
#   --cpus N       guest CPUs (default 2)
#   --memory M     guest memory (default 4G)
#   --accel A      auto (default), kvm or tcg; auto uses KVM only when a
#                  guest booted with it answers within 60 s (probed once per
#                  host boot, the answer cached), TCG otherwise
#   --timeout S    stop the guest after S seconds (default: none)
#   --nic-pair Q   two virtio-net NICs of Q queue pairs each (1-16), joined
#                  on the host by a bridge of their own, as if by a cable
#                  (repeat for more pairs); pair P's ends have the MACs
#                  02:4c:43:PP:00:00 and 02:4c:43:PP:00:01 (PP = P in hex),
#                  virtio 1.0 with the DMA API (iommu_platform), which
#                  AF_XDP zero-copy on virtio-net needs; the host's taps
#                  and bridges are removed when the guest exits
#   --list-kernels print the kernel builds the package lists offer
#
# What it installs if missing (as scripts/install-deps.sh does, root
# needed): Debian's qemu-system-x86, kmod (depmod) and udev (the guest's
# udevd names the virtio-serial ports that carry the command's output and
# exit status), busybox-static (virtme-ng's initramfs), and virtme-ng from PyPI (pip, pinned version). What it changes on the host, all under
# $LCMP_VM_DIR (default /var/cache/lcmp-vm), nothing under /lib/modules
# or /etc:
#   apt/      a private apt state: the system's own sources plus the same
#             mirrors' backports suites of this release and the next, so
#             their kernels can be downloaded without enabling those suites
#             for the system
#   kernels/  each kernel package (.deb) and its unpacked tree
#             (boot/vmlinuz-*, lib/modules/*; modules.dep by depmod -b),
#             where virtme-ng finds the modules and links them into the
#             guest's /lib/modules
#   accel.*   the KVM probe's answer for this host boot
# Nothing comes from outside the package registries: no prebuilt images.
set -euo pipefail

VNG_VERSION=1.42
repo=$(cd "$(dirname "$0")/.." && pwd)
vm_dir=${LCMP_VM_DIR:-/var/cache/lcmp-vm}
kernel=6.1
cpus=2
memory=4G
accel=auto
timeout_s=
list=0
nic_pairs=()

die() {
    echo "vm.sh: $*" >&2
    exit 2
}

while (($#)); do
    case $1 in
    --kernel) kernel=${2:?--kernel needs a version}; shift 2 ;;
    --kernel=*) kernel=${1#*=}; shift ;;
    --cpus) cpus=${2:?}; shift 2 ;;
    --memory) memory=${2:?}; shift 2 ;;
    --accel) accel=${2:?}; shift 2 ;;
    --timeout) timeout_s=${2:?}; shift 2 ;;
    --nic-pair)
        [[ ${2:-} =~ ^[0-9]+$ ]] && ((${2} >= 1 && ${2} <= 16)) || die "--nic-pair needs a queue count 1-16, not ${2:-nothing}"
        nic_pairs+=("$2"); shift 2 ;;
    --list-kernels) list=1; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --) shift; break ;;
    *) die "unknown option $1 (the command goes after --; --help lists the options)" ;;
    esac
done
case $accel in auto | kvm | tcg) ;; *) die "--accel must be auto, kvm or tcg, not $accel" ;; esac
if ((!list && $# == 0)); then
    die "no command: scripts/vm.sh [--kernel V] -- CMD [ARG...]"
fi

is_installed() {
    dpkg -s "$1" 2>/dev/null | grep -q '^Status: install ok installed$'
}

# One line when something cannot be had, so a caller sees why at once.
need_packages() {
    local missing=() p
    for p in "$@"; do is_installed "$p" || missing+=("$p"); done
    ((${#missing[@]} == 0)) && return
    [[ $(id -u) -eq 0 ]] || die "${missing[*]} not installed, and installing needs root"
    echo "vm.sh: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    if ! { apt-get install -y -q --no-install-recommends "${missing[@]}" ||
        { apt-get update -q && apt-get install -y -q --no-install-recommends "${missing[@]}"; }; } >"$vm_dir/apt-install.log" 2>&1; then
        die "cannot install ${missing[*]} (apt-get failed; $vm_dir/apt-install.log has its output): the VM needs qemu-system-x86_64 and depmod"
    fi
}

mkdir -p "$vm_dir/kernels" || die "cannot create $vm_dir (set LCMP_VM_DIR to a writable directory)"
# busybox-static: virtme-ng builds an initramfs around it for kernels whose
# virtio and 9p drivers are modules (Debian 13's 7.x).
need_packages qemu-system-x86 kmod udev busybox-static
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 not found although qemu-system-x86 is installed"
if ! command -v vng >/dev/null; then
    echo "vm.sh: installing virtme-ng $VNG_VERSION (pip)" >&2
    pip3 install -q "virtme-ng==$VNG_VERSION" >"$vm_dir/pip-install.log" 2>&1 ||
        die "cannot install virtme-ng $VNG_VERSION with pip ($vm_dir/pip-install.log has its output)"
    hash -r
    command -v vng >/dev/null || die "virtme-ng installed but vng is not on PATH"
fi

# --- the private apt: the system's sources plus its mirrors' backports ---
apt_dir=$vm_dir/apt
apt_opts=(
    -o "Dir::State=$apt_dir/state" -o "Dir::Cache=$apt_dir/cache"
    -o "Dir::Etc::SourceList=$apt_dir/sources.list"
    -o "Dir::Etc::SourceParts=$apt_dir/sources.list.d"
    -o "Dir::Etc::Preferences=$apt_dir/preferences" -o "Dir::Etc::PreferencesParts=$apt_dir/preferences.d"
    -o "APT::Architecture=amd64" -o "APT::Sandbox::User=root"
)

# The backports suites searched for kernels: the release's and the next
# release's (whose kernels boot this release's user space just as well).
backports_suites() {
    local next=
    case $1 in
    bullseye) next=bookworm ;;
    bookworm) next=trixie ;;
    trixie) next=forky ;;
    esac
    echo "$1-backports${next:+ $next-backports}"
}

write_sources() {
    local codename
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    [[ -n $codename ]] || die "cannot tell this system's release (no VERSION_CODENAME in /etc/os-release)"
    rm -rf "$apt_dir/sources.list.d"
    mkdir -p "$apt_dir/sources.list.d" "$apt_dir/preferences.d" "$apt_dir/state/lists/partial" "$apt_dir/cache/archives/partial"
    : >"$apt_dir/sources.list"
    local f
    if [[ -f /etc/apt/sources.list ]]; then
        grep -E '^[[:space:]]*deb[[:space:]]' /etc/apt/sources.list >>"$apt_dir/sources.list" || true
        # One-line entries of the release itself, again for its backports.
        local suite
        for suite in $(backports_suites "$codename"); do
            awk -v c="$codename" -v b="$suite" '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i == c) { $i = b; print; next } }' \
                /etc/apt/sources.list >>"$apt_dir/sources.list"
        done
    fi
    for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [[ -f $f ]] || continue
        cp "$f" "$apt_dir/sources.list.d/"
    done
    # deb822 stanzas whose Suites hold the release: the same stanza with
    # the backports suites of this release and the next (Debian 12 offers
    # 6.12 in its own backports, Debian 13's backports the 6.16 to 7.x
    # kernels, whose SoftRoCE works inside network namespaces).
    cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk -v c="$codename" -v b="$(backports_suites "$codename")" '
        function flush() { if (has) printf "%s\n", buf; buf = ""; has = 0 }
        /^[[:space:]]*$/ { flush(); next }
        /^#/ { next }
        /^Suites:/ {
            n = split(substr($0, 8), s, " ")
            for (i = 1; i <= n; i++) if (s[i] == c) has = 1
            buf = buf "Suites: " b "\n"; next
        }
        { buf = buf $0 "\n" }
        END { flush() }' >"$apt_dir/sources.list.d/lcmp-vm-backports.sources"
    [[ -s $apt_dir/sources.list.d/lcmp-vm-backports.sources ]] ||
        grep -q backports "$apt_dir/sources.list" ||
        echo "vm.sh: note: no $codename source found to derive $codename-backports from; only the release's kernels are offered" >&2
}

apt_update() {
    write_sources
    apt-get "${apt_opts[@]}" update -q >"$vm_dir/apt-update.log" 2>&1 ||
        die "cannot read the package lists (apt-get update failed; $vm_dir/apt-update.log has its output)"
    touch "$apt_dir/updated"
}

# Kernel builds on offer: linux-image-<build> with a vmlinuz (not the
# -dbg, -unsigned, -rt or -cloud flavours).
offered_builds() {
    apt-cache "${apt_opts[@]}" pkgnames linux-image- 2>/dev/null |
        sed -n -E 's/^linux-image-([0-9]+\.[0-9]+[.0-9]*[-+][^ ]*-amd64)$/\1/p' |
        grep -v -E -- '-(rt|cloud)-amd64$' | sort -V
}

have_lists() { [[ -f $apt_dir/updated ]] && [[ -n $(find "$apt_dir/updated" -mmin -1440 2>/dev/null) ]]; }

# Unpacked trees already here answer without the network.
local_build() {
    local b
    for b in "$vm_dir"/kernels/*/boot/vmlinuz-*; do
        [[ -f $b ]] || continue
        b=${b##*/vmlinuz-}
        if [[ $b == "$1" || $b == "$1-amd64" ]]; then echo "$b"; return; fi
    done
    return 1
}

resolve_build() {
    local want=$1 builds b
    have_lists || apt_update
    builds=$(offered_builds)
    [[ -n $builds ]] || die "the package lists offer no linux-image-*-amd64 kernel ($vm_dir/apt-update.log)"
    if [[ $want =~ ^[0-9]+\.[0-9]+$ ]]; then
        # A series: 6.1 is 6.1.0-N-amd64, 6.12 is 6.12.P+debN-amd64.
        b=$(grep -E "^${want//./\\.}[.-]" <<<"$builds" | tail -n 1)
    else
        b=$(grep -x -F -e "$want" -e "$want-amd64" <<<"$builds" | tail -n 1)
    fi
    if [[ -z $b ]]; then
        local series
        series=$(sed -E 's/^([0-9]+\.[0-9]+).*/\1/' <<<"$builds" | sort -uV | tr '\n' ' ')
        die "no Debian kernel package for version $want (series on offer: ${series% }; e.g. --kernel $(tail -n 1 <<<"$builds"))"
    fi
    echo "$b"
}

if ((list)); then
    apt_update
    offered_builds
    exit 0
fi

build=$(local_build "$kernel" || true)
[[ -n $build ]] || build=$(resolve_build "$kernel")
tree=$vm_dir/kernels/$build
kimg=$tree/boot/vmlinuz-$build
if [[ ! -f $kimg ]]; then
    echo "vm.sh: downloading linux-image-$build" >&2
    mkdir -p "$vm_dir/kernels/debs"
    have_lists || apt_update
    (cd "$vm_dir/kernels/debs" && apt-get "${apt_opts[@]}" download -q "linux-image-$build") >"$vm_dir/apt-download.log" 2>&1 ||
        die "cannot download linux-image-$build ($vm_dir/apt-download.log has apt's output)"
    deb=$(ls -t "$vm_dir"/kernels/debs/linux-image-"${build}"_*.deb | head -n 1)
    debs=("$deb")
    # Since 6.18 or so linux-image-<build> is a small package whose image
    # and modules are in linux-binary-<build> and linux-modules-<build>.
    # The listing is read whole: `grep -q` would close the pipe at the
    # first match and pipefail would take dpkg-deb's SIGPIPE for a failure.
    listing=$(dpkg-deb -c "$deb") || die "cannot read $deb"
    if ! grep -q 'vmlinuz' <<<"$listing"; then
        parts=$(dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed -n -E "s/^ *(linux-(binary|modules)-${build//+/\\+}) .*/\1/p")
        [[ -n $parts ]] || die "linux-image-$build holds no kernel image and names no linux-binary package"
        # shellcheck disable=SC2086
        (cd "$vm_dir/kernels/debs" && apt-get "${apt_opts[@]}" download -q $parts) >>"$vm_dir/apt-download.log" 2>&1 ||
            die "cannot download $(echo $parts) ($vm_dir/apt-download.log has apt's output)"
        for p in $parts; do debs+=("$(ls -t "$vm_dir"/kernels/debs/"${p}"_*.deb | head -n 1)"); done
    fi
    rm -rf "$tree.partial"
    for d in "${debs[@]}"; do dpkg-deb -x "$d" "$tree.partial" || die "cannot unpack $d"; done
    # Debian 13's packages put modules (and the image) under usr/lib;
    # virtme-ng looks for boot/vmlinuz-* with lib/modules beside it.
    if [[ ! -d $tree.partial/lib/modules && -d $tree.partial/usr/lib/modules ]]; then
        ln -s usr/lib "$tree.partial/lib"
    fi
    if [[ ! -f $tree.partial/boot/vmlinuz-$build && -f $tree.partial/usr/lib/modules/$build/vmlinuz ]]; then
        mkdir -p "$tree.partial/boot"
        ln -s "../usr/lib/modules/$build/vmlinuz" "$tree.partial/boot/vmlinuz-$build"
    fi
    depmod -b "$tree.partial" "$build" || die "depmod failed for $build"
    mv "$tree.partial" "$tree"
    rm -f "${debs[@]}"
fi
[[ -f $kimg ]] || die "no kernel image at $kimg"

# --- the accelerator ---
boot_id=$(cat /proc/sys/kernel/random/boot_id 2>/dev/null || echo unknown)
probe_kvm() {
    local cache=$vm_dir/accel.$boot_id
    if [[ -f $cache ]]; then cat "$cache"; return; fi
    rm -f "$vm_dir"/accel.*
    local answer=tcg out
    if [[ -r /dev/kvm && -w /dev/kvm ]]; then
        # A guest that hangs (as seen on this kind of VM) is killed at 60 s.
        if out=$(timeout --kill-after=5 60 vng --run "$kimg" --memory 512M --cpus 1 \
            --exec 'echo lcmp-vm-kvm-ok' </dev/null 2>&1) && grep -q lcmp-vm-kvm-ok <<<"$out"; then
            answer=kvm
        fi
    fi
    echo "$answer" >"$cache"
    echo "$answer"
}
case $accel in
auto) chosen=$(probe_kvm); why="auto: $( [[ $chosen == kvm ]] && echo 'a KVM guest booted' || echo 'no KVM guest boots here')" ;;
kvm) chosen=kvm; why="asked for" ;;
tcg) chosen=tcg; why="asked for" ;;
esac
accel_args=()
[[ $chosen == tcg ]] && accel_args=(--disable-kvm)
echo "vm.sh: kernel $build, accelerator ${chosen^^} ($why), $cpus CPUs, $memory" >&2

# --- the NICs: per pair two multi-queue taps on a bridge of their own ---
qemu_opts=
host_links=()
remove_host_links() {
    local l
    for l in "${host_links[@]}"; do ip link del "$l" 2>/dev/null || true; done
}
trap remove_host_links EXIT
for p in "${!nic_pairs[@]}"; do
    q=${nic_pairs[$p]}
    # Unique per run (pid) and within IFNAMSIZ: lq<pid>b<pair>, lq<pid>t<pair><end>.
    br=lq$$b$p
    ip link add "$br" type bridge || die "cannot create bridge $br for --nic-pair (root and the bridge module needed)"
    host_links+=("$br")
    # Nothing of the host's own (IPv6 autoconfiguration) on the wire.
    sysctl -qw "net.ipv6.conf.$br.disable_ipv6=1" 2>/dev/null || true
    ip link set "$br" up
    for end in 0 1; do
        tap=lq$$t$p$end
        ip tuntap add dev "$tap" mode tap multi_queue || die "cannot create tap $tap for --nic-pair"
        host_links+=("$tap")
        sysctl -qw "net.ipv6.conf.$tap.disable_ipv6=1" 2>/dev/null || true
        ip link set "$tap" master "$br" up
        printf -v mac '02:4c:43:%02x:00:%02x' "$p" "$end"
        # vhost needs KVM's eventfds; the guest gets Q queue pairs and
        # 2Q+2 MSI-X vectors (one per queue, config, control).
        qemu_opts+=" -netdev tap,id=lqn$p$end,ifname=$tap,script=no,downscript=no,queues=$q,vhost=off"
        qemu_opts+=" -device virtio-net-pci,netdev=lqn$p$end,mq=on,vectors=$((2 * q + 2)),mac=$mac,disable-legacy=on,iommu_platform=on"
    done
done
net_args=()
[[ -n $qemu_opts ]] && net_args=(--qemu-opts="$qemu_opts")

# --- the run ---
printf -v cmd '%q ' "$@"
# The guest's PATH puts the repository's binaries first; its root is the
# host's, read-only, with the repository writable.
script="export PATH=$(printf %q "$repo/target/release:$repo/target/debug"):\$PATH LCMP_IN_VM=$(printf %q "$build"); cd $(printf %q "$repo") && $cmd"
timeout_cmd=()
[[ -n $timeout_s ]] && timeout_cmd=(timeout --kill-after=10 "$timeout_s")
set +e
# Through pipes: qemu writes the console at its own file offset, which
# overwrites what came before when the output is a regular file.
"${timeout_cmd[@]}" vng --run "$kimg" "${accel_args[@]}" "${net_args[@]}" --cpus "$cpus" --memory "$memory" \
    --rwdir="$repo" --rodir="$vm_dir" --cwd "$repo" --exec "$script" </dev/null 2> >(cat >&2) | cat
rc=${PIPESTATUS[0]}
set -e
if [[ -n $timeout_s && $rc -eq 124 ]]; then
    die "the guest did not finish within $timeout_s s"
fi
exit "$rc"

#!/usr/bin/env bash
# Packet-rate and latency harness for a forwarder on veth (root).
#
#   sudo scripts/bench-forwarding.sh          # writes target/bench/forwarding.json
#
# Topology (namespaces $TAG-gen, $TAG-dut, $TAG-sink; TAG=lcmpb-<pid>):
#
#   gen  g0 198.18.0.2 ---- d0 198.18.0.1  dut  d1 198.18.1.1 ---- s0 198.18.1.2  sink
#   gen  g1 198.18.2.2 ------------------------------------------- s1 198.18.2.1  sink
#
# g1-s1 is a direct pair (no DUT): the generator's own rate and the latency
# reference. Neighbour entries are static (no ARP); offloads are off.
#
# Traffic source: `lcmp-bench-tool gen` (netns-tests crate), an XDP
# live-frames generator: BPF_PROG_TEST_RUN with BPF_F_TEST_XDP_LIVE_FRAMES
# runs an XDP_TX program on a prepared Ethernet/IPv4/UDP frame and sends each
# copy out of g0, like xdp-trafficgen does. xdp-trafficgen itself (xdp-tools
# 1.3.1, Debian 12) does not run here: its BPF object carries a tracepoint
# program for `xdp_redirect_map_err`, a tracepoint newer kernels (6.18 here)
# no longer have, and libbpf 1.1 refuses the whole object ("failed to find
# kernel BTF type ID of 'xdp_redirect_map_err'"). `xdp-bench` fails the same
# way, so the sink and the in-kernel redirect use `lcmp-bench-tool xdp`
# (minimal hand-assembled XDP programs attached over rtnetlink). Frame size
# is the Ethernet frame without FCS (64 or 1500 bytes), one UDP flow to
# 198.18.1.2:9, TTL 64.
#
# Sink: an XDP_DROP program on s0 (s1); the count is the veth's
# rx_queue_*_xdp_packets. veth only accepts XDP-transmitted/redirected frames
# when the receiving end has NAPI on, so the receiving end of every
# generator or redirect hop carries an XDP program.
#
# Method per rate case: run the generator unpaced for $DURATION s pinned to
# CPU $GEN_CPU; offered = frames it handed to g0, forwarded = frames the sink
# counted; pps = forwarded / generator time. A forwarder's rate counts only
# if the source offered more than it forwarded (>2% more): else the line says
# WARNING and the number is a lower bound.
#
# veth runs a receiver's whole path inside the sender's softirq, on the
# sender's CPU, unless something moves it. So:
#  - kernel_pps_*: the DUT's ingress d0 steers packets by RPS to CPU $FWD_CPU,
#    so the kernel forwards on its own core (the generator and the veth
#    receive of d0 stay on CPU $GEN_CPU), as a userspace switch pinned to
#    $FWD_CPU would. d0 carries an XDP_PASS program only to turn on veth NAPI.
#  - kernel_inline_pps_64: the veth default, everything inline on the
#    generator's CPU; the generator waits for the forwarder, so offered equals
#    forwarded by construction (reported for reference, rate of the pair).
#  - xdp_redirect_pps_64: bpf_redirect d0 -> d1 in d0's XDP (inline on the
#    generator's CPU; moving it to another core with threaded NAPI measured
#    ~3x slower on veth). The platform's upper bound; normally source-bound.
#
# Latency (kernel_latency_p50_us / p99): `lcmp-bench-tool latency` sends
# $PROBE_COUNT UDP probes, $PROBE_GAP_US us apart, from a thread in gen
# stamped with CLOCK_REALTIME just before send(), to a thread in sink that
# reads the kernel's receive timestamp (SO_TIMESTAMPNS, taken when s0/s1
# hands the packet to the stack): ns resolution and no receiver wake-up
# noise (ping's 1 us resolution is too coarse for a ~1 us hop). Once
# over the direct pair (g1 -> s1) and once through the DUT (g0 -> d0, d1 ->
# s0); added one-way latency of the forwarding hop = delay quantile through
# the DUT - the same quantile direct (p50 and p99; the difference of
# quantiles, not a quantile of differences). The DUT path has one forwarding
# step and one more veth crossing. Both include the sender's syscall entry
# and UDP/IP output, which cancel in the difference. The DUT runs the plain
# kernel configuration (no XDP, no RPS) for this.
#
# Cost per hop (cpu_s_per_gbit_5hop_processes / _one_process): a chain of 5
# switches (hosts a - c1 - c2 - c3 - c4 - c5 - b, 1 Gbit/s links of
# 2dc-3path's p1 path) brought up by `lcmp-testbed up --no-agent
# --switch-arg=--no-emulation`, once with one lcmp-switch process per switch
# and once with all five in one process on one event loop (`--loops=1`:
# the load fits one core); iperf3 -P 4 -b 100M (a fixed
# offered TCP load of 400 Mbit/s, below what either forwards) for
# $CHAIN_DURATION s from a to b. Figure = CPU seconds of the switch
# processes (utime + stime over the transfer) / Gbit forwarded, summed over
# the five switches (tx_bytes deltas of their stats files), the median of
# $CHAIN_RUNS runs each, alternating.
#
# Dense testbed (<figure>_2dc_processes / _2dc_one_process for goodput_gbps,
# tx_ring_full_per_gbit, drops_per_gbit (TX ring full + queue full),
# transit_drops_per_gbit, transit_ce_marks_per_gbit, cpu_s_per_gbit):
# 2dc-3path with its emulated links, `lcmp-testbed up --no-agent`, a
# process per switch vs one process (the testbed's default: a loop per
# core), iperf3 -P 8 for $DENSE_DURATION s from a to b; per forwarded Gbit
# summed over the switches; transit figures are those of p1-p3, whose links
# in and out have one rate (a real network drops and marks nothing there:
# only a late switch's burst does). Medians of $CHAIN_RUNS runs each,
# alternating.
#
# Environment: DURATION (5), GEN_CPU (0), FWD_CPU (1), PROBE_COUNT (3000),
# PROBE_GAP_US (1000), PAIRS (3: kernel/switch 64-byte runs whose medians
# are reported), OUT (target/bench/forwarding.json), CARGO_TARGET_DIR.
# Quick loops for development: ONLY_SWITCH=1 or ONLY_KERNEL=1 (64 bytes
# only), PERF=1 (profile the forwarding core into target/bench/perf-*.txt),
# SWITCH_ARGS (extra lcmp-switch flags), SKIP_BUILD=1, ONLY_CHAIN=1 (the
# 5-hop chain only), ONLY_DENSE=1 (the dense testbed only), CHAIN_DURATION
# (10), DENSE_DURATION (10), CHAIN_RUNS (3).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DURATION=${DURATION:-5}
GEN_CPU=${GEN_CPU:-0}
FWD_CPU=${FWD_CPU:-1}
PROBE_COUNT=${PROBE_COUNT:-3000}
PROBE_GAP_US=${PROBE_GAP_US:-1000}
PAIRS=${PAIRS:-3}
CHAIN_DURATION=${CHAIN_DURATION:-10}
CHAIN_RUNS=${CHAIN_RUNS:-3}
DENSE_DURATION=${DENSE_DURATION:-10}
# The switch's RX/fill ring depth in this harness (its default is 4096):
# the live-frames generator and veth deliver in bursts of thousands of
# frames, which a 2-4k ring cannot absorb. The kernel's counterpart is
# net.core.netdev_max_backlog (1000 by default), measured both ways below.
SWITCH_RX_RING=${SWITCH_RX_RING:-32768}
DEEP_BACKLOG=${DEEP_BACKLOG:-32768}
OUT=${OUT:-$ROOT/target/bench/forwarding.json}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
TOOL=$TARGET_DIR/release/lcmp-bench-tool
TESTBED=$TARGET_DIR/release/lcmp-testbed

if [[ $(id -u) -ne 0 ]]; then
    echo "bench-forwarding.sh: needs root (network namespaces, XDP)" >&2
    exit 1
fi
for t in ip ethtool taskset awk sed iperf3 python3; do
    command -v "$t" >/dev/null || { echo "missing $t: run scripts/install-deps.sh" >&2; exit 1; }
done
if [[ $(nproc) -lt 2 ]]; then
    FWD_CPU=$GEN_CPU
fi

TAG=lcmpb-$$
GEN_NS=$TAG-gen
DUT_NS=$TAG-dut
SINK_NS=$TAG-sink
WORK=$(mktemp -d /tmp/lcmpb.XXXXXX)
# The chain's testbed (names: 1-16 of a-z, 0-9, _).
CHAIN_TB=lcmpb$(( $$ % 100000 ))

GEN_IP=198.18.0.2 DUT_IN_IP=198.18.0.1 DUT_OUT_IP=198.18.1.1 SINK_IP=198.18.1.2
REF_GEN_IP=198.18.2.2 REF_SINK_IP=198.18.2.1
MAC_G0=02:4c:b0:00:00:01 MAC_D0=02:4c:b0:00:00:02
MAC_D1=02:4c:b0:00:00:03 MAC_S0=02:4c:b0:00:00:04
MAC_G1=02:4c:b0:00:00:05 MAC_S1=02:4c:b0:00:00:06

log() { echo "[bench] $*" >&2; }
nsx() { local ns=$1; shift; ip netns exec "$ns" "$@"; }

ORIG_BACKLOG=$(sysctl -n net.core.netdev_max_backlog)
cleanup() {
    set +e
    sysctl -qw net.core.netdev_max_backlog="$ORIG_BACKLOG"
    [[ -d /run/lcmp-testbed/$CHAIN_TB ]] && "$TESTBED" down --name "$CHAIN_TB" >/dev/null 2>&1
    for ns in "$GEN_NS" "$DUT_NS" "$SINK_NS"; do
        ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
        ip netns del "$ns" 2>/dev/null
    done
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Namespaces of an earlier run whose process is gone.
sweep_leftovers() {
    local ns pid
    for ns in $(ip netns list | awk '{print $1}' | grep '^lcmpb-' || true); do
        pid=${ns#lcmpb-}
        pid=${pid%%-*}
        if [[ ! -d /proc/$pid ]]; then
            log "removing leftover namespace $ns"
            ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
            ip netns del "$ns" || true
        fi
    done
}

build_tool() {
    [[ -n ${SKIP_BUILD:-} ]] && return
    log "building lcmp-bench-tool"
    (cd "$ROOT" && CARGO_TARGET_DIR=$TARGET_DIR cargo build --release --quiet \
        -p lcmp-netns-tests --bin lcmp-bench-tool -p lcmp-switch --bin lcmp-switch \
        -p lcmp-testbed --bin lcmp-testbed)
}

# veth NS_A DEV_A MAC_A NS_B DEV_B MAC_B
veth() {
    ip link add name "$2" address "$3" netns "$1" type veth \
        peer name "$5" address "$6" netns "$4"
    nsx "$1" ethtool -K "$2" tso off gso off gro off tx off >/dev/null
    nsx "$4" ethtool -K "$5" tso off gso off gro off tx off >/dev/null
    ip -n "$1" link set "$2" up
    ip -n "$4" link set "$5" up
}

setup() {
    for ns in "$GEN_NS" "$DUT_NS" "$SINK_NS"; do
        ip netns add "$ns"
        ip -n "$ns" link set lo up
        nsx "$ns" sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0 \
            net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
    done
    veth "$GEN_NS" g0 $MAC_G0 "$DUT_NS" d0 $MAC_D0
    veth "$DUT_NS" d1 $MAC_D1 "$SINK_NS" s0 $MAC_S0
    veth "$GEN_NS" g1 $MAC_G1 "$SINK_NS" s1 $MAC_S1

    ip -n "$GEN_NS" addr add $GEN_IP/24 dev g0
    ip -n "$GEN_NS" addr add $REF_GEN_IP/24 dev g1
    ip -n "$GEN_NS" route add 198.18.1.0/24 via $DUT_IN_IP dev g0
    ip -n "$GEN_NS" neigh replace $DUT_IN_IP lladdr $MAC_D0 dev g0 nud permanent
    ip -n "$GEN_NS" neigh replace $REF_SINK_IP lladdr $MAC_S1 dev g1 nud permanent

    ip -n "$DUT_NS" addr add $DUT_IN_IP/24 dev d0
    ip -n "$DUT_NS" addr add $DUT_OUT_IP/24 dev d1
    ip -n "$DUT_NS" neigh replace $GEN_IP lladdr $MAC_G0 dev d0 nud permanent
    ip -n "$DUT_NS" neigh replace $SINK_IP lladdr $MAC_S0 dev d1 nud permanent

    ip -n "$SINK_NS" addr add $SINK_IP/24 dev s0
    ip -n "$SINK_NS" addr add $REF_SINK_IP/24 dev s1
    ip -n "$SINK_NS" route add 198.18.0.0/24 via $DUT_OUT_IP dev s0
    ip -n "$SINK_NS" neigh replace $DUT_OUT_IP lladdr $MAC_D1 dev s0 nud permanent
    ip -n "$SINK_NS" neigh replace $REF_GEN_IP lladdr $MAC_G1 dev s1 nud permanent

    # The same DUT as a topology, for a switch daemon (see run_switch_case).
    cat >"$WORK/bench-topology.toml" <<EOF
# bench-forwarding.sh: one switch between a traffic source and a sink.
[[switch]]
name = "dut"
prefixes = ["198.18.0.0/24", "198.18.1.0/24"]

[[host]]
name = "gen"
switch = "dut"
addresses = ["$GEN_IP/24"]
rate = "100Gbps"
delay = "0us"
ifname = "g0"
switch_ifname = "d0"

[[host]]
name = "sink"
switch = "dut"
addresses = ["$SINK_IP/24"]
rate = "100Gbps"
delay = "0us"
ifname = "s0"
switch_ifname = "d1"
EOF
}

xdp() { nsx "$1" "$TOOL" xdp --dev "$2" "$3"; }

# Sum of an ethtool -S counter pattern over queues.
counter() {
    nsx "$1" ethtool -S "$2" | awk -v re="$3" '$1 ~ re {s += $2} END {print s + 0}'
}

dut_plain() {
    xdp "$DUT_NS" d0 off
    nsx "$DUT_NS" sh -c 'echo 0 > /sys/class/net/d0/queues/rx-0/rps_cpus'
    nsx "$DUT_NS" sysctl -qw net.ipv4.ip_forward=0
}

# Packets dropped at the kernel's per-CPU backlog (RPS target full), all CPUs.
backlog_drops() {
    local _ dropped sum=0
    while read -r _ dropped _; do
        sum=$((sum + 16#$dropped))
    done </proc/net/softnet_stat
    echo "$sum"
}

# measure_rate LABEL SIZE GEN_DEV DST_MAC DST_IP SINK_DEV [inline]
# Runs the generator and counts at the sink. Sets RATE_PPS, OFFERED_PPS,
# RING_DROPS, BACKLOG_DROPS and BOUND ("forwarder" or "source"); prints one line. With
# "inline" (forwarder runs in the generator's softirq, so offered equals
# forwarded by construction) no warning is printed.
measure_rate() {
    local label=$1 size=$2 gdev=$3 dmac=$4 dip=$5 sdev=$6 mode=${7:-}
    local src=$GEN_IP
    [[ $gdev == g1 ]] && src=$REF_GEN_IP
    local c0 e0 b0 c1 e1 b1 out frames secs
    c0=$(counter "$SINK_NS" "$sdev" '^rx_queue_[0-9]+_xdp_packets:')
    e0=$(counter "$GEN_NS" "$gdev" '^tx_queue_[0-9]+_xdp_xmit_errors:')
    b0=$(backlog_drops)
    out=$(taskset -c "$GEN_CPU" ip netns exec "$GEN_NS" "$TOOL" gen --dev "$gdev" \
        --dst-mac "$dmac" --src-ip "$src" --dst-ip "$dip" --size "$size" --duration "$DURATION")
    sleep 0.3
    c1=$(counter "$SINK_NS" "$sdev" '^rx_queue_[0-9]+_xdp_packets:')
    e1=$(counter "$GEN_NS" "$gdev" '^tx_queue_[0-9]+_xdp_xmit_errors:')
    b1=$(backlog_drops)
    frames=$(sed -n 's/.*frames=\([0-9]*\).*/\1/p' <<<"$out")
    secs=$(sed -n 's/.*seconds=\([0-9.]*\).*/\1/p' <<<"$out")
    RATE_PPS=$(awk -v n=$((c1 - c0)) -v s="$secs" 'BEGIN {printf "%.0f", n / s}')
    OFFERED_PPS=$(awk -v n="$frames" -v s="$secs" 'BEGIN {printf "%.0f", n / s}')
    RING_DROPS=$((e1 - e0))
    BACKLOG_DROPS=$((b1 - b0))
    if awk -v f="$RATE_PPS" -v o="$OFFERED_PPS" 'BEGIN {exit !(o > f * 1.02)}'; then
        BOUND=forwarder
    else
        BOUND=source
    fi
    log "$(printf '%-14s size %4s: forwarded %9s pps, offered %9s pps; drops: DUT veth ring %s, backlog %s' \
        "$label" "$size" "$RATE_PPS" "$OFFERED_PPS" "$RING_DROPS" "$BACKLOG_DROPS")"
    if [[ $BOUND == source && $mode != inline ]]; then
        log "WARNING: $label: the source offered no more than was forwarded;" \
            "$RATE_PPS pps is a lower bound of the forwarder's rate"
    fi
}

# probe DST_NS DST_IP: one-way UDP delay gen -> DST_NS (lcmp-bench-tool
# latency). Sets P50_NS, P99_NS, RECEIVED.
probe() {
    local out
    out=$("$TOOL" latency --from "$GEN_NS" --to "$1" --dst "$2:7777" \
        --count "$PROBE_COUNT" --gap-us "$PROBE_GAP_US")
    P50_NS=$(sed -n 's/.*p50_ns=\([0-9a-z]*\).*/\1/p' <<<"$out")
    P99_NS=$(sed -n 's/.*p99_ns=\([0-9a-z]*\).*/\1/p' <<<"$out")
    RECEIVED=$(sed -n 's/.*received=\([0-9]*\).*/\1/p' <<<"$out")
}

# measure_latency LABEL: added one-way latency of the path through the DUT
# against the direct pair. Sets LAT_P50_US, LAT_P99_US (null if more than
# 5% of the probes were lost).
measure_latency() {
    local label=$1 d50 d99 dn
    probe "$SINK_NS" $REF_SINK_IP
    d50=$P50_NS d99=$P99_NS dn=$RECEIVED
    probe "$SINK_NS" $SINK_IP
    if [[ $RECEIVED -lt $((PROBE_COUNT * 95 / 100)) || $d50 == null || $P50_NS == null ]]; then
        log "WARNING: $label latency: only $RECEIVED of $PROBE_COUNT probes through the DUT arrived"
        LAT_P50_US=null LAT_P99_US=null
        return
    fi
    LAT_P50_US=$(awk -v a="$P50_NS" -v b="$d50" 'BEGIN {printf "%.2f", (a - b) / 1000}')
    LAT_P99_US=$(awk -v a="$P99_NS" -v b="$d99" 'BEGIN {printf "%.2f", (a - b) / 1000}')
    log "$(printf '%-14s one-way delay p50/p99 ns: direct %s/%s (%s), via DUT %s/%s (%s) -> added p50 %s us, p99 %s us' \
        "$label" "$d50" "$d99" "$dn" "$P50_NS" "$P99_NS" "$RECEIVED" "$LAT_P50_US" "$LAT_P99_US")"
}

# ---------------------------------------------------------------------------
# The userspace switch as DUT: `lcmp-switch` in the DUT namespace on d0/d1
# (switch "dut" of $WORK/bench-topology.toml: host gen on d0, host sink on
# d1), pinned to CPU $FWD_CPU, line rate (--no-emulation: no shaper or delay
# line), peer MACs given, stats in $WORK/switch-stats.json.
SWITCH=$TARGET_DIR/release/lcmp-switch
SWITCH_PID=

# start_switch DUT_NS TOPOLOGY POLL_MODE [nostats]
start_switch() {
    local dut_ns=$1 topo=$2 poll=$3 stats=(--stats-file "$WORK/switch-stats.json")
    [[ ${4:-} == nostats ]] && stats=()
    taskset -c "$FWD_CPU" ip netns exec "$dut_ns" "$SWITCH" --topology "$topo" --switch dut \
        --port d0 --port d1 --peer-mac "d0=$MAC_G0" --peer-mac "d1=$MAC_S0" \
        --no-emulation --poll "$poll" "${stats[@]}" \
        --rx-ring-size "$SWITCH_RX_RING" --frames $((SWITCH_RX_RING * 4)) ${SWITCH_ARGS:-} \
        >"$WORK/switch.log" 2>&1 &
    SWITCH_PID=$!
    local i
    for i in $(seq 100); do
        grep -q forwarding "$WORK/switch.log" 2>/dev/null && return 0
        kill -0 "$SWITCH_PID" 2>/dev/null || break
        sleep 0.1
    done
    log "ERROR: lcmp-switch did not start:"
    sed 's/^/    /' "$WORK/switch.log" >&2
    return 1
}

stop_switch() {
    [[ -n $SWITCH_PID ]] || return 0
    kill -INT "$SWITCH_PID" 2>/dev/null || true
    wait "$SWITCH_PID" 2>/dev/null || true
    SWITCH_PID=
    # The final stats line: drops by reason, for the log.
    grep '^{' "$WORK/switch.log" | tail -n 1 | sed 's/^/    switch stats: /' >&2
}

# run_switch_case GEN_NS DUT_NS SINK_NS DUT_IN_IF DUT_OUT_IF SIZE TOPOLOGY
# Echoes the forwarded pps (busy polling on one core), or null.
run_switch_case() {
    local dut_ns=$2 size=$6 topo=$7
    start_switch "$dut_ns" "$topo" busy || { echo null; return; }
    local perf_pid=
    if [[ -n ${PERF:-} ]]; then
        # Profile the forwarding core while it runs (PERF=1).
        # Skip the generator's start-up, so the profile holds only traffic.
        (sleep 1 && perf record -q -g -C "${PERF_CPU:-$FWD_CPU}" -o "$WORK/perf-switch-$size.data" \
            -- sleep $((DURATION - 2)) >/dev/null 2>&1) &
        perf_pid=$!
    fi
    cp "$WORK/switch-stats.json" "$WORK/stats-before.json" 2>/dev/null || true
    measure_rate switch "$size" g0 "$MAC_D0" "$SINK_IP" s0
    cp "$WORK/switch-stats.json" "$WORK/stats-after.json" 2>/dev/null || true
    if [[ -n ${POLL_STATS:-} ]]; then
        python3 - "$WORK/stats-before.json" "$WORK/stats-after.json" >&2 <<'PY' || true
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
d = {k: b[k] - a[k] for k in ("polls", "polls_with_rx", "rx_frames")}
print("    polls during traffic: %(polls)d, with frames: %(polls_with_rx)d, frames: %(rx_frames)d" % d)
PY
    fi
    if [[ -n $perf_pid ]]; then
        wait "$perf_pid" || true
        mkdir -p "$(dirname "$OUT")"
        {
            perf report -q -i "$WORK/perf-switch-$size.data" --no-children --sort comm,dso \
                --stdio -g none 2>/dev/null | grep -v '^$' | head -15
            perf report -q -i "$WORK/perf-switch-$size.data" --no-children --sort sym \
                --stdio -g none 2>/dev/null | grep -v '^$' | head -50
            if [[ -n ${PERF_ANNOTATE:-} ]]; then
                perf annotate -q -i "$WORK/perf-switch-$size.data" --stdio -s "$PERF_ANNOTATE" \
                    2>/dev/null | grep -E '^ +[0-9]+\.[0-9]+' | sort -rn | head -30
            fi
        } >"$(dirname "$OUT")/perf-switch-$size.txt" || true
        log "profile of the forwarding core: $(dirname "$OUT")/perf-switch-$size.txt"
    fi
    stop_switch
    echo "$RATE_PPS"
}

# run_switch_latency GEN_NS DUT_NS SINK_NS DUT_IN_IF DUT_OUT_IF TOPOLOGY
# Echoes "p50 p99" of the added one-way latency (busy polling).
run_switch_latency() {
    local dut_ns=$2 topo=$6
    start_switch "$dut_ns" "$topo" busy || { echo null null; return; }
    measure_latency switch
    stop_switch
    echo "$LAT_P50_US $LAT_P99_US"
}

# idle_cpu DUT_NS TOPOLOGY [nostats]: CPU use of an idle switch in event
# mode, percent of one core, over 10 s (utime + stime from /proc/PID/stat).
# The 5-switch chain's topology (see the header).
chain_topology() {
    local f=$WORK/chain.toml i
    {
        printf '[[dc]]\nname = "DC1"\n\n[[dc]]\nname = "DC2"\n\n'
        printf '[[switch]]\nname = "c1"\ndc = "DC1"\nprefixes = ["10.0.1.0/24"]\n\n'
        for i in 2 3 4; do printf '[[switch]]\nname = "c%d"\n\n' "$i"; done
        printf '[[switch]]\nname = "c5"\ndc = "DC2"\nprefixes = ["10.0.2.0/24"]\n\n'
        printf '[[host]]\nname = "a"\nswitch = "c1"\naddresses = ["10.0.1.2/24"]\n'
        printf 'rate = "10Gbps"\ndelay = "10us"\nbuffer = "1MB"\n\n'
        printf '[[host]]\nname = "b"\nswitch = "c5"\naddresses = ["10.0.2.2/24"]\n'
        printf 'rate = "10Gbps"\ndelay = "10us"\nbuffer = "1MB"\n\n'
        for i in 1 2 3 4; do
            printf '[[link]]\na = "c%d"\nb = "c%d"\nrate = "1Gbps"\ndelay = "5ms"\nbuffer = "500KB"\n\n' \
                "$i" $((i + 1))
        done
    } >"$f"
    echo "$f"
}

# Sum of the chain switches' tx_bytes and their processes' CPU seconds:
# "BYTES CPU_S".
chain_sample() {
    python3 - "/run/lcmp-testbed/$CHAIN_TB" <<'PY'
import json, os, sys
d = sys.argv[1]
st = json.load(open(os.path.join(d, "state.json")))
tx = sum(json.load(open(p["stats"]))["counters"]["tx_bytes"] for p in st["procs"])
hz = os.sysconf("SC_CLK_TCK")
cpu = 0
for pid in {p["pid"] for p in st["procs"]}:
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    cpu += int(f[11]) + int(f[12])
print(tx, cpu / hz)
PY
}

# wait_stats_rewrite FILE: until a switch rewrites its stats file (at most
# 5 s; they are rewritten every 200 ms).
wait_stats_rewrite() {
    local m0 i
    m0=$(stat -c "%.9Y %i" "$1" 2>/dev/null || true)
    for i in $(seq 100); do
        [[ $(stat -c "%.9Y %i" "$1" 2>/dev/null || true) != "$m0" ]] && return
        sleep 0.05
    done
}

# chain_case HOW (one | per-switch): CPU seconds per forwarded Gbit.
chain_case() {
    local how=$1 topo before after
    topo=$(chain_topology)
    local loops=()
    [[ $how == one ]] && loops=(--switch-arg=--loops=1)
    "$TESTBED" up --name "$CHAIN_TB" --topology "$topo" --no-agent --switch-processes "$how" \
        --switch-arg=--no-emulation "${loops[@]}" ${SWITCH_ARGS:+--switch-arg="$SWITCH_ARGS"} >/dev/null 2>"$WORK/chain-up.log" \
        || { sed 's/^/    /' "$WORK/chain-up.log" >&2; return 1; }
    "$TESTBED" exec --name "$CHAIN_TB" b -- iperf3 -s -1 >/dev/null 2>&1 &
    local server=$! i
    # The client retries until the server listens (no fixed wait).
    before=$(chain_sample)
    for i in $(seq 50); do
        "$TESTBED" exec --name "$CHAIN_TB" a -- iperf3 -c 10.0.2.2 -P 4 -b 100M \
            -t "$CHAIN_DURATION" -J >"$WORK/chain-iperf.json" 2>/dev/null && break
        before=$(chain_sample)
        sleep 0.1
    done
    # The stats files are rewritten every 200 ms: wait for a rewrite after
    # the transfer before reading the forwarded bytes, but take the CPU now.
    local cpu_end
    cpu_end=$(chain_sample | awk '{print $2}')
    wait_stats_rewrite "/run/lcmp-testbed/$CHAIN_TB/c1.stats.json"
    after=$(chain_sample)
    wait "$server" 2>/dev/null || true
    "$TESTBED" down --name "$CHAIN_TB" >/dev/null 2>&1
    awk -v b="$before" -v a="$after" -v c="$cpu_end" -v how="$how" 'BEGIN {
        split(b, B, " "); split(a, A, " ");
        gbit = (A[1] - B[1]) * 8 / 1e9; cpu = c - B[2];
        if (gbit <= 0) { print "null"; exit }
        printf "[bench] 5-hop chain, %s: %.2f Gbit forwarded (all hops), %.2f CPU s\n", how, gbit, cpu > "/dev/stderr";
        printf "%.4f", cpu / gbit }'
}

# Both chain cases, CHAIN_RUNS times alternating; sets R[...] medians.
chain_cases() {
    local p=() o=() i
    for ((i = 0; i < CHAIN_RUNS; i++)); do
        p+=("$(chain_case per-switch)")
        o+=("$(chain_case one)")
    done
    R[cpu_s_per_gbit_5hop_processes]=$(median "${p[@]}")
    R[cpu_s_per_gbit_5hop_one_process]=$(median "${o[@]}")
    R[cpu_s_per_gbit_5hop_processes_trials]="[$(IFS=,; echo "${p[*]}")]"
    R[cpu_s_per_gbit_5hop_one_process_trials]="[$(IFS=,; echo "${o[*]}")]"
    log "5-hop chain, CPU s per forwarded Gbit: processes ${R[cpu_s_per_gbit_5hop_processes]}" \
        "${R[cpu_s_per_gbit_5hop_processes_trials]}, one process ${R[cpu_s_per_gbit_5hop_one_process]}" \
        "${R[cpu_s_per_gbit_5hop_one_process_trials]}"
}

# dense_sample: the testbed's switches' counters and CPU, as JSON.
dense_sample() {
    python3 - "/run/lcmp-testbed/$CHAIN_TB" <<'PY'
import json, os, sys
d = sys.argv[1]
st = json.load(open(os.path.join(d, "state.json")))
out = {"tx_bytes": 0, "tx_ring_full": 0, "queue_full": 0, "transit_drops": 0, "transit_ce": 0, "cpu_s": 0.0}
for p in st["procs"]:
    s = json.load(open(p["stats"]))
    out["tx_bytes"] += s["counters"]["tx_bytes"]
    out["tx_ring_full"] += s["drops"]["tx_ring_full"]
    out["queue_full"] += s["drops"]["queue_full"]
    # p1..p3 have links of one rate in and out: a real network drops
    # nothing there.
    if p["name"].startswith("p"):
        out["transit_drops"] += s["drops_total"]
        out["transit_ce"] += s["counters"]["ce_marked"]
hz = os.sysconf("SC_CLK_TCK")
for pid in {p["pid"] for p in st["procs"]}:
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    out["cpu_s"] += (int(f[11]) + int(f[12])) / hz
print(json.dumps(out))
PY
}

# dense_case HOW (one | per-switch): 2dc-3path with emulated links,
# iperf3 -P 8 from a to b; prints one JSON object of per-Gbit figures.
dense_case() {
    local how=$1 before after i
    "$TESTBED" up --name "$CHAIN_TB" --topology "$ROOT/topologies/2dc-3path.toml" --no-agent \
        --switch-processes "$how" ${SWITCH_ARGS:+--switch-arg="$SWITCH_ARGS"} >/dev/null 2>"$WORK/dense-up.log" \
        || { sed 's/^/    /' "$WORK/dense-up.log" >&2; echo null; return; }
    "$TESTBED" exec --name "$CHAIN_TB" b -- iperf3 -s -1 >/dev/null 2>&1 &
    local server=$!
    before=$(dense_sample)
    for i in $(seq 50); do
        "$TESTBED" exec --name "$CHAIN_TB" a -- iperf3 -c 10.0.2.2 -P 8 ${DENSE_RATE:+-b "$DENSE_RATE"} \
            -t "$DENSE_DURATION" -J >"$WORK/dense-iperf.json" 2>/dev/null && break
        before=$(dense_sample)
        sleep 0.1
    done
    # As in chain_case: CPU now, counters after the next stats rewrite.
    local cpu_end
    cpu_end=$(dense_sample)
    wait_stats_rewrite "/run/lcmp-testbed/$CHAIN_TB/s1.stats.json"
    after=$(dense_sample)
    wait "$server" 2>/dev/null || true
    "$TESTBED" down --name "$CHAIN_TB" >/dev/null 2>&1
    python3 - "$before" "$after" "$cpu_end" "$WORK/dense-iperf.json" "$how" <<'PY'
import json, sys
b, a, c = (json.loads(x) for x in sys.argv[1:4])
gbit = (a["tx_bytes"] - b["tx_bytes"]) * 8 / 1e9
if gbit <= 0:
    print("null"); sys.exit()
per = lambda k: round((a[k] - b[k]) / gbit, 2)
r = {
    "goodput_gbps": round(json.load(open(sys.argv[4]))["end"]["sum_received"]["bits_per_second"] / 1e9, 3),
    "tx_ring_full_per_gbit": per("tx_ring_full"),
    "drops_per_gbit": round((a["tx_ring_full"] + a["queue_full"] - b["tx_ring_full"] - b["queue_full"]) / gbit, 2),
    "transit_drops_per_gbit": per("transit_drops"),
    "transit_ce_marks_per_gbit": per("transit_ce"),
    "cpu_s_per_gbit": round((c["cpu_s"] - b["cpu_s"]) / gbit, 4),
}
print(f"[bench] 2dc-3path iperf3 -P 8, {sys.argv[5]}: {gbit:.2f} Gbit forwarded (all hops), {r}", file=sys.stderr)
print(json.dumps(r))
PY
}

# Both dense cases, CHAIN_RUNS times alternating; sets R[...] medians.
dense_cases() {
    local p=() o=() i k
    for ((i = 0; i < CHAIN_RUNS; i++)); do
        p+=("$(dense_case per-switch)")
        o+=("$(dense_case one)")
    done
    for k in goodput_gbps tx_ring_full_per_gbit drops_per_gbit transit_drops_per_gbit transit_ce_marks_per_gbit cpu_s_per_gbit; do
        R[${k}_2dc_processes]=$(median $(printf '%s\n' "${p[@]}" | python3 -c "import json,sys; [print(json.loads(l)['$k'] if l.strip() != 'null' else 'null') for l in sys.stdin]"))
        R[${k}_2dc_one_process]=$(median $(printf '%s\n' "${o[@]}" | python3 -c "import json,sys; [print(json.loads(l)['$k'] if l.strip() != 'null' else 'null') for l in sys.stdin]"))
        log "2dc-3path iperf3 -P 8, $k: processes ${R[${k}_2dc_processes]}, one process ${R[${k}_2dc_one_process]}"
    done
}

idle_cpu() {
    local dut_ns=$1 topo=$2
    start_switch "$dut_ns" "$topo" event "${3:-}" || { echo null; return; }
    sleep 1
    local hz t0 t1
    hz=$(getconf CLK_TCK)
    t0=$(awk '{print $14 + $15}' "/proc/$SWITCH_PID/stat")
    sleep 10
    t1=$(awk '{print $14 + $15}' "/proc/$SWITCH_PID/stat")
    stop_switch
    awk -v d=$((t1 - t0)) -v hz="$hz" 'BEGIN {printf "%.2f", 100 * d / hz / 10}'
}

# median N...: the middle value (lower middle for an even count); null
# values are ignored.
median() {
    printf '%s\n' "$@" | grep -v null | sort -n | awk '{v[NR] = $1} END {print (NR ? v[int((NR + 1) / 2)] : "null")}'
}

json_num() { [[ -n ${1:-} ]] && echo "$1" || echo null; }

main() {
    sweep_leftovers
    build_tool
    setup
    log "namespaces $GEN_NS / $DUT_NS / $SINK_NS; ${DURATION}s per case;" \
        "generator on CPU $GEN_CPU, forwarding core CPU $FWD_CPU"
    local rps_mask
    rps_mask=$(printf '%x' $((1 << FWD_CPU)))

    declare -A R
    if [[ -n ${ONLY_KERNEL:-} ]]; then
        # Quick loop: kernel forwarding at 64 bytes only, profiled with PERF=1.
        xdp "$SINK_NS" s0 drop
        nsx "$DUT_NS" sysctl -qw net.ipv4.ip_forward=1
        xdp "$DUT_NS" d0 pass
        nsx "$DUT_NS" sh -c "echo $rps_mask > /sys/class/net/d0/queues/rx-0/rps_cpus"
        [[ -n ${PERF:-} ]] && perf record -q -g -C "$FWD_CPU" -o "$WORK/perf-kernel.data" -- sleep "$DURATION" >/dev/null 2>&1 &
        measure_rate kernel 64 g0 $MAC_D0 $SINK_IP s0
        wait || true
        if [[ -n ${PERF:-} ]]; then
            mkdir -p "$(dirname "$OUT")"
            perf report -q -i "$WORK/perf-kernel.data" --no-children --sort sym --stdio -g none \
                2>/dev/null | grep -v '^$' | head -50 >"$(dirname "$OUT")/perf-kernel-64.txt" || true
        fi
        return
    fi
    if [[ -n ${ONLY_DENSE:-} ]]; then
        dense_cases
        return
    fi
    if [[ -n ${ONLY_CHAIN:-} ]]; then
        chain_cases
        local k
        for k in cpu_s_per_gbit_5hop_processes cpu_s_per_gbit_5hop_one_process; do
            echo "$k ${R[$k]}"
        done
        return
    fi
    if [[ -n ${ONLY_SWITCH:-} ]]; then
        # Quick loop for switch work: the switch cases only (ONLY_SWITCH=1).
        xdp "$SINK_NS" s0 drop
        run_switch_case "$GEN_NS" "$DUT_NS" "$SINK_NS" d0 d1 64 "$WORK/bench-topology.toml"
        return
    fi
    # 1. The generator alone, straight into the sink (g1 -> s1).
    xdp "$SINK_NS" s1 drop
    measure_rate generator 64 g1 $MAC_S1 $REF_SINK_IP s1 inline
    R[generator_pps_64]=$RATE_PPS
    measure_rate generator 1500 g1 $MAC_S1 $REF_SINK_IP s1 inline
    R[generator_pps_1500]=$RATE_PPS
    xdp "$SINK_NS" s1 off

    # 2. Kernel IP forwarding on its own core (RPS to FWD_CPU).
    xdp "$SINK_NS" s0 drop
    nsx "$DUT_NS" sysctl -qw net.ipv4.ip_forward=1
    xdp "$DUT_NS" d0 pass
    nsx "$DUT_NS" sh -c "echo $rps_mask > /sys/class/net/d0/queues/rx-0/rps_cpus"
    for size in 64 1500; do
        measure_rate kernel "$size" g0 $MAC_D0 $SINK_IP s0
        R[kernel_pps_$size]=$RATE_PPS
        R[kernel_offered_pps_$size]=$OFFERED_PPS
        R[kernel_forwarder_bound_$size]=$([[ $BOUND == forwarder ]] && echo true || echo false)
    done
    # 2a. The same with a backlog as deep as the switch's RX ring (the
    # sysctl is global: restored right after).
    sysctl -qw net.core.netdev_max_backlog="$DEEP_BACKLOG"
    measure_rate kernel_deep 64 g0 $MAC_D0 $SINK_IP s0
    R[kernel_deep_backlog_pps_64]=$RATE_PPS
    R[kernel_deep_backlog_forwarder_bound_64]=$([[ $BOUND == forwarder ]] && echo true || echo false)
    sysctl -qw net.core.netdev_max_backlog="$ORIG_BACKLOG"
    # 2b. Kernel forwarding inline on the generator's CPU (veth default).
    nsx "$DUT_NS" sh -c 'echo 0 > /sys/class/net/d0/queues/rx-0/rps_cpus'
    measure_rate kernel_inline 64 g0 $MAC_D0 $SINK_IP s0 inline
    R[kernel_inline_pps_64]=$RATE_PPS
    dut_plain

    # 3. In-kernel XDP redirect d0 -> d1 (the platform's upper bound).
    xdp "$DUT_NS" d0 redirect:d1
    measure_rate xdp_redirect 64 g0 $MAC_D0 $SINK_IP s0
    R[xdp_redirect_pps_64]=$RATE_PPS
    R[xdp_redirect_offered_pps_64]=$OFFERED_PPS
    R[xdp_redirect_forwarder_bound_64]=$([[ $BOUND == forwarder ]] && echo true || echo false)
    dut_plain

    # 4. Latency of kernel forwarding (plain DUT, no XDP anywhere).
    xdp "$SINK_NS" s0 off
    nsx "$DUT_NS" sysctl -qw net.ipv4.ip_forward=1
    measure_latency kernel
    R[kernel_latency_p50_us]=$LAT_P50_US
    R[kernel_latency_p99_us]=$LAT_P99_US
    dut_plain

    # 5. The userspace switch (filled in by the switch part).
    xdp "$SINK_NS" s0 drop
    R[switch_pps_64]=$(run_switch_case "$GEN_NS" "$DUT_NS" "$SINK_NS" d0 d1 64 "$WORK/bench-topology.toml")
    R[switch_pps_1500]=$(run_switch_case "$GEN_NS" "$DUT_NS" "$SINK_NS" d0 d1 1500 "$WORK/bench-topology.toml")
    xdp "$SINK_NS" s0 off
    local lat
    lat=$(run_switch_latency "$GEN_NS" "$DUT_NS" "$SINK_NS" d0 d1 "$WORK/bench-topology.toml")
    R[switch_latency_p50_us]=${lat%% *}
    R[switch_latency_p99_us]=${lat##* }
    # 6. The 64-byte ratio in alternating pairs (kernel, switch, kernel,
    # ...): single runs on a shared VM vary by +-5-10%, so each side's
    # figure is the median of PAIRS runs (including the ones above).
    local k_trials=("${R[kernel_pps_64]}") s_trials=("${R[switch_pps_64]}") i
    xdp "$SINK_NS" s0 drop
    for ((i = 1; i < PAIRS; i++)); do
        nsx "$DUT_NS" sysctl -qw net.ipv4.ip_forward=1
        xdp "$DUT_NS" d0 pass
        nsx "$DUT_NS" sh -c "echo $rps_mask > /sys/class/net/d0/queues/rx-0/rps_cpus"
        measure_rate kernel 64 g0 $MAC_D0 $SINK_IP s0
        k_trials+=("$RATE_PPS")
        dut_plain
        s_trials+=("$(run_switch_case "$GEN_NS" "$DUT_NS" "$SINK_NS" d0 d1 64 "$WORK/bench-topology.toml")")
    done
    xdp "$SINK_NS" s0 off
    R[kernel_pps_64_trials]="[$(IFS=,; echo "${k_trials[*]}")]"
    R[switch_pps_64_trials]="[$(IFS=,; echo "${s_trials[*]}")]"
    R[kernel_pps_64]=$(median "${k_trials[@]}")
    R[switch_pps_64]=$(median "${s_trials[@]}")
    R[switch_to_kernel_64]=$(awk -v s="${R[switch_pps_64]}" -v k="${R[kernel_pps_64]}" \
        'BEGIN {if (k > 0 && s != "null") printf "%.3f", s / k; else print "null"}')
    log "64 B medians of $PAIRS: kernel ${R[kernel_pps_64]} pps ${R[kernel_pps_64_trials]}," \
        "switch ${R[switch_pps_64]} pps ${R[switch_pps_64_trials]}; switch/kernel ${R[switch_to_kernel_64]}"

    # Idle cost of the daemon itself (default flags), and with the stats
    # file rewritten every 0.5 s (a file create and rename each time).
    R[idle_cpu_percent_event_mode]=$(idle_cpu "$DUT_NS" "$WORK/bench-topology.toml" nostats)
    R[idle_cpu_percent_event_mode_stats_file]=$(idle_cpu "$DUT_NS" "$WORK/bench-topology.toml")
    log "idle CPU of lcmp-switch in event mode: ${R[idle_cpu_percent_event_mode]}% of one core" \
        "(${R[idle_cpu_percent_event_mode_stats_file]}% with a stats file every 0.5 s)"

    # 7. Cost per hop: the 5-switch chain, a process each vs one process.
    chain_cases
    # 8. A dense testbed: 2dc-3path's five switches with emulated links,
    # a process each vs one process.
    dense_cases

    mkdir -p "$(dirname "$OUT")"
    {
        echo "{"
        echo "  \"duration_s\": $DURATION,"
        echo "  \"generator\": \"lcmp-bench-tool gen (XDP live frames, 1 thread on CPU $GEN_CPU)\","
        echo "  \"forwarding_cpu\": $FWD_CPU,"
        echo "  \"switch_rx_ring\": $SWITCH_RX_RING,"
        echo "  \"kernel_netdev_max_backlog\": $(sysctl -n net.core.netdev_max_backlog),"
        local keys=(generator_pps_64 generator_pps_1500
            kernel_pps_64 kernel_offered_pps_64 kernel_forwarder_bound_64
            kernel_pps_1500 kernel_offered_pps_1500 kernel_forwarder_bound_1500
            kernel_deep_backlog_pps_64 kernel_deep_backlog_forwarder_bound_64
            kernel_inline_pps_64
            xdp_redirect_pps_64 xdp_redirect_offered_pps_64 xdp_redirect_forwarder_bound_64
            kernel_latency_p50_us kernel_latency_p99_us
            switch_pps_64 switch_pps_1500 switch_latency_p50_us switch_latency_p99_us
            kernel_pps_64_trials switch_pps_64_trials switch_to_kernel_64
            idle_cpu_percent_event_mode idle_cpu_percent_event_mode_stats_file
            cpu_s_per_gbit_5hop_processes cpu_s_per_gbit_5hop_one_process
            cpu_s_per_gbit_5hop_processes_trials cpu_s_per_gbit_5hop_one_process_trials)
        local k
        for k in goodput_gbps tx_ring_full_per_gbit drops_per_gbit transit_drops_per_gbit transit_ce_marks_per_gbit cpu_s_per_gbit; do
            keys+=("${k}_2dc_processes" "${k}_2dc_one_process")
        done
        local i last=$((${#keys[@]} - 1))
        for i in "${!keys[@]}"; do
            printf '  "%s": %s%s\n' "${keys[$i]}" "$(json_num "${R[${keys[$i]}]:-}")" \
                "$([[ $i -lt $last ]] && echo , || true)"
        done
        echo "}"
    } >"$OUT"
    log "wrote $OUT"
    cat "$OUT"
}

main "$@"

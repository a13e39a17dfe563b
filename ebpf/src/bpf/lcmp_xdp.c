// SPDX-License-Identifier: Apache-2.0
/*
 * lcmp_xdp: steer the switch's data packets into AF_XDP sockets.
 *
 * One copy of this program is attached to each switch port. For every frame
 * received on RX queue q it decides:
 *
 *   - IPv4 / IPv6 (Ethernet II, untagged): redirect to the AF_XDP socket that
 *     the switch registered at key q of the `xsks` XSKMAP. With no socket
 *     registered for q, bpf_redirect_map() returns its fallback action
 *     XDP_PASS and the kernel gets the frame (counted as PASSED_NO_SOCKET).
 *   - IPv6 Neighbor Discovery (ICMPv6 types 133..137: RS, RA, NS, NA,
 *     Redirect) directly after the fixed IPv6 header: kernel.
 *   - ARP, VLAN-tagged frames (802.1Q, 802.1ad, 0x9100) and every other
 *     EtherType: kernel.
 *   - Frames too short to read the headers looked at here: kernel (it drops
 *     what is malformed).
 *
 *   - IPv4 / IPv6 addressed to the interface itself (an address in the
 *     `local_v4` / `local_v6` maps, filled by the loader with the
 *     interface's addresses): kernel, so the gateway address of a port
 *     answers ping and traceroute as a router's would.
 *
 * Known simplifications (documented, deliberate):
 *   - IPv4 multicast/broadcast and IPv6 multicast destinations (MLD, IGMP,
 *     mDNS, ...): kernel. The switch routes unicast only.
 *   - ND behind IPv6 extension headers is not recognised (RFC 4861 messages
 *     normally have none) and goes to AF_XDP like other IPv6 unless its
 *     destination is multicast.
 *   - Not multi-buffer aware (plain "xdp" section): frames must fit one
 *     buffer, so jumbo MTUs in native mode need an "xdp.frags" variant.
 *   - "redirected" counts the verdict. A frame can still be dropped after
 *     that, e.g. when the socket's RX ring or fill ring is empty; those drops
 *     show in the socket's XDP_STATISTICS (rx_dropped, rx_fill_ring_empty).
 *
 * Each verdict increments one slot of the per-CPU `verdicts` array (no atomics
 * needed: a per-CPU slot is only written by the CPU running the program).
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "lcmp_shared.h"

/* Not in every linux/if_ether.h. */
#ifndef ETH_P_QINQ1
#define ETH_P_QINQ1 0x9100
#endif

#define ICMPV6_ROUTER_SOLICITATION 133
#define ICMPV6_NDISC_REDIRECT 137

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, LCMP_XSKS_MAX_ENTRIES);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LCMP_LOCAL_MAX_ENTRIES);
	__type(key, __u32); /* IPv4 address, network byte order */
	__type(value, __u8);
} local_v4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LCMP_LOCAL_MAX_ENTRIES);
	__type(key, struct in6_addr);
	__type(value, __u8);
} local_v6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LCMP_CNT_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} verdicts SEC(".maps");

static __always_inline void count(__u32 idx)
{
	__u64 *slot = bpf_map_lookup_elem(&verdicts, &idx);

	if (slot)
		*slot += 1;
}

static __always_inline int pass(__u32 idx)
{
	count(idx);
	return XDP_PASS;
}

SEC("xdp")
int lcmp_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > data_end)
		return pass(LCMP_CNT_TRUNCATED);

	switch (eth->h_proto) {
	case bpf_htons(ETH_P_IP): {
		struct iphdr *ip = (void *)(eth + 1);

		if ((void *)(ip + 1) > data_end)
			return pass(LCMP_CNT_TRUNCATED);
		/* 224.0.0.0/4 and 255.255.255.255: the switch routes unicast. */
		if ((ip->daddr & bpf_htonl(0xf0000000)) == bpf_htonl(0xe0000000) ||
		    ip->daddr == 0xffffffff)
			return pass(LCMP_CNT_PASSED_MULTICAST);
		if (bpf_map_lookup_elem(&local_v4, &ip->daddr))
			return pass(LCMP_CNT_PASSED_LOCAL);
		break;
	}
	case bpf_htons(ETH_P_IPV6): {
		struct ipv6hdr *ip6 = (void *)(eth + 1);

		if ((void *)(ip6 + 1) > data_end)
			return pass(LCMP_CNT_TRUNCATED);
		if (ip6->nexthdr == IPPROTO_ICMPV6) {
			/* Only the ICMPv6 type byte is needed. */
			__u8 *icmp6_type = (void *)(ip6 + 1);

			if ((void *)(icmp6_type + 1) > data_end)
				return pass(LCMP_CNT_TRUNCATED);
			if (*icmp6_type >= ICMPV6_ROUTER_SOLICITATION &&
			    *icmp6_type <= ICMPV6_NDISC_REDIRECT)
				return pass(LCMP_CNT_PASSED_ND);
		}
		/* ff00::/8 (MLD, RS to all-routers, ...): the kernel's. */
		if (ip6->daddr.in6_u.u6_addr8[0] == 0xff)
			return pass(LCMP_CNT_PASSED_MULTICAST);
		if (bpf_map_lookup_elem(&local_v6, &ip6->daddr))
			return pass(LCMP_CNT_PASSED_LOCAL);
		break;
	}
	case bpf_htons(ETH_P_ARP):
		return pass(LCMP_CNT_PASSED_ARP);
	case bpf_htons(ETH_P_8021Q):
	case bpf_htons(ETH_P_8021AD):
	case bpf_htons(ETH_P_QINQ1):
		return pass(LCMP_CNT_PASSED_VLAN);
	default:
		return pass(LCMP_CNT_PASSED_NON_IP);
	}

	/*
	 * The low bits of the flags argument are the action returned when the
	 * map has no socket at this key: XDP_PASS, so that a port whose socket
	 * is not (yet, or no longer) registered still works through the kernel.
	 */
	long action = bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);

	count(action == XDP_REDIRECT ? LCMP_CNT_REDIRECTED : LCMP_CNT_PASSED_NO_SOCKET);
	return (int)action;
}

/*
 * No GPL-only helper is used (bpf_redirect_map and map lookups are not
 * GPL-only), so the program carries the project's own licence. Using a
 * GPL-only helper (bpf_printk, for one) would need a GPL-compatible string.
 */
char _license[] SEC("license") = "Apache-2.0";

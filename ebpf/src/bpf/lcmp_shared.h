/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Definitions shared between the XDP program (lcmp_xdp.c) and the Rust loader
 * (ebpf/src/lib.rs). The Rust side mirrors these numbers by hand; the unit test
 * `shared_header_matches_rust` in lib.rs parses this file and fails if the two
 * drift apart. Keep one `#define NAME VALUE` per line.
 */
#ifndef LCMP_SHARED_H
#define LCMP_SHARED_H

/* Index of each verdict counter in the `verdicts` PERCPU_ARRAY map. */
#define LCMP_CNT_REDIRECTED 0       /* IP frame handed to bpf_redirect_map and a socket was registered for the queue */
#define LCMP_CNT_PASSED_NO_SOCKET 1 /* IP frame, but no socket registered for the RX queue: kernel gets it */
#define LCMP_CNT_PASSED_ARP 2       /* ARP (0x0806) */
#define LCMP_CNT_PASSED_ND 3        /* IPv6 Neighbor Discovery: ICMPv6 types 133..137 right after the fixed header */
#define LCMP_CNT_PASSED_VLAN 4      /* 802.1Q / 802.1ad / 0x9100 tagged frame */
#define LCMP_CNT_PASSED_NON_IP 5    /* any other EtherType (LLDP, MPLS, ...) */
#define LCMP_CNT_TRUNCATED 6        /* too short to read the headers we look at: passed */
#define LCMP_CNT_PASSED_MULTICAST 7 /* IPv4 multicast/broadcast or IPv6 multicast destination: not routed by the switch */
#define LCMP_CNT_PASSED_LOCAL 8     /* destination is an address of the port's interface (ping, traceroute to the gateway): kernel */
#define LCMP_CNT_COUNT 9            /* number of counters = max_entries of `verdicts` */

/* max_entries of the `local_v4` and `local_v6` hash maps: addresses of the interface. */
#define LCMP_LOCAL_MAX_ENTRIES 64

/* max_entries of the `xsks` XSKMAP: RX queue ids 0..LCMP_XSKS_MAX_ENTRIES-1. */
#define LCMP_XSKS_MAX_ENTRIES 256

#endif /* LCMP_SHARED_H */

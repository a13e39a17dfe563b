//! The flow-decision log: one record per path decision (a new flow, a
//! failover off a dead port, a decision not cached because the flow cache
//! was full), so operators and experiments can see which egress port each
//! flow took.
//!
//! The packet path only appends a fixed-size [`FlowRecord`] to a bounded
//! buffer allocated up front ([`FlowLog::record`]: no I/O, no allocation);
//! a record that finds the buffer full is dropped and counted. The daemon
//! loop drains the buffer as CSV off the packet path
//! ([`FlowLog::write_csv`]), one `write` per flush:
//!
//! ```text
//! time_ns,src,dst,proto,sport,dport,port,ifname,reason,prefix
//! 1500000,10.0.1.2,10.0.2.2,6,40000,80,2,s1p2,new,10.0.2.0/24
//! ```
//!
//! `time_ns` is the switch's clock at the decision (the poll's monotonic
//! time, `CLOCK_MONOTONIC` in the daemon); `port` is the egress port's
//! index and `ifname` its interface; `sport` is the identifier of an ICMP
//! echo; `sport`/`dport` are 0 for protocols
//! without ports (ICMP other than echoes, GRE, ...); `reason` is `new`, `failover` or
//! `cache_full`; `prefix` is the route the decision was made over (looked
//! up again when writing, off the packet path; a table replaced between the
//! decision and the write, at most one stats interval, may name the new
//! route).

use std::io::{self, Write};
use std::net::IpAddr;

use ipnet::IpNet;
use lcmp_wire::FlowTuple;

/// The CSV header line (without the newline).
pub const CSV_HEADER: &str = "time_ns,src,dst,proto,sport,dport,port,ifname,reason,prefix";

/// Why a path decision was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecisionReason {
    /// A flow not in the cache, decided and cached.
    New,
    /// A cached flow whose port went down, moved to a live one.
    Failover,
    /// A flow decided but not cached (its cache bucket was full of live
    /// flows): its next packet is decided again, and logged again.
    CacheFull,
}

impl DecisionReason {
    /// The name in the CSV `reason` column.
    pub const fn as_str(self) -> &'static str {
        match self {
            DecisionReason::New => "new",
            DecisionReason::Failover => "failover",
            DecisionReason::CacheFull => "cache_full",
        }
    }
}

/// One path decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowRecord {
    /// The switch's clock at the decision, ns.
    pub time_ns: u64,
    /// The flow's 5-tuple (ports 0 for protocols without them).
    pub flow: FlowTuple,
    /// The chosen egress port (index).
    pub port: u8,
    /// Why the decision was made.
    pub reason: DecisionReason,
}

/// Counters of a flow log (monotonic): the snapshot's type, so the stats
/// file reports them as they are.
pub use lcmp_control::snapshot::FlowLogStats;

/// The bounded buffer of decisions plus its counters and a reusable text
/// buffer for writing them out.
#[derive(Debug)]
pub struct FlowLog {
    /// Never grows past its initial capacity: [`FlowLog::record`] checks
    /// before pushing.
    records: Vec<FlowRecord>,
    capacity: usize,
    dropped: u64,
    written: u64,
    write_failed: u64,
    /// CSV text of one flush, reused.
    text: Vec<u8>,
}

impl FlowLog {
    /// A log buffering up to `capacity` records (at least 1), allocated now.
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        // Fill and empty the buffer once, so its pages are faulted in here
        // and not one by one on the packet path.
        let mut records = vec![
            FlowRecord {
                time_ns: 0,
                flow: FlowTuple::V4 {
                    src: [0; 4],
                    dst: [0; 4],
                    proto: 0,
                    sport: 0,
                    dport: 0,
                },
                port: 0,
                reason: DecisionReason::New,
            };
            capacity
        ];
        records.clear();
        FlowLog {
            records,
            capacity,
            dropped: 0,
            written: 0,
            write_failed: 0,
            text: Vec::new(),
        }
    }

    /// Appends a record, or counts it dropped if the buffer is full. No
    /// allocation, no I/O.
    #[inline]
    pub fn record(&mut self, record: FlowRecord) {
        if self.records.len() < self.capacity {
            self.records.push(record);
        } else {
            self.dropped += 1;
        }
    }

    /// The records buffered since the last write, oldest first.
    pub fn records(&self) -> &[FlowRecord] {
        &self.records
    }

    /// Buffer capacity, records.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// True when at least half the buffer is in use (time to write it out
    /// before decisions start being dropped).
    pub fn half_full(&self) -> bool {
        self.records.len() * 2 >= self.capacity
    }

    /// The counters.
    pub fn stats(&self) -> FlowLogStats {
        FlowLogStats {
            written: self.written,
            dropped: self.dropped,
            write_failed: self.write_failed,
            buffered: self.records.len() as u64,
            capacity: self.capacity as u64,
        }
    }

    /// Writes the CSV header line to `out`.
    pub fn write_header(out: &mut impl Write) -> io::Result<()> {
        out.write_all(CSV_HEADER.as_bytes())?;
        out.write_all(b"\n")
    }

    /// Writes every buffered record to `out` as CSV lines, in one
    /// `write_all`, and empties the buffer. `ifname` names a port, `prefix`
    /// gives the route of a destination address. Returns the number of
    /// records written; on an error they all count as `write_failed` (part
    /// of them may have reached `out`).
    pub fn write_csv<'a>(
        &mut self,
        out: &mut impl Write,
        ifname: impl Fn(u8) -> &'a str,
        prefix: impl Fn(IpAddr) -> Option<IpNet>,
    ) -> io::Result<usize> {
        if self.records.is_empty() {
            return Ok(0);
        }
        self.text.clear();
        for r in &self.records {
            format_record(&mut self.text, r, ifname(r.port), prefix(r.flow.dst_ip()));
        }
        let n = self.records.len();
        self.records.clear();
        match out.write_all(&self.text) {
            Ok(()) => {
                self.written += n as u64;
                Ok(n)
            }
            Err(e) => {
                self.write_failed += n as u64;
                Err(e)
            }
        }
    }
}

/// Appends the CSV line of `r` (with its newline) to `out`: `ifname` is
/// the name of port `r.port`, `prefix` the route it was chosen over (empty
/// column if `None`). Addresses read as their `Display` forms (RFC 5952 for
/// IPv6), written without the `fmt` machinery: a flush formats up to
/// half the buffer in the poll loop.
pub fn format_record(out: &mut Vec<u8>, r: &FlowRecord, ifname: &str, prefix: Option<IpNet>) {
    push_u64(out, r.time_ns);
    out.push(b',');
    match r.flow {
        FlowTuple::V4 { src, dst, .. } => {
            push_ipv4(out, src);
            out.push(b',');
            push_ipv4(out, dst);
        }
        FlowTuple::V6 { src, dst, .. } => {
            push_ipv6(out, src);
            out.push(b',');
            push_ipv6(out, dst);
        }
    }
    for n in [
        u64::from(r.flow.proto()),
        u64::from(r.flow.sport()),
        u64::from(r.flow.dport()),
        u64::from(r.port),
    ] {
        out.push(b',');
        push_u64(out, n);
    }
    out.push(b',');
    write_field(out, ifname);
    out.push(b',');
    out.extend_from_slice(r.reason.as_str().as_bytes());
    out.push(b',');
    match prefix {
        Some(IpNet::V4(p)) => {
            push_ipv4(out, p.addr().octets());
            out.push(b'/');
            push_u64(out, u64::from(p.prefix_len()));
        }
        Some(IpNet::V6(p)) => {
            push_ipv6(out, p.addr().octets());
            out.push(b'/');
            push_u64(out, u64::from(p.prefix_len()));
        }
        None => {}
    }
    out.push(b'\n');
}

/// Decimal digits of `n`.
fn push_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// Dotted quad.
fn push_ipv4(out: &mut Vec<u8>, a: [u8; 4]) {
    for (i, b) in a.into_iter().enumerate() {
        if i > 0 {
            out.push(b'.');
        }
        push_u64(out, u64::from(b));
    }
}

/// Lowercase hex digits of `n`, no leading zeros.
fn push_hex16(out: &mut Vec<u8>, n: u16) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut started = false;
    for shift in [12, 8, 4, 0] {
        let d = (n >> shift) & 0xf;
        if d != 0 || started || shift == 0 {
            out.push(HEX[d as usize]);
            started = true;
        }
    }
}

/// Groups `g` joined by colons.
fn push_groups(out: &mut Vec<u8>, g: &[u16]) {
    for (i, &x) in g.iter().enumerate() {
        if i > 0 {
            out.push(b':');
        }
        push_hex16(out, x);
    }
}

/// The text form of `std::net::Ipv6Addr`'s `Display` (RFC 5952): groups in
/// lowercase hex without leading zeros, the first longest run of two or more
/// zero groups as `::`, IPv4-mapped addresses as `::ffff:a.b.c.d`.
fn push_ipv6(out: &mut Vec<u8>, a: [u8; 16]) {
    let mut g = [0u16; 8];
    for (i, x) in g.iter_mut().enumerate() {
        *x = u16::from_be_bytes([a[2 * i], a[2 * i + 1]]);
    }
    if g[..5] == [0; 5] && g[5] == 0xffff {
        out.extend_from_slice(b"::ffff:");
        push_ipv4(out, [a[12], a[13], a[14], a[15]]);
        return;
    }
    // The first longest run of zero groups.
    let (mut best_at, mut best_len, mut run_at, mut run_len) = (0, 0, 0, 0);
    for (i, &x) in g.iter().enumerate() {
        if x == 0 {
            if run_len == 0 {
                run_at = i;
            }
            run_len += 1;
            if run_len > best_len {
                (best_at, best_len) = (run_at, run_len);
            }
        } else {
            run_len = 0;
        }
    }
    if best_len >= 2 {
        push_groups(out, &g[..best_at]);
        out.extend_from_slice(b"::");
        push_groups(out, &g[best_at + best_len..]);
    } else {
        push_groups(out, &g);
    }
}

/// A CSV field, quoted (RFC 4180) if it holds a separator, quote or line
/// break. Interface names rarely do, but nothing forbids a comma.
fn write_field(out: &mut Vec<u8>, s: &str) {
    if s.contains([',', '"', '\n', '\r']) {
        out.push(b'"');
        for c in s.bytes() {
            if c == b'"' {
                out.push(b'"');
            }
            out.push(c);
        }
        out.push(b'"');
    } else {
        out.extend_from_slice(s.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4_record(time_ns: u64) -> FlowRecord {
        FlowRecord {
            time_ns,
            flow: FlowTuple::V4 {
                src: [10, 0, 1, 2],
                dst: [10, 0, 2, 2],
                proto: 6,
                sport: 40000,
                dport: 80,
            },
            port: 2,
            reason: DecisionReason::New,
        }
    }

    #[test]
    fn full_buffer_drops_and_counts_without_growing() {
        let mut log = FlowLog::new(2);
        for t in 0..5 {
            log.record(v4_record(t));
        }
        assert_eq!(log.records().len(), 2);
        assert_eq!(log.records()[1].time_ns, 1);
        assert!(log.half_full());
        assert_eq!(log.records.capacity(), 2, "no reallocation");
        let s = log.stats();
        assert_eq!((s.dropped, s.written, s.buffered, s.capacity), (3, 0, 2, 2));
        let mut out = Vec::new();
        assert_eq!(log.write_csv(&mut out, |_| "p2", |_| None).unwrap(), 2);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "0,10.0.1.2,10.0.2.2,6,40000,80,2,p2,new,\n\
             1,10.0.1.2,10.0.2.2,6,40000,80,2,p2,new,\n"
        );
        let s = log.stats();
        assert_eq!((s.dropped, s.written, s.buffered), (3, 2, 0));
        // Room again after the write.
        log.record(v4_record(9));
        assert_eq!(log.records().len(), 1);
        assert_eq!(log.stats().dropped, 3);
    }

    #[test]
    fn ipv6_icmp_failover_line() {
        let r = FlowRecord {
            time_ns: 123_456_789_012,
            flow: FlowTuple::V6 {
                src: "fd00:1::2".parse::<std::net::Ipv6Addr>().unwrap().octets(),
                dst: "fd00:2::2".parse::<std::net::Ipv6Addr>().unwrap().octets(),
                proto: 58,
                sport: 0,
                dport: 0,
            },
            port: 3,
            reason: DecisionReason::Failover,
        };
        let mut out = Vec::new();
        format_record(&mut out, &r, "s1p3", Some("fd00:2::/64".parse().unwrap()));
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "123456789012,fd00:1::2,fd00:2::2,58,0,0,3,s1p3,failover,fd00:2::/64\n"
        );
    }

    #[test]
    fn cache_full_reason_and_quoted_ifname() {
        let r = FlowRecord {
            reason: DecisionReason::CacheFull,
            ..v4_record(7)
        };
        let mut out = Vec::new();
        format_record(
            &mut out,
            &r,
            "odd,\"name\"",
            Some("10.0.2.0/24".parse().unwrap()),
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "7,10.0.1.2,10.0.2.2,6,40000,80,2,\"odd,\"\"name\"\"\",cache_full,10.0.2.0/24\n"
        );
    }

    fn text(f: impl FnOnce(&mut Vec<u8>)) -> String {
        let mut out = Vec::new();
        f(&mut out);
        String::from_utf8(out).unwrap()
    }

    fn v6(s: &str) -> [u8; 16] {
        s.parse::<std::net::Ipv6Addr>().unwrap().octets()
    }

    #[test]
    fn numbers_and_addresses_read_as_written() {
        assert_eq!(text(|o| push_u64(o, 0)), "0");
        assert_eq!(
            text(|o| push_u64(o, 18_446_744_073_709_551_615)),
            "18446744073709551615"
        );
        assert_eq!(text(|o| push_ipv4(o, [0, 10, 255, 100])), "0.10.255.100");
        for (bytes, want) in [
            ([0u8; 16], "::"),
            (v6("::1"), "::1"),
            (v6("fd00:1::2"), "fd00:1::2"),
            (v6("2001:db8:0:1:0:0:0:1"), "2001:db8:0:1::1"),
            // One zero group is not compressed; the first of equal runs is.
            (v6("2001:db8:0:1:1:1:1:1"), "2001:db8:0:1:1:1:1:1"),
            (v6("2001:0:0:1:0:0:1:1"), "2001::1:0:0:1:1"),
            (v6("1:0:0:2:0:0:0:3"), "1:0:0:2::3"),
            (v6("fe80::abcd:ef01:2345:6789"), "fe80::abcd:ef01:2345:6789"),
            (v6("1:2:3:4:5:6:7:0"), "1:2:3:4:5:6:7:0"),
            (v6("1:2:3:4:5:6:0:0"), "1:2:3:4:5:6::"),
            (v6("::ffff:192.0.2.1"), "::ffff:192.0.2.1"),
        ] {
            assert_eq!(text(|o| push_ipv6(o, bytes)), want);
        }
    }

    proptest::proptest! {
        #[test]
        fn ipv6_text_matches_std(groups in proptest::array::uniform8(
            proptest::prop_oneof![proptest::strategy::Just(0u16), 0u16..4, proptest::num::u16::ANY]
        )) {
            let addr = std::net::Ipv6Addr::from(groups);
            proptest::prop_assert_eq!(text(|o| push_ipv6(o, addr.octets())), addr.to_string());
        }

        #[test]
        fn ipv4_and_numbers_match_std(a in proptest::num::u32::ANY, n in proptest::num::u64::ANY) {
            let addr = std::net::Ipv4Addr::from(a);
            proptest::prop_assert_eq!(text(|o| push_ipv4(o, addr.octets())), addr.to_string());
            proptest::prop_assert_eq!(text(|o| push_u64(o, n)), n.to_string());
        }
    }

    #[test]
    fn header_line() {
        let mut out = Vec::new();
        FlowLog::write_header(&mut out).unwrap();
        assert_eq!(
            out,
            b"time_ns,src,dst,proto,sport,dport,port,ifname,reason,prefix\n"
        );
    }

    #[test]
    fn write_error_counts_records_as_failed() {
        struct Broken;
        impl Write for Broken {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::other("disk full"))
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let mut log = FlowLog::new(8);
        log.record(v4_record(1));
        log.record(v4_record(2));
        assert!(log.write_csv(&mut Broken, |_| "p2", |_| None).is_err());
        let s = log.stats();
        assert_eq!((s.written, s.write_failed, s.buffered), (0, 2, 0));
    }
}

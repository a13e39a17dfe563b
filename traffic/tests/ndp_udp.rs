//! NDP over loopback UDP in one process: a sender ([`ndp::client::run`])
//! and a receiver ([`ndp::server::serve`]) on their own loopback addresses
//! move a few flows, every byte delivered once and every flow's row
//! written; through a relay that trims every third data packet with
//! `lcmp_wire::ndp::trim` (as a rotor ToR does past its queue bound), the
//! same bytes arrive, and each trim costs exactly one NACK and one
//! retransmission.
//!
//! Each test has its own loopback addresses (one process per address holds
//! port 7247).

use std::fs::File;
use std::io::Read;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use lcmp_traffic::client::Destination;
use lcmp_traffic::flows::{parse_schedule, Arrivals, FlowSource};
use lcmp_traffic::ndp::client::{self as ndp_client, Outcome};
use lcmp_traffic::ndp::server::{self as ndp_server, ServerConfig, ServerStats};
use lcmp_traffic::ndp::socket::{decode, Endpoint, Interrupt, UDP_PORT};
use lcmp_traffic::ndp::{udp_sport_of, NdpParams};
use lcmp_traffic::record::{FlowRecord, FlowStatus};
use lcmp_traffic::rocev2::net::wait_readable;
use lcmp_wire::ndp::Kind;

/// Ends a loop when a byte is written to the other end of its pair.
struct Stop(UnixStream);

impl Interrupt for Stop {
    fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
    fn take(&self) -> Option<i32> {
        let mut b = [0u8; 1];
        // A byte, or the other end gone: stop (SIGTERM's number).
        match (&self.0).read(&mut b) {
            Ok(0 | 1) => Some(libc::SIGTERM),
            _ => None,
        }
    }
}

fn stop_pair() -> (UnixStream, Stop) {
    let (tx, rx) = UnixStream::pair().unwrap();
    rx.set_nonblocking(true).unwrap();
    (tx, Stop(rx))
}

/// 1000-byte payloads, an initial window of 4, `rto_ms`.
fn params(rto_ms: u64) -> NdpParams {
    NdpParams {
        initial_window: 4,
        payload: 1000,
        min_rto_ns: rto_ms * 1_000_000,
    }
}

/// Both sides' links: 1 Gbit/s (a pull every 1058 ns x 8 = 8.464 us).
const LINE_BPS: u64 = 1_000_000_000;

/// Flows 7, 8 and 9 to `rx`, all at the start: 10_000, 4_500 and 2_000
/// bytes, 10 + 5 + 2 = 17 packets of at most 1000 bytes.
const SIZES: [(u64, u64); 3] = [(7, 10_000), (8, 4_500), (9, 2_000)];

fn source(dsts: &[Destination]) -> FlowSource {
    let mut text = String::from("id,receiver,size_bytes,start_ns\n");
    for (id, size) in SIZES {
        text.push_str(&format!("{id},rx,{size},0\n"));
    }
    let list = parse_schedule(&text, "test", dsts, 1.0).unwrap();
    FlowSource::new(Arrivals::Schedule(list), 1, 0, 0.0, 1.0, dsts.len())
}

fn out_path(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("lcmp-ndp-udp-{tag}-{}.csv", std::process::id()))
}

/// A receiver on `rx` in a thread, the flows sent from `tx` to `via`
/// (the receiver, or a relay in front of it) at once; the sender's
/// outcome, its rows and the receiver's totals.
fn transfer(
    tag: &str,
    tx: Ipv4Addr,
    via: Ipv4Addr,
    rx: Ipv4Addr,
    rto_ms: u64,
) -> (Outcome, Vec<FlowRecord>, ServerStats) {
    let (stop_rx, rx_stop) = stop_pair();
    let mut rx_ep = Endpoint::bind(rx).unwrap();
    let receiver = std::thread::spawn(move || {
        let cfg = ServerConfig {
            params: params(rto_ms),
            line_bps: LINE_BPS,
            idle_timeout: Duration::from_secs(60),
        };
        ndp_server::serve(&cfg, &mut rx_ep, &rx_stop).unwrap()
    });
    let dsts = vec![Destination {
        name: "rx".into(),
        addr: std::net::SocketAddr::new(via.into(), UDP_PORT),
    }];
    let out = out_path(tag);
    let run = ndp_client::Run {
        name: "tx".into(),
        dsts: dsts.clone(),
        out: File::create(&out).unwrap(),
        out_path: out.display().to_string(),
        progress_ms: 0,
        drain_s: 60.0,
        source: source(&dsts),
        params: params(rto_ms),
        line_bps: LINE_BPS,
    };
    let mut tx_ep = Endpoint::bind(tx).unwrap();
    // The sender's own stop never fires: its run ends with its flows.
    let (_keep, tx_stop) = stop_pair();
    let outcome = ndp_client::run(run, &mut tx_ep, &tx_stop).unwrap();
    use std::io::Write;
    (&stop_rx).write_all(b"x").unwrap();
    let stats = receiver.join().unwrap();
    let rows: Vec<FlowRecord> = csv::Reader::from_path(&out)
        .unwrap()
        .deserialize()
        .map(Result::unwrap)
        .collect();
    let _ = std::fs::remove_file(&out);
    (outcome, rows, stats)
}

/// Every flow's row: ok, with its size, its entropy port and the
/// receiver's NDP port.
fn check_rows(rows: &[FlowRecord], tx: Ipv4Addr, via: Ipv4Addr) {
    assert_eq!(rows.len(), 3, "{rows:?}");
    for (r, (id, size)) in rows.iter().zip(SIZES) {
        assert_eq!((r.id, r.size_bytes), (id, size));
        assert_eq!(r.status, FlowStatus::Ok, "{r:?}");
        assert!(r.fct_ns.is_some());
        assert_eq!(r.src, format!("{tx}:{}", udp_sport_of(id as u32)));
        assert_eq!(r.dst, format!("{via}:7247"));
        assert_eq!((r.sender.as_str(), r.receiver.as_str()), ("tx", "rx"));
    }
}

#[test]
fn flows_cross_loopback_every_byte_once() {
    let (tx, rx) = (Ipv4Addr::new(127, 0, 0, 11), Ipv4Addr::new(127, 0, 0, 12));
    let (o, rows, st) = transfer("plain", tx, rx, rx, 1);
    check_rows(&rows, tx, rx);
    assert_eq!((o.summary.flows, o.summary.completed), (3, 3));
    // 10_000 + 4_500 + 2_000 bytes, each once, in 17 packets, each checked
    // against the flow's pattern at its offset.
    assert_eq!(o.summary.bytes_completed, 16_500);
    assert_eq!(st.rx.bytes, 16_500);
    assert_eq!(st.rx.flows_completed, 3);
    assert_eq!((st.corrupt, st.rx.trimmed, st.rx.malformed), (0, 0, 0));
    assert_eq!(o.sender.flows_completed, 3);
    // Every packet went at least once: 17 plus whatever a 1 ms timeout
    // resent on a busy machine (received again as duplicates).
    assert_eq!(o.sender.packets, 17 + o.sender.retransmissions);
    assert_eq!(st.rx.data_packets, 17 + st.rx.duplicates);
}

/// Forwards between `sender` and `receiver` on `relay`:7247, from the
/// same source port, cutting every third untrimmed data packet from the
/// sender to its headers; returns the trims when stopped.
fn relay(mut ep: Endpoint, sender: Ipv4Addr, receiver: Ipv4Addr, stop: Stop) -> u64 {
    let (mut data, mut trims) = (0u64, 0u64);
    let mut buf = vec![0u8; 65_536];
    // An Ethernet, IPv4 and UDP header before the datagram, so that the
    // switches' trim (which reads and rewrites them) cuts it.
    let mut frame = Vec::new();
    loop {
        if stop.take().is_some() {
            return trims;
        }
        wait_readable(&[ep.fd(), stop.fd()], None).unwrap();
        while let Some((len, from)) = ep.recv(&mut buf).unwrap() {
            let from_sender = *from.ip() == sender;
            let to = if from_sender { receiver } else { sender };
            let mut datagram = &buf[..len];
            let is_data =
                matches!(decode(datagram), Some((h, _)) if h.kind == Kind::Data && !h.trimmed());
            if from_sender && is_data {
                data += 1;
                if data % 3 == 0 {
                    frame.clear();
                    frame.extend_from_slice(&[0; 12]);
                    frame.extend_from_slice(&[0x08, 0x00]);
                    let ip_len = (20 + 8 + len) as u16;
                    frame.extend_from_slice(&[0x45, 0]);
                    frame.extend_from_slice(&ip_len.to_be_bytes());
                    frame.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0]);
                    frame.extend_from_slice(&from.ip().octets());
                    frame.extend_from_slice(&receiver.octets());
                    frame.extend_from_slice(&from.port().to_be_bytes());
                    frame.extend_from_slice(&UDP_PORT.to_be_bytes());
                    frame.extend_from_slice(&(ip_len - 20).to_be_bytes());
                    frame.extend_from_slice(&[0, 0]);
                    frame.extend_from_slice(datagram);
                    let cut = lcmp_wire::ndp::trim(&mut frame).unwrap();
                    // 14 + 20 + 8 bytes of headers, then the NDP header.
                    assert_eq!(cut, 58);
                    datagram = &frame[42..cut];
                    trims += 1;
                }
            }
            ep.send(from.port(), to, datagram).unwrap();
        }
    }
}

#[test]
fn trimmed_packets_are_nacked_resent_and_delivered_once() {
    let tx = Ipv4Addr::new(127, 0, 0, 21);
    let via = Ipv4Addr::new(127, 0, 0, 22);
    let rx = Ipv4Addr::new(127, 0, 0, 23);
    let relay_ep = Endpoint::bind(via).unwrap();
    let (stop_relay, relay_stop) = stop_pair();
    let relay = std::thread::spawn(move || relay(relay_ep, tx, rx, relay_stop));
    // A timeout far above the run, so that only NACKs resend.
    let (o, rows, st) = transfer("trim", tx, via, rx, 60_000);
    use std::io::Write;
    (&stop_relay).write_all(b"x").unwrap();
    let trims = relay.join().unwrap();
    check_rows(&rows, tx, via);
    // 17 packets must arrive whole. Of P data packets through the relay,
    // floor(P / 3) are trimmed and each comes again once, so P = 17 +
    // floor(P / 3); the last one arrives whole (else it would come again),
    // so P is no multiple of 3. P = 25: 17 + floor(25 / 3) = 17 + 8 = 25,
    // 25 % 3 = 1; 8 trims. (P = 24: 17 + 8 = 25, no; P = 26: 17 + 8 =
    // 25, no.)
    assert_eq!(trims, 8);
    assert_eq!((st.rx.trimmed, st.rx.nacks_sent), (8, 8));
    assert_eq!((o.sender.nacks, o.sender.retransmissions), (8, 8));
    assert_eq!((o.sender.packets, st.rx.data_packets), (25, 25));
    assert_eq!((o.sender.timeouts, st.rx.duplicates), (0, 0));
    assert_eq!(st.rx.bytes, 16_500);
    assert_eq!((st.corrupt, st.rx.flows_completed), (0, 3));
    assert_eq!(o.summary.completed, 3);
}

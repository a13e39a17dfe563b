//! `lcmp-traffic`: the testbed's workload generator.
//!
//! A server in one host namespace accepts flows; a client in another
//! starts flows at Poisson arrival times with sizes drawn from an empirical
//! CDF (or at the times of a schedule file), sizes optionally divided by
//! `--size-scale`, and records each flow's completion time
//! ([`record::FlowRecord`]). Two transports: TCP, one connection (a new
//! 5-tuple) per flow; and RoCEv2, one RC queue pair per flow sending one
//! RDMA WRITE as real RoCEv2 packets, paced by DCQCN as the LCMP paper's
//! simulator runs it, reliable by go-back-N, no handshake ([`rocev2`]).
//! The socket-free state machines of NDP, the rotor networks' trimming
//! transport, are [`ndp`] (run by the engine's hosts).
//!
//! Modules: [`cdf`] (flow sizes), [`arrivals`] (Poisson arrival times),
//! [`flows`] (which flows start when: Poisson or schedule, size scaling),
//! [`protocol`] (the TCP wire format), [`server`], [`client`] (TCP, and the
//! validation of every run), [`rocev2`] (the RoCEv2 transport), [`sockopt`]
//! (TCP_INFO, TCP_CONGESTION, file-descriptor limits), [`record`] (the CSV
//! row).

pub mod arrivals;
pub mod cdf;
pub mod client;
pub mod flows;
pub mod ndp;
pub mod protocol;
pub mod record;
pub mod rocev2;
pub mod server;
pub mod sockopt;

use rand::SeedableRng;
use rand_pcg::Pcg64;

/// Random streams of one run; each consumer gets its own so that, for
/// example, the same seed gives the same flow sizes at any arrival rate.
pub mod stream {
    pub const ARRIVALS: u64 = 1;
    pub const SIZES: u64 = 2;
    pub const DESTINATIONS: u64 = 3;
}

/// A generator for `(seed, stream)`: the pair is spread over PCG's whole
/// 256-bit seed with SplitMix64 so that nearby seeds and streams give
/// unrelated sequences (PCG streams that share a state are correlated).
pub fn seeded_rng(seed: u64, stream: u64) -> Pcg64 {
    let mut x = seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03);
    let mut bytes = [0u8; 32];
    for chunk in bytes.chunks_exact_mut(8) {
        chunk.copy_from_slice(&splitmix64(&mut x).to_le_bytes());
    }
    Pcg64::from_seed(bytes)
}

/// One step of SplitMix64 (Steele, Lea, Flood 2014).
fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

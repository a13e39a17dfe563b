//! `lcmp-testbed rotor-timing`: how precisely a rotor network's slot
//! boundaries hold.

use std::process::ExitCode;

use clap::Args;
use lcmp_testbed::{rotor, Error, Result};
use lcmp_topology::{out, outln};

use super::say;

/// A duration with a unit, in nanoseconds.
fn parse_duration(s: &str) -> std::result::Result<u64, String> {
    lcmp_topology::units::parse_duration(s).map_err(|e| e.to_string())
}

/// `lcmp-testbed rotor-timing`.
#[derive(Args, Debug, Clone)]
pub struct RotorTimingArgs {
    /// Testbed name.
    #[arg(long, default_value = "rotortime")]
    name: String,
    /// ToRs.
    #[arg(long, default_value_t = 4)]
    tors: u32,
    /// Rotors (uplinks per ToR).
    #[arg(long, default_value_t = 2)]
    rotors: u32,
    /// Slot Delta, microseconds.
    #[arg(long, default_value_t = 1000)]
    slot_us: u64,
    /// Slot Delta with a unit instead of --slot-us: 1ms, 500us.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, conflicts_with = "slot_us")]
    slot: Option<u64>,
    /// Reconfiguration Delta_r, microseconds.
    #[arg(long, default_value_t = 100)]
    reconfig_us: u64,
    /// Reconfiguration Delta_r with a unit instead of --reconfig-us:
    /// 100us.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, conflicts_with = "reconfig_us")]
    reconfig: Option<u64>,
    /// Uplink rate c, Mbit/s.
    #[arg(long, default_value_t = 100)]
    rate_mbps: u64,
    /// Sending ToR.
    #[arg(long, default_value_t = 0)]
    from: u32,
    /// Receiving ToR.
    #[arg(long, default_value_t = 1)]
    to: u32,
    /// Offered rate as a multiple of c.
    #[arg(long, default_value_t = 1.2)]
    load: f64,
    /// How long the sender sends: a bare number is seconds, or with a
    /// unit (3s, 500ms).
    #[arg(long, value_name = "SECS", default_value = "3", value_parser = lcmp_topology::secs::parse)]
    seconds: f64,
    /// Ethernet frame size, bytes.
    #[arg(long, default_value_t = 1500)]
    frame_bytes: u32,
    /// Extra argument for every lcmp-switch (repeatable).
    #[arg(long = "switch-arg", allow_hyphen_values = true)]
    switch_args: Vec<String>,
    /// Print the full report (every window) as JSON instead of a summary.
    #[arg(long)]
    json: bool,
}

/// `lcmp-testbed rotor-timing`: measures on a testbed of its own and
/// prints the summary (or the whole report as JSON).
pub fn cmd_rotor_timing(a: RotorTimingArgs) -> Result<ExitCode> {
    if !(a.seconds.is_finite() && a.seconds > 0.0) {
        return Err(Error::new("--seconds must be a positive number"));
    }
    let r = rotor::boundary::measure(
        &rotor::boundary::TimingOptions {
            name: a.name,
            setup: rotor::boundary::TimingSetup {
                tors: a.tors,
                rotors: a.rotors,
                slot_ns: a.slot.unwrap_or(a.slot_us * 1000),
                reconfig_ns: a.reconfig.unwrap_or(a.reconfig_us * 1000),
                rate_bps: a.rate_mbps * 1_000_000,
                from: a.from,
                to: a.to,
                frame_bytes: a.frame_bytes,
            },
            load: a.load,
            duration: std::time::Duration::from_secs_f64(a.seconds),
            switch_args: a.switch_args,
        },
        &say,
    )?;
    if a.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&r).expect("report serializes")
        );
    } else {
        out!("{}", rotor::boundary::render(&r));
    }
    Ok(ExitCode::SUCCESS)
}

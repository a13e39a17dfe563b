//! `lcmp-topology`: tools for topology files.

use lcmp_topology::out;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use lcmp_topology::import::{self, Format, ImportOptions};
use lcmp_topology::units::{
    format_bytes, format_delay, format_rate, parse_buffer, parse_delay, parse_rate,
};

#[derive(Parser)]
#[command(
    name = "lcmp-topology",
    version,
    about = "Tools for LCMP topology files"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Convert a real WAN (Internet Topology Zoo GraphML or NetworkX
    /// node-link JSON, e.g. topohub's) into a topology TOML.
    #[command(long_about = IMPORT_ABOUT)]
    Import(ImportArgs),
}

const IMPORT_ABOUT: &str = "\
Convert a real WAN into a topology TOML (format: topologies/README.md).

Input: Internet Topology Zoo GraphML (node label, Latitude, Longitude; edge
LinkSpeed + LinkSpeedUnits, LinkSpeedRaw or LinkLabel), or NetworkX node-link
JSON (topohub: nodes with name and pos = [longitude, latitude], edges in
\"edges\" or \"links\"; also Latitude/Longitude or lat/lon, and an edge
\"capacity\": a number in bit/s or a string with a unit).

Output, one switch per node and one link per edge:
- switch names from the labels: lowercase ASCII letters and digits, at most
  12 bytes, starting with a letter, made unique with a number (the original
  label is kept in a comment);
- switch k (in node order) delivers 10.<k>.0.0/16, so any two switches can be
  source and destination; at most 255 nodes;
- delay = great-circle distance between the endpoints (haversine, Earth radius
  6371 km) x --km-delay-us (default 5 us/km, light in fibre), rounded to the
  nearest microsecond;
- rate from the data where it has one, else --default-rate; the header says
  how many links used the default;
- every port buffer --buffer, written as [defaults] buffer;
- parallel edges stay parallel links; in a directed graph an edge and its
  reverse are one link; self-loops are dropped (named in the header).

Errors: a file that is not GraphML / node-link JSON, a node without
coordinates, a disconnected graph, an empty graph.";

#[derive(clap::Args)]
struct ImportArgs {
    /// The GraphML or node-link JSON file.
    file: PathBuf,
    /// Input format; auto goes by the extension (.graphml/.xml, .json),
    /// then by the first character (< or {).
    #[arg(long, value_enum, default_value_t = FormatArg::Auto)]
    format: FormatArg,
    /// Write the topology here instead of to stdout.
    #[arg(long, short)]
    out: Option<PathBuf>,
    /// One-way delay per km of great-circle distance, microseconds
    /// (decimals allowed, e.g. 4.9).
    #[arg(long, default_value = "5", value_parser = ns_per_km)]
    km_delay_us: u64,
    /// Rate of links the data gives no speed for.
    #[arg(long, default_value = "10Gbps", value_parser = rate)]
    default_rate: u64,
    /// Buffer of every port (the default is that of topologies/8dc.toml).
    #[arg(long, default_value = "128MiB", value_parser = buffer)]
    buffer: u64,
    /// A line for the top of the file, e.g. provenance or license
    /// (repeatable).
    #[arg(long, value_name = "TEXT")]
    comment: Vec<String>,
}

#[derive(Clone, Copy, ValueEnum)]
enum FormatArg {
    Auto,
    Graphml,
    NodeLink,
}

fn ns_per_km(s: &str) -> Result<u64, String> {
    parse_delay(&format!("{}us", s.trim()))
        .map_err(|_| format!("{s:?} is not a number of microseconds per km (e.g. 5 or 4.9)"))
}

fn rate(s: &str) -> Result<u64, String> {
    parse_rate(s).map_err(|e| e.to_string())
}

fn buffer(s: &str) -> Result<u64, String> {
    parse_buffer(s).map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Import(args) => match run_import(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("lcmp-topology: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

fn run_import(args: &ImportArgs) -> Result<(), String> {
    let path = args.file.display().to_string();
    let text = std::fs::read_to_string(&args.file).map_err(|e| format!("{path}: {e}"))?;
    let format = match args.format {
        FormatArg::Auto => None,
        FormatArg::Graphml => Some(Format::GraphMl),
        FormatArg::NodeLink => Some(Format::NodeLink),
    };
    let opts = ImportOptions {
        ns_per_km: args.km_delay_us,
        default_rate_bps: args.default_rate,
        buffer_bytes: args.buffer,
        comments: args.comment.clone(),
    };
    let imported = import::import(&text, format, &path, &opts).map_err(|e| e.to_string())?;
    match &args.out {
        None => out!("{}", imported.toml),
        Some(out) => {
            std::fs::write(out, &imported.toml).map_err(|e| format!("{}: {e}", out.display()))?;
            let t = &imported.topology;
            eprintln!(
                "{}: {} switches, {} links ({} rate from data, {} default {}), buffer {}, \
                 diameter {} ({} - {})",
                out.display(),
                t.switches().len(),
                t.links().len(),
                imported.rate_from_data,
                imported.rate_default,
                format_rate(args.default_rate),
                format_bytes(args.buffer),
                format_delay(imported.diameter.0),
                imported.diameter.1,
                imported.diameter.2
            );
        }
    }
    Ok(())
}

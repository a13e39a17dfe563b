//! `lcmp-topology`: tools for topology files.

use lcmp_topology::out;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use lcmp_topology::import::hpcc::{self, HpccOptions};
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
    /// node-link JSON, e.g. topohub's) or an HPCC ns-3 topology (the LCMP
    /// artifact's) into a topology TOML.
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
  how many links used the default, and each is named on stderr (the first
  10, then a count);
- every port buffer --buffer, written as [defaults] buffer;
- parallel edges stay parallel links (at most 16 between two nodes); in a
  directed graph an edge and its reverse are one link; self-loops are
  dropped (named in the header).

Errors: a file that is not GraphML / node-link JSON, a node without
coordinates, a disconnected graph, an empty graph, a speed the data gives
that is no usable rate (not a number, an unknown unit, zero, negative,
outside 1Kbps .. 100Tbps: the edge and the value are named; remove the value
to use --default-rate), a file over 64 MiB. Labels and ids are repeated in
comments and messages cut to 100 characters.

--format hpcc (auto: the first line that is not a comment is four numbers)
reads the HPCC ns-3 simulator's topology format, as the LCMP artifact's
topology_LeafSpine_MultiDC*.txt: a header \"<nodes> <intra-DC switches> <DCI
switches> <links>\", the intra-DC switch ids, the DCI switch ids, then one link
a line \"<a> <b> <rate> <delay> <error rate>\"; other nodes are hosts. Output,
with the intra-DC fabric:
- one DC per DCI switch (DC<k>: the k-th by id), holding the nodes it reaches
  without crossing another DCI switch; the DCI switch is dc<k> (transit);
- intra-DC switches with hosts are leaves dc<k>leaf<j>, delivering
  10.<k>.<j>.0/24, the others spines dc<k>spine<j> (transit); j from 1 in id
  order; both pin policy \"ecmp\" (the simulator's fabric hashes);
- hosts dc<k>h<n>, n from 1 in id order per DC; the i-th host of leaf j (from
  0) is 10.<k>.<j>.<2+i>/24, with its link's rate and delay;
- switch-to-switch links in file order with the file's rate and delay; a
  non-zero error rate is refused;
- buffers: --dci-buffer (default 128MiB) on links that touch a DCI switch,
  --buffer (default 32MiB) on the others and on hosts (the artifact's
  DCI_BUFFER_SIZE and BUFFER_SIZE; shared per switch in the simulator, whole
  per port here).
Errors (one line, naming the file's line where there is one): counts that
disagree with the header, an unknown node, a non-zero error rate, a host with
two links or on a DCI switch, a node in no DC or in two.";

#[derive(clap::Args)]
struct ImportArgs {
    /// The GraphML, node-link JSON or HPCC topology file.
    file: PathBuf,
    /// Input format; auto goes by the extension (.graphml/.xml, .json),
    /// then by the first character (< or {); four numbers on the first
    /// line that is not a comment are hpcc.
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
    /// Buffer of every port [default: 128MiB, that of topologies/8dc.toml];
    /// hpcc: of intra-DC switch and host ports [default: 32MiB].
    #[arg(long, value_parser = buffer)]
    buffer: Option<u64>,
    /// hpcc only: buffer of the ports of links that touch a DCI switch
    /// [default: 128MiB].
    #[arg(long, value_parser = buffer)]
    dci_buffer: Option<u64>,
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
    Hpcc,
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
    // The matches too: an hpcc import refuses WAN-only options given on the
    // command line, which their defaults hide from the parsed values.
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    match cli.command {
        Command::Import(args) => match run_import(&args, matches.subcommand_matches("import")) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("lcmp-topology: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

fn run_import(args: &ImportArgs, matches: Option<&ArgMatches>) -> Result<(), String> {
    let path = args.file.display().to_string();
    let text = lcmp_topology::read_text(&args.file, import::MAX_INPUT_BYTES)?;
    let format = match args.format {
        FormatArg::Auto if hpcc::looks_like(&text) => return run_hpcc(args, matches, &path, &text),
        FormatArg::Auto => None,
        FormatArg::Graphml => Some(Format::GraphMl),
        FormatArg::NodeLink => Some(Format::NodeLink),
        FormatArg::Hpcc => return run_hpcc(args, matches, &path, &text),
    };
    if args.dci_buffer.is_some() {
        return Err("--dci-buffer applies to --format hpcc only".into());
    }
    let opts = ImportOptions {
        ns_per_km: args.km_delay_us,
        default_rate_bps: args.default_rate,
        buffer_bytes: args.buffer.unwrap_or(import::DEFAULT_BUFFER_BYTES),
        comments: args.comment.clone(),
    };
    let imported = import::import(&text, format, &path, &opts).map_err(|e| match format {
        // Not telling the format: name the one the detection cannot see.
        None if Format::detect(&path, &text).is_err() => {
            format!("{e}, or --format hpcc (an HPCC ns-3 topology)")
        }
        _ => e.to_string(),
    })?;
    for note in imported.default_rate_notes() {
        eprintln!("{note}");
    }
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
                format_bytes(opts.buffer_bytes),
                format_delay(imported.diameter.0),
                imported.diameter.1,
                imported.diameter.2
            );
        }
    }
    Ok(())
}

fn run_hpcc(
    args: &ImportArgs,
    matches: Option<&ArgMatches>,
    path: &str,
    text: &str,
) -> Result<(), String> {
    // The file gives every rate and delay; these would be silently unused.
    for (id, flag) in [
        ("km_delay_us", "--km-delay-us"),
        ("default_rate", "--default-rate"),
    ] {
        if matches.and_then(|m| m.value_source(id)) == Some(ValueSource::CommandLine) {
            return Err(format!(
                "{flag} does not apply to an HPCC topology (the file gives every rate and delay)"
            ));
        }
    }
    let opts = HpccOptions {
        buffer_bytes: args.buffer.unwrap_or(hpcc::DEFAULT_BUFFER_BYTES),
        dci_buffer_bytes: args.dci_buffer.unwrap_or(hpcc::DEFAULT_DCI_BUFFER_BYTES),
        comments: args.comment.clone(),
    };
    let imported = hpcc::import(text, path, &opts).map_err(|e| e.to_string())?;
    match &args.out {
        None => out!("{}", imported.toml),
        Some(out) => {
            std::fs::write(out, &imported.toml).map_err(|e| format!("{}: {e}", out.display()))?;
            eprintln!(
                "{}: {} DCs, {} switches ({} DCI, {} leaves, {} spines), {} hosts, {} links \
                 ({} between DCs), buffer {} (DCI links {})",
                out.display(),
                imported.dcs,
                imported.topology.switches().len(),
                imported.dcs,
                imported.leaves,
                imported.spines,
                imported.hosts,
                imported.switch_links,
                imported.inter_dc_links,
                format_bytes(opts.buffer_bytes),
                format_bytes(opts.dci_buffer_bytes)
            );
        }
    }
    Ok(())
}

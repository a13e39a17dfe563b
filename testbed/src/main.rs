//! `lcmp-testbed`: multi-DC DCI testbeds in network namespaces, and FCT
//! experiments on them.

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match cli::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("lcmp-testbed: {e}");
            ExitCode::from(2)
        }
    }
}

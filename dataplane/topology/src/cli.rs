//! What the project's command-line tools share about clap.

use std::process::ExitCode;

/// The tool's arguments, or the exit code when there are none to run
/// with: `--help` and `--version` print and exit 0; a missing subcommand
/// prints the help and exits 2; anything else is one line, `TOOL: message
/// (see --help)`, and exit 2.
pub fn parse_or_exit<C: clap::Parser>(tool: &str) -> Result<C, ExitCode> {
    use clap::error::ErrorKind;
    C::try_parse().map_err(|e| match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            ExitCode::SUCCESS
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            ExitCode::from(2)
        }
        _ => {
            eprintln!("{tool}: {} (see --help)", clap_error_line(&e));
            ExitCode::from(2)
        }
    })
}

/// clap's error as one line: its first paragraph (the message, without the
/// usage block the help repeats), joined, without the `error: ` prefix the
/// tool's own name replaces.
pub fn clap_error_line(e: &clap::Error) -> String {
    let rendered = e.render().to_string();
    let text: Vec<&str> = rendered
        .lines()
        .map(str::trim)
        .take_while(|l| !l.is_empty())
        .collect();
    let joined = text.join(" ");
    joined
        .strip_prefix("error: ")
        .unwrap_or(&joined)
        .to_string()
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Args {
        #[arg(long)]
        count: u32,
    }

    #[test]
    fn a_bad_value_is_one_line_without_the_usage() {
        let e = Args::try_parse_from(["t", "--count", "x"]).unwrap_err();
        assert_eq!(
            super::clap_error_line(&e),
            "invalid value 'x' for '--count <COUNT>': invalid digit found in string"
        );
    }
}

//! How the project's command-line programs write to stdout: a closed
//! stdout (`lcmp-agent paths ... | head -1`: its reader has all it wants)
//! ends the program at once and quietly with [`CLOSED_STDOUT`], as
//! SIGPIPE's default action would, instead of a panic. SIGPIPE itself stays
//! ignored (Rust's default) so that closed sockets and child pipes remain
//! errors the programs handle. Any other write error ends the program with
//! one line naming it. Binaries write with [`out!`](crate::out) and
//! [`outln!`](crate::outln) instead of `print!` and `println!`.

/// Status of a program whose stdout was closed under it: 128 + SIGPIPE,
/// what a shell reports for coreutils cut short by `head`. Not 0: the
/// program did not finish (e.g. rotor-plan's --schedule is not written).
pub const CLOSED_STDOUT: i32 = 141;

/// Writes `args` to stdout and flushes (see the module docs); `program`
/// names the program in the one-line error.
pub fn write(program: &str, args: std::fmt::Arguments) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(CLOSED_STDOUT);
        }
        eprintln!("{program}: cannot write to stdout: {e}");
        std::process::exit(1);
    }
}

/// `print!` through [`write`], naming the calling binary in errors.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::stdout::write(env!("CARGO_BIN_NAME"), format_args!($($arg)*))
    };
}

/// `println!` through [`write`], naming the calling binary in errors.
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::stdout::write(
            env!("CARGO_BIN_NAME"),
            format_args!("{}\n", format_args!($($arg)*)),
        )
    };
}

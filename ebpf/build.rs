//! Compiles `src/bpf/lcmp_xdp.c` into `$OUT_DIR/lcmp_xdp.o` with clang.
//!
//! The object is never committed: every build makes it from source, and the
//! crate embeds it with `include_bytes!`. Needs `clang` (and for the headers
//! `libbpf-dev` and `linux-libc-dev`); `scripts/install-deps.sh` installs them.
//! `LCMP_EBPF_CLANG` overrides the clang binary.

use std::env;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::{exit, Command};

const INSTALL_HINT: &str = "run scripts/install-deps.sh (as root) to install it";

fn fail(msg: &str) -> ! {
    eprintln!("error: lcmp-ebpf build: {msg}");
    exit(1);
}

fn main() {
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));
    let bpf_dir = manifest_dir.join("src").join("bpf");
    let source = bpf_dir.join("lcmp_xdp.c");
    let object = out_dir.join("lcmp_xdp.o");

    // A directory here makes cargo rerun when any file in it changes.
    println!("cargo:rerun-if-changed=src/bpf");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=LCMP_EBPF_CLANG");

    let clang = env::var("LCMP_EBPF_CLANG").unwrap_or_else(|_| "clang".to_owned());
    match Command::new(&clang).arg("--version").output() {
        Ok(out) if out.status.success() => {}
        Ok(out) => fail(&format!(
            "`{clang} --version` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )),
        Err(e) if e.kind() == ErrorKind::NotFound => fail(&format!(
            "clang not found: {INSTALL_HINT} (looked for `{clang}`)"
        )),
        Err(e) => fail(&format!("cannot run `{clang}`: {e}")),
    }

    // The BPF target has the endianness of the machine the program will run on.
    let target = match env::var("CARGO_CFG_TARGET_ENDIAN").as_deref() {
        Ok("big") => "bpfeb",
        _ => "bpfel",
    };

    let mut cmd = Command::new(&clang);
    cmd.args(["-O2", "-g", "-target", target])
        .args(["-Wall", "-Wextra", "-Werror"])
        .arg("-I")
        .arg(&bpf_dir);
    // Debian keeps <asm/types.h> (needed by <linux/bpf.h>) under the multiarch
    // directory, which clang does not search for -target bpf.
    if let Some(dir) = multiarch_include(&clang) {
        cmd.arg("-I").arg(dir);
    }
    cmd.arg("-c").arg(&source).arg("-o").arg(&object);

    let out = match cmd.output() {
        Ok(out) => out,
        Err(e) => fail(&format!("cannot run {cmd:?}: {e}")),
    };
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let hint = if stderr.contains("bpf/bpf_helpers.h") || stderr.contains("bpf/bpf_endian.h") {
            format!("\nhint: libbpf-dev is missing: {INSTALL_HINT}")
        } else if stderr.contains("asm/types.h") || stderr.contains("linux/bpf.h") {
            format!("\nhint: kernel headers (linux-libc-dev) missing or not found in the multiarch include directory: {INSTALL_HINT}")
        } else {
            String::new()
        };
        fail(&format!(
            "compiling {} failed ({}):\n{stderr}{hint}",
            source.display(),
            out.status
        ));
    }
}

/// `/usr/include/<multiarch triple>` if it exists (`x86_64-linux-gnu` on
/// Debian amd64). Asks clang, then gcc, then guesses from the host arch.
fn multiarch_include(clang: &str) -> Option<PathBuf> {
    let asked = [clang, "gcc"].iter().find_map(|tool| {
        let out = Command::new(tool).arg("-print-multiarch").output().ok()?;
        let triple = String::from_utf8(out.stdout).ok()?.trim().to_owned();
        (out.status.success() && !triple.is_empty()).then_some(triple)
    });
    let triple = asked.unwrap_or_else(|| format!("{}-linux-gnu", env::consts::ARCH));
    let dir = Path::new("/usr/include").join(triple);
    dir.is_dir().then_some(dir)
}

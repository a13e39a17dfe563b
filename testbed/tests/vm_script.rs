//! `scripts/vm.sh` on bad input: each says what is wrong in one line and
//! boots nothing. (Booting itself is what `scripts/vm-test.sh` does.)

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use lcmp_netlab::{repo_root, require_root};

fn vm_sh(args: &[&str], path: Option<&Path>) -> Output {
    let mut c = Command::new(repo_root().join("scripts/vm.sh"));
    c.args(args).stdin(Stdio::null());
    if let Some(p) = path {
        c.env("PATH", p);
    }
    c.output().expect("scripts/vm.sh runs")
}

/// The error lines (progress lines such as "installing ..." left out).
fn error_lines(o: &Output) -> Vec<String> {
    String::from_utf8_lossy(&o.stderr)
        .lines()
        .filter(|l| !l.contains(": installing ") && !l.contains(": downloading "))
        .map(str::to_string)
        .collect()
}

/// The one error line of a run that failed with exit status 2.
fn the_error(o: &Output) -> String {
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let e = error_lines(o);
    assert_eq!(e.len(), 1, "{e:?}");
    e[0].clone()
}

#[test]
fn usage_errors_need_no_root_and_say_what_is_missing() {
    let e = the_error(&vm_sh(&["--kernel", "6.1"], None));
    assert!(e.contains("no command"), "{e}");
    let e = the_error(&vm_sh(&["--accel", "hvf", "--", "true"], None));
    assert!(e.contains("--accel must be auto, kvm or tcg"), "{e}");
}

#[test]
fn a_kernel_version_that_does_not_exist_is_named() {
    require_root!();
    let e = the_error(&vm_sh(&["--kernel", "9.99", "--", "true"], None));
    assert!(
        e.contains("no Debian kernel package for version 9.99") && e.contains("6.1"),
        "{e}"
    );
}

/// A PATH with every program of the usual directories and of this PATH
/// (pip's `vng` may live there) but qemu's.
fn path_without_qemu() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lcmp-noqemu-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let usual = [
        "/usr/local/sbin",
        "/usr/local/bin",
        "/usr/sbin",
        "/usr/bin",
        "/sbin",
        "/bin",
    ]
    .map(PathBuf::from);
    let path = std::env::var_os("PATH").unwrap_or_default();
    for d in usual.into_iter().chain(std::env::split_paths(&path)) {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let name = e.file_name();
            if !name.to_string_lossy().starts_with("qemu-system") {
                let _ = std::os::unix::fs::symlink(e.path(), dir.join(&name));
            }
        }
    }
    dir
}

#[test]
fn without_qemu_it_says_so_in_one_line() {
    require_root!();
    let dir = path_without_qemu();
    let o = vm_sh(&["--", "true"], Some(&dir));
    let _ = std::fs::remove_dir_all(&dir);
    let e = the_error(&o);
    assert!(e.contains("qemu-system-x86_64"), "{e}");
}

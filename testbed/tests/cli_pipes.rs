//! `lcmp-testbed ... | head` with a reader that has gone: the program ends
//! quietly with status 141 (128 + SIGPIPE, what a shell reports for
//! coreutils in the same place), never with a panic. `fidelity` is the
//! command that prints without root or a running testbed.

use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;
use std::process::{Command, Stdio};

/// The write end of a pipe whose read end is already closed: the first
/// write fails with EPIPE however short the output is.
fn closed_pipe() -> Stdio {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two fresh descriptors; each is owned once below.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    drop(unsafe { OwnedFd::from_raw_fd(fds[0]) });
    Stdio::from(unsafe { OwnedFd::from_raw_fd(fds[1]) })
}

#[test]
fn fidelity_into_a_closed_pipe_ends_quietly() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    // A copy of a shipped run: fidelity writes its files into the run.
    let run = std::env::temp_dir().join(format!("lcmp-pipe-fidelity-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&run);
    std::fs::create_dir_all(&run).unwrap();
    for f in ["summary.json", "report.md"] {
        std::fs::copy(root.join("results/8dc-replay").join(f), run.join(f)).unwrap();
    }
    let out = Command::new(env!("CARGO_BIN_EXE_lcmp-testbed"))
        .current_dir(&root)
        .arg("fidelity")
        .arg("--run")
        .arg(&run)
        .args([
            "--reference",
            "lcmp=experiments/reference/lcmp-artifact-8dc/fct_lcmp.txt",
        ])
        .stdout(closed_pipe())
        .output()
        .expect("lcmp-testbed runs");
    let _ = std::fs::remove_dir_all(&run);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!((out.status.code(), err.as_ref()), (Some(141), ""));
}

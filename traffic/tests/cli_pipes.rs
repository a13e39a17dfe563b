//! `lcmp-traffic workloads` into a pipe nobody reads: the program ends
//! quietly with status 141 (128 + SIGPIPE, what a shell reports for
//! coreutils in the same place), neither a panic nor a silent success.

use std::os::fd::{FromRawFd, OwnedFd};
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
fn workloads_into_a_closed_pipe_end_quietly() {
    let out = Command::new(env!("CARGO_BIN_EXE_lcmp-traffic"))
        .arg("workloads")
        .stdout(closed_pipe())
        .output()
        .expect("lcmp-traffic runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!((out.status.code(), err.as_ref()), (Some(141), ""));
}

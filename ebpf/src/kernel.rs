//! The running kernel's release, and the oldest one the switch supports.
//!
//! The switch is tested on Debian's stock kernels of the 6.1 (Debian 12)
//! and 6.12 (Debian 13, bookworm-backports) series, and on the 6.18 build
//! machines (`scripts/vm-test.sh` boots the stock ones). It uses XDP
//! through bpf_link with `BPF_LINK_DETACH` (5.9), AF_XDP sockets sharing
//! one UMEM across devices (5.10) with the v2 statistics (5.9), and the
//! netlink route attributes of those kernels; older kernels are refused at
//! start with the reason rather than failing somewhere in the setup.

use std::fmt;

/// The oldest kernel release (major, minor) the switch supports.
pub const MIN_KERNEL: (u32, u32) = (6, 1);

/// A kernel release too old for the switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsupportedKernel {
    /// The running release as `uname -r` prints it.
    pub release: String,
}

impl fmt::Display for UnsupportedKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Linux {} is older than {}.{}, the oldest kernel lcmp-switch supports (tested on \
             Debian's 6.1 and 6.12 kernels; scripts/vm.sh boots one of them)",
            self.release, MIN_KERNEL.0, MIN_KERNEL.1
        )
    }
}

impl std::error::Error for UnsupportedKernel {}

/// (major, minor) of a release string such as `6.1.0-57-amd64` or
/// `6.12.95+deb12-amd64`; `None` if it does not start with two numbers.
pub fn parse_release(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// The running kernel's release (`uname -r`).
pub fn release() -> std::io::Result<String> {
    std::fs::read_to_string("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string())
}

/// Whether `release` is at least [`MIN_KERNEL`]. A release that does not
/// parse is let through: a custom build's name says nothing about its age.
pub fn check_release(release: &str) -> Result<(), UnsupportedKernel> {
    match parse_release(release) {
        Some(v) if v < MIN_KERNEL => Err(UnsupportedKernel {
            release: release.to_string(),
        }),
        _ => Ok(()),
    }
}

/// [`check_release`] of the running kernel (unreadable: let through).
pub fn check_running() -> Result<(), UnsupportedKernel> {
    match release() {
        Ok(r) => check_release(&r),
        Err(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_of_distribution_kernels_parse() {
        assert_eq!(parse_release("6.1.0-57-amd64"), Some((6, 1)));
        assert_eq!(parse_release("6.12.95+deb12-amd64"), Some((6, 12)));
        assert_eq!(parse_release("5.15.0-126-generic"), Some((5, 15)));
        assert_eq!(parse_release("6.18.0"), Some((6, 18)));
        assert_eq!(parse_release("6"), None);
        assert_eq!(parse_release("custom"), None);
    }

    #[test]
    fn kernels_before_6_1_are_refused_with_the_release_named() {
        assert!(check_release("6.1.0-57-amd64").is_ok());
        assert!(check_release("6.12.95+deb12-amd64").is_ok());
        assert!(check_release("7.0.1").is_ok());
        let e = check_release("5.15.0-126-generic").unwrap_err();
        assert_eq!(e.release, "5.15.0-126-generic");
        let msg = e.to_string();
        assert!(
            msg.starts_with("Linux 5.15.0-126-generic is older than 6.1"),
            "{msg}"
        );
        assert!(check_release("4.19.0-27-amd64").is_err());
        // A name without a version is no evidence of age.
        assert!(check_release("my-kernel").is_ok());
    }
}

//! Entering a network namespace on the calling thread, for as long as a
//! guard lives. One process runs switches of several namespaces this way:
//! a switch's AF_XDP sockets, XDP programs and netlink sockets are created
//! while the opening thread is in the switch's namespace, and they stay
//! bound to it after the thread returns (`setns(2)` moves only the calling
//! thread; sockets keep the namespace they were created in).

use std::fs::File;
use std::path::{Path, PathBuf};

/// Where `ip netns add NAME` keeps the namespace's handle.
pub const NETNS_DIR: &str = "/run/netns";

/// The calling thread is in another network namespace until this drops;
/// then it returns to the namespace it was in.
#[derive(Debug)]
pub struct NetnsGuard {
    home: File,
    path: PathBuf,
}

/// The handle of namespace `name`: a path as given if it has a `/`, else
/// `/run/netns/NAME` (a namespace made by `ip netns add`).
pub fn netns_path(name: &str) -> PathBuf {
    if name.contains('/') {
        PathBuf::from(name)
    } else {
        Path::new(NETNS_DIR).join(name)
    }
}

impl NetnsGuard {
    /// Moves the calling thread into network namespace `name` (see
    /// [`netns_path`]) until the guard drops.
    pub fn enter(name: &str) -> Result<NetnsGuard, String> {
        let path = netns_path(name);
        let home = File::open("/proc/thread-self/ns/net")
            .map_err(|e| format!("cannot open this thread's network namespace: {e}"))?;
        let target =
            File::open(&path).map_err(|e| format!("network namespace {}: {e}", path.display()))?;
        lcmp_ebpf::sys::enter_netns(&target)
            .map_err(|e| format!("cannot enter network namespace {}: {e}", path.display()))?;
        Ok(NetnsGuard { home, path })
    }

    /// The namespace's handle.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        // Returning to the namespace the thread came from cannot fail for
        // a handle opened from it (we hold CAP_SYS_ADMIN: we entered one);
        // if it did, anything the thread opened next would land in the
        // wrong namespace, so that is not left to chance.
        if let Err(e) = lcmp_ebpf::sys::enter_netns(&self.home) {
            panic!(
                "cannot return from network namespace {}: {e}",
                self.path.display()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_paths() {
        assert_eq!(
            netns_path("lcmptb-x-s1"),
            Path::new("/run/netns/lcmptb-x-s1")
        );
        assert_eq!(netns_path("/proc/1/ns/net"), Path::new("/proc/1/ns/net"));
    }

    #[test]
    fn a_missing_namespace_is_named() {
        let e = NetnsGuard::enter("lcmp-no-such-namespace-for-a-test").unwrap_err();
        assert!(
            e.contains("/run/netns/lcmp-no-such-namespace-for-a-test"),
            "{e}"
        );
    }

    #[test]
    fn enters_and_returns() {
        // SAFETY: geteuid(2) has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipping: needs root (setns)");
            return;
        }
        std::thread::spawn(|| {
            let ino = || {
                std::fs::metadata("/proc/thread-self/ns/net")
                    .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
                    .unwrap()
            };
            let home = ino();
            // A namespace of a helper thread alone, entered by its handle.
            let (tx, rx) = std::sync::mpsc::channel();
            let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
            let helper = std::thread::spawn(move || {
                // SAFETY: unshare(CLONE_NEWNET) moves only this thread.
                assert_eq!(unsafe { libc::unshare(libc::CLONE_NEWNET) }, 0);
                tx.send(format!("/proc/{}/task/{}/ns/net", std::process::id(), {
                    // SAFETY: gettid(2) has no preconditions.
                    unsafe { libc::gettid() }
                }))
                .unwrap();
                let _ = done_rx.recv();
            });
            let path = rx.recv().unwrap();
            {
                let g = NetnsGuard::enter(&path).expect("enter");
                assert_ne!(ino(), home);
                assert_eq!(g.path(), Path::new(&path));
            }
            assert_eq!(ino(), home);
            done_tx.send(()).unwrap();
            helper.join().unwrap();
        })
        .join()
        .expect("test thread");
    }
}

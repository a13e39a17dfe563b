//! What the namespace tests of lcmp-traffic share: two namespaces joined
//! by a veth pair, and a child process killed with its handle.
#![allow(dead_code)]

use std::process::Command;

/// Runs `ip ARGS`, failing the test with its stderr.
pub fn ip(args: &[&str]) {
    let o = Command::new("ip").args(args).output().unwrap();
    assert!(
        o.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Two namespaces joined by a veth pair, `a` 10.S.0.1/24, `b`
/// 10.S.0.2/24; deleted (the veth with them) when dropped.
pub struct Pair {
    pub names: Vec<String>,
}

impl Pair {
    /// `tag`: a few letters of the test's own (the namespace and veth
    /// names hold it with this process's id; a veth name has at most 15
    /// characters); `subnet`: S.
    pub fn new(tag: &str, subnet: u8) -> Pair {
        let pid = std::process::id();
        let (a, b) = (format!("lcmp-{tag}-{pid}-a"), format!("lcmp-{tag}-{pid}-b"));
        let mut pair = Pair { names: Vec::new() };
        for n in [&a, &b] {
            ip(&["netns", "add", n]);
            pair.names.push(n.clone());
        }
        let (va, vb) = (format!("{tag}a{pid}"), format!("{tag}b{pid}"));
        ip(&[
            "link", "add", &va, "netns", &a, "type", "veth", "peer", "name", &vb, "netns", &b,
        ]);
        for (ns, dev, host) in [(&a, &va, 1), (&b, &vb, 2)] {
            ip(&[
                "-n",
                ns,
                "addr",
                "add",
                &format!("10.{subnet}.0.{host}/24"),
                "dev",
                dev,
            ]);
            ip(&["-n", ns, "link", "set", dev, "up"]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        pair
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for n in &self.names {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

/// Kills the child if the test ends before it does.
pub struct Child(pub std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

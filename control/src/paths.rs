//! Where control sockets live. A standalone switch listens on
//! `/run/lcmp-switch/<switch>.sock`; the switches of a testbed on
//! `/run/lcmp-testbed/<testbed>/<switch>.sock`, so switches of the same
//! name in two testbeds do not collide and a testbed's sockets are found by
//! listing its directory.

use std::path::{Path, PathBuf};

/// Directory of standalone switches' sockets.
pub const SWITCH_RUN_DIR: &str = "/run/lcmp-switch";

/// Directory of testbeds' state (one subdirectory per testbed).
pub const TESTBED_RUN_DIR: &str = "/run/lcmp-testbed";

/// The default control socket of a standalone switch `name`.
pub fn switch_socket(name: &str) -> PathBuf {
    Path::new(SWITCH_RUN_DIR).join(format!("{name}.sock"))
}

/// The control socket of switch `switch` of testbed `testbed`.
pub fn testbed_socket(testbed: &str, switch: &str) -> PathBuf {
    Path::new(TESTBED_RUN_DIR)
        .join(testbed)
        .join(format!("{switch}.sock"))
}

/// The control sockets in `dir` as `(switch, path)`, sorted by name.
pub fn sockets_in(dir: &Path) -> std::io::Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let path = e?.path();
        if path.extension().is_some_and(|x| x == "sock") {
            if let Some(stem) = path.file_stem().and_then(|s| s.to_str()) {
                out.push((stem.to_string(), path.clone()));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The control sockets of testbed `testbed`.
pub fn testbed_sockets(testbed: &str) -> std::io::Result<Vec<(String, PathBuf)>> {
    sockets_in(&Path::new(TESTBED_RUN_DIR).join(testbed))
}

/// The prefix of every namespace of testbed `testbed` (a node's namespace
/// is this followed by the node's name).
pub fn testbed_netns_prefix(testbed: &str) -> String {
    format!("{TESTBED_NETNS_PREFIX}{testbed}-")
}

/// The prefix of every testbed's namespaces.
pub const TESTBED_NETNS_PREFIX: &str = "lcmptb-";

/// The testbed's topology file as its switches read it.
pub fn testbed_topology(testbed: &str) -> PathBuf {
    Path::new(TESTBED_RUN_DIR)
        .join(testbed)
        .join("topology.toml")
}

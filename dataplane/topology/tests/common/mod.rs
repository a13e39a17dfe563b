//! Generated networks for the size tests (`limits.rs`, `tables.rs`,
//! `tables_memory.rs`).

use std::fmt::Write as _;

/// `n` switches `s0` .. `s{n-1}` (4 lines each, from line 1), switch `i`
/// delivering `10.<i / 256>.<i % 256>.0/24`, and one link (10 Gbit/s,
/// 1 ms) from each switch `i` after the first to `parent(i)`, in order of
/// `i`: with `parent(i) = i - 1` a chain where every switch but the ends
/// has port 0 towards `s{i-1}` and port 1 towards `s{i+1}`.
pub fn switches_and_links(n: usize, parent: impl Fn(usize) -> usize) -> String {
    let mut t = String::new();
    for i in 0..n {
        let _ = write!(
            t,
            "[[switch]]\nname = \"s{i}\"\nprefixes = [\"10.{}.{}.0/24\"]\n\n",
            i / 256,
            i % 256
        );
    }
    for i in 1..n {
        let _ = write!(
            t,
            "[[link]]\na = \"s{}\"\nb = \"s{i}\"\nrate = \"10Gbps\"\ndelay = \"1ms\"\n\n",
            parent(i)
        );
    }
    t
}

//! All-pairs route tables (`path_cost_model` plus `switch_tables` for every
//! switch) on a chain of switches: the longest paths and the most routes
//! per switch for a given size, so the cost of the candidate search shows.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use lcmp_policy::PathCostParams;
use lcmp_topology::tables::{path_cost_model, switch_tables, PathMetric};
use lcmp_topology::Topology;
use std::fmt::Write as _;
use std::hint::black_box;

/// `s0 - s1 - ... - s{n-1}`, each switch delivering one /24.
fn chain(n: usize) -> Topology {
    let mut t = String::new();
    for i in 0..n {
        let _ = writeln!(
            t,
            "[[switch]]\nname = \"s{i}\"\nprefixes = [\"10.{}.{}.0/24\"]\n",
            i / 256,
            i % 256
        );
    }
    for i in 1..n {
        let _ = writeln!(
            t,
            "[[link]]\na = \"s{}\"\nb = \"s{i}\"\nrate = \"10Gbps\"\ndelay = \"1ms\"\n",
            i - 1
        );
    }
    Topology::parse(&t, "chain.toml").expect("the chain is a valid topology")
}

fn all_tables(topo: &Topology) -> usize {
    let model = path_cost_model(topo, PathCostParams::default(), PathMetric::Path)
        .expect("default parameters fit a chain");
    topo.switches()
        .iter()
        .map(|s| {
            switch_tables(topo, s.id, &model, PathMetric::Path)
                .expect("a chain has at most two candidates per route")
                .routes
                .len()
        })
        .sum()
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("all_pairs_tables_chain");
    // A few samples suffice: one iteration takes from milliseconds to
    // seconds, and the point is the growth with n.
    group.sample_size(10);
    for n in [500, 2000] {
        let topo = chain(n);
        group.bench_with_input(BenchmarkId::from_parameter(n), &topo, |b, topo| {
            b.iter(|| black_box(all_tables(black_box(topo))))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

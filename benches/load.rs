//! Load + validate + resolve for generated pipelines of 10, 100 and 1,000
//! phases (`benches/support/pipeline_gen.rs`).
//!
//! Every input is checked before it is timed: it validates with no
//! diagnostics, and the invocation, edge and stage counts are the ones the
//! generator computed.
//!
//! Groups:
//! - `load_validate_resolve`: `load_str`, then resolve every (phase, agent)
//!   and build the phase graph and its stages: what `orch validate`, `plan`
//!   and `explain` all pay.
//! - `resolve_graph`: the resolve + graph part alone, on a loaded pipeline.
//!
//! Run: `cargo bench --bench load` (about a minute on 2 cores).

// Shared with `scripts/gen-pipeline.rs`; the bench uses only the layered
// topology.
#[allow(dead_code)]
#[path = "support/pipeline_gen.rs"]
mod pipeline_gen;

use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use orch::agents::checks::Checks;
use orch::pipeline::graph::PhaseGraph;
use orch::pipeline::{Pipeline, load_str};

use pipeline_gen::{Generated, Topology, generate};

const SIZES: [usize; 3] = [10, 100, 1_000];

/// What a run over a loaded pipeline produced, for the correctness check
/// (and so the optimiser cannot drop the work).
struct Summary {
    invocations: usize,
    max_turns_sum: u64,
    edges: usize,
    stages: usize,
}

fn resolve_all(pipeline: &Pipeline) -> Summary {
    let mut invocations = 0;
    let mut max_turns_sum = 0u64;
    for (phase, agent) in pipeline.invocations() {
        let r = pipeline.resolve(phase, agent);
        invocations += 1;
        max_turns_sum += u64::from(r.toolset.max_turns);
        black_box(&r);
    }
    let graph = PhaseGraph::build(pipeline).expect("generated pipelines are acyclic");
    let stages = graph.stages();
    Summary {
        invocations,
        max_turns_sum,
        edges: graph.edges().len(),
        stages: stages.len(),
    }
}

/// Confinement as this machine has it (validation asks).
fn os() -> orch::confine::Availability {
    orch::confine::Availability::detect(orch::model::ConfinementMode::Auto)
}

fn load(g: &Generated) -> Pipeline {
    match load_str(
        "generated.toml",
        g.text.clone(),
        Path::new("."),
        &Checks::new(&os()),
    ) {
        Ok(l) => {
            assert!(
                l.warnings.is_empty(),
                "{} phases: unexpected warnings: {:#?}",
                g.phases,
                l.warnings
            );
            l.pipeline
        }
        Err(e) => panic!(
            "generated pipeline of {} phases does not validate: {:#?}",
            g.phases, e.diagnostics
        ),
    }
}

/// Correctness before timing.
fn check(g: &Generated) {
    let pipeline = load(g);
    assert_eq!(pipeline.phases.len(), g.phases);
    let s = resolve_all(&pipeline);
    assert_eq!(s.invocations, g.invocations, "invocations");
    assert_eq!(s.edges, g.edges, "dependency edges");
    assert_eq!(s.stages, g.stages, "stages");
    assert!(s.max_turns_sum >= s.invocations as u64, "max_turns >= 1");
}

fn benches(c: &mut Criterion) {
    let inputs: Vec<Generated> = SIZES
        .iter()
        .map(|&n| {
            let g = generate(n, Topology::Layered);
            check(&g);
            g
        })
        .collect();

    let mut group = c.benchmark_group("load_validate_resolve");
    group
        .sample_size(30)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(5));
    for g in &inputs {
        group.throughput(Throughput::Elements(g.phases as u64));
        group.bench_with_input(BenchmarkId::from_parameter(g.phases), g, |b, g| {
            b.iter_batched(
                || g.text.clone(),
                |text| {
                    let loaded =
                        load_str("generated.toml", text, Path::new("."), &Checks::new(&os()))
                            .expect("validated above");
                    let s = resolve_all(&loaded.pipeline);
                    black_box((loaded, s.invocations))
                },
                BatchSize::SmallInput,
            );
        });
    }
    group.finish();

    let mut group = c.benchmark_group("resolve_graph");
    group
        .sample_size(30)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for g in &inputs {
        let pipeline = load(g);
        group.throughput(Throughput::Elements(g.phases as u64));
        group.bench_with_input(
            BenchmarkId::from_parameter(g.phases),
            &pipeline,
            |b, pipeline| b.iter(|| black_box(resolve_all(pipeline).invocations)),
        );
    }
    group.finish();
}

criterion_group!(load_benches, benches);
criterion_main!(load_benches);

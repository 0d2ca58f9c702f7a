//! Events through the store: 200,000 `Record::Event`s sent to one
//! `Writer`, timed until a flush says they are committed (issue 21's
//! target, at least 700,000 events per second, is for the whole `orch
//! run`: `scripts/measure-run.sh`). The records are built in the timed
//! loop, as the engine builds them (the attempt's ids once, shared by
//! every event).
//!
//! Before timing, one pass checks that every event is stored and prints the
//! rate; criterion then reports it as `thrpt` (elements per second).
//!
//! Run: `cargo bench --bench store`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use orch::store::fixture::{attempt, phase_started, run_started};
use orch::store::{AttemptKey, Record, Store};
use tempfile::TempDir;

const EVENTS: u64 = 200_000;
const RUN: &str = "20250101T000000-bench";

/// A fresh store with a run, a phase and an attempt to hang events on.
fn fresh() -> (TempDir, Store) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Store::open(dir.path()).expect("store opens");
    let w = store.writer();
    for r in [
        run_started(RUN, std::process::id(), 0),
        phase_started(RUN, "stream", 0),
        attempt(RUN, "stream", "firehose", 1).start(0),
    ] {
        w.send(r).expect("send");
    }
    w.flush().expect("setup committed");
    (dir, store)
}

/// What an agent's stream looks like once parsed: a tool call, its JSON
/// line as printed, and the normalized event; the attempt's key is shared,
/// as the engine shares it.
fn event(key: &Arc<AttemptKey>, seq: u64) -> Record {
    Record::Event {
        key: Arc::clone(key),
        seq,
        ts_ms: 1_700_000_000_000 + seq,
        kind: "tool_call".into(),
        data_json: format!(
            r#"{{"kind":"tool_call","id":"call_{seq}","name":"Read","input":{{"file_path":"src/lib.rs"}}}}"#
        )
        .into(),
        raw: format!(
            r#"{{"type":"tool_use","id":"call_{seq}","name":"Read","input":{{"file_path":"src/lib.rs"}}}}"#
        ),
    }
}

fn stream(store: &Store) {
    let w = store.writer();
    let key = AttemptKey::new(RUN, "stream", "firehose", 1);
    for seq in 0..EVENTS {
        w.send(event(&key, seq)).expect("send");
    }
    w.flush().expect("every event committed");
}

/// Correctness before timing, and the figure in plain words.
fn check() {
    let (_dir, store) = fresh();
    let t = Instant::now();
    stream(&store);
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(store.event_count(RUN).expect("count"), EVENTS);
    let stats = store.writer().stats();
    assert_eq!(stats.errors, 0);
    store
        .close()
        .expect("the store closes without write errors");
    eprintln!(
        "store: {EVENTS} events committed in {:.1} ms = {:.0} events/s ({} transactions)",
        secs * 1e3,
        EVENTS as f64 / secs,
        stats.batches
    );
}

fn bench(c: &mut Criterion) {
    check();
    let mut g = c.benchmark_group("store");
    g.throughput(Throughput::Elements(EVENTS));
    g.sample_size(10);
    // Each iteration takes about half a second.
    g.sampling_mode(SamplingMode::Flat);
    g.measurement_time(Duration::from_secs(20));
    g.bench_function("events_200k", |b| {
        b.iter_batched(
            fresh,
            |(dir, store)| {
                stream(&store);
                black_box(&store);
                // Closing (the join) and removing the directory are not
                // part of the figure: they are dropped by the caller.
                (dir, store)
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

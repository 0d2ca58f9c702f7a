//! A run from start to end: open the store, refuse a second run in the same
//! state directory, pick up a resumed run (checking it was made from the
//! same files), announce the run, start the keeper, schedule the phases,
//! stop what agents left behind, announce the end, and close the store.
//! What happens goes out as one stream of [`RunEvent`]s to the store and
//! to the listeners the caller gives (the live view, report builders).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::attempt::Live;
use super::events::{Events, Listener, RecordSink};
use super::identity::{self, changes};
use super::scheduler::{self, RunOptions};
use super::supervisor::Cancel;
use crate::clock::now_ms;
use crate::engine::assemble::Context;
use crate::pipeline::Pipeline;
use crate::pipeline::graph::PhaseGraph;
use crate::store::{Record, RunDetail, RunStatus, Store, StoreError};

/// What to run.
pub(crate) struct Request {
    pub(crate) pipeline: Pipeline,
    pub(crate) graph: PhaseGraph,
    pub(crate) ctx: Context,
    /// Indices into `pipeline.phases`.
    pub(crate) selected: Vec<usize>,
    /// As recorded: `all`, `phase:a,b` or `from:a`.
    pub(crate) selection: String,
    /// Continue this run (`latest`: the pipeline's latest), skipping the
    /// phases that succeeded in it.
    pub(crate) resume: Option<String>,
    /// Resume even though the files changed.
    pub(crate) force: bool,
    /// The id of a new run (default: a fresh one). CI jobs of one workflow
    /// share one, so their stores merge into one run.
    pub(crate) run_id: Option<String>,
    pub(crate) max_parallel: usize,
    pub(crate) grace: Duration,
    pub(crate) listeners: Vec<Arc<dyn Listener>>,
}

/// Why a run did not start (nothing was recorded or spawned).
#[derive(Debug)]
pub(crate) struct Refused {
    pub(crate) message: String,
    pub(crate) hint: Option<String>,
}

fn refused(message: String, hint: Option<&str>) -> Refused {
    Refused {
        message,
        hint: hint.map(str::to_string),
    }
}

/// How a run ended.
pub(crate) struct Finished {
    pub(crate) status: RunStatus,
    /// The run as recorded, with only the phases this invocation dealt
    /// with (those selected, a resumed run's earlier successes included).
    pub(crate) detail: Option<RunDetail>,
    /// An incomplete record (a write refused, a lock another process held)
    /// fails the run: what it did cannot be shown.
    pub(crate) recorded: Result<(), StoreError>,
}

/// Run the request to its end (or until interrupted by SIGINT/SIGTERM).
pub(crate) fn run(req: Request) -> Result<Finished, Refused> {
    let state_dir = req.ctx.state_dir();
    // One orch per state directory, decided before anything is recorded
    // or started; held until the run ends.
    {
        use std::os::unix::fs::DirBuilderExt;
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&state_dir);
    }
    let _lock = crate::store::RunLock::take(&state_dir).map_err(|e| match e {
        crate::store::LockError::Held { .. } => refused(
            e.to_string(),
            Some("wait for it to finish, or use another `--state-dir`"),
        ),
        crate::store::LockError::Open { .. } => refused(e.to_string(), None),
    })?;
    let store = Store::open(&state_dir).map_err(|e| {
        refused(
            format!(
                "cannot open the run store in `{}`: {e}",
                state_dir.display()
            ),
            None,
        )
    })?;
    // This orch holds the lock: every run still marked running was left
    // by an orch that is gone.
    let _ = store.reader().mark_all_interrupted();

    let pipeline = req.pipeline;
    let digests = identity::digests(&pipeline);
    let mut done = Vec::new();
    let mut attempt_base = HashMap::new();
    let mut resumed = None;
    let run_id = match &req.resume {
        None => match req.run_id {
            Some(id) => {
                // A shared id continues nothing: its phases here must be new.
                if let Ok(Some(d)) = store.reader().run_digests(&id)
                    && d.0 != digests.digest
                {
                    return Err(refused(
                        format!("run `{id}` is already recorded here, from different files"),
                        Some("use a new --run-id"),
                    ));
                }
                attempt_base = store.reader().attempt_counts(&id).unwrap_or_default();
                id
            }
            None => identity::new_run_id(),
        },
        Some(which) => {
            let id = if which == "latest" {
                match store
                    .reader()
                    .latest_run(&pipeline.path.display().to_string())
                {
                    Ok(Some(id)) => id,
                    _ => {
                        return Err(refused(
                            format!("no earlier run of `{}` to resume", pipeline.path.display()),
                            Some("run it without --resume first"),
                        ));
                    }
                }
            } else {
                match store.reader().resolve_run(which) {
                    Ok(Some(id)) => id,
                    _ => {
                        return Err(refused(
                            format!("no run `{which}`"),
                            Some("`orch runs list` shows the runs"),
                        ));
                    }
                }
            };
            if let Ok(Some((old_digest, old_files))) = store.reader().run_digests(&id)
                && old_digest != digests.digest
                && !req.force
            {
                let old: BTreeMap<String, String> =
                    serde_json::from_str(&old_files).unwrap_or_default();
                let what = changes(&old, &digests.files);
                return Err(refused(
                    format!(
                        "run `{id}` was made from different files: {}",
                        what.join("; ")
                    ),
                    Some("resume anyway with --force, or start a new run"),
                ));
            }
            let succeeded = store.reader().succeeded_phases(&id).unwrap_or_default();
            done = req
                .selected
                .iter()
                .copied()
                .filter(|&i| succeeded.contains(&pipeline.phases[i].name))
                .collect();
            attempt_base = store.reader().attempt_counts(&id).unwrap_or_default();
            // The run goes on from where it was: its detail as stored.
            resumed = store.reader().run(&id).ok().flatten();
            id
        }
    };

    // orch serves every agent's tools itself; their reports go into the
    // same history, on a connection of this process.
    let reports = crate::store::Reports::open(
        &state_dir,
        crate::store::Reporter {
            run_id: run_id.clone(),
            phase: String::new(),
            agent: "orch".into(),
            attempt: 0,
        },
    )
    .map_err(|e| {
        refused(
            format!("cannot open the run store for agents' reports: {e}"),
            None,
        )
    })?;
    let host = Arc::new(crate::mcp::Host::new(
        reports,
        Arc::new(crate::mcp::Ledger::new()),
    ));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| refused(format!("cannot start the async runtime: {e}"), None))?;

    let writer = store.writer();
    let recorder: Arc<dyn RecordSink> = Arc::new(writer.clone());
    let followed = Arc::new(Followed(std::sync::Mutex::new(resumed)));
    let mut listeners = req.listeners;
    listeners.push(followed.clone());
    let events = Events::new(Some(recorder), listeners);
    let dealt_with: Vec<String> = req
        .selected
        .iter()
        .map(|&i| pipeline.phases[i].name.clone())
        .collect();
    events.record(Record::RunStarted {
        run_id: run_id.clone(),
        pipeline_name: pipeline.name.clone(),
        pipeline_path: pipeline.path.display().to_string(),
        digest: digests.digest.clone(),
        digests_json: serde_json::to_string(&digests.files).unwrap_or_default(),
        selection: req.selection,
        pid: std::process::id(),
        started_ms: now_ms(),
    });

    // The keeper kills the agents' process groups if this process dies.
    let keeper = std::env::current_exe()
        .and_then(|exe| super::keeper::Keeper::start(&exe))
        .map(Arc::new)
        .map_err(|e| {
            eprintln!("warning: no keeper process ({e}); agents may outlive a killed orch");
        })
        .ok();
    let opts = RunOptions {
        ledger: Arc::clone(host.ledger()),
        run_id: run_id.clone(),
        selected: req.selected,
        done,
        max_parallel: req.max_parallel,
        retry_base: Duration::from_secs(2),
        retry_max: Duration::from_secs(60),
        attempt_base,
    };
    let pipeline = Arc::new(pipeline);
    let ctx = Arc::new(req.ctx);
    let graph = req.graph;
    let live = Live {
        run_id: run_id.clone(),
        pipeline: Arc::clone(&pipeline),
        ctx: Arc::clone(&ctx),
        events: events.clone(),
        host,
        keeper,
        grace: req.grace,
    };
    let status = runtime.block_on(async {
        let (cancel_tx, cancel_rx) = watch::channel(Cancel::No);
        tokio::spawn(watch_signals(cancel_tx));
        scheduler::run(
            live,
            Arc::clone(&pipeline),
            &graph,
            ctx,
            opts,
            events.clone(),
            cancel_rx,
        )
        .await
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
    // The remote MCP servers' sessions end as their connections were
    // dropped; a moment for the `DELETE`s to go out.
    crate::mcp::settle_remote_sessions(Duration::from_secs(2));
    super::reaper::sweep();
    crate::confine::tree::remove_base();
    events.record(Record::RunFinished {
        run_id: run_id.clone(),
        status,
        ended_ms: now_ms(),
    });
    drop(events);
    drop(writer);
    let recorded = store.close();
    let detail = followed
        .0
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .map(|d| d.only(&dealt_with));
    Ok(Finished {
        status,
        detail,
        recorded,
    })
}

/// The run as it happens: every record folded into its detail (one
/// reducer, `RunDetail::apply`), from the stored detail when resumed.
struct Followed(std::sync::Mutex<Option<RunDetail>>);

impl Listener for Followed {
    fn on(&self, event: &super::RunEvent) {
        if let super::RunEvent::Recorded(r) = event {
            let mut d = self.0.lock().unwrap_or_else(|e| e.into_inner());
            match d.as_mut() {
                Some(d) => d.apply(r),
                None => *d = RunDetail::started(r),
            }
        }
    }
}

/// First Ctrl-C (or SIGTERM): stop gracefully; second: kill at once.
async fn watch_signals(tx: watch::Sender<Cancel>) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return;
    };
    let mut count = 0;
    loop {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        count += 1;
        let level = if count == 1 {
            Cancel::Graceful
        } else {
            Cancel::Immediate
        };
        eprintln!(
            "orch: {}",
            if count == 1 {
                "interrupted; stopping agents (press Ctrl-C again to kill them now)"
            } else {
                "killing agents now"
            }
        );
        let _ = tx.send(level);
    }
}

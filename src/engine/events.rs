//! The one stream of what happens in a run. The engine emits [`RunEvent`]s
//! in order; every listener (the live view, the run's detail) sees each
//! one by reference, and the store's writer gets each [`Record`] last, by
//! value. What `orch run` prints when it ends and the CI reports (JUnit,
//! the step summary) read the run's detail, folded from this stream by
//! `RunDetail::apply`.

use std::sync::Arc;
use std::time::Duration;

use crate::store::Record;

/// One thing that happened in a run: what the store keeps (a [`Record`]),
/// or progress only people see.
#[derive(Debug)]
pub(crate) enum RunEvent {
    /// The run, a phase, an attempt, an agent's output line or an
    /// artifact, as it is recorded.
    Recorded(Record),
    /// A running agent called a tool or finished a turn.
    Activity {
        phase: String,
        agent: String,
        turns: u32,
        last_tool: Option<String>,
    },
    Retrying {
        phase: String,
        agent: String,
        wait: Duration,
        /// The failed attempt hit a rate limit; inside, when it lifts.
        rate_limited: Option<Option<u64>>,
    },
    /// A judge decided on a phase's artifact.
    Judged {
        phase: String,
        judge: String,
        round: u32,
        /// `None`: approved; else why it was rejected.
        rejected: Option<String>,
    },
    /// A contract check failed under `validation = "trust"`.
    ContractWarning { phase: String, message: String },
}

/// Anything that follows a run as it happens.
pub(crate) trait Listener: Send + Sync {
    fn on(&self, event: &RunEvent);
}

impl<F: Fn(&RunEvent) + Send + Sync> Listener for F {
    fn on(&self, event: &RunEvent) {
        self(event)
    }
}

/// Where records go to be stored (the store's writer; a test's sink).
pub(crate) trait RecordSink: Send + Sync {
    fn send(&self, record: Record);
}

impl RecordSink for crate::store::Writer {
    fn send(&self, record: Record) {
        // A stopped writer has recorded its first error; `Store::close`
        // reports it when the run ends.
        let _ = crate::store::Writer::send(self, record);
    }
}

/// The run's stream: a cheap, clonable handle the engine emits into.
#[derive(Clone)]
pub(crate) struct Events(Arc<Inner>);

struct Inner {
    listeners: Vec<Arc<dyn Listener>>,
    store: Option<Arc<dyn RecordSink>>,
}

impl Events {
    /// A run's stream, recorded into `store` (none: not kept).
    pub(crate) fn new(
        store: Option<Arc<dyn RecordSink>>,
        listeners: Vec<Arc<dyn Listener>>,
    ) -> Events {
        Events(Arc::new(Inner { listeners, store }))
    }

    /// A stream nobody follows (tests).
    #[cfg(test)]
    pub(crate) fn discard() -> Events {
        Events::new(None, Vec::new())
    }

    /// Tell every listener, in the order they were given, then the store.
    pub(crate) fn emit(&self, event: RunEvent) {
        for l in &self.0.listeners {
            l.on(&event);
        }
        if let (Some(store), RunEvent::Recorded(record)) = (&self.0.store, event) {
            store.send(record);
        }
    }

    /// Emit what the store keeps.
    pub(crate) fn record(&self, record: Record) {
        self.emit(RunEvent::Recorded(record));
    }
}

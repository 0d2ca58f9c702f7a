//! Where the engine sends what happened: the store's writer in a run, a
//! channel in tests, nowhere in a dry run.

use std::sync::Arc;

use crate::store::Record;

/// Anything that takes records.
pub trait RecordSink: Send + Sync {
    fn send(&self, record: Record);
}

impl RecordSink for std::sync::mpsc::SyncSender<Record> {
    fn send(&self, record: Record) {
        // A bounded channel: a full one makes the engine wait for the
        // writer, which is the back-pressure we want.
        let _ = std::sync::mpsc::SyncSender::send(self, record);
    }
}

/// A cheap, clonable handle to a record sink.
#[derive(Clone)]
pub struct Sink(Arc<dyn RecordSink>);

impl Sink {
    pub fn new(sink: impl RecordSink + 'static) -> Self {
        Self(Arc::new(sink))
    }

    /// A sink that drops everything.
    pub fn null() -> Self {
        struct Null;
        impl RecordSink for Null {
            fn send(&self, _record: Record) {}
        }
        Self::new(Null)
    }

    pub fn send(&self, record: Record) {
        self.0.send(record);
    }
}

impl RecordSink for crate::store::Writer {
    fn send(&self, record: Record) {
        // A stopped writer has recorded its first error; `Store::close`
        // reports it when the run ends.
        let _ = crate::store::Writer::send(self, record);
    }
}

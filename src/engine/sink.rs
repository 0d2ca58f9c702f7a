//! Where the engine sends what happened: the store's writer.

use std::sync::Arc;

use crate::store::Record;

/// Anything that takes records.
pub trait RecordSink: Send + Sync {
    fn send(&self, record: Record);
}

/// A cheap, clonable handle to a record sink.
#[derive(Clone)]
pub struct Sink(Arc<dyn RecordSink>);

impl Sink {
    pub fn new(sink: impl RecordSink + 'static) -> Self {
        Self(Arc::new(sink))
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

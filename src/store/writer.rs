//! The one writer: a dedicated OS thread that owns the write connection to
//! `state.db` and is fed [`Record`]s over a bounded channel by cheap,
//! clonable [`Writer`] handles.
//!
//! The thread blocks for the first record, takes whatever else is already
//! queued (up to [`BATCH`]) without blocking, and commits that batch in one
//! transaction with cached prepared statements. A record that cannot be
//! written (a constraint it breaks, a run refused because another live orch
//! holds the state directory) is skipped and the first such error is kept;
//! the rest of its batch is still committed. A transaction that cannot
//! commit is retried, then counted as lost; batches committed before it are
//! never touched. [`Writer::flush`] and [`Writer::close`] report the first
//! error.
//!
//! Record order matters only where rows refer to each other: `RunStarted`
//! before anything else of its run, `PhaseStarted` (or `PhaseFinished`)
//! before that phase's attempts and artifacts, `AttemptStarted` (or
//! `AttemptFinished`) before that attempt's events. Sending from one task
//! in program order gives exactly that.

use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::error::StoreError;
use super::query::Reader;
use super::record::{AttemptKey, Record};
use super::schema::{self, DB_FILE, MEMORY_DIR};
use super::spans::EventSpans;

/// Records queued before senders wait.
pub(super) const CHANNEL_CAPACITY: usize = 8192;

/// Most records committed in one transaction.
pub(super) const BATCH: usize = 4096;

/// Tries for a transaction that fails as a whole (the database stayed
/// locked beyond the busy timeout, say).
const COMMIT_TRIES: usize = 3;

/// The run history of one state directory: the writer thread and a read
/// connection. Dropping it closes the writer like [`Store::close`], without
/// the report.
pub struct Store {
    writer: Writer,
    reader: Reader,
}

impl Store {
    /// Open (creating when missing) `<state_dir>/state.db`, bring its
    /// schema up to date and start the writer thread.
    pub fn open(state_dir: &Path) -> Result<Store, StoreError> {
        let create_err = |source| StoreError::CreateDir {
            path: state_dir.to_path_buf(),
            source,
        };
        // The run history holds what agents printed (secrets included):
        // only its owner may read it. A new state directory is private, and
        // the database is created private before SQLite opens it, so its
        // `-wal` and `-shm` files (which take the database's mode) are too;
        // an older orch's world-readable database is made private.
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(state_dir)
            .map_err(create_err)?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(state_dir.join(MEMORY_DIR))
            .map_err(create_err)?;
        let path = state_dir.join(DB_FILE);
        make_private(&path).map_err(create_err)?;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&path)
            .map_err(create_err)?;
        for suffix in ["-wal", "-shm"] {
            make_private(Path::new(&format!("{}{suffix}", path.display()))).map_err(create_err)?;
        }
        let write_conn = schema::open(&path, true)?;
        let reader = Reader::new(schema::open(&path, false)?, path);
        let writer = Writer::spawn(write_conn)?;
        Ok(Store { writer, reader })
    }

    /// A handle to send records with (clone it freely).
    pub fn writer(&self) -> Writer {
        self.writer.clone()
    }

    /// The queries, on their own connection.
    pub(crate) fn reader(&self) -> &Reader {
        &self.reader
    }

    /// `<state_dir>/state.db`.
    pub(crate) fn db_path(&self) -> &Path {
        self.reader.path()
    }

    /// Commit everything sent so far (by any handle), stop the writer
    /// thread and wait for it; the first write error, if any.
    pub fn close(self) -> Result<(), StoreError> {
        self.writer.shutdown()
    }
}

/// Take group and other permissions away from `path`, if it exists (a
/// database an older orch made world-readable).
fn make_private(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::metadata(path) {
        Ok(m) if m.permissions().mode() & 0o077 != 0 => std::fs::set_permissions(
            path,
            std::fs::Permissions::from_mode(m.permissions().mode() & !0o077),
        ),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// A store reads through its [`Reader`]: `store.list_runs(20)`.
impl std::ops::Deref for Store {
    type Target = Reader;

    fn deref(&self) -> &Reader {
        &self.reader
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        let _ = self.writer.shutdown();
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.db_path())
            .finish_non_exhaustive()
    }
}

/// What travels on the channel: records, flushes and the order to stop.
enum Message {
    Record(Record),
    /// Reply once everything sent before has been committed.
    Flush(mpsc::Sender<()>),
    Close,
}

/// What the thread and every handle share.
#[derive(Default)]
struct Shared {
    /// The first write error, as text.
    first_error: Mutex<Option<String>>,
    /// How many records could not be written.
    errors: AtomicU64,
    /// Transactions committed, and the records in them.
    batches: AtomicU64,
    records: AtomicU64,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Shared {
    fn record_error(&self, message: String, count: u64) {
        self.errors.fetch_add(count, Ordering::Relaxed);
        let mut first = self.first_error.lock().unwrap_or_else(|e| e.into_inner());
        if first.is_none() {
            *first = Some(message);
        }
    }

    fn status(&self) -> Result<(), StoreError> {
        let first = self.first_error.lock().unwrap_or_else(|e| e.into_inner());
        match &*first {
            None => Ok(()),
            Some(m) => {
                let n = self.errors.load(Ordering::Relaxed);
                let message = if n > 1 {
                    format!("{m} (and {} more write errors)", n - 1)
                } else {
                    m.clone()
                };
                Err(StoreError::Write { message })
            }
        }
    }
}

/// What the writer thread has done so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WriterStats {
    /// Transactions committed.
    pub batches: u64,
    /// Records in them (written or skipped; flushes not counted).
    pub(crate) records: u64,
    /// Records that could not be written.
    pub errors: u64,
}

/// A handle on the writer thread. Cloning is cheap; every clone feeds the
/// same thread.
#[derive(Clone)]
pub struct Writer {
    tx: SyncSender<Message>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").finish_non_exhaustive()
    }
}

impl Writer {
    fn spawn(conn: Connection) -> Result<Writer, StoreError> {
        let (tx, rx) = mpsc::sync_channel(CHANNEL_CAPACITY);
        let shared = Arc::new(Shared::default());
        let thread_shared = Arc::clone(&shared);
        let handle = std::thread::Builder::new()
            .name("orch-store".into())
            .spawn(move || write_loop(conn, rx, &thread_shared))
            .map_err(StoreError::Thread)?;
        *shared.thread.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle);
        Ok(Writer { tx, shared })
    }

    /// Queue a record, waiting while the channel is full (back-pressure:
    /// the engine's tasks wait for the writer). Fails only when the writer
    /// has stopped.
    pub fn send(&self, record: Record) -> Result<(), StoreError> {
        self.tx
            .send(Message::Record(record))
            .map_err(|_| StoreError::Closed)
    }

    /// Wait until everything sent before (by any handle) is committed;
    /// then the first write error so far, if any. Blocks the calling
    /// thread.
    pub fn flush(&self) -> Result<(), StoreError> {
        let (tx, rx) = mpsc::channel();
        self.tx
            .send(Message::Flush(tx))
            .map_err(|_| StoreError::Closed)?;
        rx.recv().map_err(|_| StoreError::Closed)?;
        self.shared.status()
    }

    /// Counters, for benches and tests.
    pub fn stats(&self) -> WriterStats {
        WriterStats {
            batches: self.shared.batches.load(Ordering::Relaxed),
            records: self.shared.records.load(Ordering::Relaxed),
            errors: self.shared.errors.load(Ordering::Relaxed),
        }
    }

    /// Commit everything queued, stop the thread (for every clone: later
    /// sends fail with [`StoreError::Closed`]) and wait for it; the first
    /// write error, if any. Blocks the calling thread.
    #[cfg(test)]
    pub(crate) fn close(self) -> Result<(), StoreError> {
        self.shutdown()
    }

    fn shutdown(&self) -> Result<(), StoreError> {
        // Fails only if the thread is already gone.
        let _ = self.tx.send(Message::Close);
        let handle = self
            .shared
            .thread
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(handle) = handle
            && handle.join().is_err()
        {
            self.shared
                .record_error("the writer thread panicked".into(), 1);
        }
        self.shared.status()
    }
}

/// The thread's body: batch, commit, answer flushes, until closed or every
/// handle is gone.
fn write_loop(mut conn: Connection, rx: Receiver<Message>, shared: &Shared) {
    let mut batch: Vec<Record> = Vec::with_capacity(BATCH);
    let mut ids = AttemptIds::default();
    let mut flushes: Vec<mpsc::Sender<()>> = Vec::new();
    loop {
        let mut closing = match rx.recv() {
            Ok(m) => sort(m, &mut batch, &mut flushes),
            Err(_) => break,
        };
        while batch.len() < BATCH && !closing {
            match rx.try_recv() {
                Ok(m) => closing |= sort(m, &mut batch, &mut flushes),
                Err(_) => break,
            }
        }
        if closing {
            // Whatever was queued before the close is still written.
            while let Ok(m) = rx.try_recv() {
                sort(m, &mut batch, &mut flushes);
            }
        }
        if !batch.is_empty() {
            commit(&mut conn, &batch, &mut ids, shared);
            batch.clear();
        }
        for reply in flushes.drain(..) {
            let _ = reply.send(());
        }
        if closing {
            break;
        }
    }
}

/// Put a message where it belongs; whether it is the order to stop.
fn sort(m: Message, batch: &mut Vec<Record>, flushes: &mut Vec<mpsc::Sender<()>>) -> bool {
    match m {
        Message::Record(r) => batch.push(r),
        Message::Flush(reply) => flushes.push(reply),
        Message::Close => return true,
    }
    false
}

/// Why one record was not written.
enum Failure {
    Sql(rusqlite::Error),
    /// Written rows would be wrong (not an SQL error).
    Refused(String),
}

impl From<rusqlite::Error> for Failure {
    fn from(e: rusqlite::Error) -> Self {
        Failure::Sql(e)
    }
}

/// Records that could not be written within a committed batch.
#[derive(Default)]
struct Skipped {
    first: Option<String>,
    count: u64,
}

fn commit(conn: &mut Connection, batch: &[Record], ids: &mut AttemptIds, shared: &Shared) {
    let mut last = None;
    for _ in 0..COMMIT_TRIES {
        match write_batch(conn, batch, ids) {
            Ok(skipped) => {
                shared.batches.fetch_add(1, Ordering::Relaxed);
                shared
                    .records
                    .fetch_add(batch.len() as u64, Ordering::Relaxed);
                if let Some(m) = skipped.first {
                    shared.record_error(m, skipped.count);
                }
                return;
            }
            Err(e) => {
                // Ids looked up in the undone transaction may be of rows
                // it made.
                ids.forget();
                let retry = matches!(
                    e.sqlite_error_code(),
                    Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
                );
                last = Some(e);
                if !retry {
                    break;
                }
            }
        }
    }
    if let Some(e) = last {
        shared.record_error(
            format!("{} records were not saved: {e}", batch.len()),
            batch.len() as u64,
        );
    }
}

/// One transaction for the batch. A record that fails is skipped (SQLite
/// undoes just that statement); an error that ends the transaction itself
/// fails the whole batch.
fn write_batch(
    conn: &mut Connection,
    batch: &[Record],
    ids: &mut AttemptIds,
) -> rusqlite::Result<Skipped> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let mut skipped = Skipped::default();
    let mut skip = |record: &Record, f: Failure| {
        skipped.count += 1;
        if skipped.first.is_none() {
            let why = match f {
                Failure::Sql(e) => e.to_string(),
                Failure::Refused(m) => m,
            };
            skipped.first = Some(format!("{}: {why}", describe(record)));
        }
    };
    let mut spans = EventSpans::default();
    let mut events = EventRows::new(&tx)?;
    for record in batch {
        let result = match record {
            Record::Event { key, .. } => match ids.id(&tx, key) {
                Ok(attempt_id) => match EventRow::of(record, attempt_id) {
                    Some(row) => events.push(&tx, row, &mut spans, &mut skip),
                    None => Ok(()),
                },
                Err(f) => Err(f),
            },
            _ => events
                .flush(&tx, &mut spans, &mut skip)
                .and_then(|()| apply(&tx, ids, record)),
        };
        match result {
            Ok(()) => {}
            Err(Failure::Sql(e)) if tx.is_autocommit() => return Err(e),
            Err(f) => skip(record, f),
        }
    }
    // `flush` skips (and counts) what fails on its own; an error back from
    // it means the transaction ended.
    if let Err(f) = events.flush(&tx, &mut spans, &mut skip) {
        return Err(match f {
            Failure::Sql(e) => e,
            Failure::Refused(m) => rusqlite::Error::InvalidParameterName(m),
        });
    }
    drop(events);
    spans.save(&tx)?;
    tx.commit()?;
    Ok(skipped)
}

/// How many events one statement inserts: one statement per event cost
/// as much in SQLite's per-statement work (cursors opened and closed, the
/// statement reset) as the insert itself.
const EVENTS_PER_STATEMENT: usize = 32;

/// One event's columns, taken from its record once.
struct EventRow<'r> {
    /// Named when it is skipped.
    record: &'r Record,
    attempt_id: i64,
    run_id: &'r str,
    seq: u64,
    ts_ms: u64,
    kind: &'r str,
    data_json: &'r str,
    raw: &'r str,
}

impl<'r> EventRow<'r> {
    fn of(record: &'r Record, attempt_id: i64) -> Option<Self> {
        let Record::Event {
            key,
            seq,
            ts_ms,
            kind,
            data_json,
            raw,
        } = record
        else {
            return None;
        };
        Some(EventRow {
            record,
            attempt_id,
            run_id: &key.run_id,
            seq: *seq,
            ts_ms: *ts_ms,
            kind,
            data_json,
            raw,
        })
    }
}

/// A batch's events on their way into `events`, `EVENTS_PER_STATEMENT`
/// at a time.
struct EventRows<'r> {
    pending: Vec<EventRow<'r>>,
    /// The rowid the next event gets: SQLite gives a new row one more
    /// than the largest rowid, so a statement's rows take consecutive
    /// ones. `None` when the largest is too near the end of the range
    /// (SQLite would then pick free rowids at random): events then go in
    /// one at a time, each telling its own rowid.
    next_id: Option<i64>,
}

impl<'r> EventRows<'r> {
    fn new(tx: &Connection) -> rusqlite::Result<Self> {
        let max: i64 = tx
            .prepare_cached("SELECT coalesce(max(rowid), 0) FROM events")?
            .query_row([], |r| r.get(0))?;
        Ok(EventRows {
            pending: Vec::with_capacity(EVENTS_PER_STATEMENT),
            next_id: (max < i64::MAX / 2).then(|| max + 1),
        })
    }

    fn push(
        &mut self,
        tx: &Connection,
        row: EventRow<'r>,
        spans: &mut EventSpans<'r>,
        skip: &mut impl FnMut(&Record, Failure),
    ) -> Result<(), Failure> {
        self.pending.push(row);
        if self.pending.len() == EVENTS_PER_STATEMENT {
            self.flush(tx, spans, skip)?;
        }
        Ok(())
    }

    /// Insert what is pending (the list keeps its room for the next).
    fn flush(
        &mut self,
        tx: &Connection,
        spans: &mut EventSpans<'r>,
        skip: &mut impl FnMut(&Record, Failure),
    ) -> Result<(), Failure> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let mut pending = std::mem::take(&mut self.pending);
        let done = self.insert(tx, &pending, spans, skip);
        pending.clear();
        self.pending = pending;
        done
    }

    /// A full statement's worth goes in as one statement; fewer (or a full
    /// one SQLite refused) one by one, each failure skipped on its own. An
    /// error back means the transaction ended.
    fn insert(
        &mut self,
        tx: &Connection,
        rows: &[EventRow<'r>],
        spans: &mut EventSpans<'r>,
        skip: &mut impl FnMut(&Record, Failure),
    ) -> Result<(), Failure> {
        if rows.len() == EVENTS_PER_STATEMENT
            && let Some(first) = self.next_id
        {
            match insert_events(tx, rows) {
                Ok(()) => {
                    for (i, row) in rows.iter().enumerate() {
                        spans.add(row.run_id, row.attempt_id, first + i as i64);
                    }
                    self.next_id = Some(first + rows.len() as i64);
                    return Ok(());
                }
                Err(e) if tx.is_autocommit() => return Err(Failure::Sql(e)),
                Err(_) => {}
            }
        }
        let mut st = match tx.prepare_cached(INSERT_EVENT) {
            Ok(st) => st,
            Err(e) if tx.is_autocommit() => return Err(Failure::Sql(e)),
            Err(e) => {
                let why = e.to_string();
                for row in rows {
                    skip(row.record, Failure::Refused(why.clone()));
                }
                return Ok(());
            }
        };
        for r in rows {
            match st.insert(params![
                r.attempt_id,
                r.seq,
                r.ts_ms,
                r.kind,
                r.data_json,
                r.raw
            ]) {
                Ok(id) => {
                    spans.add(r.run_id, r.attempt_id, id);
                    self.next_id = self.next_id.map(|_| id + 1);
                }
                Err(e) if tx.is_autocommit() => return Err(Failure::Sql(e)),
                Err(e) => skip(r.record, Failure::Sql(e)),
            }
        }
        Ok(())
    }
}

/// One statement for `EVENTS_PER_STATEMENT` events.
fn insert_events(tx: &Connection, rows: &[EventRow<'_>]) -> rusqlite::Result<()> {
    static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        let mut sql = String::from(
            "INSERT INTO events (attempt_id, seq, ts_ms, kind, data_json, raw) VALUES ",
        );
        for i in 0..EVENTS_PER_STATEMENT {
            if i > 0 {
                sql.push(',');
            }
            sql.push_str("(?,?,?,?,?,?)");
        }
        sql
    });
    let mut st = tx.prepare_cached(&SQL)?;
    for (i, r) in rows.iter().enumerate() {
        let n = 6 * i + 1;
        st.raw_bind_parameter(n, r.attempt_id)?;
        st.raw_bind_parameter(n + 1, r.seq)?;
        st.raw_bind_parameter(n + 2, r.ts_ms)?;
        st.raw_bind_parameter(n + 3, r.kind)?;
        st.raw_bind_parameter(n + 4, r.data_json)?;
        st.raw_bind_parameter(n + 5, r.raw)?;
    }
    st.raw_execute()?;
    Ok(())
}

const INSERT_EVENT: &str = "INSERT INTO events (attempt_id, seq, ts_ms, kind, data_json, raw)
                            VALUES (?1, ?2, ?3, ?4, ?5, ?6)";

/// How many attempts' ids the writer keeps at hand: more than run at once
/// in any pipeline it is built for; one past it costs a lookup.
const KNOWN_ATTEMPTS: usize = 256;

/// The database ids of the attempts whose events are arriving. Events
/// share their attempt's key (`Arc`), so the usual lookup is a pointer
/// compare with the last one used; the entry holds its `Arc`, so the
/// address cannot be taken by another key while it is here.
#[derive(Default)]
struct AttemptIds {
    known: Vec<(Arc<AttemptKey>, i64)>,
    last: usize,
}

impl AttemptIds {
    fn id(&mut self, tx: &Connection, key: &Arc<AttemptKey>) -> Result<i64, Failure> {
        if let Some((k, id)) = self.known.get(self.last)
            && Arc::ptr_eq(k, key)
        {
            return Ok(*id);
        }
        if let Some(i) = self.known.iter().position(|(k, _)| Arc::ptr_eq(k, key)) {
            self.last = i;
            return Ok(self.known[i].1);
        }
        let id: Option<i64> = tx
            .prepare_cached(
                "SELECT id FROM attempts
                 WHERE run_id = ?1 AND phase = ?2 AND agent = ?3 AND attempt = ?4",
            )?
            .query_row(
                params![key.run_id, key.phase, key.agent, key.attempt],
                |r| r.get(0),
            )
            .optional()?;
        let id = id.ok_or_else(|| Failure::Refused("no such attempt".into()))?;
        if self.known.len() >= KNOWN_ATTEMPTS {
            self.known.remove(0);
        }
        self.known.push((Arc::clone(key), id));
        self.last = self.known.len() - 1;
        Ok(id)
    }

    /// An attempt that ended sends no more events.
    fn ended(&mut self, run_id: &str, phase: &str, agent: &str, attempt: u32) {
        self.known.retain(|(k, _)| {
            !(k.attempt == attempt && k.agent == agent && k.phase == phase && k.run_id == run_id)
        });
        self.last = 0;
    }

    fn forget(&mut self) {
        self.known.clear();
        self.last = 0;
    }
}

/// What a record is about, for error messages.
fn describe(record: &Record) -> String {
    match record {
        Record::RunStarted { run_id, .. } => format!("start of run `{run_id}`"),
        Record::RunFinished { run_id, .. } => format!("end of run `{run_id}`"),
        Record::PhaseStarted { run_id, phase, .. } => {
            format!("start of phase `{phase}` in run `{run_id}`")
        }
        Record::PhaseFinished { run_id, phase, .. } => {
            format!("end of phase `{phase}` in run `{run_id}`")
        }
        Record::AttemptStarted {
            run_id,
            phase,
            agent,
            attempt,
            ..
        } => format!("start of attempt {attempt} of `{phase}/{agent}` in run `{run_id}`"),
        Record::AttemptFinished {
            run_id,
            phase,
            agent,
            attempt,
            ..
        } => format!("end of attempt {attempt} of `{phase}/{agent}` in run `{run_id}`"),
        Record::Event { key, seq, .. } => format!(
            "event {seq} of attempt {} of `{}/{}` in run `{}`",
            key.attempt, key.phase, key.agent, key.run_id
        ),
        Record::Artifact {
            run_id,
            phase,
            path,
            ..
        } => format!("artifact `{path}` of phase `{phase}` in run `{run_id}`"),
    }
}

/// Rows that must exist, for an update that found none.
fn require_row(changed: usize, what: &str) -> Result<(), Failure> {
    if changed == 0 {
        Err(Failure::Refused(format!("no such {what}")))
    } else {
        Ok(())
    }
}

/// Write one record other than an event (those go through [`EventRows`]).
fn apply(tx: &Connection, ids: &mut AttemptIds, record: &Record) -> Result<(), Failure> {
    match record {
        // Events go through `EventRows`.
        Record::Event { .. } => {}
        Record::RunStarted {
            run_id,
            pipeline_name,
            pipeline_path,
            digest,
            digests_json,
            selection,
            pid,
            started_ms,
        } => {
            refuse_if_another_live_run(tx, run_id, *pid)?;
            tx.prepare_cached(
                "INSERT INTO runs (run_id, pipeline_name, pipeline_path, digest, digests_json,
                                   selection, pid, status, started_ms, ended_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'running', ?8, NULL)
                 ON CONFLICT (run_id) DO UPDATE SET
                     pipeline_name = excluded.pipeline_name,
                     pipeline_path = excluded.pipeline_path,
                     digest = excluded.digest,
                     digests_json = excluded.digests_json,
                     selection = excluded.selection,
                     pid = excluded.pid,
                     status = 'running',
                     ended_ms = NULL",
            )?
            .execute(params![
                run_id,
                pipeline_name,
                pipeline_path,
                digest,
                digests_json,
                selection,
                pid,
                started_ms
            ])?;
        }
        Record::RunFinished {
            run_id,
            status,
            ended_ms,
        } => {
            let n = tx
                .prepare_cached("UPDATE runs SET status = ?2, ended_ms = ?3 WHERE run_id = ?1")?
                .execute(params![run_id, status.as_str(), ended_ms])?;
            require_row(n, "run")?;
        }
        Record::PhaseStarted {
            run_id,
            phase,
            started_ms,
        } => {
            tx.prepare_cached(
                "INSERT INTO phases (run_id, phase, status, attempts, started_ms, ended_ms)
                 VALUES (?1, ?2, 'running', 0, ?3, NULL)
                 ON CONFLICT (run_id, phase) DO UPDATE SET
                     status = 'running',
                     started_ms = excluded.started_ms,
                     ended_ms = NULL",
            )?
            .execute(params![run_id, phase, started_ms])?;
        }
        Record::PhaseFinished {
            run_id,
            phase,
            outcome,
            required,
            reason,
            attempts,
            started_ms,
            ended_ms,
        } => {
            // A phase can end without starting (skipped after a failure).
            tx.prepare_cached(
                "INSERT INTO phases (run_id, phase, status, attempts, started_ms, ended_ms,
                                     required, reason)
                 VALUES (?1, ?2, ?3, ?4, ?8, ?5, ?6, ?7)
                 ON CONFLICT (run_id, phase) DO UPDATE SET
                     status = excluded.status,
                     attempts = excluded.attempts,
                     ended_ms = excluded.ended_ms,
                     required = excluded.required,
                     reason = excluded.reason",
            )?
            .execute(params![
                run_id,
                phase,
                outcome.as_str(),
                attempts,
                ended_ms,
                required,
                reason,
                started_ms
            ])?;
            // As `RunDetail::apply` folds it: an attempt this run of the
            // phase left open ended with it.
            let (status, why) = super::detail::left_open(*outcome, reason.as_deref());
            tx.prepare_cached(
                "UPDATE attempts SET outcome = ?3, reason = ?4, ended_ms = ?5
                 WHERE run_id = ?1 AND phase = ?2 AND outcome = 'running'
                   AND started_ms >= (SELECT started_ms FROM phases
                                      WHERE run_id = ?1 AND phase = ?2)",
            )?
            .execute(params![run_id, phase, status.as_str(), why, ended_ms])?;
        }
        Record::AttemptStarted {
            run_id,
            phase,
            agent,
            attempt,
            argv_json,
            env_json,
            prompt_json,
            started_ms,
        } => {
            // Not an upsert: an attempt number is never reused (its events
            // would collide); see `Reader::attempt_counts` for resume.
            tx.prepare_cached(
                "INSERT INTO attempts (run_id, phase, agent, attempt, argv_json, env_json,
                                       outcome, started_ms, prompt_json)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'running', ?7, ?8)",
            )?
            .execute(params![
                run_id,
                phase,
                agent,
                attempt,
                argv_json,
                env_json,
                started_ms,
                prompt_json
            ])?;
        }
        Record::AttemptFinished {
            run_id,
            phase,
            agent,
            attempt,
            outcome,
            exit_code,
            reason,
            session_id,
            turns,
            tokens_in,
            tokens_out,
            cost_usd,
            ended_ms,
            ..
        } => {
            ids.ended(run_id, phase, agent, *attempt);
            // An attempt can end without a recorded start (it could not be
            // spawned).
            tx.prepare_cached(
                "INSERT INTO attempts (run_id, phase, agent, attempt, outcome, exit_code, reason,
                                       session_id, turns, tokens_in, tokens_out, cost_usd,
                                       ended_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
                 ON CONFLICT (run_id, phase, agent, attempt) DO UPDATE SET
                     outcome = excluded.outcome,
                     exit_code = excluded.exit_code,
                     reason = excluded.reason,
                     session_id = excluded.session_id,
                     turns = excluded.turns,
                     tokens_in = excluded.tokens_in,
                     tokens_out = excluded.tokens_out,
                     cost_usd = excluded.cost_usd,
                     ended_ms = excluded.ended_ms",
            )?
            .execute(params![
                run_id,
                phase,
                agent,
                attempt,
                outcome.as_str(),
                exit_code,
                reason,
                session_id,
                turns,
                tokens_in,
                tokens_out,
                cost_usd,
                ended_ms
            ])?;
        }
        Record::Artifact {
            run_id,
            phase,
            path,
            sha256,
        } => {
            tx.prepare_cached(
                "INSERT INTO artifacts (run_id, phase, path, sha256) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (run_id, phase, path) DO UPDATE SET sha256 = excluded.sha256",
            )?
            .execute(params![run_id, phase, path, sha256])?;
        }
    }
    Ok(())
}

/// One live orch per state directory: a run does not start while another
/// orch process that is still alive has a run `running` here. Checked in
/// the writer's transaction, which holds the write lock, so two orch
/// processes cannot both pass it.
fn refuse_if_another_live_run(tx: &Connection, run_id: &str, pid: u32) -> Result<(), Failure> {
    match super::query::live_runs_of_others(tx, Some(run_id), pid)?.first() {
        Some((other, other_pid)) => Err(Failure::Refused(format!(
            "run `{other}` is in progress in this state directory (orch pid {other_pid})"
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::super::spans::{ATTEMPT_SPAN_GAP, EXTEND_ATTEMPT_SPAN, EXTEND_SPAN};
    use super::*;
    use crate::store::fixture::*;
    use crate::store::status::{Outcome, RunStatus, Status};

    /// Hold the write lock on `path` from another connection for `hold`.
    fn lock_for(path: &Path, hold: Duration) -> std::thread::JoinHandle<()> {
        let conn = Connection::open(path).unwrap();
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        std::thread::spawn(move || {
            std::thread::sleep(hold);
            conn.execute_batch("COMMIT").unwrap();
        })
    }

    #[test]
    fn open_creates_the_directory_and_database() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("a/b/.orch");
        let store = Store::open(&state).unwrap();
        assert!(state.join("state.db").is_file());
        assert_eq!(store.db_path(), state.join("state.db"));
        store.close().unwrap();
        // And again, on the existing database.
        Store::open(&state).unwrap().close().unwrap();
    }

    /// A trigger planted by another writer of the database (one that
    /// deletes every event as it is recorded) does not survive the next
    /// orch that opens it.
    #[test]
    fn a_planted_trigger_is_removed_when_orch_opens_the_database() {
        let dir = tempfile::tempdir().unwrap();
        Store::open(dir.path()).unwrap().close().unwrap();
        let planted = Connection::open(dir.path().join(DB_FILE)).unwrap();
        planted
            .execute_batch(
                "CREATE TRIGGER wipe AFTER INSERT ON events BEGIN DELETE FROM events; END;
                 CREATE VIEW v AS SELECT 1;",
            )
            .unwrap();
        drop(planted);
        let store = Store::open(dir.path()).unwrap();
        let w = store.writer();
        send_all(
            &w,
            whole_run("r1", 1, 1_000, &[("build", Outcome::Succeeded)], 10, None),
        );
        w.flush().unwrap();
        assert_eq!(store.event_count("r1").unwrap(), 10);
        store.close().unwrap();
    }

    #[test]
    fn flush_makes_everything_before_it_visible() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let w = store.writer();
        send_all(
            &w,
            whole_run(
                "r1",
                1,
                1_000,
                &[("build", Outcome::Succeeded)],
                10_000,
                None,
            ),
        );
        w.flush().unwrap();
        assert_eq!(store.event_count("r1").unwrap(), 10_000);
        assert_eq!(store.run_status("r1").unwrap(), Some(RunStatus::Running));
        let stats = w.stats();
        assert_eq!(stats.records, 10_005);
        assert_eq!(stats.errors, 0);
        store.close().unwrap();
    }

    #[test]
    fn queued_records_are_committed_in_few_transactions() {
        let a = attempt("r1", "p", "a", 1);
        let (_dir, store) = store_with([
            run_started("r1", 1, 0),
            phase_started("r1", "p", 0),
            a.start(0),
        ]);
        let w = store.writer();
        let before = w.stats().batches;
        // The writer waits for the lock while 5,000 events queue up.
        let holder = lock_for(store.db_path(), Duration::from_millis(300));
        for seq in 0..5_000 {
            w.send(a.event(seq, seq)).unwrap();
        }
        w.flush().unwrap();
        holder.join().unwrap();
        let batches = w.stats().batches - before;
        // The first batch may be the one event that woke the thread; the
        // rest were queued and go at most BATCH at a time.
        assert!(
            batches <= 1 + 5_000usize.div_ceil(BATCH) as u64,
            "{batches} transactions for 5,000 queued events"
        );
        assert_eq!(store.event_count("r1").unwrap(), 5_000);
    }

    #[test]
    fn close_commits_what_is_queued_and_stops_every_handle() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let w = store.writer();
        let w2 = w.clone();
        send_all(
            &w,
            whole_run("r1", 1, 0, &[("p", Outcome::Succeeded)], 1_000, None),
        );
        store.close().unwrap();
        assert!(matches!(
            w2.send(run_finished("r1", RunStatus::Failed, 1)),
            Err(StoreError::Closed)
        ));
        assert!(matches!(w.flush(), Err(StoreError::Closed)));
        let reader = Reader::open(dir.path()).unwrap().unwrap();
        assert_eq!(reader.event_count("r1").unwrap(), 1_000);
    }

    #[test]
    fn writer_close_joins_the_thread() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let w = store.writer();
        send_all(
            &w,
            whole_run("r1", 1, 0, &[("p", Outcome::Failed)], 10, None),
        );
        w.close().unwrap();
        assert_eq!(store.event_count("r1").unwrap(), 10);
        // Closing the store after is harmless.
        store.close().unwrap();
    }

    #[test]
    fn dropping_the_store_commits() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = Store::open(dir.path()).unwrap();
            send_all(
                &store.writer(),
                whole_run("r1", 1, 0, &[("p", Outcome::Succeeded)], 100, None),
            );
        }
        let reader = Reader::open(dir.path()).unwrap().unwrap();
        assert_eq!(reader.event_count("r1").unwrap(), 100);
    }

    /// Events of more attempts than the writer keeps ids for, in turns:
    /// each is stored under its own attempt.
    #[test]
    fn events_of_many_attempts_at_once_stay_with_their_attempt() {
        let (_dir, store) = store_with([run_started("r1", 1, 0), phase_started("r1", "p", 0)]);
        let w = store.writer();
        let n = KNOWN_ATTEMPTS + 40;
        let attempts: Vec<_> = (0..n)
            .map(|i| attempt("r1", "p", &format!("a{i}"), 1))
            .collect();
        for a in &attempts {
            w.send(a.start(0)).unwrap();
        }
        for round in 0..3u64 {
            for (i, a) in attempts.iter().enumerate() {
                w.send(a.event_of(round, 0, "raw", "null", &format!("a{i}.{round}")))
                    .unwrap();
            }
        }
        w.flush().unwrap();
        let page = store.events("r1", None, 0, 10_000).unwrap();
        assert_eq!(page.events.len(), 3 * n);
        for e in page.events {
            assert_eq!(e.raw, format!("{}.{}", e.agent, e.seq));
        }
    }

    #[test]
    fn a_bad_record_is_reported_and_the_rest_of_its_batch_kept() {
        let (_dir, store) = store_with([run_started("r1", 1, 0)]);
        let w = store.writer();
        w.send(phase_started("r1", "before", 1)).unwrap();
        // No such attempt: it has no id to be stored under.
        w.send(attempt("r1", "nowhere", "ghost", 1).event(0, 2))
            .unwrap();
        w.send(phase_started("r1", "after", 3)).unwrap();
        // An end for a run that was never started.
        w.send(run_finished("r2", RunStatus::Failed, 4)).unwrap();
        let err = w.flush().unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains("event 0 of attempt 1 of `nowhere/ghost` in run `r1`"),
            "{message}"
        );
        assert!(message.contains("no such attempt"), "{message}");
        assert!(message.contains("and 1 more write errors"), "{message}");
        assert_eq!(w.stats().errors, 2);
        let detail = store.run("r1").unwrap().unwrap();
        let names: Vec<&str> = detail.phases.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["before", "after"]);
        // The error sticks, and close reports it too.
        assert!(w.flush().is_err());
        assert!(matches!(store.close(), Err(StoreError::Write { .. })));
    }

    #[test]
    fn a_failed_commit_keeps_what_was_committed_before() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(DB_FILE);
        let mut conn = schema::open(&path, true).unwrap();
        conn.busy_timeout(Duration::from_millis(20)).unwrap();
        let shared = Shared::default();
        commit(
            &mut conn,
            &whole_run("r1", 1, 0, &[("p", Outcome::Succeeded)], 5, None),
            &mut AttemptIds::default(),
            &shared,
        );
        shared.status().unwrap();
        // Another connection holds the write lock past every try.
        let holder = lock_for(&path, Duration::from_millis(500));
        commit(
            &mut conn,
            &[phase_started("r1", "q", 1)],
            &mut AttemptIds::default(),
            &shared,
        );
        let err = shared.status().unwrap_err().to_string();
        assert!(err.contains("1 records were not saved"), "{err}");
        assert!(err.contains("locked"), "{err}");
        holder.join().unwrap();
        // Earlier batches are intact, and the next one is written.
        commit(
            &mut conn,
            &[phase_started("r1", "r", 2)],
            &mut AttemptIds::default(),
            &shared,
        );
        assert_eq!(shared.batches.load(Ordering::Relaxed), 2);
        let reader = Reader::new(schema::open(&path, false).unwrap(), path);
        assert_eq!(reader.event_count("r1").unwrap(), 5);
        let d = reader.run("r1").unwrap().unwrap();
        let names: Vec<&str> = d.phases.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["p", "r"]);
    }

    #[test]
    fn resuming_a_run_updates_its_rows() {
        let (_dir, store) = store_with(whole_run(
            "r1",
            1,
            1_000,
            &[("a", Outcome::Succeeded), ("b", Outcome::Failed)],
            2,
            Some(RunStatus::Failed),
        ));
        let w = store.writer();
        // The resume: same run id, a new orch process, phase b again with a
        // fresh attempt number.
        w.send(run_started("r1", 2, 9_000)).unwrap();
        w.send(phase_started("r1", "b", 9_001)).unwrap();
        w.flush().unwrap();
        let d = store.run("r1").unwrap().unwrap();
        assert_eq!((d.run.status.as_str(), d.run.pid), ("running", 2));
        assert_eq!(d.run.started_ms, 1_000, "a run keeps its first start");
        assert_eq!(d.run.ended_ms, None);
        assert_eq!(d.phases[1].status, Status::Running);
        assert_eq!(d.phases[1].ended_ms, None);
        let next = store.attempt_counts("r1").unwrap()[&("b".to_string(), "a".to_string())] + 1;
        assert_eq!(next, 2);
        let again = attempt("r1", "b", "a", next);
        send_all(
            &w,
            vec![
                again.start(9_002),
                again.event(0, 9_003),
                again.finish(Outcome::Succeeded, 9_004),
                phase_finished("r1", "b", Outcome::Succeeded, 2, 9_004),
                run_finished("r1", RunStatus::Succeeded, 9_005),
            ],
        );
        w.flush().unwrap();
        let d = store.run("r1").unwrap().unwrap();
        assert_eq!(d.run.status, RunStatus::Succeeded);
        assert_eq!(d.phases[1].status, Status::Succeeded);
        let attempts: Vec<(u32, &str, u64)> = d.phases[1]
            .agents
            .iter()
            .map(|a| (a.attempt, a.status.as_str(), a.events))
            .collect();
        assert_eq!(attempts, [(1, "failed", 2), (2, "succeeded", 1)]);
        assert_eq!(store.event_count("r1").unwrap(), 2 * 2 + 1, "nothing lost");
        // Reusing an attempt number is refused, not merged.
        w.send(attempt("r1", "b", "a", 1).start(9_010)).unwrap();
        assert!(w.flush().unwrap_err().to_string().contains("UNIQUE"));
    }

    #[test]
    fn event_spans_cover_each_run_in_as_few_rows_as_it_allows() {
        let (_dir, store) =
            store_with(whole_run("r1", 1, 0, &[("p", Outcome::Succeeded)], 3, None));
        let w = store.writer();
        let db = store.db_path().to_path_buf();
        let spans = || -> Vec<(String, i64, i64)> {
            let conn = Connection::open(&db).unwrap();
            let mut st = conn
                .prepare("SELECT run_id, first_id, last_id FROM event_spans ORDER BY first_id")
                .unwrap();
            st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
        };
        let (a, b) = (attempt("r1", "p", "a", 1), attempt("r2", "p", "a", 1));
        // One event a transaction, as from a slow agent: still one span.
        for seq in 3..6 {
            w.send(a.event(seq, seq)).unwrap();
            w.flush().unwrap();
        }
        assert_eq!(spans(), [("r1".to_string(), 1, 6)]);
        // Another run's events in between; one that fails takes no id.
        send_all(
            &w,
            whole_run("r2", 1, 0, &[("p", Outcome::Succeeded)], 0, None),
        );
        send_all(
            &w,
            vec![
                b.event(0, 0),
                attempt("r2", "nowhere", "a", 1).event(0, 0),
                b.event(1, 0),
                a.event(6, 6),
            ],
        );
        w.flush().unwrap_err();
        w.send(a.event(7, 7)).unwrap();
        w.send(b.event(2, 0)).unwrap();
        store.close().unwrap_err();
        assert_eq!(
            spans(),
            [
                ("r1".to_string(), 1, 6),
                ("r2".to_string(), 7, 8),
                ("r1".to_string(), 9, 10),
                ("r2".to_string(), 11, 11),
            ]
        );
    }

    /// Attempts `a` and `b` of phase `p` of run `r1` started, then `n` raw
    /// events of each (`a.0`, `b.0`, `a.1`, ...), committed every `every`
    /// pairs and at the end.
    fn two_attempts_interleaved(w: &Writer, n: u64, every: u64) -> (Attempt, Attempt) {
        let (a, b) = (attempt("r1", "p", "a", 1), attempt("r1", "p", "b", 1));
        w.send(a.start(0)).unwrap();
        w.send(b.start(0)).unwrap();
        for seq in 0..n {
            w.send(a.event_of(seq, 0, "raw", "null", &format!("a.{seq}")))
                .unwrap();
            w.send(b.event_of(seq, 0, "raw", "null", &format!("b.{seq}")))
                .unwrap();
            if (seq + 1) % every == 0 {
                w.flush().unwrap();
            }
        }
        w.flush().unwrap();
        (a, b)
    }

    /// Each attempt's events are found through `attempt_spans` (step 8):
    /// attempts side by side share one stretch each, a long stretch of
    /// other events starts a new one, and counts and tails stay exact.
    #[test]
    fn attempt_spans_stretch_over_interleaved_events_and_end_at_a_long_gap() {
        let (_dir, store) = store_with([run_started("r1", 1, 0), phase_started("r1", "p", 0)]);
        let w = store.writer();
        // 100 each, one after the other's (more than one statement's worth,
        // and a last statement that is not full).
        let (a, b) = two_attempts_interleaved(&w, 100, 100);
        // b alone for longer than an attempt's span stretches, in small
        // batches; then a again.
        for seq in 100..(100 + ATTEMPT_SPAN_GAP as u64 + 50) {
            w.send(b.event_of(seq, 0, "raw", "null", &format!("b.{seq}")))
                .unwrap();
            if seq % 300 == 0 {
                w.flush().unwrap();
            }
        }
        w.send(a.event_of(100, 0, "raw", "null", "a.100")).unwrap();
        w.flush().unwrap();
        let conn = Connection::open(store.db_path()).unwrap();
        let spans: Vec<(String, i64, i64)> = conn
            .prepare(
                "SELECT a.agent, s.first_id, s.last_id FROM attempt_spans s
                 JOIN attempts a ON a.id = s.attempt_id ORDER BY s.first_id",
            )
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let b_last = 200 + ATTEMPT_SPAN_GAP + 50;
        assert_eq!(
            spans,
            [
                ("a".to_string(), 1, 199),
                ("b".to_string(), 2, b_last),
                ("a".to_string(), b_last + 1, b_last + 1),
            ]
        );
        let events: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'events'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(events, 0, "events have no key of their own");
        let run = store.run("r1").unwrap().unwrap();
        let agents = &run.phases[0].agents;
        let of = |name: &str| agents.iter().find(|x| x.agent == name).unwrap();
        assert_eq!(of("a").events, 101);
        assert_eq!(of("b").events, 100 + ATTEMPT_SPAN_GAP as u64 + 50);
        assert_eq!(of("a").output.last().map(String::as_str), Some("a.100"));
        assert_eq!(of("a").output.first().map(String::as_str), Some("a.81"));
        let page = store.events("r1", None, 0, 100_000).unwrap();
        assert_eq!(page.events.len(), 201 + ATTEMPT_SPAN_GAP as usize + 50);
        assert_eq!(store.event_count("r1").unwrap(), page.events.len() as u64);
    }

    /// The events tool with a phase, agent or attempt named reads through
    /// those attempts' spans, and answers what the whole run's events,
    /// filtered, hold: the same rows, in the same order, pages included,
    /// also where a span stretches over the other attempt's rows.
    #[test]
    fn events_of_named_attempts_are_the_runs_events_filtered() {
        use crate::store::reports::EventQuery;
        let (dir, store) = store_with([
            run_started("r1", 1, 0),
            phase_started("r1", "p", 0),
            run_started("r2", 1, 0),
            phase_started("r2", "p", 0),
        ]);
        let w = store.writer();
        let (a, b) = two_attempts_interleaved(&w, 300, 7);
        // Another run's attempt of the same names, between them.
        let other = attempt("r2", "p", "a", 1);
        w.send(other.start(0)).unwrap();
        for seq in 0..20 {
            w.send(other.event_of(seq, 0, "raw", "null", "other"))
                .unwrap();
        }
        w.flush().unwrap();
        // b alone for longer than a span stretches: a's next events start
        // a second span of a.
        for seq in 300..(300 + ATTEMPT_SPAN_GAP as u64 + 10) {
            w.send(b.event_of(seq, 0, "raw", "null", "b")).unwrap();
        }
        w.flush().unwrap();
        w.send(a.event_of(300, 0, "tool_call", "{\"n\":1}", "a.300"))
            .unwrap();
        w.flush().unwrap();
        let conn = Connection::open(store.db_path()).unwrap();
        let spans_of_a: i64 = conn
            .query_row(
                "SELECT count(*) FROM attempt_spans s JOIN attempts t ON t.id = s.attempt_id
                 WHERE t.run_id = 'r1' AND t.agent = 'a'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(spans_of_a, 2);
        let reports = crate::store::Reports::open(
            dir.path(),
            crate::store::Reporter {
                run_id: "r1".into(),
                phase: "p".into(),
                agent: "a".into(),
                attempt: 1,
            },
        )
        .unwrap();
        let all = reports
            .events(&EventQuery {
                limit: 10_000,
                ..Default::default()
            })
            .unwrap();
        assert_eq!(all.len(), 611 + ATTEMPT_SPAN_GAP as usize);
        let rows = |q: EventQuery<'_>| -> Vec<(String, u64)> {
            reports
                .events(&q)
                .unwrap()
                .into_iter()
                .map(|e| (e.agent, e.seq))
                .collect()
        };
        let of = |agent: &str| -> Vec<(String, u64)> {
            all.iter()
                .filter(|e| e.agent == agent)
                .map(|e| (e.agent.clone(), e.seq))
                .collect()
        };
        let named = |agent, limit, offset| EventQuery {
            phase: Some("p"),
            agent: Some(agent),
            attempt: Some(1),
            limit,
            offset,
            ..Default::default()
        };
        assert_eq!(rows(named("a", 10_000, 0)), of("a"));
        assert_eq!(rows(named("b", 10_000, 0)), of("b"));
        assert_eq!(rows(named("b", 50, 120)), of("b")[120..170]);
        assert_eq!(
            rows(EventQuery {
                phase: Some("p"),
                limit: 10_000,
                ..Default::default()
            }),
            all.iter()
                .map(|e| (e.agent.clone(), e.seq))
                .collect::<Vec<_>>()
        );
        assert_eq!(
            rows(EventQuery {
                agent: Some("a"),
                kind: Some("tool_call"),
                limit: 10,
                ..Default::default()
            }),
            [("a".to_string(), 300)]
        );
        assert!(rows(named("c", 10, 0)).is_empty());
        // A span planted over a's others: still each row once.
        conn.execute(
            "INSERT INTO attempt_spans (attempt_id, first_id, last_id)
             SELECT id, 2, 1000000 FROM attempts WHERE run_id = 'r1' AND agent = 'a'",
            [],
        )
        .unwrap();
        assert_eq!(rows(named("a", 10_000, 0)), of("a"));
    }

    /// Rows planted in the database (the largest rowid there is, a span
    /// that starts where the next attempt's will) neither lose nor hide an
    /// event: SQLite then hands out rowids anywhere, and every span still
    /// grows upwards (round z8).
    #[test]
    fn planted_rows_neither_lose_nor_hide_events() {
        let (_dir, store) = store_with([run_started("r1", 1, 0), phase_started("r1", "p", 0)]);
        {
            let conn = Connection::open(store.db_path()).unwrap();
            conn.execute_batch(
                "INSERT INTO events (rowid, attempt_id, seq, ts_ms, kind, data_json, raw)
                     VALUES (9223372036854775807, 999999, 0, 0, 'raw', 'null', 'planted');
                 INSERT INTO attempt_spans VALUES (2, 1, 0);",
            )
            .unwrap();
        }
        let w = store.writer();
        two_attempts_interleaved(&w, 300, 100);
        let run = store.run("r1").unwrap().unwrap();
        let counts: Vec<(String, u64)> = run.phases[0]
            .agents
            .iter()
            .map(|x| (x.agent.clone(), x.events))
            .collect();
        assert_eq!(counts, [("a".to_string(), 300), ("b".to_string(), 300)]);
        assert_eq!(store.event_count("r1").unwrap(), 600);
        let mut seen: Vec<String> = store
            .events("r1", None, 0, 100_000)
            .unwrap()
            .events
            .into_iter()
            .map(|e| e.raw)
            .collect();
        seen.sort();
        let mut want: Vec<String> = (0..300)
            .flat_map(|s| [format!("a.{s}"), format!("b.{s}")])
            .collect();
        want.sort();
        assert_eq!(seen, want);
    }

    /// A statement of 32 events that SQLite refuses (here a unique index
    /// planted on the lines, one line twice) goes in one event at a time:
    /// every other event is stored, the refused one is counted, and spans
    /// planted where the next ones start are merged, not failed on.
    #[test]
    fn a_refused_statement_of_events_goes_in_one_by_one() {
        let (_dir, store) = store_with([run_started("r1", 1, 0), phase_started("r1", "p", 0)]);
        let a = attempt("r1", "p", "a", 1);
        let w = store.writer();
        w.send(a.start(0)).unwrap();
        w.flush().unwrap();
        {
            let conn = Connection::open(store.db_path()).unwrap();
            let next: i64 = conn
                .query_row("SELECT coalesce(max(rowid), 0) + 1 FROM events", [], |r| {
                    r.get(0)
                })
                .unwrap();
            conn.execute_batch(&format!(
                "CREATE UNIQUE INDEX planted ON events (raw);
                 INSERT INTO event_spans VALUES ('r1', {next}, {next});
                 INSERT INTO attempt_spans VALUES (1, {next}, {next});"
            ))
            .unwrap();
        }
        for seq in 0..EVENTS_PER_STATEMENT as u64 {
            let raw = format!("a.{}", if seq == 6 { 5 } else { seq });
            w.send(a.event_of(seq, 0, "raw", "null", &raw)).unwrap();
        }
        w.flush().unwrap_err();
        let run = store.run("r1").unwrap().unwrap();
        let shown = &run.phases[0].agents[0];
        assert_eq!(shown.events, EVENTS_PER_STATEMENT as u64 - 1);
        assert_eq!(shown.output.last().map(String::as_str), Some("a.31"));
        assert_eq!(
            store.events("r1", None, 0, 1000).unwrap().events.len(),
            EVENTS_PER_STATEMENT - 1
        );
        assert_eq!(store.writer().stats().errors, 1);
    }

    /// Extending a run's last span is two seeks, however many spans; so is
    /// extending an attempt's.
    #[test]
    fn extending_a_span_seeks_the_last_one() {
        let dir = tempfile::tempdir().unwrap();
        let conn = schema::open(&dir.path().join(DB_FILE), true).unwrap();
        let mut st = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {EXTEND_SPAN}"))
            .unwrap();
        let plan: Vec<String> = st
            .query_map(params!["r1", 3, 9], |r| r.get(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            plan,
            [
                "SEARCH event_spans USING PRIMARY KEY (run_id=? AND first_id=?)",
                "SCALAR SUBQUERY 1",
                "SEARCH event_spans USING PRIMARY KEY (run_id=?)",
            ]
        );
        let mut st = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {EXTEND_ATTEMPT_SPAN}"))
            .unwrap();
        let plan: Vec<String> = st
            .query_map(params![1, 3, 9, ATTEMPT_SPAN_GAP], |r| r.get(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            plan,
            [
                "SEARCH attempt_spans USING PRIMARY KEY (attempt_id=? AND first_id=?)",
                "SCALAR SUBQUERY 1",
                "SEARCH attempt_spans USING PRIMARY KEY (attempt_id=?)",
            ]
        );
    }

    #[test]
    fn skipped_phases_and_unspawned_attempts_need_no_start() {
        let (_dir, store) = store_with([
            run_started("r1", 1, 0),
            phase_finished("r1", "later", Outcome::Skipped, 0, 5),
            phase_started("r1", "p", 1),
            attempt("r1", "p", "missing", 1).finish(Outcome::Failed, 2),
            artifact("r1", "p", "out.txt", "00"),
            artifact("r1", "p", "out.txt", "ff"),
        ]);
        let d = store.run("r1").unwrap().unwrap();
        assert_eq!(d.phases[0].name, "later");
        assert_eq!(d.phases[0].status, Status::Skipped);
        assert_eq!(d.phases[0].started_ms, None);
        let a = &d.phases[1].agents[0];
        assert_eq!((a.agent.as_str(), a.status.as_str()), ("missing", "failed"));
        assert_eq!(a.argv, serde_json::json!([]));
        assert_eq!(d.artifacts.len(), 1);
        assert_eq!(d.artifacts[0].sha256, "ff");
    }

    #[test]
    fn a_second_live_orch_cannot_start_a_run() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let w = store.writer();
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        w.send(run_started("theirs", other.id(), 0)).unwrap();
        w.flush().unwrap();
        w.send(run_started("mine", std::process::id(), 1)).unwrap();
        let err = w.flush().unwrap_err().to_string();
        assert!(
            err.contains(&format!(
                "run `theirs` is in progress in this state directory (orch pid {})",
                other.id()
            )),
            "{err}"
        );
        assert_eq!(store.run_status("mine").unwrap(), None);
        other.kill().unwrap();
        other.wait().unwrap();
        // Once that orch is gone, a run starts (on a fresh store: the error
        // above stays on the first one).
        store.close().unwrap_err();
        let store = Store::open(dir.path()).unwrap();
        let w = store.writer();
        w.send(run_started("mine", std::process::id(), 2)).unwrap();
        w.flush().unwrap();
        assert_eq!(store.run_status("mine").unwrap(), Some(RunStatus::Running));
    }

    /// The throughput figure (issue 21: at least 700,000 events per second
    /// for the whole `orch run`): 200,000 events through one writer. Asserts only that all
    /// are stored; the rate is printed (`cargo bench --bench store` for the
    /// optimized figure).
    #[test]
    fn two_hundred_thousand_events_are_all_stored() {
        const N: u64 = 200_000;
        let (_dir, store) =
            store_with(whole_run("r1", 1, 0, &[("p", Outcome::Succeeded)], 0, None));
        let w = store.writer();
        let a = attempt("r1", "p", "a", 1);
        let t = Instant::now();
        for seq in 0..N {
            w.send(a.event(seq, seq)).unwrap();
        }
        w.flush().unwrap();
        let secs = t.elapsed().as_secs_f64();
        assert_eq!(store.event_count("r1").unwrap(), N);
        let stats = w.stats();
        eprintln!(
            "store: {N} events in {secs:.3}s = {:.0} events/s ({} transactions; unoptimized build)",
            N as f64 / secs,
            stats.batches
        );
    }
}

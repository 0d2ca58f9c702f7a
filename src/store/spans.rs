//! Where events are: the stretches of rowids of `events` that hold each
//! run's (`event_spans`, schema step 2) and each attempt's
//! (`attempt_spans`, step 8), and each attempt's count (`attempts.events`).
//! Kept by the writer as it inserts events and by an import as it adds
//! them; read by the queries.

use rusqlite::{Connection, params};

/// Make the run's (`?1`) last span end at `?3` if it ends right before
/// `?2`.
pub(super) const EXTEND_SPAN: &str = "UPDATE event_spans SET last_id = ?3
                           WHERE run_id = ?1 AND last_id = ?2 - 1
                             AND first_id = (SELECT max(first_id) FROM event_spans
                                             WHERE run_id = ?1)";

/// How many rows of other attempts an attempt's span may stretch over
/// rather than end: attempts running side by side interleave their
/// events, and a span per event would cost what the key on events did.
pub(super) const ATTEMPT_SPAN_GAP: i64 = 1024;

/// Make the attempt's (`?1`) last span end at `?3` if it ends at most
/// `ATTEMPT_SPAN_GAP` rows before `?2`.
pub(super) const EXTEND_ATTEMPT_SPAN: &str = "UPDATE attempt_spans SET last_id = ?3
                                   WHERE attempt_id = ?1 AND last_id >= ?2 - 1 - ?4
                                     AND last_id < ?2 AND first_id <= last_id
                                     AND first_id = (SELECT max(first_id) FROM attempt_spans
                                                     WHERE attempt_id = ?1)";

/// A new span of a run. One that starts where a span already starts (only
/// a planted row could) takes the larger end rather than fail the batch
/// and lose its events.
const INSERT_RUN_SPAN: &str =
    "INSERT INTO event_spans (run_id, first_id, last_id) VALUES (?1, ?2, ?3)
                               ON CONFLICT (run_id, first_id)
                               DO UPDATE SET last_id = max(last_id, excluded.last_id)";

/// A new span of an attempt, as [`INSERT_RUN_SPAN`].
const INSERT_ATTEMPT_SPAN: &str = "INSERT INTO attempt_spans (attempt_id, first_id, last_id)
                                   VALUES (?1, ?2, ?3)
                                   ON CONFLICT (attempt_id, first_id)
                                   DO UPDATE SET last_id = max(last_id, excluded.last_id)";

/// Where a batch's events went, for `event_spans` (schema step 2) and
/// `attempt_spans` (step 8). A batch's events take consecutive rowids
/// (one transaction, holding the write lock; an insert that fails takes
/// none), so consecutive events of one run make one span.
#[derive(Default)]
pub(super) struct EventSpans<'a> {
    /// (run, first rowid, last rowid), in order.
    spans: Vec<(&'a str, i64, i64)>,
    /// (attempt id, first rowid, last rowid), in order of their first.
    attempts: Vec<(i64, i64, i64)>,
    /// Where in `attempts` the last span of the attempt last seen is.
    last: usize,
    /// (attempt id, events added), in order of the first.
    counts: Vec<(i64, i64)>,
}

impl<'a> EventSpans<'a> {
    /// Event `id` (a rowid) of attempt `attempt_id` of run `run_id` went
    /// in. A span only ever grows upwards: SQLite gives a new row one more
    /// than the largest rowid, unless the largest is the last one there is
    /// (planted), and then any free one, lower included.
    pub(super) fn add(&mut self, run_id: &'a str, attempt_id: i64, id: i64) {
        match self.spans.last_mut() {
            Some((run, _, last)) if *run == run_id && id.checked_sub(1) == Some(*last) => {
                *last = id
            }
            _ => self.spans.push((run_id, id, id)),
        }
        match self.counts.last_mut() {
            Some((a, n)) if *a == attempt_id => *n += 1,
            _ => match self.counts.iter_mut().rev().find(|(a, _)| *a == attempt_id) {
                Some((_, n)) => *n += 1,
                None => self.counts.push((attempt_id, 1)),
            },
        }
        let at = match self.attempts.get(self.last) {
            Some((a, _, _)) if *a == attempt_id => Some(self.last),
            _ => self.attempts.iter().rposition(|(a, _, _)| *a == attempt_id),
        };
        match at {
            Some(i)
                if self.attempts[i].2 < id
                    && self.attempts[i].2 >= id.saturating_sub(1 + ATTEMPT_SPAN_GAP) =>
            {
                self.attempts[i].2 = id;
                self.last = i;
            }
            _ => {
                self.attempts.push((attempt_id, id, id));
                self.last = self.attempts.len() - 1;
            }
        }
    }

    /// Record the spans; one that continues its run's last span (no other
    /// event in between) extends it, so a run keeps one span per stretch
    /// of the database it wrote alone, however small its batches. An
    /// attempt's span extends its last one over a short gap as well.
    pub(super) fn save(&self, tx: &Connection) -> rusqlite::Result<()> {
        for (run_id, first, last) in &self.spans {
            let extended = tx
                .prepare_cached(EXTEND_SPAN)?
                .execute(params![run_id, first, last])?;
            if extended == 0 {
                tx.prepare_cached(INSERT_RUN_SPAN)?
                    .execute(params![run_id, first, last])?;
            }
        }
        for (attempt_id, first, last) in &self.attempts {
            let extended = tx.prepare_cached(EXTEND_ATTEMPT_SPAN)?.execute(params![
                attempt_id,
                first,
                last,
                ATTEMPT_SPAN_GAP
            ])?;
            if extended == 0 {
                tx.prepare_cached(INSERT_ATTEMPT_SPAN)?
                    .execute(params![attempt_id, first, last])?;
            }
        }
        for (attempt_id, n) in &self.counts {
            tx.prepare_cached("UPDATE attempts SET events = events + ?2 WHERE id = ?1")?
                .execute(params![attempt_id, n])?;
        }
        Ok(())
    }
}
